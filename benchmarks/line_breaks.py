"""Where a sampler loses a play's line breaks: after each pass, the line breaks a run is heading for per 1,000
characters, those revealed plus the model's expectation over the masks (its probability of a line break at each).

    python -m benchmarks.line_breaks                                   # the default rule and its variants below
    python -m benchmarks.line_breaks --rules default --steps 32 64

Were the sampler drawing from the model's own joint, this would stay where it starts (the model's prior, before the
first pass) up to noise: each reveal's expectation is the model's probability. A rule that drifts away from it,
pass after pass, writes fewer (or more) lines than the model would; headings and speeches go with them. The
model's own left-to-right joint writes 37.4 per 1,000 and real text 37.8 (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse

import torch

from benchmarks.common import load_model
from mdlm_hf import SamplerOptions, sample
from mdlm_hf.inference import predictor

# name -> changes to SamplerOptions(); the defaults first, then the entropy default before streams order (the rules
# of docs/benchmarks.md's table, measured then as "default", "cut-where-sure", "no-cut" and "no-cut-t1")
ENTROPY = dict(order="entropy", spacing=8, temperature=1.1)
RULES = {
    "default": {},  # streams order, min-p 0.1 at temperature 1.2, cut everywhere
    "entropy": ENTROPY,  # min-p 0.1 at temperature 1.1, cut everywhere
    "entropy-cut-where-sure": dict(ENTROPY, cut_where_sure=0.5),  # the cut only where the top character has p >= 0.5
    "entropy-no-cut": dict(ENTROPY, min_p=None),
    "entropy-no-cut-t1": dict(ENTROPY, min_p=None, temperature=1.0),
}


@torch.no_grad()
def heading_for(model, options: SamplerOptions, samples: int, length: int, seed: int) -> list[tuple[int, float]]:
    """(pass, line breaks per 1,000 characters the run is heading for) after each pass of free generation."""
    newline = model.tokenizer.vocab.index("\n")
    canvas = torch.full((samples, length), model.mask_id)
    trace = []
    for state in sample(model, canvas, options, seed=seed):
        probs = predictor(model)(state.tokens, state.is_masked.float().mean(dim=1)).float().softmax(dim=-1)
        expected = (probs[..., newline] * state.is_masked).sum() + (state.tokens == newline).sum()
        trace.append((state.step, 1000 * expected.item() / (samples * length)))
    return trace


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="a model directory (default: the shipped model)")
    parser.add_argument("--rules", nargs="*", default=list(RULES), help=f"of {', '.join(RULES)}")
    parser.add_argument("--steps", nargs="*", type=int, default=[32])
    parser.add_argument("--samples", type=int, default=32)
    parser.add_argument("--length", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    unknown = [rule for rule in args.rules if rule not in RULES]
    if unknown:
        parser.error(f"unknown rule {', '.join(unknown)}; the rules are {', '.join(RULES)}")
    model, source = load_model(args.model)
    print(f"model: {source}; free generation, {args.samples} x {args.length} characters, seed {args.seed}")
    for rule in args.rules:
        for steps in args.steps:
            trace = heading_for(
                model, SamplerOptions(num_steps=steps, **RULES[rule]), args.samples, args.length, args.seed
            )
            shown = [f"{step}: {value:.1f}" for step, value in trace if step in {0, 1, 2, 4, steps // 2, steps}]
            print(f"{rule:18s} {steps:3d} passes | " + " | ".join(shown))


if __name__ == "__main__":
    main()
