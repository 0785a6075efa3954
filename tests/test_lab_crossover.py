"""The crossover table: diffusion against its twin by characters trained, from saved models' lineage or a rehearsal."""

import json

import pytest

from lab import crossover
from mdlm_hf import MDLM
from mdlm_hf.tokenizer import CharTokenizer


def shakespeare_like(lines: int) -> str:
    return "".join(f"ROMEO:\nThis is line {i} of a play, for a test.\n\n" for i in range(lines))


@pytest.fixture
def files(tmp_path):
    (tmp_path / "data.txt").write_text(shakespeare_like(300))
    (tmp_path / "heldout.txt").write_text(shakespeare_like(20).replace("ROMEO", "JULIET"))
    return tmp_path


def test_the_unique_text_can_read_every_scored_character(files):
    text = crossover.unique_text(files / "data.txt", 100, "JULIET ZQ")
    assert text.startswith("ROMEO:\nThis is line 0") and text.endswith("\nIJLQUZ\n")
    assert crossover.unique_text(files / "data.txt", 100, "ROMEO") == text[:100]


def test_saved_models_are_scored_with_their_lineage(files, capsys):
    vocab = CharTokenizer.from_text(shakespeare_like(300) + "JULIET").vocab
    for name, causal in (("diffusion", False), ("twin", True)):
        model = MDLM(vocab, n_layer=1, n_head=2, n_embd=32, block_size=32, causal=causal)
        model.save_pretrained(files / name)
    stages = [{"steps": 10, "characters": 1000, "text": "a"}, {"steps": 5, "characters": 500, "text": "b"}]
    (files / "diffusion" / "metrics.json").write_text(json.dumps({"training": {"stages": stages}}))
    (files / "twin" / "metrics.json").write_text(json.dumps({"training": {"tokens_seen": 700}}))
    argv = ["--data", str(files / "data.txt"), "--heldout", str(files / "heldout.txt"), "--out", str(files / "out")]
    rows = crossover.main([*argv, "--nll-chars", "64", "--models", str(files / "diffusion"), str(files / "twin")])
    assert rows[0]["characters"] == 1500 and rows[0]["text"] == "a + b" and rows[1]["characters"] == 700
    assert {"val_elbo", "val_exact_nll", "heldout_elbo"} <= set(rows[0]) and {"val_nll", "heldout_nll"} <= set(rows[1])
    assert rows[0]["val_exact_nll"] > 0 and rows[1]["val_nll"] > 0
    printed = capsys.readouterr().out
    assert "| 1,500 | - | " in printed and json.loads((files / "out" / "crossover.json").read_text()) == rows


def test_a_folder_without_its_training_is_one_line(files, capsys):
    MDLM("abc", n_layer=1, n_head=2, n_embd=32, block_size=32).save_pretrained(files / "bare")
    argv = ["--data", str(files / "data.txt"), "--heldout", str(files / "heldout.txt"), "--out", str(files / "o")]
    with pytest.raises(SystemExit, match="has no readable metrics.json"):
        crossover.main([*argv, "--models", str(files / "bare")])


@pytest.mark.slow
def test_the_rehearsal_scores_both_objectives_at_each_epoch_count(files, monkeypatch):
    small = ["--n-layer", "1", "--n-head", "2", "--n-embd", "32", "--block-size", "128"]
    monkeypatch.setattr(crossover, "SHAPE", small)
    argv = ["--data", str(files / "data.txt"), "--heldout", str(files / "heldout.txt"), "--out", str(files / "out")]
    argv += ["--unique-chars", "4000", "--epochs", "1", "2", "--nll-chars", "128", "--threads", "1"]
    rows = crossover.main(argv)
    assert [(row["model"], row["epochs"]) for row in rows] == [("diffusion", 1), ("diffusion", 2), ("ar", 1), ("ar", 2)]
    assert rows[1]["characters"] == 2 * rows[0]["characters"]
    assert rows[2]["val_nll"] > rows[3]["val_nll"]  # the twin learned between the two counts: the weights moved on
