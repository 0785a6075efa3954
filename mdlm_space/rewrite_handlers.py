"""What the Rewrite panel's buttons run: three rewrites of a selected span, streamed side by side and ranked by the
span's bits per character; a pick, its undo, and the selection in words."""

from __future__ import annotations

import html
import math
import re
import time
from collections.abc import Iterator
from typing import Any

import gradio as gr

from mdlm_hf import MDLM, SamplerOptions, SamplerState, sample
from mdlm_hf.rewriting import check_span, span_canvas, span_nats_steps, span_options
from mdlm_hf.windows import MAX_CANVAS
from mdlm_space.checks import as_int, check_chars, run_seed
from mdlm_space.handlers import kept_words_note
from mdlm_space.order_view import PassRecorder, order_html
from mdlm_space.render import COMPARE_FONT_PX, SUBDUED_TEXT, canvas_box, canvas_cells, placeholder
from mdlm_space.texts import passes
from mdlm_space.views import shown_char

NUM_CHOICES = 3
# characters of the text shown before and after the span in a choice's view: few before, so that on a phone's narrow
# column the span is in the box's first lines, not below its fold
BEFORE, AFTER = 40, 60
# each scored character is read in this many characters around it, not the whole text: the cheapest window whose pick
# is at most 0.01 bits per character worse than the exact chain's best on average and 0.05 at the 95th percentile
# (200 spans: 0.0066 and 0.035, in 0.26x the exact chain's time; 64 characters: 0.0100 and 0.074; docs/benchmarks.md)
RANK_CONTEXT = 96
CHOICE_ROWS = 7
NO_CHOICE = placeholder("Select a span, press Rewrite.", rows=CHOICE_ROWS)
WAITING = "Press Rewrite: the step and the ranking show here."
NO_ORDER = placeholder("After a run: each character it wrote, tinted by the pass that wrote it.", rows=8)


def checked_span(model: MDLM, text: str | None, start: float, end: float) -> tuple[str, int, int]:
    """The text and the span's bounds from the page or the API, or one gr.Error line naming what is wrong."""
    check_chars(model, text, "text")
    if not text:
        raise gr.Error("paste a text, or run Generate, Infill or Compare: its finished text comes here")
    start, end = as_int(start, "start", 0, MAX_CANVAS), as_int(end, "end", 0, MAX_CANVAS)
    if start >= end:
        raise gr.Error("select at least one character of the text to rewrite (From below To)")
    check_span(model, text, start, end)  # the span within the text
    if end - start > model.block_size:
        raise gr.Error(
            f"the span has {end - start:,} characters; Rewrite ranks spans of at most {model.block_size} (the "
            "model's context): select fewer"
        )
    return text, start, end


def plain(text: str) -> str:
    """Context around a span: subdued, line breaks drawn and kept."""
    shown = "".join(shown_char(c) + "\n" if c == "\n" else html.escape(c) for c in text)
    return f"<span class='mdlm-context' style='color:{SUBDUED_TEXT}'>{shown}</span>"


def choice_view(model: MDLM, state: SamplerState, row: int, text: str, start: int, end: int) -> str:
    """One rewrite as it is written: the span's cells (as on the canvas) between up to BEFORE and AFTER characters
    of the text."""
    before, after = text[max(0, start - BEFORE) : start], text[end : end + AFTER]
    cells = [("…" if start > BEFORE else "") + plain(before)]
    cells += canvas_cells(model, state, row, slice(start, end))
    cells.append(plain(after) + ("…" if end + AFTER < len(text) else ""))
    return canvas_box(cells, CHOICE_ROWS, COMPARE_FONT_PX)


def step_line(state: SamplerState, seed: int, start: int, end: int) -> str:
    """The readout while the rewrites are written."""
    return (
        f"seed {seed} · step {state.step}/{state.num_steps} · {passes(state.num_forward_passes)} · "
        f"characters {start:,}–{end:,} ({end - start:,}) written three times, reading both sides"
    )


def ranking_line(num_scored: int, written: float, seed: int, start: int, end: int) -> str:
    """The readout while the rewrites are ranked: how many of their characters are scored."""
    total = NUM_CHOICES * (end - start)
    return (
        f"seed {seed} · written in {written:.1f} s · ranking by the span's bits per character (the chain rule, a "
        f"canvas of {RANK_CONTEXT} characters per character): {num_scored:,} of {total:,} characters scored"
    )


