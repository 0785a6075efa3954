"""Controls shared by the tabs: sampler options' sliders (bounded by OPTION_SPECS), seeds, run and Stop
buttons, sliders that follow the prompt, and the replay of a run's frames."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import gradio as gr

from mdlm_hf import MDLM, SamplerOptions
from mdlm_hf.pipeline import default_options
from mdlm_hf.sampling.options import OPTION_SPECS, ORDERS, STREAM_ORDERS, STREAMS_IGNORE, orders_using
from mdlm_space.api import page_event
from mdlm_space.endpoints import PARAMS
from mdlm_space.handlers import running, stopped
from mdlm_space.render import MAX_LONG_FRAMES_PER_SECOND
from mdlm_space.texts import before_the_edit


def capped_slider(cap: int, wanted: float | None, info: str) -> dict:
    """Update of a slider whose maximum follows another control: maximum `cap`, value min(wanted, cap), `wanted`
    being the value the user last chose, so that a cap that rises again brings it back. A cap below 2 locks the
    slider at 1 (a gradio slider needs minimum < maximum)."""
    if cap < 2:
        return gr.update(maximum=2, value=1, interactive=False, info=info)
    wanted = cap if wanted is None else wanted
    return gr.update(maximum=cap, value=max(1, min(int(wanted), cap)), interactive=True, info=info)


def fit_steps(num_masks: int, wanted: float | None) -> dict:
    """Steps slider update: at most one denoising step per character to fill."""
    if num_masks < 1:
        info = "nothing to fill yet"
    elif num_masks == 1:
        info = "one character to fill: one step"
    else:
        info = f"at most {num_masks}: one per character to fill"
    return capped_slider(num_masks, wanted, info)


def fit_steps_to_length(block_size: int, length: float | None, wanted: float | None) -> dict:
    """Steps slider update for a length: one step per character at most; past the model's context, per window."""
    length = int(length or 0)
    if length <= block_size:
        return fit_steps(length, wanted)
    info = f"per {block_size} characters: the text is written window by window, {block_size} characters each"
    return capped_slider(block_size, wanted, info)


def fit_length(limit: int, prompt: str | None, wanted: float | None) -> dict:
    """Length slider update: the prompt and the characters to generate share `limit` characters (the model's
    context in Compare, MAX_CANVAS in Generate)."""
    used = len(prompt or "")
    room = limit - used
    if room < 1:
        info = f"the prompt fills all {limit:,} characters a run holds: shorten it"
    else:
        info = f"at most {room:,}: a run holds {limit:,} characters and the prompt takes {used:,}"
    return capped_slider(room, wanted, info)


# a tab's controls where they differ from PARAMS or OPTION_SPECS (name -> default, label; a parameter's high and
# info too), declared next to the tab with the reason
Changes = Mapping[str, Mapping[str, Any]]


def option_names(*groups: str) -> list[str]:
    """The sampler options the app shows in `groups` (OptionSpec.group), in SamplerOptions' order."""
    return [name for name, spec in OPTION_SPECS.items() if spec.group in groups]


# the reveal-rule controls that only some orders use (mdlm_hf.sampling.options.orders_using)
ORDER_BOUND = tuple(name for name in option_names("order", "reveal") if set(orders_using(name)) != set(ORDERS))


def order_bound_update(order: str) -> tuple[dict, ...]:
    """The ORDER_BOUND controls, usable where `order` uses them; streams order's are also set back to off, since it
    refuses them otherwise."""
    return tuple(
        gr.update(interactive=True)
        if order in orders_using(name)
        else gr.update(
            interactive=False,
            **({"value": OPTION_SPECS[name].shown(STREAMS_IGNORE[name])} if order in STREAM_ORDERS else {}),
        )
        for name in ORDER_BOUND
    )


# --- layout ---


