"""The page while a long text streams in: no task of the page's main thread over 200 ms (a frame it takes that long
to draw freezes scrolling, typing and the Stop button), and the canvas's legend one line on a phone."""

import pytest

from tests.app_helpers import DESKTOP, PHONE, chromium, new_page
from tests.space_browser import screenshot_path, shipped_server  # noqa: F401

# registered before the page's own scripts run: every main-thread task over 50 ms (the browser's "long task"), its
# length and when it began (ms since the page loaded)
WATCH_LONG_TASKS = """
window.longTasks = [];
new PerformanceObserver((list) => {
  for (const task of list.getEntries()) window.longTasks.push([Math.round(task.duration), Math.round(task.startTime)]);
}).observe({type: 'longtask', buffered: true});
"""
LONGEST_TASK_MS = 200


def generate(page, length: int) -> None:
    """Sets Generate's length (End at: exactly it) and runs it to the end."""
    from playwright.sync_api import expect

    box = page.get_by_label("number input for Characters to generate (at most)")
    expect(page.get_by_text("at most 16,377")).to_be_visible()  # loaded: the load's fit will not undo the fill
    box.fill(str(length))
    box.press("Enter")
    expect(box).to_have_value(str(length))
    page.get_by_label("length").check()
    page.get_by_role("button", name="Generate", exact=True).click()
    expect(page.locator("#generate-readout")).to_contain_text("chars/s", timeout=240_000)  # the run is done


@pytest.mark.browser
@pytest.mark.slow
def test_browser_a_2000_character_run_never_holds_the_page_over_200_ms(shipped_server, tmp_path):  # noqa: F811
    # each frame of a run past the model's context redrew the whole canvas: a 2,000-character run's page held its
    # main thread for up to 2 s at a time
    with chromium() as browser:
        page = new_page(browser)
        page.add_init_script(WATCH_LONG_TASKS)
        page.goto(shipped_server)
        page.wait_for_timeout(1000)
        began = page.evaluate("() => { window.longTasks = []; return performance.now(); }")  # the run's only
        generate(page, 2000)
        page.wait_for_timeout(1000)  # the last frame drawn
        tasks = page.evaluate("window.longTasks")
        page.screenshot(path=str(screenshot_path(tmp_path, "generate-long-run.png")))
    print(f"long tasks during the run ({len(tasks)}, ms, began at ms after {began:.0f}): {tasks}")
    assert max((duration for duration, _ in tasks), default=0) <= LONGEST_TASK_MS, tasks


# in the page: the legend under Generate's canvas while a frame shows masks, new and earlier characters (the most
# entries a plain run's legend has: masked, revealed this step, confidence, given, line break): each entry's
# middle height, the legend's height and how far it overflows its width
LEGEND_WHILE_WRITING = """() => { const legend = document.querySelector('#generate-canvas .mdlm-legend');
  const canvas = document.querySelector('#generate-canvas .mdlm-canvas');
  if (!legend || !canvas || ['.mdlm-new', '.mdlm-mask', '.mdlm-earlier'].some((kind) => !canvas.querySelector(kind)))
    return null;
  const middles = [...legend.children].map((entry) => { const box = entry.getBoundingClientRect();
    return Math.round(box.top + box.height / 2); });
  return {middles, height: legend.getBoundingClientRect().height, overflow: legend.scrollWidth - legend.clientWidth,
          entries: [...legend.children].map((entry) => entry.textContent)}; }"""


@pytest.mark.browser
@pytest.mark.parametrize("viewport", [PHONE, DESKTOP], ids=["phone", "desktop"])
def test_browser_the_legend_under_a_run_is_one_line(shipped_server, tmp_path, viewport):  # noqa: F811
    # on a 390x844 phone the legend under Generate's canvas wrapped to two lines while a run wrote
    from playwright.sync_api import expect

    where = "phone" if viewport == PHONE else "desktop"
    with chromium() as browser:
        page = new_page(browser, viewport)
        page.goto(shipped_server)
        expect(page.locator("#generate-canvas .mdlm-legend")).to_contain_text("given")
        page.get_by_role("button", name="Generate", exact=True).click()
        writing = page.wait_for_function(LEGEND_WHILE_WRITING, timeout=60_000, polling=20).json_value()
        page.locator("#generate-canvas").screenshot(
            path=str(screenshot_path(tmp_path, f"{where}-legend-while-writing.png"))
        )
        assert len(writing["entries"]) == 5 and max(writing["middles"]) - min(writing["middles"]) <= 2, writing
        assert writing["height"] <= 12 * 1.8 + 1 and writing["overflow"] <= 0, writing  # one line, all of it seen
        expect(page.locator("#generate-readout")).to_contain_text("chars/s", timeout=60_000)
        page.screenshot(path=str(screenshot_path(tmp_path, f"{where}-legend-after-run.png")))
