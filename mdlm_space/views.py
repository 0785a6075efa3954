"""How it works' forward view (a line masked at t, the model's guesses and the truth, column by column) and Score's
text tinted by the model's surprise: the views that are no canvas of a run."""

from __future__ import annotations

import html
import itertools

from mdlm_space.render import (
    CANVAS_BACKGROUND,
    CANVAS_FONT,
    LEGEND_TEXT,
    NEWLINE_GLYPH,
    SPACE_GLYPH,
    SUBDUED_TEXT,
    canvas_box,
    cell,
    colour_scale,
)

RIGHT_COLOUR, WRONG_COLOUR = "hsl(212,80%,78%)", "hsl(30,95%,72%)"  # blue / orange: apart for any colour vision
FORWARD_ROWS = ("x_t", "model", "true")  # the rows of the forward view, top to bottom


def shown_char(char: str) -> str:
    """A character as one visible cell: a line break or a space as its glyph."""
    return {"\n": NEWLINE_GLYPH, " ": SPACE_GLYPH}.get(char, html.escape(char))


def forward_column(char: str, masked: bool, guess: str) -> str:
    """One position of the forward view: x_t above, the model's guess below it, and under a wrong guess the true
    character (shown, not a tooltip: phones cannot hover)."""
    stack = "display: inline-flex; flex-direction: column; align-items: center; min-width: 1.15ch;"
    if not masked:
        plain = "&nbsp;" if char == " " else shown_char(char)
        x_t, model_row, truth = plain, f"<span style='color:{SUBDUED_TEXT}'>{plain}</span>", "&nbsp;"
    else:
        right = guess == char
        x_t = cell(None)  # a mask, as on the canvas
        colour = RIGHT_COLOUR if right else WRONG_COLOUR
        model_row = f"<span class='mdlm-{'right' if right else 'wrong'}' style='background:{colour}'>"
        model_row += f"{shown_char(guess)}</span>"
        truth = "&nbsp;" if right else f"<span class='mdlm-true' style='color:#1f2733'>{shown_char(char)}</span>"
    # each row in a wrapper of its own, so its cell stays inline (a glyph's height, as on the canvas), not a
    # flex item stretched to the row's whole line height
    rows = "".join(f"<span>{row}</span>" for row in (x_t, model_row, truth))
    return f"<span class='mdlm-column' style='{stack}'>{rows}</span>"


def forward_view(line: str, is_masked: list[bool], guesses: list[str]) -> str:
    """The forward view: a label column (x_t, model, true), then the line's columns, grouped into words so that
    lines break between words."""
    label_style = f"display: inline-flex; flex-direction: column; padding-right: 8px; color: {SUBDUED_TEXT};"
    label_style += " font-family: inherit; font-size: 12px; line-height: 1.6rem; text-align: right;"
    labels = "".join(f"<span class='mdlm-row-label'>{name}</span>" for name in FORWARD_ROWS)
    items = [f"<span class='mdlm-row-labels' style='{label_style}'>{labels}</span>"]
    # a word wider than a whole line still wraps
    word = "<span class='mdlm-word' style='display: inline-flex; flex-wrap: wrap;'>{}</span>"
    positions = zip(line, is_masked, guesses, strict=True)
    for between_words, run in itertools.groupby(positions, key=lambda position: position[0] in " \n"):
        columns = [forward_column(*position) for position in run]
        items += columns if between_words else [word.format("".join(columns))]
    box = (
        f"{CANVAS_FONT} display: flex; flex-wrap: wrap; row-gap: 10px; align-items: flex-start; font-size: 15px; "
        f"line-height: 1.6rem; padding: 10px; border-radius: 8px; background: {CANVAS_BACKGROUND}; color: #1f2733;"
    )
    legend = (
        f"<div style='{LEGEND_TEXT}'>x_t: the line with each character masked "
        f"with probability t &nbsp; model: its guess for each mask, <span style='background:{RIGHT_COLOUR}'>right"
        f"</span> or <span style='background:{WRONG_COLOUR}'>wrong</span> &nbsp; true: the character a wrong guess "
        f"missed &nbsp; {NEWLINE_GLYPH} line break, {SPACE_GLYPH} space</div>"
    )
    return f"<div class='mdlm-forward' style='{box}'>{''.join(items)}</div>{legend}"


def surprise_colour(bits: float, most: float) -> str:
    """Background of a character the model gave `bits` of surprise (-log2 p), `most` being the top of the scale:
    one hue, darker for more surprise (it reads the same with any colour vision)."""
    share = min(max(bits / most, 0.0), 1.0) if most > 0 else 0.0
    return f"hsl(24,90%,{96 - 40 * share:.0f}%)"


def score_view(text: str, bits: list[float], most: float) -> str:
    """The scored text in a canvas box: each character tinted by its surprise, its bits in a tooltip; one not
    scored yet (NaN bits) plain and subdued."""
    cells = []
    for char, surprise in zip(text, bits, strict=True):
        shown, tail = (NEWLINE_GLYPH, "\n") if char == "\n" else (html.escape(char), "")
        if surprise != surprise:
            cells.append(f"<span class='mdlm-unscored' style='color:{SUBDUED_TEXT}'>{shown}</span>{tail}")
            continue
        style = f"background:{surprise_colour(surprise, most)}"
        cells.append(f"<span class='mdlm-scored' style='{style}' title='{surprise:.2f} bits'>{shown}</span>{tail}")
    legend = (
        f"<div style='{LEGEND_TEXT}'>surprise, -log2 p of each character given "
        f"those before it: {colour_scale(surprise_colour(0, 1), surprise_colour(1, 1))} 0 … {most:.1f} bits or more "
        "(a uniform guess over the vocabulary) &nbsp; "
        f"{NEWLINE_GLYPH} line break</div>"
    )
    return canvas_box(cells) + legend
