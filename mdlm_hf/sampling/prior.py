"""Each character's probability with nothing known, which `prior_weight` divides the scored orders' scores by.

It extends the reference sampler's [score] line (reference.py).
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn

from mdlm_hf.inference import predictor


def log_mean_probability(logits: torch.Tensor) -> torch.Tensor:
    """log of the softmax of `logits` (T, V) averaged over the T positions (V,)."""
    return logits.float().log_softmax(dim=-1).logsumexp(dim=0) - math.log(logits.size(0))


def character_log_prior(model: nn.Module, length: int, device: torch.device) -> torch.Tensor:
    """Each character's log probability with nothing known (V,): the model's prediction on an all-mask
    canvas of `length`, averaged over positions (the same everywhere with rotary positions)."""
    canvas = torch.full((1, length), model.mask_id, device=device)
    return log_mean_probability(predictor(model)(canvas)[0])
