"""The model thread: every torch call of the app runs on one thread (see MODEL_THREAD), streamed runs one frame
ahead of the page; `gpu_work` holds a ZeroGPU Space's GPU while an event runs."""

from __future__ import annotations

import collections
import contextlib
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

from mdlm_space.threads import ThreadChooser

# Every torch call of the app runs on this one thread: libgomp gives each thread that starts parallel work its own
# team of OpenMP threads, and with more of them than cores it stops spinning between parallel regions, so every small
# op then waits for its threads to wake (measured: a 256-character pass went from 10 ms to 25 ms once a second thread
# had run the model). Runs queue here step by step, which on a CPU Space's two cores is as fast as running them side
# by side; a GPU run is unaffected.
MODEL_THREAD_NAME = "mdlm-model"
# Two lanes: a short run's steps (a line or two: visitors.is_short) go before a longer run's, and for
# SHORT_LINGER after each short step the thread waits for the run's next one (its frame is being handed over) rather
# than start a long step: a 64-character call took 5.8x its time alone beside two long runs without the lanes, and
# 3x with lanes alone (a long step slipped into every gap)
SHORT_LANE, LONG_LANE = 0, 1
SHORT_LINGER = 0.02  # seconds


class ModelThread:
    """The one thread that runs every torch call of the app, the short lane's jobs first, each lane in order."""

    def __init__(self) -> None:
        self._lanes: tuple[collections.deque, collections.deque] = (collections.deque(), collections.deque())
        self._changed = threading.Condition()
        self._long_after = 0.0  # time.monotonic() before which the long lane waits (a short run is stepping)
        self._thread: threading.Thread | None = None
        self.chooser: ThreadChooser | None = None  # app.main's: torch's thread count before each job

    def submit(self, fn: Callable, *args: Any, lane: int = SHORT_LANE, **kwargs: Any) -> Future:
        """Queues `fn(*args, **kwargs)` in `lane`; its Future."""
        future: Future = Future()
        with self._changed:
            if self._thread is None:  # started on first use, so a forked child starts its own
                self._thread = threading.Thread(target=self._serve, name=MODEL_THREAD_NAME, daemon=True)
                self._thread.start()
            self._lanes[lane].append((future, fn, args, kwargs))
            self._changed.notify()
        return future

    def _next_job(self) -> tuple:
        """The next job: the short lane's first, else the long lane's once no short run is stepping."""
        short, long = self._lanes
        with self._changed:
            while True:
                if short:
                    return (SHORT_LANE, *short.popleft())
                wait = self._long_after - time.monotonic()
                if long and wait <= 0:
                    return (LONG_LANE, *long.popleft())
                self._changed.wait(wait if long else None)

    def _serve(self) -> None:
        while True:
            lane, future, fn, args, kwargs = self._next_job()
            if not future.set_running_or_notify_cancel():
                continue
            if self.chooser is not None:
                try:
                    self.chooser.choose()
                except Exception:  # noqa: BLE001 (a probe that cannot run leaves the count as it is, not the job undone)
                    self.chooser = None
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as error:  # noqa: BLE001 (handed to the caller, whose thread raises it)
                future.set_exception(error)
            if lane == SHORT_LANE:  # from its end: a short step longer than the linger still holds the long lane
                with self._changed:
                    self._long_after = time.monotonic() + SHORT_LINGER


MODEL_THREAD = ModelThread()


def _new_model_thread() -> None:
    # a forked child (spaces.GPU runs each call in one on a ZeroGPU Space) inherits the object but not its thread
    global MODEL_THREAD
    MODEL_THREAD = ModelThread()


os.register_at_fork(after_in_child=_new_model_thread)


def on_model_thread(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    """`fn(*args, **kwargs)` run on MODEL_THREAD in the short lane (directly when already there); its result or its
    exception."""
    if threading.current_thread().name.startswith(MODEL_THREAD_NAME):
        return fn(*args, **kwargs)
    return MODEL_THREAD.submit(fn, *args, **kwargs).result()


def iterate_on_model_thread(items: Iterator, lane: int = SHORT_LANE) -> Iterator:
    """The items of a generator, each computed on MODEL_THREAD in `lane`, one step ahead of the caller: a helper
    thread asks for the next item while the caller still sends the last, so the model never waits for the network,
    and asks for no more once the caller stops listening (Stop, a closed tab), closing the generator."""
    if threading.current_thread().name.startswith(MODEL_THREAD_NAME):
        yield from items  # already there: a helper would wait for this very thread
        return
    ready: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=1)  # the one item computed ahead
    stop = threading.Event()

    def hand_over(entry: tuple[str, Any]) -> bool:
        while not stop.is_set():
            with contextlib.suppress(queue.Full):
                ready.put(entry, timeout=0.05)
                return True
        return False

    def produce() -> None:
        try:
            while not stop.is_set():
                item = MODEL_THREAD.submit(next, items, ready, lane=lane).result()  # `ready` doubles as the end
                if not hand_over(("end", None) if item is ready else ("item", item)) or item is ready:
                    return
        except BaseException as error:  # noqa: BLE001 (re-raised in the caller's thread)
            hand_over(("error", error))
        finally:
            MODEL_THREAD.submit(items.close, lane=lane).result()

    threading.Thread(target=produce, name="mdlm-frames", daemon=True).start()
    try:
        while True:
            kind, value = ready.get()
            if kind == "end":
                return
            if kind == "error":
                raise value
            yield value
    finally:
        stop.set()


def gpu_work(fn: Callable) -> Callable:
    """`fn` decorated with `spaces.GPU` when the `spaces` package is importable (on a ZeroGPU Space it then holds
    a GPU while it runs), else `fn` itself."""
    try:
        import spaces
    except ImportError:
        return fn
    return spaces.GPU(fn)
