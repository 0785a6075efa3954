import math

import pytest
import torch

from mdlm_hf import MDLM, ORDERS, sample
from mdlm_hf.sampler import SamplerOptions, denoise_step, final_state, planned_reveals, prompt_canvas, text_to_canvas


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
    states = list(sample(tiny_model, canvas, num_steps=8, order=order, block_length=block_length, seed=0))
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
    states = list(sample(tiny_model, canvas, num_steps=num_steps, seed=0))
    assert len(states) == num_steps + 1
    assert [s.num_forward_passes for s in states] == list(range(num_steps + 1))
    assert all(s.revealed.sum() >= 1 for s in states[1:])


def test_more_steps_than_masks_is_clamped(tiny_model):
    canvas = prompt_canvas(tiny_model.tokenizer, "to be", 5, tiny_model.block_size)
    states = list(sample(tiny_model, canvas, num_steps=50, seed=0))
    assert states[-1].num_steps == 5 and states[-1].num_forward_passes == 5 and states[-1].done


def test_steps_that_change_nothing_reuse_the_logits(tiny_model):
    canvas = torch.full((20,), tiny_model.mask_id)
    states = list(sample(tiny_model, canvas, num_steps=40, reveal_counts="binomial", seed=0))
    assert len(states) <= 41 and states[-1].done  # may finish early when the draws reveal everything
    # a pass happens at the first step and after every step that revealed something
    expected_passes = 1 + sum(1 for s in states[1:-1] if s.revealed.any())
    assert states[-1].num_forward_passes == expected_passes < len(states) - 1


def test_time_conditioned_model_never_reuses_logits(tiny_model):
    model = MDLM(tiny_model.tokenizer.vocab, n_layer=1, n_head=2, n_embd=32, block_size=32, time_conditioning=True)
    states = list(sample(model, torch.full((10,), model.mask_id), num_steps=30, reveal_counts="binomial", seed=0))
    assert states[-1].done and states[-1].num_forward_passes == states[-1].step  # t changes every step


def test_left_to_right_reveals_strictly_left_to_right(tiny_model):
    canvas = canvas_with_holes(tiny_model)
    last = -1
    for state in sample(tiny_model, canvas, num_steps=10, order="left_to_right", seed=0):
        positions = state.revealed[0].nonzero().flatten().tolist()
        if positions:
            assert positions[0] > last and positions == sorted(positions)
            last = positions[-1]


def test_same_seed_same_text_and_different_seed_differs(tiny_model):
    canvas = torch.full((48,), tiny_model.mask_id)
    a = final_state(sample(tiny_model, canvas, num_steps=8, seed=3)).tokens
    b = final_state(sample(tiny_model, canvas, num_steps=8, seed=3)).tokens
    c = final_state(sample(tiny_model, canvas, num_steps=8, seed=4)).tokens
    assert torch.equal(a, b) and not torch.equal(a, c)


@pytest.mark.parametrize("order", ["confidence", "left_to_right"])
def test_temperature_zero_is_argmax_decoding(tiny_model, order):
    canvas = canvas_with_holes(tiny_model)
    previous = canvas[None]
    for state in list(sample(tiny_model, canvas, num_steps=6, order=order, temperature=0.0, seed=0))[1:]:
        argmax = tiny_model(previous).argmax(dim=-1)
        assert torch.equal(state.tokens[state.revealed], argmax[state.revealed])
        previous = state.tokens


def test_temperature_zero_ignores_the_seed(tiny_model):
    canvas = torch.full((32,), tiny_model.mask_id)
    a = final_state(sample(tiny_model, canvas, num_steps=8, temperature=0, seed=1)).tokens
    b = final_state(sample(tiny_model, canvas, num_steps=8, temperature=0, seed=2)).tokens
    assert torch.equal(a, b)


def test_top_k_one_is_greedy(tiny_model):
    canvas = torch.full((32,), tiny_model.mask_id)
    greedy = final_state(sample(tiny_model, canvas, num_steps=8, temperature=0)).tokens
    top1 = final_state(sample(tiny_model, canvas, num_steps=8, temperature=1.0, top_k=1, seed=5)).tokens
    assert torch.equal(greedy, top1)


def test_threshold_mode_can_finish_in_fewer_steps(tiny_model):
    canvas = torch.full((40,), tiny_model.mask_id)
    # a threshold every candidate clears reveals everything at the first step
    states = list(sample(tiny_model, canvas, num_steps=20, threshold=1e-9, seed=0))
    assert len(states) == 2 and states[-1].done and states[-1].num_forward_passes == 1
    # an unreachable threshold falls back to the schedule, at least one per step
    states = list(sample(tiny_model, canvas, num_steps=20, threshold=1.0, seed=0))
    assert len(states) == 21 and states[-1].done


def test_batched_canvases(tiny_model):
    canvas = torch.stack([canvas_with_holes(tiny_model, seed=s) for s in range(3)])
    state = final_state(sample(tiny_model, canvas, num_steps=7, seed=0))
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


def first_reveal_frequencies(confidences, order_temperature, rows=20000):
    """How often each of a row's positions is revealed first, over many rows of one denoise_step."""
    T = len(confidences)
    top = torch.tensor(confidences)[None, :, None].expand(rows, T, 1)
    probs = torch.cat([top, ((1 - top) / 9).expand(rows, T, 9)], dim=-1)  # greedy candidate: char 0, prob top
    logits = probs.log()
    tokens = torch.full((rows, T), 10)
    options = SamplerOptions(order="confidence", temperature=0.0, order_temperature=order_temperature)
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
    for order in ORDERS:
        state = final_state(sample(tiny_model, canvas, num_steps=8, order=order, order_temperature=0.5, seed=1))
        assert not state.is_masked.any()
        given = canvas != tiny_model.mask_id
        assert torch.equal(state.tokens[0][given], canvas[given])


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
    (dict(num_steps=2, block_length=8), "number of blocks"),
]


@pytest.mark.parametrize("options,message", BAD_OPTIONS)
def test_bad_options_raise_clear_errors(tiny_model, options, message):
    with pytest.raises(ValueError, match=message):
        sample(tiny_model, torch.full((40,), tiny_model.mask_id), **options)


def test_bad_canvases_and_strings(tiny_model):
    mask_id = tiny_model.mask_id
    with pytest.raises(ValueError, match="block_size"):
        sample(tiny_model, torch.full((tiny_model.block_size + 1,), mask_id))
    with pytest.raises(ValueError, match="block_size"):
        tiny_model.generate(tiny_model.block_size + 1)
    with pytest.raises(ValueError, match="block_size"):
        tiny_model.complete("to be", tiny_model.block_size)
    with pytest.raises(ValueError, match="no masked position"):
        sample(tiny_model, torch.zeros(5, dtype=torch.long))
    with pytest.raises(ValueError, match="ids must lie"):
        sample(tiny_model, torch.full((5,), mask_id + 1))
    with pytest.raises(ValueError, match="length must be"):
        tiny_model.complete("to be", 0)
    with pytest.raises(ValueError, match="outside the model's vocabulary: 'Z', 'é'"):
        tiny_model.complete("toZé", 5)
    with pytest.raises(ValueError, match="no blank"):
        tiny_model.infill("to be or not")
    with pytest.raises(ValueError, match="empty"):
        tiny_model.infill("")
    with pytest.raises(ValueError, match="single character"):
        text_to_canvas(tiny_model.tokenizer, "to __", blank="__")
