"""The Compare tab's race: left-to-right against confidence order on one canvas, and the autoregressive twin when the
app has one, a state of each per frame, each side's own compute time, the one-line takeaway, and each diffusion
side's order of writing."""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import gradio as gr
import torch

from mdlm_hf import MDLM, SamplerOptions, SamplerState, sample
from mdlm_hf.autoregressive import DRAWS, left_to_right_defaults
from mdlm_hf.likelihood import exact_nll
from mdlm_hf.metrics import words
from mdlm_hf.pipeline import ended, prompt_canvas
from mdlm_hf.sampling.casts import model_casts
from mdlm_hf.sampling.lexicon import model_lexicon
from mdlm_hf.sampling.orders import reveal_order
from mdlm_space.checks import check_chars, check_flag, fitted_length, run_seed
from mdlm_space.endpoints import PARAMS
from mdlm_space.handlers import word_share
from mdlm_space.order_view import PassRecorder, order_view
from mdlm_space.render import COMPARE_FONT_PX, COMPARE_ROWS, placeholder, render_canvas
from mdlm_space.texts import DemoText, demo_texts, passes, sample_passage

NO_RACE_ORDER = placeholder("After the race: each character tinted by the pass that wrote it.", rows=COMPARE_ROWS)


@dataclass
class RaceRound:
    """The race after a round: each side's latest state and own compute time so far, the takeaway ("" until every
    side is done), and what every round shares."""

    latest: dict[str, SamplerState]
    seconds: dict[str, float]
    takeaway: str
    seed: int
    num_fixed: int
    options: dict[str, SamplerOptions]
    autoregressive: bool


def race_rounds(
    model: MDLM,
    known_words: set[str] | None,
    prompt: str | None,
    length: float,
    num_steps: int,
    temperature: float,
    seed: float,
    autoregressive: bool,
    fixed_seed: bool,
    real_words: bool = False,
    keep_cast: bool = False,
    twin: MDLM | None = None,
    **rule: Any,
) -> Iterator[RaceRound]:
    """Left-to-right and confidence order on the same canvas with the same reveal rule (`rule`: the
    REVEAL_RULE_OPTIONS) where it applies, and the autoregressive `twin` when given, in turns, every side kept to
    the model's words and casts alike: a RaceRound after each round."""
    check_chars(model, prompt, "prompt")
    check_flag(autoregressive, "autoregressive")
    length, note = fitted_length(prompt, length, model.block_size)
    seed = run_seed(seed, fixed_seed)
    canvas = prompt_canvas(model, prompt, length)
    kept = dict(real_words=real_words, keep_cast=keep_cast)
    options = race_options(length, num_steps, temperature, autoregressive, dict(rule, **kept))
    runs = {name: sample(model, canvas, side, seed=seed) for name, side in options.items()}
    if twin is not None:  # its own rule, left to right with a cache; each character drawn as the others draw theirs
        words = model_lexicon(model) if real_words else None  # the model's list and casts: the twin read the same text
        casts = model_casts(model) if keep_cast else None
        side = twin_options(options["left_to_right"])
        runs["twin"] = sample(twin, canvas, side, seed=seed, lexicon=words, casts=casts)
    for latest, seconds in race(runs):
        summary = takeaway(model, latest, len(prompt), known_words, autoregressive, seconds, twin)
        summary = " ".join(filter(None, (summary, note)))
        yield RaceRound(latest, seconds, summary, seed, len(prompt), options, autoregressive)


def compare(
    model: MDLM, known_words: set[str] | None, *race_args: Any, twin: MDLM | None = None, **controls: Any
) -> Iterator[tuple[str | int, ...]]:
    """Compare tab: the race (`race_rounds`, its parameters by position or name) streamed, each side's canvas and
    statistics per round, then the one-line takeaway; last, each diffusion side's order of writing, once done."""
    orders = None
    for now in race_rounds(model, known_words, *race_args, twin=twin, **controls):
        orders = orders or RaceOrders(model, tuple(now.options), now.num_fixed)
        views = [part for name in now.options for part in compare_view(model, now, name, known_words)]
        twin_view = compare_view(twin, now, "twin", known_words) if "twin" in now.latest else ("", "")
        yield (*views, now.takeaway, now.seed, *twin_view, *orders.update(now.latest))


