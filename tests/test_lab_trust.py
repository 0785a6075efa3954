"""What comes back from a GPU machine is not trusted: links in the returned folder, tars past their limits or holding
links, a metrics.json past its limits or with figures that are not the models', and a plan whose names or numbers
would send the job astray are each refused in one line, and nothing outside the folders is read, written or
removed."""

import io
import json
import math
import os
import tarfile

import pytest
import torch

from evals import invented_words
from lab import gpu_job, ship_check, ship_figures, ship_recheck, ship_unpack
from mdlm_hf import MDLM
from tests.test_lab_ship_check import error_line, export_folder, packed, write_text
from training.corpus import read_texts, split_text
from training.export_dir import write_manifest


@pytest.fixture(autouse=True)
def torch_threads():
    """The check sets torch's threads (--threads); the tests that follow get theirs back."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def texts(tmp_path) -> list[str]:
    """The check's texts, and a --pretrained of no model (the real one is never touched)."""
    (tmp_path / "data.txt").write_text("ROMEO:\nAy me.\n\n" * 40)
    flags = ["--data", str(tmp_path / "data.txt"), "--heldout", str(tmp_path / "data.txt")]
    return [*flags, "--pretrained", str(tmp_path / "pretrained")]


def outside(tmp_path):
    """A folder outside OUT, with a file of its own in a folder named as the run."""
    folder = tmp_path / "elsewhere"
    (folder / "m").mkdir(parents=True)
    (folder / "m" / "mine.txt").write_text("mine")
    (folder / "victim.txt").write_text("mine")
    return folder


# --- links in the returned folder ---


def test_an_unpacking_folder_that_is_a_link_is_refused_and_what_it_points_to_is_left_alone(
    tmp_path, monkeypatch, capsys
):
    out, _ = packed(tmp_path, monkeypatch)
    elsewhere = outside(tmp_path)
    (out / "unpacked").symlink_to(elsewhere, target_is_directory=True)
    message = error_line([str(out), *texts(tmp_path), "--no-copy"], capsys)
    assert sorted(p.name for p in (elsewhere / "m").iterdir()) == ["mine.txt"]  # not removed, no export put there
    assert "unpacked is a link" in message


def test_a_link_inside_the_unpacking_folder_is_refused_and_never_written_through(tmp_path, monkeypatch, capsys):
    out, _ = packed(tmp_path, monkeypatch, part_bytes=4096)  # in parts: they are joined as NAME.tar
    elsewhere = outside(tmp_path)
    (out / "unpacked").mkdir()
    (out / "unpacked" / "m.tar").symlink_to(elsewhere / "victim.txt")
    message = error_line([str(out), *texts(tmp_path), "--no-copy"], capsys)
    assert (elsewhere / "victim.txt").read_text() == "mine"  # the parts were not joined into it
    assert "m.tar is a link" in message
    # and the unpacking itself never joins parts where an earlier name could point elsewhere
    parts = ship_unpack.run_files(json.loads((out / "metrics.json").read_text()), out, "m")
    work = tmp_path / "work"
    work.mkdir()
    (work / "m.tar").symlink_to(elsewhere / "victim.txt")
    assert ship_unpack.unpack(parts, work, "m") == work / "m"
    assert (elsewhere / "victim.txt").read_text() == "mine"
    (work / "m").rename(work / "gone")
    (work / "m").symlink_to(elsewhere / "m", target_is_directory=True)
    with pytest.raises(ValueError, match="m is a link"):
        ship_unpack.unpack(parts, work, "m")
    assert (elsewhere / "m" / "mine.txt").read_text() == "mine"


