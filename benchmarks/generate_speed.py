"""`generate(256)` with the default sampler against a previous model or default, timed interleaved in one run.

    python -m benchmarks.generate_speed [--model DIR] [--length 256] [--repeats 30] [--threads 2]
    python -m benchmarks.generate_speed --previous-model OLD_DIR --previous-rule default   # a model against another

Each repeat times one `generate` of each way, the order alternating, with the same seed: the default sampler on
`--model` (its own: `default_options`, which keeps a play's shape where the model ships its words and casts), and
`--previous-rule` (a rule of the structure suite, `evals.structure_suite.RULES`; default the
default before word streams order) on `--previous-model` (default the same model). Models are loaded as
`from_pretrained` loads them (the fast path where this machine chose it). Target: the default is no slower (the
median of the per-repeat ratios, which a shared machine's drift moves least, at most 1).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from mdlm_hf.pipeline import default_options
from studio.common import load_model, thread_count
from studio.rules import RULES, rule_options

PREVIOUS_RULE = "streams-t120-caps50"  # the default before word streams order (min-p 0.1, T 1.2, 0.6 after a capital)


def main(argv: list[str] | None = None) -> dict[str, float]:
    """Parses the flags, times both rules interleaved and prints (and returns) the medians and their ratio."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None)
    parser.add_argument("--length", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--threads", type=thread_count, default=2)
    parser.add_argument("--previous-model", default=None, help="the model the previous way runs (default: --model)")
    parser.add_argument("--previous-rule", default=PREVIOUS_RULE, choices=list(RULES), help="the previous way's rule")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    model, source = load_model(args.model)
    previous = load_model(args.previous_model)[0] if args.previous_model else model
    ways = {
        "previous default": (previous, rule_options(args.previous_rule)),
        "default": (model, default_options(model)),
    }
    times: dict[str, list[float]] = {way: [] for way in ways}
    for repeat in range(args.repeats + 1):  # the first round warms up (and times the fast path's choice)
        for way in list(ways) if repeat % 2 else list(ways)[::-1]:
            writer, options = ways[way]
            start = time.perf_counter()
            writer.generate(args.length, options, seed=repeat)
            if repeat:
                times[way].append(time.perf_counter() - start)
    medians = {way: statistics.median(measured) for way, measured in times.items()}
    # each repeat's two runs are neighbours in time: their ratio cancels most of a shared machine's drift
    paired = statistics.median(d / p for d, p in zip(times["default"], times["previous default"], strict=True))
    print(f"previous: {args.previous_model or source} with {args.previous_rule}")
    print(
        f"model: {source} ({model.denoise_dtype}); {args.length} characters, {args.threads} threads, "
        f"{args.repeats} runs each, interleaved (median, min-max)"
    )
    for way, measured in times.items():
        print(f"{way:17s} {medians[way]:.3f} s ({min(measured):.3f}-{max(measured):.3f})")
    print(
        f"default / previous: {medians['default'] / medians['previous default']:.2f}x the time "
        f"(median of the per-repeat ratios: {paired:.3f}x)"
    )
    return {**medians, "paired_ratio": paired}


if __name__ == "__main__":
    main()
