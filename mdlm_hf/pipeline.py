"""The text API: strings in, strings out, over the one sampler core (`mdlm_hf.sampler.sample`).

Every function takes a model (anything with `tokenizer`, `block_size` and `mask_id`, such as `MDLM`),
then `options` (default: the sampling study's recommendation, `SamplerOptions()`) and single options by
name, plus `seed` or `generator`: `complete(model, "ROMEO:\\n", 200, num_steps=32, seed=0)`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
import torch.nn as nn

from mdlm_hf.sampler import SamplerOptions, SamplerState, check_length, final_state, sample


def check_text(value: object, name: str) -> None:
    """A ValueError naming the argument when a prompt or template is not a string."""
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string, got {type(value).__name__} {value!r}")


def text_to_canvas(model: nn.Module, text: str, blank: str = "_") -> torch.Tensor:
    """Encodes `text`, turning each `blank` character into [MASK]; (T,) ids."""
    check_text(text, "template")
    if not isinstance(blank, str) or len(blank) != 1:
        raise ValueError(f"blank must be a single character, got {blank!r}")
    if not text:
        raise ValueError("template is empty")
    check_length(len(text), model.block_size, "template")
    if blank not in text:
        raise ValueError(f"template has no blank: mark each character to fill with {blank!r}")
    tokenizer = model.tokenizer
    tokenizer.encode(text.replace(blank, ""))  # raises, naming every unknown character
    ids = [tokenizer.mask_id if c == blank else tokenizer.char_to_id[c] for c in text]
    return torch.tensor(ids, dtype=torch.long)


def prompt_canvas(model: nn.Module, prompt: str, length: int) -> torch.Tensor:
    """The prompt's ids followed by `length` masks; (T,) ids."""
    check_text(prompt, "prompt")
    if not isinstance(length, int) or isinstance(length, bool) or length < 1:
        raise ValueError(f"length must be an integer >= 1, got {length!r}")
    check_length(len(prompt) + length, model.block_size, "prompt + length")
    return torch.tensor(model.tokenizer.encode(prompt) + [model.tokenizer.mask_id] * length, dtype=torch.long)


def stream(
    model: nn.Module, template: str, blank: str = "_", options: SamplerOptions | None = None, **overrides: Any
) -> Iterator[SamplerState]:
    """Every intermediate state while filling the `blank` characters of `template`."""
    return sample(model, text_to_canvas(model, template, blank), options, **overrides)


def infill(
    model: nn.Module, template: str, blank: str = "_", options: SamplerOptions | None = None, **overrides: Any
) -> str:
    """The template with every `blank` character filled in; other characters stay exactly as given."""
    return model.tokenizer.decode(final_state(stream(model, template, blank, options, **overrides)).tokens[0])


def complete(
    model: nn.Module, prompt: str, length: int, options: SamplerOptions | None = None, **overrides: Any
) -> str:
    """The prompt followed by `length` generated characters."""
    states = sample(model, prompt_canvas(model, prompt, length), options, **overrides)
    return model.tokenizer.decode(final_state(states).tokens[0])


def generate(
    model: nn.Module, length: int | None = None, options: SamplerOptions | None = None, **overrides: Any
) -> str:
    """`length` characters (default: the model's block_size) from an all-mask canvas."""
    return complete(model, "", model.block_size if length is None else length, options, **overrides)
