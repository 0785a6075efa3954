"""What a run reports (training/tracking.py): TensorBoard and trackio, printed samples, phases and estimates."""

import json
import re
import sys
import types
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import training.card
from mdlm_hf import MDLM
from tests.training_helpers import TINY_ARGS, run
from training import export, train


def test_every_phase_says_what_it_is_doing(text_file, tmp_path, capsys):
    from training import evaluate

    run(text_file, tmp_path / "run", "--max-steps", "2", "--dtype", "auto")
    assert "timing fp32 vs bf16 for one step" in capsys.readouterr().out
    export.export_run(tmp_path / "run", tmp_path / "export", text_file)
    printed = capsys.readouterr().out
    for phase in (
        "export: measuring the validation NELBO of fp32 and bf16 weights...",
        "export: evaluating the",
        "evaluate: exact NLL over",
        "evaluate: its objective's own figures (a diffusion model's: masked-token accuracy by mask ratio)...",
        "evaluate: sampling 3 texts",
        f"export: writing {tmp_path / 'export'}...",
    ):
        assert phase in printed, phase
    evaluate.main(["--model", str(tmp_path / "export"), "--data", str(text_file), "--nll-chars", "16"])
    printed = capsys.readouterr().out
    assert "evaluate: loading" in printed and "evaluate: validation NELBO over" in printed


def test_an_estimate_is_printed_as_the_loop_starts(text_file, tmp_path, capsys):
    run(text_file, tmp_path / "run", "--max-steps", "8", "--stop-at-step", "6")
    printed = capsys.readouterr().out
    assert re.search(r"about [\d.]+ minutes for 6 steps at [\d,]+ tokens/s\n", printed), printed
    assert printed.index("starting at step 0") < printed.index("about ")
    # the default run on two CPU cores, timed at 1.2 s per step
    args, _ = train.parse_args(["--max-minutes", "20"])
    trainer = SimpleNamespace(args=args, processes=train.Processes(torch.device("cpu")))
    line = train.Trainer.estimate(trainer, 1.2, 1500)
    assert line == "about 30 minutes for 1,500 steps at 6,827 tokens/s (--max-minutes 20 stops it sooner)"


