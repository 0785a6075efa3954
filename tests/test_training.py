import ast
import dataclasses
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import types
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import training.card
import training.checkpoints
import training.processes
import training.trainer
import training.weights
from mdlm_hf import MDLM, CharTokenizer
from mdlm_hf.data import atomic_write_bytes, read_text, split_text
from training import export, run_options, train
from training.checkpoints import RunError
from training.ema import EMA
from training.optimizers import build_optimizers, parameter_groups

REPO_ROOT = Path(__file__).resolve().parent.parent
TINY_ARGS = [
    "--n-layer",
    "1",
    "--n-head",
    "2",
    "--n-embd",
    "32",
    "--block-size",
    "32",
    "--batch-size",
    "4",
    "--warmup-steps",
    "2",
    "--eval-interval",
    "5",
    "--eval-chars",
    "256",
    "--log-interval",
    "2",
    "--dtype",
    "float32",
    "--threads",
    "1",
]


@pytest.fixture
def text_file(tmp_path, tiny_text):
    path = tmp_path / "text.txt"
    path.write_text(tiny_text * 3)
    return path


def run(text_file, out_dir, *extra):
    return train.main(["--data", str(text_file), "--out-dir", str(out_dir), *TINY_ARGS, *extra])


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


def test_a_new_run_refuses_an_out_dir_that_holds_a_run(text_file, tmp_path):
    # a second run without --resume overwrote the first's checkpoint, best weights and history, and said nothing
    run(text_file, tmp_path / "run", "--max-steps", "3")
    before = {name: (tmp_path / "run" / name).read_bytes() for name in ("ckpt.pt", "best.pt", "history.json")}
    with pytest.raises(ValueError) as refused:
        run(text_file, tmp_path / "run", "--max-steps", "2", "--n-embd", "64")
    assert str(refused.value) == (
        f"--out-dir {tmp_path / 'run'} already holds a run (ckpt.pt): pass --resume to continue it, or give another "
        "--out-dir"
    )
    assert {name: (tmp_path / "run" / name).read_bytes() for name in before} == before


def test_a_new_run_refuses_a_folder_of_a_users_files_and_reuses_its_own(text_file, tmp_path):
    # formerly: --out-dir of a user's folder deleted its .draft.tmp and replaced its train.bin and history.json
    mine = tmp_path / "mine"
    mine.mkdir()
    files = {".draft.tmp": b"notes", "train.bin": b"my data", "history.json": b"{}"}
    for name, data in files.items():
        (mine / name).write_bytes(data)
    with pytest.raises(ValueError, match=r"holds files a training run did not make \(\.draft\.tmp, history\.json"):
        run(text_file, mine, "--max-steps", "2")
    assert {name: (mine / name).read_bytes() for name in files} == files
    killed = tmp_path / "killed"  # a run killed before its first checkpoint: its own folder, used again
    run(text_file, killed, "--max-steps", "2")
    (killed / "ckpt.pt").unlink()
    assert run(text_file, killed, "--max-steps", "3")["step"] == 3


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


def test_export_round_trips_and_push_is_intercepted(text_file, tmp_path, monkeypatch):
    export_dir = tmp_path / "export"
    summary = run(text_file, tmp_path / "run", "--max-steps", "6", "--export-dir", str(export_dir))
    files = sorted(p.name for p in export_dir.iterdir())
    assert files == sorted(export.EXPORT_FILES)
    loaded = MDLM.from_pretrained(export_dir)
    tokens = torch.randint(0, loaded.mask_id, (1, 20))
    best = torch.load(tmp_path / "run" / "best.pt", weights_only=True)
    reference = MDLM(**best["model_config"])
    reference.load_state_dict(best["model"])
    metrics = json.loads((export_dir / "metrics.json").read_text())
    if metrics["weights_dtype"] == "bfloat16":  # shipped as bf16 because that cost (almost) nothing
        reference = training.weights.bf16_rounded(reference)
    assert torch.equal(loaded(tokens), reference.eval()(tokens))
    card = (export_dir / "README.md").read_text()
    assert f"{metrics['val_nelbo_nats_per_char']:.4f} nats/char" in card and "## Samples" in card
    assert summary["finished"]

    calls = []

    class FakeApi:
        def __init__(self, token=None):
            pass

        def create_repo(self, repo_id, **kwargs):
            calls.append(("create_repo", repo_id, kwargs))

        def upload_folder(self, folder_path, repo_id, **kwargs):
            calls.append(("upload_folder", repo_id, sorted(p.name for p in Path(folder_path).iterdir())))
            return "https://huggingface.co/me/model/commit/abc"

    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    url = export.push_to_hub(export_dir, "me/model")
    assert url.endswith("abc")
    assert calls[0][:2] == ("create_repo", "me/model") and calls[0][2]["exist_ok"]
    assert calls[1] == ("upload_folder", "me/model", files)


def test_export_carries_the_recipe_and_the_images_it_links(text_file, tmp_path):
    run(text_file, tmp_path / "run", "--max-steps", "2")
    (tmp_path / "plots").mkdir()
    (tmp_path / "plots" / "study.png").write_bytes(b"\x89PNG fake")
    recipe = tmp_path / "notes" / "RECIPE.md"
    recipe.parent.mkdir()
    recipe.write_text("## Recipe\n![the study](../plots/study.png) and ![web](https://example.org/a.png)\n")
    export.export_run(tmp_path / "run", tmp_path / "export", text_file, recipe_path=recipe, recipe_root=tmp_path)
    card = (tmp_path / "export" / "README.md").read_text()
    assert "![the study](study.png)" in card and "![web](https://example.org/a.png)" in card
    assert (tmp_path / "export" / "study.png").read_bytes() == b"\x89PNG fake"
    recipe.write_text("![gone](../plots/missing.png)")
    with pytest.raises(ValueError, match="missing.png, which does not exist"):
        export.export_run(tmp_path / "run", tmp_path / "export2", text_file, recipe_path=recipe, recipe_root=tmp_path)
    assert not (tmp_path / "export2").exists()


def test_bad_arguments_give_clear_errors(tmp_path, text_file):
    with pytest.raises(ValueError, match="does not exist"):
        run(tmp_path / "missing.txt", tmp_path / "a", "--max-steps", "2")
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n")
    with pytest.raises(ValueError, match="is empty"):
        run(empty, tmp_path / "b", "--max-steps", "2")
    short = tmp_path / "short.txt"
    short.write_text("just a few words")
    with pytest.raises(ValueError, match="too short for --block-size"):
        run(short, tmp_path / "c", "--max-steps", "2")
    with pytest.raises(ValueError, match="no checkpoint"):
        run(text_file, tmp_path / "d", "--resume")
    with pytest.raises(SystemExit):
        run(text_file, tmp_path / "e", "--batch-size", "0")
    result = subprocess.run(
        [sys.executable, "-m", "training.train", "--data", str(tmp_path / "nope")],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )
    assert result.returncode != 0 and result.stderr.strip().splitlines()[-1].startswith("error: training text")


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


@pytest.mark.parametrize("optimizer", ["adamw", "muon"])
def test_optimizer_groups_cover_every_parameter_exactly_once(optimizer):
    model = MDLM("abcdef", n_layer=2, n_head=2, n_embd=32, block_size=16, norm="rmsnorm", qk_norm=True)
    groups = parameter_groups(model)
    assert groups["matrices"] and groups["embeddings"] and groups["vectors"]
    args, _ = train.parse_args(["--optimizer", optimizer])
    optimizers = build_optimizers(model, args)
    in_optimizers = [p for o in optimizers for g in o.param_groups for p in g["params"]]
    assert len(in_optimizers) == len({id(p) for p in in_optimizers}) == len(list(model.parameters()))
    assert {id(p) for p in in_optimizers} == {id(p) for p in model.parameters()}
    if optimizer == "muon":
        assert isinstance(optimizers[0], torch.optim.Muon)
        assert all(p.dim() == 2 for g in optimizers[0].param_groups for p in g["params"])


def test_ema_averages_and_ramps_up():
    model = torch.nn.Linear(2, 2, bias=False)
    ema = EMA(model, decay=0.9)
    with torch.no_grad():
        model.weight.fill_(1.0)
    before = ema.shadow[0].clone()
    ema.update(model)  # first update: decay min(0.9, 2/11)
    assert torch.allclose(ema.shadow[0], before + (1 - 2 / 11) * (1.0 - before))
    for _ in range(200):
        ema.update(model)
    assert torch.allclose(ema.shadow[0], torch.ones(2, 2), atol=1e-6)
    with pytest.raises(ValueError, match="decay"):
        EMA(model, decay=1.0)


