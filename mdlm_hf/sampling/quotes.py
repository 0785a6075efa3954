"""Quote marks in a play's text (part of `keep_cast`, layout.py): an elision's apostrophe ("'tis"), a quotation's
opening or its close. One that closes a quotation after punctuation ("soul.'") closes one its speech opened: the
training text closes 223 that way, none unopened.
"""

from __future__ import annotations

import re

PUNCTUATION = ".,!?;:-"
OPENING = re.compile(r"(^|[ \n\-])'[A-Za-z]")  # a mark at a word's start: a quotation's opening, or an elision's


def quotes_fit(chars: list[str | None], p: int) -> bool:
    """Whether the character just written at p leaves each quote mark beside it fitting (`quote_fits`)."""
    return all(quote_fits(chars, q) for q in (p - 1, p, p + 1))


def quote_fits(chars: list[str | None], p: int) -> bool:
    """Whether a quote mark at p (if there is one) touches a word, stands alone and closes no unopened quotation."""
    if not 0 <= p < len(chars) or chars[p] != "'":
        return True
    sides = [chars[k] if 0 <= k < len(chars) else "\n" for k in (p - 1, p + 1)]
    if "'" in sides or all(side in (" ", "\n") for side in sides):
        return False
    return not closes_unopened(chars, p)


def closes_unopened(chars: list[str | None], p: int) -> bool:
    """Whether the mark at p closes a quotation (after a mark of punctuation, before no letter) that nothing written
    opened between its speech's start (a blank line, or the text's) and p."""
    before, after = chars[p - 1] if p else None, chars[p + 1] if p + 1 < len(chars) else "\n"
    if before is None or before not in PUNCTUATION or after is None or after.isalpha():
        return False
    start = p
    while start > 0 and not (chars[start - 1] == "\n" and start > 1 and chars[start - 2] == "\n"):
        start -= 1
    # an opening written already: one the masks may still hold cannot be counted on, since nothing makes them write it
    return OPENING.search("".join(c or "\0" for c in chars[start:p])) is None
