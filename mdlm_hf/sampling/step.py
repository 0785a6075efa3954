"""One denoising step: from the model's logits, draw a candidate at every masked position and reveal some of them."""

from __future__ import annotations

import torch

from mdlm_hf.sampling.drawing import GREEDY_BELOW, after_capital, candidate_tokens, gumbel_noise, separator_tokens
from mdlm_hf.sampling.keeper import Keeper
from mdlm_hf.sampling.options import SamplerOptions
from mdlm_hf.sampling.orders import entropy_bounded_count, reveal_order, reveal_scores, spaced_picks


def denoise_step(
    logits: torch.Tensor,
    tokens: torch.Tensor,
    eligible: torch.Tensor,
    num_to_reveal: torch.Tensor,
    options: SamplerOptions,
    generator: torch.Generator,
    log_prior: torch.Tensor | None = None,
    streams_due: torch.Tensor | None = None,
    capitals: torch.Tensor | None = None,
    separators: torch.Tensor | None = None,
    separator_ids: torch.Tensor | None = None,
    keeper: Keeper | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Reveals `num_to_reveal` (B,) of the `eligible` (B, T) positions; returns (tokens, revealed, confidence).

    `log_prior` (V,) is each character's log probability with no context (`character_log_prior`); the
    scores use it when given and prior_weight > 0. Streams order reveals instead the `streams_due` (B, T) positions,
    those whose pass in its plan has come (`stream_passes`). `capitals` (V,) marks the capital letters
    (`capital_letters`), after which characters are drawn cooler. Word streams order draws a space or a line break
    (`separator_ids`, `separator_tokens`) at its plan's `separators` (B, T) (`word_stream_passes`). `keeper`
    (real_words, keep_cast) keeps the revealed characters to its rules, drawing again those that break them.
    """
    probs = logits.softmax(dim=-1)  # (B, T, V) the model's own distribution
    candidates = candidate_tokens(logits, options, generator, after_capital(tokens, capitals))  # (B, T)
    confidence = probs.gather(-1, candidates[..., None]).squeeze(-1)  # (B, T)
    if reveal_order(options.order).plan is not None:
        if streams_due is None:
            raise ValueError("streams order needs streams_due, the positions whose pass it is (stream_passes)")
        revealed = eligible & streams_due
        if separators is not None and separator_ids is not None and (separators & revealed).any():
            at = separators & revealed
            candidates = torch.where(at, separator_tokens(logits, separator_ids, options, generator), candidates)
            confidence = probs.gather(-1, candidates[..., None]).squeeze(-1)
    else:
        order = reveal_ranking(probs, candidates, eligible, num_to_reveal, options, generator, log_prior)
        rank = order.argsort(dim=-1)  # 0 = first to reveal
        count = num_to_reveal
        if options.entropy_bound is not None:
            count = count.maximum(entropy_bounded_count(probs, order, eligible, options.entropy_bound))
        revealed = (rank < count[:, None]) & eligible
    if options.threshold is not None:
        revealed |= eligible & (confidence >= options.threshold)
    if keeper is not None:
        at_separators = revealed & separators if separators is not None else None
        # a planned separator ends a word: the characters drawn with it see it, and it is kept to the rules too
        drawn = tokens if at_separators is None else torch.where(at_separators, candidates, tokens)
        candidates = keeper.keep(logits, drawn, revealed, candidates, options, generator, at_separators)
        confidence = probs.gather(-1, candidates[..., None]).squeeze(-1)
    return torch.where(revealed, candidates, tokens), revealed, confidence


def reveal_ranking(
    probs: torch.Tensor,
    candidates: torch.Tensor,
    eligible: torch.Tensor,
    num_to_reveal: torch.Tensor,
    options: SamplerOptions,
    generator: torch.Generator,
    log_prior: torch.Tensor | None,
) -> torch.Tensor:
    """A scored order's ranking (B, T): each row's positions, the first to reveal first, eligible ones before the
    rest; with `spacing`, the kept-apart picks of this step's `num_to_reveal` (B,) before the others."""
    scores = reveal_scores(probs, candidates, options.order, generator)
    if log_prior is not None and options.prior_weight > 0:
        # plain confidence reveals common characters (spaces, e, t) first and rarely commits to the rare ones that
        # carry structure (capitals, punctuation, line breaks); judging each candidate by how far the context
        # lifted it above its prior restores them
        scores = scores - options.prior_weight * log_prior.to(scores.dtype)[candidates]
    if options.order_temperature >= GREEDY_BELOW:
        # Gumbel-top-k: the k highest perturbed scores are k draws without replacement, each position
        # chosen with probability proportional to exp(score / order_temperature); 0 keeps the strict order
        scores = scores.double() / options.order_temperature + gumbel_noise(scores, generator)
    scores = scores.masked_fill(~eligible, float("-inf"))
    order = scores.argsort(dim=-1, descending=True, stable=True)  # (B, T) positions, first to reveal first
    if options.spacing > 0:
        # characters revealed in one step are drawn independently, so neighbours revealed together need not agree
        # ("thot"): the kept-apart picks go first, the rest only fill what the step still has to reveal
        picked = spaced_picks(order, eligible, num_to_reveal, options.spacing)
        order = order.gather(-1, picked.gather(-1, order).long().argsort(dim=-1, descending=True, stable=True))
    return order
