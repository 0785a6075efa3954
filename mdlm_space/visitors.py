"""Who a call comes from, and which runs may go at once: a visitor is known by the address the trusted proxy in
front wrote (never one the caller wrote itself) and has at most MAX_RUNS_PER_CLIENT runs at once; runs longer than a
short call share a budget of characters in flight, so that short calls always keep a lane (benchmarks/starvation.py)."""

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
# The lane: runs of more than SHORT_RUN_CHARS share CHARS_IN_FLIGHT characters and QUEUE_SLOTS - 2 slots, each run
# counting at most half the budget (so a run of any length starts beside one other); a short run (a line or two: a
# Rewrite, a short infill) always starts, in the slots they leave, and its steps go first on the model thread. A fixed
# mark for "long" let runs just under it hold every slot: 8 runs of 500 under a mark of 512, then 8 of 250 under 256
SHORT_RUN_CHARS = 128
CHARS_IN_FLIGHT = 1_536  # six runs of the default 256 characters
MAX_LONG_RUNS = QUEUE_SLOTS - 2
TRUSTED_PROXIES = "MDLM_TRUSTED_PROXIES"  # the environment variable: proxies in front that add X-Forwarded-For
_runs_by_client: collections.Counter[str] = collections.Counter()
_long_runs: list[int] = []  # the characters of each run going that is not short
_runs_lock = threading.Lock()


def run_chars(named: dict[str, Any]) -> int:
    """The characters a run's canvas holds, as its parameters say (its prompt, template or text, and its length)."""
    texts = sum(len(named[name]) for name in ("prompt", "template", "text") if isinstance(named.get(name), str))
    length = named.get("length")
    number = isinstance(length, (int, float)) and not isinstance(length, bool) and math.isfinite(length)
    return texts + (int(length) if number else 0)  # 16384.0 from a client is a long run too


def is_short(chars: int) -> bool:
    """Whether a run of `chars` characters is short: it always starts, and its steps go first on the model thread."""
    return chars <= SHORT_RUN_CHARS


def budget_share(chars: int) -> int:
    """What a run of `chars` characters takes of CHARS_IN_FLIGHT: nothing when short, else its characters, at most
    half the budget, so that a run of 16,384 waits for half the budget to be free rather than for no run at all."""
    return 0 if is_short(chars) else min(chars, CHARS_IN_FLIGHT // 2)


def room(going: list[int]) -> int:
    """What is left of CHARS_IN_FLIGHT beside the long runs `going` (each one's characters): 0 with their slots full."""
    return CHARS_IN_FLIGHT - sum(map(budget_share, going)) if len(going) < MAX_LONG_RUNS else 0


def fits(going: list[int], chars: int) -> bool:
    """Whether a run of `chars` characters may start beside the long runs `going` (each one's characters)."""
    return is_short(chars) or budget_share(chars) <= room(going)


def trusted_proxies() -> int:
    """How many proxies in front of the app append to X-Forwarded-For: MDLM_TRUSTED_PROXIES, else 1 on a Space
    (its own proxy), else 0 (`python app.py`, reached directly)."""
    value = os.environ.get(TRUSTED_PROXIES, "").strip()
    if value.isdigit():
        return int(value)
    return 1 if os.environ.get("SPACE_ID") else 0


def client_key(request: gr.Request | None) -> str | None:
    """Who a call comes from: the address the trusted proxy appended to X-Forwarded-For, else the connection's own,
    never one the caller wrote itself; None for this machine (`python app.py`: its one user's tabs) or unknown."""
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


def run_refusal(key: str | None, chars: int) -> str | None:
    """Why a run of `chars` characters may not start now (its caller's cap, or no room in the budget), in one line
    that says what to do, or None; under _runs_lock."""
    if key is not None and _runs_by_client[key] >= MAX_RUNS_PER_CLIENT:
        return f"{MAX_RUNS_PER_CLIENT} of your runs are going already: wait for one to end, or stop one"
    if fits(_long_runs, chars):
        return None
    return (
        f"{len(_long_runs)} runs are writing {sum(_long_runs):,} characters already: ask for at most "
        f"{max(room(_long_runs), SHORT_RUN_CHARS):,} characters (this run has {chars:,}), or wait for one to end"
    )


@contextlib.contextmanager
def client_run(request: gr.Request | None, chars: int = 0) -> Iterator[bool]:
    """Counts a streamed run of `chars` characters against its caller, and against the budget unless it is short,
    while it runs; yields whether it is short (its lane on the model thread); a gr.Error when there is no room."""
    key, short = client_key(request), is_short(chars)
    with _runs_lock:
        if refusal := run_refusal(key, chars):
            raise gr.Error(refusal, print_exception=False)
        if key is not None:
            _runs_by_client[key] += 1
        if not short:
            _long_runs.append(chars)
    try:
        yield short
    finally:
        with _runs_lock:
            if not short:
                _long_runs.remove(chars)
            if key is not None:
                _runs_by_client[key] -= 1
                if _runs_by_client[key] <= 0:
                    del _runs_by_client[key]
