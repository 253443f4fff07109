#!/usr/bin/env python3
"""The suite of LLM programs (bench/suite/) on the GPU: strata vs PyTorch. See bench/README.md,
"The suite".

Every baseline is derived from the program file (bench/torch_program.py): PyTorch eager,
torch.compile (default) and max-autotune, and for programs with an attention pattern also
scaled_dot_product_attention on the flash backend; strata's time is its fastest correct
candidate. The steps and the timing rules are those of bench/strata_bench.py, whose functions
this script shares:
  1. device: GPU, L2; DRAM bandwidth, fp16 tensor peak, launch floor, measured now;
  2. inputs: per program, fp16 inputs by the recipes of its file, also written as float64
     files for `strata profile --inputs`;
  3. candidates: the precomputed `strata optimize` result <search-dir>/<program>.json if
     present, else a search here (--search-time), else the program itself;
  4. compile, 5. check + profile (`strata profile` against its float64 reference);
  6. bench: every PyTorch system and every correct strata (candidate, variant) in this process,
     each output checked against the float64 PyTorch reference before it is timed; then the
     best PyTorch system and strata's pick again, head to head in interleaved replays (their
     median per-round ratio is the program's speedup);
  7. report: <out>/<gpu>-<date>.md and .json (bench/report.py, kind "suite"; `report.py merge`
     joins the parts of a run).

A run may be cut into parts (--part I/N: every N-th program from the I-th, in name order;
--programs: a list) and bounded in time (--budget-s: programs not started when the budget is
spent are reported as skipped), so that each part fits one call of the GPU machine.
"""

import argparse
import datetime
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import benchmarks  # noqa: E402
import report  # noqa: E402
import strata_bench as sb  # noqa: E402
import strata_program  # noqa: E402
import timing  # noqa: E402
import torch_program  # noqa: E402

ROOT = HERE.parent
SUITE = HERE / "suite"
TOLERANCE = sb.TOLERANCE
MODES = ["eager", "compile", "max-autotune", "sdpa-flash"]
log = sb.log


class SuiteProgram:
    """One suite program as the shared steps of strata_bench.py expect a configuration: key,
    input names and shapes, output shapes, bytes and FLOPs of the floor, the PyTorch function
    (eager; on float64 copies, the reference), its SDPA variant (or None) and the inputs."""

    def __init__(self, path):
        self.path = Path(path)
        self.program = strata_program.load(path)
        p = self.program
        bad = [t.name for t in p.inputs if t.dtype != "f16"]
        if bad:
            raise ValueError(f"{path}: inputs {bad} are not f16 (the harness times f16 programs)")
        self.key = self.name = p.name
        self.origin = p.origin
        self.inputs = [(t.name, t.shape) for t in p.inputs]
        self.output = p.output_shapes()
        self.bytes = p.bytes
        self.flops = p.flops
        self.fn = torch_program.function(p)
        self.sdpa_fn = torch_program.sdpa_function(p)

    def make_inputs(self, seed=0, device="cuda"):
        return torch_program.make_inputs(self.program, seed=seed, device=device)

    def reference(self, inputs):
        return self.fn(*[x.double() for x in inputs])


def select(args):
    suite = Path(getattr(args, "suite_dir", "") or SUITE)
    every = sorted(suite.glob("*.strata"))
    names = {p.stem: p for p in every}
    if args.programs:
        wanted = [n for n in args.programs.split(",") if n]
        missing = [n for n in wanted if n not in names]
        if missing:
            sys.exit(f"suite_bench: no program {', '.join(missing)} in {suite}")
        chosen = [names[n] for n in wanted]
    else:
        chosen = every
    if args.part:
        try:
            i, n = (int(x) for x in args.part.split("/"))
            assert 1 <= i <= n
        except (ValueError, AssertionError):
            sys.exit(f"suite_bench: --part {args.part!r}: expected I/N with 1 <= I <= N")
        chosen = chosen[i - 1::n]
    if not chosen:
        sys.exit("suite_bench: no program selected")
    return [SuiteProgram(p) for p in chosen]


