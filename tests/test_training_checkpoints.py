"""Checkpoints (training/checkpoints.py): atomic writes, kills and full disks, and bad checkpoints in one line."""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import training.checkpoints
import training.trainer
from tests.conftest import REPO_ROOT
from tests.training_helpers import TINY_ARGS, export_cli, run
from training import export, run_options, train
from training.atomic import atomic_write_bytes


def test_killed_write_keeps_the_previous_file(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.pt"
    atomic_write_bytes(path, b"good checkpoint")

    def crash(fd):
        raise OSError("killed mid-write")

    monkeypatch.setattr(os, "fsync", crash)
    with pytest.raises(OSError):
        atomic_write_bytes(path, b"half a checkpo")
    assert path.read_bytes() == b"good checkpoint"
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt.pt"]  # no temporary file left behind


def test_sigkill_during_training_leaves_a_loadable_checkpoint(text_file, tmp_path):
    out = tmp_path / "run"
    command = [
        sys.executable,
        "-m",
        "training.train",
        "--data",
        str(text_file),
        "--out-dir",
        str(out),
        *TINY_ARGS,
        "--max-steps",
        "100000",
        "--eval-interval",
        "3",
    ]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO_ROOT)
    history = out / "history.json"
    try:
        deadline = time.monotonic() + 120
        # kill it once a few checkpoints exist: the next write may be under way at any moment
        while time.monotonic() < deadline and process.poll() is None:
            if history.is_file() and len(json.loads(history.read_text())["val"]) >= 3:
                break
            time.sleep(0.05)
    finally:
        process.kill()
        process.wait()
    checkpoint = torch.load(out / "ckpt.pt", weights_only=True)  # the last complete write, never a torn one
    assert checkpoint["step"] >= 9
    torch.load(out / "best.pt", weights_only=True)
    resumed = run(text_file, out, "--max-steps", str(checkpoint["step"] + 1), "--resume")
    assert resumed["step"] == checkpoint["step"] + 1
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]  # a killed write's leftovers are cleaned up


@pytest.mark.parametrize("content", [b"", b"not a checkpoint", None])
def test_unreadable_or_unsafe_checkpoints_give_clear_errors(text_file, tmp_path, content):
    out = tmp_path / "run"
    out.mkdir()
    if content is None:  # a pickle that would run code when loaded with weights_only=False
        import os as evil

        torch.save({"model_config": {}, "model": evil.system}, out / "ckpt.pt")
    else:
        (out / "ckpt.pt").write_bytes(content)
    with pytest.raises(ValueError, match="not a readable mdlm_hf checkpoint") as refused:
        run(text_file, out, "--resume")
    # torch's own message ran to six lines, with terminal colour codes, and advised loading it with weights_only=False
    assert (
        "\n" not in str(refused.value) and "weights_only" not in str(refused.value) and "\x1b" not in str(refused.value)
    )


FOREIGN_CHECKPOINTS = {
    "no model_config": {"state_dict": {"w": torch.zeros(2)}},
    "no optimizer state": {"model_config": {"vocab": "ab", "n_layer": 1, "n_head": 2, "n_embd": 8}, "model": {}},
    "another program's config": {
        "model_config": {"layers": 3},
        "model": {},
        **{k: [] for k in ("optimizers", "step", "tokens_seen", "wall_time", "best_val", "history", "rng")},
    },
}


@pytest.mark.parametrize("kind", FOREIGN_CHECKPOINTS)
def test_foreign_checkpoints_give_one_clear_error_in_resume_and_export(text_file, tmp_path, kind):
    out = tmp_path / "run"
    out.mkdir()
    torch.save(FOREIGN_CHECKPOINTS[kind], out / "ckpt.pt")
    with pytest.raises(ValueError, match="ckpt.pt") as resumed:
        run(text_file, out, "--resume")
    with pytest.raises(ValueError, match="ckpt.pt") as exported:
        export.export_run(out, tmp_path / "export", text_file)
    for error in (resumed.value, exported.value):
        assert "\n" not in str(error)
    command = ["--run-dir", str(out), "--export-dir", str(tmp_path / "export"), "--data", str(text_file)]
    result = subprocess.run(
        [sys.executable, "-m", "training.export", *command], capture_output=True, text=True, cwd=REPO_ROOT
    )
    assert result.returncode == 1 and result.stderr.count("\n") == 1 and result.stderr.startswith("error: ")


