"""Writing past the context: the window plan, long canvases through the one core, long prompts, templates, endings."""

import warnings

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from mdlm_hf import MASK_GLYPH, ORDERS
from mdlm_hf.pipeline import ended, sample, text_to_canvas
from mdlm_hf.sampling.options import SamplerOptions
from mdlm_hf.sampling.state import final_state
from mdlm_hf.windows import batches_by_length, plan_windows, score_windows, window_steps

BLOCK = 64  # the tiny model's block_size


def fills(windows, masked):
    """Each window's filled positions: the masks still pending from its first to its fill_end."""
    pending, filled = list(masked), []
    for w in windows:
        first = next(i for i in range(w.start, w.fill_end) if pending[i])
        filled.append([i for i in range(first, w.fill_end) if pending[i]])
        pending[first : w.fill_end] = [False] * (w.fill_end - first)
    return filled, pending


@settings(max_examples=200, deadline=None)
@given(
    masked=st.lists(st.booleans(), min_size=1, max_size=700).filter(any),
    context=st.integers(0, BLOCK - 1),
    num_steps=st.integers(1, 64),
    spacing=st.integers(0, 16),
)
# a blank longer than the window before a given character: its window filled past its own end
@example(masked=[True] * 150 + [False] + [True] * 150, context=16, num_steps=32, spacing=0)
def test_every_mask_is_filled_by_exactly_one_window_that_reads_it(masked, context, num_steps, spacing):
    windows = plan_windows(torch.tensor([masked]), BLOCK, context, num_steps, spacing)
    filled, pending = fills(windows, masked)
    assert not any(pending)
    assert sorted(i for f in filled for i in f) == [i for i, m in enumerate(masked) if m]
    for w, positions in zip(windows, filled, strict=True):
        assert 0 <= w.start < w.fill_end <= w.end <= len(masked) and w.end - w.start == min(BLOCK, len(masked))
        assert positions and 1 <= w.num_steps <= max(num_steps, len(positions))
        first = positions[0]
        # the context: the window reads `context` characters before its first mask (or all there are)
        assert w.start <= max(0, first - context) or w.end == len(masked)
    assert [w.start for w in windows] == sorted(w.start for w in windows)


def test_a_short_blank_sees_the_given_text_on_both_sides():
    template = "a" * 200 + "_" * 10 + "b" * 100 + "_" * 10 + "c" * 200
    masked = [c == "_" for c in template]
    windows = plan_windows(torch.tensor([masked]), BLOCK, 16, 32)
    assert len(windows) == 2
    for w, blank in zip(windows, (200, 310), strict=True):
        assert w.start <= blank - 16 and w.end >= blank + 10 + 16  # given text before and after the blank
    # a long run of masks ending in given text: its last window still reaches the text after it
    template = "a" * 100 + "_" * 150 + "b" * 100
    windows = plan_windows(torch.tensor([[c == "_" for c in template]]), BLOCK, 16, 32)
    assert windows[-1].end > 250 + 16  # reads past the run into the given text


def test_window_steps_keep_the_rate_of_a_full_canvas_and_slow_down_for_a_short_blank():
    assert window_steps(32, 192, 256, spacing=8) == 24  # 8 characters a pass, as 256 in 32 passes
    assert window_steps(32, 16, 256, spacing=8) == 16  # 16 adjacent masks: one a pass keeps them apart
    assert window_steps(32, 16, 256, spacing=0) == 2


def test_a_long_canvas_streams_the_whole_text_window_by_window(tiny_model):
    prompt = "to be or not to be "
    canvas = torch.tensor(tiny_model.tokenizer.encode(prompt) + [tiny_model.mask_id] * 281)
    states = list(sample(tiny_model, canvas, seed=3, num_steps=16))
    last = states[-1]
    # a streams plan may end before num_steps (the default's stretches are shorter than its passes)
    assert last.done and last.tokens.shape == (1, 300) and last.step == len(states) - 1 <= last.num_steps
    assert last.num_forward_passes == last.step  # exact counts: one pass a step
    assert tiny_model.tokenizer.decode(last.tokens[0]).startswith(prompt)
    assert not torch.isnan(last.confidence[0, len(prompt) :]).any()  # every written character keeps its confidence
    windows = [s.window for s in states]
    assert windows[0] == windows[1] and {w[1] - w[0] for w in windows} == {BLOCK}
    assert [w[0] for w in windows] == sorted(w[0] for w in windows) and windows[-1][1] == 300
    for before, after in zip(states, states[1:], strict=False):
        start, end = after.window
        changed = (before.tokens != after.tokens)[0].nonzero().flatten()
        assert changed.numel() and start <= int(changed.min()) and int(changed.max()) < end  # only the window moves
        assert after.revealed[0, :start].sum() == 0 and after.revealed[0, end:].sum() == 0
    again = final_state(sample(tiny_model, canvas, seed=3, num_steps=16))
    assert torch.equal(again.tokens, last.tokens)


