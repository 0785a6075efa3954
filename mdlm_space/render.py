"""How the app draws: colours, the canvas (one cell per position), drafts before a run, and the How-it-works and
Score views. HTML strings only: nothing here runs the model."""

from __future__ import annotations

import html
import itertools

import gradio as gr

from mdlm_hf import MASK_GLYPH, MDLM, SamplerState
from mdlm_hf.windows import MAX_CANVAS

# text that steps back (help, legends, line-break glyphs) still reads at WCAG AA's 4.5:1 on white and the canvas
SUBDUED_TEXT = "#5c6675"
LEGEND_TEXT = f"font-size: 12px; color: {SUBDUED_TEXT}; margin-top: 4px;"  # the line under a canvas or a view
# gradio's default theme, with its subdued text (help under each control, slider bounds: 1.91:1 on white) and its
# orange accents (the primary button, the selected tab: 2.8:1) darkened to 4.5:1 or more; launch() takes it
THEME = gr.themes.Default().set(
    body_text_color_subdued="*neutral_600",
    color_accent="*primary_700",
    button_primary_background_fill="*primary_700",
    button_primary_background_fill_hover="*primary_800",
    button_primary_border_color="*primary_700",
)
CANVAS_FONT = "font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;"
# breaks lines at spaces, and inside a word only when the word is wider than the whole line
WRAP_WORDS = "white-space: pre-wrap; word-break: normal; overflow-wrap: anywhere;"
CANVAS_ROWS = 10  # the canvas's fixed height in lines: new line breaks scroll inside it, not push the page down
COMPARE_ROWS = 9
TWIN_PHONE_ROWS = 6  # the twin's canvas on a phone, where it takes the whole width
COMPARE_FONT_PX = 13  # two canvases side by side, on a phone too
NARROW_FONT_PX, NARROW_PADDING_PX = 12, 4  # a side-by-side canvas's text (no smaller: read on a phone) and side margins
PHONE_WIDTH_PX = 390  # the phone the narrow sizes are set for (the browser tests' 390x844)
CANVAS_BACKGROUND = "#fbfaf7"
MASK_COLOUR, TAKEN_BACK_COLOUR, NEW_COLOUR = "#c4bcae", "#d9534f", "#ffd54f"
# each mask is its own cell: a filled box whose 1 px inset edges in the background colour keep neighbours apart
MASK_CELL = (
    f"color: transparent; border-radius: 2px; box-shadow: inset 1px 0 {CANVAS_BACKGROUND}, "
    f"inset -1px 0 {CANVAS_BACKGROUND};"
)
DRAFT_CELLS = 512  # a canvas before a run shows this many cells at most (a long one says how many more)
# a long text's live window: the positions the model reads at this step
WINDOW_FRAME = "box-shadow: 0 0 0 2px #5b8fd1; border-radius: 3px; box-decoration-break: clone;"
NEWLINE_GLYPH = "↵"  # a line break is a position too: drawn, then broken
SPACE_GLYPH = "␣"  # a predicted or true space, where an empty cell would hide it


def confidence_colour(confidence: float) -> str:
    """Background of a character revealed with probability `confidence`: one hue (apart from the amber of "revealed
    this step"), darker for less sure, for any colour vision; the ends differ by 3:1, the text keeps 4.5:1 on both."""
    confidence = min(max(confidence, 0.0), 1.0) if confidence == confidence else 0.0
    return f"hsl(212,80%,{59 + 38 * confidence:.0f}%)"


