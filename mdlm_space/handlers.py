"""What the tabs' buttons run: module-level handlers that take their inputs by name, check them, call the package
and stream frames (`event` in endpoints.py binds them to components)."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from typing import Any

import gradio as gr
import torch

from mdlm_hf import MDLM, SamplerOptions, SamplerState, mask_tokens, sample
from mdlm_hf.autoregressive import DRAWS
from mdlm_hf.diffusion import surprise_steps
from mdlm_hf.metrics import valid_word_rate, words
from mdlm_hf.pipeline import check_end_at, check_text, ended, prompt_canvas, text_to_canvas, unseen_prompt_note
from mdlm_hf.sampler import GREEDY_BELOW, SCORED_ORDERS
from mdlm_hf.windows import MAX_CANVAS
from mdlm_space.checks import (
    MAX_SEED,
    as_float,
    as_int,
    check_chars,
    check_fits,
    check_flag,
    fitted_length,
    option_value,
    run_seed,
)
from mdlm_space.endpoints import PARAMS
from mdlm_space.render import COMPARE_FONT_PX, COMPARE_ROWS, LEGEND, forward_view, render_canvas, score_view, shown_char
from mdlm_space.texts import END_AT_WORDS, passes


def readout(state: SamplerState, seconds: float, num_generated: int, seed: int, note: str = "") -> str:
    """Seed, steps, forward passes, seconds and characters per second of a (possibly unfinished) run, where a long
    text's live window is, and a note."""
    speed = f"{num_generated / seconds:,.0f} chars/s" if state.done and seconds > 0 else "…"
    step = f"step {state.step}/{state.num_steps}"
    if state.done and state.step < state.num_steps:  # a rule that ends early (streams order on short blanks)
        step = f"done in {state.step} of {state.num_steps} steps"
    line = f"seed {seed} · {step} · {passes(state.num_forward_passes)} · {seconds:.2f} s · {speed}"
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
    """(canvas HTML, text, readout, seed) for every state, as the sampler computes it. The text is the canvas so far,
    masks as glyphs (up to a long text's live window), so that a stopped run leaves its canvas there too; once done,
    the finished text. With a prompt (`prompt_length`), the readout says how much of a long one the model read, and
    the finished text ends `end_at`."""
    start_time = time.perf_counter()
    for state in states:
        if state.step == 0 and prompt_length is not None:
            note = " ".join(filter(None, (note, (unseen_prompt_note(state, prompt_length) or "").capitalize())))
        seconds = time.perf_counter() - start_time
        shown = note
        text = model.tokenizer.decode(state.tokens[0, : (state.window or (0, None))[1]])
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
    end_at: str = PARAMS["end_at"].default,
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
    twin: MDLM | None = None,
    **rule: Any,
) -> Iterator[tuple[str, str, str, str, str, int, str, str]]:
    """Compare tab: left-to-right and confidence order on the same canvas, with the same reveal rule (`rule`: the
    REVEAL_RULE_OPTIONS) where it applies, and the autoregressive `twin` (when the app has one) writing the same
    length with its key-value cache; streamed together, a state of each per frame, then a one-line takeaway."""
    check_text(prompt, "prompt")
    check_chars(model, prompt, "prompt")
    check_flag(autoregressive, "autoregressive")
    length, note = fitted_length(prompt, length, model.block_size)
    seed = run_seed(seed, fixed_seed)
    canvas = prompt_canvas(model, prompt, length)
    rule = {name: option_value(name, value) for name, value in rule.items()}
    shared = SamplerOptions(  # confidence order: the rule's options apply to it (streams order, the default, has none)
        order="confidence",
        num_steps=option_value("num_steps", num_steps),
        temperature=option_value("temperature", temperature),
        **rule,
    )
    options = {
        # autoregressive-like: exactly one character per forward pass, strictly left to right, no reveal rule
        "left_to_right": SamplerOptions.plain(order="left_to_right", num_steps=length, temperature=temperature)
        if autoregressive
        else shared.replace(order="left_to_right"),
        "confidence": shared.replace(order="confidence"),
    }
    runs = {name: sample(model, canvas, side, seed=seed) for name, side in options.items()}
    if twin is not None:  # its own rule, left to right with a cache; each character drawn as the others draw theirs
        runs["twin"] = sample(twin, canvas, twin_options(shared), seed=seed)
    for latest, seconds in race(runs):
        views = [
            compare_view(
                model, latest[name], len(prompt), known_words, rule_words(options[name], autoregressive), seconds[name]
            )
            for name in options
        ]
        twin_view = ("", "")
        if "twin" in latest:
            twin_rule = "reveal rule: none, one character per forward pass, left to right, keys and values cached"
            twin_view = compare_view(twin, latest["twin"], len(prompt), known_words, twin_rule, seconds["twin"])
        summary = takeaway(model, latest, len(prompt), known_words, autoregressive, seconds)
        yield (*(part for view in views for part in view), " ".join(filter(None, (summary, note))), seed, *twin_view)


