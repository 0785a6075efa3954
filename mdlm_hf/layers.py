"""The transformer's layers: rotary attention (bidirectional, or causal with a key-value cache), MLP, block, and
the mask ratio's embedding; `mdlm_hf.model.MDLM` stacks them.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from mdlm_hf.kv_cache import LayerCache


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


def make_norm(kind: str, n_embd: int) -> nn.Module:
    """The norm a config names: RMSNorm (computed in fp32) or LayerNorm."""
    return RMSNorm(n_embd) if kind == "rmsnorm" else nn.LayerNorm(n_embd)


# bf16 on a CPU at the sampler's sizes: two batched matmuls and a softmax beat SDPA's flash kernel; in fp32 the fused
# kernel wins, and for big batches or long canvases its memory use does: the plain way holds all B x nh x T x T
# scores at once (2**24 of them: 32 MB in bf16)
PLAIN_ATTENTION_MAX_SCORES = 2**24


def uses_plain_attention(q: torch.Tensor) -> bool:
    """Whether attention over `q` (B, nh, T, hd) runs as plain matmuls: bf16 inference on a CPU, few scores."""
    B, nh, T, _ = q.shape
    return q.dtype == torch.bfloat16 and q.device.type == "cpu" and B * nh * T * T <= PLAIN_ATTENTION_MAX_SCORES


def plain_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False) -> torch.Tensor:
    """softmax(q k^T / sqrt(hd)) v for (B, nh, T, hd) tensors, `is_causal` as SDPA's: its maths, unfused."""
    scores = (q * q.size(-1) ** -0.5) @ k.transpose(-2, -1)  # (B, nh, T, T)
    if is_causal:
        T = q.size(-2)
        scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return scores.softmax(dim=-1) @ v  # (B, nh, T, hd)


class SelfAttention(nn.Module):
    """Multi-head self-attention: every position sees the whole canvas, or with `causal` the positions up to its own."""

    def __init__(
        self,
        n_embd: int,
        n_head: int,
        dropout: float,
        rotary: RotaryEmbedding | None,
        qk_norm: bool = False,
        causal: bool = False,
    ) -> None:
        super().__init__()
        self.n_head = n_head
        self.causal = causal
        self.qkv = nn.Linear(n_embd, 3 * n_embd, bias=False)
        # QK-norm: unit-RMS queries and keys keep attention logits bounded at high learning rates
        self.q_norm = RMSNorm(n_embd // n_head) if qk_norm else None
        self.k_norm = RMSNorm(n_embd // n_head) if qk_norm else None
        self.proj = nn.Linear(n_embd, n_embd, bias=False)
        self.proj.is_residual_projection = True
        self.dropout = dropout
        self.resid_dropout = nn.Dropout(dropout)
        self.rotary = rotary

    def forward(self, x: torch.Tensor, cache: LayerCache | None = None) -> torch.Tensor:
        """Attention over x (B, T, C); with `cache`, after the keys and values it holds, which it then extends."""
        B, T, C = x.shape
        start = 0 if cache is None else cache.length  # the position of x's first row
        q, k, v = self.qkv(x).split(C, dim=2)  # 3 x (B, T, C)
        q, k, v = (z.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for z in (q, k, v))  # (B, nh, T, hd)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        if self.rotary is not None:
            q, k = self.rotary(q, start), self.rotary(k, start)
        if cache is not None:
            k, v = cache.extend(k, v)  # (B, nh, start + T, hd)
        # one new position after a cached prefix sees it all; SDPA's causal mask is right only from position 0
        is_causal = self.causal and T > 1
        if self.training or not uses_plain_attention(q):
            dropout = self.dropout if self.training else 0.0
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, is_causal=is_causal)
        else:
            y = plain_attention(q, k, v, is_causal)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, C)
        return self.resid_dropout(self.proj(y))


def mlp_hidden(n_embd: int, kind: str) -> int:
    """SwiGLU has two input matrices, so its hidden width is 2/3 of 4*C to keep the parameter count."""
    return 64 * math.ceil(8 * n_embd / 3 / 64) if kind == "swiglu" else 4 * n_embd


class MLP(nn.Module):
    """Position-wise feed-forward: GELU (GPT-2), ReLU^2 (modded-nanoGPT) or SwiGLU (LLaMA) at equal parameters."""

    def __init__(self, n_embd: int, dropout: float, kind: str = "gelu") -> None:
        super().__init__()
        self.kind = kind
        hidden = mlp_hidden(n_embd, kind)
        self.fc = nn.Linear(n_embd, 2 * hidden if kind == "swiglu" else hidden, bias=False)
        self.proj = nn.Linear(hidden, n_embd, bias=False)
        self.proj.is_residual_projection = True
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, T, C) through the position-wise feed-forward."""
        h = self.fc(x)  # (B, T, H) or (B, T, 2H) for SwiGLU
        if self.kind == "swiglu":
            gate, value = h.chunk(2, dim=-1)
            h = F.silu(gate) * value
        elif self.kind == "relu2":
            h = F.relu(h).square()
        else:
            h = F.gelu(h)
        return self.dropout(self.proj(h))  # (B, T, C)


class Block(nn.Module):
    """Pre-norm transformer block."""

    def __init__(
        self,
        n_embd: int,
        n_head: int,
        dropout: float,
        rotary: RotaryEmbedding | None,
        norm: str = "layernorm",
        mlp: str = "gelu",
        qk_norm: bool = False,
        causal: bool = False,
    ) -> None:
        super().__init__()
        self.ln_1 = make_norm(norm, n_embd)
        self.attn = SelfAttention(n_embd, n_head, dropout, rotary, qk_norm, causal)
        self.ln_2 = make_norm(norm, n_embd)
        self.mlp = MLP(n_embd, dropout, mlp)

    def forward(self, x: torch.Tensor, cache: LayerCache | None = None) -> torch.Tensor:
        """One pre-norm residual block: attention, then MLP."""
        x = x + self.attn(self.ln_1(x), cache)
        return x + self.mlp(self.ln_2(x))


class TimeEmbedding(nn.Module):
    """Sinusoidal features of the mask ratio t, then an MLP; only used when time conditioning is on."""

    def __init__(self, n_embd: int, n_freq: int = 64) -> None:
        super().__init__()
        self.n_freq = n_freq
        self.mlp = nn.Sequential(nn.Linear(2 * n_freq, n_embd), nn.SiLU(), nn.Linear(n_embd, n_embd))

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        """Features (B, C) of the mask ratio t (B,)."""
        # angles reach 1000 rad, so they are computed in fp32 on every call (a bf16 buffer, as in the fast path's
        # copy, would be off by radians); the features then take the MLP's dtype
        freqs = torch.exp(-math.log(1000.0) * torch.arange(self.n_freq, device=t.device) / self.n_freq)
        angles = 1000.0 * t[:, None].float() * freqs[None, :]  # (B, n_freq)
        features = torch.cat([angles.sin(), angles.cos()], dim=-1).to(self.mlp[0].weight.dtype)
        return self.mlp(features)  # (B, C)
