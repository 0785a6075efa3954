"""Keeping a play's shape (the `keep_cast` option; its rules: docs/sampler.md): one play's cast, each heading alone.

A play's text has three kinds of line, a heading (`NAME:`), a speech line and a blank line, each followed by the kinds
`FOLLOWS` names. Each character drawn keeps its line and its neighbours to a kind that fits, as far as the canvas
knows them (a mask is unknown); headings keep to one play's cast (casts.py).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from mdlm_hf.metrics import heading_name
from mdlm_hf.sampling.casts import Casts
from mdlm_hf.sampling.line_length import length_fits
from mdlm_hf.sampling.quotes import quotes_fit

HEADING, SPEECH, BLANK = "heading", "speech", "blank"
ANY = frozenset({HEADING, SPEECH, BLANK})
FOLLOWS = {BLANK: frozenset({HEADING}), HEADING: frozenset({SPEECH}), SPEECH: frozenset({SPEECH, BLANK})}
START, END, ENDS_WITH_BREAK = "start", "end", "ends with a break"  # the text's edges, as a neighbouring line
# a speech line that starts with an all-capitals name and a colon or a full stop ("YORK: datural pains", "PAROLLES."),
# or with two capitals not yet followed by anything else: a heading run into its speech, or a stray one
# a space before the colon too ("ROMAN :"), and a single capital and its colon ("O: whither")
RUN_ON = re.compile(r"[A-Z][A-Z' \-&,]*[A-Z] ?(?:[:.]|$)|[A-Z] ?:")


@dataclass
class Line:
    """The known characters of a line around a position: chars[start:end], none a line break or a mask."""

    start: int
    end: int
    text: str
    left: str  # what is before it: "break", "mask" or "edge"
    right: str
    given: bool  # every character the caller's
    room: float  # how many more characters a heading here may have (`LineRules.heading_room`); else infinite
    exact: int | None = None  # or exactly this many more (a heading that fills the masks up to a known break)

    @property
    def opened(self) -> bool:
        """Whether its start is known: a line break or the text's start before it."""
        return self.left != "mask"

    @property
    def closed(self) -> bool:
        """Whether its end is known: a line break or the text's end after it."""
        return self.right != "mask"


