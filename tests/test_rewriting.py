"""Rewriting a span (mdlm_hf.rewriting): only the span changes, a seed repeats a run, bad input is one line, and the
span's score is the exact chain rule over its characters."""

import math

import pytest
import torch

from mdlm_hf import MASK_GLYPH, MDLM, rewrite, span_bits_per_char, stream_rewrite
from mdlm_hf.likelihood import exact_nll
from mdlm_hf.rewriting import SCORE_ROWS, score_window, span_nats, span_nats_steps

TEXT = "to be or not to be\nthat is the question 3\n"


def test_only_the_span_is_written_again(tiny_model):
    for start, end in ((0, 5), (9, 12), (30, len(TEXT))):
        new = rewrite(tiny_model, TEXT, start, end, seed=0)
        assert len(new) == len(TEXT) and MASK_GLYPH not in new
        assert new[:start] == TEXT[:start] and new[end:] == TEXT[end:]


def test_the_method_and_the_stream_agree_and_a_seed_repeats_the_run(tiny_model):
    first = tiny_model.rewrite(TEXT, 3, 20, seed=7, num_steps=4)
    assert first == rewrite(tiny_model, TEXT, 3, 20, seed=7, num_steps=4)
    states = list(stream_rewrite(tiny_model, TEXT, 3, 20, seed=7, num_steps=4))
    assert states[0].is_masked[0, 3:20].all() and not states[0].is_masked[0, :3].any()
    assert tiny_model.tokenizer.decode(states[-1].tokens[0]) == first
    assert len({rewrite(tiny_model, TEXT, 3, 20, seed=s, num_steps=4) for s in range(4)}) > 1  # seeds differ


@pytest.mark.parametrize(
    "text, start, end, says",
    [
        (None, 0, 1, "text must be a string"),
        (TEXT, 0.0, 3, "start must be an integer"),
        (TEXT, 0, True, "end must be an integer"),
        (TEXT, 5, 5, "0 <= start < end <= 42"),
        (TEXT, -1, 3, "0 <= start < end <= 42"),
        (TEXT, 0, 43, "0 <= start < end <= 42"),
        ("to be {or} not", 0, 3, "outside the model's vocabulary: '{', '}'"),
        ("t" * 20_000, 0, 3, "at most 16,384"),
    ],
)
def test_bad_input_is_refused_in_one_line(tiny_model, text, start, end, says):
    with pytest.raises(ValueError) as error:
        rewrite(tiny_model, text, start, end)
    assert says in str(error.value) and "\n" not in str(error.value)


def test_a_fast_switch_that_is_not_a_bool_is_refused(tiny_model):
    with pytest.raises(ValueError, match="^fast must be True or False, got 'no'$"):
        span_bits_per_char(tiny_model, TEXT, 0, 3, fast="no")


def test_an_autoregressive_model_is_refused(tiny_model):
    twin = MDLM(tiny_model.tokenizer.vocab, n_layer=1, n_head=2, n_embd=32, block_size=64, causal=True)
    with pytest.raises(ValueError, match="reads only the left"):
        rewrite(twin, TEXT, 0, 3)


def test_the_whole_text_as_the_span_scores_as_exact_nll(tiny_model):
    tokens = torch.tensor(tiny_model.tokenizer.encode(TEXT))
    expected = exact_nll(tiny_model, tokens, "left_to_right") / math.log(2)
    assert span_bits_per_char(tiny_model, TEXT, 0, len(TEXT)) == pytest.approx(expected, rel=1e-5)


def test_a_span_scores_as_the_chain_rule_computed_by_hand(tiny_model):
    start, end = 10, 14
    ids = torch.tensor(tiny_model.tokenizer.encode(TEXT))
    expected = []
    for k in range(start, end):  # one canvas per character: the span's earlier ones revealed, later ones masked
        canvas = ids.clone()
        canvas[k:end] = tiny_model.mask_id
        with torch.no_grad():
            log_probs = tiny_model(canvas[None]).log_softmax(-1)
        expected.append(-log_probs[0, k, ids[k]].item())
    assert span_nats(tiny_model, TEXT, start, end).tolist() == pytest.approx(expected, rel=1e-5)


def test_rewrites_of_one_span_are_scored_together_pass_by_pass_as_each_alone(tiny_model):
    start, end = 5, 25  # 20 characters: 60 canvases for three texts, SCORE_ROWS a pass
    texts = [rewrite(tiny_model, TEXT, start, end, seed=seed) for seed in range(3)]
    steps = list(span_nats_steps(tiny_model, texts, start, end))
    assert len(steps) == math.ceil(3 * (end - start) / SCORE_ROWS)
    scored = [int((nats == nats).sum()) for nats in steps]  # NaN: not scored yet
    assert scored == sorted(scored) and scored[0] == SCORE_ROWS and scored[-1] == 3 * (end - start)
    for row, text in enumerate(texts):
        assert steps[-1][row].tolist() == pytest.approx(span_nats(tiny_model, text, start, end).tolist(), rel=1e-5)
    with pytest.raises(ValueError, match="one length"):
        next(span_nats_steps(tiny_model, [TEXT, TEXT + TEXT[0]], start, end))


def test_a_long_text_is_scored_in_a_window_centred_on_the_span():
    assert score_window(50, 10, 20, 64) == (0, 50)
    assert score_window(1000, 500, 510, 64) == (473, 537)
    assert score_window(1000, 2, 5, 64) == (0, 64) and score_window(1000, 990, 1000, 64) == (936, 1000)
    with pytest.raises(ValueError, match="longer than the model's context"):
        score_window(1000, 0, 65, 64)


def test_a_span_past_the_context_is_rewritten_and_scored(tiny_model):
    text = TEXT * 4  # 168 characters, the model reads 64
    new = rewrite(tiny_model, text, 100, 110, seed=1)
    assert new[:100] == text[:100] and new[110:] == text[110:]
    assert math.isfinite(span_bits_per_char(tiny_model, text, 100, 110))


def test_a_narrow_context_reads_each_character_in_a_canvas_cropped_around_it(tiny_model):
    start, end, width = 10, 14, 8
    ids = torch.tensor(tiny_model.tokenizer.encode(TEXT))
    expected = []
    for k in range(start, end):  # the chain rule's canvas, cropped to `width` characters around the scored one
        left = min(max(0, k - width // 2), len(TEXT) - width)
        canvas = ids[left : left + width].clone()
        canvas[max(k, left) - left : end - left] = tiny_model.mask_id
        with torch.no_grad():
            log_probs = tiny_model(canvas[None]).log_softmax(-1)
        expected.append(-log_probs[0, k - left, ids[k]].item())
    *_, found = span_nats_steps(tiny_model, [TEXT], start, end, context=width)
    assert found[0].tolist() == pytest.approx(expected, rel=1e-5)
    *_, whole = span_nats_steps(tiny_model, [TEXT], start, end, context=len(TEXT) + 5)  # wider than the text
    assert whole[0].tolist() == pytest.approx(span_nats(tiny_model, TEXT, start, end).tolist(), rel=1e-5)
    assert found[0].tolist() != pytest.approx(whole[0].tolist(), rel=1e-5)  # the crop changes the odds


@pytest.mark.parametrize("context", [0, -3, 2.5, True, "64"])
def test_a_context_that_is_not_a_positive_whole_number_is_refused(tiny_model, context):
    with pytest.raises(ValueError, match="context must be a whole number of characters >= 1 or None"):
        next(span_nats_steps(tiny_model, [TEXT], 0, 5, context=context))
