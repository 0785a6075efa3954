"""The app's endpoints: the parameters that are not sampler options (PARAMS; SamplerOptions names, defaults,
bounds and documents the options), what each endpoint says to a caller, and `event`, which binds a handler to a
tab's controls by their names."""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import gradio as gr
from gradio.components.api_component import Api
from gradio_client import utils as client_utils

from mdlm_hf import MASK_GLYPH
from mdlm_hf.pipeline import END_AT
from mdlm_hf.sampling.options import OPTION_SPECS
from mdlm_hf.windows import MAX_CANVAS
from mdlm_space.checks import MAX_SEED, listed
from mdlm_space.texts import END_AT_WORDS
from mdlm_space.visitors import client_run, run_chars
from mdlm_space.worker import LONG_LANE, SHORT_LANE, gpu_work, iterate_on_model_thread, on_model_thread


@dataclass(frozen=True)
class Param:
    """An endpoint parameter that is not a sampler option (OPTION_SPECS describes those): its label, default (None:
    the model's own, such as its prompt), a number's bounds (its control's and its check's; high None: the model's
    block_size), a choice's choices and advice."""

    label: str
    control: str  # the component: "textbox", "slider", "number", "checkbox" or "radio"
    default: Any = None
    low: int | None = None
    high: int | None = None
    choices: tuple[str, ...] = ()
    info: str = ""


PARAMS: dict[str, Param] = {
    "prompt": Param("Prompt (kept fixed at the start)", "textbox"),
    "template": Param("Template", "textbox"),
    "length": Param(
        "Characters to generate (at most)",
        "slider",
        256,
        0,  # the room a prompt that fills a run leaves; typed, 0 is not taken (controls.remembered's `least`)
        MAX_CANVAS,
        info="past the model's context, window by window",
    ),
    # where a generated text ends (mdlm_hf.pipeline.END_AT): the app ends at a line, so text never stops mid-word
    "end_at": Param(
        "End at",
        "radio",
        "line",
        choices=END_AT,
        info="; ".join(f"{choice}: {words}" for choice, words in END_AT_WORDS.items()),
    ),
    # fixed_seed off (the default) draws a new seed per run; every endpoint returns the seed it used as its last
    # output, so a run can be repeated with fixed_seed on
    "seed": Param("Seed", "number", 0, 0, MAX_SEED, info="with fixed seed on, the seed to run with; off, a new one"),
    "fixed_seed": Param("Fixed seed", "checkbox", False, info="off: a new random seed each run"),
    # READ_BETTER (mdlm_hf.sampling.options): overrides the order, temperature, spacing and steps with its own
    "read_better": Param(
        "Write slower, read better",
        "checkbox",
        False,
        info="a character at a time, left to right: the writing blind readers preferred",
    ),
    "autoregressive": Param("Left-to-right: one character per forward pass (autoregressive-like)", "checkbox", False),
    # Rewrite: a text and the span of it to write again, text[start:end] (the selection fills them)
    "text": Param("Text: click a line to rewrite, or select any span; or paste your own", "textbox"),
    "start": Param("From character", "number", 0, 0, MAX_CANVAS, info="the selection's start, from 0"),
    "end": Param("To character", "number", 0, 0, MAX_CANVAS, info="the first character after it"),
}