def test_ema_weights_round_trip_through_checkpoint_and_export(text_file, tmp_path):
    settings = ["--max-steps", "10", "--ema", "0.9", "--optimizer", "muon"]
    straight = run(text_file, tmp_path / "straight", *settings)
    run(text_file, tmp_path / "split", *settings, "--stop-at-step", "4")
    resumed = run(text_file, tmp_path / "split", "--resume")  # the run's own settings: EMA and Muon included
    a = torch.load(tmp_path / "straight" / "ckpt.pt", weights_only=True)
    b = torch.load(tmp_path / "split" / "ckpt.pt", weights_only=True)
    assert a["ema"]["num_updates"] == b["ema"]["num_updates"] == 10
    for name, shadow in a["ema"]["shadow"].items():
        assert torch.equal(shadow, b["ema"]["shadow"][name]), name
    for name, weight in straight["model"].state_dict().items():
        assert torch.equal(weight, resumed["model"].state_dict()[name]), name
    assert not torch.equal(a["ema"]["shadow"]["blocks.0.mlp.fc.weight"], a["model"]["blocks.0.mlp.fc.weight"])
    history = json.loads((tmp_path / "split" / "history.json").read_text())
    assert all("nelbo_ema" in h for h in history["val"])
    # best.pt holds whichever of the two scored better at its step
    best = torch.load(tmp_path / "split" / "best.pt", weights_only=True)
    record = next(h for h in history["val"] if h["step"] == best["step"])
    assert best["val_nelbo"] == min(record["nelbo"], record["nelbo_ema"])
    assert best["weights"] == ("ema" if record["nelbo_ema"] < record["nelbo"] else "raw")

    # the export writes whatever best.pt holds; give it the averaged weights and read them back
    ema = EMA(straight["model"], 0.9)
    ema.load_state_dict(a["ema"])
    best = torch.load(tmp_path / "split" / "best.pt", weights_only=True)
    best.update(weights="ema", model=ema.weights(straight["model"]))
    training.checkpoints.save_checkpoint(tmp_path / "split" / "best.pt", best)
    export.export_run(tmp_path / "split", tmp_path / "export", text_file, weights_dtype="float32")
    loaded = MDLM.from_pretrained(tmp_path / "export")
    for name, shadow in a["ema"]["shadow"].items():
        assert torch.equal(loaded.state_dict()[name], shadow), name
    assert loaded.lm_head.weight is loaded.token_embedding.weight


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


def test_export_stores_bf16_weights_when_they_cost_almost_nothing(text_file, tmp_path):
    import safetensors.torch

    run(text_file, tmp_path / "run", "--max-steps", "3")
    for dtype in ("bfloat16", "auto"):
        report = export.export_run(tmp_path / "run", tmp_path / dtype, text_file, weights_dtype=dtype)
        stored = safetensors.torch.load_file(tmp_path / dtype / "model.safetensors")
        assert {t.dtype for t in stored.values()} == {getattr(torch, report["weights_dtype"])}
    metrics = json.loads((tmp_path / "auto" / "metrics.json").read_text())
    cost = metrics["nelbo_bfloat16_weights"] - metrics["nelbo_float32_weights"]
    assert metrics["weights_dtype"] == ("bfloat16" if cost <= training.weights.BF16_TOLERANCE else "float32")
    assert metrics["val_nelbo_nats_per_char"] == metrics[f"nelbo_{metrics['weights_dtype']}_weights"]
    # the bf16 file loads (upcast to fp32) as exactly the rounded weights the metrics were measured on
    best = torch.load(tmp_path / "run" / "best.pt", weights_only=True)
    original = MDLM(**best["model_config"])
    original.load_state_dict(best["model"])
    loaded = MDLM.from_pretrained(tmp_path / "bfloat16")
    for name, weight in training.weights.bf16_rounded(original).state_dict().items():
        assert loaded.state_dict()[name].dtype == torch.float32
        assert torch.equal(loaded.state_dict()[name], weight), name
    assert "stored as bfloat16" in (tmp_path / "bfloat16" / "README.md").read_text()
    with pytest.raises(ValueError, match="weights dtype"):
        training.weights.choose_weights(original, "abc", "float16")


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


def test_export_refuses_directories_it_would_destroy(text_file, tmp_path):
    out = tmp_path / "run"
    run(text_file, out, "--max-steps", "2")
    run_files = sorted(p.name for p in out.iterdir())
    with pytest.raises(ValueError, match="is the run's directory or holds it"):
        export.export_run(out, out, text_file)
    with pytest.raises(ValueError, match="is the run's directory or holds it"):
        export.export_run(out, tmp_path, text_file)
    users = tmp_path / "mine"
    users.mkdir()
    (users / "notes.txt").write_text("a user's file")
    with pytest.raises(ValueError, match="not empty and not an earlier export \\(notes.txt\\)"):
        export.export_run(out, users, text_file)
    # train refuses before it trains, so a long run never ends in a refused export
    with pytest.raises(ValueError, match="is the run's directory"):
        run(text_file, tmp_path / "other", "--max-steps", "2", "--export-dir", str(tmp_path / "other"))
    with pytest.raises(ValueError, match="not an earlier export"):
        run(text_file, tmp_path / "third", "--max-steps", "2", "--export-dir", str(users))
    assert not (tmp_path / "third").exists()
    assert sorted(p.name for p in out.iterdir()) == run_files and (users / "notes.txt").read_text() == "a user's file"
    # a new directory, and then that export again, are fine
    (tmp_path / "study.png").write_bytes(b"\x89PNG fake")
    (tmp_path / "RECIPE.md").write_text("![study](study.png)")
    export.export_run(out, tmp_path / "export", text_file, weights_dtype="float32", recipe_path=tmp_path / "RECIPE.md")
    assert (tmp_path / "export" / "study.png").is_file()  # an image a recipe attached
    export.export_run(out, tmp_path / "export", text_file, weights_dtype="float32")
    assert sorted(p.name for p in (tmp_path / "export").iterdir()) == sorted(export.EXPORT_FILES)


def test_export_recovers_from_a_swap_killed_half_way(text_file, tmp_path):
    out, export_dir = tmp_path / "run", tmp_path / "export"
    run(text_file, out, "--max-steps", "2")
    export.export_run(out, export_dir, text_file, weights_dtype="float32")
    # killed after the new export was renamed into place, before the previous one was deleted
    leftover = tmp_path / ".export.old"
    shutil.copytree(export_dir, leftover)
    export.export_run(out, export_dir, text_file, weights_dtype="float32")
    assert not leftover.exists() and sorted(p.name for p in export_dir.iterdir()) == sorted(export.EXPORT_FILES)
    # killed between the two renames: only the previous export, under its temporary name
    export_dir.rename(leftover)
    export.export_run(out, export_dir, text_file, weights_dtype="float32")
    assert not leftover.exists() and MDLM.from_pretrained(export_dir)


def test_a_killed_exports_staging_is_cleaned_and_a_full_disk_is_one_line(text_file, tmp_path, monkeypatch):
    # each killed export left a hidden .NAME.xxxxxxxx folder (9 after 14 kills); a full disk printed a traceback
    out, export_dir = tmp_path / "run", tmp_path / "export"
    run(text_file, out, "--max-steps", "2")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    killed = tmp_path / (export.staging_prefix(export_dir, int(dead.stdout)) + "abcd1234")
    alive = tmp_path / (export.staging_prefix(export_dir, os.getpid()) + "efgh5678")  # an export running now
    for folder in (killed, alive):
        folder.mkdir()
        (folder / "model.safetensors").write_text("half")
    export.export_run(out, export_dir, text_file, weights_dtype="float32")
    assert not killed.exists() and alive.exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".export")) == [alive.name]

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(export, "save_word_list", full_disk)
    before = sorted(p.name for p in export_dir.iterdir())
    with pytest.raises(ValueError, match=r"^could not write the export beside .* \(No space left on device\)"):
        export.export_run(out, export_dir, text_file, weights_dtype="float32")
    assert sorted(p.name for p in export_dir.iterdir()) == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".export")) == [alive.name]


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


def test_recipe_attaches_only_images_beside_or_below_it(tmp_path):
    notes = tmp_path / "notes"
    (notes / "plots").mkdir(parents=True)
    (notes / "plots" / "study.png").write_bytes(b"\x89PNG fake")
    (tmp_path / "secret.txt").write_text("password")
    (tmp_path / "outside.png").write_bytes(b"\x89PNG fake")
    (notes / "disguised.png").symlink_to(tmp_path / "secret.txt")
    recipe = notes / "RECIPE.md"
    recipe.write_text("![study](plots/study.png)")
    text, images = export.recipe_with_images(recipe)
    assert text == "![study](study.png)" and images == [(notes / "plots" / "study.png").resolve()]
    for link, refusal in [
        ("/etc/passwd", "only images by a relative path"),
        ("../secret.txt", "only images \\("),
        ("../outside.png", "outside .*: only images beside or below it"),
        ("disguised.png", "only images \\("),
    ]:
        recipe.write_text(f"# Recipe\n![x]({link})\n")
        with pytest.raises(ValueError, match=refusal):
            export.recipe_with_images(recipe)
    recipe.write_text("![x](../outside.png)")
    assert export.recipe_with_images(recipe, image_root=tmp_path)[0] == "![x](outside.png)"


