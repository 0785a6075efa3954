"""Sampler options (mdlm_hf.sampling.options): the defaults, the one table, and bad values refused by name."""

import dataclasses
import math
import sys

import pytest
import torch

from mdlm_hf import MASK_GLYPH, sample
from mdlm_hf.pipeline import prompt_canvas, text_to_canvas
from mdlm_hf.sampling.drawing import draw_tokens
from mdlm_hf.sampling.options import OPTION_SPECS, REVEAL_RULE_OPTIONS, SamplerOptions
from mdlm_hf.sampling.state import final_state
from tests.sampler_helpers import PLAIN

BAD_OPTIONS = [
    (dict(num_steps=0), "num_steps"),
    (dict(num_steps=2.5), "num_steps"),
    (dict(order="best"), "order"),
    (dict(temperature=-0.1), "temperature"),
    (dict(temperature=math.nan), "temperature"),
    (dict(temperature=math.inf), "temperature"),
    (dict(top_p=0.0), "top_p"),
    (dict(top_p=1.5), "top_p"),
    (dict(top_k=0), "top_k"),
    (dict(schedule="exp"), "schedule"),
    (dict(block_length=0), "block_length"),
    (dict(threshold=0), "threshold"),
    (dict(reveal_counts="poisson"), "reveal_counts"),
    (dict(order_temperature=-1.0), "order_temperature"),
    (dict(order_temperature=math.inf), "order_temperature"),
    (dict(remask_ratio=1.0), "remask_ratio"),
    (dict(remask_ratio=-0.1), "remask_ratio"),
    (dict(remask_ratio=math.nan), "remask_ratio"),
    (dict(prior_weight=-0.5), "prior_weight"),
    (dict(prior_weight=math.inf), "prior_weight"),
    (dict(spacing=-1), "spacing"),
    (dict(spacing=1.5), "spacing"),
    (dict(num_steps=2, block_length=8), "number of blocks"),
]


@pytest.mark.parametrize("options,message", BAD_OPTIONS)
def test_bad_options_raise_clear_errors(tiny_model, options, message):
    with pytest.raises(ValueError, match=message):
        sample(tiny_model, torch.full((40,), tiny_model.mask_id), PLAIN, **options)


def test_bad_canvases_and_strings(tiny_model):
    mask_id = tiny_model.mask_id
    # plain words, no config field names: the app shows these messages as they are
    at_most = "at most 16,384 are written in one run"
    with pytest.raises(ValueError, match=f"canvas has 16,385 characters; {at_most}: shorten it by 1"):
        sample(tiny_model, torch.full((16_385,), mask_id), PLAIN)
    with pytest.raises(ValueError, match="length must be an integer from 1 to 16,384, got 16385"):
        tiny_model.generate(16_385)
    with pytest.raises(ValueError, match="length must be an integer from 1 to 16,379 after a prompt of 5, got 0"):
        tiny_model.complete("to be", 0)
    with pytest.raises(ValueError, match=f"template has 16,387 characters; {at_most}"):
        tiny_model.infill("_" * 16_387)
    with pytest.raises(ValueError, match="window_context must be below the model's block_size \\(64\\)"):
        tiny_model.generate(100, window_context=64)
    with pytest.raises(ValueError, match="no masked position"):
        sample(tiny_model, torch.zeros(5, dtype=torch.long), PLAIN)
    with pytest.raises(ValueError, match="ids must lie"):
        sample(tiny_model, torch.full((5,), mask_id + 1), PLAIN)
    with pytest.raises(ValueError, match="canvas must be a torch.Tensor of token ids, got list"):
        sample(tiny_model, [mask_id] * 5, PLAIN)
    with pytest.raises(ValueError, match="canvas must be a non-empty"):
        sample(tiny_model, torch.zeros(0, 8, dtype=torch.long), PLAIN)  # a batch of none


def test_a_canvas_on_the_meta_device_is_refused_in_one_line(tiny_model):
    canvas = torch.full((8,), tiny_model.mask_id, device="meta")
    with pytest.raises(ValueError, match="^canvas is on meta, which holds no data: pass it on the cpu") as error:
        sample(tiny_model, canvas)
    assert "\n" not in str(error.value)


