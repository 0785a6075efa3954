"""Keeping the words a run writes to a word list (the `real_words` option, docs/sampler.md).

Each character drawn must leave its fragment of a word (the letters known on its either side) part of a word of the
list, placed as the known separators say and with room in the masks around it, so the last of a word's characters to
be written sees the whole word, in any reveal order.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

import torch

from mdlm_hf.checks import described
from mdlm_hf.data import file_version
from mdlm_hf.inference import shipped_file
from mdlm_hf.metrics import WORD_PATTERN, words
from mdlm_hf.sampling.options import SamplerOptions

# what a word list may hold (the shipped one: 20,062 words of at most 21 letters, 180 KB): a word's fragments fill a
# table quadratic in its length, so a hostile or broken list is refused in one line before it is read into one
MAX_LEXICON_BYTES, MAX_WORDS, MAX_WORD = 32 * 2**20, 2_000_000, 64
LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
IN_WORDS = LETTERS | {"'"}  # an apostrophe is a word's own between letters, a quote elsewhere


class Lexicon:
    """A word list, lower case, with the shortest word that holds each fragment at its start, its end or anywhere
    (each table built when first asked), and its names: the words it lists only capitalised."""

    def __init__(self, entries: Iterable[str], source: str = "lexicon") -> None:
        items = list(entries)
        bad = next((item for item in items if not isinstance(item, str)), None)
        if bad is not None:
            raise ValueError(f"{source} must hold words as strings, got {described(bad)}")
        self.words = frozenset(words("\n".join(items)))
        long = next((w for w in self.words if len(w) > MAX_WORD), None)
        if len(self.words) > MAX_WORDS or long is not None:
            what = f"a word of {len(long):,} letters" if long else f"{len(self.words):,} words"
            raise ValueError(f"{source} holds {what}; a word list may hold {MAX_WORDS:,} words of {MAX_WORD} letters")
        if not self.words:
            raise ValueError(f"{source} holds no word (a word is letters, with apostrophes between them)")
        listed = [w for item in items for w in WORD_PATTERN.findall(item)]
        self.names = frozenset(w.lower() for w in listed if w[0].isupper()) - {w for w in listed if w[0].islower()}
        self.lower_words = self.words - self.names  # the words it may write in lower case
        self._tables: dict[tuple[bool, bool, bool], dict[str, int]] = {}

    def __len__(self) -> int:
        return len(self.words)

    def shortest(self, fragment: str, left_closed: bool, right_closed: bool, lower: bool = False) -> float:
        """The length of the shortest word (`lower`: of those it may write in lower case) with `fragment` (lower
        case) at its start (`left_closed`), its end, as a whole (both) or anywhere (neither); infinity: none."""
        key = (left_closed, right_closed, lower)
        if key not in self._tables:
            self._tables[key] = fragment_table(self.lower_words if lower else self.words, left_closed, right_closed)
        return self._tables[key].get(fragment, math.inf)

    def prepare(self) -> Lexicon:
        """Builds every table now (a few seconds for 20,000 words), not at a run's first draw; returns itself."""
        for sides in ((True, False), (False, True), (False, False), (True, True)):
            self.shortest("", *sides)
        for sides in ((True, False), (True, True)) if self.names else ():
            self.shortest("", *sides, lower=True)
        return self

    def fits(self, fragment: str, left_closed: bool, right_closed: bool, room: float = 0) -> bool:
        """Whether `fragment` can be part of a word of the list placed as its sides say, within `room` more."""
        if left_closed:
            fragment = fragment.lstrip("'")  # an opening quote, not the word's
        if right_closed:
            fragment = fragment.rstrip("'")  # a closing quote (or a plural's possessive), not the word's
        if not fragment:
            return True
        lower = left_closed and fragment[0].islower() and bool(self.names)  # a word begun in lower case: no name
        shortest = self.shortest(fragment.lower(), left_closed, right_closed, lower)
        return shortest < math.inf and shortest <= len(fragment) + room


def fragments(word: str, at_start: bool, at_end: bool) -> Iterator[str]:
    """Every fragment of `word` at its start (`at_start`), its end, as a whole (both) or anywhere (neither)."""
    n = len(word)
    for i in [0] if at_start else range(n + 1):
        for j in [n] if at_end else range(i, n + 1):
            yield word[i:j]


def fragment_table(word_list: frozenset[str], at_start: bool, at_end: bool) -> dict[str, int]:
    """Every fragment of the words (`fragments`), with the length of the shortest word holding it there."""
    table: dict[str, int] = {}
    for word in word_list:
        n = len(word)
        for piece in fragments(word, at_start, at_end):
            if piece and table.get(piece, math.inf) > n:  # no word is empty: `shortest("")` stays inf
                table[piece] = n
    return table


