"""Past the context: the windows that a canvas longer than the model's block_size is filled (or scored) through.
They extend the reference sampler's loop and its [predict] line (mdlm_hf/sampling/reference.py) past the context.

The model reads `block_size` characters at a time. A longer canvas is filled window by window, left to right:
each window starts `window_context` characters before the first character still masked, so the last characters
written (or given) are its context, and the sampler core fills that window's masks. Given text to the right is
seen too: when a blank ends inside the window and the canvas has given text beyond it, the window fills only up to
its last given character, and the masks after it wait for a window that reaches the text that follows them.

The plan depends only on where the masks are, never on the characters drawn, so it is made before the first step
(the steps are known up front: progress bars, replay) and every row of a batch shares it.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

import torch

Item = TypeVar("Item")

# the most characters one canvas (prompt or template included) may hold: about two minutes of writing on two CPU
# cores (benchmarks/long_text_speed.py); the state of a canvas is a few tensors of its length, so memory is no limit
MAX_CANVAS = 16_384


def context_of(block_size: int, window_context: int | None) -> int:
    """The characters each window keeps before its first mask: `window_context`, or by default a quarter of the
    model's context (SamplerOptions.window_context)."""
    return block_size // 4 if window_context is None else window_context


@dataclass(frozen=True)
class Window:
    """One window of a long canvas: the model reads [start, end); the masks in [start, fill_end) are filled."""

    start: int
    end: int
    fill_end: int  # masks at or past it stay masked here (the model sees them) and wait for a later window
    num_steps: int  # denoising steps (forward passes) this window gets


def check_canvas_length(length: int, what: str = "canvas") -> None:
    """The one check of a canvas's length against MAX_CANVAS."""
    if length > MAX_CANVAS:
        raise ValueError(
            f"{what} has {length:,} characters; at most {MAX_CANVAS:,} are written in one run: "
            f"shorten it by {length - MAX_CANVAS}"
        )


def window_steps(num_steps: int, num_masks: int, block_size: int, spacing: int) -> int:
    """A window's steps in a long canvas: it reveals per pass what a full canvas does (block_size / num_steps), or
    fewer where its masks are too few to keep that many `spacing` apart (a short blank, the text's last sliver)."""
    per_pass = min(block_size / num_steps, max(1, num_masks // (spacing + 1)))
    return max(1, min(num_masks, math.ceil(num_masks / per_pass)))


def plan_windows(
    is_masked: torch.Tensor, block_size: int, window_context: int, num_steps: int, spacing: int = 0
) -> list[Window]:
    """The windows that fill the masks of `is_masked` (B, N), any row masked counting as masked, left to right."""
    masked = is_masked.any(dim=0).tolist()  # (N,) rows share one plan
    N = len(masked)
    if N <= block_size:
        return [Window(0, N, N, num_steps)]
    given_at = [i for i, m in enumerate(masked) if not m]  # ascending
    windows, p = [], masked.index(True)
    while True:
        start = max(0, min(p - window_context, N - block_size))
        end = start + block_size
        fill_end = end
        if given_at and given_at[-1] >= end:  # given text lies beyond the window: fill up to the last given inside
            inside = bisect.bisect_left(given_at, end)  # how many given characters lie before the window's end
            last_given = given_at[inside - 1] if inside else -1
            fill_end = last_given if last_given > p else end  # a blank longer than the window: fill it all
        num_masks = sum(masked[p:fill_end])
        windows.append(Window(start, end, fill_end, window_steps(num_steps, num_masks, block_size, spacing)))
        p = next((i for i in range(fill_end, N) if masked[i]), None)
        if p is None:
            return windows


def score_windows(n: int, block_size: int, context: int) -> list[tuple[int, int, int]]:
    """How left-to-right scoring (`mdlm_hf.likelihood.surprise_steps`) covers n characters: (window start, first
    scored, end) per window of at most block_size characters; past the first, each window keeps at least `context`
    characters before the ones it scores."""
    windows, scored = [(0, 0, min(n, block_size))], min(n, block_size)
    while scored < n:
        start = min(scored - context, n - block_size)
        windows.append((start, scored, start + block_size))
        scored = start + block_size
    return windows


def batches_by_length(items: Sequence[Item], length: Callable[[Item], int], batch_size: int) -> Iterator[list[Item]]:
    """`items` in order, in batches of at most `batch_size` that stack: each batch holds items of one `length` (windows
    side by side are all block_size long but maybe the last, which goes in a batch of its own)."""
    for low in range(0, len(items), batch_size):
        chunk = items[low : low + batch_size]
        for n in dict.fromkeys(length(item) for item in chunk):  # each length, first seen first
            yield [item for item in chunk if length(item) == n]
