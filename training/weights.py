"""The weights an export ships: as trained (fp32), or rounded to bf16 when that costs almost nothing on the
validation split, measured with the same masks for both (a paired difference).
"""

from __future__ import annotations

import copy
from pathlib import Path

import torch

from mdlm_hf import MDLM
from mdlm_hf.hub import save_weights
from mdlm_hf.objectives import objective_of

WEIGHTS_DTYPES = ("auto", "float32", "bfloat16")

ELBO_SAMPLES = 4  # mask draws per validation window in the exported metrics

BF16_TOLERANCE = 0.003  # nats/char a bf16 weights file may cost on the validation split; beyond it ship fp32


def bf16_rounded(model: MDLM) -> MDLM:
    """A copy whose parameters are what a bf16 weights file loads back as: rounded to bf16, upcast to fp32."""
    rounded = copy.deepcopy(model)  # keeps the embedding/output tie
    for p in rounded.parameters():
        p.data = p.data.to(torch.bfloat16).float()
    return rounded


def choose_weights(model: MDLM, val_text: str, weights_dtype: str = "auto") -> tuple[MDLM, dict, float | None]:
    """The model to ship (as is, or bf16-rounded), the measurement behind the choice, and the shipped one's
    validation score (None where none was measured). "auto" takes bf16, half the download, when its validation score
    (the same masks for both) is at most BF16_TOLERANCE worse."""
    if weights_dtype not in WEIGHTS_DTYPES:
        raise ValueError(f"weights dtype must be one of {WEIGHTS_DTYPES}, got {weights_dtype!r}")
    if weights_dtype == "float32":
        return model, {"weights_dtype": weights_dtype}, None
    rounded = bf16_rounded(model)
    if weights_dtype == "bfloat16":
        return rounded, {"weights_dtype": weights_dtype}, None
    tokens = torch.tensor(model.tokenizer.encode(val_text), dtype=torch.long)
    candidates = (("float32", model), ("bfloat16", rounded))
    objective = objective_of(model)
    nats = {  # the same masks for both (seed 0): a paired difference, the rounding its only change
        name: objective.validation_nats(candidate.eval(), tokens, ELBO_SAMPLES, torch.Generator().manual_seed(0))
        for name, candidate in candidates
    }
    chosen = "bfloat16" if nats["bfloat16"] - nats["float32"] <= BF16_TOLERANCE else "float32"
    facts = {"weights_dtype": chosen, **{f"{objective.score}_{name}_weights": v for name, v in nats.items()}}
    return (rounded if chosen == "bfloat16" else model), facts, nats[chosen]


def write_weights(model: MDLM, directory: Path, weights_dtype: str) -> None:
    """Rewrites model.safetensors with bf16 tensors (from_pretrained upcasts them); fp32 stays as saved."""
    if weights_dtype == "bfloat16":
        half = copy.deepcopy(model).to(torch.bfloat16)
        save_weights(half, directory / "model.safetensors")  # with the checksum loading checks
