"""The app's thread count: the chooser keeps whichever count runs a pass faster now, probing again as time passes."""

import time

import torch

from mdlm_space import threads, worker


def workload_slower_on(slow_count: int):
    def one_pass() -> None:
        time.sleep(0.004 if torch.get_num_threads() == slow_count else 0.001)

    return one_pass


def test_the_chooser_keeps_the_faster_count_and_follows_a_change(monkeypatch):
    before = torch.get_num_threads()
    try:
        slow = {"count": 2}
        chooser = threads.ThreadChooser(lambda: workload_slower_on(slow["count"])(), counts=(1, 2))
        assert chooser.choose() == 1 and torch.get_num_threads() == 1  # two threads fight a busy core
        slow["count"] = 1  # the neighbour has gone: two threads are faster now
        assert chooser.choose() == 1  # not probed again within PROBE_SECONDS
        monkeypatch.setattr(threads, "PROBE_SECONDS", 0.0)
        assert chooser.choose() == 2 and torch.get_num_threads() == 2
        assert set(chooser.timings) == {1, 2} and chooser.timings[2] < chooser.timings[1]
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
