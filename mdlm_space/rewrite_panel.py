"""The Rewrite panel, below the tabs whose text it takes (hidden under Score and How it works): select a span of a
finished text (Generate's, Infill's or Compare's, or a pasted one), press Rewrite, and three rewrites of it stream
side by side, ranked by the span's bits per character; pick one, Undo goes back. Beside them, the order view of
the text the panel holds."""

from __future__ import annotations

import functools
import json
from typing import Any

import gradio as gr

from mdlm_hf import MASK_GLYPH, MDLM
from mdlm_hf.sampling.options import OPTION_SPECS
from mdlm_space.api import example_span, page_event, public_endpoint, rewrite_result
from mdlm_space.controls import (
    QUIET,
    about_settings,
    capped_slider,
    control,
    play_shape_controls,
    remembered,
    sampling_options,
)
from mdlm_space.endpoints import event, input_names
from mdlm_space.handlers import STOPPED_AT
from mdlm_space.order_view import run_order
from mdlm_space.rewrite_handlers import (
    NO_CHOICE,
    NO_ORDER,
    NUM_CHOICES,
    WAITING,
    new_text,
    pick,
    picks_ready,
    rewrite,
    selection,
    selection_line,
    stopped,
    undo,
)
from mdlm_space.runs import replay_slider, run_buttons, stoppable

# runs in the page: a finished text (no mask left) replaces the panel's, one still being written leaves it
TAKE_FINISHED = (
    f"(finished, current) => (finished && !finished.includes({json.dumps(MASK_GLYPH)})) ? finished : current"
)
# runs in the page when Generate's or Infill's readout says its run was stopped (written once the run has ended):
# its text up to the first mask, back to the last whole word (a finished text comes through TAKE_FINISHED)
TAKE_STOPPED = (
    f"(line, text, current) => {{ if (!(line || '').startsWith('seed ') || !line.includes({json.dumps(STOPPED_AT)})"
    f" || !(text || '').includes({json.dumps(MASK_GLYPH)})) return current;"
    f" const before = text.slice(0, text.indexOf({json.dumps(MASK_GLYPH)}));"
    " return before.slice(0, Math.max(0, before.search(/\\s\\S*$/))).trimEnd() || current; }"
)
# Compare has no text box: its confidence-order canvas, once finished, read back as text up to where it ended (the
# characters struck out after it go; a line break is drawn as a glyph and then broken: the glyph goes)
TAKE_FINISHED_CANVAS = (
    "(canvas, current) => { const box = new DOMParser().parseFromString(canvas || '', 'text/html')"
    ".querySelector('.mdlm-canvas'); if (!box || box.querySelector('.mdlm-mask')) return current;"
    " box.querySelectorAll('.mdlm-dropped').forEach((tail) => tail.remove());"
    " return box.textContent.replaceAll('↵', ''); }"
)
# a span is a few words: 16 steps write three of them quickly (and never more steps than characters: the handler
# caps them)
CHANGES = {"num_steps": dict(default=16)}
# the handler writes a span with at most one step per character of it, whatever the slider says
STEPS_INFO = "at most one per character of the span"
# runs in the page: an order view once it is one (the race's placeholder, while it runs, leaves the panel's)
TAKE_ORDER = "(view, current) => (view && view.includes('mdlm-pass')) ? view : current"
HOW = (
    "### Rewrite a span\nClick a line of a finished text (a run's lands here) or select any span, press **Rewrite**: "
    "the span is masked and written again three times, the model reading both sides of it. Each is ranked by the "
    "span's bits per character given the text around it; **Pick** one to keep it, **Undo** goes back. It writes "
    "with the sampling options of the last Generate or Infill run (steps apart), which you can change below."
)


def choice_column(number: int) -> tuple[gr.Markdown, gr.HTML, gr.Button]:
    """One rewrite: its rank and score, its view, its Pick button: three side by side, stacked on a phone (side by
    side there, a choice held 12 characters a line at the least readable size, 12 px)."""
    with gr.Column(min_width=240):
        label = gr.Markdown(f"Choice {number}", elem_id=f"rewrite-label-{number}")
        view = gr.HTML(NO_CHOICE, elem_id=f"rewrite-{number}")
        # usable once a run's rewrites are ranked: before, there is nothing to pick
        button = gr.Button(f"Pick #{number}", size="sm", interactive=False, elem_id=f"rewrite-pick-{number}")
    return label, view, button


