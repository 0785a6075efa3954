"""What the tabs' buttons run: handlers that take their inputs by name, check them, call the package and stream
frames (`endpoints.event` binds them to components)."""

from __future__ import annotations

import bisect
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import gradio as gr
import torch

from mdlm_hf import MASK_GLYPH, MDLM, READ_BETTER, SamplerOptions, SamplerState, mask_tokens, sample
from mdlm_hf.likelihood import surprise_steps
from mdlm_hf.metrics import valid_word_rate, written_words
from mdlm_hf.pipeline import check_end_at, ended, prompt_canvas, text_to_canvas, unseen_prompt_note
from mdlm_hf.sampling.drawing import GREEDY_BELOW
from mdlm_hf.sampling.orders import reveal_order
from mdlm_hf.windows import MAX_CANVAS, context_of, plan_windows
from mdlm_space.checks import (
    MAX_SEED,
    as_float,
    as_int,
    check_chars,
    check_fits,
    check_flag,
    fitted_length,
    run_seed,
)
from mdlm_space.endpoints import PARAMS
from mdlm_space.render import THROTTLED, render_canvas, too_soon, with_legend
from mdlm_space.texts import SCORING, passes, play_title, sentence
from mdlm_space.views import forward_view, score_view, shown_char

RUNNING = "…"  # the speed of a run still going: it is known once the run ends
# a run's forward passes at most: a 16,384-character text at the default 32 steps makes about 2,800; at 256 steps it
# made 22,000, and eight such calls kept a 64-character one waiting for minutes
MAX_RUN_PASSES = 4096
STOPPED_AT = " · stopped at step "  # a readout's step once Stop ended its run (`stopped`)


def running(line: str | None) -> bool:
    """Whether a readout (Generate's, Infill's) is of a run still streaming: its speed is not known yet."""
    return RUNNING in (line or "").split("\n\n", 1)[0].split(" · ")


def stopped(line: str | None) -> Any:
    """A readout (Generate's, Infill's) or Score's line after Stop: a run still going says where it stopped."""
    first, *rest = (line or "").split("\n\n", 1)
    if running(first):  # its speed part says so (a long run's window comes after it)
        parts = first.split(" · ")
        parts.remove(RUNNING)
        first = " · ".join(parts).replace(" · step ", STOPPED_AT, 1)
    elif first.startswith(f"{SCORING} "):
        first = f"Stopped: {first.removeprefix(f'{SCORING} ').replace(' characters', ' characters scored', 1)}"
    else:
        return gr.skip()
    return "\n\n".join([first, *rest])


def run_options(model: MDLM, canvas: torch.Tensor, controls: dict[str, Any], read_better: bool) -> SamplerOptions:
    """The run's options: the controls' (validated), with READ_BETTER and a step a character to write over them
    when "Write slower, read better" is ticked."""
    check_flag(read_better, "read_better")
    options = SamplerOptions().replace(**controls)
    if not read_better:
        return options
    return options.replace(**READ_BETTER).replace(num_steps=int((canvas == model.mask_id).sum()))


def capped_steps(model: MDLM, canvas: torch.Tensor, options: SamplerOptions) -> tuple[SamplerOptions, str]:
    """`options` with num_steps lowered so that the run makes at most MAX_RUN_PASSES forward passes (a long text's
    windows each take theirs), and a note saying so ("" when nothing was lowered)."""
    masked = (canvas == model.mask_id).reshape(1, -1)
    context = context_of(model.block_size, options.window_context)

    def passes(steps: int) -> int:
        windows = plan_windows(masked, model.block_size, context, steps, options.spacing)
        return sum(window.num_steps for window in windows)

    try:
        if passes(options.num_steps) <= MAX_RUN_PASSES:
            return options, ""
    except ValueError:  # a window context the sampler refuses, in its own words
        return options, ""
    # the most steps within the cap (passes grow with the steps), at least 1
    low = max(1, bisect.bisect_right(range(1, options.num_steps + 1), MAX_RUN_PASSES, key=passes))
    note = (
        f"Steps lowered from {options.num_steps} to {low}: a run makes at most {MAX_RUN_PASSES:,} forward passes, "
        "so that every visitor's run gets its turn."
    )
    return options.replace(num_steps=low), note


