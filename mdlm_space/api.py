"""What API and MCP callers get: text and numbers, never the page's HTML or its session state. Each public endpoint
(`/generate`, `/infill`, `/compare`, `/score`, `/rewrite`, `/forward_process`, an MCP tool each) takes the same
parameters as its tab, checked by the same handler, and returns one dict per streamed step; the page's own events
are undocumented (`<endpoint>_page`), since what they return is for the page to show."""

from __future__ import annotations

import contextlib
import inspect
import json
import re
from collections.abc import Callable, Iterator
from typing import Any, Literal

import gradio as gr

from mdlm_hf import MASK_GLYPH, MDLM
from mdlm_hf.metrics import valid_word_rate
from mdlm_space.endpoints import REQUEST, api_doc, input_names
from mdlm_space.handlers import ForwardGuesses, forward_guesses, score_summary, scored
from mdlm_space.race import race_rounds, text_end
from mdlm_space.texts import passes


def json_mcp_answers() -> None:
    """Makes gradio's MCP server answer a tool's dict as JSON text: it wrote `str(dict)`, a Python repr with single
    quotes that `json.loads` refuses. Applied once, to the server class routes.create_app builds at launch."""
    from gradio.mcp import GradioMCPServer

    written = GradioMCPServer.postprocess_output_data
    if getattr(written, "as_json", False):
        return

    def postprocess_output_data(self: GradioMCPServer, data: Any, root_url: str) -> Any:
        as_json = [json.dumps(item, ensure_ascii=False) if isinstance(item, (dict, list)) else item for item in data]
        return written(self, as_json, root_url)

    postprocess_output_data.as_json = True  # type: ignore[attr-defined]
    GradioMCPServer.postprocess_output_data = postprocess_output_data  # type: ignore[method-assign]


def page_event(name: str) -> dict[str, str]:
    """The arguments that make a tab's event the page's own: callable (the tests and the page use it) but not
    documented on the API page nor served as an MCP tool."""
    return dict(api_name=f"{name}_page", api_visibility="undocumented")


def api_type(component: gr.components.Component) -> Any:
    """The Python type an API caller passes for a control (its JSON schema on the API page and in MCP)."""
    if isinstance(component, gr.Checkbox):
        return bool
    if isinstance(component, (gr.Dropdown, gr.Radio)):
        return Literal[tuple(value for _, value in component.choices)]
    if isinstance(component, gr.Number):  # a seed, a character's position: the handler refuses a fraction
        return int
    if isinstance(component, gr.Slider):
        return int if float(component.step).is_integer() else float
    return str


def without_markdown(line: str) -> str:
    """A readout or summary the page shows as markdown, as plain text."""
    return re.sub(r"<[^>]+>", "", line.replace("**", "")).strip()


def public_endpoint(
    name: str, bound: dict, result: Callable[..., dict], defaults: dict[str, Any] | None = None
) -> None:
    """Serves `bound` (an `event` of the page: its function and input controls) as the API endpoint and MCP tool
    `name`: the same parameters, typed and with the page's defaults (or `defaults`, where the page's would not run:
    Rewrite's empty text), and `result(*outputs)` (a dict of text and numbers) for each of its outputs."""
    fn, names = bound["fn"], input_names(bound["fn"])

    if inspect.isgeneratorfunction(fn):

        def plain(*values: Any) -> Iterator[dict]:
            with contextlib.closing(fn(*values)) as frames:  # closed when the caller cancels: the sampler stops too
                for outputs in frames:
                    yield result(*outputs)

    else:

        def plain(*values: Any) -> dict:
            return result(*fn(*values))

    inputs = dict(zip(names, bound["inputs"], strict=True))
    defaults = {name_: component.value for name_, component in inputs.items()} | (defaults or {})
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    parameters = [inspect.Parameter(n, kind, default=defaults[n], annotation=api_type(c)) for n, c in inputs.items()]
    request = REQUEST.replace(default=None)  # passed on to the page's function; after defaults, so one too
    plain.__signature__ = inspect.Signature([*parameters, request], return_annotation=dict)
    plain.__annotations__ = {p.name: p.annotation for p in [*parameters, REQUEST]} | {"return": dict}
    plain.__name__ = name  # the MCP tool's name
    plain.__doc__ = api_doc(name, inputs)
    gr.api(plain, api_name=name)


# --- each endpoint's result, from its handler's outputs ---


