"""Where a run runs: the `--device` flag that the app, training, evaluation and the benchmarks share (what it accepts
and the device it picks), and the CPU threads a `--threads` flag may ask for, so each front end refuses the same bad
values with the same line."""

from __future__ import annotations

import os

import torch

from mdlm_hf.checks import described

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
    reason = unavailable(device)
    return None if reason is None else f"--device {name}: {reason}; use --device cpu (or auto)"


def unavailable(device: torch.device) -> str | None:
    """Why this machine has no `device` (no CUDA, no such CUDA device, no MPS), in words, or None."""
    if device.type == "cuda" and not torch.cuda.is_available():
        return "CUDA is not available here"
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        return f"there are {torch.cuda.device_count()} CUDA device(s)"
    if device.type == "mps" and not torch.backends.mps.is_available():
        return "MPS is not available here"
    return None


def check_map_location(map_location: object) -> None:
    """A ValueError unless weights can be loaded onto `map_location` here (checked first: loading onto a missing
    device fails inside safetensors, where it reads as a shape mismatch)."""
    try:
        device = torch.device(map_location)
    except (RuntimeError, TypeError, ValueError):
        device = None
    if device is None or device.type not in ("cpu", "cuda", "mps"):
        where = described(map_location)
        raise ValueError(f"map_location must be a device mdlm_hf runs on (cpu, cuda, cuda:N or mps), got {where}")
    reason = unavailable(device)
    if reason is not None:
        raise ValueError(f"map_location={str(device)!r}: {reason}; load with map_location='cpu'")


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