def find_candidates(cfg, args, out, strata, has_optimize):
    """Documents whose ranked graphs are profiled, and where they came from."""
    given = Path(args.search_dir) / f"{cfg.key}.json" if args.search_dir else None
    if given and given.exists():
        return [given], "search result " + str(given)
    if has_optimize and args.search_time > 0:
        result = out / "search" / f"{cfg.key}.json"
        result.parent.mkdir(parents=True, exist_ok=True)
        # The verifier does not always stop at the time limit (bench/suite/README.md): a
        # search still running at twice the limit is ended and the program profiled instead.
        cap = 2 * args.search_time + 30
        try:
            r = sb.run([strata, "optimize", cfg.path, "-o", result, "--time-limit",
                        args.search_time, "--top", args.top, "--quiet", "--no-show", "--no-gpu"],
                       timeout=cap)
            if result.exists():
                return [result], f"strata optimize --time-limit {args.search_time:g} (on this machine)"
            log(f"   optimize failed ({r.returncode}): {r.stderr.strip()[:400]}")
        except subprocess.TimeoutExpired:
            log(f"   optimize still running after {cap:g} s: ended")
            return [cfg.path], (f"the program itself (strata optimize --time-limit "
                                f"{args.search_time:g} was still running after {cap:g} s)")
    return [cfg.path], "the program itself (no search result)"


def bench_program(cfg, prof, modes, runs, seed, head_to_head=True):
    """PyTorch systems and strata's correct candidates on one program (strata_bench.py's
    method), then the best PyTorch system against strata's pick in interleaved replays
    (strata_bench.bench_head_to_head; off: head_to_head=False); the result entry of the report."""
    inputs = cfg.make_inputs(seed=seed)
    ref = cfg.reference(inputs)
    sets = timing.sets_for(cfg.bytes)
    result = {"program": cfg.key, "origin": cfg.origin,
              "inputs": {n: list(s) for n, s in cfg.inputs},
              "outputs": [list(s) for s in cfg.output], "bytes": cfg.bytes, "flops": cfg.flops,
              "sets": sets, "attention": cfg.sdpa_fn is not None, "systems": {}}
    torch._dynamo.reset()
    systems = {
        "eager": lambda: cfg.fn,
        "compile": lambda: torch.compile(cfg.fn, dynamic=False),
        # As in strata_bench.py: max-autotune's kernels without Inductor's own CUDA graphs.
        "max-autotune": lambda: torch.compile(cfg.fn, dynamic=False,
                                              mode="max-autotune-no-cudagraphs"),
        "sdpa-flash": lambda: cfg.sdpa_fn,
    }
    fns = {}
    for mode in modes:
        if mode == "sdpa-flash" and cfg.sdpa_fn is None:
            continue
        start = time.time()
        try:
            fns[mode] = systems[mode]()
            entry = sb.bench_torch(cfg, fns[mode], inputs, ref, sets, runs)
        except Exception as e:  # a failing baseline is reported, not fatal
            entry = {"ok": False, "error": f"{type(e).__name__}: {e}"[:800]}
        entry["wall_s"] = round(time.time() - start, 1)
        result["systems"][mode] = entry
        log(f"   {cfg.key} {mode}: " + (f"{entry['median_us']:.2f} us" if "median_us" in entry
                                         else entry.get("error", "wrong answer")))
    sb.bench_candidates(cfg, prof, inputs, ref, sets, runs, result)
    if head_to_head:
        sb.bench_head_to_head(cfg, result, fns, inputs, sets, runs)
    del inputs, ref, fns
    return result


def skipped(cfg, why):
    return {"program": cfg.key, "origin": cfg.origin, "bytes": cfg.bytes, "flops": cfg.flops,
            "systems": {}, "skipped": why}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", default=str(HERE / "results"), help="output directory")
    p.add_argument("--strata", default=str(ROOT / "build" / "strata"), help="the strata tool")
    p.add_argument("--suite-dir", default=os.environ.get("STRATA_SUITE_DIR", str(SUITE)),
                   help="folder of .strata programs (default bench/suite/; e.g. examples/real)")
    p.add_argument("--programs", default=os.environ.get("STRATA_SUITE_NAMES", ""),
                   help="comma-separated program names (default: all of bench/suite/)")
    p.add_argument("--part", default=os.environ.get("STRATA_SUITE_PART", ""),
                   help="I/N: the I-th of N parts (every N-th program in name order)")
    p.add_argument("--modes", default=",".join(MODES), help="PyTorch systems to time")
    p.add_argument("--top", type=int, default=5, help="candidates profiled per search result")
    p.add_argument("--variants",
                   default=os.environ.get("STRATA_BENCH_VARIANTS",
                                          "default;groups=4;minblocks=2;regfloats=96,chainmt=2;groups=4,walk=0;wgmma=1"),
                   help="emitter variants profiled per candidate (as strata_bench.py)")
    p.add_argument("--search-dir", default=os.environ.get("STRATA_SUITE_SEARCH_DIR", ""),
                   help="directory of precomputed `strata optimize` results <program>.json "
                        "(bench/search/suite/, made by bench/suite_search.py --keep)")
    p.add_argument("--search-time", type=float, default=60.0,
                   help="--time-limit of a search run here when no result is given (0: none "
                        "is run; the program itself is profiled)")
    p.add_argument("--runs", type=int, default=100, help="timed CUDA-graph replays (>= 100)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-head-to-head", action="store_true",
                   help="skip timing the best PyTorch system against strata's pick in "
                        "interleaved replays (the speedup is then the ratio of the medians "
                        "timed one system after another)")
    p.add_argument("--budget-s", type=float, default=0,
                   help="wall seconds for the whole run: a program not started in time is "
                        "reported as skipped (0: no budget)")
    p.add_argument("--work", default="", help="scratch directory for the float64 input files")
    p.add_argument("--phase", choices=["all", "profile", "bench"], default="all",
                   help="as strata_bench.py: profile stops after `strata profile`; bench times "
                        "on the profile reports and plans.json of an earlier run in --out")
    args = p.parse_args()
    if not torch.cuda.is_available():
        sys.exit("suite_bench: no CUDA device visible to PyTorch")
    out = Path(args.out).resolve()
    for sub in ("profile", "candidates"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    scratch = None
    if not args.work:
        scratch = tempfile.mkdtemp(prefix="strata-suite-")
        args.work = scratch
    try:
        run_steps(args, out)
    finally:
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)


