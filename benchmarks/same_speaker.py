"""What drives the same speaker twice: how likely the model says a heading names the speaker of the heading before
it, as it writes left to right, on real text and on a rule's own texts, beside the autoregressive twin's odds on the
same characters.

    python -m benchmarks.same_speaker                      # the shipped model and twin, the default's texts
    python -m benchmarks.same_speaker --rule joint         # the model's own left-to-right texts

"The same speaker twice" (benchmarks/structure.py) is a heading that names the speaker of the nearest heading above
it. In real text a speaker never follows themselves (8 of TinyShakespeare's 7,219 headings do, where its scrape lost
the speech between). For each heading with a heading above it in the text, the model reads everything before the
heading's first character and nothing after it, and spells the previous speaker's name and colon there one character
at a time, left to right (the diffusion model: a pass for each character, the rest of the canvas masked; the twin:
its causal context). The product is p(this heading names the previous speaker | the text before). "Drawn" is how
often the texts' headings do. Real text is read in windows of 256 characters that begin 40 to 220 characters before
the heading and hold the heading above it (so the speech between is short); a rule's texts as they were sampled, at
every heading the rule began. The table goes to benchmarks/results/same_speaker.md (another rule's to
same_speaker-RULE.md).
"""

from __future__ import annotations

import math
import random
import sys

import torch

from benchmarks.blank_after_heading import OddsBenchmark, row_log_probs
from benchmarks.structure import heading_name
from mdlm_hf import MDLM

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


def real_contexts(text: str, count: int, seed: int, length: int = 256) -> list[Context]:
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


def contexts_in(text: str, written: list[bool]) -> list[Context]:
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
        if model.causal:  # one pass: its logits at i are of the character after i
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


SAME_SPEAKER_ODDS = OddsBenchmark(
    title="p(a heading names the speaker of the heading above)",
    stem="same_speaker",
    real_contexts=real_contexts,
    contexts_in=contexts_in,
    probabilities=name_probabilities,
    has_event=lambda context: context[0][context[1] : context[1] + len(context[2]) + 1] == context[2] + ":",
)


def main(argv: list[str] | None = None) -> None:
    SAME_SPEAKER_ODDS.run(argv, __doc__)


if __name__ == "__main__":
    try:
        main()
    except (ValueError, OSError) as error:  # a missing model or twin, an unreadable store: one line
        sys.exit(f"error: {error}")
