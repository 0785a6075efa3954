"""mdlm_hf demo: watch Shakespeare (or whatever the model was trained on) emerge from masks.

    python app.py                         # the checkpoint shipped in pretrained/, offline
    python app.py --model user/repo-id    # another local directory or Hub repo (or set MDLM_MODEL)

The title, default prompt, infill examples and sample text come from the model's demo.json (written by
training/export.py) when it has one; Shakespeare's are the defaults for a model whose vocabulary covers them.

The UI is built by `build_demo(model)`; every frame it streams is a state yielded by the package's
one sampler generator as it is computed.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import html
import importlib.util
import inspect
import itertools
import json
import math
import os
import queue
import secrets
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import gradio as gr
import torch

from mdlm_hf import MASK_GLYPH, MDLM, SamplerOptions, SamplerState, mask_tokens, sample
from mdlm_hf.diffusion import MASK_RATIOS, accuracy_by_mask_ratio, reveal_nll_steps
from mdlm_hf.metrics import load_word_list, valid_word_rate, words
from mdlm_hf.pipeline import END_AT, check_end_at, check_text, ended, prompt_canvas, text_to_canvas, unseen_prompt_note
from mdlm_hf.plots import accuracy_figure
from mdlm_hf.sampler import GREEDY_BELOW, OPTION_SPECS, REVEAL_RULE_OPTIONS, SCORED_ORDERS
from mdlm_hf.windows import MAX_CANVAS

DEFAULT_MODEL = Path(__file__).resolve().parent / "pretrained" / "mdlm-shakespeare-char"
MODEL_ENV_VAR = "MDLM_MODEL"
MAX_SEED = 2**31 - 1
DEFAULT_PROMPT = "ROMEO:\n"
INFILL_STEPS = 16  # the Infill tab's default: a template has few blanks
INFILL_REMASK_RATIO = 0.0  # ... and 16 steps are too few for remasking
# each endpoint's parameters in the order its API takes them (positional clients rely on it: new ones go last);
# the handlers take them by name. fixed_seed off (the default) draws a new seed per run; every endpoint returns
# the seed it used as its last output, so a run can be repeated with fixed_seed on
GENERATE_API = tuple(
    "prompt length num_steps temperature top_p order seed block_length "
    "order_temperature prior_weight remask_ratio spacing fixed_seed entropy_bound min_p end_at".split()
)
# where a generated text ends (mdlm_hf.pipeline.END_AT): the app ends at a line, so text never stops mid-word
END_AT_DEFAULT = "line"
END_AT_WORDS = {
    "line": "the end of a line",
    "speech": "the end of a speech",
    "length": "exactly the length (may stop mid-word)",
}
INFILL_API = tuple(
    "template num_steps temperature top_p order seed order_temperature prior_weight remask_ratio spacing "
    "fixed_seed entropy_bound min_p".split()
)
COMPARE_API = (
    "prompt",
    "length",
    "num_steps",
    "temperature",
    "seed",
    "autoregressive",
    *REVEAL_RULE_OPTIONS,
    "fixed_seed",
)

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
DEMO_FILE = "demo.json"  # beside the weights: the texts the app shows for this model (see DemoText)
# the blank of infill templates: "_", or the first of these the model's vocabulary lacks
BLANK_CHOICES = "_#*~^|@¤□"


@dataclasses.dataclass(frozen=True)
class DemoText:
    """What the app shows for one model: the subject in its title, the default prompt, infill examples (each "_" a
    blank), and a sample text (`sample_name`: what it is) for the forward process and the accuracy plot."""

    subject: str
    prompt: str = ""
    examples: tuple[str, ...] = ()
    sample: str = ""
    sample_name: str = "a sample of the model's own"
    emoji: str = ""


SHAKESPEARE = DemoText(
    "Shakespeare", DEFAULT_PROMPT, tuple(INFILL_EXAMPLES), SONNET_18, "Sonnet 18 (unseen in training)", "🎭"
)

# text that steps back (help, legends, line-break glyphs) still reads at WCAG AA's 4.5:1 on white and the canvas
SUBDUED_TEXT = "#5c6675"
LEGEND_TEXT = f"font-size: 12px; color: {SUBDUED_TEXT}; margin-top: 4px;"  # the line under a canvas or a view
# gradio's default theme, with its subdued text (help under each control, slider bounds: 1.91:1 on white) and its
# orange accents (the primary button, the selected tab: 2.8:1) darkened to 4.5:1 or more; launch() takes it
THEME = gr.themes.Default().set(
    body_text_color_subdued="*neutral_600",
    color_accent="*primary_700",
    button_primary_background_fill="*primary_700",
    button_primary_background_fill_hover="*primary_800",
    button_primary_border_color="*primary_700",
)
CANVAS_FONT = "font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;"
# breaks lines at spaces, and inside a word only when the word is wider than the whole line
WRAP_WORDS = "white-space: pre-wrap; word-break: normal; overflow-wrap: anywhere;"
CANVAS_ROWS = 10  # the canvas's fixed height in lines: new line breaks scroll inside it, not push the page down
COMPARE_ROWS = 9
COMPARE_FONT_PX = 13  # two canvases side by side, on a phone too
CANVAS_BACKGROUND = "#fbfaf7"
MASK_COLOUR, TAKEN_BACK_COLOUR, NEW_COLOUR = "#c4bcae", "#d9534f", "#ffd54f"
# each mask is its own cell: a filled box whose 1 px inset edges in the background colour keep neighbours apart
MASK_CELL = (
    f"color: transparent; border-radius: 2px; box-shadow: inset 1px 0 {CANVAS_BACKGROUND}, "
    f"inset -1px 0 {CANVAS_BACKGROUND};"
)
DRAFT_CELLS = 512  # a canvas before a run shows this many cells at most (a long one says how many more)
# a long text's live window: the positions the model reads at this step
WINDOW_FRAME = "box-shadow: 0 0 0 2px #5b8fd1; border-radius: 3px; box-decoration-break: clone;"
NEWLINE_GLYPH = "↵"  # a line break is a position too: drawn, then broken
SPACE_GLYPH = "␣"  # a predicted or true space, where an empty cell would hide it


def confidence_colour(confidence: float) -> str:
    """Background of a character revealed with probability `confidence`: one hue, lighter for less sure, so the
    scale reads the same with any colour vision (and stays apart from the amber of "revealed this step")."""
    confidence = min(max(confidence, 0.0), 1.0) if confidence == confidence else 0.0
    return f"hsl(212,80%,{94 - 26 * confidence:.0f}%)"


def canvas_style(rows: int, font_px: int = 15) -> str:
    """The canvas box: monospace, words kept whole, `rows` lines high whatever it holds (it scrolls inside)."""
    line = 1.6
    return (
        f"{CANVAS_FONT} {WRAP_WORDS} line-height: {line}; font-size: {font_px}px; padding: 10px; border-radius: 8px; "
        f"background: {CANVAS_BACKGROUND}; color: #1f2733; box-sizing: border-box; "
        f"height: calc({rows * line}em + 20px); overflow-y: auto;"
    )


def colour_scale(low: str, high: str) -> str:
    """A legend's swatch of a colour scale, from `low` to `high`."""
    return (
        "<span style='display:inline-block; width:48px; height:0.9em; vertical-align:middle; "
        f"background:linear-gradient(90deg, {low}, {high}); border: 1px solid #d8d3c8'></span>"
    )


LEGEND = (
    f"<div style='{LEGEND_TEXT} line-height: 1.8;'>"
    f"<span style='{CANVAS_FONT} background:{MASK_COLOUR}; {MASK_CELL}'>{MASK_GLYPH}</span> masked &nbsp; "
    f"<span style='background:{NEW_COLOUR}'>x</span> revealed this step &nbsp; "
    f"{colour_scale(confidence_colour(0), confidence_colour(1))} confidence when revealed (low … high) &nbsp; "
    "<b>x</b> given &nbsp; "
    f"{NEWLINE_GLYPH} line break &nbsp; "
    f"<span style='{WINDOW_FRAME}'>x</span> the window the model reads (a text longer than its context) &nbsp; "
    f"<span style='{CANVAS_FONT} background:{TAKEN_BACK_COLOUR}; {MASK_CELL}'>{MASK_GLYPH}</span> taken back this step "
    "(remasking)</div>"
)


def cell(char: str | None, kind: str = "given", confidence: float = float("nan")) -> str:
    """One position of the canvas as HTML: a mask (char None; kind "taken_back" when remasking took it back this
    step) or a character that is "given", "new" (revealed this step) or "earlier" (tinted by its confidence)."""
    if char is None:
        colour = TAKEN_BACK_COLOUR if kind == "taken_back" else MASK_COLOUR
        return f"<span class='mdlm-mask' style='background:{colour}; {MASK_CELL}'>{MASK_GLYPH}</span>"
    # a line break shows as a glyph (a position to see and count), then breaks the line
    shown, tail = (NEWLINE_GLYPH, "\n") if char == "\n" else (html.escape(char), "")
    if kind == "given":
        style = "font-weight: bold;" + (f" color: {SUBDUED_TEXT};" if tail else "")
        return f"<span class='mdlm-given' style='{style}'>{shown}</span>{tail}"
    background = NEW_COLOUR if kind == "new" else confidence_colour(confidence)
    title = f" title='p={confidence:.2f}'" if confidence == confidence else ""
    return f"<span class='mdlm-{kind}' style='background:{background}'{title}>{shown}</span>{tail}"


