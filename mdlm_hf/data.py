"""Text on disk: read a UTF-8 file, split it 90/10, write atomically. (The TinyShakespeare download, which only
training needs, is in training/corpus.py; its md5 stays here, since an export recognises the text by it.)"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

TINYSHAKESPEARE_MD5 = "6fb458f1232090904fb40fe944165e91"
TRAIN_FRACTION = 0.9  # nanoGPT's split: first 90 % train, last 10 % validation


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


def file_version(path: str | os.PathLike, missing: str, max_bytes: int | None = None) -> tuple[str, float]:
    """A file's resolved path and modified time, the key a cached reading of it goes by (an edited file is read
    anew); a ValueError saying `missing` where there is no file, and naming the size of one over `max_bytes`."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise ValueError(missing)
    found = path.stat()
    if max_bytes is not None and found.st_size > max_bytes:
        raise ValueError(
            f"{path} has {found.st_size:,} bytes, more than the {max_bytes:,} such a file may have: refused"
        )
    return str(path.resolve()), found.st_mtime


def file_in_folder(folder: str | os.PathLike, name: str) -> Path | None:
    """The file `name` in a model's `folder`, or None where there is none; a ValueError where it resolves outside the
    folder (a link to /etc/passwd is not a word list)."""
    folder = Path(folder).expanduser()
    path = folder / name
    if not path.is_file():
        if path.exists() or path.is_symlink():  # a FIFO, a device, a folder or a dangling link: not a missing file
            raise ValueError(f"{path} is not a regular file: refused")
        return None
    if not path.resolve().is_relative_to(folder.resolve()):
        raise ValueError(f"{path} resolves to {path.resolve()}, outside the model's folder: refused")
    return path


def split_text(text: str) -> tuple[str, str]:
    """First 90 % for training, last 10 % for validation."""
    cut = int(len(text) * TRAIN_FRACTION)
    return text[:cut], text[cut:]


def atomic_write_bytes(path: Path, payload: bytes) -> None:
    """Writes to a temporary file beside `path`, then renames: a crash never leaves a half-written file. The file
    keeps its mode (a new one gets what the umask gives, not the temporary file's 0600)."""
    path = Path(path)
    try:
        mode = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