def readout(state: SamplerState, seconds: float, num_generated: int, seed: int, note: str = "") -> str:
    """A run's readout: seed, steps, forward passes, seconds, speed, a long text's live window, and a note."""
    speed = f"{num_generated / seconds:,.0f} chars/s" if state.done and seconds > 0 else RUNNING
    step = f"step {state.step}/{state.num_steps}"
    if state.done:  # said in words: a finished run's readout read like a running one's last frame
        of = f" of {state.num_steps}" if state.step < state.num_steps else ""  # a rule that ends early
        step = f"done in {state.step}{of} step{'' if state.num_steps == 1 else 's'}"
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


def kept_words_note(model: MDLM, state: SamplerState) -> str:
    """After a run kept to real_words or keep_cast: the words it wrote (in every row), the play its headings came
    from, and how many characters fell back to the model's own draw ("" for a run without them)."""
    if state.word_fallbacks is None:
        return ""
    fallbacks = int(state.word_fallbacks.sum())
    fell_back = (
        "none fell back"
        if fallbacks == 0
        else f"{fallbacks} character{'' if fallbacks == 1 else 's'} fell back to the model's own draw, where no "
        "character kept the rules"
    )
    notes = []
    if "real_words" in state.kept_rules:
        written = sum(
            len(written_words(model.tokenizer.decode(row), (~given).tolist()))
            for row, given in zip(state.tokens, state.is_given, strict=True)
        )
        notes.append(f"Only words it has read: {written:,} word{'' if written == 1 else 's'} written, {fell_back}.")
    if "keep_cast" in state.kept_rules and state.plays is not None:
        plays = state.plays[0]
        cast = play_title(plays[0]) if len(plays) == 1 else f"any of {len(plays)} plays (no heading written)"
        notes.append(f"One play's cast: {cast}" + ("." if notes else f", {fell_back}."))
    return " ".join(notes)


def greedy_note(options: SamplerOptions) -> str:
    """With temperature 0, the options that still draw at random, in a sentence ("" if none, or above 0)."""
    if options.temperature >= GREEDY_BELOW:
        return ""
    drawing = []
    if reveal_order(options.order).at_random:
        drawing.append(f"the {options.order.replace('_', ' ')} order")
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


# where a generated text ended, from the whitespace it was cut at (mdlm_hf.pipeline.ended: at the last speech end,
# else line end, else word end)
ENDED_AT = {"speech": "the end of a speech", "line": "the end of a line", "word": "the end of a word"}


def end_reached(cut_off: str) -> str:
    """Which end a text reached ("speech", "line" or "word"), from the written characters `cut_off` after it."""
    gap = cut_off[: len(cut_off) - len(cut_off.lstrip())]
    return "speech" if "\n\n" in gap else "line" if "\n" in gap else "word"


def end_words(end_at: str, reached: str, kept: int, written: int) -> str:
    """Where a text ended, asked to end `end_at` and cut where it `reached` (`end_reached`), in a sentence."""
    ranks = list(ENDED_AT)[::-1]  # word, line, speech: a speech's end is a line's end too
    counts = f"{kept:,} of {written:,} written characters kept."
    if ranks.index(reached) >= ranks.index(end_at):
        return f"Ended at {ENDED_AT[end_at]}: {counts}"
    # the text holds no end of the kind asked for: it fell back to a shorter one
    return f"No {end_at} ended in the text, so it ended at {ENDED_AT[reached]}: {counts}"


def frames(
    model: MDLM,
    states: Iterator[SamplerState],
    num_fixed: int,
    seed: int,
    note: str = "",
    prompt_length: int | None = None,
    end_at: str = "length",
) -> Iterator[tuple[str, str, str, int]]:
    """(canvas HTML, text, readout, seed) for every state (THROTTLED for one `too_soon` to draw). The text: the
    canvas so far, masks as glyphs, so that a stopped run leaves it too; once done, the finished text, ending
    `end_at` after a prompt of `prompt_length` (whose readout says how much of a long one the model read)."""
    start_time, last_frame = time.perf_counter(), -math.inf
    for state in states:
        now = time.perf_counter()
        if too_soon(model, state, now - last_frame):
            yield THROTTLED  # a step all the same: each of the model thread's jobs stays one step (its lanes)
            continue
        last_frame = now
        if state.step == 0 and prompt_length is not None:
            note = " ".join(filter(None, (note, sentence(unseen_prompt_note(state, prompt_length) or ""))))
        seconds = time.perf_counter() - start_time
        shown, cut_at = note, None
        text = model.tokenizer.decode(state.tokens[0, : (state.window or (0, None))[1]])
        if not state.done and len(text) < state.tokens.size(1):  # more to write: a glyph says so, so that text
            text += MASK_GLYPH  # whose windows so far are written is never taken for finished (the Rewrite panel)
        if state.done:
            whole = model.tokenizer.decode(state.tokens[0])
            text = ended(whole, prompt_length or 0, end_at)
            if len(text) < len(whole):
                kept, written = len(text) - (prompt_length or 0), len(whole) - (prompt_length or 0)
                cut = end_words(end_at, end_reached(whole[len(text) :]), kept, written)
                shown, cut_at = " ".join(filter(None, (note, cut))), len(text)
            shown = " ".join(filter(None, (shown, kept_words_note(model, state))))
        num_generated = state.tokens.size(1) - num_fixed
        canvas = with_legend(render_canvas(model, state, kept=cut_at))
        yield canvas, text, readout(state, seconds, num_generated, seed, shown), seed


