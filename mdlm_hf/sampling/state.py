"""`SamplerState`: the canvas as a sampling run leaves it after each step, which every writer yields."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from mdlm_hf.sampling.keeper import Keeper


@dataclass
class SamplerState:
    """The canvas after `step` of `num_steps` denoising steps (step 0: before any)."""

    tokens: torch.Tensor  # (B, T) ids, mask_id where still masked
    revealed: torch.Tensor  # (B, T) bool, positions revealed by this step
    remasked: torch.Tensor  # (B, T) bool, generated positions masked again by this step (remask_ratio > 0)
    confidence: torch.Tensor  # (B, T) model probability of each revealed character when revealed; NaN elsewhere
    is_given: torch.Tensor  # (B, T) bool, positions fixed by the caller, never changed
    step: int
    num_steps: int
    num_forward_passes: int  # passes over the canvas by the denoising steps so far
    mask_id: int
    # (start, end) of the positions the model reads at this step: the whole canvas when it fits the model's
    # context, else the window being written (mdlm_hf/windows.py); at step 0 the first window
    window: tuple[int, int] | None = None
    # real_words, keep_cast: (B,) how many characters each row drew without the rules so far, at a dead end (no
    # character kept its word in the list, or its line to a play's layout); None with both off
    word_fallbacks: torch.Tensor | None = None
    # the rules the run keeps to ("real_words", "keep_cast"), and with keep_cast, per row the plays whose cast its
    # headings may still come from (one, once a heading is written)
    kept_rules: tuple[str, ...] = ()
    plays: list[list[str]] | None = None

    def with_fallbacks(self, keeper: Keeper | None) -> SamplerState:
        """This state with the rules, dead ends and plays so far of `keeper` (None: a run without rules)."""
        return self if keeper is None else replace(self, **keeper.report())

    @property
    def is_masked(self) -> torch.Tensor:
        """(B, T) bool: the positions still masked."""
        return self.tokens == self.mask_id

    @property
    def done(self) -> bool:
        """Whether no position is masked any more."""
        return not bool(self.is_masked.any())


def final_state(states: Iterator[SamplerState]) -> SamplerState:
    """Runs a sampler generator to the end and returns its last state (every writer yields its start first)."""
    return deque(states, maxlen=1)[0]
