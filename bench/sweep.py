#!/usr/bin/env python3
"""Helper of scripts/gpu-sweep.sh (standard library only; no torch needed).

  sweep.py plan OUT_DIR [SEARCH_DIR]
      writes alternative tilings of the reference μGraphs under OUT_DIR/graphs/ and prints the
      sweep plan, one step per line: key<TAB>program<TAB>variants<TAB>candidate paths (space-
      separated). One step = one `strata profile` call: every candidate of the step is emitted
      once per emitter variant (knob specs separated by ';', see `strata emit --list-knobs`),
      compiled in parallel, checked against the float64 reference of the program and timed.
  sweep.py report OUT_DIR
      reads OUT_DIR/profile/*.json (strata profile reports) and OUT_DIR/steps.tsv (key, exit
      code, seconds per step), prints one compact table (graph, variant, µs, × memory floor,
      status), the best variant per graph, and writes OUT_DIR/sweep.json. Exit 1 when a step
      failed, timed out or was skipped, or when any candidate is neither ok nor (in a
      compile-only dry run) compiled.

The floor is max(bytes / DRAM bandwidth, FLOPs / fp16 tensor peak, one launch) with the
benchmark's bytes and FLOPs (bench/benchmarks.py) and the H200 numbers of the first benchmark
run, overridable with STRATA_DRAM_TBPS, STRATA_TENSOR_TFLOPS and STRATA_LAUNCH_US.
"""

import copy
import json
import math
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "examples" / "reference"
PROGRAMS = ROOT / "examples" / "programs"

BENCHES = ["rmsnorm", "gatedmlp", "gqa", "qknorm", "lora", "ntrans"]
BATCHES = [8, 1]

# Emitter variants per shape class ("default" = the emitter's own choice). The first list of
# each class runs on the reference μGraph, the second on alternative tilings.
MATVEC = ["default", "groups=1", "groups=2", "groups=4", "groups=8", "inflight=64k",
          "inflight=192k", "groups=1,stages=4", "threads=256", "tc=0"]
MATVEC_ALT = ["default", "groups=1", "inflight=192k"]
ATTENTION = ["default", "groups=1", "chain=0", "groups=1,chain=0", "stages=2", "regacc=0",
             "tc=0"]
ATTENTION_ALT = ["default", "groups=1"]
VARIANTS = {
    "rmsnorm": (MATVEC, MATVEC_ALT),
    "gatedmlp": (MATVEC, MATVEC_ALT),
    "gqa": (ATTENTION, ATTENTION_ALT),
    "qknorm": (ATTENTION + ["fold=0", "chain=0,fold=0"], ATTENTION_ALT),
    # lora without tensor cores needs ~310 KB of f32 tiles at b8: no tc=0 variant.
    "lora": (["default", "groups=1", "threads=256", "epilogue=0"], ["default"]),
    "ntrans": (["default", "rowwise=0", "inline=0", "hoist=0"], ["default"]),
}

# Alternative tilings of the reference graphs: (suffix, kernel op index, grid, forloop).
# rmsnorm: N tiles of 32 / 16 columns (192 / 384 blocks), K tiles of 128 (forloop 32);
# gatedmlp likewise over its 4096 columns; gqa/qknorm kernel 1: 128 or 32 keys per iteration.
TILINGS = {
    "rmsnorm": [("g192", 0, [192, 1, 1], None), ("g384", 0, [384, 1, 1], None),
                ("k128", 0, None, 32), ("g192k128", 0, [192, 1, 1], 32),
                ("g384k128", 0, [384, 1, 1], 32)],
    "gatedmlp": [("g128", 0, [128, 1, 1], None), ("g256", 0, [256, 1, 1], None),
                 ("k128", 0, None, 32), ("g128k128", 0, [128, 1, 1], 32),
                 ("g256k128", 0, [256, 1, 1], 32)],
    "gqa": [("t128", 0, None, 2), ("t32", 0, None, 8)],
    "qknorm": [("t128", 0, None, 2)],
}


def plan(out_dir, search_dir):
    graphs = Path(out_dir) / "graphs"
    graphs.mkdir(parents=True, exist_ok=True)
    notes = []
    for b in BATCHES:
        for bench in BENCHES:
            key = f"{bench}_b{b}"
            program = PROGRAMS / f"{key}.strata"
            ref = REFERENCE / f"{key}.json"
            if not program.exists() or not ref.exists():
                sys.exit(f"sweep.py: missing {program} or {ref}")
            full, alt = VARIANTS[bench]
            print("\t".join([key, str(program), ";".join(full), str(ref)]))
            if bench in TILINGS:
                doc = json.loads(ref.read_text())
                paths = []
                for suffix, op, grid, forloop in TILINGS[bench]:
                    g = copy.deepcopy(doc)
                    bg = g["ops"][op]["block_graph"]
                    if grid is not None:
                        bg["grid"] = grid
                    if forloop is not None:
                        bg["forloop"] = forloop
                    path = graphs / f"{key}.{suffix}.json"
                    path.write_text(json.dumps(g, indent=1) + "\n")
                    paths.append(str(path))
                print("\t".join([f"{key}.tilings", str(program), ";".join(alt), " ".join(paths)]))
            if search_dir:
                doc = Path(search_dir) / f"{key}.json"
                if doc.exists():
                    print("\t".join([f"{key}.search", str(program), ";".join(alt), str(doc)]))
                else:
                    notes.append(f"no search result {doc}")
    for n in notes:
        print(f"sweep.py: note: {n}", file=sys.stderr)


