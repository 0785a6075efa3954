"""The Compare tab: left-to-right against confidence order on the same canvas, and the autoregressive twin when the
app has one, streamed together."""

from __future__ import annotations

import gradio as gr

from mdlm_hf import MDLM
from mdlm_hf.sampling.options import REVEAL_RULE_OPTIONS
from mdlm_space.api import page_event, public_endpoint, race_result
from mdlm_space.controls import (
    QUIET,
    about_settings,
    control,
    default_value,
    follow_prompt,
    play_shape_controls,
    seed_controls,
)
from mdlm_space.endpoints import event
from mdlm_space.race import NO_RACE_ORDER, compare, race_stopped
from mdlm_space.render import COMPARE_FONT_PX, COMPARE_ROWS, RACE_LEGEND, draft_canvas
from mdlm_space.runs import last_run_marks, redraw, run_buttons, stoppable
from mdlm_space.texts import DemoText

# where Compare's controls differ from PARAMS' and the library's: a race within the model's context, short enough to
# watch, its steps counted as what the sides spend (forward passes)
CHANGES = {
    "prompt": dict(label="Prompt"),
    "length": dict(label="Characters", default=128, high=None, info=""),
    "num_steps": dict(label="Forward passes"),
    "temperature": dict(label="Temperature"),
}


def compare_draft(prompt: str | None, length: float | None) -> tuple[str, str, str]:
    """The Compare canvases before a run: the prompt, then a mask for each character to generate."""
    draft = draft_canvas(prompt, length, COMPARE_ROWS, COMPARE_FONT_PX, legend=False)
    # the twin's takes a phone's whole width, in a row of its own: its text does not shrink
    return draft, draft, draft_canvas(prompt, length, COMPARE_ROWS, COMPARE_FONT_PX, legend=False, shrink=False)


def compare_side(title: str, elem_id: str, draft: str, visible: bool = True) -> tuple[gr.HTML, gr.Markdown]:
    """One side of the race: its title, canvas and statistics. A narrow minimum width keeps two sides side by side
    on a phone, where stacked they would put the race below the fold."""
    with gr.Column(min_width=150, visible=visible):
        gr.Markdown(f"### {title}")
        return gr.HTML(draft, elem_id=elem_id), gr.Markdown(elem_id=elem_id.replace("-canvas", "-stats"))


def order_views() -> list[gr.HTML]:
    """Each diffusion side's order of writing (stacked on a phone), in a closed accordion under the takeaway: above
    it, it would push the takeaway below a phone's fold; closed, the settings stay near the race. Not the twin's:
    one character per pass, left to right, by construction."""
    with gr.Accordion("Order of writing, each side", open=False):
        with gr.Row():
            views = []
            for title, side in (("Left to right", "left"), ("Confidence order", "right")):
                with gr.Column(min_width=150):
                    gr.Markdown(f"**{title}**")
                    views.append(gr.HTML(NO_RACE_ORDER, elem_id=f"compare-{side}-order"))
    return views


def follow_edits(demo: gr.Blocks, block_size: int, inputs: tuple, canvases: list, last_race: list) -> None:
    """An edit of the prompt or the length draws the new draft on the `canvases`, and marks the last race's
    statistics, takeaway and orders (`last_race`) as the last run's."""
    prompt, length, steps = inputs

    def draft_and_marks(prompt: str | None, length: float | None, *shown: str | None) -> tuple:
        return (*compare_draft(prompt, length), *last_run_marks(shown, (NO_RACE_ORDER,)))

    for fitted in follow_prompt(demo, block_size, block_size, prompt, length, steps):
        redraw(fitted.then, draft_and_marks, [prompt, length, *last_race], canvases + last_race)


