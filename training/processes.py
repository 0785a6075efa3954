"""Where a training run's processes run and how they agree: one per torchrun rank (rank 0 alone logs and writes),
the hardware the model card names, and the stop a signal asks for, which every rank takes at the same step.
"""

from __future__ import annotations

import contextlib
import math
import os
import platform
import signal
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
from tqdm import tqdm

from mdlm_hf.devices import choose_device
from training.flags import RunSettings


@dataclass
class Processes:
    """Where this process runs: one per torchrun rank; rank 0 alone logs and writes."""

    device: torch.device
    rank: int = 0
    world_size: int = 1

    @property
    def distributed(self) -> bool:
        """Whether the run has more than one process (torchrun)."""
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Whether this is rank 0, the process that logs and writes."""
        return self.rank == 0


def setup_processes(args: RunSettings) -> Processes:
    """Joins the torchrun process group (gloo on CPU, nccl on GPU) when there is one; sets threads."""
    processes = Processes(choose_device(args.device))
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        processes.rank, processes.world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        if processes.device.type == "cuda":
            processes.device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
            torch.cuda.set_device(processes.device)
        dist.init_process_group(backend="nccl" if processes.device.type == "cuda" else "gloo")
    if args.threads:
        torch.set_num_threads(args.threads)
    return processes


def agreed(processes: Processes, *flags: bool) -> list[bool]:
    """Each flag as every rank will act on it: true if it is true on any rank (one collective per call). The clock's
    decisions (time limit, periodic save) are passed as true on rank 0 alone, so its clock decides for all: saving
    is collective, and every rank must leave the loop at the same step."""
    if not processes.distributed:
        return list(flags)
    tensor = torch.tensor([float(f) for f in flags], device=processes.device)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return [bool(v) for v in tensor.tolist()]


class StopRequest:
    """Ctrl-C or SIGTERM asks the loop to stop at the next step boundary, so the checkpoint is exact (raising
    mid-step would save random streams past the step). A second signal quits without saving, unless it comes within
    DUPLICATE_SECONDS of the first: under torchrun one Ctrl-C reaches each worker twice."""

    DUPLICATE_SECONDS = 2.0

    def __init__(self, announce: bool = True) -> None:
        self.announce = announce  # under torchrun, rank 0 alone says it is stopping
        self.requested = False
        self.requested_at = -math.inf
        self.previous = {sig: signal.signal(sig, self._handle) for sig in (signal.SIGINT, signal.SIGTERM)}

    def _handle(self, signum: int, frame: object) -> None:
        if self.requested:
            if time.monotonic() - self.requested_at < self.DUPLICATE_SECONDS:
                return  # the same request, delivered twice
            raise KeyboardInterrupt
        self.requested, self.requested_at = True, time.monotonic()
        if self.announce:
            tqdm.write("stop requested: finishing this step, then saving (signal again to quit without saving)")

    def close(self) -> None:
        """Gives SIGINT and SIGTERM back to the handlers they had before."""
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)


def hardware_description(device: torch.device, processes: int = 1) -> str:
    """What a run trains on, for the model card: the GPU's name, or the CPU model and its threads."""
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        return name if processes == 1 else f"{processes} x {name}"
    if device.type == "mps":
        return "an Apple GPU (mps)"
    model_name = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):  # Linux names the CPU model; elsewhere platform's words stay
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model_name = line.split(":", 1)[1].strip()
                break
    threads = torch.get_num_threads() * processes
    plural = "s" if threads > 1 else ""
    return f"{model_name}, {threads} thread{plural}" + (f" in {processes} processes" if processes > 1 else "")


def joined_hardware(before: str | None, now: str) -> str:
    """The hardware a resumed run has trained on: the checkpoint's, then this invocation's if it differs."""
    if not before or before == now or before.endswith(f", then {now}"):
        return before or now
    return f"{before}, then {now}"