def test_a_folder_named_on_the_command_line_that_is_a_link_is_refused_in_one_line(tmp_path, monkeypatch, capsys):
    # OUT typed as a link (OUT -> elsewhere), or --work, --pretrained: every read, write and removal would land there
    out, metrics = packed(tmp_path, monkeypatch)
    elsewhere = outside(tmp_path)
    link = tmp_path / "link"
    link.symlink_to(out, target_is_directory=True)
    for typed in (str(link), f"{link}/"):
        assert f"{link} is a link" in error_line([typed, *texts(tmp_path), "--no-copy"], capsys)
    (tmp_path / "to-elsewhere").symlink_to(elsewhere, target_is_directory=True)
    for flag in ("--work", "--pretrained"):
        argv = [str(out), *texts(tmp_path), flag, str(tmp_path / "to-elsewhere"), "--no-copy"]
        assert "to-elsewhere is a link" in error_line(argv, capsys)
    assert not (out / "unpacked").exists() and sorted(p.name for p in elsewhere.iterdir()) == ["m", "victim.txt"]
    with pytest.raises(ValueError, match="to-elsewhere is a link"):  # the unpacking's own folder
        ship_unpack.unpack(ship_unpack.run_files(metrics, out, "m"), tmp_path / "to-elsewhere", "m")
    (tmp_path / "pretrained").mkdir()  # an incumbent the recheck and the bars would read, and a winner replace
    (tmp_path / "pretrained" / "mdlm-shakespeare-char").symlink_to(elsewhere / "m", target_is_directory=True)
    assert "mdlm-shakespeare-char is a link" in error_line([str(out), *texts(tmp_path), "--no-copy"], capsys)
    for name in ("tiny.txt", "extra.txt", "heldout.txt"):
        write_text(tmp_path / name, 5, "CLAUDIUS")
    job = ["--tiny", "--data", str(tmp_path / "tiny.txt"), "--train-extra", str(tmp_path / "extra.txt")]
    job += ["--heldout", str(tmp_path / "heldout.txt")]
    for folders in (["--out", str(link), "--work", str(tmp_path / "w")], ["--out", str(out), "--work", str(link)]):
        with pytest.raises(SystemExit):
            gpu_job.parse_args([*job, *folders])
        assert f"{link} is a link" in capsys.readouterr().err.splitlines()[-1]


@pytest.mark.parametrize("name", ["metrics.json", "ship_check.json", "m.tar"])
def test_a_link_among_the_returned_files_is_refused_before_anything_is_read(name, tmp_path, monkeypatch, capsys):
    out, _ = packed(tmp_path, monkeypatch)
    elsewhere = outside(tmp_path)
    (elsewhere / "victim.txt").write_bytes((out / name).read_bytes() if (out / name).exists() else b"mine")
    before = (elsewhere / "victim.txt").read_bytes()
    (out / name).unlink(missing_ok=True)
    (out / name).symlink_to(elsewhere / "victim.txt")
    assert f"{name} is a link" in error_line([str(out), *texts(tmp_path), "--no-copy"], capsys)
    assert (elsewhere / "victim.txt").read_bytes() == before


def test_the_report_is_never_written_through_a_link(tmp_path):
    elsewhere = outside(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / "ship_check.json").symlink_to(elsewhere / "victim.txt")
    with pytest.raises(SystemExit) as exited:
        ship_check.write_report(out, {"candidates": {}})
    assert "ship_check.json is a link" in str(exited.value.code) and "\n" not in str(exited.value.code)
    assert (elsewhere / "victim.txt").read_text() == "mine"
    (out / "ship_check.json").unlink()
    ship_check.write_report(out, {"candidates": {}})  # a plain file: written
    assert json.loads((out / "ship_check.json").read_text()) == {"candidates": {}}


