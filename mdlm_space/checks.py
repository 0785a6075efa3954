"""Input checks of the app: each turns a bad value from the page or the API into one gr.Error line naming it."""

from __future__ import annotations

import math
import secrets

import gradio as gr

from mdlm_hf import MDLM
from mdlm_hf.pipeline import check_text

MAX_SEED = 2**31 - 1


def as_number(value: object, name: str) -> float:
    """A UI number (or a string of one) as a float, or a gr.Error naming the problem; a bool is no number, though
    Python reads True as 1."""
    try:
        if isinstance(value, bool):
            raise TypeError
        return float(value)
    except (TypeError, ValueError):
        raise gr.Error(f"{name} must be a number, got {value!r}") from None


def as_int(value: object, name: str, low: int, high: int) -> int:
    """A UI number as an int within [low, high], or a gr.Error naming the problem."""
    number = as_number(value, name)
    if not math.isfinite(number) or number != int(number) or not low <= number <= high:  # int(inf) would raise
        raise gr.Error(f"{name} must be a whole number between {low} and {high}, got {value!r}")
    return int(number)


def as_float(value: object, name: str, low: float, high: float) -> float:
    """A UI number as a float within [low, high], or a gr.Error naming the problem."""
    number = as_number(value, name)
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


def check_chars(model: MDLM, text: object, what: str, blank: str = "") -> None:
    """A ValueError unless `text` is a string, and a gr.Error naming its characters (`blank` aside) outside the
    model's vocabulary, and the ones it writes."""
    check_text(text, what)
    unknown = model.tokenizer.unknown_chars(text.replace(blank, ""))
    if unknown:
        count = "1 character" if len(unknown) == 1 else f"{len(unknown)} characters"
        raise gr.Error(
            f"the {what} has {count} outside the model's vocabulary: {', '.join(map(repr, unknown))}; "
            f"it writes only {vocabulary_words(model.tokenizer.vocab)}"
        )


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


def check_fits(text: str, what: str, limit: int, why: str) -> None:
    """A gr.Error, in plain words, when `text` is longer than `limit` characters (`why`: what sets the limit)."""
    if len(text) > limit:
        raise gr.Error(f"the {what} has {len(text):,} characters, but {why}: shorten it")
