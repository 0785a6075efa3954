"""The MDLM sampling loop as the paper writes it, in one function: read this first, then `sample()`.

Start from a canvas whose unknown characters are [MASK]. Each pass, the model reads the canvas and gives a
distribution over the characters at every position; a character is drawn at every masked position, and a few of
them are kept: the most confident ones (or random ones), as many as a linear schedule says, so that after
`num_steps` passes nothing is masked. Given characters are never changed. `sample()` (mdlm_hf/sampling/loop.py) is
this loop with its options: other orders and schedules, min-p and top-p, remasking, windows past the context, the
word and cast rules; with `temperature=0, order="confidence", spacing=0, min_p=None` it writes what this writes
(tests/test_sampler.py).
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn


def revealed_after(num_masked: int, num_steps: int, step: int) -> int:
    """How many of the `num_masked` positions a linear schedule has revealed after `step` of `num_steps`: one a
    pass first, so that no pass is wasted, the rest spread evenly."""
    if num_masked < num_steps:
        return math.floor(num_masked * step / num_steps + 0.5)
    return step + math.floor((num_masked - num_steps) * step / num_steps + 0.5)


@torch.no_grad()
def reference_sample(
    model: nn.Module,
    canvas: torch.Tensor,
    num_steps: int = 32,
    temperature: float = 1.0,
    order: str = "confidence",
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Fills the masks of `canvas` (T,) in `num_steps` passes; the filled canvas (T,). `order`: "confidence" keeps
    the most probable draws each pass, "random" any; `temperature` 0 draws the likeliest character."""
    mask_id = model.mask_id
    tokens = canvas.clone()[None]  # (1, T)
    num_masked = int((tokens == mask_id).sum())
    for step in range(1, num_steps + 1):
        is_masked = tokens == mask_id  # (1, T)
        if not is_masked.any():
            break
        t = is_masked.float().mean(dim=1)  # (1,) the share still masked: the diffusion time
        logits = model(tokens, t).double()  # (1, T, V); the model gives [MASK] no probability
        if temperature == 0:
            drawn = logits.argmax(dim=-1)  # (1, T)
        else:  # Gumbel-max: argmax(logits / T + Gumbel noise) is a draw from softmax(logits / T)
            uniform = torch.rand(logits.shape, generator=generator, dtype=torch.float64)
            drawn = (logits / temperature - torch.log(-torch.log(uniform))).argmax(dim=-1)  # (1, T)
        confidence = logits.softmax(dim=-1).gather(-1, drawn[..., None]).squeeze(-1)  # (1, T) p(drawn)
        if order == "random":
            confidence = torch.rand(confidence.shape, generator=generator, dtype=torch.float64)
        already = num_masked - int(is_masked.sum())
        count = revealed_after(num_masked, num_steps, step) - already  # this pass's share of the schedule
        scores = confidence.masked_fill(~is_masked, -math.inf)  # only masked positions may be revealed
        keep = scores.argsort(dim=-1, descending=True, stable=True)[:, :count]  # (1, count) the most confident
        reveal = torch.zeros_like(is_masked).scatter(1, keep, True)  # (1, T)
        tokens = torch.where(reveal, drawn, tokens)
    return tokens[0]
