#!/usr/bin/env python3
"""Ablations of an emitted kernel: where does its time go?

For one benchmark candidate and emitter variant, `strata emit` writes the CUDA source; each
*cut* below rewrites that source (dropping the tensor-core work, the loads of one input, ...),
every version is compiled with nvcc (the flags of the strata JIT) and timed by the benchmark's
method (bench/timing.py: CUDA-graph replays over rotated input sets). The uncut source is
checked against the float64 reference first; cut versions compute wrong values on purpose,
their error is printed only to show the cut took effect. The difference between the uncut time
and a cut's time is what that part of the kernel costs on the critical path.

  python3 bench/ablate.py --strata build-gpu/strata rmsnorm_b1 bench/search/rmsnorm_b1.json:5 \
      --knobs groups=4,walk=0 --cuts nomma,nox,nomma+nox [--out DIR]

GRAPH is a μGraph JSON file, or `RESULT.json:RANK` for ranked[RANK].graph of a search result.
With --zeros every version is also timed on all-zero inputs (DRAM reads of zeros can be faster).
Cuts (combine with '+'):
  nomma   delete every warp_mma* call (no ldmatrix, no tensor-core instructions)
  nox     delete the tile loads of input 0 (X: the small operand of the skinny matmuls)
  l2_256  ask for 256-byte L2 prefetches on the 16-byte cp.async copies (L2::256B)
  l2_none no L2 prefetch-size hint on the 16-byte cp.async copies
  nowork  delete every op block (`{ // #N ...}`: matmuls, reductions, elementwise ops)
  noepi   delete everything after the main loop but its final cp.async wait (no reductions
          across groups, no output stores)
  nozero  delete the prologue's zeroing of shared accumulators
  nostore guard every output store by a test that never holds (the values are still computed)
  nopostbar  delete the block barriers after the main loop
  nodump  delete the post-loop writes of register partials to shared memory
  noread  post-loop vector reads of shared memory replaced by constants (the saver computes and
          stores made-up values)
  nosum   post-loop readers take the first loop group's partials only (no reads of the other
          groups' copies; see PlanOptions::sum_at_read)
  With nomma+nox+nowork+noepi+nozero only the W copies, the pipeline's waits and barriers
  remain: the emitted kernel's bare stream, to hold against bench/micro/stream_abi.cu.
Needs a GPU, PyTorch and nvcc (with --emit-only: only the strata tool).
"""

import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

ROOT = Path(__file__).resolve().parent.parent


def load_graph(spec, out_dir):
    """Path of a μGraph JSON for SPEC (a file, or RESULT.json:RANK)."""
    path, _, rank = spec.rpartition(":")
    if path and rank.isdigit():
        doc = json.loads(Path(path).read_text())
        dest = out_dir / f"{Path(path).stem}_r{rank}.json"
        dest.write_text(json.dumps(doc["ranked"][int(rank)]["graph"]))
        return dest
    return Path(spec)


def matching_block(lines, start):
    """Index one past the line that closes the brace block opened at or before `start`."""
    depth = 0
    for i in range(start, len(lines)):
        depth += lines[i].count("{") - lines[i].count("}")
        if depth == 0:
            return i + 1
    raise ValueError("unbalanced braces in the emitted source")


def cut_blocks(src, marker):
    """Drops every brace block `{` whose first line inside matches the regex `marker`."""
    lines = src.split("\n")
    out, i = [], 0
    pattern = re.compile(marker)
    while i < len(lines):
        if lines[i].strip() == "{" and i + 1 < len(lines) and pattern.search(lines[i + 1]):
            i = matching_block(lines, i)
            continue
        out.append(lines[i])
        i += 1
    return "\n".join(out)


def cut_after_loop(src):
    """Drops every kernel's statements after its `// ---- after the loop` marker (the final
    cp.async wait before the marker stays), up to the kernel's closing brace."""
    lines = src.split("\n")
    out, i = [], 0
    while i < len(lines):
        if lines[i].strip() == "// ---- after the loop":
            while i < len(lines) and lines[i] != "}":
                i += 1
            continue
        out.append(lines[i])
        i += 1
    return "\n".join(out)


def cut_loop_group_sums(src):
    """Drops every `for (int pg = 1; ...)` loop that adds further loop groups' partials, and
    the further terms `+ (base + N)[...]` of scalar sums at read."""
    lines = src.split("\n")
    out, i = [], 0
    while i < len(lines):
        if lines[i].strip().startswith("for (int pg = 1;") and lines[i].rstrip().endswith("{"):
            if out and out[-1].strip() == "#pragma unroll":
                out.pop()
            i = matching_block(lines, i)
            continue
        out.append(lines[i])
        i += 1
    return re.sub(r" \+ \((s\w+) \+ \d+\)\[[^\]]*\]", "", "\n".join(out))


