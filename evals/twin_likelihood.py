"""The autoregressive twin against the diffusion model, in likelihood (the structure suite has the twin's texts:
`python -m evals.structure_suite --rules twin`; their speed: benchmarks/twin_speed.py).

    python -m evals.heldout_plays                      # once: the held-out plays
    python -m evals.twin_likelihood [--threads 2] [--no-exact]  # exact NLL, ELBO; validation split, held-out plays

Likelihood, in nats per character, exact fp32 weights: the twin's exact NLL (one pass per window), the diffusion
model's ELBO (4 mask draws per window) and its exact left-to-right NLL (one pass per character, so on the first
16,384 characters of each text only). Windows of 256 side by side, each scored from its first character, as both
models cut them.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

from evals.heldout_plays import HELDOUT_TEXT
from mdlm_hf import MDLM, elbo
from mdlm_hf.autoregressive import autoregressive_nll
from mdlm_hf.diffusion import exact_nll
from studio.common import SHARED_DATA, load_model, load_twin, thread_count
from training.corpus import read_text, split_text

EXACT_CHARS = 16_384  # the diffusion model's exact NLL costs a pass per character: the README's first characters
ELBO_DRAWS = 4


def texts() -> dict[str, str]:
    """The texts scored: the validation split (whole, and its first EXACT_CHARS) and the held-out plays if present."""
    _, validation = split_text(read_text(SHARED_DATA))
    found = {"validation split": validation}
    if HELDOUT_TEXT.is_file():
        found["held-out plays (evals/heldout_plays.py)"] = read_text(HELDOUT_TEXT)
    return found


def likelihood(model: MDLM, twin: MDLM, exact: bool = True) -> None:
    """Prints the markdown table: per text, the twin's NLL, the diffusion model's ELBO and (with `exact`) its exact
    NLL."""
    print("| text | characters | twin: exact NLL | diffusion: ELBO (bound) | diffusion: exact NLL, left to right |")
    print("|---|---|---|---|---|")
    for name, text in texts().items():
        tokens = torch.tensor(model.tokenizer.encode(text))
        for part, chars in ((f"{name}, first {EXACT_CHARS:,}", EXACT_CHARS), (f"{name}, whole", tokens.numel())):
            scored = tokens[:chars]
            start = time.perf_counter()
            twin_nll = autoregressive_nll(twin, scored)
            bound = elbo(model, scored, ELBO_DRAWS, torch.Generator().manual_seed(0)).nats_per_char
            left_to_right = f"{exact_nll(model, scored):.4f}" if exact and chars <= EXACT_CHARS else "-"
            row = f"| {part} | {scored.numel():,} | **{twin_nll:.4f}** | {bound:.4f} | {left_to_right} |"
            print(row, flush=True, file=sys.stdout)
            print(f"({part}: {time.perf_counter() - start:.0f} s)", flush=True, file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    """Parses the flags, loads both models with exact fp32 weights and prints the likelihood table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="the diffusion model (default: the shipped one)")
    parser.add_argument("--twin", default=None, help="the autoregressive twin (default: the shipped one)")
    parser.add_argument("--threads", type=thread_count, default=2)
    parser.add_argument(
        "--no-exact", action="store_true", help="leave out the diffusion model's exact NLL (a pass per character)"
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    model, source = load_model(args.model, exact=True)
    twin, twin_source = load_twin(args.twin, model, exact=True)
    print(f"diffusion: {source} ({model.denoise_dtype}); twin: {twin_source} ({twin.denoise_dtype})", end="")
    print(f"; {args.threads} threads")
    likelihood(model, twin, exact=not args.no_exact)


if __name__ == "__main__":
    main()
