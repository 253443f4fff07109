#!/usr/bin/env python3
"""strata vs PyTorch on the six paper benchmarks. See bench/README.md.

Steps (each logged with its wall time):
  1. device: GPU name, L2 size; DRAM bandwidth (large copy), fp16 tensor peak (large matmul)
     and the per-launch floor (trivial kernel in a CUDA graph), measured in this run;
  2. inputs: per benchmark and batch, fp16 inputs from a fixed recipe (benchmarks.py), also
     written as float64 files for `strata profile --inputs`;
  3. candidates: a `strata optimize` result per program (--search-dir, else a time-limited
     search when the tool has `optimize`, else the paper's reference μGraph from examples/);
  4. compile: every candidate emitted once per emitter variant (--variants, default the tuning
     list of `strata optimize`: default, groups=4, minblocks=2, regfloats=96,chainmt=2, groups=4,walk=0, wgmma=1) and compiled into
     the binary cache, all programs at once (`strata profile --compile-only`);
  5. check + profile: `strata profile` checks every candidate against the float64 reference
     interpreter on the same inputs and times those that pass; predicted (cost model) vs
     measured times are the calibration data;
  6. bench: PyTorch eager, torch.compile (default) and torch.compile max-autotune, and every
     correct strata (candidate, variant) through ctypes, all in this process, each output checked against
     a float64 PyTorch reference before it is timed;
  7. report: <out>/<gpu>-<date>.md and .json.
"""

import argparse
import concurrent.futures
import ctypes
import datetime
import json
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchmarks  # noqa: E402
import report  # noqa: E402
import timing  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TOLERANCE = 1e-2
MODES = ["eager", "compile", "max-autotune"]


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Phase:
    def __init__(self, name, record):
        self.name, self.record = name, record

    def __enter__(self):
        log(f"== {self.name}")
        self.start = time.time()

    def __exit__(self, *exc):
        self.record[self.name] = round(time.time() - self.start, 1)
        log(f"   {self.name}: {self.record[self.name]} s")


def arch_of_device():
    major, minor = torch.cuda.get_device_capability()
    arch = f"sm_{major}{minor}"
    return arch + "a" if (major, minor) in ((9, 0), (10, 0)) else arch


def gpu_slug(name):
    lower = name.lower()
    for known in ("h200", "h100", "b200", "a100", "l40s", "l4"):
        if known in lower:
            return known
    return re.sub(r"[^a-z0-9]+", "-", lower).strip("-") or "gpu"


def run(cmd, **kw):
    log("$ " + " ".join(str(c) for c in cmd))
    return subprocess.run([str(c) for c in cmd], text=True, capture_output=True, **kw)


def strata_has(strata, subcommand):
    r = subprocess.run([strata, "--help"], text=True, capture_output=True)
    return re.search(rf"^\s+{subcommand}\b", r.stdout, re.M) is not None


# ---- candidates and the C++ profiler ------------------------------------------------------


def program_for(cfg, can_parse_programs):
    """The reference program: the .strata file when this build parses it, else the paper's
    reference μGraph (proven equivalent to it by tests/examples_test.cc)."""
    if can_parse_programs:
        return ROOT / "examples" / "programs" / f"{cfg.key}.strata"
    return ROOT / "examples" / "reference" / f"{cfg.key}.json"


def find_candidates(cfg, args, out, strata, program, has_optimize):
    """Documents whose ranked graphs are profiled, and where they came from."""
    given = Path(args.search_dir) / f"{cfg.key}.json" if args.search_dir else None
    if given and given.exists():
        return [given], "search result " + str(given)
    reference = ROOT / "examples" / "reference" / f"{cfg.key}.json"
    if has_optimize and args.search_time > 0:
        result = out / "search" / f"{cfg.key}.json"
        result.parent.mkdir(parents=True, exist_ok=True)
        r = run([strata, "optimize", program, "-o", result, "--enum-time-limit", args.search_time,
                 "--top", args.top, "--quiet"])
        if result.exists():
            return [result], f"strata optimize --enum-time-limit {args.search_time}"
        log(f"   optimize failed ({r.returncode}): {r.stderr.strip()[:400]}")
    documents = [reference]
    if program != reference:
        documents.append(program)
    return documents, "reference μGraph and the program itself (no search result)"