def test_the_job_never_packs_through_a_link_and_refuses_links_in_its_folders_before_any_work(tmp_path, capsys):
    elsewhere = outside(tmp_path)
    export = export_folder(tmp_path / "export" / "m", {"config.json": "{}"})
    out = tmp_path / "out"
    out.mkdir()
    (out / "m.tar").symlink_to(elsewhere / "victim.txt")
    with pytest.raises(ValueError, match="m.tar is a link"):
        gpu_job.pack(export, out)
    assert (elsewhere / "victim.txt").read_text() == "mine"
    assert sorted(p.name for p in out.iterdir()) == ["m.tar"]  # nothing left behind
    for name in ("tiny.txt", "extra.txt", "heldout.txt"):
        write_text(tmp_path / name, 5, "CLAUDIUS")
    argv = ["--tiny", "--data", str(tmp_path / "tiny.txt"), "--train-extra", str(tmp_path / "extra.txt")]
    argv += ["--heldout", str(tmp_path / "heldout.txt"), "--out", str(out), "--work", str(tmp_path / "work")]
    with pytest.raises(SystemExit):
        gpu_job.parse_args(argv)
    assert "m.tar is a link" in capsys.readouterr().err.splitlines()[-1]
    (out / "m.tar").unlink()
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "plays-d320").symlink_to(elsewhere / "m", target_is_directory=True)
    with pytest.raises(SystemExit):
        gpu_job.parse_args(argv)
    assert "plays-d320 is a link" in capsys.readouterr().err.splitlines()[-1]
    (tmp_path / "work" / "plays-d320").unlink()
    (tmp_path / "work" / "plays-d320.train.log").symlink_to(elsewhere / "victim.txt")
    with pytest.raises(SystemExit):
        gpu_job.parse_args(argv)
    assert "plays-d320.train.log is a link" in capsys.readouterr().err.splitlines()[-1]
    assert (elsewhere / "victim.txt").read_text() == "mine"


def tar_of(members: list[tuple[tarfile.TarInfo, bytes]], path, pax: bool = False):
    """A tar of hand-made members (each a header and its data)."""
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT if pax else tarfile.GNU_FORMAT) as tar:
        for info, data in members:
            info.size = info.size or len(data)
            tar.addfile(info, io.BytesIO(data) if data else None)
    return path


def member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "", size: int = 0) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.size = kind, link, size
    return info


CONFIG = (member("m/config.json"), b"{}")


@pytest.mark.parametrize(
    "bad, reason",
    [
        ((member("m/casts.json", tarfile.SYMTYPE, "config.json"), b""), "a link"),  # inside the folder: still a link
        ((member("m/casts.json", tarfile.LNKTYPE, "m/config.json"), b""), "a link"),
        ((member("m/fifo", tarfile.FIFOTYPE), b""), "not a plain file"),
        ((member("m/sub/config.json"), b"{}"), "in a folder of it"),
    ],
)
def test_a_member_that_is_a_link_or_not_a_plain_file_is_refused(bad, reason, tmp_path):
    tar = tar_of([CONFIG, bad], tmp_path / "m.tar")
    (tmp_path / "work").mkdir()
    with pytest.raises(ValueError, match=reason):
        ship_unpack.unpack([tar], tmp_path / "work", "m")
    assert list((tmp_path / "work").iterdir()) == []


# --- limits on what is unpacked ---


def test_a_member_claiming_more_bytes_than_a_file_may_have_is_refused_before_it_is_written(tmp_path):
    # a sparse member: a gigabyte of zeros in a few bytes of tar, which unpacked, then ended in a MemoryError
    sparse = member("m/model.safetensors")
    sparse.pax_headers = {"GNU.sparse.map": "0,0", "GNU.sparse.size": str(2**30)}
    tar = tar_of([CONFIG, (sparse, b"")], tmp_path / "m.tar", pax=True)
    assert tar.stat().st_size < 20_000
    (tmp_path / "work").mkdir()
    with pytest.raises(ValueError, match="1,073,741,824 bytes, more than"):
        ship_unpack.unpack([tar], tmp_path / "work", "m")
    assert list((tmp_path / "work").iterdir()) == []
    # a plain member whose header claims more than the tar holds: refused from its header
    tar = tar_of([CONFIG, (member("m/model.safetensors", size=2**30), b"")], tmp_path / "m.tar")
    with pytest.raises(ValueError, match="more than the 134,217,728 a file may have"):
        ship_unpack.unpack([tar], tmp_path / "work", "m")


