"""Saving and loading weights: safetensors with a checksum of the tensors, strict loading with errors that name
what is wrong, and a model name that is meant as a folder told apart from a Hub repo id (`MDLM.from_pretrained`)."""

from __future__ import annotations

import difflib
import hashlib
import itertools
import json
import warnings
from pathlib import Path
from typing import Any

import safetensors
import safetensors.torch
import torch
import torch.nn as nn
from huggingface_hub.utils import HFValidationError, validate_repo_id

FLOAT_DTYPES = ("F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2")  # safetensors' names of floating-point dtypes

CHECKSUM_KEY = "mdlm_sha256"  # in a safetensors file's metadata: the sha256 of its tensors (`tensors_digest`)


def tensors_digest(stored: Any) -> str:
    """The sha256 of a safetensors file's tensors (a `safe_open` handle), their bytes as stored, by name."""
    digest = hashlib.sha256()
    for name in sorted(stored.keys()):
        digest.update(name.encode())
        digest.update(stored.get_tensor(name).contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def save_weights(model: nn.Module, model_file: str | Path) -> None:
    """Writes `model`'s weights as safetensors (tied weights once) with the checksum of its tensors in the metadata,
    which `load_weights` checks: a file with flipped bytes is refused, not loaded."""
    safetensors.torch.save_model(model, str(model_file), metadata={"format": "pt"})
    with safetensors.safe_open(str(model_file), framework="pt") as stored:
        digest = tensors_digest(stored)
    safetensors.torch.save_model(model, str(model_file), metadata={"format": "pt", CHECKSUM_KEY: digest})


def load_weights(model: nn.Module, model_file: str, device: str = "cpu") -> nn.Module:
    """Loads a safetensors file into `model` (tied weights stored under either name), in eval mode; a ValueError
    names every tensor that is missing, unexpected or of the wrong shape, or the first holding NaN or infinity."""
    try:
        with safetensors.safe_open(model_file, framework="pt") as stored:  # copied into fp32, ints would pass
            for name in stored.keys():
                if (dtype := stored.get_slice(name).get_dtype()) not in FLOAT_DTYPES:
                    raise ValueError(f"{model_file} holds {name} as {dtype}: weights must be floating point")
            recorded = (stored.metadata() or {}).get(CHECKSUM_KEY)
            if recorded is None:  # saved before the checksum, or by another tool: damage would load silently
                warnings.warn(
                    f"{model_file} carries no checksum ({CHECKSUM_KEY} in its metadata), so damage to it cannot be "
                    "found: save or export the model again to add one",
                    UserWarning,
                    stacklevel=3,
                )
            elif recorded != tensors_digest(stored):
                raise ValueError(
                    f"{model_file} is damaged: its weights do not match the checksum they were saved with; download "
                    "or export the model again"
                )
        missing, unexpected = safetensors.torch.load_model(model, model_file, strict=False, device=device)
    except safetensors.SafetensorError as error:  # truncated or garbled file
        raise ValueError(f"{model_file} is not a readable safetensors file ({error})") from error
    except RuntimeError as error:  # torch names every tensor whose shape differs
        details = " ".join(str(error).split())
        raise ValueError(f"weights in {model_file} do not match config.json: wrong shape: {details}") from error
    if missing or unexpected:
        raise ValueError(
            f"weights in {model_file} do not match config.json: "
            f"missing {sorted(missing) or 'none'}; unexpected {sorted(unexpected) or 'none'}"
        )
    for name, tensor in model.state_dict().items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise ValueError(f"{model_file} holds non-finite values in {name}")
    return model.eval()


def meant_as_folder(name: str) -> bool:
    """Whether a model name that is no directory here names one all the same: it starts with `.`, `/` or `~`, has
    more than one `/`, starts with a folder that is here, or is no valid Hub repo id."""
    parts = Path(name).parts
    if name.startswith((".", "/", "~")) or Path(name).is_absolute() or len(parts) > 2:
        return True
    if len(parts) == 2 and Path(parts[0]).is_dir():
        return True
    try:
        validate_repo_id(name)
    except HFValidationError:
        return True
    return False


def missing_folder(path: Path) -> str:
    """The error for a model folder that does not exist, with the closest folder beside it if one is close."""
    try:
        folders = [entry.name for entry in itertools.islice(path.parent.iterdir(), 10_000) if entry.is_dir()]
    except OSError:  # no parent folder either, or one we may not list
        folders = []
    old = path.with_name(f".{path.name}.old")  # training/export_dir.py's backup, where a swap was cut short
    if old.is_dir():
        return (
            f"model directory {path} does not exist, but {old} holds its previous export (an export was stopped "
            f"between its two renames): rename it to {path.name}"
        )
    near = difflib.get_close_matches(path.name, folders, n=1)
    return f"model directory {path} does not exist" + (f"; did you mean {path.parent / near[0]}?" if near else "")


def check_local_checkpoint(path: Path, known: set[str]) -> None:
    """Raises ValueError naming what is missing or malformed in a checkpoint directory."""
    config_path, weights_path = path / "config.json", path / "model.safetensors"
    for required in (config_path, weights_path):
        if not required.is_file():
            raise ValueError(f"{path} is not an mdlm_hf checkpoint: {required.name} is missing")
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{config_path} is not valid JSON ({error})") from error
    except RecursionError:  # 100,000 nested brackets: no config
        raise ValueError(f"{config_path} is not a config: its JSON is nested too deeply") from None
    if not isinstance(config, dict) or not isinstance(config.get("vocab"), str):
        raise ValueError(f"{config_path} has no 'vocab' string; was it written by mdlm_hf?")
    check_config_keys(config, config_path, known)


def check_config_keys(config: dict, source: str | Path, known: set[str]) -> None:
    """A ValueError naming every key of a checkpoint's config that is not one of `known`, the model's arguments (a
    typo would else be dropped, and the model built with that option's default)."""
    unknown = sorted(set(config) - known)
    if unknown:
        raise ValueError(
            f"{source} has unknown keys {', '.join(map(repr, unknown))}; MDLM takes {', '.join(sorted(known))}"
        )
