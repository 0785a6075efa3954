"""The app's endpoints: each one's parameters by name, in the order its API takes them, and `event`, which binds
a handler to its components by those names."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from typing import Any

import gradio as gr

from mdlm_hf.sampler import REVEAL_RULE_OPTIONS
from mdlm_space.checks import errors_shown, preprocessed
from mdlm_space.worker import gpu_work, iterate_on_model_thread, on_model_thread

INFILL_STEPS = 16  # the Infill tab's default: a template has few blanks
INFILL_REMASK_RATIO = 0.0  # ... and 16 steps are too few for remasking
# each endpoint's parameters in the order its API takes them (positional clients rely on it: new ones go last);
# the handlers take them by name. fixed_seed off (the default) draws a new seed per run; every endpoint returns
# the seed it used as its last output, so a run can be repeated with fixed_seed on
GENERATE_API = tuple(
    "prompt length num_steps temperature top_p order seed block_length "
    "order_temperature prior_weight remask_ratio spacing fixed_seed entropy_bound min_p end_at".split()
)
# where a generated text ends (mdlm_hf.pipeline.END_AT): the app ends at a line, so text never stops mid-word
END_AT_DEFAULT = "line"
INFILL_API = tuple(
    "template num_steps temperature top_p order seed order_temperature prior_weight remask_ratio spacing "
    "fixed_seed entropy_bound min_p".split()
)
COMPARE_API = (
    "prompt",
    "length",
    "num_steps",
    "temperature",
    "seed",
    "autoregressive",
    *REVEAL_RULE_OPTIONS,
    "fixed_seed",
)


def event(handler: Callable, inputs: dict[str, gr.components.Component], on_model: bool = True, **context: Any) -> dict:
    """Arguments of a gradio event that calls `handler(**context, **{name: value})` for the `inputs` (name ->
    component); their order is the API's parameter order, their names its parameter names. The values are
    preprocessed here rather than by gradio, so that a payload of the wrong type is an error naming its parameter.
    The handler runs on MODEL_THREAD (a streaming one step by step), unless `on_model` is False: a long measurement
    that sends its own passes there one by one."""
    names = list(inputs)

    def by_name(values: tuple) -> dict[str, Any]:
        return {
            name: preprocessed(component, name, value)
            for (name, component), value in zip(inputs.items(), values, strict=True)
        }

    def streaming(*values: Any) -> Iterator:
        with errors_shown():
            yield from iterate_on_model_thread(handler(**context, **by_name(values)))

    def single(*values: Any) -> Any:
        with errors_shown():
            if not on_model:
                return handler(**context, **by_name(values))
            return on_model_thread(handler, **context, **by_name(values))

    fn = gpu_work(streaming if inspect.isgeneratorfunction(handler) else single)  # every event runs the model
    fn.__doc__ = handler.__doc__  # what "Use via API" and MCP clients read
    fn.__signature__ = inspect.Signature(
        [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD) for name in names]
    )
    return dict(fn=fn, inputs=list(inputs.values()), preprocess=False)