def canvas_style(rows: int, font_px: int = 15, shrink: bool | None = None) -> str:
    """The canvas box: monospace, words kept whole, `rows` whole lines high (its margins are borders, which do not
    scroll with the lines as padding would). At COMPARE_FONT_PX or less (`shrink` None), or with `shrink`, its text
    and margins shrink with a narrow screen, to NARROW_FONT_PX on a phone: 17 characters a line, not 14 (`shrink`
    False: a canvas that takes a phone's whole width, as the twin's does)."""
    line = 1.6
    size, padding = f"{font_px}px", "10px"
    if font_px <= COMPARE_FONT_PX if shrink is None else shrink:
        size = f"clamp({NARROW_FONT_PX}px, {100 * NARROW_FONT_PX / PHONE_WIDTH_PX:.2f}vw, {font_px}px)"
        padding = f"clamp({NARROW_PADDING_PX}px, {100 * NARROW_PADDING_PX / PHONE_WIDTH_PX:.2f}vw, 10px)"
    return (
        f"{CANVAS_FONT} {WRAP_WORDS} line-height: {line}; font-size: {size}; padding: 0 {padding}; "
        f"border: solid {CANVAS_BACKGROUND}; border-width: 10px 0; border-radius: 8px; "
        f"background: {CANVAS_BACKGROUND}; color: #1f2733; box-sizing: border-box; "
        f"height: calc({rows * line}em + 20px); overflow-y: auto;"
    )


def colour_scale(low: str, high: str) -> str:
    """A legend's swatch of a colour scale, from `low` to `high`."""
    return (
        "<span class='mdlm-scale' style='display:inline-block; width:48px; height:0.9em; vertical-align:middle; "
        f"background:linear-gradient(90deg, {low}, {high}); border: 1px solid #d8d3c8'></span>"
    )


# the written characters after where a text ended (a line, a speech): kept on the canvas, struck out
DROPPED = f"text-decoration: line-through; opacity: 0.45; color: {SUBDUED_TEXT};"
DROPPED_TITLE = "written after the end: not in the text"


LEGEND_CLASS = "mdlm-legend"


def words(text: str) -> str:
    """A legend entry's words, which a phone shows in fewer (PHONE_WORDS)."""
    return f"<span class='mdlm-words'>{text}</span>"


# each mark a canvas may show: what in its HTML shows it, and the legend's entry for it, in the legend's order
MARKS: dict[str, tuple[str, str]] = {
    "masked": (
        f"class='mdlm-mask' style='background:{MASK_COLOUR}",
        f"<span style='{CANVAS_FONT} background:{MASK_COLOUR}; {MASK_CELL}'>{MASK_GLYPH}</span> {words('masked')}",
    ),
    "new": ("class='mdlm-new'", f"<span style='background:{NEW_COLOUR}'>x</span> {words('revealed this step')}"),
    "confidence": (
        "class='mdlm-earlier'",
        f"{colour_scale(confidence_colour(0), confidence_colour(1))} {words('confidence (low … high)')}",
    ),
    "given": ("class='mdlm-given'", f"<b>x</b> {words('given')}"),
    "line break": (NEWLINE_GLYPH, f"{NEWLINE_GLYPH} {words('line break')}"),
    "window": ("class='mdlm-window'", f"<span style='{WINDOW_FRAME}'>x</span> {words('the window it reads')}"),
    "taken back": (
        f"background:{TAKEN_BACK_COLOUR}",
        f"<span style='{CANVAS_FONT} background:{TAKEN_BACK_COLOUR}; {MASK_CELL}'>{MASK_GLYPH}</span> "
        + words("taken back (remasking)"),
    ),
    "after the end": ("class='mdlm-dropped'", f"<span style='{DROPPED}'>x</span> {words('after the end, left out')}"),
}
# on a phone a run's legend is one line (in full, its five entries took 472 px of 302): fewer words, closer
# together, a shorter colour scale; one that still does not fit scrolls sideways rather than wrap
PHONE_WORDS = {
    "new": "new",
    "confidence": "confidence",
    "window": "window",
    "taken back": "taken back",
    "after the end": "left out",
}
LEGEND_PHONE_CSS = (  # inside the phone's @media rule of CANVAS_CSS and RACE_CSS, which every canvas page has
    f".{LEGEND_CLASS} {{ column-gap: 8px !important; }} "
    f".{LEGEND_CLASS}[data-one-line] {{ flex-wrap: nowrap !important; overflow-x: auto; }} "
    f".{LEGEND_CLASS} [data-short] .mdlm-words {{ display: none; }} "
    f".{LEGEND_CLASS} [data-short]::after {{ content: attr(data-short); }} "
    f".{LEGEND_CLASS} .mdlm-scale {{ width: 24px !important; }} "
)