def test_private_push_from_train_and_export(tiny_model, text_file, tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(export, "export_run", lambda *args, **kwargs: calls.append(kwargs))
    repo = ["--export-dir", str(tmp_path / "export"), "--push-to-hub", "me/model", "--private"]
    run(text_file, tmp_path / "run", "--max-steps", "2", *repo)
    export.main(["--run-dir", str(tmp_path / "run"), "--data", str(text_file), *repo])
    assert [c["private"] for c in calls] == [True, True]
    with pytest.raises(SystemExit):
        train.parse_args(["--private"])  # nothing to push

    class FakeApi:
        public = {"me/public"}

        def __init__(self, token=None):
            pass

        def create_repo(self, repo_id, private=False, **kwargs):
            calls.append(("create_repo", repo_id, private))

        def repo_info(self, repo_id, **kwargs):
            return type("Info", (), {"private": repo_id not in self.public})

        def upload_folder(self, folder_path, repo_id, **kwargs):
            calls.append(("upload_folder", repo_id))
            return "https://huggingface.co/me/model/commit/abc"

    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    export_dir = tmp_path / "fake-export"
    tiny_model.save_pretrained(export_dir)
    calls.clear()
    export.push_to_hub(export_dir, "me/model", private=True)
    assert calls == [("create_repo", "me/model", True), ("upload_folder", "me/model")]
    with pytest.raises(RunError, match="me/public exists and is public"):
        export.push_to_hub(export_dir, "me/public", private=True)


def test_push_without_network_or_credentials_is_one_line(tiny_model, tmp_path, monkeypatch, capsys):
    class OfflineApi:
        def __init__(self, token=None):
            pass

        def create_repo(self, *args, **kwargs):
            raise ConnectionError("[Errno -2] Name or service not known\nmore detail")

    import huggingface_hub

    from training import push_to_hub

    monkeypatch.setattr(huggingface_hub, "HfApi", OfflineApi)
    tiny_model.save_pretrained(tmp_path)
    with pytest.raises(SystemExit) as stopped:
        push_to_hub.main([str(tmp_path), "me/model"])
    message = str(stopped.value)
    assert message.startswith("error: could not push to me/model (ConnectionError: [Errno -2]") and "\n" not in message
    assert "`hf auth login`" in message and "hf auth login" in push_to_hub.__doc__
    assert "huggingface-cli" not in push_to_hub.__doc__


class NoApi:
    """huggingface_hub.HfApi that fails the test if a push gets as far as the Hub."""

    def __init__(self, token=None):
        pytest.fail("the push reached the Hub")


def test_a_push_of_weights_that_do_not_load_is_refused_before_the_hub(tiny_model, tmp_path, monkeypatch):
    # a truncated model.safetensors was announced as pushing, and only the lack of network stopped the upload
    import huggingface_hub

    from training import push_to_hub

    monkeypatch.setattr(huggingface_hub, "HfApi", NoApi)
    tiny_model.save_pretrained(tmp_path)
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(SystemExit) as stopped:
        push_to_hub.main([str(tmp_path), "me/model"])
    message = str(stopped.value)
    assert message.startswith(f"error: {tmp_path} does not load as a model, so it is not pushed: ")
    assert "model.safetensors" in message and "\n" not in message


BAD_REPO = "bad repo id!!"
BAD_REPO_SAYS = f"{BAD_REPO!r} is not a Hub repo id: Repo id must use alphanumeric chars"


def test_a_bad_repo_id_is_refused_before_the_work(tiny_model, text_file, tmp_path, monkeypatch, capsys):
    # export and train checked it only when pushing, after all their work, and then advised `hf auth login`
    import huggingface_hub

    from training import push_to_hub

    monkeypatch.setattr(huggingface_hub, "HfApi", NoApi)
    tiny_model.save_pretrained(tmp_path / "model")
    with pytest.raises(SystemExit) as stopped:
        push_to_hub.main([str(tmp_path / "model"), BAD_REPO])
    assert str(stopped.value).startswith(f"error: {BAD_REPO_SAYS}")
    for main, flags in (
        (export.main, ["--run-dir", str(tmp_path / "none"), "--export-dir", str(tmp_path / "export")]),
        (train.main, ["--out-dir", str(tmp_path / "run"), "--export-dir", str(tmp_path / "export"), *TINY_ARGS]),
    ):
        with pytest.raises(SystemExit) as stopped:
            main(["--data", str(text_file), *flags, "--push-to-hub", BAD_REPO])
        assert stopped.value.code == 2
        assert f"--push-to-hub {BAD_REPO_SAYS}" in capsys.readouterr().err.strip().splitlines()[-1]
    assert not (tmp_path / "run").exists() and not (tmp_path / "export").exists()


@pytest.mark.parametrize("recipe", ["missing.md", "folder", "binary.md"])
def test_a_recipe_that_cannot_be_read_is_one_line(text_file, tmp_path, capsys, recipe):
    # a missing file or a folder was a traceback; a binary file a line that named neither it nor --recipe
    run(text_file, tmp_path / "run", "--max-steps", "2")
    (tmp_path / "folder").mkdir()
    (tmp_path / "binary.md").write_bytes(b"\x80\x81 not text")
    with pytest.raises(SystemExit) as stopped:
        export.main(
            ["--run-dir", str(tmp_path / "run"), "--export-dir", str(tmp_path / "export"), "--data", str(text_file)]
            + ["--recipe", str(tmp_path / recipe)]
        )
    message = str(stopped.value)
    assert message.startswith(f"error: --recipe {tmp_path / recipe}: not a UTF-8 text file") and "\n" not in message
    assert not (tmp_path / "export").exists()


def test_missing_data_offline_is_one_line(tmp_path, monkeypatch):
    import urllib.request

    def offline(*args, **kwargs):
        raise OSError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(train, "DEFAULT_DATA_CACHE", tmp_path / "cache" / "tinyshakespeare.txt")
    monkeypatch.setattr(urllib.request, "urlopen", offline)
    with pytest.raises(SystemExit) as stopped:
        train.cli(["--out-dir", str(tmp_path / "run"), *TINY_ARGS])
    message = str(stopped.value)
    assert message.startswith("error: could not download TinyShakespeare") and "pass --data PATH" in message
    assert "\n" not in message


@pytest.mark.parametrize(
    "flags, words",
    [
        (["--eval-chars", "0"], "--eval-chars must be >= 1"),
        (["--eval-samples", "0"], "--eval-samples must be >= 1"),
        (["--max-minutes", "-1"], "--max-minutes must be a number >= 0"),
        (["--save-minutes", "nan"], "--save-minutes must be a number >= 0"),
        (["--weight-decay", "-0.1"], "--weight-decay must be a number >= 0"),
        (["--warmup-steps", "-1"], "--warmup-steps must be >= 0"),
        (["--muon-weight-decay", "-1"], "--muon-weight-decay must be a number >= 0"),
        (["--lr", "0.001", "--min-lr", "0.01"], "--min-lr 0.01 is above --lr 0.001"),
        (["--max-steps", "50", "--warmup-steps", "100"], "--max-steps 50 is below --warmup-steps 100"),
        (["--lr", "0"], "--lr must be a number > 0"),
        (["--muon-lr", "-0.02"], "--muon-lr must be a number > 0"),
        (["--muon-momentum", "1"], "--muon-momentum must be in \\[0, 1\\)"),
        (["--threads", "-1"], "--threads must be from 0 \\(torch's default\\) to"),
        # torch crashed the process (a segmentation fault) on 100,000 threads, leaving token files behind
        (["--threads", "100000"], "--threads must be from 0 \\(torch's default\\) to [0-9]+, got 100000"),
        (["--device", "bogus"], "--device 'bogus' is not a device"),
        # "" trained from scratch (--init-from), wrote the run into the working directory (--out-dir), or skipped
        # the export and the push without a word
        (["--init-from", ""], "--init-from is empty: give a path"),
        (["--out-dir", " "], "--out-dir is empty: give a path"),
        (["--export-dir", ""], "--export-dir is empty: give a path"),
        (["--export-dir", "x", "--push-to-hub", ""], "--push-to-hub '' is not a Hub repo id"),
        (["--stream-masks", "1.5"], "--stream-masks must be in \\[0, 1\\]"),
        (["--stream-masks", "0.5", "--loss-weighting", "elbo"], "--stream-masks needs --loss-weighting uniform"),
        (["--init-from", "somewhere", "--n-layer", "2"], "--init-from takes the model's shape .* drop --n-layer"),
        # formerly a hang in the fp32/bf16 timing, or an allocator's traceback under a memory limit
        (["--batch-size", "1000000000"], "--batch-size 1000000000 of --block-size 256 is 256,000,000,000 characters"),
    ],
)
def test_bad_flags_are_refused_before_any_work(flags, words, capsys):
    with pytest.raises(SystemExit):
        train.parse_args(flags)
    last_line = capsys.readouterr().err.strip().splitlines()[-1]
    assert re.search(f"error: {words}", last_line), last_line


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


def test_every_phase_says_what_it_is_doing(text_file, tmp_path, capsys):
    from training import evaluate

    run(text_file, tmp_path / "run", "--max-steps", "2", "--dtype", "auto")
    assert "timing fp32 vs bf16 for one step" in capsys.readouterr().out
    export.export_run(tmp_path / "run", tmp_path / "export", text_file)
    printed = capsys.readouterr().out
    for phase in (
        "export: measuring the validation ELBO of fp32 and bf16 weights...",
        "export: evaluating the",
        "evaluate: exact NLL over",
        "evaluate: masked-token accuracy by mask ratio...",
        "evaluate: sampling 3 texts",
        f"export: writing {tmp_path / 'export'}...",
    ):
        assert phase in printed, phase
    evaluate.main(["--model", str(tmp_path / "export"), "--data", str(text_file), "--nll-chars", "16"])
    printed = capsys.readouterr().out
    assert "evaluate: loading" in printed and "evaluate: validation ELBO over" in printed


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


def test_one_ctrl_c_delivered_twice_saves_and_a_later_second_one_quits(text_file, tmp_path, monkeypatch):
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
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler

    def interrupted(self, stop, deadline):
        raise KeyboardInterrupt

    monkeypatch.setattr(train.Trainer, "loop", interrupted)
    with pytest.raises(SystemExit) as stopped:
        train.cli(["--data", str(text_file), "--out-dir", str(tmp_path / "run"), *TINY_ARGS])
    assert str(stopped.value).startswith("interrupted: quit without saving")
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handlers are given back


def old_get_batch(text, batch_size, block_size, generator):
    """get_batch before the token files: windows of the whole training split held as one int64 tensor."""
    train_text, _ = split_text(text)
    data = torch.tensor(CharTokenizer.from_text(text).encode(train_text), dtype=torch.long)
    starts = torch.randint(0, data.numel() - block_size + 1, (batch_size,), generator=generator)
    return torch.stack([data[s : s + block_size] for s in starts.tolist()])


def test_batches_come_from_memory_mapped_token_files_with_the_same_windows_as_before(text_file, tmp_path):
    from training import corpus

    text = text_file.read_text()
    tokens = corpus.tokenize([text_file], tmp_path / "run", corpus.scan_text([text_file]))
    assert isinstance(tokens.train, np.memmap) and tokens.train.dtype == np.uint16
    assert (tmp_path / "run" / "train.bin").stat().st_size == 2 * len(split_text(text)[0])  # nanoGPT's train.bin
    for seed in range(3):
        new, old = torch.Generator().manual_seed(seed), torch.Generator().manual_seed(seed)
        for _ in range(3):
            batch = training.trainer.get_batch(tokens.train, 8, 32, new)
            assert batch.dtype == torch.long and torch.equal(batch, old_get_batch(text, 8, 32, old))
        assert torch.equal(new.get_state(), old.get_state())
    summary = run(text_file, tmp_path / "trained", "--max-steps", "2")
    assert summary["finished"] and {"train.bin", "val.bin", "tokens.json"} <= set(os.listdir(tmp_path / "trained"))


def test_token_files_are_streamed_in_chunks_and_read_newlines_as_before(tmp_path, monkeypatch, tiny_text):
    from training import corpus

    first, second = tmp_path / "a.txt", tmp_path / "b.txt"
    first.write_bytes(tiny_text.replace("\n", "\r\n").encode() + "é\r".encode())  # Windows line ends, a lone \r
    second.write_text(tiny_text[:500])
    text = corpus.read_texts([first, second])
    assert text == read_text(first) + "\n" + read_text(second) and "\r" not in text
    monkeypatch.setattr(corpus, "CHUNK_CHARS", 7)  # chunk edges inside \r\n pairs and at the split
    facts = corpus.scan_text([first, second])
    assert (facts.chars, facts.characters) == (len(text), CharTokenizer.from_text(text).vocab)
    tokens = corpus.tokenize([first, second], tmp_path / "run", facts)
    train_text, val_text = split_text(text)
    tokenizer = CharTokenizer.from_text(text)
    assert tokens.train.tolist() == tokenizer.encode(train_text) and tokens.val.tolist() == tokenizer.encode(val_text)
    # written once: a second call with the same text and vocabulary reuses the files
    written = (tmp_path / "run" / "train.bin").stat().st_mtime_ns
    time.sleep(0.01)
    corpus.tokenize([first, second], tmp_path / "run", corpus.scan_text([first, second]))
    assert (tmp_path / "run" / "train.bin").stat().st_mtime_ns == written
    # a damaged file of the right size (an IndexError on resume) is found by its checksum and written anew
    damaged = bytearray((tmp_path / "run" / "train.bin").read_bytes())
    damaged[:8] = b"\xff" * 8
    (tmp_path / "run" / "train.bin").write_bytes(bytes(damaged))
    tokens = corpus.tokenize([first, second], tmp_path / "run", corpus.scan_text([first, second]))
    assert tokens.train.tolist() == tokenizer.encode(train_text)
    written = (tmp_path / "run" / "train.bin").stat().st_mtime_ns
    # another text is tokenized again, and a vocabulary that lacks its characters is refused
    with pytest.raises(ValueError, match="1 character\\(s\\) outside the run's vocabulary: 'é'"):
        corpus.tokenize([first], tmp_path / "run", corpus.scan_text([first]), vocab=tokenizer.vocab.replace("é", ""))
    assert corpus.tokenize([second], tmp_path / "run", corpus.scan_text([second])).val.tolist() == CharTokenizer(
        CharTokenizer.from_text(tiny_text[:500]).vocab
    ).encode(split_text(tiny_text[:500])[1])


def test_data_may_name_several_files_for_train_and_export(tmp_path, tiny_text):
    parts = [tmp_path / f"part{i}.txt" for i in range(3)]
    for i, part in enumerate(parts):
        part.write_text(tiny_text.replace("to be", f"part {i}"))
    out = tmp_path / "run"
    train.main(["--data", *map(str, parts), "--out-dir", str(out), *TINY_ARGS, "--max-steps", "2"])
    joined = "\n".join(p.read_text() for p in parts)
    vocab = torch.load(out / "ckpt.pt", weights_only=True)["model_config"]["vocab"]
    train_ids = np.fromfile(out / "train.bin", dtype=np.uint16).tolist()
    assert train_ids == CharTokenizer(vocab).encode(split_text(joined)[0])
    # resumed with the files in another order: another text (asked for: --new-data), with the run's vocabulary
    resumed = train.main(
        ["--data", *map(str, parts[::-1]), "--out-dir", str(out), "--resume", "--max-steps", "3", "--new-data"]
    )
    assert resumed["step"] == 3
    reordered = "\n".join(p.read_text() for p in parts[::-1])
    assert np.fromfile(out / "val.bin", dtype=np.uint16).tolist() == CharTokenizer(vocab).encode(
        split_text(reordered)[1]
    )
    command = ["--run-dir", str(out), "--export-dir", str(tmp_path / "export"), "--data", *map(str, parts)]
    export.main([*command, "--weights-dtype", "float32"])
    metrics = json.loads((tmp_path / "export" / "metrics.json").read_text())
    assert metrics["val_chars"] == len(split_text(joined)[1])


def test_the_defaults_are_the_cpu_recipe():
    args, _ = train.parse_args([])
    recipe = dict(optimizer="muon", muon_lr=0.02, lr=2e-3, norm="rmsnorm", mlp="relu2", qk_norm=True, ema=0.999)
    recipe.update(zero_init_residual=True, loss_weighting="uniform", warmup_steps=200, n_embd=256, n_layer=6)
    recipe.update(n_head=4, block_size=256, max_steps=1500)
    assert {k: getattr(args, k) for k in recipe} == recipe
    assert args.batch_size * args.block_size == 8192  # 1,500 steps: about 30 minutes at 5-8k tokens/s on 2 cores
    args, explicit = train.parse_args(["--no-qk-norm", "--no-zero-init-residual"])
    assert not args.qk_norm and not args.zero_init_residual and {"qk_norm", "zero_init_residual"} <= explicit


def test_an_estimate_is_printed_as_the_loop_starts(text_file, tmp_path, capsys):
    run(text_file, tmp_path / "run", "--max-steps", "8", "--stop-at-step", "6")
    printed = capsys.readouterr().out
    assert re.search(r"about [\d.]+ minutes for 6 steps at [\d,]+ tokens/s\n", printed), printed
    assert printed.index("starting at step 0") < printed.index("about ")
    # the default run on two CPU cores, timed at 1.2 s per step
    args, _ = train.parse_args(["--max-minutes", "20"])
    trainer = SimpleNamespace(args=args, processes=train.Processes(torch.device("cpu")))
    line = train.Trainer.estimate(trainer, 1.2, 1500)
    assert line == "about 30 minutes for 1,500 steps at 6,827 tokens/s (--max-minutes 20 stops it sooner)"


def test_a_checkpoint_of_the_older_format_says_it_cannot_be_resumed(text_file, tmp_path):
    run(text_file, tmp_path / "old", "--max-steps", "4")
    checkpoint = torch.load(tmp_path / "old" / "ckpt.pt", weights_only=True)
    checkpoint["optimizer"] = checkpoint.pop("optimizers")[-1]  # one AdamW state, as before Muon and EMA
    training.checkpoints.save_checkpoint(tmp_path / "old" / "ckpt.pt", checkpoint)
    with pytest.raises(ValueError, match="older mdlm_hf .* cannot be resumed; its weights still export"):
        train.main(["--data", str(text_file), "--out-dir", str(tmp_path / "old"), "--resume", "--max-steps", "6"])


def test_a_stop_on_the_last_step_still_exports(text_file, tmp_path):
    summary = run(
        text_file, tmp_path / "run", "--max-steps", "4", "--stop-at-step", "4", "--export-dir", str(tmp_path / "x")
    )
    assert summary["finished"] and (tmp_path / "x" / "model.safetensors").is_file()


def test_a_model_shape_that_cannot_be_built_is_refused_before_reading_the_text(text_file, tmp_path):
    with pytest.raises(SystemExit):
        run(text_file, tmp_path / "run", "--n-embd", "30", "--n-head", "4")
    assert not (tmp_path / "run" / "train.bin").exists()


class RecordingApi:
    """huggingface_hub.HfApi, offline: records the uploads."""

    uploads = []

    def __init__(self, token=None):
        pass

    def create_repo(self, repo_id, **kwargs):
        pass

    def upload_folder(self, folder_path, repo_id, **kwargs):
        self.uploads.append((repo_id, (Path(folder_path) / "README.md").read_text()))
        return f"https://huggingface.co/{repo_id}/commit/abc"


def usage_code(card: str) -> str:
    return card.split("## Usage\n\n```python\n", 1)[1].split("```", 1)[0]


def test_the_card_describes_the_runs_own_text_and_its_example_runs(text_file, tmp_path, monkeypatch, capsys):
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "HfApi", RecordingApi)
    export_dir = tmp_path / "export"
    terms = ["--dataset-name", "Tiny verses", "--license", "cc-by-4.0", "--language", "en"]
    pushed = ["--export-dir", str(export_dir), "--push-to-hub", "me/tiny-verses", *terms]
    run(text_file, tmp_path / "run", "--max-steps", "3", *pushed)
    card = (export_dir / "README.md").read_text()
    assert RecordingApi.uploads[-1] == ("me/tiny-verses", card)
    for shakespeare in ("Shakespeare", "ROMEO", "nanoGPT", "To be, or not to be", "million characters"):
        assert shakespeare not in card, shakespeare
    assert "# mdlm_hf: a masked diffusion language model of Tiny verses, character by character" in card
    assert 'MDLM.from_pretrained("me/tiny-verses")' in card and "path/or/repo-id" not in card
    assert f"- data: Tiny verses, {len(text_file.read_text()):,} characters" in card
    metrics = json.loads((export_dir / "metrics.json").read_text())
    assert f"**{metrics['val_nelbo_nats_per_char']:.4f} nats/char**" in card and "| exact NLL, " in card
    assert "- recipe: n_layer=1" in card  # the card's metric rows and recipe are kept
    front = huggingface_hub.ModelCard.load(export_dir / "README.md").data
    assert (front.license, front.language, front.datasets) == ("cc-by-4.0", "en", None)
    (result,) = front.eval_results
    assert (result.dataset_name, result.metric_type) == ("Tiny verses", "nelbo") and front.model_name == "tiny-verses"
    assert result.metric_value == round(metrics["val_nelbo_nats_per_char"], 4)
    # the usage example's prompt and infill template come from the text, and the example runs as written
    code = usage_code(card)
    calls = {
        n.func.attr: n.args
        for n in ast.walk(ast.parse(code))
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.args
    }
    prompt, template = (ast.literal_eval(calls[name][0]) for name in ("complete", "infill"))
    text = text_file.read_text()
    assert prompt and prompt.rstrip("\n") in text and re.search(re.escape(template).replace("_", "\\S"), text)
    exec(code.replace('"me/tiny-verses"', repr(str(export_dir))), {})
    assert prompt in capsys.readouterr().out

    # no terms given: none stated; the card names the data file
    export.export_run(tmp_path / "run", tmp_path / "plain", text_file, weights_dtype="float32")
    plain = (tmp_path / "plain" / "README.md").read_text()
    front = huggingface_hub.ModelCard.load(tmp_path / "plain" / "README.md").data
    assert front.license is None and front.language is None and front.datasets is None
    assert "language model of text, character by character" in plain and "- license:" not in plain
    assert 'MDLM.from_pretrained("path/or/repo-id")' in plain
    # pushed later: the card names the repo
    export.push_to_hub(tmp_path / "plain", "me/later")
    assert 'MDLM.from_pretrained("me/later")' in (tmp_path / "plain" / "README.md").read_text()
    assert 'MDLM.from_pretrained("me/later")' in RecordingApi.uploads[-1][1]
    assert {"dataset_name", "license", "language"} <= set(run_options.RESUMABLE_CHANGES)