def test_seed_and_generator_together_are_refused(tiny_model):
    canvas = torch.full((8,), tiny_model.mask_id)
    with pytest.raises(ValueError, match="give seed or generator, not both"):
        sample(tiny_model, canvas, PLAIN, seed=1, generator=torch.Generator())
    with pytest.raises(ValueError, match="length must be"):
        tiny_model.complete("to be", 0)
    with pytest.raises(ValueError, match="outside the model's vocabulary: 'Z', 'é'"):
        tiny_model.complete("toZé", 5)
    with pytest.raises(ValueError, match="no blank"):
        tiny_model.infill("to be or not")
    with pytest.raises(ValueError, match="empty"):
        tiny_model.infill("")
    with pytest.raises(ValueError, match="single character"):
        text_to_canvas(tiny_model, "to __", blank="__")


def test_the_default_options_are_the_studys_recommendation_and_plain_turns_every_option_off():
    recommended = dict(num_steps=32, order="word_streams", temperature=0.8, min_p=0.1, top_p=None, order_temperature=0)
    rest = dict(capital_temperature_factor=0.3, prior_weight=0.0, remask_ratio=0.0, spacing=8)
    assert SamplerOptions() == SamplerOptions(**recommended, **rest)
    assert SamplerOptions().capital_temperature_factor == 0.3  # chosen by the structure suite (docs/decisions.md)
    plain = SamplerOptions.plain()
    assert all(getattr(plain, name) == 0 for name in REVEAL_RULE_OPTIONS)
    assert plain.top_k is plain.top_p is plain.min_p is plain.block_length is plain.threshold is None
    assert plain.temperature == 1.0
    assert (plain.schedule, plain.reveal_counts) == ("linear", "exact")
    assert SamplerOptions.plain(num_steps=8) == dataclasses.replace(plain, num_steps=8)


def test_every_option_is_documented_in_the_one_table():
    assert list(OPTION_SPECS) == [f.name for f in dataclasses.fields(SamplerOptions)]
    for name, spec in OPTION_SPECS.items():
        default = getattr(SamplerOptions(), name)
        assert spec.label and spec.accepts.test(default), name
        assert spec.accepts.kind in (int, float, str, bool)
        if spec.slider is not None:
            low, high, step = spec.slider
            shown = spec.off if default is None else default
            assert low <= shown <= (high or 256) and step > 0, name
            assert spec.off is not None or not spec.accepts.test(None), name  # a slider shows None as `off`


@pytest.mark.parametrize(
    ("name", "value"),
    [("order_temperature", 0.25), ("prior_weight", 0.5), ("entropy_bound", 2.0), ("schedule", "cosine")],
)
def test_streams_order_refuses_the_options_it_would_ignore_by_name(tiny_model, name, value):
    with pytest.raises(ValueError, match=f"^{name} does not apply to word_streams order.*choose an order that uses"):
        SamplerOptions(**{name: value})
    with pytest.raises(ValueError, match=f"^{name} does not apply to streams order"):
        tiny_model.generate(20, seed=0, order="streams", **{name: value})
    assert len(tiny_model.generate(20, seed=0, order="entropy", **{name: value})) == 20  # in a scored order it applies
    if name == "prior_weight":  # the orders named are those that use it: the scored ones
        with pytest.raises(ValueError, match=r"\(confidence, margin, entropy\)$"):
            SamplerOptions(prior_weight=value)


@pytest.mark.parametrize("call", ["sample", "replace", "string API"])
def test_unknown_option_names_are_refused_by_name(tiny_model, call):
    canvas = torch.full((10,), tiny_model.mask_id)
    with pytest.raises(ValueError, match="unknown sampler option remask_rate; the options are num_steps, "):
        if call == "sample":
            sample(tiny_model, canvas, remask_rate=0.5)
        elif call == "replace":
            SamplerOptions().replace(remask_rate=0.5)
        else:
            tiny_model.generate(10, remask_rate=0.5)
    with pytest.raises(TypeError, match="options must be a SamplerOptions"):
        sample(tiny_model, canvas, 8)


