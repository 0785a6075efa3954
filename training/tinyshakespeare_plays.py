"""Where each of TinyShakespeare's own plays starts and ends, found by the Gutenberg play (training/build_corpus.py
fetches them) that holds most of each speech's words; `python -m training.build_corpus --plays-map` writes it to
training/tinyshakespeare_plays.json, which the export's casts.json reads (training/casts.py)."""

from __future__ import annotations

import re
from collections import Counter

from training.speaker_headings import persons_words


def tinyshakespeare_plays(texts: dict[str, str], tinyshakespeare: str, stretch: int = 24) -> list[dict]:
    """Where each play of TinyShakespeare starts and ends ([{"play", "start", "end"}], character offsets, in order):
    each speech goes to the Gutenberg play that holds most of its `stretch`-letter stretches (letters only, since
    the editions differ in punctuation), a speech none holds (a short one) to the play before it."""
    owner: dict[int, str | None] = {}  # a stretch's hash -> the one play holding it (None: several)
    for name, gutenberg in texts.items():
        if not persons_words(gutenberg):
            continue  # a poem
        letters = re.sub(r"[^a-z]+", "", gutenberg.lower())
        for i in range(len(letters) - stretch + 1):
            key = hash(letters[i : i + stretch])
            owner[key] = name if owner.get(key, name) == name else None
    speeches = tinyshakespeare.split("\n\n")
    plays: list[str | None] = []
    for speech in speeches:
        letters = re.sub(r"[^a-z]+", "", speech.partition("\n")[2].lower())
        votes = Counter(owner.get(hash(letters[i : i + stretch])) for i in range(0, len(letters) - stretch + 1, 3))
        votes.pop(None, None)
        plays.append(votes.most_common(1)[0][0] if votes else None)
    plays = fill_short_speeches(plays, [speech.partition("\n")[0] for speech in speeches])
    segments: list[dict] = []
    start = 0
    for speech, play in zip(speeches, plays, strict=True):
        if not segments or segments[-1]["play"] != play:
            segments.append({"play": play, "start": start})
        start += len(speech) + 2
    for segment, following in zip(segments, segments[1:] + [None], strict=True):
        segment["end"] = following["start"] if following else len(tinyshakespeare)
    return segments


def fill_short_speeches(plays: list[str | None], headings: list[str]) -> list[str]:
    """Each speech's play where its words named none (None, a short speech): the play before it, unless that play
    has no speaker of its heading and the play after it has (a short speech that opens the next play)."""
    known = [i for i, play in enumerate(plays) if play is not None]
    heard: dict[str, set[str]] = {}
    for i in known:
        heard.setdefault(plays[i], set()).add(headings[i])
    filled, before = list(plays), None
    for i, play in enumerate(plays):
        if play is not None:
            before = play
            continue
        after = next((plays[j] for j in known if j > i), None)
        fits_after = after is not None and headings[i] in heard[after]
        filled[i] = after if before is None or (fits_after and headings[i] not in heard[before]) else before
    return filled
