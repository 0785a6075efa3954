"""Loading a model and what comes with it (its word list and demo.json), and the warm-up pass."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import torch

from mdlm_hf import MDLM
from mdlm_hf.data import file_in_folder
from mdlm_hf.metrics import load_word_list
from mdlm_hf.objectives import check_twin
from mdlm_hf.sampling.casts import model_casts
from mdlm_hf.sampling.lexicon import model_lexicon

DEFAULT_MODEL = Path(__file__).resolve().parent.parent / "pretrained" / "mdlm-shakespeare-char"
MODEL_ENV_VAR = "MDLM_MODEL"
# the model's autoregressive twin, Compare's third side; "" or "none": no twin
DEFAULT_TWIN = DEFAULT_MODEL.with_name("mdlm-shakespeare-char-ar")
TWIN_ENV_VAR = "MDLM_TWIN"
NO_TWIN = ("", "none")
DEMO_FILE = "demo.json"  # beside the weights: the texts the app shows for this model (see DemoText)


def optional_file(source: str | os.PathLike, name: str) -> Path | None:
    """A file beside the model's weights in a directory (never one that resolves outside it) or Hub repo, or None
    when it has none."""
    if Path(source).expanduser().is_dir():
        return file_in_folder(source, name)
    try:
        from huggingface_hub import hf_hub_download

        path = Path(hf_hub_download(str(source), name))
    except Exception:  # optional: the app does without it
        return None
    return path if path.is_file() else None


def load_model(source: str | os.PathLike, device: str = "cpu") -> tuple[MDLM, set[str] | None]:
    """Loads a model onto `device` and its training word list (None when the model has none) from a directory or
    repo id."""
    model = MDLM.from_pretrained(source).to(device).eval()
    check_twin(model, None)
    words_path = optional_file(source, "words.txt")  # without it the valid-word metric shows n/a
    return model, load_word_list(words_path) if words_path is not None else None


def default_twin(model_source: str | os.PathLike) -> str:
    """The twin the app pairs with a model when none is named: the shipped twin beside the shipped model (where this
    checkout has it), else none, since another model's twin is not known."""
    shipped = Path(model_source).expanduser().resolve() == DEFAULT_MODEL and DEFAULT_TWIN.is_dir()
    return str(DEFAULT_TWIN) if shipped else "none"


def load_twin(source: str | os.PathLike, model: MDLM, device: str = "cpu") -> MDLM | None:
    """The autoregressive twin from a directory or repo id onto `device`, checked against `model`; None for "" or
    "none" (no twin)."""
    if str(source).strip().lower() in NO_TWIN:
        return None
    twin = MDLM.from_pretrained(source).to(device).eval()
    check_twin(model, twin)
    return twin


def load_demo_metadata(source: str | os.PathLike) -> dict | None:
    """The model's demo.json (its subject, prompt, infill examples and sample text), or None when it has none or
    it is not a JSON object."""
    path = optional_file(source, DEMO_FILE)
    try:
        metadata = json.loads(path.read_text(encoding="utf-8")) if path is not None else None
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return metadata if isinstance(metadata, dict) else None


def mcp_available() -> bool:
    """Whether gradio's MCP extra is installed (its dependency, the `mcp` module), so the app can serve its
    endpoints as tools for agents."""
    return importlib.util.find_spec("mcp") is not None


@torch.no_grad()
def warm_up(model: MDLM) -> None:
    """One full-length pass (the fast path times fp32 against bf16 and makes its copy, about a second on a CPU) and
    the tables of its word list and casts, so that the first visitor's run does not pay for them."""
    device = next(model.parameters()).device
    model.denoise(torch.full((1, model.block_size), model.mask_id, device=device))
    if model.word_list_file() is not None:
        model_lexicon(model).prepare()
    if model.casts_file() is not None:
        model_casts(model).prepare()
