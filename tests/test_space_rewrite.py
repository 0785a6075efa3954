"""The app's Rewrite panel: the rewrite endpoint, the order view (Compare's too), and in a browser a span selected
after a run, rewritten, picked and undone."""

import re
from types import SimpleNamespace

import gradio as gr
import pytest
import torch

import app
from mdlm_hf import MASK_GLYPH, SamplerOptions, sample
from mdlm_space import handlers, layout, loading, race, rewrite_handlers, rewrite_panel
from mdlm_space.order_view import PassRecorder, order_from_frames, order_view, run_order
from mdlm_space.render import render_canvas, with_legend
from mdlm_space.rewrite_panel import by_elem_id
from tests.app_helpers import DESKTOP, LOW_CONTRAST, PHONE, Page, chromium, new_page, tab_controls

TEXT = "ROMEO:\nBut soft, what light through yonder window breaks?\n"
SPAN = (12, 30)  # "oft, what light th"


def rewrite_call(client, **changes):
    values = dict(text=TEXT, start=SPAN[0], end=SPAN[1], num_steps=8, temperature=1.0, order="word_streams")
    return client.predict(**(values | dict(seed=3, fixed_seed=True) | changes), api_name="/rewrite_page")


def test_the_rewrite_endpoint_gives_three_ranked_rewrites_of_the_span_only(client):
    *views, label, _, _, order, readout, choices, seed = rewrite_call(client)
    assert seed == 3 and len(choices) == 3 and "ranked by the span's bits per character" in readout
    assert re.search(r"the span as it was: \d+\.\d\d bits/char", readout)
    assert [c["rank"] for c in choices] == [1, 2, 3]
    assert [c["bits_per_char"] for c in choices] == sorted(c["bits_per_char"] for c in choices)
    for c in choices:
        assert c["text"][: SPAN[0]] == TEXT[: SPAN[0]] and c["text"][SPAN[1] :] == TEXT[SPAN[1] :]
        assert c["span"] == c["text"][SPAN[0] : SPAN[1]]
    assert label.startswith("**#1**") and f"{choices[0]['bits_per_char']:.2f} bits/char" in label
    assert order.get("__type__") == "update" and "value" not in order  # the text's order view stays until a pick
    assert rewrite_call(client)[-2] == choices  # a fixed seed repeats the rewrites and their ranking


@pytest.mark.parametrize(
    "changes, says",
    [
        (dict(start=30, end=12), "select at least one character"),
        (dict(end=999), f"0 <= start < end <= {len(TEXT)}"),
        (dict(text="to be {or}"), "outside the model's vocabulary"),
        (dict(start=0.5), "start must be a whole number"),
        (dict(text=""), "paste a text"),
    ],
)
def test_the_rewrite_endpoint_refuses_a_bad_span_in_one_line(client, changes, says):
    with pytest.raises(Exception) as error:
        rewrite_call(client, **changes)
    assert says in str(error.value) and "\n" not in str(error.value).strip()


def test_a_picked_rewrite_shows_its_own_order_of_writing(tiny_model):
    # after Pick #2 the order view still showed #1's, the best one's
    text, (start, end) = "to be or not to be that is the question\n", (6, 20)
    *_, last = rewrite_handlers.rewrite(tiny_model, text, start, end, 0, True, num_steps=7, temperature=1.0)
    kept, choices = last[6], last[-2]
    # ranked, the order view is still the text's: the best rewrite's showed beside a text box of the text as it was
    assert kept == gr.skip()
    for choice in choices:
        assert len(choice["written_at"]) == end - start and all(
            1 <= n <= choice["passes"] for n in choice["written_at"]
        )
    *_, order = rewrite_handlers.pick(1, text, choices, [], None)
    assert order == rewrite_handlers.picked_order(choices[0])  # picked, the best one's view
    *_, order = rewrite_handlers.pick(2, text, choices, [], None)
    passes = [int(n) for n in re.findall(r"data-pass='(\d+)'", order)]
    assert passes == choices[1]["written_at"] and "mdlm-pass" in order  # the span's characters, as #2 wrote them
    cells = re.findall(r"<span class='mdlm-(?:pass|given)'[^>]*>([^<]*)</span>", order)
    assert "".join(cells).replace("↵", "\n") == choices[1]["text"]


