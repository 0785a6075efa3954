"""Shared helpers of the speed benchmarks (benchmarks/) and the quality evals (evals/): paths, flags, models."""

from __future__ import annotations

import argparse
import socket
from collections.abc import Callable
from pathlib import Path

import torch

from mdlm_hf import MDLM
from mdlm_hf.devices import max_threads
from mdlm_hf.objectives import check_twin
from training.corpus import read_text

REPO_ROOT = Path(__file__).resolve().parent.parent
SHIPPED_MODEL = REPO_ROOT / "pretrained" / "mdlm-shakespeare-char"
SHIPPED_TWIN = REPO_ROOT / "pretrained" / "mdlm-shakespeare-char-ar"  # its autoregressive twin
SHARED_DATA = REPO_ROOT.parent / "shared" / "data" / "tinyshakespeare.txt"
RUNS = REPO_ROOT / "runs"  # where every benchmark and eval writes its raw output (ignored by git)


def whole_number(low: int, high: Callable[[], int] | None = None) -> Callable[[str], int]:
    """An argparse type: a whole number from `low` (to `high()`, asked when parsing); argparse names the flag."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < low or (high is not None and value > high()):
            bounds = f">= {low}" if high is None else f"from {low} to {high()}"
            raise argparse.ArgumentTypeError(f"must be a whole number {bounds}, got {text!r}")
        return value

    return parse


thread_count = whole_number(1, max_threads)  # a benchmark's --threads


def load_model(path: str | None, exact: bool = False) -> tuple[MDLM, str]:
    """The model at `path`, else the shipped checkpoint, else a random model of the shipped shape; it samples on
    the fast path as `from_pretrained` loads it, or with the exact fp32 model when `exact`."""
    if path:
        return MDLM.from_pretrained(path, fast=not exact), path
    if (SHIPPED_MODEL / "model.safetensors").is_file():
        return MDLM.from_pretrained(SHIPPED_MODEL, fast=not exact), str(SHIPPED_MODEL)
    vocab = "".join(sorted(set(read_text(SHARED_DATA)))) if SHARED_DATA.is_file() else "".join(map(chr, range(32, 127)))
    torch.manual_seed(0)
    model = MDLM(vocab, n_layer=6, n_head=4, n_embd=256, block_size=256).eval()
    model.fast = not exact
    return model, "random init (d256 L6)"


def load_twin(path: str | None, model: MDLM, exact: bool = False) -> tuple[MDLM, str]:
    """The autoregressive twin of `model` at `path`, else the shipped one (a ValueError naming the command that trains
    one when there is none, or when it knows other characters); on the fast path as `from_pretrained` loads it, or
    exact fp32 when `exact`."""
    source = Path(path) if path else SHIPPED_TWIN
    if not (source / "model.safetensors").is_file() and path is None:
        raise ValueError(
            f"no autoregressive twin at {source}: train one with python -m training.train --objective ar "
            "--export-dir ..., or pass --twin DIR"
        )
    twin = MDLM.from_pretrained(source, fast=not exact)
    try:
        check_twin(model, twin)
    except ValueError as error:
        raise ValueError(f"{source}: {error}") from None
    return twin, str(source)


def free_port() -> int:
    """A local port no one listens on now, for an app a benchmark serves."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
