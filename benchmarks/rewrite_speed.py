"""How long does the Rewrite panel take, for a span of `--span` characters in a passage of `--window`: to its first
frame, to the three rewrites written, to their ranking, and to the span as it was scored (the bar to clear)?

    python -m benchmarks.rewrite_speed [--model DIR] [--span 80] [--window 256] [--repeats 5] [--threads 2]

It runs the panel's own handler (`mdlm_space.rewrite_handlers.rewrite`) with the panel's options, as the app does
minus the server, each repeat on another passage of the validation split, interleaved with `generate(256)` (the
default sampler), and prints the medians, each also as a multiple of `generate(256)`'s time: the figure to carry to
another machine (the targets were set where `generate(256)` takes 0.34 s).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import torch

from mdlm_hf import MDLM
from mdlm_space.rewrite_handlers import rewrite
from studio.common import SHARED_DATA, SHIPPED_MODEL, thread_count, whole_number
from training.corpus import read_text, split_text

PANEL_STEPS = 16  # the panel's num_steps (mdlm_space.rewrite_panel.CHANGES)


def timed_run(model: MDLM, text: str, start: int, end: int, seed: int) -> dict[str, float]:
    """Seconds from the press to the first frame, to the last writing frame, to the ranking and to the bar."""
    began, marks = time.perf_counter(), {}
    for frame in rewrite(model, text, start, end, seed, True, num_steps=PANEL_STEPS):
        now = time.perf_counter() - began
        readout, choices = frame[-3], frame[-2]
        marks.setdefault("first frame", now)
        if readout.startswith(f"seed {seed} · step"):
            marks["written"] = now
        if choices and "ranked" not in marks:
            marks["ranked"] = now
        marks["bar"] = now
    return marks


def main(argv: list[str] | None = None) -> None:
    """Times the runs and prints each mark's median."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=str(SHIPPED_MODEL))
    parser.add_argument("--data", default=str(SHARED_DATA))
    parser.add_argument("--span", type=whole_number(1), default=80)
    parser.add_argument("--window", type=whole_number(2), default=256)
    parser.add_argument("--repeats", type=whole_number(1), default=5)
    parser.add_argument("--threads", type=thread_count, default=2)
    args = parser.parse_args(argv)
    if args.span >= args.window:
        parser.error(f"--span must be below --window ({args.window}), got {args.span}")
    torch.set_num_threads(args.threads)
    model = MDLM.from_pretrained(args.model).eval()
    if args.window > model.block_size:
        parser.error(f"--window must be at most the model's context ({model.block_size}), got {args.window}")
    validation, rng = split_text(read_text(args.data))[1], random.Random(0)
    timed_run(model, validation[: args.window], 0, args.span, seed=0)  # warm-up
    runs = []
    generate_seconds = []
    for repeat in range(args.repeats):
        began = time.perf_counter()
        model.generate(256, seed=repeat)
        generate_seconds.append(time.perf_counter() - began)
        low = rng.randrange(len(validation) - args.window)
        start = (args.window - args.span) // 2
        runs.append(timed_run(model, validation[low : low + args.window], start, start + args.span, seed=repeat))
    generate_median = statistics.median(generate_seconds)
    print(f"generate(256): {generate_median:.2f} s (median of {args.repeats})")
    for mark in runs[0]:
        seconds = statistics.median(run[mark] for run in runs)
        ratio = statistics.median(run[mark] / g for run, g in zip(runs, generate_seconds, strict=True))
        print(f"{mark}: {seconds:.2f} s, {ratio:.1f}x generate(256) (medians of {args.repeats})")


if __name__ == "__main__":
    main()
