"""The app's Infill tab: fixed characters kept, steps that follow the blanks, and the template's preview."""

import app
from mdlm_hf import MASK_GLYPH, SamplerOptions
from mdlm_hf.windows import MAX_CANVAS
from mdlm_space import loading, render
from mdlm_space.tabs import infill as infill_tab
from mdlm_space.texts import INFILL_EXAMPLES
from tests.app_helpers import Page, tab_controls


def test_infill_keeps_fixed_characters(client):
    template = "To be, or not to be, ________ is the question:"
    frames = list(
        client.submit(
            template=template,
            num_steps=4,
            temperature=0.8,
            top_p=1.0,
            order="entropy",
            seed=0,
            order_temperature=0.3,
            read_better=False,
            api_name="/infill_page",
        )
    )
    assert len(frames) == 5
    text = frames[-1][1]
    assert len(text) == len(template) and "_" not in text and MASK_GLYPH not in text
    assert all(a == b for a, b in zip(template, text, strict=True) if a != "_")


def test_steps_follow_the_characters_to_fill_both_ways(model_dir):
    model, _ = loading.load_model(model_dir)
    page = Page(app.build_demo(model))
    infill = tab_controls(page.demo, "infill")
    template, steps = infill["template"], infill["num_steps"]
    example = INFILL_EXAMPLES[1]
    assert example.count("_") == 12 and infill_tab.CHANGES["num_steps"]["default"] > 12
    for i in range(len(example) + 1):  # typed key by key, through templates of 0 and 1 blank
        page.type(template, example[:i])
    assert page.value(steps) == 12
    page.type(template, "")
    assert page.value(steps) == 1 and page.props[steps._id]["interactive"] is False
    page.type(template, example)  # pasted
    assert page.value(steps) == 12 and page.props[steps._id]["interactive"] is True
    page.type(steps, 8)  # the user's own choice survives the cap ...
    page.type(template, example + " ____")
    assert page.value(steps) == 8 and page.props[steps._id]["maximum"] == 16
    page.type(template, "to _ or")  # ... a single blank locks the slider at one step ...
    assert page.value(steps) == 1 and page.props[steps._id]["info"] == "one character to fill: one step"
    page.type(template, example)  # ... and comes back
    assert page.value(steps) == 8
    generate = tab_controls(page.demo, "generate")
    assert page.props[generate["num_steps"]._id]["maximum"] == page.value(generate["length"]) == 121  # on load
    page.type(generate["length"], 1)
    assert page.value(generate["num_steps"]) == 1
    page.type(generate["length"], 100)
    assert page.value(generate["num_steps"]) == min(SamplerOptions().num_steps, 100)


def test_the_infill_preview_warns_before_the_run():
    # an over-long template (or one with no blank) showed as a canvas, the error only on run
    too_long = render.draft_template("_" * (MAX_CANVAS + 5))
    assert "The template has 16,389 characters, but a run writes at most 16,384: shorten it by 5." in too_long
    assert "mdlm-mask" not in too_long
    assert "The template has no blank: mark each character to fill with _." in render.draft_template("to be or not")
    assert "mdlm-mask" in render.draft_template("to __ or")