# runs in the page once it loads: a click in the panel's text selects the line under it (the selection then fills
# From and To, as a selection by hand does), so that "rewrite this line" is one click; a second click on the line
# it selected leaves the caret there, for editing, and a double click selects a word as ever
CLICK_SELECTS_A_LINE = """() => {
  let chosen = null;
  document.addEventListener('mouseup', (event) => {
    const box = event.target.closest && event.target.closest('#rewrite-text textarea');
    if (!box || event.detail > 1 || box.selectionStart !== box.selectionEnd) return;
    const text = box.value, at = box.selectionStart;
    const start = text.lastIndexOf('\\n', at - 1) + 1;
    const end = text.indexOf('\\n', at) < 0 ? text.length : text.indexOf('\\n', at);
    const line = start + ':' + end;
    if (end <= start || chosen === line) { chosen = null; return; }
    chosen = line;
    box.setSelectionRange(start, end);
    box.dispatchEvent(new Event('select', {bubbles: true}));
  });
}"""


def fit_to_text(info: str | None, text: str | None, wanted: float | None) -> dict:
    """From's or To's update for a typed number (`remembered`): at most the text's length."""
    return dict(gr.update(value=wanted, info=info), most=len(text or ""), why="the text's length")


def span_controls(model: MDLM) -> dict[str, gr.components.Component]:
    """The text, From and To (which the selection fills) and the line that says the span in words, as Rewrite's
    check would."""
    text = control("text", model.block_size, "", lines=6, elem_id="rewrite-text")
    with gr.Row():  # no minimum: gradio's says "Error" (`remembered` says what it did with a value it does not take)
        start = control("start", model.block_size, min_width=100, elem_id="rewrite-start")
        end = control("end", model.block_size, min_width=100, elem_id="rewrite-end")
    for box in (start, end):
        remembered(box, functools.partial(fit_to_text, box.info), (text,), shows=True)
    line = functools.partial(selection_line, model)
    where = gr.Markdown(line("", 0, 0), elem_id="rewrite-selection")
    text.select(selection, None, [start, end], **QUIET, trigger_mode="always_last")
    for box in (text, start, end):
        box.change(line, [text, start, end], where, **QUIET)
    return dict(text=text, start=start, end=end)


def by_elem_id(demo: gr.Blocks) -> dict[str, gr.components.Component]:
    """The demo's components that have an elem_id, by it."""
    return {block.elem_id: block for block in demo.blocks.values() if getattr(block, "elem_id", None)}


def counted(take: str) -> str:
    """The page function `take` (a run's outputs and the panel's text -> the panel's text), also counting the texts
    it brings in: a hidden count's change is the one server call per run that a new text lands."""
    return (
        "(...values) => { const count = values.pop(), current = values[values.length - 1];"
        f" const kept = ({take})(...values); return [kept, kept === current ? count : (count || 0) + 1]; }}"
    )


def feed_from_runs(demo: gr.Blocks, text: gr.Textbox) -> gr.Number:
    """Each run's finished text comes to the panel: Generate's and Infill's text boxes, Compare's canvas; and
    Generate's stopped text, up to its last whole word before a mask. Returns the count of texts brought in, which
    changes as each lands."""
    found, landed = by_elem_id(demo), gr.Number(0, visible=False)
    for source, js in (
        ("generate-final-text", TAKE_FINISHED),
        ("infill-final-text", TAKE_FINISHED),
        ("compare-right-canvas", TAKE_FINISHED_CANVAS),
    ):
        if source in found:
            found[source].change(None, [found[source], text, landed], [text, landed], js=counted(js), **QUIET)
    if "generate-readout" in found:
        stopped_run = [found["generate-readout"], found["generate-final-text"], text, landed]
        found["generate-readout"].change(None, stopped_run, [text, landed], js=counted(TAKE_STOPPED), **QUIET)
    return landed


def show_run_orders(demo: gr.Blocks, order: gr.HTML, text_order: gr.HTML) -> None:
    """Each finished Generate or Infill run's order of writing (shown, and kept as the text's: `text_order`), from
    its replay frames, and Compare's confidence-order side's. Asked for once, when the run's text is finished (a
    hidden box takes it): asking at every frame sent a long run's thousands of frames a request each (4x slower)."""
    found = by_elem_id(demo)
    for fn in list(demo.fns.values()):
        if fn.fn is not replay_slider:  # its input: the session's list of a tab's frames; its output, the slider
            continue
        tab = str(fn.outputs[0].elem_id).removesuffix("-replay")  # Generate's or Infill's: the tabs with a replay
        final_text, readout, finished = found[f"{tab}-final-text"], found[f"{tab}-readout"], gr.Textbox(visible=False)
        final_text.change(None, [final_text, finished], finished, js=TAKE_FINISHED, **QUIET)
        readout.change(None, [readout, final_text, finished], finished, js=TAKE_STOPPED, **QUIET)  # a stopped run's
        finished.change(run_orders, [fn.inputs[0], finished], [order, text_order], **QUIET)
    if "compare-right-order" in found:  # Compare's text in the panel is confidence order's: so is its order
        race_order = found["compare-right-order"]
        for view in (order, text_order):
            race_order.change(None, [race_order, view], view, js=TAKE_ORDER, **QUIET)


