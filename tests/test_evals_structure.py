"""The structure suite's metrics on small hand-written plays with known counts, so that they cannot drift."""

import math

import pytest
import torch

from evals.structure_metrics import (
    Sample,
    castmates,
    count_structure,
    heading_name,
    metrics,
    repeated_span,
    speakers,
)
from evals.structure_suite import PROMPTS, meets, template
from mdlm_hf.devices import max_threads


class HalfJudge:
    """A judge that gives every character probability 1/2."""

    def probability(self, char: str, history: str) -> float:
        return 0.5


GIVEN = "ROMEO:\nI will go.\n\n"
WRITTEN = "JULIET:\n\nROMEO:\nStay.\nI will go.\n\nOOPEY:\nWhat?\n\nOOPEY:\nYes.\n"


def test_a_continued_play_has_its_known_counts():
    sample = Sample(GIVEN + WRITTEN, [False] * len(GIVEN) + [True] * len(WRITTEN))
    counts = count_structure([sample], {"ROMEO", "JULIET"}, {"stay", "i", "will", "go"}, HalfJudge())
    m = metrics(counts)
    assert counts.headings == 4  # JULIET, ROMEO, OOPEY, OOPEY; the given ROMEO is context only
    assert m["real_names"] == 0.5
    assert m["empty_speeches"] == 0.25  # JULIET's speech is a blank line
    assert m["same_speaker_twice"] == 0.25  # OOPEY after OOPEY; ROMEO after the given ROMEO is not (JULIET between)
    assert m["repeated_lines"] == 0.25  # "I will go." was given above
    assert m["valid_words"] == pytest.approx(4 / 6)  # what and yes are not in the word list
    assert counts.chars == len(WRITTEN)
    assert m["headings_per_1k"] == pytest.approx(4000 / len(WRITTEN))
    assert m["judge_nll"] == pytest.approx(math.log(2))


def test_speakers_of_two_plays_in_a_row_are_strangers():
    verona = "ROMEO:\nHi.\n\nJULIET:\nHo.\n\nROMEO:\nAy.\n"
    elsinore = "HAMLET:\nWho?\n\nHORATIO:\nI.\n"
    cast = castmates([verona + "\n" * 20 + elsinore], span=10)
    assert cast["ROMEO"] == {"ROMEO", "JULIET"} and cast["HAMLET"] == {"HAMLET", "HORATIO"}
    text = "x\n\nROMEO:\nHi.\n\nHAMLET:\nHo.\n\nJULIET:\nAy.\n\nROMEO:\nNo.\n\nOOPEY:\nWhat?\n\nOOPEY:\nYes.\n"
    m = metrics(count_structure([Sample.all_written(text)], set(cast), set(), None, cast))
    # HAMLET after ROMEO and JULIET after HAMLET are strangers, ROMEO after JULIET is not; OOPEY, no one's castmate,
    # and OOPEY after OOPEY are not pairs of the cast
    assert m["strangers"] == 2 / 3 and m["same_play"] == 1 / 3
    assert math.isnan(metrics(count_structure([Sample.all_written(text)], set(cast), set(), None))["strangers"])


def test_long_lines_and_run_on_headings_are_counted():
    text = "x\n\nROMEO:\n" + "a" * 81 + "\n" + "b" * 80 + "\nLADY CAPULET:will require you;\n\nNurse:\nAy.\nEnd:ing\nz"
    m = metrics(count_structure([Sample.all_written(text)], {"ROMEO"}, set(), None))
    assert m["long_lines"] == 1 / 4  # the 81 a's; the 80 b's, "Ay." and "End:ing" (not all capitals) are not
    assert m["headings"] == 2 and m["run_on_headings"] == 1 / 3  # ROMEO and Nurse; LADY CAPULET runs on


