"""Streamers (mdlm_hf.streaming): generate, complete and infill hand drafts and text to any object with put, end
and put_draft, as transformers' generate does; transformers' own streamers work as they are."""

import pytest
from transformers import TextDiffusionStreamer, TextIteratorStreamer

from mdlm_hf import MASK_GLYPH
from mdlm_hf.__main__ import main as cli
from tests.sampler_helpers import PLAIN


class Recorder:
    """Every call a run makes, with what it handed over, decoded."""

    def __init__(self, tokenizer):
        self.tokenizer, self.calls = tokenizer, []

    def put(self, ids):
        self.calls.append(("put", self.tokenizer.decode(ids)))

    def put_draft(self, ids):
        self.calls.append(("put_draft", self.tokenizer.decode(ids)))

    def end(self):
        self.calls.append(("end", None))


def test_a_run_hands_the_prompt_each_draft_then_its_text(tiny_model):
    streamer = Recorder(tiny_model.tokenizer)
    text = tiny_model.complete("to be", 30, PLAIN, num_steps=6, seed=0, streamer=streamer)
    assert text == tiny_model.complete("to be", 30, PLAIN, num_steps=6, seed=0)  # the same run
    kinds = [kind for kind, _ in streamer.calls]
    assert kinds == ["put", *["put_draft"] * 6, "put", "end"]  # the canvas before each of the 6 steps' last
    drafts = [value for kind, value in streamer.calls if kind == "put_draft"]
    assert streamer.calls[0] == ("put", "to be") and drafts[0] == MASK_GLYPH * 30
    assert all(len(d) == 30 for d in drafts) and drafts[-1].count(MASK_GLYPH) < drafts[0].count(MASK_GLYPH)
    assert streamer.calls[-2] == ("put", text[len("to be") :])


def test_the_text_a_streamer_gets_ends_where_end_at_cuts(tiny_model):
    streamer = Recorder(tiny_model.tokenizer)
    text = tiny_model.complete("to be\n", 40, PLAIN, num_steps=4, seed=1, end_at="line", streamer=streamer)
    assert streamer.calls[-2] == ("put", text[len("to be\n") :])


def test_an_infill_hands_no_prompt_and_the_whole_text(tiny_model):
    streamer = Recorder(tiny_model.tokenizer)
    text = tiny_model.infill("to __ or not __ be", options=PLAIN, num_steps=2, seed=0, streamer=streamer)
    assert streamer.calls[0] == ("put", "") and streamer.calls[-2] == ("put", text)


def test_transformers_text_diffusion_streamer_draws_the_drafts_then_prints_the_text(tiny_model, capsys):
    streamer = TextDiffusionStreamer(tiny_model.tokenizer)
    text = tiny_model.generate(40, PLAIN, num_steps=5, seed=0, streamer=streamer)
    out = capsys.readouterr().out
    assert out.count("\0337") == 5 and out.endswith(text + "\n")  # five drafts, each over the last; the text


def test_transformers_text_iterator_streamer_yields_the_text(tiny_model):
    streamer = TextIteratorStreamer(tiny_model.tokenizer)
    text = tiny_model.generate(40, PLAIN, num_steps=4, seed=2, streamer=streamer)
    assert "".join(streamer) == text


@pytest.mark.parametrize("streamer", [object(), print, "stdout"])
def test_an_object_that_is_no_streamer_is_refused_in_one_line(tiny_model, streamer):
    with pytest.raises(ValueError, match="streamer must have put and end methods"):
        tiny_model.generate(20, streamer=streamer)


def test_the_command_line_draws_drafts_live_or_prints_the_text(model_dir, capsys):
    cli(["--model", str(model_dir), "--length", "30", "--seed", "0", "--num-steps", "4", "--live"])
    live = capsys.readouterr().out
    cli(["--model", str(model_dir), "--length", "30", "--seed", "0", "--num-steps", "4", "--no-live"])
    plain = capsys.readouterr().out
    assert live.count("\0337") == 4 and "\0337" not in plain
    assert live.endswith(plain) and len(plain) == 31  # the drafts, then the same text and its line break
