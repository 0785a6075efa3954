"""The app's How-it-works tab: the forward process on a line, and the accuracy plot measured once."""

import re
import time

import gradio as gr

import app
from mdlm_hf import MASK_GLYPH
from mdlm_hf.diffusion import MASK_RATIOS
from mdlm_space import handlers, loading, render, views
from mdlm_space.tabs import how_it_works
from mdlm_space.texts import SONNET_18
from tests.app_helpers import Page


def test_start_up_draws_no_plot_and_the_tab_draws_it_once(model_dir, monkeypatch):
    calls = []
    accuracy = how_it_works.accuracy_by_mask_ratio
    monkeypatch.setattr(
        how_it_works, "accuracy_by_mask_ratio", lambda *args, **kwargs: calls.append(1) or accuracy(*args, **kwargs)
    )
    model, _ = loading.load_model(model_dir)
    demo = app.build_demo(model)
    assert calls == []  # nothing drawn before the page is served
    page = Page(demo)
    assert calls == []
    tab = next(block for block in demo.blocks.values() if isinstance(block, gr.Tab) and block.label == "How it works")
    plot = next(block for block in demo.blocks.values() if isinstance(block, gr.Plot))
    page.fire(tab, "select")
    page.fire(tab, "select")
    measured_once = len(MASK_RATIOS)  # one mask ratio per job on the model thread, so other runs go between
    assert len(calls) == measured_once and page.value(plot) is not None
    # a new mask ratio moves the plot's marker: the figure is redrawn, the accuracies are not measured again
    first = page.value(plot)
    mask_ratio = next(b for b in demo.blocks.values() if isinstance(b, gr.Slider) and b.label == "Mask ratio t")
    page.type(mask_ratio, 0.6)
    assert len(calls) == measured_once and page.value(plot) != first


def test_forward_process(client):
    view, summary = client.predict("Shall I compare thee", 0.5, 0, api_name="/forward_process_page")
    assert "of 20 characters masked" in summary and MASK_GLYPH in view


def test_forward_view_labels_its_rows_and_shows_true_characters_and_line_breaks():
    view = views.forward_view("ab c\nd", [False, True, True, False, True, True], ["a", "b", "\n", " ", "x", "d"])
    assert re.findall(r"class='mdlm-row-label'>([^<]*)<", view) == ["x_t", "model", "true"]
    assert view.count("class='mdlm-mask'") == 4
    # the predicted newline is a glyph in its cell, not a line break; the true characters are shown, not hovered
    assert (
        "\n" not in view
        and f"class='mdlm-wrong' style='background:{views.WRONG_COLOUR}'>{render.NEWLINE_GLYPH}<" in view
    )
    assert re.findall(r"class='mdlm-true'[^>]*>([^<]*)<", view) == [render.SPACE_GLYPH, render.NEWLINE_GLYPH]
    assert view.count("class='mdlm-right'") == 2 and "title=" not in view
    assert "hsl(120" not in view and "hsl(0," not in view  # right and wrong: blue and orange, not green and red


def test_how_it_works_follows_the_mask_ratio_box_and_marks_it_on_the_plot(model_dir):
    model, _ = loading.load_model(model_dir)
    demo = app.build_demo(model)
    page = Page(demo)
    mask_ratio = next(b for b in demo.blocks.values() if isinstance(b, gr.Slider) and b.label == "Mask ratio t")
    summary = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "forward-summary")
    line = SONNET_18.splitlines()[0]
    assert page.value(summary) == handlers.forward_process(model, line, 0.3, 0)[1]
    page.type(mask_ratio, 0.5)  # a value typed into the number box: the change event, not only a drag's release
    assert (
        page.value(summary)
        == handlers.forward_process(model, line, 0.5, 0)[1]
        != handlers.forward_process(model, line, 0.3, 0)[1]
    )
    figure = how_it_works.marked_accuracy_figure([(0.1, 0.9), (0.5, 0.6), (1.0, 0.1)], 0.5)
    assert [list(line.get_xdata()) for line in figure.axes[0].lines if line.get_linestyle() == "--"] == [[0.5, 0.5]]
    plot = next(b for b in demo.blocks.values() if isinstance(b, gr.Plot))
    assert plot.show_label is False  # its floating label covered the figure's title on a phone


def test_the_accuracy_plot_is_measured_at_start_up_in_the_background(model_dir, monkeypatch):
    # on a first visit after start-up the plot took 26 s, measured only then, and the forward view above it was
    # blank with no indicator
    everyones_calls, launched = [], {}
    accuracy = how_it_works.accuracy_by_mask_ratio
    monkeypatch.setattr(  # another test's app may still be measuring its own model
        how_it_works,
        "accuracy_by_mask_ratio",
        lambda model, *args, **kwargs: everyones_calls.append(model) or accuracy(model, *args, **kwargs),
    )
    load = app.load_model
    monkeypatch.setattr(app, "load_model", lambda *args: launched.setdefault("loaded", load(*args)))
    monkeypatch.setattr(gr.Blocks, "launch", lambda self, **kwargs: launched.update(blocks=self))
    monkeypatch.setattr(app, "private_uploads", lambda: None)
    app.main(["--model", str(model_dir), "--device", "cpu", "--twin", "none"])
    model = launched["loaded"][0]

    def mine() -> list:
        return [called for called in everyones_calls if called is model]

    deadline = time.monotonic() + 60
    while len(mine()) < len(MASK_RATIOS) and time.monotonic() < deadline:  # no visitor yet
        time.sleep(0.05)
    assert len(mine()) == len(MASK_RATIOS)
    demo = launched["blocks"]
    view = demo.blocks[next(i for i, b in demo.blocks.items() if getattr(b, "elem_id", None) == "forward-view")]
    assert view.value  # says what is coming before the first mask is drawn
    page = Page(demo)
    tab = next(block for block in demo.blocks.values() if isinstance(block, gr.Tab) and block.label == "How it works")
    plot = next(block for block in demo.blocks.values() if isinstance(block, gr.Plot))
    page.fire(tab, "select")
    assert len(mine()) == len(MASK_RATIOS) and page.value(plot) is not None


def test_the_reverse_process_says_how_the_rules_ticked_by_default_draw(model_dir):
    # the tab said each character is drawn from the model's odds (temperature, min-p), while "Only words it has
    # read", ticked by default, keeps each letter to those that keep its word one of the training text's words
    from mdlm_hf.pipeline import default_options
    from mdlm_hf.sampling.options import OPTION_SPECS

    model, _ = loading.load_model(model_dir)  # with its words: real_words by default, no casts
    demo = app.build_demo(model)
    said = [block.value for block in demo.blocks.values() if isinstance(block, gr.Markdown) and block.value]
    reverse = next(text for text in said if text.startswith("**Reverse process.**"))  # not the settings' fine print
    defaults = default_options(model)
    assert defaults.real_words and not defaults.keep_cast
    assert f"*{OPTION_SPECS['real_words'].label}*" in reverse
    assert f"*{OPTION_SPECS['keep_cast'].label}*" not in reverse  # a rule the model cannot keep is not said
