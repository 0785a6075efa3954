"""The reveal orders: which masked positions a step reveals, by a score (confidence, margin, entropy, random, left to
right) or by a plan (streams, word streams: stretches written left to right in parallel). They extend the
reference sampler's [score] line (reference.py). `REVEAL_ORDERS` lists each once; everything else reads it
(docs/sampler.md, "Reveal orders"; why streams are built as they are: docs/decisions.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

# (probs (B, T, V), drawn (B, T), generator) -> how much each position wants to be revealed next (B, T)
Score = Callable[[torch.Tensor, torch.Tensor, torch.Generator], torch.Tensor]
# (eligible (B, T), given (B, T), num_steps, separator ids or None) -> each position's pass (B, T), and the
# separators drawn in the first pass (B, T) or None
Plan = Callable[[torch.Tensor, torch.Tensor, int, torch.Tensor | None], tuple[torch.Tensor, torch.Tensor | None]]


@dataclass(frozen=True)
class RevealOrder:
    """One reveal order: a score that ranks the masked positions at every step, or a plan made at a block's start
    that says which pass writes each position (exactly one of the two)."""

    name: str
    # log scale, higher first, so that order_temperature means the same for every scored order: position i is
    # drawn with probability proportional to exp(score_i / order_temperature)
    score: Score | None = None
    plan: Plan | None = None
    by_belief: bool = False  # ranks by the model's beliefs: prior_weight reweighs its scores
    at_random: bool = False  # picks positions at random: at temperature 0 a new seed still gives another text


REVEAL_ORDERS: dict[str, RevealOrder] = {}


def register_order(order: RevealOrder) -> RevealOrder:
    """Adds `order` to REVEAL_ORDERS (a ValueError for a name taken, or not exactly one of a score and a plan)."""
    if order.name in REVEAL_ORDERS:
        raise ValueError(f"a reveal order named {order.name!r} exists already")
    if (order.score is None) == (order.plan is None):
        raise ValueError(f"reveal order {order.name!r} needs a score or a plan, not both or neither")
    REVEAL_ORDERS[order.name] = order
    return order


def reveal_order(name: str) -> RevealOrder:
    """The registered order named `name`; any other name is a ValueError, never a silent default."""
    if name not in REVEAL_ORDERS:
        raise ValueError(f"unknown reveal order {name!r}; the orders are {', '.join(REVEAL_ORDERS)}")
    return REVEAL_ORDERS[name]


def confidence_score(probs: torch.Tensor, drawn: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """The log probability of the character drawn at each position."""
    return probs.gather(-1, drawn[..., None]).squeeze(-1).log()


def margin_score(probs: torch.Tensor, drawn: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """The log of the gap between each position's two likeliest characters."""
    top2 = probs.topk(2, dim=-1).values
    return (top2[..., 0] - top2[..., 1]).log()