# what the API page and MCP clients read of each endpoint (its tool's name is the endpoint's): what it does and
# returns, for a caller, in the caller's terms (the handlers' docstrings are for this code's readers); its
# parameters are described by their labels (`api_doc`); plain text, since the API page shows no markdown
API_DESCRIPTIONS: dict[str, tuple[str, str]] = {
    "generate": (
        "Writes text after a prompt with the masked diffusion model: the prompt is kept as it is, then up to length "
        "characters start as masks and are revealed a few per denoising step, and the text ends at the end of a "
        "line, of a speech, or at exactly the length (end_at). A text longer than the model's context is written "
        f"window by window; the prompt and the text share {MAX_CANVAS:,} characters, and a length past the room "
        "the prompt leaves is lowered (the readout says so). Streams one result per step.",
        f"a dict per step: text (the canvas so far, each mask as {MASK_GLYPH}; finished at the end), readout "
        "(seed, steps, forward passes, speed, where the text ended) and seed (the seed used).",
    ),
    "infill": (
        "Fills in the blanks of a template: every _ is a character to write, every other character stays as it is; "
        "the blanks are revealed a few per denoising step, with context on both sides. Streams one result per step.",
        f"a dict per step: text (the template filled so far, each mask as {MASK_GLYPH}), readout and seed (the "
        "seed used).",
    ),
    "compare": (
        "Races two reveal orders of the same model on the same prompt, seed and number of forward passes: left to "
        "right against confidence order (the surest characters first), with the same reveal rule; and the model's "
        "autoregressive twin, when the app has one, writing the same length one character per pass. Streams each "
        "side's canvas as it goes, then a one-line takeaway.",
        "a dict per round: left_to_right, confidence and twin (without a twin: absent), each a dict of text (each "
        f"mask as {MASK_GLYPH}), forward_passes, seconds, real_words (the share of words in the model's word "
        "list, once done) and fell_back (with real_words or keep_cast on: the characters drawn without their rules, "
        "where no character kept them; else null); takeaway (once every side is done) and seed (the seed used).",
    ),
    "score": (
        "Scores a text under the model: its bits per character, each character read left to right with those "
        "before it (past the model's context, window by window), and how surprised the model was by each "
        "character. Streams its progress.",
        "a dict per pass: bits_per_character (null until every character is scored), characters, "
        "most_surprising (position from 1, character, bits) and summary (one line).",
    ),
    "rewrite": (
        "Rewrites a span of a text: the characters from start up to end are masked and written again three "
        "times, each reading the text on both sides of the span, then ranked by the span's bits per character "
        "given the rest of the text (lower: likelier). Streams the three as they are written.",
        "a dict per step: ranking (empty until the three are scored, then each rewrite's rank, text, span and "
        "bits_per_char, likeliest first), readout (the step, the ranking's progress, the span as it was) and "
        "seed (the seed used).",
    ),
    "forward_process": (
        "Shows the forward process on one line: each character is masked with probability t, and the model guesses "
        "every masked character at once.",
        f"a dict: masked_line (each mask as {MASK_GLYPH}), guesses (the line with the model's guess at each mask), "
        "masked, restored (how many masked characters it guessed right) and summary.",
    ),
}
# the parameters that neither PARAMS nor the sampler options describe, by endpoint
API_ARGS = {
    "score": {"text": "the text to score, in characters the model writes"},
    "forward_process": {
        "line": "a line of characters the model writes, at most its context long",
        "t": "the mask ratio, from 0 to 1: each character is masked with this probability",
    },
    "rewrite": {
        "text": "the text, in characters the model writes",
        "start": "the first character of the span to rewrite, counted from 0",
        "end": "the first character after the span (start < end <= the text's length)",
    },
}


def arg_words(endpoint: str, name: str, component: gr.components.Component) -> str:
    """A parameter of `endpoint` in words, for a caller: its control's label and its whole advice."""
    if name in API_ARGS.get(endpoint, {}):
        return API_ARGS[endpoint][name]
    advice = getattr(component, "advice", None) or getattr(component, "info", None)
    return ": ".join(filter(None, (component.label, advice)))


def api_doc(endpoint: str, inputs: dict[str, gr.components.Component]) -> str | None:
    """The docstring gradio reads for `endpoint` (the API page, MCP tools): what it does, its parameters (`inputs`,
    name -> control), what it returns; None for an event that is no endpoint."""
    if endpoint not in API_DESCRIPTIONS:
        return None
    description, returns = API_DESCRIPTIONS[endpoint]
    args = "\n".join(f"    {name}: {arg_words(endpoint, name, control)}" for name, control in inputs.items())
    return f"{description}\n\nArgs:\n{args}\n\nReturns:\n    {returns}"


