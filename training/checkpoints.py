"""Checkpoints of a training run: written atomically, read back safely (tensors and plain values only, checked
against their zip's CRCs and the trainer's fields), and turned into a model; and `RunError`, the failure a user can
act on, which every command line prints as one line. Train, its trainer and export all read it, none another.
"""

from __future__ import annotations

import io
import json
import math
import pickle
import re
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import torch

from mdlm_hf import MDLM
from training.atomic import atomic_write_bytes


class RunError(RuntimeError):
    """A failure the user can act on (no network, no credentials, a full disk): the command lines print it as one
    line. It lives here, not in train.py, because `python -m training.train` runs that file as `__main__`, a second
    copy of the module whose classes differ from those other modules import."""


def save_checkpoint(path: Path, payload: dict) -> None:
    """torch.save into memory, then an atomic rename: a kill mid-write leaves the old file intact."""
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    write_or_explain(path, buffer.getvalue())


def write_or_explain(path: Path, payload: bytes) -> None:
    """An atomic write whose failure (a full disk, a read-only directory) is a RunError saying the old file is kept."""
    try:
        atomic_write_bytes(path, payload)
    except OSError as error:
        raise RunError(
            f"could not write {path} ({error.strerror or error}); the previous {Path(path).name}, if any, is kept: "
            "free some space and resume with --resume"
        ) from error


# what best.pt and ckpt.pt both hold, and what a resume needs besides
MODEL_KEYS = ("model_config", "model")
RESUME_KEYS = (*MODEL_KEYS, "optimizers", "step", "tokens_seen", "wall_time", "best_val", "history", "rng")


def unpickler_reason(error: pickle.UnpicklingError) -> str:
    """What torch's weights-only unpickler refused (`Unsupported operand 192`, `unsupported GLOBAL posix.system ...`),
    from its long message, without its advice to load the file unsafely."""
    text = " ".join(str(error).split())
    marker = next((m for m in ("WeightsUnpickler error:", "Trying to load ") if m in text), None)
    reason = text.rpartition(marker)[2] if marker else ""
    reason = re.split(r"\.? (?:Please use|Check the documentation)|\.$", reason.strip())[0].strip()
    return reason or "a file torch cannot read"


def damaged_record(path: Path) -> str | None:
    """The first record of a zip checkpoint whose bytes no longer match their CRC (damaged on disk), or None:
    torch.load reads tensors without checking their CRCs, so a flipped byte would be trained on silently."""
    try:
        with zipfile.ZipFile(path) as archive:
            return archive.testzip()
    except (OSError, zipfile.BadZipFile, EOFError, ValueError):
        return None  # not a zip (or unreadable): torch.load says why


def load_checkpoint(path: Path, required: tuple[str, ...] = MODEL_KEYS) -> dict:
    """Loads tensors and plain values only (weights_only: a crafted file cannot run code), or says why not in a
    ValueError: a file damaged on disk, one without the `required` keys (another program's), a malformed field."""
    if (record := damaged_record(path)) is not None:
        raise ValueError(
            f"{path} is damaged: its record {record} does not match its checksum (the file changed on disk after it "
            "was written), so it is not used: restore it from a copy"
        )
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:  # torch's message is many lines, and advises loading it unsafely
        raise ValueError(
            f"{path} is not a readable mdlm_hf checkpoint: it is not one, or it holds more than tensors and plain "
            f"values ({unpickler_reason(error)}), and such a file is not loaded since it could run code"
        ) from error
    except Exception as error:  # zip and EOF errors of empty, truncated or foreign files
        first_line = (str(error).strip().splitlines() or [""])[0]
        reason = f"{type(error).__name__}: {first_line}" if first_line else type(error).__name__
        raise ValueError(f"{path} is not a readable mdlm_hf checkpoint ({reason})") from error
    if not isinstance(checkpoint, dict):
        raise ValueError(f"{path} is not an mdlm_hf checkpoint: it holds a {type(checkpoint).__name__}, not a dict")
    if "optimizers" in required and "optimizer" in checkpoint and "optimizers" not in checkpoint:
        raise ValueError(
            f"{path} was written by an older mdlm_hf (a single AdamW state, before Muon and EMA) and cannot be "
            "resumed; its weights still export with python -m training.export"
        )
    missing = [key for key in required if key not in checkpoint]
    if missing:
        raise ValueError(f"{path} is not an mdlm_hf checkpoint: it has no {', '.join(missing)}")
    for key, (expected, valid) in FIELD_CHECKS.items():
        if key in checkpoint and not valid(checkpoint[key]):
            shown = repr(checkpoint[key])
            shown = shown if len(shown) <= 40 else shown[:37] + "..."
            raise ValueError(f"{path}: its {key} is malformed ({shown}, expected {expected}): not as saved")
    return checkpoint


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63  # torch's int64


