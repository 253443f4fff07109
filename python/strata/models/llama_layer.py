"""A Llama-style decoder layer at decode shapes, in plain PyTorch (bench/llama_layer.py times it
eager, with torch.compile and with backend="strata"; python/tests use it at small sizes).

One new token per sequence (hidden states [B, hidden]) attends over a fixed-length KV cache:

    h   = x + (attention(rms_norm(x) · g1)) · Wo
    out = h + (silu(rms_norm(h) · g2 · W1) ⊙ (rms_norm(h) · g2 · W3)) · W2

with RMSNorm(x) = x · rsqrt(mean(x², -1) + eps), Q/K/V projections, rotary embeddings on q and
k (rotate-half form, tables for the token's position given as inputs), grouped-query attention
(heads query heads share each of kv_heads key/value heads) over the S cached positions plus the
new one, with a numerically safe softmax (F.softmax) scaled by 1/sqrt(head_dim).

Layout choices that keep every product a plain matmul of equal-rank operands: weights are
stored [in, out] (x @ W, no transpose), the key cache is stored transposed, [B, kv_heads,
head_dim, S], and the value cache as [B, kv_heads, S, head_dim]. The layer returns the new
token's key [B, kv_heads, head_dim, 1] and value [B, kv_heads, 1, head_dim] for the caller to
append; it does not mutate the caches, so its shapes are static.
"""
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class LlamaConfig:
    hidden: int = 4096
    heads: int = 32
    kv_heads: int = 8
    head_dim: int = 128
    intermediate: int = 14336
    eps: float = 1e-5
    rope_theta: float = 500000.0


def rotary_tables(cfg, position, dtype=torch.float16, device=None):
    """cos and sin ([head_dim], rotate-half layout) of the rotary embedding at `position`."""
    half = cfg.head_dim // 2
    inv = 1.0 / (cfg.rope_theta ** (torch.arange(half, dtype=torch.float64) / half))
    angles = position * inv
    cos = torch.cat([angles.cos(), angles.cos()]).to(dtype=dtype, device=device)
    sin = torch.cat([angles.sin(), angles.sin()]).to(dtype=dtype, device=device)
    return cos, sin


def rms_norm(x, gain, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * gain


def rotate_half(x, dim):
    """(-x2, x1) for the halves x1, x2 of dimension `dim`."""
    n = x.shape[dim] // 2
    x1 = x.narrow(dim, 0, n)
    x2 = x.narrow(dim, n, n)
    return torch.cat([-x2, x1], dim=dim)


class LlamaDecoderLayer(nn.Module):
    def __init__(self, cfg=None, dtype=torch.float16, device=None, seed=0):
        super().__init__()
        cfg = cfg or LlamaConfig()
        if cfg.heads % cfg.kv_heads or cfg.head_dim % 2:
            raise ValueError("heads must be a multiple of kv_heads and head_dim even")
        self.cfg = cfg
        g = torch.Generator().manual_seed(seed)
        q_out, kv_out = cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim

        def weight(n_in, n_out):
            w = torch.randn(n_in, n_out, generator=g, dtype=torch.float32) / math.sqrt(n_in)
            return nn.Parameter(w.to(dtype=dtype, device=device), requires_grad=False)

        def gain(n):
            w = 1.0 + 0.1 * torch.randn(n, generator=g, dtype=torch.float32)
            return nn.Parameter(w.to(dtype=dtype, device=device), requires_grad=False)

        self.attn_norm = gain(cfg.hidden)
        self.wq = weight(cfg.hidden, q_out)
        self.wk = weight(cfg.hidden, kv_out)
        self.wv = weight(cfg.hidden, kv_out)
        self.wo = weight(q_out, cfg.hidden)
        self.mlp_norm = gain(cfg.hidden)
        self.w1 = weight(cfg.hidden, cfg.intermediate)
        self.w3 = weight(cfg.hidden, cfg.intermediate)
        self.w2 = weight(cfg.intermediate, cfg.hidden)

    def make_inputs(self, batch, cache_len, position=None, seed=1, device=None):
        """x [B, hidden], cos and sin [head_dim], k_cache [B, kv, head_dim, S], v_cache
        [B, kv, S, head_dim], with values of a unit-scale activation and cache."""
        cfg = self.cfg
        dtype = self.wq.dtype
        device = device or self.wq.device
        g = torch.Generator().manual_seed(seed)

        def randn(*shape):
            return torch.randn(*shape, generator=g).to(dtype=dtype, device=device)

        cos, sin = rotary_tables(cfg, cache_len if position is None else position, dtype, device)
        return (randn(batch, cfg.hidden), cos, sin,
                randn(batch, cfg.kv_heads, cfg.head_dim, cache_len),
                randn(batch, cfg.kv_heads, cache_len, cfg.head_dim))

    def forward(self, x, cos, sin, k_cache, v_cache):
        cfg = self.cfg
        b = x.shape[0]
        group = cfg.heads // cfg.kv_heads
        h = rms_norm(x, self.attn_norm, cfg.eps)
        # Projections; q as [B, kv, group, D] rows (one token per head), k as [B, kv, D, 1].
        q = (h @ self.wq).view(b, cfg.kv_heads, group, cfg.head_dim)
        k = (h @ self.wk).view(b, cfg.kv_heads, cfg.head_dim, 1)
        v = (h @ self.wv).view(b, cfg.kv_heads, 1, cfg.head_dim)
        q = q * cos + rotate_half(q, -1) * sin
        k = k * cos.view(-1, 1) + rotate_half(k, -2) * sin.view(-1, 1)
        keys = torch.cat([k_cache, k], dim=-1)        # [B, kv, D, S + 1]
        values = torch.cat([v_cache, v], dim=-2)      # [B, kv, S + 1, D]
        scores = (q @ keys) * (1.0 / math.sqrt(cfg.head_dim))
        attn = F.softmax(scores, dim=-1) @ values     # [B, kv, group, D]
        x = x + attn.reshape(b, cfg.heads * cfg.head_dim) @ self.wo
        h = rms_norm(x, self.mlp_norm, cfg.eps)
        x = x + (F.silu(h @ self.w1) * (h @ self.w3)) @ self.w2
        return x, k, v