def legend(marks: list[str] | tuple[str, ...], one_line: bool = True) -> str:
    """The line under a canvas: what each of `marks` (MARKS' names) means, one line high even with none (so nothing
    below moves); `one_line`: one line on a phone too (PHONE_WORDS), not wrapped."""
    entries = "".join(
        f"<span{f' data-short={PHONE_WORDS[mark]!r}' if mark in PHONE_WORDS else ''} style='white-space: nowrap;'>"
        f"{MARKS[mark][1]}</span>"
        for mark in MARKS
        if mark in marks
    )
    flow = "display: flex; flex-wrap: wrap; column-gap: 14px; min-height: 1.8em; align-items: center;"
    line = " data-one-line" if one_line else ""
    return f"<div class='{LEGEND_CLASS}'{line} style='{LEGEND_TEXT} line-height: 1.8; {flow}'>{entries}</div>"


def marks_shown(canvas: str) -> list[str]:
    """The marks (MARKS' names) that the canvas's HTML shows: what its legend explains."""
    return [mark for mark, (shown, _) in MARKS.items() if shown in canvas]


def with_legend(canvas: str) -> str:
    """The canvas and, under it, the legend of the marks it shows (a run's follows each frame)."""
    return canvas + legend(marks_shown(canvas))


# on a phone the race (headings, two sides, the twin's row, the takeaway) fits one screen: the twin's canvas 6 rows
# high, the blocks 6 px apart (gradio's 16 px made it 867 px high on a 390x844 phone), and the statistics and the
# takeaway keep their room before they are written, so the race brought into view as it starts stays whole
RACE_CSS = (
    f"<style>@media (max-width: {PHONE_WIDTH_PX + 110}px) {{ "
    f"#compare-twin-canvas .mdlm-canvas {{ height: calc({TWIN_PHONE_ROWS} * 1.6em + 20px) !important; }} "
    "#compare-race, #compare-race .column { gap: 6px; } #compare-race .row { row-gap: 6px; } "
    "#compare-left-stats, #compare-right-stats { min-height: 96px; } #compare-twin-stats { min-height: 72px; } "
    f"#compare-takeaway {{ min-height: 184px; }} {LEGEND_PHONE_CSS}}}</style>"
)
# Compare's one legend under its sides: every mark a race may show (no window: a race is within the context)
RACE_LEGEND = RACE_CSS + legend(tuple(mark for mark in MARKS if mark != "window"), one_line=False)


def cell(char: str | None, kind: str = "given", confidence: float = float("nan")) -> str:
    """One position of the canvas: a mask (char None; kind "taken_back" when remasking took it back this step) or a
    character "given", "new" (revealed this step) or "earlier" (tinted by its confidence)."""
    if char is None:
        colour = TAKEN_BACK_COLOUR if kind == "taken_back" else MASK_COLOUR
        return f"<span class='mdlm-mask' style='background:{colour}; {MASK_CELL}'>{MASK_GLYPH}</span>"
    # a line break shows as a glyph (a position to see and count), then breaks the line
    shown, tail = (NEWLINE_GLYPH, "\n") if char == "\n" else (html.escape(char), "")
    if kind == "given":
        style = "font-weight: bold;" + (f" color: {SUBDUED_TEXT};" if tail else "")
        return f"<span class='mdlm-given' style='{style}'>{shown}</span>{tail}"
    background = NEW_COLOUR if kind == "new" else confidence_colour(confidence)
    title = f" title='p={confidence:.2f}'" if confidence == confidence else ""
    return f"<span class='mdlm-{kind}' style='background:{background}'{title}>{shown}</span>{tail}"


