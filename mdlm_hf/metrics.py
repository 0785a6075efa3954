"""Words of a text, its speakers' headings and the valid-word rate: what the app shows of a sample (its word list
comes with an export, training/words.py), and what the sampler's word and cast rules read.

The study's other metrics (character entropy, distinct-n, the Kneser-Ney judge) live in evals/text_metrics.py.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

WORD_PATTERN = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)*")
# a speaker's name in a heading `NAME:`: one to five capitalised words (letters, apostrophes, hyphens, `&`, commas;
# "of", "the", "and" may join them): "KING RICHARD III", "First Citizen", "LADY CAPULET"
SPEAKER_NAME = re.compile(r"[A-Z][A-Za-z'\-&,]*(?: (?:[A-Z&][A-Za-z'\-&,]*|of|the|and|de|la)){0,4}")


def words(text: str) -> list[str]:
    """Lower-cased words of `text` (letters with inner apostrophes)."""
    return [w.lower() for w in WORD_PATTERN.findall(text)]


def written_words(text: str, written: list[bool]) -> list[str]:
    """Lower-cased words of `text` that hold a `written` character (not wholly a prompt's or a template's)."""
    return [m.group().lower() for m in WORD_PATTERN.finditer(text) if any(written[m.start() : m.end()])]


def word_list(text: str) -> list[str]:
    """The sorted distinct words of `text`: the vocabulary the valid-word rate checks against."""
    return sorted(set(words(text)))


def load_word_list(path: str | Path) -> set[str]:
    """Reads a word list (training/words.py writes it), lower case; one that is not UTF-8 text is a ValueError
    naming it."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"{path} is not a word list: not UTF-8 text ({error})") from None
    return {w.lower() for w in text.split("\n") if w}


def heading_name(line: str, previous: str | None) -> str | None:
    """The speaker a heading line `NAME:` names, else None; `previous` is the line above (None at the text's start).
    A heading follows a blank line or starts the text; an all-capitals one counts anywhere."""
    if not line.endswith(":") or not SPEAKER_NAME.fullmatch(name := line[:-1]):
        return None
    if previous is None or previous == "" or name.isupper():
        return name
    return None


def speakers(text: str) -> set[str]:
    """Every speaker named by a heading of a play's text."""
    lines = text.split("\n")
    return {name for i, line in enumerate(lines) if (name := heading_name(line, lines[i - 1] if i else None))}


def valid_word_rate(text: str, known_words: set[str]) -> float:
    """Share of the words of `text` that occur in `known_words` (NaN when text has no word)."""
    found = words(text)
    return sum(w in known_words for w in found) / len(found) if found else math.nan
