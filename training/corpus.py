"""The training text as token files: nanoGPT's train.bin / val.bin, memory-mapped, so a corpus bigger than memory
trains. The --data files are joined by a newline and split as one text (as `split_text` splits);
--train-extra files join the training split only. The files are streamed in chunks: one pass finds the characters
and the hash, a second writes the ids. tokens.json beside them records the text's hash and vocabulary: a run, or a
resume, whose text and vocabulary match reuses them.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import urllib.request
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from training.atomic import atomic_write_bytes
from training.checkpoints import RunError

TINYSHAKESPEARE_MD5 = "6fb458f1232090904fb40fe944165e91"
TRAIN_FRACTION = 0.9  # nanoGPT's split: first 90 % train, last 10 % validation
TINYSHAKESPEARE_URL = "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"

SEPARATOR = "\n"  # between two files of --data
CHUNK_CHARS = 1 << 22  # characters read at a time
TOKENS_META = "tokens.json"
TOKEN_FILES = ("train.bin", "val.bin")
MAX_CODE_POINT = 0x10FFFF


def read_text(path: str | Path) -> str:
    """Reads a UTF-8 text file, with a clear error for a missing, unreadable or empty file."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"training text {path} does not exist or is not a file")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"training text {path} is not valid UTF-8 ({error})") from error
    if not text.strip():
        raise ValueError(f"training text {path} is empty")
    return text


def split_text(text: str) -> tuple[str, str]:
    """First 90 % for training, last 10 % for validation."""
    cut = int(len(text) * TRAIN_FRACTION)
    return text[:cut], text[cut:]


def text_chunks(paths: Iterable[str | Path]) -> Iterator[str]:
    """The text of the files, joined by SEPARATOR, in chunks, newlines read as `read_text` reads them; a
    missing, unreadable, non-UTF-8 or empty file is a ValueError naming it, as `read_text` says it."""
    for index, path in enumerate(map(Path, paths)):
        if not path.is_file():
            raise ValueError(f"training text {path} does not exist or is not a file")
        if index:
            yield SEPARATOR
        has_text = False
        try:
            with open(path, encoding="utf-8") as file:
                while chunk := file.read(CHUNK_CHARS):
                    has_text = has_text or bool(chunk.strip())
                    yield chunk
        except UnicodeDecodeError as error:
            raise ValueError(f"training text {path} is not valid UTF-8 ({error})") from error
        except OSError as error:  # unreadable (permissions, a failing disk): the file is named, not traced back
            raise ValueError(f"training text {path} could not be read ({error.strerror or error})") from error
        if not has_text:
            raise ValueError(f"training text {path} is empty")


def read_texts(paths: Iterable[str | Path]) -> str:
    """The whole text of the files, joined by SEPARATOR (what the token files hold, as a string)."""
    return SEPARATOR.join(read_text(path) for path in paths)


@dataclass(frozen=True)
class TextFacts:
    """What one pass over the text finds: its length, its distinct characters and its hash."""

    chars: int
    characters: str  # sorted: the vocabulary of a new run
    sha256: str

    @property
    def train_chars(self) -> int:
        """The characters of the training split."""
        return int(self.chars * TRAIN_FRACTION)  # split_text's cut

    @property
    def val_chars(self) -> int:
        """The characters of the validation split."""
        return self.chars - self.train_chars


def scan_text(paths: Iterable[str | Path]) -> TextFacts:
    """One streamed pass over the files: length, characters and the sha256 of the text's UTF-8 bytes."""
    sha256, characters, chars = hashlib.sha256(), set(), 0
    for chunk in text_chunks(paths):
        sha256.update(chunk.encode("utf-8"))
        characters.update(chunk)
        chars += len(chunk)
    return TextFacts(chars, "".join(sorted(characters)), sha256.hexdigest())


@dataclass
class Corpus:
    """The memory-mapped ids of the training and validation splits, and what tokens.json says of them."""

    train: np.memmap
    val: np.memmap
    meta: dict

    @property
    def vocab(self) -> str:
        """The characters the ids stand for, in id order."""
        return self.meta["vocab"]


