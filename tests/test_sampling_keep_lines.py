"""A blank within a line (text before and after it on that line) is filled within that line: the sampler core draws
no line break there (`keep_lines`), while a blank alone on its line, or at the text's start or end, may take them."""

import pytest
import torch

from mdlm_hf import MDLM, SamplerOptions, sample
from mdlm_hf.pipeline import text_to_canvas
from mdlm_hf.rewriting import stream_rewrite
from mdlm_hf.sampling.drawing import newline_id, within_line_blanks
from mdlm_hf.sampling.state import final_state
from mdlm_space import handlers
from mdlm_space.texts import INFILL_EXAMPLES

SHIPPED = "pretrained/mdlm-shakespeare-char"
HAMLET = "To be, or not to be, __________ is the question:"
WORDS = ["to", "be", "or", "not", "that", "is", "the", "question", "whether", "tis", "nobler"]


def filled(model: MDLM, template: str, rows: int = 16, **options) -> list[str]:
    """The template filled `rows` times (one batch), each row's blanks only."""
    canvas = text_to_canvas(model, template).expand(rows, -1)
    tokens = final_state(sample(model, canvas, **options)).tokens
    blank = [i for i, c in enumerate(template) if c == "_"]
    return ["".join(model.tokenizer.decode(row)[i] for i in blank) for row in tokens.tolist()]


def test_within_line_blanks_are_the_masks_with_a_given_character_other_than_a_line_break_on_both_sides():
    mask, nl = 9, 0  # ids: 0 a line break, 1 a letter, 9 [MASK]
    rows = {
        (1, 9, 9, 1): [0, 1, 1, 0],  # text before and after on its line
        (1, 9, 9, 0): [0, 0, 0, 0],  # ends at a line break
        (0, 9, 9, 1): [0, 0, 0, 0],  # starts after one
        (9, 9, 1, 1): [0, 0, 0, 0],  # at the text's start
        (1, 1, 9, 9): [0, 0, 0, 0],  # at its end
        (1, 9, 1, 9): [0, 1, 0, 0],  # two blanks: the first within its line, the second at the end
    }
    tokens = torch.tensor(list(rows))
    inside = within_line_blanks(tokens, mask, nl)
    assert inside.int().tolist() == list(rows.values())
    assert within_line_blanks(torch.tensor([[1, 9, 9, 0]]), mask, nl) is None  # none: nothing to rule out
    assert within_line_blanks(tokens, mask, None) is None  # a model without a line break


@pytest.mark.parametrize("order", ["word_streams", "streams", "confidence", "entropy", "random", "left_to_right"])
def test_a_blank_within_a_line_takes_no_line_break_in_any_order(tiny_model, order):
    template = "to be or ____________________ question"
    options = dict(order=order, num_steps=8, seed=0)
    assert all("\n" not in text for text in filled(tiny_model, template, **options))
    # the random model draws line breaks there freely where the rule is off
    assert any("\n" in text for text in filled(tiny_model, template, keep_lines=False, **options))


def test_the_words_rule_redraws_within_the_line_too(tiny_model):
    texts = filled(tiny_model, "to be or ____________________ question", real_words=True, lexicon=WORDS, seed=1)
    assert all("\n" not in text for text in texts)


def test_a_blank_within_a_line_past_the_context_is_filled_within_it_window_by_window(tiny_model):
    template = "to be or " + "_" * 150 + " question"  # three windows of the 64-character model
    assert len(template) > tiny_model.block_size
    assert all("\n" not in text for text in filled(tiny_model, template, rows=4, num_steps=8, seed=0))


def test_a_blank_alone_on_its_line_or_at_the_end_may_take_line_breaks(tiny_model):
    for template in ("to be or\n" + "_" * 30 + "\nquestion", "to be or " + "_" * 30, "_" * 30 + " question"):
        assert any("\n" in text for text in filled(tiny_model, template, num_steps=8, seed=0)), template


def test_keep_lines_is_an_option_of_the_one_table():
    assert SamplerOptions().keep_lines is True and SamplerOptions.plain().keep_lines is True
    with pytest.raises(ValueError, match="^keep_lines must be True or False, got 1"):
        SamplerOptions(keep_lines=1)


def test_a_rewritten_span_within_a_line_stays_in_it_and_one_across_lines_may_break_them(tiny_model):
    text = "to be or not to be that is the question\nwhether tis nobler to be"
    for seed in range(4):
        state = final_state(stream_rewrite(tiny_model, text, 9, 30, num_steps=8, seed=seed))
        assert "\n" not in tiny_model.tokenizer.decode(state.tokens[0])[9:30]
    across = []
    for seed in range(8):  # the span held the line break: it may move, go or come back
        state = final_state(stream_rewrite(tiny_model, text, 20, 50, num_steps=8, seed=seed))
        across.append(tiny_model.tokenizer.decode(state.tokens[0])[20:50].count("\n"))
    assert any(count != 1 for count in across) and any(count >= 1 for count in across)


@pytest.fixture(scope="module")
def shipped() -> MDLM:
    return MDLM.from_pretrained(SHIPPED)


def test_the_shipped_model_fills_hamlets_blank_within_its_line(shipped):
    # with the library's defaults, 2 of 3 runs put a line break in it ("in me\nor is the question:")
    texts = filled(shipped, HAMLET, rows=24, num_steps=16, remask_ratio=0.0, seed=0)
    assert all("\n" not in text for text in texts), texts
    assert newline_id(shipped) == shipped.tokenizer.char_to_id["\n"]


def test_the_shipped_model_may_break_a_blank_alone_on_its_line(shipped):
    template = "ROMEO:\nBut soft, what light through yonder window breaks?\n" + "_" * 80 + "\nIt is the east."
    texts = filled(shipped, template, rows=8, num_steps=16, seed=0)
    assert any("\n" in text for text in texts), texts


def test_the_apps_infill_examples_keep_their_blanks_within_their_lines(shipped):
    """The Infill tab's handler, on its examples, over seeds: no line break where a blank sits within a line (all
    of the examples' blanks but the one that ends Richard's first line, which may take one)."""
    inside_of = {
        template: within_line_blanks(text_to_canvas(shipped, template)[None], shipped.mask_id, newline_id(shipped))
        for template in INFILL_EXAMPLES
    }
    assert [inside is not None for inside in inside_of.values()] == [True, True, False, True]
    for template, inside in inside_of.items():
        for seed in range(3 if inside is not None else 0):
            *_, (_, text, _, _) = handlers.infill(shipped, template, seed, True, num_steps=16, remask_ratio=0.0)
            assert not any(text[i] == "\n" for i in inside[0].nonzero().flatten().tolist()), (template, text)
