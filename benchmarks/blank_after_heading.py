"""Where empty speeches come from: how likely the model says a speech ends before it begins (a line break right
after a speaker's heading), as it writes left to right, on real text and on a rule's own texts, beside the
autoregressive twin's odds on the same characters.

    python -m benchmarks.blank_after_heading                      # the shipped model and twin, the default's texts
    python -m benchmarks.blank_after_heading --model DIR --rule default
    python -m benchmarks.blank_after_heading --rule joint         # the model's own left-to-right texts

An empty speech (benchmarks/structure.py) is a heading followed by a blank line. For each heading of a text, the
model reads everything before the character after the heading's line break and nothing after it (the diffusion
model: the rest of the canvas masked; the twin: its causal context), and gives the probability that this character
is a line break. On real text that probability should match how often real text has one there; on a rule's texts
it says whether the rule's draw or the model's beliefs write the empty speeches ("drawn" is how often the texts
have one). Real text is read in windows of 256 characters, the scored character 40 to 220 characters in (at random);
a rule's texts (benchmarks/results/structure/texts.json, the structure suite's store) as they were sampled, the
prompt's given characters included, at every heading the rule wrote whose next character it wrote too. The table
goes to benchmarks/results/blank_after_heading.md (another rule's to blank_after_heading-RULE.md).
"""

from __future__ import annotations

import argparse
import itertools
import random
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from benchmarks.common import SHARED_DATA, load_model, load_twin, thread_count
from benchmarks.heldout import HELDOUT_TEXT
from benchmarks.sampling_quality import model_fingerprint
from benchmarks.structure import heading_name
from benchmarks.structure_suite import PROMPTS, RESULTS, RULES, load_store
from mdlm_hf import MDLM
from mdlm_hf.data import atomic_write_bytes, read_text, split_text

REAL_HEADINGS = 512  # headings of a real text read (at random, seeded)
BATCH = 64


def after_headings(text: str) -> list[int]:
    """The position of the character after each heading's line break, where the text has one."""
    lines, positions, start = text.split("\n"), [], 0
    for i, line in enumerate(lines[:-1]):
        after = start + len(line) + 1
        if after < len(text) and heading_name(line, lines[i - 1] if i else None) is not None:
            positions.append(after)
        start = after
    return positions


def real_contexts(text: str, count: int, seed: int, length: int = 256) -> list[tuple[str, int]]:
    """(window, position) pairs: `count` headings of a real text, each in a window that holds `length` characters
    and reaches 40 to 220 characters before the character after the heading."""
    rng = random.Random(seed)
    positions = [p for p in after_headings(text) if p >= 220 and p + length <= len(text)]
    chosen = rng.sample(positions, min(count, len(positions)))
    contexts = []
    for p in chosen:
        before = rng.randint(40, 220)
        contexts.append((text[p - before : p - before + length], before))
    return contexts


def row_log_probs(model: MDLM, rows: list[list[int]]) -> Iterator[tuple[int, torch.Tensor]]:
    """(index, its (T, V) log-probabilities) for each row of token ids, run in batches of at most BATCH rows of one
    length: a diffusion model's canvas is its row, and padding one would lengthen the canvas it reads."""
    device = next(model.parameters()).device
    by_length = sorted(range(len(rows)), key=lambda i: len(rows[i]))
    for _, same_length in itertools.groupby(by_length, key=lambda i: len(rows[i])):
        indices = list(same_length)
        for first in range(0, len(indices), BATCH):
            batch = indices[first : first + BATCH]
            log_probs = model(torch.tensor([rows[i] for i in batch], device=device)).log_softmax(dim=-1)  # (B, T, V)
            yield from zip(batch, log_probs, strict=True)


@torch.no_grad()
def blank_probabilities(model: MDLM, contexts: list[tuple[str, int]]) -> list[float]:
    """p(line break at `position` | the text before it) for each (text, position): a diffusion model reads the rest
    of the text's canvas masked, a causal model (the twin) its prefix."""
    newline = model.tokenizer.encode("\n")[0]
    rows = [model.tokenizer.encode(text[:p]) + [model.mask_id] * (len(text) - p) for text, p in contexts]
    shift = 1 if model.causal else 0  # a causal model's logits at i are of the character after i
    probabilities = [0.0] * len(contexts)
    for i, log_probs in row_log_probs(model, rows):
        probabilities[i] = log_probs[contexts[i][1] - shift, newline].exp().item()
    return probabilities


def contexts_in(text: str, written: list[bool]) -> list[tuple[str, int]]:
    """(text, position) after every heading of a sampled text whose next character the sampler wrote."""
    return [(text, p) for p in after_headings(text) if written[p]]