def tokenize(
    paths: Iterable[str | Path],
    directory: str | Path,
    facts: TextFacts,
    vocab: str | None = None,
    extra_paths: Iterable[str | Path] = (),
    extra: TextFacts | None = None,
    earlier_texts: Iterable[dict] = (),
) -> Corpus:
    """The token files of the text in `directory`, written unless tokens.json says they already hold this text
    with this vocabulary (default: the text's own characters). `extra_paths` (scanned as `extra`) join the training
    split only. A character outside `vocab` is a ValueError; a write that fails (a full disk) is a RunError.
    `earlier_texts`: what a resumed run trained on before this text (`text_record`s), kept in tokens.json."""
    paths, directory, extra_paths = [Path(p) for p in paths], Path(directory), [Path(p) for p in extra_paths]
    characters = "".join(sorted(set(facts.characters) | set(extra.characters if extra else "")))
    vocab = characters if vocab is None else vocab
    known = set(vocab)
    unknown = [c for c in characters if c not in known]
    if unknown:
        raise ValueError(
            f"the training text has {len(unknown)} character(s) outside the run's vocabulary: "
            + ", ".join(map(repr, unknown[:20]))
            + (", ..." if len(unknown) > 20 else "")
        )
    dtype = np.dtype(np.uint16 if len(vocab) <= 2**16 else np.uint32)  # nanoGPT's where every id fits (never a mask)
    meta = {
        "sha256": facts.sha256,
        "vocab": vocab,
        "dtype": dtype.name,
        "train_tokens": facts.train_chars + (len(SEPARATOR) + extra.chars if extra else 0),
        "val_tokens": facts.val_chars,
        "files": [str(p) for p in paths],
        "train_extra": {"files": [str(p) for p in extra_paths], "sha256": extra.sha256, "chars": extra.chars}
        if extra
        else None,
    }
    earlier: dict[tuple, dict] = {}
    for record in earlier_texts:  # each text once, the current one not among them
        earlier.setdefault((record.get("sha256"), record.get("train_extra_sha256")), record)
    earlier.pop((facts.sha256, extra.sha256 if extra else None), None)
    if earlier:
        meta["earlier_texts"] = list(earlier.values())
    if not _holds(directory, meta):
        total = facts.chars + (extra.chars if extra else 0)
        print(f"tokenizing {total:,} characters into {directory / 'train.bin'} and val.bin...", flush=True)
        try:
            directory.mkdir(parents=True, exist_ok=True)
            (directory / TOKENS_META).unlink(missing_ok=True)  # never a record that describes half-written files
            _write_tokens(paths, directory, facts, vocab, dtype, extra_paths, extra)
            meta["token_sha256"] = token_hashes(directory)
            atomic_write_bytes(directory / TOKENS_META, json.dumps(meta, indent=2).encode())
        except OSError as error:
            raise RunError(
                f"could not write the token files in {directory} ({error.strerror or error}); nothing half-written "
                "is kept: free some space and run again"
            ) from error
    return load_tokens(directory)


def text_record(meta: dict) -> dict:
    """Which text a tokens.json describes: its files and the hashes of the text and of its --train-extra text."""
    extra = meta.get("train_extra") or {}
    return {"files": meta.get("files"), "sha256": meta.get("sha256"), "train_extra_sha256": extra.get("sha256")}


def texts_trained_on(directory: str | Path) -> list[dict] | None:
    """The `text_record`s of every text a run's tokens.json says it trained on, the current first; None when the
    run has no readable tokens.json (a run from before it)."""
    try:
        meta = json.loads((Path(directory) / TOKENS_META).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict):
        return None
    earlier = meta.get("earlier_texts")
    return [text_record(meta), *(r for r in (earlier if isinstance(earlier, list) else []) if isinstance(r, dict))]


def token_hashes(directory: Path) -> dict[str, str]:
    """The sha256 of each token file, which tokens.json records: a damaged file of the right size is found."""
    return {name: hashlib.sha256((directory / name).read_bytes()).hexdigest() for name in TOKEN_FILES}


def load_tokens(directory: str | Path) -> Corpus:
    """Memory-maps the token files that tokens.json describes (read-only)."""
    directory = Path(directory)
    meta = json.loads((directory / TOKENS_META).read_text(encoding="utf-8"))
    train, val = (np.memmap(directory / name, dtype=meta["dtype"], mode="r") for name in TOKEN_FILES)
    return Corpus(train, val, meta)


