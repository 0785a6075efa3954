"""How the app draws a run (mdlm_space/render.py): a cell per position, confidence colours, the draft."""

import dataclasses
import re

import torch

import app
from mdlm_hf import MASK_GLYPH, SamplerState
from mdlm_space import loading, render
from mdlm_space.texts import INFILL_EXAMPLES
from tests.app_helpers import JULIET, Page, cell_classes, tab_controls


def canvas_state(model, chars: str, kinds: str, done: bool = False):
    """A SamplerState of `chars` ("#": a mask), each position's kind one letter of `kinds`: g(iven), n(ew this
    step), e(arlier), m(ask), t(aken back this step)."""

    vocab = model.tokenizer.vocab
    tokens = torch.tensor([[model.mask_id if c == "#" else vocab.index(c) for c in chars]])
    flags = {kind: torch.tensor([[k == kind for k in kinds]]) for kind in "gnt"}
    confidence = torch.tensor([[0.9 if k in "ne" else float("nan") for k in kinds]])
    return SamplerState(tokens, flags["n"], flags["t"], confidence, flags["g"], 3 if done else 1, 3, 3, model.mask_id)


def test_canvas_draws_each_position_as_its_own_countable_cell(model_dir):
    model, _ = loading.load_model(model_dir)
    canvas = render.render_canvas(model, canvas_state(model, "to###be#\n", "ggmtmnemg"))
    # three adjacent masks are three cells, not one bar; the line break is a visible cell too
    assert cell_classes(canvas) == ["given", "given", "mask", "mask", "mask", "new", "earlier", "mask", "given"]
    assert canvas.count(MASK_GLYPH) == 4 and render.NEWLINE_GLYPH + "</span>\n" in canvas
    assert canvas.count(render.TAKEN_BACK_COLOUR) == 1  # the one taken back this step
    # a fixed height, whatever the text: new line breaks scroll inside instead of pushing the page down
    assert re.search(r"height: calc\([\d.]+em \+ 20px\); overflow-y: auto", canvas)
    assert "word-break: normal; overflow-wrap: anywhere" in canvas and "break-all" not in canvas


def test_the_final_frame_highlights_nothing_as_revealed_this_step(model_dir):
    model, _ = loading.load_model(model_dir)
    running = render.render_canvas(model, canvas_state(model, "tob#", "gnnm"))
    final = render.render_canvas(model, canvas_state(model, "tobe", "gnnn", done=True))
    assert cell_classes(running).count("new") == 2 and render.NEW_COLOUR in running
    assert cell_classes(final) == ["given", "earlier", "earlier", "earlier"] and render.NEW_COLOUR not in final


def hsl_luminance(colour: str) -> float:
    """WCAG relative luminance of an "hsl(h,s%,l%)" colour."""
    import colorsys

    hue, saturation, lightness = (float(x) for x in re.findall(r"[\d.]+", colour))
    rgb = colorsys.hls_to_rgb(hue / 360, lightness / 100, saturation / 100)
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: float, b: float) -> float:
    return (max(a, b) + 0.05) / (min(a, b) + 0.05)


def test_confidence_scale_is_one_hue_readable_and_finished_text_plain():
    # lightness alone carries confidence, so it reads the same for every kind of colour vision (red to green did not)
    colours = [render.confidence_colour(p / 10) for p in range(11)]
    parsed = [tuple(float(x) for x in re.findall(r"[\d.]+", colour)) for colour in colours]
    assert len({(hue, saturation) for hue, saturation, _ in parsed}) == 1
    luminance = [hsl_luminance(colour) for colour in colours]
    assert luminance == sorted(luminance)  # surer is lighter: finished text is mostly near-white
    # the scale spanned 2.1:1 and sure text sat on solid mid-blue
    assert contrast(luminance[0], luminance[-1]) >= 2.9  # the scale's ends tell apart
    text = 0.0198  # the canvas's text colour, #1f2733
    assert min(contrast(text, lum) for lum in luminance) >= 4.5 and contrast(text, luminance[-1]) >= 12
    scale = render.legend(("confidence",))
    assert render.confidence_colour(0) in scale and render.confidence_colour(1) in scale