def entropy_score(probs: torch.Tensor, drawn: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Each position's negative entropy, log(1 / perplexity): the surest first."""
    return (probs * probs.clamp(min=1e-12).log()).sum(dim=-1)


def random_score(probs: torch.Tensor, drawn: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """A uniform draw per position."""
    return torch.rand(drawn.shape, generator=generator).to(probs.device)


def left_to_right_score(probs: torch.Tensor, drawn: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Minus each position: the leftmost first."""
    positions = torch.arange(drawn.size(-1), device=probs.device, dtype=probs.dtype)
    return -positions.expand(drawn.shape)


def spaced_picks(order: torch.Tensor, eligible: torch.Tensor, count: torch.Tensor, spacing: int) -> torch.Tensor:
    """Greedy non-maximum suppression: walking each row's positions in `order` (B, T), best first, picks up
    to `count` (B,) eligible ones, each ruling out the positions within `spacing` of it; a (B, T) mask."""
    T = order.size(-1)
    rows, columns = [], []
    per_row = zip(order.tolist(), eligible.tolist(), count.tolist(), strict=True)
    for row, (positions, is_eligible, wanted) in enumerate(per_row):
        ruled_out = [False] * T  # plain lists: a few hundred scalar checks are cheaper than tensor ops
        for i in positions:
            if wanted == 0:
                break
            if is_eligible[i] and not ruled_out[i]:
                rows.append(row)
                columns.append(i)
                wanted -= 1
                low, high = max(0, i - spacing), min(T, i + spacing + 1)
                ruled_out[low:high] = [True] * (high - low)
    picked = torch.zeros_like(eligible)
    picked[rows, columns] = True
    return picked


def entropy_bounded_count(
    probs: torch.Tensor, order: torch.Tensor, eligible: torch.Tensor, bound: float
) -> torch.Tensor:
    """How many of each row's eligible positions, taken in `order` (B, T), fit before the summed entropy of their
    predictions `probs` (B, T, V) exceeds `bound` nats (B,): the EB-sampler's adaptive step size.

    Positions revealed together are drawn independently, an error bounded by their summed entropy. (The paper bounds
    the sum less its largest term, which admits the first position; here the schedule's own count does that.)
    """
    entropy = -(probs * probs.clamp(min=1e-12).log()).sum(dim=-1)  # (B, T) nats
    in_order = eligible.gather(-1, order)  # (B, T) eligible positions first: the order ranks the rest last
    walked = entropy.gather(-1, order).masked_fill(~in_order, 0.0).cumsum(dim=-1)
    return ((walked <= bound) & in_order).sum(dim=-1)


def place_in_stretch(offset: torch.Tensor, length: torch.Tensor, stretches: torch.Tensor) -> torch.Tensor:
    """1-based place of each `offset` (B, T) in its stretch, a run of `length` (B, T) cut into `stretches` (B, T)
    stretches of equal length within one: stretch i starts at floor(i * length / stretches)."""
    length = length.clamp(min=1)
    stretch = ((offset + 1) * stretches - 1).div(length, rounding_mode="floor")  # the largest i with start_i <= offset
    return offset - (stretch * length).div(stretches, rounding_mode="floor") + 1


def stream_passes(eligible: torch.Tensor, given: torch.Tensor, num_steps: int) -> torch.Tensor:
    """Streams order's plan (B, T): the pass, 1 to `num_steps`, that writes each `eligible` (B, T) position (0 for
    the others), `given` (B, T) marking the characters already there (a prompt, a template, earlier windows).

    Each run of eligible positions is cut into as few stretches of equal length (within one) as the passes allow,
    written left to right, one character of each a pass; mirrored for a run with given text on its right only; a
    run between given text that fits in twice the passes is written from both ends, meeting in its middle.
    """
    T = eligible.size(-1)
    positions = torch.arange(T, device=eligible.device).expand_as(eligible)  # (B, T)
    before, after = position_before_run(eligible), position_after_run(eligible)  # the positions around the run
    padded = F.pad(given, (1, 1))  # (B, T + 2): the canvas's edges are not given
    left_given, right_given = padded.gather(-1, before + 1), padded.gather(-1, after + 1)  # (B, T)
    offset, length = positions - before - 1, after - before - 1  # within the run; the run's length
    from_end = length - 1 - offset
    inward = offset.minimum(from_end)  # how far from the nearer end
    alternate = 2 * inward + 1 + (offset > from_end).long()  # left end, right end, next left, ... (middle last)
    both_ends = torch.where(length <= num_steps, alternate, inward + 1)
    stretches = length.clamp(min=1).add(num_steps - 1).div(num_steps, rounding_mode="floor")  # ceil(length / passes)
    passes = torch.where(
        right_given & ~left_given,
        place_in_stretch(from_end, length, stretches),
        place_in_stretch(offset, length, stretches),
    )
    passes = torch.where(left_given & right_given & (length <= 2 * num_steps), both_ends, passes)
    return passes.masked_fill(~eligible, 0)


def word_separators(model: nn.Module, device: torch.device) -> torch.Tensor | None:
    """(S,) the ids of a space and a line break in `model`'s vocabulary, those it has (None: neither, or no tokenizer;
    word_streams order then plans as streams order)."""
    vocab = getattr(getattr(model, "tokenizer", None), "vocab", "")
    ids = [vocab.index(c) for c in " \n" if c in vocab]
    return torch.tensor(ids, device=device) if ids else None


def word_stream_passes(
    eligible: torch.Tensor, given: torch.Tensor, num_steps: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Word streams order's plan (B, T) and its separators (B, T): streams order's plan for one pass fewer, the
    character before each stretch's first drawn in the first pass as a space or a line break (`separator_tokens`),
    the rest a pass later. So every stretch begins a word, drawn knowing whether it begins a line. A run that gets
    no separator (written from both ends, or one stretch) keeps streams order's plan."""
    plain = stream_passes(eligible, given, num_steps)
    if num_steps < 2:
        return plain, torch.zeros_like(eligible)
    shorter = stream_passes(eligible, given, num_steps - 1)
    run = position_before_run(eligible) + 1  # (B, T) 0..T: the run's id
    cut = run_any(stretch_starts_after_stretches(plain, eligible), run)  # runs the plan cuts into stretches
    separators = cut & F.pad(stretch_starts_after_stretches(shorter, eligible), (0, 1))[:, 1:]  # before each start
    shifted = torch.where(separators, 1, shorter + 1)
    # a run whose shorter plan has no stretch to begin (all of length one) keeps the plan: no pass left empty
    return torch.where(run_any(separators, run), shifted, plain).masked_fill(~eligible, 0), separators


def position_before_run(eligible: torch.Tensor) -> torch.Tensor:
    """(B, T): for each position, the last position at or before it that is not `eligible` (-1: none)."""
    positions = torch.arange(eligible.size(-1), device=eligible.device).expand_as(eligible)
    return torch.where(eligible, -1, positions).cummax(dim=-1).values


def position_after_run(eligible: torch.Tensor) -> torch.Tensor:
    """(B, T): for each position, the first position at or after it that is not `eligible` (T: none)."""
    return eligible.size(-1) - 1 - position_before_run(eligible.flip(-1)).flip(-1)


def stretch_starts_after_stretches(passes: torch.Tensor, eligible: torch.Tensor) -> torch.Tensor:
    """(B, T) bool: the first characters of a streams plan's left-to-right stretches that follow another stretch."""
    left = F.pad(passes, (1, 0))[:, :-1]  # (B, T) the pass of each position's left neighbour
    right = F.pad(passes, (0, 1))[:, 1:]
    return eligible & (passes == 1) & (left > 1) & (right == 2)


def run_any(flags: torch.Tensor, run: torch.Tensor) -> torch.Tensor:
    """(B, T) bool: whether any position of each position's run (`run` (B, T) ids in 0..T) is flagged."""
    found = torch.zeros(flags.size(0), flags.size(1) + 1, dtype=torch.long, device=flags.device)
    return found.scatter_reduce(1, run, flags.long(), reduce="amax").gather(1, run).bool()


def streams_plan(
    eligible: torch.Tensor, given: torch.Tensor, num_steps: int, separator_ids: torch.Tensor | None
) -> tuple[torch.Tensor, None]:
    """Streams order's plan (`stream_passes`), no separators."""
    return stream_passes(eligible, given, num_steps), None


def word_streams_plan(
    eligible: torch.Tensor, given: torch.Tensor, num_steps: int, separator_ids: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Word streams order's plan and separators (`word_stream_passes`); streams order's for a model without them."""
    if separator_ids is None:
        return streams_plan(eligible, given, num_steps, separator_ids)
    return word_stream_passes(eligible, given, num_steps)


for _order in (
    RevealOrder("confidence", score=confidence_score, by_belief=True),
    RevealOrder("margin", score=margin_score, by_belief=True),
    RevealOrder("entropy", score=entropy_score, by_belief=True),
    RevealOrder("random", score=random_score, at_random=True),
    RevealOrder("left_to_right", score=left_to_right_score),
    RevealOrder("streams", plan=streams_plan),
    RevealOrder("word_streams", plan=word_streams_plan),
):
    register_order(_order)
