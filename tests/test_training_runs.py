"""Training runs (training/train.py, trainer.py): resumes as straight runs, stops, Ctrl-C, torchrun, --init-from."""

import json
import os
import shutil
import signal
import subprocess
import sys

import pytest
import torch

import training.checkpoints
from mdlm_hf import MDLM, CharTokenizer
from tests.conftest import REPO_ROOT
from tests.training_helpers import TINY_ARGS, run
from training import export, train


def test_resumed_run_continues_with_identical_state(text_file, tmp_path):
    straight = run(text_file, tmp_path / "straight", "--max-steps", "12", "--dropout", "0.1")
    first_half = run(text_file, tmp_path / "split", "--max-steps", "12", "--dropout", "0.1", "--stop-at-step", "6")
    assert first_half["step"] == 6 and not first_half["finished"]
    resumed = run(text_file, tmp_path / "split", "--max-steps", "12", "--dropout", "0.1", "--resume")
    assert resumed["step"] == 12 and resumed["finished"]
    for name, weight in straight["model"].state_dict().items():
        assert torch.equal(weight, resumed["model"].state_dict()[name]), name
    history = json.loads((tmp_path / "split" / "history.json").read_text())
    assert [h["step"] for h in history["val"]] == [5, 10, 12]


def test_resuming_a_copy_of_a_run_never_replaces_the_originals_export(text_file, tmp_path):
    original, copy = tmp_path / "run1", tmp_path / "r7"
    run(text_file, original, "--max-steps", "3", "--stop-at-step", "2", "--export-dir", str(original / "export"))
    shutil.copytree(original, copy)
    with pytest.raises(ValueError, match=f"this checkpoint was written in {original}, and that run exports to"):
        run(text_file, copy, "--resume")
    assert not (original / "export").exists()
    resumed = run(text_file, copy, "--resume", "--export-dir", str(copy / "export"))
    assert resumed["finished"] and (copy / "export" / "model.safetensors").is_file()
    assert not (original / "export").exists()


def test_torchrun_two_processes_end_with_identical_weights(text_file, tmp_path):
    script = tmp_path / "ddp_check.py"
    script.write_text(
        "import sys, os, json, types, torch\n"
        "from training import train\n"
        "calls, trackio = [], types.ModuleType('trackio')  # a fake trackio: which ranks log\n"
        "trackio.init, trackio.finish = lambda **kw: calls.append('init'), lambda: calls.append('finish')\n"
        "trackio.log = lambda metrics, step=None: calls.append('log')\n"
        "sys.modules['trackio'] = trackio\n"
        "summary = train.main(sys.argv[1:])\n"
        "rank_file = os.path.join(summary['out_dir'], f\"rank{os.environ['RANK']}.pt\")\n"
        "torch.save(summary['model'].state_dict(), rank_file)\n"
        "json.dump(calls, open(rank_file.replace('.pt', '.json'), 'w'))\n"
    )
    out = tmp_path / "ddp"
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_port",
        "29517",
        str(script),
        "--data",
        str(text_file),
        "--out-dir",
        str(out),
        *TINY_ARGS,
        "--max-steps",
        "6",
        "--tracker",
        "trackio",
    ]
    environment = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}  # the script lives outside the repository
    subprocess.run(command, check=True, capture_output=True, timeout=300, env=environment)
    rank0, rank1 = torch.load(out / "rank0.pt"), torch.load(out / "rank1.pt")
    assert all(torch.equal(rank0[k], rank1[k]) for k in rank0)
    checkpoint = torch.load(out / "ckpt.pt", weights_only=True)
    assert checkpoint["step"] == 6 and checkpoint["tokens_seen"] == 6 * 2 * 4 * 32  # both ranks' batches count
    assert all(torch.equal(checkpoint["model"][k], rank0[k]) for k in rank0)
    assert len(checkpoint["rng"]) == 2 and not torch.equal(checkpoint["rng"][0]["data"], checkpoint["rng"][1]["data"])
    logged = [json.loads((out / f"rank{rank}.json").read_text()) for rank in (0, 1)]
    assert logged[0][0] == "init" and "log" in logged[0] and logged[0][-1] == "finish" and logged[1] == []


def test_resume_keeps_the_runs_own_settings(text_file, tmp_path):
    out = tmp_path / "run"
    run(text_file, out, "--max-steps", "8", "--batch-size", "3", "--loss-weighting", "uniform", "--stop-at-step", "4")
    # resumed with only --data, --out-dir and --resume (TINY_ARGS leave batch size and loss alone)
    summary = train.main(["--data", str(text_file), "--out-dir", str(out), "--resume"])
    checkpoint = torch.load(out / "ckpt.pt", weights_only=True)
    assert summary["step"] == 8 and summary["tokens_seen"] == 8 * 3 * 32
    assert checkpoint["args"]["batch_size"] == 3 and checkpoint["args"]["loss_weighting"] == "uniform"
    with pytest.raises(ValueError, match="--batch-size 5 \\(the run has 3\\)"):
        train.main(["--data", str(text_file), "--out-dir", str(out), "--resume", "--batch-size", "5"])
    longer = train.main(["--data", str(text_file), "--out-dir", str(out), "--resume", "--max-steps", "10"])
    assert longer["step"] == 10  # the schedule may grow on resume


