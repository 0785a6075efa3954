"""A play's shape, text by text: does each `generate(256)` text read as a scene of one play?

    python -m evals.play_shape                    # 24 texts (seeds 0-23) at the shipped model's default
    python -m evals.play_shape --rule default     # a named rule (studio/rules.py): here SamplerOptions(), no rules

For each text it counts what a reader catches at once, against the model's own words.txt and casts.json:
- **invented words**: words outside words.txt;
- **names in lower case**: words that words.txt lists only capitalised ("Silvia"), written in lower case;
- **unknown speakers**: headings (a line `Name:` after a blank line, or the text's first) naming no speaker of
  casts.json;
- **plays**: whether one play's cast holds all of the text's headings;
- **bad end**: the text ends on a heading, or on an empty speech (a heading and a blank line).

A text passes with none of these (one play, no bad end). It prints one line a text and the totals.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch

from mdlm_hf import sample
from mdlm_hf.metrics import WORD_PATTERN, heading_name
from mdlm_hf.pipeline import default_options, ends_on_heading, prompt_canvas
from mdlm_hf.sampling.casts import as_casts
from mdlm_hf.sampling.lexicon import as_lexicon
from mdlm_hf.sampling.state import final_state
from studio.common import load_model, thread_count
from studio.rules import RULES, rule_options


def text_faults(text: str, lexicon, casts) -> dict:
    """What a reader catches in one text (the counts above, and the plays that hold all its headings)."""
    written = WORD_PATTERN.findall(text)
    invented = [w for w in written if w.lower() not in lexicon.words]
    lowered = [w for w in written if w.lower() in lexicon.names and w[0].islower()]
    lines = text.split("\n")
    names = [n for i, line in enumerate(lines) if (n := heading_name(line, lines[i - 1] if i else None))]
    unknown = [n for n in names if f"{n}:" not in casts.headings]
    plays = [play for play, cast in casts.plays.items() if all(n in cast for n in names)]
    bad_end = ends_on_heading(text.rstrip("\n")) or text.endswith("\n\n")
    return dict(
        invented=invented, lowered=lowered, unknown=unknown, one_play=bool(plays), bad_end=bad_end, headings=len(names)
    )


def main() -> None:
    """Generates the texts and prints what it finds in each, then the totals."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="a model directory (default: the shipped model)")
    parser.add_argument("--rule", default=None, help=f"of {', '.join(RULES)} (default: the model's own defaults)")
    parser.add_argument("--texts", type=int, default=24, help="texts, seeds 0..N-1")
    parser.add_argument("--length", type=int, default=256)
    parser.add_argument("--threads", type=thread_count, default=None)
    parser.add_argument("--json", help="also write the texts and findings here")
    args = parser.parse_args()
    if args.rule is not None and args.rule not in RULES:
        parser.error(f"unknown rule {args.rule}")
    if args.threads:
        torch.set_num_threads(args.threads)
    model = load_model(args.model, False)[0]
    lexicon, casts = as_lexicon(model.word_list_file()), as_casts(model.casts_file())
    options = default_options(model) if args.rule is None else rule_options(args.rule)
    rows, seconds = [], 0.0
    for seed in range(args.texts):
        start = time.perf_counter()
        state = final_state(sample(model, prompt_canvas(model, "", args.length), options, seed=seed))
        seconds += time.perf_counter() - start
        text = model.tokenizer.decode(state.tokens[0])
        fell_back = 0 if state.word_fallbacks is None else int(state.word_fallbacks[0])
        faults = text_faults(text, lexicon, casts)
        rows.append(dict(seed=seed, text=text, fell_back=fell_back, **faults))
        ok = not (faults["invented"] or faults["lowered"] or faults["unknown"] or faults["bad_end"])
        print(
            f"seed {seed:2d}: {'ok  ' if ok and faults['one_play'] else 'FAIL'} headings {faults['headings']}, "
            f"one play {faults['one_play']}, invented {faults['invented']}, lower-case names {faults['lowered']}, "
            f"unknown speakers {faults['unknown']}, bad end {faults['bad_end']}, fell back {fell_back}"
        )
    total_words = sum(len(WORD_PATTERN.findall(r["text"])) for r in rows)
    print(
        f"{args.rule or 'the default'}: {len(rows)} texts, {seconds / len(rows):.2f} s each; invented words "
        f"{1000 * sum(len(r['invented']) for r in rows) / max(total_words, 1):.1f} per 1k; texts with a lower-case "
        f"name {sum(bool(r['lowered']) for r in rows)}, an unknown speaker {sum(bool(r['unknown']) for r in rows)}, "
        f"headings of one play {sum(r['one_play'] for r in rows)}, a bad end {sum(r['bad_end'] for r in rows)}; "
        f"{sum(r['fell_back'] for r in rows)} characters fell back"
    )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(rows, out, indent=1)


if __name__ == "__main__":
    try:
        main()
    except ValueError as error:
        sys.exit(f"error: {error}")
