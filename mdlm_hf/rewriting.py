"""Rewriting a span: mask `text[start:end]` and write it again with `mdlm_hf.pipeline.sample`, the model reading both
sides of it; and scoring a span by the exact left-to-right chain over its characters, the text on both sides visible.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn as nn

from mdlm_hf.checks import described, is_int
from mdlm_hf.inference import check_flag, check_model, evaluating
from mdlm_hf.objectives import objective_of
from mdlm_hf.pipeline import check_text, sample
from mdlm_hf.sampling.options import SamplerOptions
from mdlm_hf.sampling.state import SamplerState, final_state
from mdlm_hf.windows import check_canvas_length

SCORE_ROWS = 16  # canvases per forward pass when scoring: one per character of the span


def check_span(model: nn.Module, text: object, start: object, end: object) -> None:
    """A ValueError, one line, when `text[start:end]` is not a span the model can rewrite or score."""
    check_text(text, "text")
    if not objective_of(model).fills_blanks:
        raise ValueError("rewriting reads both sides of the span; an autoregressive model reads only the left")
    for name, value in (("start", start), ("end", end)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"{name} must be an integer, got {described(value)}")
    if not 0 <= start < end <= len(text):
        raise ValueError(
            f"the span must satisfy 0 <= start < end <= {len(text)} (the text's length), got {start}:{end}"
        )
    check_canvas_length(len(text), "text")
    model.tokenizer.encode(text)  # raises, naming every character outside the vocabulary


def span_canvas(model: nn.Module, text: str, start: int, end: int) -> torch.Tensor:
    """The text's ids with `text[start:end]` masked; (T,) ids."""
    check_span(model, text, start, end)
    ids = torch.tensor(model.tokenizer.encode(text), dtype=torch.long)
    ids[start:end] = model.mask_id
    return ids


def span_options(text: str, start: int, end: int) -> dict[str, Any]:
    """The options a rewrite of `text[start:end]` sets itself: a span that held a line break may take line breaks
    again (keep_lines off); one within a line stays within it, as a template's blank does."""
    return {"keep_lines": False} if "\n" in text[start:end] else {}


def stream_rewrite(
    model: nn.Module, text: str, start: int, end: int, options: SamplerOptions | None = None, **overrides: Any
) -> Iterator[SamplerState]:
    """Every state while writing `text[start:end]` again (`overrides`: single options, `seed`, `generator`)."""
    check_model(model, "stream_rewrite", "text, start, end")
    canvas = span_canvas(model, text, start, end)
    return sample(model, canvas, options, **(span_options(text, start, end) | overrides))


def rewrite(
    model: nn.Module, text: str, start: int, end: int, options: SamplerOptions | None = None, **overrides: Any
) -> str:
    """The text with `text[start:end]` masked and written again; every other character stays exactly as given."""
    check_model(model, "rewrite", "text, start, end")
    state = final_state(stream_rewrite(model, text, start, end, options, **overrides))
    return model.tokenizer.decode(state.tokens[0])


def score_window(length: int, start: int, end: int, block_size: int) -> tuple[int, int]:
    """The (from, to) of the text the scorer reads: all of it when it fits the model's context, else block_size
    characters with the span in the middle, so that both sides are read as evenly as the text allows."""
    if end - start > block_size:
        raise ValueError(f"a span of {end - start} characters is longer than the model's context ({block_size})")
    if length <= block_size:
        return 0, length
    low = min(max(0, start - (block_size - (end - start)) // 2), length - block_size)
    return low, low + block_size


@torch.no_grad()
def span_nats_steps(
    model: nn.Module, texts: list[str], start: int, end: int, fast: bool = False, context: int | None = None
) -> Iterator[torch.Tensor]:
    """`span_nats` of several texts of one length (rewrites of one span), batched: their canvases SCORE_ROWS a pass,
    text after text; yields the (len(texts), end - start) nats so far on the CPU (NaN: not scored yet) after each
    pass, so that a caller can show its progress, and use a text's figure as soon as it is complete.
    `context`: each canvas reads only this many characters around the one it scores (None: the whole text, up to
    block_size), so a pass costs less; the same chain rule, each character's odds given a narrower view."""
    check_model(model, "span_nats_steps", "texts, start, end")
    for text in texts:
        check_span(model, text, start, end)
    if len({len(text) for text in texts}) > 1:
        raise ValueError("the texts must have one length: rewrites of one span")
    check_flag(fast, "fast")
    if context is not None and not (is_int(context) and context >= 1):
        raise ValueError(f"context must be a whole number of characters >= 1 or None, got {described(context)}")
    low, high = score_window(len(texts[0]), start, end, model.block_size)
    device = next(model.parameters()).device
    windows = torch.tensor([model.tokenizer.encode(text[low:high]) for text in texts], device=device)  # (m, n)
    first, n, length = start - low, high - low, end - start
    width = n if context is None else min(context, n)  # each canvas's length
    forward = model.denoise if fast else model
    nats = torch.full((len(texts), length), float("nan"))
    # row (i, k): text i with the span's first k characters revealed, the rest masked; it scores character k
    row_ids = torch.arange(len(texts) * length, device=device)
    text_of, char_of = row_ids.div(length, rounding_mode="floor"), row_ids % length
    with evaluating(model):
        for rows in row_ids.split(SCORE_ROWS):
            which, at = text_of[rows], first + char_of[rows]  # (b,) the text, and the position it scores
            left = (at - width // 2).clamp(0, n - width)  # (b,) each canvas's first position in the window
            columns = left[:, None] + torch.arange(width, device=device)[None, :]  # (b, width)
            canvas = windows[which[:, None], columns]  # (b, width)
            canvas[(columns >= at[:, None]) & (columns < end - low)] = model.mask_id
            log_probs = forward(canvas).float().log_softmax(dim=-1)  # (b, width, V)
            scored = -log_probs[torch.arange(len(rows), device=device), at - left, windows[which, at]]
            nats[which.cpu(), char_of[rows].cpu()] = scored.cpu()
            yield nats.clone()


def span_nats(model: nn.Module, text: str, start: int, end: int, fast: bool = False) -> torch.Tensor:
    """-log p, in nats, of each character of `text[start:end]` given the text on both sides and the span's earlier
    characters, its later ones masked: the exact chain rule left to right over the span; (end - start,) on the CPU.
    `fast`: the passes run where the sampler's do (`denoise`: bf16 weights where faster) instead of the exact fp32."""
    *_, nats = span_nats_steps(model, [text], start, end, fast)
    return nats[0]


def span_bits_per_char(model: nn.Module, text: str, start: int, end: int, fast: bool = False) -> float:
    """Bits per character of `text[start:end]` given the rest of the text (`span_nats`, averaged, in bits)."""
    check_model(model, "span_bits_per_char", "text, start, end")
    return float(span_nats(model, text, start, end, fast).mean()) / math.log(2)
