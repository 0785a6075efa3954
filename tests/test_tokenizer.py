import pytest

from mdlm_hf import MASK_GLYPH, CharTokenizer


def test_round_trip_and_mask_id():
    tokenizer = CharTokenizer.from_text("hello world")
    assert tokenizer.vocab == " dehlorw"
    assert tokenizer.mask_id == len(tokenizer.vocab) == tokenizer.vocab_size - 1
    ids = tokenizer.encode("hello")
    assert tokenizer.decode(ids) == "hello"
    assert tokenizer.decode(ids + [tokenizer.mask_id]) == "hello" + MASK_GLYPH


def test_unknown_characters_are_all_named():
    tokenizer = CharTokenizer.from_text("abc")
    with pytest.raises(ValueError) as error:
        tokenizer.encode('aé"bé')
    message = str(error.value)
    assert "'é'" in message and "'\"'" in message and "2 character(s)" in message


@pytest.mark.parametrize("vocab", ["", "aa"])
def test_bad_vocab(vocab):
    with pytest.raises(ValueError):
        CharTokenizer(vocab)


def test_decode_rejects_out_of_range_ids():
    with pytest.raises(ValueError, match="outside"):
        CharTokenizer("ab").decode([5])
