"""Words of a text and the valid-word rate: what the app shows of a sample (its word list comes with an export).

The study's other metrics (character entropy, distinct-n, the Kneser-Ney judge) live in evals/text_metrics.py.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

WORD_PATTERN = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)*")


def words(text: str) -> list[str]:
    """Lower-cased words of `text` (letters with inner apostrophes)."""
    return [w.lower() for w in WORD_PATTERN.findall(text)]


def written_words(text: str, written: list[bool]) -> list[str]:
    """Lower-cased words of `text` that hold a `written` character (not wholly a prompt's or a template's)."""
    return [m.group().lower() for m in WORD_PATTERN.finditer(text) if any(written[m.start() : m.end()])]


def word_list(text: str) -> list[str]:
    """The sorted distinct words of `text`: the vocabulary the valid-word rate checks against."""
    return sorted(set(words(text)))


def save_word_list(text: str, path: str | Path) -> None:
    """Writes the word list of `text`, one word per line."""
    Path(path).write_text("\n".join(word_list(text)) + "\n", encoding="utf-8")


def load_word_list(path: str | Path) -> set[str]:
    """Reads a word list written by `save_word_list`; one that is not UTF-8 text is a ValueError naming it."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"{path} is not a word list: not UTF-8 text ({error})") from None
    return {w for w in text.split("\n") if w}


def valid_word_rate(text: str, known_words: set[str]) -> float:
    """Share of the words of `text` that occur in `known_words` (NaN when text has no word)."""
    found = words(text)
    return sum(w in known_words for w in found) / len(found) if found else math.nan
