"""Each play's speakers in a training text: the casts.json an export writes beside the weights (`keep_cast` keeps a
model's headings to one play of it). The plays: TinyShakespeare's nine (training/tinyshakespeare_plays.json), the
corpus builder's (by its manifest), any other file one play; their speakers are those their headings name in the
training split. `longest_line` is the training text's longest line, a speech line's limit.

    python -m training.casts --data tinyshakespeare.txt --train-extra runs/corpus/more_plays.txt --out casts.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path

from mdlm_hf.metrics import speakers
from mdlm_hf.sampling.casts import LONGEST_LINE, Casts
from training.atomic import atomic_write_bytes
from training.build_corpus import read_plays
from training.corpus import SEPARATOR, TINYSHAKESPEARE_MD5, TRAIN_FRACTION, read_text

TINYSHAKESPEARE_PLAYS = Path(__file__).with_name("tinyshakespeare_plays.json")
ROMAN = re.compile(r"[IVXLC]+")  # "II:", an act's number that the builder's text reads as a heading: no speaker


def file_plays(path: Path, text: str) -> list[tuple[str, int, int]]:
    """(play, start, end) of each play in one file's text: TinyShakespeare's map, a corpus builder manifest's plays,
    else the whole file one play named by its file."""
    if hashlib.md5(text.encode()).hexdigest() == TINYSHAKESPEARE_MD5:
        segments = json.loads(TINYSHAKESPEARE_PLAYS.read_text(encoding="utf-8"))["plays"]
        return [(segment["play"], segment["start"], segment["end"]) for segment in segments]
    plays, start = [], 0
    for name, play_text in read_plays(path).items():  # {} without a builder's manifest beside it
        plays.append((name, start, start + len(play_text)))
        start += len(play_text) + 1  # the builder joins its plays with a line break
    return plays or [(path.stem, 0, len(text))]


def training_plays(data_paths: list[str | Path], extra_paths: list[str | Path] = ()) -> dict[str, str]:
    """Play -> the text of it that trains: the --data files' (joined as training joins them, cut at the training
    split) and the --train-extra files' (all of them train)."""
    texts = [read_text(path) for path in data_paths]
    cut = int(len(SEPARATOR.join(texts)) * TRAIN_FRACTION)
    plays: dict[str, str] = {}
    offset = 0
    for path, text in zip(data_paths, texts, strict=True):
        for name, start, end in file_plays(Path(path), text):
            piece = text[start : max(start, min(end, cut - offset))]
            plays[name] = plays.get(name, "") + piece
        offset += len(text) + len(SEPARATOR)
    for path in extra_paths:
        text = read_text(path)
        for name, start, end in file_plays(Path(path), text):
            plays[name] = plays.get(name, "") + "\n" + text[start:end]
    return plays


def training_casts(data_paths: list[str | Path], extra_paths: list[str | Path] = ()) -> dict:
    """casts.json's content for a training text: {"plays": play -> its speakers, "longest_line": N}; a text with
    no headings has no play with a speaker."""
    plays = training_plays(data_paths, extra_paths)
    longest = max((longest_line(text) for text in plays.values()), default=LONGEST_LINE)
    casts = {name: sorted(n for n in speakers(text) if not ROMAN.fullmatch(n)) for name, text in plays.items()}
    return {"plays": {name: names for name, names in casts.items() if names}, "longest_line": longest}


def text_casts(text: str, name: str = "text") -> dict:
    """casts.json's content for a text that is one play (`name`)."""
    return {"plays": {name: sorted(speakers(text))} if speakers(text) else {}, "longest_line": longest_line(text)}


def longest_line(text: str) -> int:
    """The length of a text's longest line."""
    return max(len(line) for line in text.split("\n"))


def write_casts(casts: dict, path: Path) -> None:
    """Writes casts.json (atomically): the casts as `Casts` checks them, or with no play where the text has no
    headings (keep_cast then says so)."""
    text = json.dumps(casts, indent=1, ensure_ascii=False, sort_keys=True) + "\n"
    if casts["plays"]:
        Casts(casts["plays"], casts["longest_line"])  # a check: what keep_cast will read
    atomic_write_bytes(Path(path), text.encode("utf-8"))


def main(argv: list[str] | None = None) -> None:
    """`python -m training.casts`: writes the casts.json of a training text."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", nargs="+", required=True, help="the text's files, as training read them")
    parser.add_argument("--train-extra", nargs="*", default=[], help="the files that joined the training split only")
    parser.add_argument("--out", required=True, help="the casts.json to write (a model folder's)")
    args = parser.parse_args(argv)
    try:
        casts = training_casts(args.data, args.train_extra)
        write_casts(casts, Path(args.out))
    except (ValueError, OSError) as error:
        sys.exit(f"error: {error}")
    named = sum(len(names) for names in casts["plays"].values())
    print(f"wrote {args.out}: {len(casts['plays'])} plays, {named} speakers, lines up to {casts['longest_line']}")


if __name__ == "__main__":
    main()
