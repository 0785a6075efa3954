"""The Space's deploy command, with the Hub intercepted: what it uploads, how much, and a valid front matter."""

import re
import shutil
import subprocess
import sys
import time
import types

import httpx
import pytest
import yaml
from huggingface_hub import HfApi, SpaceCardData, hf_api

from mdlm_space import deploy
from tests.conftest import free_port

REPO_ROOT = deploy.REPO_ROOT


@pytest.fixture
def hub(monkeypatch):
    """Records the repo creation and the commit that `upload_folder` builds; nothing reaches the network."""
    calls = {}

    def create_repo(self, repo_id, **kwargs):
        calls["create_repo"] = (repo_id, kwargs)

    def create_commit(self, repo_id, operations, **kwargs):
        calls["commit"] = (repo_id, list(operations), kwargs)
        return types.SimpleNamespace(commit_url=f"https://huggingface.co/spaces/{repo_id}/commit/0")

    def validate_yaml(self, content, repo_type=None, token=None):  # the Hub checks the card's front matter online
        calls["validated"] = (content, repo_type)

    monkeypatch.setattr(HfApi, "create_repo", create_repo)
    monkeypatch.setattr(HfApi, "create_commit", create_commit)
    monkeypatch.setattr(HfApi, "_validate_yaml", validate_yaml)
    # the one-commit path: with hf_xet installed, upload_folder streams through Xet's pipeline instead
    monkeypatch.setattr(hf_api, "is_xet_available", lambda: False)
    return calls


def test_deploy_uploads_the_app_the_package_and_the_models_only(hub, capsys):
    deploy.main(["someone/mdlm-space"])
    assert "deployed: https://huggingface.co/spaces/someone/mdlm-space/commit/0" in capsys.readouterr().out
    repo_id, kwargs = hub["create_repo"]
    assert repo_id == "someone/mdlm-space" and kwargs["repo_type"] == "space" and kwargs["space_sdk"] == "gradio"
    assert hub["validated"] == ((REPO_ROOT / "README.md").read_text(encoding="utf-8"), "space")
    repo_id, operations, kwargs = hub["commit"]
    assert kwargs["repo_type"] == "space"
    paths = {op.path_in_repo for op in operations}
    for needed in ("app.py", "README.md", "requirements.txt", "mdlm_hf/__init__.py", "mdlm_hf/model_card.md"):
        assert needed in paths
    assert "pretrained/mdlm-shakespeare-char/model.safetensors" in paths
    assert "pretrained/mdlm-shakespeare-char-ar/model.safetensors" in paths
    assert any(p.startswith("mdlm_space/") for p in paths)
    top_folders = {p.split("/")[0] for p in paths if "/" in p}
    assert top_folders == {"mdlm_hf", "mdlm_space", "pretrained", "docs"}  # no runs/, tests/, training/, benchmarks/
    assert [p for p in paths if p.startswith("docs/")] == ["docs/app.png"]  # the README's picture, no other doc
    assert not any("__pycache__" in p or p.endswith(".pyc") for p in paths)
    assert sorted(paths) == sorted(p.as_posix() for p in deploy.space_files())  # the dry run lists the same
    size = sum((REPO_ROOT / p).stat().st_size for p in paths)
    assert size < 25e6, f"the Space is {size / 1e6:.1f} MB"


def test_every_module_of_the_app_and_the_package_is_uploaded():
    # the pattern "mdlm_space/**/*.py" matched mdlm_space's subfolders only: the Space had no mdlm_space/__init__.py
    listed = {p.as_posix() for p in deploy.space_files()}
    for package in ("mdlm_space", "mdlm_hf"):
        modules = {p.relative_to(REPO_ROOT).as_posix() for p in (REPO_ROOT / package).rglob("*.py")}
        assert modules - listed == set(), f"{package} modules the Space would lack"


@pytest.mark.slow
def test_the_uploaded_files_alone_start_the_space_and_generate(tmp_path):
    from gradio_client import Client

    space = tmp_path / "space"
    for path in deploy.space_files():  # exactly what the dry run lists, nothing else of the checkout
        (space / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO_ROOT / path, space / path)
    port = free_port()
    check = "import mdlm_hf, mdlm_space; print(mdlm_hf.__file__); print(mdlm_space.__file__)"
    found = subprocess.run([sys.executable, "-c", check], cwd=space, capture_output=True, text=True, check=True)
    assert all(line.startswith(str(space)) for line in found.stdout.split()), found.stdout  # the copy's, not ours
    process = subprocess.Popen(
        [sys.executable, "app.py", "--port", str(port)], cwd=space, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        url, deadline = f"http://127.0.0.1:{port}/", time.monotonic() + 300
        while time.monotonic() < deadline and process.poll() is None:
            try:
                if httpx.get(url, timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(1)
        assert process.poll() is None, process.stdout.read().decode(errors="replace")[-2000:]
        client = Client(url, verbose=False)
        result = client.predict(prompt="ROMEO:\n", length=40, num_steps=8, end_at="length", api_name="/generate")
        text = result["text"]
        assert text.startswith("ROMEO:\n") and len(text) == len("ROMEO:\n") + 40  # the length is written
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_deploy_dry_run_uploads_nothing(hub, capsys):
    deploy.main(["someone/mdlm-space", "--dry-run"])
    assert hub == {}
    assert "app.py" in capsys.readouterr().out


@pytest.mark.parametrize("repo_id", ["bad id", "no-owner", "a/b/c"])
def test_deploy_refuses_a_bad_repo_id_in_one_line(hub, repo_id, capsys):
    with pytest.raises(SystemExit):
        deploy.main([repo_id])
    assert "repo_id" in capsys.readouterr().err and hub == {}


def test_a_failed_upload_is_one_line(monkeypatch, capsys):
    def offline(self, repo_id, **kwargs):
        raise ConnectionError("no network")

    monkeypatch.setattr(HfApi, "create_repo", offline)
    with pytest.raises(SystemExit, match="could not deploy to someone/mdlm-space: ConnectionError: no network"):
        deploy.main(["someone/mdlm-space"])


def test_readme_front_matter_is_what_the_hub_reads_as_a_space_card():
    """(tests/test_space_serving.py checks the fields; here the Hub's own model of a Space's card data reads them.)"""
    front = yaml.safe_load((REPO_ROOT / "README.md").read_text(encoding="utf-8").split("---\n")[1])
    card = SpaceCardData(**front)
    assert card.sdk == "gradio" and card.app_file == "app.py"


def test_the_docs_file_count_is_the_dry_runs():
    # the README said 44 files where the dry run listed 55
    readme = (REPO_ROOT / "docs" / "space.md").read_text(encoding="utf-8")
    said = re.search(r"--dry-run +# the files it would upload \((\d+), (\d+) MB\)", readme)
    files = deploy.space_files()
    megabytes = sum((REPO_ROOT / path).stat().st_size for path in files) / 1e6
    assert said and int(said[1]) == len(files) and int(said[2]) == round(megabytes), said and said.groups()
