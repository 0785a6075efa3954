"""A tab's run: its run and Stop buttons, the canvas column beside them, the replay of the run's frames, and the
redraw of a draft when the input changes."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import gradio as gr

from mdlm_space.api import page_event
from mdlm_space.controls import QUIET, remembered, taken
from mdlm_space.handlers import running, stopped
from mdlm_space.render import MAX_LONG_FRAMES_PER_SECOND
from mdlm_space.texts import marked_last_run


def run_buttons(label: str) -> tuple[gr.Button, gr.Button]:
    """A tab's run button and its Stop button, side by side."""
    with gr.Row():
        run = gr.Button(label, variant="primary", scale=3)
        # a plain Stop: a red one beside an idle run button read as an alarm (it only matters while a run streams)
        return run, gr.Button("Stop", variant="secondary", scale=1, min_width=80)


# runs in the page before the run's request, passing its inputs on: scrolls only as far as it takes to show the
# whole canvas ("nearest"), so nothing moves where it is in view already (a separate js-only event on the same click
# ran only once the run had ended)
BRING_INTO_VIEW = (
    "(...inputs) => { document.getElementById('CANVAS_ID')?.scrollIntoView({block: 'nearest'}); return inputs; }"
)


def stoppable(
    run: gr.Button,
    stop: gr.Button,
    *args: Any,
    readout: gr.components.Component | None = None,
    into_view: str | None = None,
    **kwargs: Any,
) -> Any:
    """`run.click(*args, **kwargs)`, which `stop` cancels: the handler's sampler loop ends after the step it is
    computing (as it does when the page is closed), and the run's `readout` says it stopped. The run brings its
    canvas (the first output) into view, or the element `into_view`. Returns the run's event, to chain on."""
    canvas_id = into_view or getattr((kwargs.get("outputs") or [None])[0], "elem_id", None)
    if canvas_id:  # on a phone the canvas sits below the controls: bring it into view as the run starts
        kwargs["js"] = BRING_INTO_VIEW.replace("CANVAS_ID", canvas_id)
    # the frames are the progress: no status overlay on the outputs, which a stop would leave reading "Error" (and
    # whose error badge sat over the readout); a user's mistake still shows as gradio's error message
    kwargs.setdefault("show_progress", "hidden")
    # a press while a run streams runs once it ends ("once", gradio's default, drops it without a word)
    kwargs.setdefault("trigger_mode", "always_last")
    dependency = run.click(*args, **kwargs)
    stop.click(None, cancels=[dependency], api_name=False)
    if readout is not None:  # once the run has ended: a line rewritten at the Stop click could be a frame behind
        dependency.then(stopped, readout, readout, **QUIET)
    return dependency


REPLAY = ("Replay the last run: step", "after a run: drag to see each of its steps")  # the last run's after an edit


def replay_slider(canvases: list[str] | None) -> dict:
    """The replay slider after a run: one position per frame it streamed (step 0: all masks), at the last; a text
    longer than the model's context streamed at most MAX_LONG_FRAMES_PER_SECOND frames a second, not every step."""
    last, (label, info) = len(canvases or []) - 1, REPLAY
    if last < 1:
        return gr.update(minimum=0, maximum=1, value=0, interactive=False, label=label, info=info)
    if "mdlm-window" in canvases[-1]:  # a long text's: the window it was writing in each frame
        label = "Replay the last run: frame"
        info = f"its {last + 1:,} frames (a long run draws {MAX_LONG_FRAMES_PER_SECOND} a second at most)"
    return gr.update(minimum=0, maximum=last, value=last, interactive=True, label=label, info=info)


def fit_replay(canvases: list[str] | None, wanted: float | None) -> dict:
    """The replay slider's update for a typed step (`remembered`): at most the run's last frame."""
    return {**replay_slider(canvases), "value": wanted, "why": "the last run's last frame"}


def replay_frame(canvases: list[str] | None, step: float | None) -> Any:
    """The canvas of a run's frame `step`, as it was streamed (nothing is recomputed); no change before a run, nor
    for a step the slider does not take as typed (its note says what it did, and the step it sets draws)."""
    if not canvases or not taken(step, 0, len(canvases) - 1, True):
        return gr.skip()
    return canvases[int(step)]


def recorded(fn: Callable) -> Callable:
    """A streaming event function that also yields, as its last output, the list of every canvas (its first
    output) streamed so far: the run's frames, kept in the page's session for the replay slider."""

    def recording(*values: Any) -> Iterator[tuple]:
        canvases: list[str] = []
        with contextlib.closing(fn(*values)) as frames:  # closed when the run is stopped: its sampler stops too
            for outputs in frames:
                canvases.append(outputs[0])
                # a copy: the list yielded last is what the page's state holds, and a frame computed after it (one
                # ahead, never shown once the run is stopped) must not join it
                yield (*outputs, list(canvases))

    recording.__signature__, recording.__doc__, recording.__name__ = fn.__signature__, fn.__doc__, fn.__name__
    recording.__annotations__ = fn.__annotations__  # gradio passes the request where one is annotated
    return recording


