"""How many torch threads the app's model thread uses: as many as make a pass fastest on the CPUs as they are now.

On a quiet 2-core machine two threads beat one; with one core busy in another process (a shared Space's
neighbour, a training run) two threads run 2-5x slower than one, since each parallel region waits for the thread
the other process has pushed off its core. No count is right for both, and neither the load average (a minute
late) nor /proc/stat (a container sees its host's CPUs) says which applies, so the chooser measures: before a
job, when its last probe is PROBE_SECONDS old, it times one of the model's passes at each count, interleaved, and
keeps the faster (docs/benchmarks.md, "Threads on a shared CPU", measures the policies).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch

from mdlm_hf.devices import cpu_count

PROBE_SECONDS = 3.0  # how often the counts are timed again: a neighbour's load comes and goes in seconds
PROBE_ROUNDS = 2  # passes timed per count, alternating, each probe (about 30 ms in all on a quiet 2-core CPU)


def model_workload(model: torch.nn.Module) -> Callable[[], object]:
    """One sampling pass of `model` on an all-mask canvas of its context: what the probe times (a bare matrix
    product of a pass's size timed faster on two threads with a core busy, where the model's passes ran 2x slower)."""
    canvas = torch.full((1, model.block_size), model.mask_id, device=next(model.parameters()).device)

    def one_pass() -> object:
        with torch.no_grad():
            return model.denoise(canvas)

    return one_pass


class ThreadChooser:
    """Keeps torch's thread count at whichever of 1 and all the CPUs runs `workload` faster now; `choose()` runs
    before each job on the model thread."""

    def __init__(self, workload: Callable[[], object], counts: tuple[int, ...] | None = None) -> None:
        self.workload = workload
        self.counts = counts or tuple(sorted({1, cpu_count()}))
        self.chosen = torch.get_num_threads()
        self.last_probe = -float("inf")
        self.timings: dict[int, float] = {}  # the last probe's median seconds per pass, by count

    def choose(self) -> int:
        """The thread count for the next job (probed again when the last probe is PROBE_SECONDS old)."""
        if len(self.counts) > 1 and time.monotonic() - self.last_probe >= PROBE_SECONDS:
            self.probe()
        if torch.get_num_threads() != self.chosen:
            torch.set_num_threads(self.chosen)
        return self.chosen

    def probe(self) -> None:
        """Times the workload at each count, alternating, and keeps the count with the lowest median."""
        times: dict[int, list[float]] = {count: [] for count in self.counts}
        try:
            for _ in range(PROBE_ROUNDS):
                for count in self.counts:
                    torch.set_num_threads(count)
                    started = time.perf_counter()
                    self.workload()
                    times[count].append(time.perf_counter() - started)
        finally:  # a probe that fails leaves the count it had chosen, not the one it was timing
            torch.set_num_threads(self.chosen)
        self.timings = {count: statistics.median(seconds) for count, seconds in times.items()}
        self.chosen = min(self.timings, key=self.timings.get)
        torch.set_num_threads(self.chosen)
        self.last_probe = time.monotonic()
