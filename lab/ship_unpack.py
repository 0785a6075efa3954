"""A returned GPU job's exports, unpacked for the ship check (lab/ship_check.py): a run's packed export in
OUT (NAME.tar, or its parts NAME.tar.00, .01, ... as lab.gpu_job cut them), joined and extracted safely into
the working folder."""

from __future__ import annotations

import shutil
import tarfile
import tempfile
from pathlib import Path, PurePosixPath

from lab import gpu_job


def run_files(metrics: dict, out: Path, name: str) -> list[Path]:
    """The run's packed export in OUT: NAME.tar or its parts, in order (those metrics.json lists, where it lists)."""
    listed = metrics.get("files")
    if not isinstance(listed, list):  # a job older than its file list: what is there
        listed = [path.name for path in sorted(out.glob(f"{name}.tar*"))]
    return [out / file for file in listed if file == f"{name}.tar" or file.startswith(f"{name}.tar.")]


def joined_tar(parts: list[Path], work: Path, name: str) -> Path:
    """The run's tar: the one file, or its parts joined in the working folder (`cat NAME.tar.* > NAME.tar`)."""
    if missing := [part for part in parts if not part.is_file()]:
        raise ValueError(f"{missing[0]} is missing (metrics.json lists it): copy every part the device returned")
    if len(parts) == 1 and parts[0].name == f"{name}.tar":
        return parts[0]
    expected = [f"{name}.tar.{index:02d}" for index in range(len(parts))]
    if [part.name for part in parts] != expected:
        raise ValueError(f"{name}'s parts are {', '.join(p.name for p in parts)}, not {', '.join(expected)}")
    for part in parts[:-1]:  # the job cuts at PART_BYTES: a part of another size was cut short or padded
        if part.stat().st_size != gpu_job.PART_BYTES:
            size = part.stat().st_size
            raise ValueError(f"{part} has {size:,} bytes, not {gpu_job.PART_BYTES:,}: copy it from the device again")
    joined = work / f"{name}.tar"
    with open(joined, "wb") as file:
        for part in parts:
            with open(part, "rb") as chunk:
                shutil.copyfileobj(chunk, file)
    return joined


def unpack(parts: list[Path], work: Path, name: str) -> Path:
    """The run's export unpacked as WORK/NAME (replacing an earlier unpacking); a ValueError for a missing part,
    a corrupt tar or a member that would land outside NAME/."""
    if not hasattr(tarfile, "data_filter"):  # Python before 3.10.12 / 3.11.4: no safe extraction to lean on
        raise ValueError("unpacking needs Python 3.10.12, 3.11.4 or later (tarfile's data filter)")
    tar_path = joined_tar(parts, work, name)
    staging = Path(tempfile.mkdtemp(dir=work, prefix=f".{name}."))
    try:
        with tarfile.open(tar_path, "r:") as tar:  # the job packs plain tars
            members = tar.getmembers()
            for member in members:
                path = PurePosixPath(member.name)
                if path.is_absolute() or ".." in path.parts or path.parts[:1] != (name,):
                    raise ValueError(f"{tar_path} holds {member.name!r}, outside {name}/: not unpacking it")
            try:
                tar.extractall(staging, members=members, filter="data")  # the filter refuses links out, devices too
            except tarfile.FilterError as error:
                raise ValueError(f"{tar_path} holds a member the safe unpacking refuses ({error})") from None
        if not (staging / name / "config.json").is_file():
            raise ValueError(f"{tar_path} holds no {name}/config.json: not an export")
        unpacked = work / name
        if unpacked.exists():
            shutil.rmtree(unpacked)
        (staging / name).rename(unpacked)
        return unpacked
    except (tarfile.TarError, EOFError) as error:
        reason = " ".join(str(error).split())  # one line
        raise ValueError(f"{tar_path} is not a readable tar ({reason}): copy it from the device again") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if tar_path not in parts:  # the parts joined here
            tar_path.unlink(missing_ok=True)
