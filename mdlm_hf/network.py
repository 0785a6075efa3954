"""The network: a transformer over characters, to read in one sitting (in the spirit of nanoGPT's model.py).

    ids (B, T) -> token embedding -> n_layer x Block (RMSNorm, rotary attention, RMSNorm, ReLU^2 MLP) -> RMSNorm
    -> the embedding again, transposed (tied head) -> logits (B, T, V)

It knows nothing of noise, objectives or text: each pass's caller says which positions see which (`is_causal`, or a
bool `attn_mask`), as mdlm_hf/objectives.py decides for each kind of model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn

from mdlm_hf.layers import Block, LayerCache, RMSNorm, RotaryEmbedding


@dataclass(frozen=True)
class NetworkConfig:
    """The network's shape; the defaults are the shipped models' and training's (training/flags.py)."""

    vocab_size: int  # the characters and [MASK]: the embedding's rows and the logits' columns
    block_size: int = 256  # the longest input, in positions (the rotary tables are this long)
    n_layer: int = 6  # blocks
    n_head: int = 4  # attention heads; each gets n_embd // n_head channels, an even number (rotary pairs)
    n_embd: int = 256  # the width of the residual stream
    dropout: float = 0.0  # in attention and after each residual branch; 0 for small data and short training


class KVCache:
    """What a causal pass has read, as every layer's keys and values, so that each new position costs a pass over
    one position instead of the whole prefix. Filled by a first pass over a prompt, then one position a pass."""

    def __init__(self, n_layer: int) -> None:
        self.layers = [LayerCache() for _ in range(n_layer)]

    @property
    def length(self) -> int:
        """Positions read so far."""
        return self.layers[0].length


class Network(nn.Module):
    """The transformer: ids (B, T) in, logits (B, T, V) out, each position seeing what the pass's mask lets it."""

    def __init__(self, config: NetworkConfig) -> None:
        super().__init__()
        self.block_size, self.n_layer = config.block_size, config.n_layer
        C = config.n_embd
        rotary = RotaryEmbedding(C // config.n_head, config.block_size)  # shared: its tables are buffers, no weights
        self.token_embedding = nn.Embedding(config.vocab_size, C)
        self.dropout = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList([Block(C, config.n_head, config.dropout, rotary) for _ in range(config.n_layer)])
        self.ln_f = RMSNorm(C)
        self.lm_head = nn.Linear(C, config.vocab_size, bias=False)
        self.lm_head.weight = self.token_embedding.weight  # weight tying: a character reads and writes one row
        self.apply(self._init_weights)

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            # GPT-2: residual projections scaled down so the residual stream's variance stays put with depth
            std = 0.02 / math.sqrt(2 * self.n_layer) if getattr(module, "is_residual_projection", False) else 0.02
            nn.init.normal_(module.weight, mean=0.0, std=std)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def num_parameters(self) -> int:
        """Number of distinct parameters (tied weights counted once)."""
        return sum(p.numel() for p in self.parameters())

    def forward(
        self,
        tokens: torch.Tensor,
        cache: KVCache | None = None,
        *,
        is_causal: bool = False,
        attn_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Logits (B, T, V) of `tokens` (B, T), in the weights' dtype. Each position sees every other; with
        `is_causal` those up to its own; with `attn_mask` (T, T), bool, the columns its row holds True in. With
        `cache` (a causal pass only) `tokens` follow what it holds, and the pass extends it."""
        B, T = tokens.shape
        start = 0
        if is_causal and attn_mask is not None:
            raise ValueError("a pass takes is_causal or an attn_mask, not both")
        if cache is not None:
            if not isinstance(cache, KVCache):
                raise ValueError(f"cache must be a KVCache or None, got {type(cache).__name__}")
            if not is_causal:
                raise ValueError("a KVCache is for a causal pass: without one, a position sees those not read yet")
            start = cache.length
            if start and T > 1:
                raise ValueError("after a cached prefix a causal pass reads one position at a time")
        if start + T > self.block_size:
            raise ValueError(f"canvas length {start + T} exceeds the model's block_size {self.block_size}")
        x = self.dropout(self.token_embedding(tokens))  # (B, T, C)
        for i, block in enumerate(self.blocks):
            x = block(x, None if cache is None else cache.layers[i], is_causal, attn_mask)  # (B, T, C)
        return self.lm_head(self.ln_f(x))  # (B, T, V)
