"""The key-value cache of a causal model (the autoregressive twin, `MDLM(causal=True)`): each layer's keys and values
of the characters read so far, so that each new character costs a pass over one position, not over the prefix."""

from __future__ import annotations

import torch


class LayerCache:
    """One layer's keys and values (B, nh, T, hd) of the characters a causal model has read so far."""

    def __init__(self) -> None:
        self.keys: torch.Tensor | None = None
        self.values: torch.Tensor | None = None

    @property
    def length(self) -> int:
        """Positions read so far."""
        return 0 if self.keys is None else self.keys.size(-2)

    def extend(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Appends the new positions' keys and values; returns all of them so far."""
        if self.keys is None:
            self.keys, self.values = k, v
        else:
            self.keys, self.values = torch.cat((self.keys, k), dim=-2), torch.cat((self.values, v), dim=-2)
        return self.keys, self.values


class KVCache:
    """What a causal model has read, as every layer's keys and values, so that each new character costs a pass over
    one position instead of the whole prefix. Filled by a first pass over a prompt, then one character a pass."""

    def __init__(self, n_layer: int) -> None:
        self.layers = [LayerCache() for _ in range(n_layer)]

    @property
    def length(self) -> int:
        """Positions read so far."""
        return self.layers[0].length
