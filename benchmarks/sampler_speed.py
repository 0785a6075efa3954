"""Sampler overhead: wall time of a full sampling run / (num_steps x one bare forward), per order.

    python -m benchmarks.sampler_speed [--model DIR] [--length 256] [--repeats 5]

Both are measured in the same run, interleaved step by step: after each sampler step, one bare
forward of the same model on the same canvas is timed, so machine noise hits both alike.
Target: ratio <= 1.10 for every order and step count.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from mdlm_hf import MDLM, ORDERS, SamplerOptions, sample
from studio.common import load_model, reveal_rules


def interleaved_timing(
    model: MDLM, canvas: torch.Tensor, num_steps: int, seed: int, **reveal_rule: str | float
) -> tuple[float, float]:
    """(sampler seconds, bare-forward seconds): one bare forward timed right after every sampler step; the
    sampler is the plain core with the given reveal rule."""
    states = sample(model, canvas, SamplerOptions.plain(), num_steps=num_steps, seed=seed, **reveal_rule)
    sampler_seconds, bare_seconds = 0.0, 0.0
    while True:
        start = time.perf_counter()
        state = next(states, None)
        sampler_seconds += time.perf_counter() - start
        if state is None:
            return sampler_seconds, bare_seconds
        if state.step > 0:
            with torch.inference_mode():
                start = time.perf_counter()
                model(canvas[None])
                bare_seconds += time.perf_counter() - start


def main(argv: list[str] | None = None) -> list[dict]:
    """Parses the flags and prints (and returns) the sampler's overhead per order and step count."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None)
    parser.add_argument("--length", type=int, default=256)
    parser.add_argument("--steps", type=int, nargs="+", default=[8, 32, 128, 256])
    parser.add_argument("--repeats", type=int, default=5, help="sampling runs per cell (median)")
    parser.add_argument("--orders", nargs="+", default=list(ORDERS), choices=ORDERS)
    parser.add_argument("--order-temperatures", type=float, nargs="+", default=[0.0, 0.25])
    parser.add_argument("--prior-weights", type=float, nargs="+", default=[0.0])
    parser.add_argument("--remask-ratios", type=float, nargs="+", default=[0.0])
    parser.add_argument("--spacings", type=int, nargs="+", default=[0])
    args = parser.parse_args(argv)
    model, source = load_model(args.model)
    torch.manual_seed(0)
    canvas = torch.full((args.length,), model.mask_id)
    interleaved_timing(model, canvas, 8, 0)  # warm-up
    rows = []
    rules = reveal_rules(args.orders, args.order_temperatures, args.prior_weights, args.remask_ratios, args.spacings)
    for rule in rules:
        for num_steps in args.steps:
            ratios, walls = [], []
            for repeat in range(args.repeats):
                wall, bare = interleaved_timing(model, canvas, num_steps, repeat, **rule)
                ratios.append(wall / bare)  # bare = steps x one forward
                walls.append(wall)
            rows.append(
                {
                    **rule,
                    "steps": num_steps,
                    "ratio": statistics.median(ratios),
                    "chars_per_s": args.length / statistics.median(walls),
                }
            )
    print(f"model: {source}; length {args.length}; torch threads {torch.get_num_threads()}\n")
    columns = ["order", "order temp", "prior weight", "remask ratio", "spacing", "steps"]
    print("| " + " | ".join(columns + ["wall / (steps x bare forward)", "chars/s"]) + " |")
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['order']} | {row['order_temperature']:g} | {row['prior_weight']:g} | {row['remask_ratio']:g} "
            f"| {row['spacing']} | {row['steps']} | {row['ratio']:.3f} | {row['chars_per_s']:.0f} |"
        )
    worst = max(r["ratio"] for r in rows)
    print(f"\nworst ratio {worst:.3f} (target <= 1.10): {'PASS' if worst <= 1.10 else 'FAIL'}")
    return rows


if __name__ == "__main__":
    main()
