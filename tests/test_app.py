import asyncio
import collections
import concurrent.futures
import contextlib
import dataclasses
import importlib.util
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import types
import uuid
from pathlib import Path

import gradio as gr
import httpx
import pytest
import torch
import yaml
from gradio.state_holder import SessionState
from gradio_client import Client

import app
from mdlm_hf import MASK_GLYPH, SamplerOptions, SamplerState
from mdlm_hf.devices import choose_device
from mdlm_hf.diffusion import MASK_RATIOS
from mdlm_hf.metrics import save_word_list
from mdlm_hf.pipeline import default_options
from mdlm_hf.sampling.options import OPTION_SPECS
from mdlm_hf.windows import MAX_CANVAS
from mdlm_space import checks, endpoints, handlers, loading, race, render, serving, texts, worker
from mdlm_space.controls import replay_frame, replay_slider
from mdlm_space.endpoints import event
from mdlm_space.tabs import how_it_works
from mdlm_space.tabs import infill as infill_tab
from mdlm_space.texts import (
    INFILL_EXAMPLES,
    SHAKESPEARE,
    SONNET_18,
    DemoText,
    choose_blank,
    demo_texts,
    passes,
    sample_line,
    sample_passage,
)
from tests.conftest import PageClient, free_port

REPO_ROOT = Path(__file__).resolve().parent.parent
SHAKESPEARE_LIKE = (
    "ROMEO:\nBut soft, what light through yonder window breaks?\nTo be, or not to be, that is the question:\n"
)
JULIET = "JULIET:\nO Romeo, Romeo! wherefore art thou Romeo?"  # 49 characters
# the Compare tests' race: 40 characters after ROMEO's heading in 8 passes, seed 0
ROMEO_RACE = dict(prompt="ROMEO:\n", length=40, num_steps=8, temperature=0.8, seed=0)


@pytest.fixture(autouse=True)
def app_main_leaves_the_test_process_as_it_was():
    """app.main names a private uploads folder in the environment and exits on SIGTERM: undone after each test."""
    before, handler = os.environ.get("GRADIO_TEMP_DIR"), signal.getsignal(signal.SIGTERM)
    yield
    if before is None:
        os.environ.pop("GRADIO_TEMP_DIR", None)
    else:
        os.environ["GRADIO_TEMP_DIR"] = before
    signal.signal(signal.SIGTERM, handler)


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
        """One event's function on the page's values, and the changes its outputs fire."""
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


def api_names(demo: gr.Blocks, endpoint: str) -> list[str]:
    """An endpoint's API parameter names, in the order its API takes them."""
    fn = next(fn for fn in demo.fns.values() if fn.api_name == f"{endpoint}_page")
    return endpoints.input_names(fn.fn)


def tab_controls(demo: gr.Blocks, endpoint: str) -> dict:
    """The input components of an endpoint, by their API parameter names."""
    fn = next(fn for fn in demo.fns.values() if fn.api_name == f"{endpoint}_page")
    return dict(zip(api_names(demo, endpoint), fn.inputs, strict=True))


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    import torch

    from mdlm_hf import MDLM

    text = open(REPO_ROOT / "tests" / "data" / "vocab.txt", encoding="utf-8").read()
    torch.manual_seed(0)
    model = MDLM("".join(sorted(set(text))), n_layer=1, n_head=2, n_embd=32, block_size=128)
    path = tmp_path_factory.mktemp("model")
    model.save_pretrained(path)
    save_word_list(SHAKESPEARE_LIKE, path / "words.txt")
    return path


@pytest.fixture(scope="module")
def twin_dir(model_dir, tmp_path_factory):
    """An untrained autoregressive twin of the model_dir model: its characters, causal."""
    import torch

    from mdlm_hf import MDLM

    torch.manual_seed(1)
    config = json.loads((model_dir / "config.json").read_text())
    path = tmp_path_factory.mktemp("twin")
    MDLM(**{**config, "causal": True}).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def server(model_dir, twin_dir):
    model, known_words = loading.load_model(model_dir)
    demo = app.build_demo(model, known_words, twin=loading.load_twin(twin_dir, model))
    port = free_port()
    demo.queue(default_concurrency_limit=8).launch(
        server_port=port, prevent_thread_lock=True, quiet=True, theme=render.THEME, mcp_server=True
    )
    yield f"http://127.0.0.1:{port}/"
    demo.close()


@pytest.fixture(scope="module")
def client(server):
    return PageClient(server, verbose=False)


def test_generate_streams_and_keeps_the_prompt(client):
    job = client.submit(
        prompt="ROMEO:\n",
        length=60,
        num_steps=12,
        temperature=0.8,
        top_p=1.0,
        order="confidence",
        seed=3,
        block_length=0,
        end_at="length",
        api_name="/generate_page",
    )
    frames = list(job)
    assert len(frames) == 13  # the all-mask canvas, then one frame per step
    assert MASK_GLYPH in frames[0][0] and frames[0][1] == "ROMEO:\n" + MASK_GLYPH * 60  # the canvas so far
    canvas_html, text, readout, seed = frames[-1]
    canvas_only = canvas_html.replace(render.LEGEND, "")
    assert len(text) == 67 and text.startswith("ROMEO:\n") and MASK_GLYPH not in text and MASK_GLYPH not in canvas_only
    assert "done in 12 steps" in readout and "12 forward passes" in readout and "chars/s" in readout


def test_generate_semi_autoregressive_blocks(client):
    # it counted 8 passes for 8 steps, which holds with or without blocks: now each block is written before the next
    frames = client.submit(
        prompt="",
        length=64,
        num_steps=8,
        temperature=1.0,
        top_p=0.9,
        order="margin",
        seed=1,
        block_length=16,
        end_at="length",
        api_name="/generate_page",
    )
    *_, (canvas_html, text, readout, seed) = frames = list(frames)
    assert len(text) == 64 and MASK_GLYPH not in text and "8 forward passes" in readout
    for step in (2, 4, 6):  # 2 steps a block of 16: after them, the blocks so far written, the rest all masks
        written, rest = frames[step][1][: 8 * step], frames[step][1][8 * step :]
        assert MASK_GLYPH not in written and rest == MASK_GLYPH * len(rest), step


def test_generate_with_a_soft_order(client):
    run = dict(prompt="", length=48, num_steps=6, temperature=1.0, top_p=1.0, order="confidence", seed=2)
    run |= dict(block_length=0, end_at="length", api_name="/generate_page")
    soft = list(client.submit(**run, order_temperature=0.5))
    *_, (canvas_html, text, readout, seed) = soft
    assert len(text) == 48 and MASK_GLYPH not in text and "done in 6 steps" in readout
    # it passed with order_temperature ignored: the soft order reveals other positions than the strict one
    strict = list(client.submit(**run, order_temperature=0.0))
    revealed = [[i for i, char in enumerate(frames[1][1]) if char != MASK_GLYPH] for frames in (soft, strict)]
    assert len(revealed[0]) == len(revealed[1]) and revealed[0] != revealed[1]


def test_generate_shows_characters_taken_back_by_remasking(client):
    rule = dict(order_temperature=0.25, prior_weight=0.35, remask_ratio=0.75, spacing=1)
    run = dict(prompt="", length=64, num_steps=12, temperature=1.0, top_p=1.0, order="confidence", seed=0)
    frames = list(client.submit(**run, block_length=0, **rule, end_at="length", api_name="/generate_page"))
    assert len(frames) == 13 and len(frames[-1][1]) == 64 and MASK_GLYPH not in frames[-1][1]
    taken_back = [html.replace(render.LEGEND, "").count("#d9534f") for html, *_ in frames]
    assert sum(taken_back) > 0 and taken_back[-1] == 0
    plain = list(
        client.submit(
            prompt="",
            length=64,
            num_steps=12,
            temperature=1.0,
            top_p=1.0,
            order="confidence",
            seed=0,
            block_length=0,
            order_temperature=0.25,
            prior_weight=0.35,
            remask_ratio=0.0,
            spacing=1,
            api_name="/generate_page",
        )
    )
    assert all("#d9534f" not in html.replace(render.LEGEND, "") for html, *_ in plain)


def test_infill_keeps_fixed_characters(client):
    template = "To be, or not to be, ________ is the question:"
    frames = list(
        client.submit(
            template=template,
            num_steps=4,
            temperature=0.8,
            top_p=1.0,
            order="entropy",
            seed=0,
            order_temperature=0.3,
            api_name="/infill_page",
        )
    )
    assert len(frames) == 5
    text = frames[-1][1]
    assert len(text) == len(template) and "_" not in text and MASK_GLYPH not in text
    assert all(a == b for a, b in zip(template, text, strict=True) if a != "_")


def passes_and_rate(stats: str) -> tuple[int, float]:
    found = re.search(r"(\d+) forward pass(?:es)? · ([\d.]+) chars per pass", stats)
    return int(found[1]), float(found[2])


def test_compare_streams_both_sides(client):
    frames = list(client.submit(**ROMEO_RACE, autoregressive=False, api_name="/compare_page"))
    assert len(frames) >= 9
    left_html, left_stats, right_html, right_stats, summary, seed, twin_html, twin_stats, *orders = frames[-1]
    assert "8 forward passes" in left_stats and "8 forward passes" in right_stats and "real words" in left_stats
    *_, (left_html, left_stats, right_html, right_stats, summary, seed, twin_html, twin_stats, *orders) = client.submit(
        **ROMEO_RACE, autoregressive=True, api_name="/compare_page"
    )
    assert "40 forward passes · 1.0 chars per pass" in left_stats and "8 forward passes" in right_stats
    assert MASK_GLYPH not in left_html and MASK_GLYPH not in right_html


def test_compare_counts_the_characters_revealed_so_far_per_pass(client):
    autoregressive = list(client.submit(**ROMEO_RACE, autoregressive=True, api_name="/compare_page"))
    assert [passes_and_rate(frame[1]) for frame in autoregressive[1:]] == [(i, 1.0) for i in range(1, 41)]
    rule = dict(order_temperature=0, prior_weight=0.35, remask_ratio=0, spacing=1)
    frames = list(client.submit(**ROMEO_RACE, autoregressive=False, **rule, api_name="/compare_page"))
    for left_html, left_stats, right_html, right_stats, *_ in frames[1:]:
        for canvas, stats in ((left_html, left_stats), (right_html, right_stats)):
            passes, rate = passes_and_rate(stats)
            assert rate == pytest.approx((40 - canvas.count(MASK_GLYPH)) / passes, abs=0.05), stats
    assert all(passes_and_rate(stats)[1] == 5.0 for frame in frames[1:] for stats in (frame[1], frame[3]))


def test_compare_uses_one_reveal_rule_on_both_sides_and_says_which(client):
    rule = dict(order_temperature=0.25, prior_weight=0.35, remask_ratio=0.5, spacing=1)
    frames = list(client.submit(**ROMEO_RACE, autoregressive=False, **rule, api_name="/compare_page"))
    left_html, left_stats, right_html, right_stats, summary, seed, twin_html, twin_stats, *orders = frames[-1]
    for stats in (left_stats, right_stats):
        assert "order temperature 0.25" in stats and "remask ratio 0.5" in stats
    assert "spacing 1" in right_stats and "no spacing" in left_stats  # left to right writes characters in a row
    assert "prior weight 0.35" in right_stats and "no prior weight" in left_stats  # left to right scores nothing
    assert any("#d9534f" in frame[0] for frame in frames)  # left to right remasks too
    # the autoregressive-like side: strictly one character per pass, no reveal rule, and says so
    *_, (left_html, left_stats, right_html, right_stats, summary, seed, twin_html, twin_stats, *orders) = client.submit(
        **ROMEO_RACE, autoregressive=True, **rule, api_name="/compare_page"
    )
    assert "one character per forward pass" in left_stats and "remask" not in left_stats
    assert "remask ratio 0.5" in right_stats


def test_compare_has_a_legend_and_a_one_line_takeaway(client, model_dir):
    model, _ = loading.load_model(model_dir)
    demo = app.build_demo(model)
    assert render.RACE_LEGEND in [block.value for block in demo.blocks.values() if isinstance(block, gr.HTML)]
    frames = list(client.submit(**ROMEO_RACE, autoregressive=False, api_name="/compare_page"))
    assert frames[1][4] == "" and frames[-1][4].startswith("**Takeaway:** same 8 forward passes")
    assert "real words" in frames[-1][4]
    *_, (left_html, left_stats, right_html, right_stats, summary, seed, twin_html, twin_stats, *orders) = client.submit(
        **ROMEO_RACE, autoregressive=True, api_name="/compare_page"
    )
    assert "took left to right 40 passes" in summary and "in 8, 5.0x fewer" in summary
    assert "key" in summary and "Compare the passes, not the time" in summary  # no key/value cache here
    # each side's own compute time, the twin's beside the others' (its wall time, live)
    assert all(re.search(r"· \d+\.\d\d s ·", stats) for stats in (left_stats, right_stats, twin_stats))
    assert "The autoregressive twin took 40 forward passes, one character each" in summary


def test_compare_races_the_autoregressive_twin_in_a_third_column(client, model_dir, twin_dir):
    frames = list(client.submit(**ROMEO_RACE, autoregressive=False, api_name="/compare_page"))
    twin_passes = [passes_and_rate(frame[7]) for frame in frames[1:]]
    assert twin_passes == [(i, 1.0) for i in range(1, 41)]  # one character a pass, every frame one more
    assert frames[1][6].count("mdlm-mask") == 39 and MASK_GLYPH not in frames[-1][6]  # cells, within the context
    assert "keys and values cached" in frames[-1][7]
    assert "real words" in frames[-1][7] and "The autoregressive twin took 40 forward passes" in frames[-1][4]
    model, _ = loading.load_model(model_dir)
    with pytest.raises(ValueError, match="the twin must be an autoregressive model"):
        app.build_demo(model, twin=model)
    with pytest.raises(ValueError, match="the app's model must be a diffusion model; pass an autoregressive one as"):
        loading.load_model(twin_dir)
    # the shipped twin goes with the shipped model only: another model has no known twin
    assert loading.default_twin("someone/another-model") == "none"
    assert loading.default_twin(loading.DEFAULT_MODEL) in ("none", str(loading.DEFAULT_TWIN))
    without = list(race.compare(model, None, "", 20, 4, 1.0, 0, False, False))
    assert without[-1][6:8] == ("", "") and "twin" not in without[-1][4]


def test_the_twin_sentence_claims_a_speed_margin_only_where_it_is_real():
    import torch

    state = SamplerState(
        torch.zeros(1, 4, dtype=torch.long),
        *[torch.zeros(1, 4, dtype=torch.bool)] * 2,
        torch.zeros(1, 4),
        torch.zeros(1, 4, dtype=torch.bool),
        4,
        4,
        4,
        9,
    )
    assert "about confidence order's time" in race.twin_sentence(state, state, 3.0, 2.7)
    assert "2.0x confidence order's time" in race.twin_sentence(state, state, 2.4, 1.2)
    assert "2.0x less time" in race.twin_sentence(state, state, 0.6, 1.2)
    # a difference of a few tenths of a second is the machine's noise, whatever its ratio: over four runs the
    # sentence said "1.3x less time", "2.0x less" and "about the same", and at length 1 "2.9x less time (0.03 s
    # against 0.08 s)"; the passes, which repeat from run to run, are what it then compares
    for twin_seconds, diffusion_seconds in ((0.03, 0.08), (0.2, 0.4), (0.9, 0.6)):
        said = race.twin_sentence(state, state, twin_seconds, diffusion_seconds)
        assert "x less" not in said and "x confidence" not in said and "about" not in said, said
        assert "too short" in said and "against confidence order's 4" in said, said
    # the twin draws each character as the other sides do: only the model and the order differ
    drawn = race.twin_options(SamplerOptions(order="left_to_right", temperature=0.7, min_p=0.2, top_p=0.9))
    assert (drawn.order, drawn.temperature, drawn.min_p, drawn.top_p, drawn.spacing) == (
        "left_to_right",
        0.7,
        0.2,
        0.9,
        0,
    )


def test_endpoints_take_their_parameters_by_name(client):
    *_, (canvas_html, text, readout, seed) = client.submit(
        prompt="", length=30, num_steps=3, seed=1, end_at="length", api_name="/generate_page"
    )
    assert len(text) == 30 and "done in 3 steps" in readout
    *_, (canvas_html, text, readout, seed) = client.submit(template="to __ or", num_steps=2, api_name="/infill_page")
    assert text.startswith("to ") and text.endswith(" or") and "done in 2 steps" in readout
    # streams order writes each 2-character blank in 2 passes, though 4 steps are allowed: the readout says done
    *_, (canvas_html, text, readout, seed) = client.submit(
        template="to __ or not __", num_steps=4, api_name="/infill_page"
    )
    assert "done in 2 of 4 steps" in readout and "2 forward passes" in readout


