"""Pushing to the Hub (training/push_to_hub.py), the Hub intercepted: private, bad ids, offline, a failed push."""

import pytest

from tests.training_helpers import TINY_ARGS, run
from training import export, train
from training.checkpoints import RunError


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
