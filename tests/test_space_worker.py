"""The app's model thread and queue (worker.py, visitors.py): one thread, cancelled runs, concurrent visitors."""

import concurrent.futures
import os
import signal
import sys
import threading
import time
import types
import uuid

import httpx
import pytest

import app
from mdlm_hf import MASK_GLYPH
from mdlm_hf.windows import MAX_CANVAS
from mdlm_space import handlers, loading, worker
from mdlm_space.endpoints import event
from tests.conftest import PageClient


def steps_after(counted_steps: list, seconds: float = 1.5) -> int:
    """How many steps the app takes in `seconds`, starting a second after now."""
    time.sleep(1.0)
    taken = len(counted_steps)
    time.sleep(seconds)
    return len(counted_steps) - taken


@pytest.mark.slow  # several seconds: CI runs it
def test_a_cancelled_run_stops_computing(client, server, counted_steps):
    # Stop on the page and job.cancel() both post /cancel
    job = client.submit(
        prompt="",
        length=100,
        num_steps=100,
        temperature=1.0,
        top_p=1.0,
        order="confidence",
        seed=0,
        block_length=0,
        api_name="/generate_page",
    )
    while len(counted_steps) < 5:
        time.sleep(0.02)
    job.cancel()
    assert steps_after(counted_steps) == 0 and len(counted_steps) < 50
    # a closed page: the event stream's connection drops
    counted_steps.clear()
    config = httpx.get(server + "config").json()
    fn_index = next(d["id"] for d in config["dependencies"] if d["api_name"] == "generate")
    session = uuid.uuid4().hex
    data = ["", 100, 100, 1.0, 1.0, "confidence", 0, 0, 0.25, 0.35, 0.75, 1, False, 0]
    body = dict(data=data, fn_index=fn_index, session_hash=session, event_data=None, trigger_id=None)
    assert httpx.post(server + "gradio_api/queue/join", json=body).status_code == 200
    with httpx.stream("GET", server + f"gradio_api/queue/data?session_hash={session}", timeout=30) as stream:
        for _ in stream.iter_lines():
            if len(counted_steps) >= 5:
                break
    assert steps_after(counted_steps) == 0 and len(counted_steps) < 50


def test_every_model_call_runs_on_the_apps_one_model_thread(client, monkeypatch):
    # a second thread running torch gives libgomp a second team of threads, which slows every pass 2-2.5x on two
    # cores, so the events' model work (streamed and single) all goes to worker.MODEL_THREAD
    threads = []
    sample = handlers.sample

    def recording(*args, **kwargs):
        for state in sample(*args, **kwargs):
            threads.append(threading.current_thread().name)
            yield state

    monkeypatch.setattr(handlers, "sample", recording)
    client.predict(prompt="", length=24, num_steps=6, seed=0, fixed_seed=True, api_name="/generate_page")
    single = event(lambda: threading.current_thread().name, {})["fn"]
    assert len(threads) == 7 and all(name.startswith("mdlm-model") for name in threads + [single()])


def test_frames_are_computed_one_ahead_and_stop_with_the_caller():
    computed, closed = [], []

    def items():
        try:
            for i in range(100):
                computed.append(i)
                yield i
        finally:
            closed.append(threading.current_thread().name)

    stream = worker.iterate_on_model_thread(items())
    assert next(stream) == 0
    time.sleep(0.3)  # a slow caller: item 1 waits for it, item 2 is computed and held, no more
    assert computed == [0, 1, 2]
    stream.close()  # the caller stops listening: the helper asks for nothing more and closes the generator
    deadline = time.monotonic() + 5
    while not closed and time.monotonic() < deadline:
        time.sleep(0.01)
    assert closed[0].startswith("mdlm-model") and computed == [0, 1, 2]


