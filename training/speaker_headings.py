"""Speaker headings of the Gutenberg plays (training/build_corpus.py) as TinyShakespeare names the speakers:
"Ber." -> "BERNARDO", "1 Clown." -> "First Clown", read against the play's own list of persons, its spoken words,
an OCR slip one or two letters from a person, or a line of HEADING_FIXES with its reason."""

from __future__ import annotations

import re
from collections import Counter

ORDINALS = {"1": "First", "2": "Second", "3": "Third", "4": "Fourth", "5": "Fifth"}
ORDINALS.update({word.upper(): word for word in ORDINALS.values()}, I="First")  # "I Play.": an OCR'd "1 Player."
GROUP_SPEAKERS = frozenset({"ALL", "BOTH", "CHORUS"})  # speakers no list of persons names
# the headings the rules above cannot map, by play: heading -> (speaker, why)
HEADING_FIXES: dict[str, dict[str, tuple[str, str]]] = {
    "lear": {
        "Cor.": ("CORDELIA", "Cornwall's heading is Corn.; Cor. speaks Cordelia's lines"),
        "Glou.": ("GLOUCESTER", "the list spells him Gloster; his lines and the other plays say Gloucester"),
        "Doct.": ("DOCTOR", "the list's Physician (IV.iv, IV.vii)"),
        "Capt.": ("CAPTAIN", "Edmund's captain (V.iii), whom the list omits"),
        "Off.": ("OFFICER", "one officer speaks (V.iii): 'Officers' in the list"),
    },
    "hamlet": {
        "Luc.": ("LUCIANUS", "the murderer in the players' play (III.ii), whom the list omits"),
        "Pro.": ("PROLOGUE", "the players' prologue (III.ii), whom the list omits"),
    },
    "henry_iv_part_1": {
        "FRAN.": ("FRANCIS", "the drawer (II.iv), whom the list omits"),
        "MESS.": ("MESSENGER", "the messengers (IV.i, V.ii), whom the list omits"),
        "SERV.": ("SERVANT", "Hotspur's servant (II.iii), whom the list omits"),
        "LADY P.": ("LADY PERCY", "Hotspur's wife, the only Lady P. in the list"),
        "ARCH.": ("ARCHBISHOP", "the Archbishop of York (IV.iv); Douglas's first name, Archibald, is never a heading"),
        "SIR M.": ("SIR MICHAEL", "the Archbishop's man, the only Sir M."),
        "OST.": ("OSTLER", "the inn's ostler (II.i), whom the list omits"),
        "CAR.": ("CARRIER", "the first carrier (II.i): 'Carriers' in the list"),
        "HOST.": ("HOSTESS", "Mistress Quickly, the Hostess (II.iv, III.iii)"),
    },
    "henry_vi_part_1": {
        "FIRST JAILER.": ("First Jailer", "Mortimer's keepers (II.v), 'Jailers' in the speeches only"),
        "FIRST SENTINEL.": ("First Sentinel", "the French sentinels (II.i)"),
        "SENTINEL.": ("SENTINEL", "the French sentinels (II.i)"),
    },
    "timon_of_athens": {
        "LUCIUS' SERVANT.": ("LUCIUS' SERVANT", "a servant of Lucius (III.iv), as the edition heads him"),
        "FIRST BANDIT.": ("First Bandit", "'Banditti' in the list"),
        "SECOND BANDIT.": ("Second Bandit", "'Banditti' in the list"),
        "THIRD BANDIT.": ("Third Bandit", "'Banditti' in the list"),
    },
    "antony_and_cleopatra": {"THYMUS.": ("THYREUS", "an OCR slip: Thyreus, Caesar's messenger (III.xii-xiii)")},
}
PERSONS_START = re.compile(r"^(PERSONS REPRESENTED|DRAMATIS PERSONAE)", re.IGNORECASE | re.MULTILINE)
ACT_OR_SCENE = re.compile(r"(ACT|SCENE)\b", re.IGNORECASE)
FIRST_ACT = re.compile(r"^[ \t]*ACT (I|1|FIRST)\b", re.IGNORECASE | re.MULTILINE)  # "ACT I.", "Act 1.", "ACT FIRST"
# a heading line: "Ber.", "FIRST WITCH.", "1 Clown." (most plays) or "THESEUS" (the Dream: capitals, no full stop)
DOTTED_HEADING = re.compile(r"(?:[1-5] )?[A-Z][A-Za-z']*(?: (?:[A-Z][A-Za-z']*|of|the|and|de|le))*\.")
CAPITALS_HEADING = re.compile(r"[A-Z][A-Z']*(?: [A-Z][A-Z']*)*")


