"""Starting the app (app.py, serving.py, loading.py): its flags, the Space's config, uploads, the warm-up."""

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import gradio as gr
import httpx
import pytest
import torch
import yaml

import app
from mdlm_hf.devices import choose_device
from mdlm_space import loading, serving
from tests.conftest import REPO_ROOT, free_port


@pytest.mark.slow  # several seconds: CI runs it
def test_missing_or_corrupt_model_stops_start_up_with_one_clear_line(tmp_path, model_dir):
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "app.py"), "--model", str(tmp_path / "nowhere")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"error: could not load the model from {tmp_path / 'nowhere'}: "
        f"model directory {tmp_path / 'nowhere'} does not exist"
    ]
    corrupt = tmp_path / "corrupt"
    shutil.copytree(model_dir, corrupt)
    (corrupt / "model.safetensors").write_bytes(b"\x00" * 10)
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "app.py"), "--model", str(corrupt)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1 and "not a readable safetensors file" in result.stderr.strip().splitlines()[-1]
    assert "Traceback" not in result.stderr
    # an empty name is said to be empty (it was read as the current folder)
    result = subprocess.run([sys.executable, str(REPO_ROOT / "app.py"), "--model", ""], capture_output=True, text=True)
    assert result.returncode == 1 and result.stderr.strip().splitlines() == [
        "error: could not load the model from '': the model name is empty: pass a local directory or a Hub repo id"
    ]


def test_readme_front_matter_is_a_valid_space_config():
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    assert readme.startswith("---\n")
    config = yaml.safe_load(readme.split("---\n")[1])
    assert config["sdk"] == "gradio" and config["app_file"] == "app.py" and (REPO_ROOT / config["app_file"]).is_file()
    assert config["sdk_version"].split(".")[0] == "6" and config["title"] and config["license"]
    for key in ("colorFrom", "colorTo"):
        assert config[key] in {"red", "yellow", "green", "blue", "indigo", "purple", "pink", "gray"}
    assert len(config["short_description"]) <= 60


def test_shipped_checkpoint_serves_offline():
    model, known_words = loading.load_model(loading.DEFAULT_MODEL)
    assert known_words and "romeo" in known_words
    text = model.complete("ROMEO:\n", 40, num_steps=8, seed=0)
    assert text.startswith("ROMEO:\n") and len(text) == 47


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        # gradio retried every port of its range on these, printing an error each time, for minutes
        (["--host", "nonexistent.invalid"], "error: --host nonexistent.invalid: the name does not resolve"),
        (["--host", "192.0.2.1"], "error: --host 192.0.2.1: not an address this machine can serve on"),
    ],
)
def test_a_host_the_app_cannot_serve_on_is_one_line(model_dir, monkeypatch, flags, says):
    monkeypatch.setattr(gr.Blocks, "launch", lambda self, **kwargs: pytest.fail("the app launched"))
    with pytest.raises(SystemExit) as stopped:
        app.main(["--model", str(model_dir), *flags])
    assert str(stopped.value).startswith(says) and "\n" not in str(stopped.value)


def test_a_word_list_that_is_not_text_is_named(model_dir, tmp_path, monkeypatch):
    # the app's line named the model, not its words.txt
    broken = tmp_path / "model"
    shutil.copytree(model_dir, broken)
    (broken / "words.txt").write_bytes(b"\xff\xfe words")
    monkeypatch.setattr(gr.Blocks, "launch", lambda self, **kwargs: pytest.fail("the app launched"))
    with pytest.raises(SystemExit) as stopped:
        app.main(["--model", str(broken), "--twin", "none"])
    message = str(stopped.value)
    assert f"{broken / 'words.txt'} is not a word list: not UTF-8 text" in message and "\n" not in message


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0", "localhost"])
def test_a_host_of_this_machine_is_served(host):
    assert serving.host_problem(host) is None


