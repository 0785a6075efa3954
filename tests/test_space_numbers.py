"""A number typed into a length or steps box that the app does not take as typed (past the most, below the least,
empty) leaves a note under the box saying what it did: never a silent snap to the nearest bound."""

import pytest

import app
from mdlm_space import loading
from mdlm_space.endpoints import input_names
from mdlm_space.rewrite_panel import STEPS_INFO
from tests.app_helpers import DESKTOP, chromium
from tests.space_browser import SHIPPED, screenshot_path, shipped_server  # noqa: F401

TEXT = "ROMEO:\nBut soft, what light through yonder window breaks?\n"


@pytest.fixture(scope="module")
def demo():
    model, known_words = loading.load_model(SHIPPED)
    return app.build_demo(model, known_words)


def rewrite_steps_typed(demo):
    """The Rewrite panel's steps slider, and what typing into its box runs: (typed, last kept) -> (kept, update)."""
    run = next(fn for fn in demo.fns.values() if fn.api_name == "rewrite_page")
    steps = dict(zip(input_names(run.fn), run.inputs, strict=True))["num_steps"]
    typed = [fn for fn in demo.fns.values() if (steps._id, "input") in [tuple(target) for target in fn.targets]]
    assert typed, "typing into the Rewrite panel's steps box runs nothing: the page snaps it to a bound, silently"
    return steps, typed[0].fn


@pytest.mark.parametrize(
    ("typed", "said"), [(0, "0 is less than 1"), (-5, "-5 is less than 1"), (None, "an empty box")]
)
def test_rewrite_steps_below_one_or_empty_keep_the_last_value_and_say_so(demo, typed, said):
    # the page ran such a rewrite at one step, saying nothing
    _, remember = rewrite_steps_typed(demo)
    kept, update = remember(typed, 16)
    assert kept == 16 and update["value"] == 16
    assert update["info"] == f"{said}{', the least here' if typed is not None else ''}: kept 16"


def test_rewrite_steps_past_the_most_are_capped_and_said_and_a_good_value_clears_the_note(demo):
    steps, remember = rewrite_steps_typed(demo)
    kept, update = remember(99999, 16)
    assert update["value"] == steps.maximum == 256
    assert update["info"].startswith("99,999 is more than 256, the most here") and update["info"].endswith("256")
    kept, update = remember(8, 16)
    assert kept == 8 and update["info"] == STEPS_INFO and "value" not in update  # taken as typed, the note gone


BOXES = (  # tab (None: the Rewrite panel, below the tabs), the box's label, what is typed and what the note says
    ("Generate", "Characters to generate (at most)", "99999", "99,999 is more than 16,377, the most here"),
    ("Generate", "Characters to generate (at most)", "-5", "-5 is less than 1, the least here: kept 16,377"),
    ("Generate", "Characters to generate (at most)", "", "an empty box: kept 16,377"),
    ("Generate", "Characters to generate (at most)", "0", "0 is less than 1, the least here: kept 16,377"),
    ("Generate", "Denoising steps", "0", "0 is less than 1, the least here: kept 32"),
    ("Generate", "Denoising steps", "-5", "-5 is less than 1, the least here: kept 32"),
    ("Generate", "Denoising steps", "", "an empty box: kept 32"),
    ("Infill", "Denoising steps", "0", "0 is less than 1, the least here: kept 8"),
    ("Infill", "Denoising steps", "", "an empty box: kept 8"),
    ("Compare", "Characters", "-5", "-5 is less than 1, the least here: kept 128"),
    ("Compare", "Forward passes", "", "an empty box: kept 32"),
    ("Compare", "Forward passes", "5.5", "5.5 is not a whole number: set to 5"),
    (None, "Denoising steps", "0", "0 is less than 1, the least here: kept 16"),
    (None, "Denoising steps", "-5", "-5 is less than 1, the least here: kept 16"),
    (None, "Denoising steps", "", "an empty box: kept 16"),
    (None, "Denoising steps", "99999", "99,999 is more than 256, the most here"),
)


@pytest.mark.browser
def test_browser_a_number_box_that_changes_a_value_says_so(shipped_server, tmp_path):  # noqa: F811
    from playwright.sync_api import expect

    with chromium() as browser:
        page = browser.new_page(viewport=dict(zip(("width", "height"), DESKTOP, strict=True)))
        page.goto(shipped_server)
        expect(page.get_by_text("at most 16,377")).to_be_visible()  # loaded: the load's fit will not undo a typed value
        page.get_by_text("Sampling options: order, temperature, seed").last.click()  # the Rewrite panel's
        for tab, label, typed, note in BOXES:
            where = page.get_by_role("tabpanel") if tab else page.locator("body")
            if tab:
                page.get_by_role("tab", name=tab).click()
            box = where.get_by_label(f"number input for {label}", exact=True).last
            block = box.locator("xpath=ancestor::div[contains(@class, 'block')][1]")
            box.fill(typed)
            box.press("Enter")
            expect(block).to_contain_text(note)
        page.screenshot(path=str(screenshot_path(tmp_path, "number-box-notes.png")), full_page=True)
