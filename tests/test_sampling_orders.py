"""Reveal orders and schedules (mdlm_hf.sampling.orders): streams' and word streams' plans, spacing, and more."""

import itertools
import math

import pytest
import torch
import torch.nn.functional as F

import mdlm_hf.sampling.loop as loop_module
from mdlm_hf import ORDERS, sample
from mdlm_hf.sampling.drawing import separator_tokens
from mdlm_hf.sampling.options import STREAM_ORDERS, SamplerOptions, orders_using
from mdlm_hf.sampling.orders import stream_passes, word_separators, word_stream_passes
from mdlm_hf.sampling.schedule import planned_reveals
from mdlm_hf.sampling.state import final_state
from mdlm_hf.sampling.step import DenoisingPass, denoise_step
from tests.sampler_helpers import PLAIN, canvas_with_holes


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


@pytest.mark.parametrize("schedule", ["linear", "cosine"])
def test_schedules_reveal_everything_at_least_one_per_step(schedule):
    num_masked = torch.tensor([10, 64, 200])
    counts = torch.stack([planned_reveals(num_masked, 10, s, schedule) for s in range(11)])
    assert torch.equal(counts[0], torch.zeros(3, dtype=torch.long)) and torch.equal(counts[-1], num_masked)
    assert (counts.diff(dim=0) >= 1).all()
    if schedule == "cosine":  # few early, many late
        assert counts[1, 2] < counts[10, 2] - counts[9, 2]


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
    one_each = torch.ones(rows, dtype=torch.long)
    _, revealed, _ = denoise_step(DenoisingPass(logits, tokens, eligible, one_each, options, generator))
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


def test_spacing_picks_best_first_ruling_out_neighbours_then_fills_the_step():
    top = torch.tensor([0.9, 0.8, 0.1, 0.7, 0.6])[None, :, None]
    logits = torch.cat([top, (1 - top) / 2, (1 - top) / 2], dim=-1).log()  # greedy candidate: char 0
    tokens, eligible = torch.full((1, 5), 3), torch.ones(1, 5, dtype=torch.bool)

    def revealed(count, spacing, eligible=eligible):
        options = PLAIN.replace(temperature=0.0, spacing=spacing)
        generator = torch.Generator().manual_seed(0)
        step = DenoisingPass(logits, tokens, eligible, torch.tensor([count]), options, generator)
        _, revealed, _ = denoise_step(step)
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
        orders.reveal_order("upside_down")


@pytest.mark.parametrize("order", ["margin", "confidence", "entropy"])
def test_an_eligible_position_with_a_score_of_minus_infinity_is_still_revealed(order):
    # two tied likeliest characters give a margin of 0, a log score of -inf: tied with the ineligible positions,
    # the tie went to position order and the last step of a margin run on bf16 weights left a mask
    probs = torch.tensor([[[0.9, 0.1, 0.0], [0.9, 0.1, 0.0], [0.5, 0.5, 0.0], [0.0, 0.0, 1.0]]])
    logits = probs.log()
    tokens = torch.tensor([[0, 0, 3, 3]])
    eligible = torch.tensor([[False, False, True, True]])
    options = PLAIN.replace(order=order, temperature=0.0, spacing=0)
    step = DenoisingPass(logits, tokens, eligible, torch.tensor([2]), options, torch.Generator().manual_seed(0))
    _, revealed, _ = denoise_step(step)
    assert revealed[0].tolist() == [False, False, True, True]
