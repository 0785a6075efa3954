"""The Generate tab: a prompt, then generated text streamed step by step (window by window past the context)."""

from __future__ import annotations

import gradio as gr

from mdlm_hf import MDLM
from mdlm_hf.windows import MAX_CANVAS
from mdlm_space.api import public_endpoint, run_result
from mdlm_space.controls import (
    about_settings,
    control,
    default_value,
    follow_prompt,
    play_shape_controls,
    sampling_options,
)
from mdlm_space.endpoints import event
from mdlm_space.handlers import generate
from mdlm_space.render import draft_canvas
from mdlm_space.runs import after_run_column, canvas_column, redraw, replayable, run_buttons
from mdlm_space.texts import DemoText


def generate_tab(model: MDLM, demo: gr.Blocks, texts: DemoText) -> None:
    """Prompt and run button first, the canvas beside them; then length, steps and the closed sampling options,
    the replay and the final text beside them."""
    block_size, default_length = model.block_size, min(default_value("length"), model.block_size)
    # the maximum follows the prompt once the page loads; the API accepts up to MAX_CANVAS and the handler lowers
    # the length to the room the prompt leaves, saying so
    room = max(1, default_length - len(texts.prompt))
    # two rows of two columns: on a phone each row stacks, so the canvas comes right after the run buttons
    with gr.Row():
        with gr.Column(scale=1, min_width=300):
            prompt = control("prompt", block_size, texts.prompt, lines=2)
            # above the run button: beside it, in view with it and with the canvas
            beside_run = play_shape_controls(model) | dict(read_better=control("read_better", block_size))
            button, stop = run_buttons("Generate")
        canvas, readout = canvas_column("generate", draft_canvas(texts.prompt, room), "Generate")
    with gr.Row():
        with gr.Column(scale=1, min_width=300):
            length = control("length", block_size, room)
            end_at = control("end_at", block_size)
            steps = control("num_steps", block_size, min(default_value("num_steps"), default_length))
            controls = dict(prompt=prompt, length=length, num_steps=steps, end_at=end_at)
            controls |= sampling_options("generate", block_size, ("drawing", "blocks"))
            controls |= beside_run
            about_settings(controls)
        outputs, replay = after_run_column("generate", 8, canvas, readout)
    # the canvas before a run shows what will be filled, drawn once the sliders fit the change
    for fitted in follow_prompt(demo, MAX_CANVAS, block_size, prompt, length, steps):
        redraw(fitted.then, draft_canvas, [prompt, length], outputs[0], outputs[2])
    generated = event(generate, controls, model=model)  # the API takes the controls by name, in this order
    replayable(button, stop, generated, outputs + [controls["seed"]], replay, "generate")
    public_endpoint("generate", generated, run_result)  # the API's and MCP's: text and numbers