def test_three_equal_rewrites_say_so(tiny_model):
    *_, last = rewrite_handlers.rewrite(
        tiny_model, "to be or not to be\n", 3, 8, 0, True, num_steps=5, temperature=0.0, order="left_to_right"
    )
    choices, readout = last[-2], last[-3]
    assert len({c["span"] for c in choices}) == 1 and "The three are the same: raise the temperature" in readout


def test_pick_keeps_a_rewrite_and_undo_goes_back_one_pick():
    # after Pick then Undo, the text was back but the order view still showed the picked rewrite's
    choices = [dict(rank=r, text=f"text {r}", bits_per_char=1.0 + r) for r in (1, 2, 3)]
    text, history, undo_button, note, _, _ = rewrite_handlers.pick(2, "original", choices, [], "order of original")
    assert text == "text 2" and undo_button["interactive"] and "#2" in note
    text, history, _, _, _, _ = rewrite_handlers.pick(1, text, choices, history, "order of text 2")
    assert text == "text 1" and len(history) == 2
    text, history, undo_button, _, order, _ = rewrite_handlers.undo(history)
    assert text == "text 2" and order == "order of text 2" and undo_button["interactive"]
    text, history, undo_button, _, order, _ = rewrite_handlers.undo(history)
    assert text == "original" and order == "order of original" and history == [] and not undo_button["interactive"]


def test_from_and_to_take_any_number_and_the_panel_says_what_is_wrong_with_it(model_dir):
    # with a minimum on the boxes, gradio refused -5 before any handler ran, and the page showed a bare "Error"
    model = loading.load_model(model_dir)[0]
    found = by_elem_id(app.build_demo(model))
    for name in ("rewrite-start", "rewrite-end"):
        assert found[name].minimum is None, name
        found[name].preprocess(-5)  # gradio's own check of the box's value: nothing to refuse
    with pytest.raises(gr.Error, match="start must be") as refused:
        rewrite_handlers.checked_span(model, "to be or not", -5, 3)
    # the line under the boxes says what pressing Rewrite would: it read "Rewriting characters 0-3" for an empty
    # From and for 0.5, which Rewrite then refused
    line = rewrite_handlers.selection_line(model, "to be or not", -5, 3)
    assert line.lower() == f"{refused.value.message}.".lower()
    for start in (None, 0.5):
        assert "must be" in rewrite_handlers.selection_line(model, "to be or not", start, 3)
    assert rewrite_handlers.selection_line(model, "to be or not", 0, 2) == "Rewriting characters 0–2 (2): «to»"
    # To past the end of a text made shorter: the package's own check refused it, and the line raised instead of
    # saying so
    assert rewrite_handlers.selection_line(model, "to be", 0, 9).startswith("The span must satisfy 0 <= start < end")


def test_undo_after_a_rewrite_brings_back_the_order_view_of_the_text_it_restores(model_dir):
    # a finished rewrite shows its best choice's order of writing; Pick then saved that view as the text's, so after
    # Undo the text was the run's and the view a rewrite's
    page = Page(app.build_demo(loading.load_model(model_dir)[0]))
    found = by_elem_id(page.demo)
    text, order = found["rewrite-text"], found["rewrite-order"]
    fns = list(page.demo.fns.values())
    choices = next(fn.inputs[1] for fn in fns if getattr(fn.fn, "func", None) is rewrite_handlers.pick)
    text_order = next(fn.inputs[3] for fn in fns if getattr(fn.fn, "func", None) is rewrite_handlers.pick)
    page.type(text, "original")
    page.values[text_order._id] = "order of the run"  # as a finished run's order lands
    page.values[order._id] = "order of rewrite #1"  # as a finished rewrite shows its best
    page.values[choices._id] = [dict(rank=r, text=f"text {r}", bits_per_char=1.0 + r) for r in (1, 2, 3)]
    page.fire(found["rewrite-pick-2"], "click")
    page.fire(found["rewrite-undo"], "click")
    assert page.value(text) == "original" and page.value(order) == "order of the run"


