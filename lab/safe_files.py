"""Files in the folders a GPU job writes and the ship check reads (OUT, the job's --work, the check's unpacking):
never read, written or removed through a link, never read past a size, and a JSON file never parsed past a depth.
OUT comes back from another machine and is moved with `cp -a`, rsync or tar, which keep links: a link in it would
send a read, a write or a removal outside it. A write goes to a new file beside its name, then takes the name
(os.replace), so it never lands in a file another name (a link, a hard link) shares."""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import tempfile
from pathlib import Path
from typing import BinaryIO

# a run's name becomes a folder, a log's name and a packed file's: letters, digits, "-", "_" and ".", not starting
# with "." (no "..", no hidden file, no separator)
PLAIN_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}", re.ASCII)
MAX_JSON_DEPTH = 64  # a job's metrics.json nests 4 deep (curves, run, val, row); Python's parser fails past ~1,000
MAX_FOLDER_ENTRIES = 10_000  # OUT holds at most 8 returned files, its report, and the unpacked exports (~12 files each)
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)  # a FIFO opens, then is refused
LINK_ADVICE = "nothing is read, written or removed through a link: put the file or folder itself there, or remove it"


def plain_name_problem(name: object, what: str) -> str | None:
    """Why `name` is not a plain name (a run's), or None."""
    if isinstance(name, str) and PLAIN_NAME.fullmatch(name):
        return None
    return (
        f"{what} {name!r} is not a plain name: letters, digits, '-', '_' and '.', at most 100, not starting with '.' "
        "(it names a folder and files)"
    )


def link_problem(path: Path) -> str | None:
    """Why `path` may not be used (it is a link), or None (it is no link, or it is not there). Only its last part
    is looked at: a folder typed as `OUT/` is OUT itself, and the folders above it are the user's own choice."""
    return f"{path} is a link: {LINK_ADVICE}" if path.is_symlink() else None


def refuse_links(folder: Path) -> None:
    """A ValueError naming the first link in `folder` or anywhere in it (not followed), or when it holds more than
    MAX_FOLDER_ENTRIES files and folders (counted as they are listed, before any is read)."""
    if problem := link_problem(folder):  # a folder typed as a link: listing it would follow it
        raise ValueError(problem)
    count, pending, limit = 0, [folder], MAX_FOLDER_ENTRIES
    while pending:
        with os.scandir(pending.pop()) as entries:
            for entry in entries:
                count += 1
                if count > limit:
                    raise ValueError(f"{folder} holds more than {limit:,} files and folders: not what a job returns")
                if entry.is_symlink():
                    raise ValueError(f"{entry.path} is a link: {LINK_ADVICE}")
                if entry.is_dir(follow_symlinks=False):
                    pending.append(Path(entry.path))


def real_dir(path: Path) -> Path:
    """`path` as a folder of its own (made where missing): a ValueError where it is a link or not a folder."""
    if problem := link_problem(path):
        raise ValueError(problem)
    path.mkdir(parents=True, exist_ok=True)
    if path.is_symlink() or not path.is_dir():
        raise ValueError(f"{path} is not a folder")
    return path


def open_plain(path: Path, limit: int) -> BinaryIO:
    """`path` opened for reading, never through a link: a ValueError where it is a link, not a plain file, or larger
    than `limit` bytes."""
    try:
        descriptor = os.open(path, READ_FLAGS)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise ValueError(f"{path} is a link: {LINK_ADVICE}") from None
        raise
    file = os.fdopen(descriptor, "rb")
    try:
        facts = os.fstat(descriptor)
        if not stat.S_ISREG(facts.st_mode):
            raise ValueError(f"{path} is not a plain file")
        if facts.st_size > limit:
            raise ValueError(f"{path} has {facts.st_size:,} bytes, more than the {limit:,} it may have")
        os.set_blocking(descriptor, True)
        return file
    except BaseException:
        file.close()
        raise


def read_bytes(path: Path, limit: int) -> bytes:
    """A plain file's bytes (see `open_plain`), never more than `limit` (a file that grows while read is refused)."""
    with open_plain(path, limit) as file:
        data = file.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"{path} has more than the {limit:,} bytes it may have")
    return data


def json_depth_problem(text: str, limit: int = MAX_JSON_DEPTH) -> str | None:
    """Why a JSON text nests too deep for `limit`, or None; found before it is parsed (the parser recurses)."""
    depth = 0
    for bracket in BRACKET.finditer(STRING.sub("", text)):
        depth += 1 if bracket[0] in "[{" else -1
        if depth > limit:
            return f"it nests deeper than {limit} levels"
    return None


STRING, BRACKET = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"'), re.compile(r"[\[\]{}]")


def read_json(path: Path, limit: int, depth: int = MAX_JSON_DEPTH) -> object:
    """A JSON file (see `read_bytes`), refused past `limit` bytes or `depth` levels; a ValueError saying which."""
    text = read_bytes(path, limit).decode("utf-8")
    if problem := json_depth_problem(text, depth):
        raise ValueError(f"{path}: {problem}")
    return json.loads(text)


def current_umask() -> int:
    """The process's umask (read by setting it, then setting it back)."""
    umask = os.umask(0)
    os.umask(umask)
    return umask


def write_bytes(path: Path, data: bytes) -> None:
    """Writes `data` as `path`: into a new file beside it, which then takes the name; a ValueError where `path` is a
    link or something other than a plain file."""
    if problem := link_problem(path):
        raise ValueError(problem)
    if path.exists() and not path.is_file():
        raise ValueError(f"{path} is not a plain file: not replacing it")
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(descriptor, "wb") as file:
            os.fchmod(file.fileno(), 0o666 & ~current_umask())
            file.write(data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_text(path: Path, text: str) -> None:
    """`write_bytes` of UTF-8 text."""
    write_bytes(path, text.encode("utf-8"))


def new_file(path: Path) -> BinaryIO:
    """A file opened to write as `path`, a new one (an earlier plain file of that name removed first, so that no
    other name shares what is written); a ValueError where `path` is a link or not a plain file."""
    if problem := link_problem(path):
        raise ValueError(problem)
    if path.exists() and not path.is_file():
        raise ValueError(f"{path} is not a plain file: not replacing it")
    path.unlink(missing_ok=True)
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except FileExistsError:
        raise ValueError(f"{path} appeared while it was written: not writing into it") from None
    return os.fdopen(descriptor, "wb")
