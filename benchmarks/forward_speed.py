"""Every candidate path for the sampler's forward pass, timed side by side, with what each costs in accuracy.

    python -m benchmarks.forward_speed [--model DIR] [--threads 2] [--rounds 30] [--passes 16] [--compile]

One pass is what a sampling step runs: batch 1, a full block_size canvas. The candidates are timed
interleaved (a turn of --passes passes in a row for each per round, as a sampler runs them, the order
rotating), so a busy machine slows them alike, and
reported as the median time over eager fp32's. Each lossy candidate's validation NELBO is measured on the
same masks as the exact model's (first --nelbo-chars of the validation split), with the largest change
in any predicted probability. The row marked "chosen" is what `MDLM.from_pretrained(..., fast=True)`
uses on this machine (mdlm_hf.fast decides by timing).
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from unittest import mock

import torch
import torch.nn as nn

from mdlm_hf import layers
from mdlm_hf.data import atomic_write_bytes, read_text, split_text
from mdlm_hf.diffusion import elbo
from studio.common import RUNS, SHARED_DATA, load_model, thread_count

OUT = RUNS / "benchmarks" / "forward_speed.md"  # the table as last committed: benchmarks/results/forward_speed.md


class Candidate(nn.Module):
    """A way of running the model's pass, shaped like the model for `elbo` (mask_id, block_size, parameters)."""

    def __init__(self, model: nn.Module, run: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        self.model, self.run = model, run
        self.mask_id, self.block_size = model.mask_id, model.block_size

    def forward(self, tokens: torch.Tensor, t: torch.Tensor | None = None) -> torch.Tensor:
        """The candidate's logits, in fp32 whatever it computes in."""
        return self.run(tokens, t).float()


def autocast_bf16(model: nn.Module) -> Candidate:
    """The fp32 model run under bf16 autocast."""

    def run(tokens: torch.Tensor, t: torch.Tensor | None) -> torch.Tensor:
        with torch.autocast(tokens.device.type, dtype=torch.bfloat16):
            return model(tokens, t)

    return Candidate(model, run)


def fast_path(model: nn.Module) -> Candidate:
    """What the sampler runs with fast=True: MDLM.denoise (bf16 weights where timing chose them)."""
    fast = copy.deepcopy(model)
    fast.fast = True
    return Candidate(fast, fast.denoise)


def bf16_fused_attention(model: nn.Module) -> Candidate:
    """bf16 weights with SDPA's fused attention kernel instead of plain matmuls (the fast path before it had them)."""
    bf16 = copy.deepcopy(model).to(torch.bfloat16).eval()

    def run(tokens: torch.Tensor, t: torch.Tensor | None) -> torch.Tensor:
        with mock.patch.object(layers, "uses_plain_attention", lambda q: False):
            return bf16(tokens, t)

    return Candidate(bf16, run)


def torchao_int8(model: nn.Module, weight_only: bool) -> Candidate:
    """torchao int8: weights only, or dynamic activations and weights."""
    from torchao.quantization import Int8DynamicActivationInt8WeightConfig, Int8WeightOnlyConfig, quantize_

    quantized = copy.deepcopy(model)
    quantize_(quantized, Int8WeightOnlyConfig() if weight_only else Int8DynamicActivationInt8WeightConfig())
    return Candidate(quantized, quantized)


def legacy_int8(model: nn.Module) -> Candidate:
    """torch.ao's dynamic int8 quantization of the linear layers."""
    with warnings.catch_warnings():  # torch.ao.quantization is deprecated (torchao is its home now)
        warnings.simplefilter("ignore")
        quantized = torch.ao.quantization.quantize_dynamic(copy.deepcopy(model), {nn.Linear}, dtype=torch.qint8)
    return Candidate(quantized, quantized)


def compiled(model: nn.Module, bf16: bool) -> Candidate:
    """torch.compile of the model, on bf16 weights or fp32."""
    inner = copy.deepcopy(model).to(torch.bfloat16) if bf16 else model
    return Candidate(inner, torch.compile(inner))


def candidates(model: nn.Module, with_compile: bool) -> dict[str, Callable[[], Candidate]]:
    """Name -> builder; a builder that fails (a missing package) is reported, not fatal."""
    builders: dict[str, Callable[[], Candidate]] = {
        "fp32 eager (exact)": lambda: Candidate(model, model),
        "bf16 autocast": lambda: autocast_bf16(model),
        "fast=True (bf16 weights)": lambda: fast_path(model),
        "bf16 weights, fused SDPA attention": lambda: bf16_fused_attention(model),
        "int8 dynamic (torchao)": lambda: torchao_int8(model, weight_only=False),
        "int8 weight-only (torchao)": lambda: torchao_int8(model, weight_only=True),
        "int8 dynamic (torch.ao, deprecated)": lambda: legacy_int8(model),
    }
    if with_compile:
        builders["torch.compile fp32"] = lambda: compiled(model, bf16=False)
        builders["torch.compile bf16 weights"] = lambda: compiled(model, bf16=True)
    return builders


def time_interleaved(paths: dict[str, Candidate], tokens: torch.Tensor, rounds: int, passes: int) -> dict[str, float]:
    """Median seconds per pass of each path: each round gives every path a turn of `passes` passes in a row (as a
    sampler runs them: its weights warm in the caches; the turn's first pass is not counted), the order rotating
    every round, so a busy machine slows all alike."""
    names, seconds = list(paths), {name: [] for name in paths}
    t = torch.ones(tokens.size(0))
    for r in range(rounds + 1):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            for i in range(passes + 1):
                start = time.perf_counter()
                paths[name](tokens, t)
                if r and i:  # round 0 warms up (and decides the fast path)
                    seconds[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in seconds.items()}


def accuracy(path: Candidate, exact: nn.Module, tokens: torch.Tensor, nelbo_tokens: torch.Tensor | None) -> dict:
    """Largest change of a predicted probability on `tokens`, and the NELBO on the exact model's masks."""
    probs = path(tokens).softmax(-1)
    result = {"max_dprob": float((probs - exact(tokens).softmax(-1)).abs().max())}
    if nelbo_tokens is not None:
        result["nelbo"] = elbo(path, nelbo_tokens, 4, torch.Generator().manual_seed(0)).nats_per_char
    return result


def report(rows: list[dict], source: str, threads: int, rounds: int, passes: int, failed: dict[str, str]) -> str:
    """The markdown table, fastest first, ratios against eager fp32."""
    base = next(r for r in rows if r["name"].startswith("fp32"))
    lines = [
        f"Forward pass, batch 1 x {base['length']} characters, {threads} threads, median over {rounds} interleaved "
        f"rounds of {passes} passes per path; model {source}; {torch.__version__}\n",
        "| path | ms / pass | time vs fp32 | speed-up | max change of a probability | validation NELBO | change |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in sorted(rows, key=lambda r: r["seconds"]):
        nelbo = r.get("nelbo")
        change = "-" if nelbo is None or "nelbo" not in base else f"{nelbo - base['nelbo']:+.4f}"
        lines.append(
            f"| {r['name']}{' **(chosen)**' if r['chosen'] else ''} | {1000 * r['seconds']:.1f} | "
            f"{r['seconds'] / base['seconds']:.2f}x | {base['seconds'] / r['seconds']:.2f}x | {r['max_dprob']:.4f} | "
            f"{'-' if nelbo is None else f'{nelbo:.4f}'} | {change} |"
        )
    lines += [f"\nNot measured: {name} ({why})" for name, why in failed.items()]
    return "\n".join(lines)


@torch.no_grad()
def main(argv: list[str] | None = None) -> None:
    """Parses the flags, times every candidate interleaved, measures what each costs, and writes the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None)
    parser.add_argument("--data", default=str(SHARED_DATA), help="the validation split gives the NELBO's text")
    parser.add_argument("--threads", type=thread_count, default=2)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--passes", type=int, default=16, help="passes in a row per path and round")
    parser.add_argument("--nelbo-chars", type=int, default=16384, help="0 = skip the NELBO")
    parser.add_argument("--compile", action="store_true", help="also torch.compile (slow to build)")
    parser.add_argument("--out", default=str(OUT), help="where the table goes")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    model, source = load_model(args.model)
    model.fast = False
    nelbo_tokens = None
    if args.nelbo_chars and Path(args.data).is_file():
        _, val_text = split_text(read_text(args.data))
        nelbo_tokens = torch.tensor(model.tokenizer.encode(val_text[: args.nelbo_chars]), dtype=torch.long)
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, model.mask_id, (1, model.block_size), generator=generator)
    tokens[torch.rand(tokens.shape, generator=generator) < 0.5] = model.mask_id  # a canvas half way through
    paths, failed = {}, {}
    for name, build in candidates(model, args.compile).items():
        try:
            paths[name] = build()
            paths[name](tokens)  # compile / quantize errors show here, not in the timing loop
        except Exception as error:  # noqa: BLE001 (a missing package or unsupported op: report and go on)
            failed[name] = f"{type(error).__name__}: {str(error).splitlines()[0][:120]}"
            paths.pop(name, None)
    seconds = time_interleaved(paths, tokens, args.rounds, args.passes)
    chosen_bf16 = paths["fast=True (bf16 weights)"].model.denoise_dtype == torch.bfloat16
    rows = []
    for name, path in paths.items():
        lossy = not name.startswith("fp32") and not (name.startswith("fast") and not chosen_bf16)
        row = {"name": name, "seconds": seconds[name], "length": model.block_size}
        row |= accuracy(path, model, tokens, nelbo_tokens if lossy or name.startswith("fp32") else None)
        row["chosen"] = name.startswith("fast") if chosen_bf16 else name.startswith("fp32")
        rows.append(row)
        print(f"{name}: {1000 * seconds[name]:.1f} ms", flush=True)
    table = report(rows, source, args.threads, args.rounds, args.passes, failed)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(Path(args.out), (table + "\n").encode())
    print(table)


if __name__ == "__main__":
    main()