def test_tinyshakespeare_alone_gets_the_shakespeare_card(text_file, tmp_path, monkeypatch):
    import huggingface_hub

    run(text_file, tmp_path / "run", "--max-steps", "2", "--block-size", "64")  # the infill example fits
    monkeypatch.setattr(training.card, "TINYSHAKESPEARE_MD5", hashlib.md5(text_file.read_bytes()).hexdigest())
    export.export_run(tmp_path / "run", tmp_path / "export", text_file, weights_dtype="float32")
    card = (tmp_path / "export" / "README.md").read_text()
    assert "# mdlm_hf: a masked diffusion language model of Shakespeare, character by character" in card
    assert 'model.complete("ROMEO:\\n", length=' in card and "To be, or not to be, ________" in card
    assert "nanoGPT's autoregressive character model reaches 1.47 nats/char" in card
    assert "million characters of Shakespeare" in card
    front = huggingface_hub.ModelCard.load(tmp_path / "export" / "README.md").data
    assert (front.license, front.language, front.datasets) == ("mit", "en", ["karpathy/tiny_shakespeare"])
    assert front.eval_results[0].dataset_type == "karpathy/tiny_shakespeare"
    export.export_run(tmp_path / "run", tmp_path / "other", text_file, weights_dtype="float32", license="apache-2.0")
    assert huggingface_hub.ModelCard.load(tmp_path / "other" / "README.md").data.license == "apache-2.0"


