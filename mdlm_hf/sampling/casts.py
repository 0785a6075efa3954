"""The casts of a training text's plays (casts.json, play -> speakers): what `keep_cast` keeps a run's headings to.

`Casts` holds each play's speakers and, for the layout rules (layout.py), the plays whose cast holds each fragment
of a heading (`NAME:`); a set of plays is an int, one bit a play. training/casts.py writes the file an export ships.
"""

from __future__ import annotations

import functools
import json
import math
import os
from collections.abc import Iterable
from pathlib import Path

from mdlm_hf.checks import described
from mdlm_hf.data import file_version
from mdlm_hf.inference import shipped_file
from mdlm_hf.metrics import SPEAKER_NAME
from mdlm_hf.sampling.lexicon import fragments
from mdlm_hf.sampling.options import SamplerOptions

LONGEST_LINE = 80  # characters: a speech line's limit where a casts file names none
# what a casts file may hold (the shipped one: 25 plays, 35 speakers at most, names of 24 characters, 20 KB): beyond
# these its tables would take minutes or gigabytes, so a hostile or broken file is refused in one line
MAX_CASTS_BYTES, MAX_PLAYS, MAX_SPEAKERS, MAX_NAME = 4 * 2**20, 10_000, 100_000, 64


class Casts:
    """The speakers of each play of a training text, with the plays whose cast holds each fragment of a heading
    (`NAME:`), tables built when first asked. A set of plays is an int, one bit a play."""

    def __init__(self, plays: dict[str, list[str]], longest_line: int = LONGEST_LINE, source: str = "casts") -> None:
        if not isinstance(plays, dict) or not all(
            isinstance(play, str) and isinstance(names, list) and all(isinstance(n, str) for n in names)
            for play, names in plays.items()
        ):
            raise ValueError(f"{source} must map each play to a list of its speakers' names, got {described(plays)}")
        speakers = sum(len(names) for names in plays.values())
        if len(plays) > MAX_PLAYS or speakers > MAX_SPEAKERS:
            raise ValueError(
                f"{source} has {len(plays):,} plays and {speakers:,} speakers, more than the {MAX_PLAYS:,} and "
                f"{MAX_SPEAKERS:,} a casts file may have"
            )
        long = next((n for names in plays.values() for n in names if len(n) > MAX_NAME), None)
        if long is not None:
            raise ValueError(f"{source} names a speaker of {len(long):,} characters; a name may have {MAX_NAME}")
        bad = next((n for names in plays.values() for n in names if not SPEAKER_NAME.fullmatch(n)), None)
        if bad is not None:
            raise ValueError(f"{source} names a speaker {bad!r} that is not a heading's name (capitalised words)")
        if not any(plays.values()):
            raise ValueError(
                f"{source} lists no speaker: its training text has no `NAME:` headings, so there is no cast to keep "
                "(pass keep_cast=False)"
            )
        if not isinstance(longest_line, int) or isinstance(longest_line, bool) or longest_line < 1:
            raise ValueError(f"{source}'s longest_line must be an integer >= 1, got {described(longest_line)}")
        self.plays = {play: sorted(set(names)) for play, names in sorted(plays.items()) if names}
        self.bits = {play: 1 << i for i, play in enumerate(self.plays)}
        self.everyone = (1 << len(self.plays)) - 1
        self.headings = frozenset(f"{name}:" for names in self.plays.values() for name in names)
        self.longest_line = longest_line
        self._tables: dict[tuple[bool, bool], dict[str, list[tuple[int, int]]]] = {}
        self._headings_of: dict[int, list[str]] = {}

    def __len__(self) -> int:
        return len(self.plays)

    def plays_with(
        self, fragment: str, at_start: bool, at_end: bool, room: float = math.inf, exact: int | None = None
    ) -> int:
        """The plays with a heading that holds `fragment` at its start (`at_start`), its end, as a whole (both) or
        anywhere (neither), at most `room` characters longer than it, or exactly `exact` longer."""
        key = (at_start, at_end)
        if key not in self._tables:
            self._tables[key] = heading_table(self.plays, self.bits, at_start, at_end)
        found = 0
        for length, plays in self._tables[key].get(fragment, ()):
            if length <= len(fragment) + room or (exact is not None and length == len(fragment) + exact):
                found |= plays
        return found

    def prepare(self) -> Casts:
        """Builds every table now, not at a run's first draw; returns itself."""
        for sides in ((True, True), (True, False), (False, True), (False, False)):
            self.plays_with("", *sides)
        return self

    def chosen(self, names: Iterable[str]) -> int:
        """The plays whose casts hold the most of `names` (a caller's speakers); every play where none is in one."""
        counts = {play: sum(name in cast for name in set(names)) for play, cast in self.plays.items()}
        best = max(counts.values())
        return sum(self.bits[play] for play, count in counts.items() if count == best) if best else self.everyone

    def headings_of(self, plays: int) -> list[str]:
        """The headings (`NAME:`) of the plays in the set `plays`."""
        if plays not in self._headings_of:
            names = {name for play in self.names_of(plays) for name in self.plays[play]}
            self._headings_of[plays] = sorted(f"{name}:" for name in names)
        return self._headings_of[plays]

    def names_of(self, plays: int) -> list[str]:
        """The names of the plays in the set `plays`."""
        return [play for play, bit in self.bits.items() if plays & bit]