def test_ctrl_c_resume_is_bit_identical_to_an_uninterrupted_run(text_file, tmp_path):
    settings = [*TINY_ARGS, "--max-steps", "300", "--eval-interval", "1000", "--dropout", "0.1"]
    straight = run(
        text_file, tmp_path / "straight", "--max-steps", "300", "--eval-interval", "1000", "--dropout", "0.1"
    )
    out = tmp_path / "interrupted"
    command = [sys.executable, "-m", "training.train", "--data", str(text_file), "--out-dir", str(out), *settings]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=REPO_ROOT, text=True)
    try:
        # the lines before the loop (tokenizing, parameters...) end with "starting at step 0"
        assert any("starting at step 0" in process.stdout.readline() for _ in range(5))
        # the progress bar has moved: somewhere in the middle of a step (a fixed sleep can outlast 300 tiny steps)
        process.stdout.read(200)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0
    finally:
        process.kill()
    stopped_at = torch.load(out / "ckpt.pt", weights_only=True)["step"]
    assert 0 < stopped_at < 300
    resumed = train.main(["--data", str(text_file), "--out-dir", str(out), "--resume"])
    assert resumed["step"] == 300
    for name, weight in straight["model"].state_dict().items():
        assert torch.equal(weight, resumed["model"].state_dict()[name]), name


def test_max_minutes_is_this_invocations_budget_and_a_skipped_export_says_so(text_file, tmp_path, capsys):
    out, export_dir = tmp_path / "run", tmp_path / "export"
    summary = run(text_file, out, "--max-steps", "6", "--stop-at-step", "2", "--export-dir", str(export_dir))
    assert not summary["finished"] and not export_dir.exists()
    assert "export skipped: the run stopped at step 2 of 6; resume to finish and export" in capsys.readouterr().out
    # a run that has already trained for a long time gets the full budget on resume
    checkpoint = torch.load(out / "ckpt.pt", weights_only=True)
    checkpoint["wall_time"] = 10_000.0
    training.checkpoints.save_checkpoint(out / "ckpt.pt", checkpoint)
    resumed = run(text_file, out, "--resume", "--max-steps", "4", "--max-minutes", "2")
    assert resumed["step"] == 4 and resumed["wall_time"] > 10_000  # the run's wall time still adds up
    stopped = run(text_file, out, "--resume", "--max-steps", "6", "--max-minutes", "1e-9")
    assert stopped["step"] == 5 and "stopping at step 5 (--max-minutes)" in capsys.readouterr().out
    with pytest.raises(ValueError, match="--resume: --max-steps 1 is below --warmup-steps 2"):
        run(text_file, out, "--resume", "--max-steps", "1")


def test_one_ctrl_c_delivered_twice_saves_and_a_later_second_one_quits(text_file, tmp_path, monkeypatch):
    # the handler SIGINT had before: Python's default alone, or another's where an earlier test's server set one
    # (the test asserted Python's default and failed after such a test, passing alone)
    before = signal.getsignal(signal.SIGINT)
    stop = train.StopRequest()
    try:
        stop._handle(signal.SIGINT, None)
        stop._handle(signal.SIGINT, None)  # torchrun forwards the terminal's signal: the same request
        assert stop.requested
        stop.requested_at -= train.StopRequest.DUPLICATE_SECONDS
        with pytest.raises(KeyboardInterrupt):
            stop._handle(signal.SIGINT, None)
    finally:
        stop.close()
    assert signal.getsignal(signal.SIGINT) is before

    def interrupted(self, stop, deadline):
        raise KeyboardInterrupt

    monkeypatch.setattr(train.Trainer, "loop", interrupted)
    with pytest.raises(SystemExit) as stopped:
        train.cli(["--data", str(text_file), "--out-dir", str(tmp_path / "run"), *TINY_ARGS])
    assert str(stopped.value).startswith("interrupted: quit without saving")
    assert signal.getsignal(signal.SIGINT) is before  # the handlers are given back


def test_a_stop_on_the_last_step_still_exports(text_file, tmp_path):
    summary = run(
        text_file, tmp_path / "run", "--max-steps", "4", "--stop-at-step", "4", "--export-dir", str(tmp_path / "x")
    )
    assert summary["finished"] and (tmp_path / "x" / "model.safetensors").is_file()


