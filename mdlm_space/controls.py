"""Controls shared by the tabs: sampler options' sliders (bounded by OPTION_SPECS), seeds and sliders that follow
the prompt (a tab's run, its buttons and replay: runs.py)."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping
from typing import Any

import gradio as gr

from mdlm_hf import MDLM, SamplerOptions
from mdlm_hf.pipeline import default_options
from mdlm_hf.sampling.options import OPTION_SPECS, ORDERS, STREAM_ORDERS, STREAMS_IGNORE, orders_using
from mdlm_space.checks import as_number
from mdlm_space.endpoints import PARAMS

# an event of the page's own that computes nothing heavy: no queue, no API endpoint, no progress overlay
QUIET = dict(queue=False, api_name=False, show_progress="hidden")


def capped_slider(cap: int, wanted: float | None, info: str) -> dict:
    """A slider's update for a maximum that follows another control: `wanted`, the value last chosen, capped (a cap
    that rises again brings it back); below 2, locked at 1 (a gradio slider needs minimum < maximum)."""
    if cap < 2:
        return gr.update(maximum=2, value=1, interactive=False, info=info)
    wanted = cap if wanted is None else wanted
    return gr.update(maximum=cap, value=max(1, min(int(wanted), cap)), interactive=True, info=info)


def fit_steps_to_length(block_size: int, length: float | None, wanted: float | None) -> dict:
    """Steps slider update for a length: one step per character at most; past the model's context, per window."""
    length = int(length or 0)
    if length > block_size:
        return capped_slider(block_size, wanted, f"at most {block_size} per window of {block_size} characters")
    if length < 1:
        info = "nothing to fill yet"
    elif length == 1:
        info = "one character to fill: one step"
    else:
        info = f"at most {length}: one per character to fill"
    return capped_slider(length, wanted, info)


def fit_length(limit: int, prompt: str | None, wanted: float | None) -> dict:
    """Length slider update: the prompt and the characters to generate share `limit` characters."""
    used = len(prompt or "")
    room = limit - used
    if room < 1:
        info = f"the prompt fills all {limit:,} characters: shorten it"
    else:
        info = f"at most {room:,}: the prompt takes {used:,} of {limit:,}"
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


# a control's advice shown under it at most this long: one line of a 300 px column; longer advice is read in the
# tab's closed "About these settings" (`about_settings`), and each control keeps its full advice as `advice` (the
# API's description of the parameter, `arg_words`)
ONE_LINE = 44


def shown_info(advice: str | None) -> str | None:
    """The line under a control: its advice where that fits one line, else none."""
    return advice if advice and len(advice) <= ONE_LINE else None


def advised(component: gr.components.Component, advice: str | None) -> gr.components.Component:
    """`component`, keeping its full `advice`."""
    component.advice = advice or None
    return component


def option_control(name: str, block_size: int, value: Any, label: str | None, **layout: Any) -> gr.components.Component:
    """The control of one sampler option at `value`, labelled and bounded by its OPTION_SPECS entry."""
    spec = OPTION_SPECS[name]
    shared = dict(value=spec.shown(value), label=label or spec.label, **layout)
    if spec.accepts.choices:  # shown in words ("word streams"), passed by name ("word_streams")
        return advised(gr.Dropdown([(c.replace("_", " "), c) for c in spec.accepts.choices], **shared), spec.note)
    if spec.accepts.kind is bool:
        component = gr.Checkbox(info=shown_info(spec.note), **shared)
    else:
        low, high, step = spec.slider
        component = gr.Slider(
            low, block_size if high is None else high, step=step, info=shown_info(spec.note), **shared
        )
    return advised(component, spec.note)


