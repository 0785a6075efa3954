"""The How-it-works tab: the forward process on a line, the denoising accuracy by mask ratio, and the reverse
process in words."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import gradio as gr
import torch

from mdlm_hf import MDLM, SamplerOptions
from mdlm_hf.diffusion import MASK_RATIOS, accuracy_by_mask_ratio
from mdlm_hf.pipeline import default_options
from mdlm_hf.plots import accuracy_figure
from mdlm_hf.sampling.options import OPTION_SPECS
from mdlm_space.api import forward_guessed, forward_result, page_event, public_endpoint
from mdlm_space.checks import as_float
from mdlm_space.controls import box_bounds, control, remembered, taken
from mdlm_space.endpoints import event
from mdlm_space.handlers import forward_process
from mdlm_space.render import placeholder
from mdlm_space.texts import SHAKESPEARE, DemoText, sample_label, sample_line
from mdlm_space.worker import on_model_thread

DEFAULT = SamplerOptions()  # the rule the text describes


def sample_accuracy(model: MDLM, text: str) -> list[tuple[float, float]]:
    """Accuracy by mask ratio of the model on its sample text (a few seconds on a CPU), one mask ratio at a time on
    the model thread, so that other visitors' sampling steps go in between."""
    tokens = torch.tensor(model.tokenizer.encode(text))
    return [
        on_model_thread(accuracy_by_mask_ratio, model, tokens, (ratio,), num_windows=16)[0] for ratio in MASK_RATIOS
    ]


def marked_accuracy_figure(results: list[tuple[float, float]], t: float, sample_name: str = SHAKESPEARE.sample_name):
    """The accuracy plot on the sample text `sample_name`, marked at the mask ratio t that the tab shows."""
    figure = accuracy_figure(results, f"Denoising accuracy on {sample_name}")
    axes = figure.axes[0]
    axes.axvline(t, color="#c2410c", linestyle="--", linewidth=1.5, label=f"t = {t:.2f}, as above")
    axes.legend(loc="upper right", fontsize=9)
    return figure


ACCURACY_LOCK = threading.Lock()


def accuracy_results(model: MDLM, text: str) -> Future:
    """The accuracies by mask ratio of `model` on `text`, measured once per model in a thread of their own (app.main
    starts them at start-up, so a first visit to the tab finds them measured)."""
    with ACCURACY_LOCK:
        measured = model.__dict__.setdefault("_app_accuracy", {})
        if text not in measured:
            future: Future = Future()
            measured[text] = future

            def measure() -> None:
                try:
                    future.set_result(sample_accuracy(model, text))
                except BaseException as error:  # noqa: BLE001 (raised to whoever draws the plot)
                    future.set_exception(error)

            threading.Thread(target=measure, name="mdlm-accuracy", daemon=True).start()
        return measured[text]


def accuracy_plot_once(model: MDLM, texts: DemoText = SHAKESPEARE) -> Callable[[float], Any]:
    """A function of t that draws the accuracies on the sample text (`accuracy_results`), marked at t."""
    lock = threading.Lock()

    def draw(t: float) -> Any:
        try:  # no change for a t that is not one: the forward view, on the same slider, says what is wrong, once
            t = as_float(t, "mask ratio", 0.0, 1.0)
        except gr.Error:
            return gr.skip()
        results = accuracy_results(model, texts.sample).result()
        with lock:  # pyplot, which draws the figure, is not thread-safe
            return marked_accuracy_figure(results, t, texts.sample_name)

    return draw


def when_taken(draw: Callable, mask_ratio: gr.Slider, seed: gr.Number) -> Callable:
    """`draw(line, t, seed)`, or no change for a t or a seed that its box does not take as typed."""

    def drawn(line: str | None, t: Any, seed_value: Any) -> Any:
        if not (taken(t, *box_bounds(mask_ratio, None)) and taken(seed_value, *box_bounds(seed, None))):
            return gr.skip(), gr.skip()
        return draw(line, t, seed_value)

    return drawn


def forward_process_views(model: MDLM, demo: gr.Blocks, texts: DemoText) -> tuple[gr.Slider, Any]:
    """A line of the sample text, its mask ratio and seed, and the masked line with the model's guesses (also the
    API's /forward_process); returns the mask ratio's slider, which the accuracy plot follows, and its change."""
    with gr.Row():
        line = gr.Textbox(label=sample_label(texts), value=sample_line(texts, model.block_size), scale=3, min_width=240)
        mask_ratio = gr.Slider(0, 1, value=0.3, step=0.01, label="Mask ratio t", scale=2, min_width=200)
        seed = control("seed", model.block_size, scale=1, min_width=90)
    # noted here rather than by the layout's last pass: the view below skips what these boxes do not take
    remembered(mask_ratio)
    remembered(seed)
    # a line until the first masks are drawn, so the view is never an empty box
    view = gr.HTML(placeholder("Masking the line and asking the model…", rows=3), elem_id="forward-view")
    summary = gr.Markdown(elem_id="forward-summary")
    forward = event(forward_process, dict(line=line, t=mask_ratio, seed=seed), model=model)
    outputs = [view, summary]
    # change, not release: typing into the slider's number box must update the views too; a t or a seed the box
    # does not take as typed draws nothing (its note says what it did, and the value it sets draws the view): the
    # view drew t = 1 under the slider's refusal of 99999
    typed = dict(forward, fn=when_taken(forward["fn"], mask_ratio, seed), outputs=outputs, api_name=False)
    masked = mask_ratio.change(**typed, trigger_mode="always_last", show_progress="hidden")
    seed.change(**typed, trigger_mode="always_last", show_progress="hidden")
    line.submit(**forward, outputs=outputs, api_name=False)
    gr.Button("Mask and predict", size="sm").click(**forward, outputs=outputs, **page_event("forward_process"))
    forward_api = event(forward_guessed, dict(line=line, t=mask_ratio, seed=seed), model=model)
    public_endpoint("forward_process", forward_api, forward_result)
    demo.load(**forward, outputs=outputs, api_name=False)
    return mask_ratio, masked


