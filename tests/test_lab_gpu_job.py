"""The GPU job rehearsed on the CPU at a tiny size, its packing, and the --train-extra text it trains on."""

import json
import math
import tarfile

import numpy as np
import pytest
import torch

from lab import gpu_job
from training.corpus import load_tokens, scan_text, tokenize


def write_text(path, lines: int, speaker: str = "CLAUDIUS") -> str:
    speakers = speaker.split("+")
    text = "".join(
        f"{speakers[i % len(speakers)]}:\nThis is line {i} of a small play, for a test.\n\n" for i in range(lines)
    )
    path.write_text(text)
    return text


def test_train_extra_joins_the_training_split_only(tmp_path):
    data = write_text(tmp_path / "data.txt", 40)
    extra = write_text(tmp_path / "extra.txt", 10, speaker="BERNARDO")
    paths, extra_paths = [tmp_path / "data.txt"], [tmp_path / "extra.txt"]
    corpus = tokenize(paths, tmp_path / "run", scan_text(paths), None, extra_paths, scan_text(extra_paths))
    cut = int(len(data) * 0.9)
    decode = "".join
    vocab = corpus.vocab
    assert decode(vocab[i] for i in np.asarray(corpus.train)) == data[:cut] + "\n" + extra
    assert decode(vocab[i] for i in np.asarray(corpus.val)) == data[cut:]
    assert json.loads((tmp_path / "run" / "tokens.json").read_text())["train_extra"]["chars"] == len(extra)
    # another extra text is another corpus: the token files are written again
    write_text(tmp_path / "extra.txt", 12, speaker="BERNARDO")
    corpus = tokenize(paths, tmp_path / "run", scan_text(paths), None, extra_paths, scan_text(extra_paths))
    assert (
        len(load_tokens(tmp_path / "run").train)
        == cut + 1 + 12 * len("BERNARDO:\nThis is line 0 of a small play, for a test.\n\n") + 2
    )


def test_pack_splits_an_export_into_parts(tmp_path, monkeypatch):
    export = tmp_path / "model"
    export.mkdir()
    (export / "model.safetensors").write_bytes(bytes(range(256)) * 64)
    monkeypatch.setattr(gpu_job, "PART_BYTES", 4096)
    names = gpu_job.pack(export, tmp_path)
    assert len(names) > 1 and all((tmp_path / name).stat().st_size <= 4096 for name in names)
    (tmp_path / "joined.tar").write_bytes(b"".join((tmp_path / name).read_bytes() for name in names))
    with tarfile.open(tmp_path / "joined.tar") as tar:
        assert tar.extractfile("model/model.safetensors").read() == bytes(range(256)) * 64


def job_texts(tmp_path):
    """The tiny job's text, the other plays and the held-out plays, written under `tmp_path`."""
    data, extra, heldout = (tmp_path / name for name in ("tiny.txt", "extra.txt", "heldout.txt"))
    write_text(data, 600, speaker="CLAUDIUS+BERNARDO")
    write_text(extra, 60, speaker="BERNARDO")
    write_text(heldout, 40, speaker="BERNARDO")
    return data, extra, heldout


@pytest.mark.slow
def test_the_job_runs_end_to_end_at_a_tiny_size(tmp_path):
    data, extra, heldout = job_texts(tmp_path)
    out = tmp_path / "out"
    argv = ["--tiny", "--data", str(data), "--train-extra", str(extra), "--heldout", str(heldout)]
    argv += ["--out", str(out), "--work", str(tmp_path / "work"), "--steps", "6", "--batch-size", "4"]
    metrics = gpu_job.main(argv)
    assert metrics["failed"] == []
    assert set(metrics["scores"]) == {run.name for run in gpu_job.RUNS}
    assert metrics["scores"]["plays-d320"]["val_elbo"] > 0 and metrics["scores"]["twin-plays-d320"]["val_nll"] > 0
    assert metrics["scores"]["twin-plays-d256"]["val_nll"] > 0  # the shipped model's twin on its text
    returned = {run.name for run in gpu_job.RUNS if run.returned}
    assert sorted(metrics["files"]) == sorted(f"{name}.tar" for name in returned)
    with tarfile.open(out / "plays-d320.tar") as tar:
        assert {"plays-d320/model.safetensors", "plays-d320/README.md", "plays-d320/metrics.json"} <= set(
            tar.getnames()
        )
    assert json.loads((out / "metrics.json").read_text())["curves"]["tiny-d320"]["val"]
    assert (out / "curves.png").stat().st_size > 0
    assert len(list(out.iterdir())) <= 8  # the device returns at most 8 files