EXPLAINED = (
    "The reveal rule applies to both sides, except the prior weight and the spacing, which only confidence order "
    "uses (left to right scores no position, and writes the next characters in a row). Tick the box to make the "
    "left side autoregressive-like: one character per forward pass, strictly left to right, no reveal rule. It "
    "still re-reads the whole canvas at every pass, with no key/value cache, so its seconds would overstate the gap "
    "to a real autoregressive model: compare forward passes, not seconds."
)
TWIN_EXPLAINED = (
    " The autoregressive twin is that real model: one character per pass too, each pass over the one new "
    "character, its keys and values cached; its seconds are its own compute time, as each side's are."
)


def compare_tab(
    model: MDLM, known_words: set[str] | None, demo: gr.Blocks, texts: DemoText, twin: MDLM | None = None
) -> None:
    """Left-to-right against confidence order, same model, canvas, seed, forward passes and reveal rule, and the
    autoregressive `twin` beside them when given: the prompt and the race first, the settings and the explanation
    after them."""
    block_size = model.block_size
    length_value = min(default_value("length", CHANGES), block_size)
    against = " and the autoregressive twin (the same network, causal, with a key-value cache)" if twin else ""
    gr.Markdown(
        f"Left to right vs confidence order: same model, prompt, seed and forward passes, streamed together{against}."
    )
    with gr.Row(equal_height=True):
        prompt = control("prompt", block_size, texts.prompt, CHANGES, lines=2, scale=3, min_width=200)
        with gr.Column(scale=1, min_width=160):
            button, stop = run_buttons("Compare")
    drafts = compare_draft(texts.prompt, min(length_value, block_size - len(texts.prompt)))
    # the race, from its headings to the takeaway: what a run brings into view (whole where it fits, else from the
    # headings down: a phone kept the takeaway in view and scrolled the headings off)
    with gr.Column(elem_id="compare-race"):
        with gr.Row():
            left_canvas, left_stats = compare_side("Left to right", "compare-left-canvas", drafts[0])
            right_canvas, right_stats = compare_side("Confidence order", "compare-right-canvas", drafts[1])
            twin_canvas, twin_stats = compare_side(
                "Autoregressive twin", "compare-twin-canvas", drafts[2], twin is not None
            )
        summary = gr.Markdown(elem_id="compare-takeaway")
    orders = order_views()
    gr.HTML(RACE_LEGEND)
    with gr.Row():
        length = control("length", block_size, length_value, CHANGES)
        steps = control("num_steps", block_size, min(default_value("num_steps", CHANGES), block_size), CHANGES)
        temperature = control("temperature", block_size, changes=CHANGES)
        controls = dict(prompt=prompt, length=length, num_steps=steps, temperature=temperature)
    with gr.Row():
        controls["autoregressive"] = control("autoregressive", block_size)
        controls |= play_shape_controls(model)
        controls |= seed_controls("compare", block_size)
    # the sides' orders are the race's own: of the reveal rule, only what both can share
    with gr.Accordion("Reveal rule, both sides", open=False):
        controls |= {name: control(name, block_size) for name in REVEAL_RULE_OPTIONS}
    about_settings(controls)
    gr.Markdown(EXPLAINED + (TWIN_EXPLAINED if twin else ""))
    follow_edits(demo, block_size, (prompt, length, steps), [left_canvas, right_canvas, twin_canvas],
                 [left_stats, right_stats, twin_stats, summary, *orders])  # fmt: skip
    # the twin's and the orders last: API clients that read the first six (or eight) by position keep them
    outputs = [left_canvas, left_stats, right_canvas, right_stats, summary, controls["seed"], twin_canvas, twin_stats]
    compared = event(compare, controls, model=model, known_words=known_words, twin=twin)
    race = stoppable(
        button, stop, **compared, outputs=outputs + orders, **page_event("compare"), into_view="compare-race"
    )
    race.then(race_stopped, [summary, left_stats], summary, **QUIET)
    raced = event(race_result(model, known_words, twin), controls)
    public_endpoint("compare", raced, lambda result: result)