def ranked(texts: list[str], bits: list[float], start: int, end: int) -> list[dict[str, Any]]:
    """The rewrites, likeliest span first: each one's rank, whole text, span and bits per character."""
    order = sorted(range(len(texts)), key=bits.__getitem__)
    return [
        dict(rank=rank, choice=i + 1, text=texts[i], span=texts[i][start:end], bits_per_char=round(bits[i], 4))
        for rank, i in enumerate(order, 1)
    ]


def rewrite(
    model: MDLM, text: str | None, start: float, end: float, seed: float, fixed_seed: bool, **controls: Any
) -> Iterator[tuple]:
    """Rewrite: `text[start:end]` masked and written again three times (one batch, the current options), streamed
    side by side, then ranked by the span's bits per character given the rest of the text (lower: likelier)."""
    text, start, end = checked_span(model, text, start, end)
    seed = run_seed(seed, fixed_seed)
    options = SamplerOptions().replace(**span_options(text, start, end) | controls)  # validates them
    options = options.replace(num_steps=min(controls.get("num_steps", end - start), end - start))  # one a character
    canvas = span_canvas(model, text, start, end).expand(NUM_CHOICES, -1)
    recorder = PassRecorder()
    began = time.perf_counter()
    for state in sample(model, canvas, options, seed=seed):
        recorder.update(state)
        views = [choice_view(model, state, row, text, start, end) for row in range(NUM_CHOICES)]
        labels = [f"Choice {row + 1}: writing…" for row in range(NUM_CHOICES)]
        yield (*views, *labels, gr.skip(), step_line(state, seed, start, end), None, seed)  # the text's order stays
    texts = [model.tokenizer.decode(row) for row in state.tokens.tolist()]
    written = time.perf_counter() - began
    # one pass a yield, so the readout moves and other runs' steps interleave on the model thread
    for nats in span_nats_steps(model, texts, start, end, fast=True, context=RANK_CONTEXT):
        bits = (nats.nanmean(dim=1) / math.log(2)).tolist()
        scored = (nats == nats).sum(dim=1).tolist()
        labels = [
            f"Choice {row + 1}: " + (f"{bits[row]:.2f} bits/char" if scored[row] == end - start else "ranking…")
            for row in range(NUM_CHOICES)
        ]
        yield (*views, *labels, gr.skip(), ranking_line(sum(scored), written, seed, start, end), None, seed)
    choices = ranked(texts, bits, start, end)
    yield finished(model, state, recorder, choices, (start, end), seed, None)  # the ranking, before the bar
    *_, nats = span_nats_steps(model, [text], start, end, fast=True, context=RANK_CONTEXT)  # the bar to clear
    yield finished(model, state, recorder, choices, (start, end), seed, float(nats.mean()) / math.log(2))


def finished(
    model: MDLM,
    state: SamplerState,
    recorder: PassRecorder,
    choices: list[dict],
    span: tuple[int, int],
    seed: int,
    before: float | None,
) -> tuple:
    """The panel after the run: the choices ranked left to right and the readout (with `before`, the bits per
    character of the span as it was; None: still being scored). The order view stays the text's until a pick."""
    start, end = span
    views = [choice_view(model, state, c["choice"] - 1, c["text"], start, end) for c in choices]
    labels = [f"**#{c['rank']}** · {c['bits_per_char']:.2f} bits/char" for c in choices]
    readout = (
        f"seed {seed} · {passes(state.num_forward_passes)} · ranked by the span's bits per "
        f"character given the text around it (the chain rule, each read in {RANK_CONTEXT} characters; lower: "
        f"likelier); the span as it was: {'scoring…' if before is None else f'{before:.2f} bits/char'}. Pick one to "
        "keep it."
    )
    readout = " ".join(filter(None, (readout, kept_words_note(model, state))))
    if len({c["span"] for c in choices}) == 1:  # greedy drawing in a fixed order: nothing left to choose between
        readout += " The three are the same: raise the temperature for different ones."
    for choice in choices:  # the pass that wrote each of its span's characters, for its order view when picked
        written_at = recorder.passes[choice["choice"] - 1, start:end].tolist()
        choice |= dict(start=start, written_at=written_at, passes=recorder.count)
    return (*views, *labels, gr.skip(), readout, choices, seed)


