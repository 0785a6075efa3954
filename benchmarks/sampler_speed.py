"""Sampler overhead: wall time of a full sampling run / (num_steps x one bare forward), per order.

    python benchmarks/sampler_speed.py [--model DIR] [--length 256] [--repeats 3]

Both quantities are measured in the same run, interleaved, so machine noise hits them alike.
Target: ratio <= 1.10 for every order and step count.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from common import load_model

from mdlm_hf import ORDERS, sample
from mdlm_hf.sampler import final_state


def bare_forward_seconds(model, canvas: torch.Tensor, repeats: int) -> float:
    """Median time of one forward pass on the canvas."""
    timings = []
    with torch.inference_mode():
        for _ in range(repeats):
            start = time.perf_counter()
            model(canvas[None])
            timings.append(time.perf_counter() - start)
    return statistics.median(timings)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None)
    parser.add_argument("--length", type=int, default=256)
    parser.add_argument("--steps", type=int, nargs="+", default=[8, 32, 128, 256])
    parser.add_argument("--repeats", type=int, default=3, help="sampling runs per cell (median)")
    args = parser.parse_args(argv)
    model, source = load_model(args.model)
    torch.manual_seed(0)
    canvas = torch.full((args.length,), model.mask_id)
    bare_forward_seconds(model, canvas, 5)  # warm-up
    rows = []
    for order in ORDERS:
        for num_steps in args.steps:
            ratios, walls = [], []
            for repeat in range(args.repeats):
                forward = bare_forward_seconds(model, canvas, 7)
                start = time.perf_counter()
                state = final_state(sample(model, canvas, num_steps=num_steps, order=order, seed=repeat))
                wall = time.perf_counter() - start
                ratios.append(wall / (state.num_steps * forward))
                walls.append(wall)
            rows.append(
                {
                    "order": order,
                    "steps": num_steps,
                    "ratio": statistics.median(ratios),
                    "chars_per_s": args.length / statistics.median(walls),
                }
            )
    print(f"model: {source}; length {args.length}; torch threads {torch.get_num_threads()}\n")
    print("| order | steps | wall / (steps x bare forward) | chars/s |")
    print("|---|---|---|---|")
    for row in rows:
        print(f"| {row['order']} | {row['steps']} | {row['ratio']:.3f} | {row['chars_per_s']:.0f} |")
    worst = max(r["ratio"] for r in rows)
    print(f"\nworst ratio {worst:.3f} (target <= 1.10): {'PASS' if worst <= 1.10 else 'FAIL'}")
    return rows


if __name__ == "__main__":
    main()
