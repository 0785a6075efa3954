"""The tabs' shared controls (mdlm_space/controls.py): sliders, seeds, Stop, replay and typed values."""

import gradio as gr
import pytest

import app
from mdlm_hf.pipeline import default_options
from mdlm_hf.sampling.options import OPTION_SPECS
from mdlm_space import handlers, loading
from mdlm_space.runs import replay_frame, replay_slider
from mdlm_space.tabs import infill as infill_tab
from tests.app_helpers import JULIET, Page, api_names, cell_classes, tab_controls


def test_option_controls_take_label_bounds_and_defaults_from_the_one_table(model_dir):
    model, _ = loading.load_model(model_dir)
    demo = app.build_demo(model)
    generate, infill = tab_controls(demo, "generate"), tab_controls(demo, "infill")
    for name in OPTION_SPECS.keys() & generate.keys():
        spec, control = OPTION_SPECS[name], generate[name]
        default = getattr(default_options(model), name)  # the model's own: real_words with its words.txt
        assert control.label == spec.label and control.value == spec.shown(default), name
        if spec.accepts.kind is bool:
            # its advice, a sentence, is in the tab's "About these settings", not under the checkbox
            assert isinstance(control, gr.Checkbox) and control.advice == spec.note and control.info is None, name
        elif spec.slider is None:
            assert [value for _, value in control.choices] == list(spec.accepts.choices)
            assert [label for label, _ in control.choices] == [c.replace("_", " ") for c in spec.accepts.choices]
        else:
            low, high, step = spec.slider
            assert (control.minimum, control.maximum, control.step) == (low, high or model.block_size, step), name
    # the Infill tab starts with fewer steps and remasking off
    assert (infill["num_steps"].value, infill["remask_ratio"].value) == (
        infill_tab.CHANGES["num_steps"]["default"],
        infill_tab.CHANGES["remask_ratio"]["default"],
    )


def test_length_follows_the_prompt_in_plain_words(client, model_dir):
    # the API: a length that the prompt leaves no room for is lowered, and the readout says so
    *_, last = client.submit(
        prompt=JULIET, length=121, num_steps=8, temperature=1.0, seed=0, autoregressive=False, api_name="/compare_page"
    )
    assert "Length lowered from 121 to 79: a run holds 128 characters, and the prompt takes 49" in last[4]
    # the page: the length slider's maximum follows the prompt, and its value comes back with a shorter prompt
    model, _ = loading.load_model(model_dir)
    page = Page(app.build_demo(model))
    for endpoint, limit in (("generate", 16384), ("compare", 128)):
        controls = tab_controls(page.demo, endpoint)
        prompt, length = controls["prompt"], controls["length"]
        default = page.value(length)
        assert page.props[length._id]["maximum"] == limit - 7  # fitted to the default prompt "ROMEO:\n" on load
        page.type(prompt, JULIET)
        assert page.value(length) == min(default, limit - 49) and page.props[length._id]["maximum"] == limit - 49
        info = page.props[length._id]["info"]
        assert info == f"at most {limit - 49:,}: the prompt takes 49 of {limit:,}"
        page.type(prompt, "x" * limit)
        assert page.value(length) == 1 and page.props[length._id]["interactive"] is False
        assert f"the prompt fills all {limit:,} characters" in page.props[length._id]["info"]
        page.type(prompt, "ROMEO:\n")
        assert page.value(length) == default and page.props[length._id]["interactive"] is True


def test_each_run_draws_a_new_seed_unless_fixed(client, model_dir):
    args = dict(prompt="", length=40, num_steps=4, order="random", api_name="/generate_page")
    (_, first, readout, seed), (_, second, _, other_seed) = (client.predict(seed=0, **args) for _ in range(2))
    assert seed != other_seed and first != second and f"seed {seed} ·" in readout
    _, again, _, same_seed = client.predict(seed=seed, fixed_seed=True, **args)
    assert (again, same_seed) == (first, seed)
    *_, seed = client.predict(template="to __ or", num_steps=2, seed=5, fixed_seed=True, api_name="/infill_page")
    assert seed == 5
    *_, seed, twin_canvas, twin_stats, _, _ = client.predict(
        prompt="ROMEO:\n",
        length=20,
        num_steps=4,
        temperature=0.8,
        seed=5,
        autoregressive=False,
        api_name="/compare_page",
    )
    assert isinstance(seed, int)
    # the page: each run writes its seed into the seed box; typing a seed fixes it
    model, _ = loading.load_model(model_dir)
    page = Page(app.build_demo(model))
    controls = tab_controls(page.demo, "generate")
    assert page.value(controls["fixed_seed"]) is False
    page.type(controls["seed"], 42)
    assert page.value(controls["fixed_seed"]) is True