def generate(
    model: MDLM,
    prompt: str | None,
    length: float,
    seed: float,
    fixed_seed: bool,
    end_at: str = PARAMS["end_at"].default,
    read_better: bool = PARAMS["read_better"].default,
    **controls: Any,
) -> Iterator[tuple]:
    """Generate tab: the prompt followed by up to `length` generated characters (fewer where the prompt leaves less
    room, as the readout says), ending `end_at`, streamed step by step (window by window past the context)."""
    check_chars(model, prompt, "prompt")  # before any length: an unknown character is the problem to fix first
    check_end_at(end_at)
    length, note = fitted_length(prompt, length, MAX_CANVAS)
    canvas = prompt_canvas(model, prompt, length)
    yield from sampled(
        model, canvas, seed, fixed_seed, read_better, controls, note, prompt_length=len(prompt), end_at=end_at
    )


def infill(
    model: MDLM,
    template: str | None,
    seed: float,
    fixed_seed: bool,
    blank: str = "_",
    read_better: bool = PARAMS["read_better"].default,
    **controls: Any,
) -> Iterator[tuple]:
    """Infill tab: every `blank` of the template filled in, streamed step by step."""
    check_chars(model, template, "template", blank)
    check_fits(template, "template", MAX_CANVAS, f"a run writes at most {MAX_CANVAS:,} characters")
    canvas = text_to_canvas(model, template, blank)
    yield from sampled(model, canvas, seed, fixed_seed, read_better, controls)


def sampled(
    model: MDLM,
    canvas: torch.Tensor,
    seed: float,
    fixed_seed: bool,
    read_better: bool,
    controls: dict[str, Any],
    note: str = "",
    **shown: Any,
) -> Iterator[tuple]:
    """Generate's and Infill's run of `canvas` with the controls' options, its steps capped, as `frames` (`shown`:
    their prompt_length and end_at), `note` first in the readout."""
    seed = run_seed(seed, fixed_seed)
    options = run_options(model, canvas, controls, read_better)  # validated
    options, capped = capped_steps(model, canvas, options)
    states = sample(model, canvas, options, seed=seed)
    note = " ".join(filter(None, (note, capped, greedy_note(options))))
    yield from frames(model, states, int((canvas != model.mask_id).sum()), seed, note, **shown)


@dataclass(frozen=True)
class ForwardGuesses:
    """A line masked at ratio t, and the model's guess at every position (the How it works tab's forward process)."""

    line: str
    is_masked: list[bool]
    guesses: list[str]

    @property
    def num_masked(self) -> int:
        return sum(self.is_masked)

    @property
    def num_restored(self) -> int:
        return sum(m and g == c for c, m, g in zip(self.line, self.is_masked, self.guesses, strict=True))

    def summary(self) -> str:
        """How many characters were masked and how many the model restored, in words."""
        masked, restored = self.num_masked, self.num_restored
        if not masked:
            return "nothing masked at this t: raise the slider"
        return (
            f"{masked} of {len(self.line)} characters masked; the model restores {restored} ({restored / masked:.0%})"
        )


