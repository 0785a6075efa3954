"""Where a run runs: the `--device` flag that the app, training, evaluation and the benchmarks share (what it accepts
and the device it picks), and the CPU threads a `--threads` flag may ask for, so each front end refuses the same bad
values with the same line."""

from __future__ import annotations

import os

import torch

DEVICE_HELP = "auto (cuda where a GPU is available, else cpu), cpu, cuda, cuda:N or mps"


def device_problem(name: str) -> str | None:
    """Why `--device name` cannot run a model here, in one line, or None."""
    if name == "auto":
        return None
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError):
        return f"--device {name!r} is not a device: use auto, cpu, cuda, cuda:N or mps"
    if device.type not in ("cpu", "cuda", "mps"):
        return f"--device {name!r}: mdlm_hf runs on auto, cpu, cuda, cuda:N or mps"
    if device.type == "cuda" and not torch.cuda.is_available():
        return f"--device {name}: CUDA is not available here; use --device cpu (or auto)"
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        return f"--device {name}: there are {torch.cuda.device_count()} CUDA device(s)"
    if device.type == "mps" and not torch.backends.mps.is_available():
        return f"--device {name}: MPS is not available here; use --device cpu (or auto)"
    return None


def choose_device(name: str) -> torch.device:
    """The device a valid `--device` names (check it with `device_problem` first): auto is cuda where a GPU is
    available, else cpu."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


THREADS_PER_CPU = 4  # more threads than CPUs only slows a run (a command written for 2 still runs on 1); far more
# crashed torch (100,000: a segmentation fault)


def cpu_count() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def max_threads() -> int:
    """The most CPU threads a `--threads` flag may ask for here."""
    return THREADS_PER_CPU * cpu_count()