def test_resuming_on_another_text_is_refused_unless_asked_for(text_file, tmp_path, tiny_text):
    # a resume with other --data (same characters) went on with the new text's splits
    run(text_file, tmp_path / "run", "--max-steps", "2")
    other = tmp_path / "other.txt"
    other.write_text((tiny_text * 3)[::-1])  # the same characters, another text
    with pytest.raises(ValueError, match=f"--resume: the run trained on {text_file}, but --data gives {other}"):
        run(other, tmp_path / "run", "--resume", "--max-steps", "4")
    run(text_file, tmp_path / "run", "--resume", "--max-steps", "3")  # the same text: goes on
    summary = run(other, tmp_path / "run", "--resume", "--max-steps", "4", "--new-data")  # asked for: goes on
    assert summary["step"] == 4


def test_under_torchrun_the_error_is_the_first_line_not_a_peers_traceback(tmp_path):
    # rank 1's gloo traceback ("Connection closed by peer") buried rank 0's one-line error
    short = tmp_path / "short.txt"
    short.write_text("just a few words here\n")
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29519"]
    command += ["-m", "training.train", "--data", str(short), "--out-dir", str(tmp_path / "run"), *TINY_ARGS]
    environment = {**os.environ, "OMP_NUM_THREADS": "1"}  # torchrun prints a warning before the run without it
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=REPO_ROOT, env=environment)
    ours = [line for line in result.stderr.splitlines() if line.startswith(("error:", "rank ", "[rank"))]
    assert result.returncode != 0 and ours[0].startswith("error: text of 22 characters is too short for --block-size")
    assert ours[1:] == ["rank 1: stopped because another process of the run failed (above)"]
    assert "Connection closed by peer" not in result.stderr


SHAPE_FREE_ARGS = TINY_ARGS[TINY_ARGS.index("--batch-size") :]  # TINY_ARGS without the model's shape


def test_init_from_fine_tunes_a_saved_model_with_its_own_options(text_file, tmp_path, tiny_text):
    torch.manual_seed(0)
    saved = MDLM(CharTokenizer.from_text(tiny_text).vocab, n_layer=1, n_head=2, n_embd=32, block_size=32)
    saved.save_pretrained(tmp_path / "saved")
    flags = ["--data", str(text_file), "--init-from", str(tmp_path / "saved"), *SHAPE_FREE_ARGS]
    # a learning rate too small to move the weights: the run starts from the saved ones, with the saved shape
    still = train.main(
        [*flags, "--out-dir", str(tmp_path / "still"), "--max-steps", "2", "--t-min", "0.05"]
        + ["--lr", "1e-12", "--min-lr", "1e-12", "--muon-lr", "1e-12", "--weight-decay", "0"]
    )
    assert still["model"]._hub_mixin_config == saved._hub_mixin_config
    for name, weight in saved.state_dict().items():
        assert torch.allclose(still["model"].state_dict()[name], weight, atol=1e-6), name
    moved = train.main([*flags, "--out-dir", str(tmp_path / "moved"), "--max-steps", "4", "--t-min", "0.01"])
    assert not torch.equal(moved["model"].state_dict()["lm_head.weight"], saved.state_dict()["lm_head.weight"])
    resumed = train.main([*flags, "--out-dir", str(tmp_path / "moved"), "--max-steps", "6", "--resume"])
    assert resumed["step"] == 6  # a resume reads the run's own checkpoint, not --init-from's weights again
    export.main(["--run-dir", str(tmp_path / "moved"), "--data", str(text_file), "--export-dir", str(tmp_path / "ex")])
    card = (tmp_path / "ex" / "README.md").read_text()
    assert "  1. steps and characters not recorded, text not recorded" in card  # a notebook's save: no metrics.json
    assert "  2. 6 steps, 768 characters of" in card and f"from {tmp_path / 'saved'}" in card
    assert "t_min=0.01" in card


def test_init_from_errors_are_one_line(text_file, tmp_path, tiny_text):
    flags = ["--data", str(text_file), "--out-dir", str(tmp_path / "run"), *SHAPE_FREE_ARGS, "--max-steps", "2"]
    with pytest.raises(ValueError, match="--init-from .*nowhere: no mdlm_hf model there"):
        train.main([*flags, "--init-from", str(tmp_path / "nowhere")])
    twin = MDLM(CharTokenizer.from_text(tiny_text).vocab, n_layer=1, n_head=2, n_embd=32, block_size=32, objective="ar")
    twin.save_pretrained(tmp_path / "twin")
    with pytest.raises(ValueError, match="--init-from: --t-min is not an option of --objective ar"):
        train.main([*flags, "--init-from", str(tmp_path / "twin"), "--t-min", "0.01"])
