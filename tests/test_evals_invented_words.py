"""The invented-words eval: its counts on hand-written texts, and its lexicon from the sdist and TinyShakespeare."""

import math

from evals import invented_words
from mdlm_hf import SamplerOptions


def test_word_counts_on_hand_written_text():
    lexicon = {"to", "be", "or", "not", "o'er"}
    row = invented_words.word_counts(["To be, or not to bex.", "O'er porelian"], lexicon)
    assert row["words"] == 8
    assert row["valid"] == 6 / 8
    assert row["invented_per_1k"] == 1000 * 2 / (len("To be, or not to bex.") + len("O'er porelian"))
    assert math.isnan(invented_words.word_counts(["..."], lexicon)["valid"])


def test_lexicon_joins_the_works_and_tinyshakespeare(tmp_path, monkeypatch):
    tiny = tmp_path / "tiny.txt"
    tiny.write_text("ROMEO:\nWherefore art thou?\n")
    monkeypatch.setattr(invented_words, "fetch_texts", lambda directory: {"hamlet": "To be, or not to be."})
    assert invented_words.shakespeare_lexicon(tiny) == {"romeo", "wherefore", "art", "thou", "to", "be", "or", "not"}


def test_each_model_writes_with_each_rule_the_seeds_shared():
    class Recorder:
        def __init__(self):
            self.calls = []

        def generate(self, length, options, seed):
            self.calls.append((length, options.temperature, seed))
            return "x" * length

    model = Recorder()
    texts = invented_words.sample_texts({"m": model}, 2, 5, 8, ("default", "word-streams-t110-caps30"))
    assert list(texts) == ["m · default", "m · word-streams-t110-caps30"]
    default = SamplerOptions().temperature
    assert model.calls == [(8, default, 5), (8, 1.1, 5), (8, default, 6), (8, 1.1, 6)]
    assert list(invented_words.sample_texts({"m": Recorder()}, 1, 0, 4)) == ["m"]  # one rule: the model's name