def canvas_box(cells: list[str], rows: int = CANVAS_ROWS, font_px: int = 15, follow: bool = False) -> str:
    """The cells in the fixed-height canvas box; `follow`: it stays scrolled to its end as the text grows (a
    column-reverse box anchors its scroll at the bottom, no script needed), where a long text's live window is."""
    if not follow:
        return f"<div class='mdlm-canvas' style='{canvas_style(rows, font_px)}'>{''.join(cells)}</div>"
    return (
        f"<div class='mdlm-canvas mdlm-follow' style='{canvas_style(rows, font_px)} display: flex; "
        f"flex-direction: column-reverse;'><div>{''.join(cells)}</div></div>"
    )


def placeholder(message: str, rows: int = CANVAS_ROWS) -> str:
    """The canvas box holding a message instead of cells, at the canvas's height."""
    return (
        f"<div class='mdlm-canvas mdlm-placeholder' style='{canvas_style(rows)} color: {SUBDUED_TEXT}; "
        f"font-family: inherit;'>{html.escape(message)}</div>"
    )


def optional_file(source: str | os.PathLike, name: str) -> Path | None:
    """A file beside the model's weights in a directory or Hub repo, or None when it has none."""
    path: Path | None = Path(source).expanduser() / name
    if not Path(source).expanduser().is_dir():
        try:
            from huggingface_hub import hf_hub_download

            path = Path(hf_hub_download(str(source), name))
        except Exception:  # optional: the app does without it
            path = None
    return path if path is not None and path.is_file() else None


def load_model(source: str | os.PathLike, device: str = "cpu") -> tuple[MDLM, set[str] | None]:
    """Loads a model onto `device` and its training word list (None when the model has none) from a directory or
    repo id."""
    model = MDLM.from_pretrained(source).to(device).eval()
    words_path = optional_file(source, "words.txt")  # without it the valid-word metric shows n/a
    return model, load_word_list(words_path) if words_path is not None else None


def load_demo_metadata(source: str | os.PathLike) -> dict | None:
    """The model's demo.json (its subject, prompt, infill examples and sample text), or None when it has none or
    it is not a JSON object."""
    path = optional_file(source, DEMO_FILE)
    try:
        metadata = json.loads(path.read_text(encoding="utf-8")) if path is not None else None
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return metadata if isinstance(metadata, dict) else None


def resolve_device(name: str) -> str:
    """The --device flag as a torch device: "auto" is cuda when a GPU is available (a ZeroGPU Space's too), else
    cpu; a device this machine lacks is a ValueError saying so."""
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ValueError(f"--device must be auto, cpu, cuda or cuda:N, got {name!r}") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device {name}: no CUDA GPU is available here; use --device cpu (or auto)")
    return name


# Every torch call of the app runs on this one thread: libgomp gives each thread that starts parallel work its own
# team of OpenMP threads, and with more of them than cores it stops spinning between parallel regions, so every small
# op then waits for its threads to wake (measured: a 256-character pass went from 10 ms to 25 ms once a second thread
# had run the model). Runs queue here step by step, which on a CPU Space's two cores is as fast as running them side
# by side; a GPU run is unaffected.
MODEL_THREAD_NAME = "mdlm-model"
MODEL_THREAD = ThreadPoolExecutor(max_workers=1, thread_name_prefix=MODEL_THREAD_NAME)


def _new_model_thread() -> None:
    # a forked child (spaces.GPU runs each call in one on a ZeroGPU Space) inherits the executor but not its thread
    global MODEL_THREAD
    MODEL_THREAD = ThreadPoolExecutor(max_workers=1, thread_name_prefix=MODEL_THREAD_NAME)


os.register_at_fork(after_in_child=_new_model_thread)


def on_model_thread(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    """`fn(*args, **kwargs)` run on MODEL_THREAD (directly when already there); its result or its exception."""
    if threading.current_thread().name.startswith(MODEL_THREAD_NAME):
        return fn(*args, **kwargs)
    return MODEL_THREAD.submit(fn, *args, **kwargs).result()


def iterate_on_model_thread(items: Iterator) -> Iterator:
    """The items of a generator, each computed on MODEL_THREAD, one step ahead of the caller: a helper thread asks
    for the next item while the caller still sends the last, so the model never waits for the network, and asks
    for no more once the caller stops listening (Stop, a closed tab), closing the generator."""
    if threading.current_thread().name.startswith(MODEL_THREAD_NAME):
        yield from items  # already there: a helper would wait for this very thread
        return
    ready: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=1)  # the one item computed ahead
    stop = threading.Event()

    def hand_over(entry: tuple[str, Any]) -> bool:
        while not stop.is_set():
            with contextlib.suppress(queue.Full):
                ready.put(entry, timeout=0.05)
                return True
        return False

    def produce() -> None:
        try:
            while not stop.is_set():
                item = on_model_thread(next, items, ready)  # `ready` doubles as the end marker
                if not hand_over(("end", None) if item is ready else ("item", item)) or item is ready:
                    return
        except BaseException as error:  # noqa: BLE001 (re-raised in the caller's thread)
            hand_over(("error", error))
        finally:
            on_model_thread(items.close)

    threading.Thread(target=produce, name="mdlm-frames", daemon=True).start()
    try:
        while True:
            kind, value = ready.get()
            if kind == "end":
                return
            if kind == "error":
                raise value
            yield value
    finally:
        stop.set()


def gpu_work(fn: Callable) -> Callable:
    """`fn` decorated with `spaces.GPU` when the `spaces` package is importable (on a ZeroGPU Space it then holds
    a GPU while it runs), else `fn` itself."""
    try:
        import spaces
    except ImportError:
        return fn
    return spaces.GPU(fn)


def mcp_available() -> bool:
    """Whether gradio's MCP extra is installed (its dependency, the `mcp` module), so the app can serve its
    endpoints as tools for agents."""
    return importlib.util.find_spec("mcp") is not None


def choose_blank(vocab: str) -> str:
    """The infill blank: "_", or, when the model writes "_", the first of BLANK_CHOICES it does not write (else the
    first character from U+2580 on that it does not write)."""
    return next(char for char in BLANK_CHOICES + "".join(map(chr, range(0x2580, 0x2600))) if char not in vocab)


def covers(model: MDLM, text: str, blank: str = "") -> bool:
    """Whether the model writes every character of `text` (blanks aside) and reads it all at a time."""
    return len(text) <= model.block_size and not model.tokenizer.unknown_chars(
        text.replace(blank, "") if blank else text
    )


def model_sample(model: MDLM) -> str:
    """A short text of the model's own (seed 0), for a model that comes with no sample text it covers."""
    return model.generate(length=min(128, model.block_size), num_steps=16, seed=0)


def demo_texts(model: MDLM, metadata: dict | None = None) -> DemoText:
    """The texts the app shows for `model`: its metadata's (demo.json) where they are text it writes, over
    Shakespeare's when the model writes those (the shipped model) or else none; a sample text it covers always,
    its own sample if need be. Examples keep "_" as their blank."""
    metadata = metadata or {}
    every_text = "".join((*SHAKESPEARE.examples, SHAKESPEARE.prompt, SONNET_18)).replace("_", "")
    shakespeare = not model.tokenizer.unknown_chars(every_text)
    base = SHAKESPEARE if shakespeare and metadata.get("subject", "Shakespeare") == "Shakespeare" else None
    if base is None:  # Sonnet 18 as the sample where the model writes it
        base = DemoText(str(metadata.get("subject") or "text"), sample=SONNET_18, sample_name="Sonnet 18")
    fields = {name: metadata[name] for name in ("subject", "prompt", "sample") if isinstance(metadata.get(name), str)}
    if "sample" in fields:
        named = metadata.get("sample_name")
        subject = fields.get("subject", base.subject)
        fields["sample_name"] = named if isinstance(named, str) else f"a passage of {subject}"
    if isinstance(metadata.get("examples"), list):
        fields["examples"] = tuple(e for e in metadata["examples"] if isinstance(e, str))
    texts = dataclasses.replace(base, **fields)
    texts = dataclasses.replace(
        texts,
        prompt=texts.prompt if covers(model, texts.prompt) and len(texts.prompt) < model.block_size else "",
        examples=tuple(e for e in texts.examples if "_" in e and covers(model, e, "_")),
    )
    if not texts.sample.strip() or model.tokenizer.unknown_chars(texts.sample):
        texts = dataclasses.replace(texts, sample=model_sample(model), sample_name=DemoText("").sample_name)
    return texts


def with_blank(template: str, blank: str) -> str:
    """An example template (each "_" a blank) written with the app's blank character."""
    return template.replace("_", blank)


def sample_label(texts: DemoText) -> str:
    """The How-it-works line's label: what the sample text is."""
    if texts.sample == SONNET_18:
        return "A line of Shakespeare"
    return "A line the model wrote" if texts.sample_name == DemoText("").sample_name else f"A line of {texts.subject}"


def sample_passage(texts: DemoText, block_size: int) -> str:
    """The sample text's first whole lines that fit in what the model reads at a time (at least its first line,
    cut to fit)."""
    lines = [line for line in texts.sample.splitlines() if line.strip()]
    passage = lines[0][:block_size] if lines else ""
    for line in lines[1:]:
        if len(passage) + 1 + len(line) > block_size:
            break
        passage += "\n" + line
    return passage


# a line shorter than these shows little of the forward process: the first line of 20 characters, else of 5, else
# the longest one
SAMPLE_LINE_CHARS = (20, 5)


