"""The reveal rule's adaptive parts (mdlm_hf.sampling): remasking, the prior weight, and the entropy bound."""

import itertools
import math

import pytest
import torch

from mdlm_hf import sample
from mdlm_hf.sampling.options import SamplerOptions, orders_using
from mdlm_hf.sampling.prior import character_log_prior
from mdlm_hf.sampling.schedule import planned_reveals
from mdlm_hf.sampling.state import final_state
from mdlm_hf.sampling.step import DenoisingPass, denoise_step
from tests.sampler_helpers import PLAIN, canvas_with_holes
from tests.stubs import StubModel


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
        _, revealed, _ = denoise_step(DenoisingPass(probs.log(), tokens, eligible, one, options, generator, log_prior))
        return revealed[0].nonzero().item()

    assert first_revealed(0.0) == 0  # plain score: the common character
    assert first_revealed(1.0) == 1  # log(0.6 / 0.01) > log(0.9 / 0.5): the rare one


def test_character_log_prior_is_a_distribution_close_to_the_model_with_nothing_known(tiny_model):
    log_prior = character_log_prior(tiny_model, 16, torch.device("cpu"))
    assert log_prior.shape == (tiny_model.mask_id + 1,) and math.isclose(log_prior.exp().sum().item(), 1, rel_tol=1e-5)
    with torch.no_grad():
        probs = tiny_model(torch.full((1, 16), tiny_model.mask_id)).softmax(dim=-1)
    assert torch.allclose(log_prior.exp(), probs[0].mean(dim=0), atol=1e-6)


@pytest.mark.parametrize("holes", [False, True])
def test_the_prior_comes_from_the_first_step_in_free_generation_else_from_one_extra_row(tiny_model, monkeypatch, holes):
    import mdlm_hf.sampling.loop as sampler

    priors, forward_rows = [], []
    real_step, real_forward = sampler.denoise_step, tiny_model.forward
    monkeypatch.setattr(sampler, "denoise_step", lambda step: priors.append(step.log_prior) or real_step(step))
    monkeypatch.setattr(tiny_model, "forward", lambda x: forward_rows.append(x.size(0)) or real_forward(x))
    canvas = canvas_with_holes(tiny_model) if holes else torch.full((40,), tiny_model.mask_id)
    final_state(sample(tiny_model, torch.stack([canvas, canvas]), PLAIN, num_steps=4, prior_weight=0.5, seed=0))
    expected = character_log_prior(tiny_model, 40, torch.device("cpu"))
    assert all(torch.allclose(prior, expected, atol=1e-5) for prior in priors) and len(priors) == 4
    assert forward_rows[: 1 + holes] == ([1, 2] if holes else [2])  # the extra one-row pass only with holes


@pytest.mark.parametrize("order", orders_using("prior_weight"))
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


class ConfidentModel(StubModel):
    """Predicts character 0 with near certainty everywhere: every position's entropy is about 0."""

    def __init__(self, vocab_size: int = 10, block_size: int = 64) -> None:
        super().__init__(vocab_size, block_size)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        logits = torch.zeros(*tokens.shape, self.vocab_size)
        logits[..., 0] = 30.0
        logits[..., self.mask_id] = float("-inf")
        return logits


class UnsureModel(ConfidentModel):
    """Predicts character 0 with probability 0.9 everywhere: every position has the same small entropy."""

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
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
