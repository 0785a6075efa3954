"""One denoising step: from the model's logits, draw a character at every masked position and reveal some of them."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from mdlm_hf.sampling.drawing import GREEDY_BELOW, after_capital, draw_tokens, gumbel_noise, separator_tokens
from mdlm_hf.sampling.keeper import Keeper
from mdlm_hf.sampling.options import SamplerOptions
from mdlm_hf.sampling.orders import entropy_bounded_count, reveal_order, spaced_picks

UNRANKED = -1e30  # below any log probability, above an ineligible position's -inf


@dataclass
class DenoisingPass:
    """What one denoising step reads: the model's logits for the canvas and what the run knows of its rules."""

    logits: torch.Tensor  # (B, T, V) the model's prediction for the canvas
    tokens: torch.Tensor  # (B, T) the canvas, mask_id where masked
    eligible: torch.Tensor  # (B, T) bool: the masked positions this step may reveal (its block's)
    count: torch.Tensor  # (B,) how many of them the schedule reveals
    options: SamplerOptions
    generator: torch.Generator
    # each character's log probability with no context (`character_log_prior`), used when prior_weight > 0
    log_prior: torch.Tensor | None = None
    # streams orders: the positions whose pass in the plan has come (B, T), and the planned word separators (B, T)
    # drawn as a space or line break among `separator_ids` (V',)
    streams_due: torch.Tensor | None = None
    separators: torch.Tensor | None = None
    separator_ids: torch.Tensor | None = None
    capitals: torch.Tensor | None = None  # (V,) the capital letters, after which characters are drawn cooler
    keeper: Keeper | None = None  # real_words, keep_cast: keeps the revealed characters to the rules


def denoise_step(step: DenoisingPass) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Reveals `step.count` of the eligible positions; returns (tokens, revealed, confidence), each (B, T).

    The reference sampler's pass (mdlm_hf/sampling/reference.py), with its options: [draw] with min-p, top-p and
    the capital factor (`draw_tokens`); [score] by the order (`reveal_ranking`) or, for a planned order, the
    streams' plan; [count] raised by entropy_bound and threshold; [reveal] kept to the rules by the keeper.
    """
    logits, tokens, eligible, options, generator = step.logits, step.tokens, step.eligible, step.options, step.generator
    probs = logits.softmax(dim=-1)  # (B, T, V) the model's own distribution
    drawn = draw_tokens(logits, options, generator, after_capital(tokens, step.capitals))  # (B, T) [draw]
    at_separators = None  # (B, T) a planned order's word separators revealed now
    if reveal_order(options.order).plan is not None:  # [score]: the plan says which positions' pass it is
        revealed = eligible & step.streams_due
        if step.separators is not None and step.separator_ids is not None:
            at_separators = revealed & step.separators
            if at_separators.any():
                separators = separator_tokens(logits, step.separator_ids, options, generator)
                drawn = torch.where(at_separators, separators, drawn)
    else:  # [score] and [reveal]: the `count` best-ranked eligible positions
        order = reveal_ranking(probs, drawn, step)
        count = step.count
        if options.entropy_bound is not None:  # [count]: as many as the entropy bound allows, at least the schedule's
            count = count.maximum(entropy_bounded_count(probs, order, eligible, options.entropy_bound))
        revealed = (order.argsort(dim=-1) < count[:, None]) & eligible  # argsort: each position's rank, 0 first
    confidence = probs.gather(-1, drawn[..., None]).squeeze(-1)  # (B, T) p(drawn)
    if options.threshold is not None:  # [count]: every draw at least this sure, too
        revealed |= eligible & (confidence >= options.threshold)
    if step.keeper is not None:
        # a planned separator ends a word: the characters drawn with it see it, and it is kept to the rules too
        seen = tokens if at_separators is None else torch.where(at_separators, drawn, tokens)
        drawn = step.keeper.keep(logits, seen, revealed, drawn, options, generator, at_separators)
        confidence = probs.gather(-1, drawn[..., None]).squeeze(-1)
    return torch.where(revealed, drawn, tokens), revealed, confidence


def reveal_ranking(probs: torch.Tensor, drawn: torch.Tensor, step: DenoisingPass) -> torch.Tensor:
    """A scored order's ranking (B, T) of the step's positions, the first to reveal first, eligible ones before the
    rest; with `spacing`, the kept-apart picks of the step's count before the others."""
    options, generator, eligible = step.options, step.generator, step.eligible
    scores = reveal_order(options.order).score(probs, drawn, generator)  # the reference's [score], by the order
    if step.log_prior is not None and options.prior_weight > 0:
        # each candidate judged by how far the context lifted it above its prior: rare characters go sooner
        scores = scores - options.prior_weight * step.log_prior.to(scores.dtype)[drawn]
    if options.order_temperature >= GREEDY_BELOW:
        # Gumbel-top-k: the k highest perturbed scores are k draws without replacement, by exp(score / temperature)
        scores = scores.double() / options.order_temperature + gumbel_noise(scores, generator)
    # a score of -inf (a margin of 0 between two tied characters, common in bf16) or NaN must still rank an eligible
    # position before every ineligible one, or the last step would leave it masked
    scores = scores.nan_to_num(nan=UNRANKED, neginf=UNRANKED).masked_fill(~eligible, float("-inf"))
    order = scores.argsort(dim=-1, descending=True, stable=True)  # (B, T) positions, first to reveal first
    if options.spacing > 0:
        # characters revealed in one step are drawn independently, so neighbours revealed together need not agree
        # ("thot"): the kept-apart picks go first, the rest only fill what the step still has to reveal
        picked = spaced_picks(order, eligible, step.count, options.spacing)
        order = order.gather(-1, picked.gather(-1, order).long().argsort(dim=-1, descending=True, stable=True))
    return order
