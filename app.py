"""mdlm_hf demo: watch Shakespeare emerge from masks.

    python app.py                         # the checkpoint shipped in pretrained/, offline
    python app.py --model user/repo-id    # another local directory or Hub repo (or set MDLM_MODEL)

The UI is built by `build_demo(model)`; every frame it streams is a state yielded by the package's
one sampler generator as it is computed.
"""

from __future__ import annotations

import argparse
import html
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import gradio as gr
import torch

from mdlm_hf import MASK_GLYPH, MDLM, ORDERS, SamplerState, mask_tokens, sample
from mdlm_hf.diffusion import accuracy_by_mask_ratio
from mdlm_hf.metrics import load_word_list, valid_word_rate
from mdlm_hf.plots import accuracy_figure
from mdlm_hf.sampler import DEFAULT_SAMPLING, REVEAL_RULE_OPTIONS, SCORED_ORDERS, prompt_canvas, text_to_canvas

DEFAULT_MODEL = Path(__file__).resolve().parent / "pretrained" / "mdlm-shakespeare-char"
MODEL_ENV_VAR = "MDLM_MODEL"
MAX_SEED = 2**31 - 1
ORDER_TEMPERATURE_LABEL = "Order temperature (0 = strict order; higher = closer to random order)"
PRIOR_WEIGHT_LABEL = "Prior weight (rare characters the context makes likely go sooner; 0 = plain score)"
REMASK_RATIO_LABEL = "Remask ratio (earlier characters taken back per character revealed; 0 = never)"
REMASK_RATIO_INFO = "pays off from about 32 steps; with fewer steps set it to 0 (see the sampling study)"
SPACING_LABEL = "Spacing (characters revealed in one step keep this far apart; 0 = off)"
INFILL_REMASK_RATIO = 0.0  # the Infill tab's default: it starts at 16 steps, too few for remasking

INFILL_EXAMPLES = [
    "To be, or not to be, ________ is the question:",
    "ROMEO:\nBut soft, what light through ______ window breaks?\nIt is the east, and ______ is the sun.",
    "KING RICHARD III:\nNow is the winter of our __________\nMade glorious summer by this sun of York;",
    "First Citizen:\nBefore we proceed any further, ____ me speak.\n\nAll:\nSpeak, ______.",
]
# Shakespeare that is not in TinyShakespeare (Sonnet 18), for the accuracy plot and the forward process
SONNET_18 = """Shall I compare thee to a summer's day?
Thou art more lovely and more temperate:
Rough winds do shake the darling buds of May,
And summer's lease hath all too short a date;
Sometime too hot the eye of heaven shines,
And often is his gold complexion dimm'd;
And every fair from fair sometime declines,
By chance or nature's changing course untrimm'd;
But thy eternal summer shall not fade,
Nor lose possession of that fair thou ow'st;
Nor shall death brag thou wander'st in his shade,
When in eternal lines to time thou grow'st:
So long as men can breathe or eyes can see,
So long lives this, and this gives life to thee.
"""

CANVAS_STYLE = (
    "font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; white-space: pre-wrap; "
    "line-height: 1.6; font-size: 15px; padding: 10px; border-radius: 8px; background: #fbfaf7; color: #1f2733; "
    "min-height: 4em; word-break: break-all;"
)
LEGEND = (
    "<div style='font-size: 12px; color: #5c6675; margin-top: 4px;'>"
    f"<span style='color:#b8b2a7'>{MASK_GLYPH}</span> masked &nbsp; "
    "<span style='background:#ffd54f'>x</span> revealed this step &nbsp; "
    "<span style='background:hsl(0,75%,86%)'>x</span>…<span style='background:hsl(120,55%,84%)'>x</span> "
    "confidence when revealed (low … high) &nbsp; <b>x</b> given &nbsp; "
    f"<span style='color:#d9534f'>{MASK_GLYPH}</span> taken back this step (remasking)</div>"
)