# a shadow along a canvas's bottom edge while more lies below, drawn by backgrounds alone (a fixed shadow under a
# cover that scrolls with the text): a scroll-driven animation did it before, and crashed Chromium's tab
MORE_BELOW_SHADOW = "rgba(31, 39, 51, 0.22)"
# Generate's and Infill's canvas on a phone, under the prompt and the run buttons: all of it on the first screen
PHONE_CANVAS_ROWS = 8
CANVAS_CSS = (
    "<style>.mdlm-canvas:not(.mdlm-follow):not(.mdlm-placeholder) { background: "
    f"linear-gradient({CANVAS_BACKGROUND}, {CANVAS_BACKGROUND}) 0 100% / 100% 14px no-repeat local, "
    f"linear-gradient(transparent, {MORE_BELOW_SHADOW}) 0 100% / 100% 14px no-repeat scroll, "
    f"{CANVAS_BACKGROUND} !important; }} @media (max-width: {PHONE_WIDTH_PX + 110}px) {{ "
    "#generate-canvas .mdlm-canvas, #infill-canvas .mdlm-canvas "
    f"{{ height: calc({PHONE_CANVAS_ROWS} * 1.6em + 20px) !important; }} {LEGEND_PHONE_CSS}}}</style>"
)


def canvas_box(
    cells: list[str], rows: int = CANVAS_ROWS, font_px: int = 15, follow: bool = False, shrink: bool | None = None
) -> str:
    """The cells in the fixed-height canvas box; `follow`: it stays scrolled to its end as the text grows (a
    column-reverse box anchors its scroll at the bottom, no script needed), where a long text's live window is."""
    style, body = canvas_style(rows, font_px, shrink), "".join(cells)
    if not follow:
        return f"{CANVAS_CSS}<div class='mdlm-canvas' style='{style}'>{body}</div>"
    flow = "display: flex; flex-direction: column-reverse;"
    return f"{CANVAS_CSS}<div class='mdlm-canvas mdlm-follow' style='{style} {flow}'><div>{body}</div></div>"


def placeholder(message: str, rows: int = CANVAS_ROWS) -> str:
    """The canvas box holding a message instead of cells, at the canvas's height."""
    return (
        f"<div class='mdlm-canvas mdlm-placeholder' style='{canvas_style(rows)} color: {SUBDUED_TEXT}; "
        f"font-family: inherit;'>{html.escape(message)}</div>"
    )


def canvas_cells(model: MDLM, state: SamplerState, row: int, span: slice) -> list[str]:
    """The cells of positions `span` of a row: this step's reveals highlighted (not in the final frame), earlier
    ones tinted by confidence."""
    tokens, revealed, remasked, confidence, given = (
        x[row, span].tolist() for x in (state.tokens, state.revealed, state.remasked, state.confidence, state.is_given)
    )
    cells = []
    for token, is_new, is_taken_back, conf, is_given in zip(tokens, revealed, remasked, confidence, given, strict=True):
        if token == model.mask_id:
            cells.append(cell(None, "taken_back" if is_taken_back else "mask"))
        else:
            kind = "given" if is_given else "new" if is_new and not state.done else "earlier"
            cells.append(cell(model.tokenizer.vocab[token], kind, conf))
    return cells


def finished_text(model: MDLM, state: SamplerState, row: int, span: slice) -> str:
    """Positions `span` of a finished row as text, given runs bold (a long text's part before its live window:
    light enough to stream at every step)."""
    tokens, given = state.tokens[row, span].tolist(), state.is_given[row, span].tolist()
    parts = []
    for is_given, run in itertools.groupby(zip(tokens, given, strict=True), key=lambda pair: pair[1]):
        text = html.escape(model.tokenizer.decode([token for token, _ in run]))
        parts.append(f"<b class='mdlm-given'>{text}</b>" if is_given else f"<span class='mdlm-done'>{text}</span>")
    return "".join(parts)


