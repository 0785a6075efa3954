"""The sampling loop of a masked diffusion model in one function: read this first, then `sample()`.

Start from a canvas whose unknown characters are [MASK]. Each pass the model reads the canvas and gives a
distribution over the characters at every position [predict]; a character is drawn at every masked position [draw];
each draw gets a score [score], and as many masked positions as a linear schedule says [count] take their draws
[reveal], so that after `num_steps` passes nothing is masked. Given characters are never changed.

As written (the defaults) this is confidence order with fixed counts, as MaskGIT and LLaDA sample: the most
probable draws are kept each pass. MDLM's own ancestral sampler reveals each masked position with the same chance
(1/steps left, from its reverse process under a linear schedule) and draws at temperature 1 from the whole
distribution: `sample(model, canvas, order="random", reveal_counts="binomial", spacing=0, temperature=1,
min_p=None, capital_temperature_factor=1, real_words=False, keep_cast=False, keep_lines=False)` runs it.

`sample()` runs this loop with its options (loop.py's writer), each module naming the bracketed line it extends;
with `temperature=0, order="confidence", spacing=0, min_p=None` and no rules it writes what this writes.
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
        # [predict] the model gives [MASK] no probability; it is not told t: the masks tell it the noise level
        logits = model(tokens).double()  # (1, T, V)
        # [draw] Gumbel-max: argmax(logits / temperature + Gumbel noise) is a draw from softmax(logits / temperature)
        if temperature == 0:
            drawn = logits.argmax(dim=-1)  # (1, T)
        else:
            uniform = torch.rand(logits.shape, generator=generator, dtype=torch.float64)
            drawn = (logits / temperature - torch.log(-torch.log(uniform))).argmax(dim=-1)  # (1, T)
        # [score] how sure the model is of each draw (random order: any score will do)
        confidence = logits.softmax(dim=-1).gather(-1, drawn[..., None]).squeeze(-1)  # (1, T) p(drawn)
        if order == "random":
            confidence = torch.rand(confidence.shape, generator=generator, dtype=torch.float64)
        # [count] this pass's share of the schedule
        already = num_masked - int(is_masked.sum())
        count = revealed_after(num_masked, num_steps, step) - already
        # [reveal] the `count` best-scored masked positions take their draws
        scores = confidence.masked_fill(~is_masked, -math.inf)  # only masked positions may be revealed
        keep = scores.argsort(dim=-1, descending=True, stable=True)[:, :count]  # (1, count)
        revealed = torch.zeros_like(is_masked).scatter(1, keep, True)  # (1, T)
        tokens = torch.where(revealed, drawn, tokens)
    return tokens[0]
