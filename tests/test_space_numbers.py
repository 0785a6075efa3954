"""A number typed into any number box (a slider's, a seed, From and To) that the app does not take as typed (past
the most, below the least, empty, a fraction where whole numbers go) leaves a note under the box saying what it did:
never a silent snap to the nearest bound."""

import re

import gradio as gr
import pytest

import app
from mdlm_hf.checks import check_seed
from mdlm_hf.sampling.options import OPTION_SPECS
from mdlm_space import loading
from mdlm_space.checks import MAX_SEED, run_seed
from mdlm_space.endpoints import input_names
from mdlm_space.rewrite_panel import STEPS_INFO, by_elem_id
from mdlm_space.runs import fit_replay, replay_frame
from tests.app_helpers import Page, chromium, new_page
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


def remember_of(demo, box):
    """What typing into `box` runs (`controls.remembered`): (typed, last kept, *refit's inputs) -> (kept, update)."""
    (fn,) = [
        fn
        for fn in demo.fns.values()
        if (box._id, "input") in map(tuple, fn.targets) and getattr(fn.fn, "__name__", "") == "remember"
    ]
    return fn.fn


def test_every_number_box_and_slider_notes_what_it_does_with_a_value_it_does_not_take(demo):
    # Compare's temperature snapped -5 to 0, How it works' mask ratio 99999 to 1, and the seeds, From and To took -5
    # and 5.5: only the length and steps boxes said what they did
    boxes = [b for b in demo.blocks.values() if isinstance(b, (gr.Slider, gr.Number)) and b.visible is not False]
    assert len(boxes) > 50 and all(remember_of(demo, box) for box in boxes)


@pytest.mark.parametrize(
    ("typed", "kept", "said"),
    [
        (0, 0, None),
        (99999, 99999, None),
        (-5, 7, "-5 is less than 0, the least here: kept 7"),
        (None, 7, "an empty box: kept 7"),
        (5.5, 5, "5.5 is not a whole number: set to 5"),
        (2**31, MAX_SEED, f"{2**31:,} is more than {MAX_SEED:,}, the most here: set to {MAX_SEED:,}"),
    ],
)
def test_a_seed_box_takes_the_seeds_a_run_takes_and_says_what_it_did_with_another(demo, typed, kept, said):
    # a seed of -5 or 5.5 stayed in the box, and the run then refused it
    remember = remember_of(demo, by_elem_id(demo)["generate-seed"])
    wanted, update = remember(typed, 7)
    if said is None:
        assert wanted == typed and "value" not in update and not update["info"]  # taken as typed, no note
    else:
        assert wanted == update["value"] == kept and update["info"] == said
    assert run_seed(update.get("value", typed), True) == kept  # what the box then holds, a run takes
    check_seed(kept)


def test_a_seed_box_keeps_the_seed_a_run_wrote_into_it(demo):
    # the value an empty box keeps is the one it showed: the last run's seed, not the last one typed
    page = Page(demo)
    seed = by_elem_id(demo)["generate-seed"]
    page.type(seed, 7)
    page.values[seed._id] = 123  # as a run writes the seed it drew
    page.fire(seed, "change")
    page.type(seed, None)
    assert page.value(seed) == 123 and page.props[seed._id]["info"] == "an empty box: kept 123"


def test_from_and_to_are_at_most_the_texts_length_and_the_line_says_what_rewrite_would(demo):
    found = by_elem_id(demo)
    remember = remember_of(demo, found["rewrite-end"])
    kept, update = remember(99999, 3, "to be or not")
    assert kept == update["value"] == 12
    assert update["info"] == "99,999 is more than 12, the most here (the text's length): set to 12"
    page = Page(demo)
    page.type(found["rewrite-text"], TEXT)
    page.type(found["rewrite-end"], 6)
    page.type(found["rewrite-start"], 5.5)  # set to 5
    assert page.value(found["rewrite-start"]) == 5
    assert page.value(found["rewrite-selection"]).startswith("Rewriting characters 5–6 (1)")
    page.type(found["rewrite-start"], None)  # kept 5: the line and a Rewrite agree
    assert page.value(found["rewrite-start"]) == 5 and "kept 5" in page.props[found["rewrite-start"]._id]["info"]
    assert page.value(found["rewrite-selection"]).startswith("Rewriting characters 5–6 (1)")


