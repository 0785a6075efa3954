"""A returned GPU job's exports, unpacked for the ship check (lab/ship_check.py): a run's packed export in
OUT (NAME.tar, or its parts NAME.tar.00, .01, ... as lab.gpu_job cut them), joined and extracted safely into
the working folder: no file read through a link, no member but the export's folder and its plain files, and
nothing past the limits below, refused from the tar's headers before anything is extracted."""

from __future__ import annotations

import os
import re
import shutil
import tarfile
import tempfile
from pathlib import Path, PurePosixPath

from lab import gpu_job
from lab.safe_files import link_problem, open_plain, plain_name_problem

# What a real export holds: about 12 files (weights, config, card, words, casts, plots), 5-20 MB in all, and the
# device returns at most 8 files of 16 MiB (128 MiB) a call. The limits sit well above that, and well below what
# would fill a disk or the memory the check loads a model into.
MAX_PARTS = 16  # a run's packed parts: 256 MiB at PART_BYTES each
MAX_TAR_BYTES = MAX_PARTS * gpu_job.PART_BYTES  # a run's tar, whole or joined
MAX_MEMBERS = 1_000  # files in an export
MAX_FILE_BYTES = 128 * 2**20  # one unpacked file (a sparse member can claim gigabytes in a few bytes of tar)
MAX_UNPACKED_BYTES = 256 * 2**20  # every file of one export together


def part_name(file: str, name: str) -> bool:
    """Whether `file` is one of NAME's packed files as the job names them (NAME.tar, NAME.tar.00, ...)."""
    return file == f"{name}.tar" or re.fullmatch(rf"{re.escape(name)}\.tar\.\d{{2,}}", file) is not None


def run_files(metrics: dict, out: Path, name: str) -> list[Path]:
    """The run's packed export in OUT: NAME.tar or its parts, in order (those metrics.json lists, where it lists)."""
    listed = metrics.get("files")
    if not isinstance(listed, list):  # a job older than its file list: what is there
        listed = [path.name for path in sorted(out.glob(f"{name}.tar*"))]
    return [out / file for file in listed if isinstance(file, str) and part_name(file, name)]


def joined_tar(parts: list[Path], staging: Path, name: str) -> Path:
    """The run's tar: the one file, or its parts joined in the staging folder (`cat NAME.tar.* > NAME.tar`); every
    part a plain file, never read through a link."""
    if missing := [part for part in parts if not part.is_file() and not part.is_symlink()]:
        raise ValueError(f"{missing[0]} is missing (metrics.json lists it): copy every part the device returned")
    if problem := next(filter(None, map(link_problem, parts)), None):
        raise ValueError(problem)
    if len(parts) == 1 and parts[0].name == f"{name}.tar":
        return parts[0]
    if len(parts) > MAX_PARTS:
        raise ValueError(f"{name} has {len(parts)} parts, more than {MAX_PARTS}: not what a GPU job packs")
    expected = [f"{name}.tar.{index:02d}" for index in range(len(parts))]
    if [part.name for part in parts] != expected:
        raise ValueError(f"{name}'s parts are {', '.join(p.name for p in parts)}, not {', '.join(expected)}")
    joined = staging / f"{name}.tar"
    with open(joined, "xb") as file:  # the staging folder is new: nothing else has this name
        for index, part in enumerate(parts):
            with open_plain(part, gpu_job.PART_BYTES) as chunk:
                size = os.fstat(chunk.fileno()).st_size
                if index < len(parts) - 1 and size != gpu_job.PART_BYTES:  # the job cuts at PART_BYTES
                    raise ValueError(
                        f"{part} has {size:,} bytes, not {gpu_job.PART_BYTES:,}: copy it from the device again"
                    )
                shutil.copyfileobj(chunk, file)
    return joined


