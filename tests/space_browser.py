"""For the test_space_* browser tests: Debian's Chromium, headless, and the app as the Space runs it (the shipped model
and its autoregressive twin), served once per test module."""

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import free_port

REPO_ROOT = Path(__file__).resolve().parent.parent
SHIPPED = REPO_ROOT / "pretrained" / "mdlm-shakespeare-char"
SHIPPED_TWIN = REPO_ROOT / "pretrained" / "mdlm-shakespeare-char-ar"
PHONE, DESKTOP = (390, 844), (1280, 900)
REQUIRE_BROWSER = "MDLM_REQUIRE_BROWSER"  # set where the browser is installed: a skipped test there is a failure


@contextlib.contextmanager
def chromium() -> Iterator:
    """Debian's Chromium, headless, driven by Playwright (no browser is downloaded)."""
    from playwright.sync_api import sync_playwright

    executable = shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(executable).exists():
        message = "Debian's chromium is not installed: apt-get install -y chromium chromium-driver"
        if os.environ.get(REQUIRE_BROWSER):
            pytest.fail(f"{message} ({REQUIRE_BROWSER} is set)")
        pytest.skip(message)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable,
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        try:
            yield browser
        finally:
            browser.close()


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
