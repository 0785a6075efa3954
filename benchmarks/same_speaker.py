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
from pathlib import Path

import torch

from benchmarks.blank_after_heading import REAL_HEADINGS, load_odds_inputs, odds_parser, row_log_probs
from benchmarks.sampling_quality import model_fingerprint
from benchmarks.structure import heading_name
from benchmarks.structure_suite import PROMPTS, RESULTS
from mdlm_hf import MDLM
from mdlm_hf.data import atomic_write_bytes

Context = tuple[str, int, str]  # (text, where a heading begins, the previous speaker's name)


def out_path(rule: str) -> Path:
    """Where a rule's table goes: same_speaker.md for the default, same_speaker-RULE.md else."""
    return RESULTS.parent / ("same_speaker.md" if rule == "default" else f"same_speaker-{rule}.md")


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
        if start - above <= 220 and start + length <= len(text)
    ]
    contexts = []
    for above, start, previous in rng.sample(pairs, min(count, len(pairs))):
        before = rng.randint(max(40, start - above), 220)
        contexts.append((text[start - before : start - before + length], before, previous))
    return contexts


def rule_contexts(store: dict, fingerprint: str, rule: str) -> dict[str, list[Context]]:
    """Per prompt, every heading a rule began in its stored texts of this model, with a heading above it."""
    by_prompt: dict[str, list[Context]] = {}
    for key, row in store.items():
        made_by, name, prompt, _ = key.split("|")
        if made_by != fingerprint or name != rule:
            continue
        for text in row["texts"]:
            by_prompt.setdefault(prompt, []).extend(
                (text, start, previous)
                for _, start, previous, _ in headings_after_headings(text)
                if row["written"][start] and start + len(previous) < len(text)  # the name fits on the canvas
            )
    return {prompt: by_prompt[prompt] for prompt in PROMPTS if prompt in by_prompt}


def spelling_rows(model: MDLM, contexts: list[Context]) -> tuple[list[list[int]], list[tuple[int, int, int, int]]]:
    """The canvases to run and, per spelt character, (context, row, position read, character id)."""
    rows, reads = [], []
    for index, (text, start, name) in enumerate(contexts):
        before, spelt = model.tokenizer.encode(text[:start]), model.tokenizer.encode(name + ":")
        if model.causal:  # one pass: its logits at i are of the character after i
            rows.append(before + spelt)
            reads += [(index, len(rows) - 1, start - 1 + k, char) for k, char in enumerate(spelt)]
            continue
        for k, char in enumerate(
            spelt
        ):  # a pass per character: the ones before it known, the rest of the canvas masked
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


def table_row(name: str, contexts: list[Context], model: MDLM, twin: MDLM | None) -> str:
    """One line of the table: the texts' own rate and the mean probabilities."""
    drawn = sum(text[start : start + len(previous) + 1] == previous + ":" for text, start, previous in contexts)
    mean = sum(name_probabilities(model, contexts)) / len(contexts)
    twin_mean = "-" if twin is None else f"{sum(name_probabilities(twin, contexts)) / len(contexts):.4f}"
    return f"| {name} | {len(contexts)} | {drawn / len(contexts):.4f} | {mean:.4f} | {twin_mean} |"


def main(argv: list[str] | None = None) -> None:
    args = odds_parser(__doc__).parse_args(argv)
    store, model, twin, texts = load_odds_inputs(args)
    lines = [
        f"p(a heading names the speaker of the heading above), the text before it known: model "
        f"{args.model or 'shipped'}, rule {args.rule}'s stored texts",
        "",
        "| text | headings | drawn | model | twin |",
        "|---|---|---|---|---|",
    ]
    for name, text in texts.items():
        lines.append(table_row(name, real_contexts(text, REAL_HEADINGS, seed=0), model, twin))
        print(lines[-1], flush=True)
    for prompt, contexts in rule_contexts(store, model_fingerprint(model), args.rule).items():
        lines.append(table_row(f"{args.rule}, {prompt}", contexts, model, twin))
        print(lines[-1], flush=True)
    atomic_write_bytes(out_path(args.rule), ("\n".join(lines) + "\n").encode())


if __name__ == "__main__":
    try:
        main()
    except (ValueError, OSError) as error:  # a missing model or twin, an unreadable store: one line
        sys.exit(f"error: {error}")
