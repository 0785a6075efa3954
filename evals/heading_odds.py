"""Two questions about headings, asked of the model as it writes left to right, on real text and on a rule's own
texts, beside the autoregressive twin's odds on the same characters:

- blank: where empty speeches come from. How likely the model says a speech ends before it begins (a line break
  right after a speaker's heading).
- same-speaker: what drives the same speaker twice. How likely the model says a heading names the speaker of the
  heading before it.

    python -m evals.heading_odds blank                          # the shipped model and twin, the default's texts
    python -m evals.heading_odds blank --model DIR --rule default
    python -m evals.heading_odds blank --rule joint             # the model's own left-to-right texts
    python -m evals.heading_odds same-speaker [--rule joint]

An empty speech (evals/structure_metrics.py) is a heading followed by a blank line. For each heading of a text, the
model reads everything before the character after the heading's line break and nothing after it (the diffusion
model: the rest of the canvas masked; the twin: its causal context), and gives the probability that this character
is a line break. On real text that probability should match how often real text has one there; on a rule's texts
it says whether the rule's draw or the model's beliefs write the empty speeches ("drawn" is how often the texts
have one). Real text is read in windows of 256 characters, the scored character 40 to 220 characters in (at random);
a rule's texts as they were sampled, the prompt's given characters included, at every heading the rule wrote whose
next character it wrote too.

"The same speaker twice" (evals/structure_metrics.py) is a heading that names the speaker of the nearest heading
above it. In real text a speaker never follows themselves (8 of TinyShakespeare's 7,219 headings do, where its scrape
lost the speech between). For each heading with a heading above it in the text, the model reads everything before
the heading's first character and nothing after it, and spells the previous speaker's name and colon there one
character at a time, left to right (the diffusion model: a pass for each character, the rest of the canvas masked;
the twin: its causal context). The product is p(this heading names the previous speaker | the text before). "Drawn"
is how often the texts' headings do. Real text is read in windows of 256 characters that begin 40 to 220 characters
before the heading and hold the heading above it (so the speech between is short); a rule's texts as they were
sampled, at every heading the rule began.

A rule's texts are the structure suite's store (--store; default the committed one,
evals/results/structure/texts.json.gz). The table goes to runs/evals/heading_odds/blank_after_heading.md or
same_speaker.md (another rule's to STEM-RULE.md); the committed tables the docs cite are in evals/results/heading_odds/.
"""

from __future__ import annotations

import argparse
import itertools
import math
import random
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from evals.heldout_plays import HELDOUT_TEXT
from evals.sampling_quality import model_fingerprint
from evals.structure_metrics import heading_name
from evals.structure_suite import COMMITTED_STORE, PROMPTS, RULES, load_store
from mdlm_hf import MDLM
from mdlm_hf.data import atomic_write_bytes, read_text, split_text
from mdlm_hf.objectives import objective_of
from studio.common import RUNS, SHARED_DATA, load_model, load_twin, thread_count

OUT_DIR = RUNS / "evals" / "heading_odds"  # where the tables go
REAL_HEADINGS = 512  # headings of a real text read (at random, seeded)
BATCH = 64


# --- a line break right after a heading ---


def after_headings(text: str) -> list[int]:
    """The position of the character after each heading's line break, where the text has one."""
    lines, positions, start = text.split("\n"), [], 0
    for i, line in enumerate(lines[:-1]):
        after = start + len(line) + 1
        if after < len(text) and heading_name(line, lines[i - 1] if i else None) is not None:
            positions.append(after)
        start = after
    return positions


def real_heading_contexts(text: str, count: int, seed: int, length: int = 256) -> list[tuple[str, int]]:
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
    shift = objective_of(model).logit_shift  # a twin's logits at i are of the character after i
    probabilities = [0.0] * len(contexts)
    for i, log_probs in row_log_probs(model, rows):
        probabilities[i] = log_probs[contexts[i][1] - shift, newline].exp().item()
    return probabilities


def blank_contexts_in(text: str, written: list[bool]) -> list[tuple[str, int]]:
    """(text, position) after every heading of a sampled text whose next character the sampler wrote."""
    return [(text, p) for p in after_headings(text) if written[p]]


def odds_parser(description: str) -> argparse.ArgumentParser:
    """The flags both questions take."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="a model directory (default: the shipped model)")
    parser.add_argument("--twin", help="its autoregressive twin's directory (default: the shipped one; none: skip)")
    parser.add_argument(
        "--rule", default="default", choices=list(RULES), help="the structure suite rule whose stored texts are read"
    )
    parser.add_argument("--store", default=str(COMMITTED_STORE), help="the structure suite's store")
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
class OddsQuestion:
    """What an odds question reads: its contexts in real text and in a sampled text, p(the event | the text before)
    per context, and whether a context's own text has the event."""

    title: str  # the table's first words
    stem: str  # its file: OUT_DIR/STEM.md for the default's texts, STEM-RULE.md for another rule's
    real_contexts: Callable[[str, int, int], list]  # (text, count, seed) -> contexts
    contexts_in: Callable[[str, list[bool]], list]  # (a sampled text, its written flags) -> contexts
    probabilities: Callable[[MDLM, list], list[float]]
    has_event: Callable[[Any], bool]

    def out_path(self, rule: str) -> Path:
        """Where a rule's table goes."""
        return OUT_DIR / (f"{self.stem}.md" if rule == "default" else f"{self.stem}-{rule}.md")

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
        self.write_table(odds_parser(description).parse_args(argv))

    def write_table(self, args: argparse.Namespace) -> None:
        """Reads real texts and the rule's texts, and writes the table (and prints its rows)."""
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
        self.out_path(args.rule).parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(self.out_path(args.rule), ("\n".join(lines) + "\n").encode())