def apply_cut(src, cut):
    for part in cut.split("+"):
        if part == "nomma":
            src = re.sub(r"^\s*strata_rt::warp_mma\w*<.*;\s*$", "", src, flags=re.M)
        elif part == "nox":
            src = cut_blocks(src, r"//\s*load b\d+ .*<- input 0 ")
        elif part == "nowork":
            src = cut_blocks(src, r"^\s*// #\d+ ")
        elif part == "noepi":
            src = cut_after_loop(src)
        elif part == "nostore":
            src = re.sub(r"^(\s*)(strata_rt::store_global_vec<[^;]*, (\w+)\);)$",
                         r"\1if (\3[0] == 12345.678f) \2", src, flags=re.M)
        elif part == "nopostbar":
            head, marker, tail = src.partition("// ---- after the loop")
            src = head + marker + re.sub(r"^[ \t]*__syncthreads\(\);\n", "", tail, flags=re.M)
        elif part == "nodump":
            src = cut_blocks(src, r"^\s*// b\d+: (register fragments|per-chunk partial sums|"
                                  r"thread-owned chunks|row sums)")
        elif part == "noread":
            head, marker, tail = src.partition("// ---- after the loop")
            src = head + marker + re.sub(
                r"strata_rt::load_f32<(\d+)>\(&[^;]*, (\w+)\);",
                r"for (int q = 0; q < \1; ++q) \2[q] = 0.25f * static_cast<float>(q + tid);",
                tail)
        elif part == "nosum":
            src = cut_loop_group_sums(src)
        elif part == "nozero":
            src = cut_blocks(src, r"^\s*// zero accumulator")
        elif part == "l2_256":
            src = src.replace('#include "strata_rt/strata_rt.cuh"',
                              '#define STRATA_RT_L2_PREFETCH ".L2::256B"\n'
                              '#include "strata_rt/strata_rt.cuh"')
        elif part == "l2_none":
            src = src.replace('#include "strata_rt/strata_rt.cuh"',
                              '#define STRATA_RT_L2_PREFETCH ""\n'
                              '#include "strata_rt/strata_rt.cuh"')
        elif part != "none":
            raise ValueError(f"unknown cut {part!r}")
    return src


def compile_so(cu, arch, defines=()):
    so = cu.with_suffix(".so")
    cmd = ["nvcc", "-shared", "-Xcompiler", "-fPIC", "-O3", "-std=c++17", f"-arch={arch}",
           "-Xptxas", "-v", "-I", str(ROOT / "runtime"), "-o", str(so), str(cu)]
    cmd += [f"-D{d}" for d in defines] + ["-lcuda"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"nvcc failed for {cu}:\n{r.stderr[-2000:]}")
    regs = re.findall(r"Used (\d+) registers", r.stderr)
    spills = re.findall(r"(\d+) bytes spill stores", r.stderr)
    return so, {"registers": regs, "spill_stores": spills}


def skewed_copy(x, skew):
    """A copy of x that starts `skew` bytes into a fresh allocation (0: a plain clone)."""
    import torch
    if skew <= 0:
        return x.clone()
    raw = torch.empty(x.numel() * x.element_size() + skew, dtype=torch.uint8, device=x.device)
    view = raw[skew:].view(x.dtype).view(x.shape)
    view.copy_(x)
    return view