def _is_rng(value: Any) -> bool:
    """One process's random-number states: the data, noise and torch generators' byte tensors."""
    return isinstance(value, dict) and all(
        isinstance(value.get(name), torch.Tensor) and value[name].dtype == torch.uint8
        for name in ("data", "noise", "torch")
    )


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value)


def _is_history(value: Any) -> bool:
    return isinstance(value, dict) and all(
        isinstance(value.get(part), list) and all(isinstance(row, dict) for row in value[part])
        for part in ("train", "val")
    )


# the plain values a checkpoint carries beside its tensors: what each must be, and its test
FIELD_CHECKS = {
    "model_config": ("a dict of the model's settings", lambda v: isinstance(v, dict)),
    "model": ("a dict of weights", lambda v: isinstance(v, dict)),
    "step": ("a whole number >= 0", _is_count),
    "tokens_seen": ("a whole number >= 0", _is_count),
    "wall_time": ("a number of seconds", lambda v: _is_number(v) and math.isfinite(v) and v >= 0),
    "best_val": ("a number", _is_number),
    "history": ("a dict of train and val lists", _is_history),
    "args": ("a dict of the run's flags", lambda v: isinstance(v, dict)),
    "rng": ("a list of random-number states", lambda v: isinstance(v, list) and bool(v) and all(map(_is_rng, v))),
    "optimizers": ("a list of optimizer states", lambda v: isinstance(v, list) and all(isinstance(o, dict) for o in v)),
    "hardware": ("a description or None", lambda v: v is None or isinstance(v, str)),
}


def starting_point(model_id: str) -> dict:
    """--init-from's saved model as a checkpoint's first two parts: {"model_config": ..., "model": weights}; a
    directory or Hub id that holds no mdlm_hf model is a ValueError naming it."""
    try:
        model = MDLM.from_pretrained(model_id, fast=False)
    except Exception as error:  # a missing directory goes to the Hub, whose errors are many types
        raise ValueError(f"--init-from {model_id}: no mdlm_hf model there ({' '.join(str(error).split())})") from error
    config = dict(model._hub_mixin_config)  # the config.json it was saved with
    stages = recorded_stages(model.export_file("metrics.json"), model_id)
    return {"model_config": config, "model": model.state_dict(), "stages": stages}  # fp32 however stored


def recorded_stages(metrics_path: Path | None, model_id: str) -> list[dict]:
    """The training stages a saved model's metrics.json records (each {"steps", "characters", "text",
    "init_from"}), oldest first; one stage of its counters where it names none, its text "not recorded"."""
    try:
        training = json.loads(metrics_path.read_text(encoding="utf-8"))["training"]
    except (AttributeError, OSError, ValueError, KeyError, TypeError):  # no metrics.json: a notebook's save
        return [{"steps": None, "characters": None, "text": "not recorded", "init_from": None, "model": model_id}]
    stages = training.get("stages") if isinstance(training, dict) else None
    if isinstance(stages, list) and stages and all(isinstance(stage, dict) for stage in stages):
        return stages
    counters = training if isinstance(training, dict) else {}
    stage = {"steps": counters.get("step"), "characters": counters.get("tokens_seen"), "text": "not recorded"}
    return [{**stage, "init_from": None, "model": model_id}]


def build_model(checkpoint: dict, path: Path) -> MDLM:
    """The model a checkpoint describes, with its weights; a config or weights that do not fit are a ValueError."""
    model = model_from_config(checkpoint["model_config"], path)
    load_state(model, checkpoint["model"], path)
    return model


def model_from_config(config: dict, path: Path) -> MDLM:
    """MDLM(**config), with a checkpoint's foreign or malformed config as a ValueError naming the file."""
    try:
        return MDLM(**config)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{path}: its model_config does not describe an mdlm_hf model ({error})") from error


def load_state(module: torch.nn.Module | torch.optim.Optimizer | Any, state: dict, path: Path) -> None:
    """load_state_dict, with weights or optimizer state that do not fit as a one-line ValueError naming the file."""
    try:
        module.load_state_dict(state)
    except (RuntimeError, ValueError, KeyError, TypeError) as error:
        details = " ".join(str(error).split())
        raise ValueError(f"{path}: its {type(module).__name__} state does not fit the model ({details})") from error


def prepare_dir(path: Path, flag: str) -> None:
    """Creates `path` (and its parents) and writes a file in it, so an unwritable directory is one ValueError
    naming the flag before any work is done, not a traceback after it."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as error:
        reason = error.strerror or str(error)
        raise ValueError(
            f"{flag} {path} is not a directory this program can write to ({reason}): give another"
        ) from None
