"""The app's memory as visitors come: the server's resident memory after each round of calls to /forward_process,
each call from a new gradio_client (a new session), as the app is served (`launch_limits`, its session cap).

python -m benchmarks.app_memory [--model DIR] [--calls 1000] [--rounds 4]

The app runs in a child process (`python app.py`), so the figure is its own. The target: under 25 KB a new visitor
once the sessions are capped (a bare gradio app with one such endpoint grows about 17 KB a call).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from gradio_client import Client

from studio.common import REPO_ROOT, SHIPPED_MODEL, free_port


def resident_kib(pid: int) -> int:
    """A process's resident memory, KiB (Linux's /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for process {pid}")


def serve(model: Path, port: int) -> subprocess.Popen:
    """The app as `python app.py` serves it, once its page answers."""
    command = [sys.executable, "app.py", "--model", str(model), "--port", str(port), "--twin", "none"]
    app = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(600):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1)
            return app
        except OSError:
            time.sleep(0.5)
    app.kill()
    raise RuntimeError("the app did not answer within 5 minutes")


def main(argv: list[str] | None = None) -> None:
    """Serves the app, calls it from new visitors round by round, prints its memory after each round."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=SHIPPED_MODEL)
    parser.add_argument("--calls", type=int, default=1000, help="calls in all, each from a new visitor")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args(argv)
    port = free_port()
    app = serve(args.model, port)
    try:
        url, per_round = f"http://127.0.0.1:{port}/", max(1, args.calls // args.rounds)
        Client(url, verbose=False).predict("To be, or not to be", 0.5, 0, api_name="/forward_process")  # warm
        start = resident_kib(app.pid)
        print(
            f"| calls | resident MiB | KiB a call since the first round |\n|---|---|---|\n| 0 | {start / 1024:.0f} | |"
        )
        first = None
        for done in range(per_round, per_round * args.rounds + 1, per_round):
            for _ in range(per_round):
                Client(url, verbose=False).predict("To be, or not to be", 0.5, 0, api_name="/forward_process")
            now = resident_kib(app.pid)
            first = now if first is None else first
            growth = f"{(now - first) / (done - per_round):.1f}" if done > per_round else ""
            print(f"| {done} | {now / 1024:.0f} | {growth} |", flush=True)
    finally:
        app.terminate()
        app.wait(timeout=30)


if __name__ == "__main__":
    main()
