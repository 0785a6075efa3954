"""The corpus builder on small hand-written Gutenberg plays: headings mapped or the play left out, layout, leakage."""

from collections import Counter

import pytest

from training import build_corpus
from training.build_corpus import STRETCH, Play, build, stretches, tinyshakespeare_layout
from training.corpus import split_text
from training.speaker_headings import map_heading, persons_words

PERSONS = """HAMLET, PRINCE OF DENMARK

PERSONS REPRESENTED.

Claudius, King of Denmark.
Bernardo, Officer.
Cornelius, Courtier.
Cordelia, a Lady.
Two Clowns, Grave-diggers.
Ghost of Hamlet's Father.

ACT I.
"""


def gutenberg_play(speeches: list[tuple[str, str]], persons: str = PERSONS) -> str:
    """A play as the sdist writes one: the persons, ACT I, a scene line, headings on their own line after a blank."""
    body = "\nScene I. Elsinore. A platform.\n\n[Enter Bernardo.]\n\n"
    body += "\n\n".join(f"{heading}\n{speech}" for heading, speech in speeches)
    return persons + body + "\n"


@pytest.fixture
def persons() -> frozenset[str]:
    return persons_words(gutenberg_play([]))


def test_persons_words_reads_the_list_and_singular_plurals(persons):
    assert {"CLAUDIUS", "KING", "BERNARDO", "CLOWNS", "CLOWN", "HAMLET"} <= persons
    assert "ELSINORE" not in persons  # after ACT I
    assert persons_words("SONNETS\n\nFrom fairest creatures we desire increase,\n") == frozenset()


@pytest.mark.parametrize(
    ("heading", "expected"),
    [
        ("Ber.", "BERNARDO"),  # an abbreviation of one person
        ("King.", "KING"),  # a word of the list
        ("1 Clown.", "First Clown"),  # TinyShakespeare's "First Citizen" style
        ("SECOND CLOWN.", "Second Clown"),
        ("Ghost.", "GHOST"),
        ("All.", "ALL"),
        ("Guard.", "GUARD"),  # no person's word, but a word the play speaks
        ("Cor.", None),  # CORNELIUS or CORDELIA: ambiguous
        ("Zed.", None),  # no person, no word of the play
    ],
)
def test_map_heading(persons, heading, expected):
    assert map_heading(heading, persons, spoken=Counter({"GUARD": 1})) == expected


def test_the_left_out_plays_headings_are_mapped_by_speech_ocr_slips_and_a_table():
    # nine plays (Hamlet, Lear, Timon, ...: 1.15M characters) were left out for a heading that named no single person
    from collections import Counter

    from training.speaker_headings import HEADING_FIXES, edit_distance

    persons = frozenset({"POLONIUS", "POLONIU", "PANDARUS", "PANDARU", "CORDELIA", "CORNWALL", "SERVANTS", "SERVANT"})
    spoken = Counter({"POLONIUS": 12, "PANDARUS": 40, "SERVANT": 3, "SERVANTS": 1, "CORDELIA": 5, "CORNWALL": 5})
    assert map_heading("Pol.", persons, spoken) == "POLONIUS"  # not the list's made-up singular
    assert map_heading("First Serv.", persons, spoken) == "First Servant"  # the one the play speaks more
    assert map_heading("ANDARUS.", persons, spoken) == "PANDARUS"  # an OCR slip, one letter dropped
    assert map_heading("Cor.", persons, spoken) is None  # as often spoken: the table decides
    assert map_heading("Xyzzy.", persons, spoken) is None  # no person is two letters from it
    assert edit_distance("PERACLES", "PERICLES") == 1 and edit_distance("HELCANUS", "HELICANUS") == 1
    assert all(reason for fixes in HEADING_FIXES.values() for _, reason in fixes.values())  # each with its reason
    raw = gutenberg_play([("Cor.", "Nothing, my lord."), ("SONG.", "When that I was"), ("Ber.", "Peace.")])
    play = Play("lear", persons | {"BERNARDO"}, spoken)
    tinyshakespeare_layout(play, raw)
    assert play.text == "CORDELIA:\nNothing, my lord.\nWhen that I was\n\nBERNARDO:\nPeace.\n"
    assert play.unmapped == []


