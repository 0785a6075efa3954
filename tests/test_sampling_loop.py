"""The sampler's core loop (mdlm_hf.sampling): given text kept, a pass a step, seeds, drawing, the reference."""

import inspect
import math
from pathlib import Path

import pytest
import torch

from mdlm_hf import MDLM, ORDERS, CharTokenizer, sample
from mdlm_hf.autoregressive import left_to_right_defaults
from mdlm_hf.pipeline import prompt_canvas, text_to_canvas
from mdlm_hf.sampling.drawing import after_capital, capital_letters, draw_tokens
from mdlm_hf.sampling.options import SamplerOptions
from mdlm_hf.sampling.schedule import planned_reveals
from mdlm_hf.sampling.state import final_state
from tests.sampler_helpers import PLAIN, canvas_with_holes


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


def test_a_step_that_reveals_nothing_reuses_the_last_pass(tiny_model):
    # binomial counts: some steps reveal none, and the unchanged canvas is not read again
    states = list(
        sample(tiny_model, torch.full((10,), tiny_model.mask_id), PLAIN, num_steps=30, reveal_counts="binomial", seed=0)
    )
    last = states[-1]
    assert last.done and last.step == last.num_steps
    pairs = zip(states[:-2], states[1:-1], strict=True)  # the canvas each step but the last starts and ends with
    changed = sum(1 for before, after in pairs if not torch.equal(before.tokens, after.tokens))
    assert last.num_forward_passes == changed + 1 < last.step


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
        drawn = draw_tokens(logits, SamplerOptions(temperature=tiny), torch.Generator().manual_seed(0))
        assert drawn.item() == 1


def test_binomial_reveal_counts_clamp_steps_to_the_masks(tiny_model):
    canvas = prompt_canvas(tiny_model, "to be", 4)
    states = list(sample(tiny_model, canvas, PLAIN, num_steps=1000, reveal_counts="binomial", seed=0))
    assert states[-1].num_steps == 4 and len(states) <= 5 and states[-1].done


def test_cut_where_sure_keeps_the_tail_where_the_model_is_unsure():
    # two positions: one sure (top 0.9), one unsure (top 0.3, a long tail of rare characters that together hold 0.6)
    sure = torch.tensor([0.9] + [0.1 / 9] * 9)
    unsure = torch.tensor([0.3, 0.1] + [0.6 / 8] * 8)
    logits = torch.stack([sure, unsure]).log()[None].expand(4000, -1, -1)  # (B, 2, V)
    drawn = {}
    for cut_where_sure in (None, 0.5):
        options = SamplerOptions.plain(min_p=0.5, cut_where_sure=cut_where_sure)
        drawn[cut_where_sure] = draw_tokens(logits, options, torch.Generator().manual_seed(0))
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
    mixed = draw_tokens(logits, options, torch.Generator().manual_seed(2), cooler)
    warm = draw_tokens(logits, options.replace(capital_temperature_factor=1.0), torch.Generator().manual_seed(2))
    cool = draw_tokens(logits, options.replace(temperature=0.6), torch.Generator().manual_seed(2))
    assert torch.equal(mixed, torch.where(cooler, cool, warm))  # the same noise: each position at its temperature
    assert not torch.equal(cool, warm)
    greedy = draw_tokens(logits, options.replace(temperature=0), torch.Generator().manual_seed(3), cooler)
    assert torch.equal(greedy, logits.argmax(dim=-1))  # temperature 0 is greedy everywhere, whatever the factor
    for bad in (0, 1.5):
        with pytest.raises(ValueError, match="capital_temperature_factor must be in"):
            SamplerOptions(capital_temperature_factor=bad)
    assert SamplerOptions.plain().capital_temperature_factor == 1.0  # the bare core draws from the model as it is
    assert left_to_right_defaults().capital_temperature_factor == 1.0


def test_the_sampler_cools_exactly_the_characters_whose_left_neighbour_is_a_capital(monkeypatch):
    from mdlm_hf.sampling import step as sampler_module

    torch.manual_seed(0)
    model = MDLM(CharTokenizer.from_text("ROMEO: JULIET, good night.\n").vocab, n_layer=1, n_head=2, n_embd=16)
    capitals = capital_letters(model, torch.device("cpu"))
    assert [c for c, flag in zip(model.tokenizer.vocab, capitals.tolist(), strict=False) if flag] == list("EIJLMORTU")
    assert not capitals[model.mask_id]
    seen, original = [], sampler_module.draw_tokens
    monkeypatch.setattr(
        sampler_module,
        "draw_tokens",
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


def test_each_extension_of_the_reference_sampler_names_the_line_it_extends():
    import re

    from mdlm_hf import windows
    from mdlm_hf.sampling import drawing, keeper, loop, orders, prior, reference, remasking, schedule, step

    lines = set(re.findall(r"\[(predict|draw|score|count|reveal)\]", inspect.getsource(reference)))
    assert lines == {"predict", "draw", "score", "count", "reveal"}
    for module in (drawing, keeper, orders, prior, remasking, schedule, windows, step, loop):
        named = set(
            re.findall(
                r"\[(\w+)\]",
                module.__doc__ + (getattr(module, "denoise_step", None).__doc__ or "")
                if module is step
                else module.__doc__,
            )
        )
        assert named and named <= lines, module.__name__
