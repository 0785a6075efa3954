"""For the browser tests on the shipped model: the app as the Space runs it (the shipped model and its twin),
served once per test module, and where their screenshots go (the browser: tests.app_helpers.chromium)."""

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import free_port

REPO_ROOT = Path(__file__).resolve().parent.parent
SHIPPED = REPO_ROOT / "pretrained" / "mdlm-shakespeare-char"
SHIPPED_TWIN = REPO_ROOT / "pretrained" / "mdlm-shakespeare-char-ar"


def screenshot_path(tmp_path: Path, name: str) -> Path:
    """Where a test's screenshot goes: $MDLM_SCREENSHOTS (to keep and look at) or tmp_path."""
    folder = Path(os.environ.get("MDLM_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder / name


@pytest.fixture(scope="module")
def shipped_server() -> Iterator[str]:
    """The app of the shipped model and its twin, with the shipped model's texts: its address."""
    import app
    from mdlm_space import loading, render

    model, known_words = loading.load_model(SHIPPED)
    twin = loading.load_twin(SHIPPED_TWIN, model)
    demo = app.build_demo(model, known_words, loading.load_demo_metadata(SHIPPED), twin)
    port = free_port()
    demo.queue(default_concurrency_limit=8).launch(
        server_port=port, prevent_thread_lock=True, quiet=True, theme=render.THEME
    )
    yield f"http://127.0.0.1:{port}/"
    demo.close()