def checked_members(tar: tarfile.TarFile, label: str, name: str) -> list[tarfile.TarInfo]:
    """The tar's members, read header by header and refused at the first that is not the export's folder NAME/ or a
    plain file in it, or that passes a limit (before anything is extracted)."""
    members, total = [], 0
    for member in tar:
        if len(members) == MAX_MEMBERS:
            raise ValueError(f"{label} holds more than {MAX_MEMBERS:,} files: not an export, not unpacking it")
        path = PurePosixPath(member.name)
        if path.is_absolute() or ".." in path.parts or path.parts[:1] != (name,) or len(path.parts) > 2:
            raise ValueError(f"{label} holds {member.name!r}, outside {name}/ or in a folder of it: not unpacking it")
        total += member.size
        if member.size > MAX_FILE_BYTES:  # a sparse member claims its size in a few bytes of tar
            raise ValueError(
                f"{label} holds {member.name!r} of {member.size:,} bytes, more than the {MAX_FILE_BYTES:,} a file "
                "may have: not unpacking it"
            )
        if total > MAX_UNPACKED_BYTES:
            raise ValueError(f"{label} unpacks to more than {MAX_UNPACKED_BYTES:,} bytes: not unpacking it")
        plain = member.isreg() and not member.issparse()
        if not (plain and len(path.parts) == 2) and not (member.isdir() and len(path.parts) == 1):
            kind = (
                "a link" if member.issym() or member.islnk() else "sparse" if member.issparse() else "not a plain file"
            )
            raise ValueError(f"{label} holds {member.name!r}, {kind}: an export holds plain files, not unpacking it")
        members.append(member)
    return members


def unpack(parts: list[Path], work: Path, name: str) -> Path:
    """The run's export unpacked as WORK/NAME (replacing an earlier unpacking, a real folder); a ValueError for a
    missing part, a link, a corrupt tar, a member that would land outside NAME/ or is not a plain file, or a limit
    passed. Nothing is written but in a new staging folder of WORK, which then gives WORK/NAME its content."""
    if problem := plain_name_problem(name, "run"):
        raise ValueError(problem)
    if not hasattr(tarfile, "data_filter"):  # Python before 3.10.12 / 3.11.4: no safe extraction to lean on
        raise ValueError("unpacking needs Python 3.10.12, 3.11.4 or later (tarfile's data filter)")
    if problem := link_problem(work):
        raise ValueError(problem)
    unpacked = work / name
    if problem := link_problem(unpacked):
        raise ValueError(problem)
    if unpacked.exists() and not unpacked.is_dir():
        raise ValueError(f"{unpacked} is in the way and not a folder: the export unpacks there; move it")
    if not parts:
        raise ValueError(f"{name}'s export did not come back: no {name}.tar and no parts")
    label = str(parts[0]) if len(parts) == 1 else f"{parts[0].parent / name}.tar (its {len(parts)} parts joined)"
    staging = Path(tempfile.mkdtemp(dir=work, prefix=f".{name}."))
    try:
        tar_path = joined_tar(parts, staging, name)
        (staging / "new").mkdir()
        with open_plain(tar_path, MAX_TAR_BYTES) as file, tarfile.open(fileobj=file, mode="r:") as tar:
            members = checked_members(tar, label, name)  # the job packs plain tars
            try:
                tar.extractall(staging / "new", members=members, filter="data")  # refuses links out, devices too
            except tarfile.FilterError as error:
                raise ValueError(f"{label} holds a member the safe unpacking refuses ({error})") from None
        if not (staging / "new" / name / "config.json").is_file():
            raise ValueError(f"{label} holds no {name}/config.json: not an export")
        if unpacked.exists():  # an earlier unpacking (a real folder, checked above) leaves with the staging folder
            os.rename(unpacked, staging / "old")
        os.rename(staging / "new" / name, unpacked)
        return unpacked
    except (tarfile.TarError, EOFError) as error:
        reason = " ".join(str(error).split())  # one line
        raise ValueError(f"{label} is not a readable tar ({reason}): copy it from the device again") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # made here by mkdtemp: ours to remove