def test_rows_of_a_batch_share_the_windows(tiny_model):
    canvas = torch.full((3, 150), tiny_model.mask_id)
    canvas[1, :20] = 5  # a row with a prompt: its masks are a subset of the others'
    last = final_state(sample(tiny_model, canvas, seed=0))
    assert last.done and torch.equal(last.tokens[1, :20], torch.full((20,), 5))
    one = final_state(sample(tiny_model, torch.full((150,), tiny_model.mask_id), seed=0))
    assert one.num_forward_passes == last.num_forward_passes


def test_a_prompt_longer_than_the_context_is_kept_whole_and_a_warning_says_how_much_was_read(tiny_model):
    prompt = "to be or not to be that is the question\n" * 4  # 160 characters
    with pytest.warns(UserWarning, match="the prompt has 160 characters and the model reads 64 at a time: its last 16"):
        text = tiny_model.complete(prompt, 100, seed=0)
    assert text.startswith(prompt) and len(text) == 260
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tiny_model.complete(prompt[:40], 20, seed=0)  # fits: nothing to say


def test_a_long_template_is_filled_where_blank_and_kept_where_given(tiny_model):
    template = ("to be or not to be " + "_" * 12 + "\n") * 12  # 384 characters, blanks between given text
    text = tiny_model.infill(template, seed=1)
    assert len(text) == len(template) and "_" not in text
    assert all(t == c for t, c in zip(text, template, strict=True) if c != "_")
    with pytest.raises(ValueError, match="template has no blank"):
        text_to_canvas(tiny_model, "to be or not to be " * 30)


@pytest.mark.parametrize(
    ("text", "end_at", "expected"),
    [
        ("ROMEO:\nI am here.\nAnd th", "line", "ROMEO:\nI am here."),
        ("A:\nyes.\n\nB:\nno, sir.\nI w", "speech", "A:\nyes."),
        ("A:\nyes.\nno, sir\nI w", "speech", "A:\nyes.\nno, sir"),  # no speech ends: the last line end
        ("to be or no", "line", "to be or"),  # no line ends: the last word end
        ("abcdef", "line", "abcdef"),  # nothing to cut at: whole
        ("A:\nyes.\n\n", "speech", "A:\nyes."),  # trailing breaks are not a cut
        ("to be or no", "length", "to be or no"),
    ],
)
def test_ended_cuts_at_a_line_or_speech_end_never_mid_word(text, end_at, expected):
    assert ended(text, 0, end_at) == expected


def test_ended_keeps_the_prompt_whole():
    assert ended("ROMEO:\nWhat, ho\nsays she", 12, "line") == "ROMEO:\nWhat, ho"
    assert ended("ROMEO:\nWhat, ho", 12, "line") == "ROMEO:\nWhat,"  # " ho" may stop mid-word: the prompt alone
    with pytest.raises(ValueError, match="end_at must be one of \\('length', 'line', 'speech'\\), got 'word'"):
        ended("text", 0, "word")


def test_complete_ends_at_a_line_within_its_budget(tiny_model):
    full = tiny_model.complete("to be\n", 150, seed=4)
    cut = tiny_model.complete("to be\n", 150, seed=4, end_at="line")
    assert full.startswith(cut) and len(cut) <= len(full)
    rest = full[len(cut) :]
    assert rest == "" or rest[0].isspace()  # never mid-word
    with pytest.raises(ValueError, match="end_at must be one of"):
        tiny_model.generate(10, end_at="paragraph")


def test_window_context_is_an_option_with_a_scale_free_default():
    assert SamplerOptions().window_context is None
    with pytest.raises(ValueError, match="window_context must be None or an integer >= 0"):
        SamplerOptions(window_context=-1)


@pytest.mark.parametrize("order", ORDERS)
def test_a_given_character_between_two_blanks_longer_than_the_context_is_infilled_around(tiny_model, order):
    # the first window was planned to fill up to the given character, past its own end: a RuntimeError
    template = "_" * (BLOCK + 40) + "a" + "_" * (BLOCK + 40)
    text = tiny_model.infill(template, order=order, seed=0)
    assert len(text) == len(template) and text[BLOCK + 40] == "a" and MASK_GLYPH not in text


@pytest.mark.parametrize("n,context", [(64, 32), (65, 32), (200, 32), (200, 0), (500, 63), (1, 10)])
def test_score_windows_score_each_character_once_with_its_context(n, context):
    windows = score_windows(n, 64, context)
    scored = [i for _, first, end in windows for i in range(first, end)]
    assert scored == list(range(n))  # every character once, in order
    for start, first, end in windows:
        assert 0 <= start <= first <= end <= n and end - start <= 64
        assert start == 0 or first - start >= context  # past the first window, at least `context` before


def test_windows_side_by_side_go_in_batches_of_one_length_in_order():
    windows = torch.arange(150).split(64)  # 64, 64 and a short 22
    batches = list(batches_by_length(windows, torch.Tensor.numel, 2))
    assert [[w.numel() for w in batch] for batch in batches] == [[64, 64], [22]]
    batches = list(batches_by_length(windows[1:], torch.Tensor.numel, 8))  # one chunk holding both lengths
    assert [[int(w[0]) for w in batch] for batch in batches] == [[64], [128]]
