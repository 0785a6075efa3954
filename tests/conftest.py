import json
import os
import signal
import socket
import time
import urllib.parse
from pathlib import Path

import httpx
import pytest
import torch
from gradio_client import Client, utils

from mdlm_hf import MDLM, CharTokenizer

REPO_ROOT = Path(__file__).resolve().parent.parent
TINY_TEXT = "".join(
    f"{word} {i % 7}\n" for i, word in enumerate(["to be or not", "that is the question", "whether tis nobler"] * 40)
)
# the words of the app's tests' model (its words.txt)
SHAKESPEARE_LIKE = (
    "ROMEO:\nBut soft, what light through yonder window breaks?\nTo be, or not to be, that is the question:\n"
)


def free_port() -> int:
    """A loopback port no one listens on now, for a server a test starts."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def tiny_text() -> str:
    return TINY_TEXT


@pytest.fixture
def text_file(tmp_path, tiny_text):
    path = tmp_path / "text.txt"
    path.write_text(tiny_text * 3)
    return path


@pytest.fixture
def tiny_model() -> MDLM:
    """A randomly initialised two-layer model; enough to exercise every code path."""
    torch.manual_seed(0)
    return MDLM(CharTokenizer.from_text(TINY_TEXT).vocab, n_layer=2, n_head=2, n_embd=32, block_size=64).eval()


class PageClient(Client):
    """A gradio client that also reaches the page's own events (`/generate_page`, ...: undocumented, so the API
    page and MCP list only the text-and-numbers endpoints) by their parameters' names."""

    def _get_api_info(self) -> dict:
        url = urllib.parse.urljoin(self.src_prefixed, utils.RAW_API_INFO_URL)
        params = {"all_endpoints": "true"}  # merged with the url's own query
        response = httpx.get(url, params=params, headers=self.headers, cookies=self.cookies, **self.httpx_kwargs)
        response.raise_for_status()
        return response.json()


# the app's tests: a server of a tiny model and its twin, shared by all of them


@pytest.fixture(autouse=True)
def app_main_leaves_the_test_process_as_it_was():
    """app.main names a private uploads folder in the environment and exits on SIGTERM: undone after each test."""
    before, handler = os.environ.get("GRADIO_TEMP_DIR"), signal.getsignal(signal.SIGTERM)
    yield
    if before is None:
        os.environ.pop("GRADIO_TEMP_DIR", None)
    else:
        os.environ["GRADIO_TEMP_DIR"] = before
    signal.signal(signal.SIGTERM, handler)


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory):
    """A tiny untrained model of the characters of tests/data/vocab.txt, with SHAKESPEARE_LIKE's words."""
    import torch

    from mdlm_hf import MDLM
    from training.words import save_word_list

    text = open(REPO_ROOT / "tests" / "data" / "vocab.txt", encoding="utf-8").read()
    torch.manual_seed(0)
    model = MDLM("".join(sorted(set(text))), n_layer=1, n_head=2, n_embd=32, block_size=128)
    path = tmp_path_factory.mktemp("model")
    model.save_pretrained(path)
    save_word_list(SHAKESPEARE_LIKE, path / "words.txt")
    return path


@pytest.fixture(scope="session")
def twin_dir(model_dir, tmp_path_factory):
    """An untrained autoregressive twin of the model_dir model: its characters, causal."""
    import torch

    from mdlm_hf import MDLM

    torch.manual_seed(1)
    config = json.loads((model_dir / "config.json").read_text())
    path = tmp_path_factory.mktemp("twin")
    MDLM(**{**config, "objective": "ar"}).save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def server(model_dir, twin_dir):
    """The app of the model_dir model and its twin, served once for all the app's tests: its address."""
    import app
    from mdlm_space import loading, render

    model, known_words = loading.load_model(model_dir)
    demo = app.build_demo(model, known_words, twin=loading.load_twin(twin_dir, model))
    port = free_port()
    demo.queue(default_concurrency_limit=8).launch(
        server_port=port, prevent_thread_lock=True, quiet=True, theme=render.THEME, mcp_server=True
    )
    yield f"http://127.0.0.1:{port}/"
    demo.close()


@pytest.fixture(scope="session")
def client(server):
    return PageClient(server, verbose=False)


@pytest.fixture
def counted_steps(monkeypatch):
    """Every sampler step the app takes, slowed to 50 ms so a run lasts seconds."""
    from mdlm_space import handlers

    steps = []
    sample = handlers.sample

    def slow_sample(*args, **kwargs):
        for state in sample(*args, **kwargs):
            steps.append(state.step)
            time.sleep(0.05)
            yield state

    monkeypatch.setattr(handlers, "sample", slow_sample)
    return steps
