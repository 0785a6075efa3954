"""A short call while long runs hold the Space: forged addresses, one address, no proxy, four visitors of 500 or 250.

    python -m benchmarks.starvation --threads 2              # the shipped model, each attack, the table below
    python -m benchmarks.starvation --model DIR --rounds 1   # any saved model
    python -m benchmarks.starvation --attack "four visitors, 250 each"   # one attack (repeat --attack for more)

Eight clients each ask `/generate` for a long canvas (`end_at="length"`), then a visitor asks for 64 characters.
The attacks: "forged addresses" (each long client writes its own X-Forwarded-For address before the one the Space's
proxy appends), "one address" (all eight from one visitor), "no proxy" (the app reached directly, eight forged
headers from one machine), each of the largest canvas; and "four visitors, 500 each" and "250 each" (two runs each,
of 500 or 250 characters). Reported: the short call's time alone and during the attack (median of --rounds), and how
many long runs the app took. tests/test_space_trust.py holds the short call to 3x its time alone.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from unittest import mock

import torch
from gradio_client import Client

from mdlm_hf.windows import MAX_CANVAS
from mdlm_space import visitors
from mdlm_space.worker import on_model_thread
from studio.common import free_port

PROXY = "203.0.113.9"  # the address a Space's proxy appends for the attacker
VISITOR = "198.51.100.7"  # the short call's
ATTACKS = {  # the X-Forwarded-For of long client i, the proxies the app trusts, and the characters each long run asks
    "forged addresses": (lambda i: f"10.0.0.{i}, {PROXY}", 1, MAX_CANVAS),
    "one address": (lambda i: PROXY, 1, MAX_CANVAS),
    "no proxy": (lambda i: f"10.0.0.{i}", 0, MAX_CANVAS),
    # four visitors with two runs each, just under a fixed mark for "long" (500 under 512, 250 under 256): they held
    # every slot, and the short call took 46.6x its time alone (500) and 16.4x (250)
    "four visitors, 500 each": (lambda i: f"203.0.113.{20 + i // 2}", 1, 500),
    "four visitors, 250 each": (lambda i: f"203.0.113.{30 + i // 2}", 1, 250),
}
LONG_CLIENTS = 8


@contextlib.contextmanager
def served(model_dir: str) -> Iterator[str]:
    """The app of the model in `model_dir`, as app.py serves it; its URL."""
    from mdlm_space import build_demo
    from mdlm_space.loading import load_model
    from mdlm_space.render import THEME

    model, known_words = on_model_thread(load_model, model_dir)
    demo = on_model_thread(build_demo, model, known_words)
    port = free_port()
    demo.queue(default_concurrency_limit=visitors.QUEUE_SLOTS, max_size=64).launch(
        server_port=port, prevent_thread_lock=True, quiet=True, theme=THEME
    )
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        demo.close()


def short_call(url: str, headers: dict[str, str]) -> float:
    """Seconds for a visitor's 64 characters through `/generate`."""
    client = Client(url, verbose=False, headers=headers)
    started = time.perf_counter()
    client.predict(prompt="", length=64, end_at="length", seed=1, api_name="/generate")
    return time.perf_counter() - started


def attack(url: str, name: str, rounds: int = 1) -> dict:
    """The short call's seconds alone and while LONG_CLIENTS long runs go; the long runs taken and refused."""
    forwarded, proxies, length = ATTACKS[name]
    visitor = {"X-Forwarded-For": VISITOR} if proxies else {}
    with mock.patch.dict(os.environ, {visitors.TRUSTED_PROXIES: str(proxies)}):  # restored after, as it was
        short_call(url, visitor)  # a first call warms the model and the client
        alone = statistics.median(short_call(url, visitor) for _ in range(rounds))
        clients = [Client(url, verbose=False, headers={"X-Forwarded-For": forwarded(i)}) for i in range(LONG_CLIENTS)]
        with ThreadPoolExecutor(LONG_CLIENTS) as pool:
            jobs = list(pool.map(lambda client: long_run(client, length), clients))
        first, stop = list(jobs), threading.Event()
        again = threading.Thread(target=ask_again, args=(clients, first, jobs, length, stop), daemon=True)
        again.start()
        try:
            time.sleep(3)  # the queue takes them, or refuses them
            during = statistics.median(short_call(url, visitor) for _ in range(rounds))
            refused = sum(refused_run(job) for job in first)
        finally:
            stop.set()
            again.join()
            for job in jobs:
                job.cancel()
            settled = time.monotonic() + 60
            while (visitors._long_runs or visitors._runs_by_client) and time.monotonic() < settled:
                time.sleep(0.1)  # the cancelled runs end before the next attack counts its own
    taken = len(jobs) - refused
    return {"attack": name, "alone_s": alone, "attacked_s": during, "ratio": during / alone, "taken": taken,
            "refused": refused}  # fmt: skip


def ask_again(clients: list[Client], first: list, jobs: list, length: int, stop: threading.Event) -> None:
    """Each long client whose first run the app took asks again as soon as its run ends, until `stop`: runs that
    end within seconds (250 characters) hold the app as long as the short calls are timed, as an attacker's would."""
    while not stop.wait(0.05):
        for index, job in enumerate(jobs):
            if job.done() and not refused_run(first[index]) and not stop.is_set():
                jobs[index] = long_run(clients[index], length)


def refused_run(job) -> bool:
    """Whether the app refused a submitted run (it ended in an error; one still going or finished was taken)."""
    return job.done() and not job.cancelled() and job.exception(timeout=0) is not None


def long_run(client: Client, length: int = MAX_CANVAS):
    """A long client's run of `length` characters, submitted."""
    return client.submit(prompt="", length=length, end_at="length", seed=0, api_name="/generate")


def main(argv: list[str] | None = None) -> list[dict]:
    """Serves the model and runs each attack; prints the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="pretrained/mdlm-shakespeare-char")
    parser.add_argument("--rounds", type=int, default=3, help="short calls timed alone and under each attack")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--attack", action="append", choices=list(ATTACKS), help="only this attack (default: each)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    rows = []
    with served(args.model) as url:
        for name in args.attack or ATTACKS:
            rows.append(attack(url, name, args.rounds))
            print(rows[-1], flush=True)
    print("| attack | long runs taken | refused | 64 characters alone | during the attack | ratio |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['attack']} | {row['taken']} | {row['refused']} | {row['alone_s']:.2f} s | "
            f"{row['attacked_s']:.2f} s | {row['ratio']:.2f}x |"
        )
    return rows


if __name__ == "__main__":
    main()