def sample_line(texts: DemoText, block_size: int) -> str:
    """A line of the sample text long enough to mask (SAMPLE_LINE_CHARS), cut to what the model reads at a time."""
    lines = [line for line in texts.sample.splitlines() if line.strip()] or [texts.sample]
    long_enough = (line for chars in SAMPLE_LINE_CHARS for line in lines if len(line) >= chars)
    return next(long_enough, max(lines, key=len))[:block_size]


def canvas_cells(model: MDLM, state: SamplerState, row: int, span: slice) -> list[str]:
    """The cells of positions `span` of a row: this step's reveals highlighted (none in the final frame: the run
    is over), earlier ones tinted by confidence."""
    tokens, revealed, remasked, confidence, given = (
        x[row, span].tolist() for x in (state.tokens, state.revealed, state.remasked, state.confidence, state.is_given)
    )
    cells = []
    for token, is_new, is_taken_back, conf, is_given in zip(tokens, revealed, remasked, confidence, given, strict=True):
        if token == model.mask_id:
            cells.append(cell(None, "taken_back" if is_taken_back else "mask"))
        else:
            kind = "given" if is_given else "new" if is_new and not state.done else "earlier"
            cells.append(cell(model.tokenizer.vocab[token], kind, conf))
    return cells


def finished_text(model: MDLM, state: SamplerState, row: int, span: slice) -> str:
    """Positions `span` of a row, finished, as plain text: given runs bold, written ones plain (a long text's part
    before its live window, light enough to stream at every step)."""
    tokens, given = state.tokens[row, span].tolist(), state.is_given[row, span].tolist()
    parts = []
    for is_given, run in itertools.groupby(zip(tokens, given, strict=True), key=lambda pair: pair[1]):
        text = html.escape(model.tokenizer.decode([token for token, _ in run]))
        parts.append(f"<b class='mdlm-given'>{text}</b>" if is_given else f"<span class='mdlm-done'>{text}</span>")
    return "".join(parts)


def render_canvas(model: MDLM, state: SamplerState, row: int = 0, rows: int = CANVAS_ROWS, font_px: int = 15) -> str:
    """The canvas as HTML: one cell per position. A text longer than the model's context shows its finished part
    as text, the live window's cells framed, and a count of what is still to come; the box follows the window."""
    length = state.tokens.size(1)
    start, end = state.window or (0, length)
    if end - start == length:
        return canvas_box(canvas_cells(model, state, row, slice(0, length)), rows, font_px)
    still_masked = int((state.tokens[row, end:] == model.mask_id).sum())
    after = f"\n… {still_masked:,} more characters to write" if still_masked else ""
    after += f" ({length - end - still_masked:,} of the template given)" if still_masked < length - end else ""
    window = "".join(canvas_cells(model, state, row, slice(start, end)))
    body = (
        finished_text(model, state, row, slice(0, start))
        + f"<span class='mdlm-window' style='{WINDOW_FRAME}'>{window}</span>"
        + f"<span class='mdlm-to-come' style='color:{SUBDUED_TEXT}'>{after}</span>"
    )
    return canvas_box([body], rows, font_px, follow=True)


def more_cells(count: int) -> str:
    """What a draft canvas says of the `count` cells it leaves out (DRAFT_CELLS)."""
    return f"<span style='color:{SUBDUED_TEXT}'> … and {count:,} more</span>"


def draft_canvas(
    prompt: str | None, length: float | None, rows: int = CANVAS_ROWS, font_px: int = 15, legend: str = LEGEND
) -> str:
    """The canvas before a run: the prompt, then a mask for each character to generate."""
    try:
        length = max(0, int(length or 0))
    except (TypeError, ValueError):  # a half-typed number: keep a canvas on screen anyway
        length = 0
    shown = min(length, max(0, DRAFT_CELLS - len(prompt or "")))
    more = [more_cells(length - shown)] if shown < length else []
    return canvas_box([cell(char) for char in prompt or ""] + [cell(None)] * shown + more, rows, font_px) + legend


def draft_template(template: str | None, blank: str = "_") -> str:
    """The Infill tab's canvas before a run: the template with a mask for each blank."""
    if not template:
        return placeholder(f"Type a template: each {blank} becomes a masked character to fill.") + LEGEND
    if len(template) > MAX_CANVAS:  # said before the run, in the words the run would use
        return (
            placeholder(
                f"The template has {len(template):,} characters, but a run writes at most {MAX_CANVAS:,}: "
                f"shorten it by {len(template) - MAX_CANVAS:,}."
            )
            + LEGEND
        )
    if blank not in template:
        return placeholder(f"The template has no blank: mark each character to fill with {blank}.") + LEGEND
    cells = [cell(None if char == blank else char) for char in template[:DRAFT_CELLS]]
    if len(template) > DRAFT_CELLS:
        cells.append(more_cells(len(template) - DRAFT_CELLS))
    return canvas_box(cells) + LEGEND


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


def check_flag(value: object, name: str) -> None:
    """A gr.Error naming a checkbox whose value (from the API) is not true or false."""
    if not isinstance(value, bool):
        raise gr.Error(f"{name} must be true or false, got {value!r}")


NAMED_CHARS = {"\n": "line break", " ": "space", "\t": "tab"}


def listed(items: list[str]) -> str:
    """ "a", "a and b", "a, b and c"."""
    return " and ".join([", ".join(items[:-1]), items[-1]] if len(items) > 1 else items)


def character_runs(chars: list[str]) -> list[str]:
    """Consecutive characters as ranges ("a-z"), runs of one or two as single characters."""
    runs: list[list[str]] = []
    for char in chars:
        if runs and ord(char) == ord(runs[-1][-1]) + 1:
            runs[-1].append(char)
        else:
            runs.append([char])
    return [item for run in runs for item in ([f"{run[0]}-{run[-1]}"] if len(run) > 2 else run)]


def vocabulary_words(vocab: str) -> str:
    """The characters of `vocab` in words a reader cannot take for a count ("letters A-Z and a-z, the digit 3, the
    marks ! $ & ' , - . : ; ?, line break and space")."""
    chars = sorted(set(vocab))
    letters, digits = (
        character_runs([c for c in chars if c.isalpha()]),
        character_runs([c for c in chars if c.isdigit()]),
    )
    marks = [c for c in chars if not c.isalnum() and c not in NAMED_CHARS and c.isprintable()]
    parts = []
    if letters:
        parts.append(f"{'letter' if letters == [letters[0]] and len(letters[0]) == 1 else 'letters'} {listed(letters)}")
    if digits:
        parts.append(f"the {'digit' if len(digits) == 1 and len(digits[0]) == 1 else 'digits'} {listed(digits)}")
    if marks:
        parts.append(f"the {'mark' if len(marks) == 1 else 'marks'} {' '.join(marks)}")
    parts += [NAMED_CHARS[c] for c in NAMED_CHARS if c in chars]
    return listed(parts)


def check_chars(model: MDLM, text: str, what: str) -> None:
    """A gr.Error naming the characters of `text` outside the model's vocabulary, and the ones it writes."""
    unknown = model.tokenizer.unknown_chars(text)
    if unknown:
        count = "1 character" if len(unknown) == 1 else f"{len(unknown)} characters"
        raise gr.Error(
            f"the {what} has {count} outside the model's vocabulary: {', '.join(map(repr, unknown))}; "
            f"it writes only {vocabulary_words(model.tokenizer.vocab)}"
        )


def passes(count: int) -> str:
    """ "1 forward pass", "2 forward passes"."""
    return f"{count:,} forward pass{'' if count == 1 else 'es'}"


def readout(state: SamplerState, seconds: float, num_generated: int, seed: int, note: str = "") -> str:
    """Seed, steps, forward passes, seconds and characters per second of a (possibly unfinished) run, where a long
    text's live window is, and a note."""
    speed = f"{num_generated / seconds:,.0f} chars/s" if state.done and seconds > 0 else "…"
    line = (
        f"seed {seed} · step {state.step}/{state.num_steps} · {passes(state.num_forward_passes)} · "
        f"{seconds:.2f} s · {speed}"
    )
    length = state.tokens.size(1)
    if state.window is not None and state.window[1] - state.window[0] < length:
        line += f" · window {state.window[0]:,}–{state.window[1]:,} of {length:,}"
    return f"{line}\n\n{note}" if note else line


def word_share(text: str, known_words: set[str] | None) -> str:
    """The valid-word rate as text, or n/a without a word list or words."""
    if known_words is None:
        return "n/a (no word list)"
    rate = valid_word_rate(text, known_words)
    return "n/a (no words)" if rate != rate else f"{rate:.0%}"


def capped_slider(cap: int, wanted: float | None, info: str) -> dict:
    """Update of a slider whose maximum follows another control: maximum `cap`, value min(wanted, cap), `wanted`
    being the value the user last chose, so that a cap that rises again brings it back. A cap below 2 locks the
    slider at 1 (a gradio slider needs minimum < maximum)."""
    if cap < 2:
        return gr.update(maximum=2, value=1, interactive=False, info=info)
    wanted = cap if wanted is None else wanted
    return gr.update(maximum=cap, value=max(1, min(int(wanted), cap)), interactive=True, info=info)


def fit_steps(num_masks: int, wanted: float | None) -> dict:
    """Steps slider update: at most one denoising step per character to fill."""
    if num_masks < 1:
        info = "nothing to fill yet"
    elif num_masks == 1:
        info = "one character to fill: one step"
    else:
        info = f"at most {num_masks}: one per character to fill"
    return capped_slider(num_masks, wanted, info)