def twin_options(shared: SamplerOptions) -> SamplerOptions:
    """The twin's options in a race: its own left-to-right defaults, with the other sides' draw of each character
    (temperature, min-p, top-p, ...), so that only the model and its order differ."""
    draws = {name: getattr(shared, name) for name in DRAWS}
    return SamplerOptions.default_for_causal().replace(**draws)


def race(runs: dict[str, Iterator[SamplerState]]) -> Iterator[tuple[dict[str, SamplerState], dict[str, float]]]:
    """The runs in turns, a state of each still running per round: yields each run's latest state and its own compute
    time so far, after every round in which one moved."""
    latest: dict[str, SamplerState] = {}
    seconds = dict.fromkeys(runs, 0.0)  # each side's own, though they run in turns
    runs = dict(runs)
    while runs:
        for name in list(runs):
            start = time.perf_counter()
            state = next(runs[name], None)
            seconds[name] += time.perf_counter() - start
            if state is None:
                del runs[name]
            else:
                latest[name] = state
        if runs:  # else the last run ended without a new state: its last one is shown already
            yield latest, seconds


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
    model: MDLM, state: SamplerState, num_fixed: int, known_words: set[str] | None, rule: str, seconds: float
) -> tuple[str, str]:
    """One side of the Compare tab: its canvas, and its forward passes, the characters each pass revealed so far,
    its own compute time, its reveal rule and (when done) its share of real words."""
    num_revealed = int((~state.is_masked & ~state.is_given)[0].sum())
    stats = f"{passes(state.num_forward_passes)} · {num_revealed / max(1, state.num_forward_passes):.1f} chars per pass"
    stats += f" · {seconds:.2f} s"
    if state.done:
        stats += f" · real words: {word_share(model.tokenizer.decode(state.tokens[0, num_fixed:]), known_words)}"
    return render_canvas(model, state, rows=COMPARE_ROWS, font_px=COMPARE_FONT_PX), f"{stats}\n\n<small>{rule}</small>"


# a difference in seconds below this ratio is the machine's noise, not a result (runs of a few hundred milliseconds)
CLEAR_SPEED_RATIO = 1.25


