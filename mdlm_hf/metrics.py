"""Words of a text, its speakers' headings and the valid-word rate: what the app shows of a sample (its word list
comes with an export), and what the sampler's word and cast rules read.

The study's other metrics (character entropy, distinct-n, the Kneser-Ney judge) live in evals/text_metrics.py.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from pathlib import Path

WORD_PATTERN = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)*")
# a speaker's name in a heading `NAME:`: one to five capitalised words (letters, apostrophes, hyphens, `&`, commas;
# "of", "the", "and" may join them): "KING RICHARD III", "First Citizen", "LADY CAPULET"
SPEAKER_NAME = re.compile(r"[A-Z][A-Za-z'\-&,]*(?: (?:[A-Z&][A-Za-z'\-&,]*|of|the|and|de|la)){0,4}")
# a mid-sentence capital: after a letter, a comma, a semicolon or a dash and a space (not a line's or sentence's start)
MID_SENTENCE = re.compile(r"(?<=[A-Za-z,;\-] )[A-Z][a-z]+(?:'[A-Za-z]+)*")


def words(text: str) -> list[str]:
    """Lower-cased words of `text` (letters with inner apostrophes)."""
    return [w.lower() for w in WORD_PATTERN.findall(text)]


def written_words(text: str, written: list[bool]) -> list[str]:
    """Lower-cased words of `text` that hold a `written` character (not wholly a prompt's or a template's)."""
    return [m.group().lower() for m in WORD_PATTERN.finditer(text) if any(written[m.start() : m.end()])]


def word_list(text: str) -> list[str]:
    """The sorted distinct words of `text`: the vocabulary the valid-word rate checks against."""
    return sorted(set(words(text)))


def capitalised_words(text: str) -> set[str]:
    """The words (lower case) that `text` only ever writes capitalised and at least once mid-sentence: names
    ("silvia", "rome") and "i", not words that are capitalised only because they start a line."""
    lower_keys = {w.lower() for w in WORD_PATTERN.findall(text) if w[0].islower()}
    return {w.lower() for w in MID_SENTENCE.findall(text)} - lower_keys | ({"i"} - lower_keys)


# the words of one letter that English writes as words; "e", "t" or "s" are fragments ("o' the", "'t", a French "e")
LETTER_WORDS = frozenset({"a", "i", "o"})
# a line where at least this share of its words (of three or more) occur at most twice in the whole text reads as a
# foreign-language passage (the French lesson in Henry V, solfege's "ut re sol"); its words seen once are left out
FOREIGN_SHARE = 0.75


def not_words(text: str) -> set[str]:
    """The words of `text` a word list leaves out: single letters but "a", "I" and "O", and the words seen once
    inside a foreign-language passage (`FOREIGN_SHARE`), which would let nonsense pass as real words."""
    counts = Counter(words(text))
    left_out = {w for w in counts if len(w) == 1 and w not in LETTER_WORDS}
    for line in text.split("\n"):
        found = words(line)
        if len(found) >= 3 and sum(counts[w] <= 2 for w in found) >= FOREIGN_SHARE * len(found):
            left_out |= {w for w in found if counts[w] == 1}
    return left_out


def word_list_as_written(text: str) -> list[str]:
    """The word list of `text` with its names as it writes them: each word in lower case, but for those it only
    ever writes capitalised (`capitalised_words`), which keep their capital ("Silvia"); `not_words` left out."""
    names = capitalised_words(text)
    return sorted(w.capitalize() if w in names else w for w in set(words(text)) - not_words(text))


def save_word_list(text: str, path: str | Path) -> int:
    """Writes the word list of `text`, one word per line, names capitalised (`word_list_as_written`); returns how
    many of its words it left out (`not_words`)."""
    Path(path).write_text("\n".join(word_list_as_written(text)) + "\n", encoding="utf-8")
    return len(not_words(text))


def load_word_list(path: str | Path) -> set[str]:
    """Reads a word list written by `save_word_list`, lower case; one that is not UTF-8 text is a ValueError naming
    it."""
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
