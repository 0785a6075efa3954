"""Who a call comes from, and how many runs it may have going: a visitor is known by the address the trusted proxy
in front wrote (never one the caller wrote itself), has at most MAX_RUNS_PER_CLIENT runs at once, and long runs hold
at most MAX_LONG_RUNS of the queue's slots, so that a short run always finds one (benchmarks/starvation.py)."""

from __future__ import annotations

import collections
import contextlib
import ipaddress
import math
import os
import threading
from collections.abc import Iterator
from typing import Any

import gradio as gr

# streamed runs one caller may have going at once: more wait their turn in the queue behind everyone else's, so a
# few callers with many long runs kept a short one waiting for minutes
MAX_RUNS_PER_CLIENT = 2
QUEUE_SLOTS = 8  # the runs each endpoint serves at once (app.py's default_concurrency_limit, per event)
# a long run: its canvas past the shipped model's context, one window. Long runs never hold more than MAX_LONG_RUNS
# slots, so short runs always find one, and their steps go first on the model thread (worker.SHORT_LANE). The mark
# was two windows: 8 runs of 500 characters, just under it, held every slot, and a call of 64 characters waited 26 s
LONG_RUN_CHARS = 256
MAX_LONG_RUNS = QUEUE_SLOTS - 2
TRUSTED_PROXIES = "MDLM_TRUSTED_PROXIES"  # the environment variable: proxies in front that add X-Forwarded-For
_runs_by_client: collections.Counter[str] = collections.Counter()
_long_runs = 0
_runs_lock = threading.Lock()


def run_chars(named: dict[str, Any]) -> int:
    """The characters a run's canvas holds, as its parameters say (its prompt, template or text, and its length)."""
    texts = sum(len(named[name]) for name in ("prompt", "template", "text") if isinstance(named.get(name), str))
    length = named.get("length")
    number = isinstance(length, (int, float)) and not isinstance(length, bool) and math.isfinite(length)
    return texts + (int(length) if number else 0)  # 16384.0 from a client is a long run too


def trusted_proxies() -> int:
    """How many proxies in front of the app append to X-Forwarded-For: MDLM_TRUSTED_PROXIES, else 1 on a Space
    (its own proxy), else 0 (`python app.py`, reached directly)."""
    value = os.environ.get(TRUSTED_PROXIES, "").strip()
    if value.isdigit():
        return int(value)
    return 1 if os.environ.get("SPACE_ID") else 0


def client_key(request: gr.Request | None) -> str | None:
    """Who a call comes from: the address the trusted proxy appended to X-Forwarded-For (on a Space, the last
    entry), else the connection's own; never an address the caller wrote itself (the entries before). uvicorn takes a
    loopback connection's X-Forwarded-For for its address (a proxy on this machine); None for this machine itself
    (`python app.py`: its one user's tabs) or unknown."""
    if request is None:
        return None
    hops = trusted_proxies()
    forwarded = [entry.strip() for entry in (request.headers.get("x-forwarded-for") or "").split(",")]
    forwarded = [entry for entry in forwarded if entry]
    host = forwarded[-hops] if hops and len(forwarded) >= hops else getattr(request.client, "host", None)
    if host in (None, "127.0.0.1", "::1", "localhost"):
        return None
    try:  # an IPv6 visitor holds a whole /64: one key for it, or rotating addresses would each get the cap
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    return str(ipaddress.ip_network(f"{host}/64", strict=False)) if address.version == 6 else host


def run_refusal(key: str | None, long: bool) -> str | None:
    """Why a run may not start now (its caller's cap, or the long runs' share of the queue), or None; under
    _runs_lock."""
    if key is not None and _runs_by_client[key] >= MAX_RUNS_PER_CLIENT:
        return f"{MAX_RUNS_PER_CLIENT} of your runs are going already: wait for one to end, or stop one"
    if long and _long_runs >= MAX_LONG_RUNS:
        return (
            f"{MAX_LONG_RUNS} long runs (over {LONG_RUN_CHARS} characters) are going already: ask for fewer "
            "characters, or wait for one to end"
        )
    return None


@contextlib.contextmanager
def client_run(request: gr.Request | None, long: bool = False) -> Iterator[None]:
    """Counts a streamed run against its caller, and a long one against the long runs' share, while it runs; a
    gr.Error when either is full."""
    global _long_runs
    key = client_key(request)
    with _runs_lock:
        if refusal := run_refusal(key, long):
            raise gr.Error(refusal, print_exception=False)
        if key is not None:
            _runs_by_client[key] += 1
        _long_runs += long
    try:
        yield
    finally:
        with _runs_lock:
            _long_runs -= long
            if key is not None:
                _runs_by_client[key] -= 1
                if _runs_by_client[key] <= 0:
                    del _runs_by_client[key]
