"""The words.txt an export writes beside the weights: the training text's words, names as it writes them, which
`real_words` keeps a model's words to (mdlm_hf/sampling/lexicon.py reads it)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from mdlm_hf.metrics import WORD_PATTERN, words

# a mid-sentence capital: after a letter, a comma, a semicolon or a dash and a space (not a line's or sentence's start)
MID_SENTENCE = re.compile(r"(?<=[A-Za-z,;\-] )[A-Z][a-z]+(?:'[A-Za-z]+)*")


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