def _holds(directory: Path, meta: dict) -> bool:
    """Whether tokens.json and the token files there are those of `meta`'s text and vocabulary."""
    try:
        stored = json.loads((directory / TOKENS_META).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    keys = ("sha256", "vocab", "dtype", "train_tokens", "val_tokens")
    if not isinstance(stored, dict) or any(stored.get(k) != meta[k] for k in keys):
        return False
    if (stored.get("train_extra") or {}).get("sha256") != (meta["train_extra"] or {}).get("sha256"):
        return False
    itemsize = np.dtype(meta["dtype"]).itemsize
    sizes = (meta["train_tokens"] * itemsize, meta["val_tokens"] * itemsize)
    files = [directory / name for name in TOKEN_FILES]
    if not all(f.is_file() and f.stat().st_size == size for f, size in zip(files, sizes, strict=True)):
        return False
    return stored.get("token_sha256") == token_hashes(directory)  # written anew when damaged (or unrecorded)


def _write_tokens(
    paths: list[Path],
    directory: Path,
    facts: TextFacts,
    vocab: str,
    dtype: np.dtype,
    extra_paths: list[Path],
    extra: TextFacts | None,
) -> None:
    """Second pass: the ids of the first train_chars characters to train.bin, the rest to val.bin, then a newline
    and the extra files' ids to train.bin (atomically)."""
    lookup = np.zeros(MAX_CODE_POINT + 1, dtype=dtype)  # code point -> id
    lookup[[ord(c) for c in vocab]] = np.arange(len(vocab), dtype=dtype)

    def ids(chunk: str) -> np.ndarray:
        return lookup[np.frombuffer(chunk.encode("utf-32-le"), dtype=np.uint32)]

    temporaries = [tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".tmp") for name in TOKEN_FILES]
    try:
        sha256, position = hashlib.sha256(), 0
        with os.fdopen(temporaries[0][0], "wb") as train, os.fdopen(temporaries[1][0], "wb") as val:
            for chunk in text_chunks(paths):
                sha256.update(chunk.encode("utf-8"))
                chunk_ids = ids(chunk)
                head = max(0, min(len(chunk_ids), facts.train_chars - position))
                train.write(chunk_ids[:head].tobytes())
                val.write(chunk_ids[head:].tobytes())
                position += len(chunk_ids)
            if extra is not None:
                extra_sha256 = hashlib.sha256()
                train.write(ids(SEPARATOR).tobytes())
                for chunk in text_chunks(extra_paths):
                    extra_sha256.update(chunk.encode("utf-8"))
                    train.write(ids(chunk).tobytes())
                if extra_sha256.hexdigest() != extra.sha256:
                    raise ValueError("the --train-extra text changed while it was being read; run again")
            for file in (train, val):
                file.flush()
                os.fsync(file.fileno())
        if sha256.hexdigest() != facts.sha256:
            raise ValueError("the training text changed while it was being read; run again")
        for (_, temporary), name in zip(temporaries, TOKEN_FILES, strict=True):
            os.replace(temporary, directory / name)
    except BaseException:
        for _, temporary in temporaries:
            Path(temporary).unlink(missing_ok=True)
        raise


def download_tinyshakespeare(destination: Path) -> Path:
    """Downloads TinyShakespeare to `destination` (atomically) and verifies its md5."""
    if destination.is_file() and hashlib.md5(destination.read_bytes()).hexdigest() == TINYSHAKESPEARE_MD5:
        return destination
    try:
        with urllib.request.urlopen(TINYSHAKESPEARE_URL, timeout=30) as response:
            payload = response.read()
    except OSError as error:
        raise RuntimeError(
            f"could not download TinyShakespeare from {TINYSHAKESPEARE_URL} ({error}); "
            "pass --data PATH to train on a local file"
        ) from error
    digest = hashlib.md5(payload).hexdigest()
    if digest != TINYSHAKESPEARE_MD5:
        raise RuntimeError(f"downloaded TinyShakespeare has md5 {digest}, expected {TINYSHAKESPEARE_MD5}; not using it")
    destination.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(destination, payload)
    return destination
