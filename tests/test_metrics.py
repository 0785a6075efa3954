import math
import random

import pytest

from evals.text_metrics import KneserNeyJudge, char_entropy, distinct_n
from mdlm_hf.metrics import load_word_list, valid_word_rate, word_list, words
from training.words import save_word_list

TRAIN = (
    "the king is dead and the queen is sad. the king was good and the queen was kind. "
    "long live the king, said the lord. the lord is loyal to the queen and to the king. "
) * 20
HELD_OUT = "the queen is kind and the lord was loyal to the good king."


def shuffled(text: str, seed: int = 0) -> str:
    chars = list(text)
    random.Random(seed).shuffle(chars)
    return "".join(chars)


def test_words_and_word_list(tmp_path):
    assert words("Thou art O'er-wrought, Romeo's; 3 men") == ["thou", "art", "o'er", "wrought", "romeo's", "men"]
    save_word_list(TRAIN, tmp_path / "words.txt")
    assert load_word_list(tmp_path / "words.txt") == set(word_list(TRAIN)) == set(words(TRAIN))


def test_valid_word_rate_real_vs_shuffled():
    known = set(word_list(TRAIN))
    assert valid_word_rate(HELD_OUT, known) == 1.0
    assert valid_word_rate(shuffled(HELD_OUT), known) < 0.3
    assert math.isnan(valid_word_rate("... !!", known))


def test_entropy_and_distinct_n():
    assert char_entropy("the " * 50) == pytest.approx(2.0)  # four equally frequent characters
    assert char_entropy("aaaa") == 0.0
    assert char_entropy(HELD_OUT) > 3.0
    assert distinct_n("abab" * 10, 2) < 0.1 < distinct_n(HELD_OUT, 2)


def test_judge_probabilities_sum_to_one():
    judge = KneserNeyJudge(TRAIN, order=4)
    for history in ["", "t", "the ", "king", "zzz", "q."]:
        assert sum(judge.probability(c, history) for c in judge.vocab) == pytest.approx(1.0, abs=1e-12)
        assert all(judge.probability(c, history) > 0 for c in judge.vocab)


def test_judge_prefers_real_text():
    judge = KneserNeyJudge(TRAIN, order=5)
    real = judge.perplexity(HELD_OUT)
    assert real < 3.0 < 10 < judge.perplexity(shuffled(HELD_OUT))
    assert judge.perplexity([HELD_OUT, HELD_OUT]) == pytest.approx(real)


def test_judge_bad_arguments():
    with pytest.raises(ValueError):
        KneserNeyJudge("", order=3)
    with pytest.raises(ValueError):
        KneserNeyJudge("abc", order=3, discount=1.5)
    with pytest.raises(ValueError):
        KneserNeyJudge("abc").perplexity("")


def test_a_word_list_leaves_out_stray_letters_and_a_foreign_passages_words_seen_once(tmp_path):
    # words.txt held "e", "t", "ut", "sol" and "cette": with them, "of ten err ut e sol" passed as real words
    english = "The king is come, and a man of the king's friends is come.\nO, I am come to the king.\n" * 3
    text = english + "Ut re sol la, cette narines dites.\nThe king's e'en come; 'tis t' the king.\n"
    left_out = save_word_list(text, tmp_path / "words.txt")
    kept = set(load_word_list(tmp_path / "words.txt"))
    assert {"a", "i", "o", "king", "come", "tis", "e'en"} <= kept
    assert not {"ut", "re", "sol", "la", "cette", "narines", "dites", "t"} & kept
    assert left_out == 8
