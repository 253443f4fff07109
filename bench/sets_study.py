#!/usr/bin/env python3
"""How much of a timed call is the CUDA-graph replay's own cost?

The timing method (bench/timing.py) divides a replay's time by the launches in it. With one pass
over the rotated input sets, large-input benchmarks have only 4-5 launches per replay (rmsnorm,
gatedmlp), so a fixed cost per replay (the graph launch and the event between replays) lands on
each call in part. This study times the same systems with the pass repeated until a replay holds
at least L launches, for several L, interleaved over repeats, and fits t(L) = a + b / L: b is the
replay's own cost, a the per-call time it converges to.

  python3 bench/sets_study.py --strata build-gpu/strata \\
      "rmsnorm_b1 bench/search/rmsnorm_b1.json:0 groups=4,walk=0" ... [--launches 1,5,10,20,50,100,200]

Each case is "KEY GRAPH KNOBS" (GRAPH a μGraph JSON or RESULT.json:RANK, KNOBS '-' for none):
the strata candidate is emitted and compiled as bench/ablate.py does, and timed next to PyTorch
eager and torch.compile on the benchmark's inputs. Needs a GPU, PyTorch and nvcc.
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ablate  # noqa: E402  (emit + compile of a candidate)
import benchmarks  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def fit(points):
    """Least squares of t = a + b / L over (L, t) points: (a, b)."""
    xs = [1.0 / n for n, _ in points]
    ts = [t for _, t in points]
    mx, mt = statistics.fmean(xs), statistics.fmean(ts)
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (t - mt) for x, t in zip(xs, ts)) / sxx if sxx > 0 else 0.0
    return mt - b * mx, b


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("cases", nargs="+", help='"KEY GRAPH KNOBS" per benchmark')
    p.add_argument("--strata", default=str(ROOT / "build" / "strata"))
    p.add_argument("--arch", default="sm_90a")
    p.add_argument("--launches", default="1,5,10,20,50,100,200",
                   help="minimum launches per replay to time (1: one pass, the old method)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--runs", type=int, default=100)
    p.add_argument("--json", default=None, help="append the rows to this JSON-lines file")
    args = p.parse_args()

    import torch
    import timing

    launches = [int(x) for x in args.launches.split(",")]
    out = Path(tempfile.mkdtemp(prefix="strata-sets-"))
    rows = []
    for case in args.cases:
        key, graph_spec, knobs = case.split()
        knobs = "" if knobs == "-" else knobs
        graph = ablate.load_graph(graph_spec, out)
        cu = out / f"{key}.cu"
        cmd = [args.strata, "emit", str(graph), "-o", str(cu), "--arch", args.arch]
        subprocess.run(cmd + (["--knobs", knobs] if knobs else []), check=True,
                       capture_output=True)
        so, _ = ablate.compile_so(cu, args.arch)
        name, _, b = key.rpartition("_b")
        cfg = benchmarks.Benchmark(name, int(b))
        inputs = cfg.make_inputs()
        ref = cfg.reference(inputs)
        sets = timing.sets_for(cfg.bytes)
        sets_inputs = [inputs] + [[x.clone() for x in inputs] for _ in range(sets - 1)]
        lib = timing.StrataLibrary(str(so))
        err = timing.check_library(lib, inputs, cfg.output, ref)
        if err > 1e-2:
            sys.exit(f"sets_study: {key}: the strata candidate is wrong (relative error {err:.3g})")
        torch._dynamo.reset()
        compiled = torch.compile(cfg.fn, dynamic=False)
        outs = {}

        def torch_launch(fn, tag):
            def launch(i):
                outs[tag, i] = fn(*sets_inputs[i])
            return launch

        systems = {"strata": None, "eager": torch_launch(cfg.fn, "eager"),
                   "compile": torch_launch(compiled, "compile")}
        for rep in range(args.repeat):
            for n in launches:
                for system, launch in systems.items():
                    if system == "strata":
                        stats = timing.time_library(lib, sets_inputs, cfg.output, args.runs,
                                                    min_launches=n)
                    else:
                        stats = timing.time_launches(launch, sets, runs=args.runs, min_launches=n)
                    rows.append({"key": key, "system": system, "min_launches": n, "rep": rep,
                                 "sets": sets, "passes": stats["passes"],
                                 "median_us": stats["median_us"]})
        outs.clear()
        del sets_inputs, lib
        torch.cuda.empty_cache()

        print(f"\n{key} [{knobs or 'default'}]: {sets} sets per pass; median µs per call "
              f"(best of {args.repeat} repeats) by launches per replay")
        print(f"{'system':<10}" + "".join(f"{f'L≥{n}':>9}" for n in launches)
              + f"{'a (µs)':>9}{'b (µs)':>9}")
        for system in systems:
            best = {}
            for n in launches:
                rs = [r for r in rows if r["key"] == key and r["system"] == system
                      and r["min_launches"] == n]
                best[n] = (min(r["median_us"] for r in rs), rs[0]["sets"] * rs[0]["passes"])
            a, b = fit([(L, t) for t, L in best.values()])
            print(f"{system:<10}" + "".join(f"{best[n][0]:>9.2f}" for n in launches)
                  + f"{a:>9.2f}{b:>9.2f}")
    if args.json:
        with open(args.json, "a") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