def test_how_it_works_draws_no_view_for_a_value_its_boxes_do_not_take(demo):
    # the view drew t = 1 under the slider's refusal of 99999
    found = {getattr(block, "label", None): block for block in demo.blocks.values()}
    mask_ratio = found["Mask ratio t"]
    (draw,) = [
        fn.fn
        for fn in demo.fns.values()
        if (mask_ratio._id, "change") in map(tuple, fn.targets) and getattr(fn.fn, "__name__", "") == "drawn"
    ]
    for t, seed_value in ((99999, 0), (-5, 0), (None, 0), (0.5, -5), (0.5, 5.5)):
        assert all(part == gr.skip() for part in draw("To be, or not to be", t, seed_value)), (t, seed_value)
    view, summary = draw("To be, or not to be", 1, 0)
    assert summary.startswith("19 of 19 characters masked")  # t = 1, as the box then says


def test_the_replay_slider_says_what_it_did_with_a_step_past_the_last_frame():
    frames = ["<div class='mdlm-canvas'>a</div>"] * 5
    update = fit_replay(frames, 99)
    assert update["maximum"] == 4 and update["why"] == "the last run's last frame"
    assert replay_frame(frames, 99) == gr.skip() and replay_frame(frames, -1) == gr.skip()  # the note says, then
    assert replay_frame(frames, 4) == frames[4]  # the step set draws


SEED = (0, MAX_SEED, True)  # a seed box's least, most, and whether it takes whole numbers only
FRACTION, TEMPERATURE, CAPITAL = (0, 1, False), (0, 2, False), (0.05, 1, False)
DRAWING = {  # the sampler's drawing and reveal-rule sliders, as every tab that has them shows them
    OPTION_SPECS[name].label: bounds
    for name, bounds in (
        ("remask_ratio", (0, 0.95, False)),
        ("spacing", (0, 16, True)),
        ("temperature", TEMPERATURE),
        ("capital_temperature_factor", CAPITAL),
        ("top_p", CAPITAL),
        ("min_p", (0, 0.5, False)),
        ("cut_where_sure", FRACTION),
    )
}
# every number box the page lets one type into (a slider's box, a seed, From and To), by tab (None: the Rewrite panel,
# below the tabs), in the order typed into: its least, its most (a capped one's after the boxes above it) and whether
# it takes whole numbers only. Disabled ones (the reveal rule's that word streams order does not use, the replay
# before a run) are noted too: test_every_number_box_and_slider_notes_what_it_does
BOXES = {
    "Generate": {
        "Characters to generate (at most)": (1, 16_377, True),  # the prompt takes 7 of 16,384
        "Denoising steps": (1, 256, True),  # per window: the length above is set to 16,377
        **DRAWING,
        "Block length (0 = off; >0 = semi-autoregressive blocks)": (0, 256, True),
        "Seed": SEED,
    },
    None: {
        "From character": (0, len(TEXT), True),  # the text's length
        "To character": (0, len(TEXT), True),
        **{label: DRAWING[label] for label in list(DRAWING)[:2]},  # the reveal rule's, above the steps
        "Denoising steps": (1, 256, True),
        **{label: DRAWING[label] for label in list(DRAWING)[2:]},
        "Seed": SEED,
    },
    "Infill": {"Denoising steps": (1, 8, True), **DRAWING, "Seed": SEED},  # the first template's 8 blanks
    "Compare": {
        "Characters": (1, 249, True),  # the model's context, less the prompt
        "Forward passes": (1, 249, True),
        "Temperature": TEMPERATURE,
        "Seed": SEED,
        OPTION_SPECS["order_temperature"].label: TEMPERATURE,
        OPTION_SPECS["prior_weight"].label: TEMPERATURE,
        **{label: DRAWING[label] for label in list(DRAWING)[:2]},
    },
    "How it works": {"Mask ratio t": FRACTION, "Seed": SEED},
}
TYPED = ("0", "-5", "", "5.5", "99999")


def said(number: float) -> str:
    return f"{int(number):,}" if float(number).is_integer() else f"{number:g}"


