"""The Score tab: a text's exact bits per character under the model, each character tinted by its surprise."""

from __future__ import annotations

import gradio as gr

from mdlm_hf import MDLM
from mdlm_space.api import page_event, public_endpoint, score_result, scores
from mdlm_space.controls import QUIET
from mdlm_space.endpoints import event
from mdlm_space.handlers import SCORE_MAX_CHARS, score
from mdlm_space.render import placeholder
from mdlm_space.runs import last_run_marks, run_buttons, stoppable
from mdlm_space.texts import DemoText, sample_passage


def score_tab(model: MDLM, texts: DemoText) -> None:
    """Paste text the model writes: its bits per character, and each character tinted by the model's surprise."""
    gr.Markdown(
        "How likely does the model find a text? It reveals the text one character at a time, left to right, and "
        "adds up -log2 p of each true character given those before it: the exact likelihood (of the weights Generate "
        f"runs on), in bits per character (lower: less surprised). Past {model.block_size} characters, the model's "
        f"context, it reads the text window by window, each character with at least {model.block_size // 2} before "
        f"it; at most {SCORE_MAX_CHARS:,} characters."
    )
    with gr.Row():
        with gr.Column(scale=1, min_width=300):
            text = gr.Textbox(label="Text to score", value=sample_passage(texts, model.block_size), lines=6)
            button, stop = run_buttons("Score")
        with gr.Column(scale=2):
            # the line above the tinted text: below it, on a phone it was out of view while it scored and when done;
            # high enough for the result, so that the text does not move down when it comes
            summary = gr.Markdown(elem_id="score-summary", min_height=72)
            waiting = placeholder("Press Score: each character is tinted by the model's surprise.")
            view = gr.HTML(waiting, elem_id="score-view")

    # an edit of the text marks the last score's line and tinted text as the last run's
    marks = dict(fn=lambda *shown: last_run_marks(shown, (waiting,)), inputs=[summary, view], outputs=[summary, view])
    text.change(**marks, **QUIET, trigger_mode="always_last")
    scored = event(score, dict(text=text), model=model)  # streamed: each pass on the model thread, others between
    stoppable(button, stop, **scored, outputs=[view, summary], **page_event("score"), readout=summary)
    public_endpoint("score", event(scores, dict(text=text), model=model), score_result(model))