@pytest.mark.parametrize("port", ["-1", "0", "70000", "http"])
def test_a_port_that_is_not_one_is_refused_by_the_flag(model_dir, capsys, port):
    # -1 and 70000 ended in an OverflowError traceback, 0 in a connection error
    with pytest.raises(SystemExit) as stopped:
        app.main(["--model", str(model_dir), "--port", port])
    assert stopped.value.code == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .splitlines()[-1]
        .endswith(f"argument --port: must be a port number from 1 to 65535, got '{port}'")
    )


def test_a_port_in_use_is_one_line(model_dir):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(SystemExit) as stopped:
            app.main(["--model", str(model_dir), "--port", str(port)])
    message = str(stopped.value)
    assert message.startswith(f"error: could not serve the app on port {port}") and "\n" not in message


@pytest.mark.parametrize(
    ("device", "says"),
    [
        ("cuda", "--device cuda: CUDA is not available here; use --device cpu (or auto)"),
        ("gpu", "--device 'gpu' is not a device: use auto, cpu, cuda, cuda:N or mps"),
        # these were taken as devices: meta served an app whose model had no weights, mps blamed the model
        ("meta", "--device 'meta': mdlm_hf runs on auto, cpu, cuda, cuda:N or mps"),
        ("mps", "--device mps: MPS is not available here; use --device cpu (or auto)"),
    ],
)
def test_device_flag_refuses_a_device_it_cannot_use_in_one_line(model_dir, monkeypatch, device, says):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    monkeypatch.setattr(gr.Blocks, "launch", lambda self, **kwargs: pytest.fail("the app launched"))
    with pytest.raises(SystemExit) as stopped:
        app.main(["--model", str(model_dir), "--device", device])
    assert str(stopped.value) == f"error: {says}"


def test_device_flag_picks_cuda_when_available(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert str(choose_device("auto")) == "cpu" and str(choose_device("cpu")) == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert str(choose_device("auto")) == "cuda"


@pytest.mark.parametrize("mcp", [True, False])
def test_main_serves_on_the_device_with_mcp_only_when_its_extra_is_installed(model_dir, monkeypatch, mcp):
    launched, mcp_available = {}, app.mcp_available
    monkeypatch.setattr(app, "mcp_available", lambda: mcp)
    monkeypatch.setattr(gr.Blocks, "launch", lambda self, **kwargs: launched.update(kwargs, blocks=self))
    load = loading.load_model
    monkeypatch.setattr(
        app, "load_model", lambda source, device: launched.update(device=device) or load(source, device)
    )
    app.main(["--model", str(model_dir), "--device", "cpu"])
    assert launched["device"] == "cpu" and launched["mcp_server"] is mcp
    fn = next(fn for fn in launched["blocks"].fns.values() if fn.api_name == "generate_page")
    assert fn.fn.__doc__.startswith("Writes text after a prompt")  # what "Use via API" and MCP clients show
    assert mcp_available() is (importlib.util.find_spec("mcp") is not None)


def test_warm_up_makes_the_fast_paths_choice_before_the_first_run(model_dir):
    model, _ = loading.load_model(model_dir)
    assert model.fast and model._fast_path.key is None
    loading.warm_up(model)  # app.main queues it on the model thread while the server starts
    assert model._fast_path.key is not None


def test_uploads_are_capped_and_deleted_when_the_app_exits(model_dir, monkeypatch, tmp_path):
    # with --host 0.0.0.0 anyone could upload files of any size, served back and kept after the app exited
    import atexit

    launched, exits, signals = {}, [], {}
    monkeypatch.setattr(gr.Blocks, "launch", lambda self, **kwargs: launched.update(kwargs))
    monkeypatch.setattr(atexit, "register", exits.append)
    monkeypatch.setattr(signal, "signal", lambda number, handler: signals.update({number: handler}))
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path))
    app.main(["--model", str(model_dir), "--device", "cpu", "--twin", "none"])
    assert launched["max_file_size"] == serving.MAX_UPLOAD
    from gradio.utils import _parse_file_size

    assert _parse_file_size(launched["max_file_size"]) <= 1024**2
    folder = Path(os.environ["GRADIO_TEMP_DIR"])
    assert folder.parent == tmp_path and folder.is_dir()
    (folder / "upload.txt").write_text("x")
    for clean_up in exits:
        clean_up()
    assert not folder.exists()
    assert signal.SIGTERM in signals