def test_the_canvas_shows_the_masks_to_fill_before_the_first_run(model_dir):
    assert cell_classes(render.draft_canvas("ROMEO:\n", 5)) == ["given"] * 7 + ["mask"] * 5
    assert cell_classes(render.draft_template("to __ or")) == ["given"] * 3 + ["mask"] * 2 + ["given"] * 3
    assert "Type a template" in render.draft_template("")
    model, _ = loading.load_model(model_dir)
    page = Page(app.build_demo(model))
    generate = tab_controls(page.demo, "generate")
    infill = tab_controls(page.demo, "infill")
    canvases = {
        name: page.demo.blocks[id_]
        for name in ("generate", "infill")
        for id_ in page.demo.blocks
        if getattr(page.demo.blocks[id_], "elem_id", None) == f"{name}-canvas"
    }
    assert cell_classes(page.value(canvases["generate"])).count("mask") == 121  # the first length, fitted
    page.type(generate["prompt"], JULIET)  # the canvas follows the prompt
    assert cell_classes(page.value(canvases["generate"])) == ["given"] * 49 + ["mask"] * 121
    long = render.draft_canvas("ROMEO:\n", 5000)  # a long text's draft: the cells a page can hold, and a count
    assert cell_classes(long) == ["given"] * 7 + ["mask"] * (render.DRAFT_CELLS - 7) and "… and 4,495 more" in long
    assert cell_classes(page.value(canvases["infill"])).count("mask") == INFILL_EXAMPLES[0].count("_")
    page.type(infill["template"], "to __ or")
    assert cell_classes(page.value(canvases["infill"])).count("mask") == 2


def dropped_text(canvas: str) -> str:
    """The characters a canvas strikes out (written after where its text ended), as text."""
    struck = canvas.split("class='mdlm-dropped'", 1)[1] if "class='mdlm-dropped'" in canvas else ""
    return re.sub(r"<[^>]+>", "", struck.split(">", 1)[-1]).replace(render.NEWLINE_GLYPH, "")


def test_a_long_text_that_ended_at_a_line_strikes_out_what_it_left_out(model_dir):
    # past the model's context the last window's characters after the end were drawn as the kept ones (the legend
    # says "written after the end, left out of the text"), so the canvas ran on past where the text box ended
    model, _ = loading.load_model(model_dir)
    text = ("to be or not\n" * 23)[:300]
    state = dataclasses.replace(canvas_state(model, text, "e" * len(text), done=True), window=(172, 300))
    for kept in (250, 150):  # in the last window, and before it
        canvas = render.render_canvas(model, state, kept=kept)
        assert dropped_text(canvas) == text[kept:], kept
        assert canvas.count("class='mdlm-dropped'") == 1 and "mdlm-window" in canvas
    assert "mdlm-dropped" not in render.render_canvas(model, state)  # no end: nothing struck out


def test_a_readout_of_one_step_says_step():
    # "done in 1 steps"
    import torch

    from mdlm_hf import SamplerState
    from mdlm_space.handlers import readout

    one = torch.zeros(1, 3, dtype=torch.long)
    state = SamplerState(one, one.bool(), one.bool(), one.float(), one.bool(), 1, 1, 1, mask_id=9)
    assert "done in 1 step ·" in readout(state, 0.1, 3, 0)
    assert "done in 2 steps ·" in readout(
        SamplerState(one, one.bool(), one.bool(), one.float(), one.bool(), 2, 2, 2, 9), 0.1, 3, 0
    )


def legend_entries(canvas_html: str) -> list[str]:
    """The entries of the legend under a canvas, as text."""
    legend = canvas_html.split(f"<div class='{render.LEGEND_CLASS}'", 1)[1]
    return [
        re.sub(r"<[^>]+>", "", entry).strip() for entry in re.findall(r"nowrap;'>(.*?)</span>(?=<span|</div>)", legend)
    ]


def test_the_legend_under_a_canvas_explains_only_the_marks_it_shows(model_dir):
    # the legend listed all eight marks under every canvas (two lines on a desktop, five on a phone): "taken back"
    # without remasking, "the window" within the context, "after the end" where nothing was struck out
    model, _ = loading.load_model(model_dir)
    assert legend_entries(render.draft_canvas("ROMEO:\n", 5)) == [
        f"{MASK_GLYPH} masked",
        "x given",
        f"{render.NEWLINE_GLYPH} line break",
    ]
    assert [entry.split()[-1] for entry in legend_entries(render.draft_template("to __ or"))] == ["masked", "given"]
    running = render.with_legend(render.render_canvas(model, canvas_state(model, "to###be#\n", "ggmtmnemg")))
    assert "taken back (remasking)" in legend_entries(running)[-1] and len(legend_entries(running)) == 6
    plain = render.with_legend(render.render_canvas(model, canvas_state(model, "to##be#\n", "ggmmnemg")))
    assert not any("taken back" in entry for entry in legend_entries(plain))
    assert legend_entries(render.with_legend(render.render_canvas(model, canvas_state(model, "tobe", "gnnn", True))))[
        0
    ].endswith("confidence (low … high)")
    text = ("to be or not\n" * 23)[:300]
    long = dataclasses.replace(canvas_state(model, text, "e" * len(text), done=True), window=(172, 300))
    ended = legend_entries(render.with_legend(render.render_canvas(model, long, kept=250)))
    assert ended[-2:] == ["x the window it reads", "x after the end, left out"]
    # a message in the canvas's place shows no mark: an empty legend, still a line high, so nothing below moves
    empty = render.draft_template("")
    assert legend_entries(empty) == [] and "min-height: 1.8em" in empty.split(render.LEGEND_CLASS)[1]
