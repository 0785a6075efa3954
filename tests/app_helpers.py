"""What the app's tests share: a page's session without a browser, a tab's controls, canvas cells, Chromium."""

import asyncio
import collections
import contextlib
import os
import re
import shutil
from pathlib import Path

import gradio as gr
import pytest
from gradio.state_holder import SessionState

from mdlm_space import endpoints
from tests.conftest import REPO_ROOT

JULIET = "JULIET:\nO Romeo, Romeo! wherefore art thou Romeo?"  # 49 characters


class Page:
    """A browser session without a browser: the components' values, and the server-side events that a user's
    change fires (and the changes those make fire in turn), run through gradio's own pre- and postprocessing in
    one session, as the page would run them."""

    def __init__(self, demo: gr.Blocks):
        self.demo, self.state, self.values = demo, SessionState(demo), {}
        self.props = collections.defaultdict(dict)  # component id -> the properties events have set
        self.fire(demo, "load")

    def value(self, component):
        return self.values.get(component._id, component.value)

    def type(self, component, value) -> None:
        """The user sets `component` to `value`."""
        self.values[component._id] = value
        self.fire(component, "input")
        self.fire(component, "change")

    def fire(self, block, event_name: str) -> None:
        for fn in list(self.demo.fns.values()):
            if fn.fn is not None and (block._id, event_name) in [tuple(target) for target in fn.targets]:
                self.run(fn)

    def run(self, fn) -> None:
        """One event's function on the page's values, the changes its outputs fire, and the functions chained after
        it (`then`)."""
        inputs = [self.value(component) for component in fn.inputs]
        result = asyncio.run(self.demo.process_api(fn, inputs, state=self.state))
        for component, output in zip(fn.outputs, result["data"], strict=True):
            if component.stateful:
                continue
            if isinstance(output, dict) and output.get("__type__") == "update":
                self.props[component._id].update(output)
                if "value" not in output:
                    continue
                output = output["value"]
            if output != self.value(component):
                self.values[component._id] = output
                self.fire(component, "change")
        for after in list(self.demo.fns.values()):
            if after.fn is not None and after.trigger_after == fn._id and not after.trigger_only_on_failure:
                self.run(after)


def api_names(demo: gr.Blocks, endpoint: str) -> list[str]:
    """An endpoint's API parameter names, in the order its API takes them."""
    fn = next(fn for fn in demo.fns.values() if fn.api_name == f"{endpoint}_page")
    return endpoints.input_names(fn.fn)


def tab_controls(demo: gr.Blocks, endpoint: str) -> dict:
    """The input components of an endpoint, by their API parameter names."""
    fn = next(fn for fn in demo.fns.values() if fn.api_name == f"{endpoint}_page")
    return dict(zip(api_names(demo, endpoint), fn.inputs, strict=True))


def cell_classes(canvas_html: str) -> list[str]:
    return re.findall(r"class='mdlm-(mask|given|new|earlier)'", canvas_html)


REQUIRE_BROWSER = "MDLM_REQUIRE_BROWSER"  # set by .ci/run


@contextlib.contextmanager
def chromium():
    """Debian's Chromium, headless, driven by Playwright (no browser is downloaded)."""
    from playwright.sync_api import sync_playwright

    executable = shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(executable).exists():
        message = "Debian's chromium is not installed: apt-get install -y chromium chromium-driver"
        if os.environ.get(REQUIRE_BROWSER):  # CI installs it: a skipped browser test there is a failure
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


DESKTOP, PHONE = (1280, 900), (390, 844)


def new_page(browser, size: tuple[int, int] = DESKTOP):
    """A page of `browser` with a viewport of `size`, (width, height)."""
    width, height = size
    return browser.new_page(viewport={"width": width, "height": height})


# WCAG AA contrast of every visible text, computed in the page (tests/data/low_contrast.js)
LOW_CONTRAST = (REPO_ROOT / "tests" / "data" / "low_contrast.js").read_text(encoding="utf-8")