def test_the_job_refuses_held_out_characters_the_model_cannot_read(tmp_path, capsys):
    for name, speaker in (("tiny.txt", "CLAUDIUS"), ("extra.txt", "BERNARDO"), ("heldout.txt", "OTHELLO")):
        write_text(tmp_path / name, 5, speaker)
    argv = ["--tiny", "--data", str(tmp_path / "tiny.txt"), "--train-extra", str(tmp_path / "extra.txt")]
    with pytest.raises(SystemExit):
        gpu_job.main([*argv, "--heldout", str(tmp_path / "heldout.txt"), "--out", str(tmp_path / "out")])
    assert "--heldout has characters the training text lacks: 'H'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_the_job_refuses_a_missing_file_in_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit):
        gpu_job.main(
            ["--tiny", "--data", str(tmp_path / "nope.txt"), "--train-extra", "x", "--heldout", "y", "--out", "o"]
        )
    assert "does not exist" in capsys.readouterr().err


def test_the_job_refuses_an_unknown_run(tmp_path, capsys):
    for name in ("tiny.txt", "extra.txt", "heldout.txt"):
        write_text(tmp_path / name, 5)
    argv = ["--tiny", "--data", str(tmp_path / "tiny.txt"), "--train-extra", str(tmp_path / "extra.txt")]
    with pytest.raises(SystemExit):
        gpu_job.main([*argv, "--heldout", str(tmp_path / "heldout.txt"), "--out", str(tmp_path / "o"), "--runs", "x"])
    assert "--runs: no run named x" in capsys.readouterr().err


def test_a_plan_file_chooses_the_runs_and_settings_and_its_mistakes_are_one_line(tmp_path, capsys):
    plan = {
        "runs": [{"name": "plays-d384", "n_embd": 384, "n_head": 6, "extra_text": True}],
        "steps": 9000,
        "minutes": 8.5,
        "compile": True,
    }
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    runs, settings = gpu_job.read_plan(tmp_path / "plan.json")
    assert runs == (gpu_job.Run("plays-d384", 384, 6, extra_text=True),)
    assert settings == {"steps": 9000, "minutes": 8.5, "compile": True}
    assert gpu_job.tiny(runs)[0].n_embd == 32
    bad = {
        "no runs": {"runs": []},
        "an unknown key": {"runs": plan["runs"], "stepz": 3},
        "a width its heads do not divide": {"runs": [{"name": "x", "n_embd": 100, "n_head": 3, "extra_text": True}]},
        "a field runs lack": {"runs": [{"name": "x", "n_embd": 64, "n_head": 2, "extra_text": True, "lr": 1}]},
        "a setting of the wrong type": {"runs": plan["runs"], "compile": "yes"},
        "two runs of one name": {"runs": plan["runs"] * 2},
    }
    for what, content in bad.items():
        (tmp_path / "bad.json").write_text(json.dumps(content))
        with pytest.raises(ValueError, match=f"--plan {tmp_path / 'bad.json'}") as error:
            gpu_job.read_plan(tmp_path / "bad.json")
        assert "\n" not in str(error.value), what
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(SystemExit):
        gpu_job.main(
            ["--data", "x", "--train-extra", "y", "--heldout", "z", "--out", "o", "--plan", str(tmp_path / "bad.json")]
        )
    assert "is not a readable JSON file" in capsys.readouterr().err


@pytest.mark.slow
def test_a_compiled_run_trains_and_resumes_on_the_cpu(tmp_path):
    # --compile is measured on a GPU in the job's first call; here it must train, save and resume as an eager run
    from training import train

    (tmp_path / "text.txt").write_text("".join(f"ROMEO:\nThis is line {i} of a play.\n\n" for i in range(200)))
    flags = ["--data", str(tmp_path / "text.txt"), "--out-dir", str(tmp_path / "run"), "--n-layer", "1"]
    flags += ["--n-embd", "32", "--n-head", "2", "--block-size", "32", "--batch-size", "4", "--warmup-steps", "2"]
    flags += ["--eval-interval", "2", "--eval-chars", "256", "--eval-samples", "1", "--threads", "1"]
    flags += ["--dtype", "float32", "--compile"]
    first = train.main([*flags, "--max-steps", "4", "--stop-at-step", "2"])
    assert first["step"] == 2
    resumed = train.main([*flags, "--max-steps", "4", "--resume"])
    assert resumed["finished"] and all(torch.isfinite(p).all() for p in resumed["model"].parameters())


