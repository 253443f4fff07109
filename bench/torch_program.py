"""A `.strata` program (bench/strata_program.py) as PyTorch code: the PyTorch baselines of the
suite (bench/suite_bench.py), derived from the program file alone.

- `function(program)` is a Python function of the program's inputs that runs one torch call
  per op (composites softmax and layer_norm as torch.softmax and F.layer_norm, rms_norm over
  the last dim as F.rms_norm) and returns the outputs as a tuple. Called on fp16 tensors it is
  the eager baseline and what torch.compile compiles; called on float64 copies it is the
  reference every system is checked against.
- `sdpa_function(program)` is the same function with every attention pattern
  `matmul(softmax(mul_scalar(matmul(Q, transpose(K)), c), dim=-1), V)` (the scale may also be
  absent or applied to Q) computed by `scaled_dot_product_attention(scale=c)` under the flash
  backend, or None when the program has no such pattern. Q [..., M, D], K [..., N, D] and
  V [..., N, Dv] of rank r are given to it as [B, H, ·, D] (rank 4 as is; rank 3 as [B, 1, ·, D],
  the GQA packing of the suite: one KV head with its G·T query rows per batch index).
- `make_inputs(program, seed)` draws the inputs by their recipes (strata_program.py).
"""

import math

import torch
import torch.nn.functional as F

from strata_program import attention_patterns


TORCH_DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}