def test_option_controls_take_label_bounds_and_defaults_from_the_one_table(model_dir):
    model, _ = loading.load_model(model_dir)
    demo = app.build_demo(model)
    generate, infill = tab_controls(demo, "generate"), tab_controls(demo, "infill")
    for name in OPTION_SPECS.keys() & generate.keys():
        spec, control = OPTION_SPECS[name], generate[name]
        default = getattr(default_options(model), name)  # the model's own: real_words with its words.txt
        assert control.label == spec.label and control.value == spec.shown(default), name
        if spec.accepts.kind is bool:
            assert isinstance(control, gr.Checkbox) and control.info == spec.note, name
        elif spec.slider is None:
            assert [value for _, value in control.choices] == list(spec.accepts.choices)
            assert [label for label, _ in control.choices] == [c.replace("_", " ") for c in spec.accepts.choices]
        else:
            low, high, step = spec.slider
            assert (control.minimum, control.maximum, control.step) == (low, high or model.block_size, step), name
    # the Infill tab starts with fewer steps and remasking off
    assert (infill["num_steps"].value, infill["remask_ratio"].value) == (
        infill_tab.CHANGES["num_steps"]["default"],
        infill_tab.CHANGES["remask_ratio"]["default"],
    )


def test_length_follows_the_prompt_in_plain_words(client, model_dir):
    # the API: a length that the prompt leaves no room for is lowered, and the readout says so
    *_, last = client.submit(
        prompt=JULIET, length=121, num_steps=8, temperature=1.0, seed=0, autoregressive=False, api_name="/compare_page"
    )
    assert "Length lowered from 121 to 79: a run holds 128 characters, and the prompt takes 49" in last[4]
    # the page: the length slider's maximum follows the prompt, and its value comes back with a shorter prompt
    model, _ = loading.load_model(model_dir)
    page = Page(app.build_demo(model))
    for endpoint, limit in (("generate", 16384), ("compare", 128)):
        controls = tab_controls(page.demo, endpoint)
        prompt, length = controls["prompt"], controls["length"]
        default = page.value(length)
        assert page.props[length._id]["maximum"] == limit - 7  # fitted to the default prompt "ROMEO:\n" on load
        page.type(prompt, JULIET)
        assert page.value(length) == min(default, limit - 49) and page.props[length._id]["maximum"] == limit - 49
        info = page.props[length._id]["info"]
        assert info == f"at most {limit - 49:,}: a run holds {limit:,} characters and the prompt takes 49"
        page.type(prompt, "x" * limit)
        assert page.value(length) == 1 and page.props[length._id]["interactive"] is False
        assert f"the prompt fills all {limit:,} characters" in page.props[length._id]["info"]
        page.type(prompt, "ROMEO:\n")
        assert page.value(length) == default and page.props[length._id]["interactive"] is True


def test_generate_writes_past_the_context_window_by_window(client, monkeypatch):
    monkeypatch.setattr(render, "MAX_LONG_FRAMES_PER_SECOND", 1e9)  # every frame, as a slow CPU would send them
    frames = list(
        client.submit(prompt="ROMEO:\n", length=300, num_steps=8, seed=1, end_at="length", api_name="/generate_page")
    )
    canvas_html, text, readout, seed = frames[-1]
    assert len(text) == 307 and text.startswith("ROMEO:\n") and MASK_GLYPH not in text
    assert "window 179–307 of 307" in readout  # the last window: the model's 128 characters
    middle = frames[len(frames) // 2][0]
    assert "mdlm-window" in middle and "more characters to write" in middle and "mdlm-follow" in middle
    assert middle.count("mdlm-mask") < 300  # masks past the window are a count, not cells
    steps = [int(re.search(r"(?:step |done in )(\d+)", frame[2]).group(1)) for frame in frames]
    assert steps == list(range(len(frames))) and f"done in {steps[-1]} steps" in readout


def test_a_long_runs_frames_are_throttled_the_first_and_last_always_sent(model_dir, monkeypatch):
    # a 2,000-character run sent 254 frames (7.9 MB of canvas HTML), and the page's long tasks reached 2 s
    model, _ = loading.load_model(model_dir)  # a context of 128 characters
    clock = iter(i * 0.01 for i in range(100_000))  # each look at the clock 10 ms later: a state every 10 ms
    monkeypatch.setattr(handlers, "time", types.SimpleNamespace(perf_counter=lambda: next(clock)))  # its clock only

    def steps_of(frames: list) -> list[int]:
        return [int(re.search(r"(?:step |done in )(\d+)", frame[2]).group(1)) for frame in frames]

    short = steps_of(list(handlers.generate(model, "", 100, 0, True, "length", num_steps=40)))
    assert short == list(range(len(short)))  # within the context: every step, as before
    every = list(handlers.generate(model, "", 300, 0, True, "length", num_steps=40))
    sent = [frame for frame in every if frame is not handlers.THROTTLED]
    steps = steps_of(sent)
    assert len(every) == steps[-1] + 1  # a step a yield all the same: each model-thread job stays one step
    assert steps[0] == 0 and "done in" in sent[-1][2] and len(sent[-1][1]) == 300
    assert steps == sorted(steps) and all(b - a >= 2 for a, b in zip(steps[1:-2], steps[2:-1], strict=True))
    assert len(sent) < 0.3 * steps[-1]  # at most 20 a second


def test_a_long_runs_text_is_never_whole_before_it_is_done(model_dir):
    # past the context, each window's end left a text without masks, which the Rewrite panel took as a finished
    # run's (four times in a run, clearing its choices and Undo each time; a run stopped there ended mid-word)
    model, _ = loading.load_model(model_dir)  # a context of 128 characters
    tokens = torch.tensor([model.tokenizer.encode("to be or not to be " * 20)])  # (1, 380)
    tokens[0, 128:] = model.mask_id  # the first window written, the rest to come: as the shipped model's runs reach
    blank = torch.zeros_like(tokens, dtype=torch.bool)
    state = SamplerState(tokens, blank, blank, torch.full(tokens.shape, math.nan), blank, 30, 96, 30, model.mask_id)
    state = dataclasses.replace(state, window=(0, 128))
    (_, text, readout, _), *_ = handlers.frames(model, iter([state]), 0, 0)
    assert text.startswith("to be or not") and text.endswith(MASK_GLYPH) and "window 0–128 of 380" in readout
    frames = [f for f in handlers.generate(model, "ROMEO:\n", 1000, 0, True, "length") if f is not handlers.THROTTLED]
    assert all(MASK_GLYPH in text for _, text, readout, _ in frames[:-1])
    assert MASK_GLYPH not in frames[-1][1] and len(frames[-1][1]) == 1007


def test_generate_ends_at_a_line_by_default_and_says_what_it_kept(client):
    _, whole, _, _ = client.predict(
        prompt="", length=100, num_steps=8, seed=5, fixed_seed=True, end_at="length", api_name="/generate_page"
    )
    _, text, readout, _ = client.predict(
        prompt="", length=100, num_steps=8, seed=5, fixed_seed=True, api_name="/generate_page"
    )
    assert whole.startswith(text) and (text == whole or whole[len(text)].isspace())
    if text != whole:
        assert f"Ended at the end of a line: {len(text)} of 100 written characters kept." in readout
    _, text, readout, _ = client.predict(
        prompt="", length=100, num_steps=8, seed=5, fixed_seed=True, end_at="speech", api_name="/generate_page"
    )
    assert whole.startswith(text)
    with pytest.raises(Exception, match="'word' .* is not in the list of choices: \\['length', 'line', 'speech'\\]"):
        client.predict(prompt="", length=100, num_steps=8, end_at="word", api_name="/generate_page")


def test_a_prompt_longer_than_the_context_is_kept_and_the_readout_says_how_much_was_read(client):
    prompt = "ROMEO:\nBut soft, what light through yonder window breaks?\n" * 4  # 232 characters
    _, text, readout, _ = client.predict(
        prompt=prompt, length=40, num_steps=8, end_at="length", seed=0, api_name="/generate_page"
    )
    assert text.startswith(prompt) and len(text) == len(prompt) + 40
    assert "The prompt has 232 characters and the model reads 128 at a time: its last 88 are the context" in readout


def test_steps_follow_the_characters_to_fill_both_ways(model_dir):
    model, _ = loading.load_model(model_dir)
    page = Page(app.build_demo(model))
    infill = tab_controls(page.demo, "infill")
    template, steps = infill["template"], infill["num_steps"]
    example = INFILL_EXAMPLES[1]
    assert example.count("_") == 12 and infill_tab.CHANGES["num_steps"]["default"] > 12
    for i in range(len(example) + 1):  # typed key by key, through templates of 0 and 1 blank
        page.type(template, example[:i])
    assert page.value(steps) == 12
    page.type(template, "")
    assert page.value(steps) == 1 and page.props[steps._id]["interactive"] is False
    page.type(template, example)  # pasted
    assert page.value(steps) == 12 and page.props[steps._id]["interactive"] is True
    page.type(steps, 8)  # the user's own choice survives the cap ...
    page.type(template, example + " ____")
    assert page.value(steps) == 8 and page.props[steps._id]["maximum"] == 16
    page.type(template, "to _ or")  # ... a single blank locks the slider at one step ...
    assert page.value(steps) == 1 and page.props[steps._id]["info"] == "one character to fill: one step"
    page.type(template, example)  # ... and comes back
    assert page.value(steps) == 8
    generate = tab_controls(page.demo, "generate")
    assert page.props[generate["num_steps"]._id]["maximum"] == page.value(generate["length"]) == 121  # on load
    page.type(generate["length"], 1)
    assert page.value(generate["num_steps"]) == 1
    page.type(generate["length"], 100)
    assert page.value(generate["num_steps"]) == min(SamplerOptions().num_steps, 100)


def test_each_run_draws_a_new_seed_unless_fixed(client, model_dir):
    args = dict(prompt="", length=40, num_steps=4, order="random", api_name="/generate_page")
    (_, first, readout, seed), (_, second, _, other_seed) = (client.predict(seed=0, **args) for _ in range(2))
    assert seed != other_seed and first != second and f"seed {seed} ·" in readout
    _, again, _, same_seed = client.predict(seed=seed, fixed_seed=True, **args)
    assert (again, same_seed) == (first, seed)
    *_, seed = client.predict(template="to __ or", num_steps=2, seed=5, fixed_seed=True, api_name="/infill_page")
    assert seed == 5
    *_, seed, twin_canvas, twin_stats, _, _ = client.predict(
        prompt="ROMEO:\n",
        length=20,
        num_steps=4,
        temperature=0.8,
        seed=5,
        autoregressive=False,
        api_name="/compare_page",
    )
    assert isinstance(seed, int)
    # the page: each run writes its seed into the seed box; typing a seed fixes it
    model, _ = loading.load_model(model_dir)
    page = Page(app.build_demo(model))
    controls = tab_controls(page.demo, "generate")
    assert page.value(controls["fixed_seed"]) is False
    page.type(controls["seed"], 42)
    assert page.value(controls["fixed_seed"]) is True


def test_start_up_draws_no_plot_and_the_tab_draws_it_once(model_dir, monkeypatch):
    calls = []
    accuracy = how_it_works.accuracy_by_mask_ratio
    monkeypatch.setattr(
        how_it_works, "accuracy_by_mask_ratio", lambda *args, **kwargs: calls.append(1) or accuracy(*args, **kwargs)
    )
    model, _ = loading.load_model(model_dir)
    demo = app.build_demo(model)
    assert calls == []  # nothing drawn before the page is served
    page = Page(demo)
    assert calls == []
    tab = next(block for block in demo.blocks.values() if isinstance(block, gr.Tab) and block.label == "How it works")
    plot = next(block for block in demo.blocks.values() if isinstance(block, gr.Plot))
    page.fire(tab, "select")
    page.fire(tab, "select")
    measured_once = len(MASK_RATIOS)  # one mask ratio per job on the model thread, so other runs go between
    assert len(calls) == measured_once and page.value(plot) is not None
    # a new mask ratio moves the plot's marker: the figure is redrawn, the accuracies are not measured again
    first = page.value(plot)
    mask_ratio = next(b for b in demo.blocks.values() if isinstance(b, gr.Slider) and b.label == "Mask ratio t")
    page.type(mask_ratio, 0.6)
    assert len(calls) == measured_once and page.value(plot) != first


def test_stop_buttons_are_not_red_while_idle(model_dir):
    # (the first half of a defect)
    model, _ = loading.load_model(model_dir)
    stops = [b for b in app.build_demo(model).blocks.values() if isinstance(b, gr.Button) and b.value == "Stop"]
    assert len(stops) >= 2 and all(button.variant == "secondary" for button in stops)


def test_each_run_has_a_stop_button(model_dir):
    model, _ = loading.load_model(model_dir)
    demo = app.build_demo(model)
    for endpoint in ("generate", "infill", "compare"):
        run = next(fn for fn in demo.fns.values() if fn.api_name == f"{endpoint}_page")
        stops = [fn for fn in demo.fns.values() if run._id in fn.cancels]
        assert stops, endpoint
        assert all(demo.blocks[target].value == "Stop" for fn in stops for target, _ in fn.targets)


@pytest.fixture
def counted_steps(monkeypatch):
    """Every sampler step the app takes, slowed to 50 ms so a run lasts seconds."""
    steps = []
    sample = handlers.sample

    def slow_sample(*args, **kwargs):
        for state in sample(*args, **kwargs):
            steps.append(state.step)
            time.sleep(0.05)
            yield state

    monkeypatch.setattr(handlers, "sample", slow_sample)
    return steps


def steps_after(counted_steps: list, seconds: float = 1.5) -> int:
    """How many steps the app takes in `seconds`, starting a second after now."""
    time.sleep(1.0)
    taken = len(counted_steps)
    time.sleep(seconds)
    return len(counted_steps) - taken


@pytest.mark.slow  # several seconds: CI runs it
def test_a_cancelled_run_stops_computing(client, server, counted_steps):
    # Stop on the page and job.cancel() both post /cancel
    job = client.submit(
        prompt="",
        length=100,
        num_steps=100,
        temperature=1.0,
        top_p=1.0,
        order="confidence",
        seed=0,
        block_length=0,
        api_name="/generate_page",
    )
    while len(counted_steps) < 5:
        time.sleep(0.02)
    job.cancel()
    assert steps_after(counted_steps) == 0 and len(counted_steps) < 50
    # a closed page: the event stream's connection drops
    counted_steps.clear()
    config = httpx.get(server + "config").json()
    fn_index = next(d["id"] for d in config["dependencies"] if d["api_name"] == "generate")
    session = uuid.uuid4().hex
    data = ["", 100, 100, 1.0, 1.0, "confidence", 0, 0, 0.25, 0.35, 0.75, 1, False, 0]
    body = dict(data=data, fn_index=fn_index, session_hash=session, event_data=None, trigger_id=None)
    assert httpx.post(server + "gradio_api/queue/join", json=body).status_code == 200
    with httpx.stream("GET", server + f"gradio_api/queue/data?session_hash={session}", timeout=30) as stream:
        for _ in stream.iter_lines():
            if len(counted_steps) >= 5:
                break
    assert steps_after(counted_steps) == 0 and len(counted_steps) < 50


def test_every_model_call_runs_on_the_apps_one_model_thread(client, monkeypatch):
    # a second thread running torch gives libgomp a second team of threads, which slows every pass 2-2.5x on two
    # cores, so the events' model work (streamed and single) all goes to worker.MODEL_THREAD
    threads = []
    sample = handlers.sample

    def recording(*args, **kwargs):
        for state in sample(*args, **kwargs):
            threads.append(threading.current_thread().name)
            yield state

    monkeypatch.setattr(handlers, "sample", recording)
    client.predict(prompt="", length=24, num_steps=6, seed=0, fixed_seed=True, api_name="/generate_page")
    single = event(lambda: threading.current_thread().name, {})["fn"]
    assert len(threads) == 7 and all(name.startswith("mdlm-model") for name in threads + [single()])


def test_frames_are_computed_one_ahead_and_stop_with_the_caller():
    computed, closed = [], []

    def items():
        try:
            for i in range(100):
                computed.append(i)
                yield i
        finally:
            closed.append(threading.current_thread().name)

    stream = worker.iterate_on_model_thread(items())
    assert next(stream) == 0
    time.sleep(0.3)  # a slow caller: item 1 waits for it, item 2 is computed and held, no more
    assert computed == [0, 1, 2]
    stream.close()  # the caller stops listening: the helper asks for nothing more and closes the generator
    deadline = time.monotonic() + 5
    while not closed and time.monotonic() < deadline:
        time.sleep(0.01)
    assert closed[0].startswith("mdlm-model") and computed == [0, 1, 2]


def test_the_model_thread_serves_a_forked_child():
    # spaces.GPU runs each call in a forked child on a ZeroGPU Space: the parent's executor thread is not there
    worker.on_model_thread(int)  # the parent's model thread exists
    pid = os.fork()
    if pid == 0:  # the child: ends itself (SIGALRM) rather than hang
        signal.alarm(10)
        name = worker.on_model_thread(lambda: threading.current_thread().name)
        os._exit(0 if name.startswith("mdlm-model") else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_score_sends_its_passes_to_the_model_thread_one_by_one(model_dir, monkeypatch):
    # a long measurement must not hold the model thread: other visitors' sampling steps go between its passes
    jobs = []
    submit = worker.MODEL_THREAD.submit
    monkeypatch.setattr(worker.MODEL_THREAD, "submit", lambda fn, *a, **k: jobs.append(fn) or submit(fn, *a, **k))
    model, _ = loading.load_model(model_dir)
    stream = event(handlers.score, {"text": gr.Textbox()}, model=model)["fn"]
    text = "to be or not to be, " * 5  # 100 characters: SCORE_BATCH of them a pass
    frames = list(stream(text))
    batch, num_passes = handlers.SCORE_BATCH, math.ceil(100 / handlers.SCORE_BATCH)
    assert "bits per character" in frames[-1][1] and len(jobs) >= num_passes and len(frames) == num_passes + 1
    # progress streams: at once a line before any pass (the page said nothing for seconds), then each pass shows
    # the characters scored so far, the rest plain
    assert [f[1].split(" characters")[0] for f in frames[:-1]] == [
        f"Scoring… {batch * k} of 100" for k in range(0, num_passes)
    ]
    assert frames[0][0].count("class='mdlm-unscored'") == 100
    assert (
        frames[1][0].count("class='mdlm-scored'") == batch
        and frames[1][0].count("class='mdlm-unscored'") == 100 - batch
    )


def test_an_error_while_computing_frames_reaches_the_caller():
    def failing():
        yield 1
        raise ValueError("length must be at least 1")

    stream = worker.iterate_on_model_thread(failing())
    assert next(stream) == 1
    with pytest.raises(ValueError, match="length must be at least 1"):
        next(stream)


def test_forward_process(client):
    view, summary = client.predict("Shall I compare thee", 0.5, 0, api_name="/forward_process_page")
    assert "of 20 characters masked" in summary and MASK_GLYPH in view


def canvas_state(model, chars: str, kinds: str, done: bool = False):
    """A SamplerState of `chars` ("#": a mask), each position's kind one letter of `kinds`: g(iven), n(ew this
    step), e(arlier), m(ask), t(aken back this step)."""
    import torch

    from mdlm_hf import SamplerState

    vocab = model.tokenizer.vocab
    tokens = torch.tensor([[model.mask_id if c == "#" else vocab.index(c) for c in chars]])
    flags = {kind: torch.tensor([[k == kind for k in kinds]]) for kind in "gnt"}
    confidence = torch.tensor([[0.9 if k in "ne" else float("nan") for k in kinds]])
    return SamplerState(tokens, flags["n"], flags["t"], confidence, flags["g"], 3 if done else 1, 3, 3, model.mask_id)


def cell_classes(canvas_html: str) -> list[str]:
    return re.findall(r"class='mdlm-(mask|given|new|earlier)'", canvas_html)


def test_canvas_draws_each_position_as_its_own_countable_cell(model_dir):
    model, _ = loading.load_model(model_dir)
    canvas = render.render_canvas(model, canvas_state(model, "to###be#\n", "ggmtmnemg"))
    # three adjacent masks are three cells, not one bar; the line break is a visible cell too
    assert cell_classes(canvas) == ["given", "given", "mask", "mask", "mask", "new", "earlier", "mask", "given"]
    assert canvas.count(MASK_GLYPH) == 4 and render.NEWLINE_GLYPH + "</span>\n" in canvas
    assert canvas.count(render.TAKEN_BACK_COLOUR) == 1  # the one taken back this step
    # a fixed height, whatever the text: new line breaks scroll inside instead of pushing the page down
    assert re.search(r"height: calc\([\d.]+em \+ 20px\); overflow-y: auto", canvas)
    assert "word-break: normal; overflow-wrap: anywhere" in canvas and "break-all" not in canvas


def test_the_final_frame_highlights_nothing_as_revealed_this_step(model_dir):
    model, _ = loading.load_model(model_dir)
    running = render.render_canvas(model, canvas_state(model, "tob#", "gnnm"))
    final = render.render_canvas(model, canvas_state(model, "tobe", "gnnn", done=True))
    assert cell_classes(running).count("new") == 2 and render.NEW_COLOUR in running
    assert cell_classes(final) == ["given", "earlier", "earlier", "earlier"] and render.NEW_COLOUR not in final


def hsl_luminance(colour: str) -> float:
    """WCAG relative luminance of an "hsl(h,s%,l%)" colour."""
    import colorsys

    hue, saturation, lightness = (float(x) for x in re.findall(r"[\d.]+", colour))
    rgb = colorsys.hls_to_rgb(hue / 360, lightness / 100, saturation / 100)
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: float, b: float) -> float:
    return (max(a, b) + 0.05) / (min(a, b) + 0.05)


def test_confidence_scale_is_one_hue_readable_and_finished_text_plain():
    # lightness alone carries confidence, so it reads the same for every kind of colour vision (red to green did not)
    colours = [render.confidence_colour(p / 10) for p in range(11)]
    parsed = [tuple(float(x) for x in re.findall(r"[\d.]+", colour)) for colour in colours]
    assert len({(hue, saturation) for hue, saturation, _ in parsed}) == 1
    luminance = [hsl_luminance(colour) for colour in colours]
    assert luminance == sorted(luminance)  # surer is lighter: finished text is mostly near-white
    # the scale spanned 2.1:1 and sure text sat on solid mid-blue
    assert contrast(luminance[0], luminance[-1]) >= 2.9  # the scale's ends tell apart
    text = 0.0198  # the canvas's text colour, #1f2733
    assert min(contrast(text, lum) for lum in luminance) >= 4.5 and contrast(text, luminance[-1]) >= 12
    assert render.confidence_colour(0) in render.LEGEND and render.confidence_colour(1) in render.LEGEND


def test_the_canvas_shows_the_masks_to_fill_before_the_first_run(model_dir):
    assert cell_classes(render.draft_canvas("ROMEO:\n", 5)) == ["given"] * 7 + ["mask"] * 5
    assert cell_classes(render.draft_template("to __ or")) == ["given"] * 3 + ["mask"] * 2 + ["given"] * 3
    assert "Type a template" in render.draft_template("")
    model, _ = loading.load_model(model_dir)
    page = Page(app.build_demo(model))
    generate = tab_controls(page.demo, "generate")
    infill = tab_controls(page.demo, "infill")
    canvases = {
        name: page.demo.blocks[id_]
        for name in ("generate", "infill")
        for id_ in page.demo.blocks
        if getattr(page.demo.blocks[id_], "elem_id", None) == f"{name}-canvas"
    }
    assert cell_classes(page.value(canvases["generate"])).count("mask") == 121  # the first length, fitted
    page.type(generate["prompt"], JULIET)  # the canvas follows the prompt
    assert cell_classes(page.value(canvases["generate"])) == ["given"] * 49 + ["mask"] * 121
    long = render.draft_canvas("ROMEO:\n", 5000)  # a long text's draft: the cells a page can hold, and a count
    assert cell_classes(long) == ["given"] * 7 + ["mask"] * (render.DRAFT_CELLS - 7) and "… and 4,495 more" in long
    assert cell_classes(page.value(canvases["infill"])).count("mask") == INFILL_EXAMPLES[0].count("_")
    page.type(infill["template"], "to __ or")
    assert cell_classes(page.value(canvases["infill"])).count("mask") == 2


def test_forward_view_labels_its_rows_and_shows_true_characters_and_line_breaks():
    view = render.forward_view("ab c\nd", [False, True, True, False, True, True], ["a", "b", "\n", " ", "x", "d"])
    assert re.findall(r"class='mdlm-row-label'>([^<]*)<", view) == ["x_t", "model", "true"]
    assert view.count("class='mdlm-mask'") == 4
    # the predicted newline is a glyph in its cell, not a line break; the true characters are shown, not hovered
    assert (
        "\n" not in view
        and f"class='mdlm-wrong' style='background:{render.WRONG_COLOUR}'>{render.NEWLINE_GLYPH}<" in view
    )
    assert re.findall(r"class='mdlm-true'[^>]*>([^<]*)<", view) == [render.SPACE_GLYPH, render.NEWLINE_GLYPH]
    assert view.count("class='mdlm-right'") == 2 and "title=" not in view
    assert "hsl(120" not in view and "hsl(0," not in view  # right and wrong: blue and orange, not green and red


def test_how_it_works_follows_the_mask_ratio_box_and_marks_it_on_the_plot(model_dir):
    model, _ = loading.load_model(model_dir)
    demo = app.build_demo(model)
    page = Page(demo)
    mask_ratio = next(b for b in demo.blocks.values() if isinstance(b, gr.Slider) and b.label == "Mask ratio t")
    summary = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "forward-summary")
    line = SONNET_18.splitlines()[0]
    assert page.value(summary) == handlers.forward_process(model, line, 0.3, 0)[1]
    page.type(mask_ratio, 0.5)  # a value typed into the number box: the change event, not only a drag's release
    assert (
        page.value(summary)
        == handlers.forward_process(model, line, 0.5, 0)[1]
        != handlers.forward_process(model, line, 0.3, 0)[1]
    )
    figure = how_it_works.marked_accuracy_figure([(0.1, 0.9), (0.5, 0.6), (1.0, 0.1)], 0.5)
    assert [list(line.get_xdata()) for line in figure.axes[0].lines if line.get_linestyle() == "--"] == [[0.5, 0.5]]
    plot = next(b for b in demo.blocks.values() if isinstance(b, gr.Plot))
    assert plot.show_label is False  # its floating label covered the figure's title on a phone