def test_stop_buttons_are_not_red_while_idle(model_dir):
    # (the first half of a defect)
    model, _ = loading.load_model(model_dir)
    stops = [b for b in app.build_demo(model).blocks.values() if isinstance(b, gr.Button) and b.value == "Stop"]
    assert len(stops) >= 2 and all(button.variant == "secondary" for button in stops)


def test_each_run_has_a_stop_button(model_dir):
    model, _ = loading.load_model(model_dir)
    demo = app.build_demo(model)
    for endpoint in ("generate", "infill", "compare"):
        run = next(fn for fn in demo.fns.values() if fn.api_name == f"{endpoint}_page")
        stops = [fn for fn in demo.fns.values() if run._id in fn.cancels]
        assert stops, endpoint
        assert all(demo.blocks[target].value == "Stop" for fn in stops for target, _ in fn.targets)


def test_the_entropy_bound_is_a_reveal_rule_control_passed_by_name(client, model_dir, monkeypatch):
    seen = []
    sample = handlers.sample

    def spy(model, canvas, options, **kwargs):
        seen.append(options.entropy_bound)
        return sample(model, canvas, options, **kwargs)

    monkeypatch.setattr(handlers, "sample", spy)
    # in a scored order: streams order, the default, refuses an entropy bound by name
    client.predict(prompt="", length=40, num_steps=20, order="entropy", entropy_bound=2.0, api_name="/generate_page")
    client.predict(template="to __ or", num_steps=2, order="entropy", entropy_bound=1.5, api_name="/infill_page")
    client.predict(prompt="", length=20, num_steps=4, api_name="/generate_page")  # the default: off
    assert seen == [2.0, 1.5, None]
    model, _ = loading.load_model(model_dir)
    demo = app.build_demo(model)
    for endpoint in ("generate", "infill"):
        control = tab_controls(demo, endpoint)["entropy_bound"]
        spec = OPTION_SPECS["entropy_bound"]
        assert (control.label, control.value, control.maximum, control.advice) == (spec.label, 0, 32, spec.note)


def test_after_a_run_the_replay_slider_shows_each_of_its_frames_without_sampling_again(client, model_dir, monkeypatch):
    # the API's outputs stay the canvas, the text, the readout and the seed: the frames live in the page's session
    assert len(client.predict(prompt="", length=20, num_steps=4, api_name="/generate_page")) == 4
    model, _ = loading.load_model(model_dir)
    demo = app.build_demo(model)
    for endpoint, values in (
        ("generate", dict(prompt="ROMEO:\n", length=30, num_steps=6, steps_taken=6)),
        # two 2-character blanks written a character a pass (Infill's "Write slower, read better"): 4 passes
        ("infill", dict(template="to __ or not __", num_steps=4, steps_taken=4)),
    ):
        controls, names = tab_controls(demo, endpoint), api_names(demo, endpoint)
        run = next(fn for fn in demo.fns.values() if fn.api_name == f"{endpoint}_page")
        streamed = list(run.fn(*[values.get(name, controls[name].value) for name in names]))  # steps_taken: no name
        canvases = streamed[-1][-1]
        steps = len(canvases) - 1  # streams order ends sooner where the blanks are shorter than the steps
        assert canvases == [frame[0] for frame in streamed] and steps == values["steps_taken"]
        assert isinstance(run.outputs[-1], gr.State)
        # after the run: the slider spans its frames, at the last
        after = next(fn for fn in demo.fns.values() if fn.trigger_after == run._id)
        slider = demo.blocks[after.outputs[0]._id]
        assert slider.elem_id == f"{endpoint}-replay"
        update = after.fn(canvases)
        assert (update["minimum"], update["maximum"], update["value"], update["interactive"]) == (0, steps, steps, True)
        # moving it shows that step's canvas as it was streamed, without sampling again
        monkeypatch.setattr(handlers, "sample", lambda *args, **kwargs: pytest.fail("sampled again"))
        scrubs = [fn for fn in demo.fns.values() if (slider._id, "change") in [tuple(t) for t in fn.targets]]
        scrub = next(fn for fn in scrubs if fn.fn is replay_frame)
        assert scrub.outputs[0].elem_id == f"{endpoint}-canvas"
        for step in (0, min(2, steps), steps):
            assert scrub.fn(canvases, step) == canvases[step]
        assert cell_classes(scrub.fn(canvases, 0)).count("mask") == (30 if endpoint == "generate" else 4)
        monkeypatch.undo()
    assert replay_slider([])["interactive"] is False and isinstance(replay_frame([], 3), type(gr.skip()))


