"""The export (training/export.py, export_dir.py, weights.py): round trip, bf16, recipe images, a safe swap."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import training.weights
from mdlm_hf import MDLM
from tests.training_helpers import export_cli, run
from training import export
from training.corpus import split_text
from training.export_dir import staging_prefix


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
    killed = tmp_path / (staging_prefix(export_dir, int(dead.stdout)) + "abcd1234")
    alive = tmp_path / (staging_prefix(export_dir, os.getpid()) + "efgh5678")  # an export running now
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


def test_the_swap_into_an_export_folder_is_one_step_a_kill_never_leaves_it_missing(tmp_path, monkeypatch):
    # a kill between the swap's two renames left only .NAME.old until the next export
    from pathlib import Path

    from training.export_dir import replace_directory, write_manifest

    export, staging = tmp_path / "model", tmp_path / ".model.staging"
    for folder, text in ((export, "old"), (staging, "new")):
        folder.mkdir()
        (folder / "config.json").write_text(text)
        write_manifest(folder)

    def killed(self, target):
        raise KeyboardInterrupt  # a rename would be the first of two: the kill comes before the second

    monkeypatch.setattr(Path, "rename", killed)
    replace_directory(staging, export)
    assert (export / "config.json").read_text() == "new" and not staging.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]


def test_loading_a_folder_an_interrupted_swap_left_aside_says_how_to_recover(tmp_path):
    from mdlm_hf import MDLM

    (tmp_path / ".model.old").mkdir()
    with pytest.raises(ValueError, match=r"\.model\.old holds its previous export .* rename it to model"):
        MDLM.from_pretrained(tmp_path / "model")
