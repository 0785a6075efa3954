"""The transformer's layers: rotary attention (with the mask a pass is given, and a key-value cache), the ReLU^2 MLP
and the pre-norm block; mdlm_hf/network.py stacks them. Only torch is imported here.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class RotaryEmbedding(nn.Module):
    """Rotary position embedding: relative offsets enter attention directly, so locality is easy to learn."""

    def __init__(self, head_dim: int, max_len: int, base: float = 10000.0) -> None:
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2).float() / head_dim))  # (hd/2,)
        angles = torch.outer(torch.arange(max_len).float(), inv_freq).repeat(1, 2)  # (T, hd), halves share angles
        # not persistent: derived from the config, so it stays out of the weights file
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, x: torch.Tensor, start: int = 0) -> torch.Tensor:
        """Rotates channel i with channel i + hd/2 of x (B, nh, T, hd) by the angle of its position, start + 0..T-1."""
        T, half = x.size(-2), x.size(-1) // 2
        rotated_half = torch.cat((-x[..., half:], x[..., :half]), dim=-1)  # (B, nh, T, hd)
        cos, sin = self.cos[start : start + T].to(x.dtype), self.sin[start : start + T].to(x.dtype)
        return x * cos + rotated_half * sin


class RMSNorm(nn.RMSNorm):
    """RMSNorm computed in fp32, as autocast does for LayerNorm (a bf16 input would miss the fused kernel)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, T, C) normalised over C in fp32, returned in x's dtype."""
        weight = None if self.weight is None else self.weight.float()  # bf16 weights (the fast path) too
        return F.rms_norm(x.float(), self.normalized_shape, weight, self.eps).type_as(x)


class LayerCache:
    """One layer's keys and values (B, nh, T, hd) of the positions a causal pass has read so far."""

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


# bf16 on a CPU at the sampler's sizes: two batched matmuls and a softmax beat SDPA's flash kernel; in fp32 the fused
# kernel wins, and for big batches or long canvases its memory use does: the plain way holds all B x nh x T x T
# scores at once (2**24 of them: 32 MB in bf16)
PLAIN_ATTENTION_MAX_SCORES = 2**24


def uses_plain_attention(q: torch.Tensor) -> bool:
    """Whether attention over `q` (B, nh, T, hd) runs as plain matmuls: bf16 inference on a CPU, few scores."""
    B, nh, T, _ = q.shape
    return q.dtype == torch.bfloat16 and q.device.type == "cpu" and B * nh * T * T <= PLAIN_ATTENTION_MAX_SCORES


def plain_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    is_causal: bool = False,
    attn_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """softmax(q k^T / sqrt(hd)) v for (B, nh, T, hd) tensors, `is_causal` and a bool `attn_mask` as SDPA's: its
    maths, unfused."""
    scores = (q * q.size(-1) ** -0.5) @ k.transpose(-2, -1)  # (B, nh, T, T)
    if is_causal:
        T = q.size(-2)
        scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf"))
    return scores.softmax(dim=-1) @ v  # (B, nh, T, hd)


class SelfAttention(nn.Module):
    """Multi-head self-attention with RMS-normalised queries and keys, under the mask each pass is given."""

    def __init__(self, n_embd: int, n_head: int, dropout: float, rotary: RotaryEmbedding) -> None:
        super().__init__()
        self.n_head = n_head
        self.qkv = nn.Linear(n_embd, 3 * n_embd, bias=False)
        # QK-norm: unit-RMS queries and keys keep attention logits bounded at high learning rates
        self.q_norm = RMSNorm(n_embd // n_head)
        self.k_norm = RMSNorm(n_embd // n_head)
        self.proj = nn.Linear(n_embd, n_embd, bias=False)
        self.proj.is_residual_projection = True
        self.dropout = dropout
        self.resid_dropout = nn.Dropout(dropout)
        self.rotary = rotary

    def forward(
        self,
        x: torch.Tensor,
        cache: LayerCache | None = None,
        is_causal: bool = False,
        attn_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Attention over x (B, T, C); each position sees every other, or with `is_causal` those up to its own, or
        where the bool `attn_mask` (T, T) is True. With `cache`, after the keys and values it holds, which it then
        extends."""
        B, T, C = x.shape
        start = 0 if cache is None else cache.length  # the position of x's first row
        q, k, v = self.qkv(x).split(C, dim=2)  # 3 x (B, T, C)
        q, k, v = (z.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for z in (q, k, v))  # (B, nh, T, hd)
        q, k = self.q_norm(q), self.k_norm(k)
        q, k = self.rotary(q, start), self.rotary(k, start)
        if cache is not None:
            k, v = cache.extend(k, v)  # (B, nh, start + T, hd)
        # one new position after a cached prefix sees it all; SDPA's causal mask is right only from position 0
        is_causal = is_causal and T > 1
        if self.training or not uses_plain_attention(q):
            dropout = self.dropout if self.training else 0.0
            y = F.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p=dropout, is_causal=is_causal)
        else:
            y = plain_attention(q, k, v, is_causal, attn_mask)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, C)
        return self.resid_dropout(self.proj(y))


class MLP(nn.Module):
    """Position-wise feed-forward with ReLU^2 (modded-nanoGPT), 4x wide."""

    def __init__(self, n_embd: int, dropout: float) -> None:
        super().__init__()
        self.fc = nn.Linear(n_embd, 4 * n_embd, bias=False)
        self.proj = nn.Linear(4 * n_embd, n_embd, bias=False)
        self.proj.is_residual_projection = True
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, T, C) through the position-wise feed-forward."""
        h = F.relu(self.fc(x)).square()  # (B, T, 4C)
        return self.dropout(self.proj(h))  # (B, T, C)


class Block(nn.Module):
    """Pre-norm transformer block: RMSNorm, attention, RMSNorm, MLP, each added to the residual stream."""

    def __init__(self, n_embd: int, n_head: int, dropout: float, rotary: RotaryEmbedding) -> None:
        super().__init__()
        self.ln_1 = RMSNorm(n_embd)
        self.attn = SelfAttention(n_embd, n_head, dropout, rotary)
        self.ln_2 = RMSNorm(n_embd)
        self.mlp = MLP(n_embd, dropout)

    def forward(
        self,
        x: torch.Tensor,
        cache: LayerCache | None = None,
        is_causal: bool = False,
        attn_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """One pre-norm residual block over x (B, T, C): attention under the pass's mask, then MLP."""
        x = x + self.attn(self.ln_1(x), cache, is_causal, attn_mask)
        return x + self.mlp(self.ln_2(x))
