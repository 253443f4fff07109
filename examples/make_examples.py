#!/usr/bin/env python3
"""Writes the bundled examples: the six paper benchmarks (bench/README.md) as .strata programs and
their reference μGraphs (docs/mugraph-semantics.md §6) as μGraph JSON, at three sizes each:

  b1, b8   the paper shapes for batch 1 and batch 8 (Mirage's artifact)
  small    the same structure at small extents, for tests

The reference μGraphs are designed by hand here (not found by the search): this script only
spells them out at each size. Run it from anywhere; it rewrites examples/programs/ and
examples/reference/. `strata equiv examples/programs/X.strata examples/reference/X.json`
proves each pair equivalent (tests/examples_test.cc does so for every pair).
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
PHI = None  # φ in imap/fmap/omap


# ---- helpers to spell out μGraph JSON ---------------------------------------------------

def inp(name, shape, dtype="f16"):
    return {"name": name, "shape": list(shape), "dtype": dtype}


def block_graph(grid, forloop, ops, block=128):
    return {"grid": list(grid), "block": block, "forloop": forloop, "ops": ops}


def b_in(index, out, imap, fmap):
    return {"op": "input", "input": index, "imap": list(imap), "fmap": fmap, "output": out}


def b_op(op, inputs, out, **attrs):
    d = {"op": op, "inputs": list(inputs), "output": out}
    d.update(attrs)
    return d


def b_accum(op, x, out, fmap=PHI, **attrs):
    d = {"op": op, "inputs": [x], "output": out, "fmap": fmap}
    d.update(attrs)
    return d


def b_out(x, omap):
    return {"op": "output", "inputs": [x], "omap": list(omap)}


def customized(inputs, outputs, body):
    return {"op": "customized", "inputs": list(inputs), "outputs": list(outputs), "block_graph": body}


def mugraph(inputs, ops, outputs):
    return {"format": "strata-mugraph", "version": 1, "inputs": inputs, "ops": ops,
            "outputs": list(outputs)}


# ---- the six benchmarks --------------------------------------------------------------------
# Each returns (program text, reference μGraph) for a dict of extents.

def rmsnorm(s, title):
    m, k, n = s["m"], s["k"], s["n"]
    prog = f"""# RMSNorm followed by a linear layer (LLaMA-2-7B), {title}
input X: f16[{m}, {k}]
input W: f16[{k}, {n}]
Y = rms_norm(X)
O = matmul(Y, W)
output O
"""
    # One kernel: grid over n in 64-wide tiles, loop over k in 64-wide tiles; the division by
    # the row RMS moves after the matmul ((x/r)·W = (x·W)/r).
    tn, tk = s["tn"], s["tk"]
    body = block_graph((n // tn, 1, 1), k // tk, [
        b_in(0, "Xi", (PHI, PHI, PHI), 1),
        b_in(1, "Wi", (1, PHI, PHI), 0),
        b_op("matmul", ["Xi", "Wi"], "M"),
        b_accum("accum", "M", "AccM"),
        b_accum("accum_rms_ld", "Xi", "AccX"),
        b_op("div", ["AccM", "AccX"], "Oi"),
        b_out("Oi", (1, PHI, PHI)),
    ])
    graph = mugraph([inp("X", (m, k)), inp("W", (k, n))],
                    [customized(["X", "W"], ["O"], body)], ["O"])
    return prog, graph


def gatedmlp(s, title):
    m, k, n = s["m"], s["k"], s["n"]
    prog = f"""# Gated MLP (Falcon-7B), {title}: silu(X·W1) ⊙ (X·W3)
input X: f16[{m}, {k}]
input W1: f16[{k}, {n}]
input W3: f16[{k}, {n}]
A = matmul(X, W1)
B = matmul(X, W3)
S = silu(A)
O = mul(S, B)
output O
"""
    tn, tk = s["tn"], s["tk"]
    body = block_graph((n // tn, 1, 1), k // tk, [
        b_in(0, "Xi", (PHI, PHI, PHI), 1),
        b_in(1, "W1i", (1, PHI, PHI), 0),
        b_in(2, "W3i", (1, PHI, PHI), 0),
        b_op("matmul", ["Xi", "W1i"], "M1"),
        b_op("matmul", ["Xi", "W3i"], "M3"),
        b_accum("accum", "M1", "Acc1"),
        b_accum("accum", "M3", "Acc3"),
        b_op("silu", ["Acc1"], "S"),
        b_op("mul", ["S", "Acc3"], "Oi"),
        b_out("Oi", (1, PHI, PHI)),
    ])
    graph = mugraph([inp("X", (m, k)), inp("W1", (k, n)), inp("W3", (k, n))],
                    [customized(["X", "W1", "W3"], ["O"], body)], ["O"])
    return prog, graph


def lora(s, title):
    m, k, n, r = s["m"], s["k"], s["n"], s["r"]
    prog = f"""# LoRA linear layer (GPT-3-7B-LoRA), {title}: X·W + (X·A)·B