def run_orders(canvases: list[str] | None, text: str | None) -> tuple[object, object]:
    """The order view of a run's text as the panel took it (`run_order`), shown and kept as its text's."""
    view = run_order(canvases, text)
    return view, view


def run_options(*values: Any) -> tuple[Any, ...]:
    """A run's sampler options, as they were on its tab: the panel's take them."""
    return values


def follow_run_options(demo: gr.Blocks, controls: dict[str, gr.components.Component]) -> None:
    """A Generate or Infill run sets the panel's sampler options to its own, so that a span is written again as the
    run wrote its text; not its steps, which it counts for the whole text. Compare's two sides have an order each:
    the panel keeps its options."""
    for fn in list(demo.fns.values()):
        if fn.api_name not in (page_event("generate")["api_name"], page_event("infill")["api_name"]):
            continue
        named = dict(zip(input_names(fn.fn), fn.inputs, strict=True))
        shared = [name for name in named if name in OPTION_SPECS and name in controls and name != "num_steps"]
        for block_id, trigger in fn.targets:
            listen = getattr(demo.blocks[block_id], trigger)
            listen(run_options, [named[n] for n in shared], [controls[n] for n in shared], **QUIET)


def rewrite_panel(model: MDLM, demo: gr.Blocks, example: str) -> None:
    """The panel: the text and its span, Rewrite and Undo, the options; three choices and the order view beside
    (`example`: the text the API's example rewrites)."""
    block_size = model.block_size
    gr.Markdown(HOW)
    demo.load(None, js=CLICK_SELECTS_A_LINE)
    with gr.Row():
        with gr.Column(scale=1, min_width=300):
            controls = span_controls(model)
            beside_run = play_shape_controls(model)  # above the button, as Generate's
            button, stop = run_buttons("Rewrite")
            undo_button = gr.Button("Undo", interactive=False, elem_id="rewrite-undo")
            controls |= sampling_options("rewrite", block_size, ("steps", "drawing"), CHANGES)
            remembered(controls["num_steps"], functools.partial(capped_slider, block_size, info=STEPS_INFO))
            controls |= beside_run
            about_settings(controls)
        with gr.Column(scale=2):
            # above the choices: on a phone they stack, and a readout below them was out of view while they streamed
            readout = gr.Markdown(WAITING, elem_id="rewrite-readout")
            with gr.Row():
                labels, views, picks = zip(*(choice_column(i + 1) for i in range(NUM_CHOICES)), strict=True)
            gr.Markdown(
                "**Order of writing** of the panel's text (the last Generate or Infill run, Compare's confidence "
                "order, or the picked rewrite)"
            )
            order = gr.HTML(NO_ORDER, elem_id="rewrite-order")
            # the text's own order of writing (a run's, a pick's), which a rewrite's view replaces on screen: what
            # Undo brings back with the text (hidden, not a State: Compare's page function writes it too)
            text_order = gr.HTML(NO_ORDER, visible=False, elem_id="rewrite-text-order")
    choices, history = gr.JSON(visible=False), gr.State([])
    outputs = [*views, *labels, order, readout, choices, controls["seed"]]
    run = stoppable(button, stop, **event(rewrite, controls, model=model), outputs=outputs, **page_event("rewrite"))
    start, end = example_span(example)
    example_call = dict(text=example, start=start, end=end)  # the page's text starts empty: the API's would not run
    public_endpoint("rewrite", event(rewrite, controls, model=model), rewrite_result, example_call)
    button.click(picks_ready, None, list(picks), **QUIET)  # none while the rewrites are written
    run.then(picks_ready, choices, list(picks), **QUIET)
    run.then(stopped, [readout, *labels], [readout, *labels], **QUIET)  # after Stop: where it stopped
    after_pick = [controls["text"], history, undo_button, readout, order, text_order]
    for rank, pick_button in enumerate(picks, 1):
        picked = dict(inputs=[controls["text"], choices, history, text_order], outputs=after_pick)
        pick_button.click(functools.partial(pick, rank), **picked, **QUIET)
    undo_button.click(undo, history, after_pick, **QUIET)
    # input, not change: a pick's or an undo's text is a change too, and keeps the history
    cleared = [history, undo_button, choices, *views, *labels, *picks, readout, controls["start"], controls["end"]]
    forgotten = dict(fn=new_text, inputs=None, outputs=cleared, **QUIET)
    controls["text"].input(**forgotten)
    feed_from_runs(demo, controls["text"]).change(**forgotten)
    show_run_orders(demo, order, text_order)
    follow_run_options(demo, controls)