# a valid call of each endpoint, by name, that each bad input below changes in one or a few values
RUN = dict(prompt="", length=20, num_steps=4, temperature=0.8, top_p=1.0, order="confidence", seed=0, block_length=0)
FILL = dict(template="", num_steps=4, temperature=0.8, top_p=1.0, order="confidence", seed=0)
RACE = dict(prompt="ROMEO:\n", length=20, num_steps=4, temperature=0.8, seed=0, autoregressive=False)
RULE = dict(order_temperature=0.25, prior_weight=0.35, remask_ratio=0.75, spacing=1)
BAD_INPUTS = [
    ("/generate", dict(RUN, prompt="ROMEO é:\n"), "outside the model's vocabulary: 'é'"),
    # the sliders' and dropdown's own bounds (from the model) answer first
    ("/generate", dict(RUN, length=20000), "length: Value 20000 is greater than maximum value 16384"),
    ("/generate", dict(RUN, num_steps=0), "num_steps: Value 0 is less than minimum value 1"),
    ("/generate", dict(RUN, temperature=-1), "temperature: Value -1 is less than minimum value 0"),
    ("/generate", dict(RUN, order="sideways"), "order: Value: sideways is not in the list of choices"),
    ("/generate", dict(RUN, seed=-3, **RULE, fixed_seed=True), "seed must be a whole"),
    ("/generate", dict(RUN, prompt="x" * 16384), "the prompt has 16,384 characters, but a run"),
    ("/compare", dict(RACE, prompt="x" * 128), "the prompt has 128 characters, but a run holds at most 128"),
    ("/generate", dict(RUN, order_temperature=-1), "order_temperature: Value -1 is less than minimum value 0"),
    ("/generate", dict(RUN, **dict(RULE, remask_ratio=0.99)), "remask_ratio: Value 0.99 is greater than"),
    (
        "/generate",
        dict(RUN, **dict(RULE, prior_weight=-1, remask_ratio=0.5)),
        "prior_weight: Value -1 is less than minimum",
    ),
    ("/infill", FILL, "template is empty"),
    ("/infill", dict(FILL, template="To be or not to be"), "template has no blank"),
    (
        "/infill",
        dict(FILL, template="_" * 16385),
        "the template has 16,385 characters, but a run writes at most 16,384 characters",
    ),
    (
        "/forward_process",
        dict(line="x" * 200, t=0.5, seed=0),
        "the line has 200 characters, but the model's context is 128",
    ),
    (
        "/compare",
        dict(RACE, length=40, num_steps=8, temperature=-0.5),
        "temperature: Value -0.5 is less than minimum value 0",
    ),
    ("/forward_process", dict(line="Shall I compare thee é", t=0.5, seed=0), "outside the model's vocabulary: 'é'"),
]


@pytest.mark.parametrize("endpoint,args,message", BAD_INPUTS)
def test_bad_input_is_a_visible_error_and_the_app_keeps_serving(client, endpoint, args, message):
    with pytest.raises(Exception) as error:  # gradio_client's AppError carries the gr.Error message
        client.predict(**args, api_name=endpoint)
    assert message in str(error.value) and "block_size" not in str(error.value)
    assert (
        len(
            client.predict(
                prompt="",
                length=10,
                num_steps=2,
                temperature=0.8,
                top_p=1.0,
                order="confidence",
                seed=0,
                block_length=0,
                end_at="length",
                api_name="/generate_page",
            )[1]
        )
        == 10
    )


@pytest.mark.parametrize(
    ("endpoint", "kwargs", "message"),
    [
        ("/generate", dict(prompt="", length=20.5), "length must be a whole number between 0 and 16384, got 20.5"),
        ("/generate", dict(prompt="", length=20, seed=1.5, fixed_seed=True), "seed must be a whole number"),
        ("/generate", dict(prompt="", length=20, num_steps=4.5), "num_steps must be an integer >= 1, got 4.5"),
        ("/generate", dict(prompt="", length=20, spacing=2.5), "spacing must be an integer >= 0, got 2.5"),
        ("/compare", dict(prompt="", length=20, num_steps=3.5), "num_steps must be an integer >= 1, got 3.5"),
    ],
)
def test_a_fraction_where_a_whole_number_belongs_is_refused_not_rounded(client, endpoint, kwargs, message):
    # the sliders and the seed box rounded 1.5 to 2 before the handler saw it
    with pytest.raises(Exception, match=message):
        client.predict(**kwargs, api_name=endpoint)
    _, text, readout, seed = client.predict(
        prompt="", length=20.0, num_steps=4.0, seed=3.0, fixed_seed=True, end_at="length", api_name="/generate_page"
    )
    assert len(text) == 20 and seed == 3 and "done in 4 steps" in readout  # whole numbers sent as floats are fine


# inf and "1e999" (infinite once read) crashed every endpoint with a seed: OverflowError, not a line naming it
@pytest.mark.parametrize("value", [float("nan"), "abc", None, 2.5, -1, float("inf"), float("-inf"), "1e999"])
def test_number_checks_name_the_problem(value):
    with pytest.raises(gr.Error, match="seed must be"):
        checks.as_int(value, "seed", 0, 10)
    with pytest.raises(gr.Error, match="top-p must be"):
        checks.as_float(value if value != 2.5 else 1.5, "top-p", 0.0, 1.0)


def test_a_boolean_is_not_a_number_to_the_checks():
    for value in (True, False):
        with pytest.raises(gr.Error, match=f"seed must be a number, got {value}"):
            checks.as_int(value, "seed", 0, 10)
        with pytest.raises(gr.Error, match=f"mask ratio must be a number, got {value}"):
            checks.as_float(value, "mask ratio", 0.0, 1.0)
        for component in (gr.Slider(0, 10), gr.Number()):
            with pytest.raises(gr.Error, match=f"length must be a number, got {value}"):
                endpoints.preprocessed(component, "length", value)
    assert endpoints.preprocessed(gr.Checkbox(), "fixed_seed", True) is True  # a checkbox's value is a bool


@pytest.mark.parametrize(
    ("endpoint", "kwargs", "message"),
    [
        ("/generate", dict(prompt="", length=True), "length must be a number, got True"),
        ("/generate", dict(prompt="", length=20, num_steps=True), "num_steps must be a number, got True"),
        ("/generate", dict(prompt="", length=20, seed=True, fixed_seed=True), "seed must be a number, got True"),
        ("/forward_process", dict(line="to be", t=True, seed=0), "t must be a number, got True"),
        ("/forward_process", dict(line="to be", t=0.5, seed=False), "seed must be a number, got False"),
    ],
)
def test_a_boolean_sent_for_a_number_is_refused_naming_the_parameter(client, endpoint, kwargs, message):
    with pytest.raises(Exception, match=message):
        client.predict(**kwargs, api_name=endpoint)


def test_eight_concurrent_users_are_all_served(server):
    def one_user(seed: int) -> str:
        return PageClient(server, verbose=False).predict(
            prompt="",
            length=50,
            num_steps=10,
            temperature=1.0,
            top_p=1.0,
            order="random",
            seed=seed,
            block_length=0,
            end_at="length",
            api_name="/generate_page",
        )[1]

    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        texts = list(pool.map(one_user, range(8)))
    assert len(texts) == 8 and all(len(t) == 50 and MASK_GLYPH not in t for t in texts)
    assert len(set(texts)) == 8  # different seeds, different texts