def default_value(name: str, changes: Changes | None = None) -> Any:
    """A control's default: the tab's change, else SamplerOptions' (a sampler option) or PARAMS'."""
    if "default" in (changes or {}).get(name, {}):
        return changes[name]["default"]
    return getattr(SamplerOptions(), name) if name in OPTION_SPECS else PARAMS[name].default


def option_control(name: str, block_size: int, value: Any, label: str | None, **layout: Any) -> gr.components.Component:
    """The control of one sampler option at `value`, labelled and bounded by its OPTION_SPECS entry."""
    spec = OPTION_SPECS[name]
    value = spec.shown(value)
    if spec.accepts.kind is bool:
        return gr.Checkbox(value=value, label=label or spec.label, info=spec.note or None, **layout)
    if spec.accepts.choices:  # shown in words ("word streams"), passed by name ("word_streams")
        choices = [(choice.replace("_", " "), choice) for choice in spec.accepts.choices]
        return gr.Dropdown(choices, value=value, label=label or spec.label, **layout)
    low, high, step = spec.slider
    maximum = block_size if high is None else high
    info = spec.note or None
    return gr.Slider(low, maximum, value=value, step=step, label=label or spec.label, info=info, **layout)


def control(
    name: str, block_size: int, value: Any = None, changes: Changes | None = None, **layout: Any
) -> gr.components.Component:
    """The control of a parameter: OPTION_SPECS for a sampler option, PARAMS for the rest, with the tab's `changes`;
    `value`: a model's own default, such as its prompt."""
    value = default_value(name, changes) if value is None else value
    changed = {key: item for key, item in (changes or {}).get(name, {}).items() if key != "default"}
    if name in OPTION_SPECS:
        return option_control(name, block_size, value, changed.get("label"), **layout)
    spec = dataclasses.replace(PARAMS[name], **changed)
    shared = dict(value=value, label=spec.label, info=spec.info or None) | layout  # layout may relabel
    if spec.control == "slider":
        return gr.Slider(spec.low, block_size if spec.high is None else spec.high, step=1, **shared)
    if spec.control == "radio":
        return gr.Radio(list(spec.choices), **shared)
    components = {"textbox": gr.Textbox, "number": gr.Number, "checkbox": gr.Checkbox}
    return components[spec.control](**shared)


def play_shape_controls(model: MDLM, block_size: int) -> tuple[gr.components.Component, gr.components.Component]:
    """The checkboxes of real_words and keep_cast, at the model's defaults (`mdlm_hf.pipeline.default_options`)."""
    defaults = default_options(model)
    return control("real_words", block_size, defaults.real_words), control("keep_cast", block_size, defaults.keep_cast)


def reveal_controls(block_size: int, changes: Changes | None = None) -> dict[str, gr.components.Component]:
    """Reveal order, order temperature and the rest of the reveal rule (with the adaptive entropy bound), as Generate
    and Infill show them."""
    order = default_value("order", changes)

    def made(name: str) -> gr.components.Component:
        usable = dict(interactive=order in orders_using(name)) if name in ORDER_BOUND else {}
        return control(name, block_size, changes=changes, **usable)

    controls = {name: made(name) for name in option_names("order")}
    # one line at a phone's width too: a heading that wraps is centred, under its left-aligned parent
    with gr.Accordion("More of the reveal rule", open=False):
        controls |= {name: made(name) for name in option_names("reveal")}
    bound = [controls[name] for name in ORDER_BOUND]
    controls["order"].change(order_bound_update, controls["order"], bound, api_name=False)
    return controls


def seed_controls(endpoint: str, block_size: int) -> dict[str, gr.components.Component]:
    """The seed box and its "fixed seed" checkbox: off, each run draws a new seed and writes it into the box."""
    with gr.Row():
        seed = control("seed", block_size, elem_id=f"{endpoint}-seed")
        fixed = control("fixed_seed", block_size)
    # typing a seed means running with it
    seed.input(lambda: True, None, fixed, queue=False, api_name=False, show_progress="hidden")
    return dict(seed=seed, fixed_seed=fixed)


