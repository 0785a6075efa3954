"""The app's thread count on a shared CPU: `generate(256)` latency for each policy, quiet, beside a busy core, and
with four visitors at once.

    python -m benchmarks.thread_policy --repeats 8            # the shipped model; the table in docs/benchmarks.md

Every run goes through the app's model thread (`mdlm_space.worker`), step by step as the app streams it
(`MDLM.stream` with the default options). Policies: "all CPUs" (torch's default: a thread per core), "one thread",
and "probe" (`mdlm_space.threads.ThreadChooser`, what app.py runs: the faster count, timed on a pass every few
seconds). Loads: "quiet"; "one core busy" (another process spinning on a core, as a neighbour or a training run
would); "four visitors" (four runs at once, their steps interleaved on the one model thread). Per policy and load:
the median and 95th percentile of a run's seconds over --repeats runs (four per repeat with four visitors); the
policies alternate repeat by repeat, so a drift of the machine falls on all of them.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import torch

from mdlm_hf import MDLM
from mdlm_hf.devices import cpu_count
from mdlm_hf.pipeline import default_options
from mdlm_space import worker
from mdlm_space.threads import ThreadChooser, model_workload

LOADS = ("quiet", "one core busy", "four visitors")
POLICIES = ("all CPUs", "one thread", "probe")
SPIN = "while True: pass"


def run_seconds(model: MDLM, seed: int) -> float:
    """One 256-character run streamed through the model thread, as the app runs it; its seconds."""
    options = default_options(model)
    started = time.perf_counter()
    for _ in worker.iterate_on_model_thread(model.stream("_" * 256, options=options, seed=seed)):
        pass
    return time.perf_counter() - started


def set_policy(model: MDLM, policy: str) -> None:
    """Makes the model thread run under `policy`."""
    chooser = ThreadChooser(model_workload(model)) if policy == "probe" else None
    worker.MODEL_THREAD.chooser = chooser
    if chooser is None:
        count = cpu_count() if policy == "all CPUs" else 1
        worker.on_model_thread(torch.set_num_threads, count)


@contextlib.contextmanager
def load(name: str) -> Iterator[None]:
    """Another process spinning on a core while the block runs, for "one core busy"."""
    spinner = subprocess.Popen([sys.executable, "-c", SPIN]) if name == "one core busy" else None
    try:
        time.sleep(0.5 if spinner else 0)
        yield
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()


def measure(model: MDLM, repeats: int) -> dict[tuple[str, str], list[float]]:
    """Each load's and policy's run seconds, the policies alternating repeat by repeat."""
    seconds: dict[tuple[str, str], list[float]] = {(l, p): [] for l in LOADS for p in POLICIES}  # noqa: E741
    for load_name in LOADS:
        with load(load_name):
            for repeat in range(repeats):
                order = POLICIES[repeat % len(POLICIES) :] + POLICIES[: repeat % len(POLICIES)]
                for policy in order:
                    set_policy(model, policy)
                    if load_name == "four visitors":
                        with ThreadPoolExecutor(4) as pool:
                            times = list(pool.map(lambda s: run_seconds(model, s), range(4 * repeat, 4 * repeat + 4)))
                    else:
                        times = [run_seconds(model, repeat)]
                    seconds[(load_name, policy)].extend(times)
                    print(f"{load_name} · {policy}: {', '.join(f'{t:.2f}' for t in times)} s", flush=True)
    return seconds


def percentile(values: list[float], share: float) -> float:
    """The `share` quantile (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered)) - 1))]


def main(argv: list[str] | None = None) -> dict:
    """Times every policy under every load; prints the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="pretrained/mdlm-shakespeare-char")
    parser.add_argument("--repeats", type=int, default=8)
    args = parser.parse_args(argv)
    model = worker.on_model_thread(MDLM.from_pretrained, args.model)
    run_seconds(model, 0)  # the fast path's timing and the first passes, before any clock runs
    seconds = measure(model, args.repeats)
    quiet = {p: statistics.median(seconds[("quiet", p)]) for p in POLICIES}
    print("| load | policy | median | 95th percentile | median vs the policy's quiet |")
    print("|---|---|---|---|---|")
    for (load_name, policy), values in seconds.items():
        median = statistics.median(values)
        print(
            f"| {load_name} | {policy} | {median:.2f} s | {percentile(values, 0.95):.2f} s | "
            f"{median / quiet[policy]:.2f}x |"
        )
    return {f"{l} · {p}": v for (l, p), v in seconds.items()}  # noqa: E741


if __name__ == "__main__":
    main()