def race_options(
    length: int, num_steps: int, temperature: float, autoregressive: bool, rule: dict[str, Any]
) -> dict[str, SamplerOptions]:
    """Each diffusion side's options: the same reveal rule where it applies (`rule`, and real_words); left to right,
    when `autoregressive`, exactly one character per forward pass."""
    # confidence order: the rule's options apply to it (streams order, the default, has none)
    shared = SamplerOptions(order="confidence", num_steps=num_steps, temperature=temperature, **rule)
    if autoregressive:  # exactly one character per forward pass, strictly left to right, no reveal rule
        kept = dict(real_words=shared.real_words, keep_cast=shared.keep_cast)
        left_to_right = SamplerOptions.plain(order="left_to_right", num_steps=length, temperature=temperature, **kept)
    else:  # no spacing: it would reveal characters spacing apart, not the next ones in a row
        left_to_right = shared.replace(order="left_to_right", spacing=0)
    return {"left_to_right": left_to_right, "confidence": shared}


class RaceOrders:
    """Each diffusion side's order of writing, read from the race's states: its order view once the side is done
    (not the twin's: one character per pass left to right, by construction)."""

    def __init__(self, model: MDLM, names: tuple[str, ...], num_fixed: int) -> None:
        self.model, self.recorders, self.num_fixed = model, {name: PassRecorder() for name in names}, num_fixed
        self.seen: dict[str, SamplerState] = {}
        self.views = dict.fromkeys(names, NO_RACE_ORDER)

    def update(self, latest: dict[str, SamplerState]) -> list[str]:
        """The sides' order views after a round of the race (`latest`: each side's latest state)."""
        for name, recorder in self.recorders.items():
            state = latest[name]
            if state is self.seen.get(name):  # a side that has ended, while another still runs: no new pass
                continue
            self.seen[name] = state
            recorder.update(state)
            if state.done:
                # stacked at a phone's whole width, in the tab's accordion: its text does not shrink
                box = dict(rows=COMPARE_ROWS, font_px=COMPARE_FONT_PX, shrink=False)
                end = text_end(self.model, state, self.num_fixed)  # the text's, as its canvas shows it
                self.views[name] = order_view(self.model, recorder, state.tokens, end=end, **box)
        return list(self.views.values())


def twin_options(left_to_right: SamplerOptions) -> SamplerOptions:
    """The twin's options in a race: its own defaults with the left-to-right side's draw of each character
    (temperature, min-p, ...), so that only the model differs."""
    draws = {name: getattr(left_to_right, name) for name in DRAWS}
    return left_to_right_defaults().replace(**draws)


def race(runs: dict[str, Iterator[SamplerState]]) -> Iterator[tuple[dict[str, SamplerState], dict[str, float]]]:
    """The runs in turns, a state of each still running per round: each run's latest state and own compute time so
    far, after every round in which one moved."""
    latest: dict[str, SamplerState] = {}
    seconds = dict.fromkeys(runs, 0.0)  # each side's own, though they run in turns
    runs = dict(runs)
    turn = 0
    while runs:
        # each round starts with the next side: the first pass after the page's own work (rendering the last round)
        # can run slower, and a side that always went first would take that cost alone
        names = list(runs)
        first, turn = turn % len(names), turn + 1
        for name in names[first:] + names[:first]:
            start = time.perf_counter()
            state = next(runs[name], None)
            seconds[name] += time.perf_counter() - start
            if state is None:
                del runs[name]
            else:
                latest[name] = state
        if runs:  # else the last run ended without a new state: its last one is shown already
            yield latest, seconds


TAKEAWAY = "**Takeaway:**"  # how a finished race's line begins
STOPPED = "Stopped before every side finished: the passes and seconds above are theirs so far."


def race_stopped(takeaway: str | None, left_stats: str | None) -> Any:
    """The takeaway once a race's event has ended: a race that Stop cut short says so."""
    if not left_stats or (takeaway or "").startswith(TAKEAWAY):
        return gr.skip()
    return " ".join(filter(None, (STOPPED, takeaway)))


