"""The ship check of a returned GPU job: its bars on hand-made figures (each failing alone), its unpacking and
copying, its one-line errors, and (slow) the whole check on a tiny job's OUT, against incumbents it must replace
and incumbents it must keep."""

import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest
import torch

from evals import invented_words
from evals.structure_suite import BLANK, PROMPTS
from lab import gpu_job, ship_bars, ship_check, ship_figures, ship_unpack
from mdlm_hf import MDLM
from training.export_dir import MANIFEST, manifest_files, write_manifest

REFERENCE_HEADINGS = 8.2  # real text's heading rate in the hand-made figures
STRUCTURE = {  # (candidate, incumbent): equal, so that each test changes one
    "free/real_names": (0.95, 0.95),
    "free/same_play": (0.80, 0.80),
    "free/empty_speeches": (0.01, 0.01),
    "free/headings_per_1k": (8.0, 8.0),
    "infill/real_names": (0.97, 0.97),
}
SAMPLING = {"invented_per_1k": (3.0, 3.0), **STRUCTURE}
DIFFUSION = {
    "val_elbo": (1.40, 1.45),
    "val_exact_nll": (1.38, 1.42),
    "heldout_elbo": (1.90, 2.00),
    **SAMPLING,
    "generate_256_s": (1.1, 1.0),
}
STUDENT = {**SAMPLING, "generate_256_s": (0.30, 1.0)}
TWIN = {"val_nll": (1.43, 1.4357), "heldout_nll": (1.9, 1.8)}