def heading_table(
    plays: dict[str, list[str]], bits: dict[str, int], at_start: bool, at_end: bool
) -> dict[str, list[tuple[int, int]]]:
    """Each fragment of the plays' headings -> (a heading's length, the plays with one that long holding it), shortest
    first."""
    table: dict[str, dict[int, int]] = {}
    for play, names in plays.items():
        for heading in (f"{name}:" for name in names):
            for piece in fragments(heading, at_start, at_end):
                lengths = table.setdefault(piece, {})
                lengths[len(heading)] = lengths.get(len(heading), 0) | bits[play]
    return {piece: sorted(lengths.items()) for piece, lengths in table.items()}


@functools.lru_cache(maxsize=4)
def read_casts(path: str, modified: float) -> Casts:
    """The casts in the casts.json at `path` (`modified`: its time, so an edited file is read anew); a file that is
    not one is a ValueError naming it."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as error:
        raise ValueError(f"casts file {path} cannot be read as JSON ({type(error).__name__})") from None
    if not isinstance(data, dict) or "plays" not in data:
        raise ValueError(f"casts file {path} is not a casts.json: it has no 'plays'")
    return Casts(data["plays"], data.get("longest_line", LONGEST_LINE), source=f"casts file {path}")


def as_casts(casts: object) -> Casts:
    """`casts` as Casts: one already, a casts.json file's path, or a dict of play -> speakers."""
    if isinstance(casts, Casts):
        return casts
    if isinstance(casts, (str, os.PathLike)):
        missing = f"casts file {casts} does not exist (pass a casts.json, or a dict of play -> speakers)"
        return read_casts(*file_version(casts, missing, MAX_CASTS_BYTES))
    if isinstance(casts, dict) and isinstance(casts.get("plays"), dict):  # as casts.json holds them
        return Casts(casts["plays"], casts.get("longest_line", LONGEST_LINE))
    if isinstance(casts, dict):
        return Casts(casts)
    raise ValueError(f"casts must be a dict of play -> speakers or a casts.json's path, got {described(casts)}")


def model_casts(model: object) -> Casts:
    """The casts of the plays `model` was trained on: the casts.json its export wrote beside its weights."""
    path = shipped_file(model, "casts_file")
    if path is None:
        raise ValueError(
            "keep_cast needs the model's casts, casts.json beside its weights, and this model has none: pass casts= "
            "(a dict of play -> speakers, or a casts.json), or export the model again (training.export writes it)"
        )
    return as_casts(path)


def names_a_speaker(path: Path | None) -> bool:
    """Whether the casts.json at `path` names a speaker (a model trained on text without headings has none)."""
    return path is not None and speakers_named(
        *file_version(path, f"casts file {path} does not exist", MAX_CASTS_BYTES)
    )


@functools.lru_cache(maxsize=4)
def speakers_named(path: str, modified: float) -> bool:
    """`names_a_speaker` of the file at `path` (`modified`: its time, so an edited file is read anew)."""
    try:
        plays = json.loads(Path(path).read_text(encoding="utf-8")).get("plays")
    except (OSError, UnicodeDecodeError, ValueError, AttributeError, RecursionError):
        return True  # keep_cast will say what is wrong with it
    return not isinstance(plays, dict) or any(plays.values())


def run_casts(model: object, options: SamplerOptions, casts: object = None) -> Casts | None:
    """The casts a run keeps its headings to: `casts`, else the model's own, with `keep_cast`; None without."""
    if not options.keep_cast:
        if casts is not None:
            raise ValueError("casts applies with keep_cast=True: pass keep_cast=True too, or no casts")
        return None
    return model_casts(model) if casts is None else as_casts(casts)