def rule_words(options: SamplerOptions, autoregressive: bool) -> str:
    """Which reveal-rule options a side of the Compare tab used, in words."""
    if options.order == "left_to_right" and autoregressive:
        return "reveal rule: none, one character per forward pass, strictly left to right (autoregressive-like)"
    parts = [
        f"order temperature {options.order_temperature:g}",
        f"remask ratio {options.remask_ratio:g}",
        f"spacing {options.spacing}"
        if options.order != "left_to_right"
        else "no spacing (left to right writes the next characters in a row)",
        f"prior weight {options.prior_weight:g}"
        if reveal_order(options.order).by_belief
        else "no prior weight (left to right scores no position)",
    ]
    return "reveal rule: " + ", ".join(parts)


def text_end(model: MDLM, state: SamplerState, num_fixed: int) -> int | None:
    """Where a finished side's text ends, as Generate's does by default (never mid-word): its canvas strikes out the
    rest. None while it runs, or where the text is the whole canvas."""
    if not state.done:
        return None
    whole = model.tokenizer.decode(state.tokens[0])
    kept = len(ended(whole, num_fixed, PARAMS["end_at"].default))
    return kept if kept < len(whole) else None


TWIN_RULE = "reveal rule: none, one character per forward pass, left to right, keys and values cached"


def compare_view(model: MDLM, now: RaceRound, name: str, known_words: set[str] | None) -> tuple[str, str]:
    """Side `name` of the Compare tab after a round (`model`: the twin's, for its side): its canvas, and its forward
    passes, the characters each pass revealed so far, its own compute time, its reveal rule and (when done) its
    share of real words."""
    state, num_fixed = now.latest[name], now.num_fixed
    rule = TWIN_RULE if name == "twin" else rule_words(now.options[name], now.autoregressive)
    shrink = False if name == "twin" else None  # the twin's takes a phone's whole width: its text does not shrink
    num_revealed = int((~state.is_masked & ~state.is_given)[0].sum())
    stats = f"{passes(state.num_forward_passes)} · {num_revealed / max(1, state.num_forward_passes):.1f} chars per pass"
    stats += f" · {now.seconds[name]:.2f} s"
    if state.done:
        stats += f" · real words: {word_share(model.tokenizer.decode(state.tokens[0, num_fixed:]), known_words)}"
    kept = text_end(model, state, num_fixed)
    canvas = render_canvas(model, state, rows=COMPARE_ROWS, font_px=COMPARE_FONT_PX, shrink=shrink, kept=kept)
    # the rule folded, one line: on a phone it ran to five lines a side, pushing the twin and the takeaway down
    small = "<span style='font-size: 12px'>{}</span>"  # <small> was 11.2 px: under 12, too small on a phone
    fell_back = 0 if state.word_fallbacks is None or not state.done else int(state.word_fallbacks[0])
    # the draws that kept no rule (real_words, keep_cast), beside the folded rule: a line more above it pushed the
    # takeaway off a phone's screen
    summary = "reveal rule" + (f" · fell back: {fell_back}" if fell_back else "")
    rule_line = f"<details><summary>{small.format(summary)}</summary>{small.format(rule)}</details>"
    return canvas, f"{stats}\n\n{rule_line}"


# a difference in seconds below this ratio, or below this many seconds whatever its ratio, is the machine's noise,
# not a result (on a shared CPU, the same race gave 1.3x, 2.0x and no difference from run to run)
CLEAR_SPEED_RATIO = 1.25
CLEAR_SPEED_SECONDS = 0.5


