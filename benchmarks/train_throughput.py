"""Training-loop overhead: tokens/s of training/train.py vs a bare forward+backward+step loop.

    python -m benchmarks.train_throughput [--steps 30] [--rounds 2]

Same model shape, batch, dtype and thread count for both; rounds alternate bare and full loop so
machine noise hits both alike. Target: loop / bare >= 0.95.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import torch
import torch.nn.functional as F

from mdlm_hf import MDLM, CharTokenizer
from studio.common import SHARED_DATA
from training import train


def bare_tokens_per_second(text: str, args: argparse.Namespace) -> float:
    """Forward + backward + AdamW step on one fixed, pre-masked batch: no data loading, no logging."""
    torch.manual_seed(0)
    model = MDLM(
        CharTokenizer.from_text(text).vocab,
        n_layer=args.n_layer,
        n_head=args.n_head,
        n_embd=args.n_embd,
        block_size=args.block_size,
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tokens = torch.tensor(model.tokenizer.encode(text[: args.batch_size * args.block_size])).view(args.batch_size, -1)
    noisy = torch.where(torch.rand(tokens.shape) < 0.5, model.mask_id, tokens)
    start = time.perf_counter()  # the first step's warm-up counts here as it does in the loop's own clock
    for _ in range(args.steps + 1):
        logits = model(noisy)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), tokens.view(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return (args.steps + 1) * tokens.numel() / (time.perf_counter() - start)


def loop_tokens_per_second(data: str, args: argparse.Namespace) -> float:
    """training/train.py itself, timed by its own wall clock (the loop only, not start-up or final export)."""
    with tempfile.TemporaryDirectory() as out_dir:
        summary = train.main(
            [
                "--data",
                data,
                "--out-dir",
                out_dir,
                "--max-steps",
                str(args.steps + 1),
                "--eval-interval",
                "100000",
                "--n-layer",
                str(args.n_layer),
                "--n-head",
                str(args.n_head),
                "--n-embd",
                str(args.n_embd),
                "--block-size",
                str(args.block_size),
                "--batch-size",
                str(args.batch_size),
                "--dtype",
                "float32",
                "--log-interval",
                "10",
                # the bare loop's block and optimizer (the defaults before the CPU recipe), without warmup
                *("--optimizer", "adamw", "--norm", "layernorm", "--mlp", "gelu", "--no-qk-norm"),
                *("--no-zero-init-residual", "--ema", "0", "--loss-weighting", "elbo", "--warmup-steps", "0"),
            ]
        )
    return summary["tokens_seen"] / summary["wall_time"]


def main(argv: list[str] | None = None) -> float:
    """Parses the flags and prints (and returns) the training loop's tokens/s over the bare loop's."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(SHARED_DATA))
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--n-layer", type=int, default=6)
    parser.add_argument("--n-head", type=int, default=4)
    parser.add_argument("--n-embd", type=int, default=256)
    parser.add_argument("--block-size", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args(argv)
    text = open(args.data, encoding="utf-8").read()
    bare, loop = [], []
    for _ in range(args.rounds):
        bare.append(bare_tokens_per_second(text, args))
        loop.append(loop_tokens_per_second(args.data, args))
    ratio = statistics.median(loop) / statistics.median(bare)
    print(
        f"\nd{args.n_embd} L{args.n_layer} T{args.block_size} B{args.batch_size}, fp32, "
        f"{torch.get_num_threads()} threads"
    )
    print("| | tokens/s (median of rounds) |\n|---|---|")
    print(f"| bare forward+backward+step | {statistics.median(bare):,.0f} |")
    print(f"| training/train.py loop | {statistics.median(loop):,.0f} |")
    print(f"\nloop / bare = {ratio:.3f} (target >= 0.95): {'PASS' if ratio >= 0.95 else 'FAIL'}")
    return ratio


if __name__ == "__main__":
    main()