def test_too_many_members_or_bytes_in_all_are_refused_before_anything_is_unpacked(tmp_path, monkeypatch):
    junk = [(member(f"m/junk-{index}.txt"), b"x") for index in range(1_001)]
    tar = tar_of([CONFIG, *junk], tmp_path / "m.tar")
    (tmp_path / "work").mkdir()
    with pytest.raises(ValueError, match="more than 1,000 files"):
        ship_unpack.unpack([tar], tmp_path / "work", "m")
    assert list((tmp_path / "work").iterdir()) == []
    monkeypatch.setattr(ship_unpack, "MAX_UNPACKED_BYTES", 10_000, raising=False)
    tar = tar_of([CONFIG, *((member(f"m/w{index}"), b"w" * 4000) for index in range(3))], tmp_path / "m.tar")
    with pytest.raises(ValueError, match="more than 10,000 bytes"):
        ship_unpack.unpack([tar], tmp_path / "work", "m")
    assert list((tmp_path / "work").iterdir()) == []


def test_too_many_parts_are_refused(tmp_path, monkeypatch, capsys):
    out, metrics = packed(tmp_path, monkeypatch, part_bytes=256)  # 5 KB of weights: more than 16 parts
    assert len(metrics["files"]) > 16
    assert "parts, more than 16" in error_line([str(out), *texts(tmp_path), "--no-copy"], capsys)