def test_a_stopped_rewrite_says_it_stopped_in_its_readout_and_labels():
    # Stop left "Choice N: writing…" and "step 3/16" (or "Scoring the rewrites… 1 of 3") on the panel
    writing = rewrite_handlers.step_line(SimpleNamespace(step=3, num_steps=16, num_forward_passes=3), 7, 2, 30)
    labels = ["Choice 1: 1.23 bits/char", "Choice 2: ranking…", "Choice 3: writing…"]
    readout, *after = rewrite_handlers.stopped(writing, *labels)
    assert readout.startswith("Stopped at step 3/16") and "seed 7" in readout
    assert after == [gr.skip(), "Choice 2: stopped", "Choice 3: stopped"]  # a finished choice keeps its figure
    ranking = rewrite_handlers.ranking_line(40, 1.5, 7, 2, 30)
    assert rewrite_handlers.stopped(ranking, *labels)[0].startswith("Stopped while ranking: 40 of 84")
    finished = "seed 7 · 16 forward passes · ranked by … Pick one to keep it."
    assert all(update == gr.skip() for update in rewrite_handlers.stopped(finished, *labels))


def test_an_edit_of_the_text_starts_a_new_history_and_forgets_the_rewrites(model_dir):
    # Undo after an edit put back the text before the last pick, the edit lost; a Pick put back a whole rewrite of
    # the text as it was
    page = Page(app.build_demo(loading.load_model(model_dir)[0]))
    found = by_elem_id(page.demo)
    text, undo_button = found["rewrite-text"], found["rewrite-undo"]
    fns = page.demo.fns.values()
    choices = next(fn.inputs[1] for fn in fns if getattr(fn.fn, "func", None) is rewrite_handlers.pick)
    history = next(fn.inputs[0] for fn in fns if fn.fn is rewrite_handlers.undo)
    page.type(text, "original")
    page.values[choices._id] = [dict(rank=r, text=f"text {'xyz'[r - 1]}", bits_per_char=1.0 + r) for r in (1, 2, 3)]
    page.fire(found["rewrite-pick-2"], "click")
    assert page.value(text) == "text y" and [entry["text"] for entry in page.state[history._id]] == ["original"]
    assert page.props[undo_button._id]["interactive"] is True
    page.type(found["rewrite-start"], 2)
    page.type(found["rewrite-end"], 6)
    assert page.value(found["rewrite-selection"]).startswith("Rewriting characters 2–6")
    page.type(text, "text y, edited")
    assert page.state[history._id] == [] and page.props[undo_button._id]["interactive"] is False
    # From and To were of the text it replaced: a new run's text read "Rewriting characters 10-20: «r love, ha»", a
    # span the visitor never selected
    assert page.value(found["rewrite-start"]) == page.value(found["rewrite-end"]) == 0
    assert not page.value(found["rewrite-selection"]).startswith("Rewriting")  # what Rewrite's check says instead
    new_text_fns = [fn for fn in fns if fn.fn is rewrite_handlers.new_text]
    assert len(new_text_fns) == 2 and all(found["rewrite-start"] in fn.outputs for fn in new_text_fns)  # runs too
    assert not page.value(choices)  # a Pick now asks for a Rewrite of this text
    # and the rewrites of the text it replaced leave the panel: their views, labels and Pick buttons
    for number in (1, 2, 3):
        assert page.value(found[f"rewrite-{number}"]) == rewrite_handlers.NO_CHOICE
        assert page.value(found[f"rewrite-label-{number}"]) == f"Choice {number}"
        assert page.props[found[f"rewrite-pick-{number}"]._id]["interactive"] is False
    assert page.value(found["rewrite-readout"]) == rewrite_handlers.WAITING


def test_pick_is_usable_only_once_a_runs_rewrites_are_ranked(model_dir):
    # Pick stayed usable with nothing ranked (before a run, while it wrote, after a new text), and pressing it logged
    # a traceback and showed nothing
    demo = app.build_demo(loading.load_model(model_dir)[0])
    found = by_elem_id(demo)
    picks = [found[f"rewrite-pick-{number}"] for number in (1, 2, 3)]
    assert all(pick.interactive is False for pick in picks)
    run = next(fn for fn in demo.fns.values() if fn.api_name == "rewrite_page")
    ready = [fn for fn in demo.fns.values() if fn.fn is rewrite_handlers.picks_ready]
    assert {tuple(map(tuple, fn.targets)) for fn in ready} >= {tuple(map(tuple, run.targets))}  # off as a run starts
    assert all(fn.outputs == picks for fn in ready) and any(fn.inputs for fn in ready)  # on, given its choices
    assert [update["interactive"] for update in rewrite_handlers.picks_ready(None)] == [False] * 3
    ranked = [dict(rank=r, text="t", bits_per_char=1.0) for r in (1, 2, 3)]
    assert [update["interactive"] for update in rewrite_handlers.picks_ready(ranked)] == [True] * 3
    with pytest.raises(gr.Error) as error:
        rewrite_handlers.pick(1, "text", None, [], None)
    assert error.value.print_exception is False  # a visitor's mistake: no traceback in the log