def test_the_upload_route_is_refused_before_anything_is_written(model_dir, monkeypatch, tmp_path):
    # uploads had no total cap: 350 uploads of 100 kB left 36 MB on disk, each served back; 50 files a request
    launched = {}
    monkeypatch.setattr(gr.Blocks, "launch", lambda self, **kwargs: launched.update(kwargs))
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path))
    app.main(["--model", str(model_dir), "--device", "cpu", "--twin", "none"])
    assert [m.cls for m in launched["app_kwargs"]["middleware"]] == [serving.NoUploads]  # what the app launches with
    monkeypatch.undo()
    model, _ = loading.load_model(model_dir)
    demo = app.build_demo(model)
    port = free_port()
    demo.launch(server_port=port, prevent_thread_lock=True, quiet=True, **serving.launch_limits())
    try:
        files = [("files", (f"f{i}.txt", b"x" * 1000, "text/plain")) for i in range(50)]
        for route in ("gradio_api/upload", "gradio_api/upload/", "upload"):
            answer = httpx.post(f"http://127.0.0.1:{port}/{route}", files=files, timeout=30)
            assert answer.status_code == 403 and answer.json() == {"error": serving.NO_FILES}, route
        assert httpx.get(f"http://127.0.0.1:{port}/", timeout=30).status_code == 200  # the page is served
        assert not list(tmp_path.rglob("f*.txt"))
    finally:
        demo.close()


def test_the_server_keeps_at_most_its_session_capacity(model_dir, monkeypatch):
    # every API call makes a session holding a copy of the app's config (about 450 KB here), and gradio kept 10,000:
    # 300 calls grew the server by 133 MB
    from gradio_client import Client

    monkeypatch.setattr(serving, "SESSION_CAPACITY", 3)
    launched = {}
    monkeypatch.setattr(gr.Blocks, "launch", lambda self, **kwargs: launched.update(kwargs))
    app.main(["--model", str(model_dir), "--device", "cpu", "--twin", "none"])
    assert launched["state_session_capacity"] == 3  # what the app launches with
    monkeypatch.undo()
    monkeypatch.setattr(serving, "SESSION_CAPACITY", 3)
    model, _ = loading.load_model(model_dir)
    demo = app.build_demo(model)
    port = free_port()
    demo.queue().launch(server_port=port, prevent_thread_lock=True, quiet=True, **serving.launch_limits())
    try:
        for _ in range(6):  # each from a new visitor
            Client(f"http://127.0.0.1:{port}/", verbose=False).predict("to be", 0.5, 0, api_name="/forward_process")
        assert len(demo.state_holder.session_data) <= 3
    finally:
        demo.close()


@pytest.mark.parametrize("name", ["casts.json", "demo.json"])
def test_a_models_file_linked_outside_its_folder_stops_the_app_in_one_line(model_dir, tmp_path, monkeypatch, name):
    # a linked casts.json or demo.json gave a 25-line traceback (words.txt: one line)
    import shutil

    shutil.copytree(model_dir, tmp_path / "model")
    (tmp_path / "outside.json").write_text("{}")
    (tmp_path / "model" / name).unlink(missing_ok=True)
    (tmp_path / "model" / name).symlink_to(tmp_path / "outside.json")
    monkeypatch.setattr(gr.Blocks, "launch", lambda self, **kwargs: pytest.fail("launched"))
    with pytest.raises(SystemExit) as stopped:
        app.main(["--model", str(tmp_path / "model"), "--device", "cpu", "--twin", "none"])
    message = str(stopped.value)
    assert message.startswith("error: ") and f"{name} resolves to" in message and "\n" not in message
