"""Does real_words keep every word to the model's own word list, and at what cost? Words outside the model's
words.txt, dead ends (each a character that fell back to the model's own draw) and seconds, with and without it.

    python -m evals.real_words [--model DIR] [--seeds 16] [--temperatures 1.0 1.1 1.25] [--threads 2]

Each seed writes `generate(256)` with the default sampler at each temperature, without and with real_words, the two
taking turns (interleaved: the machine is noisy), so the time ratio compares runs of the same seed side by side.
A word is a run of letters with inner apostrophes (`mdlm_hf.metrics.words`); it is outside when the model's
words.txt (its training text's words) lacks it. The structure suite (evals/structure_suite.py, rules real-words-*)
and evals.invented_words (against all of Shakespeare) measure the same option's text.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

from mdlm_hf import MDLM, sample
from mdlm_hf.metrics import load_word_list, words
from mdlm_hf.pipeline import prompt_canvas
from mdlm_hf.sampling.lexicon import model_lexicon
from mdlm_hf.sampling.state import final_state

SHIPPED = Path(__file__).resolve().parent.parent / "pretrained" / "mdlm-shakespeare-char"
LENGTH = 256


def one_run(model: MDLM, seed: int, temperature: float, real_words: bool, length: int = LENGTH) -> dict[str, Any]:
    """One generate(length) with the default sampler at `temperature`: its text, dead ends and seconds."""
    canvas = prompt_canvas(model, "", length)
    start = time.perf_counter()
    options = dict(temperature=temperature, real_words=real_words, keep_cast=False)  # the words alone
    state = final_state(sample(model, canvas, seed=seed, **options))
    seconds = time.perf_counter() - start
    text = model.tokenizer.decode(state.tokens[0])
    return dict(
        text=text,
        seconds=seconds,
        fallbacks=0 if state.word_fallbacks is None else int(state.word_fallbacks[0]),
    )


def table(runs: dict[tuple[float, bool], list[dict]], known: set[str]) -> str:
    """The markdown table of the runs: per temperature, without and with real_words."""
    lines = [
        "| temperature | real_words | words | outside words.txt per 1k chars | dead ends per 1k chars | seconds "
        "(median) | time with / without (median of per-seed ratios) |",
        "|---|---|---|---|---|---|---|",
    ]
    for (temperature, real_words), rows in runs.items():
        chars = sum(len(r["text"]) for r in rows)
        found = [w for r in rows for w in words(r["text"])]
        outside = sum(w not in known for w in found)
        ratio = "-"
        if real_words:
            plain = runs[(temperature, False)]
            ratio = f"{statistics.median(r['seconds'] / p['seconds'] for r, p in zip(rows, plain, strict=True)):.2f}x"
        lines.append(
            f"| {temperature:g} | {'on' if real_words else 'off'} | {len(found):,} | {1000 * outside / chars:.2f} | "
            f"{1000 * sum(r['fallbacks'] for r in rows) / chars:.2f} | "
            f"{statistics.median(r['seconds'] for r in rows):.2f} | {ratio} |"
        )
    return "\n".join(lines)


def main() -> None:
    """Parses the flags, writes the texts seed by seed (the rules taking turns) and prints the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=str(SHIPPED), help="a model directory with its words.txt")
    parser.add_argument("--seeds", type=int, default=16, help="texts per temperature and rule (seeds 0, 1, ...)")
    parser.add_argument("--temperatures", type=float, nargs="+", default=[1.0, 1.1, 1.25])
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.seeds < 1:
        parser.error(f"--seeds must be >= 1, got {args.seeds}")
    if args.threads:
        torch.set_num_threads(args.threads)
    model = MDLM.from_pretrained(args.model, fast=False)
    model_lexicon(model).prepare()  # its tables, built before any timing
    known = load_word_list(model.word_list_file())
    runs: dict[tuple[float, bool], list[dict]] = {(t, rw): [] for t in args.temperatures for rw in (False, True)}
    for seed in range(args.seeds):
        for temperature in args.temperatures:
            order = (False, True) if seed % 2 == 0 else (True, False)  # neither always runs first
            for real_words in order:
                runs[(temperature, real_words)].append(one_run(model, seed, temperature, real_words))
        print(f"seed {seed} done", file=sys.stderr, flush=True)
    print(table(runs, known))


if __name__ == "__main__":
    try:
        main()
    except (ValueError, OSError) as error:
        sys.exit(f"error: {error}")