def test_a_speaker_the_prompt_names_is_real_to_its_sample():
    given, written = "KING HENRY:\nWhat news?\n\n", "PAGE:\nNone.\n\nKING HENRY:\nGo.\n"
    sample = Sample(given + written, [False] * len(given) + [True] * len(written))
    assert metrics(count_structure([sample], {"PAGE"}, set(), None))["real_names"] == 1.0
    other = Sample("PAGE:\nNone.\n\nKING HENRY:\nGo.\n", [False] * 13 + [True] * 16)
    assert metrics(count_structure([other], {"PAGE"}, set(), None))["real_names"] == 0.0


def test_ragged_ends_of_free_text_are_dropped():
    text = "ng.\n\nROMEO:\nHi.\nThe e"
    m = metrics(count_structure([Sample.all_written(text)], {"ROMEO"}, {"hi"}, HalfJudge()))
    assert m["chars"] == len("\nROMEO:\nHi.\n")  # not "ng." nor "The e"
    assert m["headings"] == 1 and m["real_names"] == 1.0 and m["empty_speeches"] == 0.0
    assert m["valid_words"] == 1.0
    assert math.isnan(m["same_speaker_twice"])  # no heading before it


def test_a_heading_with_nothing_known_after_it_is_not_called_empty():
    text = "ab\n\nROMEO:\n"  # stops right after the heading: its speech is unknown, not empty
    m = metrics(count_structure([Sample.all_written(text)], {"ROMEO"}, set(), None))
    assert m["headings"] == 1 and math.isnan(m["empty_speeches"])


def test_what_counts_as_a_heading():
    assert heading_name("KING RICHARD III:", "") == "KING RICHARD III"
    assert heading_name("First Citizen:", None) == "First Citizen"
    assert heading_name("Come:", "Stay a while,") is None  # a speech line ending in a colon
    assert heading_name("GLOUCESTER:", "he said so.") == "GLOUCESTER"  # all capitals: a heading anywhere
    assert heading_name("I pray you, sir:", "") is None  # lower-case words after the first
    assert heading_name("And thus: he spoke:", "") is None
    assert speakers("ROMEO:\nHi.\n\nNurse:\nAnon!\nCome:\n") == {"ROMEO", "Nurse"}


def test_a_row_misses_each_target_it_should():
    heldout = {"headings_per_1k": 8.0}
    joint = {"judge_nll": 1.7, "valid_words": 0.87}
    good = dict(real_names=0.95, empty_speeches=0.0, headings_per_1k=9.0, judge_nll=1.6, valid_words=0.87)
    assert meets(good, heldout, joint) == []
    bad = dict(real_names=0.8, empty_speeches=0.1, headings_per_1k=12.0, judge_nll=1.3, valid_words=0.8)
    assert meets(bad, heldout, joint) == ["names", "empty", "headings", "judge", "words"]
    salad = dict(good, judge_nll=2.0)  # less predictable than the joint fails too
    assert meets(salad, heldout, joint) == ["judge"]
    prompted = dict(good, headings_per_1k=20.0)  # a prompt's heading rate is held against the joint's
    assert meets(prompted, heldout, {**joint, "headings_per_1k": 18.0}, free=False) == []
    assert meets(prompted, heldout, {**joint, "headings_per_1k": 18.0}, free=True) == ["headings"]


def test_the_prompts_fill_one_canvas():
    for name, prompt in PROMPTS.items():
        canvas = template(prompt)
        assert len(canvas) == 256, name
        assert "_" in canvas
    assert template(PROMPTS["infill"]).count("_") == 128


def test_a_loop_is_a_long_span_repeated_verbatim():
    line = "My lord, the king is coming to the gate, and all his train with him.\n"  # 69 characters
    assert repeated_span("ROMEO:\n" + line + "JULIET " + line) == line[:64]
    assert repeated_span("ROMEO:\n" + line + "JULIET " + line[:63]) is None  # 63 repeated: no loop
    assert repeated_span("ab" * 40) == ("ab" * 32)  # a text that repeats itself overlaps its own copy
    assert repeated_span("short") is None