def takeaway(
    model: MDLM,
    states: dict[str, SamplerState],
    num_fixed: int,
    known_words: set[str] | None,
    autoregressive: bool,
    seconds: dict[str, float],
    twin: MDLM | None = None,
) -> str:
    """The Compare tab's one line once every side is done ("" before); the twin's sentence says only what is clear,
    and with a `twin` a side it reads as nonsense (`twin_reading`)."""
    if not all(state.done for state in states.values()):
        return ""
    left, right = states["left_to_right"], states["confidence"]
    texts = {name: model.tokenizer.decode(state.tokens[0, num_fixed:]) for name, state in states.items()}
    shares = {name: word_share(text, known_words) for name, text in texts.items()}
    if autoregressive:
        ratio = left.num_forward_passes / max(1, right.num_forward_passes)
        line = (
            f"{TAKEAWAY} one character per forward pass took left to right {left.num_forward_passes} passes; "
            f"confidence order wrote the same length in {right.num_forward_passes}, {ratio:.1f}x fewer "
            f"(real words: {shares['left_to_right']} left to right, {shares['confidence']} confidence order). "
            "Compare the passes, not the time: this side re-reads the whole canvas at every pass, where a real "
            "autoregressive model caches keys and values."
        )
    else:
        line = (
            f"{TAKEAWAY} same {passes(right.num_forward_passes)} and reveal rule, only the order differs: "
            f"real words {shares['left_to_right']} left to right, {shares['confidence']} confidence order."
        )
        if known_words is not None and clearly_more_words(texts["confidence"], texts["left_to_right"], known_words):
            line += " Revealing the surest characters first gives the hard ones context on both sides."
    if twin is not None:
        line += twin_reading(model, twin, {name: texts[name] for name in ("left_to_right", "confidence")})
    if "twin" in states:
        line += " " + twin_sentence(states["twin"], right, seconds["twin"], seconds["confidence"])
        if known_words is not None:
            against = f"({shares['twin']} against {shares['confidence']})"
            for better, worse, more in (("twin", "confidence", "more"), ("confidence", "twin", "fewer")):
                if clearly_more_words(texts[better], texts[worse], known_words):
                    line += f" It wrote clearly {more} real words than confidence order {against}."
    return line


# a side the twin reads at this many times real text's bits per character is nonsense, whatever its words: written
# blind (left to right, several characters a pass) the twin read 6.9-7.3 bits, word salad 4.1, real text 2.0-2.2,
# and the model's other sides 1.3-2.4
NONSENSE_RATIO = 1.6
SIDE_NAMES = {"left_to_right": "left to right", "confidence": "confidence order"}


def twin_reading(model: MDLM, twin: MDLM, texts: dict[str, str]) -> str:
    """A sentence for each diffusion side the autoregressive twin reads as nonsense (its bits per character over
    NONSENSE_RATIO times its reading of the model's real sample text): real words alone cannot tell word salad from
    sense. "" where every side reads as text, or the sample is no real text."""
    real = real_text_bits(model, twin)
    if real is None:
        return ""
    line = ""
    for name, text in texts.items():
        bits = twin_bits(twin, text) if text.strip() else 0.0
        if bits > NONSENSE_RATIO * real[1]:
            figures = f"{bits:.1f} bits a character; real text {real[1]:.1f}"
            line += f" The twin reads {SIDE_NAMES[name]} as nonsense ({figures})."
    return line


def twin_bits(twin: MDLM, text: str) -> float:
    """The twin's exact NLL of `text`, bits per character."""
    return exact_nll(twin, torch.tensor(twin.tokenizer.encode(text))) / math.log(2)


@functools.lru_cache(maxsize=4)
def real_text_bits(model: MDLM, twin: MDLM) -> tuple[str, float] | None:
    """What the model's sample text is and the twin's bits per character on it, once per pair; None where the sample
    is the model's own writing, no real text to read."""
    texts = demo_texts(model)
    if texts.sample_name == DemoText("").sample_name:
        return None
    return texts.sample_name, twin_bits(twin, sample_passage(texts, twin.block_size))


def twin_sentence(twin: SamplerState, diffusion: SamplerState, twin_seconds: float, diffusion_seconds: float) -> str:
    """What the autoregressive twin's run showed against confidence order's: its passes, and its time only where one
    side took CLEAR_SPEED_RATIO times the other's and CLEAR_SPEED_SECONDS more; else the passes, which repeat
    from run to run, against confidence order's."""
    line = f"The autoregressive twin took {passes(twin.num_forward_passes)}, one character each (its keys cached)"
    times = f"({twin_seconds:.2f} s against {diffusion_seconds:.2f} s)"
    ratio = twin_seconds / max(diffusion_seconds, 1e-9)
    if 1 / CLEAR_SPEED_RATIO < ratio < CLEAR_SPEED_RATIO:
        return f"{line}, in about confidence order's time {times}."
    if abs(twin_seconds - diffusion_seconds) < CLEAR_SPEED_SECONDS:
        return (
            f"{line}, against confidence order's {diffusion.num_forward_passes}; the times {times} are too short to "
            "call either side faster."
        )
    if ratio >= CLEAR_SPEED_RATIO:
        return f"{line}, and {ratio:.1f}x confidence order's time {times}."
    return f"{line}, and {1 / ratio:.1f}x less time than confidence order {times}."


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
