"""The Infill tab: a template whose blanks are filled, streamed step by step."""

from __future__ import annotations

import functools

import gradio as gr

from mdlm_hf import MDLM
from mdlm_space.api import public_endpoint, run_result
from mdlm_space.controls import (
    QUIET,
    about_settings,
    control,
    fit_steps_to_length,
    play_shape_controls,
    remembered,
    sampling_options,
)
from mdlm_space.endpoints import event
from mdlm_space.handlers import infill
from mdlm_space.render import draft_template
from mdlm_space.runs import after_run_column, canvas_column, redraw, replayable, run_buttons
from mdlm_space.texts import DemoText, choose_blank

# where Infill's controls start from other values than the library's: a template has few blanks, and 16 steps are
# too few for remasking; its blanks are written a character at a time (read_better), which costs a template's few
# blanks no more passes than the default and keeps every word of the examples to the word list (left to right each
# word ends where the given text after it begins; written from both ends, 14 words of 60 runs fell outside it)
CHANGES = {"num_steps": dict(default=16), "remask_ratio": dict(default=0.0), "read_better": dict(default=True)}


def infill_tab(model: MDLM, demo: gr.Blocks, texts: DemoText) -> None:
    """A template and the run button first, the canvas beside them; then its examples, steps and the closed
    sampling options, the replay and the final text beside them. The blank is "_", or a character the model does
    not write when it writes "_"."""
    block_size, blank = model.block_size, choose_blank(model.tokenizer.vocab)
    examples = [example.replace("_", blank) for example in texts.examples]
    first = examples[0] if examples else ""
    # two rows of two columns, as Generate's: on a phone the canvas comes right after the run buttons
    with gr.Row():
        with gr.Column(scale=1, min_width=300):
            info = None if blank == "_" else f"the model writes _, so the blank is {blank}"
            label = f"Template: every {blank} is a character to fill"
            template = control("template", block_size, first, label=label, lines=3, info=info)
            beside_run = play_shape_controls(model)  # above the button, as Generate's
            beside_run["read_better"] = control("read_better", block_size, changes=CHANGES)
            button, stop = run_buttons("Fill the blanks")
        canvas, readout = canvas_column("infill", draft_template(first, blank), "Fill the blanks")
    with gr.Row():
        with gr.Column(scale=1, min_width=300):
            if examples:
                gr.Examples(examples, inputs=[template])
            steps = control("num_steps", block_size, changes=CHANGES)
            controls = dict(template=template, num_steps=steps)
            # no semi-autoregressive blocks: they split a free text into stretches left to right, while a template's
            # blanks sit where the template puts them
            controls |= sampling_options("infill", block_size, ("drawing",), CHANGES)
            controls |= beside_run
            about_settings(controls)
        outputs, replay = after_run_column("infill", 6, canvas, readout)

    def fit_steps(text: str | None, wanted: float | None) -> dict:
        return fit_steps_to_length(block_size, (text or "").count(blank), wanted)

    fit = dict(fn=fit_steps, inputs=[template, remembered(steps, fit_steps, (template,))], outputs=steps, **QUIET)
    fitted = template.change(**fit)
    demo.load(**fit)  # steps fit the first template too
    redraw(fitted.then, functools.partial(draft_template, blank=blank), [template], outputs[0], outputs[2])
    filled = event(infill, controls, model=model, blank=blank)
    replayable(button, stop, filled, outputs + [controls["seed"]], replay, "infill")
    public_endpoint("infill", filled, run_result)