def fit_steps_to_length(block_size: int, length: float | None, wanted: float | None) -> dict:
    """Steps slider update for a length: one step per character at most; past the model's context, per window."""
    length = int(length or 0)
    if length <= block_size:
        return fit_steps(length, wanted)
    info = f"per {block_size} characters: the text is written window by window, {block_size} characters each"
    return capped_slider(block_size, wanted, info)


def fit_length(limit: int, prompt: str | None, wanted: float | None) -> dict:
    """Length slider update: the prompt and the characters to generate share `limit` characters (the model's
    context in Compare, MAX_CANVAS in Generate)."""
    used = len(prompt or "")
    room = limit - used
    if room < 1:
        info = f"the prompt fills all {limit:,} characters a run holds: shorten it"
    else:
        info = f"at most {room:,}: a run holds {limit:,} characters and the prompt takes {used:,}"
    return capped_slider(room, wanted, info)


def fitted_length(prompt: str, length: float, limit: int) -> tuple[int, str]:
    """`length`, lowered to the room the prompt leaves of `limit` characters, and a note saying so (or "")."""
    length = as_int(length, "length", 0, limit)
    if length == 0:  # the sliders start at 0 so that a 0 typed into their box reaches this line, not gradio's bound
        raise gr.Error("nothing to generate: set at least 1 character to generate")
    room = limit - len(prompt)
    if room < 1:
        raise gr.Error(
            f"the prompt has {len(prompt):,} characters, but a run holds at most {limit:,} characters, prompt "
            "included: shorten the prompt to leave room for characters to generate"
        )
    if length <= room:
        return length, ""
    return room, (
        f"Length lowered from {length:,} to {room:,}: a run holds {limit:,} characters, and the prompt takes "
        f"{len(prompt):,}."
    )


def run_seed(seed: object, fixed_seed: bool) -> int:
    """A run's seed: the seed box's when fixed, else a new random one (shown with the run, so it can be repeated)."""
    check_flag(fixed_seed, "fixed_seed")
    return as_int(seed, "seed", 0, MAX_SEED) if fixed_seed else secrets.randbelow(MAX_SEED + 1)


def sample_accuracy(model: MDLM, text: str) -> list[tuple[float, float]]:
    """Accuracy by mask ratio of the loaded model on its sample text (Sonnet 18 for the shipped model, which it
    never saw in training: a few seconds on a CPU), one mask ratio at a time on the model thread, so that other
    visitors' sampling steps go in between."""
    tokens = torch.tensor(model.tokenizer.encode(text))
    return [
        on_model_thread(accuracy_by_mask_ratio, model, tokens, (ratio,), num_windows=16)[0] for ratio in MASK_RATIOS
    ]


def marked_accuracy_figure(results: list[tuple[float, float]], t: float, sample_name: str = SHAKESPEARE.sample_name):
    """The accuracy plot on the sample text `sample_name` with a vertical line at the mask ratio t that the tab
    shows."""
    figure = accuracy_figure(results, f"Denoising accuracy on {sample_name}")
    axes = figure.axes[0]
    axes.axvline(t, color="#c2410c", linestyle="--", linewidth=1.5, label=f"t = {t:.2f}, as above")
    axes.legend(loc="upper right", fontsize=9)
    return figure


def accuracy_plot_once(model: MDLM, texts: DemoText = SHAKESPEARE) -> Callable[[float], Any]:
    """A function of t that measures the accuracies on the sample text on its first call (concurrent first calls
    measure once) and from then on only draws the figure, marked at t (a few tens of milliseconds)."""
    lock = threading.Lock()
    results = functools.cache(functools.partial(sample_accuracy, model, texts.sample))

    def draw(t: float) -> Any:
        """How it works tab: the denoising accuracy by mask ratio on the sample text, marked at t."""
        t = as_float(t, "mask ratio", 0.0, 1.0)
        with lock:  # pyplot, which draws the figure, is not thread-safe either
            return marked_accuracy_figure(results(), t, texts.sample_name)

    return draw


# --- events: module-level handlers take their inputs by name; `event` binds them to components ---


@contextlib.contextmanager
def errors_shown() -> Iterator[None]:
    """The one translation of bad input (a ValueError from the sampler, a canvas builder or the tokenizer) into
    a gr.Error, which the page shows and which leaves the app serving, and which the log does not print."""
    try:
        yield
    except gr.Error as error:  # already one (a gr.Error is a ValueError): a slider's bounds, a handler's check
        error.print_exception = False  # a user's mistake is one line on the page, not a traceback in the log
        raise
    except ValueError as error:
        raise gr.Error(str(error), print_exception=False) from None


def payload_words(component: gr.components.Component) -> str:
    """What an input component's API payload must be, in words."""
    if isinstance(component, (gr.Slider, gr.Number)):
        return "a number"
    if isinstance(component, gr.Checkbox):
        return "true or false"
    return "a string" if isinstance(component, gr.Textbox) else "a valid value"


def preprocessed(component: gr.components.Component, name: str, value: Any) -> Any:
    """An event's raw input through its component's preprocessing; a payload of the wrong type (a string for a
    number) is a gr.Error naming the parameter, where gradio's own would be a generic "verbose error" line."""
    try:
        return component.preprocess(value)
    except gr.Error:  # the component's own message, such as a slider's bounds
        raise
    except Exception:
        raise gr.Error(f"{name} must be {payload_words(component)}, got {value!r}") from None


def event(handler: Callable, inputs: dict[str, gr.components.Component], on_model: bool = True, **context: Any) -> dict:
    """Arguments of a gradio event that calls `handler(**context, **{name: value})` for the `inputs` (name ->
    component); their order is the API's parameter order, their names its parameter names. The values are
    preprocessed here rather than by gradio, so that a payload of the wrong type is an error naming its parameter.
    The handler runs on MODEL_THREAD (a streaming one step by step), unless `on_model` is False: a long measurement
    that sends its own passes there one by one."""
    names = list(inputs)

    def by_name(values: tuple) -> dict[str, Any]:
        return {
            name: preprocessed(component, name, value)
            for (name, component), value in zip(inputs.items(), values, strict=True)
        }

    def streaming(*values: Any) -> Iterator:
        with errors_shown():
            yield from iterate_on_model_thread(handler(**context, **by_name(values)))

    def single(*values: Any) -> Any:
        with errors_shown():
            if not on_model:
                return handler(**context, **by_name(values))
            return on_model_thread(handler, **context, **by_name(values))

    fn = gpu_work(streaming if inspect.isgeneratorfunction(handler) else single)  # every event runs the model
    fn.__doc__ = handler.__doc__  # what "Use via API" and MCP clients read
    fn.__signature__ = inspect.Signature(
        [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD) for name in names]
    )
    return dict(fn=fn, inputs=list(inputs.values()), preprocess=False)


def option_value(name: str, value: Any) -> Any:
    """A control's value as the sampler option `name` takes it: a whole number that a slider sends as a float is
    an int (a fraction stays, for the option's own check to refuse: no control rounds silently), `off` is None."""
    spec = OPTION_SPECS[name]
    if spec.accepts.kind is int and isinstance(value, float) and value.is_integer():
        value = int(value)
    return spec.parse(value)


def greedy_note(options: SamplerOptions) -> str:
    """With temperature 0, the options that still draw at random, in a sentence ("" if none, or above 0): greedy
    characters alone do not make a run repeat itself."""
    if options.temperature >= GREEDY_BELOW:
        return ""
    drawing = []
    if options.order == "random":
        drawing.append("the random order")
    elif options.order_temperature >= GREEDY_BELOW:
        drawing.append(f"order temperature {options.order_temperature:g} (0: strict order)")
    if options.reveal_counts == "binomial":
        drawing.append("binomial reveal counts")
    if not drawing:
        return ""
    return (
        f"Temperature 0 picks each character greedily, but {' and '.join(drawing)} still "
        f"{'draws' if len(drawing) == 1 else 'draw'} at random: "
        "a new seed gives another text."
    )


def control_overrides(controls: dict[str, Any]) -> dict[str, Any]:
    """The controls' values as sampler options, by name: what changes the recommended ones."""
    return {name: option_value(name, value) for name, value in controls.items()}


def frames(
    model: MDLM,
    states: Iterator[SamplerState],
    num_fixed: int,
    seed: int,
    note: str = "",
    prompt_length: int | None = None,
    end_at: str = "length",
) -> Iterator[tuple[str, str, str, int]]:
    """(canvas HTML, final text, readout, seed) for every state, as the sampler computes it. With a prompt
    (`prompt_length`), the readout says how much of a long one the model read, and the final text ends `end_at`."""
    start_time = time.perf_counter()
    for state in states:
        if state.step == 0 and prompt_length is not None:
            note = " ".join(filter(None, (note, (unseen_prompt_note(state, prompt_length) or "").capitalize())))
        seconds = time.perf_counter() - start_time
        text, shown = "", note
        if state.done:
            whole = model.tokenizer.decode(state.tokens[0])
            text = ended(whole, prompt_length or 0, end_at)
            if len(text) < len(whole):
                kept, written = len(text) - (prompt_length or 0), len(whole) - (prompt_length or 0)
                cut = f"Ended at {END_AT_WORDS[end_at]}: {kept:,} of {written:,} written characters kept."
                shown = " ".join(filter(None, (note, cut)))
        num_generated = state.tokens.size(1) - num_fixed
        yield render_canvas(model, state) + LEGEND, text, readout(state, seconds, num_generated, seed, shown), seed