def test_controls_an_order_does_not_use_are_greyed_out_and_come_back_with_an_order_that_does(model_dir):
    # word streams order, the default, ranks no position: an order temperature, prior weight or entropy bound moved
    # there would only be refused by name on the run
    model, _ = loading.load_model(model_dir)
    page = Page(app.build_demo(model))
    for endpoint in ("generate", "infill"):
        controls = tab_controls(page.demo, endpoint)

        def usable(name: str, controls: dict = controls) -> bool:
            return page.props[controls[name]._id].get("interactive", controls[name].interactive) is not False

        assert page.value(controls["order"]) == "word_streams"
        assert not any(usable(name) for name in ("order_temperature", "prior_weight", "entropy_bound"))
        assert usable("remask_ratio") and usable("spacing") and usable("temperature")
        page.type(controls["order"], "entropy")
        assert all(usable(name) for name in ("order_temperature", "prior_weight", "entropy_bound"))
        page.type(controls["prior_weight"], 0.3)
        page.type(controls["order"], "random")  # random order scores nothing: the prior has nothing to weigh
        assert usable("order_temperature") and usable("entropy_bound") and not usable("prior_weight")
        page.type(controls["order"], "streams")  # which would refuse the prior: it goes back to off
        assert page.value(controls["prior_weight"]) == 0 and not usable("order_temperature")


def test_a_number_typed_past_a_sliders_maximum_is_capped_and_said(model_dir):
    # typing 999 into the steps box logged a traceback for each keystroke's event, showed nothing and ran at the
    # maximum
    model, _ = loading.load_model(model_dir)
    page = Page(app.build_demo(model))
    for endpoint in ("generate", "infill", "compare"):
        steps = tab_controls(page.demo, endpoint)["num_steps"]
        page.type(steps, 999)  # raised here, as the server's log printed it
        cap = page.props[steps._id]["maximum"]
        assert cap < 999 and page.value(steps) == cap
        assert f"999 is more than {cap}" in page.props[steps._id]["info"]
    length = tab_controls(page.demo, "generate")["length"]
    page.type(length, 10**6)
    assert page.value(length) == page.props[length._id]["maximum"] < 10**6
    assert "is more than" in page.props[length._id]["info"]


@pytest.mark.parametrize("typed", [0, -5, None])
def test_steps_typed_below_one_or_left_empty_keep_the_last_value_and_say_so(model_dir, typed):
    # the steps box took empty, 0 or -5 and ran one pass (gibberish), showing 1 with no note; and a note of an
    # earlier cap stayed under a value it no longer described
    model, _ = loading.load_model(model_dir)
    page = Page(app.build_demo(model))
    for endpoint in ("generate", "infill", "compare"):
        steps = tab_controls(page.demo, endpoint)["num_steps"]
        page.type(steps, 6)
        page.type(steps, typed)
        note = page.props[steps._id]["info"]
        said = "an empty box" if typed is None else f"{typed} is less than 1, the least here"
        assert page.value(steps) == 6 and note == f"{said}: kept 6", note
        page.type(steps, 999)
        page.type(steps, 5)
        assert page.value(steps) == 5 and "999" not in page.props[steps._id]["info"]