@pytest.fixture(autouse=True)
def torch_threads():
    """The check sets torch's threads (--threads); the tests that follow get theirs back."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def figures(base: dict, **changed: tuple) -> dict:
    """Hand-made figures: `base` with the `changed` pairs (figure names with "/" written as "__")."""
    pairs = {**base, **{name.replace("__", "/"): pair for name, pair in changed.items()}}
    return {name: {"candidate": pair[0], "incumbent": pair[1]} for name, pair in pairs.items()}


def failed(objective: str, found: dict, extra_text: bool = True) -> set[str]:
    checks = ship_bars.decide(objective, found, extra_text, REFERENCE_HEADINGS)
    return {name for name, reason in checks.items() if reason}


def test_figures_that_meet_every_bar_ship():
    assert failed("diffusion", figures(DIFFUSION)) == set()
    assert failed("student", figures(STUDENT)) == set()
    assert failed("ar", figures(TWIN)) == set()
    # within the slacks: sampling noise is not a failure
    within = dict(
        invented_per_1k=(3.9, 3.0),
        free__real_names=(0.935, 0.95),
        free__same_play=(0.785, 0.80),
        free__empty_speeches=(0.025, 0.01),
        free__headings_per_1k=(8.9, 8.0),  # 8.5 % from real text's rate, the incumbent's 2.4 %: within 10 points
        generate_256_s=(1.19, 1.0),
    )
    assert failed("diffusion", figures(DIFFUSION, **within)) == set()


@pytest.mark.parametrize(
    "figure, pair",
    [
        ("val_elbo", (1.45, 1.45)),  # equal is not better
        ("val_exact_nll", (1.43, 1.42)),
        ("heldout_elbo", (2.01, 2.00)),
        ("invented_per_1k", (4.1, 3.0)),
        ("free/real_names", (0.92, 0.95)),
        ("free/same_play", (0.77, 0.80)),
        ("free/empty_speeches", (0.04, 0.01)),
        ("free/headings_per_1k", (10.0, 8.0)),
        ("free/headings_per_1k", (6.5, 8.0)),  # too few is as far from real text as too many
        ("infill/real_names", (0.90, 0.97)),  # every prompt, not only free text
        ("generate_256_s", (1.25, 1.0)),
    ],
)
def test_each_bar_of_a_diffusion_model_fails_alone(figure, pair):
    assert failed("diffusion", figures(DIFFUSION, **{figure.replace("/", "__"): pair})) == {figure}


@pytest.mark.parametrize(
    "figure, pair",
    [
        ("invented_per_1k", (4.1, 3.0)),
        ("free/real_names", (0.90, 0.95)),
        ("infill/real_names", (0.90, 0.97)),
        ("free/headings_per_1k", (0.0, 8.0)),
        ("generate_256_s", (0.36, 1.0)),  # faster, but not by enough to be worth an option
    ],
)
def test_each_bar_of_a_student_fails_alone(figure, pair):
    assert failed("student", figures(STUDENT, **{figure.replace("/", "__"): pair})) == {figure}
    # a student's likelihoods bar nothing; a worse one is no failure
    assert failed("student", figures(STUDENT, val_elbo=(2.0, 1.4))) == set()


def test_each_bar_of_a_twin_fails_alone():
    assert failed("ar", figures(TWIN, val_nll=(1.4357, 1.4357))) == {"val_nll"}
    assert failed("ar", figures(TWIN), extra_text=False) == {"extra_text"}
    # the held-out NLL and the sampling figures are shown, not held to a bar
    assert failed("ar", figures(TWIN, invented_per_1k=(9.0, 3.0), generate_256_s=(9.0, 1.0))) == set()


def test_missing_figures_fail_the_bars_that_need_them_and_nothing_to_count_is_no_failure():
    found = figures(DIFFUSION)
    del found["val_exact_nll"]
    found["free/same_play"] = {"candidate": None, "incumbent": 0.8}  # no two speakers in a row: nothing to count
    found["free/real_names"] = {"candidate": 0.9, "incumbent": None}
    assert failed("diffusion", found) == {"val_exact_nll"}
    found = figures(DIFFUSION, free__headings_per_1k=(None, 8.0))  # it could not write the prompt
    assert failed("diffusion", found) == {"free/headings_per_1k"}


def record(run: str, objective: str, figure: float, fails: bool = False) -> dict:
    found = {"val_elbo": {"candidate": figure}, "val_nll": {"candidate": figure}}
    return dict(
        run=run,
        objective=objective,
        target=f"pretrained/{ship_figures.TARGETS[objective]}",  # as check_run records it: the folder's path
        figures=found,
        checks={"val_elbo": "worse" if fails else None},
    )


def test_the_best_of_several_winners_ships_and_the_others_say_why_not():
    records = {
        "a": record("a", "diffusion", 1.45),
        "b": record("b", "diffusion", 1.40),
        "c": record("c", "diffusion", 1.30, fails=True),
        "twin": record("twin", "ar", 1.40),
    }
    ship_bars.choose_winners(records)
    verdicts = {name: r["verdict"] for name, r in records.items()}
    assert verdicts == {
        "a": "passes, but b is better",
        "b": "ship",
        "c": "keep the incumbent: worse",
        "twin": "ship",
    }


def export_folder(path, files: dict[str, str], manifest: bool = True):
    path.mkdir(parents=True)
    for name, text in files.items():
        (path / name).write_text(text)
    if manifest:
        write_manifest(path)
    return path


def test_a_winner_is_swapped_in_whole_keeping_the_incumbents_casts(tmp_path):
    incumbent = export_folder(tmp_path / "pre" / "model", {"config.json": "old", "casts.json": "casts", "x.png": "x"})
    candidate = export_folder(tmp_path / "cand", {"config.json": "new", "words.txt": "w"}, manifest=False)
    assert ship_check.keep_incumbent_files(candidate, incumbent) == ["casts.json"]
    assert ship_check.keep_incumbent_files(candidate, incumbent) == []  # it has one now
    ship_check.ship(candidate, incumbent)
    assert {p.name for p in incumbent.iterdir()} == {"config.json", "casts.json", "words.txt", MANIFEST}
    assert (incumbent / "config.json").read_text() == "new" and (incumbent / "casts.json").read_text() == "casts"
    assert manifest_files(incumbent) == {"config.json", "casts.json", "words.txt"}  # the next swap may replace it
    assert sorted(p.name for p in incumbent.parent.iterdir()) == ["model"]  # no staging, no backup left
    ship_check.ship(candidate, tmp_path / "pre" / "student")  # a target not there yet
    assert (tmp_path / "pre" / "student" / "config.json").read_text() == "new"


def test_a_target_holding_files_no_export_wrote_is_refused_and_left_alone(tmp_path):
    target = export_folder(tmp_path / "pre" / "model", {"config.json": "old"})
    (target / "notes.txt").write_text("mine")
    candidate = export_folder(tmp_path / "cand", {"config.json": "new"})
    with pytest.raises(ValueError, match="notes.txt"):
        ship_check.ship(candidate, target)
    assert (target / "config.json").read_text() == "old" and (target / "notes.txt").is_file()
    assert sorted(p.name for p in target.parent.iterdir()) == ["model"]


def export_tar(tmp_path, name: str) -> bytes:
    """A fake export packed whole, as the job packs it (`tar.add(export, arcname=NAME)`)."""
    export = export_folder(tmp_path / "export" / name, {"config.json": "{}", "model.safetensors": "w" * 5000})
    with tarfile.open(tmp_path / "packed.tar", "w") as tar:
        tar.add(export, arcname=name)
    return (tmp_path / "packed.tar").read_bytes()


def packed(tmp_path, monkeypatch, part_bytes: int | None = None) -> tuple:
    """An export "m" packed into OUT as the job packs it (in parts where `part_bytes` is given)."""
    export = export_folder(tmp_path / "export" / "m", {"config.json": "{}", "model.safetensors": "w" * 5000})
    out = tmp_path / "out"
    out.mkdir()
    if part_bytes:
        monkeypatch.setattr(gpu_job, "PART_BYTES", part_bytes)
    files = gpu_job.pack(export, out)
    metrics = {"runs": {"m": {"name": "m", "objective": "diffusion", "returned": True}}, "files": files}
    (out / "metrics.json").write_text(json.dumps(metrics))
    return out, metrics


def test_parts_are_joined_and_unpacked_and_nothing_else_is_left(tmp_path, monkeypatch):
    out, metrics = packed(tmp_path, monkeypatch, part_bytes=4096)
    parts = ship_unpack.run_files(metrics, out, "m")
    assert len(parts) > 2 and [p.name for p in parts] == [f"m.tar.{i:02d}" for i in range(len(parts))]
    work = tmp_path / "work"
    work.mkdir()
    unpacked = ship_unpack.unpack(parts, work, "m")
    assert unpacked == work / "m" and (unpacked / "model.safetensors").read_text() == "w" * 5000
    assert [p.name for p in work.iterdir()] == ["m"]  # the joined tar and the staging are gone
    assert ship_unpack.unpack(parts, work, "m") == unpacked  # again: the earlier unpacking is replaced


@pytest.mark.parametrize("name", ["/etc/evil", "m/../../evil", "other/config.json"])
def test_a_member_outside_the_runs_folder_is_refused(tmp_path, name):
    (tmp_path / "payload").write_text("x")
    with tarfile.open(tmp_path / "m.tar", "w") as tar:
        tar.add(tmp_path / "payload", arcname="m/config.json")
        tar.add(tmp_path / "payload", arcname=name)
    (tmp_path / "work").mkdir()
    with pytest.raises(ValueError, match="outside m/"):
        ship_unpack.unpack([tmp_path / "m.tar"], tmp_path / "work", "m")
    assert not (tmp_path / "evil").exists() and list((tmp_path / "work").iterdir()) == []


def error_line(argv: list[str], capsys) -> str:
    """The one line a refused command says (parser.error's last line, or sys.exit's message)."""
    with pytest.raises(SystemExit) as exited:
        ship_check.main(argv)
    message = exited.value.code if isinstance(exited.value.code, str) else capsys.readouterr().err.splitlines()[-1]
    assert "\n" not in message and "Traceback" not in message
    return message


def test_bad_input_is_one_line(tmp_path, monkeypatch, capsys):
    (tmp_path / "data.txt").write_text("ROMEO:\nAy me.\n\n" * 40)
    texts = ["--data", str(tmp_path / "data.txt"), "--heldout", str(tmp_path / "data.txt")]
    assert "is not a folder" in error_line([str(tmp_path / "nope"), *texts], capsys)
    (tmp_path / "empty").mkdir()
    assert "metrics.json is missing" in error_line([str(tmp_path / "empty"), *texts], capsys)
    out, metrics = packed(tmp_path, monkeypatch, part_bytes=4096)
    assert "no run named x" in error_line([str(out), "--runs", "x", *texts], capsys)
    (out / "m.tar.02").unlink()
    assert "m.tar.02 is missing" in error_line([str(out), *texts], capsys)
    (out / "m.tar.02").write_bytes(b"\0" * 100)  # a part cut short
    assert "m.tar.02 has 100 bytes, not" in error_line([str(out), *texts], capsys)
    for part in out.glob("m.tar.*"):
        part.unlink()
    metrics["files"] = ["m.tar"]
    (out / "metrics.json").write_text(json.dumps(metrics))
    whole = export_tar(tmp_path / "again", "m")
    with tarfile.open(fileobj=io.BytesIO(whole)) as tar:
        cut = tar.getmember("m/model.safetensors").offset_data + 100
    (out / "m.tar").write_bytes(whole[:cut])  # the last part cut short: the tar ends inside a member
    assert "m.tar is not a readable tar" in error_line([str(out), *texts], capsys)
    (out / "m.tar").write_bytes(b"not a tar at all" * 100)
    assert "m.tar is not a readable tar" in error_line([str(out), *texts], capsys)
    (out / "m.tar").write_bytes(whole)
    pretrained = ["--pretrained", str(tmp_path / "pretrained")]
    assert "mdlm-shakespeare-char holds no model" in error_line([str(out), *texts, *pretrained], capsys)
    export_folder(tmp_path / "pretrained" / "mdlm-shakespeare-char", {"config.json": "{}"})
    assert "has no 'vocab'" in error_line([str(out), *texts, *pretrained], capsys)  # an export that does not load
    metrics["runs"]["m"]["objective"] = "gan"
    (out / "metrics.json").write_text(json.dumps(metrics))
    assert "objective 'gan'" in error_line([str(out), *texts], capsys)
    (out / "metrics.json").write_text("{")
    assert "not readable JSON" in error_line([str(out), *texts], capsys)


# --- the whole check on a tiny job (slow: the job trains, exports and scores two tiny runs, about 2 minutes) ---


def write_text(path, lines: int, speaker: str) -> None:
    """A small play, as tests/test_lab_gpu_job.py writes one."""
    names = speaker.split("+")
    path.write_text(
        "".join(f"{names[i % len(names)]}:\nThis is line {i} of a small play, for a test.\n\n" for i in range(lines))
    )


@pytest.fixture(scope="module")
def job(tmp_path_factory) -> dict:
    """A tiny job's OUT (a diffusion run and its twin, and a student packed beside them as the job would) and the
    texts it read."""
    tmp = tmp_path_factory.mktemp("job")
    data, extra, heldout = (tmp / name for name in ("tiny.txt", "extra.txt", "heldout.txt"))
    write_text(data, 600, "CLAUDIUS+BERNARDO")
    prompts = "".join(prompt.replace(BLANK, "") for prompt in PROMPTS.values())
    data.write_text(data.read_text() + prompts)  # the models can read the structure suite's prompts
    write_text(extra, 60, "BERNARDO")
    write_text(heldout, 40, "BERNARDO")
    out = tmp / "out"
    argv = ["--tiny", "--data", str(data), "--train-extra", str(extra), "--heldout", str(heldout), "--out", str(out)]
    argv += ["--work", str(tmp / "work"), "--steps", "40", "--batch-size", "4"]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the job scores in this process: one thread each is fastest on a busy machine
    try:
        gpu_job.main([*argv, "--runs", "plays-d320", "twin-plays-d320"])
    finally:
        torch.set_num_threads(threads)
    # a student (lab.distill's export: save_pretrained with the teacher's words.txt and demo.json, no casts)
    export = tmp / "work" / "export" / "plays-d320"
    student = tmp / "student" / "student-8"
    MDLM.from_pretrained(export).save_pretrained(student)
    for name in ("words.txt", "demo.json"):
        shutil.copyfile(export / name, student / name)
    metrics = json.loads((out / "metrics.json").read_text())
    metrics["runs"]["student-8"] = {"name": "student-8", "objective": "student", "extra_text": True, "returned": True}
    metrics["files"] += gpu_job.pack(student, out)
    (out / "metrics.json").write_text(json.dumps(metrics))
    vocab = MDLM.from_pretrained(export).tokenizer.vocab
    return dict(out=out, data=data, heldout=heldout, exports=tmp / "work" / "export", vocab=vocab)


def untrained(folder, vocab: str, causal: bool, n_embd: int) -> None:
    """A clearly worse incumbent: untrained, wider (slower), a bare save_pretrained folder and its manifest."""
    torch.manual_seed(0)
    MDLM(vocab, n_layer=8, n_head=4, n_embd=n_embd, block_size=256, causal=causal).save_pretrained(folder)
    write_manifest(folder)


def check(job: dict, tmp_path, pretrained, *flags: str) -> dict:
    out = tmp_path / "out"
    if not out.exists():
        shutil.copytree(job["out"], out)
    argv = [str(out), "--pretrained", str(pretrained), "--data", str(job["data"]), "--heldout", str(job["heldout"])]
    argv += ["--corpus", str(tmp_path / "no-corpus.txt"), "--samples", "2", "--nll-chars", "256", "--threads", "1"]
    return ship_check.main([*argv, *flags])


def snapshot(folder) -> dict:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


STRUCTURE_FIGURES = [f"{prompt}/{figure}" for prompt in PROMPTS for figure in ship_figures.STRUCTURE]
EXPECTED = {
    "plays-d320": {
        "val_elbo",
        "val_exact_nll",
        "heldout_elbo",
        "invented_per_1k",
        "generate_256_s",
        *STRUCTURE_FIGURES,
    },
    "twin-plays-d320": {"val_nll", "heldout_nll", "extra_text", "invented_per_1k", "generate_256_s"}
    | {name for name in STRUCTURE_FIGURES if not name.startswith("infill/")},  # a twin fills no template
    "student-8": {"invented_per_1k", *STRUCTURE_FIGURES, "generate_256_s"},
}


def assert_every_figure(report: dict, printed: str, runs: list[str]) -> None:
    assert list(report["candidates"]) == runs
    for run in runs:
        found = report["candidates"][run]["figures"]
        assert set(found) == EXPECTED[run]
        for figure in found:
            assert f"| {run} | {figure} |" in printed
        for figure in ("invented_per_1k", "generate_256_s", "val_elbo", "val_nll"):
            if figure in found:
                assert all(isinstance(found[figure][side], float) for side in ("candidate", "incumbent"))
        assert f"- {run} (" in printed
    assert json.loads((Path(report["out"]) / "ship_check.json").read_text()) == report


@pytest.mark.slow
def test_a_clearly_better_job_ships_and_is_copied_unless_told_not_to(job, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(invented_words, "fetch_texts", lambda directory: {})  # the lexicon: the tiny text's words
    pretrained = tmp_path / "pretrained"
    untrained(pretrained / "mdlm-shakespeare-char", job["vocab"], causal=False, n_embd=256)
    untrained(pretrained / "mdlm-shakespeare-char-ar", job["vocab"], causal=True, n_embd=64)
    before = snapshot(pretrained)
    report = check(job, tmp_path, pretrained, "--runs", "student-8", "--no-copy")
    assert report["candidates"]["student-8"]["verdict"] == "ship" and report["copied"] == []
    assert snapshot(pretrained) == before  # --no-copy: nothing copied
    capsys.readouterr()
    report = check(job, tmp_path, pretrained)
    printed = capsys.readouterr().out
    runs = ["plays-d320", "twin-plays-d320", "student-8"]
    assert_every_figure(report, printed, runs)
    for run in runs:
        record = report["candidates"][run]
        assert record["verdict"] == "ship", record["failed"]
        assert record["likelihood_source"].startswith("measured here" if run != "student-8" else "none")
        assert set(record["checks"]) >= ({"val_nll", "extra_text"} if run.startswith("twin") else {"generate_256_s"})
    assert report["copied"] == runs
    unpacked = tmp_path / "out" / "unpacked"
    for run, target in (("plays-d320", "mdlm-shakespeare-char"), ("twin-plays-d320", "mdlm-shakespeare-char-ar")):
        shipped = snapshot(pretrained / target)
        assert shipped["model.safetensors"] == (unpacked / run / "model.safetensors").read_bytes()
        assert {"casts.json", "words.txt", "demo.json", MANIFEST} <= set(shipped)
    student = pretrained / "mdlm-shakespeare-char-student-8"
    assert MDLM.from_pretrained(student).generate(16, num_steps=8, seed=0)  # its own folder, loadable
    assert manifest_files(student) == {p.name for p in student.iterdir()} - {MANIFEST}
    assert sorted(p.name for p in pretrained.iterdir()) == [
        "mdlm-shakespeare-char",
        "mdlm-shakespeare-char-ar",
        "mdlm-shakespeare-char-student-8",
    ]


@pytest.mark.slow
def test_a_job_no_better_than_the_shipped_models_is_not_copied(job, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(invented_words, "fetch_texts", lambda directory: {})
    # the incumbents are the candidates themselves, and the job scored them as "shipped": not better, so kept
    pretrained = tmp_path / "pretrained"
    for run, target in (("plays-d320", "mdlm-shakespeare-char"), ("twin-plays-d320", "mdlm-shakespeare-char-ar")):
        shutil.copytree(job["exports"] / run, pretrained / target)
    shutil.copytree(job["out"], tmp_path / "out")
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    metrics["scores"]["shipped"] = metrics["scores"]["plays-d320"]
    metrics["scores"]["shipped-twin"] = metrics["scores"]["twin-plays-d320"]
    (tmp_path / "out" / "metrics.json").write_text(json.dumps(metrics))
    before = snapshot(pretrained)
    report = check(job, tmp_path, pretrained, "--runs", "plays-d320", "twin-plays-d320")
    printed = capsys.readouterr().out
    assert_every_figure(report, printed, ["plays-d320", "twin-plays-d320"])
    diffusion, twin = report["candidates"]["plays-d320"], report["candidates"]["twin-plays-d320"]
    for record, figures in ((diffusion, ship_figures.LIKELIHOODS["diffusion"]), (twin, ship_figures.LIKELIHOODS["ar"])):
        # the job's figures, each measured again here (on the whole tiny texts) and found to be these models'
        assert record["likelihood_source"].startswith("the job's (checked here: ")
        assert all(f"{figure} on " in record["likelihood_source"] for figure in figures)
    assert {"val_elbo", "val_exact_nll", "heldout_elbo"} <= {n for n, r in diffusion["checks"].items() if r}
    assert diffusion["verdict"].startswith("keep the incumbent: val_elbo")
    assert twin["verdict"].startswith("keep the incumbent: val_nll")
    assert "| plays-d320 | val_elbo |" in printed and "FAILS" in printed
    assert report["copied"] == [] and snapshot(pretrained) == before