def _grouped(reduce, x, dim, to):
    """`reduce` over groups of n/to consecutive elements of dim (to = 1: the whole dim)."""
    if to == 1:
        return reduce(x, dim)
    n = x.shape[dim]
    return reduce(x.unflatten(dim, (to, n // to)), dim + 1).squeeze(dim + 1)


def _sum(x, dim):
    return torch.sum(x, dim=dim, keepdim=True)


def _mean(x, dim):
    return torch.mean(x, dim=dim, keepdim=True)


def _max(x, dim):
    return torch.amax(x, dim=dim, keepdim=True)


def _all_reduce(x):
    """The sum over the ranks of the default process group (torch.distributed, NCCL on GPUs);
    without one, the sum over a single rank: x itself."""
    dist = getattr(torch, "distributed", None)
    if dist is not None and dist.is_available() and dist.is_initialized():
        y = x.clone()
        dist.all_reduce(y)
        return y
    return x


def _rms_norm(x, dim, eps):
    if dim == x.dim() - 1:
        return F.rms_norm(x, (x.shape[-1],), eps=eps)
    return x / torch.sqrt(torch.mean(x * x, dim=dim, keepdim=True) + eps)


def _layer_norm(x, dim, eps):
    if dim == x.dim() - 1:
        return F.layer_norm(x, (x.shape[-1],), eps=eps)
    c = x - torch.mean(x, dim=dim, keepdim=True)
    return c / torch.sqrt(torch.mean(c * c, dim=dim, keepdim=True) + eps)


# Per op: f(inputs, attrs) -> tensor. strata's gelu is the tanh form (docs/mugraph-semantics.md).
OPS = {
    "matmul": lambda t, a: torch.matmul(t[0], t[1]),
    "exp": lambda t, a: torch.exp(t[0]),
    "square": lambda t, a: t[0] * t[0],
    "sqrt": lambda t, a: torch.sqrt(t[0]),
    "silu": lambda t, a: F.silu(t[0]),
    "gelu": lambda t, a: F.gelu(t[0], approximate="tanh"),
    "relu": lambda t, a: torch.relu(t[0]),
    "sigmoid": lambda t, a: torch.sigmoid(t[0]),
    "tanh": lambda t, a: torch.tanh(t[0]),
    "log": lambda t, a: torch.log(t[0]),
    "mul_scalar": lambda t, a: t[0] * a["scalar"],
    "add_scalar": lambda t, a: t[0] + a["scalar"],
    "clamp": lambda t, a: torch.clamp(t[0], a["lo"], a["hi"]),
    "add": lambda t, a: t[0] + t[1],
    "sub": lambda t, a: t[0] - t[1],
    "mul": lambda t, a: t[0] * t[1],
    "div": lambda t, a: t[0] / t[1],
    "pow": lambda t, a: torch.pow(t[0], t[1]),
    "maximum": lambda t, a: torch.maximum(t[0], t[1]),
    "minimum": lambda t, a: torch.minimum(t[0], t[1]),
    "sum": lambda t, a: _grouped(_sum, t[0], a["dim"], a["to"]),
    "mean": lambda t, a: _grouped(_mean, t[0], a["dim"], a["to"]),
    "max": lambda t, a: _grouped(_max, t[0], a["dim"], a["to"]),
    "rms_norm": lambda t, a: _rms_norm(t[0], a["dim"], a["eps"]),
    "concat": lambda t, a: torch.cat([t[0], t[1]], dim=a["dim"]),
    "transpose": lambda t, a: t[0].transpose(-1, -2),
    "slice": lambda t, a: t[0].narrow(a["dim"], a["start"], a["end"] - a["start"]),
    "all_reduce": lambda t, a: _all_reduce(t[0]),
    "softmax": lambda t, a: torch.softmax(t[0], dim=a["dim"]),
    "layer_norm": lambda t, a: _layer_norm(t[0], a["dim"], a["eps"]),
}


def _steps(program, replaced=None):
    """(function, input names, attrs, result name) per op, with `replaced` ops (result name ->
    (function, input names)) in place of theirs and the ops they alone feed left out."""
    replaced = replaced or {}
    skip = set()
    for out, (_, _, dead) in replaced.items():
        skip |= dead
    steps = []
    for op in program.ops:
        if op.out in skip:
            continue
        if op.out in replaced:
            fn, ins, _ = replaced[op.out]
            steps.append((fn, ins, {}, op.out))
        else:
            steps.append((OPS[op.kind], op.inputs, op.attrs, op.out))
    return steps


def _make(program, steps):
    names = [t.name for t in program.inputs]
    outputs = list(program.outputs)

    def run(*inputs):
        env = dict(zip(names, inputs))
        for fn, ins, attrs, out in steps:
            env[out] = fn([env[n] for n in ins], attrs)
        return tuple(env[o] for o in outputs)

    run.__name__ = program.name.replace("-", "_")
    return run


def function(program):
    """The program op for op in PyTorch (module docstring)."""
    return _make(program, _steps(program))


# ---- attention through scaled_dot_product_attention ------------------------------------


def _as_bhnd(x):
    while x.dim() < 4:
        x = x.unsqueeze(0 if x.dim() < 3 else 1)
    return x


def _sdpa(scale, rank, backend):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    chosen = getattr(SDPBackend, backend)

    def fn(t, _attrs):
        q, k, v = (_as_bhnd(x) for x in t)
        with sdpa_kernel(chosen):
            o = F.scaled_dot_product_attention(q, k, v, scale=scale)
        if rank == 3:
            return o.squeeze(1)
        return o.reshape(o.shape[-2:]) if rank == 2 else o

    return fn


def sdpa_function(program, backend="FLASH_ATTENTION"):
    """The program with its attention patterns on SDPA restricted to `backend` (a member of
    torch.nn.attention.SDPBackend; the flash backend by default, MATH for tests on the CPU),
    or None when it has none."""
    patterns = attention_patterns(program)
    if not patterns:
        return None
    replaced = {}
    for pat in patterns:
        rank = len(program.tensors[pat["q"]].shape)
        replaced[pat["out"]] = (_sdpa(pat["scale"], rank, backend), [pat["q"], pat["k"], pat["v"]],
                                pat["dead"])
    return _make(program, _steps(program, replaced))


# ---- inputs -----------------------------------------------------------------------------


def _rope_table(shape, theta, fn):
    d = shape[-1]
    half = d // 2
    i = torch.arange(d, dtype=torch.float64) % half
    inv_freq = theta ** (-2.0 * i / d)
    pos = torch.arange(shape[0], dtype=torch.float64)
    angles = pos.view(-1, *([1] * (len(shape) - 1))) * inv_freq
    return fn(angles).expand(shape).contiguous()


def draw(recipe, shape, generator):
    """float32 CPU values of one input by its recipe (strata_program.Recipe)."""
    k, a = recipe.kind, recipe.args

    def randn():
        return torch.randn(shape, generator=generator, dtype=torch.float32)

    if k == "normal":
        return randn() * a[0]
    if k == "weight":
        fan_in = shape[-2] if len(shape) >= 2 else shape[-1]
        return randn() / math.sqrt(fan_in)
    if k == "gain":
        return 1.0 + 0.1 * randn()
    if k == "uniform":
        return torch.rand(shape, generator=generator, dtype=torch.float32) * (a[1] - a[0]) + a[0]
    if k == "rope_cos":
        return _rope_table(shape, a[0], torch.cos).float()
    if k == "rope_sin":
        return _rope_table(shape, a[0], torch.sin).float()
    raise ValueError(f"unknown recipe {k!r}")


def make_inputs(program, seed=0, device="cuda"):
    """The program's inputs by their recipes, in their dtypes, on `device` (deterministic for a
    seed: each input draws from its own generator, seeded by the seed and its position)."""
    out = []
    for i, t in enumerate(program.inputs):
        g = torch.Generator(device="cpu").manual_seed(seed * 1000003 + i)
        x = draw(program.recipe(t.name), t.shape, g)
        out.append(x.to(device=device, dtype=TORCH_DTYPES[t.dtype]).contiguous())
    return out