def load_model(source: str | os.PathLike) -> tuple[MDLM, set[str] | None]:
    """Loads a model and its training word list (None when the model has none) from a directory or repo id."""
    model = MDLM.from_pretrained(source).eval()
    words_path: Path | None = Path(source).expanduser() / "words.txt"
    if not Path(source).expanduser().is_dir():
        try:
            from huggingface_hub import hf_hub_download

            words_path = Path(hf_hub_download(str(source), "words.txt"))
        except Exception:  # the word list is optional: the valid-word metric then shows n/a
            words_path = None
    known_words = load_word_list(words_path) if words_path is not None and words_path.is_file() else None
    return model, known_words


def render_canvas(model: MDLM, state: SamplerState, row: int = 0) -> str:
    """The canvas as HTML: mask glyphs, this step's reveals highlighted, earlier ones tinted by confidence."""
    tokens, revealed, remasked, confidence, given = (
        x[row].tolist() for x in (state.tokens, state.revealed, state.remasked, state.confidence, state.is_given)
    )
    cells = []
    for token, is_new, is_taken_back, conf, is_given in zip(tokens, revealed, remasked, confidence, given, strict=True):
        if token == model.mask_id:
            colour = "#d9534f" if is_taken_back else "#b8b2a7"
            cells.append(f"<span style='color:{colour}'>{MASK_GLYPH}</span>")
            continue
        char = html.escape(model.tokenizer.vocab[token])
        if is_given:
            cells.append(f"<b>{char}</b>")
        elif is_new:
            cells.append(f"<span style='background:#ffd54f' title='p={conf:.2f}'>{char}</span>")
        else:
            cells.append(f"<span style='background:hsl({120 * conf:.0f},65%,85%)' title='p={conf:.2f}'>{char}</span>")
    return f"<div class='mdlm-canvas' style='{CANVAS_STYLE}'>{''.join(cells)}</div>"


def as_int(value: object, name: str, low: int, high: int) -> int:
    """A UI number as an int within [low, high], or a gr.Error naming the problem."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise gr.Error(f"{name} must be a number, got {value!r}") from None
    if number != number or number != int(number) or not low <= number <= high:
        raise gr.Error(f"{name} must be a whole number between {low} and {high}, got {value!r}")
    return int(number)


def as_float(value: object, name: str, low: float, high: float) -> float:
    """A UI number as a float within [low, high], or a gr.Error naming the problem."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise gr.Error(f"{name} must be a number, got {value!r}") from None
    if not low <= number <= high:  # also false for NaN
        raise gr.Error(f"{name} must be between {low} and {high}, got {value!r}")
    return number


def readout(state: SamplerState, seconds: float, num_generated: int) -> str:
    """Steps, forward passes, seconds and characters per second of a (possibly unfinished) run."""
    speed = f"{num_generated / seconds:,.0f} chars/s" if state.done and seconds > 0 else "…"
    return (
        f"step {state.step}/{state.num_steps} · {state.num_forward_passes} forward passes · {seconds:.2f} s · {speed}"
    )


def word_share(text: str, known_words: set[str] | None) -> str:
    """The valid-word rate as text, or n/a without a word list or words."""
    if known_words is None:
        return "n/a (no word list)"
    rate = valid_word_rate(text, known_words)
    return "n/a (no words)" if rate != rate else f"{rate:.0%}"


def cap_steps(num_masked: float, num_steps: float) -> dict:
    """Steps slider update: at most one step per masked position (and at least one step)."""
    maximum = max(1, int(num_masked or 1))
    return gr.update(maximum=maximum, value=min(int(num_steps or 1), maximum))


def sonnet_accuracy_figure(model: MDLM):
    """Accuracy vs mask ratio of the loaded model on Sonnet 18, which it never saw in training."""
    tokens = torch.tensor(model.tokenizer.encode(SONNET_18))
    with torch.inference_mode():
        results = accuracy_by_mask_ratio(model, tokens, num_windows=16)
    return accuracy_figure(results, "Denoising accuracy on Sonnet 18 (unseen in training)")


