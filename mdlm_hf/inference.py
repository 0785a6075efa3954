"""What every inference path shares: the model in eval mode for the call only, and the checks of its arguments."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
import torch.nn as nn

from mdlm_hf.checks import described, is_int


@contextlib.contextmanager
def evaluating(model: nn.Module) -> Iterator[nn.Module]:
    """The model in eval mode inside the block, and back in the mode it had after it, an error raised or not."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


INTEGER_DTYPES = (torch.long, torch.int32, torch.int16, torch.uint8, torch.int8)


def check_token_ids(
    tokens: object,
    model: nn.Module,
    name: str = "tokens",
    dims: tuple[int, ...] = (1,),
    masks: bool = False,
    values: bool = True,
    same_device: bool = False,
) -> None:
    """A ValueError naming what is wrong with a tensor of token ids: its type, dtype, rank, emptiness, device (meta
    always; another than the model's where `same_device`: a caller that moves them itself accepts any), or, with
    `values`, ids outside the model's vocabulary (the mask id too unless `masks`: scored text holds characters)."""
    if not isinstance(tokens, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor of token ids, got {type(tokens).__name__}")
    if tokens.dtype not in INTEGER_DTYPES:
        raise ValueError(f"{name} must hold integer token ids (torch.long), got dtype {tokens.dtype}")
    if tokens.dim() not in dims or tokens.numel() == 0:
        shapes = " or ".join(("(T,)", "(B, T)")[d - 1] for d in dims)
        raise ValueError(f"{name} must be a non-empty {shapes} tensor of token ids, got shape {tuple(tokens.shape)}")
    device = next(model.parameters()).device
    if tokens.device.type == "meta" or (same_device and tokens.device != device):
        raise ValueError(f"{name} are on {tokens.device} but the model is on {device}: move them with .to('{device}')")
    if not values:
        return
    highest = model.mask_id if masks else model.mask_id - 1
    low, high = int(tokens.min()), int(tokens.max())
    if low >= 0 and high == model.mask_id and not masks:
        raise ValueError(f"{name} hold the mask id ({model.mask_id}), which is no character: pass text without masks")
    if low < 0 or high > highest:
        raise ValueError(f"the ids of {name} must lie in [0, {highest}], got ids from {low} to {high}")


# the most draws (elbo's num_samples, accuracy_by_mask_ratio's num_windows) a scoring call takes: each is a forward
# pass per window, so 10,000 already runs for minutes on a CPU, and a typo's 10**8 would run for days
MAX_DRAWS = 10_000


def check_integer(value: object, name: str) -> None:
    """A ValueError unless `value` is an integer (not a bool) >= 1."""
    if not is_int(value) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {described(value)}")


def check_draws(value: object, name: str, each: str) -> None:
    """A ValueError unless `value` is an integer from 1 to MAX_DRAWS; `each` says what one draw costs."""
    check_integer(value, name)
    if value > MAX_DRAWS:
        raise ValueError(f"{name} must be at most {MAX_DRAWS:,} ({each}), got {value:,}")


def check_flag(value: object, name: str) -> None:
    """A ValueError unless `value` is True or False (a truthy string or number would pass for True)."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {described(value)}")


def check_model(model: object, call: str, rest: str) -> None:
    """A TypeError when a module-level function's first argument is not a model (the arguments swapped, or None); a
    ValueError when its weights are on meta, which holds no data."""
    if not isinstance(model, nn.Module):
        got = "None" if model is None else f"a {type(model).__name__}"
        raise TypeError(f"{call} takes the model first: {call}(model, {rest}), got {got}")
    first = next(model.parameters(), None)
    if first is not None and first.is_meta:
        raise ValueError(f"{call}: the model's weights are on meta, which holds no data: load them, or move it to cpu")


def shipped_file(model: nn.Module, finder: str) -> Path | None:
    """The file a model's export wrote beside its weights, found by its method `finder` ("word_list_file",
    "casts_file"); None where it has none, or the model has no such method (one built in a notebook, a stand-in)."""
    find = getattr(model, finder, None)
    return find() if callable(find) else None


def predictor(model: nn.Module) -> Callable[..., torch.Tensor]:
    """The pass inference runs: the model's `denoise` (an MDLM's fast path when it is on), else the model itself
    (a stand-in for tests)."""
    return getattr(model, "denoise", model)
