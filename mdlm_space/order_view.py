"""The order view: each character of a finished run tinted by the pass that wrote it, from the run's streamed states,
so the order the sampler actually took reads at a glance (word streams order: stretches growing side by side)."""

from __future__ import annotations

import html
import re
from typing import Any

import gradio as gr
import torch

from mdlm_hf import MDLM, SamplerState
from mdlm_space.render import LEGEND_TEXT, NEWLINE_GLYPH, SUBDUED_TEXT, canvas_box, placeholder

# yellow (first pass) through green and blue to violet (last), lighter to darker: the hue tells passes apart where
# lightness alone would be too fine a scale, and the lightness still orders them for any colour vision
FIRST_HUE, LAST_HUE, LIGHTEST, DARKEST = 60, 268, 90, 70


class PassRecorder:
    """Which pass wrote each position, read from a run's states in turn: a position is written at the pass after
    which its token stopped being a mask (the last such pass, should remasking take it back)."""

    def __init__(self) -> None:
        self.passes: torch.Tensor | None = None  # (B, T) the pass that wrote each position; 0: given or masked
        self.was_masked: torch.Tensor | None = None
        self.count = 0  # passes seen so far

    def update(self, state: SamplerState) -> None:
        """Takes the next state of the run (the first: before any pass)."""
        masked = state.is_masked.cpu()
        if self.passes is None:
            self.passes = torch.zeros_like(masked, dtype=torch.long)
        else:
            self.count += 1
            self.passes[self.was_masked & ~masked] = self.count
            self.passes[masked] = 0  # taken back: it waits for the pass that writes it again
        self.was_masked = masked


def order_colour(written: int, num_passes: int) -> str:
    """Background of a character written at pass `written` of `num_passes`: a sequential scale from light yellow
    (the first pass) to violet (the last), the text keeping 4.5:1 (WCAG AA) on the darkest."""
    share = (written - 1) / (num_passes - 1) if num_passes > 1 else 0.0
    hue, lightness = FIRST_HUE + (LAST_HUE - FIRST_HUE) * share, LIGHTEST - (LIGHTEST - DARKEST) * share
    return f"hsl({hue:.0f},70%,{lightness:.0f}%)"


def order_cell(char: str, written: int, num_passes: int) -> str:
    """One character of the order view: tinted by its pass, or plain and subdued where given."""
    shown, tail = (NEWLINE_GLYPH, "\n") if char == "\n" else (html.escape(char), "")
    if written == 0:
        return f"<span class='mdlm-given' style='color:{SUBDUED_TEXT}'>{shown}</span>{tail}"
    style = f"background:{order_colour(written, num_passes)}"
    return f"<span class='mdlm-pass' data-pass='{written}' style='{style}' title='pass {written}'>{shown}</span>{tail}"


def order_legend(num_passes: int) -> str:
    """The scale under the view: pass 1 … N."""
    stops = ", ".join(order_colour(1 + round(i * (num_passes - 1) / 4), num_passes) for i in range(5))
    scale = (  # stops along the scale: a gradient of its two ends alone would skip the hues between them
        "<span style='display:inline-block; width:64px; height:0.9em; vertical-align:middle; "
        f"background:linear-gradient(90deg, {stops}); border: 1px solid #d8d3c8'></span>"
    )
    return (
        f"<div class='mdlm-order-legend' style='{LEGEND_TEXT}'>the pass that wrote each character: pass 1 {scale} "
        f"pass {num_passes} &nbsp; grey: kept as it was &nbsp; {NEWLINE_GLYPH} line break</div>"
    )


def order_html(text: str, passes: list[int], num_passes: int, rows: int = 8, **box: Any) -> str:
    """`text` in a canvas box of `rows` lines (`box`: canvas_box's font_px and shrink), each character tinted by its
    pass (0: kept as it was), with the legend."""
    num_passes = max(1, num_passes)
    cells = [order_cell(char, written, num_passes) for char, written in zip(text, passes, strict=True)]
    return canvas_box(cells, rows, **box) + order_legend(num_passes)


def order_view(
    model: MDLM, recorder: PassRecorder, tokens: torch.Tensor, row: int = 0, end: int | None = None, **box: Any
) -> str:
    """The finished text of `row` of `tokens` (B, T), up to `end` (where the text ended), each written character
    tinted by the pass that wrote it (`box`: order_html's rows, font_px and shrink)."""
    return order_html(
        model.tokenizer.decode(tokens[row, :end].tolist()), recorder.passes[row, :end].tolist(), recorder.count, **box
    )


# a position's cell on a streamed canvas (render.canvas_cells): its kind and its character, as drawn
DROPPED_TAIL = "class='mdlm-dropped'"  # render.render_canvas's written characters after where a text ended
NOT_DRAWN = placeholder(
    "The last run was longer than the model's context, written window by window: its order of writing is not drawn.",
    rows=8,
)
CELL = re.compile(r"<span class='mdlm-(mask|given|new|earlier)'[^>]*>([^<]*)</span>")


def order_from_frames(canvases: list[str], kept: int | None = None) -> tuple[str, list[int], int] | None:
    """The text, the pass that wrote each position and the number of passes of a finished run, from its replay
    frames, up to `kept` characters (a stopped run's) or where its text ended; None for a run not finished there, or
    longer than the model's context (its frames draw only the live window as cells)."""
    frames = [CELL.findall(canvas) for canvas in canvases]
    if len(frames) < 2 or any(len(cells) != len(frames[0]) for cells in frames) or "mdlm-window" in canvases[-1]:
        return None
    if kept is None and DROPPED_TAIL in canvases[-1]:  # a text that ended at a line or a speech: the rest is not in it
        kept = len(CELL.findall(canvases[-1].split(DROPPED_TAIL, 1)[0]))
    frames = [cells[:kept] for cells in frames]
    if any(kind == "mask" for kind, _ in frames[-1]):
        return None
    passes = [0] * len(frames[0])
    for k, (before, after) in enumerate(zip(frames, frames[1:], strict=False), 1):
        for i, ((was, _), (now, _)) in enumerate(zip(before, after, strict=True)):
            passes[i] = 0 if now == "mask" else k if was == "mask" else passes[i]
    text = "".join("\n" if shown == NEWLINE_GLYPH else html.unescape(shown) for _, shown in frames[-1])
    return text, passes, len(frames) - 1


def run_order(canvases: list[str] | None, text: str | None = None) -> object:
    """The order view of a tab's run once it has ended, from its replay frames (`text`: what the Rewrite panel took
    of it); no change before. A run whose order cannot be drawn says so, or an earlier run's view would stay."""
    last = canvases[-1] if canvases else ""
    # without the text taken, only the last frame is looked at until it is the finished one, since reading all of a
    # long run's frames at each of them would hold the server (and the model thread) for seconds
    if not canvases or text is None and ("class='mdlm-mask'" in last or "more characters to write" in last):
        return gr.skip()
    found = order_from_frames(canvases, None if text is None else len(text))
    return NOT_DRAWN if found is None else order_html(*found)
