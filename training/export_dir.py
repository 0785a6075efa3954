"""The directory an export is swapped into: what it may replace (a new or empty directory, or an earlier export whose
every file its manifest lists), the manifest itself, the staging folder an export is written into (and those a
killed export left), and the swap, which never leaves a half-written model behind.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

MANIFEST = ".mdlm_export.json"  # the export's list of the files it wrote, which the next export may replace


def check_export_dir(export_dir: Path, run_dir: Path | None = None) -> None:
    """Refuses an export directory that the export's swap would destroy: anything but a new directory, an empty
    one or an earlier export whose every file its manifest (.mdlm_export.json) lists; and a `.NAME.old` beside it
    that is not an earlier export (the swap's backup name)."""
    export_dir = Path(os.path.abspath(export_dir))
    if run_dir is not None:
        run_dir = Path(os.path.abspath(run_dir))
        if export_dir == run_dir or export_dir in run_dir.parents:
            raise ValueError(
                f"--export-dir {export_dir} is the run's directory or holds it: the export replaces its directory, "
                "so give it one of its own (e.g. a new one inside the run's)"
            )
    if export_dir.is_symlink() or (export_dir.exists() and not export_dir.is_dir()):
        raise ValueError(f"--export-dir {export_dir} exists and is not a directory; give a new directory")
    backup = backup_path(export_dir)
    if (backup.exists() or backup.is_symlink()) and foreign_entries(backup) != []:
        raise ValueError(
            f"{backup} is in the way: the export uses that name while it swaps {export_dir.name} in, and it is not "
            "an earlier export; move it elsewhere"
        )
    if foreign := foreign_entries(export_dir):  # None: no directory yet
        shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
        raise ValueError(
            f"--export-dir {export_dir} is not empty and not an earlier export ({shown}); the export replaces only "
            f"the files it wrote itself (those its {MANIFEST} lists), so give a new directory"
        )


def foreign_entries(directory: Path) -> list[str] | None:
    """The entries of `directory` an export did not write (its manifest does not list them), sorted; None when
    `directory` is not a directory at all."""
    if directory.is_symlink() or not directory.is_dir():
        return None
    own = manifest_files(directory)
    return sorted(
        entry.name + ("/" if entry.is_dir() else "")
        for entry in directory.iterdir()
        if entry.is_symlink() or not entry.is_file() or (entry.name not in own and entry.name != MANIFEST)
    )


def manifest_files(directory: Path) -> set[str]:
    """The file names an earlier export's manifest lists (none if it has no readable manifest)."""
    try:
        manifest = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, list):
        return set()
    return {name for name in files if isinstance(name, str) and name and Path(name).name == name}


def write_manifest(staging: Path) -> None:
    """Lists the files the export wrote, so that the next export into the directory replaces those and no other."""
    files = sorted(entry.name for entry in staging.iterdir())
    payload = {"written_by": "python -m training.export", "files": files}
    (staging / MANIFEST).write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")


def backup_path(export_dir: Path) -> Path:
    """Where the swap keeps the previous export until the new one is in place."""
    return export_dir.with_name(f".{export_dir.name}.old")


def staging_prefix(export_dir: Path, pid: int) -> str:
    """The name an export's staging folder starts with: hidden, beside its directory, with the exporting process."""
    return f".{export_dir.name}.{pid}."


@contextmanager
def staged(export_dir: Path) -> Iterator[Path]:
    """A staging folder beside `export_dir` for the block to write an export into; when the block ends, its manifest
    is written and it is swapped in; when the block fails, it is removed. Killed exports' folders are removed first."""
    remove_stale_staging(export_dir)
    staging = Path(tempfile.mkdtemp(dir=export_dir.parent, prefix=staging_prefix(export_dir, os.getpid())))
    try:
        yield staging
        write_manifest(staging)
        apply_umask(staging)
        replace_directory(staging, export_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def remove_stale_staging(export_dir: Path) -> None:
    """Removes the staging folders of exports that were killed (their process is gone): each left a hidden
    `.NAME.PID.xxxxxxxx` beside the directory, which no later export cleaned. The limit: "gone" means not running on
    this machine, so two machines exporting into one shared network folder can remove each other's staging."""
    pattern = re.compile(rf"^\.{re.escape(export_dir.name)}\.(\d+)\.[A-Za-z0-9_]{{8}}$")
    for entry in export_dir.parent.glob(f".{export_dir.name}.*.*"):
        found = pattern.match(entry.name)
        if found and entry.is_dir() and not entry.is_symlink() and not process_alive(int(found[1])):
            shutil.rmtree(entry, ignore_errors=True)


def process_alive(pid: int) -> bool:
    """Whether a process with this id runs on this machine (one of another user counts as alive)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # OverflowError: no process has such an id
        return False
    except PermissionError:
        return True
    return True


def apply_umask(staging: Path) -> None:
    """Gives the staging directory and its files the modes the umask gives (mkdtemp's is 0700, mkstemp's 0600)."""
    umask = os.umask(0)  # read by setting it, then set back
    os.umask(umask)
    for entry in staging.iterdir():
        entry.chmod(0o666 & ~umask)
    staging.chmod(0o777 & ~umask)


def gained_files(export_dir: Path, foreign: list[str], during: str) -> ValueError:
    """The refusal when files the export did not write came into `export_dir` while it ran or swapped."""
    return ValueError(
        f"{export_dir} gained files the export did not write while it {during} ({', '.join(foreign[:5])}): it was "
        "left as it is; move them elsewhere and export again"
    )


RENAME_EXCHANGE = 2  # renameat2's flag (Linux 3.15): swap two paths in one step


def exchanged(a: Path, b: Path) -> bool:
    """Swaps two folders in one step (Linux's renameat2 with RENAME_EXCHANGE), so that a kill at any instant leaves
    each whole; False where this system or file system cannot, for the two renames instead."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_cwd = -100  # AT_FDCWD: the paths as given
    return renameat2(at_cwd, os.fsencode(a), at_cwd, os.fsencode(b), RENAME_EXCHANGE) == 0


def replace_directory(staging: Path, export_dir: Path) -> None:
    """Swaps the finished staging directory in for `export_dir` (an earlier export, deleted), in one step where the
    system can (`exchanged`). Elsewhere a swap killed half-way leaves `.NAME.old`, the previous export, which the next
    swap removes; anything else by that name is a user's, refused. The limit: a file written into `.NAME.old` through
    a folder handle opened before the move, between the check and the removal, goes with it."""
    old = backup_path(export_dir)
    if old.exists() or old.is_symlink():
        if foreign_entries(old) != []:
            raise ValueError(f"{old} is in the way and is not an earlier export; move it elsewhere")
        shutil.rmtree(old)
    if foreign := foreign_entries(export_dir):  # checked at the start of the export too: these came while it ran
        raise gained_files(export_dir, foreign, "ran")
    if export_dir.exists() and exchanged(staging, export_dir):  # one step: at every instant the old or the new
        # the earlier export, under the staging folder's name: what came since
        if foreign := foreign_entries(staging):
            exchanged(staging, export_dir)  # swapped back, the user's files with it
            raise gained_files(export_dir, foreign, "swapped")
        shutil.rmtree(staging, ignore_errors=True)
        return
    if export_dir.exists():
        export_dir.rename(old)
        if foreign := foreign_entries(old):  # what came between the check above and the rename is in `old` now
            old.rename(export_dir)
            raise gained_files(export_dir, foreign, "swapped")
    staging.rename(export_dir)
    shutil.rmtree(old, ignore_errors=True)