def build_demo(model: MDLM, known_words: set[str] | None = None) -> gr.Blocks:
    """The whole UI for one loaded model."""
    tokenizer, block_size = model.tokenizer, model.block_size
    default_length = min(256, block_size)
    default_steps = min(DEFAULT_SAMPLING["num_steps"], default_length)

    def start(
        canvas: torch.Tensor,
        num_steps,
        order,
        temperature,
        top_p,
        seed,
        block_length=0,
        order_temperature=0.0,
        prior_weight=0.0,
        remask_ratio=0.0,
        spacing=0,
    ) -> Iterator[SamplerState]:
        """Validates the UI's options and starts the sampler; every problem becomes a gr.Error."""
        try:  # the sampler checks the order and top-p range itself
            return sample(
                model,
                canvas,
                num_steps=as_int(num_steps, "steps", 1, block_size),
                order=order,
                temperature=as_float(temperature, "temperature", 0.0, 5.0),
                top_p=None if top_p == 1 else as_float(top_p, "top-p", 0.0, 1.0),
                seed=as_int(seed, "seed", 0, MAX_SEED),
                block_length=as_int(block_length, "block length", 0, block_size) or None,
                order_temperature=as_float(order_temperature, "order temperature", 0.0, 100.0),
                prior_weight=as_float(prior_weight, "prior weight", 0.0, 10.0),
                remask_ratio=as_float(remask_ratio, "remask ratio", 0.0, 0.95),
                spacing=as_int(spacing, "spacing", 0, block_size),
            )
        except ValueError as error:
            raise gr.Error(str(error)) from None

    def make_canvas(build, *args):
        """Calls a canvas builder (or the tokenizer); its ValueError becomes a gr.Error."""
        try:
            return build(*args)
        except ValueError as error:
            raise gr.Error(str(error)) from None

    def stream(states: Iterator[SamplerState], num_fixed: int):
        """(canvas HTML, final text, readout) for every state, as the sampler computes it."""
        start_time = time.perf_counter()
        for state in states:
            seconds = time.perf_counter() - start_time
            text = tokenizer.decode(state.tokens[0]) if state.done else ""
            yield render_canvas(model, state) + LEGEND, text, readout(state, seconds, state.tokens.size(1) - num_fixed)

    def generate(
        prompt,
        length,
        num_steps,
        temperature,
        top_p,
        order,
        seed,
        block_length,
        order_temperature=DEFAULT_SAMPLING["order_temperature"],
        prior_weight=DEFAULT_SAMPLING["prior_weight"],
        remask_ratio=DEFAULT_SAMPLING["remask_ratio"],
        spacing=DEFAULT_SAMPLING["spacing"],
    ):
        prompt = prompt or ""
        length = as_int(length, "length", 1, block_size)
        canvas = make_canvas(prompt_canvas, tokenizer, prompt, length, block_size)
        reveal_rule = (order_temperature, prior_weight, remask_ratio, spacing)
        states = start(canvas, num_steps, order, temperature, top_p, seed, block_length, *reveal_rule)
        yield from stream(states, len(prompt))

    def infill(
        template,
        num_steps,
        temperature,
        top_p,
        order,
        seed,
        order_temperature=DEFAULT_SAMPLING["order_temperature"],
        prior_weight=DEFAULT_SAMPLING["prior_weight"],
        remask_ratio=INFILL_REMASK_RATIO,
        spacing=DEFAULT_SAMPLING["spacing"],
    ):
        template = template or ""
        if len(template) > block_size:
            raise gr.Error(f"template has {len(template)} characters; this model takes at most {block_size}")
        canvas = make_canvas(text_to_canvas, tokenizer, template, "_")
        num_fixed = int((canvas != model.mask_id).sum())
        reveal_rule = (order_temperature, prior_weight, remask_ratio, spacing)
        yield from stream(start(canvas, num_steps, order, temperature, top_p, seed, 0, *reveal_rule), num_fixed)

    def reveal_controls(remask_ratio_value: float = DEFAULT_SAMPLING["remask_ratio"]) -> tuple:
        """Reveal order, order temperature and the rest of the reveal rule, as Generate and Infill show them."""
        order = gr.Dropdown(list(ORDERS), value=DEFAULT_SAMPLING["order"], label="Reveal order")
        order_temperature = gr.Slider(
            0, 2, value=DEFAULT_SAMPLING["order_temperature"], step=0.05, label=ORDER_TEMPERATURE_LABEL
        )
        with gr.Accordion("More of the reveal rule: rare characters, remasking, spacing", open=False):
            prior_weight = gr.Slider(0, 2, value=DEFAULT_SAMPLING["prior_weight"], step=0.05, label=PRIOR_WEIGHT_LABEL)
            remask_ratio = gr.Slider(
                0,
                0.95,
                value=remask_ratio_value,
                step=0.05,
                label=REMASK_RATIO_LABEL,
                info=REMASK_RATIO_INFO,
            )
            spacing = gr.Slider(0, 8, value=DEFAULT_SAMPLING["spacing"], step=1, label=SPACING_LABEL)
        # random and left-to-right orders do not score positions, so the prior has nothing to weigh
        order.change(lambda o: gr.update(interactive=o in SCORED_ORDERS), order, prior_weight, api_name=False)
        return order, order_temperature, prior_weight, remask_ratio, spacing

    def compare(prompt, length, num_steps, temperature, seed, autoregressive):
        prompt = prompt or ""
        length = as_int(length, "length", 1, block_size)
        canvas = make_canvas(prompt_canvas, tokenizer, prompt, length, block_size)
        # the autoregressive-like extreme: one left-to-right character per forward pass
        runs = {
            "left_to_right": start(
                canvas, length if autoregressive else num_steps, "left_to_right", temperature, 1.0, seed
            ),
            "confidence": start(
                canvas,
                num_steps,
                "confidence",
                temperature,
                1.0,
                seed,
                0,
                *(DEFAULT_SAMPLING[name] for name in REVEAL_RULE_OPTIONS),
            ),
        }
        latest: dict[str, SamplerState] = {}
        busy = {name: 0.0 for name in runs}
        while runs:
            for name in list(runs):
                tick = time.perf_counter()
                state = next(runs[name], None)
                busy[name] += time.perf_counter() - tick
                if state is None:
                    del runs[name]
                else:
                    latest[name] = state
            outputs = []
            for name in ("left_to_right", "confidence"):
                state = latest[name]
                generated = tokenizer.decode(state.tokens[0, len(prompt) :])
                stats = (
                    f"{busy[name]:.2f} s · {state.num_forward_passes} forward passes · "
                    f"{length / max(1, state.num_forward_passes):.1f} chars per pass"
                )
                if state.done:
                    stats += f" · real words: {word_share(generated, known_words)}"
                outputs += [render_canvas(model, state), stats]
            yield tuple(outputs)

    def forward_process(line, t, seed):
        line = line or ""
        if not line or len(line) > block_size:
            raise gr.Error(f"enter between 1 and {block_size} characters")
        tokens = torch.tensor([make_canvas(tokenizer.encode, line)])
        t = as_float(t, "mask ratio", 0.0, 1.0)
        seed = as_int(seed, "seed", 0, MAX_SEED)
        noisy, is_masked = mask_tokens(tokens, torch.tensor([t]), model.mask_id, torch.Generator().manual_seed(seed))
        with torch.inference_mode():
            predictions = model(noisy, is_masked.float().mean(dim=1)).argmax(dim=-1)
        masked_cells, predicted_cells = [], []
        for i, char in enumerate(line):
            shown = html.escape(char)
            if is_masked[0, i]:
                guess = html.escape(tokenizer.vocab[predictions[0, i]])
                colour = "hsl(120,55%,80%)" if predictions[0, i] == tokens[0, i] else "hsl(0,75%,82%)"
                masked_cells.append(f"<span style='color:#b8b2a7'>{MASK_GLYPH}</span>")
                predicted_cells.append(f"<span style='background:{colour}' title='true: {shown}'>{guess}</span>")
            else:
                masked_cells.append(shown)
                predicted_cells.append(f"<span style='color:#8a8f98'>{shown}</span>")
        num_masked = int(is_masked.sum())
        correct = int(((predictions == tokens) & is_masked).sum())
        summary = (
            f"{num_masked} of {len(line)} characters masked; the model restores {correct} ({correct / num_masked:.0%})"
            if num_masked
            else "nothing masked at this t: raise the slider"
        )
        box = f"<div style='{CANVAS_STYLE}'>{{}}</div>"
        return box.format("".join(masked_cells)), box.format("".join(predicted_cells)), summary

    with gr.Blocks(title="mdlm_hf: Shakespeare from masks") as demo:
        gr.Markdown(
            "# 🎭 Shakespeare from masks\n"
            f"A {model.num_parameters() / 1e6:.1f}M-parameter character-level **masked diffusion language model**. "
            "It starts from a canvas of masks and reveals characters in any order over a few denoising steps; "
            "prompting and infilling are the same operation with some characters given."
        )
        with gr.Tab("Generate"):
            with gr.Row():
                with gr.Column(scale=1):
                    prompt = gr.Textbox(label="Prompt (kept fixed at the start)", value="ROMEO:\n", lines=2)
                    length = gr.Slider(1, block_size, value=default_length - 7, step=1, label="Characters to generate")
                    steps = gr.Slider(1, block_size, value=default_steps, step=1, label="Denoising steps")
                    order, order_temperature, prior_weight, remask_ratio, spacing = reveal_controls()
                    temperature = gr.Slider(
                        0, 2, value=DEFAULT_SAMPLING["temperature"], step=0.05, label="Temperature (0 = greedy)"
                    )
                    top_p = gr.Slider(0.05, 1, value=1.0, step=0.05, label="Top-p")
                    block_length = gr.Slider(
                        0, block_size, value=0, step=1, label="Block length (0 = off; >0 = semi-autoregressive blocks)"
                    )
                    seed = gr.Number(value=0, precision=0, label="Seed")
                    generate_button = gr.Button("Generate", variant="primary")
                with gr.Column(scale=2):
                    canvas = gr.HTML(label="Canvas", elem_id="generate-canvas")
                    stats = gr.Markdown()
                    final_text = gr.Textbox(
                        label="Final text", lines=8, buttons=["copy"], elem_id="generate-final-text"
                    )
            # steps never exceed the masked positions
            length.change(cap_steps, [length, steps], steps, api_name=False)
            generate_button.click(
                generate,
                [prompt, length, steps, temperature, top_p, order, seed, block_length]
                + [order_temperature, prior_weight, remask_ratio, spacing],
                [canvas, final_text, stats],
                api_name="generate",
            )
        with gr.Tab("Infill"):
            with gr.Row():
                with gr.Column(scale=1):
                    template = gr.Textbox(
                        label="Template: every _ is a character to fill", value=INFILL_EXAMPLES[0], lines=4
                    )
                    gr.Examples(INFILL_EXAMPLES, inputs=[template])
                    infill_steps = gr.Slider(1, block_size, value=16, step=1, label="Denoising steps")
                    infill_order, *infill_reveal_rule = reveal_controls(remask_ratio_value=INFILL_REMASK_RATIO)
                    infill_temperature = gr.Slider(
                        0, 2, value=DEFAULT_SAMPLING["temperature"], step=0.05, label="Temperature (0 = greedy)"
                    )
                    infill_top_p = gr.Slider(0.05, 1, value=1.0, step=0.05, label="Top-p")
                    infill_seed = gr.Number(value=0, precision=0, label="Seed")
                    infill_button = gr.Button("Fill the blanks", variant="primary")
                with gr.Column(scale=2):
                    infill_canvas = gr.HTML(label="Canvas", elem_id="infill-canvas")
                    infill_stats = gr.Markdown()
                    infill_text = gr.Textbox(label="Final text", lines=6, buttons=["copy"], elem_id="infill-final-text")
            template.change(
                lambda text, n: cap_steps(min(block_size, (text or "").count("_")), n),
                [template, infill_steps],
                infill_steps,
                api_name=False,
            )
            infill_button.click(
                infill,
                [
                    template,
                    infill_steps,
                    infill_temperature,
                    infill_top_p,
                    infill_order,
                    infill_seed,
                    *infill_reveal_rule,
                ],
                [infill_canvas, infill_text, infill_stats],
                api_name="infill",
            )
        with gr.Tab("Compare"):
            gr.Markdown(
                "Left-to-right vs confidence order: same model, prompt, length, seed, temperature and number "
                "of forward passes, streamed together. Tick the box to give left-to-right one character per "
                "forward pass, like an autoregressive model, and see the speed gap."
            )
            with gr.Row():
                compare_prompt = gr.Textbox(label="Prompt", value="ROMEO:\n", lines=2)
                compare_length = gr.Slider(1, block_size, value=min(128, block_size), step=1, label="Characters")
                compare_steps = gr.Slider(1, block_size, value=min(32, block_size), step=1, label="Forward passes")
                compare_temperature = gr.Slider(
                    0, 2, value=DEFAULT_SAMPLING["temperature"], step=0.05, label="Temperature"
                )
                compare_seed = gr.Number(value=0, precision=0, label="Seed")
            autoregressive = gr.Checkbox(label="Left-to-right: one character per forward pass (autoregressive-like)")
            compare_button = gr.Button("Compare", variant="primary")
            with gr.Row():
                with gr.Column():
                    gr.Markdown("### Left to right")
                    left_canvas, left_stats = gr.HTML(), gr.Markdown()
                with gr.Column():
                    gr.Markdown("### Confidence order")
                    right_canvas, right_stats = gr.HTML(), gr.Markdown()
            compare_length.change(cap_steps, [compare_length, compare_steps], compare_steps, api_name=False)
            compare_button.click(
                compare,
                [compare_prompt, compare_length, compare_steps, compare_temperature, compare_seed, autoregressive],
                [left_canvas, left_stats, right_canvas, right_stats],
                api_name="compare",
            )
        with gr.Tab("How it works"):
            gr.Markdown(
                "**Forward process.** Each character is replaced by a mask independently with probability t. "
                "The model sees the masked line and predicts every masked character at once (green: right, "
                "red: wrong; hover for the true character). Training teaches it to do this for every t; "
                "generation runs it in reverse, from t = 1 (all masks) to t = 0."
            )
            line = gr.Textbox(label="A line of Shakespeare", value=SONNET_18.splitlines()[0])
            with gr.Row():
                mask_ratio = gr.Slider(0, 1, value=0.3, step=0.01, label="Mask ratio t")
                forward_seed = gr.Number(value=0, precision=0, label="Seed")
            masked_view, predicted_view, forward_summary = gr.HTML(label="x_t"), gr.HTML(label="model"), gr.Markdown()
            inputs = [line, mask_ratio, forward_seed]
            outputs = [masked_view, predicted_view, forward_summary]
            for trigger in (mask_ratio.release, line.submit, forward_seed.submit):
                trigger(forward_process, inputs, outputs, api_name=False)
            gr.Button("Mask and predict").click(forward_process, inputs, outputs, api_name="forward_process")
            demo.load(forward_process, inputs, outputs, api_name=False)
            gr.Plot(value=sonnet_accuracy_figure(model), label="Accuracy vs mask ratio")
            gr.Markdown(
                "**Reverse process.** Generation starts from all masks. Each step predicts every masked "
                "character, draws a candidate for each (temperature), and reveals a few of them: by default "
                "those whose candidate is most probable (*confidence order*). A strict confidence order favours "
                "frequent words; the *order temperature* instead draws which positions to reveal, with "
                "probability proportional to confidence^(1/order temperature), which keeps most of the quality "
                "and brings back variety. Confidence alone still favours common characters (spaces, e, t) and "
                "writes too few capitals, punctuation marks and line breaks; the *prior weight* scores each "
                "candidate by how far the context lifted it above its frequency with nothing known, which "
                "brings speaker names and line breaks back. *Remasking* takes back the least confident earlier "
                "characters (shown as red masks) so they are redrawn with more context, and *spacing* keeps a "
                "step's reveals apart, since characters revealed together are drawn independently. The "
                "defaults come from the sampling study in the README."
            )
    return demo


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="mdlm_hf demo")
    parser.add_argument(
        "--model",
        default=os.environ.get(MODEL_ENV_VAR, str(DEFAULT_MODEL)),
        help=f"local directory or Hub repo id (default: ${MODEL_ENV_VAR} or the shipped checkpoint)",
    )
    parser.add_argument("--host", default=None, help="e.g. 0.0.0.0 to serve the network")
    parser.add_argument("--port", type=int, default=None)
    args = parser.parse_args(argv)
    try:
        model, known_words = load_model(args.model)
    except Exception as error:  # one clear line instead of a traceback, whatever went wrong
        sys.exit(f"error: could not load the model from {args.model}: {error}")
    demo = build_demo(model, known_words)
    demo.queue(default_concurrency_limit=8, max_size=64).launch(server_name=args.host, server_port=args.port)


if __name__ == "__main__":
    main()
