"""Files beside a model's weights (words.txt, casts.json, metrics.json): found inside its folder only, and read again
when they change. (The training text and its split: training/corpus.py.)"""

from __future__ import annotations

import os
from pathlib import Path


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