def control(
    name: str, block_size: int, value: Any = None, changes: Changes | None = None, **layout: Any
) -> gr.components.Component:
    """The control of a parameter: OPTION_SPECS for a sampler option, PARAMS for the rest, with the tab's `changes`;
    `value`: a model's own default, such as its prompt. Advice longer than a line is kept (`advised`), not shown."""
    value = default_value(name, changes) if value is None else value
    changed = {key: item for key, item in (changes or {}).get(name, {}).items() if key != "default"}
    if name in OPTION_SPECS:
        return option_control(name, block_size, value, changed.get("label"), **layout)
    spec = dataclasses.replace(PARAMS[name], **changed)
    advice = layout.pop("info", None) or spec.info  # layout may give its own advice
    shared = dict(value=value, label=spec.label, info=shown_info(advice)) | layout  # layout may relabel
    if spec.control == "slider":
        return advised(gr.Slider(spec.low, block_size if spec.high is None else spec.high, step=1, **shared), advice)
    if spec.control == "radio":
        return advised(gr.Radio(list(spec.choices), **shared), advice)
    components = {"textbox": gr.Textbox, "number": gr.Number, "checkbox": gr.Checkbox}
    component = advised(components[spec.control](**shared), advice)
    if spec.control == "number":  # what `remembered` takes as typed (no minimum of gradio's: see `box_bounds`)
        component.bounds = (spec.low, spec.high)
    return component


def about_settings(controls: Mapping[str, gr.components.Component]) -> gr.Accordion:
    """A closed accordion of what each of `controls` does, in full: the fine print one tap away, not under each."""
    lines = [
        f"- **{component.label}**: {component.advice}"
        for component in controls.values()
        if getattr(component, "advice", None)
    ]
    with gr.Accordion("About these settings", open=False) as about:
        gr.Markdown("\n".join(lines))
    return about


def play_shape_controls(model: MDLM) -> dict[str, gr.components.Component]:
    """The checkboxes of real_words and keep_cast, at the model's defaults (`mdlm_hf.pipeline.default_options`)."""
    defaults = default_options(model)
    return {name: control(name, model.block_size, getattr(defaults, name)) for name in ("real_words", "keep_cast")}


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
    seed.input(lambda: True, None, fixed, **QUIET)
    return dict(seed=seed, fixed_seed=fixed)


def said(number: float) -> str:
    """A number as a note says it: 99,999 and 5 whole, 5.5 and -0.25 as typed."""
    return f"{int(number):,}" if float(number).is_integer() else f"{number:g}"


def typed_number(value: Any) -> float:
    """A box's raw value as a float; NaN for an empty box or one that holds no number (a bool is none)."""
    try:
        return as_number(value, "value")
    except gr.Error:
        return math.nan


def taken(value: Any, low: float, high: float | None, whole: bool) -> bool:
    """Whether a box of bounds [low, high] (high None: none) takes `value` as typed (`whole`: whole numbers only)."""
    number = typed_number(value)
    return low <= number and (high is None or number <= high) and (number.is_integer() or not whole)  # NaN: False


def box_bounds(box: gr.components.Component, least: float | None) -> tuple[float, float | None, bool]:
    """A box's least and most (a Number's from the `bounds` `control` sets: gradio's own minimum would refuse a
    value with a bare "Error") and whether it takes whole numbers only."""
    low, high = getattr(box, "bounds", None) or (box.minimum, box.maximum)
    low = -math.inf if low is None else low
    return (low if least is None else least), high, float(box.step or 1).is_integer()


def note(value: Any, kept: Any, low: float, cap: float | None, whole: bool, why: str | None) -> tuple[Any, str] | None:
    """What a box does with a typed `value` it does not take as typed, and the note saying so (None: taken): below
    `low` or empty, it keeps `kept`; past `cap` (`why`: what sets it), the cap; a fraction where `whole`, its floor."""
    number = typed_number(value)
    if number != number or number < low:  # NaN too: "abc"
        told = "an empty box" if value in (None, "") else f"{value} is not a number"
        if number == number:
            told = f"{said(number)} is less than {said(low)}, the least here"
        return kept, f"{told}: kept {said(kept)}"
    if cap is not None and number > cap:
        return (
            cap,
            f"{said(number)} is more than {said(cap)}, the most here{f' ({why})' if why else ''}: set to {said(cap)}",
        )
    if whole and not number.is_integer() and math.isfinite(number):  # "5.5" in a whole-number box
        return math.floor(number), f"{said(number)} is not a whole number: set to {said(math.floor(number))}"
    return None