def tensorboard_events(log_dir: Path):
    """Every event file of a TensorBoard log dir, read the way TensorBoard does (a resume's purge applied)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(log_dir))
    events.Reload()
    return events


def test_tracker_tensorboard_logs_the_metrics_and_samples_and_a_resume_continues_at_its_step(text_file, tmp_path):
    out = tmp_path / "run"
    run(text_file, out, "--max-steps", "12", "--stop-at-step", "6", "--tracker", "tensorboard")
    # a run killed after its checkpoint had logged further; the resume trains step 8 again
    from torch.utils.tensorboard import SummaryWriter

    with SummaryWriter(str(out / "tensorboard")) as stray:
        stray.add_scalar("train/loss", 99.0, 8)
    run(text_file, out, "--max-steps", "12", "--resume")  # the run's own tracker, kept from its checkpoint
    assert [p.name for p in out.iterdir() if p.is_dir()] == ["tensorboard"]
    events = tensorboard_events(out / "tensorboard")
    scalars = set(events.Tags()["scalars"])
    assert {"train/loss", "train/lr", "train/tokens_per_s", "train/tokens_seen"} <= scalars
    assert {"val/nelbo", "val/nelbo_ema", "val/bpc", "val/bpc_ema"} <= scalars
    assert [e.step for e in events.Scalars("train/loss")] == [2, 4, 6, 8, 10, 12]
    assert 99.0 not in [e.value for e in events.Scalars("train/loss")]
    history = json.loads((out / "history.json").read_text())
    nelbo = events.Scalars("val/nelbo")
    assert [e.step for e in nelbo] == [h["step"] for h in history["val"]] == [5, 10, 12]
    assert [e.value for e in nelbo] == pytest.approx([h["nelbo"] for h in history["val"]], rel=1e-6)
    bpc = events.Scalars("val/bpc")[0].value
    assert bpc == pytest.approx(history["val"][0]["nelbo"] / np.log(2), rel=1e-5)
    samples = events.Tensors("samples/text_summary")
    assert [s.step for s in samples] == [5, 10, 12] and b"--- sample 1 ---" in samples[0].tensor_proto.string_val[0]


class FakeTrackio:
    """Stands in for the trackio package (it may not install offline): records init, log and finish."""

    def __init__(self):
        self.calls = []

    def module(self):
        fake = types.ModuleType("trackio")
        fake.init = lambda **kwargs: self.calls.append(("init", kwargs))
        fake.log = lambda metrics, step=None: self.calls.append(("log", step, metrics))
        fake.finish = lambda: self.calls.append(("finish",))
        fake.Markdown = lambda text: ("Markdown", text)  # trackio's text type (since 0.17)
        return fake

    def logged(self, name):
        return [(call[1], call[2][name]) for call in self.calls if call[0] == "log" and name in call[2]]


def test_tracker_trackio_records_init_log_and_finish_and_may_change_on_resume(text_file, tmp_path, monkeypatch):
    trackio = FakeTrackio()
    monkeypatch.setitem(sys.modules, "trackio", trackio.module())
    out = tmp_path / "mine"
    run(text_file, out, "--max-steps", "8", "--stop-at-step", "6", "--tracker", "trackio")
    kind, init = trackio.calls[0]
    assert kind == "init" and (init["project"], init["name"], init["resume"]) == ("mdlm_hf", "mine", "never")
    assert init["config"]["tracker"] == "trackio" and init["config"]["batch_size"] == 4
    assert trackio.calls[-1] == ("finish",) and [c[0] for c in trackio.calls].count("init") == 1
    assert [step for step, _ in trackio.logged("train/loss")] == [2, 4, 6]
    assert [step for step, _ in trackio.logged("val/nelbo")] == [5]
    ((step, text),) = trackio.logged("samples")
    assert step == 5 and text[0] == "Markdown" and text[1].startswith("```\n--- sample 0 ---\n")
    trackio.calls.clear()
    run(text_file, out, "--max-steps", "8", "--resume")  # the run's own tracker continues the same trackio run
    assert trackio.calls[0][1]["resume"] == "allow" and trackio.logged("val/nelbo")[0][0] == 8
    trackio.calls.clear()
    run(text_file, out, "--max-steps", "10", "--resume", "--tracker", "none")  # a resume may turn it off
    assert trackio.calls == []


@pytest.mark.parametrize(
    "tracker, modules", [("tensorboard", ["tensorboard", "torch.utils.tensorboard"]), ("trackio", ["trackio"])]
)
def test_tracker_without_its_package_is_one_line_before_any_work(
    text_file, tmp_path, monkeypatch, capsys, tracker, modules
):
    for module in modules:
        monkeypatch.setitem(sys.modules, module, None)  # import fails as if it were not installed
    with pytest.raises(SystemExit) as stopped:
        train.cli(["--data", str(text_file), "--out-dir", str(tmp_path / "run"), *TINY_ARGS, "--tracker", tracker])
    assert stopped.value.code != 0 and not (tmp_path / "run").exists()
    last_line = capsys.readouterr().err.strip().splitlines()[-1]
    assert re.search(f"error: --tracker {tracker} needs the {modules[0].split('.')[0]} package", last_line)
    assert last_line.endswith(f"pip install {tracker}, or use --tracker none")


FIRST_SAMPLE = r"--- sample 0 ---\n(.*?)\n--- sample 1 ---\n"


def test_samples_are_printed_at_each_evaluation_without_moving_the_training(text_file, tmp_path, capsys):
    with_samples = run(text_file, tmp_path / "a", "--max-steps", "6", "--eval-sample-chars", "20")
    printed = capsys.readouterr().out
    for step in (5, 6):
        assert re.search(
            rf"samples at step {step} \((raw|ema) weights, 32 steps, seed 0\):\n--- sample 0 ---\n", printed
        )
    assert printed.count("--- sample 1 ---\n") == 2
    texts = re.findall(FIRST_SAMPLE, printed, re.DOTALL)  # samples may hold line breaks
    assert len(texts) == 2 and all(len(text) == 20 for text in texts)
    without = run(text_file, tmp_path / "b", "--max-steps", "6", "--eval-sample-chars", "0")
    assert "samples at step" not in capsys.readouterr().out
    for name, weight in with_samples["model"].state_dict().items():  # the sampler draws from its own seed
        assert torch.equal(weight, without["model"].state_dict()[name]), name
    run(text_file, tmp_path / "c", "--max-steps", "2", "--eval-interval", "2")  # the default, clipped to a block
    assert len(re.findall(FIRST_SAMPLE, capsys.readouterr().out, re.DOTALL)[0]) == 32


def test_redraw_samples_rewrites_only_the_samples_of_an_export(text_file, tmp_path, capsys):
    from lab import redraw_samples

    export_dir = tmp_path / "export"
    run(text_file, tmp_path / "run", "--max-steps", "4", "--export-dir", str(export_dir))
    card_path, metrics_path = export_dir / "README.md", export_dir / "metrics.json"
    metrics = json.loads(metrics_path.read_text())
    old = {**metrics, "samples": ["an old sample"] * 3, "sampling": {"length": 32, "order": "confidence"}}
    metrics_path.write_text(json.dumps(old, indent=2))
    card_path.write_text(redraw_samples.SECTION.sub(training.card.samples_section(old) + "\n", card_path.read_text()))
    before, after_section = card_path.read_text().split("## Samples")[0], card_path.read_text().split("## Limit")[1]
    redraw_samples.main([str(export_dir)])
    card, redrawn = card_path.read_text(), json.loads(metrics_path.read_text())
    assert redrawn == {**metrics, **redraw_samples.draw_samples(MDLM.from_pretrained(export_dir), 3)}
    assert "an old sample" not in card and all(f"```\n{t}\n```" in card for t in redrawn["samples"])
    assert card.startswith(before) and card.endswith(after_section)  # nothing else of the card changed
    assert "order word_streams" in card and "min_p 0.1" in card
    with pytest.raises(SystemExit, match="is not an export"):
        redraw_samples.main([str(tmp_path)])
    # [1, 2] was an AttributeError traceback; bad JSON a line that named no file
    for content, says in (("[1, 2]", "is not an export's metrics"), ("{bad", "is not readable JSON")):
        metrics_path.write_text(content)
        with pytest.raises(SystemExit) as stopped:
            redraw_samples.main([str(export_dir)])
        assert str(stopped.value).startswith(f"redraw_samples: {metrics_path} {says}")
    assert card_path.read_text() == card  # refused: the card is as it was
