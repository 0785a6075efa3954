"""The training text (training/corpus.py): memory-mapped token files, streamed in chunks, several files."""

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

import training.trainer
from mdlm_hf import CharTokenizer
from tests.conftest import REPO_ROOT
from tests.training_helpers import TINY_ARGS, run
from training import export, train
from training.corpus import read_text, split_text


def old_get_batch(text, batch_size, block_size, generator):
    """get_batch before the token files: windows of the whole training split held as one int64 tensor."""
    train_text, _ = split_text(text)
    data = torch.tensor(CharTokenizer.from_text(text).encode(train_text), dtype=torch.long)
    starts = torch.randint(0, data.numel() - block_size + 1, (batch_size,), generator=generator)
    return torch.stack([data[s : s + block_size] for s in starts.tolist()])


def test_batches_come_from_memory_mapped_token_files_with_the_same_windows_as_before(text_file, tmp_path):
    from training import corpus

    text = text_file.read_text()
    tokens = corpus.tokenize([text_file], tmp_path / "run", corpus.scan_text([text_file]))
    assert isinstance(tokens.train, np.memmap) and tokens.train.dtype == np.uint16
    assert (tmp_path / "run" / "train.bin").stat().st_size == 2 * len(split_text(text)[0])  # nanoGPT's train.bin
    for seed in range(3):
        new, old = torch.Generator().manual_seed(seed), torch.Generator().manual_seed(seed)
        for _ in range(3):
            batch = training.trainer.get_batch(tokens.train, 8, 32, new)
            assert batch.dtype == torch.long and torch.equal(batch, old_get_batch(text, 8, 32, old))
        assert torch.equal(new.get_state(), old.get_state())
    summary = run(text_file, tmp_path / "trained", "--max-steps", "2")
    assert summary["finished"] and {"train.bin", "val.bin", "tokens.json"} <= set(os.listdir(tmp_path / "trained"))


def test_token_files_are_streamed_in_chunks_and_read_newlines_as_before(tmp_path, monkeypatch, tiny_text):
    from training import corpus

    first, second = tmp_path / "a.txt", tmp_path / "b.txt"
    first.write_bytes(tiny_text.replace("\n", "\r\n").encode() + "é\r".encode())  # Windows line ends, a lone \r
    second.write_text(tiny_text[:500])
    text = corpus.read_texts([first, second])
    assert text == read_text(first) + "\n" + read_text(second) and "\r" not in text
    monkeypatch.setattr(corpus, "CHUNK_CHARS", 7)  # chunk edges inside \r\n pairs and at the split
    facts = corpus.scan_text([first, second])
    assert (facts.chars, facts.characters) == (len(text), CharTokenizer.from_text(text).vocab)
    tokens = corpus.tokenize([first, second], tmp_path / "run", facts)
    train_text, val_text = split_text(text)
    tokenizer = CharTokenizer.from_text(text)
    assert tokens.train.tolist() == tokenizer.encode(train_text) and tokens.val.tolist() == tokenizer.encode(val_text)
    # written once: a second call with the same text and vocabulary reuses the files
    written = (tmp_path / "run" / "train.bin").stat().st_mtime_ns
    time.sleep(0.01)
    corpus.tokenize([first, second], tmp_path / "run", corpus.scan_text([first, second]))
    assert (tmp_path / "run" / "train.bin").stat().st_mtime_ns == written
    # a damaged file of the right size (an IndexError on resume) is found by its checksum and written anew
    damaged = bytearray((tmp_path / "run" / "train.bin").read_bytes())
    damaged[:8] = b"\xff" * 8
    (tmp_path / "run" / "train.bin").write_bytes(bytes(damaged))
    tokens = corpus.tokenize([first, second], tmp_path / "run", corpus.scan_text([first, second]))
    assert tokens.train.tolist() == tokenizer.encode(train_text)
    written = (tmp_path / "run" / "train.bin").stat().st_mtime_ns
    # another text is tokenized again, and a vocabulary that lacks its characters is refused
    with pytest.raises(ValueError, match="1 character\\(s\\) outside the run's vocabulary: 'é'"):
        corpus.tokenize([first], tmp_path / "run", corpus.scan_text([first]), vocab=tokenizer.vocab.replace("é", ""))
    assert corpus.tokenize([second], tmp_path / "run", corpus.scan_text([second])).val.tolist() == CharTokenizer(
        CharTokenizer.from_text(tiny_text[:500]).vocab
    ).encode(split_text(tiny_text[:500])[1])


def test_data_may_name_several_files_for_train_and_export(tmp_path, tiny_text):
    parts = [tmp_path / f"part{i}.txt" for i in range(3)]
    for i, part in enumerate(parts):
        part.write_text(tiny_text.replace("to be", f"part {i}"))
    out = tmp_path / "run"
    train.main(["--data", *map(str, parts), "--out-dir", str(out), *TINY_ARGS, "--max-steps", "2"])
    joined = "\n".join(p.read_text() for p in parts)
    vocab = torch.load(out / "ckpt.pt", weights_only=True)["model_config"]["vocab"]
    train_ids = np.fromfile(out / "train.bin", dtype=np.uint16).tolist()
    assert train_ids == CharTokenizer(vocab).encode(split_text(joined)[0])
    # resumed with the files in another order: another text (asked for: --new-data), with the run's vocabulary
    resumed = train.main(
        ["--data", *map(str, parts[::-1]), "--out-dir", str(out), "--resume", "--max-steps", "3", "--new-data"]
    )
    assert resumed["step"] == 3
    reordered = "\n".join(p.read_text() for p in parts[::-1])
    assert np.fromfile(out / "val.bin", dtype=np.uint16).tolist() == CharTokenizer(vocab).encode(
        split_text(reordered)[1]
    )
    command = ["--run-dir", str(out), "--export-dir", str(tmp_path / "export"), "--data", *map(str, parts)]
    export.main([*command, "--weights-dtype", "float32"])
    metrics = json.loads((tmp_path / "export" / "metrics.json").read_text())
    assert metrics["val_chars"] == len(split_text(joined)[1])


def test_tokenizing_onto_a_full_disk_is_one_line(text_file, tmp_path, monkeypatch):
    def disk_full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as stopped:
        train.cli(["--data", str(text_file), "--out-dir", str(out), *TINY_ARGS, "--max-steps", "2"])
    message = str(stopped.value)
    assert message.startswith(f"error: could not write the token files in {out} (No space left on device)")
    assert "free some space" in message and "\n" not in message
    assert sorted(p.name for p in out.iterdir()) == [train.RUN_MARKER]  # nothing half-written is kept


def test_tokenizing_past_the_file_size_limit_is_one_line(text_file, tmp_path):
    import resource

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    command = [sys.executable, "-m", "training.train", "--data", str(text_file), "--out-dir", str(tmp_path / "run")]
    result = subprocess.run(
        [*command, *TINY_ARGS, "--max-steps", "2"], capture_output=True, text=True, cwd=REPO_ROOT,
        preexec_fn=small_files,
    )  # fmt: skip
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("error: could not write the token files")


def test_a_training_text_that_cannot_be_read_is_one_line(text_file, tmp_path, monkeypatch):
    from training import corpus

    def unreadable(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(corpus, "open", unreadable, raising=False)
    with pytest.raises(SystemExit) as stopped:
        train.cli(["--data", str(text_file), "--out-dir", str(tmp_path / "run"), *TINY_ARGS, "--max-steps", "2"])
    assert str(stopped.value) == f"error: training text {text_file} could not be read (Permission denied)"