def bench_of(name):
    """('rmsnorm', 8) from a graph or step name like rmsnorm_b8.g192.json."""
    stem = Path(name).name.split(".")[0]
    bench, _, b = stem.rpartition("_b")
    return (bench, int(b)) if bench in BENCHES and b.isdigit() else (None, None)


def floor_us(bench, b):
    """The floor of bench/benchmarks.py (fp16 bytes of inputs + output once; matmul FLOPs)."""
    if bench in ("gqa", "qknorm"):
        ins, out = [(2 * b, 256, 64), (2 * b, 64, 4096), (2 * b, 4096, 64)], (2 * b, 256, 64)
        flops = 2 * (2 * 2 * b * 256 * 64 * 4096)
    elif bench == "rmsnorm":
        ins, out = [(2 * b, 4096), (4096, 6144)], (2 * b, 6144)
        flops = 2 * 2 * b * 4096 * 6144
    elif bench == "lora":
        m = 16 * b
        ins, out = [(m, 256), (256, 4096), (256, 16), (16, 4096)], (m, 4096)
        flops = 2 * m * 256 * 4096 + 2 * m * 256 * 16 + 2 * m * 16 * 4096
    elif bench == "gatedmlp":
        m = 8 * b
        ins, out = [(m, 4096), (4096, 4096), (4096, 4096)], (m, 4096)
        flops = 2 * 2 * m * 4096 * 4096
    elif bench == "ntrans":
        ins, out, flops = [(b, 4096)] * 3, (b, 4096), 0
    else:
        return None
    nbytes = 2 * (sum(math.prod(s) for s in ins) + math.prod(out))
    bw = float(os.environ.get("STRATA_DRAM_TBPS", "4.13")) * 1e12
    peak = float(os.environ.get("STRATA_TENSOR_TFLOPS", "738")) * 1e12
    launch = float(os.environ.get("STRATA_LAUNCH_US", "1.07"))
    return max(nbytes / bw * 1e6, flops / peak * 1e6, launch)


def report(out_dir):
    out = Path(out_dir)
    steps = []
    steps_file = out / "steps.tsv"
    if steps_file.exists():
        for line in steps_file.read_text().splitlines():
            key, rc, secs = line.split("\t")
            steps.append({"step": key, "exit": int(rc), "seconds": float(secs)})
    rows, failures = [], []
    for s in steps:
        if s["exit"] not in (0, 1):
            why = {124: "timed out", 137: "killed (time limit)", -1: "skipped (time budget)"}
            failures.append(f"{s['step']}: {why.get(s['exit'], 'exit ' + str(s['exit']))}")
        f = out / "profile" / f"{s['step']}.json"
        if not f.exists():
            if s["exit"] != -1:
                failures.append(f"{s['step']}: no profile report")
            continue
        doc = json.loads(f.read_text())
        for c in doc.get("candidates", []):
            origin = c.get("origin", "?")
            name = Path(origin.split(" ")[0]).name
            name = name[:-5] if name.endswith(".json") else name
            if s["step"].endswith(".search"):
                name = f"{s['step'][:-7]}.search#{c.get('index')}"
            bench, b = bench_of(s["step"])
            us = c.get("timing", {}).get("median_us")
            fl = floor_us(bench, b) if bench else None
            row = {"step": s["step"], "graph": name, "variant": c.get("variant", "?"),
                   "status": c.get("status", "?"), "median_us": us,
                   "floor_us": fl, "x_floor": us / fl if us and fl else None,
                   "rel_l2_error": c.get("rel_l2_error"), "smem_bytes": c.get("smem_bytes"),
                   "predicted_us": c.get("predicted_us"), "error": c.get("error", "")}
            rows.append(row)
            if row["status"] not in ("ok", "compiled"):
                failures.append(f"{name} [{row['variant']}]: {row['status']} "
                                f"{row['error'].splitlines()[0] if row['error'] else ''}")
    w = max([len(r["graph"]) for r in rows] + [5])
    v = max([len(r["variant"]) for r in rows] + [7])
    print(f"{'graph':<{w}}  {'variant':<{v}}  {'us':>8}  {'x floor':>7}  {'err':>7}  status")
    for r in rows:
        us = f"{r['median_us']:8.2f}" if r["median_us"] else f"{'-':>8}"
        xf = f"{r['x_floor']:7.2f}" if r["x_floor"] else f"{'-':>7}"
        err = r["rel_l2_error"]
        err = f"{err:7.1e}" if isinstance(err, (int, float)) else f"{'-':>7}"
        print(f"{r['graph']:<{w}}  {r['variant']:<{v}}  {us}  {xf}  {err}  {r['status']}")
    best = {}
    for r in rows:
        if r["status"] == "ok" and r["median_us"]:
            k = r["step"].split(".")[0]
            if k not in best or r["median_us"] < best[k]["median_us"]:
                best[k] = r
    print("\nbest per benchmark:")
    for k, r in best.items():
        print(f"  {k:<12} {r['median_us']:8.2f} us  {r['x_floor']:5.2f}x floor  "
              f"{r['graph']} [{r['variant']}]")
    doc = {"format": "strata-sweep", "version": 1, "steps": steps, "rows": rows,
           "best": best, "failures": failures}
    (out / "sweep.json").write_text(json.dumps(doc, indent=2) + "\n")
    if failures:
        print(f"\n{len(failures)} failure(s):")
        for f in failures:
            print(f"  {f}")
        return 1
    return 0


def main(argv):
    if len(argv) >= 3 and argv[1] == "plan":
        plan(argv[2], argv[3] if len(argv) > 3 else "")
        return 0
    if len(argv) == 3 and argv[1] == "report":
        return report(argv[2])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
