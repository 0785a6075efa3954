"""The whole UI for one loaded model: `build_demo(model)` lays out the tabs (tabs/)."""

from __future__ import annotations

import gradio as gr

from mdlm_hf import MDLM
from mdlm_hf.objectives import check_twin
from mdlm_space.api import json_mcp_answers
from mdlm_space.controls import note_every_box
from mdlm_space.endpoints import api_examples_that_run, refuse_extra_values
from mdlm_space.rewrite_panel import rewrite_panel
from mdlm_space.tabs.compare import compare_tab
from mdlm_space.tabs.generate import generate_tab
from mdlm_space.tabs.how_it_works import how_it_works_tab
from mdlm_space.tabs.infill import infill_tab
from mdlm_space.tabs.score import score_tab
from mdlm_space.texts import demo_texts, sample_passage

# the Rewrite panel shown and hidden in the page, not by a server function: a panel a server function updates joins
# the page's list of outputs with a loading status, and gradio's page then read every control inside it again at
# each frame of every run (a third of the page's work while a long text streamed); nor by a page function's
# visibility update, which gradio's page applied only some of the times
PANEL_DISPLAY = "() => {{ const panel = document.getElementById('rewrite-panel'); if (panel) panel.style.{}; }}"
SHOW_PANEL = PANEL_DISPLAY.format("removeProperty('display')")
HIDE_PANEL = PANEL_DISPLAY.format("setProperty('display', 'none', 'important')")


def tab_over_panel(name: str, panel_shown: bool) -> gr.Tab:
    """A tab, under which the Rewrite panel is shown or not as it is selected: before the tab's own functions of its
    selection, which run one after the other (How it works' first plot kept the panel there for seconds)."""
    tab = gr.Tab(name)
    tab.select(None, None, None, js=SHOW_PANEL if panel_shown else HIDE_PANEL, queue=False, api_name=False)
    return tab


def build_demo(
    model: MDLM, known_words: set[str] | None = None, metadata: dict | None = None, twin: MDLM | None = None
) -> gr.Blocks:
    """The whole UI for one loaded model (`metadata`: its demo.json, see `demo_texts`; `twin`: its autoregressive
    twin, a third side of the Compare tab): the layout of its tabs."""
    check_twin(model, twin)
    texts = demo_texts(model, metadata)
    heading = f"{texts.subject[:1].upper()}{texts.subject[1:]} from masks"
    with gr.Blocks(title=f"mdlm_hf: {heading}") as demo:
        gr.Markdown(
            f"# {texts.emoji + ' ' if texts.emoji else ''}{heading}\n"
            # short: on a phone the prompt, the run buttons and the canvas share the first screen with it
            f"A {model.num_parameters() / 1e6:.1f}M-parameter character-level **masked diffusion language model**: "
            "it reveals a canvas of masks a few characters a step, in any order."
        )
        # wrap, not gradio's "..." menu: on a phone every tab stays one tap away
        with gr.Tabs(overflow_behavior="wrap"):
            with tab_over_panel("Generate", True):
                generate_tab(model, demo, texts)
            with tab_over_panel("Infill", True):
                infill_tab(model, demo, texts)
            with tab_over_panel("Compare", True):
                compare_tab(model, known_words, demo, texts, twin)
            with tab_over_panel("Score", False):
                score_tab(model, texts)
            with tab_over_panel("How it works", False) as how_it_works:
                how_it_works_tab(model, demo, how_it_works, texts)
        # below the tabs whose finished text it takes (Generate's, Infill's, Compare's), hidden under the others
        with gr.Column(elem_id="rewrite-panel"):
            rewrite_panel(model, demo, sample_passage(texts, model.block_size))
        note_every_box(demo)  # the boxes no tab gave bounds that follow another control
    refuse_extra_values(demo)
    api_examples_that_run(demo)
    json_mcp_answers()
    return demo