def replayable(
    run: gr.Button, stop: gr.Button, handler: dict, outputs: list, replay: tuple[gr.Slider, gr.State], endpoint: str
) -> None:
    """A stoppable run, the page's event of `endpoint`, whose frames are kept (`replay`: the slider and the session's
    list of canvases), so that after it the slider scrubs through every step on the canvas (`outputs[0]`)."""
    slider, canvases = replay
    recording = {**handler, "fn": recorded(handler["fn"])}
    run_event = stoppable(run, stop, **recording, outputs=[*outputs, canvases], **page_event(endpoint))
    run_event.then(replay_slider, canvases, slider, **QUIET).then(stopped, outputs[2], outputs[2], **QUIET)  # readout
    slider.change(replay_frame, [canvases, slider], outputs[0], **QUIET, trigger_mode="always_last")


def last_run_marks(shown: tuple, placeholders: tuple[str, ...] = ()) -> tuple:
    """Each of a finished run's lines and views (`shown`) marked as the last run's (`marked_last_run`), else kept."""
    return tuple(gr.skip() if (mark := marked_last_run(value, placeholders)) is None else mark for value in shown)


def redraw(
    trigger: Callable, fn: Callable, inputs: list, outputs: Any, readout: gr.components.Component | None = None
) -> None:
    """A quick redraw of `outputs` from the raw values of `inputs` (raw: a slider's bounds check fails on a value its
    new maximum has not caught up with yet). `trigger`: the `then` of the event fitting the controls to the change
    (two "always_last" functions on one trigger deferred each other without end). Nothing while the tab's `readout`
    says a run is streaming: the draft would cover the run's canvas; a finished run's readout is marked as the last
    run's (the canvas showed the new prompt's masks beside "done in 29 of 32 steps")."""

    def drawn(*values: Any) -> Any:
        if readout is None:
            return fn(*values)
        line = values[-1] or ""
        if running(line):
            return gr.skip(), gr.skip()
        # a run's readout starts with its seed: not the placeholder, nor one marked already
        marked = marked_last_run(line) if line.startswith("seed ") else None
        return fn(*values[: len(inputs)]), gr.skip() if marked is None else marked

    watched, drawn_to = (inputs, outputs) if readout is None else ([*inputs, readout], [outputs, readout])
    trigger(drawn, watched, drawn_to, **QUIET, preprocess=False, trigger_mode="always_last")


def canvas_column(tab: str, draft: str, run_label: str) -> tuple[gr.HTML, gr.Markdown]:
    """Beside a tab's prompt and run buttons: the streamed canvas (showing `draft` before the first run) and the
    readout under it. On a phone this column comes right after the run buttons, so the canvas is on the first
    screen while it writes; the tab's other controls follow in a row below (`after_run_column`)."""
    with gr.Column(scale=2):
        canvas = gr.HTML(draft, label="Canvas", elem_id=f"{tab}-canvas")
        # a line before the first run too, so that the run's readout does not push what is below it down; high
        # enough for the line and a note (a lowered length, a long prompt, where the text ended)
        waiting = f"Press {run_label}: the step, the forward passes and the speed show here."
        readout = gr.Markdown(waiting, elem_id=f"{tab}-readout", min_height=96)
    return canvas, readout


def after_run_column(
    tab: str, lines: int, canvas: gr.HTML, readout: gr.Markdown
) -> tuple[list[gr.components.Component], tuple[gr.Slider, gr.State]]:
    """Beside a tab's rarely changed controls: the replay slider and the final text. Returns the outputs of the
    tab's event (the canvas, the final text, the readout) and the replay slider with its session's frames."""
    with gr.Column(scale=2):
        # there before the first run (disabled), so that a run does not push the output down
        replay = dict(label=REPLAY[0], info=REPLAY[1], interactive=False, elem_id=f"{tab}-replay")
        slider = gr.Slider(0, 1, value=0, step=1, precision=0, **replay)
        label = "Text of the last run (the canvas so far while it runs)"  # the last run's after an edit too
        final_text = gr.Textbox(label=label, lines=lines, buttons=["copy"], elem_id=f"{tab}-final-text")
    canvases = gr.State([])
    remembered(slider, fit_replay, (canvases,), shows=True)
    return [canvas, final_text, readout], (slider, canvases)