def expected(typed: str, before: str, least: float, most: float, whole: bool) -> tuple[str, str | None]:
    """What a box shows after `typed` is typed into it (showing `before`), and the start of its note (None: taken
    as typed, no note)."""
    if typed == "":
        return before, f"an empty box: kept {said(float(before))}"
    number = float(typed)
    if number < least:
        return before, f"{said(number)} is less than {said(least)}, the least here: kept {said(float(before))}"
    if number > most:
        return said(most).replace(",", ""), f"{said(number)} is more than {said(most)}, the most here"
    if whole and not number.is_integer():
        return str(int(number)), f"{said(number)} is not a whole number: set to {int(number)}"
    return typed, None


ACCORDIONS = ("Sampling options", "More of the reveal rule", "Reveal rule, both sides")
NOTED = re.compile(r"kept|set to")


def open_accordions(page, where) -> None:
    for name in ACCORDIONS:  # an outer one first: the one inside it shows once it is open
        heads = where.locator("button.label-wrap:visible", has_text=name)
        for i in range(heads.count()):
            if "open" not in (heads.nth(i).get_attribute("class") or ""):
                heads.nth(i).click()
        page.wait_for_timeout(300)


def typed_into_boxes(where, tab: str | None) -> list[str]:
    """Types each of TYPED into each of the tab's boxes, leaving it with Tab (where the page snapped a typed value
    into the slider's bounds, silently); what went otherwise than `expected`."""
    from playwright.sync_api import expect

    wrong = []
    shown = where.locator("input[type=number]:visible:enabled")
    labels = [(label or "").removeprefix("number input for ") for label in shown.evaluate_all(LABELS)]
    if sorted(labels) != sorted(BOXES[tab]):
        wrong.append(f"{tab}: boxes {labels}, not the table's")
    for label, (least, most, whole) in BOXES[tab].items():
        box = where.locator(f'input[type=number][aria-label="{label}"]:visible').or_(
            where.locator(f'input[type=number][aria-label="number input for {label}"]:visible')
        )
        block = box.locator("xpath=ancestor::div[contains(@class, 'block')][1]")
        for typed in TYPED:
            before = box.input_value()
            value, note = expected(typed, before, least, most, whole)
            box.fill(typed)
            box.press("Tab")
            try:
                if note is None:
                    expect(block).not_to_contain_text(NOTED, timeout=3000)
                else:
                    expect(block).to_contain_text(note, timeout=3000)
                expect(box).to_have_value(value, timeout=3000)
            except AssertionError:
                wrong.append(f"{tab} | {label} | {typed!r}: shows {box.input_value()!r}, {block.inner_text()!r}")
    return wrong


LABELS = "boxes => boxes.map((box) => box.getAttribute('aria-label'))"


@pytest.mark.browser
@pytest.mark.slow
def test_browser_every_number_box_says_what_it_did_with_a_value_it_did_not_take(shipped_server, tmp_path):  # noqa: F811
    # Compare's temperature snapped -5 to 0 and 99999 to 2, How it works' mask ratio drew t = 1 under gradio's raw
    # refusal of 99999, the seeds and From and To took -5 and 5.5, and Rewrite's line read "Rewriting characters
    # 0-10" for an empty From, which Rewrite then refused
    from playwright.sync_api import expect

    with chromium() as browser:
        page = new_page(browser)
        page.goto(shipped_server)
        expect(page.get_by_text("at most 16,377")).to_be_visible()  # loaded: the load's fit will not undo a typed value
        panel = page.locator("#rewrite-panel")
        panel.locator("#rewrite-text textarea").fill(TEXT)
        wrong = []
        for tab in BOXES:
            if tab:
                page.get_by_role("tab", name=tab).click()
            where = page.get_by_role("tabpanel").filter(visible=True) if tab else panel
            open_accordions(page, where)
            wrong += typed_into_boxes(where, tab)
            if tab == "How it works":  # the view drew at the t the box set, t = 1, with no refusal
                summary = page.locator("#forward-summary")
                try:
                    expect(summary).to_contain_text(re.compile(r"(\d+) of \1 characters masked"), timeout=3000)
                    expect(page.locator(".toast-body")).to_have_count(0, timeout=3000)
                    expect(panel).to_be_hidden(timeout=3000)  # no Rewrite panel under How it works
                except AssertionError:
                    wrong.append(f"How it works: the view reads {summary.inner_text()!r} at t = 1")
        page.screenshot(path=str(screenshot_path(tmp_path, "number-box-notes.png")), full_page=True)
    assert not wrong, "\n".join(wrong)
