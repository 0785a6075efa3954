"""Taking back characters (ReMDM-conf): after a step, the least confident earlier draws are masked again.

It follows the reference sampler's [reveal] line (reference.py), where a revealed character stays for good.
"""

from __future__ import annotations

import torch

from mdlm_hf.sampling.options import SamplerOptions


def remask_picks(
    confidence: torch.Tensor,
    may_remask: torch.Tensor,
    revealed: torch.Tensor,
    num_scheduled: torch.Tensor,
    still_masked: torch.Tensor,
    options: SamplerOptions,
) -> torch.Tensor:
    """The earlier characters (B, T) to mask again after a step: remask_ratio per character the schedule revealed
    (`num_scheduled` (B,)), the least confident of `may_remask`, none in a row with no mask left (`still_masked`)."""
    # in proportion to the schedule's reveals only: an adaptive rule's extras are net progress, a row ahead of the
    # schedule is not held back (so it can end early), and a filled row is done
    scheduled = revealed.sum(dim=1).minimum(num_scheduled)
    num_to_remask = torch.floor(scheduled * options.remask_ratio + 0.5).long() * still_masked
    scores = confidence.masked_fill(~may_remask, float("inf"))
    rank = scores.argsort(dim=-1, stable=True).argsort(dim=-1)  # 0 = least confident
    return (rank < num_to_remask[:, None]) & may_remask
