"""The Llama-style decoder layer (strata.models) on the CPU: its maths, and the strata backend
running its supported partitions in the reference interpreter, matching eager."""
import logging
import math
import re

import torch
import torch.nn.functional as F

from strata.backend import register
from strata.models import LlamaConfig, LlamaDecoderLayer

register()
SMALL = LlamaConfig(hidden=64, heads=4, kv_heads=2, head_dim=16, intermediate=96)


def reference(layer, x, cos, sin, k_cache, v_cache):
    """The same layer written head by head in float64 (no GQA views, no broadcasting tricks)."""
    c = layer.cfg
    d = {n: p.double() for n, p in layer.named_parameters()}
    x, cos, sin = x.double(), cos.double(), sin.double()
    k_cache, v_cache = k_cache.double(), v_cache.double()

    def norm(v, g):
        return v / torch.sqrt((v * v).mean(-1, keepdim=True) + c.eps) * g

    def rope(v):
        half = c.head_dim // 2
        return v * cos + torch.cat([-v[..., half:], v[..., :half]], -1) * sin

    h = norm(x, d["attn_norm"])
    q, k, v = h @ d["wq"], h @ d["wk"], h @ d["wv"]
    outs = []
    for b in range(x.shape[0]):
        heads = []
        for head in range(c.heads):
            kv = head // (c.heads // c.kv_heads)
            qh = rope(q[b, head * c.head_dim:(head + 1) * c.head_dim])
            kh = rope(k[b, kv * c.head_dim:(kv + 1) * c.head_dim])
            keys = torch.cat([k_cache[b, kv].T, kh[None]], 0)       # [S + 1, D]
            vals = torch.cat([v_cache[b, kv], v[b, kv * c.head_dim:(kv + 1) * c.head_dim][None]])
            p = torch.softmax(keys @ qh / math.sqrt(c.head_dim), 0)
            heads.append(p @ vals)
        outs.append(torch.cat(heads))
    x = x + torch.stack(outs) @ d["wo"]
    h = norm(x, d["mlp_norm"])
    return x + (F.silu(h @ d["w1"]) * (h @ d["w3"])) @ d["w2"]


def test_layer_matches_a_head_by_head_reference():
    layer = LlamaDecoderLayer(SMALL, dtype=torch.float32)
    inputs = layer.make_inputs(batch=3, cache_len=10)
    out, k, v = layer(*inputs)
    assert out.shape == (3, 64) and k.shape == (3, 2, 16, 1) and v.shape == (3, 2, 1, 16)
    torch.testing.assert_close(out.double(), reference(layer, *inputs), atol=1e-4, rtol=1e-4)


def test_strata_backend_on_the_layer_matches_eager(caplog):
    torch._dynamo.reset()
    layer = LlamaDecoderLayer(SMALL, dtype=torch.float32)
    inputs = layer.make_inputs(batch=2, cache_len=8)
    f = torch.compile(layer, backend="strata", options={"cpu": "interpret", "fallback": "eager"})
    with caplog.at_level(logging.INFO, logger="strata"):
        got = f(*inputs)
    want = layer(*inputs)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, atol=1e-4, rtol=1e-4)
    msgs = [r.getMessage() for r in caplog.records if r.name == "strata"]
    summary = [m for m in msgs if "run by strata" in m]
    assert summary and not summary[0].startswith("strata backend: 0 partition"), msgs
    # The MLP (RMSNorm, both projections, SwiGLU, down projection, residual) is one partition.
    mlp = [m for m in msgs if "reference interpreter" in m and "silu" in m]
    assert mlp and int(re.search(r"\((\d+) ops", mlp[0]).group(1)) >= 12, msgs
    torch._dynamo.reset()
