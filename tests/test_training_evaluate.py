"""The evaluation command (training/evaluate.py): --out and --device refused first, and a full disk."""

import pytest
import torch

from mdlm_hf import MDLM, CharTokenizer


@pytest.mark.parametrize(
    ("out", "says"),
    [("", "--out is empty: give a directory"), ("file", "is not a directory"), ("/proc/x", "is not a directory")],
)
def test_evaluate_refuses_an_out_it_cannot_write_before_the_evaluation(tmp_path, capsys, out, says):
    # "" wrote nothing and said nothing; an existing file failed only after the whole evaluation
    from training import evaluate

    (tmp_path / "file").write_text("taken")
    with pytest.raises(SystemExit) as stopped:
        evaluate.main(["--model", str(tmp_path / "none"), "--data", "x.txt", "--out", out and str(tmp_path / out)])
    # /proc/x: os.access said /proc was writable, and the evaluation failed after all its work (6 min 40 s)
    assert stopped.value.code == 2
    assert says in capsys.readouterr().err.strip().splitlines()[-1]
    with pytest.raises(ValueError, match="does not exist"):  # a run that fails leaves no empty --out behind
        evaluate.main(["--model", str(tmp_path / "none"), "--data", "x.txt", "--out", str(tmp_path / "new" / "out")])
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize(
    ("device", "says"), [("gpu", "is not a device"), ("cuda:7", "CUDA is not available here"), ("xla", "runs on")]
)
def test_evaluate_refuses_a_device_it_cannot_use_in_one_line(tmp_path, capsys, device, says, monkeypatch):
    from training import evaluate

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit) as stopped:
        evaluate.main(["--model", str(tmp_path / "none"), "--data", str(tmp_path / "none.txt"), "--device", device])
    assert stopped.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert ": error: --device" in error and says in error


@pytest.fixture
def full_disk_evaluation(tmp_path, monkeypatch, tiny_text):
    """The evaluate command's flags for a tiny model and text, on a disk where every write fails."""
    import errno

    from training import evaluate

    torch.manual_seed(0)
    MDLM(CharTokenizer.from_text(tiny_text).vocab, n_layer=1, n_head=2, n_embd=16, block_size=32).save_pretrained(
        tmp_path / "model"
    )
    (tmp_path / "text.txt").write_text(tiny_text)

    def full_disk(path, payload):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(evaluate, "atomic_write_bytes", full_disk)
    flags = ["--model", str(tmp_path / "model"), "--data", str(tmp_path / "text.txt"), "--nll-chars", "8"]
    return [*flags, "--num-samples", "1", "--out", str(tmp_path / "out")]


def test_evaluate_on_a_full_disk_leaves_no_empty_out_and_names_the_file(tmp_path, full_disk_evaluation):
    # a full disk left an empty --out and a message that named no file
    from training import evaluate

    with pytest.raises(SystemExit, match=r"could not write .*metrics\.json \(No space left on device\)"):
        evaluate.main(full_disk_evaluation)
    assert not (tmp_path / "out").exists()


def test_evaluate_on_a_full_disk_keeps_an_earlier_report(tmp_path, full_disk_evaluation):
    # a full disk deleted the metrics.json an earlier evaluation had left in --out
    from training import evaluate

    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "metrics.json").write_text('{"earlier": true}')
    with pytest.raises(SystemExit, match=r"the files there before were left as they were"):
        evaluate.main(full_disk_evaluation)
    assert (tmp_path / "out" / "metrics.json").read_text() == '{"earlier": true}'
