"""Compare's finished text, as the Rewrite panel takes it: it ends where Generate's would (at a line's end, else a
word's), never mid-word; the characters after it are struck out on the canvas and left out of the order view."""

import html
from html.parser import HTMLParser

import pytest

from mdlm_hf.pipeline import ended
from mdlm_space import race
from mdlm_space.render import NEWLINE_GLYPH
from tests.app_helpers import DESKTOP, PHONE, chromium, new_page
from tests.space_browser import screenshot_path, shipped_server  # noqa: F401

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


# the canvas's text as the page function reads it: without its struck-out tail, and with it
CANVAS_TEXTS = (
    "box => { const whole = box.textContent.replaceAll('↵', ''); const copy = box.cloneNode(true);"
    " copy.querySelectorAll('.mdlm-dropped').forEach((tail) => tail.remove());"
    " return [copy.textContent.replaceAll('↵', ''), whole]; }"
)


@pytest.mark.browser
def test_browser_compare_keeps_its_headings_in_view_and_gives_the_panel_whole_words(shipped_server, tmp_path):  # noqa: F811
    # on a 390x844 phone, bringing the race into view scrolled its headings off the top (the race, from the headings
    # to the takeaway, was 867 px high); and the text the Rewrite panel took ended mid-word, at the race's length
    from playwright.sync_api import expect

    with chromium() as browser:
        for width, height in (PHONE, DESKTOP):
            page = new_page(browser, (width, height))
            page.goto(shipped_server)
            page.get_by_role("tab", name="Compare").click()
            page.get_by_role("button", name="Compare", exact=True).click()
            expect(page.locator("#compare-takeaway")).to_contain_text("Takeaway:", timeout=60_000)
            page.wait_for_timeout(300)
            page.screenshot(path=str(screenshot_path(tmp_path, f"compare-race-{width}x{height}.png")))
            headings = page.get_by_role("tabpanel").locator("h3")
            expect(headings).to_have_text(["Left to right", "Confidence order", "Autoregressive twin"])
            for element in [*headings.all(), *(page.locator(f"#compare-{side}") for side in IN_VIEW)]:
                box = element.bounding_box()
                assert box["y"] >= 0 and box["y"] + box["height"] <= height + 1, (width, element, box)
            panel = page.locator("#rewrite-text textarea")
            expect(panel).not_to_have_value("")
            text, whole = page.locator("#compare-right-canvas .mdlm-canvas").evaluate(CANVAS_TEXTS)
            assert panel.input_value() == text and whole.startswith(text) and text.startswith("ROMEO:\n")
            assert len(text) == len(whole) or (whole[len(text)].isspace() and not text[-1].isspace()), (text, whole)
            page.close()


IN_VIEW = ("left-canvas", "right-canvas", "twin-canvas", "takeaway")