class LineRules:
    """The layout rules over a row's characters (`chars`: None where masked; `given`: the caller's; `edges`: whether
    each end has text beyond it, a window's), with a play's cast."""

    def __init__(self, casts: Casts, chars: list[str | None], given: list[bool], edges: tuple[bool, bool]) -> None:
        self.casts, self.chars, self.given, self.edges = casts, chars, given, edges

    def line(self, start: int, end: int) -> Line:
        """The line whose known characters are chars[start:end] (start: after a break, a mask or the edge)."""
        chars, n = self.chars, len(self.chars)
        left = "edge" if start == 0 else "break" if chars[start - 1] == "\n" else "mask"
        right = "edge" if end == n else "break" if chars[end] == "\n" else "mask"
        if left == "edge" and self.edges[0]:
            left = "mask"  # a window's cut: text beyond, unknown here
        if right == "edge" and self.edges[1]:
            right = "mask"
        room, exact = (math.inf, None) if right != "mask" else self.heading_room(end)
        text = "".join(chars[start:end])
        return Line(start, end, text, left, right, all(self.given[start:end]) and end > start, room, exact)

    def heading_room(self, end: int) -> tuple[float, int | None]:
        """How many more characters a heading whose known characters end at `end` (masks after it) may have: room for
        its own break and, before a blank line or the text's end, a character of speech; and how many exactly where it
        may fill the masks up to a known break with speech after it (else None)."""
        chars, n = self.chars, len(self.chars)
        j = end
        while j < n and chars[j] is None:
            j += 1
        masks = j - end
        if j == n:
            return (math.inf, None) if self.edges[1] else (masks - 2, None)
        if chars[j] != "\n":
            return math.inf, None  # that character may be the heading's own ("KING" _ " HENRY VI:")
        if j + 1 == n and self.edges[1]:
            return masks - 2, masks  # the view's cut after the break: speech may follow it
        if j + 1 == n or chars[j + 1] == "\n":
            return masks - 2, None
        return masks - 2, masks  # its break in the masks, and a speech line before the known break; or up to it

    def around(self, p: int) -> Line:
        """The line through position p (a known character, not a break)."""
        start, end = p, p + 1
        while start > 0 and self.chars[start - 1] not in (None, "\n"):
            start -= 1
        while end < len(self.chars) and self.chars[end] not in (None, "\n"):
            end += 1
        return self.line(start, end)

    def ending_at(self, q: int) -> Line:
        """The line whose known characters end just before position q."""
        start = q
        while start > 0 and self.chars[start - 1] not in (None, "\n"):
            start -= 1
        return self.line(start, q)

    def starting_at(self, q: int) -> Line:
        """The line whose known characters start at position q."""
        end = q
        while end < len(self.chars) and self.chars[end] not in (None, "\n"):
            end += 1
        return self.line(q, end)

    def kinds(self, line: Line, plays: int) -> frozenset[str]:
        """The kinds the line may be by its own characters: a heading of one of `plays`, a speech line, blank."""
        text = line.text
        if line.given and line.opened and line.closed:  # the caller's line, as the caller wrote it
            return frozenset({HEADING if is_heading(text) else SPEECH})
        if not text:
            kinds = {BLANK, SPEECH}
            if line.opened and line.closed:
                return frozenset({BLANK})
        else:
            kinds = {SPEECH} if self.speech_fits(line) else set()
        if self.casts.plays_with(text, line.opened, line.closed, line.room, line.exact) & plays:
            kinds.add(HEADING)
        return frozenset(kinds)

    def repeats(self, line: Line, plays: int) -> bool:
        """Whether a heading line and the nearest heading before or after it, across masks, can only name one speaker
        (a speaker answering themself): masks between promise no other heading unless a blank line there is known."""
        if not (line.opened and line.text):
            return False
        after_blank = line.start >= 2 and self.chars[line.start - 2] == "\n"
        names = self.speakers(line.start, plays, after_blank)
        if names is None or len(names) != 1:
            return False
        starts = (self.neighbour_start(line.start - 1, -1, True), self.neighbour_start(line.end, 1, True))
        return any(start is not None and self.speakers(start, plays, True) == names for start in starts)

    def speakers(self, start: int, plays: int, after_blank: bool) -> frozenset[str] | None:
        """The headings of `plays` the line from `start` may still be: itself if whole (or ended at its colon), else
        those that fit its characters and masks (after a blank line only: elsewhere it may be speech); None: unknown."""
        line = self.starting_at(start)
        if not line.text:
            return None
        if line.closed or line.text.endswith(":"):
            return frozenset({line.text} & self.casts.headings)
        if not after_blank:
            return frozenset()
        end = start  # the line's characters, masks and all, up to its known break
        while end < len(self.chars) and self.chars[end] != "\n":
            end += 1
        pattern, open_end = self.chars[start:end], end == len(self.chars) and self.edges[1]
        return frozenset(h for h in self.casts.headings_of(plays) if fits_pattern(h, pattern, open_end))

    def answers_itself(self, line: Line) -> bool:
        """Whether a speech line lies between two known headings of one speaker (the speech written last)."""
        starts = (self.neighbour_start(line.start - 1, -1), self.neighbour_start(line.end - 1, 1))
        before, after = (None if start is None else self.whole_line(start) for start in starts)
        return before is not None and before == after

    def neighbour_start(self, q: int, step: int, across_masks: bool = False) -> int | None:
        """Where the heading nearest the line break at q going `step` starts: after the nearest blank line that way, at
        the text's first line, or (`across_masks`) a whole heading after a break; None where a mask comes first."""
        chars, n = self.chars, len(self.chars)
        if step < 0 and q <= 0:
            return None  # the line is the text's first
        i = q + step
        while 0 < i < n - 1:
            if chars[i] is None and not across_masks:
                return None
            if chars[i] == "\n" and chars[i + step] == "\n":  # a blank line: the heading follows it
                return i + 1 if step < 0 else i + 2
            if chars[i] == "\n" and across_masks and self.whole_line(i + 1) in self.casts.headings:
                return i + 1  # a heading by its form, the blank line before it still masked
            i += step
        if step < 0 and i == 0 and chars[0] not in (None, "\n") and not self.edges[0]:
            return 0
        return None

    def whole_line(self, start: int) -> str | None:
        """The line from `start` to its known line break, where every character of it is known; else None."""
        chars, n = self.chars, len(self.chars)
        end = start
        while end < n and chars[end] not in (None, "\n"):
            end += 1
        return "".join(chars[start:end]) if end < n and chars[end] == "\n" else None

    def speech_fits(self, line: Line) -> bool:
        """Whether the line's characters may be a speech line's (the caller's own are never held against it): not too
        long, no space at either end, not a heading or one run on into speech, from a capital at the text's start."""
        text, given = line.text, self.given[line.start : line.end]
        if any(given):
            return True
        if len(text) > self.casts.longest_line or "  " in text:
            return False
        if line.opened and line.closed and not any(c.isalpha() for c in text):
            return False  # a line of punctuation alone ("BOTH:" and then ":")
        if (line.opened and text[:1] == " ") or (line.closed and text[-1:] == " "):
            return False
        if line.opened:
            name, colon, _ = text.partition(":")
            if RUN_ON.match(text) or (colon and f"{name}:" in self.casts.headings):
                return False
            if line.closed and is_heading(text):
                return False  # a heading's form ("O:"): a speaker no blank line introduced
            if line.left == "edge" and not text[0].isupper():
                return False  # the text starts at a line's start
        return True

    def before(self, line: Line, plays: int) -> frozenset[str] | str:
        """What the line before may be: START at the text's start, else the kinds its characters allow."""
        if line.left == "mask":
            return ANY
        if line.left == "edge":
            return START
        q = line.start - 1  # the break before the line
        if q == 0:
            return ANY if self.edges[0] else frozenset({BLANK})
        if self.chars[q - 1] is None:
            return ANY
        if self.chars[q - 1] == "\n":
            return frozenset({BLANK})
        previous = self.ending_at(q)
        kinds = self.kinds(previous, plays) - {BLANK}
        if previous.left == "break" and previous.start >= 2 and self.chars[previous.start - 2] is not None:
            kinds &= {HEADING} if self.chars[previous.start - 2] == "\n" else {SPEECH}
        return kinds or ANY  # the caller's own lines may break the rules: they bind nothing

    def after(self, line: Line, plays: int) -> frozenset[str] | str:
        """What the line after may be: END at the text's end, ENDS_WITH_BREAK after its last break, else its kinds."""
        if line.right == "mask":
            return ANY
        if line.right == "edge":
            return END
        q = line.end  # the break after the line
        if q + 1 == len(self.chars):
            return ANY if self.edges[1] else ENDS_WITH_BREAK
        following = self.chars[q + 1]
        if following is None:
            return ANY
        if following == "\n":
            return frozenset({BLANK})
        return (self.kinds(self.starting_at(q + 1), plays) - {BLANK}) or ANY

    def fits(self, line: Line, plays: int) -> bool:
        """Whether the line may be a kind that follows what is before it and leads to what is after it."""
        if line.given and line.opened and line.closed:
            return True
        before, after = self.before(line, plays), self.after(line, plays)
        for kind in self.kinds(line, plays):
            if before == START:
                if kind == BLANK:
                    continue
            elif not any(kind in FOLLOWS[b] for b in before):
                continue
            if after == END or after == ENDS_WITH_BREAK:
                if kind == HEADING or (after == ENDS_WITH_BREAK and kind == BLANK):
                    continue
            elif not any(a in FOLLOWS[kind] for a in after):
                continue
            return True
        return False

    def allows(self, p: int, plays: int) -> bool:
        """Whether the character now at position p keeps its lines, and their neighbours, to the rules."""
        chars = self.chars
        if not quotes_fit(chars, p):
            return False
        lines = [self.ending_at(p), self.starting_at(p + 1)] if chars[p] == "\n" else [self.around(p)]
        if any(self.repeats(line, plays) for line in lines):
            return False
        if any(self.answers_itself(line) for line in lines if line.text and line.text not in self.casts.headings):
            return False
        if not self.spans_fit(p, plays) or not length_fits(self.chars, self.given, p, self.casts.longest_line):
            return False
        return all(self.fits(line, plays) for line in self.with_neighbours(lines))

    def spans_fit(self, p: int, plays: int) -> bool:
        """Whether the character at p leaves the heading spans around it fitting, where they fitted with p masked."""
        chars = self.chars
        spans = [q for q in ((p - 1, p + 1) if chars[p] == "\n" else (p,)) if 0 <= q < len(chars)]
        if all(self.heading_span_fits(q, plays) for q in spans):
            return True
        c, chars[p] = chars[p], None
        try:
            return not all(self.heading_span_fits(q, plays) for q in spans)
        finally:
            chars[p] = c

    def heading_span_fits(self, q: int, plays: int) -> bool:
        """Whether the stretches of the line through q after a blank line, parted by masks ("LADY CA" _ "DY
        CAPULET:"), fit one heading of `plays` together, with its break at a mask or at the line's known end."""
        chars, n = self.chars, len(self.chars)
        a = q
        while a > 0 and chars[a - 1] != "\n":
            a -= 1
        if a < 2 or chars[a - 1] != "\n" or chars[a - 2] != "\n" or any(self.given[a:q]):
            return True  # not a line after a blank one, or the caller's
        b = q
        while b < n and chars[b] != "\n":
            b += 1
        pattern = chars[a:b]
        known = [i for i, c in enumerate(pattern) if c is not None]
        if known and all(c is not None for c in pattern[: known[-1] + 1]):
            return True  # one stretch from the line's start: the line's own check reads it
        open_end = b == n and self.edges[1]  # the view's cut: the line may run on
        for heading in self.casts.headings_of(plays):
            k = len(heading)
            # room for its speech: a character before the line's known end, or a line after its known break
            speech = k + 1 < len(pattern) if k < len(pattern) else open_end or (b < n and self.speech_follows(b))
            if speech and fits_pattern(heading, pattern, open_end) and self.speech_after(pattern[k + 1 :]):
                return True
        return False

    def speech_follows(self, b: int) -> bool:
        """Whether a speech may follow the line break at b: not a blank line, nor the text's end."""
        if b + 1 == len(self.chars):
            return self.edges[1]
        return self.chars[b + 1] != "\n"

    @staticmethod
    def speech_after(rest: list[str | None]) -> bool:
        """Whether what follows a heading span's break, where all known, may start a speech: not a name and its colon
        ("ELY:" _ "G HENRY VI:")."""
        return None in rest or not (RUN_ON.match("".join(rest)) or is_heading("".join(rest)))

    def broken_at(self, p: int, plays: int) -> bool:
        """Whether the lines around the mask at p break the rules whatever goes there (an earlier dead end's, which
        then binds no character, so one dead end does not make a run of them)."""
        assert self.chars[p] is None
        lines = self.with_neighbours([self.ending_at(p), self.starting_at(p + 1)])
        return not all(self.fits(line, plays) for line in lines)

    def with_neighbours(self, lines: list[Line]) -> list[Line]:
        """`lines` with the line before the first and after the last, where a line break parts them."""
        if lines[0].left == "break":
            lines = [self.ending_at(lines[0].start - 1), *lines]
        if lines[-1].right == "break":
            lines = [*lines, self.starting_at(lines[-1].end + 1)]
        return lines

    def heading_plays(self, plays: int) -> int:
        """`plays` narrowed to those whose casts hold each written heading of the row (`narrowed`)."""
        chars = self.chars
        for q in range(len(chars)):
            if chars[q] not in (None, "\n") and (q == 0 or chars[q - 1] == "\n"):
                plays = self.narrowed(plays, q)
        return plays

    def narrowed(self, plays: int, p: int) -> int:
        """`plays` narrowed to those whose casts hold the written heading through p (after a blank line, or a line
        that can be nothing else: "CASSIUS:"); unchanged where none does."""
        if self.chars[p] in (None, "\n"):
            return plays
        line = self.around(p)
        if line.given or not line.opened:
            return plays
        after_blank = line.left == "break" and line.start >= 2 and self.chars[line.start - 2] == "\n"
        if not (after_blank or self.kinds(line, plays) == {HEADING}):
            return plays
        return plays & self.casts.plays_with(line.text, True, line.closed) or plays


def fits_pattern(heading: str, pattern: list[str | None], open_end: bool) -> bool:
    """Whether `heading` may be written over a line's characters `pattern` (None: a mask), its break at a mask after
    it, at the line's known break, or (`open_end`) past the view's cut."""
    k = len(heading)
    if not all(c is None or c == h for c, h in zip(pattern, heading, strict=False)):
        return False
    return pattern[k] is None if k < len(pattern) else k == len(pattern) or open_end


def is_heading(line: str) -> bool:
    """Whether a whole line is a heading's form, `NAME:` (as `heading_name` reads one after a blank line)."""
    return heading_name(line, "") is not None