def kept_rules(model: MDLM) -> str:
    """The rules of a play's shape that the model keeps by default, in a sentence ("" for none)."""
    defaults, said = default_options(model), []
    if defaults.real_words:
        said.append(f"*{OPTION_SPECS['real_words'].label}* keeps each word to the training text's words")
    if defaults.keep_cast:
        said.append(f"*{OPTION_SPECS['keep_cast'].label}* each speaker to a single play's cast")
    if not said:
        return ""
    return (
        f"Ticked by default, {' and '.join(said)}: a character the model draws that keeps them stands, else one "
        "is drawn among those that do, at the model's own odds. "
    )


def how_it_works_tab(model: MDLM, demo: gr.Blocks, tab: gr.Tab, texts: DemoText) -> None:
    """The forward process on a line of the sample text, the accuracy plot marked at its t, and how the reverse
    process reveals."""
    gr.Markdown(
        "**Forward process.** Each character is replaced by a mask independently with probability t. "
        "The model sees the masked line (x_t) and predicts every masked character at once; under each wrong "
        "guess is the true character. Training teaches it to do this for every t; generation runs it in reverse, "
        "from t = 1 (all masks) to t = 0."
    )
    mask_ratio, masked = forward_process_views(model, demo, texts)
    # measured once, at start-up (app.main) or on the tab's first visit, then kept for every visitor; the Plot's
    # own label would sit over the figure's title on a phone: the figure's title says it all
    plot = gr.Plot(show_label=False, elem_id="accuracy-plot")
    # raw: the slider's own check of t would raise the forward view's error a second time in the same toast
    draw = dict(fn=accuracy_plot_once(model, texts), inputs=mask_ratio, outputs=plot, preprocess=False, api_name=False)
    tab.select(**draw)
    # after the forward view, not beside it on the slider's change: gradio's page calls a deferred "always_last"
    # function by calling every function of its event again, and two of them deferred each other without end
    masked.then(**draw, trigger_mode="always_last", show_progress="hidden")
    gr.Markdown(
        "**Reverse process.** Generation starts from all masks; prompting and infilling are the same operation "
        "with some characters given, and kept. Each step predicts every masked "
        "character, draws a candidate for each (temperature, min-p), and reveals a few of them: by default "
        "the next character of each of a few stretches of the canvas, left to right inside each (*word streams "
        f"order*: {DEFAULT.num_steps} passes over {model.block_size} characters write "
        f"{-(-model.block_size // (DEFAULT.num_steps - 1))} stretches side by side, each beginning a word: the "
        "space or line break before it is drawn first; a blank "
        f"between given text, up to {2 * DEFAULT.num_steps} characters, is written from both ends). The order "
        "matters for a play's shape: a name is spelt right when each letter is drawn knowing the one before, "
        "as the model writes left to right, while orders that reveal the surest characters first fix line "
        "breaks and colons early and leave a name's letters for the last, crowded steps, where neighbours are "
        "drawn together and come out garbled (OOPEY, BONVOLIO). A stretch begins a word because its first "
        "character is drawn with little known around it: as the middle of a word, eight of them told the model "
        "that one long speech fills the canvas, and speakers changed too rarely. "
        f"*Min-p* {DEFAULT.min_p:g} cuts the far tail where misspelt names come from, and temperature "
        f"{DEFAULT.temperature:g} is the heat blind readers preferred; a character after a capital letter is "
        f"drawn cooler (temperature x {DEFAULT.capital_temperature_factor:g}), so a name, once begun, is spelt "
        f"rather than improvised. {kept_rules(model)}The other rules stay here to try: "
        "*entropy order* reveals the positions the model is surest of first, kept apart (*spacing*); the "
        "*order temperature* draws which positions to reveal instead of following the order strictly; the "
        "*prior weight* lifts rare characters the context makes likely; *remasking* takes back the least "
        "confident earlier characters (shown as red masks) so they are redrawn with more context. The "
        "defaults come from the structure suite and blind readings (docs/benchmarks.md, docs/readings.md)."
    )