def test_options_and_overrides_combine(tiny_model):
    canvas = torch.full((30,), tiny_model.mask_id)
    by_name = final_state(sample(tiny_model, canvas, PLAIN, num_steps=5, order="margin", seed=2))
    built = final_state(sample(tiny_model, canvas, SamplerOptions.plain(num_steps=5, order="margin"), seed=2))
    assert torch.equal(by_name.tokens, built.tokens) and by_name.num_steps == 5


HUGE = (1e39, 1e300, sys.float_info.max)


@pytest.mark.parametrize("huge", HUGE)
def test_a_huge_temperature_draws_uniformly_instead_of_overflowing(tiny_model, huge):
    text = tiny_model.generate(8, temperature=huge, seed=0)
    assert len(text) == 8 and MASK_GLYPH not in text
    logits = torch.tensor([[[50.0, 0.0, 0.0, -math.inf]] * 4000])  # the first all but certain at temperature 1
    drawn = draw_tokens(logits, SamplerOptions(temperature=huge), torch.Generator().manual_seed(0))
    counts = torch.bincount(drawn.flatten(), minlength=4)
    assert counts[3] == 0 and all(1100 < c < 1600 for c in counts[:3].tolist())  # uniform among the possible


@pytest.mark.parametrize("name", ["order_temperature", "prior_weight", "entropy_bound"])
@pytest.mark.parametrize("huge", HUGE)
def test_huge_reveal_rule_options_still_fill_every_mask(tiny_model, name, huge):
    text = tiny_model.generate(8, order="confidence", seed=0, **{name: huge})
    assert len(text) == 8 and MASK_GLYPH not in text


@pytest.mark.parametrize("seed", [1.5, "0", True, 2**64, 2**63, -1])
def test_a_seed_that_is_not_an_int_in_range_is_named(tiny_model, seed):
    with pytest.raises(ValueError, match="seed must be an integer in \\[0, 2\\*\\*63\\)"):
        sample(tiny_model, prompt_canvas(tiny_model, "to", 3), seed=seed)


@pytest.mark.parametrize("value", [None, 12, ["to be"]])
def test_a_prompt_or_template_that_is_not_a_string_is_named(tiny_model, value):
    with pytest.raises(ValueError, match="prompt must be a string"):
        tiny_model.complete(value, 5)
    with pytest.raises(ValueError, match="template must be a string"):
        tiny_model.infill(value)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (dict(order_temperature=10**20, order="confidence"), None),
        (dict(entropy_bound=10**30, order="confidence"), None),
        (dict(temperature=10**20), None),
        (dict(temperature=10**400), "temperature must be a finite number >= 0, got int"),
        (dict(prior_weight=-(10**400), order="confidence"), "prior_weight must be a finite number >= 0, got int"),
        (dict(generator="cuda"), "generator must be a CPU torch.Generator .*, got one on cuda"),
    ],
)
def test_huge_integers_and_a_generator_off_the_cpu_are_named_or_run(tiny_model, changes, message):
    # formerly OverflowError from deep in the sampler, and a torch error for a generator off the CPU
    canvas = torch.full((1, 8), tiny_model.mask_id)
    if changes.get("generator") == "cuda":  # this torch makes no meta generator, and this machine has no GPU

        class OnTheGPU(torch.Generator):
            @property
            def device(self) -> torch.device:
                return torch.device("cuda")

        changes = dict(generator=OnTheGPU())
    if message is None:
        assert final_state(sample(tiny_model, canvas, seed=0, **changes)).done
        return
    with pytest.raises(ValueError, match=message):
        final_state(sample(tiny_model, canvas, **changes))


def test_read_better_writes_one_character_a_pass_from_left_to_right(tiny_model):
    from mdlm_hf import READ_BETTER

    canvas = torch.full((30,), tiny_model.mask_id)
    states = list(sample(tiny_model, canvas, seed=0, **READ_BETTER))
    assert states[-1].done and states[-1].step == 30
    firsts = [int(state.revealed[0].nonzero()[0, 0]) for state in states[1:]]
    assert firsts == list(range(30)) and all(int(state.revealed.sum()) == 1 for state in states[1:])
    with pytest.raises(TypeError):
        READ_BETTER["temperature"] = 1.0  # a preset, not a setting to change for everyone