@functools.lru_cache(maxsize=4)
def read_lexicon(path: str, modified: float) -> Lexicon:
    """The word list in the file at `path`, one word a line (`modified`: its time, so an edited file is read anew)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"lexicon file {path} is not UTF-8 text") from None
    except OSError as error:
        raise ValueError(f"lexicon file {path} cannot be read: {error.strerror or error}") from None
    return Lexicon(text.splitlines(), source=f"lexicon file {path}")


def as_lexicon(lexicon: object) -> Lexicon:
    """`lexicon` as a Lexicon: one already, a file's path (one word a line), or an iterable of words."""
    if isinstance(lexicon, Lexicon):
        return lexicon
    if isinstance(lexicon, (str, os.PathLike)):
        missing = (
            f"lexicon file {Path(lexicon).expanduser()} does not exist (pass a file with one word a line, or the words)"
        )
        return read_lexicon(*file_version(lexicon, missing, MAX_LEXICON_BYTES))
    if isinstance(lexicon, Iterable) and not isinstance(lexicon, (bytes, torch.Tensor)):
        return Lexicon(lexicon)
    raise ValueError(f"lexicon must be words (a list or set of strings) or a file's path, got {described(lexicon)}")


def model_lexicon(model: torch.nn.Module) -> Lexicon:
    """The words `model` was trained on: the words.txt its export wrote beside its weights."""
    path = shipped_file(model, "word_list_file")
    if path is None:
        raise ValueError(
            "real_words needs the model's word list, words.txt beside its weights, and this model has none: "
            "pass lexicon= (the words, or a file with one word a line)"
        )
    return as_lexicon(path)


def run_lexicon(model: torch.nn.Module, options: SamplerOptions, lexicon: object = None) -> Lexicon | None:
    """The word list a run keeps its words to: `lexicon`, else the model's own, with `real_words`; None without."""
    if not options.real_words:
        if lexicon is not None:
            raise ValueError("lexicon applies with real_words=True: pass real_words=True too, or no lexicon")
        return None
    return model_lexicon(model) if lexicon is None else as_lexicon(lexicon)


class Side:
    """The known letters next to a position on one side, up to a separator, a mask or the canvas's edge."""

    def __init__(self, chars: list[str | None], given: list[bool], p: int, step: int, open_edge: bool) -> None:
        i, n = p + step, len(chars)
        while 0 <= i < n and chars[i] in IN_WORDS:
            i += step
        span = range(p + step, i, step)
        self.text = "".join(chars[k] for k in (reversed(span) if step < 0 else span))
        self.given = any(c in LETTERS for c in self.text) and all(given[k] for k in span if chars[k] in LETTERS)
        at_edge = not 0 <= i < n
        self.closed = (at_edge and not open_edge) or (not at_edge and chars[i] is not None)
        self.room = 0 if self.closed else math.inf
        if not at_edge and chars[i] is None:  # masks: as many more letters as there are, if a separator follows
            j = i
            while 0 <= j < n and chars[j] is None:
                j += step
            beyond = chars[j] if 0 <= j < n else None
            if (0 <= j < n and beyond not in IN_WORDS) or (not 0 <= j < n and not open_edge):
                self.room = abs(j - i)


def ends_here(lexicon: Lexicon, side: Side, left: bool) -> bool:
    """Whether a separator may end (`left`: the fragment on its left) or start the word of `side`: it fits as a
    word's end or start, or it is given text no word of the list continues (a prompt's own word, kept)."""
    closed_left, closed_right = (side.closed, True) if left else (True, side.closed)
    if lexicon.fits(side.text, closed_left, closed_right, side.room):
        return True
    return side.given and not lexicon.fits(
        side.text, side.closed if left else False, False if left else side.closed, math.inf
    )


class WordRule:
    """Which characters may go at position `p` of a row (`chars`: None where masked), its words kept to `lexicon`;
    `edges`: whether the row's left and right ends are open (a window's, with text beyond them)."""

    def __init__(
        self, lexicon: Lexicon, chars: list[str | None], given: list[bool], p: int, edges: tuple[bool, bool]
    ) -> None:
        self.lexicon = lexicon
        self.left, self.right = Side(chars, given, p, -1, edges[0]), Side(chars, given, p, 1, edges[1])
        left, right = self.left, self.right
        self.room = left.room + right.room
        self.separator = ends_here(lexicon, left, left=True) and ends_here(lexicon, right, left=False)
        inner = bool(left.text) and lexicon.fits(f"{left.text}'{right.text}", left.closed, right.closed, self.room)
        # between two letters an apostrophe is the word's own ("don't"); beside a separator or a mask, maybe a quote
        self.apostrophe = inner if left.text[-1:] in LETTERS and right.text[:1] in LETTERS else inner or self.separator

    def allows(self, c: str) -> bool:
        """Whether `c` may go there."""
        if c in LETTERS:
            left, right = self.left, self.right
            return self.lexicon.fits(left.text + c + right.text, left.closed, right.closed, self.room)
        return self.apostrophe if c == "'" else self.separator