def test_one_visitors_many_long_runs_leave_room_for_another_visitors_short_one(server, counted_steps):
    # 8 concurrent calls of 16,384 characters at 256 steps kept a 64-character call waiting for more than 240 s
    from gradio_client.utils import Status

    greedy = PageClient(server, verbose=False, headers={"X-Forwarded-For": "203.0.113.5"})
    long_run = dict(prompt="", length=MAX_CANVAS, num_steps=128, seed=0, fixed_seed=True, api_name="/generate_page")
    jobs = [greedy.submit(**long_run) for _ in range(3)]
    try:
        deadline = time.monotonic() + 60
        while sum(job.status().code == Status.FINISHED for job in jobs) < 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        refused = [job for job in jobs if job.done()]
        assert len(refused) == 1, [job.status().code for job in jobs]  # a third run of theirs is refused at once
        with pytest.raises(Exception, match="2 of your runs are going already: wait for one to end, or stop one"):
            refused[0].result()
        other = PageClient(server, verbose=False, headers={"X-Forwarded-For": "198.51.100.7"})
        start = time.monotonic()
        *_, (_, text, readout, _) = other.submit(
            prompt="", length=64, num_steps=8, seed=1, fixed_seed=True, api_name="/generate_page"
        )
        assert len(text) <= 64 and MASK_GLYPH not in text and time.monotonic() - start < 60
    finally:
        for job in jobs:
            job.cancel()


def test_a_runs_steps_are_lowered_to_the_cap_on_its_passes_saying_so(model_dir):
    from mdlm_hf.pipeline import prompt_canvas

    model, _ = loading.load_model(model_dir)  # a context of 128 characters
    canvas = prompt_canvas(model, "", MAX_CANVAS)
    options, note = handlers.capped_steps(model, canvas, SamplerOptions(num_steps=128))
    assert options.num_steps < 128 and note.startswith(f"Steps lowered from 128 to {options.num_steps}: a run makes")
    windows = handlers.plan_windows(canvas[None] == model.mask_id, 128, 32, options.num_steps, options.spacing)
    assert sum(w.num_steps for w in windows) <= handlers.MAX_RUN_PASSES
    assert handlers.capped_steps(model, prompt_canvas(model, "", 100), SamplerOptions(num_steps=100))[1] == ""


def test_while_eight_generate_a_new_visitor_is_served_and_told_their_place_in_the_queue(server, counted_steps):
    from gradio_client.utils import Status

    client = PageClient(server, verbose=False)
    running = [
        client.submit(prompt="", length=100, num_steps=100, seed=s, fixed_seed=True, api_name="/generate_page")
        for s in range(8)
    ]
    ninth = None
    try:
        deadline = time.monotonic() + 30
        while len(counted_steps) < 40 and time.monotonic() < deadline:  # all eight under way
            time.sleep(0.05)
        assert httpx.get(server, timeout=10).status_code == 200  # the page
        shown = client.predict("To be, or not to be", 0.5, 0, api_name="/forward_process_page")  # another tab's event
        assert "x_t" in shown[0]
        ninth = client.submit(prompt="", length=20, num_steps=5, seed=9, fixed_seed=True, api_name="/generate_page")
        deadline = time.monotonic() + 10
        while (status := ninth.status()).code != Status.IN_QUEUE and time.monotonic() < deadline:
            time.sleep(0.05)
        assert status.code == Status.IN_QUEUE and status.rank == 0 and status.queue_size >= 1  # what the page shows
    finally:
        for job in running + [ninth] * (ninth is not None):
            job.cancel()


@pytest.mark.slow  # several seconds: CI runs it
def test_missing_or_corrupt_model_stops_start_up_with_one_clear_line(tmp_path, model_dir):
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "app.py"), "--model", str(tmp_path / "nowhere")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"error: could not load the model from {tmp_path / 'nowhere'}: "
        f"model directory {tmp_path / 'nowhere'} does not exist"
    ]
    corrupt = tmp_path / "corrupt"
    shutil.copytree(model_dir, corrupt)
    (corrupt / "model.safetensors").write_bytes(b"\x00" * 10)
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "app.py"), "--model", str(corrupt)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1 and "not a readable safetensors file" in result.stderr.strip().splitlines()[-1]
    assert "Traceback" not in result.stderr
    # an empty name is said to be empty (it was read as the current folder)
    result = subprocess.run([sys.executable, str(REPO_ROOT / "app.py"), "--model", ""], capture_output=True, text=True)
    assert result.returncode == 1 and result.stderr.strip().splitlines() == [
        "error: could not load the model from '': the model name is empty: pass a local directory or a Hub repo id"
    ]


def test_readme_front_matter_is_a_valid_space_config():
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    assert readme.startswith("---\n")
    config = yaml.safe_load(readme.split("---\n")[1])
    assert config["sdk"] == "gradio" and config["app_file"] == "app.py" and (REPO_ROOT / config["app_file"]).is_file()
    assert config["sdk_version"].split(".")[0] == "6" and config["title"] and config["license"]
    for key in ("colorFrom", "colorTo"):
        assert config[key] in {"red", "yellow", "green", "blue", "indigo", "purple", "pink", "gray"}
    assert len(config["short_description"]) <= 60


def test_shipped_checkpoint_serves_offline():
    model, known_words = loading.load_model(loading.DEFAULT_MODEL)
    assert known_words and "romeo" in known_words
    text = model.complete("ROMEO:\n", 40, num_steps=8, seed=0)
    assert text.startswith("ROMEO:\n") and len(text) == 47


REQUIRE_BROWSER = "MDLM_REQUIRE_BROWSER"  # set by .ci/run