def test_layout_writes_tinyshakespeare_headings_and_drops_directions(persons):
    raw = gutenberg_play(
        [("Ber.", "Who's there?\n[Aside.] Stand, ho!"), ("King.", "Nay, answer me:\n\n[Knocks.]\n\nGo.")]
    )
    play = Play("hamlet", persons)
    tinyshakespeare_layout(play, raw)
    assert play.text == "BERNARDO:\nWho's there?\nStand, ho!\n\nKING:\nNay, answer me:\nGo.\n"
    assert play.unmapped == []


def test_an_unmappable_heading_leaves_the_play_out():
    texts = {"hamlet": gutenberg_play([("Ber.", "Who's there?"), ("Cor.", "Nay, answer me.")])}
    text, report, _ = build(texts, "First Citizen:\nBefore we proceed any further, hear me speak.\n" * 40)
    assert text == ""
    assert "Cor." in report[0]["left out"]


def test_build_leaves_out_held_out_plays_poems_and_tinyshakespeares_own():
    tiny = "".join(f"CLAUDIUS:\nLine number {i} of a play that TinyShakespeare already holds.\n\n" for i in range(60))
    texts = {
        "othello": gutenberg_play([("Ber.", "Who's there?")]),
        "sonnets": "From fairest creatures we desire increase,\nThat thereby beauty's rose might never die,\n",
        "hamlet": gutenberg_play([("King.", tiny.replace("CLAUDIUS:\n", ""))]),  # TinyShakespeare's words
        "lear": gutenberg_play([("Ber.", "Nothing will come of nothing: speak again.")]),
    }
    text, report, _ = build(texts, tiny)
    reasons = {row["play"]: row.get("left out", "kept") for row in report}
    assert reasons["othello"].startswith("held out")
    assert reasons["sonnets"].startswith("no list of persons")
    assert reasons["hamlet"].startswith("in TinyShakespeare")
    assert reasons["lear"] == "kept"
    assert text == "BERNARDO:\nNothing will come of nothing: speak again.\n"


def test_no_stretch_of_the_validation_split_survives():
    tiny = "".join(f"CLAUDIUS:\nA line of the training text, number {i}.\n\n" for i in range(50))
    tiny += "BERNARDO:\nThis speech is in the validation split, word for word.\n"
    validation = split_text(tiny)[1]
    shared_line = "This speech is in the validation split, word for word."
    assert shared_line in validation
    own = "Nothing will come of nothing: speak again, and mend your speech a little. " * 8  # mostly new words
    texts = {"lear": gutenberg_play([("Ber.", own), ("King.", shared_line), ("Ber.", "Kept.")])}
    text, report, _ = build(texts, tiny)
    assert report[0]["dropped_speeches"] == 1
    assert text == f"BERNARDO:\n{own.strip()}\n\nBERNARDO:\nKept.\n"
    assert not stretches(text) & stretches(validation)
    assert len(shared_line) > STRETCH


def test_cli_prints_what_it_kept_and_writes_a_manifest(tmp_path, monkeypatch, capsys):
    tiny_path = tmp_path / "tiny.txt"
    tiny_path.write_text("".join(f"CLAUDIUS:\nLine {i} of the training text.\n\n" for i in range(50)))
    plays = {"lear": gutenberg_play([("Ber.", "Nothing will come of nothing.")]), "othello": gutenberg_play([])}
    monkeypatch.setattr(build_corpus, "fetch_texts", lambda directory: plays)
    manifest = build_corpus.main(["--tinyshakespeare", str(tiny_path), "--out", str(tmp_path / "more.txt")])
    printed = capsys.readouterr().out
    assert "kept      lear" in printed and "left out  othello" in printed
    assert (tmp_path / "more.txt").read_text() == "BERNARDO:\nNothing will come of nothing.\n"
    assert manifest["chars"] == len("BERNARDO:\nNothing will come of nothing.\n")
    assert (tmp_path / "more.txt.json").is_file()


