"""cuBLAS on operands whose leading dimension is not a multiple of 8 elements (16 bytes).

A library matmul (docs/codegen.md, "Predefined matmuls through cuBLAS") reads its operands in
place with their row strides; a stride that is not a multiple of 16 bytes (4097 keys, a
vocabulary of 32001) makes cuBLAS choose kernels of alignment 1. This script times
torch.bmm / torch.matmul (cuBLAS underneath, f16, fp32 accumulation) on pairs of shapes that
differ only in such a dim, with the timing method of bench/timing.py, and prints a table and a
JSON document (docs/cost-model.md, "Library matmuls on unaligned operands", uses it).

Usage (on a GPU machine): python3 bench/blas_alignment.py --json OUT.json [--md OUT.md]
"""

import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import timing  # noqa: E402

# (label, batch, M, N, K, layout of B): "kn" B stored [K, N] (its row stride N), "nk" B stored
# [N, K] and read transposed (row stride K; Q·Kᵀ with K cached as [keys, head dim], an LM head
# x·Wᵀ). A is [M, K] (row stride K); C is [M, N] (row stride N).
SHAPES = [
    ("P·V decode, 4096 keys", 8, 4, 128, 4096, "kn"),
    ("P·V decode, 4097 keys", 8, 4, 128, 4097, "kn"),
    ("P·V decode, 1025 keys", 8, 4, 128, 1025, "kn"),
    ("P·V decode, 1024 keys", 8, 4, 128, 1024, "kn"),
    ("P·V decode, 16 rows, 4097 keys", 8, 16, 128, 4097, "kn"),
    ("P·V decode, 32 heads x 1 row, 4097 keys", 32, 1, 128, 4097, "kn"),
    ("P·V decode, 32769 keys", 8, 4, 128, 32769, "kn"),
    ("P·V decode, 32768 keys", 8, 4, 128, 32768, "kn"),
    ("Q·Kᵀ decode, 4096 keys", 8, 4, 4096, 128, "nk"),
    ("Q·Kᵀ decode, 4097 keys", 8, 4, 4097, 128, "nk"),
    ("Q·Kᵀ decode, 4097 keys, B [K, N]", 8, 4, 4097, 128, "kn"),
    ("LM head, vocab 32000", 1, 4, 32000, 4096, "nk"),
    ("LM head, vocab 32001", 1, 4, 32001, 4096, "nk"),
    ("LM head, vocab 32001, B [K, N]", 1, 4, 32001, 4096, "kn"),
    ("prefill, K 1024", 1, 512, 1024, 1024, "kn"),
    ("prefill, K 1023", 1, 512, 1024, 1023, "kn"),
    ("prefill, N 1023", 1, 512, 1023, 1024, "kn"),
]


def operands(batch, m, n, k, layout, sets):
    gen = torch.Generator(device="cuda").manual_seed(0)
    out = []
    for _ in range(sets):
        a = torch.randn(batch, m, k, device="cuda", dtype=torch.float16, generator=gen)
        if layout == "kn":
            b = torch.randn(batch, k, n, device="cuda", dtype=torch.float16, generator=gen)
        else:
            b = torch.randn(batch, n, k, device="cuda", dtype=torch.float16,
                            generator=gen).transpose(1, 2)
        c = torch.empty(batch, m, n, device="cuda", dtype=torch.float16)
        out.append((a, b, c))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", required=True)
    ap.add_argument("--md")
    a = ap.parse_args()
    dev = torch.cuda.get_device_name()
    rows = []
    for label, batch, m, n, k, layout in SHAPES:
        per_set = 2 * (batch * m * k + batch * k * n + batch * m * n)
        sets = timing.sets_for(per_set, max_sets=256)
        ops = operands(batch, m, n, k, layout, sets)
        # Correct first: one product against float64.
        a0, b0, c0 = ops[0]
        torch.bmm(a0, b0, out=c0)
        err = timing.relative_l2_error(c0, torch.bmm(a0.double(), b0.double()))
        stats = timing.time_launches(lambda i: torch.bmm(ops[i][0], ops[i][1], out=ops[i][2]), sets)
        lda, ldb = k, (n if layout == "kn" else k)
        rows.append({"label": label, "batch": batch, "M": m, "N": n, "K": k, "B_layout": layout,
                     "lda": lda, "ldb": ldb, "ldc": n,
                     "aligned": lda % 8 == 0 and ldb % 8 == 0 and n % 8 == 0,
                     "bytes": per_set, "rel_err": err, **stats})
        print(f"{label:42s} {stats['median_us']:9.2f} us  ({per_set / stats['median_us'] / 1e3:7.1f}"
              f" GB/s, err {err:.1e})", flush=True)
    doc = {"device": dev, "torch": torch.__version__, "cublas": torch.backends.cuda.preferred_blas_library().name
           if hasattr(torch.backends.cuda, "preferred_blas_library") else "", "rows": rows}
    with open(a.json, "w") as f:
        json.dump(doc, f, indent=1)
    if a.md:
        with open(a.md, "w") as f:
            f.write(f"# cuBLAS on unaligned leading dimensions ({dev})\n\n")
            f.write("| shape | batch | M | N | K | B | lda | ldb | ldc | median µs | GB/s |\n")
            f.write("|---|---|---|---|---|---|---|---|---|---|---|\n")
            for r in rows:
                f.write(f"| {r['label']} | {r['batch']} | {r['M']} | {r['N']} | {r['K']} | "
                        f"{r['B_layout']} | {r['lda']} | {r['ldb']} | {r['ldc']} | "
                        f"{r['median_us']:.2f} | {r['bytes'] / r['median_us'] / 1e3:.0f} |\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
