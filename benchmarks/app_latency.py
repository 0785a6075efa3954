"""Time to first streamed frame and to the final text in the app, through gradio_client.

python -m benchmarks.app_latency [--model DIR] [--length 256] [--steps 64] [--repeats 3]

Every other control keeps the app's default (the sampling study's recommended options).
"""

from __future__ import annotations

import argparse
import socket
import statistics
import time

from gradio_client import Client

import app
from benchmarks.common import load_model


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None)
    parser.add_argument("--length", type=int, default=256)
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    model, source = load_model(args.model)
    demo = app.build_demo(model)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    demo.queue().launch(server_port=port, prevent_thread_lock=True, quiet=True)
    client = Client(f"http://127.0.0.1:{port}/", verbose=False)
    first, final, frames = [], [], []
    try:
        for seed in range(args.repeats + 1):  # the first run warms up
            start = time.perf_counter()
            job = client.submit(
                prompt="", length=args.length, num_steps=args.steps, seed=seed, fixed_seed=True, api_name="/generate"
            )
            count, first_at = 0, None
            for _ in job:
                count += 1
                first_at = first_at or time.perf_counter() - start
            if seed:
                first.append(first_at)
                final.append(time.perf_counter() - start)
                frames.append(count)
    finally:
        demo.close()
    print(f"model: {source}; length {args.length}, {args.steps} steps, {args.repeats} runs (median)")
    print(f"time to first streamed frame: {statistics.median(first):.3f} s")
    print(f"time to final text:           {statistics.median(final):.3f} s ({statistics.median(frames):.0f} frames)")


if __name__ == "__main__":
    main()
