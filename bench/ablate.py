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
  stagger post-loop 8-float shared reads issued halves-swapped by threads 4..7 of every 8 (no
          2-way bank conflict when a row's 8 threads read 32-byte runs; a rewrite, not a cut:
          the output stays right)
  evictw  the 16-byte copies of inputs 1.. (the streamed weights) with an L2 evict_first
          policy (also a rewrite: the output stays right)
  warmepi the post-loop code runs once with its writes disabled before the main loop, so that
          its instructions are in the instruction cache when the loop ends (a rewrite)
  timeline  probes (clock64, %globaltimer) in every warp at the kernel's start, the end of its
          loop, after each post-loop barrier and at its end; after timing, the last launch's
          probes are summarized (a rewrite; the probes' own stores perturb the tail a little)
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


def rewrite_blocks(src, marker, rewrite):
    """Applies rewrite(text) to every brace block `{` whose first line inside matches `marker`."""
    lines = src.split("\n")
    out, i = [], 0
    pattern = re.compile(marker)
    while i < len(lines):
        if lines[i].strip() == "{" and i + 1 < len(lines) and pattern.search(lines[i + 1]):
            end = matching_block(lines, i)
            out.extend(rewrite("\n".join(lines[i:end])).split("\n"))
            i = end
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


# Post-loop reads of 8 f32 by threads whose runs are 32 bytes apart: threads 4..7 of every 8
# read their second 16-byte half first, so that a quarter warp covers 32 distinct banks
# (in order, threads t and t + 4 of a quarter warp hit the same 4 banks).
STAGGERED_LOAD = """
__device__ __forceinline__ void load_f32_staggered(const float* p, float (&v)[8]) {
  const bool swap = (threadIdx.x & 4) != 0;
  const float4 a = *reinterpret_cast<const float4*>(p + (swap ? 4 : 0));
  const float4 b = *reinterpret_cast<const float4*>(p + (swap ? 0 : 4));
  const float4 lo = swap ? b : a, hi = swap ? a : b;
  v[0] = lo.x; v[1] = lo.y; v[2] = lo.z; v[3] = lo.w;
  v[4] = hi.x; v[5] = hi.y; v[6] = hi.z; v[7] = hi.w;
}
"""


# 16-byte copies that ask L2 to evict their lines first (createpolicy evict_first): a streamed
# weight then does not push out what the kernel reads again (X, its own code).
EVICT_FIRST_COPY = """
__device__ __forceinline__ void cp_async_evict_first(void* dst, const void* src) {
  unsigned long long policy;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  asm volatile("cp.async.cg.shared.global.L2::cache_hint.L2::128B [%0], [%1], 16, %2;\\n"
               ::"r"(strata_rt::smem_u32(dst)), "l"(src), "l"(policy));
}
"""


# Probes of the `timeline` cut: lane 0 of every warp records clock64() and %globaltimer at the
# kernel's start (probe 0), at the end of its main loop (1), after each block barrier after the
# loop (2, 3, ...) and at the kernel's end (TIMELINE_PROBES - 1), for the last launch.
TIMELINE_PROBES = 8
TIMELINE = """
__device__ unsigned long long strata_tl[2048][16][2][%d];
#define STRATA_TL(p)                                                                     \\
  do {                                                                                   \\
    if ((threadIdx.x & 31) == 0) {                                                       \\
      unsigned long long g_;                                                             \\
      asm volatile("mov.u64 %%0, %%%%globaltimer;" : "=l"(g_));                           \\
      unsigned long long(&e_)[2][%d] =                                                   \\
          strata_tl[blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z)][threadIdx.x >> 5]; \\
      e_[0][p] = clock64();                                                              \\
      e_[1][p] = g_;                                                                     \\
    }                                                                                    \\
  } while (0)
extern "C" int strata_timeline(unsigned long long* host) {
  return static_cast<int>(cudaMemcpyFromSymbol(host, strata_tl, sizeof(strata_tl)));
}
""" % (TIMELINE_PROBES, TIMELINE_PROBES)


def add_timeline_probes(src):
    """The `timeline` rewrite: TIMELINE's probes in every kernel (one-kernel graphs)."""
    src = src.replace('#include "strata_rt/strata_rt.cuh"',
                      '#include "strata_rt/strata_rt.cuh"\n' + TIMELINE, 1)
    lines, out, probe, post = src.split("\n"), [], 0, False
    for line in lines:
        if line.strip() == "// ---- after the loop":
            out.append("  STRATA_TL(1);")
            probe, post = 1, True
        elif line == "}" and post:
            out.append(f"  STRATA_TL({TIMELINE_PROBES - 1});")
            post = False
        out.append(line)
        if "STRATA_RT_DYNAMIC_SMEM(smem);" in line:
            out.append("  STRATA_TL(0);")
        elif post and line.strip() == "__syncthreads();" and probe < TIMELINE_PROBES - 2:
            probe += 1
            out.append(f"  STRATA_TL({probe});")
    return "\n".join(out)


def timeline_report(so, grid_blocks, warps):
    """Reads the probes of the last launch of a `timeline` library and prints, per probe, the
    spread over blocks of its global time (ns after the first block's start) and the mean
    and max cycles from the end of the loop."""
    import ctypes
    import numpy as np
    lib = ctypes.CDLL(str(so))
    buf = np.zeros((2048, 16, 2, TIMELINE_PROBES), dtype=np.uint64)
    rc = lib.strata_timeline(buf.ctypes.data_as(ctypes.c_void_p))
    if rc != 0:
        print(f"timeline: cudaMemcpyFromSymbol failed ({rc})")
        return
    b = buf[:grid_blocks, :warps].astype(np.int64)
    clk, ns = b[:, :, 0, :], b[:, :, 1, :]
    t0 = ns[:, :, 0].min()
    print(f"timeline of the last launch: {grid_blocks} blocks x {warps} warps "
          f"(ns from the first start; cycles from the warp's loop end)")
    print(f"{'probe':>6}{'ns min':>10}{'ns median':>11}{'ns max':>10}{'cyc mean':>10}{'cyc max':>9}")
    for p in range(TIMELINE_PROBES):
        seen = ns[:, :, p] > 0
        if not seen.any():
            continue
        t = ns[:, :, p][seen] - t0
        c = (clk[:, :, p] - clk[:, :, 1])[seen] if p >= 1 else clk[:, :, 0][seen] * 0
        print(f"{p:>6}{t.min():>10}{int(np.median(t)):>11}{t.max():>10}{c.mean():>10.0f}{c.max():>9}")


def warm_epilogue(src):
    """The `warmepi` rewrite: the main loop and the code after it become the body of a two-pass
    loop; pass 0 skips the main loop and runs the post-loop code with its writes (shared
    accumulators, fragment dumps, global stores) disabled, so that the post-loop instructions
    are fetched into the instruction cache while the prologue's copies are in flight; pass 1
    is the kernel as emitted."""
    lines, out, state = src.split("\n"), [], "pre"
    for line in lines:
        s = line.strip()
        if state == "pre" and s.startswith("// ---- for-loop"):
            out += ["  int strata_pass0 = 0;",
                    '  asm volatile("" : "+r"(strata_pass0));  // 0, opaque to the compiler',
                    "  #pragma unroll 1",
                    "  for (int strata_pass = strata_pass0; strata_pass < 2; ++strata_pass) {",
                    "  if (strata_pass == 1) {"]
            state = "loop"
        elif state == "loop" and s == "// ---- after the loop":
            out.append("  }")
            state = "post"
        elif state == "post" and line == "}":
            out.append("  }")
            state = "done"
        if state == "post":
            line = re.sub(r"(strata_rt::store\w*(?:<[^>]*>)?)\((.*)\);$",
                          r"if (strata_pass == 1) \1(\2); else strata_keep(\2);", line)
            line = re.sub(r"(\bs\d+_\w+\[[^\]]*\]) \+= ([^;]+);",
                          r"if (strata_pass == 1) \1 += \2; else strata_keep(\2);", line)
        out.append(line)
    if state != "done":
        raise ValueError("warmepi: no main loop / post-loop code found")
    return "\n".join(out).replace('#include "strata_rt/strata_rt.cuh"',
                                  '#include "strata_rt/strata_rt.cuh"\n' + KEEP, 1)


# What pass 0 of `warmepi` does instead of a write: the values are computed (an asm statement
# with them as inputs cannot be removed), nothing is written.
KEEP = """
#include <type_traits>
template <class T>
__device__ __forceinline__ void strata_keep_one(const T& v) {
  if constexpr (std::is_same_v<T, float>) {
    asm volatile("" ::"f"(v));
  } else if constexpr (std::is_array_v<T>) {
#pragma unroll
    for (int j = 0; j < static_cast<int>(std::extent_v<T>); ++j) strata_keep_one(v[j]);
  }
}
template <class... A>
__device__ __forceinline__ void strata_keep(const A&... a) { (strata_keep_one(a), ...); }
"""


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
        elif part == "stagger":
            head, marker, tail = src.partition("// ---- after the loop")
            head = head.replace('#include "strata_rt/strata_rt.cuh"',
                                '#include "strata_rt/strata_rt.cuh"\n' + STAGGERED_LOAD, 1)
            src = head + marker + tail.replace("strata_rt::load_f32<8>(&",
                                               "load_f32_staggered(&")
        elif part == "evictw":
            src = src.replace('#include "strata_rt/strata_rt.cuh"',
                              '#include "strata_rt/strata_rt.cuh"\n' + EVICT_FIRST_COPY, 1)
            src = rewrite_blocks(src, r"//\s*load b\d+ .*<- input [1-9]",
                                 lambda b: b.replace("strata_rt::cp_async<16>(",
                                                     "cp_async_evict_first("))
        elif part == "warmepi":
            src = warm_epilogue(src)
        elif part == "timeline":
            src = add_timeline_probes(src)
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


def uses_cublas(source):
    """Whether an emitted source calls cuBLAS: its strata-meta line says "cublas": true (the
    strata JIT then links -lcublas, docs/gpu-runtime.md)."""
    for line in source.splitlines():
        if line.startswith("// strata-meta: "):
            try:
                meta = json.loads(line[len("// strata-meta: "):])
            except ValueError:
                return False
            return isinstance(meta, dict) and meta.get("cublas") is True
    return False


def compile_so(cu, arch, defines=()):
    so = cu.with_suffix(".so")
    cmd = ["nvcc", "-shared", "-Xcompiler", "-fPIC", "-O3", "-std=c++17", f"-arch={arch}",
           "-Xptxas", "-v", "-I", str(ROOT / "runtime"), "-o", str(so), str(cu)]
    cmd += [f"-D{d}" for d in defines] + ["-lcuda"]
    if uses_cublas(cu.read_text()):
        cmd += ["-lcublas"]  # predefined matmuls as cuBLAS calls (docs/codegen.md)
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
    for cut in cuts:
        if "timeline" in cut.split("+"):
            meta = json.loads(re.search(r"^// strata-meta: (.*)$", sources[cut].read_text(),
                                        re.M).group(1))
            kernel = meta["kernels"][0]
            print(f"[{cut}]")
            timeline_report(built[cut][0], kernel["grid"][0] * kernel["grid"][1] *
                            kernel["grid"][2], kernel["block"] // 32)
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
