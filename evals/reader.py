"""Which sampler a reader prefers: cheap judges of named samplers' texts, and blind readings.

A blind reading: `packet` writes passages of PASSAGE characters, each from a line start, from named samplers
(SAMPLERS) beside real held-out text, shuffled into one numbered packet (packet.md), and keeps apart the key
(key.json: which source wrote each passage, with its seed and options). A reader who sees only packet.md (a person,
or any reader given nothing else) writes ranking.txt, the passage numbers from most to least like Shakespeare's own
writing. `score` turns the ranking into each source's mean rank with its spread. The protocol: docs/readings.md.

The cheap judges (`judge`), before any reading: each source's texts read by the autoregressive twin (its NLL, bits
per character) and by a 7-gram model of the training split, their words' entropy and share of distinct words, and
the layout slips a reader notices at once (long lines, a speaker twice running, a line of punctuation alone).

    python -m evals.reader judge --sources real default t08 twin --texts 24
    python -m evals.reader packet runs/reading/r1 --sources real default t08 twin --per-source 6 --seed 1000
    python -m evals.reader score runs/reading/r1
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import torch

from evals.text_metrics import KneserNeyJudge
from mdlm_hf import MDLM, elbo, sample
from mdlm_hf.likelihood import exact_nll
from mdlm_hf.metrics import heading_name, words
from mdlm_hf.sampling.casts import as_casts
from mdlm_hf.sampling.quotes import closes_unopened
from mdlm_hf.sampling.state import final_state
from studio.common import SHARED_DATA, SHIPPED_MODEL, SHIPPED_TWIN, thread_count
from training.corpus import split_text

PASSAGE = 200  # characters a reader reads of each passage
LENGTH = 256  # characters each sampler writes: the model's context, from an empty canvas
JUDGE_ORDER = 7
BEST_OF_DRAWS = 8  # ELBO draws that score each of best-of-N's candidates


@dataclass(frozen=True)
class Sampler:
    """A named way of writing: which model, the options it changes from that model's defaults (the rules on),
    and best-of-N: N candidates written as one batch, the one the diffusion model's own ELBO finds likeliest kept."""

    model: str  # "diffusion" or "twin"
    options: dict = field(default_factory=dict)
    best_of: int = 1


SAMPLERS = {
    "default": Sampler("diffusion"),
    "t125": Sampler("diffusion", dict(temperature=1.25)),  # the default before the readings
    "t10": Sampler("diffusion", dict(temperature=1.0)),
    "t09": Sampler("diffusion", dict(temperature=0.9)),
    "t08": Sampler("diffusion", dict(temperature=0.8)),
    "t07": Sampler("diffusion", dict(temperature=0.7)),
    "t06": Sampler("diffusion", dict(temperature=0.6)),
    "t08-minp20": Sampler("diffusion", dict(temperature=0.8, min_p=0.2)),
    "t10-minp20": Sampler("diffusion", dict(temperature=1.0, min_p=0.2)),
    "t08-caps100": Sampler("diffusion", dict(temperature=0.8, capital_temperature_factor=1.0)),
    "t08-confidence": Sampler("diffusion", dict(temperature=0.8, order="confidence", spacing=0)),
    "t08-left-to-right": Sampler(
        "diffusion", dict(temperature=0.8, order="left_to_right", spacing=0, num_steps=LENGTH)
    ),
    "t08-blocks32": Sampler("diffusion", dict(temperature=0.8, block_length=32)),
    "t10-best4": Sampler("diffusion", dict(temperature=1.0), best_of=4),
    "t08-best4": Sampler("diffusion", dict(temperature=0.8), best_of=4),
    "twin": Sampler("twin"),
    "twin-t08": Sampler("twin", dict(temperature=0.8)),
}
SOURCES = ("real", *SAMPLERS)  # "real": held-out text (the validation split)


class Writers:
    """The shipped model and its twin, loaded once, and real text to read beside theirs."""

    def __init__(self, data: Path = SHARED_DATA) -> None:
        self.models = {
            "diffusion": MDLM.from_pretrained(SHIPPED_MODEL),
            "twin": MDLM.from_pretrained(SHIPPED_TWIN),
        }
        self.train, self.real = split_text(data.read_text(encoding="utf-8"))

    def text(self, source: str, seed: int) -> str:
        """LENGTH characters from `source`: a sampler's free text, or real text from a random line start."""
        if source == "real":
            rng = random.Random(seed)
            start = self.real.index("\n", rng.randrange(len(self.real) - 4 * LENGTH)) + 1
            return self.real[start : start + LENGTH]
        sampler = SAMPLERS[source]
        model = self.models[sampler.model]
        canvas = torch.full((sampler.best_of, LENGTH), model.mask_id)
        tokens = final_state(sample(model, canvas, seed=seed, **sampler.options)).tokens
        if sampler.best_of > 1:
            tokens = tokens[min(range(sampler.best_of), key=lambda row: self.own_nats(tokens[row], seed))][None]
        return model.tokenizer.decode(tokens[0])

    def own_nats(self, tokens: torch.Tensor, seed: int) -> float:
        """The diffusion model's negative ELBO of a text, nats per character: how likely it finds its own text."""
        generator = torch.Generator().manual_seed(seed)
        return elbo(self.models["diffusion"], tokens, BEST_OF_DRAWS, generator).nats_per_char