def run_steps(args, out):
    started = time.time()
    strata = str(Path(args.strata).resolve())
    modes = [m for m in args.modes.split(",") if m]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        sys.exit(f"suite_bench: unknown modes {unknown}; expected some of {MODES}")
    configs = select(args)
    log(f"   {len(configs)} programs: {', '.join(c.key for c in configs)}")
    phases = {}

    def over_budget():
        return args.budget_s > 0 and time.time() - started > args.budget_s

    with sb.Phase("device", phases):
        device = sb.measure_device()

    plans_path = out / "plans.json"
    profiles, skip = {}, {}
    if args.phase == "bench":
        plans = json.loads(plans_path.read_text())
        configs = [c for c in configs if c.key in plans]
        for cfg in configs:
            f = out / "profile" / f"{cfg.key}.json"
            profiles[cfg.key] = json.loads(f.read_text()) if f.exists() else None
        with sb.Phase("compile", phases):
            sb.compile_all(configs, plans, strata, device["arch"], out, args.top,
                           sb.variant_args(args))
    else:
        with sb.Phase("inputs", phases):
            for cfg in configs:
                d = Path(args.work) / "inputs" / cfg.key
                d.mkdir(parents=True, exist_ok=True)
                for (name, _), t in zip(cfg.inputs, cfg.make_inputs(seed=args.seed, device="cpu")):
                    benchmarks.write_f64(t, d / f"{name}.f64")
        has_optimize = sb.strata_has(strata, "optimize")
        plans = {}
        with sb.Phase("candidates", phases):
            for cfg in configs:
                docs, source = find_candidates(cfg, args, out, strata, has_optimize)
                plans[cfg.key] = {"program": str(cfg.path), "documents": [str(d) for d in docs],
                                  "source": source}
                log(f"   {cfg.key}: {source}")
            plans_path.write_text(json.dumps(plans, indent=2) + "\n")
        with sb.Phase("compile", phases):
            sb.compile_all(configs, plans, strata, device["arch"], out, args.top,
                           sb.variant_args(args))
        with sb.Phase("check + profile (strata profile)", phases):
            for cfg in configs:
                if over_budget():
                    skip[cfg.key] = "time budget spent before its profile"
                    continue
                profiles[cfg.key] = sb.profile(cfg, plans[cfg.key], strata, out, args)

    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    stem = out / f"{sb.gpu_slug(device['name'])}-{date}"

    def write_report(results):
        phases["total"] = round(time.time() - started, 1)
        doc = report.build(device, results, profiles, plans, phases, TOLERANCE, kind="suite")
        Path(str(stem) + ".json").write_text(json.dumps(doc, indent=2) + "\n")
        Path(str(stem) + ".md").write_text(report.markdown(doc))
        return doc

    results = []
    if args.phase != "profile":
        with sb.Phase("bench", phases):
            for cfg in configs:
                if cfg.key in skip or over_budget():
                    why = skip.get(cfg.key, "time budget spent before its benchmark")
                    results.append(skipped(cfg, why))
                    log(f"   {cfg.key}: skipped ({why})")
                else:
                    r = bench_program(cfg, profiles.get(cfg.key), modes, args.runs, args.seed,
                                      head_to_head=not args.no_head_to_head)
                    r["candidates_from"] = plans[cfg.key]["source"]
                    results.append(r)
                gc.collect()
                torch.cuda.empty_cache()
                write_report(results)  # a run cut short still leaves the programs done

    doc = write_report(results)
    log(f"wrote {stem}.md and {stem}.json")
    print(report.markdown(doc))


if __name__ == "__main__":
    main()
