"""Writing past the context, its speed: `generate(2000)` against `generate(256)`, and the autoregressive twin's.

    python -m benchmarks.long_text_speed [--length 2000] [--repeats 5] [--threads 2]   # interleaved with generate(256)

Times `generate(length)` and `generate(256)` in turns, with the same seeds, and reports forward passes per 1,000
characters and the ratio; the target (2,000 characters in <= 3 s where `generate(256)` takes 0.34 s) is a ratio of
8.8. The autoregressive twin (--twin, default the shipped one) writes the same length in the same rounds, with its
key-value cache. The quality of long texts is evals/long_text.py.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from mdlm_hf import MDLM, sample
from mdlm_hf.pipeline import prompt_canvas
from mdlm_hf.sampling.state import final_state
from studio.common import load_model, load_twin, thread_count

LENGTH = 2000
REFERENCE_SECONDS = 0.34  # generate(256) on the machine the 3 s target was set on


def speed(model: MDLM, twin: MDLM | None, length: int, repeats: int) -> None:
    """generate(length) against generate(256) and the autoregressive twin's generate(length) (when there is a `twin`),
    interleaved; prints medians, passes per 1,000 and the ratios."""
    passes = {}
    for n in (256, length):
        passes[n] = final_state(sample(model, prompt_canvas(model, "", n), seed=0)).num_forward_passes
    ways = {
        "generate(256)": lambda seed: model.generate(256, seed=seed),
        f"generate({length})": lambda seed: model.generate(length, seed=seed),
    }
    if twin is not None:
        ways[f"twin generate({length})"] = lambda seed: twin.generate(length, seed=seed)
    times: dict[str, list[float]] = {way: [] for way in ways}
    for repeat in range(repeats + 1):  # the first round warms up
        for way in list(ways) if repeat % 2 else list(ways)[::-1]:
            start = time.perf_counter()
            ways[way](repeat)
            if repeat:
                times[way].append(time.perf_counter() - start)
    short, long, *cached = (times[way] for way in ways)
    rows = [("generate(256)", short, passes[256], 256), (f"generate({length})", long, passes[length], length)]
    for way, measured, num_passes, chars in rows + [(f"twin generate({length})", t, length, length) for t in cached]:
        per_1000 = 1000 * num_passes / chars
        print(f"{way}: {statistics.median(measured):.2f} s, {num_passes} passes ({per_1000:.0f} per 1,000 chars)")
    ratio = statistics.median(b / a for a, b in zip(short, long, strict=True))
    print(
        f"generate({length}) / generate(256), median per repeat ({repeats} repeats interleaved): {ratio:.2f}x; where "
        f"generate(256) takes {REFERENCE_SECONDS} s: {ratio * REFERENCE_SECONDS:.1f} s (target <= 3 s)"
    )
    for twin_times in cached:
        against = statistics.median(b / a for a, b in zip(twin_times, long, strict=True))
        print(f"generate({length}) / the twin's generate({length}), with its key-value cache: {against:.2f}x the time")


def main(argv: list[str] | None = None) -> None:
    """Parses the flags, loads the model (and the twin where there is one) and prints the timings."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None)
    parser.add_argument("--twin", default=None, help="the autoregressive twin's directory (default: the shipped one)")
    parser.add_argument("--length", type=int, default=LENGTH, help="characters to write")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=thread_count, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    model, source = load_model(args.model)
    print(f"model: {source} ({model.denoise_dtype}), {args.threads} threads")
    try:
        twin = load_twin(args.twin, model)[0]
    except ValueError as error:  # no twin here: the diffusion model's figures alone
        print(f"without the autoregressive twin: {error}")
        twin = None
    speed(model, twin, args.length, args.repeats)


if __name__ == "__main__":
    main()