def generate(
    model: MDLM,
    prompt: str | None,
    length: float,
    seed: float,
    fixed_seed: bool,
    end_at: str = END_AT_DEFAULT,
    **controls: Any,
) -> Iterator[tuple]:
    """Generate tab: the prompt followed by up to `length` generated characters, ending `end_at` (fewer when the
    prompt leaves less room of MAX_CANVAS, which the readout says), streamed step by step, window by window when
    longer than the model's context."""
    check_text(prompt, "prompt")
    check_chars(model, prompt, "prompt")  # before any length: an unknown character is the problem to fix first
    try:
        check_end_at(end_at)
    except ValueError as error:
        raise gr.Error(str(error)) from None
    length, note = fitted_length(prompt, length, MAX_CANVAS)
    seed = run_seed(seed, fixed_seed)
    canvas = prompt_canvas(model, prompt, length)
    overrides = control_overrides(controls)
    states = sample(model, canvas, seed=seed, **overrides)  # validates them
    note = " ".join(filter(None, (note, greedy_note(SamplerOptions(**overrides)))))
    yield from frames(model, states, len(prompt), seed, note, prompt_length=len(prompt), end_at=end_at)


def infill(
    model: MDLM, template: str | None, seed: float, fixed_seed: bool, blank: str = "_", **controls: Any
) -> Iterator[tuple]:
    """Infill tab: every `blank` of the template filled in, streamed step by step."""
    check_text(template, "template")
    check_chars(model, template.replace(blank, ""), "template")
    check_fits(template, "template", MAX_CANVAS, f"a run writes at most {MAX_CANVAS:,} characters")
    canvas = text_to_canvas(model, template, blank)
    seed = run_seed(seed, fixed_seed)
    overrides = control_overrides(controls)
    states = sample(model, canvas, seed=seed, **overrides)  # validates them
    yield from frames(
        model, states, int((canvas != model.mask_id).sum()), seed, greedy_note(SamplerOptions(**overrides))
    )


def compare(
    model: MDLM,
    known_words: set[str] | None,
    prompt: str | None,
    length: float,
    num_steps: int,
    temperature: float,
    seed: float,
    autoregressive: bool,
    fixed_seed: bool,
    **rule: Any,
) -> Iterator[tuple[str, str, str, str, str, int]]:
    """Compare tab: left-to-right and confidence order on the same canvas, streamed together, with the same
    reveal rule (`rule`: the REVEAL_RULE_OPTIONS) where it applies; then a one-line takeaway."""
    check_text(prompt, "prompt")
    check_chars(model, prompt, "prompt")
    check_flag(autoregressive, "autoregressive")
    length, note = fitted_length(prompt, length, model.block_size)
    seed = run_seed(seed, fixed_seed)
    canvas = prompt_canvas(model, prompt, length)
    rule = {name: option_value(name, value) for name, value in rule.items()}
    shared = SamplerOptions(
        num_steps=option_value("num_steps", num_steps), temperature=option_value("temperature", temperature), **rule
    )
    options = {
        # autoregressive-like: exactly one character per forward pass, strictly left to right, no reveal rule
        "left_to_right": SamplerOptions.plain(order="left_to_right", num_steps=length, temperature=temperature)
        if autoregressive
        else shared.replace(order="left_to_right"),
        "confidence": shared.replace(order="confidence"),
    }
    runs = {name: sample(model, canvas, side, seed=seed) for name, side in options.items()}
    latest: dict[str, SamplerState] = {}
    while runs:
        for name in list(runs):
            state = next(runs[name], None)
            if state is None:
                del runs[name]
            else:
                latest[name] = state
        if not runs:  # the last run ended without a new state: its last one is shown already
            break
        views = [
            compare_view(model, latest[name], len(prompt), known_words, rule_words(options[name], autoregressive))
            for name in options
        ]
        summary = takeaway(model, latest, len(prompt), known_words, autoregressive)
        yield (*(part for view in views for part in view), " ".join(filter(None, (summary, note))), seed)


def rule_words(options: SamplerOptions, autoregressive: bool) -> str:
    """Which reveal-rule options a side of the Compare tab used, in words."""
    if options.order == "left_to_right" and autoregressive:
        return "reveal rule: none, one character per forward pass, strictly left to right (autoregressive-like)"
    parts = [
        f"order temperature {options.order_temperature:g}",
        f"remask ratio {options.remask_ratio:g}",
        f"spacing {options.spacing}",
        f"prior weight {options.prior_weight:g}"
        if options.order in SCORED_ORDERS
        else "no prior weight (left to right scores no position)",
    ]
    return "reveal rule: " + ", ".join(parts)


def compare_view(
    model: MDLM, state: SamplerState, num_fixed: int, known_words: set[str] | None, rule: str
) -> tuple[str, str]:
    """One side of the Compare tab: its canvas, and its forward passes, the characters each pass revealed so far,
    its reveal rule and (when done) its share of real words."""
    num_revealed = int((~state.is_masked & ~state.is_given)[0].sum())
    stats = f"{passes(state.num_forward_passes)} · {num_revealed / max(1, state.num_forward_passes):.1f} chars per pass"
    if state.done:
        stats += f" · real words: {word_share(model.tokenizer.decode(state.tokens[0, num_fixed:]), known_words)}"
    return render_canvas(model, state, rows=COMPARE_ROWS, font_px=COMPARE_FONT_PX), f"{stats}\n\n<small>{rule}</small>"


def takeaway(
    model: MDLM, states: dict[str, SamplerState], num_fixed: int, known_words: set[str] | None, autoregressive: bool
) -> str:
    """The Compare tab's one line once both sides are done ("" before)."""
    if not all(state.done for state in states.values()):
        return ""
    left, right = states["left_to_right"], states["confidence"]
    shares = {
        name: word_share(model.tokenizer.decode(state.tokens[0, num_fixed:]), known_words)
        for name, state in states.items()
    }
    if autoregressive:
        ratio = left.num_forward_passes / max(1, right.num_forward_passes)
        return (
            f"**Takeaway:** one character per forward pass took left to right {left.num_forward_passes} passes; "
            f"confidence order wrote the same length in {right.num_forward_passes}, {ratio:.1f}x fewer "
            f"(real words: {shares['left_to_right']} left to right, {shares['confidence']} confidence order). "
            "Compare the passes, not the time: a real autoregressive model caches keys and values, so each of its "
            "passes costs far less than these re-reads of the whole canvas."
        )
    line = (
        f"**Takeaway:** same {passes(right.num_forward_passes)} and reveal rule, only the order differs: "
        f"real words {shares['left_to_right']} left to right, {shares['confidence']} confidence order."
    )
    texts = {name: model.tokenizer.decode(state.tokens[0, num_fixed:]) for name, state in states.items()}
    if known_words is not None and clearly_more_words(texts["confidence"], texts["left_to_right"], known_words):
        line += " Revealing the surest characters first gives the hard ones context on both sides."
    return line


def clearly_more_words(text: str, other: str, known_words: set[str]) -> bool:
    """Whether `text` has a higher valid-word rate than `other` by more than two standard errors of the difference
    (so one lucky word on a short canvas does not make a takeaway)."""
    counts = []
    for piece in (text, other):
        found = words(piece)
        counts.append((sum(w in known_words for w in found), len(found)))
    (valid, n), (other_valid, other_n) = counts
    if not n or not other_n:
        return False
    pooled = (valid + other_valid) / (n + other_n)
    error = math.sqrt(pooled * (1 - pooled) * (1 / n + 1 / other_n))
    return valid / n - other_valid / other_n > 2 * error


def check_fits(text: str, what: str, limit: int, why: str) -> None:
    """A gr.Error, in plain words, when `text` is longer than `limit` characters (`why`: what sets the limit)."""
    if len(text) > limit:
        raise gr.Error(f"the {what} has {len(text):,} characters, but {why}: shorten it")


def forward_process(model: MDLM, line: str | None, t: float, seed: float) -> tuple[str, str]:
    """How it works tab: the line masked at ratio t and the model's guesses, one column per character, and how
    many it gets right."""
    check_text(line, "line")
    if not line:
        raise ValueError("enter a line of at least one character")
    check_chars(model, line, "line")
    check_fits(line, "line", model.block_size, f"the model's context is {model.block_size} characters")
    tokens = torch.tensor([model.tokenizer.encode(line)], device=next(model.parameters()).device)
    generator = torch.Generator().manual_seed(as_int(seed, "seed", 0, MAX_SEED))
    t = as_float(t, "mask ratio", 0.0, 1.0)
    noisy, is_masked = mask_tokens(tokens, torch.tensor([t]), model.mask_id, generator)
    with torch.inference_mode():
        predictions = model(noisy, is_masked.float().mean(dim=1)).argmax(dim=-1)
    guesses = [model.tokenizer.vocab[i] for i in predictions[0].tolist()]
    view = forward_view(line, is_masked[0].tolist(), guesses)
    num_masked = int(is_masked.sum())
    correct = int(((predictions == tokens) & is_masked).sum())
    summary = (
        f"{num_masked} of {len(line)} characters masked; the model restores {correct} ({correct / num_masked:.0%})"
        if num_masked
        else "nothing masked at this t: raise the slider"
    )
    return view, summary


RIGHT_COLOUR, WRONG_COLOUR = "hsl(212,80%,78%)", "hsl(30,95%,72%)"  # blue / orange: apart for any colour vision
FORWARD_ROWS = ("x_t", "model", "true")  # the rows of the forward view, top to bottom


def shown_char(char: str) -> str:
    """A character as one visible cell: a line break or a space as its glyph."""
    return {"\n": NEWLINE_GLYPH, " ": SPACE_GLYPH}.get(char, html.escape(char))