def test_browser_tests_skip_without_chromium_unless_ci_requires_it(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setattr(Path, "exists", lambda self: False)
    monkeypatch.delenv(REQUIRE_BROWSER, raising=False)
    with pytest.raises(pytest.skip.Exception, match="apt-get install -y chromium chromium-driver"):
        with chromium():
            pass
    monkeypatch.setenv(REQUIRE_BROWSER, "1")
    with pytest.raises(pytest.fail.Exception, match="MDLM_REQUIRE_BROWSER is set"):
        with chromium():
            pass


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


def screenshots(tmp_path: Path) -> Path:
    """Where the browser tests save their screenshots: $MDLM_SCREENSHOTS (to keep and look at) or tmp_path."""
    path = Path(os.environ.get("MDLM_SCREENSHOTS") or tmp_path)
    path.mkdir(parents=True, exist_ok=True)
    return path


TABS = ("Generate", "Infill", "Compare", "Score", "How it works")
DESKTOP, PHONE = (1280, 900), (390, 844)
CELL_CLASSES = "canvas => Array.from(canvas.querySelectorAll('span[class^=mdlm-]'), cell => cell.className)"


def inside(page, locator, top_only: bool = False) -> bool:
    """Whether the element (or, top_only, its first 40 px) lies inside the viewport, the page not scrolled."""
    box, height = locator.bounding_box(), page.viewport_size["height"]
    bottom = box["y"] + (min(40, box["height"]) if top_only else box["height"])
    return box["y"] >= 0 and bottom <= height and page.evaluate("window.scrollY") == 0


def masks_look_apart(page, canvas) -> bool:
    """Whether two adjacent mask cells are drawn apart: a light gap between them, not one grey bar."""
    import io

    from PIL import Image

    first, second = (canvas.locator(".mdlm-mask").nth(i).bounding_box() for i in range(2))
    assert abs(first["y"] - second["y"]) < 1 and second["x"] > first["x"]
    clip = dict(x=first["x"], y=first["y"], width=second["x"] + second["width"] - first["x"], height=first["height"])
    image = Image.open(io.BytesIO(page.screenshot(clip=clip))).convert("L")
    middle = image.height // 2
    fill = image.getpixel((int(first["width"] / 2), middle))
    edge = int(second["x"] - first["x"])
    gap = max(image.getpixel((x, middle)) for x in range(max(0, edge - 2), min(image.width, edge + 2)))
    return gap > fill + 30


@pytest.mark.browser
def test_browser_run_button_and_canvas_stay_in_view_and_every_mask_is_a_cell(server, tmp_path, counted_steps):
    from playwright.sync_api import expect

    shots = screenshots(tmp_path)
    with chromium() as browser:
        page = browser.new_page(viewport=dict(zip(("width", "height"), DESKTOP, strict=True)))
        page.goto(server)
        for tab, label, num_blanks in (("Generate", "Generate", 121), ("Infill", "Fill the blanks", 8)):
            page.get_by_role("tab", name=tab).click()
            name = tab.lower()
            button = page.get_by_role("button", name=label, exact=True)
            canvas, final_text = page.locator(f"#{name}-canvas .mdlm-canvas"), page.locator(f"#{name}-final-text")
            expect(canvas).to_be_visible()
            # before a run: the button and the top of a canvas holding one mask cell per character to fill
            assert inside(page, button) and inside(page, canvas, top_only=True), tab
            assert canvas.evaluate(CELL_CLASSES).count("mdlm-mask") == num_blanks, tab
            assert masks_look_apart(page, canvas), tab
            canvas_box, text_box = canvas.bounding_box(), final_text.bounding_box()
            button.click()
            page.wait_for_function(  # mid-run: masks and revealed characters on the canvas
                "id => { const c = document.querySelector(`#${id}-canvas .mdlm-canvas`);"
                " return c && c.querySelector('.mdlm-mask') && c.querySelector('.mdlm-new, .mdlm-earlier'); }",
                arg=name,
            )
            assert inside(page, button) and inside(page, canvas, top_only=True), tab
            cells = canvas.evaluate(CELL_CLASSES)
            assert len(cells) - cells.count("mdlm-given") == num_blanks, tab  # each position to fill is one cell
            page.screenshot(path=str(shots / f"desktop-{name}-running.png"))
            expect(page.locator(f"#{name}-readout")).to_contain_text("chars/s", timeout=60_000)  # the run is done
            cells = canvas.evaluate(CELL_CLASSES)
            assert "mdlm-new" not in cells and "mdlm-mask" not in cells, tab  # the final frame: nothing "this step"
            # the canvas kept its height, so the output below it did not move
            assert canvas.bounding_box()["height"] == canvas_box["height"], tab
            assert final_text.bounding_box()["y"] == text_box["y"], tab
            assert inside(page, button), tab
            page.screenshot(path=str(shots / f"desktop-{name}-done.png"))


@pytest.mark.browser
def test_browser_after_stop_final_text_readout_and_replay_agree(server, tmp_path, counted_steps):
    # after Stop the readout's step and the replay's frames disagreed by one, and Final was empty
    from playwright.sync_api import expect

    with chromium() as browser:
        page = browser.new_page(viewport=dict(zip(("width", "height"), DESKTOP, strict=True)))
        page.goto(server)
        readout, final_text = page.locator("#generate-readout"), page.locator("#generate-final-text textarea")
        page.get_by_role("button", name="Generate", exact=True).click()
        page.wait_for_function(  # a few steps in
            "() => +(document.querySelector('#generate-readout').innerText.match(/step (\\d+)\\//) || [0, 0])[1] >= 6",
            timeout=60_000,
        )
        page.get_by_role("button", name="Stop").first.click()
        page.wait_for_timeout(1500)  # the run has ended: nothing streams any more
        step = int(re.search(r"step (\d+)/", readout.inner_text()).group(1))
        assert 6 <= step < 32
        replay = page.locator("#generate-replay input[type=range]")
        expect(replay).to_be_enabled()
        assert int(replay.get_attribute("max")) == step  # one frame per step streamed, step 0 the first
        canvas = page.locator("#generate-canvas .mdlm-canvas")
        masks = canvas.evaluate(CELL_CLASSES).count("mdlm-mask")
        stopped = final_text.input_value()
        assert masks > 0 and stopped.count(MASK_GLYPH) == masks  # Final shows the stopped canvas, masks and all
        page.screenshot(path=str(screenshots(tmp_path) / "desktop-generate-stopped.png"))
        # (gradio's page may still mark the readout "Error" when the stop lands mid-frame)


WHOLE_WORDS = """canvas => {
    const cells = Array.from(canvas.querySelectorAll('span[class^=mdlm-]'));
    const words = [[]];
    for (const cell of cells) {
        if (cell.textContent === ' ' || cell.textContent === '\u21b5') words.push([]);
        else words[words.length - 1].push(cell.getBoundingClientRect().top);
    }
    return words.filter(tops => new Set(tops).size > 1).length;
}"""
CUT_CELLS = """canvas => {
    const box = canvas.getBoundingClientRect(), top = box.top + canvas.clientTop, bottom = top + canvas.clientHeight;
    return Array.from(canvas.querySelectorAll('span[class^=mdlm-]')).map(cell => cell.getBoundingClientRect())
        .filter(r => r.height > 0 && r.top < bottom - 0.5 && r.bottom > top + 0.5
            && (r.top < top - 0.5 || r.bottom > bottom + 0.5)).length;
}"""
WHOLE_FORWARD_WORDS = """view => Array.from(view.querySelectorAll('.mdlm-word')).filter(word =>
    new Set(Array.from(word.children, column => column.getBoundingClientRect().top)).size > 1).length"""


@pytest.mark.browser
def test_browser_a_canvas_shows_whole_lines_never_a_cut_one(server):
    # the canvas box showed the top of its 11th line, cut in half, below the 10 it holds
    from playwright.sync_api import expect

    with chromium() as browser:
        for where, (width, height) in (("desktop", DESKTOP), ("phone", PHONE)):
            page = browser.new_page(viewport=dict(width=width, height=height))
            page.goto(server)
            canvases = {"Generate": "#generate-canvas", "Compare": "#compare-left-canvas"}
            for tab, canvas in canvases.items():
                page.get_by_role("tab", name=tab).click()
                box = page.locator(f"{canvas} .mdlm-canvas")
                expect(box).to_be_visible()
                overflows = box.evaluate("c => c.scrollHeight > c.clientHeight + 1")
                assert box.evaluate(CUT_CELLS) == 0, (where, tab, overflows)
                box.evaluate("c => { c.scrollTop = c.scrollHeight; }")  # scrolled to its end, as a long run follows
                assert box.evaluate(CUT_CELLS) == 0, (where, tab, "at the end")
            page.close()


CHARACTERS_PER_LINE = """canvas => {
    const style = getComputedStyle(canvas), probe = document.createElement('span');
    probe.style.cssText = 'font: inherit; white-space: pre; visibility: hidden; position: absolute;';
    probe.textContent = 'm'.repeat(40);
    canvas.appendChild(probe);
    const width = probe.getBoundingClientRect().width / 40;
    probe.remove();
    return Math.floor((canvas.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight)) / width);
}"""


@pytest.mark.browser
def test_browser_compare_on_a_phone_holds_a_line_of_verse_per_side(server):
    # side by side on a phone, each Compare canvas held about 14 characters a line, so every line of verse (about
    # 40) wrapped two or three times; the sides stay side by side (the race in the first screen) and their text and
    # margins shrink with the screen instead, whole at desktop width, but to no less than 12 px (9 px was too small
    # to read on a phone)
    with chromium() as browser:
        widths = {}
        for where, (width, height) in (("desktop", DESKTOP), ("phone", PHONE)):
            page = browser.new_page(viewport=dict(width=width, height=height))
            page.goto(server)
            page.get_by_role("tab", name="Compare").click()
            for side in ("left", "right"):
                box = page.locator(f"#compare-{side}-canvas .mdlm-canvas")
                box.wait_for()
                widths[where, side] = box.evaluate(CHARACTERS_PER_LINE)
                font_px = float(box.evaluate("c => parseFloat(getComputedStyle(c).fontSize)"))
                assert font_px >= (13 if where == "desktop" else 12), (where, side, font_px)
            page.close()
    assert min(widths[("phone", side)] for side in ("left", "right")) >= 17, widths
    assert min(widths[("desktop", side)] for side in ("left", "right")) >= 40, widths


@pytest.mark.browser
def test_browser_every_tab_at_desktop_and_phone_width(server, tmp_path, model_dir):
    from playwright.sync_api import expect

    model, _ = loading.load_model(model_dir)
    line = SONNET_18.splitlines()[0]
    shots = screenshots(tmp_path)
    with chromium() as browser:
        for where, (width, height) in (("desktop", DESKTOP), ("phone", PHONE)):
            page = browser.new_page(viewport=dict(width=width, height=height))
            page.goto(server)
            expect(page.locator("#generate-canvas .mdlm-canvas")).to_be_visible()
            for tab in TABS:  # every tab in sight: no "..." overflow menu hides one
                button = page.get_by_role("tab", name=tab)
                assert button.is_visible() and button.bounding_box()["x"] + button.bounding_box()["width"] <= width
            for tab in TABS[:4]:
                page.get_by_role("tab", name=tab).click()
                page.wait_for_timeout(300)
                page.screenshot(path=str(shots / f"{where}-{tab.lower()}.png"), full_page=True)
            page.get_by_role("button", name="Score", exact=True).click()  # the Score tab, scored
            expect(page.locator("#score-summary")).to_contain_text("bits per character", timeout=60_000)
            assert page.locator("#score-view .mdlm-scored").count() == len(sample_passage(SHAKESPEARE, 128))
            page.screenshot(path=str(shots / f"{where}-score-done.png"), full_page=True)
            # lines break between words, not inside them
            page.get_by_role("tab", name="Infill").click()
            page.get_by_label("Template: every _ is a character to fill").fill(INFILL_EXAMPLES[1])
            infill_canvas = page.locator("#infill-canvas .mdlm-canvas")
            expect(infill_canvas).to_contain_text("window breaks")
            assert infill_canvas.evaluate(WHOLE_WORDS) == 0, where
            # Compare: the prompt, its button and the two sides of the race, side by side, in the first screen (Score's
            # run brought its view into sight: back at the top, where the tabs are)
            page.evaluate("window.scrollTo(0, 0)")
            page.get_by_role("tab", name="Compare").click()
            left, right = (
                page.locator("#compare-left-canvas .mdlm-canvas"),
                page.locator("#compare-right-canvas .mdlm-canvas"),
            )
            expect(left).to_be_visible()
            left_box, right_box = left.bounding_box(), right.bounding_box()
            assert left_box["x"] + left_box["width"] <= right_box["x"] and abs(left_box["y"] - right_box["y"]) < 2
            assert inside(page, page.get_by_role("button", name="Compare", exact=True)), where
            assert inside(page, left, top_only=True) and inside(page, right, top_only=True), where
            # How it works: labelled rows, the true characters shown, the mask-ratio box obeyed, the plot marked
            page.get_by_role("tab", name="How it works").click()
            view, summary = page.locator("#forward-view"), page.locator("#forward-summary")
            for label in ("x_t", "model", "true"):
                expect(view.locator(".mdlm-row-label", has_text=label)).to_be_visible()
            expect(summary).to_have_text(handlers.forward_process(model, line, 0.3, 0)[1])
            page.get_by_label("number input for Mask ratio t").fill("0.5")
            expect(summary).to_have_text(handlers.forward_process(model, line, 0.5, 0)[1])
            wrong = view.locator(".mdlm-wrong")
            assert (
                view.locator(".mdlm-true").count() == wrong.count() > 0
                and view.locator(".mdlm-true").first.is_visible()
            )
            assert view.evaluate(WHOLE_FORWARD_WORDS) == 0, where
            expect(page.locator("#accuracy-plot img")).to_be_visible(timeout=60_000)
            assert not page.locator("#accuracy-plot [data-testid='block-label']").is_visible()
            page.wait_for_timeout(500)
            page.screenshot(path=str(shots / f"{where}-how-it-works.png"), full_page=True)
            page.close()


@pytest.mark.browser
def test_browser_generate_infill_and_compare(server, tmp_path):
    from playwright.sync_api import expect

    with chromium() as browser:
        page = browser.new_page()
        page.goto(server)
        # the length's maximum follows the prompt: a run holds MAX_CANVAS characters
        prompt, length = (
            page.get_by_label("Prompt (kept fixed at the start)"),
            page.get_by_label("number input for Characters to generate (at most)"),
        )
        prompt.fill(JULIET)
        expect(length).to_have_attribute("max", str(MAX_CANVAS - 49))
        prompt.fill("ROMEO:\n")
        expect(length).to_have_value("121")
        page.get_by_role("button", name="Generate", exact=True).click()
        final_text = page.locator("#generate-final-text textarea")
        expect(page.locator("#generate-readout")).to_contain_text("chars/s", timeout=60_000)  # the run is done
        assert final_text.input_value().startswith("ROMEO:\n") and MASK_GLYPH not in final_text.input_value()
        expect(page.locator("#generate-canvas .mdlm-canvas")).not_to_contain_text(MASK_GLYPH)
        # the replay slider: step 0 of the run is its all-mask canvas, and its last step the final one again
        replay = page.locator("#generate-replay input[type=number]")
        expect(replay).to_be_enabled()
        replay.fill("0")
        replay.press("Enter")
        expect(page.locator("#generate-canvas .mdlm-canvas")).to_contain_text(MASK_GLYPH * 3)
        replay.fill(page.locator("#generate-replay input[type=range]").get_attribute("max"))
        replay.press("Enter")
        expect(page.locator("#generate-canvas .mdlm-canvas")).not_to_contain_text(MASK_GLYPH)
        page.get_by_text("Sampling options: order, temperature, seed").first.click()  # the seed box is in there
        seed = page.locator("#generate-seed input").input_value()
        expect(page.locator("#generate-readout")).to_contain_text(f"seed {seed} ·")  # the seed used, shown
        page.screenshot(path=str(tmp_path / "generate.png"), full_page=True)

        page.get_by_role("tab", name="Infill").click()
        template = page.get_by_label("Template: every _ is a character to fill")
        steps = page.get_by_label("number input for Denoising steps").nth(1)
        template.fill("")
        template.press_sequentially(INFILL_EXAMPLES[1])  # key by key, through 0 and 1 blank
        expect(steps).to_have_value("12", timeout=30_000)
        template.fill("")
        expect(steps).to_have_value("1")
        page.get_by_text("ROMEO:\nBut soft", exact=False).first.click()  # one of the examples
        expect(steps).to_have_value("12")
        page.get_by_role("button", name="Fill the blanks").click()
        infill_text = page.locator("#infill-final-text textarea")
        expect(page.locator("#infill-readout")).to_contain_text("chars/s", timeout=60_000)  # the run is done
        filled = infill_text.input_value()
        assert filled.startswith("ROMEO:\nBut soft, what light through ") and "_" not in filled
        page.screenshot(path=str(tmp_path / "infill.png"), full_page=True)

        page.get_by_role("tab", name="Compare").click()
        page.get_by_role("button", name="Compare", exact=True).click()
        expect(page.locator("#compare-takeaway")).to_contain_text("Takeaway:", timeout=60_000)
        # the autoregressive twin, a third column beside the two orders, done with them
        expect(page.locator("#compare-takeaway")).to_contain_text("The autoregressive twin took")
        boxes = [page.locator(f"#compare-{side}-canvas").bounding_box() for side in ("left", "right", "twin")]
        assert boxes[0]["y"] == boxes[1]["y"] == boxes[2]["y"] and boxes[0]["x"] < boxes[1]["x"] < boxes[2]["x"]
        expect(page.locator("#compare-twin-canvas .mdlm-canvas")).not_to_contain_text(MASK_GLYPH)
        page.locator("#compare-twin-stats summary").click()  # the rule, folded to one line
        expect(page.get_by_text("left to right, keys and values cached")).to_be_visible()
        page.screenshot(path=str(tmp_path / "compare.png"), full_page=True)
    assert (tmp_path / "generate.png").stat().st_size > 10_000


@pytest.mark.browser
@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_browser_only_words_it_has_read(server, tmp_path, viewport):
    from playwright.sync_api import expect

    from mdlm_hf.metrics import words

    known = set(words(SHAKESPEARE_LIKE))  # the model_dir model's words.txt
    with chromium() as browser:
        page = browser.new_page(viewport=dict(zip(("width", "height"), viewport, strict=True)))
        page.goto(server)
        expect(page.get_by_text("at most 121")).to_be_visible()  # loaded: the load's fit will not undo the fill
        tab = page.get_by_role("tabpanel")
        button, checkbox = (
            tab.get_by_role("button", name="Generate", exact=True),
            tab.get_by_label("Only words it has read"),
        )
        # beside the run button (just above it), not in the closed options: in view with it on a phone too
        expect(checkbox).to_be_visible()
        assert 0 < button.bounding_box()["y"] - checkbox.bounding_box()["y"] < 200
        checkbox.check()
        page.get_by_label("number input for Characters to generate (at most)").fill("80")
        button.click()
        readout = page.locator("#generate-readout")
        expect(readout).to_contain_text("chars/s", timeout=60_000)
        note = re.search(r"Only words it has read: (\d+) words? written, (none|\d+)", readout.inner_text())
        assert note, readout.inner_text()
        written = page.locator("#generate-final-text textarea").input_value().removeprefix("ROMEO:\n")
        fell_back = 0 if note[2] == "none" else int(note[2])
        assert sum(w not in known for w in words(written)) <= fell_back, written
        page.screenshot(path=str(screenshots(tmp_path) / f"real-words-{viewport[0]}.png"), full_page=True)

        page.get_by_role("tab", name="Compare").click()
        page.get_by_role("tabpanel").get_by_label("Only words it has read").check()
        page.get_by_role("button", name="Compare", exact=True).click()
        expect(page.locator("#compare-takeaway")).to_contain_text("Takeaway:", timeout=60_000)
        for side in ("left", "right", "twin"):  # a side says how many fell back, where any did (a phone's lines)
            stats = page.locator(f"#compare-{side}-stats")
            expect(stats).to_contain_text("real words:")
            shown = stats.inner_text()
            assert re.search(r"real words: [\d.n/a ()%]+\n", shown), shown
            assert re.search(r"reveal rule( · fell back: [1-9]\d*)?", shown), shown
        page.screenshot(path=str(screenshots(tmp_path) / f"real-words-compare-{viewport[0]}.png"), full_page=True)


@pytest.mark.browser
def test_browser_on_a_phone_a_run_brings_its_canvas_into_view(server, tmp_path):
    from playwright.sync_api import expect

    # on a phone the Generate and Infill canvases stayed below the fold during a run
    with chromium() as browser:
        page = browser.new_page(viewport=dict(zip(("width", "height"), PHONE, strict=True)))
        page.goto(server)
        expect(page.get_by_text("at most 16,377")).to_be_visible()  # loaded: the load's fit will not undo the fill
        length = page.get_by_label("number input for Characters to generate (at most)")
        # long runs (seconds): the canvas must come into view while they stream, not after; 4,000 characters (frames
        # of 4,000 cells at the tiny model's pace) once kept a CI browser's page too busy to answer for 30 s
        length.fill("2500")
        length.press("Enter")
        for tab, label in (("Generate", "Generate"), ("Infill", "Fill the blanks")):
            page.get_by_role("tab", name=tab).click()
            if tab == "Infill":
                page.get_by_label("Template: every _ is a character to fill").fill("ROMEO:\n" + "_" * 2500)
            canvas = page.locator(f"#{tab.lower()}-canvas")
            button = page.get_by_role("button", name=label, exact=True)
            button.click()
            expect(page.locator(f"#{tab.lower()}-readout")).to_contain_text(re.compile(r"step [1-9]\d*/"))  # streaming
            box, height = canvas.bounding_box(), PHONE[1]
            assert box["y"] >= 0 and box["y"] + box["height"] <= height + 1, (tab, box)  # 1 px: subpixel layout
            assert button.bounding_box()["y"] + button.bounding_box()["height"] > 0  # only as far as needed
            page.screenshot(path=str(screenshots(tmp_path) / f"phone-{tab.lower()}-run-in-view.png"))
            # stopped, not waited for: 1,001 passes took 14 s in one virtualenv and over 60 s in another on one Zen 3
            page.get_by_role("tabpanel").locator("button:visible", has_text="Stop").click()  # not the Rewrite panel's
            ended = re.compile(r"stopped at step|chars/s")  # a run that finished before the click ends as it was
            expect(page.locator(f"#{tab.lower()}-readout")).to_contain_text(ended, timeout=60_000)
            page.evaluate("window.scrollTo(0, 0)")


@pytest.mark.browser
@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_browser_a_long_text_grows_with_its_live_window_in_view(server, tmp_path, viewport):
    # the window followed on desktop and phone; the canvas off-screen on a phone
    from playwright.sync_api import expect

    shots = screenshots(tmp_path)
    where = "desktop" if viewport == DESKTOP else "phone"
    with chromium() as browser:
        page = browser.new_page(viewport=dict(zip(("width", "height"), viewport, strict=True)))
        page.goto(server)
        length = page.get_by_label("number input for Characters to generate (at most)")
        expect(page.get_by_text("at most 16,377")).to_be_visible()  # loaded: the load's fit will not undo the fill
        length.fill("3000")  # about 15 s on two cores: long enough to watch it run
        length.press("Enter")
        expect(length).to_have_value("3000")
        page.get_by_label("length").check()  # End at: exactly the length, so the final text's size is known
        page.get_by_role("button", name="Generate", exact=True).click()
        # a window past the first (finished text before it, masks still to come after it), measured in the frame
        # that shows it: the box follows the window, so the window's last line (where it writes) is in the box's view
        seen = page.wait_for_function(
            """() => { const c = document.querySelector('#generate-canvas .mdlm-canvas');
                if (!(c && c.querySelector('.mdlm-done') && c.querySelector('.mdlm-window .mdlm-mask')
                      && c.textContent.includes('more characters to write')
                      && c.scrollHeight > c.clientHeight + 40)) return null;  // the text outgrew the box
                const lines = c.querySelector('.mdlm-window').getClientRects(), box = c.getBoundingClientRect();
                const last = lines[lines.length - 1];
                return {in_view: last.bottom > box.top && last.top < box.bottom}; }""",
            timeout=90_000,
        ).json_value()
        assert seen == {"in_view": True}
        # the page brought the canvas into view as the run started (on a phone it sits below the controls)
        box, height = page.locator("#generate-canvas").bounding_box(), page.viewport_size["height"]
        assert box["y"] >= 0 and box["y"] + box["height"] <= height + 1, (box, height)  # 1 px: subpixel layout
        page.screenshot(path=str(shots / f"{where}-generate-long-running.png"))
        final_text = page.locator("#generate-final-text textarea")
        expect(page.locator("#generate-readout")).to_contain_text("chars/s", timeout=120_000)  # the run is done
        assert len(final_text.input_value()) == 3007
        expect(page.locator("#generate-readout")).to_contain_text("of 3,007")
        page.screenshot(path=str(shots / f"{where}-generate-long-done.png"), full_page=True)


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        # gradio retried every port of its range on these, printing an error each time, for minutes
        (["--host", "nonexistent.invalid"], "error: --host nonexistent.invalid: the name does not resolve"),
        (["--host", "192.0.2.1"], "error: --host 192.0.2.1: not an address this machine can serve on"),
    ],
)
def test_a_host_the_app_cannot_serve_on_is_one_line(model_dir, monkeypatch, flags, says):
    monkeypatch.setattr(gr.Blocks, "launch", lambda self, **kwargs: pytest.fail("the app launched"))
    with pytest.raises(SystemExit) as stopped:
        app.main(["--model", str(model_dir), *flags])
    assert str(stopped.value).startswith(says) and "\n" not in str(stopped.value)


def test_a_word_list_that_is_not_text_is_named(model_dir, tmp_path, monkeypatch):
    # the app's line named the model, not its words.txt
    broken = tmp_path / "model"
    shutil.copytree(model_dir, broken)
    (broken / "words.txt").write_bytes(b"\xff\xfe words")
    monkeypatch.setattr(gr.Blocks, "launch", lambda self, **kwargs: pytest.fail("the app launched"))
    with pytest.raises(SystemExit) as stopped:
        app.main(["--model", str(broken), "--twin", "none"])
    message = str(stopped.value)
    assert f"{broken / 'words.txt'} is not a word list: not UTF-8 text" in message and "\n" not in message


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0", "localhost"])
def test_a_host_of_this_machine_is_served(host):
    assert serving.host_problem(host) is None


@pytest.mark.parametrize("port", ["-1", "0", "70000", "http"])
def test_a_port_that_is_not_one_is_refused_by_the_flag(model_dir, capsys, port):
    # -1 and 70000 ended in an OverflowError traceback, 0 in a connection error
    with pytest.raises(SystemExit) as stopped:
        app.main(["--model", str(model_dir), "--port", port])
    assert stopped.value.code == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .splitlines()[-1]
        .endswith(f"argument --port: must be a port number from 1 to 65535, got '{port}'")
    )


def test_a_port_in_use_is_one_line(model_dir):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(SystemExit) as stopped:
            app.main(["--model", str(model_dir), "--port", str(port)])
    message = str(stopped.value)
    assert message.startswith(f"error: could not serve the app on port {port}") and "\n" not in message


# --- messages ---

SHIPPED_VOCAB = "\n !$&',-.3:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def test_the_vocabulary_is_described_compactly():
    # "writes only 3 A-Z a-z ..." read as a count of characters
    words = "letters A-Z and a-z, the digit 3, the marks ! $ & ' , - . : ; ?, line break and space"
    assert checks.vocabulary_words(SHIPPED_VOCAB) == words
    assert checks.vocabulary_words("abdef_ \t") == "letters a, b and d-f, the mark _, space and tab"
    assert checks.vocabulary_words("0123456789x") == "letter x and the digits 0-9"