def suite_refusal(monkeypatch, capsys, flags: list[str]) -> str:
    """The last line the structure suite's command line prints when it refuses `flags` (exit status 2, argparse's)."""
    from evals import structure_suite

    monkeypatch.setattr("sys.argv", ["structure_suite", *flags])
    with pytest.raises(SystemExit) as stopped:
        structure_suite.main()
    assert stopped.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


def test_the_suite_refuses_a_device_it_cannot_use_in_one_line(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    refusal = suite_refusal(monkeypatch, capsys, ["--rules", "default", "--device", "cuda"])
    assert refusal.endswith("--device cuda: CUDA is not available here; use --device cpu (or auto)")


@pytest.mark.parametrize("threads", ["-1", "100000", "two"])
def test_a_benchmark_refuses_threads_it_cannot_run_in_one_line(monkeypatch, capsys, threads):
    # structure_suite --threads -1 ended in a traceback from torch.set_num_threads; 100,000 crashed torch
    refusal = suite_refusal(monkeypatch, capsys, ["--rules", "default", "--threads", threads])
    assert refusal.endswith(f"argument --threads: must be a whole number from 1 to {max_threads()}, got '{threads}'")


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        # these were tracebacks (a misleading canvas message for --samples 0), or loaded the model and did nothing
        (["--rules", "default", "--seeds", "-1"], "argument --seeds: must be a whole number >= 0, got '-1'"),
        (["--rules", "default", "--samples", "0"], "argument --samples: must be a whole number >= 1, got '0'"),
        (["--rules", "default", "--samples", "-3"], "argument --samples: must be a whole number >= 1, got '-3'"),
        ([], "nothing to do: name --rules to sample, or --report to print the table"),
    ],
)
def test_the_suite_refuses_flags_it_cannot_run_in_one_line(monkeypatch, capsys, flags, says):
    assert suite_refusal(monkeypatch, capsys, flags).endswith(says)


@pytest.mark.parametrize(("content", "says"), [(b"\x80\x81", "codec can't decode"), (b"[1]", "it holds list")])
def test_a_store_that_is_not_one_is_named(tmp_path, content, says):
    from evals.structure_suite import load_store

    (tmp_path / "store.json").write_bytes(content)
    with pytest.raises(ValueError, match=f"{tmp_path / 'store.json'} is not a structure suite store .*{says}"):
        load_store(tmp_path / "store.json")


def test_a_gzipped_store_round_trips_byte_for_byte_and_its_table_sits_beside_it(tmp_path):
    from evals.structure_suite import load_store, save_store, table_path

    store = {"f|default|free|0": dict(texts=["ROMEO:\nAy.\n"], written=[True] * 11, passes=1, seconds=0.1, seed=0)}
    save_store(tmp_path / "texts.json.gz", store)
    first = (tmp_path / "texts.json.gz").read_bytes()
    assert load_store(tmp_path / "texts.json.gz") == store
    save_store(tmp_path / "texts.json.gz", store)
    assert (tmp_path / "texts.json.gz").read_bytes() == first  # no timestamp in the gzip header
    assert table_path(tmp_path / "texts.json.gz") == table_path(tmp_path / "texts.json") == tmp_path / "texts.md"
    (tmp_path / "plain.json.gz").write_bytes(b"{}")  # not gzip
    with pytest.raises(ValueError, match="is not a structure suite store"):
        load_store(tmp_path / "plain.json.gz")


def test_the_committed_stores_hold_rows_of_texts():
    from evals.long_text import PROMPTS as LONG_PROMPTS
    from evals.structure_suite import COMMITTED_STORE, REPO_ROOT, load_store

    for path, prompts in (
        (COMMITTED_STORE, PROMPTS),
        (REPO_ROOT / "evals/results/long_text/texts.json.gz", LONG_PROMPTS),
    ):
        store = load_store(path)
        assert store, path
        for key, row in store.items():
            assert key.split("|")[-2] in prompts and len(row["texts"]) > 0
            assert all(len(text) == len(row["written"]) for text in row["texts"])