def test_the_8_pass_students_distillation_runs_at_a_tiny_size(tmp_path, tiny_model, tiny_text):
    # SDTT: each round the student learns in one step what its teacher writes in two; the job's CPU dry run
    from lab import distill
    from mdlm_hf import MDLM
    from training.words import save_word_list

    tiny_model.save_pretrained(tmp_path / "teacher")
    save_word_list(tiny_text, tmp_path / "teacher" / "words.txt")
    (tmp_path / "text.txt").write_text(tiny_text * 20)
    flags = ["--teacher", str(tmp_path / "teacher"), "--data", str(tmp_path / "text.txt")]
    flags += ["--out-dir", str(tmp_path / "out"), "--rounds", "2", "--steps", "3", "--batch-size", "4"]
    facts = distill.main(flags)
    assert sorted(facts) == [8, 16] and all(math.isfinite(f["last_kl"]) and f["last_kl"] >= 0 for f in facts.values())
    student = MDLM.from_pretrained(tmp_path / "out" / "student-8")
    assert (tmp_path / "out" / "student-8" / "words.txt").is_file()
    text = student.generate(64, num_steps=8, seed=0, real_words=True)
    assert len(text) == 64
    teacher = MDLM.from_pretrained(tmp_path / "teacher")
    x0 = torch.tensor([teacher.tokenizer.encode(tiny_text[:64])])
    loss = distill.distill_loss(teacher, teacher, x0, 16, torch.Generator().manual_seed(0))
    assert torch.isfinite(loss) and loss >= 0


def test_the_committed_plans_read_and_their_warm_starts_fit_the_shipped_models():
    plans = sorted((gpu_job.Path(__file__).resolve().parent.parent / "lab" / "plans").glob("*.json"))
    assert plans
    for path in plans:
        runs, _ = gpu_job.read_plan(path)
        for run in runs:
            assert gpu_job.warm_start_problem(run) is None, (path.name, run.name)
    mismatched = gpu_job.Run("x", 320, 5, True, "diffusion", init_from="pretrained/mdlm-shakespeare-char")
    assert "is not a diffusion model of n_embd 320" in gpu_job.warm_start_problem(mismatched)
    missing = gpu_job.Run("x", 256, 4, True, "ar", init_from="pretrained/none")
    assert "has no readable config.json" in gpu_job.warm_start_problem(missing)


def test_a_plans_student_needs_its_teacher(tmp_path):
    (tmp_path / "plan.json").write_text(
        json.dumps({"runs": [{"name": "s", "n_embd": 32, "n_head": 2, "extra_text": True, "objective": "student"}]})
    )
    with pytest.raises(ValueError, match="student 's' needs init_from"):
        gpu_job.read_plan(tmp_path / "plan.json")


def test_the_students_rounds_share_max_minutes(tmp_path, tiny_model, tiny_text):
    from lab import distill

    tiny_model.save_pretrained(tmp_path / "teacher")
    (tmp_path / "text.txt").write_text(tiny_text * 20)
    flags = ["--teacher", str(tmp_path / "teacher"), "--data", str(tmp_path / "text.txt"), "--batch-size", "2"]
    flags += ["--out-dir", str(tmp_path / "out"), "--rounds", "2", "--steps", "100000", "--max-minutes", "0.001"]
    started = gpu_job.time.perf_counter()
    facts = distill.main(flags)
    assert sorted(facts) == [8, 16] and gpu_job.time.perf_counter() - started < 30


@pytest.mark.slow
def test_the_next_windows_plan_runs_end_to_end_at_a_tiny_size(tmp_path):
    # warm starts from tiny parents the rehearsal trains first, the twin beside the model, the student beside both
    data, extra, heldout = job_texts(tmp_path)
    out, plan = tmp_path / "out", gpu_job.Path(__file__).resolve().parent.parent / "lab" / "plans" / "v5.json"
    argv = ["--tiny", "--data", str(data), "--train-extra", str(extra), "--heldout", str(heldout), "--plan", str(plan)]
    argv += ["--out", str(out), "--work", str(tmp_path / "work"), "--steps", "6", "--batch-size", "4"]
    metrics = gpu_job.main(argv)
    assert metrics["failed"] == []
    assert set(metrics["scores"]) == {"v4", "twin-v4", "student-8"}
    assert metrics["scores"]["v4"]["val_elbo"] > 0 and metrics["scores"]["twin-v4"]["val_nll"] > 0
    assert metrics["scores"]["student-8"]["val_elbo"] > 0
    assert sorted(metrics["files"]) == ["student-8.tar", "twin-v4.tar", "v4.tar"]
    for name in ("v4", "twin-v4"):
        with tarfile.open(out / f"{name}.tar") as tar:
            stages = json.load(tar.extractfile(f"{name}/metrics.json"))["training"]["stages"]
        assert [stage["steps"] for stage in stages] == [6, 6], name  # the parent's stage, then the warm start's
        assert stages[1]["init_from"].endswith(str(gpu_job.Path("export") / f"parent-{int(name != 'v4')}"))