@pytest.mark.parametrize(
    "endpoint,kwargs,what",
    [
        ("/generate", dict(prompt="😀" * 130, length=20, num_steps=4), "prompt"),  # too long, but the emoji first
        ("/generate", dict(prompt="ROMEO 😀:\n", length=20, num_steps=4), "prompt"),
        ("/infill", dict(template="😀 __" * 50, num_steps=4), "template"),
        ("/compare", dict(prompt="😀" * 130, length=20, num_steps=4), "prompt"),
        ("/forward_process", dict(line="😀" * 200, t=0.5, seed=0), "line"),
    ],
)
def test_an_unknown_character_is_named_before_any_length_and_the_vocabulary_listed(
    client, model_dir, endpoint, kwargs, what
):
    with pytest.raises(Exception) as error:
        client.predict(**kwargs, api_name=endpoint)
    message = str(error.value)
    model, _ = loading.load_model(model_dir)
    assert f"the {what} has 1 character outside the model's vocabulary: '😀'" in message
    assert f"it writes only {checks.vocabulary_words(model.tokenizer.vocab)}" in message
    assert "characters at a time" not in message and "context" not in message and "\n" not in message


def test_length_zero_is_one_clear_message_and_generates_nothing(client, model_dir, monkeypatch):
    for endpoint in ("/generate", "/compare"):
        with pytest.raises(Exception) as error:
            client.predict(prompt="ROMEO:\n", length=0, num_steps=4, api_name=endpoint)
        assert str(error.value) == "nothing to generate: set at least 1 character to generate", endpoint
    model, _ = loading.load_model(model_dir)
    monkeypatch.setattr(handlers, "sample", lambda *args, **kwargs: pytest.fail("sampled with length 0"))
    run = handlers.generate(model, prompt="ROMEO:\n", length=0, seed=0, fixed_seed=False, num_steps=4)
    with pytest.raises(gr.Error, match="nothing to generate"):
        next(run)
    # the page: a length of 0 is no slider error; the steps slider locks, the canvas shows the prompt alone
    page = Page(app.build_demo(model))
    controls = tab_controls(page.demo, "generate")
    page.type(controls["length"], 0)
    assert page.value(controls["length"]) == 0 and page.props[controls["num_steps"]._id]["interactive"] is False
    canvas = next(b for b in page.demo.blocks.values() if getattr(b, "elem_id", None) == "generate-canvas")
    assert cell_classes(page.value(canvas)) == ["given"] * 7


WRONG_TYPES = [
    ("/generate", dict(prompt="", length="abc"), "length must be a number, got 'abc'"),
    ("/generate", dict(prompt="", length=20, num_steps="abc"), "num_steps must be a number, got 'abc'"),
    ("/generate", dict(prompt="", length=20, temperature="hot"), "temperature must be a number, got 'hot'"),
    ("/generate", dict(prompt=None, length=20), "prompt must be a string, got nothing"),
    ("/generate", dict(prompt="", length=20, fixed_seed="yes"), "fixed_seed must be true or false, got 'yes'"),
    ("/generate", dict(prompt="", length=20, seed="x", fixed_seed=True), "seed must be a number, got 'x'"),
    ("/infill", dict(template=None), "template must be a string, got nothing"),
    ("/infill", dict(template="to __", num_steps=[2]), "num_steps must be a number, got [2]"),
    ("/compare", dict(prompt="", length="x"), "length must be a number, got 'x'"),
    ("/compare", dict(prompt="", length=20, autoregressive="no"), "autoregressive must be true or false, got 'no'"),
    ("/forward_process", dict(line=None, t=0.5, seed=0), "line must be a string, got nothing"),
    ("/forward_process", dict(line="abc", t="x", seed=0), "t must be a number, got 'x'"),
]


@pytest.mark.parametrize("endpoint,kwargs,message", WRONG_TYPES)
def test_a_payload_of_the_wrong_type_is_one_line_naming_the_field(client, endpoint, kwargs, message):
    with pytest.raises(Exception) as error:
        client.predict(**kwargs, api_name=endpoint)
    assert str(error.value) == message and "verbose error reporting" not in str(error.value)


def test_handlers_name_a_field_of_the_wrong_type(model_dir):
    model, _ = loading.load_model(model_dir)
    with pytest.raises(ValueError, match="^prompt must be a string, got nothing$"):
        next(handlers.generate(model, prompt=None, length=10, seed=0, fixed_seed=False))
    with pytest.raises(ValueError, match="^template must be a string, got nothing$"):
        next(handlers.infill(model, template=None, seed=0, fixed_seed=False))
    with pytest.raises(ValueError, match="^prompt must be a string"):
        next(race.compare(model, None, None, 10, 4, 1.0, 0, False, False))
    with pytest.raises(ValueError, match="^line must be a string"):
        handlers.forward_process(model, None, 0.5, 0)
    with pytest.raises(ValueError, match="fixed_seed must be true or false"):
        next(handlers.generate(model, prompt="", length=10, seed=0, fixed_seed="yes"))


# --- a model trained on other text ---

ARITHMETIC = "".join(f"{a}+{b}={a + b}\n" for a in range(0, 40, 3) for b in range(0, 30, 7)) + "x_1 = 2 - 3\n"


@pytest.fixture(scope="module")
def arithmetic_dir(tmp_path_factory):
    """A tiny model of sums: its vocabulary writes "_" and none of Sonnet 18's letters; no card, no demo.json."""
    import torch

    from mdlm_hf import MDLM, CharTokenizer

    torch.manual_seed(0)
    model = MDLM(CharTokenizer.from_text(ARITHMETIC).vocab, n_layer=1, n_head=2, n_embd=32, block_size=64)
    path = tmp_path_factory.mktemp("arithmetic")
    model.save_pretrained(path)
    return path


def labelled(demo: gr.Blocks, kind: type, start: str):
    return next(b for b in demo.blocks.values() if isinstance(b, kind) and str(b.label).startswith(start))


def test_a_model_of_other_text_starts_and_shows_text_it_writes(arithmetic_dir):
    model, known_words = loading.load_model(arithmetic_dir)
    assert "_" in model.tokenizer.vocab and "S" not in model.tokenizer.vocab
    assert loading.load_demo_metadata(arithmetic_dir) is None
    demo = app.build_demo(model, known_words)
    page = Page(demo)  # the page loads: the forward process runs on a line the model writes
    assert "Shakespeare" not in demo.title and "Shakespeare" not in str(next(iter(demo.blocks.values())).value)
    generate = tab_controls(demo, "generate")
    assert page.value(generate["prompt"]) == ""  # Shakespeare's "ROMEO:\n" is not the model's to write
    # "_" is a character of the model's, so the blank is another, and the tab says which
    template = labelled(demo, gr.Textbox, "Template")
    assert choose_blank(model.tokenizer.vocab) == "#"
    assert template.label == "Template: every # is a character to fill"
    assert "_" in template.info and "#" in template.info
    line = labelled(demo, gr.Textbox, "A line")
    assert line.label == "A line the model wrote" and not model.tokenizer.unknown_chars(page.value(line))
    summary = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "forward-summary")
    assert "characters masked" in page.value(summary)
    tab = next(b for b in demo.blocks.values() if isinstance(b, gr.Tab) and b.label == "How it works")
    page.fire(tab, "select")  # the accuracy plot measures the model's own sample
    assert page.value(next(b for b in demo.blocks.values() if isinstance(b, gr.Plot))) is not None
    # the endpoint fills the blank and keeps the model's "_" as a character
    infill = next(fn for fn in demo.fns.values() if fn.api_name == "infill_page")
    named = dict(template="x# = 2#3", num_steps=2, temperature=1.0, top_p=1.0, order="confidence", seed=0)
    named |= dict(order_temperature=0.25, prior_weight=0.35, remask_ratio=0.0, spacing=1, fixed_seed=True)
    named |= dict(entropy_bound=0, min_p=0.0, cut_where_sure=0.0, capital_temperature_factor=1.0, real_words=False)
    named["keep_cast"] = False
    values = tuple(named[name] for name in api_names(demo, "infill"))  # the event's function takes the API's order
    *_, (_, text, *_) = infill.fn(*values)
    assert text.startswith("x") and text[2:6] == " = 2" and text[7] == "3" and "#" not in text
    named["template"] = "x_1 = #"
    *_, (_, text, *_) = infill.fn(*(named[name] for name in api_names(demo, "infill")))
    assert text.startswith("x_1 = ") and "#" not in text


def test_a_models_demo_json_gives_title_prompt_examples_and_sample(arithmetic_dir, tmp_path):
    shutil.copytree(arithmetic_dir, tmp_path / "model")
    metadata = dict(subject="sums", prompt="12+", examples=["3+4=_", "1_+2_=3_", "Shall _"], sample="3+4=7\n9+9=18\n")
    (tmp_path / "model" / loading.DEMO_FILE).write_text(json.dumps(metadata), encoding="utf-8")
    model, known_words = loading.load_model(tmp_path / "model")
    assert loading.load_demo_metadata(tmp_path / "model") == metadata
    demo = app.build_demo(model, known_words, loading.load_demo_metadata(tmp_path / "model"))
    page = Page(demo)
    assert demo.title == "mdlm_hf: Sums from masks"
    assert page.value(tab_controls(demo, "generate")["prompt"]) == "12+"
    assert page.value(tab_controls(demo, "compare")["prompt"]) == "12+"
    examples = next(b for b in demo.blocks.values() if isinstance(b, gr.Dataset))
    assert [sample[0] for sample in examples.samples] == ["3+4=#", "1#+2#=3#"]  # the blank converted; "Shall" dropped
    assert labelled(demo, gr.Textbox, "Template").value == "3+4=#"
    assert labelled(demo, gr.Textbox, "A line").value == "3+4=7" and labelled(demo, gr.Textbox, "A line").label == (
        "A line of sums"
    )
    figure = how_it_works.accuracy_plot_once(model, demo_texts(model, metadata))(0.5)
    assert figure.axes[0].get_title() == "Denoising accuracy on a passage of sums"


def test_the_shipped_model_keeps_shakespeare(model_dir):
    model, _ = loading.load_model(model_dir)
    assert demo_texts(model) == SHAKESPEARE and demo_texts(model, {"prompt": "JULIET:\n"}).prompt == ("JULIET:\n")
    demo = app.build_demo(model)
    assert demo.title == "mdlm_hf: Shakespeare from masks"
    assert labelled(demo, gr.Textbox, "Template").label == "Template: every _ is a character to fill"
    assert labelled(demo, gr.Textbox, "A line").label == "A line of Shakespeare"


def test_the_entropy_bound_is_a_reveal_rule_control_passed_by_name(client, model_dir, monkeypatch):
    seen = []
    sample = handlers.sample

    def spy(model, canvas, options, **kwargs):
        seen.append(options.entropy_bound)
        return sample(model, canvas, options, **kwargs)

    monkeypatch.setattr(handlers, "sample", spy)
    # in a scored order: streams order, the default, refuses an entropy bound by name
    client.predict(prompt="", length=40, num_steps=20, order="entropy", entropy_bound=2.0, api_name="/generate_page")
    client.predict(template="to __ or", num_steps=2, order="entropy", entropy_bound=1.5, api_name="/infill_page")
    client.predict(prompt="", length=20, num_steps=4, api_name="/generate_page")  # the default: off
    assert seen == [2.0, 1.5, None]
    model, _ = loading.load_model(model_dir)
    demo = app.build_demo(model)
    for endpoint in ("generate", "infill"):
        control = tab_controls(demo, endpoint)["entropy_bound"]
        spec = OPTION_SPECS["entropy_bound"]
        assert (control.label, control.value, control.maximum, control.info) == (spec.label, 0, 32, spec.note)


def test_after_a_run_the_replay_slider_shows_each_of_its_frames_without_sampling_again(client, model_dir, monkeypatch):
    # the API's outputs stay the canvas, the text, the readout and the seed: the frames live in the page's session
    assert len(client.predict(prompt="", length=20, num_steps=4, api_name="/generate_page")) == 4
    model, _ = loading.load_model(model_dir)
    demo = app.build_demo(model)
    for endpoint, values in (
        ("generate", dict(prompt="ROMEO:\n", length=30, num_steps=6, steps_taken=6)),
        # two 2-character blanks: 2 passes
        ("infill", dict(template="to __ or not __", num_steps=4, steps_taken=2)),
    ):
        controls, names = tab_controls(demo, endpoint), api_names(demo, endpoint)
        run = next(fn for fn in demo.fns.values() if fn.api_name == f"{endpoint}_page")
        streamed = list(run.fn(*[values.get(name, controls[name].value) for name in names]))  # steps_taken: no name
        canvases = streamed[-1][-1]
        steps = len(canvases) - 1  # streams order ends sooner where the blanks are shorter than the steps
        assert canvases == [frame[0] for frame in streamed] and steps == values["steps_taken"]
        assert isinstance(run.outputs[-1], gr.State)
        # after the run: the slider spans its frames, at the last
        after = next(fn for fn in demo.fns.values() if fn.trigger_after == run._id)
        slider = demo.blocks[after.outputs[0]._id]
        assert slider.elem_id == f"{endpoint}-replay"
        update = after.fn(canvases)
        assert (update["minimum"], update["maximum"], update["value"], update["interactive"]) == (0, steps, steps, True)
        # moving it shows that step's canvas as it was streamed, without sampling again
        monkeypatch.setattr(handlers, "sample", lambda *args, **kwargs: pytest.fail("sampled again"))
        scrub = next(fn for fn in demo.fns.values() if (slider._id, "change") in [tuple(t) for t in fn.targets])
        assert scrub.outputs[0].elem_id == f"{endpoint}-canvas"
        for step in (0, min(2, steps), steps):
            assert scrub.fn(canvases, step) == canvases[step]
        assert cell_classes(scrub.fn(canvases, 0)).count("mask") == (30 if endpoint == "generate" else 4)
        monkeypatch.undo()
    assert replay_slider([])["interactive"] is False and isinstance(replay_frame([], 3), type(gr.skip()))


def test_score_gives_bits_per_character_and_tints_each_character(client, model_dir):
    import math

    import torch

    from mdlm_hf.diffusion import char_nll, surprise_steps

    text = "ROMEO:\nBut soft, what light"
    view, summary = client.predict(text, api_name="/score_page")
    model, _ = loading.load_model(model_dir)
    tokens = torch.tensor(model.tokenizer.encode(text))
    # Score runs Generate's pass (the fast path's bf16 weights where faster, 2.4x), and says on which weights
    assert handlers.SCORE_FAST and f"{str(model.denoise_dtype).removeprefix('torch.')} weights" in summary
    *_, nats = surprise_steps(model, tokens, handlers.SCORE_BATCH, fast=True)
    bits = (nats / math.log(2)).tolist()
    exact = (char_nll(model, tokens) / math.log(2)).tolist()  # the fp32 chain, character by character
    assert sum(bits) / len(bits) == pytest.approx(sum(exact) / len(exact), abs=0.01)
    assert f"**{sum(bits) / len(bits):.3f} bits per character** over {len(text)} characters" in summary
    cells = re.findall(r"<span class='mdlm-scored' style='background:([^']*)' title='([\d.]+) bits'>", view)
    assert len(cells) == len(text) and [float(b) for _, b in cells] == pytest.approx(bits, abs=0.006)
    most = max(range(len(bits)), key=bits.__getitem__)  # the most surprising character is the darkest
    lightness = [float(re.findall(r"[\d.]+", colour)[-1]) for colour, _ in cells]
    assert lightness[most] == min(lightness) and render.NEWLINE_GLYPH in view
    # the tab starts with text the model writes, within its context
    demo = app.build_demo(model)
    box = next(b for b in demo.blocks.values() if isinstance(b, gr.Textbox) and b.label == "Text to score")
    assert box.value == "Shall I compare thee to a summer's day?\nThou art more lovely and more temperate:\n" + (
        "Rough winds do shake the darling buds of May,"
    )  # the sample's whole lines that fit the model's 128 characters


def test_score_reads_a_text_longer_than_the_context_window_by_window(client, model_dir):
    from mdlm_hf.diffusion import surprise_steps

    text = ("ROMEO:\nBut soft, what light through yonder window breaks?\n" * 6)[:300]  # the context is 128
    view, summary = client.predict(text=text, api_name="/score_page")
    model, _ = loading.load_model(model_dir)
    *_, nats = surprise_steps(model, torch.tensor(model.tokenizer.encode(text)), 32, fast=handlers.SCORE_FAST)
    bits = (nats / math.log(2)).tolist()
    assert f"**{sum(bits) / len(bits):.3f} bits per character** over 300 characters" in summary
    assert "each character read with at least 64 before it" in summary and "class='mdlm-unscored'" not in view
    cells = re.findall(r"class='mdlm-scored' style='[^']*' title='([\d.]+) bits'", view)
    assert [float(b) for b in cells] == pytest.approx(bits, abs=0.006)
    # the repeated line is no surprise once the model has read it
    assert sum(bits[200:]) / 100 < sum(bits[:60]) / 60