def render_canvas(
    model: MDLM,
    state: SamplerState,
    row: int = 0,
    rows: int = CANVAS_ROWS,
    font_px: int = 15,
    shrink: bool | None = None,
    kept: int | None = None,
) -> str:
    """The canvas as HTML: one cell per position within the model's context; past it, the finished part as text,
    the live window's cells framed and a count of what is to come, the box following the window. `kept`: where a
    finished text ended (at a line, a speech), the cells after it struck out."""
    length = state.tokens.size(1)
    if kept is not None and kept < length <= model.block_size:  # a long text's thousands of cells would stall the page
        cells = canvas_cells(model, state, row, slice(0, length))
        return canvas_box([*cells[:kept], struck("".join(cells[kept:]))], rows, font_px, shrink=shrink)
    start, end = state.window or (0, length)
    if end - start == length or length <= model.block_size:
        return canvas_box(canvas_cells(model, state, row, slice(0, length)), rows, font_px, shrink=shrink)
    still_masked = int((state.tokens[row, end:] == model.mask_id).sum())
    after = f"\n… {still_masked:,} more characters to write" if still_masked else ""
    after += f" ({length - end - still_masked:,} of the template given)" if still_masked < length - end else ""
    cells, kept = canvas_cells(model, state, row, slice(start, end)), length if kept is None else kept
    split = kept - start if kept >= start else len(cells)  # the window's cells kept; the rest struck out
    window = "".join(cells[:split]) + (struck("".join(cells[split:])) if split < len(cells) else "")
    window = f"<span class='mdlm-window' style='{WINDOW_FRAME}'>{window}</span>"
    if kept < start:  # the text ended before the last window: struck out from there on
        window = struck(finished_text(model, state, row, slice(kept, start)) + window)
    body = (
        finished_text(model, state, row, slice(0, min(kept, start)))
        + window
        + f"<span class='mdlm-to-come' style='color:{SUBDUED_TEXT}'>{after}</span>"
    )
    return canvas_box([body], rows, font_px, follow=True, shrink=shrink)


def struck(cells: str) -> str:
    """Characters written after where a text ended, struck out."""
    return f"<span class='mdlm-dropped' style='{DROPPED}' title='{DROPPED_TITLE}'>{cells}</span>"


def draft_cells(chars: list[str | None], total: int) -> list[str]:
    """A draft canvas's cells (None: a mask) and, where `total` is more, how many more it leaves out (DRAFT_CELLS)."""
    more = (
        [f"<span style='color:{SUBDUED_TEXT}'> … and {total - len(chars):,} more</span>"] if total > len(chars) else []
    )
    return [cell(char) for char in chars] + more


def draft_canvas(
    prompt: str | None,
    length: float | None,
    rows: int = CANVAS_ROWS,
    font_px: int = 15,
    legend: bool = True,
    shrink: bool | None = None,
) -> str:
    """The canvas before a run: the prompt (whole), then a mask for each character to generate (`legend`: with its
    legend)."""
    try:
        length = max(0, int(length or 0))
    except (TypeError, ValueError):  # a half-typed number: keep a canvas on screen anyway
        length = 0
    prompt = prompt or ""
    masks = min(length, max(0, DRAFT_CELLS - len(prompt)))
    canvas = canvas_box(draft_cells([*prompt, *[None] * masks], len(prompt) + length), rows, font_px, shrink=shrink)
    return with_legend(canvas) if legend else canvas


def draft_template(template: str | None, blank: str = "_") -> str:
    """The Infill tab's canvas before a run: the template with a mask for each blank (or a message in its place),
    and its legend."""
    if not template:
        problem = f"Type a template: each {blank} becomes a masked character to fill."
    elif len(template) > MAX_CANVAS:  # said before the run, in the words the run would use
        problem = (
            f"The template has {len(template):,} characters, but a run writes at most {MAX_CANVAS:,}: "
            f"shorten it by {len(template) - MAX_CANVAS:,}."
        )
    elif blank not in template:
        problem = f"The template has no blank: mark each character to fill with {blank}."
    else:
        cells = draft_cells([None if char == blank else char for char in template[:DRAFT_CELLS]], len(template))
        return with_legend(canvas_box(cells))
    return with_legend(placeholder(problem))


# past the model's context a frame renders the whole canvas (a 2,000-character run sent 254 frames, 7.9 MB of HTML,
# and the page's long tasks reached 2 s): more than this a second is more than the page can draw
MAX_LONG_FRAMES_PER_SECOND = 20
THROTTLED = None  # what `frames` yields for a step it does not draw: the event's stream drops it


def too_soon(model: MDLM, state: SamplerState, since_last: float) -> bool:
    """Whether a long run's state, neither its first nor its last, comes too soon after the last frame to draw."""
    long = state.tokens.size(1) > model.block_size
    return long and 0 < state.step and not state.done and since_last < 1 / MAX_LONG_FRAMES_PER_SECOND