@contextlib.contextmanager
def errors_shown() -> Iterator[None]:
    """The one translation of bad input (a ValueError from the package or a check) into a gr.Error, which the page
    shows as one line and the log does not print."""
    try:
        yield
    except gr.Error as error:  # already one (a gr.Error is a ValueError): a slider's bounds, a handler's check
        error.print_exception = False  # a user's mistake is one line on the page, not a traceback in the log
        raise
    except ValueError as error:
        raise gr.Error(str(error), print_exception=False) from None
    except Exception as error:  # the app's own fault: the log keeps the traceback, the caller still reads a line
        raise gr.Error(f"the app failed on this input ({type(error).__name__}: {error})") from error


API_TYPE_WORDS = {"string": "a string", "number": "a number", "integer": "a number", "boolean": "true or false"}


def payload_words(component: gr.components.Component) -> str | None:
    """What a parameter's API payload must be, in words; None for one that may take a dict or list."""
    if isinstance(component, (gr.Slider, gr.Number)):
        return "a number"
    if isinstance(component, gr.Checkbox):
        return "true or false"
    if isinstance(component, gr.Textbox):
        return "a string"
    if isinstance(component, (gr.Radio, gr.Dropdown)):
        return "a valid value"
    if isinstance(component, Api):  # a gr.api endpoint's parameter: its declared JSON type
        return API_TYPE_WORDS.get(str((component.api_info() or {}).get("type")))
    return None


def preprocessed(component: gr.components.Component, name: str, value: Any) -> Any:
    """An event's raw input through its component's preprocessing, and a sampler option's through its OptionSpec
    (a slider's 0 is "off"); a payload of the wrong type is a gr.Error naming the parameter, not gradio's generic
    line."""
    got = "nothing" if value is None or value == "" else repr(value)  # an empty box reads as None
    if isinstance(value, bool) and isinstance(component, (gr.Slider, gr.Number)):  # a slider would take True as 1
        raise gr.Error(f"{name} must be {payload_words(component) or 'a valid value'}, got {got}")
    try:
        value = component.preprocess(value)
    except gr.Error as error:  # the component's own message, such as a slider's bounds, which names no parameter
        raise gr.Error(f"{name}: {error.message}", print_exception=False) from None
    except Exception:
        raise gr.Error(f"{name} must be {payload_words(component) or 'a valid value'}, got {got}") from None
    return OPTION_SPECS[name].parse(value) if name in OPTION_SPECS else value


# gradio passes the request (the caller's address) where a parameter is annotated gr.Request; it is no input
REQUEST = inspect.Parameter("request", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=gr.Request)


def input_names(fn: Callable) -> list[str]:
    """The names of an event function's inputs: its parameters but the request gradio passes."""
    return [name for name, p in inspect.signature(fn).parameters.items() if p.annotation is not gr.Request]


def event(handler: Callable, inputs: dict[str, gr.components.Component], **context: Any) -> dict:
    """Arguments of a gradio event that calls `handler(**context, **{name: value})` on MODEL_THREAD (a streaming one
    step by step) for the `inputs` (name -> control, in the API's parameter order; one named after a SamplerOptions
    field is that option), preprocessed here so that a payload of the wrong type is an error naming its parameter."""

    def by_name(values: tuple) -> dict[str, Any]:
        return {
            name: preprocessed(component, name, value)
            for (name, component), value in zip(inputs.items(), values, strict=True)
        }

    def with_request(values: tuple) -> tuple[tuple, gr.Request | None]:  # none in a direct call
        return (values[:-1], values[-1]) if len(values) == len(inputs) + 1 else (values, None)

    def streaming(*values: Any) -> Iterator:
        values, request = with_request(values)
        with errors_shown():
            named = by_name(values)
            with client_run(request, run_chars(named)) as short:  # refused where the budget has no room for it
                lane = SHORT_LANE if short else LONG_LANE
                for frame in iterate_on_model_thread(handler(**context, **named), lane):
                    if frame is not None:  # a step a long run's throttle does not draw (handlers.THROTTLED)
                        yield frame

    def single(*values: Any) -> Any:
        values, _ = with_request(values)  # a single pass is no long run: not counted
        with errors_shown():
            return on_model_thread(handler, **context, **by_name(values))

    fn = gpu_work(streaming if inspect.isgeneratorfunction(handler) else single)  # every event runs the model
    # what "Use via API" and MCP clients read: the endpoint's name (a tool's, named after its handler) and words
    fn.__name__ = handler.__name__
    fn.__doc__ = api_doc(handler.__name__, inputs) or handler.__doc__
    fn.__signature__ = inspect.Signature(
        [*(inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD) for name in inputs), REQUEST]
    )
    fn.__annotations__ = {REQUEST.name: gr.Request}
    return dict(fn=fn, inputs=list(inputs.values()), preprocess=False)


