"""Compare's finished text, as the Rewrite panel takes it: it ends where Generate's would (at a line's end, else a
word's), never mid-word; the characters after it are struck out on the canvas and left out of the order view."""

import html
from html.parser import HTMLParser

from mdlm_hf.pipeline import ended
from mdlm_space import race
from mdlm_space.render import NEWLINE_GLYPH

PROMPT = "to be or\n"


class PanelText(HTMLParser):
    """The text the Rewrite panel's page function (rewrite_panel.TAKE_FINISHED_CANVAS) reads from a canvas: the
    .mdlm-canvas box's text without its struck-out tail, line-break glyphs gone."""

    def __init__(self, skip_dropped: bool = True) -> None:
        super().__init__()
        self.skip_dropped, self.depth, self.dropped, self.parts = skip_dropped, 0, 0, []

    def handle_starttag(self, tag, attrs):
        classes = (dict(attrs).get("class") or "").split()
        if self.depth:
            self.depth += 1
            self.dropped += bool(self.dropped) or (self.skip_dropped and "mdlm-dropped" in classes)
        elif "mdlm-canvas" in classes:
            self.depth = 1

    def handle_endtag(self, tag):
        if self.depth:
            self.depth -= 1
            self.dropped = max(0, self.dropped - 1) if self.dropped else 0

    def handle_data(self, data):
        if self.depth and not self.dropped:
            self.parts.append(data)

    @classmethod
    def of(cls, canvas: str, skip_dropped: bool = True) -> str:
        parser = cls(skip_dropped)
        parser.feed(canvas)
        return html.unescape("".join(parser.parts)).replace(NEWLINE_GLYPH, "")


def test_compares_text_ends_at_a_word_or_line_end_on_its_canvas_and_in_its_order_view(tiny_model):
    frames = list(race.compare(tiny_model, None, PROMPT, 50, 8, 1.0, 0, False, True))
    left, _, right, _, takeaway, seed, *_ = frames[-1]
    assert takeaway and seed == 0
    for canvas in (left, right):
        whole, text = PanelText.of(canvas, skip_dropped=False), PanelText.of(canvas)
        assert len(whole) == len(PROMPT) + 50 and whole.startswith(text) and text.startswith(PROMPT)
        assert text == ended(whole, len(PROMPT), "line")  # as Generate's ends by default
        assert len(text) < len(whole) and whole[len(text)].isspace() and not text[-1].isspace()  # not mid-word
        assert "class='mdlm-dropped'" in canvas
    right_order = frames[-1][-1]
    assert PanelText.of(right_order) == PanelText.of(right)  # the order view is of the text the panel takes


def test_a_race_still_running_strikes_nothing_out(tiny_model):
    first = next(iter(race.compare(tiny_model, None, PROMPT, 50, 8, 1.0, 0, False, True)))
    assert "mdlm-dropped" not in first[0] + first[2]