def test_the_card_names_the_hardware_the_run_trained_on(text_file, tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H200")
    assert training.processes.hardware_description(torch.device("cuda", 1)) == "NVIDIA H200"
    assert training.processes.hardware_description(torch.device("cuda"), processes=8) == "8 x NVIDIA H200"
    assert training.processes.hardware_description(torch.device("mps")) == "an Apple GPU (mps)"
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    cpu = training.processes.hardware_description(torch.device("cpu"))
    assert cpu.endswith(", 1 thread") and training.processes.hardware_description(torch.device("cpu"), 2).endswith(
        ", 2 threads in 2 processes"
    )
    run(text_file, tmp_path / "run", "--max-steps", "2", "--block-size", "64")
    checkpoint = torch.load(tmp_path / "run" / "ckpt.pt", weights_only=True)
    assert checkpoint["hardware"] == cpu  # --threads 1, one process
    # trained on a GPU, resumed on this CPU, exported here: the card names both machines and nothing else
    checkpoint["hardware"], checkpoint["wall_time"] = "NVIDIA H200", 290.0
    torch.save(checkpoint, tmp_path / "run" / "ckpt.pt")
    run(text_file, tmp_path / "run", "--max-steps", "3", "--block-size", "64", "--resume")
    assert torch.load(tmp_path / "run" / "ckpt.pt", weights_only=True)["hardware"] == f"NVIDIA H200, then {cpu}"
    monkeypatch.setattr(training.card, "TINYSHAKESPEARE_MD5", hashlib.md5(text_file.read_bytes()).hexdigest())
    export.export_run(tmp_path / "run", tmp_path / "export", text_file, weights_dtype="float32")
    card = (tmp_path / "export" / "README.md").read_text()
    minutes = torch.load(tmp_path / "run" / "ckpt.pt", weights_only=True)["wall_time"] / 60
    assert f"- wall time: {minutes:.1f} minutes on NVIDIA H200, then {cpu}" in card
    assert f"trained for {minutes:.1f} minutes:" in card and "on a CPU" not in card
    # a checkpoint from before the field: the card does not guess
    checkpoint = torch.load(tmp_path / "run" / "ckpt.pt", weights_only=True)
    del checkpoint["hardware"]
    torch.save(checkpoint, tmp_path / "run" / "ckpt.pt")
    export.export_run(tmp_path / "run", tmp_path / "old", text_file, weights_dtype="float32")
    assert "minutes on an unrecorded machine" in (tmp_path / "old" / "README.md").read_text()
    assert (
        training.processes.joined_hardware(None, cpu) == cpu
        and training.processes.joined_hardware(f"A, then {cpu}", cpu) == f"A, then {cpu}"
    )


def test_usage_examples_come_from_the_validation_text():
    text = "the cut line\nFirst Citizen:\nBefore we proceed any further, hear me speak.\nAll:\nSpeak, speak.\n"
    model = MDLM(CharTokenizer.from_text(text).vocab, n_layer=1, n_head=2, n_embd=16, block_size=64)
    assert training.card.usage_examples(model, text) == (
        "First Citizen:\n",
        "Before we proceed any ________ hear me speak.",
    )
    prose = "cut\nIt was a bright cold day in April, and the clocks were striking thirteen.\n"
    model = MDLM(CharTokenizer.from_text(prose).vocab, n_layer=1, n_head=2, n_embd=16, block_size=256)
    assert training.card.usage_examples(model, prose) == (
        "It was a bright cold day in April, and",
        "It was a bright cold day in ______ and the clocks were striking thirteen.",
    )


def test_demo_metadata_gives_the_app_text_the_model_writes(tmp_path):
    from mdlm_space.texts import demo_texts

    text = "the cut line\nFirst Citizen:\nBefore we proceed any further, hear me speak.\nAll:\nSpeak, speak.\n"
    model = MDLM(CharTokenizer.from_text(text).vocab, n_layer=1, n_head=2, n_embd=16, block_size=64)
    data = training.card.describe_training_data(model, text, text, name="Plays")
    metadata = training.card.demo_metadata(model, data, text)
    assert metadata == {
        "prompt": "First Citizen:\n",
        "examples": ["Before we proceed any ________ hear me speak."],
        "subject": "Plays",
        "sample": "First Citizen:\nBefore we proceed any further, hear me speak.\nAll:\nSpeak, speak.",
        "sample_name": "the validation text of Plays (unseen in training)",
    }
    texts = demo_texts(model, metadata)
    assert (texts.subject, texts.prompt, texts.examples) == ("Plays", "First Citizen:\n", tuple(metadata["examples"]))
    assert texts.sample == metadata["sample"] and texts.sample_name == metadata["sample_name"]
    shakespeare = dataclasses.replace(data, tinyshakespeare=True)
    assert training.card.demo_metadata(model, shakespeare, text) == {"subject": "Shakespeare"}


def test_text_that_joined_the_training_split_only_is_named_apart_from_the_validation_text():
    text = "the cut line\nFirst Citizen:\nBefore we proceed any further, hear me speak.\nAll:\nSpeak, speak.\n"
    model = MDLM(CharTokenizer.from_text(text).vocab, n_layer=1, n_head=2, n_embd=16, block_size=64)
    extra = dict(extra_chars=500, extra_name="more_plays", split_name="plays")
    data = training.card.describe_training_data(model, text, text, "Plays and more", **extra)
    assert (
        training.card.demo_metadata(model, data, text)["sample_name"]
        == "the validation text of plays (unseen in training)"
    )
    facts = training.card.training_facts(model, {}, {}, data)
    assert (facts["validation_name"], facts["extra_chars"], facts["extra_name"]) == ("plays", 500, "more_plays")
    assert facts["size_words"] == f"{2 * len(text) + 500:,} characters"  # what it read: the split text and the rest
    shakespeare = dataclasses.replace(data, tinyshakespeare=True)
    assert training.card.validation_name(shakespeare) == "TinyShakespeare"
    evaluation = {"val_chars": 10, "nelbo": 1.5, "nelbo_bits": 2.2, "mask_draws": 1, "exact_nll": [], "accuracy": []}
    card = model.generate_model_card(title="t", training=facts, evaluation=evaluation, validation_percent=10)
    assert "and 500 characters of more_plays in the training split only" in str(card)
    assert "](None)" not in str(card) and "github.com/mdlm-hf" not in str(card)  # no link to a repository


def tensorboard_events(log_dir: Path):
    """Every event file of a TensorBoard log dir, read the way TensorBoard does (a resume's purge applied)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(log_dir))
    events.Reload()
    return events


def test_tracker_tensorboard_logs_the_metrics_and_samples_and_a_resume_continues_at_its_step(text_file, tmp_path):
    out = tmp_path / "run"
    run(text_file, out, "--max-steps", "12", "--stop-at-step", "6", "--tracker", "tensorboard")
    # a run killed after its checkpoint had logged further; the resume trains step 8 again
    from torch.utils.tensorboard import SummaryWriter

    with SummaryWriter(str(out / "tensorboard")) as stray:
        stray.add_scalar("train/loss", 99.0, 8)
    run(text_file, out, "--max-steps", "12", "--resume")  # the run's own tracker, kept from its checkpoint
    assert [p.name for p in out.iterdir() if p.is_dir()] == ["tensorboard"]
    events = tensorboard_events(out / "tensorboard")
    scalars = set(events.Tags()["scalars"])
    assert {"train/loss", "train/lr", "train/tokens_per_s", "train/tokens_seen"} <= scalars
    assert {"val/nelbo", "val/nelbo_ema", "val/bpc", "val/bpc_ema"} <= scalars
    assert [e.step for e in events.Scalars("train/loss")] == [2, 4, 6, 8, 10, 12]
    assert 99.0 not in [e.value for e in events.Scalars("train/loss")]
    history = json.loads((out / "history.json").read_text())
    nelbo = events.Scalars("val/nelbo")
    assert [e.step for e in nelbo] == [h["step"] for h in history["val"]] == [5, 10, 12]
    assert [e.value for e in nelbo] == pytest.approx([h["nelbo"] for h in history["val"]], rel=1e-6)
    bpc = events.Scalars("val/bpc")[0].value
    assert bpc == pytest.approx(history["val"][0]["nelbo"] / np.log(2), rel=1e-5)
    samples = events.Tensors("samples/text_summary")
    assert [s.step for s in samples] == [5, 10, 12] and b"--- sample 1 ---" in samples[0].tensor_proto.string_val[0]


class FakeTrackio:
    """Stands in for the trackio package (it may not install offline): records init, log and finish."""

    def __init__(self):
        self.calls = []

    def module(self):
        fake = types.ModuleType("trackio")
        fake.init = lambda **kwargs: self.calls.append(("init", kwargs))
        fake.log = lambda metrics, step=None: self.calls.append(("log", step, metrics))
        fake.finish = lambda: self.calls.append(("finish",))
        fake.Markdown = lambda text: ("Markdown", text)  # trackio's text type (since 0.17)
        return fake

    def logged(self, name):
        return [(call[1], call[2][name]) for call in self.calls if call[0] == "log" and name in call[2]]


def test_tracker_trackio_records_init_log_and_finish_and_may_change_on_resume(text_file, tmp_path, monkeypatch):
    trackio = FakeTrackio()
    monkeypatch.setitem(sys.modules, "trackio", trackio.module())
    out = tmp_path / "mine"
    run(text_file, out, "--max-steps", "8", "--stop-at-step", "6", "--tracker", "trackio")
    kind, init = trackio.calls[0]
    assert kind == "init" and (init["project"], init["name"], init["resume"]) == ("mdlm_hf", "mine", "never")
    assert init["config"]["tracker"] == "trackio" and init["config"]["batch_size"] == 4
    assert trackio.calls[-1] == ("finish",) and [c[0] for c in trackio.calls].count("init") == 1
    assert [step for step, _ in trackio.logged("train/loss")] == [2, 4, 6]
    assert [step for step, _ in trackio.logged("val/nelbo")] == [5]
    ((step, text),) = trackio.logged("samples")
    assert step == 5 and text[0] == "Markdown" and text[1].startswith("```\n--- sample 0 ---\n")
    trackio.calls.clear()
    run(text_file, out, "--max-steps", "8", "--resume")  # the run's own tracker continues the same trackio run
    assert trackio.calls[0][1]["resume"] == "allow" and trackio.logged("val/nelbo")[0][0] == 8
    trackio.calls.clear()
    run(text_file, out, "--max-steps", "10", "--resume", "--tracker", "none")  # a resume may turn it off
    assert trackio.calls == []


@pytest.mark.parametrize(
    "tracker, modules", [("tensorboard", ["tensorboard", "torch.utils.tensorboard"]), ("trackio", ["trackio"])]
)
def test_tracker_without_its_package_is_one_line_before_any_work(
    text_file, tmp_path, monkeypatch, capsys, tracker, modules
):
    for module in modules:
        monkeypatch.setitem(sys.modules, module, None)  # import fails as if it were not installed
    with pytest.raises(SystemExit) as stopped:
        train.cli(["--data", str(text_file), "--out-dir", str(tmp_path / "run"), *TINY_ARGS, "--tracker", tracker])
    assert stopped.value.code != 0 and not (tmp_path / "run").exists()
    last_line = capsys.readouterr().err.strip().splitlines()[-1]
    assert re.search(f"error: --tracker {tracker} needs the {modules[0].split('.')[0]} package", last_line)
    assert last_line.endswith(f"pip install {tracker}, or use --tracker none")


FIRST_SAMPLE = r"--- sample 0 ---\n(.*?)\n--- sample 1 ---\n"


def test_samples_are_printed_at_each_evaluation_without_moving_the_training(text_file, tmp_path, capsys):
    with_samples = run(text_file, tmp_path / "a", "--max-steps", "6", "--eval-sample-chars", "20")
    printed = capsys.readouterr().out
    for step in (5, 6):
        assert re.search(
            rf"samples at step {step} \((raw|ema) weights, 32 steps, seed 0\):\n--- sample 0 ---\n", printed
        )
    assert printed.count("--- sample 1 ---\n") == 2
    texts = re.findall(FIRST_SAMPLE, printed, re.DOTALL)  # samples may hold line breaks
    assert len(texts) == 2 and all(len(text) == 20 for text in texts)
    without = run(text_file, tmp_path / "b", "--max-steps", "6", "--eval-sample-chars", "0")
    assert "samples at step" not in capsys.readouterr().out
    for name, weight in with_samples["model"].state_dict().items():  # the sampler draws from its own seed
        assert torch.equal(weight, without["model"].state_dict()[name]), name
    run(text_file, tmp_path / "c", "--max-steps", "2", "--eval-interval", "2")  # the default, clipped to a block
    assert len(re.findall(FIRST_SAMPLE, capsys.readouterr().out, re.DOTALL)[0]) == 32


def test_redraw_samples_rewrites_only_the_samples_of_an_export(text_file, tmp_path, capsys):
    from training import redraw_samples

    export_dir = tmp_path / "export"
    run(text_file, tmp_path / "run", "--max-steps", "4", "--export-dir", str(export_dir))
    card_path, metrics_path = export_dir / "README.md", export_dir / "metrics.json"
    metrics = json.loads(metrics_path.read_text())
    old = {**metrics, "samples": ["an old sample"] * 3, "sampling": {"length": 32, "order": "confidence"}}
    metrics_path.write_text(json.dumps(old, indent=2))
    card_path.write_text(redraw_samples.SECTION.sub(training.card.samples_section(old) + "\n", card_path.read_text()))
    before, after_section = card_path.read_text().split("## Samples")[0], card_path.read_text().split("## Limit")[1]
    redraw_samples.main([str(export_dir)])
    card, redrawn = card_path.read_text(), json.loads(metrics_path.read_text())
    assert redrawn == {**metrics, **redraw_samples.draw_samples(MDLM.from_pretrained(export_dir), 3)}
    assert "an old sample" not in card and all(f"```\n{t}\n```" in card for t in redrawn["samples"])
    assert card.startswith(before) and card.endswith(after_section)  # nothing else of the card changed
    assert "order word_streams" in card and "min_p 0.1" in card
    with pytest.raises(SystemExit, match="is not an export"):
        redraw_samples.main([str(tmp_path)])
    # [1, 2] was an AttributeError traceback; bad JSON a line that named no file
    for content, says in (("[1, 2]", "is not an export's metrics"), ("{bad", "is not readable JSON")):
        metrics_path.write_text(content)
        with pytest.raises(SystemExit) as stopped:
            redraw_samples.main([str(export_dir)])
        assert str(stopped.value).startswith(f"redraw_samples: {metrics_path} {says}")
    assert card_path.read_text() == card  # refused: the card is as it was


def test_an_unwritable_out_or_export_dir_is_one_line_before_any_work(text_file, tmp_path, monkeypatch):
    # a directory that cannot be made or written gave a traceback (mkdir's)
    in_the_way = tmp_path / "a-file"
    in_the_way.write_text("not a directory")
    with pytest.raises(ValueError, match=f"--out-dir {in_the_way / 'run'} is not a directory this program can write"):
        run(text_file, in_the_way / "run", "--max-steps", "2")
    with pytest.raises(ValueError, match=f"--export-dir's parent {in_the_way} is not a directory this program can"):
        run(text_file, tmp_path / "run", "--max-steps", "2", "--export-dir", str(in_the_way / "export"))
    assert not (tmp_path / "run").exists()  # refused before training: nothing written

    def read_only(*args, **kwargs):  # a read-only file system (root ignores chmod, so it is simulated)
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr("tempfile.TemporaryFile", read_only)
    with pytest.raises(ValueError, match="--out-dir .* is not a directory this program can write to \\(Read-only"):
        run(text_file, tmp_path / "ro", "--max-steps", "2")
    result = subprocess.run(
        [sys.executable, "-m", "training.train", "--data", str(text_file), "--out-dir", str(in_the_way / "run")],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip().startswith(f"error: --out-dir {in_the_way / 'run'} is not a directory")


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


def test_a_license_that_is_no_hub_identifier_is_refused_with_the_nearest(capsys, text_file, tmp_path):
    # --license was written into the card's front matter unchecked
    with pytest.raises(SystemExit):
        train.parse_args(["--data", str(text_file), "--license", "MIT"])
    assert "'MIT' is not a Hub license identifier; did you mean mit?" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        export.main(["--run-dir", str(tmp_path), "--export-dir", str(tmp_path / "e"), "--license", "cc-by-4"])
    assert "'cc-by-4' is not a Hub license identifier; did you mean cc-by-4.0" in capsys.readouterr().err
    for good in ("mit", "cc-by-sa-4.0", "other"):
        args, _ = train.parse_args(["--data", str(text_file), "--license", good])
        assert args.license == good
    with pytest.raises(ValueError, match="'GPL' is not a Hub license identifier"):
        run_options.check_license("GPL")


def test_the_card_is_a_template_with_no_figure_written_by_hand():
    # the card was a 143-line f-string; its figures come from metrics.json, the run or the config
    from mdlm_hf.card import MODEL_CARD_TEMPLATE

    text = re.sub(r"\{\{.*?\}\}|\{%.*?%\}", "", MODEL_CARD_TEMPLATE, flags=re.S)  # the template's own words
    text = text.replace("seed=0", "")  # the usage example's seed is code, not a figure
    assert re.findall(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])", text) == []
    assert "evaluation.nelbo" in MODEL_CARD_TEMPLATE and "num_steps=64" not in MODEL_CARD_TEMPLATE


@pytest.mark.parametrize("fails_at", ["create_repo", "upload_folder"])
def test_a_failed_push_leaves_the_export_byte_identical(tiny_model, tmp_path, monkeypatch, fails_at):
    # a failed push left the card naming the new repo, and its mode 0600
    import huggingface_hub

    class FailingApi:
        def __init__(self, token=None):
            pass

        def create_repo(self, *args, **kwargs):
            if fails_at == "create_repo":
                raise ConnectionError("offline")

        def repo_info(self, *args, **kwargs):
            raise AssertionError("not asked for a public push")

        def upload_folder(self, **kwargs):
            assert 'MDLM.from_pretrained("me/new-model")' in (tmp_path / "README.md").read_text()  # what it uploads
            raise TimeoutError("the upload timed out")

    tiny_model.save_pretrained(tmp_path)
    (tmp_path / "README.md").chmod(0o644)
    before = {p.name: (p.read_bytes(), p.stat().st_mode) for p in tmp_path.iterdir()}
    monkeypatch.setattr(huggingface_hub, "HfApi", FailingApi)
    with pytest.raises(RunError, match="could not push to me/new-model"):
        export.push_to_hub(tmp_path, "me/new-model")
    assert {p.name: (p.read_bytes(), p.stat().st_mode) for p in tmp_path.iterdir()} == before


def test_atomic_writes_keep_a_files_mode_and_give_a_new_one_the_umasks(tmp_path):
    from mdlm_hf.data import atomic_write_bytes

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


def test_init_from_fine_tunes_a_saved_model_with_stream_masks(text_file, tmp_path, tiny_text):
    torch.manual_seed(0)
    saved = MDLM(CharTokenizer.from_text(tiny_text).vocab, n_layer=1, n_head=2, n_embd=32, block_size=32)
    saved.save_pretrained(tmp_path / "saved")
    flags = ["--data", str(text_file), "--init-from", str(tmp_path / "saved"), *SHAPE_FREE_ARGS]
    # a learning rate too small to move the weights: the run starts from the saved ones, with the saved shape
    still = train.main(
        [*flags, "--out-dir", str(tmp_path / "still"), "--max-steps", "2", "--stream-masks", "0.5"]
        + ["--lr", "1e-12", "--min-lr", "1e-12", "--muon-lr", "1e-12", "--weight-decay", "0"]
    )
    assert still["model"]._hub_mixin_config == saved._hub_mixin_config
    for name, weight in saved.state_dict().items():
        assert torch.allclose(still["model"].state_dict()[name], weight, atol=1e-6), name
    moved = train.main([*flags, "--out-dir", str(tmp_path / "moved"), "--max-steps", "4", "--stream-masks", "1"])
    assert not torch.equal(moved["model"].state_dict()["lm_head.weight"], saved.state_dict()["lm_head.weight"])
    resumed = train.main([*flags, "--out-dir", str(tmp_path / "moved"), "--max-steps", "6", "--resume"])
    assert resumed["step"] == 6  # a resume reads the run's own checkpoint, not --init-from's weights again
    export.main(["--run-dir", str(tmp_path / "moved"), "--data", str(text_file), "--export-dir", str(tmp_path / "ex")])
    card = (tmp_path / "ex" / "README.md").read_text()
    assert "  1. steps and characters not recorded, text not recorded" in card  # a notebook's save: no metrics.json
    assert "  2. 6 steps, 768 characters of" in card and f"from {tmp_path / 'saved'}" in card
    assert "stream_masks=1.0" in card


def test_init_from_errors_are_one_line(text_file, tmp_path, tiny_text):
    flags = ["--data", str(text_file), "--out-dir", str(tmp_path / "run"), *SHAPE_FREE_ARGS, "--max-steps", "2"]
    with pytest.raises(ValueError, match="--init-from .*nowhere: no mdlm_hf model there"):
        train.main([*flags, "--init-from", str(tmp_path / "nowhere")])
    twin = MDLM(CharTokenizer.from_text(tiny_text).vocab, n_layer=1, n_head=2, n_embd=32, block_size=32, causal=True)
    twin.save_pretrained(tmp_path / "twin")
    with pytest.raises(ValueError, match="--init-from: --stream-masks is an option of the diffusion loss"):
        train.main([*flags, "--init-from", str(tmp_path / "twin"), "--stream-masks", "0.5"])


@pytest.mark.parametrize(
    ("out", "says"),
    [("", "--out is empty: give a directory"), ("file", "is not a directory"), ("/proc/x", "is not a directory")],
)
def test_evaluate_refuses_an_out_it_cannot_write_before_the_evaluation(tmp_path, capsys, out, says):
    # "" wrote nothing and said nothing; an existing file failed only after the whole evaluation
    from training import evaluate

    (tmp_path / "file").write_text("taken")
    with pytest.raises(SystemExit) as stopped:
        evaluate.main(["--model", str(tmp_path / "none"), "--data", "x.txt", "--out", out and str(tmp_path / out)])
    # /proc/x: os.access said /proc was writable, and the evaluation failed after all its work (6 min 40 s)
    assert stopped.value.code == 2
    assert says in capsys.readouterr().err.strip().splitlines()[-1]
    with pytest.raises(ValueError, match="does not exist"):  # a run that fails leaves no empty --out behind
        evaluate.main(["--model", str(tmp_path / "none"), "--data", "x.txt", "--out", str(tmp_path / "new" / "out")])
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize(
    ("device", "says"), [("gpu", "is not a device"), ("cuda:7", "CUDA is not available here"), ("xla", "runs on")]
)
def test_evaluate_refuses_a_device_it_cannot_use_in_one_line(tmp_path, capsys, device, says, monkeypatch):
    from training import evaluate

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit) as stopped:
        evaluate.main(["--model", str(tmp_path / "none"), "--data", str(tmp_path / "none.txt"), "--device", device])
    assert stopped.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert ": error: --device" in error and says in error


def test_a_resume_takes_the_threads_of_its_own_machine():
    # a run saved on a machine with many CPUs was refused on a smaller one for a flag the user never typed
    from training.run_options import flag_problem, resumed_args

    args, explicit = train.parse_args(["--resume", "--out-dir", "somewhere"])
    merged = resumed_args(args, explicit, {"threads": 100_000, "batch_size": 7})
    assert merged.threads == 0 and merged.batch_size == 7 and flag_problem(merged) is None
    args, explicit = train.parse_args(["--resume", "--out-dir", "somewhere", "--threads", "1"])
    assert resumed_args(args, explicit, {"threads": 100_000}).threads == 1


def export_cli(*flags):
    return subprocess.run(
        [sys.executable, "-m", "training.export", *map(str, flags)], capture_output=True, text=True, cwd=REPO_ROOT
    )


def test_the_export_keeps_a_sibling_named_like_its_backup(text_file, tmp_path):
    out, export_dir = tmp_path / "run", tmp_path / "e" / "model"
    run(text_file, out, "--max-steps", "2")
    (tmp_path / "e" / ".model.old").mkdir(parents=True)
    (tmp_path / "e" / ".model.old" / "mine.txt").write_text("a user's file")
    result = export_cli("--run-dir", out, "--export-dir", export_dir, "--data", text_file)
    assert result.returncode == 1 and result.stderr.count("\n") == 1 and ".model.old is in the way" in result.stderr
    assert (tmp_path / "e" / ".model.old" / "mine.txt").read_text() == "a user's file"
    with pytest.raises(ValueError, match="is in the way"):  # train refuses before it trains
        run(text_file, tmp_path / "run2", "--max-steps", "2", "--export-dir", str(export_dir))
    assert not (tmp_path / "run2").exists()


def test_the_export_replaces_only_the_files_it_wrote(text_file, tmp_path):
    out, users = tmp_path / "run", tmp_path / "mine"
    run(text_file, out, "--max-steps", "2")
    users.mkdir()
    mine = {
        "config.json": json.dumps({"vocab": "abc"}).encode(),
        "model.safetensors": b"weights",
        "family_photo.png": b"\x89PNG a photo",
        "README.md": b"# my own notes",
    }
    for name, payload in mine.items():
        (users / name).write_bytes(payload)
    result = export_cli("--run-dir", out, "--export-dir", users, "--data", text_file)
    assert result.returncode == 1 and result.stderr.count("\n") == 1 and "not an earlier export" in result.stderr
    assert {p.name: p.read_bytes() for p in users.iterdir()} == mine
    # an earlier export with a file the user added beside it: that file is not the export's to replace
    export.export_run(out, tmp_path / "export", text_file, weights_dtype="float32")
    manifest = json.loads((tmp_path / "export" / ".mdlm_export.json").read_text())
    assert sorted(manifest["files"]) == sorted(set(export.EXPORT_FILES) - {".mdlm_export.json"})
    (tmp_path / "export" / "family_photo.png").write_bytes(b"\x89PNG a photo")
    with pytest.raises(ValueError, match="not an earlier export \\(family_photo.png\\)"):
        export.export_run(out, tmp_path / "export", text_file, weights_dtype="float32")
    assert (tmp_path / "export" / "family_photo.png").read_bytes() == b"\x89PNG a photo"


def test_the_export_refuses_a_text_the_run_did_not_train_on(text_file, tmp_path, tiny_text):
    out = tmp_path / "run"
    run(text_file, out, "--max-steps", "2")
    other = tmp_path / "other.txt"
    other.write_text((tiny_text * 3)[::-1])  # the same characters, another text
    result = export_cli("--run-dir", out, "--export-dir", tmp_path / "export", "--data", other)
    assert result.returncode == 1 and result.stderr.count("\n") == 1
    assert f"--data {other} is not the text the run trained on ({text_file})" in result.stderr
    assert "--other-data" in result.stderr and not (tmp_path / "export").exists()
    with pytest.raises(ValueError, match="is not the text the run trained on"):  # an extra text it never had
        export.export_run(out, tmp_path / "export", text_file, train_extra=[other])
    result = export_cli(
        "--run-dir", out, "--export-dir", tmp_path / "export", "--data", other, "--other-data", "--weights-dtype",
        "float32",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    val_chars = json.loads((tmp_path / "export" / "metrics.json").read_text())["val_chars"]
    assert val_chars == len(split_text(other.read_text())[1])


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


def test_tokenizing_onto_a_full_disk_is_one_line(text_file, tmp_path, monkeypatch):
    def disk_full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as stopped:
        train.cli(["--data", str(text_file), "--out-dir", str(out), *TINY_ARGS, "--max-steps", "2"])
    message = str(stopped.value)
    assert message.startswith(f"error: could not write the token files in {out} (No space left on device)")
    assert "free some space" in message and "\n" not in message
    assert sorted(p.name for p in out.iterdir()) == [train.RUN_MARKER]  # nothing half-written is kept


def test_tokenizing_past_the_file_size_limit_is_one_line(text_file, tmp_path):
    import resource

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    command = [sys.executable, "-m", "training.train", "--data", str(text_file), "--out-dir", str(tmp_path / "run")]
    result = subprocess.run(
        [*command, *TINY_ARGS, "--max-steps", "2"], capture_output=True, text=True, cwd=REPO_ROOT,
        preexec_fn=small_files,
    )  # fmt: skip
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("error: could not write the token files")


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_the_export_files_follow_the_umask(text_file, tmp_path, umask):
    run(text_file, tmp_path / "run", "--max-steps", "2")
    before = os.umask(umask)
    try:
        export.export_run(tmp_path / "run", tmp_path / "export", text_file, weights_dtype="float32")
    finally:
        os.umask(before)
    assert (tmp_path / "export").stat().st_mode & 0o777 == 0o777 & ~umask
    modes = {p.name: p.stat().st_mode & 0o777 for p in (tmp_path / "export").iterdir()}
    assert modes == {name: 0o666 & ~umask for name in export.EXPORT_FILES}


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


def test_new_data_without_resume_is_refused_as_private_without_push_is(capsys):
    for flags, words in [(["--new-data"], "--new-data needs --resume"), (["--private"], "--private needs --push")]:
        with pytest.raises(SystemExit):
            train.parse_args(flags)
        assert f"error: {words}" in capsys.readouterr().err.strip().splitlines()[-1]


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


def test_a_training_text_that_cannot_be_read_is_one_line(text_file, tmp_path, monkeypatch):
    from training import corpus

    def unreadable(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(corpus, "open", unreadable, raising=False)
    with pytest.raises(SystemExit) as stopped:
        train.cli(["--data", str(text_file), "--out-dir", str(tmp_path / "run"), *TINY_ARGS, "--max-steps", "2"])
    assert str(stopped.value) == f"error: training text {text_file} could not be read (Permission denied)"


def test_files_added_to_the_export_folder_while_it_runs_are_kept(tmp_path):
    from training.export_dir import replace_directory, write_manifest

    earlier, staging = tmp_path / "export", tmp_path / ".export.new"
    for folder, text in ((earlier, "old"), (staging, "new")):
        folder.mkdir()
        (folder / "model.safetensors").write_text(text)
        write_manifest(folder)
    (earlier / "notes.txt").write_text("mine")  # came while the export evaluated the model
    with pytest.raises(ValueError, match=r"gained files the export did not write while it ran \(notes\.txt\)"):
        replace_directory(staging, earlier)
    assert (earlier / "notes.txt").read_text() == "mine" and (earlier / "model.safetensors").read_text() == "old"


def test_evaluate_on_a_full_disk_leaves_no_empty_out_and_names_the_file(tmp_path, monkeypatch, tiny_text):
    # a full disk left an empty --out and a message that named no file
    import errno

    from training import evaluate

    torch.manual_seed(0)
    MDLM(CharTokenizer.from_text(tiny_text).vocab, n_layer=1, n_head=2, n_embd=16, block_size=32).save_pretrained(
        tmp_path / "model"
    )
    (tmp_path / "text.txt").write_text(tiny_text)

    def full_disk(path, payload):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(evaluate, "atomic_write_bytes", full_disk)
    args = ["--model", str(tmp_path / "model"), "--data", str(tmp_path / "text.txt"), "--nll-chars", "8"]
    with pytest.raises(SystemExit, match=r"could not write .*metrics\.json \(No space left on device\)"):
        evaluate.main([*args, "--num-samples", "1", "--out", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()


def test_a_file_that_arrives_during_the_swap_is_kept_not_deleted(tmp_path, monkeypatch):
    # replace_directory checked for foreign files and then renamed: a file created in between was deleted
    from training import export_dir as swap

    export, staging = tmp_path / "model", tmp_path / ".model.staging"
    for folder in (export, staging):
        folder.mkdir()
        (folder / "config.json").write_text("{}")
        swap.write_manifest(folder)
    checked = swap.foreign_entries

    def arrives_after_the_check(directory):
        found = checked(directory)
        if directory == export:
            (export / "notes.txt").write_text("the user's")  # written just after the export looked
        return found

    monkeypatch.setattr(swap, "foreign_entries", arrives_after_the_check)
    with pytest.raises(ValueError, match=r"notes\.txt"):
        swap.replace_directory(staging, export)
    assert (export / "notes.txt").read_text() == "the user's" and staging.is_dir()