def picked_order(choice: dict) -> Any:
    """A rewrite's order view: its text, the span tinted by the pass that wrote each character (no change for a
    choice that does not say)."""
    if "written_at" not in choice:
        return gr.skip()
    text, start, written_at = choice["text"], choice["start"], choice["written_at"]
    return order_html(text, [0] * start + written_at + [0] * (len(text) - start - len(written_at)), choice["passes"])


def pick(rank: int, text: str | None, choices: list[dict] | None, history: list[dict], text_order: str | None) -> tuple:
    """Keeps the rewrite ranked `rank`: it replaces the text, the text before it (with `text_order`, its order of
    writing) goes on the undo list, and the order view shows how the rewrite was written, now the text's."""
    if not choices:
        raise gr.Error("press Rewrite first: then pick one of its three rewrites", print_exception=False)
    choice = choices[rank - 1]
    note = f"Picked #{rank} ({choice['bits_per_char']:.2f} bits per character). Undo goes back."
    before, view = dict(text=text or "", order=text_order), picked_order(choice)
    return choice["text"], [*history, before], gr.update(interactive=True), note, view, view


def undo(history: list[dict]) -> tuple:
    """Goes back one pick: the text as it was before it, and its order of writing (shown, and the text's)."""
    if not history:
        return gr.skip(), history, gr.update(interactive=False), "Nothing to undo.", gr.skip(), gr.skip()
    *rest, last = history
    note = "Undone: the text before the last pick."
    view = last["order"] or gr.skip()
    return last["text"], rest, gr.update(interactive=bool(rest)), note, view, view


def stopped(readout: str | None, *labels: str | None) -> tuple:
    """The readout and the choices' labels after Stop: a run still writing or ranking says where it stopped, and a
    choice it had not finished says so; a finished run (or one that never started) keeps them."""
    line = readout or ""
    writing = re.match(r"seed (\d+) · step (\d+/\d+) · (.*?) · characters", line)
    ranking = re.search(r"(\d[\d,]*) of ([\d,]+) characters scored", line)
    if writing:
        said = f"Stopped at step {writing[2]} of writing (seed {writing[1]}, {writing[3]}): nothing to pick."
    elif ranking and " · ranking by " in line:
        said = f"Stopped while ranking: {ranking[1]} of {ranking[2]} characters scored; nothing to pick."
    else:
        return (gr.skip(),) * (1 + len(labels))
    unfinished = ("writing…", "ranking…")
    return said, *(
        re.sub(r": (writing|ranking)…$", ": stopped", label) if (label or "").endswith(unfinished) else gr.skip()
        for label in labels
    )


def new_text() -> tuple:
    """A new text in the box (a run's, an edit): the history, Undo, the choices, their views, labels and Pick
    buttons, the readout, and From and To were of the text it replaced (an Undo or a Pick would bring it back), so
    all go."""
    labels = [f"Choice {row + 1}" for row in range(NUM_CHOICES)]
    cleared = [NO_CHOICE] * NUM_CHOICES, labels, picks_ready()
    return [], gr.update(interactive=False), None, *(part for group in cleared for part in group), WAITING, 0, 0


def picks_ready(choices: list[dict] | None = None) -> tuple:
    """The Pick buttons: usable when there are ranked rewrites to pick from (none before a run ends)."""
    return tuple(gr.update(interactive=bool(choices)) for _ in range(NUM_CHOICES))


def selection(event: gr.SelectData) -> tuple[Any, Any]:
    """The selected range of the text box, as From and To; a bare caret (typing, a click) keeps the last span."""
    first, last = sorted(event.index) if isinstance(event.index, (list, tuple)) else (event.index, event.index)
    return (first, last) if first != last else (gr.skip(), gr.skip())


def selection_line(model: MDLM, text: str | None, start: float | None, end: float | None) -> str:
    """The span to rewrite, in words, from the text and the From and To boxes; else what Rewrite's check
    (`checked_span`) refuses, in its words, as pressing Rewrite would show it."""
    try:
        text, start, end = checked_span(model, text, start, end)
    except ValueError as error:  # the app's gr.Error, or the package's own check of the span
        message = str(getattr(error, "message", error))
        return f"{message[:1].upper()}{message[1:]}."
    span = "".join(shown_char(c) for c in text[start:end])
    if len(span) > 60:
        span = f"{span[:28]}…{span[-28:]}"
    return f"Rewriting characters {start:,}–{end:,} ({end - start:,}): «{span}»"