def test_a_press_while_a_run_streams_runs_next_and_an_edit_does_not_draw_over_the_run(model_dir):
    # pressing "Fill the blanks" while a run streamed was ignored silently, and the canvas then showed the new
    # template's blanks over the old run
    model, _ = loading.load_model(model_dir)
    page = Page(app.build_demo(model))
    for endpoint in ("generate", "infill", "compare", "rewrite", "score"):
        run = next(fn for fn in page.demo.fns.values() if fn.api_name == f"{endpoint}_page")
        assert run.trigger_mode == "always_last", endpoint  # not "once", which drops a press while one is pending
    found = {block.elem_id: block for block in page.demo.blocks.values() if getattr(block, "elem_id", None)}
    template, canvas, readout = (
        tab_controls(page.demo, "infill")["template"],
        found["infill-canvas"],
        found["infill-readout"],
    )
    page.values[canvas._id] = "the run's frame"
    page.values[readout._id] = "seed 3 · step 4/16 · 4 forward passes · 0.50 s · …"
    page.type(template, "to __ or")
    assert page.value(canvas) == "the run's frame"
    page.values[readout._id] = "seed 3 · step 16/16 · 16 forward passes · 2.00 s · 30 chars/s"
    page.type(template, "to __ or not")
    assert page.value(canvas) != "the run's frame"  # between runs, the draft of the template to fill


def test_an_edit_marks_the_readout_as_the_last_runs(model_dir):
    # after an edit of the prompt the canvas showed the new prompt's masks beside the last run's "done in 29 of 32
    # steps", as if it described them
    model, _ = loading.load_model(model_dir)
    page = Page(app.build_demo(model))
    found = {block.elem_id: block for block in page.demo.blocks.values() if getattr(block, "elem_id", None)}
    for tab, edited, value in (("generate", "prompt", "JULIET:\n"), ("infill", "template", "to __ or not")):
        readout = found[f"{tab}-readout"]
        before_any_run = page.value(readout)
        page.type(tab_controls(page.demo, tab)[edited], value + "y")
        assert page.value(readout) == before_any_run, tab  # the placeholder is no run's
        page.values[readout._id] = "seed 3 · done in 29 of 32 steps · 29 forward passes · 0.50 s · 500 chars/s"
        page.type(tab_controls(page.demo, tab)[edited], value)
        assert page.value(readout).startswith("Last run, before the edit: seed 3 · done in 29"), tab
        page.type(tab_controls(page.demo, tab)[edited], value + "x")  # marked once
        assert page.value(readout).count("Last run, before the edit") == 1, tab


def test_an_edit_marks_compares_race_and_scores_result_as_the_last_runs(model_dir, twin_dir):
    # Compare's statistics, takeaway and order views and Score's line and tinted text went on describing the last
    # run after an edit, unmarked, where Generate and Infill mark theirs
    model, _ = loading.load_model(model_dir)
    page = Page(app.build_demo(model, twin=loading.load_twin(twin_dir, model)))
    found = {block.elem_id: block for block in page.demo.blocks.values() if getattr(block, "elem_id", None)}
    race = ["compare-left-stats", "compare-right-stats", "compare-twin-stats", "compare-takeaway"]
    orders = ["compare-left-order", "compare-right-order"]
    untouched = {name: page.value(found[name]) for name in race + orders}
    page.type(tab_controls(page.demo, "compare")["prompt"], "JULIET:\n")
    assert {name: page.value(found[name]) for name in race + orders} == untouched  # no race yet: nothing to mark
    for name in race:
        page.values[found[name]._id] = "12 forward passes · 0.10 s"
    for name in orders:
        page.values[found[name]._id] = "<div class='mdlm-canvas'>the order</div>"
    page.type(tab_controls(page.demo, "compare")["prompt"], "ROMEO:\n")
    page.type(tab_controls(page.demo, "compare")["prompt"], "ROMEO:\nA")  # marked once
    for name in race:
        assert page.value(found[name]) == "Last run, before the edit: 12 forward passes · 0.10 s", name
    for name in orders:
        assert page.value(found[name]).count("Last run, before the edit") == 1, name
    summary, view = found["score-summary"], found["score-view"]
    page.values[summary._id], page.values[view._id] = "**2.10 bits per character**", "<div>tinted</div>"
    score_text = next(b for b in page.demo.blocks.values() if getattr(b, "label", None) == "Text to score")
    page.type(score_text, "To be, or not to be")
    assert page.value(summary) == "Last run, before the edit: **2.10 bits per character**"
    assert page.value(view).startswith("<p") and page.value(view).endswith("<div>tinted</div>")


