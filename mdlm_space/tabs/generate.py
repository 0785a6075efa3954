"""The Generate tab: a prompt, then generated text streamed step by step (window by window past the context)."""

from __future__ import annotations

import gradio as gr

from mdlm_hf import MDLM, SamplerOptions
from mdlm_hf.pipeline import END_AT
from mdlm_hf.windows import MAX_CANVAS
from mdlm_space.controls import (
    follow_prompt,
    option_control,
    output_column,
    redraw,
    replayable,
    run_buttons,
    sampling_options,
)
from mdlm_space.endpoints import END_AT_DEFAULT, GENERATE_API, event
from mdlm_space.handlers import generate
from mdlm_space.render import draft_canvas
from mdlm_space.texts import END_AT_WORDS, DemoText


def generate_tab(model: MDLM, demo: gr.Blocks, texts: DemoText) -> None:
    """Prompt and run button first, then length, steps and the closed sampling options; the canvas beside them."""
    block_size, default_length = model.block_size, min(256, model.block_size)
    # the maximum follows the prompt once the page loads; the API accepts up to MAX_CANVAS and the handler lowers
    # the length to the room the prompt leaves, saying so
    room = max(1, default_length - len(texts.prompt))
    with gr.Row():
        with gr.Column(scale=1, min_width=300):
            prompt = gr.Textbox(label="Prompt (kept fixed at the start)", value=texts.prompt, lines=2)
            button, stop = run_buttons("Generate")
            length = gr.Slider(
                0,
                MAX_CANVAS,
                value=room,
                step=1,
                label="Characters to generate (at most)",
                info=f"past {block_size}, the model's context, the text is written window by window",
            )
            end_at = gr.Radio(
                list(END_AT),
                value=END_AT_DEFAULT,
                label="End at",
                info="; ".join(f"{choice}: {words}" for choice, words in END_AT_WORDS.items()),
            )
            steps = option_control("num_steps", block_size, min(SamplerOptions().num_steps, default_length))
            controls = dict(prompt=prompt, length=length, num_steps=steps, end_at=end_at)
            controls |= sampling_options("generate", block_size, ("temperature", "top_p", "min_p", "block_length"))
        outputs, replay = output_column("generate", 8, draft_canvas(texts.prompt, room), "Generate")
    follow_prompt(demo, MAX_CANVAS, block_size, prompt, length, steps)
    for trigger in (prompt.change, length.change):  # the canvas before a run shows what will be filled
        redraw(trigger, draft_canvas, [prompt, length], outputs[0])
    inputs = {name: controls[name] for name in GENERATE_API}
    generated = event(generate, inputs, model=model)
    replayable(button, stop, generated, outputs + [controls["seed"]], replay, api_name="generate")
