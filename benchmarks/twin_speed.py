"""The autoregressive twin against the diffusion model, in speed: `generate(n)` of both, interleaved (their
likelihoods: evals/twin_likelihood.py).

    python -m benchmarks.twin_speed [--lengths 256 2000] [--repeats 10] [--threads 2]

Times `generate(n)` of both models in turns, seeds alike, on the threads given, both loaded as `from_pretrained`
loads them (the fast path where this machine chose it).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from mdlm_hf import MDLM
from studio.common import load_model, load_twin, thread_count


def speed(model: MDLM, twin: MDLM, lengths: list[int], repeats: int) -> None:
    """generate(n) of both models for each length, interleaved; medians and the median per-repeat ratio."""
    ways = {(who, n): writer for n in lengths for who, writer in (("diffusion", model), ("twin", twin))}
    times: dict[tuple[str, int], list[float]] = {way: [] for way in ways}
    for repeat in range(repeats + 1):  # the first round warms up (and makes the fast path's copies)
        for way in list(ways) if repeat % 2 else list(ways)[::-1]:
            start = time.perf_counter()
            ways[way].generate(way[1], seed=repeat)
            if repeat:
                times[way].append(time.perf_counter() - start)
    for n in lengths:
        diffusion, autoregressive = times[("diffusion", n)], times[("twin", n)]
        ratio = statistics.median(a / d for d, a in zip(diffusion, autoregressive, strict=True))
        medians = f"diffusion {statistics.median(diffusion):.2f} s, twin {statistics.median(autoregressive):.2f} s"
        print(
            f"{n} characters: {medians} ({n} passes with its cache); the twin takes {ratio:.2f}x the diffusion "
            f"model's time (median of {repeats} interleaved repeats)"
        )


def main(argv: list[str] | None = None) -> None:
    """Parses the flags, loads both models and prints the timings."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="the diffusion model (default: the shipped one)")
    parser.add_argument("--twin", default=None, help="the autoregressive twin (default: the shipped one)")
    parser.add_argument("--lengths", type=int, nargs="*", default=[256, 2000])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--threads", type=thread_count, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    model, source = load_model(args.model)
    twin, twin_source = load_twin(args.twin, model)
    print(f"diffusion: {source} ({model.denoise_dtype}); twin: {twin_source} ({twin.denoise_dtype})", end="")
    print(f"; {args.threads} threads")
    speed(model, twin, args.lengths, args.repeats)


if __name__ == "__main__":
    main()