def odds_parser(description: str) -> argparse.ArgumentParser:
    """The flags of the odds benchmarks (this one and benchmarks/same_speaker.py)."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="a model directory (default: the shipped model)")
    parser.add_argument("--twin", help="its autoregressive twin's directory (default: the shipped one; none: skip)")
    parser.add_argument(
        "--rule", default="default", choices=list(RULES), help="the structure suite rule whose stored texts are read"
    )
    parser.add_argument("--store", default=str(RESULTS / "texts.json"), help="the structure suite's store")
    parser.add_argument("--threads", type=thread_count, default=2)
    return parser


def load_odds_inputs(args: argparse.Namespace) -> tuple[dict, MDLM, MDLM | None, dict[str, str]]:
    """The store, the model (exact fp32), the twin (None: skipped) and the real texts, the store checked first."""
    store = load_store(Path(args.store))  # a file that is not a store is refused before minutes of passes
    torch.set_num_threads(args.threads)
    model = load_model(args.model, exact=True)[0].eval()
    twin = None if args.twin == "none" else load_twin(args.twin, model, exact=True)[0].eval()
    train, validation = split_text(read_text(SHARED_DATA))
    texts = {"training split": train, "validation split": validation}
    if HELDOUT_TEXT.is_file():
        texts["held-out plays"] = read_text(HELDOUT_TEXT)
    return store, model, twin, texts


@dataclass(frozen=True)
class OddsBenchmark:
    """What an odds benchmark reads: its contexts in real text and in a sampled text, p(the event | the text before)
    per context, and whether a context's own text has the event."""

    title: str  # the table's first words
    stem: str  # its file: benchmarks/results/STEM.md for the default's texts, STEM-RULE.md for another rule's
    real_contexts: Callable[[str, int, int], list]  # (text, count, seed) -> contexts
    contexts_in: Callable[[str, list[bool]], list]  # (a sampled text, its written flags) -> contexts
    probabilities: Callable[[MDLM, list], list[float]]
    has_event: Callable[[Any], bool]

    def out_path(self, rule: str) -> Path:
        """Where a rule's table goes."""
        return RESULTS.parent / (f"{self.stem}.md" if rule == "default" else f"{self.stem}-{rule}.md")

    def rule_contexts(self, store: dict, fingerprint: str, rule: str) -> dict[str, list]:
        """Per prompt with any, the contexts of a rule's stored texts of this model."""
        by_prompt: dict[str, list] = {}
        for key, row in store.items():
            made_by, name, prompt, _ = key.split("|")
            if made_by == fingerprint and name == rule:
                for text in row["texts"]:
                    by_prompt.setdefault(prompt, []).extend(self.contexts_in(text, row["written"]))
        return {prompt: by_prompt[prompt] for prompt in PROMPTS if by_prompt.get(prompt)}

    def table_row(self, name: str, contexts: list, model: MDLM, twin: MDLM | None) -> str:
        """One line of the table: how often the texts have the event, and the models' mean probabilities of it."""
        drawn = sum(map(self.has_event, contexts)) / len(contexts)
        mean = sum(self.probabilities(model, contexts)) / len(contexts)
        twin_mean = "-" if twin is None else f"{sum(self.probabilities(twin, contexts)) / len(contexts):.4f}"
        return f"| {name} | {len(contexts)} | {drawn:.4f} | {mean:.4f} | {twin_mean} |"

    def run(self, argv: list[str] | None, description: str) -> None:
        """Parses the flags, reads real texts and the rule's texts, and writes the table."""
        args = odds_parser(description).parse_args(argv)
        store, model, twin, texts = load_odds_inputs(args)
        lines = [
            f"{self.title}, the text before it known: model {args.model or 'shipped'}, rule {args.rule}'s stored texts",
            "",
            "| text | headings | drawn | model | twin |",
            "|---|---|---|---|---|",
        ]
        real = {name: self.real_contexts(text, REAL_HEADINGS, 0) for name, text in texts.items()}
        sampled = self.rule_contexts(store, model_fingerprint(model), args.rule)
        rows = {**{n: c for n, c in real.items() if c}, **{f"{args.rule}, {p}": c for p, c in sampled.items()}}
        for name, contexts in rows.items():
            lines.append(self.table_row(name, contexts, model, twin))
            print(lines[-1], flush=True)
        atomic_write_bytes(self.out_path(args.rule), ("\n".join(lines) + "\n").encode())


BLANK_ODDS = OddsBenchmark(
    title="p(line break right after a heading)",
    stem="blank_after_heading",
    real_contexts=real_contexts,
    contexts_in=contexts_in,
    probabilities=blank_probabilities,
    has_event=lambda context: context[0][context[1]] == "\n",
)


def main(argv: list[str] | None = None) -> None:
    BLANK_ODDS.run(argv, __doc__)


if __name__ == "__main__":
    try:
        main()
    except (ValueError, OSError) as error:  # a missing model or twin, an unreadable store: one line
        sys.exit(f"error: {error}")