def test_read_plays_splits_the_text_back_into_its_plays(tmp_path, monkeypatch):
    tiny_path = tmp_path / "tiny.txt"
    tiny_path.write_text("".join(f"CLAUDIUS:\nLine {i} of the training text.\n\n" for i in range(50)))
    plays = {
        "lear": gutenberg_play([("Ber.", "Nothing will come of nothing.")]),
        "john": gutenberg_play([("Ber.", "Speak again."), ("King.", "Mend your speech.")]),
    }
    monkeypatch.setattr(build_corpus, "fetch_texts", lambda directory: plays)
    out = tmp_path / "more.txt"
    build_corpus.main(["--tinyshakespeare", str(tiny_path), "--out", str(out)])
    read = build_corpus.read_plays(out)
    assert read == {
        "john": "BERNARDO:\nSpeak again.\n\nKING:\nMend your speech.\n",
        "lear": "BERNARDO:\nNothing will come of nothing.\n",
    }
    assert build_corpus.read_plays(tmp_path / "absent.txt") == {}
    out.write_text(out.read_text() + "more")  # a text the manifest no longer describes
    with pytest.raises(ValueError, match="do not add up"):
        build_corpus.read_plays(out)


def test_cli_refuses_an_sdist_dir_that_is_a_file_in_one_line(tmp_path):
    # formerly a FileExistsError traceback
    (tmp_path / "tiny.txt").write_text("ROMEO:\nHi.\n")
    (tmp_path / "sdist").write_text("a file")
    flags = ["--tinyshakespeare", str(tmp_path / "tiny.txt"), "--out", str(tmp_path / "o.txt")]
    with pytest.raises(SystemExit, match=f"--sdist-dir {tmp_path / 'sdist'} is a file; give a folder"):
        build_corpus.main([*flags, "--sdist-dir", str(tmp_path / "sdist")])


def test_cli_refuses_a_missing_text_in_one_line(tmp_path):
    with pytest.raises(SystemExit, match="does not exist"):
        build_corpus.main(["--tinyshakespeare", str(tmp_path / "nope.txt"), "--out", str(tmp_path / "o.txt")])


def test_tinyshakespeares_plays_are_found_by_their_words_short_speeches_by_their_speakers():
    from training.build_corpus import fill_short_speeches, tinyshakespeare_plays

    lines_a = [f"the {word} of the morning light upon the hills of {word}town" for word in ("red", "grey", "blue")]
    lines_b = [f"a {word} wind across the water and the {word} ships at sea" for word in ("cold", "dark", "wild")]
    play_a = gutenberg_play([("King.", line) for line in lines_a])
    play_b = gutenberg_play([("Ber.", line) for line in lines_b])
    tiny = "\n\n".join(
        [f"KING:\n{line}" for line in lines_a] + ["BERNARDO:\nAy."] + [f"BERNARDO:\n{line}" for line in lines_b]
    )
    segments = tinyshakespeare_plays({"alpha": play_a, "beta": play_b, "sonnets": "From fairest creatures"}, tiny)
    assert [s["play"] for s in segments] == ["alpha", "beta"]
    assert tiny[segments[1]["start"] :].startswith("BERNARDO:\nAy.")  # a short speech opens the play its speaker is in
    assert segments[0]["start"] == 0 and segments[-1]["end"] == len(tiny)
    # a speech no stretch names goes to the play before it, unless only the play after it has its speaker
    assert fill_short_speeches(["a", None, None, "b"], ["X", "X", "Y", "Y"]) == ["a", "a", "b", "b"]
    assert fill_short_speeches([None, "a"], ["Z", "X"]) == ["a", "a"]
