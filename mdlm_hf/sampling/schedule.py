"""How many masked positions each step reveals: the schedule's counts, and the blocks of semi-autoregressive runs.

They extend the reference sampler's [count] line (reference.py), a linear schedule with exact counts: other
schedules, binomial counts (MDLM's ancestral sampler), and blocks written one after another, each its own schedule.
"""

from __future__ import annotations

import math

import torch

from mdlm_hf.sampling.options import SamplerOptions


def revealed_fraction(schedule: str, x: float) -> float:
    """Fraction of the masked positions revealed after a fraction x of the steps."""
    if schedule == "linear":
        return x
    return 1.0 - math.cos(math.pi * x / 2) if schedule == "cosine" else 1.0 - (1.0 - x) ** 2


def planned_reveals(num_masked: torch.Tensor, num_steps: int, step: int, schedule: str) -> torch.Tensor:
    """Cumulative number of positions to have revealed after `step` of `num_steps`, per row (B,): one a step first,
    so that no step is wasted, the rest by the schedule."""
    f = revealed_fraction(schedule, step / num_steps)
    at_least_one = step + torch.floor((num_masked - num_steps).clamp(min=0) * f + 0.5)
    fewer_masks = torch.floor(num_masked * f + 0.5)
    return torch.where(num_masked >= num_steps, at_least_one, fewer_masks).long()


def num_to_reveal(
    num_masked: torch.Tensor,
    remaining: torch.Tensor,
    block_steps: int,
    local_step: int,
    eligible: torch.Tensor,
    options: SamplerOptions,
    generator: torch.Generator,
) -> torch.Tensor:
    """How many positions the schedule reveals in each row at this step (B,)."""
    if local_step == block_steps:
        return remaining  # the last step of a block leaves no mask
    if options.reveal_counts == "binomial":
        before = revealed_fraction(options.schedule, (local_step - 1) / block_steps)
        after = revealed_fraction(options.schedule, local_step / block_steps)
        probability = (after - before) / (1.0 - before)
        draws = torch.rand(eligible.shape, generator=generator).to(eligible.device)
        return ((draws < probability) & eligible).sum(dim=1)
    already = num_masked - remaining
    target = planned_reveals(num_masked, block_steps, local_step, options.schedule)
    return (target - already).clamp(min=0).minimum(remaining)  # 0 where an adaptive rule ran ahead


def block_plan(is_masked: torch.Tensor, num_steps: int, block_length: int | None) -> list[tuple[slice, int]]:
    """Splits the canvas into blocks decoded one after another, with the steps each block gets."""
    T = is_masked.size(1)
    length = block_length or T
    blocks = [slice(s, min(s + length, T)) for s in range(0, T, length)]
    blocks = [b for b in blocks if is_masked[:, b].any()]
    if num_steps < len(blocks):
        raise ValueError(
            f"num_steps ({num_steps}) must be at least the number of blocks with masks ({len(blocks)}); "
            "raise num_steps or block_length"
        )
    plan = []
    for i, block in enumerate(blocks):
        steps = num_steps // len(blocks) + (1 if i < num_steps % len(blocks) else 0)
        # more steps than masks would only repeat forward passes (exact) or draw nothing most steps (binomial)
        steps = min(steps, int(is_masked[:, block].sum(dim=1).max()))
        plan.append((block, steps))
    return plan