def remembered(
    box: gr.components.Component,
    refit: Callable | None = None,
    inputs: tuple = (),
    least: float | None = None,
    shows: bool | None = None,
) -> gr.State:
    """The value last chosen by hand in a number or slider box, which a capped slider returns to when its cap
    rises; a typed value not taken as typed is never changed silently: the info line says what was done (`note`).

    `refit(*inputs, wanted)`: the box's update for the values of `inputs` (its `most` and `why`, a Number's cap
    and what sets it, popped, not sent); none: fixed bounds. `shows` (the default without a refit): keep the value
    the box last showed, set by hand or by the page, not a capped slider's wish. `least`: the least value taken
    when typed, above the box's minimum. Raw values: gradio's bounds check would log a traceback and the page
    snap to the bound in silence."""
    wanted, (low, high, whole) = gr.State(box.value), box_bounds(box, least)
    fixed, info = refit is None, box.info
    shows = fixed if shows is None else shows
    if fixed:

        def refit(wanted: Any) -> dict:
            return gr.update(value=wanted, info=info)

    def remember(value: Any, last: Any, *others: Any) -> tuple[Any, Any]:
        update = refit(*others, value if taken(value, low, None, False) else last)
        why = update.pop("why", None if fixed else update.get("info"))
        cap = update.pop("most", update.get("maximum", high))
        if update.get("interactive") is False:
            return value, gr.skip()
        kept = update.get("value", last)
        done = note(value, low if kept is None else kept, low, cap, whole, why)
        if done is None:
            # an earlier note no longer describes the value ("": the page keeps an info line updated to None)
            return value, gr.update(info=update.get("info") or "")
        number = typed_number(value)
        if shows or (whole and not number.is_integer() and number >= low):  # a fraction: its whole number
            wish = done[0]
        else:  # below the least or empty: the last; past the cap: as typed, for a cap that rises again
            wish = value if number >= low else last
        return wish, {**update, "value": done[0], "info": done[1]}

    quiet = dict(QUIET, preprocess=False, trigger_mode="always_last")
    box.input(remember, [box, wanted, *inputs], [wanted, box], **quiet)
    if shows:  # what the page sets is what the box shows: the value to keep ("multiple": a second "always_last"
        # function on the box's change, as a view's, would defer the other's calls without end)
        kept = dict(quiet, trigger_mode="multiple")
        box.change(lambda value: value if taken(value, low, high, whole) else gr.skip(), box, wanted, **kept)
    box.noted = True
    return wanted


def follow_prompt(
    demo: gr.Blocks, limit: int, block_size: int, prompt: gr.Textbox, length: gr.Slider, steps: gr.Slider
) -> tuple[Any, Any]:
    """The length slider follows the prompt (they share `limit` characters) and the steps slider the length, raw
    values as typed. Returns the prompt's and the length's change events."""
    fit_length_to_prompt = functools.partial(fit_length, limit)
    fit_steps = functools.partial(fit_steps_to_length, block_size)
    wanted_length = remembered(length, fit_length_to_prompt, (prompt,), least=1)  # 0 characters: nothing to write
    wanted_steps = remembered(steps, fit_steps, (length,))
    quiet = dict(QUIET, preprocess=False)
    to_prompt = dict(fn=fit_length_to_prompt, inputs=[prompt, wanted_length], outputs=length, **quiet)
    to_length = dict(fn=fit_steps, inputs=[length, wanted_steps], outputs=steps, **quiet)
    demo.load(**to_prompt)
    demo.load(**to_length)  # when the first length fits already
    return prompt.change(**to_prompt), length.change(**to_length)


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


# runs in the page once it loads: a slider's number box no longer snaps a typed value into its bounds when it loses
# focus (gradio's page does, silently; and the value typed, read a moment later for the box's input event, reached
# `remembered` already snapped: an empty box or -5 ran at the least, with no note); the box's note says what it did
NO_SNAP_ON_LEAVING = """() => {
  document.addEventListener('blur', (event) => {
    const box = event.target;
    if (box && box.matches && box.matches('input[data-testid="number-input"]')) event.stopImmediatePropagation();
  }, true);
}"""


def note_every_box(demo: gr.Blocks) -> None:
    """`remembered`, with fixed bounds, for every visible number box and slider of `demo` not noted yet, so that
    none changes a typed value silently. Call it inside `demo`, once its tabs are laid out."""
    demo.load(None, js=NO_SNAP_ON_LEAVING)
    for block in list(demo.blocks.values()):
        if isinstance(block, (gr.Slider, gr.Number)) and block.visible is not False and not getattr(block, "noted", 0):
            remembered(block)