def test_a_metrics_json_nested_too_deep_or_too_large_is_refused_in_one_line(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "metrics.json").write_text('{"runs": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert "nests deeper than 64 levels" in error_line([str(out), *texts(tmp_path)], capsys)
    (out / "metrics.json").write_text(json.dumps({"runs": {}, "padding": "x" * gpu_job.PART_BYTES}))
    assert "bytes, more than the 16,777,216" in error_line([str(out), *texts(tmp_path)], capsys)


def test_a_returned_folder_of_too_many_files_is_refused_before_they_are_read(tmp_path, monkeypatch, capsys):
    from lab import safe_files

    out, _ = packed(tmp_path, monkeypatch)
    for index in range(60):
        (out / f"junk-{index}").write_text("x")
    monkeypatch.setattr(safe_files, "MAX_FOLDER_ENTRIES", 50)
    assert "holds more than 50 files and folders" in error_line([str(out), *texts(tmp_path)], capsys)


@pytest.mark.parametrize("name", ["../m", "/tmp/m", ".m", "a/b"])
def test_a_run_name_in_metrics_that_is_not_a_plain_name_is_refused(name, tmp_path, monkeypatch, capsys):
    out, metrics = packed(tmp_path, monkeypatch)
    metrics["runs"] = {name: metrics["runs"]["m"]}
    (out / "metrics.json").write_text(json.dumps(metrics))
    assert f"run {name!r} is not a plain name" in error_line([str(out), *texts(tmp_path)], capsys)


def test_a_file_listed_in_metrics_never_names_a_file_outside_the_folder(tmp_path, monkeypatch, capsys):
    out, metrics = packed(tmp_path, monkeypatch)
    (tmp_path / "m.tar").write_bytes((out / "m.tar").read_bytes())  # beside OUT, not in it
    (out / "m.tar").unlink()
    (out / "m.tar.").mkdir()  # so that the path resolves, to the tar beside OUT
    metrics["files"] = ["m.tar./../../m.tar"]
    (out / "metrics.json").write_text(json.dumps(metrics))
    assert "lists no returned export" in error_line([str(out), *texts(tmp_path)], capsys)
    assert not (out / "unpacked" / "m").exists()


# --- a plan's names and numbers ---


def plan_error(tmp_path, content: dict) -> str:
    (tmp_path / "plan.json").write_text(json.dumps(content))
    with pytest.raises(ValueError) as error:
        gpu_job.read_plan(tmp_path / "plan.json")
    assert "\n" not in str(error.value)
    return str(error.value)


RUN = {"name": "v4", "n_embd": 64, "n_head": 2, "extra_text": True}


@pytest.mark.parametrize("name", ["../x", "/tmp/x", ".x", "a/b", "", "x\n", 7])
def test_a_plans_run_name_must_be_a_plain_name(tmp_path, name):
    assert f"{name!r} is not a plain name" in plan_error(tmp_path, {"runs": [{**RUN, "name": name}]})


@pytest.mark.parametrize(
    "setting, value, said",
    [
        ("steps", -5, "steps is -5: it must be above 0"),
        ("steps", 0, "steps is 0"),
        ("steps", 1.5, "steps is 1.5: it must be a whole number"),
        ("steps", True, "steps is True"),
        ("minutes", math.nan, "minutes is nan: it must be a finite number"),
        ("minutes", math.inf, "minutes is inf"),
        ("minutes", -1.0, "minutes is -1.0"),
        ("batch_size", 0, "batch_size is 0"),
        ("warmup_steps", -1, "warmup_steps is -1: it must be above 0 (or 0)"),
        ("compile", 1, "compile is 1: it must be true or false"),
    ],
)
def test_every_plan_setting_is_checked_as_the_plan_is_read(tmp_path, setting, value, said):
    assert said in plan_error(tmp_path, {"runs": [RUN], setting: value})


@pytest.mark.parametrize(
    "field, value, said",
    [
        ("n_embd", -64, "run v4: n_embd is -64"),
        ("n_embd", 64.0, "run v4: n_embd is 64.0: it must be a whole number"),
        ("n_head", True, "run v4: n_head is True"),
        ("n_head", 0, "run v4: n_head is 0"),
        ("extra_text", "no", "run v4: extra_text is 'no': it must be true or false"),
        ("returned", 1, "run v4: returned is 1"),
        ("objective", ["ar"], "run v4: objective is ['ar']"),
    ],
)
def test_every_run_field_is_checked_and_the_run_named(tmp_path, field, value, said):
    assert said in plan_error(tmp_path, {"runs": [{**RUN, field: value}]})


def test_a_zero_warm_up_stands_and_typed_flags_are_checked_too(tmp_path, capsys):
    (tmp_path / "plan.json").write_text(json.dumps({"runs": [RUN], "warmup_steps": 0, "minutes": 2}))
    assert gpu_job.read_plan(tmp_path / "plan.json")[1] == {"warmup_steps": 0, "minutes": 2}
    for name in ("tiny.txt", "extra.txt", "heldout.txt"):
        write_text(tmp_path / name, 5, "CLAUDIUS")
    argv = ["--tiny", "--data", str(tmp_path / "tiny.txt"), "--train-extra", str(tmp_path / "extra.txt")]
    argv += ["--heldout", str(tmp_path / "heldout.txt"), "--out", str(tmp_path / "out")]
    for flags, said in ((["--minutes", "nan"], "--minutes is nan"), (["--steps", "-5"], "--steps is -5")):
        with pytest.raises(SystemExit):
            gpu_job.parse_args([*argv, *flags])
        assert said in capsys.readouterr().err.splitlines()[-1]
    assert not (tmp_path / "out").exists()


# --- the job's likelihoods, measured again here ---


def tiny_model(seed: int, vocab: str) -> MDLM:
    torch.manual_seed(seed)
    return MDLM(vocab, n_layer=1, n_head=2, n_embd=32, block_size=256).eval()


@pytest.fixture
def two_models(tmp_path):
    """A candidate's export and an incumbent (two untrained tiny models), the texts the job read, and each model's
    scores as the job writes them."""
    write_text(tmp_path / "data.txt", 600, "CLAUDIUS+BERNARDO")
    write_text(tmp_path / "heldout.txt", 60, "BERNARDO")
    _, val = split_text(read_texts([tmp_path / "data.txt"]))
    heldout = (tmp_path / "heldout.txt").read_text()
    vocab = "".join(sorted(set((tmp_path / "data.txt").read_text())))
    paths = (tmp_path / "export" / "m", tmp_path / "pretrained" / "mdlm-shakespeare-char")
    scores = []
    for seed, path in enumerate(paths):
        tiny_model(seed, vocab).save_pretrained(path)
        write_manifest(path)
        model = gpu_job.load(path)
        tokens = [torch.tensor(model.tokenizer.encode(text)) for text in (val, heldout)]
        found = gpu_job.score(model, *tokens, nll_chars=1024)
        found |= {"val_chars": len(val), "heldout_chars": len(heldout), "val_exact_nll_chars": 1024}
        scores.append(found | {"parameters": model.num_parameters()})
    return dict(paths=paths, scores=scores, texts=(val, heldout), data=tmp_path / "data.txt")


def job_figures(scores: list[dict], **forged: float) -> dict:
    names = ship_figures.LIKELIHOODS["diffusion"]
    return {f: {"candidate": forged.get(f, scores[0][f]), "incumbent": scores[1][f]} for f in names}


def test_the_jobs_true_likelihoods_stand_and_a_forged_one_is_refused_with_both_numbers(two_models):
    paths, scores, found = two_models["paths"], two_models["scores"], two_models["texts"]
    for windows in ((64, 8), (4, 2)):  # measured whole as the job did; then on samples of 4 (ELBO) and 2 of 4 windows
        args = (paths, tuple(scores), job_figures(scores), found, 0, {})
        assert "val_elbo on" in ship_recheck.recheck("m", *args, windows=windows)
    truth = scores[0]["val_elbo"]
    for windows in ((64, 8), (4, 2)):
        forged = job_figures(scores, val_elbo=truth - 0.5)
        with pytest.raises(ValueError) as error:
            ship_recheck.recheck("m", paths, tuple(scores), forged, found, 0, {}, windows=windows)
        said = str(error.value)
        assert f"run m's val_elbo in metrics.json is {truth - 0.5:.4f}, but measured here it is" in said
        assert "\n" not in said
    # both figures moved alike keep the lead, but not each model's own figure
    true = job_figures(scores)
    both = {f: {"candidate": p["candidate"] - 0.3, "incumbent": p["incumbent"] - 0.3} for f, p in true.items()}
    with pytest.raises(ValueError, match="in metrics.json is"):
        ship_recheck.recheck("m", paths, tuple(scores), both, found, 0, {}, windows=(4, 2))
    # each figure within its noise, the lead beyond it
    apart = {f: {"candidate": p["candidate"] - 0.015, "incumbent": p["incumbent"] + 0.015} for f, p in true.items()}
    with pytest.raises(ValueError, match="beside its incumbent's in metrics.json, but"):
        ship_recheck.recheck("m", paths, tuple(scores), apart, found, 0, {})
    # another validation split than the job's: said plainly
    entries = ({**scores[0], "val_chars": 5}, scores[1])
    with pytest.raises(ValueError, match="the job scored run m on 5 validation characters"):
        ship_recheck.recheck("m", paths, entries, job_figures(scores), found, 0, {})


def test_a_forged_likelihood_in_metrics_stops_the_ship_check(two_models, tmp_path, monkeypatch):
    monkeypatch.setattr(invented_words, "fetch_texts", lambda directory: {})
    scores = two_models["scores"]
    out = tmp_path / "out"
    out.mkdir()
    files = gpu_job.pack(two_models["paths"][0], out)
    forged = {**scores[0], "val_elbo": 1.30, "val_exact_nll": 1.25, "heldout_elbo": 1.40}  # an untrained model's: ~4
    metrics = {
        "runs": {"m": {"name": "m", "objective": "diffusion", "returned": True, "extra_text": True}},
        "files": files,
        "scores": {"m": forged, "shipped": scores[1]},
    }
    (out / "metrics.json").write_text(json.dumps(metrics))
    argv = [str(out), "--pretrained", str(tmp_path / "pretrained"), "--data", str(two_models["data"])]
    argv += ["--heldout", str(tmp_path / "heldout.txt"), "--corpus", str(tmp_path / "none.txt"), "--no-copy"]
    argv += ["--samples", "1", "--threads", "1", "--sdist-dir", str(tmp_path / "sdist")]
    with pytest.raises(SystemExit) as exited:
        ship_check.main(argv)
    said = str(exited.value.code)
    assert said.startswith("error: run m's val_elbo in metrics.json is 1.3000, but measured here it is ")
    assert f"{scores[0]['val_elbo']:.4f}" in said and "\n" not in said
    assert not (out / "ship_check.json").exists()
    assert os.listdir(out / "unpacked") == ["m"]