def test_checkpoints_are_saved_every_save_minutes(text_file, tmp_path, monkeypatch):
    saved_at, written = [], []
    save, save_checkpoint = train.Trainer.save, training.trainer.save_checkpoint

    def recording_save(self):
        saved_at.append(self.progress.step)
        save(self)

    def recording_write(path, payload):
        if path.name == "ckpt.pt":
            written.append(payload["step"])
        save_checkpoint(path, payload)

    monkeypatch.setattr(train.Trainer, "save", recording_save)
    monkeypatch.setattr(training.trainer, "save_checkpoint", recording_write)
    run(text_file, tmp_path / "run", "--max-steps", "4", "--eval-interval", "1000", "--save-minutes", "1e-9")
    assert saved_at == [1, 2, 3, 4, 4]  # every step here; at the end, the evaluation's save and the final one
    assert written == [1, 2, 3, 4]  # ... which finds the last step already on disk
    saved_at.clear()
    # a checkpoint written before --save-minutes and --private existed resumes, with either typed
    checkpoint = torch.load(tmp_path / "run" / "ckpt.pt", weights_only=True)
    del checkpoint["args"]["save_minutes"], checkpoint["args"]["private"]
    training.checkpoints.save_checkpoint(tmp_path / "run" / "ckpt.pt", checkpoint)
    resume = ["--resume", "--max-steps", "6", "--eval-interval", "1000", "--save-minutes", "0"]  # a resumable change
    run(text_file, tmp_path / "run", *resume)
    assert saved_at == [6, 6]
    assert "save_minutes" in run_options.RESUMABLE_CHANGES


def test_a_full_disk_keeps_the_previous_checkpoint_and_says_so_in_one_line(text_file, tmp_path, monkeypatch):
    out = tmp_path / "run"
    run(text_file, out, "--max-steps", "4", "--stop-at-step", "2")

    def disk_full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(SystemExit) as stopped:
        train.cli(["--data", str(text_file), "--out-dir", str(out), "--resume"])
    message = str(stopped.value)
    assert message.startswith("error: could not write") and "No space left on device" in message
    assert "\n" not in message and "the previous" in message
    monkeypatch.undo()
    assert torch.load(out / "ckpt.pt", weights_only=True)["step"] == 2
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]


def test_a_checkpoint_of_the_older_format_says_it_cannot_be_resumed(text_file, tmp_path):
    run(text_file, tmp_path / "old", "--max-steps", "4")
    checkpoint = torch.load(tmp_path / "old" / "ckpt.pt", weights_only=True)
    checkpoint["optimizer"] = checkpoint.pop("optimizers")[-1]  # one AdamW state, as before Muon and EMA
    training.checkpoints.save_checkpoint(tmp_path / "old" / "ckpt.pt", checkpoint)
    with pytest.raises(ValueError, match="older mdlm_hf .* cannot be resumed; its weights still export"):
        train.main(["--data", str(text_file), "--out-dir", str(tmp_path / "old"), "--resume", "--max-steps", "6"])


def test_atomic_writes_keep_a_files_mode_and_give_a_new_one_the_umasks(tmp_path):
    from training.atomic import atomic_write_bytes

    path = tmp_path / "card.md"
    atomic_write_bytes(path, b"new")
    assert path.stat().st_mode & 0o777 == 0o666 & ~_umask()
    path.chmod(0o640)
    atomic_write_bytes(path, b"again")
    assert path.read_bytes() == b"again" and path.stat().st_mode & 0o777 == 0o640


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def flip_bytes(path: Path, record_size: int | None = None) -> str:
    """Flips 16 bytes in the middle of a tensor record of a zip checkpoint (the largest, or one of `record_size`
    bytes), as a disk might; returns the record's name."""
    import zipfile

    with zipfile.ZipFile(path) as archive:
        records = [i for i in archive.infolist() if "/data/" in i.filename and not i.filename.endswith("id")]
    if record_size is not None:
        records = [i for i in records if i.file_size == record_size]
    info = max(records, key=lambda i: i.file_size)
    payload = bytearray(path.read_bytes())
    header = payload[info.header_offset : info.header_offset + 30]
    name_length, extra_length = int.from_bytes(header[26:28], "little"), int.from_bytes(header[28:30], "little")
    start = info.header_offset + 30 + name_length + extra_length + info.file_size // 2
    payload[start : start + 16] = bytes(b ^ 0xFF for b in payload[start : start + 16])
    path.write_bytes(bytes(payload))
    return info.filename


