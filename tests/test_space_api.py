"""The app's API and MCP endpoints: parameters by name, raw calls checked, the API page, text-and-numbers answers."""

import asyncio
import html
import json
import re

import httpx
import pytest
from gradio_client import Client

import app
from mdlm_hf import MASK_GLYPH, SamplerOptions
from mdlm_space import loading, texts
from tests.conftest import PageClient


def test_endpoints_take_their_parameters_by_name(client):
    *_, (canvas_html, text, readout, seed) = client.submit(
        prompt="", length=30, num_steps=3, seed=1, end_at="length", api_name="/generate_page"
    )
    assert len(text) == 30 and "done in 3 steps" in readout
    *_, (canvas_html, text, readout, seed) = client.submit(
        template="to __ or", num_steps=2, read_better=False, api_name="/infill_page"
    )
    assert text.startswith("to ") and text.endswith(" or") and "done in 2 steps" in readout
    # streams order writes each 2-character blank in 2 passes, though 4 steps are allowed: the readout says done
    *_, (canvas_html, text, readout, seed) = client.submit(
        template="to __ or not __", num_steps=4, read_better=False, api_name="/infill_page"
    )
    assert "done in 2 of 4 steps" in readout and "2 forward passes" in readout


def api_call(server: str, endpoint: str, values: list) -> str:
    """One raw HTTP call, as a client in any language makes it: the endpoint's event stream, as text."""
    event = httpx.post(f"{server}gradio_api/call/{endpoint}", json={"data": values}, timeout=30).json()["event_id"]
    return httpx.get(f"{server}gradio_api/call/{endpoint}/{event}", timeout=60).text


def test_a_call_with_more_values_than_the_endpoint_takes_is_refused_by_name(server, capfd):
    # gradio drops values past an endpoint's inputs, so a caller's extra or misplaced
    # argument was silently ignored
    forward = api_call(server, "forward_process", ["To be, or not to be", 0.5, 0])
    assert "event: complete" in forward
    stream = api_call(server, "forward_process", ["To be, or not to be", 0.5, 0, 7])
    assert "event: error" in stream
    assert "forward_process takes 3 values (line, t, seed), got 4" in stream
    assert "Traceback" not in capfd.readouterr().err


def test_a_call_with_too_few_values_names_what_is_missing(server, capfd):
    # gradio's own check of too few values raised a plain error that reached the caller as {"error": null}
    stream = api_call(server, "generate", ["ROMEO:\n", 20, 4])
    assert "event: error" in stream
    assert "generate takes 21 values" in stream and "got 3" in stream
    assert "missing end_at, order, order_temperature" in stream  # in the page's order of the controls
    assert "capital_temperature_factor" in stream
    empty = api_call(server, "forward_process", [])
    assert "forward_process takes 3 values (line, t, seed), got 0: missing line, t and seed" in empty
    assert "null" not in empty.split("event: error")[-1]
    assert "Traceback" not in capfd.readouterr().err


def test_a_file_payload_as_a_plain_parameter_is_refused_by_name_on_every_endpoint(server, capfd):
    # gradio moved a FileData dict into its cache before any handler ran and refused it as {"error": null}
    payload = {"path": "/etc/passwd", "meta": {"_type": "gradio.FileData"}, "orig_name": "passwd"}
    info = httpx.get(f"{server}gradio_api/info", timeout=30).json()["named_endpoints"]
    checked = 0
    for endpoint, described in info.items():
        parameters = described["parameters"]
        plain = [i for i, p in enumerate(parameters) if p["type"].get("type") in ("string", "number", "boolean")]
        if not plain:
            continue
        values = [p["parameter_default"] if p["parameter_has_default"] else p["example_input"] for p in parameters]
        values[plain[0]] = payload
        stream = api_call(server, endpoint.lstrip("/"), values)
        name = parameters[plain[0]]["parameter_name"]
        assert f"{name} must be" in stream and "got a file" in stream, (endpoint, stream[-300:])
        checked += 1
    assert checked >= 5 and {"/score", "/generate"} <= set(info)
    assert "Traceback" not in capfd.readouterr().err


def test_the_api_pages_text_examples_are_the_defaults_whole_lines_with_nothing_stripped(server, model_dir):
    # Score's example was Sonnet 18 with its apostrophes stripped ("summers day", "dimmd"): its most surprising
    # character was the "d" of a word Shakespeare never wrote
    info = httpx.get(f"{server}gradio_api/info", timeout=30).json()["named_endpoints"]
    text = next(p for p in info["/score"]["parameters"] if p["parameter_name"] == "text")
    assert (
        text["example_input"]
        == "Thou art more lovely and more temperate: Rough winds do shake the darling buds of May,"
    )
    for endpoint in info.values():
        for parameter in endpoint["parameters"]:
            example = parameter["example_input"]
            if isinstance(example, str) and not parameter["parameter_has_default"]:
                words = set(texts.SONNET_18.split()) | {w for e in texts.INFILL_EXAMPLES for w in e.split()}
                assert set(example.split()) <= words | {"ROMEO:"}, (parameter["parameter_name"], example)


