"""Two torch releases side by side: `generate(256)`, a training step and the fast path's choice, each in its own
interpreter (a virtualenv of each release), the two taking turns.

python -m benchmarks.torch_versions --other /path/to/venv/bin/python [--rounds 5] [--threads 1]

Each round starts this interpreter's worker and the other's in turn: each loads the shipped model, warms up, then
times `generate(256)` and a training step (batch 32 x 256, the default recipe's AdamW/Muon step) three times, and
says which weights the fast path chose (bf16 or fp32). Reported: medians over the rounds, and each release's ratio
to this interpreter's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

from studio.common import REPO_ROOT, SHIPPED_MODEL

WORKER = """
import json, sys, time, torch
torch.set_num_threads(int(sys.argv[2]))
from mdlm_hf import MDLM, diffusion_loss
model = MDLM.from_pretrained(sys.argv[1])
model.generate(256, seed=0)
generate = []
for seed in range(3):
    start = time.perf_counter(); model.generate(256, seed=seed + 1); generate.append(time.perf_counter() - start)
train = MDLM.from_pretrained(sys.argv[1], fast=False).train()
optimizer = torch.optim.AdamW(train.parameters(), lr=1e-4)
tokens = torch.randint(0, train.mask_id, (32, 256), generator=torch.Generator().manual_seed(0))
steps = []
for i in range(4):
    start = time.perf_counter()
    loss = diffusion_loss(train, tokens, torch.Generator().manual_seed(i))
    loss.backward(); optimizer.step(); optimizer.zero_grad()
    steps.append(time.perf_counter() - start)
print(json.dumps({"torch": torch.__version__, "generate": generate, "train_step": steps[1:],
                  "fast_path": str(model.denoise_dtype).removeprefix("torch.")}))
"""


def run_worker(python: str, threads: int) -> dict:
    """One worker's timings in `python`."""
    done = subprocess.run(
        [python, "-c", WORKER, str(SHIPPED_MODEL), str(threads)],
        capture_output=True, text=True, cwd=REPO_ROOT, env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    if done.returncode:
        raise RuntimeError(f"{python}: {done.stderr.strip().splitlines()[-1]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    """Alternates the two interpreters round by round; prints the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--other", required=True, help="the other release's python")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    results: dict[str, list[dict]] = {}
    for round_ in range(args.rounds):
        pythons = [sys.executable, args.other][:: 1 if round_ % 2 == 0 else -1]  # who goes first alternates
        for python in pythons:
            result = run_worker(python, args.threads)
            results.setdefault(result["torch"], []).append(result)
            print(json.dumps(result), flush=True)
            time.sleep(1)
    print("| torch | generate(256) | training step (32 x 256) | fast path |\n|---|---|---|---|")
    for version, rows in results.items():
        generate = statistics.median(t for row in rows for t in row["generate"])
        step = statistics.median(t for row in rows for t in row["train_step"])
        choices = ", ".join(sorted({row["fast_path"] for row in rows}))
        print(f"| {version} | {generate:.3f} s | {step:.3f} s | {choices} |")


if __name__ == "__main__":
    main()