def test_the_order_view_tints_each_written_character_by_the_pass_that_wrote_it(tiny_model):
    canvas = torch.tensor(tiny_model.tokenizer.encode("to be or not to be\nthat is the question\n"))
    canvas[5:30] = tiny_model.mask_id
    recorder, states = PassRecorder(), list(sample(tiny_model, canvas, SamplerOptions(num_steps=5), seed=0))
    for state in states:
        recorder.update(state)
    passes = recorder.passes[0]
    assert recorder.count == len(states) - 1 == 5
    assert (passes[:5] == 0).all() and (passes[30:] == 0).all() and (passes[5:30] >= 1).all()
    for k, (before, after) in enumerate(zip(states, states[1:], strict=False), 1):  # written where a mask went
        assert set((before.is_masked & ~after.is_masked)[0].nonzero().flatten().tolist()) == set(
            (passes == k).nonzero().flatten().tolist()
        )
    view = order_view(tiny_model, recorder, states[-1].tokens)
    assert view.count("mdlm-pass") == 25 and "pass 1" in view and "pass 5" in view
    assert sorted({int(p) for p in re.findall(r"data-pass='(\d+)'", view)}) == sorted(set(passes[5:30].tolist()))


def test_the_order_view_of_a_tabs_run_reads_its_streamed_frames_as_the_states_say(tiny_model):
    canvas = torch.tensor(tiny_model.tokenizer.encode("to be or not to be\nthat is the question\n"))
    canvas[3:40] = tiny_model.mask_id
    recorder, frames = PassRecorder(), []
    for state in sample(tiny_model, canvas, SamplerOptions(num_steps=6), seed=1):
        recorder.update(state)
        frames.append(with_legend(render_canvas(tiny_model, state)))
    text, passes, num_passes = order_from_frames(frames)
    assert text == tiny_model.tokenizer.decode(state.tokens[0]) and "\n" in text
    assert passes == recorder.passes[0].tolist() and num_passes == recorder.count == 6
    assert order_from_frames(frames[:-1]) is None  # not finished: masks left
    assert run_order(frames[:3]) == gr.skip() and "mdlm-pass" in run_order(frames)


def pass_numbers(view: str) -> list[int]:
    """The pass that wrote each tinted character of an order view, in the text's order."""
    return [int(p) for p in re.findall(r"data-pass='(\d+)'", view)]


def written_before_the_end(canvas: str) -> int:
    """The written characters of a finished Compare canvas that its text kept (those after where it ended are struck
    out, and left out of its order of writing)."""
    return canvas.split("class='mdlm-dropped'", 1)[0].count("class='mdlm-earlier'")


def test_compare_shows_each_diffusion_sides_order_of_writing_once_the_race_is_done(model_dir, twin_dir):
    model = loading.load_model(model_dir)[0]
    twin = loading.load_twin(twin_dir, model)
    race_args = (model, None, "ROMEO:\n", 40, 8, 0.8, 0)
    frames = list(race.compare(*race_args, True, True, twin=twin))  # left to right: one character per pass
    assert len(frames[-1]) == 10 and frames[-1][6:8] != ("", "")  # the twin's canvas and stats stay where they were
    left, right = frames[-1][8:]
    kept = [written_before_the_end(frames[-1][side]) for side in (0, 2)]  # each side's text, ended at a line
    assert pass_numbers(left) == list(range(1, kept[0] + 1))  # one character a pass, left to right
    assert "pass 40" in left and left.count("mdlm-given") == len("ROMEO:\n")  # the prompt: kept, not tinted
    assert len(pass_numbers(right)) == kept[1] and set(pass_numbers(right)) <= set(range(1, 9)) and "pass 8" in right
    assert "mdlm-pass" not in frames[1][8] + frames[1][9]  # during the race: not yet
    frames = list(race.compare(*race_args, False, True))  # without the twin: its two outputs empty, in place
    assert frames[-1][6:8] == ("", "")
    left, right = frames[-1][8:]
    assert set(pass_numbers(left)) | set(pass_numbers(right)) <= set(range(1, 9))
    assert pass_numbers(left) == sorted(pass_numbers(left))  # left to right: each pass after the one before
    assert pass_numbers(right) != sorted(pass_numbers(right))  # confidence order: wherever the surest were