input X: f16[{m}, {k}]
input W: f16[{k}, {n}]
input A: f16[{k}, {r}]
input B: f16[{r}, {n}]
Y = matmul(X, W)
T = matmul(X, A)
Z = matmul(T, B)
O = add(Y, Z)
output O
"""
    # One kernel through concat: [X | X·A] · [W ; B] (paper §8.1); the whole k fits a block.
    tn = s["tn"]
    body = block_graph((n // tn, 1, 1), 1, [
        b_in(0, "Xi", (PHI, PHI, PHI), PHI),
        b_in(1, "Wi", (1, PHI, PHI), PHI),
        b_in(2, "Ai", (PHI, PHI, PHI), PHI),
        b_in(3, "Bi", (1, PHI, PHI), PHI),
        b_op("matmul", ["Xi", "Ai"], "XA"),
        b_op("concat", ["Xi", "XA"], "Left", dim=1),
        b_op("concat", ["Wi", "Bi"], "Right", dim=0),
        b_op("matmul", ["Left", "Right"], "M"),
        b_accum("accum", "M", "Oi"),
        b_out("Oi", (1, PHI, PHI)),
    ])
    graph = mugraph([inp("X", (m, k)), inp("W", (k, n)), inp("A", (k, r)), inp("B", (r, n))],
                    [customized(["X", "W", "A", "B"], ["O"], body)], ["O"])
    return prog, graph


def ntrans(s, title):
    b, d = s["b"], s["d"]
    prog = f"""# Normalized Transformer update (nGPT-1B), {title}: rms_norm(X + α ⊙ (rms_norm(H) − X))
input H: f16[{b}, {d}]
input X: f16[{b}, {d}]
input Alpha: f16[{b}, {d}]
N = rms_norm(H)
D = sub(N, X)
M = mul(Alpha, D)
S = add(X, M)
O = rms_norm(S)
output O
"""
    # One kernel, one block per row, everything in shared memory (forloop 1).
    row = (0, PHI, PHI) if b > 1 else (PHI, PHI, PHI)
    body = block_graph((b, 1, 1), 1, [
        b_in(0, "Hi", row, PHI),
        b_in(1, "Xi", row, PHI),
        b_in(2, "Ai", row, PHI),
        b_op("rms_norm", ["Hi"], "Ni", dim=1),
        b_op("sub", ["Ni", "Xi"], "Di"),
        b_op("mul", ["Ai", "Di"], "Mi"),
        b_op("add", ["Xi", "Mi"], "Si"),
        b_op("rms_norm", ["Si"], "Ri", dim=1),
        b_accum("accum", "Ri", "Oi"),
        b_out("Oi", row),
    ])
    graph = mugraph([inp("H", (b, d)), inp("X", (b, d)), inp("Alpha", (b, d))],
                    [customized(["H", "X", "Alpha"], ["O"], body)], ["O"])
    return prog, graph


def attention(s, title, qknorm):
    B, q, d, L = s["B"], s["q"], s["d"], s["L"]
    G, T, tq, Z = s["G"], s["T"], s["tq"], s["Z"]
    if qknorm:
        head = f"""# QK-normalized attention (Chameleon-7B), {title}: gqa on rms_norm(Q), rms_norm(K, dim=1)
input Q: f16[{B}, {q}, {d}]
input K: f16[{B}, {d}, {L}]
input V: f16[{B}, {L}, {d}]
Qn = rms_norm(Q, dim=2)
Kn = rms_norm(K, dim=1)
S = matmul(Qn, Kn)
"""
    else:
        head = f"""# Group-query attention (LLaMA-3-70B), {title}: softmax(Q·K)·V without max-subtraction
input Q: f16[{B}, {q}, {d}]
input K: f16[{B}, {d}, {L}]
input V: f16[{B}, {L}, {d}]
S = matmul(Q, K)
"""
    prog = head + """E = exp(S)