def forward_column(char: str, masked: bool, guess: str) -> str:
    """One position of the forward view: x_t above, the model's guess below it, and under a wrong guess the true
    character (shown, not a tooltip: phones cannot hover)."""
    stack = "display: inline-flex; flex-direction: column; align-items: center; min-width: 1.15ch;"
    if not masked:
        plain = "&nbsp;" if char == " " else shown_char(char)
        x_t, model_row, truth = plain, f"<span style='color:{SUBDUED_TEXT}'>{plain}</span>", "&nbsp;"
    else:
        right = guess == char
        x_t = f"<span class='mdlm-mask' style='background:{MASK_COLOUR}; {MASK_CELL}'>{MASK_GLYPH}</span>"
        colour = RIGHT_COLOUR if right else WRONG_COLOUR
        model_row = f"<span class='mdlm-{'right' if right else 'wrong'}' style='background:{colour}'>"
        model_row += f"{shown_char(guess)}</span>"
        truth = "&nbsp;" if right else f"<span class='mdlm-true' style='color:#1f2733'>{shown_char(char)}</span>"
    # each row in a wrapper of its own, so its cell stays inline (a glyph's height, as on the canvas), not a
    # flex item stretched to the row's whole line height
    rows = "".join(f"<span>{row}</span>" for row in (x_t, model_row, truth))
    return f"<span class='mdlm-column' style='{stack}'>{rows}</span>"


def forward_view(line: str, is_masked: list[bool], guesses: list[str]) -> str:
    """The forward view: a label column (x_t, model, true), then the line's columns, grouped into words so that
    lines break between words."""
    label_style = f"display: inline-flex; flex-direction: column; padding-right: 8px; color: {SUBDUED_TEXT};"
    label_style += " font-family: inherit; font-size: 12px; line-height: 1.6rem; text-align: right;"
    labels = "".join(f"<span class='mdlm-row-label'>{name}</span>" for name in FORWARD_ROWS)
    items, word = [f"<span class='mdlm-row-labels' style='{label_style}'>{labels}</span>"], []
    word_style = "display: inline-flex; flex-wrap: wrap;"  # a word wider than a whole line still wraps
    for char, masked, guess in zip(line, is_masked, guesses, strict=True):
        column = forward_column(char, masked, guess)
        if char in " \n":  # a break opportunity between words
            if word:
                items.append(f"<span class='mdlm-word' style='{word_style}'>{''.join(word)}</span>")
            items.append(column)
            word = []
        else:
            word.append(column)
    if word:
        items.append(f"<span class='mdlm-word' style='{word_style}'>{''.join(word)}</span>")
    box = (
        f"{CANVAS_FONT} display: flex; flex-wrap: wrap; row-gap: 10px; align-items: flex-start; font-size: 15px; "
        f"line-height: 1.6rem; padding: 10px; border-radius: 8px; background: {CANVAS_BACKGROUND}; color: #1f2733;"
    )
    legend = (
        f"<div style='{LEGEND_TEXT}'>x_t: the line with each character masked "
        f"with probability t &nbsp; model: its guess for each mask, <span style='background:{RIGHT_COLOUR}'>right"
        f"</span> or <span style='background:{WRONG_COLOUR}'>wrong</span> &nbsp; true: the character a wrong guess "
        f"missed &nbsp; {NEWLINE_GLYPH} line break, {SPACE_GLYPH} space</div>"
    )
    return f"<div class='mdlm-forward' style='{box}'>{''.join(items)}</div>{legend}"


def surprise_colour(bits: float, most: float) -> str:
    """Background of a character the model gave `bits` of surprise (-log2 p), `most` being the top of the scale:
    one hue, darker for more surprise (it reads the same with any colour vision)."""
    share = min(max(bits / most, 0.0), 1.0) if most > 0 else 0.0
    return f"hsl(24,90%,{96 - 40 * share:.0f}%)"


def score_view(text: str, bits: list[float], most: float) -> str:
    """The scored text in a canvas box: each character tinted by its surprise, its bits in a tooltip."""
    cells = []
    for char, surprise in zip(text, bits, strict=True):
        shown, tail = (NEWLINE_GLYPH, "\n") if char == "\n" else (html.escape(char), "")
        style = f"background:{surprise_colour(surprise, most)}"
        cells.append(f"<span class='mdlm-scored' style='{style}' title='{surprise:.2f} bits'>{shown}</span>{tail}")
    legend = (
        f"<div style='{LEGEND_TEXT}'>surprise, -log2 p of each character given "
        f"those before it: {colour_scale(surprise_colour(0, 1), surprise_colour(1, 1))} 0 … {most:.1f} bits or more "
        "(a uniform guess over the vocabulary) &nbsp; "
        f"{NEWLINE_GLYPH} line break</div>"
    )
    return canvas_box(cells) + legend


def score(model: MDLM, text: str | None) -> tuple[str, str]:
    """Score tab: the text's bits per character under the model (the exact left-to-right chain rule, one forward
    pass per character) and each character tinted by how surprised the model was by it."""
    check_text(text, "text")
    if not text:
        raise gr.Error("paste some text to score")
    check_chars(model, text, "text")
    check_fits(text, "text", model.block_size, f"the model's context is {model.block_size} characters")
    tokens = torch.tensor(model.tokenizer.encode(text))[None]
    # one pass at a time on the model thread, so that other visitors' sampling steps go in between
    for nats in iterate_on_model_thread(reveal_nll_steps(model, tokens, "left_to_right")):  # noqa: B007
        pass
    bits = (nats[0] / math.log(2)).tolist()
    worst = max(range(len(text)), key=bits.__getitem__)
    summary = (
        f"**{sum(bits) / len(bits):.3f} bits per character** over {len(text)} characters (exact negative "
        f"log-likelihood, revealed left to right: {passes(len(text))}). Most surprising: "
        f"{shown_char(text[worst])} at position {worst + 1}, {bits[worst]:.1f} bits."
    )
    return score_view(text, bits, math.log2(len(model.tokenizer.vocab))), summary


def prior_weight_update(order: str) -> dict:
    """Random and left-to-right orders do not score positions, so the prior has nothing to weigh."""
    return gr.update(interactive=order in SCORED_ORDERS)


# --- layout ---


def option_control(name: str, block_size: int, value: Any = None, label: str | None = None) -> gr.components.Component:
    """The control of one sampler option, labelled and bounded by its OPTION_SPECS entry (value: its default)."""
    spec = OPTION_SPECS[name]
    value = spec.shown(getattr(SamplerOptions(), name) if value is None else value)
    if spec.accepts.choices:
        return gr.Dropdown(list(spec.accepts.choices), value=value, label=label or spec.label)
    low, high, step = spec.slider
    return gr.Slider(
        minimum=low,
        maximum=block_size if high is None else high,
        value=value,
        step=step,
        label=label or spec.label,
        info=spec.note or None,
    )


def reveal_controls(block_size: int, remask_ratio: float | None = None) -> dict[str, gr.components.Component]:
    """Reveal order, order temperature and the rest of the reveal rule (with the adaptive entropy bound), as Generate
    and Infill show them."""
    controls = {name: option_control(name, block_size) for name in ("order", "order_temperature")}
    with gr.Accordion("More of the reveal rule: rare characters, remasking, spacing, entropy bound", open=False):
        controls["prior_weight"] = option_control("prior_weight", block_size)
        controls["remask_ratio"] = option_control("remask_ratio", block_size, remask_ratio)
        controls["spacing"] = option_control("spacing", block_size)
        controls["entropy_bound"] = option_control("entropy_bound", block_size)
    controls["order"].change(prior_weight_update, controls["order"], controls["prior_weight"], api_name=False)
    return controls


def seed_controls(tab: str) -> dict[str, gr.components.Component]:
    """The seed box and its "fixed seed" checkbox: off, each run draws a new seed and writes it into the box."""
    with gr.Row():
        seed = gr.Number(value=0, label="Seed", info="the last run's seed", elem_id=f"{tab}-seed")
        fixed = gr.Checkbox(value=False, label="Fixed seed", info="off: a new random seed each run")
    # typing a seed means running with it
    seed.input(lambda: True, None, fixed, queue=False, api_name=False, show_progress="hidden")
    return dict(seed=seed, fixed_seed=fixed)


def remembered(slider: gr.Slider) -> gr.State:
    """The value the user last chose on `slider` (by hand: capping it does not change this), which a capped
    slider returns to when its cap rises again."""
    wanted = gr.State(slider.value)
    slider.input(
        lambda value: value,
        slider,
        wanted,
        queue=False,
        api_name=False,
        show_progress="hidden",
        trigger_mode="always_last",
    )
    return wanted


def follow_prompt(
    demo: gr.Blocks, limit: int, block_size: int, prompt: gr.Textbox, length: gr.Slider, steps: gr.Slider
) -> None:
    """The length slider follows the prompt (they share `limit` characters) and the steps slider the length (a
    text longer than the model's context counts its steps per `block_size` characters)."""
    wanted_length, wanted_steps = remembered(length), remembered(steps)
    fit = dict(fn=functools.partial(fit_length, limit), inputs=[prompt, wanted_length], outputs=length)
    prompt.change(**fit, queue=False, api_name=False, show_progress="hidden")
    demo.load(**fit, queue=False, api_name=False, show_progress="hidden")
    fit = dict(fn=functools.partial(fit_steps_to_length, block_size), inputs=[length, wanted_steps], outputs=steps)
    length.change(**fit, queue=False, api_name=False, show_progress="hidden")
    demo.load(**fit, queue=False, api_name=False, show_progress="hidden")  # when the first length fits already


