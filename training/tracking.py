"""Optional experiment tracking for training/train.py: TensorBoard or trackio behind one small interface, `log(step,
metrics)` (numbers become scalars, strings text) and `finish()`. Neither package is a dependency: `missing_package`
says what to install in one line before any work starts.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from training.checkpoints import RunError

TRACKERS = ("none", "tensorboard", "trackio")
# the module each tracker imports (torch's writer checks the tensorboard version) and the package that provides it
MODULES = {"tensorboard": ("torch.utils.tensorboard", "tensorboard"), "trackio": ("trackio", "trackio")}
TRACKIO_PROJECT = "mdlm_hf"
TENSORBOARD_DIR = "tensorboard"  # inside the run's --out-dir, so a resume finds it


class Tracker:
    """Where a run's metrics go besides the console and history.json: nowhere (--tracker none, and every rank but 0
    under torchrun), or a dashboard (the subclasses)."""

    def log(self, step: int, metrics: dict[str, float | str]) -> None:
        """Records `metrics` at global step `step` (here: nowhere; a dashboard's subclass records them)."""

    def finish(self) -> None:
        """Writes what is left and closes (here: nothing to write)."""


def as_markdown(text: str) -> str:
    """A text as a fenced block: both dashboards render markdown, which would fold a sample's line breaks."""
    return f"```\n{text}\n```"


class TensorBoardTracker(Tracker):
    """Event files in OUT_DIR/tensorboard; a resume appends to them, hiding what was logged after its checkpoint."""

    def __init__(self, log_dir: Path, start_step: int) -> None:
        from torch.utils.tensorboard import SummaryWriter

        # a run killed after its last checkpoint logged steps that the resume trains again: TensorBoard hides
        # the events after start_step (the checkpoint's own step was logged before it was saved)
        self.writer = SummaryWriter(log_dir=str(log_dir), purge_step=start_step + 1 if start_step else None)

    def log(self, step: int, metrics: dict[str, float | str]) -> None:
        """Scalars with add_scalar, strings with add_text, at global step `step`."""
        for name, value in metrics.items():
            if isinstance(value, str):
                self.writer.add_text(name, as_markdown(value), step)
            else:
                self.writer.add_scalar(name, value, step)
        self.writer.flush()  # metrics arrive every few seconds at most: worth seeing at once

    def finish(self) -> None:
        """Flushes and closes the event file."""
        self.writer.close()


class TrackioTracker(Tracker):
    """A trackio run named after the run directory, in project mdlm_hf; a resume continues the same run."""

    def __init__(self, name: str, config: dict, resume: bool) -> None:
        import trackio

        self.trackio = trackio
        try:
            trackio.init(project=TRACKIO_PROJECT, name=name, config=config, resume="allow" if resume else "never")
        except Exception as error:  # a bad name, an unreachable Space: one line, before any step
            raise RunError(f"--tracker trackio: trackio.init failed ({type(error).__name__}: {error})") from error

    def log(self, step: int, metrics: dict[str, float | str]) -> None:
        """trackio.log at an explicit step; strings as trackio.Markdown where this trackio has it."""
        markdown = getattr(self.trackio, "Markdown", None)
        wrapped = {
            name: (markdown(as_markdown(value)) if markdown else value) if isinstance(value, str) else value
            for name, value in metrics.items()
        }
        self.trackio.log(wrapped, step=step)

    def finish(self) -> None:
        """trackio.finish: the last metrics are written."""
        self.trackio.finish()


def missing_package(kind: str) -> str | None:
    """One line saying what to install for `--tracker kind`, or None when its package imports."""
    if kind not in MODULES:
        return None
    module, package = MODULES[kind]
    try:
        importlib.import_module(module)
    except Exception as error:  # ImportError when absent; anything else from a broken install
        return f"--tracker {kind} needs the {package} package ({error}): pip install {package}, or use --tracker none"
    return None


def open_tracker(kind: str, out_dir: Path, start_step: int, config: dict) -> Tracker:
    """The tracker `--tracker kind` asks for, starting (or continuing, when start_step > 0) at start_step."""
    if kind == "tensorboard":
        return TensorBoardTracker(out_dir / TENSORBOARD_DIR, start_step)
    if kind == "trackio":
        return TrackioTracker(out_dir.resolve().name, config, resume=start_step > 0)
    return Tracker()
