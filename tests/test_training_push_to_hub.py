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

    export_dir = tmp_path / "fake-export"
    tiny_model.save_pretrained(export_dir)
    with FakeHub(public={"me/public"}) as hub:
        assert export.push_to_hub(export_dir, "me/model", private=True) == hub.COMMIT_URL
        with pytest.raises(RunError, match="me/public exists and is public"):
            export.push_to_hub(export_dir, "me/public", private=True)
    assert hub.created == [("me/model", "private"), ("me/public", "private")]
    uploaded = hub.commits["me/model"]
    assert uploaded["model.safetensors"] == (export_dir / "model.safetensors").read_bytes()
    assert set(uploaded) == {p.name for p in export_dir.iterdir() if p.is_file()}
    assert "me/public" not in hub.commits  # refused before anything was uploaded
    assert hub.validated and "mdlm_hf" in hub.validated[0]  # the card the Hub read names the library


class FakeHub:
    """The Hub's HTTP API as huggingface_hub's own HfApi calls it (create, info, preupload, commit), answered here:
    the real client code runs, only its HTTP transport is replaced (huggingface_hub's set_client_factory)."""

    COMMIT_URL = "https://huggingface.co/me/model/commit/0123abc"

    def __init__(self, public: set[str] = frozenset(), offline: bool = False, failing: str | None = None) -> None:
        self.monkeypatch, self.public, self.offline, self.failing = pytest.MonkeyPatch(), set(public), offline, failing
        self.created, self.commits, self.validated, self.requests = [], {}, [], []

    def answer(self, request):
        import base64
        import json

        import httpx

        path = request.url.path
        self.requests.append(f"{request.method} {path}")
        if self.offline:  # no network: the name of the Hub does not resolve
            raise httpx.ConnectError("[Errno -2] Name or service not known\nmore detail", request=request)
        if self.failing and path.endswith(f"/{self.failing}" if self.failing == "create" else "/commit/main"):
            raise httpx.ReadTimeout(f"the {self.failing} timed out", request=request)
        if path == "/api/repos/create":
            body = json.loads(request.content)
            repo = f"{body.get('organization') or 'me'}/{body['name']}"
            self.created.append((repo, body.get("visibility")))
            return httpx.Response(200, json={"url": f"https://huggingface.co/{repo}", "name": repo, "id": repo})
        if path == "/api/validate-yaml":  # the Hub checks a README's card metadata before a commit
            self.validated.append(json.loads(request.content)["content"])
            return httpx.Response(200, json={"errors": [], "warnings": []})
        repo = "/".join(path.split("/")[3:5])
        if path.endswith("/preupload/main"):
            files = json.loads(request.content)["files"]
            answers = [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False} for f in files]
            return httpx.Response(200, json={"files": answers})
        if path.endswith("/commit/main"):
            lines = [json.loads(line) for line in request.content.decode().splitlines() if line]
            files = [line["value"] for line in lines if line["key"] == "file"]
            self.commits[repo] = {f["path"]: base64.b64decode(f["content"]) for f in files}
            return httpx.Response(200, json={"commitUrl": self.COMMIT_URL, "commitOid": "0123abc", "success": True})
        if path == f"/api/models/{repo}":
            return httpx.Response(200, json={"id": repo, "private": repo not in self.public, "sha": "0123abc"})
        return httpx.Response(404, json={"error": f"{request.method} {path} is not answered by FakeHub"})

    def __enter__(self) -> "FakeHub":
        import httpx
        from huggingface_hub.utils import _http

        self.monkeypatch.setenv("HF_TOKEN", "hf_test")
        self.monkeypatch.setattr(
            _http, "_GLOBAL_CLIENT_FACTORY", lambda: httpx.Client(transport=httpx.MockTransport(self.answer))
        )
        _http.close_session()  # the client made before (a real one) goes; the next is this one's
        return self

    def __exit__(self, *exc: object) -> None:
        from huggingface_hub.utils import _http

        self.monkeypatch.undo()
        _http.close_session()


def test_push_without_network_or_credentials_is_one_line(tiny_model, tmp_path, capsys):
    from training import push_to_hub

    tiny_model.save_pretrained(tmp_path)
    with FakeHub(offline=True), pytest.raises(SystemExit) as stopped:
        push_to_hub.main([str(tmp_path), "me/model"])
    message = str(stopped.value)
    assert message.startswith("error: could not push to me/model (ConnectError: [Errno -2]") and "\n" not in message
    assert "`hf auth login`" in message and "hf auth login" in push_to_hub.__doc__
    assert "huggingface-cli" not in push_to_hub.__doc__


def test_a_push_of_weights_that_do_not_load_is_refused_before_the_hub(tiny_model, tmp_path, monkeypatch):
    # a truncated model.safetensors was announced as pushing, and only the lack of network stopped the upload
    from training import push_to_hub

    tiny_model.save_pretrained(tmp_path)
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with FakeHub() as hub, pytest.raises(SystemExit) as stopped:
        push_to_hub.main([str(tmp_path), "me/model"])
    assert not hub.requests  # refused before the Hub
    message = str(stopped.value)
    assert message.startswith(f"error: {tmp_path} does not load as a model, so it is not pushed: ")
    assert "model.safetensors" in message and "\n" not in message


BAD_REPO = "bad repo id!!"


BAD_REPO_SAYS = f"{BAD_REPO!r} is not a Hub repo id: Repo id must use alphanumeric chars"


def test_a_bad_repo_id_is_refused_before_the_work(tiny_model, text_file, tmp_path, monkeypatch, capsys):
    # export and train checked it only when pushing, after all their work, and then advised `hf auth login`
    from training import push_to_hub

    tiny_model.save_pretrained(tmp_path / "model")
    with FakeHub() as hub, pytest.raises(SystemExit) as stopped:
        push_to_hub.main([str(tmp_path / "model"), BAD_REPO])
    assert not hub.requests  # refused before the Hub
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


@pytest.mark.parametrize("fails_at", ["create", "commit"])
def test_a_failed_push_leaves_the_export_byte_identical(tiny_model, tmp_path, fails_at):
    # a failed push left the card naming the new repo, and its mode 0600
    tiny_model.save_pretrained(tmp_path)
    (tmp_path / "README.md").chmod(0o644)
    before = {p.name: (p.read_bytes(), p.stat().st_mode) for p in tmp_path.iterdir()}
    with FakeHub(failing=fails_at) as hub, pytest.raises(RunError, match="could not push to me/new-model"):
        export.push_to_hub(tmp_path, "me/new-model")
    assert {p.name: (p.read_bytes(), p.stat().st_mode) for p in tmp_path.iterdir()} == before
    if fails_at == "commit":  # what it uploaded named the new repo; the export does not
        assert 'MDLM.from_pretrained("me/new-model")' in hub.validated[0]