def run_result(canvas: str, text: str, readout: str, seed: int) -> dict:
    """/generate and /infill: the text so far (finished at the end), the readout and the seed."""
    return dict(text=text, readout=without_markdown(readout), seed=seed)


def score_result(model: MDLM) -> Callable[..., dict]:
    """/score's result from its handler (`scored`) outputs: the text's bits per character once every character is
    scored, and the progress until then."""

    def result(text: str, bits: list[float], num_passes: int) -> dict:
        done = [b for b in bits if b == b]
        if len(done) < len(bits):
            progress = f"{len(done):,} of {len(bits):,} characters scored ({passes(num_passes)})"
            return dict(bits_per_character=None, characters=len(bits), summary=progress)
        worst = max(range(len(bits)), key=bits.__getitem__)
        return dict(
            bits_per_character=round(sum(bits) / len(bits), 4),
            characters=len(bits),
            most_surprising=dict(position=worst + 1, character=text[worst], bits=round(bits[worst], 2)),
            summary=without_markdown(score_summary(model, text, bits, num_passes)),
        )

    return result


def scores(model: MDLM, text: str | None) -> Iterator[tuple[str, list[float], int]]:
    """/score's handler: the text, each character's bits so far, and the passes, after each pass."""
    for bits, num_passes in scored(model, text):
        yield text, bits, num_passes


def forward_result(found: ForwardGuesses) -> dict:
    """/forward_process: the masked line (masks as MASK_GLYPH), the model's guess under each mask, and the counts."""
    triples = list(zip(found.line, found.is_masked, found.guesses, strict=True))
    masked = "".join(MASK_GLYPH if m else c for c, m, _ in triples)
    guessed = "".join(g if m else c for c, m, g in triples)
    return dict(
        masked_line=masked,
        guesses=guessed,
        masked=found.num_masked,
        restored=found.num_restored,
        summary=found.summary(),
    )


def forward_guessed(model: MDLM, line: str | None, t: float, seed: float) -> tuple[ForwardGuesses]:
    """/forward_process's handler: the masked line and the model's guesses (`forward_guesses`), as its one output."""
    return (forward_guesses(model, line, t, seed),)


def race_result(model: MDLM, known_words: set[str] | None, twin: MDLM | None) -> Callable[..., Iterator[tuple]]:
    """/compare's handler: after each round, each side's text (as far as the page's: `text_end`), forward passes,
    seconds, share of real words once done and characters that fell back; the takeaway and the seed."""

    def compared(**controls: Any) -> Iterator[tuple[dict]]:
        for now in race_rounds(model, known_words, twin=twin, **controls):
            sides = {}
            for name, state in now.latest.items():
                side_model = twin if name == "twin" else model
                written = side_model.tokenizer.decode(state.tokens[0, now.num_fixed :])
                kept = text_end(side_model, state, now.num_fixed)
                sides[name] = dict(
                    text=written if kept is None else written[: kept - now.num_fixed],
                    forward_passes=state.num_forward_passes,
                    seconds=round(now.seconds[name], 3),
                    real_words=real_word_share(written, known_words) if state.done else None,
                    fell_back=None if state.word_fallbacks is None else int(state.word_fallbacks[0]),
                )
            yield (dict(sides, takeaway=without_markdown(now.takeaway), seed=now.seed),)

    compared.__name__ = "compare"
    return compared


def real_word_share(text: str, known_words: set[str] | None) -> float | None:
    """The share of `text`'s words in the model's word list, or None without a list or words."""
    rate = valid_word_rate(text, known_words) if known_words is not None else float("nan")
    return None if rate != rate else round(rate, 3)


def example_span(text: str) -> tuple[int, int]:
    """The span an API example rewrites: the text's second word (its first, if it has one word)."""
    found = [match.span() for match in re.finditer(r"[A-Za-z']+", text)]
    return found[1] if len(found) > 1 else found[0] if found else (0, len(text))


def rewrite_result(*outputs: Any) -> dict:
    """/rewrite: the readout while the three are written, then the ranking (each rewrite's text, span and bits per
    character of the span, likeliest first)."""
    readout, choices, seed = outputs[-3:]
    readout = readout.removesuffix(" Pick one to keep it.")  # the page's buttons
    ranking = [{key: choice[key] for key in ("rank", "text", "span", "bits_per_char")} for choice in choices or []]
    return dict(ranking=ranking, readout=without_markdown(readout), seed=seed)
