"""The app's thread count: the chooser keeps whichever count runs a pass faster now, probing again as time passes."""

import time
import types

import pytest
import torch

from mdlm_space import threads, worker


def test_the_chooser_keeps_the_faster_count_and_follows_a_change(monkeypatch):
    # a fake clock: a pass takes 3 ticks at the slow count and 1 at the other, whatever the machine is doing
    clock, slow = [0.0], {"count": 2}

    def one_pass() -> None:
        clock[0] += 3.0 if torch.get_num_threads() == slow["count"] else 1.0

    monkeypatch.setattr(threads, "time", types.SimpleNamespace(perf_counter=lambda: clock[0], monotonic=time.monotonic))
    before = torch.get_num_threads()
    try:
        chooser = threads.ThreadChooser(one_pass, counts=(1, 2))
        assert chooser.choose() == 1 and torch.get_num_threads() == 1  # two threads fight a busy core
        slow["count"] = 1  # the neighbour has gone: two threads are faster now
        assert chooser.choose() == 1  # not probed again within PROBE_SECONDS
        monkeypatch.setattr(threads, "PROBE_SECONDS", 0.0)
        assert chooser.choose() == 2 and torch.get_num_threads() == 2
        assert chooser.timings == {1: 3.0, 2: 1.0}
    finally:
        torch.set_num_threads(before)


def test_a_probe_that_fails_leaves_the_count_it_had_chosen():
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        calls = []

        def failing() -> None:
            calls.append(torch.get_num_threads())
            if len(calls) == 2:  # while timing the second count
                raise RuntimeError("the probe cannot run")

        chooser = threads.ThreadChooser(failing, counts=(1, 2))
        chooser.chosen = 1
        with pytest.raises(RuntimeError):
            chooser.probe()
        assert calls == [1, 2] and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_the_model_thread_sets_the_count_before_each_job_and_survives_a_failing_probe(tiny_model):
    before = torch.get_num_threads()
    try:
        chooser = threads.ThreadChooser(threads.model_workload(tiny_model), counts=(1,))
        chooser.chosen = 1
        worker.MODEL_THREAD.chooser = chooser
        assert worker.on_model_thread(torch.get_num_threads) == 1

        def failing() -> None:
            raise RuntimeError("the probe cannot run")

        worker.MODEL_THREAD.chooser = threads.ThreadChooser(failing, counts=(1, 2))
        assert worker.on_model_thread(lambda: "done") == "done"  # the job runs; the chooser is dropped
        assert worker.MODEL_THREAD.chooser is None
    finally:
        worker.MODEL_THREAD.chooser = None
        worker.on_model_thread(torch.set_num_threads, before)