@pytest.mark.parametrize(
    "text,message",
    [
        ("", "paste some text to score"),
        ("x" * 2049, "the text has 2,049 characters, but Score reads at most 2,048 characters: shorten it"),
        ("To be é", "the text has 1 character outside the model's vocabulary: 'é'"),
        (None, "text must be a string, got nothing"),
    ],
)
def test_score_refuses_what_it_cannot_score_in_one_line(client, text, message):
    with pytest.raises(Exception) as error:
        client.predict(text, api_name="/score_page")
    assert message in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize(
    ("device", "says"),
    [
        ("cuda", "--device cuda: CUDA is not available here; use --device cpu (or auto)"),
        ("gpu", "--device 'gpu' is not a device: use auto, cpu, cuda, cuda:N or mps"),
        # these were taken as devices: meta served an app whose model had no weights, mps blamed the model
        ("meta", "--device 'meta': mdlm_hf runs on auto, cpu, cuda, cuda:N or mps"),
        ("mps", "--device mps: MPS is not available here; use --device cpu (or auto)"),
    ],
)
def test_device_flag_refuses_a_device_it_cannot_use_in_one_line(model_dir, monkeypatch, device, says):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    monkeypatch.setattr(gr.Blocks, "launch", lambda self, **kwargs: pytest.fail("the app launched"))
    with pytest.raises(SystemExit) as stopped:
        app.main(["--model", str(model_dir), "--device", device])
    assert str(stopped.value) == f"error: {says}"


def test_device_flag_picks_cuda_when_available(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert str(choose_device("auto")) == "cpu" and str(choose_device("cpu")) == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert str(choose_device("auto")) == "cuda"


@pytest.mark.parametrize("mcp", [True, False])
def test_main_serves_on_the_device_with_mcp_only_when_its_extra_is_installed(model_dir, monkeypatch, mcp):
    launched, mcp_available = {}, app.mcp_available
    monkeypatch.setattr(app, "mcp_available", lambda: mcp)
    monkeypatch.setattr(gr.Blocks, "launch", lambda self, **kwargs: launched.update(kwargs, blocks=self))
    load = loading.load_model
    monkeypatch.setattr(
        app, "load_model", lambda source, device: launched.update(device=device) or load(source, device)
    )
    app.main(["--model", str(model_dir), "--device", "cpu"])
    assert launched["device"] == "cpu" and launched["mcp_server"] is mcp
    fn = next(fn for fn in launched["blocks"].fns.values() if fn.api_name == "generate_page")
    assert fn.fn.__doc__.startswith("Writes text after a prompt")  # what "Use via API" and MCP clients show
    assert mcp_available() is (importlib.util.find_spec("mcp") is not None)


def test_gpu_work_is_decorated_with_spaces_gpu_only_when_spaces_is_importable(model_dir, monkeypatch):
    import types

    model, _ = loading.load_model(model_dir)
    monkeypatch.setitem(sys.modules, "spaces", None)  # not importable: the functions as they are
    plain = lambda: None  # noqa: E731
    assert worker.gpu_work(plain) is plain
    decorated = []

    def fake_gpu(fn):
        decorated.append(fn)
        return fn

    monkeypatch.setitem(sys.modules, "spaces", types.SimpleNamespace(GPU=fake_gpu))
    demo = app.build_demo(model)
    endpoints = {fn.api_name for fn in demo.fns.values() if fn.api_name}
    assert {"generate", "infill", "compare", "score", "forward_process"} <= endpoints
    wrapped = {fn.__name__ for fn in decorated}  # each endpoint's function, named after it (its MCP tool)
    assert {"generate", "infill", "compare", "score", "forward_process"} <= wrapped


def test_warm_up_makes_the_fast_paths_choice_before_the_first_run(model_dir):
    model, _ = loading.load_model(model_dir)
    assert model.fast and model._fast_path.key is None
    loading.warm_up(model)  # app.main queues it on the model thread while the server starts
    assert model._fast_path.key is not None


def test_the_forward_process_shows_a_line_long_enough_to_mask():
    texts = DemoText("sums", sample="+\n1\n06++60=_3262-\n47+90+4-24 -9x1208 5 _04-7+5x\n3")
    assert sample_line(texts, 64) == "47+90+4-24 -9x1208 5 _04-7+5x"  # the first of 20 characters or more
    short = DemoText("sums", sample="+\n\n1+2=3\n4\n10+20=30")
    assert sample_line(short, 64) == "1+2=3" and sample_line(short, 3) == "1+2"  # else the first of 5
    assert sample_line(DemoText("sums", sample="+\n12\n4"), 64) == "12"  # else the longest


def test_counts_agree_with_their_nouns():
    # "1 forward passes"
    assert (passes(1), passes(2), passes(2000)) == (
        "1 forward pass",
        "2 forward passes",
        "2,000 forward passes",
    )
    import torch

    from mdlm_hf import MDLM, sample

    model = MDLM("ab", n_layer=1, n_head=2, n_embd=16, block_size=8)
    state, last = list(sample(model, torch.full((1, 1), model.mask_id), seed=0))
    assert "· 1 forward pass ·" in handlers.readout(last, 0.1, 1, 0) and "passes" not in handlers.readout(
        last, 0.1, 1, 0
    )
    assert "· 0 forward passes ·" in handlers.readout(state, 0.0, 1, 0)


def test_temperature_zero_repeats_itself_or_says_what_still_draws(client):
    # temperature 0 with order temperature 0.25 gave another text per seed, unsaid
    def run(seed, **options):
        _, text, readout, _ = client.predict(
            prompt="",
            length=40,
            num_steps=8,
            temperature=0,
            seed=seed,
            fixed_seed=True,
            end_at="length",
            api_name="/generate_page",
            **options,
        )
        return text, readout

    (first, readout), (second, _) = run(1), run(2)
    assert first == second and "still draw" not in readout  # greedy, streams order (a plan, no draw): one text
    _, readout = run(
        1, order="entropy", order_temperature=0.25
    )  # (an untrained model's greedy text is one character repeated)
    assert "Temperature 0 picks each character greedily, but order temperature 0.25" in readout
    _, readout = run(1, order="random")
    assert "but the random order still draws at random: a new seed gives another text" in readout


def test_the_infill_preview_warns_before_the_run():
    # an over-long template (or one with no blank) showed as a canvas, the error only on run
    too_long = render.draft_template("_" * (MAX_CANVAS + 5))
    assert "The template has 16,389 characters, but a run writes at most 16,384: shorten it by 5." in too_long
    assert "mdlm-mask" not in too_long
    assert "The template has no blank: mark each character to fill with _." in render.draft_template("to be or not")
    assert "mdlm-mask" in render.draft_template("to __ or")


def test_the_compare_takeaway_claims_a_margin_only_where_it_is_real():
    # "surest characters first" was said for any margin, one word on a short canvas too
    known = {"the", "king", "is", "dead", "long", "live"}
    assert race.clearly_more_words("the king is dead " * 10, "xq zv wk " * 10, known)
    assert not race.clearly_more_words("the king is dead xq", "the king xq dead xq", known)  # 4/5 against 3/5
    assert not race.clearly_more_words("", "the king", known)


# WCAG AA contrast of every visible text, computed in the page (tests/data/low_contrast.js)
LOW_CONTRAST = (REPO_ROOT / "tests" / "data" / "low_contrast.js").read_text(encoding="utf-8")


@pytest.mark.browser
@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_browser_every_text_meets_wcag_aa_contrast(server, viewport):
    # the help under each control was 1.91:1 (gradio's subdued text), the orange accents 2.8:1
    from playwright.sync_api import expect

    with chromium() as browser:
        page = browser.new_page(viewport=dict(zip(("width", "height"), viewport, strict=True)))
        page.goto(server)
        page.get_by_role("button", name="Generate", exact=True).click()
        expect(page.locator("#generate-readout")).to_contain_text("chars/s", timeout=60_000)
        failures = []
        for tab in TABS:
            page.get_by_role("tab", name=tab).click()
            page.wait_for_timeout(500)
            failures += [(tab, found) for found in page.evaluate(LOW_CONTRAST)]
        assert failures == []


def test_a_users_mistake_logs_no_traceback(client, capfd):
    # steps 999 and 26 other ordinary mistakes each printed a traceback in the server's log
    capfd.readouterr()
    from gradio_client.exceptions import AppError

    for kwargs in (dict(num_steps=999), dict(length=0), dict(prompt="é"), dict(order="sideways")):
        with pytest.raises(AppError):
            client.predict(**{"prompt": "", "length": 20, **kwargs}, api_name="/generate_page")
    with pytest.raises(AppError, match="template has no blank"):
        client.predict(template="to be", api_name="/infill_page")
    assert "Traceback" not in capfd.readouterr().err


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


def test_controls_an_order_does_not_use_are_greyed_out_and_come_back_with_an_order_that_does(model_dir):
    # word streams order, the default, ranks no position: an order temperature, prior weight or entropy bound moved
    # there would only be refused by name on the run
    model, _ = loading.load_model(model_dir)
    page = Page(app.build_demo(model))
    for endpoint in ("generate", "infill"):
        controls = tab_controls(page.demo, endpoint)

        def usable(name: str, controls: dict = controls) -> bool:
            return page.props[controls[name]._id].get("interactive", controls[name].interactive) is not False

        assert page.value(controls["order"]) == "word_streams"
        assert not any(usable(name) for name in ("order_temperature", "prior_weight", "entropy_bound"))
        assert usable("remask_ratio") and usable("spacing") and usable("temperature")
        page.type(controls["order"], "entropy")
        assert all(usable(name) for name in ("order_temperature", "prior_weight", "entropy_bound"))
        page.type(controls["prior_weight"], 0.3)
        page.type(controls["order"], "random")  # random order scores nothing: the prior has nothing to weigh
        assert usable("order_temperature") and usable("entropy_bound") and not usable("prior_weight")
        page.type(controls["order"], "streams")  # which would refuse the prior: it goes back to off
        assert page.value(controls["prior_weight"]) == 0 and not usable("order_temperature")


def test_a_call_with_too_few_values_names_what_is_missing(server, capfd):
    # gradio's own check of too few values raised a plain error that reached the caller as {"error": null}
    stream = api_call(server, "generate", ["ROMEO:\n", 20, 4])
    assert "event: error" in stream
    assert "generate takes 20 values" in stream and "got 3" in stream
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


def test_a_number_typed_past_a_sliders_maximum_is_capped_and_said(model_dir):
    # typing 999 into the steps box logged a traceback for each keystroke's event, showed nothing and ran at the
    # maximum
    model, _ = loading.load_model(model_dir)
    page = Page(app.build_demo(model))
    for endpoint in ("generate", "infill", "compare"):
        steps = tab_controls(page.demo, endpoint)["num_steps"]
        page.type(steps, 999)  # raised here, as the server's log printed it
        cap = page.props[steps._id]["maximum"]
        assert cap < 999 and page.value(steps) == cap
        assert f"999 is more than {cap}" in page.props[steps._id]["info"]
    length = tab_controls(page.demo, "generate")["length"]
    page.type(length, 10**6)
    assert page.value(length) == page.props[length._id]["maximum"] < 10**6
    assert "is more than" in page.props[length._id]["info"]


def test_a_score_of_one_character_says_character(model_dir):
    # the Score line said "over 1 characters"
    model, _ = loading.load_model(model_dir)
    *_, (view, summary) = handlers.score(model, "R")
    assert "over 1 character (" in summary
    *_, (view, summary) = handlers.score(model, "RO")
    assert "over 2 characters (" in summary
    assert "Most surprising: «" in summary  # quoted: a surprising comma read as the sentence's own


def test_end_at_speech_says_where_it_really_ended_and_notes_are_sentences(model_dir):
    # a 600-character prompt, length 100, end at speech: the readout said it ended at a speech when it fell back to
    # a line end, and ran the long-prompt note into it with no full stop
    model, _ = loading.load_model(model_dir)
    prompt = (SHAKESPEARE_LIKE * 8)[:600]
    for seed in range(40):
        *_, (canvas, text, readout, _) = handlers.generate(model, prompt, 100, seed, True, end_at="speech", num_steps=8)
        written = text[len(prompt) :]
        if "\n" in written and "\n\n" not in written:
            break
    else:
        pytest.fail("no run ended at a line")
    assert "end of a speech" not in readout and "end of a line" in readout, readout
    assert "kept in the text. " in readout, readout


@pytest.mark.browser
def test_browser_after_stop_the_readouts_say_it_stopped(server, counted_steps, monkeypatch):
    # after Stop, Generate's readout kept its trailing "· …" and Score kept "Scoring… 48 of 256"
    surprise_steps = handlers.surprise_steps

    def slow_surprise_steps(*args, **kwargs):
        for nats in surprise_steps(*args, **kwargs):
            time.sleep(0.1)
            yield nats

    monkeypatch.setattr(handlers, "surprise_steps", slow_surprise_steps)
    with chromium() as browser:
        page = browser.new_page(viewport=dict(zip(("width", "height"), DESKTOP, strict=True)))
        page.goto(server)
        readout = page.locator("#generate-readout [data-testid=markdown]")  # not its hidden status
        page.get_by_role("button", name="Generate", exact=True).click()
        page.wait_for_function(
            "() => +(document.querySelector('#generate-readout').innerText.match(/step (\\d+)\\//) || [0, 0])[1] >= 4",
            timeout=60_000,
        )
        page.get_by_role("button", name="Stop").first.click()
        page.wait_for_timeout(1500)
        line = readout.inner_text().splitlines()[0]
        assert "stopped at step" in line and not line.endswith("…"), line
        page.get_by_role("tab", name="Score").click()
        page.get_by_label("Text to score").fill(SHAKESPEARE_LIKE * 6)
        page.get_by_role("button", name="Score", exact=True).click()
        summary = page.locator("#score-summary [data-testid=markdown]")
        page.wait_for_function(
            "() => /Scoring… (\\d+)/.test(document.querySelector('#score-summary').innerText)", timeout=60_000
        )
        page.get_by_role("tabpanel").locator("button:visible", has_text="Stop").click()  # not the Rewrite panel's
        page.wait_for_timeout(1500)
        said = summary.inner_text()
        assert said.startswith("Stopped:") and "Scoring" not in said, said


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
    assert all(len(compared[side]["text"]) == 16 for side in ("left_to_right", "confidence", "twin"))
    assert compared["takeaway"].startswith("Takeaway:") and "<" not in json.dumps(compared)
    with pytest.raises(Exception, match="seed must be a whole number"):
        client.predict(prompt="", length=10, seed=2.5, fixed_seed=True, api_name="/generate")


def test_uploads_are_capped_and_deleted_when_the_app_exits(model_dir, monkeypatch, tmp_path):
    # with --host 0.0.0.0 anyone could upload files of any size, served back and kept after the app exited
    import atexit

    launched, exits, signals = {}, [], {}
    monkeypatch.setattr(gr.Blocks, "launch", lambda self, **kwargs: launched.update(kwargs))
    monkeypatch.setattr(atexit, "register", exits.append)
    monkeypatch.setattr(signal, "signal", lambda number, handler: signals.update({number: handler}))
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path))
    app.main(["--model", str(model_dir), "--device", "cpu", "--twin", "none"])
    assert launched["max_file_size"] == serving.MAX_UPLOAD
    from gradio.utils import _parse_file_size

    assert _parse_file_size(launched["max_file_size"]) <= 1024**2
    folder = Path(os.environ["GRADIO_TEMP_DIR"])
    assert folder.parent == tmp_path and folder.is_dir()
    (folder / "upload.txt").write_text("x")
    for clean_up in exits:
        clean_up()
    assert not folder.exists()
    assert signal.SIGTERM in signals


def test_the_upload_route_is_refused_before_anything_is_written(model_dir, monkeypatch, tmp_path):
    # uploads had no total cap: 350 uploads of 100 kB left 36 MB on disk, each served back; 50 files a request
    launched = {}
    monkeypatch.setattr(gr.Blocks, "launch", lambda self, **kwargs: launched.update(kwargs))
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path))
    app.main(["--model", str(model_dir), "--device", "cpu", "--twin", "none"])
    assert [m.cls for m in launched["app_kwargs"]["middleware"]] == [serving.NoUploads]  # what the app launches with
    monkeypatch.undo()
    model, _ = loading.load_model(model_dir)
    demo = app.build_demo(model)
    port = free_port()
    demo.launch(server_port=port, prevent_thread_lock=True, quiet=True, **serving.launch_limits())
    try:
        files = [("files", (f"f{i}.txt", b"x" * 1000, "text/plain")) for i in range(50)]
        for route in ("gradio_api/upload", "gradio_api/upload/", "upload"):
            answer = httpx.post(f"http://127.0.0.1:{port}/{route}", files=files, timeout=30)
            assert answer.status_code == 403 and answer.json() == {"error": serving.NO_FILES}, route
        assert httpx.get(f"http://127.0.0.1:{port}/", timeout=30).status_code == 200  # the page is served
        assert not list(tmp_path.rglob("f*.txt"))
    finally:
        demo.close()