def python_snippet(info: dict, endpoint: str) -> str:
    """The "Use via API" page's Python snippet, as its page writes it: a string default or example between double
    quotes, as it is (gradio's frontend does not escape it)."""

    def shown(value, kind: str) -> str:
        if kind in ("str", "string") or kind.startswith("Literal["):
            return f'"{value}"'
        return str(value)  # None, True, False and numbers as Python writes them

    lines = []
    for par in info["named_endpoints"][f"/{endpoint}"]["parameters"]:
        value = par["parameter_default"] if par["parameter_has_default"] else par["example_input"]
        lines.append(f"\t{par['parameter_name']}={shown(value, par['python_type']['type'])},")
    return "\n".join(["client.predict(", *lines, f'\tapi_name="/{endpoint}",', ")"])


def test_the_api_page_snippets_run_as_pasted_and_name_no_internals(server):
    # the page printed the prompt "ROMEO:\n" with a real line break inside the string, and named MAX_CANVAS; the
    # curl snippets of /score and /forward_process broke on the apostrophe of "summer's", in single quotes; /rewrite's
    # sent an empty text with start = end = 0
    info = httpx.get(f"{server}gradio_api/info", timeout=30).json()
    client = Client(server, verbose=False)
    for endpoint in MCP_CALLS:
        snippet = python_snippet(info, endpoint)
        result = eval(compile(snippet, endpoint, "eval"), {"client": client})  # runs as pasted
        assert isinstance(result, dict) and "'" not in snippet, (endpoint, snippet)
        described = info["named_endpoints"][f"/{endpoint}"]["description"]
        assert described and not re.search(r"\b[A-Z]+_[A-Z_]+\b|\btab\b", described), described
        assert "`" not in described  # the page shows it as plain text
    client = PageClient(server, verbose=False)
    *_, seed = client.predict(**{"length": 8, "num_steps": 2, "prompt": "ROMEO:"}, api_name="/generate_page")
    assert isinstance(seed, (int, float))


def test_mcp_tools_are_named_and_described_for_a_caller(model_dir):
    # the MCP tools were named after the app's wrappers (recording, recording_1, streaming, streaming_1, single),
    # and described with internal constants and tabs; gradio's MCP server names a tool after its function and
    # describes it and its parameters from the function's docstring
    from gradio.utils import get_function_description

    model, known_words = loading.load_model(model_dir)
    demo = app.build_demo(model, known_words)
    named = {fn.api_name: fn for fn in demo.fns.values() if fn.api_name}
    named = {name: fn for name, fn in named.items() if f"/{name}" in demo.get_api_info()["named_endpoints"]}
    assert sorted(named) == ["compare", "forward_process", "generate", "infill", "rewrite", "score"]
    for name, fn in named.items():
        assert fn.fn.__name__ == name
        description, parameters, returns = get_function_description(fn.fn)
        parameters.pop("request")  # gradio's own: the caller's address, no parameter of the tool
        assert description and returns, name
        assert all(parameters.values()), (name, parameters)
        for text in (description, *parameters.values(), *returns):
            assert not re.search(r"\b[A-Z]+_[A-Z_]+\b|\btabs?\b", text), (name, text)


# one call of each MCP tool, and what its answer must hold
MCP_CALLS = {
    "generate": (dict(prompt="ROMEO:\n", length=24, num_steps=4, end_at="length", seed=3, fixed_seed=True), "text"),
    "infill": (dict(template="to __ or not __", num_steps=2), "text"),
    "compare": (dict(prompt="ROMEO:\n", length=16, num_steps=4, seed=1, fixed_seed=True), "takeaway"),
    "score": (dict(text="to be or not"), "bits_per_character"),
    "rewrite": (dict(text="to be or not to be", start=3, end=8, num_steps=4), "ranking"),
    "forward_process": (dict(line="to be or not to be", t=0.5, seed=0), "restored"),
}


