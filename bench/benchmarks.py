"""The six paper benchmarks (bench/README.md): PyTorch definitions, input recipes, traffic and
FLOPs.

Each benchmark's `fn` computes exactly the program in examples/programs/<name>_b<b>.strata,
op for op, so the same function serves as the PyTorch eager baseline, as the input to
torch.compile, and (on float64 copies of the inputs) as the reference.

Input recipes keep every intermediate finite in fp16 (see bench/README.md, "Inputs"):
  gqa      Q, K, V ~ 0.3·N(0,1): Q·K has σ ≈ 0.72, so exp(Q·K) ≤ ~40 and each row sum of the
           4096 exponentials stays near 5·10³, far below the fp16 limit 65504.
  qknorm   rms_norm makes the scale of Q and K irrelevant, and unit-RMS rows of length 64
           would give Q·K with σ = 8 (exp overflows). So Q puts its energy in head dims 0..31,
           K in dims 33..63, both have a weaker shared dim 32 (0.5·U(-1,1)) and small
           (0.04·U(-1,1)) values elsewhere: after normalization Q·K has σ ≈ 0.8 and row sums of
           exp stay below ~10⁴ (simulated at b=8). Every head dim contributes to the contraction
           and the softmax weights of one row still span two orders of magnitude.
  rmsnorm  X ~ N(0,1), W ~ 0.02·N(0,1)  (O has σ ≈ 1.3)
  lora     X ~ N(0,1), W, A ~ 0.05·N(0,1), B ~ 0.1·N(0,1)
  gatedmlp X ~ 0.5·N(0,1), W1, W3 ~ 0.02·N(0,1)
  ntrans   H, X ~ N(0,1), Alpha ~ U(0, 0.2)
"""

import ctypes
import math
import sys
from pathlib import Path

import torch

NAMES = ["gqa", "qknorm", "rmsnorm", "lora", "gatedmlp", "ntrans"]


def rms_norm(x, dim):
    """x / sqrt(mean(x², dim)): the program's rms_norm (no epsilon)."""
    return x / torch.sqrt(torch.mean(x * x, dim=dim, keepdim=True))


def attention(q, k, v):
    s = torch.matmul(q, k)
    e = torch.exp(s)
    z = torch.sum(e, dim=2, keepdim=True)
    return torch.matmul(e / z, v)


def gqa(q, k, v):
    return attention(q, k, v)


def qknorm(q, k, v):
    return attention(rms_norm(q, 2), rms_norm(k, 1), v)


def rmsnorm(x, w):
    return torch.matmul(rms_norm(x, -1), w)


def lora(x, w, a, b):
    return torch.matmul(x, w) + torch.matmul(torch.matmul(x, a), b)


def gatedmlp(x, w1, w3):
    return torch.nn.functional.silu(torch.matmul(x, w1)) * torch.matmul(x, w3)


def ntrans(h, x, alpha):
    return rms_norm(x + alpha * (rms_norm(h, -1) - x), -1)