def test_the_model_thread_serves_a_forked_child():
    # spaces.GPU runs each call in a forked child on a ZeroGPU Space: the parent's executor thread is not there
    worker.on_model_thread(int)  # the parent's model thread exists
    pid = os.fork()
    if pid == 0:  # the child: ends itself (SIGALRM) rather than hang
        signal.alarm(10)
        name = worker.on_model_thread(lambda: threading.current_thread().name)
        os._exit(0 if name.startswith("mdlm-model") else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_an_error_while_computing_frames_reaches_the_caller():
    def failing():
        yield 1
        raise ValueError("length must be at least 1")

    stream = worker.iterate_on_model_thread(failing())
    assert next(stream) == 1
    with pytest.raises(ValueError, match="length must be at least 1"):
        next(stream)


def test_eight_concurrent_users_are_all_served(server):
    def one_user(seed: int) -> str:
        return PageClient(server, verbose=False).predict(
            prompt="",
            length=50,
            num_steps=10,
            temperature=1.0,
            top_p=1.0,
            order="random",
            seed=seed,
            block_length=0,
            end_at="length",
            api_name="/generate_page",
        )[1]

    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        texts = list(pool.map(one_user, range(8)))
    assert len(texts) == 8 and all(len(t) == 50 and MASK_GLYPH not in t for t in texts)
    assert len(set(texts)) == 8  # different seeds, different texts


def test_one_visitors_many_long_runs_leave_room_for_another_visitors_short_one(server, counted_steps):
    # 8 concurrent calls of 16,384 characters at 256 steps kept a 64-character call waiting for more than 240 s
    from gradio_client.utils import Status

    greedy = PageClient(server, verbose=False, headers={"X-Forwarded-For": "203.0.113.5"})
    long_run = dict(prompt="", length=MAX_CANVAS, num_steps=128, seed=0, fixed_seed=True, api_name="/generate_page")
    jobs = [greedy.submit(**long_run) for _ in range(3)]
    try:
        deadline = time.monotonic() + 60
        while sum(job.status().code == Status.FINISHED for job in jobs) < 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        refused = [job for job in jobs if job.done()]
        assert len(refused) == 1, [job.status().code for job in jobs]  # a third run of theirs is refused at once
        with pytest.raises(Exception, match="2 of your runs are going already: wait for one to end, or stop one"):
            refused[0].result()
        other = PageClient(server, verbose=False, headers={"X-Forwarded-For": "198.51.100.7"})
        start = time.monotonic()
        *_, (_, text, readout, _) = other.submit(
            prompt="", length=64, num_steps=8, seed=1, fixed_seed=True, api_name="/generate_page"
        )
        assert len(text) <= 64 and MASK_GLYPH not in text and time.monotonic() - start < 60
    finally:
        for job in jobs:
            job.cancel()


def test_while_eight_generate_a_new_visitor_is_served_and_told_their_place_in_the_queue(server, counted_steps):
    from gradio_client.utils import Status

    client = PageClient(server, verbose=False)
    running = [
        client.submit(prompt="", length=100, num_steps=100, seed=s, fixed_seed=True, api_name="/generate_page")
        for s in range(8)
    ]
    ninth = None
    try:
        deadline = time.monotonic() + 30
        while len(counted_steps) < 40 and time.monotonic() < deadline:  # all eight under way
            time.sleep(0.05)
        assert httpx.get(server, timeout=10).status_code == 200  # the page
        shown = client.predict("To be, or not to be", 0.5, 0, api_name="/forward_process_page")  # another tab's event
        assert "x_t" in shown[0]
        ninth = client.submit(prompt="", length=20, num_steps=5, seed=9, fixed_seed=True, api_name="/generate_page")
        deadline = time.monotonic() + 10
        while (status := ninth.status()).code != Status.IN_QUEUE and time.monotonic() < deadline:
            time.sleep(0.05)
        assert status.code == Status.IN_QUEUE and status.rank == 0 and status.queue_size >= 1  # what the page shows
    finally:
        for job in running + [ninth] * (ninth is not None):
            job.cancel()


def test_gpu_work_is_decorated_with_spaces_gpu_only_when_spaces_is_importable(model_dir, monkeypatch):

    model, _ = loading.load_model(model_dir)
    monkeypatch.setitem(sys.modules, "spaces", None)  # not importable: the functions as they are
    plain = lambda: None  # noqa: E731
    assert worker.gpu_work(plain) is plain
    decorated = []

    def fake_gpu(fn):
        decorated.append(fn)
        return fn

    monkeypatch.setitem(sys.modules, "spaces", types.SimpleNamespace(GPU=fake_gpu))
    demo = app.build_demo(model)
    endpoints = {fn.api_name for fn in demo.fns.values() if fn.api_name}
    assert {"generate", "infill", "compare", "score", "forward_process"} <= endpoints
    wrapped = {fn.__name__ for fn in decorated}  # each endpoint's function, named after it (its MCP tool)
    assert {"generate", "infill", "compare", "score", "forward_process"} <= wrapped
