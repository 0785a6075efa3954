import dataclasses
import itertools
import math
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import mdlm_hf.sampling.loop as loop_module
from mdlm_hf import MASK_GLYPH, MDLM, ORDERS, CharTokenizer, sample
from mdlm_hf.pipeline import prompt_canvas, text_to_canvas
from mdlm_hf.sampling.drawing import after_capital, candidate_tokens, capital_letters, separator_tokens
from mdlm_hf.sampling.options import (
    OPTION_SPECS,
    REVEAL_RULE_OPTIONS,
    SCORED_ORDERS,
    STREAM_ORDERS,
    SamplerOptions,
    orders_using,
)
from mdlm_hf.sampling.orders import stream_passes, word_separators, word_stream_passes
from mdlm_hf.sampling.prior import character_log_prior
from mdlm_hf.sampling.schedule import planned_reveals
from mdlm_hf.sampling.state import final_state
from mdlm_hf.sampling.step import denoise_step
from tests.stubs import StubModel

# the bare core, every option off, in a scored order (the default, streams order, has no use for a score, a
# schedule or counts): what most tests here pin down
PLAIN = SamplerOptions.plain(order="entropy")


def canvas_with_holes(model, length=40, seed=0):
    generator = torch.Generator().manual_seed(seed)
    canvas = torch.randint(0, model.mask_id, (length,), generator=generator)
    holes = torch.rand(length, generator=generator) < 0.6
    return torch.where(holes, model.mask_id, canvas)


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("block_length", [None, 16])
def test_given_positions_never_change_and_no_mask_remains(tiny_model, order, block_length):
    canvas = canvas_with_holes(tiny_model)
    given = canvas != tiny_model.mask_id
    states = list(sample(tiny_model, canvas, PLAIN, num_steps=8, order=order, block_length=block_length, seed=0))
    assert states[0].step == 0 and states[0].num_forward_passes == 0
    for state in states:
        assert torch.equal(state.tokens[0][given], canvas[given])
        assert not state.revealed[0][given].any()
    assert states[-1].done and not states[-1].is_masked.any()
    # each masked position is revealed exactly once
    reveal_counts = torch.stack([s.revealed[0] for s in states]).sum(dim=0)
    assert torch.equal(reveal_counts, (~given).long())


@pytest.mark.parametrize("num_steps", [1, 5, 12])
def test_exactly_num_steps_forward_passes(tiny_model, num_steps):
    canvas = canvas_with_holes(tiny_model)
    states = list(sample(tiny_model, canvas, PLAIN, num_steps=num_steps, seed=0))
    assert len(states) == num_steps + 1
    assert [s.num_forward_passes for s in states] == list(range(num_steps + 1))
    assert all(s.revealed.sum() >= 1 for s in states[1:])


def test_more_steps_than_masks_is_clamped(tiny_model):
    canvas = prompt_canvas(tiny_model, "to be", 5)
    states = list(sample(tiny_model, canvas, PLAIN, num_steps=50, seed=0))
    assert states[-1].num_steps == 5 and states[-1].num_forward_passes == 5 and states[-1].done


def test_steps_that_change_nothing_reuse_the_logits(tiny_model):
    canvas = torch.full((20,), tiny_model.mask_id)
    states = list(sample(tiny_model, canvas, PLAIN, num_steps=40, reveal_counts="binomial", seed=0))
    assert len(states) <= 41 and states[-1].done  # may finish early when the draws reveal everything
    # a pass happens at the first step and after every step that revealed something
    expected_passes = 1 + sum(1 for s in states[1:-1] if s.revealed.any())
    assert states[-1].num_forward_passes == expected_passes < len(states) - 1


def test_time_conditioned_model_never_reuses_logits(tiny_model):
    model = MDLM(tiny_model.tokenizer.vocab, n_layer=1, n_head=2, n_embd=32, block_size=32, time_conditioning=True)
    states = list(
        sample(model, torch.full((10,), model.mask_id), PLAIN, num_steps=30, reveal_counts="binomial", seed=0)
    )
    assert states[-1].done and states[-1].num_forward_passes == states[-1].step  # t changes every step


def test_left_to_right_reveals_strictly_left_to_right(tiny_model):
    canvas = canvas_with_holes(tiny_model)
    last = -1
    for state in sample(tiny_model, canvas, PLAIN, num_steps=10, order="left_to_right", seed=0):
        positions = state.revealed[0].nonzero().flatten().tolist()
        if positions:
            assert positions[0] > last and positions == sorted(positions)
            last = positions[-1]