class Benchmark:
    """One benchmark at one batch size: input names and shapes (program order), the function,
    an input recipe, and the floor's ingredients (minimal DRAM bytes, matmul FLOPs)."""

    def __init__(self, name, batch):
        self.name = name
        self.batch = batch
        b = batch
        if name in ("gqa", "qknorm"):
            self.inputs = [("Q", (2 * b, 256, 64)), ("K", (2 * b, 64, 4096)), ("V", (2 * b, 4096, 64))]
            self.output = (2 * b, 256, 64)
            self.flops = 2 * (2 * 2 * b * 256 * 64 * 4096)
        elif name == "rmsnorm":
            self.inputs = [("X", (2 * b, 4096)), ("W", (4096, 6144))]
            self.output = (2 * b, 6144)
            self.flops = 2 * 2 * b * 4096 * 6144
        elif name == "lora":
            m = 16 * b
            self.inputs = [("X", (m, 256)), ("W", (256, 4096)), ("A", (256, 16)), ("B", (16, 4096))]
            self.output = (m, 4096)
            self.flops = 2 * m * 256 * 4096 + 2 * m * 256 * 16 + 2 * m * 16 * 4096
        elif name == "gatedmlp":
            m = 8 * b
            self.inputs = [("X", (m, 4096)), ("W1", (4096, 4096)), ("W3", (4096, 4096))]
            self.output = (m, 4096)
            self.flops = 2 * 2 * m * 4096 * 4096
        elif name == "ntrans":
            self.inputs = [("H", (b, 4096)), ("X", (b, 4096)), ("Alpha", (b, 4096))]
            self.output = (b, 4096)
            self.flops = 0
        else:
            raise ValueError(f"unknown benchmark {name}")
        self.fn = globals()[name]

    @property
    def key(self):
        return f"{self.name}_b{self.batch}"

    @property
    def bytes(self):
        """fp16 bytes of every input read once and the output written once."""
        n = sum(math.prod(s) for _, s in self.inputs) + math.prod(self.output)
        return 2 * n

    def make_inputs(self, seed=0, device="cuda"):
        """fp16 device tensors per the recipe of the module docstring (deterministic)."""
        g = torch.Generator(device="cpu").manual_seed(seed)

        def randn(shape, scale):
            return torch.randn(shape, generator=g, dtype=torch.float64) * scale

        def uniform(shape, lo, hi):
            return torch.rand(shape, generator=g, dtype=torch.float64) * (hi - lo) + lo

        shapes = dict(self.inputs)
        if self.name == "gqa":
            t = [randn(shapes[n], 0.3) for n in ("Q", "K", "V")]
        elif self.name == "qknorm":
            q = uniform(shapes["Q"], -0.04, 0.04)
            q[..., :32] = uniform(q[..., :32].shape, -1, 1)
            q[..., 32] = uniform(q[..., 32].shape, -0.5, 0.5)
            k = uniform(shapes["K"], -0.04, 0.04)
            k[:, 33:, :] = uniform(k[:, 33:, :].shape, -1, 1)
            k[:, 32, :] = uniform(k[:, 32, :].shape, -0.5, 0.5)
            t = [q, k, randn(shapes["V"], 0.3)]
        elif self.name == "rmsnorm":
            t = [randn(shapes["X"], 1.0), randn(shapes["W"], 0.02)]
        elif self.name == "lora":
            t = [randn(shapes["X"], 1.0), randn(shapes["W"], 0.05), randn(shapes["A"], 0.05),
                 randn(shapes["B"], 0.1)]
        elif self.name == "gatedmlp":
            t = [randn(shapes["X"], 0.5), randn(shapes["W1"], 0.02), randn(shapes["W3"], 0.02)]
        else:  # ntrans
            t = [randn(shapes["H"], 1.0), randn(shapes["X"], 1.0), uniform(shapes["Alpha"], 0, 0.2)]
        return [x.to(device=device, dtype=torch.float16).contiguous() for x in t]

    def reference(self, inputs):
        """The program evaluated in float64 on the (fp16-rounded) inputs."""
        return self.fn(*[x.double() for x in inputs])


def write_f64(tensor, path):
    """Raw little-endian float64 values (the `strata profile --inputs` format)."""
    t = tensor.detach().double().cpu().contiguous().reshape(-1)
    chunk = 1 << 24  # elements per write: one ctypes string stays far below 2^31 bytes
    with open(path, "wb") as f:
        for i in range(0, t.numel(), chunk):
            part = t[i:i + chunk]
            f.write(ctypes.string_at(part.data_ptr(), part.numel() * 8))


def write_inputs(key, out_dir, seed=0):
    """Writes the inputs of benchmark `key` (e.g. qknorm_b8) as OUT_DIR/<name>.f64 files."""
    name, _, b = key.rpartition("_b")
    if name not in NAMES or not b.isdigit():
        raise ValueError(f"unknown benchmark {key!r} (expected <name>_b<batch>, name in {NAMES})")
    cfg = Benchmark(name, int(b))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for (n, _), t in zip(cfg.inputs, cfg.make_inputs(seed=seed, device="cpu")):
        write_f64(t, out / f"{n}.f64")


if __name__ == "__main__":
    # python3 bench/benchmarks.py inputs KEY OUT_DIR [SEED]: the benchmark's input recipe as
    # `strata profile --inputs` files (the sweep and the counter scripts use it).
    if len(sys.argv) not in (4, 5) or sys.argv[1] != "inputs":
        sys.exit("usage: benchmarks.py inputs <name>_b<batch> OUT_DIR [SEED]")
    try:
        write_inputs(sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) == 5 else 0)
    except ValueError as e:
        sys.exit(f"benchmarks.py: {e}")
