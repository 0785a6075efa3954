"""the public API fuzzed. Whatever the options, canvases and texts, the answer is a result or
one clear ValueError/TypeError naming the problem, never another exception. Fast by default; `-m slow` goes deeper."""

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mdlm_hf import SamplerOptions, sample
from mdlm_hf.pipeline import END_AT
from mdlm_hf.sampling.options import OPTION_SPECS, STREAMS_IGNORE
from mdlm_hf.sampling.state import final_state

ANY_VALUE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 300),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.sampled_from(["entropy", "confidence", "random", "left_to_right", "margin", "linear", "cosine", "binomial"]),
)
# mostly valid values, so that the runs themselves are fuzzed too, not only the checks
OPTION_VALUES = {
    "num_steps": st.integers(1, 40),
    "order": st.sampled_from(OPTION_SPECS["order"].accepts.choices),
    "temperature": st.floats(0, 2),
    "top_k": st.one_of(st.none(), st.integers(1, 30)),
    "top_p": st.one_of(st.none(), st.floats(0.05, 1)),
    "min_p": st.one_of(st.none(), st.floats(0.01, 1)),
    "order_temperature": st.floats(0, 2),
    "prior_weight": st.floats(0, 2),
    "remask_ratio": st.floats(0, 0.9),
    "spacing": st.integers(0, 16),
    "schedule": st.sampled_from(OPTION_SPECS["schedule"].accepts.choices),
    "block_length": st.one_of(st.none(), st.integers(1, 80)),
    "threshold": st.one_of(st.none(), st.floats(0.05, 1)),
    "entropy_bound": st.one_of(st.none(), st.floats(0, 8)),
    "reveal_counts": st.sampled_from(OPTION_SPECS["reveal_counts"].accepts.choices),
    "window_context": st.one_of(st.none(), st.integers(0, 80)),
}
CLEAR = (ValueError, TypeError)


def options_strategy():
    rest = {name: values for name, values in OPTION_VALUES.items() if name != "order"}
    valid = st.fixed_dictionaries({"order": OPTION_VALUES["order"]}, optional=rest)  # an order, so most runs run
    # streams order, the default, with only the options it takes (it refuses the rest by name)
    streams = st.fixed_dictionaries(
        {}, optional={name: values for name, values in rest.items() if name not in STREAMS_IGNORE}
    )
    wild = st.dictionaries(st.sampled_from(sorted(OPTION_SPECS) + ["nonsense"]), ANY_VALUE, max_size=3)
    return st.one_of(valid, streams, valid, wild)


def canvas_strategy(model):
    ids = st.integers(-2, model.mask_id + 2)
    return st.one_of(
        st.lists(st.one_of(ids, st.just(model.mask_id)), min_size=1, max_size=150).map(torch.tensor),
        st.lists(st.just(model.mask_id), min_size=1, max_size=150).map(torch.tensor),
        st.just(torch.zeros(0, dtype=torch.long)),
        st.just(torch.full((2, 3, 4), model.mask_id)),
        st.just(torch.full((5,), float(model.mask_id))),
    )


def run_or_refuse(call):
    """The property: a result, or one clear error with a message (one line)."""
    try:
        return call()
    except CLEAR as error:
        message = str(error)
        assert message and "\n" not in message, repr(message)
        return None


def fuzz(tiny_model, examples):
    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(st.data())
    def check(data):
        options = data.draw(options_strategy())
        canvas = data.draw(canvas_strategy(tiny_model))
        state = run_or_refuse(lambda: final_state(sample(tiny_model, canvas, seed=0, **options)))
        if state is not None:
            given_ids = canvas != tiny_model.mask_id
            assert state.done and torch.equal(state.tokens[0][given_ids], canvas[given_ids])
        text = data.draw(st.text(alphabet="to be or not\n_é", max_size=300))
        length = data.draw(st.one_of(st.integers(-1, 400), st.floats(), st.none()))
        end_at = data.draw(st.one_of(st.sampled_from(END_AT), st.text(max_size=4)))
        run_or_refuse(lambda: tiny_model.complete(text.replace("_", ""), length, end_at=end_at, **options))
        run_or_refuse(lambda: tiny_model.infill(text, **options))
        run_or_refuse(lambda: SamplerOptions().replace(**options))

    check()


def test_the_api_answers_or_refuses_clearly(tiny_model):
    fuzz(tiny_model, examples=40)


@pytest.mark.slow
def test_the_api_answers_or_refuses_clearly_deeper(tiny_model):
    fuzz(tiny_model, examples=600)