SELECT = (
    "([start, end]) => { const box = document.querySelector('#rewrite-text textarea'); box.focus();"
    " box.setSelectionRange(start, end); box.dispatchEvent(new Event('select', {bubbles: true})); }"
)


@pytest.mark.browser
def test_browser_generate_then_rewrite_a_selected_span_pick_and_undo(server):
    from playwright.sync_api import expect

    with chromium() as browser:
        for where, (width, height) in (("desktop", DESKTOP), ("phone", PHONE)):
            page = new_page(browser, (width, height))
            page.goto(server)
            page.get_by_role("button", name="Generate", exact=True).click()
            expect(page.locator("#generate-readout")).to_contain_text("chars/s", timeout=60_000)
            generated = page.locator("#generate-final-text textarea").input_value()
            panel_text = page.locator("#rewrite-text textarea")
            expect(panel_text).to_have_value(generated)  # the finished text came to the panel
            order = page.locator("#rewrite-order")
            expect(order.locator(".mdlm-pass").first).to_be_visible()  # and its order of writing
            # every written character the text kept (a run that ends at a line drops the rest)
            prompt = page.get_by_label("Prompt (kept fixed at the start)").first.input_value()
            written = order.locator(".mdlm-pass").count()
            assert written == len(generated) - len(prompt)
            order.screenshot(path=f"/tmp/rewrite-order-{where}.png")
            assert len(generated) > 12, generated
            start, end = 10, min(30, len(generated))  # the run may end at a line end before character 30
            rewrite_span(page, start, end)
            expect(page.locator("#rewrite-start input")).to_have_value(str(start))
            expect(page.locator("#rewrite-end input")).to_have_value(str(end))
            expect(page.locator("#rewrite-label-1")).to_contain_text("#1")
            expect(page.locator("#rewrite-order .mdlm-pass").first).to_be_visible()
            page.locator("#rewrite-pick-1").click()
            expect(panel_text).not_to_have_value(generated)
            picked = panel_text.input_value()
            assert len(picked) == len(generated) and picked[:start] == generated[:start]
            assert picked[end:] == generated[end:]  # only the span changed
            page.locator("#rewrite-readout").scroll_into_view_if_needed()
            page.screenshot(path=f"/tmp/rewrite-{where}.png", full_page=True)
            assert page.evaluate(LOW_CONTRAST) == []  # the choices' and the order view's tints keep text readable
            page.locator("#rewrite-undo").click()
            expect(panel_text).to_have_value(generated)
            expect(page.locator("#rewrite-undo")).to_be_disabled()
            expect(order.locator(".mdlm-pass")).to_have_count(written)  # the run's order view again, not the pick's
            if where == "desktop":
                rewrite_pasted_text(page)
                compare_text_comes_to_the_panel(page)
            page.close()


def rewrite_span(page, start: int, end: int) -> None:
    """Selects characters start to end of the panel's text and presses Rewrite, until the rewrites are ranked."""
    from playwright.sync_api import expect

    page.evaluate(SELECT, [start, end])
    expect(page.locator("#rewrite-selection")).to_contain_text(f"characters {start}–{end}")
    page.get_by_role("button", name="Rewrite", exact=True).click()
    expect(page.locator("#rewrite-readout")).to_contain_text("ranked by", timeout=60_000)