BLANK_ODDS = OddsQuestion(
    title="p(line break right after a heading)",
    stem="blank_after_heading",
    real_contexts=real_heading_contexts,
    contexts_in=blank_contexts_in,
    probabilities=blank_probabilities,
    has_event=lambda context: context[0][context[1]] == "\n",
)


# --- the same speaker twice ---

Context = tuple[str, int, str]  # (text, where a heading begins, the previous speaker's name)


def headings_after_headings(text: str) -> list[tuple[int, int, str, str]]:
    """(start of the heading above, start of this heading, that speaker, this speaker) for each heading of a text
    with another heading above it."""
    lines, found, start, above = text.split("\n"), [], 0, None
    for i, line in enumerate(lines):
        name = heading_name(line, lines[i - 1] if i else None)
        if name is not None:
            if above is not None:
                found.append((above[0], start, above[1], name))
            above = (start, name)
        start += len(line) + 1
    return found


def real_speaker_contexts(text: str, count: int, seed: int, length: int = 256) -> list[Context]:
    """`count` headings of a real text whose heading above lies within 220 characters, each in a window that holds
    `length` characters, that heading, and 40 to 220 characters before this one."""
    rng = random.Random(seed)
    pairs = [
        (above, start, previous)
        for above, start, previous, _ in headings_after_headings(text)
        if start - above <= 220 and 220 <= start and start + length <= len(text)  # any window fits in the text
    ]
    contexts = []
    for above, start, previous in rng.sample(pairs, min(count, len(pairs))):
        before = rng.randint(max(40, start - above), 220)
        contexts.append((text[start - before : start - before + length], before, previous))
    return contexts


def speaker_contexts_in(text: str, written: list[bool]) -> list[Context]:
    """Every heading the sampler began in a sampled text, with a heading above it and room for that one's name."""
    return [
        (text, start, previous)
        for _, start, previous, _ in headings_after_headings(text)
        if written[start] and start + len(previous) < len(text)  # the name fits on the canvas
    ]


def spelling_rows(model: MDLM, contexts: list[Context]) -> tuple[list[list[int]], list[tuple[int, int, int, int]]]:
    """The canvases to run and, per spelt character, (context, row, position read, character id)."""
    rows, reads = [], []
    for index, (text, start, name) in enumerate(contexts):
        before, spelt = model.tokenizer.encode(text[:start]), model.tokenizer.encode(name + ":")
        if not objective_of(model).fills_blanks:  # it reads its prefix: one pass, its logits shifted by one
            rows.append(before + spelt)
            reads += [(index, len(rows) - 1, start - 1 + k, char) for k, char in enumerate(spelt)]
            continue
        # a pass per character: the ones before it known, the rest of the canvas masked
        for k, char in enumerate(spelt):
            rows.append(before + spelt[:k] + [model.mask_id] * (len(text) - start - k))
            reads.append((index, len(rows) - 1, start + k, char))
    return rows, reads


@torch.no_grad()
def name_probabilities(model: MDLM, contexts: list[Context]) -> list[float]:
    """p(the previous speaker's name and a colon, spelt from `start` | the text before it), per context."""
    rows, reads = spelling_rows(model, contexts)
    reads_by_row: dict[int, list[tuple[int, int, int]]] = {}
    for index, row, position, char in reads:
        reads_by_row.setdefault(row, []).append((index, position, char))
    log_probs = [0.0] * len(contexts)
    for row, scores in row_log_probs(model, rows):
        for index, position, char in reads_by_row[row]:
            log_probs[index] += scores[position, char].item()
    return [math.exp(lp) for lp in log_probs]


SAME_SPEAKER_ODDS = OddsQuestion(
    title="p(a heading names the speaker of the heading above)",
    stem="same_speaker",
    real_contexts=real_speaker_contexts,
    contexts_in=speaker_contexts_in,
    probabilities=name_probabilities,
    has_event=lambda context: context[0][context[1] : context[1] + len(context[2]) + 1] == context[2] + ":",
)


ODDS = {"blank": BLANK_ODDS, "same-speaker": SAME_SPEAKER_ODDS}  # the question on the command line -> its reader


def main(argv: list[str] | None = None) -> None:
    """Parses the question and its flags, and writes the question's table."""
    parser = odds_parser(__doc__)
    parser.add_argument("question", choices=list(ODDS), help="blank: a line break after a heading; same-speaker")
    args = parser.parse_args(argv)
    ODDS[args.question].write_table(args)


if __name__ == "__main__":
    try:
        main()
    except (ValueError, OSError) as error:  # a missing model or twin, an unreadable store: one line
        sys.exit(f"error: {error}")