def run_buttons(label: str) -> tuple[gr.Button, gr.Button]:
    """A tab's run button and its Stop button, side by side."""
    with gr.Row():
        # a plain Stop: a red one beside an idle run button read as an alarm (it only matters while a run streams)
        return gr.Button(label, variant="primary", scale=3), gr.Button(
            "Stop", variant="secondary", scale=1, min_width=80
        )


# runs in the page before the run's request, passing its inputs on: scrolls only as far as it takes to show the
# whole canvas ("nearest"), so nothing moves where it is in view already (a separate js-only event on the same click
# ran only once the run had ended)
BRING_INTO_VIEW = (
    "(...inputs) => { document.getElementById('CANVAS_ID')?.scrollIntoView({block: 'nearest'}); return inputs; }"
)


def stoppable(run: gr.Button, stop: gr.Button, *args: Any, **kwargs: Any) -> Any:
    """`run.click(*args, **kwargs)`, which `stop` cancels: the handler's sampler loop ends after the step it is
    computing (as it does when the page is closed). Returns the run's event, to chain on."""
    canvas_id = getattr((kwargs.get("outputs") or [None])[0], "elem_id", None)
    if canvas_id:  # on a phone the canvas sits below the controls: bring it into view as the run starts
        kwargs["js"] = BRING_INTO_VIEW.replace("CANVAS_ID", canvas_id)
    dependency = run.click(*args, **kwargs)
    stop.click(None, cancels=[dependency], api_name=False)
    return dependency


def replay_slider(canvases: list[str] | None) -> dict:
    """The replay slider after a run: one position per frame it streamed (step 0: all masks), at the last."""
    last = len(canvases or []) - 1
    if last < 1:
        return gr.update(minimum=0, maximum=1, value=0, interactive=False)
    return gr.update(minimum=0, maximum=last, value=last, interactive=True)


def replay_frame(canvases: list[str] | None, step: float | None) -> Any:
    """The canvas of a run's frame `step`, as it was streamed (nothing is recomputed); no change before a run."""
    if not canvases or step is None:
        return gr.skip()
    return canvases[min(max(0, int(step)), len(canvases) - 1)]


def recorded(fn: Callable) -> Callable:
    """A streaming event function that also yields, as its last output, the list of every canvas (its first
    output) streamed so far: the run's frames, kept in the page's session for the replay slider."""

    def recording(*values: Any) -> Iterator[tuple]:
        canvases: list[str] = []
        with contextlib.closing(fn(*values)) as frames:  # closed when the run is stopped: its sampler stops too
            for outputs in frames:
                canvases.append(outputs[0])
                yield (*outputs, canvases)

    recording.__signature__, recording.__doc__ = fn.__signature__, fn.__doc__
    return recording


def replayable(
    run: gr.Button, stop: gr.Button, handler: dict, outputs: list, replay: tuple[gr.Slider, gr.State], api_name: str
) -> None:
    """A stoppable run whose frames are kept (`replay`: the slider and the session's list of canvases), so that
    after it the slider scrubs through every step on the canvas (`outputs[0]`)."""
    slider, canvases = replay
    run_event = stoppable(
        run, stop, **{**handler, "fn": recorded(handler["fn"])}, outputs=[*outputs, canvases], api_name=api_name
    )
    run_event.then(replay_slider, canvases, slider, queue=False, api_name=False, show_progress="hidden")
    slider.change(
        replay_frame,
        [canvases, slider],
        outputs[0],
        queue=False,
        api_name=False,
        show_progress="hidden",
        trigger_mode="always_last",
    )


def redraw(trigger: Callable, fn: Callable, inputs: list, outputs: Any) -> None:
    """A quick redraw of `outputs` from the raw values of `inputs`, no queue: it computes nothing heavy. Raw, since
    a slider's bounds check would fail on a value its new maximum has not caught up with yet (the prompt's change
    lowers the length's maximum at the same time), and show an error for what is only a preview."""
    trigger(
        fn,
        inputs,
        outputs,
        queue=False,
        preprocess=False,
        api_name=False,
        show_progress="hidden",
        trigger_mode="always_last",
    )


def output_column(
    tab: str, lines: int, draft: str, run_label: str
) -> tuple[list[gr.components.Component], tuple[gr.Slider, gr.State]]:
    """The streamed canvas (showing `draft` before the first run), the replay slider, the readout and the final
    text beside a tab's controls: the outputs of its event, and the replay slider with its session's frames."""
    with gr.Column(scale=2):
        canvas = gr.HTML(draft, label="Canvas", elem_id=f"{tab}-canvas")
        # there before the first run (disabled), so that a run does not push the output down
        slider = gr.Slider(
            0,
            1,
            value=0,
            step=1,
            precision=0,
            label="Replay: step",
            info="after a run: drag to see each of its steps",
            interactive=False,
            elem_id=f"{tab}-replay",
        )
        # a line before the first run too, so that the run's readout does not push the final text down
        waiting = f"Press {run_label}: the step, the forward passes and the speed show here."
        # high enough for the line and a note (a lowered length, a long prompt, where the text ended): a note
        # does not push the final text down at the end of a run
        readout = gr.Markdown(waiting, elem_id=f"{tab}-readout", min_height=96)
        final_text = gr.Textbox(label="Final text", lines=lines, buttons=["copy"], elem_id=f"{tab}-final-text")
    return [canvas, final_text, readout], (slider, gr.State([]))


def sampling_options(tab: str, block_size: int, names: tuple[str, ...], remask_ratio: float | None = None) -> dict:
    """The rarely changed controls, in a closed accordion so the run button and the canvas stay in view: the
    reveal rule, the options `names` and the seed."""
    with gr.Accordion("Sampling options: order, temperature, seed", open=False):
        controls = reveal_controls(block_size, remask_ratio)
        controls |= {name: option_control(name, block_size) for name in names}
        controls |= seed_controls(tab)
    return controls


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


def infill_tab(model: MDLM, demo: gr.Blocks, texts: DemoText) -> None:
    """A template and the run button first, then its examples, steps and the closed sampling options; the canvas
    beside them. The blank is "_", or a character the model does not write when it writes "_"."""
    block_size, blank = model.block_size, choose_blank(model.tokenizer.vocab)
    examples = [with_blank(example, blank) for example in texts.examples]
    first = examples[0] if examples else ""
    with gr.Row():
        with gr.Column(scale=1, min_width=300):
            info = None if blank == "_" else f"the model writes _, so the blank is {blank}"
            template = gr.Textbox(
                label=f"Template: every {blank} is a character to fill", value=first, lines=4, info=info
            )
            button, stop = run_buttons("Fill the blanks")
            if examples:
                gr.Examples(examples, inputs=[template])
            steps = option_control("num_steps", block_size, INFILL_STEPS)
            controls = dict(template=template, num_steps=steps)
            controls |= sampling_options("infill", block_size, ("temperature", "top_p", "min_p"), INFILL_REMASK_RATIO)
        outputs, replay = output_column("infill", 6, draft_template(first, blank), "Fill the blanks")
    fit = dict(
        fn=lambda text, wanted: fit_steps_to_length(block_size, (text or "").count(blank), wanted),
        inputs=[template, remembered(steps)],
        outputs=steps,
    )
    template.change(**fit, queue=False, api_name=False, show_progress="hidden")
    demo.load(**fit, queue=False, api_name=False, show_progress="hidden")  # steps fit the first template too
    redraw(template.change, functools.partial(draft_template, blank=blank), [template], outputs[0])
    inputs = {name: controls[name] for name in INFILL_API}
    filled = event(infill, inputs, model=model, blank=blank)
    replayable(button, stop, filled, outputs + [controls["seed"]], replay, api_name="infill")


def compare_draft(prompt: str | None, length: float | None) -> tuple[str, str]:
    """Both Compare canvases before a run: the prompt, then a mask for each character to generate."""
    draft = draft_canvas(prompt, length, COMPARE_ROWS, COMPARE_FONT_PX, legend="")
    return draft, draft


def compare_side(title: str, elem_id: str, draft: str) -> tuple[gr.HTML, gr.Markdown]:
    """One side of the race: its title, canvas and statistics. A narrow minimum width keeps the two sides side by
    side on a phone, where stacked they would put the race below the fold."""
    with gr.Column(min_width=150):
        gr.Markdown(f"### {title}")
        return gr.HTML(draft, elem_id=elem_id), gr.Markdown()