def test_the_accuracy_plot_is_measured_at_start_up_in_the_background(model_dir, monkeypatch):
    # on a first visit after start-up the plot took 26 s, measured only then, and the forward view above it was
    # blank with no indicator
    everyones_calls, launched = [], {}
    accuracy = how_it_works.accuracy_by_mask_ratio
    monkeypatch.setattr(  # another test's app may still be measuring its own model
        how_it_works,
        "accuracy_by_mask_ratio",
        lambda model, *args, **kwargs: everyones_calls.append(model) or accuracy(model, *args, **kwargs),
    )
    load = app.load_model
    monkeypatch.setattr(app, "load_model", lambda *args: launched.setdefault("loaded", load(*args)))
    monkeypatch.setattr(gr.Blocks, "launch", lambda self, **kwargs: launched.update(blocks=self))
    monkeypatch.setattr(app, "private_uploads", lambda: None)
    app.main(["--model", str(model_dir), "--device", "cpu", "--twin", "none"])
    model = launched["loaded"][0]

    def mine() -> list:
        return [called for called in everyones_calls if called is model]

    deadline = time.monotonic() + 60
    while len(mine()) < len(MASK_RATIOS) and time.monotonic() < deadline:  # no visitor yet
        time.sleep(0.05)
    assert len(mine()) == len(MASK_RATIOS)
    demo = launched["blocks"]
    view = demo.blocks[next(i for i, b in demo.blocks.items() if getattr(b, "elem_id", None) == "forward-view")]
    assert view.value  # says what is coming before the first mask is drawn
    page = Page(demo)
    tab = next(block for block in demo.blocks.values() if isinstance(block, gr.Tab) and block.label == "How it works")
    plot = next(block for block in demo.blocks.values() if isinstance(block, gr.Plot))
    page.fire(tab, "select")
    assert len(mine()) == len(MASK_RATIOS) and page.value(plot) is not None


def test_the_docs_name_only_app_objects_that_exist():
    # the docs said the torch work runs on `app.MODEL_THREAD`, which does not exist
    import importlib

    for path in (REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))):
        for name in re.findall(r"`((?:app|mdlm_space)(?:\.\w+)+)`", path.read_text(encoding="utf-8")):
            if name == "app.py" or (REPO_ROOT / f"{name.replace('.', '/')}.py").exists():
                continue  # a file or a module
            module, _, attribute = name.rpartition(".")
            assert hasattr(importlib.import_module(module), attribute), f"{path.name}: {name}"


def test_compare_draws_the_twin_racing_as_cells_not_as_a_long_text(model_dir, twin_dir):
    # while it raced, the twin's column was drawn as a text longer than the context: framed, pinned to the bottom,
    # with "… 126 more characters to write", though 128 characters fit the context
    model, known_words = loading.load_model(model_dir)
    twin = loading.load_twin(twin_dir, model)
    frames = race.compare(model, known_words, "ROMEO:\n", 20, 4, 0.8, 0, False, True, twin=twin)
    for _ in range(3):
        twin_canvas = next(frames)[6]
        assert "mdlm-window" not in twin_canvas and "more characters to write" not in twin_canvas
        assert "class='mdlm-canvas mdlm-follow'" not in twin_canvas and twin_canvas.count("mdlm-mask") > 0


def descendants(block):
    for child in getattr(block, "children", []):
        yield child
        yield from descendants(child)


def test_compare_left_to_right_reveals_in_a_row_and_its_legend_lists_what_can_occur(model_dir):
    # with the shared rule (spacing 8) "Left to right" revealed 4 scattered characters a pass, and the legend listed
    # the live window's frame, which a race within the context never shows
    model, known_words = loading.load_model(model_dir)
    prompt = "ROMEO:\n"
    frames = race.compare(model, known_words, prompt, 40, 10, 0.8, 0, False, True, spacing=8)
    next(frames)  # all masks
    left = cell_classes(next(frames)[0])[len(prompt) :]
    written = left.index("mask")
    assert written >= 2 and set(left[written:]) == {"mask"}, left  # a run from the prompt on, nothing apart
    demo = app.build_demo(model, known_words)
    tab = next(block for block in demo.blocks.values() if isinstance(block, gr.Tab) and block.label == "Compare")
    shown = [block.value for block in descendants(tab) if isinstance(block, gr.HTML) and block.value]
    assert any("revealed this step" in html for html in shown)
    assert not any("window the model reads" in html for html in shown)


@pytest.mark.browser
def test_browser_the_nested_accordions_heading_is_one_line_as_its_parents(server):
    # "More of the reveal rule: …" wrapped to two centred lines at both sizes, while its parent's heading is one line
    with chromium() as browser:
        for viewport in (DESKTOP, PHONE):
            page = browser.new_page(viewport=dict(zip(("width", "height"), viewport, strict=True)))
            page.goto(server)
            parent = page.get_by_text("Sampling options: order, temperature, seed").first
            parent.click()
            nested = page.get_by_text("More of the reveal rule").first
            nested.wait_for()
            heights = [heading.bounding_box()["height"] for heading in (parent, nested)]
            assert heights[1] == pytest.approx(heights[0], abs=2), (viewport, heights)
            page.close()


HINT_OPACITY = "canvas => getComputedStyle(canvas, '::after').opacity"


@pytest.mark.browser
def test_browser_a_canvas_with_lines_below_its_box_says_so(server):
    # on a phone the canvas is 10 rows high and the default run needed 11: the last line hid with no hint
    with chromium() as browser:
        for viewport in (PHONE, DESKTOP):
            page = browser.new_page(viewport=dict(zip(("width", "height"), viewport, strict=True)))
            page.goto(server)
            page.get_by_label("Prompt (kept fixed at the start)").fill("A:\n" * 14)
            canvas = page.locator("#generate-canvas .mdlm-canvas")
            page.wait_for_function(  # the draft: 14 lines and the masks, in a box of 10
                "() => { const c = document.querySelector('#generate-canvas .mdlm-canvas');"
                " return c && c.scrollHeight > c.clientHeight + 20; }"
            )
            assert canvas.evaluate(HINT_OPACITY) == "1", viewport
            canvas.evaluate("canvas => canvas.scrollTo(0, canvas.scrollHeight)")
            page.wait_for_timeout(200)
            assert canvas.evaluate(HINT_OPACITY) == "0", viewport  # at the end: nothing below
            page.get_by_label("Prompt (kept fixed at the start)").fill("A:\n")
            page.wait_for_function(
                "() => { const c = document.querySelector('#generate-canvas .mdlm-canvas');"
                " return c && c.scrollHeight <= c.clientHeight; }"
            )
            assert canvas.evaluate(HINT_OPACITY) == "0", viewport  # it all fits
            page.close()


@pytest.mark.browser
def test_browser_on_a_phone_the_whole_race_is_in_view_and_the_twin_readable(server, tmp_path):
    # on a phone the twin and the takeaway were below the fold (y 1035 and 1321), the twin's text 9 px
    with chromium() as browser:
        page = browser.new_page(viewport=dict(zip(("width", "height"), PHONE, strict=True)))
        page.goto(server)
        page.get_by_role("tab", name="Compare").click()
        page.get_by_role("button", name="Compare", exact=True).click()
        page.wait_for_function(
            "() => document.querySelector('#compare-takeaway').innerText.includes('Takeaway')", timeout=60_000
        )
        page.wait_for_timeout(300)
        page.screenshot(path=str(screenshots(tmp_path) / "phone-compare-race.png"))
        for element in ("#compare-left-canvas", "#compare-twin-canvas", "#compare-takeaway"):
            box = page.locator(element).bounding_box()
            assert box["y"] >= 0 and box["y"] + box["height"] <= PHONE[1] + 1, (element, box)
        # the sides' orders of writing: folded below the takeaway, not between it and the race
        folded = page.get_by_text("Order of writing, each side")
        assert folded.bounding_box()["y"] >= page.locator("#compare-takeaway").bounding_box()["y"]
        assert not page.locator("#compare-right-order").is_visible()
        font = page.locator("#compare-twin-canvas .mdlm-canvas").evaluate(
            "c => parseFloat(getComputedStyle(c).fontSize)"
        )
        assert font >= 12


def test_the_race_spreads_the_first_pass_of_a_round_over_the_sides():
    # the first pass after the page's own work runs slower; left to right, always first in a round, read 4-6x
    # confidence order's seconds for the same passes in a browser race
    woken = {"cold": True}

    def side(num_passes: int):
        for step in range(num_passes):
            if woken["cold"]:  # the round's first pass, after the consumer's work
                woken["cold"] = False
                time.sleep(0.02)
            yield step  # the race only hands a side's states on

    for _, seconds in race.race({"left_to_right": side(8), "confidence": side(8)}):  # noqa: B007 (the last round's)
        woken["cold"] = True  # the page renders the round
    assert abs(seconds["left_to_right"] - seconds["confidence"]) < 0.05  # each paid 4 of the 8 cold passes
    assert min(seconds.values()) > 0.06


def test_a_race_cut_short_by_stop_says_so_under_the_sides(model_dir):
    # after Stop each side kept its passes and seconds so far, and the takeaway stayed blank: nothing said it stopped
    assert race.race_stopped("", "9 forward passes · 0.4 s") == race.STOPPED
    lowered = "Length lowered from 121 to 79."  # a note of the race's own stays beside it
    assert race.race_stopped(lowered, "9 forward passes") == f"{race.STOPPED} {lowered}"
    finished = "**Takeaway:** same 32 forward passes and reveal rule"
    assert race.race_stopped(finished, "32 forward passes") == gr.skip()
    assert race.race_stopped("", "") == gr.skip()  # a race that never started (a bad prompt) says its error instead
    demo = app.build_demo(loading.load_model(model_dir)[0])
    run = next(fn for fn in demo.fns.values() if fn.api_name == "compare_page")
    stopped = next(fn for fn in demo.fns.values() if fn.fn is race.race_stopped)
    takeaway, left_stats = run.outputs[4], run.outputs[1]
    assert stopped.inputs == [takeaway, left_stats] and stopped.outputs == [takeaway]
    assert stopped.trigger_after == run._id  # once the race's event has ended, stopped or not


def test_a_stopped_run_past_the_context_says_it_stopped_where_its_window_was():
    # a stopped 3,007-character run kept "step 4/377 · … · window 0–256 of 3,007": the window's part came after the
    # running speed, which was what the stop looked for at the line's end
    line = "seed 3 · step 4/377 · 4 forward passes · 1.20 s · … · window 0–256 of 3,007\n\nA note."
    said = handlers.stopped(line)
    assert said.startswith("seed 3 · stopped at step 4/377 · 4 forward passes · 1.20 s · window 0–256 of 3,007")
    assert "…" not in said.split("\n\n")[0] and said.endswith("A note.")
    finished = "seed 3 · step 377/377 · 377 forward passes · 9.00 s · 333 chars/s"
    assert handlers.stopped(finished) == gr.skip()


@pytest.mark.parametrize("length", [100])  # within the model's context (past it, the canvas is text, not cells)
def test_a_text_that_ends_at_a_line_shows_its_dropped_tail_as_dropped(model_dir, length):
    # after ending at a line or a speech, the canvas showed the characters cut off styled as kept text
    model, _ = loading.load_model(model_dir)
    for seed in range(20):
        *_, (canvas, text, readout, _) = handlers.generate(model, "", length, seed, True, "line", num_steps=8)
        if len(text) < length:
            break
    assert "Ended at the end of a line" in readout
    kept, dropped = canvas.split("class='mdlm-dropped'", 1)
    assert "mdlm-dropped" not in kept and dropped.count("mdlm-earlier") == length - len(text)


@pytest.mark.parametrize("typed", [0, -5, None])
def test_steps_typed_below_one_or_left_empty_keep_the_last_value_and_say_so(model_dir, typed):
    # the steps box took empty, 0 or -5 and ran one pass (gibberish), showing 1 with no note; and a note of an
    # earlier cap stayed under a value it no longer described
    model, _ = loading.load_model(model_dir)
    page = Page(app.build_demo(model))
    for endpoint in ("generate", "infill", "compare"):
        steps = tab_controls(page.demo, endpoint)["num_steps"]
        page.type(steps, 6)
        page.type(steps, typed)
        note = page.props[steps._id]["info"]
        said = "an empty box" if typed is None else f"{typed} is less than 1, the least here"
        assert page.value(steps) == 6 and note == f"{said}: kept 6", note
        page.type(steps, 999)
        page.type(steps, 5)
        assert page.value(steps) == 5 and "999" not in page.props[steps._id]["info"]


def test_a_press_while_a_run_streams_runs_next_and_an_edit_does_not_draw_over_the_run(model_dir):
    # pressing "Fill the blanks" while a run streamed was ignored silently, and the canvas then showed the new
    # template's blanks over the old run
    model, _ = loading.load_model(model_dir)
    page = Page(app.build_demo(model))
    for endpoint in ("generate", "infill", "compare", "rewrite", "score"):
        run = next(fn for fn in page.demo.fns.values() if fn.api_name == f"{endpoint}_page")
        assert run.trigger_mode == "always_last", endpoint  # not "once", which drops a press while one is pending
    found = {block.elem_id: block for block in page.demo.blocks.values() if getattr(block, "elem_id", None)}
    template, canvas, readout = (
        tab_controls(page.demo, "infill")["template"],
        found["infill-canvas"],
        found["infill-readout"],
    )
    page.values[canvas._id] = "the run's frame"
    page.values[readout._id] = "seed 3 · step 4/16 · 4 forward passes · 0.50 s · …"
    page.type(template, "to __ or")
    assert page.value(canvas) == "the run's frame"
    page.values[readout._id] = "seed 3 · step 16/16 · 16 forward passes · 2.00 s · 30 chars/s"
    page.type(template, "to __ or not")
    assert page.value(canvas) != "the run's frame"  # between runs, the draft of the template to fill


def test_an_edit_marks_the_readout_as_the_last_runs(model_dir):
    # after an edit of the prompt the canvas showed the new prompt's masks beside the last run's "done in 29 of 32
    # steps", as if it described them
    model, _ = loading.load_model(model_dir)
    page = Page(app.build_demo(model))
    found = {block.elem_id: block for block in page.demo.blocks.values() if getattr(block, "elem_id", None)}
    for tab, edited, value in (("generate", "prompt", "JULIET:\n"), ("infill", "template", "to __ or not")):
        readout = found[f"{tab}-readout"]
        before_any_run = page.value(readout)
        page.type(tab_controls(page.demo, tab)[edited], value + "y")
        assert page.value(readout) == before_any_run, tab  # the placeholder is no run's
        page.values[readout._id] = "seed 3 · done in 29 of 32 steps · 29 forward passes · 0.50 s · 500 chars/s"
        page.type(tab_controls(page.demo, tab)[edited], value)
        assert page.value(readout).startswith("Last run, before the edit: seed 3 · done in 29"), tab
        page.type(tab_controls(page.demo, tab)[edited], value + "x")  # marked once
        assert page.value(readout).count("Last run, before the edit") == 1, tab


def test_a_text_that_ends_at_a_speech_has_ended_at_a_line_too():
    # with End at = line, a text cut at a blank line read "No line ended in the text, so it ended at the end of a
    # speech": a speech's end is a line's end as well
    assert (
        handlers.end_words("line", "speech", 244, 249)
        == "Ended at the end of a line: 244 of 249 written characters kept."
    )
    fell_back = handlers.end_words("speech", "line", 10, 20)
    assert (
        fell_back == "No speech ended in the text, so it ended at the end of a line: 10 of 20 written characters kept."
    )


def test_rewrite_and_infill_with_only_words_it_has_read_say_what_they_wrote(model_dir):
    from mdlm_space import rewrite_handlers

    model, _ = loading.load_model(model_dir)
    text = "ROMEO:\nBut soft, what light through yonder window breaks?\n"
    *_, last = rewrite_handlers.rewrite(model, text, 17, 27, 0, True, real_words=True, num_steps=4)
    assert re.search(
        r"Only words it has read: \d+ words? written, (none fell back|\d+ characters? fell back)", last[-3]
    )
    *_, (_, filled, readout, _) = handlers.infill(model, "To be, __ not __ be", 0, True, real_words=True)
    assert "Only words it has read:" in readout and filled.startswith("To be, ")
    *_, (_, _, plain_readout, _) = handlers.infill(model, "To be, __ not __ be", 0, True)
    assert "Only words it has read" not in plain_readout