def remembered(slider: gr.Slider, refit: Callable | None = None, inputs: tuple = ()) -> gr.State:
    """The value the user last chose on `slider` (by hand: capping it does not change this), which a capped
    slider returns to when its cap rises again. `refit(*inputs, wanted)`: the slider's update (its cap) for the
    values of `inputs`; a number typed into its box past that cap is set to the cap, and its info line says so
    (raw: gradio's own bounds check would only log a traceback, and the page would quietly run at the cap); one
    below the slider's minimum, or none, is not taken: the slider keeps the last value, and its info line says so
    (the page would run at the minimum). A value in bounds clears such a note."""
    wanted = gr.State(slider.value)

    def remember(value: Any, last: Any, *others: Any) -> tuple[Any, Any]:
        if refit is None:
            return value, gr.skip()
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        update = refit(*others, last if number != number or number < slider.minimum else value)
        if update.get("interactive") is False:
            return value, gr.skip()
        if number != number or number < slider.minimum:  # NaN too: "abc"
            said = "an empty box" if value in (None, "") else f"{value} is not a number"
            if number == number:
                said = f"{int(number):,} is less than {slider.minimum:g}, the least here"
            return last, {**update, "info": f"{said}: kept {update['value']:,}"}
        typed = f"{int(number):,}" if number.is_integer() else f"{number:g}"
        cap = update.get("maximum")
        if cap is None or number <= cap:
            return value, gr.update(info=update.get("info"))  # an earlier note no longer describes the value
        info = f"{typed} is more than {cap:,}, the most here ({update.get('info')}): set to {cap:,}"
        return value, {**update, "value": cap, "info": info}

    slider.input(
        remember,
        [slider, wanted, *inputs],
        [wanted, slider],
        queue=False,
        preprocess=False,
        api_name=False,
        show_progress="hidden",
        trigger_mode="always_last",
    )
    return wanted


def follow_prompt(
    demo: gr.Blocks, limit: int, block_size: int, prompt: gr.Textbox, length: gr.Slider, steps: gr.Slider
) -> tuple[Any, Any]:
    """The length slider follows the prompt (they share `limit` characters) and the steps slider the length (a
    text longer than the model's context counts its steps per `block_size` characters). Raw values, as typed: a
    length typed past its cap is capped by its own event. Returns the prompt's and the length's change events."""
    fit_length_to_prompt = functools.partial(fit_length, limit)
    fit_steps = functools.partial(fit_steps_to_length, block_size)
    wanted_length = remembered(length, fit_length_to_prompt, (prompt,))
    wanted_steps = remembered(steps, fit_steps, (length,))
    quiet = dict(queue=False, preprocess=False, api_name=False, show_progress="hidden")
    to_prompt = dict(fn=fit_length_to_prompt, inputs=[prompt, wanted_length], outputs=length, **quiet)
    to_length = dict(fn=fit_steps, inputs=[length, wanted_steps], outputs=steps, **quiet)
    demo.load(**to_prompt)
    demo.load(**to_length)  # when the first length fits already
    return prompt.change(**to_prompt), length.change(**to_length)


def run_buttons(label: str) -> tuple[gr.Button, gr.Button]:
    """A tab's run button and its Stop button, side by side."""
    with gr.Row():
        # a plain Stop: a red one beside an idle run button read as an alarm (it only matters while a run streams)
        return gr.Button(label, variant="primary", scale=3), gr.Button(
            "Stop", variant="secondary", scale=1, min_width=80
        )


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
        dependency.then(stopped, readout, readout, queue=False, api_name=False, show_progress="hidden")
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
        info = f"its {last + 1:,} frames: a long run draws at most {MAX_LONG_FRAMES_PER_SECOND} a second, not each step"
    return gr.update(minimum=0, maximum=last, value=last, interactive=True, label=label, info=info)


