"""The model thread: every torch call of the app runs on one thread (see MODEL_THREAD), streamed runs one frame
ahead of the page; `gpu_work` holds a ZeroGPU Space's GPU while an event runs."""

from __future__ import annotations

import contextlib
import os
import queue
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

# Every torch call of the app runs on this one thread: libgomp gives each thread that starts parallel work its own
# team of OpenMP threads, and with more of them than cores it stops spinning between parallel regions, so every small
# op then waits for its threads to wake (measured: a 256-character pass went from 10 ms to 25 ms once a second thread
# had run the model). Runs queue here step by step, which on a CPU Space's two cores is as fast as running them side
# by side; a GPU run is unaffected.
MODEL_THREAD_NAME = "mdlm-model"
MODEL_THREAD = ThreadPoolExecutor(max_workers=1, thread_name_prefix=MODEL_THREAD_NAME)


def _new_model_thread() -> None:
    # a forked child (spaces.GPU runs each call in one on a ZeroGPU Space) inherits the executor but not its thread
    global MODEL_THREAD
    MODEL_THREAD = ThreadPoolExecutor(max_workers=1, thread_name_prefix=MODEL_THREAD_NAME)


os.register_at_fork(after_in_child=_new_model_thread)


def on_model_thread(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    """`fn(*args, **kwargs)` run on MODEL_THREAD (directly when already there); its result or its exception."""
    if threading.current_thread().name.startswith(MODEL_THREAD_NAME):
        return fn(*args, **kwargs)
    return MODEL_THREAD.submit(fn, *args, **kwargs).result()


def iterate_on_model_thread(items: Iterator) -> Iterator:
    """The items of a generator, each computed on MODEL_THREAD, one step ahead of the caller: a helper thread asks
    for the next item while the caller still sends the last, so the model never waits for the network, and asks
    for no more once the caller stops listening (Stop, a closed tab), closing the generator."""
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
                item = on_model_thread(next, items, ready)  # `ready` doubles as the end marker
                if not hand_over(("end", None) if item is ready else ("item", item)) or item is ready:
                    return
        except BaseException as error:  # noqa: BLE001 (re-raised in the caller's thread)
            hand_over(("error", error))
        finally:
            on_model_thread(items.close)

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