def rewrite_pasted_text(page) -> None:
    """Text the visitor pastes is rewritten the same way."""
    from playwright.sync_api import expect

    panel_text = page.locator("#rewrite-text textarea")
    panel_text.fill(TEXT)
    page.wait_for_timeout(500)  # the page writes the typed value back into the box, caret at its end, after a moment
    rewrite_span(page, *SPAN)
    page.locator("#rewrite-pick-2").click()
    expect(panel_text).not_to_have_value(TEXT)
    picked = panel_text.input_value()
    assert picked[: SPAN[0]] == TEXT[: SPAN[0]] and picked[SPAN[1] :] == TEXT[SPAN[1] :]
    expect(page.locator("#rewrite-undo")).to_be_enabled()


def compare_text_comes_to_the_panel(page) -> None:
    """A finished Compare run's text (its confidence-order side) replaces the panel's, and starts a new history; each
    diffusion side's order of writing is under the takeaway."""
    from playwright.sync_api import expect

    page.evaluate("window.scrollTo(0, 0)")
    page.get_by_role("tab", name="Compare").click()
    page.get_by_role("button", name="Compare", exact=True).click()
    expect(page.locator("#compare-takeaway")).to_contain_text("Takeaway:", timeout=60_000)
    canvas = page.locator("#compare-right-canvas .mdlm-canvas").evaluate(  # its text, up to where it ended
        "box => { const kept = box.cloneNode(true); kept.querySelectorAll('.mdlm-dropped').forEach((e) => e.remove());"
        " return kept.textContent.replaceAll('↵', ''); }"
    )
    expect(page.locator("#rewrite-text textarea")).to_have_value(canvas)
    assert canvas.startswith("ROMEO:\n") and MASK_GLYPH not in canvas
    # the pick before it was of the pasted text: Undo would bring that back over the new run's
    expect(page.locator("#rewrite-undo")).to_be_disabled()
    # nor may its rewrites stay to be picked
    expect(page.locator("#rewrite-pick-1")).to_be_disabled()
    expect(page.locator("#rewrite-label-1")).to_have_text("Choice 1")
    page.locator("#rewrite-readout").screenshot(path="/tmp/rewrite-after-a-new-run.png")
    # each diffusion side's order of writing, folded under the takeaway until opened
    orders = [page.locator(f"#compare-{side}-order") for side in ("left", "right")]
    assert not orders[0].is_visible()
    page.get_by_text("Order of writing, each side").click()
    for order in orders:
        expect(order.locator(".mdlm-pass").first).to_be_visible()
    # each written character that its side's text kept (confidence order's text is the panel's)
    assert orders[1].locator(".mdlm-pass").count() == len(canvas) - len("ROMEO:\n")
    left = [int(n) for n in orders[0].locator(".mdlm-pass").evaluate_all("cells => cells.map(c => c.dataset.pass)")]
    assert left == sorted(left) and left[-1] > 1  # left to right: each pass writes after the one before
    # the panel's order view is of the text it now holds, confidence order's
    expect(page.locator("#rewrite-order .mdlm-pass")).to_have_count(len(canvas) - len("ROMEO:\n"))
    panel_passes = page.locator("#rewrite-order .mdlm-pass").evaluate_all("cells => cells.map(c => c.dataset.pass)")
    assert panel_passes == orders[1].locator(".mdlm-pass").evaluate_all("cells => cells.map(c => c.dataset.pass)")
    page.screenshot(path="/tmp/rewrite-compare-orders.png", full_page=True)


def test_a_generate_or_infill_run_gives_the_panel_its_sampling_options(model_dir):
    # the panel wrote with its own steps, temperature and order, whatever the run whose text it holds had used
    page = Page(app.build_demo(loading.load_model(model_dir)[0]))
    panel = tab_controls(page.demo, "rewrite")
    copies = [fn for fn in page.demo.fns.values() if fn.fn is rewrite_panel.run_options]
    for endpoint, options in (
        ("generate", dict(order="confidence", temperature=0.7, min_p=0.2, prior_weight=0.5)),
        ("infill", dict(order="entropy", temperature=0.9, spacing=2, order_temperature=0.3)),
    ):
        controls = tab_controls(page.demo, endpoint)
        for name, value in options.items():
            page.type(controls[name], value)
        steps = page.value(panel["num_steps"])
        page.type(controls["num_steps"], 5)
        run = next(fn for fn in page.demo.fns.values() if fn.api_name == f"{endpoint}_page")
        for fn in copies:  # what the run's click fires beside the run
            if fn.targets == run.targets:
                page.run(fn)
        assert {name: page.value(panel[name]) for name in options} == options, endpoint
        assert page.value(panel["num_steps"]) == steps  # a run counts its steps for its whole text
        assert page.props[panel["order_temperature"]._id]["interactive"] is True  # the copied order uses it