def replay_frame(canvases: list[str] | None, step: float | None) -> Any:
    """The canvas of a run's frame `step`, as it was streamed (nothing is recomputed); no change before a run."""
    if not canvases or step is None:
        return gr.skip()
    return canvases[min(max(0, int(step)), len(canvases) - 1)]


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
    quiet = dict(queue=False, api_name=False, show_progress="hidden")
    run_event.then(replay_slider, canvases, slider, **quiet).then(stopped, outputs[2], outputs[2], **quiet)  # readout
    slider.change(replay_frame, [canvases, slider], outputs[0], **quiet, trigger_mode="always_last")


def redraw(
    trigger: Callable, fn: Callable, inputs: list, outputs: Any, readout: gr.components.Component | None = None
) -> None:
    """A quick redraw of `outputs` from the raw values of `inputs`, no queue: it computes nothing heavy. `trigger`:
    the `then` of the event fitting the controls to the change (gradio's page calls a deferred "always_last" function
    by calling all of its event's again: two on one trigger deferred each other without end). Raw: a slider's bounds
    check fails on a value its new maximum has not caught up with yet. None while the tab's `readout` says a run is
    streaming: the draft would replace the run's canvas until its next frame, and stay over its last. With a
    readout, a finished run's is marked as the last run's (`before_the_edit`)."""

    def drawn(*values: Any) -> Any:
        if readout is None:
            return fn(*values)
        if running(values[-1]):
            return gr.skip(), gr.skip()
        marked = before_the_edit(values[-1])
        return fn(*values[: len(inputs)]), gr.skip() if marked is None else marked

    watched, drawn_to = (
        [*inputs, *([readout] if readout is not None else [])],
        [outputs, readout] if readout is not None else outputs,
    )
    quiet = dict(queue=False, preprocess=False, api_name=False, show_progress="hidden", trigger_mode="always_last")
    trigger(drawn, watched, drawn_to, **quiet)


def output_column(
    tab: str, lines: int, draft: str, run_label: str
) -> tuple[list[gr.components.Component], tuple[gr.Slider, gr.State]]:
    """The streamed canvas (showing `draft` before the first run), the replay slider, the readout and the final
    text beside a tab's controls: the outputs of its event, and the replay slider with its session's frames."""
    with gr.Column(scale=2):
        canvas = gr.HTML(draft, label="Canvas", elem_id=f"{tab}-canvas")
        # there before the first run (disabled), so that a run does not push the output down
        slider = gr.Slider(
            0,
            1,
            value=0,
            step=1,
            precision=0,
            label=REPLAY[0],
            info=REPLAY[1],
            interactive=False,
            elem_id=f"{tab}-replay",
        )
        # a line before the first run too, so that the run's readout does not push the final text down
        waiting = f"Press {run_label}: the step, the forward passes and the speed show here."
        # high enough for the line and a note (a lowered length, a long prompt, where the text ended): a note
        # does not push the final text down at the end of a run
        readout = gr.Markdown(waiting, elem_id=f"{tab}-readout", min_height=96)
        label = "Text of the last run (the canvas so far while it runs)"  # the last run's after an edit too
        final_text = gr.Textbox(label=label, lines=lines, buttons=["copy"], elem_id=f"{tab}-final-text")
    return [canvas, final_text, readout], (slider, gr.State([]))


def sampling_options(
    endpoint: str, block_size: int, groups: tuple[str, ...], changes: Changes | None = None
) -> dict[str, gr.components.Component]:
    """The rarely changed controls, in a closed accordion so the run button and the canvas stay in view: the
    reveal rule, the options of `groups` (OptionSpec.group) and the seed."""
    with gr.Accordion("Sampling options: order, temperature, seed", open=False):
        controls = reveal_controls(block_size, changes)
        controls |= {name: control(name, block_size, changes=changes) for name in option_names(*groups)}
        controls |= seed_controls(endpoint, block_size)
    return controls