def drawn_canvas(canvas: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(eligible, given) (1, T) of a canvas drawn as text: "_" eligible, "." masked but not eligible, anything else
    given."""
    return torch.tensor([[c == "_" for c in canvas]]), torch.tensor([[c not in "_." for c in canvas]])


def planned(canvas: str, num_steps: int) -> str:
    """stream_passes on a canvas drawn as text (`drawn_canvas`), each position's pass as a digit (0: not eligible)."""
    return "".join(str(p) for p in stream_passes(*drawn_canvas(canvas), num_steps)[0].tolist())


@pytest.mark.parametrize(
    ("canvas", "num_steps", "passes"),
    [
        ("__________", 4, "1231231234"),  # nothing given: 3 stretches of equal length (within one), left to right
        ("________", 4, "12341234"),
        ("ab________", 4, "0012341234"),  # given on the left: the same
        ("________cd", 4, "4321432100"),  # given on the right only: the mirror image
        ("ab_____cd", 8, "001354200"),  # between given text: one end a pass, meeting in the middle
        ("ab____cd", 8, "00134200"),
        ("ab__________cd", 6, "00123455432100"),  # longer than the passes: both ends each pass
        ("ab__________cd", 4, "00123123123400"),  # longer than twice the passes: stretches again
        ("__.__", 4, "12012"),  # masks that are not eligible are not given text
    ],
)
def test_stream_passes_write_every_run_of_masks_within_the_passes(canvas, num_steps, passes):
    assert planned(canvas, num_steps) == passes


@pytest.mark.parametrize("holes", [False, True])
@pytest.mark.parametrize("num_steps", [1, 7, 16])
def test_streams_write_each_character_beside_a_known_one_after_the_first_pass(tiny_model, holes, num_steps):
    canvas = canvas_with_holes(tiny_model, length=60) if holes else torch.full((60,), tiny_model.mask_id)
    masks = canvas == tiny_model.mask_id
    states = list(sample(tiny_model, canvas, PLAIN, num_steps=num_steps, order="streams", seed=0))
    plan = stream_passes(masks[None], ~masks[None], num_steps)[0]
    assert states[-1].done and states[-1].num_forward_passes == len(states) - 1 == int(plan.max())
    for before, after in itertools.pairwise(states):
        revealed = after.revealed[0].nonzero().flatten()
        assert revealed.tolist() == (plan == after.step).nonzero().flatten().tolist()  # each at its planned pass
        known = F.pad(~before.is_masked[0], (1, 1))
        if after.step > 1:  # only the first pass begins a stretch with nothing known beside it
            assert all(known[i] or known[i + 2] for i in revealed.tolist())
    if not holes:  # a blank canvas: as many stretches as a pass must write characters
        assert int(states[1].revealed.sum()) == math.ceil(60 / num_steps)


@pytest.mark.parametrize("extra", [dict(remask_ratio=0.5), dict(threshold=0.3), dict(block_length=16)])
def test_streams_plan_each_row_of_a_batch_and_finish_with_remasking_thresholds_and_blocks(tiny_model, extra):
    rows = torch.stack([canvas_with_holes(tiny_model, length=48), torch.full((48,), tiny_model.mask_id)])
    states = list(sample(tiny_model, rows, PLAIN, order="streams", num_steps=6, seed=0, **extra))
    given = rows != tiny_model.mask_id
    assert states[-1].done and torch.equal(states[-1].tokens[given], rows[given])
    if not extra.get("threshold"):  # the blank row begins its stretches 6 apart in the first pass
        # (16-character blocks get 2 passes each: the first block's stretches are 2 long)
        blocks = extra.get("block_length") is not None
        assert states[1].revealed[1].nonzero().flatten().tolist() == list(
            range(0, 16 if blocks else 48, 2 if blocks else 6)
        )


def test_same_seed_same_text_and_different_seed_differs(tiny_model):
    canvas = torch.full((48,), tiny_model.mask_id)
    a = final_state(sample(tiny_model, canvas, PLAIN, num_steps=8, seed=3)).tokens
    b = final_state(sample(tiny_model, canvas, PLAIN, num_steps=8, seed=3)).tokens
    c = final_state(sample(tiny_model, canvas, PLAIN, num_steps=8, seed=4)).tokens
    assert torch.equal(a, b) and not torch.equal(a, c)


@pytest.mark.parametrize("order", ["confidence", "left_to_right"])
def test_temperature_zero_is_argmax_decoding(tiny_model, order):
    canvas = canvas_with_holes(tiny_model)
    previous = canvas[None]
    for state in list(sample(tiny_model, canvas, PLAIN, num_steps=6, order=order, temperature=0.0, seed=0))[1:]:
        argmax = tiny_model(previous).argmax(dim=-1)
        assert torch.equal(state.tokens[state.revealed], argmax[state.revealed])
        previous = state.tokens


def test_temperature_zero_ignores_the_seed(tiny_model):
    canvas = torch.full((32,), tiny_model.mask_id)
    a = final_state(sample(tiny_model, canvas, PLAIN, num_steps=8, temperature=0, seed=1)).tokens
    b = final_state(sample(tiny_model, canvas, PLAIN, num_steps=8, temperature=0, seed=2)).tokens
    assert torch.equal(a, b)


def test_top_k_one_is_greedy(tiny_model):
    canvas = torch.full((32,), tiny_model.mask_id)
    greedy = final_state(sample(tiny_model, canvas, PLAIN, num_steps=8, temperature=0)).tokens
    top1 = final_state(sample(tiny_model, canvas, PLAIN, num_steps=8, temperature=1.0, top_k=1, seed=5)).tokens
    assert torch.equal(greedy, top1)


def test_threshold_mode_can_finish_in_fewer_steps(tiny_model):
    canvas = torch.full((40,), tiny_model.mask_id)
    # a threshold every candidate clears reveals everything at the first step
    states = list(sample(tiny_model, canvas, PLAIN, num_steps=20, threshold=1e-9, seed=0))
    assert len(states) == 2 and states[-1].done and states[-1].num_forward_passes == 1
    # an unreachable threshold falls back to the schedule, at least one per step
    states = list(sample(tiny_model, canvas, PLAIN, num_steps=20, threshold=1.0, seed=0))
    assert len(states) == 21 and states[-1].done


def test_batched_canvases(tiny_model):
    canvas = torch.stack([canvas_with_holes(tiny_model, seed=s) for s in range(3)])
    state = final_state(sample(tiny_model, canvas, PLAIN, num_steps=7, seed=0))
    assert state.tokens.shape == (3, 40) and state.done
    given = canvas != tiny_model.mask_id
    assert torch.equal(state.tokens[given], canvas[given])


@pytest.mark.parametrize("schedule", ["linear", "cosine"])
def test_schedules_reveal_everything_at_least_one_per_step(schedule):
    num_masked = torch.tensor([10, 64, 200])
    counts = torch.stack([planned_reveals(num_masked, 10, s, schedule) for s in range(11)])
    assert torch.equal(counts[0], torch.zeros(3, dtype=torch.long)) and torch.equal(counts[-1], num_masked)
    assert (counts.diff(dim=0) >= 1).all()
    if schedule == "cosine":  # few early, many late
        assert counts[1, 2] < counts[10, 2] - counts[9, 2]


def test_string_api(tiny_model):
    text = tiny_model.generate(30, num_steps=5, seed=0)
    assert len(text) == 30
    completed = tiny_model.complete("to be", 20, num_steps=4, seed=0)
    assert completed.startswith("to be") and len(completed) == 25
    filled = tiny_model.infill("to __ or not __ be", num_steps=3, seed=0)
    assert len(filled) == 18 and filled[:3] == "to " and filled[5:13] == " or not " and "_" not in filled
    streamed = list(tiny_model.stream("to __ or", num_steps=2, seed=0))
    assert len(streamed) == 3


def test_string_api_uses_the_recommended_settings_unless_overridden(tiny_model):
    assert SamplerOptions().order == "word_streams"  # so a step's reveals show whether the defaults were applied
    # 64 masks in 16 steps: word streams order plans 5 stretches of 12-13 in 15 passes, the separators before the
    # last 4 first, then every stretch a pass later
    by_default = list(tiny_model.stream("_" * 64, num_steps=16, seed=0))
    assert len(by_default) == 15 and by_default[1].revealed[0].nonzero().flatten().tolist() == [11, 24, 37, 50]
    overridden = list(tiny_model.stream("_" * 64, num_steps=16, seed=0, order="left_to_right", spacing=0))
    assert overridden[1].revealed[0].nonzero().flatten().tolist() == [0, 1, 2, 3]
    canvas = torch.full((40,), tiny_model.mask_id)
    assert tiny_model.generate(40, seed=3) == tiny_model.tokenizer.decode(
        final_state(sample(tiny_model, canvas, SamplerOptions(), seed=3)).tokens[0]
    )


def first_reveal_frequencies(confidences, order_temperature, rows=20000):
    """How often each of a row's positions is revealed first, over many rows of one denoise_step."""
    T = len(confidences)
    top = torch.tensor(confidences)[None, :, None].expand(rows, T, 1)
    probs = torch.cat([top, ((1 - top) / 9).expand(rows, T, 9)], dim=-1)  # greedy candidate: char 0, prob top
    logits = probs.log()
    tokens = torch.full((rows, T), 10)
    options = SamplerOptions.plain(order="confidence", temperature=0.0, order_temperature=order_temperature)
    generator = torch.Generator().manual_seed(0)
    eligible = torch.ones(rows, T, dtype=torch.bool)
    _, revealed, _ = denoise_step(logits, tokens, eligible, torch.ones(rows, dtype=torch.long), options, generator)
    assert torch.equal(revealed.sum(dim=1), torch.ones(rows, dtype=torch.long))
    return revealed.float().mean(dim=0)


def test_order_temperature_draws_positions_in_proportion_to_confidence():
    confidences = [0.9, 0.6, 0.3]
    assert torch.equal(first_reveal_frequencies(confidences, 0.0), torch.tensor([1.0, 0.0, 0.0]))
    for order_temperature in (1.0, 0.5):
        weights = torch.tensor(confidences) ** (1 / order_temperature)
        expected = weights / weights.sum()
        assert torch.allclose(first_reveal_frequencies(confidences, order_temperature), expected, atol=0.015)
    # very hot: close to random order
    assert torch.allclose(first_reveal_frequencies(confidences, 1e6), torch.full((3,), 1 / 3), atol=0.015)


def test_order_temperature_still_fills_every_mask_and_keeps_given(tiny_model):
    canvas = canvas_with_holes(tiny_model)
    for order in set(ORDERS) - set(STREAM_ORDERS):  # streams orders refuse an order temperature (no ranking)
        state = final_state(sample(tiny_model, canvas, PLAIN, num_steps=8, order=order, order_temperature=0.5, seed=1))
        assert not state.is_masked.any()
        given = canvas != tiny_model.mask_id
        assert torch.equal(state.tokens[0][given], canvas[given])


@pytest.mark.parametrize("block_length", [None, 16])
def test_remasking_redraws_the_least_confident_and_still_finishes(tiny_model, block_length):
    canvas = canvas_with_holes(tiny_model, length=60)
    given = canvas != tiny_model.mask_id
    options = dict(num_steps=10, remask_ratio=0.5, block_length=block_length, seed=0)
    states = list(sample(tiny_model, canvas, PLAIN, **options))
    assert len(states) == 11 and states[-1].num_forward_passes == 10 and states[-1].done
    assert sum(int(s.remasked.sum()) for s in states) > 0 and not states[-1].remasked.any()
    for before, after in itertools.pairwise(states):
        assert torch.equal(after.tokens[0][given], canvas[given])
        assert not (after.remasked & (given | after.revealed)).any()  # only earlier generated characters
        assert torch.equal(after.is_masked, (before.is_masked & ~after.revealed) | after.remasked)
        remasked = after.remasked[0]
        if remasked.any():  # the least confident of the earlier generated characters of the current block
            block_of = torch.arange(60) // (block_length or 60)
            current = block_of == block_of[after.revealed[0].nonzero()[0, 0]]
            kept = current & ~before.is_masked[0] & ~given & ~remasked
            assert not (remasked & ~current).any()
            if kept.any():
                assert before.confidence[0][remasked].max() <= before.confidence[0][kept].min()
        assert after.confidence[0][after.is_masked[0]].isnan().all()
    assert not any(
        s.remasked.any() for s in sample(tiny_model, canvas, PLAIN, num_steps=10, seed=0)
    )  # off in the plain core


@pytest.mark.parametrize("order", ["confidence", "margin"])
def test_prior_weight_reveals_a_rare_character_that_context_made_likely_first(order):
    # position 0: a common character (prior 0.5) at probability 0.9; position 1: a rare one (prior 0.01) at 0.6
    probs = torch.tensor([[[0.9, 0.05, 0.05], [0.3, 0.1, 0.6]]])
    log_prior = torch.tensor([0.5, 0.49, 0.01]).log()
    tokens, eligible, one = torch.full((1, 2), 3), torch.ones(1, 2, dtype=torch.bool), torch.ones(1, dtype=torch.long)

    def first_revealed(prior_weight):
        options = SamplerOptions.plain(order=order, temperature=0.0, prior_weight=prior_weight)
        generator = torch.Generator().manual_seed(0)
        _, revealed, _ = denoise_step(probs.log(), tokens, eligible, one, options, generator, log_prior)
        return revealed[0].nonzero().item()

    assert first_revealed(0.0) == 0  # plain score: the common character
    assert first_revealed(1.0) == 1  # log(0.6 / 0.01) > log(0.9 / 0.5): the rare one


def test_character_log_prior_is_a_distribution_close_to_the_model_with_nothing_known(tiny_model):
    log_prior = character_log_prior(tiny_model, 16, torch.device("cpu"))
    assert log_prior.shape == (tiny_model.mask_id + 1,) and math.isclose(log_prior.exp().sum().item(), 1, rel_tol=1e-5)
    with torch.no_grad():
        probs = tiny_model(torch.full((1, 16), tiny_model.mask_id), torch.ones(1)).softmax(dim=-1)
    assert torch.allclose(log_prior.exp(), probs[0].mean(dim=0), atol=1e-6)


@pytest.mark.parametrize("holes", [False, True])
def test_the_prior_comes_from_the_first_step_in_free_generation_else_from_one_extra_row(tiny_model, monkeypatch, holes):
    import mdlm_hf.sampling.loop as sampler

    priors, forward_rows = [], []
    real_step, real_forward = sampler.denoise_step, tiny_model.forward
    monkeypatch.setattr(
        sampler, "denoise_step", lambda *args, **kwargs: priors.append(args[-1]) or real_step(*args, **kwargs)
    )
    monkeypatch.setattr(tiny_model, "forward", lambda x, t: forward_rows.append(x.size(0)) or real_forward(x, t))
    canvas = canvas_with_holes(tiny_model) if holes else torch.full((40,), tiny_model.mask_id)
    final_state(sample(tiny_model, torch.stack([canvas, canvas]), PLAIN, num_steps=4, prior_weight=0.5, seed=0))
    expected = character_log_prior(tiny_model, 40, torch.device("cpu"))
    assert all(torch.allclose(prior, expected, atol=1e-5) for prior in priors) and len(priors) == 4
    assert forward_rows[: 1 + holes] == ([1, 2] if holes else [2])  # the extra one-row pass only with holes


@pytest.mark.parametrize("order", SCORED_ORDERS)
def test_prior_weight_fills_every_mask(tiny_model, order):
    canvas = canvas_with_holes(tiny_model)
    given = canvas != tiny_model.mask_id
    state = final_state(sample(tiny_model, canvas, PLAIN, num_steps=8, order=order, prior_weight=0.5, seed=0))
    assert state.done and torch.equal(state.tokens[0][given], canvas[given])
    assert state.num_forward_passes == 8  # the prior's pass is not a denoising step's


@pytest.mark.parametrize("order", ["random", "left_to_right"])
def test_orders_without_scores_ignore_prior_weight(tiny_model, order):
    canvas = canvas_with_holes(tiny_model)
    plain = final_state(sample(tiny_model, canvas, PLAIN, num_steps=8, order=order, seed=0))
    weighted = final_state(sample(tiny_model, canvas, PLAIN, num_steps=8, order=order, prior_weight=0.5, seed=0))
    assert torch.equal(plain.tokens, weighted.tokens)


def test_spacing_picks_best_first_ruling_out_neighbours_then_fills_the_step():
    top = torch.tensor([0.9, 0.8, 0.1, 0.7, 0.6])[None, :, None]
    logits = torch.cat([top, (1 - top) / 2, (1 - top) / 2], dim=-1).log()  # greedy candidate: char 0
    tokens, eligible = torch.full((1, 5), 3), torch.ones(1, 5, dtype=torch.bool)

    def revealed(count, spacing, eligible=eligible):
        options = PLAIN.replace(temperature=0.0, spacing=spacing)
        generator = torch.Generator().manual_seed(0)
        _, revealed, _ = denoise_step(logits, tokens, eligible, torch.tensor([count]), options, generator)
        return revealed[0].nonzero()[:, 0].tolist()

    assert revealed(2, 0) == [0, 1]  # plain: the two most confident, side by side
    assert revealed(2, 1) == [0, 3]  # 0 rules out 1; the best of the rest is 3
    assert revealed(3, 1) == [0, 1, 3]  # 3 rules out 2 and 4: the step's third reveal is the best left, 1
    assert revealed(2, 2) == [0, 3]  # 0 rules out 1 and 2
    assert revealed(2, 3) == [0, 4]  # 0 rules out 1 to 3
    assert revealed(2, 4) == [0, 1]  # 0 rules out everything: the step fills with the best left
    assert revealed(1, 1, eligible=torch.tensor([[False, True, True, True, True]])) == [1]  # 0 is not eligible


@pytest.mark.parametrize("order", ORDERS)
def test_spacing_still_fills_every_mask_and_keeps_given(tiny_model, order):
    canvas = canvas_with_holes(tiny_model)
    given = canvas != tiny_model.mask_id
    states = list(sample(tiny_model, canvas, PLAIN, num_steps=8, order=order, spacing=2, seed=0))
    passes = states[-1].num_forward_passes
    assert states[-1].done and (
        passes <= 8 if order in STREAM_ORDERS else passes == 8
    )  # streams end with the longest run
    assert torch.equal(states[-1].tokens[0][given], canvas[given])
    assert torch.equal(torch.stack([s.revealed[0] for s in states]).sum(dim=0), (~given).long())


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
    recommended = dict(num_steps=32, order="word_streams", temperature=1.25, min_p=0.1, top_p=None, order_temperature=0)
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


@pytest.mark.parametrize("name", ["temperature", "order_temperature"])
def test_temperatures_below_the_floor_act_as_zero(tiny_model, name):
    canvas = canvas_with_holes(tiny_model)

    def filled(value):
        options = SamplerOptions(order="entropy")  # order_temperature has no use in streams order
        return final_state(sample(tiny_model, canvas, options, seed=0, **{name: value})).tokens

    greedy = filled(0.0)
    for tiny in (1e-308, 1e-5):  # dividing scores by the first overflows float64
        assert torch.equal(filled(tiny), greedy)


def test_a_tiny_temperature_draws_the_argmax_not_garbage():
    logits = torch.tensor([[[3.0, 5.0, 4.0, -math.inf]]])  # divided by 1e-308, every finite logit overflows to inf
    for tiny in (1e-308, 1e-5, 0.0):
        drawn = candidate_tokens(logits, SamplerOptions(temperature=tiny), torch.Generator().manual_seed(0))
        assert drawn.item() == 1


HUGE = (1e39, 1e300, sys.float_info.max)


@pytest.mark.parametrize("huge", HUGE)
def test_a_huge_temperature_draws_uniformly_instead_of_overflowing(tiny_model, huge):
    text = tiny_model.generate(8, temperature=huge, seed=0)
    assert len(text) == 8 and MASK_GLYPH not in text
    logits = torch.tensor([[[50.0, 0.0, 0.0, -math.inf]] * 4000])  # the first all but certain at temperature 1
    drawn = candidate_tokens(logits, SamplerOptions(temperature=huge), torch.Generator().manual_seed(0))
    counts = torch.bincount(drawn.flatten(), minlength=4)
    assert counts[3] == 0 and all(1100 < c < 1600 for c in counts[:3].tolist())  # uniform among the possible


@pytest.mark.parametrize("name", ["order_temperature", "prior_weight", "entropy_bound"])
@pytest.mark.parametrize("huge", HUGE)
def test_huge_reveal_rule_options_still_fill_every_mask(tiny_model, name, huge):
    text = tiny_model.generate(8, order="confidence", seed=0, **{name: huge})
    assert len(text) == 8 and MASK_GLYPH not in text


def test_binomial_reveal_counts_clamp_steps_to_the_masks(tiny_model):
    canvas = prompt_canvas(tiny_model, "to be", 4)
    states = list(sample(tiny_model, canvas, PLAIN, num_steps=1000, reveal_counts="binomial", seed=0))
    assert states[-1].num_steps == 4 and len(states) <= 5 and states[-1].done


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


class ConfidentModel(StubModel):
    """Predicts character 0 with near certainty everywhere: every position's entropy is about 0."""

    def __init__(self, vocab_size: int = 10, block_size: int = 64) -> None:
        super().__init__(vocab_size, block_size)

    def forward(self, tokens: torch.Tensor, t: torch.Tensor | None = None) -> torch.Tensor:
        logits = torch.zeros(*tokens.shape, self.vocab_size)
        logits[..., 0] = 30.0
        logits[..., self.mask_id] = float("-inf")
        return logits


class UnsureModel(ConfidentModel):
    """Predicts character 0 with probability 0.9 everywhere: every position has the same small entropy."""

    def forward(self, tokens: torch.Tensor, t: torch.Tensor | None = None) -> torch.Tensor:
        logits = torch.zeros(*tokens.shape, self.vocab_size)
        logits[..., 0] = math.log(0.9 * (self.vocab_size - 2) / 0.1)
        logits[..., self.mask_id] = float("-inf")
        return logits


def test_entropy_bound_ahead_of_the_schedule_is_not_remasked():
    # the bound admits 5 reveals a pass where the schedule asks for 2: once a row is ahead, remasking would only
    # hold it back to the schedule, so nothing is taken back and the run ends early
    model = UnsureModel()
    probs = model(torch.zeros(1, 1, dtype=torch.long)).softmax(dim=-1)[0, 0]
    entropy = float(-(probs * probs.clamp(min=1e-12).log()).sum())
    canvas = torch.full((1, 40), model.mask_id)
    options = PLAIN.replace(num_steps=20, entropy_bound=5.5 * entropy, remask_ratio=0.75)
    states = list(sample(model, canvas, options, seed=0))
    ahead_steps = 0
    for step, (before, after) in enumerate(itertools.pairwise(states), start=1):
        already = int((before.tokens != model.mask_id).sum())
        if already >= int(planned_reveals(torch.tensor([40]), 20, step, "linear")[0]):
            ahead_steps += 1
            assert not after.remasked.any()
    assert ahead_steps > 0 and states[-1].done and states[-1].num_forward_passes < 10
    # the control: the same run on the schedule alone remasks at every step but the first and the last
    scheduled = list(sample(model, canvas, options.replace(entropy_bound=None), seed=0))
    assert sum(bool(state.remasked.any()) for state in scheduled) == 18 and scheduled[-1].num_forward_passes == 20


def test_entropy_bound_never_takes_more_passes_than_the_schedule(tiny_model):
    # a random model is uncertain everywhere (entropy about ln V per position): the bound admits no extras
    canvas = torch.full((40,), tiny_model.mask_id)
    states = list(sample(tiny_model, canvas, PLAIN, num_steps=10, entropy_bound=0.01, seed=0))
    assert states[-1].done and states[-1].num_forward_passes == 10
    bounded = final_state(sample(tiny_model, canvas, PLAIN, num_steps=10, entropy_bound=1e3, seed=0))
    assert bounded.done and bounded.num_forward_passes == 1  # a bound above the canvas's total entropy: one pass


@pytest.mark.parametrize("options", [PLAIN, SamplerOptions(order="entropy")])
@pytest.mark.parametrize("bound", [0.5, 3.0, 20.0])
def test_entropy_bound_leaves_no_mask_and_keeps_given_positions(tiny_model, options, bound):
    canvas = torch.stack([canvas_with_holes(tiny_model, seed=s) for s in range(3)])
    given = canvas != tiny_model.mask_id
    states = list(sample(tiny_model, canvas, options, num_steps=12, entropy_bound=bound, seed=1))
    assert states[-1].done and len(states) - 1 <= 12
    for state in states:
        assert torch.equal(state.tokens[given], canvas[given])


def test_entropy_bounded_count_walks_the_order_within_the_bound():
    from mdlm_hf.sampling.orders import entropy_bounded_count

    probs = torch.tensor([[[1.0, 0.0], [0.5, 0.5], [1.0, 0.0], [0.5, 0.5]]])  # entropies 0, ln 2, 0, ln 2
    eligible = torch.tensor([[True, True, True, True]])
    order = torch.tensor([[0, 2, 1, 3]])
    assert entropy_bounded_count(probs, order, eligible, 0.1).tolist() == [2]
    assert entropy_bounded_count(probs, order, eligible, 0.7).tolist() == [3]
    assert entropy_bounded_count(probs, order, eligible, 1.4).tolist() == [4]
    eligible[0, 2] = False  # an ineligible position neither counts nor stops the walk
    assert entropy_bounded_count(probs, torch.tensor([[0, 1, 3, 2]]), eligible, 0.1).tolist() == [1]


def test_an_adaptive_rule_keeps_binomial_counts_binomial(tiny_model):
    # exact counts with an adaptive rule reveal at least one per pass; MDLM's ancestral sampler may draw none
    canvas = torch.full((40,), tiny_model.mask_id)
    states = list(sample(tiny_model, canvas, PLAIN, num_steps=30, reveal_counts="binomial", threshold=0.99, seed=0))
    assert states[-1].done and any(not state.revealed.any() for state in states[1:])


def test_cut_where_sure_keeps_the_tail_where_the_model_is_unsure():
    # two positions: one sure (top 0.9), one unsure (top 0.3, a long tail of rare characters that together hold 0.6)
    sure = torch.tensor([0.9] + [0.1 / 9] * 9)
    unsure = torch.tensor([0.3, 0.1] + [0.6 / 8] * 8)
    logits = torch.stack([sure, unsure]).log()[None].expand(4000, -1, -1)  # (B, 2, V)
    drawn = {}
    for cut_where_sure in (None, 0.5):
        options = SamplerOptions.plain(min_p=0.5, cut_where_sure=cut_where_sure)
        drawn[cut_where_sure] = candidate_tokens(logits, options, torch.Generator().manual_seed(0))
    # min-p 0.5 everywhere: only each position's top character survives
    assert bool((drawn[None] == 0).all())
    # only where sure: the sure position is still cut, the unsure one draws from the model's own distribution
    assert bool((drawn[0.5][:, 0] == 0).all())
    tail_share = (drawn[0.5][:, 1] >= 2).float().mean().item()
    assert tail_share == pytest.approx(0.6, abs=0.03)
    with pytest.raises(ValueError, match="cut_where_sure must be"):
        SamplerOptions(cut_where_sure=1.5)


def test_characters_after_a_capital_are_drawn_at_the_temperature_times_the_factor():
    logits = torch.randn(64, 12, 10, generator=torch.Generator().manual_seed(0)).log_softmax(dim=-1)  # (B, T, V)
    cooler = torch.rand(64, 12, generator=torch.Generator().manual_seed(1)) < 0.5
    options = SamplerOptions.plain(temperature=1.2, capital_temperature_factor=0.5, min_p=0.1)
    mixed = candidate_tokens(logits, options, torch.Generator().manual_seed(2), cooler)
    warm = candidate_tokens(logits, options.replace(capital_temperature_factor=1.0), torch.Generator().manual_seed(2))
    cool = candidate_tokens(logits, options.replace(temperature=0.6), torch.Generator().manual_seed(2))
    assert torch.equal(mixed, torch.where(cooler, cool, warm))  # the same noise: each position at its temperature
    assert not torch.equal(cool, warm)
    greedy = candidate_tokens(logits, options.replace(temperature=0), torch.Generator().manual_seed(3), cooler)
    assert torch.equal(greedy, logits.argmax(dim=-1))  # temperature 0 is greedy everywhere, whatever the factor
    for bad in (0, 1.5):
        with pytest.raises(ValueError, match="capital_temperature_factor must be in"):
            SamplerOptions(capital_temperature_factor=bad)
    assert SamplerOptions.plain().capital_temperature_factor == 1.0  # the bare core draws from the model as it is
    assert SamplerOptions.default_for_causal().capital_temperature_factor == 1.0


def test_the_sampler_cools_exactly_the_characters_whose_left_neighbour_is_a_capital(monkeypatch):
    from mdlm_hf.sampling import step as sampler_module

    torch.manual_seed(0)
    model = MDLM(CharTokenizer.from_text("ROMEO: JULIET, good night.\n").vocab, n_layer=1, n_head=2, n_embd=16)
    capitals = capital_letters(model, torch.device("cpu"))
    assert [c for c, flag in zip(model.tokenizer.vocab, capitals.tolist(), strict=False) if flag] == list("EIJLMORTU")
    assert not capitals[model.mask_id]
    seen, original = [], sampler_module.candidate_tokens
    monkeypatch.setattr(
        sampler_module,
        "candidate_tokens",
        lambda logits, options, generator, cooler=None: (
            seen.append(cooler) or original(logits, options, generator, cooler)
        ),
    )
    states = list(sample(model, text_to_canvas(model, "ROMEO:\n" + "_" * 40), seed=0))
    assert len(seen) == len(states) - 1 and all(cooler is not None for cooler in seen)
    for before, cooler in zip(states[:-1], seen, strict=True):  # the canvas each draw saw, and what it cooled
        ids = before.tokens[0].tolist()
        assert cooler[0].tolist() == [i > 0 and bool(capitals[ids[i - 1]]) for i in range(len(ids))]
    assert seen[0][0, 1:6].all() and not seen[0][0, 6:].any()  # "ROMEO" given: O, M, E, O and ":" come after one
    assert after_capital(states[0].tokens, None) is None  # a stub model without a tokenizer: nothing cooled


@pytest.mark.parametrize(("length", "num_steps"), [(133, 32), (235, 32), (181, 32), (256, 32), (7, 3), (1, 5)])
def test_stream_passes_cut_a_run_into_stretches_of_equal_length(length, num_steps):
    # a short last stretch would write the canvas's end in the first passes, with next to nothing known around it
    passes = planned("_" * length, num_steps)
    plan = stream_passes(torch.ones(1, length, dtype=torch.bool), torch.zeros(1, length, dtype=torch.bool), num_steps)
    starts = (plan[0] == 1).nonzero().flatten().tolist()
    lengths = [b - a for a, b in itertools.pairwise([*starts, length])]
    assert len(starts) == math.ceil(length / num_steps) and max(lengths) - min(lengths) <= 1, passes
    assert int(plan.max()) == max(lengths) == math.ceil(length / len(starts))  # the run ends when its stretches do


def word_planned(canvas: str, num_steps: int) -> tuple[str, str]:
    """word_stream_passes on a canvas drawn as text (`drawn_canvas`): each position's pass as a digit, and the
    separators as "|" (else ".")."""
    passes, separators = word_stream_passes(*drawn_canvas(canvas), num_steps)
    return "".join(str(p) for p in passes[0].tolist()), "".join("|" if s else "." for s in separators[0].tolist())


@pytest.mark.parametrize(
    ("canvas", "num_steps", "passes", "separators"),
    [
        # streams' plan for 3 passes ("12123123"), a separator first before each later stretch, the rest a pass later
        ("________", 4, "21231234", ".|..|..."),
        ("ab________", 4, "0021231234", "...|..|..."),  # given on the left: the same
        ("________cd", 4, "4321432100", ".........."),  # right to left (given on the right only): streams' plan
        ("ab____cd", 8, "00134200", "........"),  # written from both ends: streams' plan
        ("ab______", 8, "00123456", "........"),  # one stretch: streams' plan
        ("___", 1, "111", "..."),  # one pass: no room for a separator's pass
        ("____", 2, "1212", "...."),  # one pass fewer leaves stretches of one: nothing to begin, streams' plan
    ],
)
def test_word_stream_passes_begin_every_later_stretch_after_a_separator(canvas, num_steps, passes, separators):
    assert word_planned(canvas, num_steps) == (passes, separators)


@pytest.mark.parametrize(("length", "num_steps"), [(256, 32), (133, 32), (181, 27), (60, 7), (10, 3)])
def test_word_stream_passes_fit_the_passes_and_put_each_separator_before_a_stretch(length, num_steps):
    eligible, given = torch.ones(1, length, dtype=torch.bool), torch.zeros(1, length, dtype=torch.bool)
    passes, separators = word_stream_passes(eligible, given, num_steps)
    assert 1 <= int(passes.min()) and int(passes.max()) <= num_steps  # every position written, within the passes
    assert torch.equal(passes[separators], torch.ones_like(passes[separators]))
    after = separators[0].nonzero().flatten() + 1
    assert (passes[0, after] == 2).all() and len(after) == math.ceil(length / (num_steps - 1)) - 1
    assert not ((passes == 1) & ~separators)[
        0, 1:
    ].any()  # the first pass writes the separators, and the canvas's start


def test_separator_tokens_draw_a_space_or_a_line_break_at_the_models_odds(tiny_model):
    ids = word_separators(tiny_model, torch.device("cpu"))
    assert [tiny_model.tokenizer.vocab[i] for i in ids.tolist()] == [" ", "\n"]
    logits = torch.zeros(1, 4000, tiny_model.vocab_size)
    other = next(i for i in range(tiny_model.vocab_size) if i not in ids.tolist())
    logits[..., ids[0]], logits[..., other] = math.log(3.0), 9.0  # a far likelier non-separator is never drawn
    drawn = separator_tokens(logits, ids, SamplerOptions(), torch.Generator().manual_seed(0))
    assert set(drawn.unique().tolist()) <= set(ids.tolist())
    assert abs((drawn == ids[0]).float().mean().item() - 0.75) < 0.03  # 3 : 1, at temperature 1 whatever the options'
    greedy = separator_tokens(logits, ids, SamplerOptions(temperature=0.0), torch.Generator().manual_seed(0))
    assert (greedy == ids[0]).all()


def test_word_streams_write_separators_first_then_every_stretch_from_a_word_start(tiny_model):
    canvas = torch.full((2, 60), tiny_model.mask_id)
    states = list(sample(tiny_model, canvas, PLAIN, order="word_streams", num_steps=8, seed=0))
    plan, separators = word_stream_passes(canvas == tiny_model.mask_id, canvas != tiny_model.mask_id, 8)
    assert states[-1].done and states[-1].num_forward_passes == int(plan.max()) <= 8
    first = states[1].tokens[separators]
    assert set(tiny_model.tokenizer.decode(first.tolist())) <= {" ", "\n"}
    for before, after in itertools.pairwise(states):  # each position at its planned pass
        assert torch.equal(after.revealed, (plan == after.step) & before.is_masked)


def test_word_streams_without_a_space_or_a_line_break_in_the_vocabulary_is_streams(tiny_model, monkeypatch):
    canvas = torch.full((1, 40), tiny_model.mask_id)
    streams = final_state(sample(tiny_model, canvas, PLAIN, order="streams", num_steps=6, seed=1)).tokens
    monkeypatch.setattr(loop_module, "word_separators", lambda model, device: None)
    words = final_state(sample(tiny_model, canvas, PLAIN, order="word_streams", num_steps=6, seed=1)).tokens
    assert torch.equal(words, streams)


def test_a_registered_order_runs_through_sample_and_an_unknown_one_is_refused(tiny_model, monkeypatch):
    from mdlm_hf.sampling import orders

    def right_to_left(probs, candidates, generator):  # the rightmost first
        return torch.arange(candidates.size(-1), dtype=probs.dtype).expand(candidates.shape)

    monkeypatch.setattr(orders, "REVEAL_ORDERS", dict(orders.REVEAL_ORDERS))  # the toy leaves with the test
    monkeypatch.setattr("mdlm_hf.sampling.options.REVEAL_ORDERS", orders.REVEAL_ORDERS)
    orders.register_order(orders.RevealOrder("right_to_left", score=right_to_left))
    canvas = torch.full((1, 12), tiny_model.mask_id)
    states = list(sample(tiny_model, canvas, seed=0, order="right_to_left", num_steps=12, spacing=0))
    assert [int(s.revealed[0].nonzero()) for s in states[1:]] == list(range(11, -1, -1))
    assert "right_to_left" in orders_using("order_temperature") and "right_to_left" not in orders_using("prior_weight")
    with pytest.raises(ValueError, match="a reveal order named 'right_to_left' exists already"):
        orders.register_order(orders.RevealOrder("right_to_left", score=right_to_left))
    with pytest.raises(ValueError, match="needs a score or a plan, not both or neither"):
        orders.register_order(orders.RevealOrder("nothing"))
    with pytest.raises(ValueError, match=r"^order must be one of \('confidence'.*got 'upside_down'$"):
        sample(tiny_model, canvas, order="upside_down")
    with pytest.raises(ValueError, match="unknown reveal order 'upside_down'; the orders are confidence, margin"):
        orders.reveal_scores(torch.ones(1, 12, 3), torch.zeros(1, 12, dtype=torch.long), "upside_down", None)


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


SHIPPED = str(Path(__file__).resolve().parent.parent / "pretrained" / "mdlm-shakespeare-char")


@pytest.fixture(scope="module")
def shipped_exact():
    return MDLM.from_pretrained(SHIPPED, fast=False)  # exact fp32 passes: both samplers read the same logits


def romeo_canvas(model: MDLM, length: int = 96) -> torch.Tensor:
    canvas = torch.full((length,), model.mask_id)
    canvas[:7] = torch.tensor(model.tokenizer.encode("ROMEO:\n"))
    return canvas


@pytest.mark.parametrize("num_steps", [8, 32, 89])
def test_the_reference_sampler_writes_what_sample_writes_where_neither_draws_at_random(shipped_exact, num_steps):
    from mdlm_hf.sampling.reference import reference_sample, revealed_after

    canvas = romeo_canvas(shipped_exact)
    reference = reference_sample(shipped_exact, canvas, num_steps=num_steps, temperature=0)
    options = SamplerOptions(num_steps=num_steps, temperature=0, order="confidence", spacing=0, min_p=None)
    assert torch.equal(reference, final_state(sample(shipped_exact, canvas[None], options, seed=0)).tokens[0])
    assert [revealed_after(89, num_steps, s) for s in range(num_steps + 1)] == [
        int(planned_reveals(torch.tensor([89]), num_steps, s, "linear")) for s in range(num_steps + 1)
    ]


@pytest.mark.slow
def test_the_reference_sampler_and_sample_write_alike_at_temperature_one(shipped_exact):
    from mdlm_hf.sampling.reference import reference_sample

    canvas, generator = romeo_canvas(shipped_exact), torch.Generator().manual_seed(0)
    options = SamplerOptions(
        num_steps=16, temperature=1.0, order="confidence", spacing=0, min_p=None, capital_temperature_factor=1.0
    )
    decode = shipped_exact.tokenizer.decode
    ours = "".join(decode(reference_sample(shipped_exact, canvas, 16, 1.0, generator=generator))[7:] for _ in range(12))
    theirs = "".join(
        decode(final_state(sample(shipped_exact, canvas[None], options, seed=s)).tokens[0])[7:] for s in range(12)
    )
    kinds = {" ": 0.05, "\n": 0.03, "ABCDEFGHIJKLMNOPQRSTUVWXYZ": 0.03, "aeiou": 0.05, ",.;:!?'": 0.03}
    for kind, tolerance in kinds.items():
        share = [sum(char in kind for char in text) / len(text) for text in (ours, theirs)]
        assert abs(share[0] - share[1]) <= tolerance, (kind, share)
    assert ours != theirs  # both drew: different texts, alike in their characters
