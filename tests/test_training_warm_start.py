"""Warm starts: a run from --init-from continues its model's curve, and the card and metrics.json keep the lineage."""

import json

import pytest

from tests.training_helpers import TINY_ARGS
from training import export, train
from training.card import lineage_total, stage_line
from training.checkpoints import recorded_stages

SCHEDULE = ["--eval-interval", "5", "--lr", "3e-3", "--min-lr", "3e-4"]


def first_and_last_val(run_dir) -> tuple[float, float]:
    rows = json.loads((run_dir / "history.json").read_text())["val"]
    return rows[0]["nelbo"], rows[-1]["nelbo"]


@pytest.fixture(scope="module")
def parent(tmp_path_factory):
    """A tiny model trained 60 steps and exported, with its curve."""
    from tests.conftest import TINY_TEXT

    root = tmp_path_factory.mktemp("warm")
    data = root / "text.txt"
    data.write_text(TINY_TEXT * 3)
    flags = ["--data", str(data), *TINY_ARGS, *SCHEDULE]
    train.main([*flags, "--out-dir", str(root / "parent"), "--max-steps", "60"])
    export.main(["--run-dir", str(root / "parent"), "--data", str(data), "--export-dir", str(root / "parent-export")])
    return root, data


def shape_free(args: list[str]) -> list[str]:
    """TINY_ARGS without the model's shape: a warm start takes its model's."""
    kept, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif arg in ("--n-layer", "--n-head", "--n-embd", "--block-size"):
            skip = True
        else:
            kept.append(arg)
    return kept


def test_a_warm_start_continues_its_models_curve_instead_of_restarting_it(parent):
    root, data = parent
    scratch_first, parent_last = first_and_last_val(root / "parent")  # its first evaluation is a fresh model's
    warm_flags = ["--data", str(data), *shape_free(TINY_ARGS), *SCHEDULE, "--init-from", str(root / "parent-export")]
    train.main([*warm_flags, "--out-dir", str(root / "warm"), "--max-steps", "10"])
    warm_first, warm_last = first_and_last_val(root / "warm")
    # the first evaluation, 5 steps in, is where the model left off (its gap to a fresh model's is 90 % kept)
    assert scratch_first - parent_last > 0.3, "the parent learned too little for the test to tell"
    assert warm_first < parent_last + 0.1 * (scratch_first - parent_last), (scratch_first, parent_last, warm_first)
    assert warm_last < parent_last + 0.1 * (scratch_first - parent_last), (scratch_first, parent_last, warm_last)


def test_the_lineage_is_kept_in_metrics_json_and_the_card_across_generations(parent):
    root, data = parent
    parent_stages = json.loads((root / "parent-export" / "metrics.json").read_text())["training"]["stages"]
    assert parent_stages == [{"steps": 60, "characters": 60 * 4 * 32, "text": "text", "init_from": None}]
    previous = root / "parent-export"
    for generation in (1, 2):  # a child, then a grandchild
        run, out = root / f"gen{generation}", root / f"gen{generation}-export"
        flags = ["--data", str(data), *shape_free(TINY_ARGS), *SCHEDULE, "--init-from", str(previous)]
        train.main([*flags, "--out-dir", str(run), "--max-steps", "4"])
        if generation == 2:  # a resume keeps the lineage it started with
            train.main([*flags, "--out-dir", str(run), "--max-steps", "6", "--resume"])
        export.main(["--run-dir", str(run), "--data", str(data), "--export-dir", str(out)])
        previous = out
    stages = json.loads((previous / "metrics.json").read_text())["training"]["stages"]
    assert [stage["steps"] for stage in stages] == [60, 4, 6]
    assert [stage["init_from"] for stage in stages] == [None, str(root / "parent-export"), str(root / "gen1-export")]
    card = (previous / "README.md").read_text()
    assert "- training stages, oldest first" in card
    assert f"  3. 6 steps, 768 characters of text, from {root / 'gen1-export'}" in card
    assert "- in all: 70 steps, 8,960 characters" in card


def test_a_model_without_a_recorded_lineage_is_one_stage_of_its_counters(tmp_path):
    assert recorded_stages(None, "someone/model")[0]["text"] == "not recorded"
    (tmp_path / "metrics.json").write_text(json.dumps({"training": {"step": 8000, "tokens_seen": 524288000}}))
    (stage,) = recorded_stages(tmp_path / "metrics.json", "pretrained/x")
    assert stage_line(stage) == "8,000 steps, 524,288,000 characters, text not recorded"
    assert lineage_total([stage]) is None and lineage_total([stage, stage]) == "16,000 steps, 1,048,576,000 characters"


def test_the_learning_rate_warms_up_linearly_then_falls_by_a_cosine_to_its_floor():
    # nothing tested the schedule a warm start's short warm-up runs through
    import math

    from training.flags import RunSettings
    from training.optimizers import learning_rate

    args = RunSettings(lr=2e-3, min_lr=2e-4, warmup_steps=100, max_steps=1100)
    assert learning_rate(0, args) == pytest.approx(2e-5) and learning_rate(49, args) == pytest.approx(1e-3)
    assert learning_rate(99, args) == pytest.approx(2e-3) == learning_rate(100, args)  # the peak, then the decay
    assert learning_rate(600, args) == pytest.approx(2e-4 + 0.5 * (2e-3 - 2e-4))  # half way: the cosine's middle
    assert learning_rate(1100, args) == pytest.approx(2e-4) == learning_rate(5000, args)  # the floor, and past it
    decay = [learning_rate(step, args) for step in range(100, 1101)]
    assert all(a >= b for a, b in zip(decay, decay[1:], strict=False))
    assert learning_rate(350, args) == pytest.approx(2e-4 + 0.5 * (1 + math.cos(math.pi / 4)) * 1.8e-3)


def test_an_export_over_the_model_the_run_starts_from_is_refused_and_leaves_it_as_it_was(parent, tmp_path, capsys):
    # --init-from X --export-dir X replaced the starting model without a word
    root, data = parent
    before = {p.name: p.read_bytes() for p in (root / "parent-export").iterdir() if p.is_file()}
    same = root / "parent-export" / ".." / "parent-export"  # the same folder, spelt otherwise
    flags = ["--data", str(data), *shape_free(TINY_ARGS), *SCHEDULE, "--init-from", str(root / "parent-export")]
    with pytest.raises(SystemExit):
        train.main([*flags, "--out-dir", str(tmp_path / "run"), "--export-dir", str(same)])
    assert "is the --init-from model: the export would replace the model the run starts from" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in (root / "parent-export").iterdir() if p.is_file()} == before
    assert not (tmp_path / "run").exists()
