"""The autoregressive twin against the diffusion model: likelihood and speed (the structure suite has its rows:
`python -m benchmarks.structure_suite --rules twin`).

    python -m benchmarks.heldout                       # once: the held-out plays
    python -m benchmarks.twin likelihood               # exact NLL, ELBO; validation split and held-out plays
    python -m benchmarks.twin speed --repeats 10       # 256 and 2,000 characters, interleaved

Likelihood, in nats per character, exact fp32 weights: the twin's exact NLL (one pass per window), the diffusion
model's ELBO (4 mask draws per window) and its exact left-to-right NLL (one pass per character, so on the first
16,384 characters of each text only). Windows of 256 side by side, each scored from its first character, as both
models cut them. Speed times `generate(n)` of both models in turns, seeds alike, on the threads given.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch

from benchmarks.common import SHARED_DATA, load_model, load_twin, thread_count
from benchmarks.heldout import HELDOUT_TEXT
from mdlm_hf import elbo
from mdlm_hf.autoregressive import autoregressive_nll
from mdlm_hf.data import read_text, split_text
from mdlm_hf.diffusion import exact_nll

EXACT_CHARS = 16_384  # the diffusion model's exact NLL costs a pass per character: the README's first characters
ELBO_DRAWS = 4


def texts() -> dict[str, str]:
    """The texts scored: the validation split (whole, and its first EXACT_CHARS) and the held-out plays if present."""
    _, validation = split_text(read_text(SHARED_DATA))
    found = {"validation split": validation}
    if HELDOUT_TEXT.is_file():
        found["held-out plays (benchmarks/heldout.py)"] = read_text(HELDOUT_TEXT)
    return found


def likelihood(model, twin) -> None:
    """Prints the markdown table: per text, the twin's NLL, the diffusion model's ELBO and exact NLL."""
    print("| text | characters | twin: exact NLL | diffusion: ELBO (bound) | diffusion: exact NLL, left to right |")
    print("|---|---|---|---|---|")
    for name, text in texts().items():
        tokens = torch.tensor(model.tokenizer.encode(text))
        for part, chars in ((f"{name}, first {EXACT_CHARS:,}", EXACT_CHARS), (f"{name}, whole", tokens.numel())):
            scored = tokens[:chars]
            start = time.perf_counter()
            twin_nll = autoregressive_nll(twin, scored)
            bound = elbo(model, scored, ELBO_DRAWS, torch.Generator().manual_seed(0)).nats_per_char
            exact = f"{exact_nll(model, scored):.4f}" if chars <= EXACT_CHARS else "-"
            row = f"| {part} | {scored.numel():,} | **{twin_nll:.4f}** | {bound:.4f} | {exact} |"
            print(row, flush=True, file=sys.stdout)
            print(f"({part}: {time.perf_counter() - start:.0f} s)", flush=True, file=sys.stderr)


def speed(model, twin, lengths: list[int], repeats: int) -> None:
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
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=("likelihood", "speed"))
    parser.add_argument("--model", default=None, help="the diffusion model (default: the shipped one)")
    parser.add_argument("--twin", default=None, help="the autoregressive twin (default: the shipped one)")
    parser.add_argument("--lengths", type=int, nargs="*", default=[256, 2000])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--threads", type=thread_count, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    exact = args.what == "likelihood"  # likelihoods with the exact fp32 weights; speed as from_pretrained loads them
    model, source = load_model(args.model, exact)
    twin, twin_source = load_twin(args.twin, model, exact)
    print(f"diffusion: {source} ({model.denoise_dtype}); twin: {twin_source} ({twin.denoise_dtype})", end="")
    print(f"; {args.threads} threads")
    if args.what == "likelihood":
        likelihood(model, twin)
    else:
        speed(model, twin, args.lengths, args.repeats)


if __name__ == "__main__":
    main()