def passage(text: str, seed: int, length: int = PASSAGE) -> str:
    """`length` characters of `text` from a line start (a random one of those that leave enough), cut back to the
    end of a word so that no passage ends mid-word."""
    starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n" and i + 1 + length <= len(text)]
    start = random.Random(seed).choice([s for s in starts if s + length <= len(text)] or [0])
    cut = text[start : start + length]
    end = max(cut.rfind(" "), cut.rfind("\n")) if start + length < len(text) else len(cut)
    return cut[: end if end > length // 2 else length].rstrip()


# --- the cheap judges ---


SLIP_COLUMNS = ("long line", "speaker twice", "punctuation line", "double space", "unopened quote")


def layout_slips(text: str, longest_line: int) -> Counter:
    """What a reader sees at once: lines longer than the training text's longest, a speaker twice running, a line
    of punctuation alone, a double space, a heading written with a space before its colon, a quotation closed that
    its speech never opened."""
    slips: Counter = Counter()
    chars = list(text)
    slips["unopened quote"] = sum(closes_unopened(chars, p) for p, c in enumerate(chars) if c == "'")
    lines, previous_speaker = text.split("\n"), None
    for i, line in enumerate(lines):
        speaker = heading_name(line, lines[i - 1] if i else None)
        slips["long line"] += len(line) > longest_line
        slips["speaker twice"] += speaker is not None and speaker == previous_speaker
        slips["punctuation line"] += bool(line.strip()) and not re.search(r"[A-Za-z]", line)
        slips["double space"] += "  " in line
        slips["spaced colon"] += bool(re.fullmatch(r"[A-Z][A-Za-z ]* :", line))
        previous_speaker = speaker if speaker is not None else previous_speaker
    return slips


def judge(writers: Writers, sources: list[str], count: int, seed: int) -> str:
    """A markdown table of the cheap judges of `count` texts per source."""
    twin, judge7 = writers.models["twin"], KneserNeyJudge(writers.train, order=JUDGE_ORDER)
    longest = as_casts(SHIPPED_MODEL / "casts.json").longest_line  # the longest line of the text the model read
    rows = [
        "| source | twin NLL (bits/char) | 7-gram NLL (bits/char) | word entropy (bits) | distinct words | "
        "long lines | speaker twice | punctuation lines | double spaces | unopened quotes |",
        "|---" * 10 + "|",
    ]
    print("\n".join(rows), flush=True)
    for source in sources:
        texts = [passage(writers.text(source, seed + i), seed + i) for i in range(count)]
        twin_bits = statistics.mean(exact_nll(twin, torch.tensor(twin.tokenizer.encode(t))) for t in texts) / math.log(
            2
        )
        judge_bits = statistics.mean(-judge7.log_likelihood(t) / len(t) for t in texts) / math.log(2)
        all_words = [w.lower() for t in texts for w in words(t)]
        counts = Counter(all_words)
        entropy = -sum(c / len(all_words) * math.log2(c / len(all_words)) for c in counts.values())
        slips = sum((layout_slips(t, longest) for t in texts), Counter())
        rows.append(
            f"| {source} | {twin_bits:.3f} | {judge_bits:.3f} | {entropy:.2f} | {len(counts) / len(all_words):.2f} | "
            + " | ".join(str(slips[slip]) for slip in SLIP_COLUMNS)
            + " |"
        )
        print(rows[-1], flush=True)
    return "\n".join(rows)


# --- blind readings ---

INSTRUCTIONS = (
    "# A blind reading\n\nRank these {n} passages from the one that reads most like Shakespeare's own writing to the "
    "one that reads least like it: sense first (does each line mean something, does the speech follow), then "
    "words, verse and the layout of a play. Some are real, some written by machines; nothing else is known about "
    "them. Answer with the passage numbers, best first, one a line.\n"
)


def write_packet(folder: Path, writers: Writers, sources: list[str], per_source: int, seed: int) -> None:
    """packet.md (the shuffled passages, numbered) and key.json (each number's source) in `folder`."""
    entries = [
        {"source": source, "seed": seed + i, "text": passage(writers.text(source, seed + i), seed + i)}
        for source in sources
        for i in range(per_source)
    ]
    random.Random(seed).shuffle(entries)
    folder.mkdir(parents=True, exist_ok=True)
    body = "".join(f"\n## Passage {n}\n\n```text\n{e['text']}\n```\n" for n, e in enumerate(entries, 1))
    (folder / "packet.md").write_text(INSTRUCTIONS.format(n=len(entries)) + body, encoding="utf-8")
    key = {str(n): {**e, "options": options_of(e["source"])} for n, e in enumerate(entries, 1)}
    (folder / "key.json").write_text(json.dumps(key, indent=1), encoding="utf-8")


def slips_table(writers: Writers, sources: list[str], count: int, seed: int) -> str:
    """A markdown table of the layout slips in `count` whole texts of LENGTH characters per source."""
    longest = as_casts(SHIPPED_MODEL / "casts.json").longest_line
    rows = ["| source | texts | " + " | ".join(SLIP_COLUMNS) + " |", "|---" * (len(SLIP_COLUMNS) + 2) + "|"]
    for source in sources:
        slips = sum((layout_slips(writers.text(source, seed + i), longest) for i in range(count)), Counter())
        rows.append(f"| {source} | {count} | " + " | ".join(str(slips[slip]) for slip in SLIP_COLUMNS) + " |")
        print(rows[-1], flush=True)
    return "\n".join(rows)


def options_of(source: str) -> dict:
    """What the key records of a source: its model, options and best-of-N (real text: none)."""
    if source == "real":
        return {}
    sampler = SAMPLERS[source]
    return {"model": sampler.model, **sampler.options, "best_of": sampler.best_of}


def read_ranking(path: Path, count: int) -> list[int]:
    """The passage numbers of a ranking file, best first; a ValueError unless each of 1..count is there once."""
    numbers = [int(n) for n in re.findall(r"\d+", path.read_text(encoding="utf-8"))]
    if sorted(numbers) != list(range(1, count + 1)):
        missing = sorted(set(range(1, count + 1)) - set(numbers))
        repeated = sorted(n for n, c in Counter(numbers).items() if c > 1)
        raise ValueError(f"{path} must rank passages 1-{count} once each (missing {missing}, repeated {repeated})")
    return numbers


def score(folder: Path) -> str:
    """Each source's mean rank in folder/ranking.txt, with its spread and its ranks, as a markdown table."""
    key = json.loads((folder / "key.json").read_text(encoding="utf-8"))
    ranking = read_ranking(folder / "ranking.txt", len(key))
    ranks: dict[str, list[int]] = {}
    for rank, number in enumerate(ranking, 1):
        ranks.setdefault(key[str(number)]["source"], []).append(rank)
    rows = ["| source | mean rank | spread (sd) | ranks |", "|---|---|---|---|"]
    for source, got in sorted(ranks.items(), key=lambda item: statistics.mean(item[1])):
        spread = statistics.stdev(got) if len(got) > 1 else 0.0
        rows.append(f"| {source} | {statistics.mean(got):.1f} | {spread:.1f} | {', '.join(map(str, sorted(got)))} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    """The command line: judge, slips, packet or score."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    judged = commands.add_parser("judge", help="the cheap judges of each source's texts")
    slipped = commands.add_parser("slips", help="the layout slips of each source's whole texts")
    packet = commands.add_parser("packet", help="a blind packet and its key")
    packet.add_argument("folder", type=Path)
    scored = commands.add_parser("score", help="a reader's ranking.txt as mean ranks per source")
    scored.add_argument("folder", type=Path)
    for command in (judged, slipped, packet):
        command.add_argument("--sources", nargs="+", choices=SOURCES, default=["real", "default", "t08", "twin"])
        command.add_argument("--seed", type=int, default=1000)
        command.add_argument("--threads", type=thread_count, default=None, help="torch threads (default: torch's)")
    judged.add_argument("--texts", type=int, default=24)
    slipped.add_argument("--texts", type=int, default=48)
    packet.add_argument("--per-source", type=int, default=6)
    args = parser.parse_args(argv)
    if args.command == "score":
        print(score(args.folder))
        return
    if args.threads:
        torch.set_num_threads(args.threads)
    writers = Writers()
    if args.command == "judge":
        judge(writers, args.sources, args.texts, args.seed)
    elif args.command == "slips":
        print(slips_table(writers, args.sources, args.texts, args.seed))
    else:
        write_packet(args.folder, writers, args.sources, args.per_source, args.seed)
        print(f"{args.folder / 'packet.md'}: give it, and nothing else, to the reader; key.json stays here")


if __name__ == "__main__":
    main()