@pytest.mark.parametrize("length", [100, 300])
def test_the_order_view_describes_the_text_a_run_ended_with(model_dir, length):
    # after a short run and then a 320-character run, the order view still showed the short run; and a run that
    # ended at a line drew the characters it dropped too
    from mdlm_space import handlers

    model, _ = loading.load_model(model_dir)
    for seed in range(20):
        run = handlers.generate(model, "", length, seed, True, "line", num_steps=8)
        frames = [frame for frame in run if frame is not handlers.THROTTLED]  # as the event's stream sends them
        text = frames[-1][1]
        if len(text) < length:
            break
    order = run_order([frame[0] for frame in frames])
    if length > model.block_size:
        assert order != gr.skip() and "was longer than the model" in order
    else:
        drawn, passes, _ = order_from_frames([frame[0] for frame in frames])
        assert "mdlm-pass" in order and drawn == text and len(passes) == len(text)


def test_rewrite_and_infill_with_only_words_it_has_read_say_what_they_wrote(model_dir):
    from mdlm_space import rewrite_handlers

    model, _ = loading.load_model(model_dir)
    text = "ROMEO:\nBut soft, what light through yonder window breaks?\n"
    *_, last = rewrite_handlers.rewrite(model, text, 17, 27, 0, True, real_words=True, num_steps=4)
    assert re.search(
        r"Only words it has read: \d+ words? written, (none fell back|\d+ characters? fell back)", last[-3]
    )
    *_, (_, filled, readout, _) = handlers.infill(model, "To be, __ not __ be", 0, True, real_words=True)
    assert "Only words it has read:" in readout and filled.startswith("To be, ")
    *_, (_, _, plain_readout, _) = handlers.infill(model, "To be, __ not __ be", 0, True)
    assert "Only words it has read" not in plain_readout


def test_a_stopped_generate_or_infill_run_brings_its_text_to_the_panel(model_dir):
    # a stopped Infill run's text never reached the panel: only Generate's readout was listened to
    from mdlm_space.rewrite_panel import TAKE_STOPPED

    model, _ = loading.load_model(model_dir)
    demo = app.build_demo(model)
    listened = {
        tuple(str(getattr(block, "elem_id", "")) for block in fn.inputs[:2])
        for fn in demo.fns.values()
        if fn.js == TAKE_STOPPED
    }
    assert listened == {("generate-readout", "generate-final-text"), ("infill-readout", "infill-final-text")}


def test_the_panel_shows_under_the_tabs_whose_text_it_takes_only(model_dir):
    # the panel sat under every tab, Score's and How it works' too, which hand it no text
    model, _ = loading.load_model(model_dir)
    page = Page(app.build_demo(model))
    panel = by_elem_id(page.demo)["rewrite-panel"]
    assert isinstance(panel, gr.Column) and panel.visible is not False  # the first tab, Generate, takes its text
    inside, found = [], list(panel.children)
    while found:  # the panel's blocks, all the way down
        block = found.pop()
        inside.append(getattr(block, "elem_id", None))
        found += getattr(block, "children", [])
    assert {"rewrite-text", "rewrite-readout", "rewrite-order"} <= set(inside)
    # shown and hidden in the page, first of each tab's functions of its selection: a server function's output, the
    # panel made gradio's page read every control in it again at each frame of a run; and after How it works' plot
    # (a server function, run first), it stayed under that tab for seconds
    tabs = {block.label: block for block in page.demo.blocks.values() if isinstance(block, gr.Tab)}
    for tab, shown in (
        ("Score", False),
        ("Generate", True),
        ("How it works", False),
        ("Infill", True),
        ("Compare", True),
    ):
        selected = [fn for fn in page.demo.fns.values() if (tabs[tab]._id, "select") in map(tuple, fn.targets)]
        assert selected[0].fn is None and selected[0].js == (layout.SHOW_PANEL if shown else layout.HIDE_PANEL), tab
    assert "rewrite-panel" in layout.SHOW_PANEL and "'none'" in layout.HIDE_PANEL