@pytest.mark.parametrize("record", ["weights", "rng"])
def test_a_checkpoint_damaged_on_disk_is_refused_in_one_line(text_file, tmp_path, record):
    out = tmp_path / "run"
    run(text_file, out, "--max-steps", "4", "--stop-at-step", "2")
    rng_size = torch.get_rng_state().numel()  # the random streams' states, stored as byte tensors of this size
    name = flip_bytes(out / "ckpt.pt", rng_size if record == "rng" else None)
    with pytest.raises(SystemExit) as stopped:
        train.cli(["--data", str(text_file), "--out-dir", str(out), "--resume"])
    message = str(stopped.value)
    assert message.startswith(f"error: {out / 'ckpt.pt'} is damaged: its record {name} does not match its checksum")
    assert "\n" not in message
    result = export_cli("--run-dir", out, "--export-dir", tmp_path / "export", "--data", text_file)
    assert result.returncode == 1 and result.stderr.count("\n") == 1 and "is damaged" in result.stderr


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("step", "three", "its step is malformed ('three', expected a whole number >= 0)"),
        ("history", None, "its history is malformed (None, expected a dict of train and val lists)"),
        ("args", "nonsense", "its args is malformed ('nonsense', expected a dict of the run's flags)"),
        ("best_val", "low", "its best_val is malformed"),
        ("rng", {"data": 1}, "its rng is malformed"),
        # formerly a traceback (a tensor), or accepted (none; a step past int64)
        ("rng", [torch.zeros(3)], "its rng is malformed"),
        ("rng", [], "its rng is malformed ([], expected a list of random-number states)"),
        ("step", 2**70, "its step is malformed (1180591620717411303424, expected a whole number >= 0)"),
    ],
)
def test_a_checkpoint_field_that_is_malformed_is_named_in_one_line(text_file, tmp_path, field, value, says):
    out = tmp_path / "run"
    run(text_file, out, "--max-steps", "4", "--stop-at-step", "2")
    checkpoint = torch.load(out / "ckpt.pt", weights_only=True)
    checkpoint[field] = value
    torch.save(checkpoint, out / "ckpt.pt")
    with pytest.raises(SystemExit) as stopped:
        train.cli(["--data", str(text_file), "--out-dir", str(out), "--resume"])
    message = str(stopped.value)
    assert message.startswith(f"error: {out / 'ckpt.pt'}: {says}") and "\n" not in message
    with pytest.raises(ValueError, match=re.escape(says)):
        export.export_run(out, tmp_path / "export", text_file)


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("args", {"lr": "x"}, "its args are malformed (--lr is 'x', not a number)"),
        ("args", {"max_steps": "x"}, "its args are malformed (--max-steps is 'x', not a whole number)"),
        ("optimizers", ["x", "y"], "its optimizers is malformed (['x', 'y'], expected a list of optimizer states)"),
        # formerly tracebacks (data, train_extra) or accepted (objective)
        ("args", {"data": [123]}, "its args are malformed (--data is [123], not a list of file names)"),
        ("args", {"train_extra": 5}, "its args are malformed (--train-extra is 5, not a list of file names)"),
        ("args", {"objective": "xyz"}, "its args are malformed (--objective is 'xyz', not one of diffusion, ar)"),
    ],
)
def test_a_checkpoint_setting_of_the_wrong_type_is_named_in_one_line(text_file, tmp_path, field, value, says):
    out = tmp_path / "run"
    run(text_file, out, "--max-steps", "4", "--stop-at-step", "2")
    checkpoint = torch.load(out / "ckpt.pt", weights_only=True)
    checkpoint[field] = {**checkpoint[field], **value} if isinstance(value, dict) else value
    torch.save(checkpoint, out / "ckpt.pt")
    with pytest.raises(SystemExit) as stopped:
        train.cli(["--data", str(text_file), "--out-dir", str(out), "--resume"])
    message = str(stopped.value)
    assert message.startswith(f"error: {out / 'ckpt.pt'}: {says}") and "\n" not in message