def persons_words(gutenberg: str) -> frozenset[str]:
    """The words of the play's list of persons (between its heading and ACT I), upper case, plurals also singular;
    empty when the text has no such list (the poems)."""
    start, end = PERSONS_START.search(gutenberg), FIRST_ACT.search(gutenberg)
    if start is None or end is None or end.start() < start.end():
        return frozenset()
    words = set()
    for word in re.findall(r"[A-Za-z']+", gutenberg[start.end() : end.start()]):
        word = word.upper().removesuffix("'S")
        words.add(word)
        if word.endswith("S") and len(word) > 3:
            words.add(word[:-1])  # "Two Clowns" -> CLOWN
    return frozenset(words)


def map_heading(heading: str, persons: frozenset[str], spoken: Counter[str]) -> str | None:
    """A Gutenberg heading ("Ber.", "1 Clown.") as TinyShakespeare names the speaker ("BERNARDO", "First Clown"): each
    word a person's word, or one it abbreviates (of several, the most spoken), a word the play speaks ("GUARD") or an
    OCR slip of a person's word; None where it is ambiguous ("Cor.": CORDELIA or CORNWALL, as often spoken)."""
    words = heading.removesuffix(".").upper().split()
    ordinal = ORDINALS.get(words[0]) if len(words) > 1 else None
    mapped = []
    for word in words[1:] if ordinal else words:
        if word in persons or word in GROUP_SPEAKERS or re.fullmatch(r"[IVX]+", word):
            mapped.append(word)
            continue
        expansions = {person for person in persons if person.startswith(word)} if len(word) >= 2 else set()
        if len(expansions) > 1:
            expansions = most_spoken(expansions, spoken)
        if len(expansions) == 1:
            mapped.append(expansions.pop())
        elif not expansions and word in spoken:
            mapped.append(word)
        elif not expansions and (slip := ocr_slip(word, persons, spoken)) is not None:
            mapped.append(slip)
        else:
            return None
    name = " ".join(mapped)
    return f"{ordinal} {name.title()}" if ordinal else name


def most_spoken(words: set[str], spoken: Counter[str]) -> set[str]:
    """Of the persons' words a heading abbreviates, the one the play speaks most (the list's singulars of names,
    POLONIU, are never spoken); all of them when two are spoken as often."""
    counts = {word: spoken[word] for word in words}
    best = max(counts.values())
    top = {word for word, count in counts.items() if count == best}
    return top if best > 0 else words


def ocr_slip(word: str, persons: frozenset[str], spoken: Counter[str]) -> str | None:
    """The one person's word that `word` (5 letters or more) is an OCR slip of, a letter or two dropped or changed
    ("ANDARUS" -> PANDARUS, "PERACLES" -> PERICLES; of several, the one the play speaks most); None for none, or
    several as often spoken."""
    if len(word) < 5:
        return None
    close = {person for person in persons if len(person) >= 5 and edit_distance(word, person) <= 2}
    close = most_spoken(close, spoken) if len(close) > 1 else close
    return close.pop() if len(close) == 1 else None


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance: the fewest insertions, deletions and changes of a letter that turn `a` into `b`."""
    previous = list(range(len(b) + 1))
    for i, char in enumerate(a, 1):
        current = [i]
        for j, other in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char != other)))
        previous = current
    return previous[-1]


def looks_like_heading(line: str) -> bool:
    """Whether `line` has a speaker heading's form ("Ber.", "FIRST WITCH.", "THESEUS")."""
    if len(line) > 40 or ACT_OR_SCENE.match(line):
        return False
    return bool(DOTTED_HEADING.fullmatch(line) or CAPITALS_HEADING.fullmatch(line))


def is_heading(line: str, before: str, after: str) -> bool:
    """Whether `line` names a speaker: a heading's form, alone after a blank line, with the speech below it."""
    return not before.strip() and bool(after.strip()) and looks_like_heading(line)
