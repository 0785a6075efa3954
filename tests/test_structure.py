"""The structure suite's metrics on small hand-written plays with known counts, so that they cannot drift."""

import math

import pytest
import torch

from evals.heading_odds import (
    after_headings,
    blank_probabilities,
    headings_after_headings,
    name_probabilities,
    row_log_probs,
)
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
from mdlm_hf import MDLM, CharTokenizer
from mdlm_hf.devices import max_threads
from tests.conftest import TINY_TEXT


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


def test_the_character_after_each_heading_is_found():
    text = "x\n\nROMEO:\nHi.\n\nJULIET:\n\nNurse:\nAy.\n\nPAGE:\n"
    assert [text[:p].splitlines()[-1] for p in after_headings(text)] == ["ROMEO:", "JULIET:", "Nurse:"]
    assert [text[p] for p in after_headings(text)] == ["H", "\n", "A"]  # PAGE has nothing after its line break


@pytest.mark.parametrize("causal", [False, True])
def test_blank_odds_read_the_text_before_the_position_only(causal):
    torch.manual_seed(0)
    model = MDLM(CharTokenizer.from_text(TINY_TEXT).vocab, n_layer=2, n_head=2, n_embd=32, block_size=64, causal=causal)
    text, other = "to be or\nnot that is\nthe question", "to be or\nnot tis nobler\n\nwhether,"
    position = 10  # the same 10 characters before it on canvases of one length; what follows differs
    odds = blank_probabilities(model.eval(), [(text, position), (other, position)])
    assert odds[0] == pytest.approx(odds[1])
    newline, ids = model.tokenizer.encode("\n")[0], model.tokenizer.encode(text[:position])
    with torch.no_grad():
        if causal:  # the twin: its logits at the position before
            expected = model(torch.tensor([ids])).softmax(-1)[0, position - 1, newline]
        else:  # the diffusion model: everything from the position on masked
            canvas = ids + [model.mask_id] * (len(text) - position)
            expected = model(torch.tensor([canvas])).softmax(-1)[0, position, newline]
    assert odds[0] == pytest.approx(expected.item(), rel=1e-4)


def test_each_heading_is_paired_with_the_heading_above_it():
    text = "x\n\nROMEO:\nHi.\n\nJULIET:\n\nNurse:\nAy.\n\nNurse:\nNo.\n"
    pairs = headings_after_headings(text)
    assert [(previous, name) for _, _, previous, name in pairs] == [
        ("ROMEO", "JULIET"),
        ("JULIET", "Nurse"),
        ("Nurse", "Nurse"),
    ]
    assert [text[start : start + len(name)] for _, start, _, name in pairs] == ["JULIET", "Nurse", "Nurse"]
    assert [text[above : above + len(previous)] for above, _, previous, _ in pairs] == ["ROMEO", "JULIET", "Nurse"]


def test_real_windows_hold_the_heading_and_the_one_above_it():
    # a heading near the text's start once gave a window starting before the text: an empty string, a crash
    from evals.heading_odds import real_speaker_contexts as real_contexts

    play = "".join(f"{('JULIET', 'ROMEO')[i % 2]}:\n{'Ay, ' * (i % 7 + 1)}me.\n\n" for i in range(400))
    contexts = real_contexts(play, 300, seed=0)
    assert len(contexts) == 300
    for window, before, previous in contexts:
        assert len(window) == 256 and 40 <= before <= 220
        line = window[before:].split("\n")[0]
        assert window[before - 2 : before] == "\n\n" and heading_name(line, "") not in (None, previous)
        assert f"\n{previous}:\n" in "\n" + window[:before]
    assert real_contexts(play[:300], 5, seed=0) == []  # no heading with 220 characters before it and a window after