def forward_guesses(model: MDLM, line: str | None, t: float, seed: float) -> ForwardGuesses:
    """The line masked at ratio t (each character with probability t, drawn from `seed`) and the model's guesses."""
    check_chars(model, line, "line")
    if not line:
        raise ValueError("enter a line of at least one character")
    check_fits(line, "line", model.block_size, f"the model's context is {model.block_size} characters")
    tokens = torch.tensor([model.tokenizer.encode(line)], device=next(model.parameters()).device)
    generator = torch.Generator().manual_seed(as_int(seed, "seed", 0, MAX_SEED))
    t = as_float(t, "mask ratio", 0.0, 1.0)
    noisy, is_masked = mask_tokens(tokens, torch.tensor([t]), model.mask_id, generator)
    with torch.inference_mode():
        predictions = model(noisy).argmax(dim=-1)
    guesses = [model.tokenizer.vocab[i] for i in predictions[0].tolist()]
    return ForwardGuesses(line, is_masked[0].tolist(), guesses)


def forward_process(model: MDLM, line: str | None, t: float, seed: float) -> tuple[str, str]:
    """How it works tab: the line masked at ratio t, the model's guesses column by column, and how many are right."""
    masked = forward_guesses(model, line, t, seed)
    return forward_view(masked.line, masked.is_masked, masked.guesses), masked.summary()


SCORE_MAX_CHARS = 2048  # read window by window past the context: 2,048 canvases, 22 s on two CPU cores (fast path)
SCORE_BATCH = 16  # characters scored per forward pass: one canvas each, batched (the same numbers, fewer calls);
# on the fast path 8-16 beat 32 (3.1 s against 3.4 s for 256 characters) and 64-128 lost (4.9-5.8 s)
SCORE_FAST = True  # Score's passes run where Generate's do (the fast path: bf16 weights where faster; 2.2-2.3x, and
# 0.001 bits per character from fp32 on Sonnet 18; benchmarks/app_latency.py --score)


def check_score_text(model: MDLM, text: str | None) -> None:
    """A gr.Error unless `text` is text Score reads: not empty, in the model's characters, not too long."""
    check_chars(model, text, "text")
    if not text:
        raise gr.Error("paste some text to score")
    check_fits(text, "text", SCORE_MAX_CHARS, f"Score reads at most {SCORE_MAX_CHARS:,} characters")


def scored(model: MDLM, text: str | None) -> Iterator[tuple[list[float], int]]:
    """Each character's surprise in bits (NaN: not scored yet) and the forward passes so far, after every pass of
    Score's exact left-to-right chain rule (SCORE_BATCH characters a pass; window by window past the context)."""
    check_score_text(model, text)
    tokens = torch.tensor(model.tokenizer.encode(text))
    for num_passes, nats in enumerate(surprise_steps(model, tokens, SCORE_BATCH, fast=SCORE_FAST), 1):
        yield (nats.cpu() / math.log(2)).tolist(), num_passes


def score(model: MDLM, text: str | None) -> Iterator[tuple[str, str]]:
    """Score tab: the text's bits per character under the model (`scored`) and each character tinted by the model's
    surprise, streamed as it goes."""
    most = math.log2(len(model.tokenizer.vocab))
    check_score_text(model, text)
    # at once, before the first pass (seconds on a CPU): the page said nothing, and a Stop there left it blank
    yield score_view(text, [math.nan] * len(text), most), f"{SCORING} 0 of {len(text):,} characters"
    for bits, num_passes in scored(model, text):
        done = sum(b == b for b in bits)
        if done < len(text):
            yield score_view(text, bits, most), f"{SCORING} {done:,} of {len(text):,} characters ({passes(num_passes)})"
    yield score_view(text, bits, most), score_summary(model, text, bits, num_passes)


def score_summary(model: MDLM, text: str, bits: list[float], num_passes: int) -> str:
    """The Score tab's line once every character is scored: bits per character, how, and the most surprising."""
    worst = max(range(len(text)), key=bits.__getitem__)
    how = "exact negative log-likelihood, left to right"
    if len(text) > model.block_size:
        how = f"left to right, each character read with at least {model.block_size // 2} before it"
    weights = str(model.denoise_dtype if SCORE_FAST else model.lm_head.weight.dtype).removeprefix("torch.")
    return (
        f"**{sum(bits) / len(bits):.3f} bits per character** over {len(text):,} "
        f"character{'' if len(text) == 1 else 's'} ({how}: one canvas per "
        f"character, {SCORE_BATCH} per pass, {passes(num_passes)}, {weights} weights). Most surprising: "
        f"«{shown_char(text[worst])}» at position {worst + 1:,}, {bits[worst]:.1f} bits."  # a comma reads as one
    )