def compare_tab(model: MDLM, known_words: set[str] | None, demo: gr.Blocks, texts: DemoText) -> None:
    """Left-to-right against confidence order, same model, canvas, seed, forward passes and reveal rule: the
    prompt and the race first, the settings and the explanation after them."""
    block_size = model.block_size
    length_value = min(128, block_size)
    gr.Markdown("Left to right vs confidence order: same model, prompt, seed and forward passes, streamed together.")
    with gr.Row(equal_height=True):
        prompt = gr.Textbox(label="Prompt", value=texts.prompt, lines=2, scale=3, min_width=200)
        with gr.Column(scale=1, min_width=160):
            button, stop = run_buttons("Compare")
    draft = compare_draft(texts.prompt, min(length_value, block_size - len(texts.prompt)))[0]
    with gr.Row():
        left_canvas, left_stats = compare_side("Left to right", "compare-left-canvas", draft)
        right_canvas, right_stats = compare_side("Confidence order", "compare-right-canvas", draft)
    summary = gr.Markdown(elem_id="compare-takeaway")
    gr.HTML(LEGEND)
    with gr.Row():
        length = gr.Slider(0, block_size, value=length_value, step=1, label="Characters")
        steps = option_control("num_steps", block_size, min(32, block_size), label="Forward passes")
        temperature = option_control("temperature", block_size, label="Temperature")
        controls = dict(prompt=prompt, length=length, num_steps=steps, temperature=temperature)
    with gr.Row():
        controls["autoregressive"] = gr.Checkbox(
            label="Left-to-right: one character per forward pass (autoregressive-like)"
        )
        controls |= seed_controls("compare")
    with gr.Accordion("Reveal rule, both sides", open=False):
        controls |= {name: option_control(name, block_size) for name in REVEAL_RULE_OPTIONS}
    gr.Markdown(
        "The reveal rule applies to both sides, except the prior weight, which only confidence order uses (left to "
        "right scores no position). Tick the box to make the left side autoregressive-like: one character per "
        "forward pass, strictly left to right, no reveal rule. It still re-reads the whole canvas at every pass, "
        "with no key/value cache, so its seconds would overstate the gap to a real autoregressive model: compare "
        "forward passes, not seconds."
    )
    follow_prompt(demo, block_size, block_size, prompt, length, steps)
    for trigger in (prompt.change, length.change):
        redraw(trigger, compare_draft, [prompt, length], [left_canvas, right_canvas])
    inputs = {name: controls[name] for name in COMPARE_API}
    outputs = [left_canvas, left_stats, right_canvas, right_stats, summary, controls["seed"]]
    compared = event(compare, inputs, model=model, known_words=known_words)
    stoppable(button, stop, **compared, outputs=outputs, api_name="compare")


def score_tab(model: MDLM, texts: DemoText) -> None:
    """Paste text the model writes: its bits per character, and each character tinted by the model's surprise."""
    gr.Markdown(
        "How likely does the model find a text? It reveals the text one character at a time, left to right, and "
        "adds up -log2 p of each true character given those before it: the exact likelihood, in bits per character "
        f"(lower: less surprised). At most {model.block_size} characters, the model's context."
    )
    with gr.Row():
        with gr.Column(scale=1, min_width=300):
            text = gr.Textbox(label="Text to score", value=sample_passage(texts, model.block_size), lines=6)
            button = gr.Button("Score", variant="primary")
        with gr.Column(scale=2):
            waiting = placeholder("Press Score: each character is tinted by the model's surprise.")
            view, summary = gr.HTML(waiting, elem_id="score-view"), gr.Markdown(elem_id="score-summary")
    scored = event(score, dict(text=text), model=model, on_model=False)  # it sends its passes there itself
    button.click(**scored, outputs=[view, summary], api_name="score")


def how_it_works_tab(model: MDLM, demo: gr.Blocks, tab: gr.Tab, texts: DemoText) -> None:
    """The forward process on a line of the sample text, the accuracy plot marked at its t, and how the reverse
    process reveals."""
    gr.Markdown(
        "**Forward process.** Each character is replaced by a mask independently with probability t. "
        "The model sees the masked line (x_t) and predicts every masked character at once; under each wrong "
        "guess is the true character. Training teaches it to do this for every t; generation runs it in reverse, "
        "from t = 1 (all masks) to t = 0."
    )
    with gr.Row():
        line = gr.Textbox(
            label=sample_label(texts),
            value=sample_line(texts, model.block_size),
            scale=3,
            min_width=240,
        )
        mask_ratio = gr.Slider(0, 1, value=0.3, step=0.01, label="Mask ratio t", scale=2, min_width=200)
        seed = gr.Number(value=0, label="Seed", scale=1, min_width=90)
    view, summary = gr.HTML(elem_id="forward-view"), gr.Markdown(elem_id="forward-summary")
    forward = event(forward_process, dict(line=line, t=mask_ratio, seed=seed), model=model)
    outputs = [view, summary]
    # change, not release: typing into the slider's number box must update the views too
    mask_ratio.change(**forward, outputs=outputs, api_name=False, trigger_mode="always_last", show_progress="hidden")
    for trigger in (line.submit, seed.submit):
        trigger(**forward, outputs=outputs, api_name=False)
    gr.Button("Mask and predict", size="sm").click(**forward, outputs=outputs, api_name="forward_process")
    demo.load(**forward, outputs=outputs, api_name=False)
    # measured on the tab's first visit (a few seconds on a CPU), not at start-up, then kept for every visitor; the
    # Plot's own label would sit over the figure's title on a phone: the figure's title says it all
    plot = gr.Plot(show_label=False, elem_id="accuracy-plot")
    draw = event(accuracy_plot_once(model, texts), dict(t=mask_ratio), on_model=False)  # measured in pieces
    tab.select(**draw, outputs=plot, api_name=False)
    mask_ratio.change(**draw, outputs=plot, api_name=False, trigger_mode="always_last", show_progress="hidden")
    gr.Markdown(
        "**Reverse process.** Generation starts from all masks. Each step predicts every masked "
        "character, draws a candidate for each (temperature, min-p), and reveals a few of them: by default "
        "those the model is surest of, lowest entropy first (*entropy order*), kept apart (*spacing*), since "
        "characters revealed together are drawn independently. The order matters for a play's shape: choosing "
        "positions by how likely their drawn character came out (*confidence order*) keeps the lucky draws, so "
        "line breaks and colons are fixed first and speaker names are squeezed in between; entropy order "
        "chooses before drawing, so one character a step it would write just what the model writes left to "
        "right. "
        "*Min-p* 0.1 cuts the far tail where misspelt names come from, and temperature 1.1 gives back the "
        "surprise the cut takes. The other rules stay here to try: the "
        "*order temperature* draws which positions to reveal instead of following the order strictly; the "
        "*prior weight* lifts rare characters the context makes likely; *remasking* takes back the least "
        "confident earlier characters (shown as red masks) so they are redrawn with more context. The "
        "defaults come from the structure suite in docs/benchmarks.md."
    )


def build_demo(model: MDLM, known_words: set[str] | None = None, metadata: dict | None = None) -> gr.Blocks:
    """The whole UI for one loaded model (`metadata`: its demo.json, see `demo_texts`): the layout of its tabs."""
    texts = demo_texts(model, metadata)
    heading = f"{texts.subject[:1].upper()}{texts.subject[1:]} from masks"
    with gr.Blocks(title=f"mdlm_hf: {heading}") as demo:
        gr.Markdown(
            f"# {texts.emoji + ' ' if texts.emoji else ''}{heading}\n"
            f"A {model.num_parameters() / 1e6:.1f}M-parameter character-level **masked diffusion language model**. "
            "It starts from a canvas of masks and reveals characters in any order over a few denoising steps; "
            "prompting and infilling are the same operation with some characters given."
        )
        # wrap, not gradio's "..." menu: on a phone every tab stays one tap away
        with gr.Tabs(overflow_behavior="wrap"):
            with gr.Tab("Generate"):
                generate_tab(model, demo, texts)
            with gr.Tab("Infill"):
                infill_tab(model, demo, texts)
            with gr.Tab("Compare"):
                compare_tab(model, known_words, demo, texts)
            with gr.Tab("Score"):
                score_tab(model, texts)
            with gr.Tab("How it works") as how_it_works:
                how_it_works_tab(model, demo, how_it_works, texts)
    return demo


@torch.no_grad()
def warm_up(model: MDLM) -> None:
    """One full-length sampling pass: the fast path times fp32 against bf16 and makes its copy (about a second on a
    CPU), so that the first visitor's run does not pay for it."""
    device = next(model.parameters()).device
    model.denoise(torch.full((1, model.block_size), model.mask_id, device=device), torch.ones(1, device=device))


def main(argv: list[str] | None = None) -> None:
    """Loads the model (--model) onto --device and serves the app, as MCP tools too when the MCP extra is here."""
    parser = argparse.ArgumentParser(description="mdlm_hf demo")
    parser.add_argument(
        "--model",
        default=os.environ.get(MODEL_ENV_VAR, str(DEFAULT_MODEL)),
        help=f"local directory or Hub repo id (default: ${MODEL_ENV_VAR} or the shipped checkpoint)",
    )
    parser.add_argument("--host", default=None, help="e.g. 0.0.0.0 to serve the network")
    parser.add_argument("--port", type=int, default=None)
    parser.add_argument("--device", default="auto", help="auto (cuda if available, else cpu), cpu, cuda or cuda:N")
    args = parser.parse_args(argv)
    try:
        device = resolve_device(args.device)
    except ValueError as error:
        sys.exit(f"error: {error}")
    try:
        model, known_words = on_model_thread(load_model, args.model, device)
    except Exception as error:  # one clear line instead of a traceback, whatever went wrong
        source = args.model if args.model.strip() else repr(args.model)  # "from : ..." would read as a typo
        sys.exit(f"error: could not load the model from {source}: {error}")
    demo = on_model_thread(build_demo, model, known_words, load_demo_metadata(args.model))
    MODEL_THREAD.submit(warm_up, model)  # while the server starts and the page loads; runs queue behind it
    try:
        demo.queue(default_concurrency_limit=8, max_size=64).launch(
            server_name=args.host, server_port=args.port, mcp_server=mcp_available(), theme=THEME
        )
    except OSError as error:  # above all, a port that another program holds
        where = f"port {args.port}" if args.port else "gradio's default ports"
        reason = str(error).split(". You can")[0]  # gradio's advice names launch()'s parameters, not our flags
        sys.exit(f"error: could not serve the app on {where} ({reason}); is another program using it? pass --port N")


if __name__ == "__main__":
    main()