def refuse_extra_values(demo: gr.Blocks) -> None:
    """Makes `demo` refuse a call with more or fewer values than its endpoint takes, naming them: gradio drops extra
    ones in silence, and its error for too few reached an API caller as `{"error": null}`."""
    check_inputs = demo.validate_inputs

    def validate_inputs(block_fn: Any, inputs: list[Any]) -> None:
        wanted = len(block_fn.inputs)
        names = input_names(block_fn.fn) if block_fn.fn else []
        if len(inputs) == wanted or (len(inputs) < wanted and len(names) != wanted):
            refuse_structured_values(block_fn, inputs, names)
            check_inputs(block_fn, inputs)  # too few for a page event without named parameters: gradio's check
            return
        named = f" ({', '.join(names)})" if names else ""
        missing = f": missing {listed(names[len(inputs) :])}" if len(inputs) < wanted else ""
        raise gr.Error(
            f"{block_fn.api_name or block_fn.name} takes {wanted} values{named}, got {len(inputs)}{missing}",
            print_exception=False,  # a caller's mistake: one line, no traceback in the log
        )

    demo.validate_inputs = validate_inputs


def refuse_structured_values(block_fn: Any, inputs: list[Any], names: list[str]) -> None:
    """A gr.Error naming the parameter where a text, number or choice gets a dict, list or file: gradio's own
    refusal, before any handler runs, reached the caller as `{"error": null}`."""
    for index, (component, value) in enumerate(zip(block_fn.inputs, inputs, strict=False)):
        words, a_file = payload_words(component), client_utils.is_file_obj_with_meta(value)
        if (words and isinstance(value, (dict, list))) or a_file:  # the app takes no file anywhere
            name = names[index] if index < len(names) else (component.label or f"value {index + 1}")
            got = "a file" if a_file or (isinstance(value, dict) and "path" in value) else repr(value)[:60]
            said = f"{name} must be {words}, got {got}" if words else f"{name} takes no file"
            raise gr.Error(said, print_exception=False)


# what the API page prints inside a string literal as it is (it escapes nothing): such a default would not run as
# pasted (an apostrophe: in the curl and CLI snippets' single quotes)
UNPRINTABLE_IN_A_LITERAL = ("\n", "\r", "\t", '"', "\\", "'")


def printable(text: str) -> bool:
    """Whether the API page's snippets hold `text` in a string literal as it is."""
    return not any(char in text for char in UNPRINTABLE_IN_A_LITERAL)


def printable_example(text: str) -> str:
    """The API page's example for a text default it cannot print: its first run of whole printable lines, on one
    line (a quote stripped from a word made "summers day"); else its printable words."""
    run = []
    for line in (line.strip() for line in text.splitlines()):
        if line and printable(line):
            run.append(line)
        elif run:
            break
    return " ".join(run or [word for word in text.split() if printable(word)])


def api_examples_that_run(demo: gr.Blocks) -> None:
    """Makes `demo`'s API page show only snippets that run as pasted: a text parameter whose page default the page
    cannot print (the prompt "ROMEO:\\n", a quote) is required in the API, its example `printable_example`."""
    api_info = demo.get_api_info

    def get_api_info(*args: Any, **kwargs: Any) -> Any:
        info = api_info(*args, **kwargs)
        for endpoint in (info or {}).get("named_endpoints", {}).values():
            for parameter in endpoint["parameters"]:
                value = parameter["parameter_default"]
                if isinstance(value, str) and not printable(value):
                    parameter.update(parameter_has_default=False, parameter_default=None)
                    parameter["example_input"] = printable_example(value) or parameter["example_input"]
        return info

    demo.get_api_info = get_api_info