Z = sum(E, dim=2)
P = div(E, Z)
O = matmul(P, V)
output O
"""
    # Kernel 1 (FlashDecoding): grid (batch, KV split, query chunk); each block loops over its
    # share of the KV sequence in T-wide tiles, accumulating exp(QK)·V and Σ exp(QK). The split
    # index goes to the last dim of the partial results. Kernel 2 iterates over the splits, sums
    # and divides.
    F1 = L // (G * T)
    ops1 = [
        b_in(0, "Qi", (0, PHI, 1), PHI),
        b_in(1, "Ki", (0, 2, PHI), 2),
        b_in(2, "Vi", (0, 1, PHI), 1),
    ]
    q_src, k_src = "Qi", "Ki"
    if qknorm:
        ops1 += [b_op("rms_norm", ["Qi"], "Qn", dim=2), b_op("rms_norm", ["Ki"], "Kn", dim=1)]
        q_src, k_src = "Qn", "Kn"
    ops1 += [
        b_op("matmul", [q_src, k_src], "Si"),
        b_op("exp", ["Si"], "Ei"),
        b_op("matmul", ["Ei", "Vi"], "EVi"),
        b_accum("accum", "EVi", "AccEV"),
        b_accum("accum_sum_ld", "Ei", "AccE"),
        b_out("AccEV", (0, 2, 1)),
        b_out("AccE", (0, 2, 1)),
    ]
    k1 = customized(["Q", "K", "V"], ["PartEV", "PartE"], block_graph((B, G, Z), F1, ops1))
    k2 = customized(["PartEV", "PartE"], ["O"], block_graph((B, q // tq, 1), G, [
        b_in(0, "Pi", (0, 1, PHI), 2),
        b_in(1, "Zi", (0, 1, PHI), 2),
        b_accum("accum", "Pi", "SumEV"),
        b_accum("accum", "Zi", "SumE"),
        b_op("div", ["SumEV", "SumE"], "Oi"),
        b_out("Oi", (0, 1, PHI)),
    ]))
    graph = mugraph([inp("Q", (B, q, d)), inp("K", (B, d, L)), inp("V", (B, L, d))], [k1, k2], ["O"])
    return prog, graph


BENCHMARKS = {
    "rmsnorm": (rmsnorm, {
        "b1": dict(m=2, k=4096, n=6144, tn=64, tk=64),
        "b8": dict(m=16, k=4096, n=6144, tn=64, tk=64),
        "small": dict(m=4, k=256, n=512, tn=64, tk=64),
    }),
    "gatedmlp": (gatedmlp, {
        "b1": dict(m=8, k=4096, n=4096, tn=64, tk=64),
        "b8": dict(m=64, k=4096, n=4096, tn=64, tk=64),
        "small": dict(m=8, k=256, n=256, tn=64, tk=64),
    }),
    "lora": (lora, {
        "b1": dict(m=16, k=256, n=4096, r=16, tn=64),
        "b8": dict(m=128, k=256, n=4096, r=16, tn=64),
        "small": dict(m=16, k=64, n=256, r=16, tn=64),
    }),
    "ntrans": (ntrans, {
        "b1": dict(b=1, d=4096),
        "b8": dict(b=8, d=4096),
        "small": dict(b=2, d=256),
    }),
    "gqa": (lambda s, t: attention(s, t, False), {
        "b1": dict(B=2, q=256, d=64, L=4096, G=16, T=64, tq=64, Z=4),
        "b8": dict(B=16, q=256, d=64, L=4096, G=16, T=64, tq=64, Z=4),
        "small": dict(B=2, q=32, d=32, L=512, G=4, T=32, tq=16, Z=2),
    }),
    "qknorm": (lambda s, t: attention(s, t, True), {
        "b1": dict(B=2, q=256, d=64, L=4096, G=16, T=64, tq=64, Z=4),
        "b8": dict(B=16, q=256, d=64, L=4096, G=16, T=64, tq=64, Z=4),
        "small": dict(B=2, q=32, d=32, L=512, G=4, T=32, tq=16, Z=2),
    }),
}

TITLES = {"b1": "batch 1 (paper shapes)", "b8": "batch 8 (paper shapes)",
          "small": "small shapes for tests"}


def main():
    prog_dir = os.path.join(HERE, "programs")
    ref_dir = os.path.join(HERE, "reference")
    os.makedirs(prog_dir, exist_ok=True)
    os.makedirs(ref_dir, exist_ok=True)
    for name, (fn, sizes) in BENCHMARKS.items():
        for size, extents in sizes.items():
            prog, graph = fn(extents, TITLES[size])
            with open(os.path.join(prog_dir, f"{name}_{size}.strata"), "w") as f:
                f.write(prog)
            with open(os.path.join(ref_dir, f"{name}_{size}.json"), "w") as f:
                json.dump(graph, f, indent=2, ensure_ascii=False)
                f.write("\n")


if __name__ == "__main__":
    main()
