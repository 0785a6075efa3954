"""The app's Score tab: bits per character, each character tinted, long texts, and what it refuses."""

import math
import re

import gradio as gr
import pytest
import torch

import app
from mdlm_space import handlers, loading, render, worker
from mdlm_space.endpoints import event


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


def test_a_score_of_one_character_says_character(model_dir):
    # the Score line said "over 1 characters"
    model, _ = loading.load_model(model_dir)
    *_, (view, summary) = handlers.score(model, "R")
    assert "over 1 character (" in summary
    *_, (view, summary) = handlers.score(model, "RO")
    assert "over 2 characters (" in summary
    assert "Most surprising: «" in summary  # quoted: a surprising comma read as the sentence's own
