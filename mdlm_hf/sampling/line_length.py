"""How long a line may grow while it is written out of order (part of `keep_cast`, layout.py): a character is kept
only where the line through it can still end within the training text's longest line, in masks that can hold its
break (a line neither starts nor ends with a space, and a break just after a letter ends a word that may be none).
"""

from __future__ import annotations

WORD_ROOM = 12  # masks a line's length counts as written where a space is placed: room for a word to end in


def length_fits(chars: list[str | None], given: list[bool], p: int, longest: int) -> bool:
    """Whether the line through the character at p can still end within the training text's longest line: its known
    characters and the masks beside them that can hold no line break are at most that long (a space's line counts
    short runs of masks too, so that a long line ends at a word's end). A line already forced longer with p masked,
    or one with the caller's characters, is not held against p."""
    if chars[p] == "\n":
        return True
    room = WORD_ROOM if chars[p] == " " else 0
    (left, given_left), (right, given_right) = reach(chars, given, p, -1, room), reach(chars, given, p, 1, room)
    if left + 1 + right <= longest or given_left or given_right:
        return True
    c, chars[p] = chars[p], None
    try:
        return forced_without(chars, given, p, longest)
    finally:
        chars[p] = c


def forced_without(chars: list[str | None], given: list[bool], p: int, longest: int) -> bool:
    """With the mask at p: whether the line through it was forced past the longest line already (its masks there
    can hold no break, or the known stretch on one side is too long by itself)."""
    n = len(chars)
    a, b = p, p
    while a > 0 and chars[a - 1] is None:
        a -= 1
    while b + 1 < n and chars[b + 1] is None:
        b += 1
    if a > 0 and b + 1 < n and not break_fits(b - a + 1, chars[a - 1], chars[b + 1]):
        return True
    return max(reach(chars, given, a, -1)[0], reach(chars, given, b, 1)[0]) > longest


def reach(chars: list[str | None], given: list[bool], p: int, step: int, filled_below: int = 0) -> tuple[int, bool]:
    """How many characters the line through p must have beyond p going `step` (known ones, and masks that can
    hold no break, or that are fewer than `filled_below`), and whether any is the caller's."""
    n = len(chars)
    count, callers, i = 0, False, p + step
    while 0 <= i < n and chars[i] != "\n":
        if chars[i] is None:
            j = i
            while 0 <= j < n and chars[j] is None:
                j += step
            masks = abs(j - i)
            if j < 0 or j >= n or (masks >= filled_below and break_fits(masks, chars[i - step], chars[j])):
                break
            count, i = count + masks, j
            continue
        count, callers, i = count + 1, callers or given[i], i + step
    return count, callers


def break_fits(masks: int, inner: str | None, outer: str | None) -> bool:
    """Whether a run of `masks` masks between the characters `inner` and `outer` can surely hold a line break (only a
    mark of punctuation surely ends a word: after a letter, its word may be none)."""
    if masks >= 3:
        return True
    ends_word = inner is not None and not inner.isalpha() and inner != " "
    if masks == 2:
        return outer != " " or ends_word
    return outer != " " and ends_word