def time_library(cfg, so, inputs, ref, sets, runs, zeros=False, skew=0):
    import timing
    import torch
    lib = timing.StrataLibrary(str(so))
    err = timing.check_library(lib, inputs, cfg.output, ref)
    timed = [torch.zeros_like(x) for x in inputs] if zeros else inputs
    # input j of every set starts j * skew bytes into its own allocation
    sets_inputs = [[skewed_copy(x, j * skew) for j, x in enumerate(timed)] for _ in range(sets)]
    return err, timing.time_library(lib, sets_inputs, cfg.output, runs)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("key", help="benchmark key, e.g. rmsnorm_b1")
    p.add_argument("graph", help="μGraph JSON or RESULT.json:RANK (or a .cu file with --source)")
    p.add_argument("--source", action="store_true",
                   help="GRAPH is a hand-written .cu with the ABI of a strata library (e.g. "
                        "bench/micro/stream_abi.cu): timed as it is, its output not required "
                        "to be right; no cuts")
    p.add_argument("--define", action="append", default=[],
                   help="NAME=VALUE passed to nvcc as -D (repeatable; with --source)")
    p.add_argument("--knobs", default="", help="emitter knobs (strata emit --knobs)")
    p.add_argument("--cuts", default="nomma,nox,nomma+nox", help="comma-separated cuts")
    p.add_argument("--strata", default=str(ROOT / "build" / "strata"))
    p.add_argument("--arch", default="sm_90a")
    p.add_argument("--runs", type=int, default=100)
    p.add_argument("--repeat", type=int, default=2, help="time every version this many times")
    p.add_argument("--skew", type=int, default=0,
                   help="input j of every timed set starts j * SKEW bytes into its allocation "
                        "(DRAM bank/channel alignment of the inputs; multiple of 16)")
    p.add_argument("--sets", type=int, default=0,
                   help="input sets per replay (default: the benchmark's, > 4x L2 per pass)")
    p.add_argument("--out", default=None, help="directory for sources and the JSON report")
    p.add_argument("--json", default=None, help="append the rows to this JSON-lines file")
    p.add_argument("--emit-only", action="store_true",
                   help="write the cut sources into --out (or a temporary directory) and stop: "
                        "no GPU, PyTorch or nvcc needed")
    p.add_argument("--zeros", action="store_true",
                   help="also time every version on all-zero inputs (checked on real ones)")
    args = p.parse_args()

    out = Path(args.out or tempfile.mkdtemp(prefix="strata-ablate-"))
    out.mkdir(parents=True, exist_ok=True)
    if args.source:
        cuts = ["none"]
        tag = re.sub(r"[^A-Za-z0-9_]+", "_", f"{Path(args.graph).stem}_{'_'.join(args.define)}")
        sources = {"none": out / f"{tag}.cu"}
        sources["none"].write_text(f'#include "{Path(args.graph).resolve()}"\n')
    else:
        graph = load_graph(args.graph, out)
        tag = re.sub(r"[^A-Za-z0-9_]+", "_", f"{graph.stem}_{args.knobs or 'default'}")
        base = out / f"{tag}.cu"
        cmd = [args.strata, "emit", str(graph), "-o", str(base), "--arch", args.arch]
        if args.knobs:
            cmd += ["--knobs", args.knobs]
        subprocess.run(cmd, check=True, capture_output=True)
        src = base.read_text()
        cuts = ["none"] + [c for c in args.cuts.split(",") if c and c != "none"]
        sources = {}
        for cut in cuts:
            cu = out / f"{tag}__{cut.replace('+', '_')}.cu"
            cu.write_text(apply_cut(src, cut))
            sources[cut] = cu
        if args.emit_only:
            print("\n".join(str(sources[c]) for c in cuts))
            return
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 4) as pool:
        built = dict(zip(cuts, pool.map(
            lambda c: compile_so(sources[c], args.arch, args.define), cuts)))

    import benchmarks
    import timing
    name, _, b = args.key.rpartition("_b")
    cfg = benchmarks.Benchmark(name, int(b))
    inputs = cfg.make_inputs()
    ref = cfg.reference(inputs)
    sets = args.sets or timing.sets_for(cfg.bytes)
    rows = []
    versions = cuts + ([c + " (zeros)" for c in cuts] if args.zeros else [])
    for rep in range(args.repeat):
        for version in versions:
            cut, zeros = version.split(" ")[0], version.endswith("(zeros)")
            err, stats = time_library(cfg, built[cut][0], inputs, ref, sets, args.runs, zeros,
                                      args.skew)
            if cut == "none" and err > 1e-2 and not args.source:
                sys.exit(f"ablate: the uncut kernel is wrong (relative error {err:.3g})")
            rows.append({"key": args.key, "graph": args.graph, "knobs": args.knobs, "cut": version,
                         "rep": rep, "median_us": stats["median_us"], "p10_us": stats["p10_us"],
                         "p90_us": stats["p90_us"], "rel_l2_error": err, **built[cut][1]})
    base_us = min(r["median_us"] for r in rows if r["cut"] == "none")
    what = " ".join(args.define) if args.source else args.knobs or "default"
    print(f"{args.key} {args.graph} [{what}]  bytes {cfg.bytes}  sets {sets}")
    print(f"{'cut':<22}{'median us (per repeat)':>28}{'vs uncut':>10}  registers  error")
    for cut in versions:
        rs = [r for r in rows if r["cut"] == cut]
        best = min(r["median_us"] for r in rs)
        times = " ".join(f"{r['median_us']:.2f}" for r in rs)
        print(f"{cut:<22}{times:>28}{best - base_us:>+10.2f}  {','.join(rs[0]['registers']):>9}"
              f"  {rs[0]['rel_l2_error']:.3g}")
    if args.json:
        with open(args.json, "a") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
