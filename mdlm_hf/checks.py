"""The checks every part of the package shares: what a value is (an int, a number, a finite one), how an error names
a value it refuses, and a sampling seed's one check. They sit below the sampler's options and the model, which
both use them, so no module reaches up into the sampler for a check."""

from __future__ import annotations

import math


def is_int(x: object) -> bool:
    """An int, not a bool."""
    return isinstance(x, int) and not isinstance(x, bool)


def is_number(x: object) -> bool:
    """An int or float, not a bool (True is an int to Python, but no one means 1.0 by it)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def is_finite(x: int | float) -> bool:
    """A number a float holds (an int past about 1.8e308 is not one, and math.isfinite would overflow on it)."""
    try:
        return math.isfinite(x)
    except OverflowError:
        return False


def described(value: object) -> str:
    """How an error names a value it refuses: the repr of a plain value (None, a bool, number or short string), else
    its type's name (a model's or a tensor's repr runs to many lines)."""
    shown = repr(value)
    plain = value is None or isinstance(value, (bool, int, float, str))
    return shown if plain and len(shown) <= 60 else type(value).__name__


def check_seed(seed: object) -> None:
    """The one check of a sampling seed: an integer in [0, 2**63) (torch's generators take no other)."""
    if not is_int(seed) or not 0 <= seed < 2**63:
        raise ValueError(f"seed must be an integer in [0, 2**63), got {described(seed)}")
