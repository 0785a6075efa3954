"""The app in headless Chromium: every tab at desktop and phone width, runs in view, Stop, lines, contrast."""

import os
import re
import shutil
import time
from pathlib import Path

import pytest

from mdlm_hf import MASK_GLYPH
from mdlm_hf.windows import MAX_CANVAS
from mdlm_space import handlers, loading
from mdlm_space.texts import INFILL_EXAMPLES, SHAKESPEARE, SONNET_18, sample_passage
from tests.app_helpers import DESKTOP, JULIET, LOW_CONTRAST, PHONE, REQUIRE_BROWSER, chromium, new_page
from tests.conftest import SHAKESPEARE_LIKE


def test_browser_tests_skip_without_chromium_unless_ci_requires_it(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setattr(Path, "exists", lambda self: False)
    monkeypatch.delenv(REQUIRE_BROWSER, raising=False)
    with pytest.raises(pytest.skip.Exception, match="apt-get install -y chromium chromium-driver"):
        with chromium():
            pass
    monkeypatch.setenv(REQUIRE_BROWSER, "1")
    with pytest.raises(pytest.fail.Exception, match="MDLM_REQUIRE_BROWSER is set"):
        with chromium():
            pass


def screenshots(tmp_path: Path) -> Path:
    """Where the browser tests save their screenshots: $MDLM_SCREENSHOTS (to keep and look at) or tmp_path."""
    path = Path(os.environ.get("MDLM_SCREENSHOTS") or tmp_path)
    path.mkdir(parents=True, exist_ok=True)
    return path


TABS = ("Generate", "Infill", "Compare", "Score", "How it works")


CELL_CLASSES = "canvas => Array.from(canvas.querySelectorAll('span[class^=mdlm-]'), cell => cell.className)"


def inside(page, locator, top_only: bool = False) -> bool:
    """Whether the element (or, top_only, its first 40 px) lies inside the viewport, the page not scrolled."""
    box, height = locator.bounding_box(), page.viewport_size["height"]
    bottom = box["y"] + (min(40, box["height"]) if top_only else box["height"])
    return box["y"] >= 0 and bottom <= height and page.evaluate("window.scrollY") == 0


def masks_look_apart(page, canvas) -> bool:
    """Whether two adjacent mask cells are drawn apart: a light gap between them, not one grey bar."""
    import io

    from PIL import Image

    first, second = (canvas.locator(".mdlm-mask").nth(i).bounding_box() for i in range(2))
    assert abs(first["y"] - second["y"]) < 1 and second["x"] > first["x"]
    clip = dict(x=first["x"], y=first["y"], width=second["x"] + second["width"] - first["x"], height=first["height"])
    image = Image.open(io.BytesIO(page.screenshot(clip=clip))).convert("L")
    middle = image.height // 2
    fill = image.getpixel((int(first["width"] / 2), middle))
    edge = int(second["x"] - first["x"])
    gap = max(image.getpixel((x, middle)) for x in range(max(0, edge - 2), min(image.width, edge + 2)))
    return gap > fill + 30


@pytest.mark.browser
def test_browser_run_button_and_canvas_stay_in_view_and_every_mask_is_a_cell(server, tmp_path, counted_steps):
    from playwright.sync_api import expect

    shots = screenshots(tmp_path)
    with chromium() as browser:
        page = new_page(browser)
        page.goto(server)
        for tab, label, num_blanks in (("Generate", "Generate", 121), ("Infill", "Fill the blanks", 8)):
            page.get_by_role("tab", name=tab).click()
            name = tab.lower()
            button = page.get_by_role("button", name=label, exact=True)
            canvas, final_text = page.locator(f"#{name}-canvas .mdlm-canvas"), page.locator(f"#{name}-final-text")
            expect(canvas).to_be_visible()
            # before a run: the button and the top of a canvas holding one mask cell per character to fill
            assert inside(page, button) and inside(page, canvas, top_only=True), tab
            assert canvas.evaluate(CELL_CLASSES).count("mdlm-mask") == num_blanks, tab
            assert masks_look_apart(page, canvas), tab
            canvas_box, text_box = canvas.bounding_box(), final_text.bounding_box()
            button.click()
            page.wait_for_function(  # mid-run: masks and revealed characters on the canvas
                "id => { const c = document.querySelector(`#${id}-canvas .mdlm-canvas`);"
                " return c && c.querySelector('.mdlm-mask') && c.querySelector('.mdlm-new, .mdlm-earlier'); }",
                arg=name,
            )
            assert inside(page, button) and inside(page, canvas, top_only=True), tab
            cells = canvas.evaluate(CELL_CLASSES)
            assert len(cells) - cells.count("mdlm-given") == num_blanks, tab  # each position to fill is one cell
            page.screenshot(path=str(shots / f"desktop-{name}-running.png"))
            expect(page.locator(f"#{name}-readout")).to_contain_text("chars/s", timeout=60_000)  # the run is done
            cells = canvas.evaluate(CELL_CLASSES)
            assert "mdlm-new" not in cells and "mdlm-mask" not in cells, tab  # the final frame: nothing "this step"
            # the canvas kept its height, so the output below it did not move
            assert canvas.bounding_box()["height"] == canvas_box["height"], tab
            assert final_text.bounding_box()["y"] == text_box["y"], tab
            assert inside(page, button), tab
            page.screenshot(path=str(shots / f"desktop-{name}-done.png"))


@pytest.mark.browser
@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_browser_the_first_screen_is_the_prompt_the_run_button_and_the_canvas(server, tmp_path, viewport):
    # on a phone the canvas sat below every control (length, end, steps, options), off the first screen while it wrote
    from playwright.sync_api import expect

    where = "desktop" if viewport == DESKTOP else "phone"
    with chromium() as browser:
        page = new_page(browser, viewport)
        page.goto(server)
        for tab, field, label in (
            ("Generate", "Prompt (kept fixed at the start)", "Generate"),
            ("Infill", "Template: every _ is a character to fill", "Fill the blanks"),
        ):
            page.get_by_role("tab", name=tab).click()
            panel = page.get_by_role("tabpanel")
            canvas = page.locator(f"#{tab.lower()}-canvas .mdlm-canvas")
            expect(canvas).to_be_visible()
            page.screenshot(path=str(screenshots(tmp_path) / f"{where}-{tab.lower()}-first-screen.png"))
            for element in (panel.get_by_label(field), panel.get_by_role("button", name=label, exact=True), canvas):
                assert inside(page, element), (tab, element, element.bounding_box())
            # the canvas right after the run buttons, before the length and steps
            steps = panel.get_by_label("number input for Denoising steps")
            assert canvas.bounding_box()["y"] < steps.bounding_box()["y"], tab
        page.get_by_role("tab", name="Generate").click()
        page.get_by_role("button", name="Generate", exact=True).click()
        expect(page.locator("#generate-readout")).to_contain_text(re.compile(r"step [1-9]\d*/|chars/s"))
        assert inside(page, page.locator("#generate-canvas .mdlm-canvas")), "while it writes"


@pytest.mark.browser
def test_browser_the_legend_of_a_plain_run_is_one_line_without_taken_back(server):
    # the legend listed all eight marks whatever the run (two lines on a desktop): "taken back" without remasking
    from playwright.sync_api import expect

    with chromium() as browser:
        page = new_page(browser)
        page.goto(server)
        page.get_by_role("button", name="Generate", exact=True).click()  # remask ratio 0, the default
        expect(page.locator("#generate-readout")).to_contain_text("chars/s", timeout=60_000)
        legend = page.locator("#generate-canvas .mdlm-legend")
        expect(legend).to_contain_text("given")
        shown = legend.inner_text()
        assert "taken back" not in shown and "window" not in shown and "masked" not in shown, shown
        assert legend.bounding_box()["height"] < 2 * 12 * 1.8, shown  # one line of 12 px text


@pytest.mark.browser
def test_browser_after_stop_final_text_readout_and_replay_agree(server, tmp_path, counted_steps):
    # after Stop the readout's step and the replay's frames disagreed by one, and Final was empty
    from playwright.sync_api import expect

    with chromium() as browser:
        page = new_page(browser)
        page.goto(server)
        readout, final_text = page.locator("#generate-readout"), page.locator("#generate-final-text textarea")
        page.get_by_role("button", name="Generate", exact=True).click()
        page.wait_for_function(  # a few steps in
            "() => +(document.querySelector('#generate-readout').innerText.match(/step (\\d+)\\//) || [0, 0])[1] >= 6",
            timeout=60_000,
        )
        page.get_by_role("button", name="Stop").first.click()
        page.wait_for_timeout(1500)  # the run has ended: nothing streams any more
        step = int(re.search(r"step (\d+)/", readout.inner_text()).group(1))
        assert 6 <= step < 32
        replay = page.locator("#generate-replay input[type=range]")
        expect(replay).to_be_enabled()
        assert int(replay.get_attribute("max")) == step  # one frame per step streamed, step 0 the first
        canvas = page.locator("#generate-canvas .mdlm-canvas")
        masks = canvas.evaluate(CELL_CLASSES).count("mdlm-mask")
        stopped = final_text.input_value()
        assert masks > 0 and stopped.count(MASK_GLYPH) == masks  # Final shows the stopped canvas, masks and all
        page.screenshot(path=str(screenshots(tmp_path) / "desktop-generate-stopped.png"))
        # (gradio's page may still mark the readout "Error" when the stop lands mid-frame)


WHOLE_WORDS = """canvas => {
    const cells = Array.from(canvas.querySelectorAll('span[class^=mdlm-]'));
    const words = [[]];
    for (const cell of cells) {
        if (cell.textContent === ' ' || cell.textContent === '\u21b5') words.push([]);
        else words[words.length - 1].push(cell.getBoundingClientRect().top);
    }
    return words.filter(tops => new Set(tops).size > 1).length;
}"""


CUT_CELLS = """canvas => {
    const box = canvas.getBoundingClientRect(), top = box.top + canvas.clientTop, bottom = top + canvas.clientHeight;
    return Array.from(canvas.querySelectorAll('span[class^=mdlm-]')).map(cell => cell.getBoundingClientRect())
        .filter(r => r.height > 0 && r.top < bottom - 0.5 && r.bottom > top + 0.5
            && (r.top < top - 0.5 || r.bottom > bottom + 0.5)).length;
}"""


WHOLE_FORWARD_WORDS = """view => Array.from(view.querySelectorAll('.mdlm-word')).filter(word =>
    new Set(Array.from(word.children, column => column.getBoundingClientRect().top)).size > 1).length"""


@pytest.mark.browser
def test_browser_a_canvas_shows_whole_lines_never_a_cut_one(server):
    # the canvas box showed the top of its 11th line, cut in half, below the 10 it holds
    from playwright.sync_api import expect

    with chromium() as browser:
        for where, (width, height) in (("desktop", DESKTOP), ("phone", PHONE)):
            page = new_page(browser, (width, height))
            page.goto(server)
            canvases = {"Generate": "#generate-canvas", "Compare": "#compare-left-canvas"}
            for tab, canvas in canvases.items():
                page.get_by_role("tab", name=tab).click()
                box = page.locator(f"{canvas} .mdlm-canvas")
                expect(box).to_be_visible()
                overflows = box.evaluate("c => c.scrollHeight > c.clientHeight + 1")
                assert box.evaluate(CUT_CELLS) == 0, (where, tab, overflows)
                box.evaluate("c => { c.scrollTop = c.scrollHeight; }")  # scrolled to its end, as a long run follows
                assert box.evaluate(CUT_CELLS) == 0, (where, tab, "at the end")
            page.close()


CHARACTERS_PER_LINE = """canvas => {
    const style = getComputedStyle(canvas), probe = document.createElement('span');
    probe.style.cssText = 'font: inherit; white-space: pre; visibility: hidden; position: absolute;';
    probe.textContent = 'm'.repeat(40);
    canvas.appendChild(probe);
    const width = probe.getBoundingClientRect().width / 40;
    probe.remove();
    return Math.floor((canvas.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight)) / width);
}"""


@pytest.mark.browser
def test_browser_compare_on_a_phone_holds_a_line_of_verse_per_side(server):
    # side by side on a phone, each Compare canvas held about 14 characters a line, so every line of verse (about
    # 40) wrapped two or three times; the sides stay side by side (the race in the first screen) and their text and
    # margins shrink with the screen instead, whole at desktop width, but to no less than 12 px (9 px was too small
    # to read on a phone)
    with chromium() as browser:
        widths = {}
        for where, (width, height) in (("desktop", DESKTOP), ("phone", PHONE)):
            page = new_page(browser, (width, height))
            page.goto(server)
            page.get_by_role("tab", name="Compare").click()
            for side in ("left", "right"):
                box = page.locator(f"#compare-{side}-canvas .mdlm-canvas")
                box.wait_for()
                widths[where, side] = box.evaluate(CHARACTERS_PER_LINE)
                font_px = float(box.evaluate("c => parseFloat(getComputedStyle(c).fontSize)"))
                assert font_px >= (13 if where == "desktop" else 12), (where, side, font_px)
            page.close()
    assert min(widths[("phone", side)] for side in ("left", "right")) >= 17, widths
    assert min(widths[("desktop", side)] for side in ("left", "right")) >= 40, widths


@pytest.mark.browser
def test_browser_every_tab_at_desktop_and_phone_width(server, tmp_path, model_dir):
    from playwright.sync_api import expect

    model, _ = loading.load_model(model_dir)
    line = SONNET_18.splitlines()[0]
    shots = screenshots(tmp_path)
    with chromium() as browser:
        for where, (width, height) in (("desktop", DESKTOP), ("phone", PHONE)):
            page = new_page(browser, (width, height))
            page.goto(server)
            expect(page.locator("#generate-canvas .mdlm-canvas")).to_be_visible()
            for tab in TABS:  # every tab in sight: no "..." overflow menu hides one
                button = page.get_by_role("tab", name=tab)
                assert button.is_visible() and button.bounding_box()["x"] + button.bounding_box()["width"] <= width
            for tab in TABS[:4]:
                page.get_by_role("tab", name=tab).click()
                page.wait_for_timeout(300)
                page.screenshot(path=str(shots / f"{where}-{tab.lower()}.png"), full_page=True)
            page.get_by_role("button", name="Score", exact=True).click()  # the Score tab, scored
            expect(page.locator("#score-summary")).to_contain_text("bits per character", timeout=60_000)
            assert page.locator("#score-view .mdlm-scored").count() == len(sample_passage(SHAKESPEARE, 128))
            page.screenshot(path=str(shots / f"{where}-score-done.png"), full_page=True)
            # lines break between words, not inside them
            page.get_by_role("tab", name="Infill").click()
            page.get_by_label("Template: every _ is a character to fill").fill(INFILL_EXAMPLES[1])
            infill_canvas = page.locator("#infill-canvas .mdlm-canvas")
            expect(infill_canvas).to_contain_text("window breaks")
            assert infill_canvas.evaluate(WHOLE_WORDS) == 0, where
            # Compare: the prompt, its button and the two sides of the race, side by side, in the first screen (Score's
            # run brought its view into sight: back at the top, where the tabs are)
            page.evaluate("window.scrollTo(0, 0)")
            page.get_by_role("tab", name="Compare").click()
            left, right = (
                page.locator("#compare-left-canvas .mdlm-canvas"),
                page.locator("#compare-right-canvas .mdlm-canvas"),
            )
            expect(left).to_be_visible()
            left_box, right_box = left.bounding_box(), right.bounding_box()
            assert left_box["x"] + left_box["width"] <= right_box["x"] and abs(left_box["y"] - right_box["y"]) < 2
            assert inside(page, page.get_by_role("button", name="Compare", exact=True)), where
            assert inside(page, left, top_only=True) and inside(page, right, top_only=True), where
            # How it works: labelled rows, the true characters shown, the mask-ratio box obeyed, the plot marked
            page.get_by_role("tab", name="How it works").click()
            view, summary = page.locator("#forward-view"), page.locator("#forward-summary")
            for label in ("x_t", "model", "true"):
                expect(view.locator(".mdlm-row-label", has_text=label)).to_be_visible()
            expect(summary).to_have_text(handlers.forward_process(model, line, 0.3, 0)[1])
            page.get_by_label("number input for Mask ratio t").fill("0.5")
            expect(summary).to_have_text(handlers.forward_process(model, line, 0.5, 0)[1])
            wrong = view.locator(".mdlm-wrong")
            assert (
                view.locator(".mdlm-true").count() == wrong.count() > 0
                and view.locator(".mdlm-true").first.is_visible()
            )
            assert view.evaluate(WHOLE_FORWARD_WORDS) == 0, where
            expect(page.locator("#accuracy-plot img")).to_be_visible(timeout=60_000)
            assert not page.locator("#accuracy-plot [data-testid='block-label']").is_visible()
            page.wait_for_timeout(500)
            page.screenshot(path=str(shots / f"{where}-how-it-works.png"), full_page=True)
            page.close()


@pytest.mark.browser
def test_browser_generate_infill_and_compare(server, tmp_path):
    from playwright.sync_api import expect

    with chromium() as browser:
        page = browser.new_page()
        page.goto(server)
        # the length's maximum follows the prompt: a run holds MAX_CANVAS characters
        prompt, length = (
            page.get_by_label("Prompt (kept fixed at the start)"),
            page.get_by_label("number input for Characters to generate (at most)"),
        )
        prompt.fill(JULIET)
        expect(length).to_have_attribute("max", str(MAX_CANVAS - 49))
        prompt.fill("ROMEO:\n")
        expect(length).to_have_value("121")
        page.get_by_role("button", name="Generate", exact=True).click()
        final_text = page.locator("#generate-final-text textarea")
        expect(page.locator("#generate-readout")).to_contain_text("chars/s", timeout=60_000)  # the run is done
        assert final_text.input_value().startswith("ROMEO:\n") and MASK_GLYPH not in final_text.input_value()
        expect(page.locator("#generate-canvas .mdlm-canvas")).not_to_contain_text(MASK_GLYPH)
        # the replay slider: step 0 of the run is its all-mask canvas, and its last step the final one again
        replay = page.locator("#generate-replay input[type=number]")
        expect(replay).to_be_enabled()
        replay.fill("0")
        replay.press("Enter")
        expect(page.locator("#generate-canvas .mdlm-canvas")).to_contain_text(MASK_GLYPH * 3)
        replay.fill(page.locator("#generate-replay input[type=range]").get_attribute("max"))
        replay.press("Enter")
        expect(page.locator("#generate-canvas .mdlm-canvas")).not_to_contain_text(MASK_GLYPH)
        page.get_by_text("Sampling options: order, temperature, seed").first.click()  # the seed box is in there
        seed = page.locator("#generate-seed input").input_value()
        expect(page.locator("#generate-readout")).to_contain_text(f"seed {seed} ·")  # the seed used, shown
        page.screenshot(path=str(tmp_path / "generate.png"), full_page=True)

        page.get_by_role("tab", name="Infill").click()
        template = page.get_by_label("Template: every _ is a character to fill")
        steps = page.get_by_label("number input for Denoising steps").nth(1)
        template.fill("")
        template.press_sequentially(INFILL_EXAMPLES[1])  # key by key, through 0 and 1 blank
        expect(steps).to_have_value("12", timeout=30_000)
        template.fill("")
        expect(steps).to_have_value("1")
        page.get_by_text("ROMEO:\nBut soft", exact=False).first.click()  # one of the examples
        expect(steps).to_have_value("12")
        page.get_by_role("button", name="Fill the blanks").click()
        infill_text = page.locator("#infill-final-text textarea")
        expect(page.locator("#infill-readout")).to_contain_text("chars/s", timeout=60_000)  # the run is done
        filled = infill_text.input_value()
        assert filled.startswith("ROMEO:\nBut soft, what light through ") and "_" not in filled
        page.screenshot(path=str(tmp_path / "infill.png"), full_page=True)

        page.get_by_role("tab", name="Compare").click()
        page.get_by_role("button", name="Compare", exact=True).click()
        expect(page.locator("#compare-takeaway")).to_contain_text("Takeaway:", timeout=60_000)
        # the autoregressive twin, a third column beside the two orders, done with them
        expect(page.locator("#compare-takeaway")).to_contain_text("The autoregressive twin took")
        boxes = [page.locator(f"#compare-{side}-canvas").bounding_box() for side in ("left", "right", "twin")]
        assert boxes[0]["y"] == boxes[1]["y"] == boxes[2]["y"] and boxes[0]["x"] < boxes[1]["x"] < boxes[2]["x"]
        expect(page.locator("#compare-twin-canvas .mdlm-canvas")).not_to_contain_text(MASK_GLYPH)
        page.locator("#compare-twin-stats summary").click()  # the rule, folded to one line
        expect(page.get_by_text("left to right, keys and values cached")).to_be_visible()
        page.screenshot(path=str(tmp_path / "compare.png"), full_page=True)
    assert (tmp_path / "generate.png").stat().st_size > 10_000


@pytest.mark.browser
@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_browser_only_words_it_has_read(server, tmp_path, viewport):
    from playwright.sync_api import expect

    from mdlm_hf.metrics import words

    known = set(words(SHAKESPEARE_LIKE))  # the model_dir model's words.txt
    with chromium() as browser:
        page = new_page(browser, viewport)
        page.goto(server)
        expect(page.get_by_text("at most 121")).to_be_visible()  # loaded: the load's fit will not undo the fill
        tab = page.get_by_role("tabpanel")
        button, checkbox = (
            tab.get_by_role("button", name="Generate", exact=True),
            tab.get_by_label("Only words it has read"),
        )
        # beside the run button (just above it), not in the closed options: in view with it on a phone too
        expect(checkbox).to_be_visible()
        assert 0 < button.bounding_box()["y"] - checkbox.bounding_box()["y"] < 200
        checkbox.check()
        page.get_by_label("number input for Characters to generate (at most)").fill("80")
        button.click()
        readout = page.locator("#generate-readout")
        expect(readout).to_contain_text("chars/s", timeout=60_000)
        note = re.search(r"Only words it has read: (\d+) words? written, (none|\d+)", readout.inner_text())
        assert note, readout.inner_text()
        written = page.locator("#generate-final-text textarea").input_value().removeprefix("ROMEO:\n")
        fell_back = 0 if note[2] == "none" else int(note[2])
        assert sum(w not in known for w in words(written)) <= fell_back, written
        page.screenshot(path=str(screenshots(tmp_path) / f"real-words-{viewport[0]}.png"), full_page=True)

        page.get_by_role("tab", name="Compare").click()
        page.get_by_role("tabpanel").get_by_label("Only words it has read").check()
        page.get_by_role("button", name="Compare", exact=True).click()
        expect(page.locator("#compare-takeaway")).to_contain_text("Takeaway:", timeout=60_000)
        for side in ("left", "right", "twin"):  # a side says how many fell back, where any did (a phone's lines)
            stats = page.locator(f"#compare-{side}-stats")
            expect(stats).to_contain_text("real words:")
            shown = stats.inner_text()
            assert re.search(r"real words: [\d.n/a ()%]+\n", shown), shown
            assert re.search(r"reveal rule( · fell back: [1-9]\d*)?", shown), shown
        page.screenshot(path=str(screenshots(tmp_path) / f"real-words-compare-{viewport[0]}.png"), full_page=True)


@pytest.mark.browser
def test_browser_on_a_phone_a_run_brings_its_canvas_into_view(server, tmp_path):
    from playwright.sync_api import expect

    # on a phone the Generate and Infill canvases stayed below the fold during a run
    with chromium() as browser:
        page = new_page(browser, PHONE)
        page.goto(server)
        expect(page.get_by_text("at most 16,377")).to_be_visible()  # loaded: the load's fit will not undo the fill
        length = page.get_by_label("number input for Characters to generate (at most)")
        # long runs (seconds): the canvas must come into view while they stream, not after; 4,000 characters (frames
        # of 4,000 cells at the tiny model's pace) once kept a CI browser's page too busy to answer for 30 s
        length.fill("2500")
        length.press("Enter")
        for tab, label in (("Generate", "Generate"), ("Infill", "Fill the blanks")):
            page.get_by_role("tab", name=tab).click()
            if tab == "Infill":
                page.get_by_label("Template: every _ is a character to fill").fill("ROMEO:\n" + "_" * 2500)
            canvas = page.locator(f"#{tab.lower()}-canvas")
            button = page.get_by_role("button", name=label, exact=True)
            button.click()
            expect(page.locator(f"#{tab.lower()}-readout")).to_contain_text(re.compile(r"step [1-9]\d*/"))  # streaming
            box, height = canvas.bounding_box(), PHONE[1]
            assert box["y"] >= 0 and box["y"] + box["height"] <= height + 1, (tab, box)  # 1 px: subpixel layout
            assert button.bounding_box()["y"] + button.bounding_box()["height"] > 0  # only as far as needed
            page.screenshot(path=str(screenshots(tmp_path) / f"phone-{tab.lower()}-run-in-view.png"))
            # stopped, not waited for: 1,001 passes took 14 s in one virtualenv and over 60 s in another on one Zen 3
            page.get_by_role("tabpanel").locator("button:visible", has_text="Stop").click()  # not the Rewrite panel's
            ended = re.compile(r"stopped at step|chars/s")  # a run that finished before the click ends as it was
            expect(page.locator(f"#{tab.lower()}-readout")).to_contain_text(ended, timeout=60_000)
            page.evaluate("window.scrollTo(0, 0)")


@pytest.mark.browser
@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_browser_a_long_text_grows_with_its_live_window_in_view(server, tmp_path, viewport):
    # the window followed on desktop and phone; the canvas off-screen on a phone
    from playwright.sync_api import expect

    shots = screenshots(tmp_path)
    where = "desktop" if viewport == DESKTOP else "phone"
    with chromium() as browser:
        page = new_page(browser, viewport)
        page.goto(server)
        length = page.get_by_label("number input for Characters to generate (at most)")
        expect(page.get_by_text("at most 16,377")).to_be_visible()  # loaded: the load's fit will not undo the fill
        length.fill("3000")  # about 15 s on two cores: long enough to watch it run
        length.press("Enter")
        expect(length).to_have_value("3000")
        page.get_by_label("length").check()  # End at: exactly the length, so the final text's size is known
        page.get_by_role("button", name="Generate", exact=True).click()
        # a window past the first (finished text before it, masks still to come after it), measured in the frame
        # that shows it: the box follows the window, so the window's last line (where it writes) is in the box's view
        seen = page.wait_for_function(
            """() => { const c = document.querySelector('#generate-canvas .mdlm-canvas');
                if (!(c && c.querySelector('.mdlm-done') && c.querySelector('.mdlm-window .mdlm-mask')
                      && c.textContent.includes('more characters to write')
                      && c.scrollHeight > c.clientHeight + 40)) return null;  // the text outgrew the box
                const lines = c.querySelector('.mdlm-window').getClientRects(), box = c.getBoundingClientRect();
                const last = lines[lines.length - 1];
                return {in_view: last.bottom > box.top && last.top < box.bottom}; }""",
            timeout=90_000,
        ).json_value()
        assert seen == {"in_view": True}
        # the page brought the canvas into view as the run started (on a phone it sits below the controls)
        box, height = page.locator("#generate-canvas").bounding_box(), page.viewport_size["height"]
        assert box["y"] >= 0 and box["y"] + box["height"] <= height + 1, (box, height)  # 1 px: subpixel layout
        page.screenshot(path=str(shots / f"{where}-generate-long-running.png"))
        final_text = page.locator("#generate-final-text textarea")
        expect(page.locator("#generate-readout")).to_contain_text("chars/s", timeout=120_000)  # the run is done
        assert len(final_text.input_value()) == 3007
        expect(page.locator("#generate-readout")).to_contain_text("of 3,007")
        page.screenshot(path=str(shots / f"{where}-generate-long-done.png"), full_page=True)


@pytest.mark.browser
@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_browser_every_text_meets_wcag_aa_contrast(server, viewport):
    # the help under each control was 1.91:1 (gradio's subdued text), the orange accents 2.8:1
    from playwright.sync_api import expect

    with chromium() as browser:
        page = new_page(browser, viewport)
        page.goto(server)
        page.get_by_role("button", name="Generate", exact=True).click()
        expect(page.locator("#generate-readout")).to_contain_text("chars/s", timeout=60_000)
        failures = []
        for tab in TABS:
            page.get_by_role("tab", name=tab).click()
            page.wait_for_timeout(500)
            failures += [(tab, found) for found in page.evaluate(LOW_CONTRAST)]
        assert failures == []


def slow_scoring(monkeypatch, seconds: float) -> None:
    """Score's passes each take `seconds` more, so that a test sees its line while it runs and can stop it."""
    surprise_steps = handlers.surprise_steps

    def slow_surprise_steps(*args, **kwargs):
        for nats in surprise_steps(*args, **kwargs):
            time.sleep(seconds)
            yield nats

    monkeypatch.setattr(handlers, "surprise_steps", slow_surprise_steps)


@pytest.mark.browser
def test_browser_after_stop_the_readouts_say_it_stopped(server, counted_steps, monkeypatch):
    # after Stop, Generate's readout kept its trailing "· …" and Score kept "Scoring… 48 of 256"
    slow_scoring(monkeypatch, 0.1)
    with chromium() as browser:
        page = new_page(browser)
        page.goto(server)
        readout = page.locator("#generate-readout [data-testid=markdown]")  # not its hidden status
        page.get_by_role("button", name="Generate", exact=True).click()
        page.wait_for_function(
            "() => +(document.querySelector('#generate-readout').innerText.match(/step (\\d+)\\//) || [0, 0])[1] >= 4",
            timeout=60_000,
        )
        page.get_by_role("button", name="Stop").first.click()
        page.wait_for_timeout(1500)
        line = readout.inner_text().splitlines()[0]
        assert "stopped at step" in line and not line.endswith("…"), line
        page.get_by_role("tab", name="Score").click()
        page.get_by_label("Text to score").fill(SHAKESPEARE_LIKE * 6)
        page.get_by_role("button", name="Score", exact=True).click()
        summary = page.locator("#score-summary [data-testid=markdown]")
        page.wait_for_function(
            "() => /Scoring… (\\d+)/.test(document.querySelector('#score-summary').innerText)", timeout=60_000
        )
        page.get_by_role("tabpanel").locator("button:visible", has_text="Stop").click()  # not the Rewrite panel's
        page.wait_for_timeout(1500)
        said = summary.inner_text()
        assert said.startswith("Stopped:") and "Scoring" not in said, said


@pytest.mark.browser
def test_browser_the_nested_accordions_heading_is_one_line_as_its_parents(server):
    # "More of the reveal rule: …" wrapped to two centred lines at both sizes, while its parent's heading is one line
    with chromium() as browser:
        for viewport in (DESKTOP, PHONE):
            page = new_page(browser, viewport)
            page.goto(server)
            parent = page.get_by_text("Sampling options: order, temperature, seed").first
            parent.click()
            nested = page.get_by_text("More of the reveal rule").first
            nested.wait_for()
            heights = [heading.bounding_box()["height"] for heading in (parent, nested)]
            assert heights[1] == pytest.approx(heights[0], abs=2), (viewport, heights)
            page.close()


def bottom_edge_shade(page, canvas) -> float:
    """How much darker than the canvas's own colour its bottom edge is drawn (0: not at all), read from a
    screenshot of its right margin, where no character is ever drawn, just above its bottom border."""
    import io

    from PIL import Image

    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    clip = dict(x=box["x"] + box["width"] - 8, y=box["y"] + box["height"] - 10 - 4, width=4, height=3)
    pixels = list(Image.open(io.BytesIO(page.screenshot(clip=clip))).convert("L").getdata())
    return max(0.0, 250 - sum(pixels) / len(pixels))  # the canvas's colour #fbfaf7 is about 250 in grey


@pytest.mark.browser
def test_browser_a_canvas_with_lines_below_its_box_says_so(server):
    # on a phone the canvas is 10 rows high and the default run needed 11: the last line hid with no hint
    with chromium() as browser:
        for viewport in (PHONE, DESKTOP):
            page = new_page(browser, viewport)
            page.goto(server)
            page.get_by_label("Prompt (kept fixed at the start)").fill("A:\n" * 14)
            canvas = page.locator("#generate-canvas .mdlm-canvas")
            page.wait_for_function(  # the draft: 14 lines and the masks, in a box of 10
                "() => { const c = document.querySelector('#generate-canvas .mdlm-canvas');"
                " return c && c.scrollHeight > c.clientHeight + 20; }"
            )
            assert bottom_edge_shade(page, canvas) > 8, viewport  # a shadow: more lies below
            canvas.evaluate("canvas => canvas.scrollTo(0, canvas.scrollHeight)")
            page.wait_for_timeout(200)
            assert bottom_edge_shade(page, canvas) < 2, viewport  # at the end: nothing below
            page.get_by_label("Prompt (kept fixed at the start)").fill("A:\n")
            page.wait_for_function(
                "() => { const c = document.querySelector('#generate-canvas .mdlm-canvas');"
                " return c && c.scrollHeight <= c.clientHeight; }"
            )
            assert bottom_edge_shade(page, canvas) < 2, viewport  # it all fits
            page.close()


# each place a visitor selects text in: the prompt (Ctrl+A), a finished run's canvas, and a span of the Rewrite
# panel's box, as the panel asks (a scroll-driven animation on the canvas crashed the tab at the next tab switch)


def select_the_prompt(page) -> None:
    page.get_by_label("Prompt (kept fixed at the start)").click()
    page.keyboard.press("Control+A")


def select_the_runs_canvas(page) -> None:
    page.locator("#generate-canvas .mdlm-canvas").evaluate("canvas => getSelection().selectAllChildren(canvas)")


def select_a_span_of_the_rewrite_box(page) -> None:
    page.locator("#rewrite-text textarea").evaluate("box => { box.focus(); box.setSelectionRange(2, 9); }")


SELECTIONS = (select_the_prompt, select_the_runs_canvas, select_a_span_of_the_rewrite_box)


@pytest.mark.browser
@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_browser_selecting_text_then_switching_tabs_never_crashes_the_page(server, viewport):
    from playwright.sync_api import expect

    with chromium() as browser:
        page = new_page(browser, viewport)
        crashes = []
        page.on("crash", lambda crashed: crashes.append(crashed))
        page.goto(server)
        page.get_by_label("Prompt (kept fixed at the start)").fill("ROMEO:\n")
        page.get_by_role("button", name="Generate", exact=True).click()
        expect(page.locator("#generate-readout")).to_contain_text("chars/s", timeout=60_000)
        expect(page.locator("#rewrite-text textarea")).not_to_have_value("")
        for select in SELECTIONS:
            for tab in (*TABS[1:], TABS[0]):
                page.get_by_role("tab", name="Generate").click()
                select(page)
                page.get_by_role("tab", name=tab).click()
                page.wait_for_timeout(300)
                assert not crashes and page.evaluate("1 + 1") == 2, (select.__name__, tab)
        page.close()


@pytest.mark.browser
def test_browser_on_a_phone_the_whole_race_is_in_view_and_the_twin_readable(server, tmp_path):
    # on a phone the twin and the takeaway were below the fold (y 1035 and 1321), the twin's text 9 px
    with chromium() as browser:
        page = new_page(browser, PHONE)
        page.goto(server)
        page.get_by_role("tab", name="Compare").click()
        page.get_by_role("button", name="Compare", exact=True).click()
        page.wait_for_function(
            "() => document.querySelector('#compare-takeaway').innerText.includes('Takeaway')", timeout=60_000
        )
        page.wait_for_timeout(300)
        page.screenshot(path=str(screenshots(tmp_path) / "phone-compare-race.png"))
        for element in ("#compare-left-canvas", "#compare-twin-canvas", "#compare-takeaway"):
            box = page.locator(element).bounding_box()
            assert box["y"] >= 0 and box["y"] + box["height"] <= PHONE[1] + 1, (element, box)
        # the sides' orders of writing: folded below the takeaway, not between it and the race
        folded = page.get_by_text("Order of writing, each side")
        assert folded.bounding_box()["y"] >= page.locator("#compare-takeaway").bounding_box()["y"]
        assert not page.locator("#compare-right-order").is_visible()
        font = page.locator("#compare-twin-canvas .mdlm-canvas").evaluate(
            "c => parseFloat(getComputedStyle(c).fontSize)"
        )
        assert font >= 12


@pytest.mark.browser
def test_browser_after_a_run_an_edit_of_the_prompt_settles_and_a_typed_length_is_said(server, tmp_path):
    # after a run, an edit of the prompt set off requests that never ended (the prompt's two functions deferred each
    # other, gradio calling both again each time): the length box took "99999" as "99", without its note
    from playwright.sync_api import expect

    with chromium() as browser:
        page = new_page(browser)
        calls = []
        page.on("request", lambda request: calls.append(request.url) if "/run/predict" in request.url else None)
        page.goto(server)
        tab = page.get_by_role("tabpanel")
        page.get_by_role("button", name="Generate", exact=True).click()
        expect(page.locator("#generate-readout")).to_contain_text("done in", timeout=60_000)
        prompt = tab.get_by_label("Prompt (kept fixed at the start)")
        prompt.click()
        prompt.press("End")
        prompt.type("\nO J", delay=50)
        box = tab.get_by_label("number input for Characters to generate (at most)", exact=True)
        box.click()
        box.press("Control+a")
        box.type("99999", delay=50)
        box.press("Enter")
        page.wait_for_timeout(3000)
        settled = len(calls)
        page.wait_for_timeout(2000)
        assert len(calls) == settled, f"{len(calls) - settled} requests in 2 s with nothing typed"
        block = box.locator("xpath=ancestor::div[contains(@class, 'block')][1]")
        expect(block).to_contain_text("99,999 is more than")
        page.screenshot(path=str(screenshots(tmp_path) / "desktop-edit-after-run-length-typed.png"))


def stopped_text_kept(text: str) -> str:
    """What of a stopped run's text the Rewrite panel takes: up to its first mask, back to the last whole word."""
    before = text.split(MASK_GLYPH, 1)[0]
    if MASK_GLYPH in text:
        before = before[: max(before.rfind(" "), before.rfind("\n"), 0)]
    return before.rstrip()


@pytest.mark.browser
@pytest.mark.parametrize("length", [100, 400], ids=["within-context", "window-by-window"])
def test_browser_a_stopped_runs_text_comes_to_the_rewrite_panel_once_at_a_word_end(server, counted_steps, length):
    # a stopped run's text never came to the panel (it held masks), which kept the text of the run before
    from playwright.sync_api import expect

    with chromium() as browser:
        page = new_page(browser)
        page.goto(server)
        tab, panel = page.get_by_role("tabpanel"), page.locator("#rewrite-text textarea")
        expect(tab.get_by_text("at most 16,377")).to_be_visible()  # loaded: the load's fit will not undo a typed value
        box = tab.get_by_label("number input for Characters to generate (at most)", exact=True)
        box.fill(str(length))
        box.press("Enter")
        expect(box).to_have_value(str(length))
        page.get_by_role("button", name="Generate", exact=True).click()
        seen = set()
        for _ in range(200):  # the panel while the run streams: nothing lands half-written
            seen.add(panel.input_value())
            if re.search(r"step (\d\d+)/", page.locator("#generate-readout").inner_text()):
                break
            page.wait_for_timeout(50)
        assert seen == {""}
        page.get_by_role("button", name="Stop").first.click()
        expect(page.locator("#generate-readout")).to_contain_text("stopped at step")
        stopped = page.locator("#generate-final-text textarea").input_value()
        assert MASK_GLYPH in stopped
        kept = stopped_text_kept(stopped)
        expect(panel).to_have_value(kept)
        assert kept and stopped[len(kept)] in " \n"  # a whole word, or the end of a line
        order = page.locator("#rewrite-order")
        if length > 128:
            expect(order).to_contain_text("longer than the model's context")
        else:  # the order of writing of the text it took, not the run's before
            expect(order.locator(".mdlm-canvas")).to_have_text(kept.replace("\n", "↵\n"), use_inner_text=True)


@pytest.mark.browser
def test_browser_on_a_phone_scores_line_is_in_view_beside_its_buttons(server, monkeypatch):
    # on a phone Score's line ("Scoring… 0 of 256", then the bits per character) sat below the tinted text, out of
    # view: a visitor saw the tint move and no number
    slow_scoring(monkeypatch, 0.2)
    with chromium() as browser:
        page = new_page(browser, PHONE)
        page.goto(server)
        page.get_by_role("tab", name="Score").click()
        page.get_by_role("button", name="Score", exact=True).click()
        summary = page.locator("#score-summary")

        def in_view(locator) -> bool:
            box = locator.bounding_box()
            return box is not None and box["y"] >= 0 and box["y"] + box["height"] <= PHONE[1]

        page.wait_for_function("() => /Scoring…/.test(document.querySelector('#score-summary').innerText)")
        stop = page.get_by_role("tabpanel").locator("button:visible", has_text="Stop")
        assert in_view(summary) and in_view(stop)
        page.wait_for_function("() => /bits per character/.test(document.querySelector('#score-summary').innerText)")
        assert in_view(summary)


@pytest.mark.browser
@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_browser_a_click_on_a_line_of_the_rewrite_text_selects_it_for_rewriting(server, viewport):
    # "rewrite this line" took selecting its characters by hand, or typing From and To
    from playwright.sync_api import expect

    text = "ROMEO:\nBut soft, what light through yonder window breaks?\nIt is the east.\n"
    line = "But soft, what light through yonder window breaks?"
    with chromium() as browser:
        page = new_page(browser, viewport)
        page.goto(server)
        box = page.locator("#rewrite-text textarea")
        box.fill(text)
        box.evaluate("box => box.blur()")
        page.wait_for_timeout(300)
        box.click(position={"x": 60, "y": 12 + 1.5 * float(box.evaluate("b => getComputedStyle(b).lineHeight")[:-2])})
        start, end = text.index(line), text.index(line) + len(line)
        expect(page.locator("#rewrite-start input")).to_have_value(str(start))
        expect(page.locator("#rewrite-end input")).to_have_value(str(end))
        expect(page.locator("#rewrite-selection")).to_contain_text(f"Rewriting characters {start:,}–{end:,}")
        box.click(position={"x": 90, "y": 12 + 1.5 * float(box.evaluate("b => getComputedStyle(b).lineHeight")[:-2])})
        assert box.evaluate("b => b.selectionStart === b.selectionEnd")  # a second click: the caret, for editing
        page.close()