def compile_all(configs, plans, strata, arch, out, top, variants):
    """Emits and compiles every candidate of every program into the binary cache, several
    programs at once (nvcc is single-threaded)."""
    cpus = os.cpu_count() or 4
    per = max(2, cpus // 4)

    def one(cfg):
        plan = plans[cfg.key]
        dst = out / "profile" / f"{cfg.key}.compile.json"
        r = run([strata, "profile", plan["program"], *plan["documents"], "--top", top,
                 *variants, "--compile-only", "--arch", arch, "--jobs", per, "-q", "-o", dst])
        return cfg.key, r.returncode, r.stderr.strip()

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, cpus // per)) as pool:
        for key, rc, err in pool.map(one, configs):
            if rc not in (0, 1):
                log(f"   {key}: compile step failed ({rc}): {err[:400]}")


def variant_args(args):
    """`strata profile --variants` arguments: every candidate once per emitter knob spec."""
    return ["--variants", args.variants] if args.variants else []


def profile(cfg, plan, strata, out, args):
    """`strata profile` with restarts: a candidate that leaves the device unusable ends the
    process's usefulness, so the remaining candidates are profiled in a fresh process."""
    inputs_dir = Path(args.work) / "inputs" / cfg.key
    merged, only = None, None
    for attempt in range(4):
        dst = out / "profile" / f"{cfg.key}.json" if attempt == 0 else \
            out / "profile" / f"{cfg.key}.retry{attempt}.json"
        cmd = [strata, "profile", plan["program"], *plan["documents"], "--top", args.top,
               *variant_args(args), "--inputs", inputs_dir, "--runs", args.runs, "-o", dst,
               "--export-dir", out / "candidates" / cfg.key]
        if only:
            cmd += ["--only", ",".join(map(str, only))]
        r = run(cmd)
        print(r.stdout, end="", flush=True)
        if not dst.exists():
            log(f"   strata profile failed ({r.returncode}): {r.stderr.strip()[:600]}")
            return merged
        doc = json.loads(dst.read_text())
        if merged is None:
            merged = doc
        else:
            for c in doc["candidates"]:
                if c["status"] != "skipped":
                    merged["candidates"][c["index"]] = c
        lost = [c["index"] for c in merged["candidates"]
                if c["status"] == "not_run" and "unusable" in c.get("error", "")]
        if not lost:
            break
        only = lost
    if merged is not None:
        (out / "profile" / f"{cfg.key}.json").write_text(json.dumps(merged, indent=2) + "\n")
    return merged


# ---- in-process timing -------------------------------------------------------------------


def rotated_inputs(inputs, sets):
    return [inputs] + [[x.clone() for x in inputs] for _ in range(sets - 1)]


def bench_torch(cfg, fn, inputs, ref, sets, runs):
    """Checks fn on the first set, then times it over rotated sets."""
    got = fn(*inputs)
    torch.cuda.synchronize()
    err = timing.relative_l2_error(got, ref)
    entry = {"rel_l2_error": err if math.isfinite(err) else "inf", "ok": err <= TOLERANCE}
    if not entry["ok"]:
        log(f"   {cfg.key}: output off by {err:.3g} (> {TOLERANCE}); timed anyway, marked wrong")
    entry.update(timing.time_launches(torch_launch(fn, inputs, sets), sets, runs=runs))
    return entry


def torch_launch(fn, inputs, sets):
    """launch(i) calling fn on the i-th of `sets` rotated copies of inputs (time_launches)."""
    sets_inputs = rotated_inputs(inputs, sets)
    outs = [None] * sets

    def launch(i):
        outs[i] = fn(*sets_inputs[i])

    return launch


def bench_head_to_head(cfg, result, fns, inputs, sets, runs):
    """The best correct PyTorch system of result["systems"] against strata's pick, timed again
    in interleaved replays (timing.time_head_to_head); sets result["head_to_head"] with both
    medians and the median per-round ratio PyTorch / strata (the speedup the report takes).
    `fns`: the PyTorch systems' functions by mode, as they were timed. Does nothing when either
    side has no correct time; a failure is recorded, not raised."""
    systems = result["systems"]
    torch_ok = {m: e for m, e in systems.items()
                if m != "strata" and m in fns and e.get("ok") and "median_us" in e}
    pick = systems.get("strata")
    if not torch_ok or not pick or "library" not in pick:
        return
    mode = min(torch_ok, key=lambda m: torch_ok[m]["median_us"])
    try:
        lib = timing.StrataLibrary(pick["library"])
        got = timing.time_head_to_head({
            mode: (torch_launch(fns[mode], inputs, sets), sets),
            "strata": (timing.library_launch(lib, rotated_inputs(inputs, sets), cfg.output),
                       sets)}, runs=runs)
    except Exception as e:
        result["head_to_head"] = {"error": f"{type(e).__name__}: {e}"[:800]}
        return
    result["head_to_head"] = {"pytorch": mode, "pytorch_us": got[mode]["median_us"],
                              "strata_us": got["strata"]["median_us"],
                              "strata_index": pick.get("index"), "runs": runs,
                              "speedup": got["ratios"][f"{mode}/strata"]}
    log(f"   {cfg.key} head to head: {mode} {got[mode]['median_us']:.2f} us, strata "
        f"{got['strata']['median_us']:.2f} us, {result['head_to_head']['speedup']:.3f}x")


def bench_strata(cfg, library, inputs, ref, sets, runs):
    lib = timing.StrataLibrary(library)
    err = timing.check_library(lib, inputs, cfg.output, ref)
    entry = {"library": library, "rel_l2_error": err if math.isfinite(err) else "inf",
             "ok": err <= TOLERANCE}
    if not entry["ok"]:
        return entry
    entry.update(timing.time_library(lib, rotated_inputs(inputs, sets), cfg.output, runs))
    return entry


def bench_candidates(cfg, prof, inputs, ref, sets, runs, result):
    """Every correct (candidate, variant) of a `strata profile` report timed by bench_strata;
    sets result["strata_candidates"] and result["systems"]["strata"] (the fastest)."""
    candidates = []
    for c in (prof or {}).get("candidates", []):
        if c.get("status") != "ok" or "library" not in c or "same_as" in c:
            continue  # failed, or the same code as an earlier (candidate, variant): timed there
        try:
            entry = bench_strata(cfg, c["library"], inputs, ref, sets, runs)
        except Exception as e:
            entry = {"ok": False, "error": f"{type(e).__name__}: {e}"[:800]}
        entry.update({"index": c["index"], "origin": c["origin"], "variant": c.get("variant"),
                      "predicted_us": c.get("predicted_us"),
                      "profiler_median_us": c.get("timing", {}).get("median_us")})
        candidates.append(entry)
        if "median_us" in entry:
            log(f"   {cfg.key} strata #{c['index']}: {entry['median_us']:.2f} us")
    result["strata_candidates"] = candidates
    timed = [c for c in candidates if c.get("ok") and "median_us" in c]
    if timed:
        result["systems"]["strata"] = dict(min(timed, key=lambda c: c["median_us"]))


def bench_config(cfg, inputs, prof, modes, runs, head_to_head=True):
    ref = cfg.reference(inputs)
    sets = timing.sets_for(cfg.bytes)
    result = {"benchmark": cfg.name, "batch": cfg.batch,
              "inputs": {n: list(s) for n, s in cfg.inputs}, "output": list(cfg.output),
              "bytes": cfg.bytes, "flops": cfg.flops, "sets": sets, "systems": {}}
    torch._dynamo.reset()
    compiled = {
        "eager": cfg.fn,
        "compile": lambda: torch.compile(cfg.fn, dynamic=False),
        # Inductor's own CUDA graphs cannot nest inside ours; this mode is max-autotune with
        # them off, so the kernels are max-autotune's and the replay is timed like the rest.
        "max-autotune": lambda: torch.compile(cfg.fn, dynamic=False,
                                              mode="max-autotune-no-cudagraphs"),
    }
    fns = {}
    for mode in modes:
        start = time.time()
        try:
            fns[mode] = compiled[mode] if mode == "eager" else compiled[mode]()
            entry = bench_torch(cfg, fns[mode], inputs, ref, sets, runs)
        except Exception as e:  # a failing baseline is reported, not fatal
            entry = {"ok": False, "error": f"{type(e).__name__}: {e}"[:800]}
        entry["wall_s"] = round(time.time() - start, 1)
        result["systems"][mode] = entry
        log(f"   {cfg.key} {mode}: " + (f"{entry['median_us']:.2f} us" if "median_us" in entry
                                         else entry.get("error", "wrong answer")))
    bench_candidates(cfg, prof, inputs, ref, sets, runs, result)
    if head_to_head:
        bench_head_to_head(cfg, result, fns, inputs, sets, runs)
    return result


# ---- main --------------------------------------------------------------------------------


def measure_device():
    """The GPU and the floor's figures, measured now (bench/README.md, "Steps", 1)."""
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    device = {"name": props.name, "arch": arch_of_device(), "sm_count": props.multi_processor_count,
              "l2_bytes": timing.l2_bytes(), "torch": torch.__version__,
              "cuda": torch.version.cuda, "python": platform.python_version()}
    device["bandwidth_Bps"] = timing.measure_bandwidth()
    device["tensor_peak_flops"] = timing.measure_tensor_peak()
    device["launch_us"] = timing.measure_launch_floor()
    log(f"   {device['name']} ({device['arch']}): {device['bandwidth_Bps'] / 1e12:.2f} TB/s, "
        f"{device['tensor_peak_flops'] / 1e12:.0f} TFLOP/s fp16, "
        f"launch {device['launch_us']:.2f} us, L2 {device['l2_bytes'] / 2**20:.0f} MiB")
    return device



def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", default=str(ROOT / "bench" / "results"), help="output directory")
    p.add_argument("--strata", default=str(ROOT / "build" / "strata"), help="the strata tool")
    p.add_argument("--benchmarks", default=",".join(benchmarks.NAMES))
    p.add_argument("--batches", default="1,8")
    p.add_argument("--modes", default=",".join(MODES), help="PyTorch systems to time")
    p.add_argument("--top", type=int, default=5, help="candidates profiled per search result")
    p.add_argument("--variants",
                   default=os.environ.get("STRATA_BENCH_VARIANTS",
                                          "default;groups=4;minblocks=2;regfloats=96,chainmt=2;groups=4,walk=0;wgmma=1"),
                   help="emitter variants profiled per candidate (knob specs separated by ';', "
                        "see `strata emit --list-knobs`; the default is strata optimize's tuning "
                        "list; 'default' = the emitter's own choice only)")
    p.add_argument("--search-dir", default=os.environ.get("STRATA_SEARCH_DIR", ""),
                   help="directory of precomputed `strata optimize` results <bench>_b<b>.json")
    p.add_argument("--search-time", type=float, default=10.0,
                   help="enumeration time limit (--enum-time-limit) of each search run here "
                        "when no result is given (0: none); verification is not bounded")
    p.add_argument("--runs", type=int, default=100, help="timed CUDA-graph replays (>= 100)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-head-to-head", action="store_true",
                   help="skip timing the best PyTorch system against strata's pick in "
                        "interleaved replays (the speedup is then the ratio of the medians "
                        "timed one system after another)")
    p.add_argument("--work", default="",
                   help="scratch directory for the float64 input files (default: a temporary "
                        "directory, removed at the end)")
    p.add_argument("--phase", choices=["all", "profile", "bench"], default="all",
                   help="profile: stop after `strata profile`; bench: only time, reusing the "
                        "profile reports and plans.json of an earlier run in --out")
    args = p.parse_args()
    if not torch.cuda.is_available():
        sys.exit("strata_bench: no CUDA device visible to PyTorch")
    out = Path(args.out).resolve()
    for sub in ("profile", "candidates"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    scratch = None
    if not args.work:
        scratch = tempfile.mkdtemp(prefix="strata-bench-")
        args.work = scratch
    try:
        run_steps(args, out)
    finally:
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)


def run_steps(args, out):
    strata = str(Path(args.strata).resolve())
    modes = [m for m in args.modes.split(",") if m]
    configs = [benchmarks.Benchmark(n, int(b)) for n in args.benchmarks.split(",")
               for b in args.batches.split(",")]
    phases = {}
    started = time.time()

    with Phase("device", phases):
        device = measure_device()

    with Phase("inputs", phases):
        inputs = {}
        for cfg in configs:
            inputs[cfg.key] = cfg.make_inputs(seed=args.seed)
            if args.phase == "bench":
                continue  # the C++ profiler's input files are not needed
            d = Path(args.work) / "inputs" / cfg.key
            d.mkdir(parents=True, exist_ok=True)
            for (name, _), t in zip(cfg.inputs, inputs[cfg.key]):
                benchmarks.write_f64(t, d / f"{name}.f64")

    plans_path = out / "plans.json"
    profiles = {}
    if args.phase == "bench":
        plans = json.loads(plans_path.read_text())
        for cfg in configs:
            f = out / "profile" / f"{cfg.key}.json"
            profiles[cfg.key] = json.loads(f.read_text()) if f.exists() else None
        # The libraries of the profile reports live in the binary cache, keyed by source, arch
        # and toolkit: compiling again restores them on a fresh machine (a no-op otherwise).
        with Phase("compile", phases):
            compile_all(configs, plans, strata, device["arch"], out, args.top, variant_args(args))
    else:
        plans = {}
        can_parse = run([strata, "cost", ROOT / "examples" / "programs" / "rmsnorm_b1.strata"]).returncode == 0
        has_optimize = strata_has(strata, "optimize")
        log(f"   .strata programs {'parsed' if can_parse else 'not parsed: reference μGraphs serve as programs'}; "
            f"optimize {'available' if has_optimize else 'not available'}")
        with Phase("candidates", phases):
            for cfg in configs:
                program = program_for(cfg, can_parse)
                docs, source = find_candidates(cfg, args, out, strata, program, has_optimize)
                plans[cfg.key] = {"program": str(program), "documents": [str(d) for d in docs],
                                  "source": source}
                log(f"   {cfg.key}: {source}")
            plans_path.write_text(json.dumps(plans, indent=2) + "\n")

        with Phase("compile", phases):
            compile_all(configs, plans, strata, device["arch"], out, args.top,
                        variant_args(args))

        with Phase("check + profile (strata profile)", phases):
            for cfg in configs:
                profiles[cfg.key] = profile(cfg, plans[cfg.key], strata, out, args)

    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    stem = out / f"{gpu_slug(device['name'])}-{date}"

    def write_report(results):
        phases["total"] = round(time.time() - started, 1)
        doc = report.build(device, results, profiles, plans, phases, TOLERANCE)
        Path(str(stem) + ".json").write_text(json.dumps(doc, indent=2) + "\n")
        Path(str(stem) + ".md").write_text(report.markdown(doc))
        return doc

    results = []
    if args.phase != "profile":
        with Phase("bench", phases):
            for cfg in configs:
                r = bench_config(cfg, inputs[cfg.key], profiles.get(cfg.key), modes, args.runs,
                                 head_to_head=not args.no_head_to_head)
                r["candidates_from"] = plans[cfg.key]["source"]
                results.append(r)
                torch.cuda.empty_cache()
                write_report(results)  # a run cut short still leaves the configurations done

    doc = write_report(results)
    log(f"wrote {stem}.md and {stem}.json")
    print(report.markdown(doc))


if __name__ == "__main__":
    main()
