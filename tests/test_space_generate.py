"""The app's Generate tab: streamed runs, text past the context window, where a run ends, and its readout."""

import dataclasses
import math
import re
import types

import gradio as gr
import pytest
import torch

from mdlm_hf import MASK_GLYPH, SamplerOptions, SamplerState
from mdlm_hf.windows import MAX_CANVAS
from mdlm_space import handlers, loading, render
from mdlm_space.texts import passes
from tests.conftest import SHAKESPEARE_LIKE


def without_legend(canvas_html: str) -> str:
    """A frame's canvas without the legend under it (whose swatches show the colours the canvas uses)."""
    return re.sub(f"<div class='{render.LEGEND_CLASS}'.*?</div>$", "", canvas_html, flags=re.S)


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
    canvas_only = without_legend(canvas_html)
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
    taken_back = [without_legend(html).count("#d9534f") for html, *_ in frames]
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
    assert all("#d9534f" not in without_legend(html) for html, *_ in plain)
    # the legend follows: its "taken back" entry under the frames that show one, never under a plain run's
    assert ["taken back" in html for html, *_ in frames] == [count > 0 for count in taken_back]
    assert not any("taken back" in html for html, *_ in plain)


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


def test_a_runs_steps_are_lowered_to_the_cap_on_its_passes_saying_so(model_dir):
    from mdlm_hf.pipeline import prompt_canvas

    model, _ = loading.load_model(model_dir)  # a context of 128 characters
    canvas = prompt_canvas(model, "", MAX_CANVAS)
    options, note = handlers.capped_steps(model, canvas, SamplerOptions(num_steps=128))
    assert options.num_steps < 128 and note.startswith(f"Steps lowered from 128 to {options.num_steps}: a run makes")
    windows = handlers.plan_windows(canvas[None] == model.mask_id, 128, 32, options.num_steps, options.spacing)
    assert sum(w.num_steps for w in windows) <= handlers.MAX_RUN_PASSES
    assert handlers.capped_steps(model, prompt_canvas(model, "", 100), SamplerOptions(num_steps=100))[1] == ""


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