def mcp_answers(server: str, progress: bool = False) -> tuple[set[str], dict]:
    """The app's MCP tools, and each MCP_CALLS call's result, through gradio's MCP server as a client calls it (with
    a progress token: the streaming path)."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    async def noted(progress: float, total: float | None, message: str | None) -> None:
        pass

    async def calls() -> tuple[set[str], dict]:
        async with streamablehttp_client(f"{server}gradio_api/mcp/") as (read, write, _):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = {tool.name for tool in (await session.list_tools()).tools}
                answers = {}
                for name, (arguments, _) in MCP_CALLS.items():
                    callback = noted if progress else None
                    answers[name] = await session.call_tool(name, arguments, progress_callback=callback)
                return tools, answers

    return asyncio.run(calls())


@pytest.mark.parametrize("progress", [False, True])
def test_every_mcp_tool_answers_in_text_and_numbers(server, progress):
    # generate and infill failed on every MCP call ("pop index out of range": their replay frames, a gr.State, were
    # among the outputs gradio's MCP server unpacks), and score and compare answered with the page's HTML
    tools, answers = mcp_answers(server, progress)
    assert tools == set(MCP_CALLS)
    for name, answer in answers.items():
        assert not answer.isError, (name, answer.content)
        (content,) = answer.content
        result = json.loads(content.text)  # a dict of text and numbers, one per tool, as JSON (was a Python repr)
        assert MCP_CALLS[name][1] in result and "<" not in content.text, (name, content.text)
    generated = json.loads(answers["generate"].content[0].text)
    assert generated["text"].startswith("ROMEO:\n") and len(generated["text"]) == 31 and generated["seed"] == 3
    ranking = json.loads(answers["rewrite"].content[0].text)["ranking"]
    assert [choice["rank"] for choice in ranking] == [1, 2, 3]
    assert all(choice["text"][:3] == "to " and choice["text"][8:] == " not to be" for choice in ranking)
    scored = json.loads(answers["score"].content[0].text)
    assert scored["characters"] == 12 and scored["bits_per_character"] > 0


def test_the_api_endpoints_return_text_and_numbers_with_the_pages_defaults(server, model_dir):
    # the API returned the page's HTML (3,347 characters for Score's one-line summary, 18k for Compare) and its
    # schema said "default: None" where the default is 0
    client = Client(server, verbose=False)  # what a caller sees: the API page's endpoints only
    info = client.view_api(return_format="dict", print_info=False)["named_endpoints"]
    assert sorted(info) == sorted(f"/{name}" for name in MCP_CALLS)
    defaults = {p["parameter_name"]: p for p in info["/generate"]["parameters"]}
    assert defaults["seed"]["parameter_default"] == 0 and defaults["seed"]["python_type"]["type"] == "int"
    assert defaults["fixed_seed"]["parameter_default"] is False
    assert defaults["order"]["parameter_default"] == SamplerOptions().order
    frames = list(client.submit(**MCP_CALLS["generate"][0], api_name="/generate"))
    assert len(frames) == 5 and all(set(frame) == {"text", "readout", "seed"} for frame in frames)
    assert MASK_GLYPH in frames[0]["text"] and MASK_GLYPH not in frames[-1]["text"]
    assert frames[-1]["readout"].startswith("seed 3 · done in 4 steps")
    compared = client.predict(**MCP_CALLS["compare"][0], api_name="/compare")
    assert set(compared) == {"left_to_right", "confidence", "twin", "takeaway", "seed"}
    assert all(len(compared[side]["text"]) <= 16 for side in ("left_to_right", "confidence", "twin"))  # to its end
    assert compared["takeaway"].startswith("Takeaway:") and "<" not in json.dumps(compared)
    with pytest.raises(Exception, match="seed must be a whole number"):
        client.predict(prompt="", length=10, seed=2.5, fixed_seed=True, api_name="/generate")


def test_the_apis_compared_texts_end_where_the_pages_do(server, client):
    # each side's text ran to the race's length, mid-word ("... not done in t"), where the page strikes that tail
    # out and its Rewrite panel takes the text up to the end of a line or a word
    from mdlm_space.order_view import CELL, DROPPED_TAIL
    from mdlm_space.render import NEWLINE_GLYPH

    arguments = dict(prompt="ROMEO:\n", length=60, num_steps=8, seed=5, fixed_seed=True)
    compared = Client(server, verbose=False).predict(**arguments, api_name="/compare")
    page = client.predict(**arguments, api_name="/compare_page")
    canvases = dict(left_to_right=page[0], confidence=page[2], twin=page[6])
    assert any(DROPPED_TAIL in canvas for canvas in canvases.values())  # a text that ended before the race's end
    for side, canvas in canvases.items():
        cells = CELL.findall(canvas.split(DROPPED_TAIL, 1)[0])
        shown = "".join("\n" if char == NEWLINE_GLYPH else html.unescape(char) for _, char in cells)
        assert compared[side]["text"] == shown.removeprefix(arguments["prompt"]), side