def takeaway(
    model: MDLM,
    states: dict[str, SamplerState],
    num_fixed: int,
    known_words: set[str] | None,
    autoregressive: bool,
    seconds: dict[str, float] | None = None,
) -> str:
    """The Compare tab's one line once every side is done ("" before); the twin's sentence says only what is clear."""
    if not all(state.done for state in states.values()):
        return ""
    left, right = states["left_to_right"], states["confidence"]
    shares = {
        name: word_share(model.tokenizer.decode(state.tokens[0, num_fixed:]), known_words)
        for name, state in states.items()
    }
    texts = {name: model.tokenizer.decode(state.tokens[0, num_fixed:]) for name, state in states.items()}
    if autoregressive:
        ratio = left.num_forward_passes / max(1, right.num_forward_passes)
        line = (
            f"**Takeaway:** one character per forward pass took left to right {left.num_forward_passes} passes; "
            f"confidence order wrote the same length in {right.num_forward_passes}, {ratio:.1f}x fewer "
            f"(real words: {shares['left_to_right']} left to right, {shares['confidence']} confidence order). "
            "Compare the passes, not the time: this side re-reads the whole canvas at every pass, where a real "
            "autoregressive model caches keys and values."
        )
    else:
        line = (
            f"**Takeaway:** same {passes(right.num_forward_passes)} and reveal rule, only the order differs: "
            f"real words {shares['left_to_right']} left to right, {shares['confidence']} confidence order."
        )
        if known_words is not None and clearly_more_words(texts["confidence"], texts["left_to_right"], known_words):
            line += " Revealing the surest characters first gives the hard ones context on both sides."
    if "twin" in states and seconds is not None:
        line += " " + twin_sentence(states["twin"], right, seconds["twin"], seconds["confidence"])
        if known_words is not None:
            against = f"({shares['twin']} against {shares['confidence']})"
            for better, worse, more in (("twin", "confidence", "more"), ("confidence", "twin", "fewer")):
                if clearly_more_words(texts[better], texts[worse], known_words):
                    line += f" It wrote clearly {more} real words than confidence order {against}."
    return line


def twin_sentence(twin: SamplerState, diffusion: SamplerState, twin_seconds: float, diffusion_seconds: float) -> str:
    """What the autoregressive twin's run showed against confidence order's: its passes, and its time only where one
    side took CLEAR_SPEED_RATIO times the other's."""
    line = f"The autoregressive twin took {passes(twin.num_forward_passes)}, each over one new character"
    times = f"({twin_seconds:.2f} s against {diffusion_seconds:.2f} s)"
    ratio = twin_seconds / max(diffusion_seconds, 1e-9)
    if ratio >= CLEAR_SPEED_RATIO:
        return f"{line}, and {ratio:.1f}x confidence order's time {times}."
    if ratio <= 1 / CLEAR_SPEED_RATIO:
        return f"{line}, and {1 / ratio:.1f}x less time than confidence order {times}."
    return f"{line}, in about confidence order's time {times}."


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


SCORE_MAX_CHARS = 2048  # read window by window past the context: 2,048 canvases, about 80 s on two CPU cores
SCORE_BATCH = 32  # characters scored per forward pass: one canvas each, batched (the same numbers, fewer calls)


def score(model: MDLM, text: str | None) -> Iterator[tuple[str, str]]:
    """Score tab: the text's bits per character under the model (the exact left-to-right chain rule: each character
    read with those before it and masks after it, SCORE_BATCH characters per forward pass; window by window past
    the model's context) and each character tinted by how surprised the model was by it, streamed as it goes."""
    check_text(text, "text")
    if not text:
        raise gr.Error("paste some text to score")
    check_chars(model, text, "text")
    check_fits(text, "text", SCORE_MAX_CHARS, f"Score reads at most {SCORE_MAX_CHARS:,} characters")
    most = math.log2(len(model.tokenizer.vocab))
    tokens = torch.tensor(model.tokenizer.encode(text))
    num_passes = 0
    for nats in surprise_steps(model, tokens, SCORE_BATCH):
        num_passes += 1
        bits = (nats.cpu() / math.log(2)).tolist()
        done = sum(b == b for b in bits)
        if done < len(text):
            yield score_view(text, bits, most), f"Scoring… {done:,} of {len(text):,} characters ({passes(num_passes)})"
    yield score_view(text, bits, most), score_summary(model, text, bits, num_passes)


def score_summary(model: MDLM, text: str, bits: list[float], num_passes: int) -> str:
    """The Score tab's line once every character is scored: bits per character, how, and the most surprising."""
    worst = max(range(len(text)), key=bits.__getitem__)
    how = "exact negative log-likelihood, left to right"
    if len(text) > model.block_size:
        how = f"left to right, each character read with at least {model.block_size // 2} before it"
    return (
        f"**{sum(bits) / len(bits):.3f} bits per character** over {len(text):,} characters ({how}: one canvas per "
        f"character, {SCORE_BATCH} per pass, {passes(num_passes)}). Most surprising: "
        f"{shown_char(text[worst])} at position {worst + 1:,}, {bits[worst]:.1f} bits."
    )