@pytest.mark.parametrize("causal", [False, True])
def test_name_odds_spell_the_name_left_to_right_from_the_text_before(causal, monkeypatch):
    torch.manual_seed(0)
    vocab = CharTokenizer.from_text(TINY_TEXT + "ROME:").vocab
    model = MDLM(vocab, n_layer=2, n_head=2, n_embd=32, block_size=64, causal=causal).eval()
    text, other = "to be or\n\nROMEO:\nnot that is", "to be or\n\nnot tis nobler\nsir"
    start = 10  # the same 10 characters before it on canvases of one length; what follows differs
    odds = name_probabilities(model, [(text, start, "ROMEO"), (other, start, "ROMEO")])
    assert odds[0] == pytest.approx(odds[1], rel=1e-5)
    expected, spelt = 1.0, model.tokenizer.encode("ROMEO:")
    with torch.no_grad():
        for k, char in enumerate(spelt):  # each character with the ones before it known and nothing after
            known = model.tokenizer.encode(text[:start]) + spelt[:k]
            if causal:
                expected *= model(torch.tensor([known])).softmax(-1)[0, -1, char].item()
            else:
                canvas = known + [model.mask_id] * (len(text) - len(known))
                expected *= model(torch.tensor([canvas])).softmax(-1)[0, len(known), char].item()
    assert odds[0] == pytest.approx(expected, rel=1e-4)
    from evals import heading_odds

    monkeypatch.setattr(heading_odds, "BATCH", 1)  # every spelt character in a batch of its own: the same odds
    assert name_probabilities(model, [(text, start, "ROMEO"), (other, start, "ROMEO")]) == pytest.approx(odds, rel=1e-5)


def test_each_row_is_read_on_its_own_canvas_whatever_else_is_batched():
    # rows of several lengths were padded with masks to the longest: a longer canvas than the text's
    torch.manual_seed(0)
    model = MDLM(CharTokenizer.from_text(TINY_TEXT).vocab, n_layer=2, n_head=2, n_embd=32, block_size=64).eval()
    rows = [[1, 2, model.mask_id], [3] + [model.mask_id] * 7, [2, model.mask_id]]
    with torch.no_grad():
        together = dict(row_log_probs(model, rows))
        for i, row in enumerate(rows):
            alone = model(torch.tensor([row])).log_softmax(dim=-1)[0]
            assert together[i].shape == alone.shape and torch.allclose(together[i], alone, atol=1e-5)


@pytest.mark.parametrize("question", ["blank", "same-speaker"])
def test_an_odds_question_writes_its_table_from_real_and_sampled_texts(question, tmp_path, monkeypatch, capsys):
    from evals import heading_odds
    from evals.sampling_quality import model_fingerprint

    odds = heading_odds.ODDS[question]
    torch.manual_seed(0)
    vocab = CharTokenizer.from_text(TINY_TEXT + "ROMEJULIT:.\n").vocab
    model = MDLM(vocab, n_layer=1, n_head=2, n_embd=16, block_size=256).eval()
    play = "".join(f"{('JULIET', 'ROMEO')[i % 2]}:\nto be or not.\n\n" for i in range(40))  # headings 30 apart
    sampled = play[:120]
    store = {f"{model_fingerprint(model)}|default|free|0": dict(texts=[sampled], written=[True] * len(sampled))}
    inputs = (store, model, None, {"training split": play, "too short": play[:100]})
    monkeypatch.setattr(heading_odds, "load_odds_inputs", lambda args: inputs)
    monkeypatch.setattr(heading_odds, "OUT_DIR", tmp_path)
    odds.run([], "doc")
    table = (tmp_path / f"{odds.stem}.md").read_text().splitlines()
    assert table[2:4] == ["| text | headings | drawn | model | twin |", "|---|---|---|---|---|"]
    texts = [line.split(" | ")[0] for line in table[4:]]
    assert texts == ["| training split", "| default, free"]  # a text with no context gives no row
    for line in table[4:]:
        _, count, drawn, mean, twin = line.strip("| ").split(" | ")
        assert int(count) > 0 and float(drawn) == 0.0 and 0 <= float(mean) < 1 and twin == "-"
    assert capsys.readouterr().out.splitlines() == table[4:]


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


@pytest.mark.parametrize("question", ["blank", "same-speaker"])
def test_an_odds_question_refuses_bad_flags_before_the_model(question, tmp_path, capsys, monkeypatch):
    # a misspelt rule wrote a table of real text only over the committed one; a bad store failed after minutes
    from evals import heading_odds

    monkeypatch.setattr(heading_odds, "load_model", lambda *a, **k: pytest.fail("the model was loaded"))
    with pytest.raises(SystemExit) as stopped:
        heading_odds.main([question, "--rule", "defualt"])
    assert stopped.value.code == 2 and "argument --rule: invalid choice: 'defualt'" in capsys.readouterr().err
    (tmp_path / "store.json").write_bytes(b"\x80")
    with pytest.raises(ValueError, match="is not a structure suite store"):
        heading_odds.main([question, "--store", str(tmp_path / "store.json")])