def test_no_trigger_runs_two_server_functions_that_wait_for_the_last_change(model_dir, twin_dir):
    # gradio's page defers an "always_last" function's new call while its last one runs, then dispatches the whole
    # event again, which calls every function on it: two of them on one trigger (the prompt's fit of the length and
    # its redraw) kept deferring each other, and after a run an edit of the prompt sent requests for as long as the
    # page was open (each fit of the length overwrote a note typed into its box, and "99999" became "99")
    model, known_words = loading.load_model(model_dir)
    demo = app.build_demo(model, known_words, twin=loading.load_twin(twin_dir, model))
    on_trigger = {}
    for fn in demo.fns.values():
        if fn.fn is not None and fn.trigger_mode == "always_last":
            for block_id, event_name in fn.targets:
                if block_id is not None:
                    on_trigger.setdefault((block_id, event_name), []).append(getattr(fn.fn, "__name__", str(fn.fn)))
    shared = {
        f"{getattr(demo.blocks[block_id], 'label', None)} {event_name}": names
        for (block_id, event_name), names in on_trigger.items()
        if len(names) > 1
    }
    assert not shared


def test_after_an_edit_the_replay_and_the_text_say_they_are_the_last_runs(model_dir):
    # after an edit of the prompt, "Replay: step" scrubbed the last run's frames over the new prompt's draft, and
    # "Text (the canvas so far ...)" held the last run's text beside the new prompt's masks
    model, _ = loading.load_model(model_dir)
    page = Page(app.build_demo(model))
    found = {block.elem_id: block for block in page.demo.blocks.values() if getattr(block, "elem_id", None)}
    for tab, edited in (("generate", "prompt"), ("infill", "template")):
        page.values[found[f"{tab}-readout"]._id] = "seed 3 · done in 29 of 32 steps · 29 forward passes · 0.50 s"
        page.type(tab_controls(page.demo, tab)[edited], "JULIET:\n")
        for shown in (found[f"{tab}-replay"], found[f"{tab}-final-text"]):
            label = page.props[shown._id].get("label", shown.label)
            assert label.startswith(("Replay the last run", "Text of the last run")), (tab, label)


@pytest.mark.parametrize("length", [100, 300])
def test_a_long_runs_replay_is_of_the_frames_it_drew_not_each_step(model_dir, length):
    # a 600-character run "done in 71 steps" ended its "Replay: step" slider at 41: past the model's context a run
    # draws at most MAX_LONG_FRAMES_PER_SECOND frames a second, not every step
    model, _ = loading.load_model(model_dir)
    run = handlers.generate(model, "", length, 0, True, "length", num_steps=8)
    canvases = [frame[0] for frame in run if frame is not handlers.THROTTLED]
    update = replay_slider(canvases)
    assert update["maximum"] == len(canvases) - 1
    if length > model.block_size:
        assert update["label"] == "Replay the last run: frame" and f"its {len(canvases)} frames" in update["info"]
    else:
        assert update["label"] == "Replay the last run: step" and update["info"].endswith("each of its steps")


def test_each_controls_fine_print_is_a_short_line_at_most_and_all_of_it_is_in_about_these_settings(model_dir):
    # every control carried a sentence of fine print (End at's ran three lines): a line at most now, and each
    # control's whole advice one tap away, in its tab's closed "About these settings"
    from mdlm_space.controls import ONE_LINE

    model, _ = loading.load_model(model_dir)
    demo = app.build_demo(model)
    abouts = [
        block
        for block in demo.blocks.values()
        if isinstance(block, gr.Accordion) and block.label == "About these settings"
    ]
    assert len(abouts) == 4 and all(about.open is False for about in abouts)  # Generate, Infill, Compare, Rewrite
    about_text = "\n".join(about.children[0].value for about in abouts)
    advised = [block for block in demo.blocks.values() if getattr(block, "advice", None)]
    assert {"End at", "Seed", "Only words it has read", "Write slower, read better"} <= {b.label for b in advised}
    for block in demo.blocks.values():
        assert len(getattr(block, "info", None) or "") <= ONE_LINE, (block.label, block.info)
    for block in advised:
        assert f"**{block.label}**: {block.advice}" in about_text, block.label
    for endpoint in ("generate", "infill", "compare", "rewrite"):
        controls = tab_controls(demo, endpoint)
        assert controls["real_words"].advice == OPTION_SPECS["real_words"].note and controls["real_words"].info is None
