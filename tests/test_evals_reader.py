"""The blind-reading harness (evals/reader.py): passages, layout slips, packets' keys and rankings' scores."""

import json

import pytest

from evals import reader

TEXT = "ROMEO:\nBut soft, what light through yonder window breaks?\n\nJULIET:\nAy me.\n" * 6


def test_a_passage_starts_at_a_line_and_ends_at_a_word():
    for seed in range(20):
        cut = reader.passage(TEXT, seed, length=90)
        start = TEXT.index(cut)
        assert start == 0 or TEXT[start - 1] == "\n", cut
        assert len(cut) <= 90 and TEXT[start + len(cut)] in " \n", cut


def test_layout_slips_are_counted_as_a_reader_sees_them():
    text = "ROMEO:\nA line.\n\nROMEO:\nAgain.'\n\nBOTH:\n:\n" + "x" * 81 + "\nofficer:  so\nROMAN :"
    slips = reader.layout_slips(text, longest_line=77)
    assert slips == {
        "long line": 1,
        "speaker twice": 1,
        "punctuation line": 1,
        "double space": 1,
        "spaced colon": 1,
        "unopened quote": 1,
    }


def test_a_ranking_is_scored_into_mean_ranks_per_source(tmp_path):
    key = {str(n): {"source": source} for n, source in enumerate(["real", "twin", "real", "default"], 1)}
    (tmp_path / "key.json").write_text(json.dumps(key))
    (tmp_path / "ranking.txt").write_text("3\n1\n4\n2\n")
    table = reader.score(tmp_path)
    assert table.splitlines()[2:] == [
        "| real | 1.5 | 0.7 | 1, 2 |",
        "| default | 3.0 | 0.0 | 3 |",
        "| twin | 4.0 | 0.0 | 4 |",
    ]


@pytest.mark.parametrize("ranking,words", [("1 2 3", "missing [4]"), ("1 2 3 3 4", "repeated [3]")])
def test_a_ranking_that_misses_or_repeats_a_passage_is_refused_naming_it(tmp_path, ranking, words):
    (tmp_path / "ranking.txt").write_text(ranking)
    with pytest.raises(ValueError, match=words.replace("[", r"\[").replace("]", r"\]")):
        reader.read_ranking(tmp_path / "ranking.txt", 4)
