"""The exact likelihood of either kind of model, character by character: a diffusion model's chain of reveals
(mdlm_hf.diffusion), an autoregressive twin's one pass a window (mdlm_hf.autoregressive). Each call checks its
arguments, then asks the model's objective (mdlm_hf/objectives.py) for its own way of scoring: the functions it calls
there check nothing again."""

from __future__ import annotations

from collections.abc import Iterator

import torch
import torch.nn as nn

from mdlm_hf.checks import described, is_int
from mdlm_hf.inference import check_flag, check_integer, check_model, check_token_ids
from mdlm_hf.objectives import objective_of


def check_order(model: nn.Module, order: object) -> None:
    """A ValueError unless `model` can be scored in `order` (a twin: left to right only)."""
    orders = objective_of(model).nll_orders
    if order not in orders:
        only = " (an autoregressive model reads left to right only)" if len(orders) == 1 else ""
        raise ValueError(f"order must be one of {orders}{only}, got {described(order)}")


def check_context(model: nn.Module, context: object) -> None:
    """A ValueError unless `context` (the characters left-to-right scoring keeps before those it scores past the
    model's context) is None or an integer in [0, block_size)."""
    if context is not None and not (is_int(context) and 0 <= context < model.block_size):
        below = model.block_size
        raise ValueError(f"context must be in [0, block_size): an integer below {below}, got {described(context)}")


def exact_nll(
    model: nn.Module, tokens: torch.Tensor, order: str = "left_to_right", batch_size: int = 64, progress: bool = False
) -> float:
    """Exact negative log-likelihood in nats per char of a 1-D `tokens`, in block_size windows side by side:
    `mdlm_hf.diffusion.exact_nll`'s chain of reveals, or an autoregressive twin's own NLL."""
    check_model(model, "exact_nll", "tokens")
    check_order(model, order)
    check_token_ids(tokens, model)
    check_integer(batch_size, "batch_size")
    check_flag(progress, "progress")
    return objective_of(model).exact_nll(model, tokens, order, batch_size, progress)


def char_nll(model: nn.Module, tokens: torch.Tensor, order: str = "left_to_right") -> torch.Tensor:
    """-log p, in nats, of each character of a 1-D `tokens` of at most block_size given those before it in `order`
    (its mean is `exact_nll`); (n,) on the CPU."""
    check_model(model, "char_nll", "tokens")
    check_order(model, order)
    if isinstance(tokens, torch.Tensor) and tokens.dim() == 1 and tokens.numel() > model.block_size:
        raise ValueError(f"char_nll expects a 1-D tensor of 1 to block_size ({model.block_size}) token ids")
    check_token_ids(tokens, model)
    return objective_of(model).char_nats(model, tokens, order)


def surprise_steps(
    model: nn.Module, tokens: torch.Tensor, batch_size: int = 32, context: int | None = None, fast: bool = False
) -> Iterator[torch.Tensor]:
    """-log p, in nats, of each character of a 1-D `tokens` of any length given those before it, as (n,) nats so far
    after each forward pass (NaN where not scored yet); see `mdlm_hf.diffusion.surprise_steps` for `context` and
    `fast`. An autoregressive twin scores every character in its one step."""
    check_model(model, "surprise_steps", "tokens")
    check_token_ids(tokens, model)
    check_integer(batch_size, "batch_size")
    check_flag(fast, "fast")
    check_context(model, context)
    return objective_of(model).surprise_steps(model, tokens, batch_size, context, fast)
