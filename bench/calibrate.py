#!/usr/bin/env python3
"""Fit the cost model's constants (src/cost/cost_model.cc, docs/cost-model.md) to measured times.

Input: the output folder of a benchmark run (scripts/gpu-check.sh OUT: `profile/<key>.json`
strata profile reports and `candidates/<key>/cand<i>.json` μGraphs) or of an emitter sweep
(scripts/gpu-sweep.sh OUT: reports whose candidates name their μGraph as origin; only the
default emitter variant is used), or a recorded benchmark result (bench/results/<gpu>-<date>.json:
its calibration points name their μGraph as `RESULT.json: ranked[i].graph` of this checkout's
search results). For every correct, timed candidate this script asks `strata cost --json` for
the model's per-kernel features (DRAM bytes, bytes re-read from L2, tensor and SIMT FLOPs,
blocks) and fits

    t = Σ_kernels [ (bytes / BW + l2_bytes / BW_L2 + narrow_bytes / BW_narrow) · α_c
                    + (tensor_flops / TP + simt_flops / SP) · u
                    + F · t_iter + L ],
    α_c = 1 + c · N_SM / N_blocks,   u = max(1, N_SM / N_blocks)

(the model's α is c = 1) by least squares on the relative error (each point weighted by
1 / measured), with every rate and L non-negative, for c on a grid. It prints the fit, the error
of the current and the fitted constants (median and worst |log(pred / measured)|, Pearson of
logs, Spearman), and writes the points and both fits as JSON with --json.

A result JSON names its candidates by origin in this checkout; `RESULT.json@REV` reads them as
they were at git revision REV (the search results the run profiled).

Usage: python3 bench/calibrate.py OUT_DIR|RESULT.json[@REV]... [--strata build/strata] [--target h200]
                                  [--json calibration.json]
Pure Python (no numpy), so it runs on a machine without the benchmark's dependencies.
"""
import argparse
import itertools
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import pearson, spearman  # noqa: E402

SM_COUNT = {"h100": 132, "h200": 132, "a100": 108}
NAMES = ["1/BW (s/byte)", "1/BW_L2 (s/byte)", "1/BW_narrow (s/byte)", "1/TP (s/tensor FLOP)",
         "1/SP (s/SIMT FLOP)", "L (s/kernel)", "t_iter (s/iteration)"]
KEYS = ["inv_bandwidth", "inv_l2_bandwidth", "inv_narrow_bandwidth", "inv_tensor_peak",
        "inv_simt_peak", "launch_s", "iteration_latency_s"]
TENSOR = 3  # index of the tensor-core rate among the features


def resolve_graph(out, key, c, scratch, rev=None):
    """A local μGraph file for candidate c of report `key`: the exported candidate (benchmark
    runs), else its origin: a μGraph path (mapped into this checkout or OUT/graphs) or
    `RESULT.json: ranked[i].graph` of a search result (extracted into `scratch`). With `rev`, a
    git revision, the origin is read as it was in that revision of this repository."""
    exported = out / "candidates" / key / f"cand{c['index']}.json"
    if exported.exists():
        return exported
    origin = c.get("origin", "")
    path, _, member = origin.partition(": ")
    if rev:
        r = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:{path}"], capture_output=True,
                           text=True)
        if r.returncode != 0:
            return None
        local = scratch / f"{rev}.{Path(path).name}"
        local.write_text(r.stdout)
    else:
        candidates = [Path(path), ROOT / path, out / "graphs" / Path(path).name]
        if "/examples/" in path:
            candidates.append(ROOT / "examples" / path.split("/examples/", 1)[1])
        local = next((p for p in candidates if p.exists()), None)
    if local is None or not member:
        return local
    rank = int(member.split("[", 1)[1].split("]", 1)[0])
    doc = json.loads(local.read_text())
    extracted = scratch / f"{local.stem}.rank{rank}.json"
    extracted.write_text(json.dumps(doc["ranked"][rank]["graph"]))
    return extracted


def timed_candidates(out):
    """(config, candidate) for every correct timed candidate of a run folder (of the default
    emitter variant, for sweep reports) or of a recorded result JSON (its calibration points)."""
    if out.is_file():
        doc = json.loads(out.read_text())
        for p in doc.get("calibration", {}).get("points", []):
            yield p["config"], {"index": p["index"], "origin": p["origin"],
                                "timing": {"median_us": p["measured_us"]}}
        return
    for report in sorted((out / "profile").glob("*_b[0-9]*.json")):
        doc = json.loads(report.read_text())
        for c in doc.get("candidates", []):
            if c.get("status") != "ok" or not c.get("timing"):
                continue
            if c.get("variant", "default") == "default":
                yield report.stem, c


def load_points(spec, strata, target, scratch):
    """(config, index, measured_s, kernels) for every correct timed candidate of SPEC: a run
    folder, a result JSON, or RESULT.json@REV (its μGraph origins read at git revision REV)."""
    path, _, rev = spec.rpartition("@") if "@" in spec else (spec, "", "")
    out = Path(path)
    points = []
    for key, c in timed_candidates(out):
        graph = resolve_graph(out if out.is_dir() else out.parent, key, c, scratch, rev or None)
        if graph is None:
            print(f"calibrate: no μGraph for {key} #{c['index']}, point skipped", file=sys.stderr)
            continue
        r = subprocess.run([str(strata), "cost", "--json", "--target", target, str(graph)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            print(f"calibrate: strata cost {graph}: {r.stderr.strip()}", file=sys.stderr)
            continue
        cost = json.loads(r.stdout)
        points.append({"config": key, "index": c["index"],
                       "measured_s": c["timing"]["median_us"] * 1e-6,
                       "predicted_s": cost["predicted_us"] * 1e-6,
                       "kernels": [{k: kern.get(k, 0) for k in ("load_bytes", "l2_bytes",
                                                               "narrow_bytes",
                                                               "store_bytes", "tensor_flops",
                                                               "simt_flops", "blocks", "forloop")}
                                   for kern in cost["kernels"]]})
    return points


def features(point, c, n_sm):
    """Coefficients of (1/BW, 1/BW_L2, 1/BW_narrow, 1/TP, 1/SP, L, t_iter) in the predicted
    time of one graph."""
    f = [0.0] * len(KEYS)
    for k in point["kernels"]:
        alpha = 1.0 + c * n_sm / max(1, k["blocks"])
        f[0] += (k["load_bytes"] + k["store_bytes"]) * alpha
        f[1] += k["l2_bytes"] * alpha
        f[2] += k["narrow_bytes"] * alpha
        under = max(1.0, n_sm / max(1, k["blocks"]))  # compute runs on min(N_blocks, N_SM) SMs
        f[3] += k["tensor_flops"] * under
        f[4] += k["simt_flops"] * under
        f[5] += 1.0
        f[6] += k["forloop"]
    return f


def solve(a, b):
    """Solves the square system a·x = b by Gaussian elimination with pivoting (None if singular)."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for col in range(n):
        piv = max(range(col, n), key=lambda r: abs(m[r][col]))
        if abs(m[piv][col]) < 1e-300:
            return None
        m[col], m[piv] = m[piv], m[col]
        for r in range(n):
            if r != col:
                f = m[r][col] / m[col][col]
                for k in range(col, n + 1):
                    m[r][k] -= f * m[col][k]
    return [m[i][n] / m[i][i] for i in range(n)]


def nnls(rows, ys):
    """min Σ (row·x − y)² over x ≥ 0, by trying every set of free variables (few unknowns)."""
    nvar = len(rows[0])
    # Scale the columns so the normal equations are well conditioned.
    scale = [max(abs(r[j]) for r in rows) or 1.0 for j in range(nvar)]
    srows = [[r[j] / scale[j] for j in range(nvar)] for r in rows]
    best, best_err = [0.0] * nvar, sum(y * y for y in ys)
    for size in range(1, nvar + 1):
        for free in itertools.combinations(range(nvar), size):
            ata = [[sum(r[i] * r[j] for r in srows) for j in free] for i in free]
            atb = [sum(r[i] * y for r, y in zip(srows, ys)) for i in free]
            sol = solve(ata, atb)
            if sol is None or any(v < 0 for v in sol):
                continue
            x = [0.0] * nvar
            for i, v in zip(free, sol):
                x[i] = v
            err = sum((sum(r[j] * x[j] for j in range(nvar)) - y) ** 2 for r, y in zip(srows, ys))
            if err < best_err:
                best, best_err = x, err
    return [best[j] / scale[j] for j in range(nvar)], best_err


def fit(points, n_sm, tensor_peak, alpha=None):
    """The best (c, x, error) over a grid of α coefficients c (or c = alpha when given). With
    tensor_peak > 0 the tensor rate is held at it (the benchmarks are memory-bound: their
    tensor FLOPs barely constrain it) and only the other constants are fitted."""
    best = None
    for c in [alpha] if alpha is not None else [i / 20 for i in range(0, 41)]:
        rows, ys = [], []
        for p in points:
            w = 1.0 / p["measured_s"]
            f = features(p, c, n_sm)
            if tensor_peak > 0:
                rows.append([v * w for j, v in enumerate(f) if j != TENSOR])
                ys.append(1.0 - f[TENSOR] / tensor_peak * w)
            else:
                rows.append([v * w for v in f])
                ys.append(1.0)
        x, err = nnls(rows, ys)
        if tensor_peak > 0:
            x = x[:TENSOR] + [1.0 / tensor_peak] + x[TENSOR:]
        if best is None or err < best[2]:
            best = (c, x, err)
    return best


def quality(pred, meas, configs):
    logs = [abs(math.log(p / m)) for p, m in zip(pred, meas) if p > 0 and m > 0]
    logs.sort()
    within = []
    for cfg in sorted(set(configs)):
        ps = [p for p, c in zip(pred, configs) if c == cfg]
        ms = [m for m, c in zip(meas, configs) if c == cfg]
        s = spearman(ps, ms)
        if s is not None:
            within.append(s)
    return {"median_abs_log_ratio": logs[len(logs) // 2] if logs else None,
            "max_abs_log_ratio": logs[-1] if logs else None,
            "pearson_log": pearson([math.log(p) for p in pred], [math.log(m) for m in meas]),
            "spearman": spearman(pred, meas),
            "mean_spearman_within_program": sum(within) / len(within) if within else None}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", nargs="+", help="output folders of benchmark runs or sweeps")
    ap.add_argument("--strata", default=str(ROOT / "build" / "strata"))
    ap.add_argument("--target", default="h200")
    ap.add_argument("--json", default="", help="write points and fits here")
    ap.add_argument("--tensor-peak", type=float, default=0.0,
                    help="hold the tensor rate at this FLOP/s (e.g. the run's measured peak)")
    ap.add_argument("--alpha", type=float, default=None,
                    help="hold c_α at this value (when the points do not constrain small grids)")
    a = ap.parse_args()
    n_sm = SM_COUNT[a.target]
    with tempfile.TemporaryDirectory() as scratch:
        points = [p for out in a.out
                  for p in load_points(out, a.strata, a.target, Path(scratch))]
    if len(points) < 5:
        sys.exit(f"calibrate: only {len(points)} timed candidates under {' '.join(a.out)}; "
                 "need at least 5")
    meas = [p["measured_s"] for p in points]
    configs = [p["config"] for p in points]
    current = quality([p["predicted_s"] for p in points], meas, configs)
    c, x, _ = fit(points, n_sm, a.tensor_peak, a.alpha)
    fitted = [sum(f * v for f, v in zip(features(p, c, n_sm), x)) for p in points]
    new = quality(fitted, meas, configs)
    print(f"{len(points)} timed candidates from {len({p['config'] for p in points})} programs")
    print(f"fitted α = 1 + {c:.2f} · N_SM / N_blocks")
    for name, v in zip(NAMES, x):
        inv = f"  (= {1 / v:.4g} per s)" if v > 0 and name.startswith("1/") else ""
        print(f"  {name:24s} {v:.4g}{inv}")
    for label, q in (("current constants", current), ("fitted constants", new)):
        print(f"{label:18s} median |log(pred/meas)| {q['median_abs_log_ratio']:.3f}, worst "
              f"{q['max_abs_log_ratio']:.3f}, Pearson(log) {q['pearson_log']:.3f}, "
              f"Spearman {q['spearman']:.3f}, within programs (mean) "
              f"{q['mean_spearman_within_program']:.3f}")
    ratio = sorted(((f / p["measured_s"], p["config"], p["index"]) for f, p in zip(fitted, points)))
    print("largest misses (fitted / measured):",
          ", ".join(f"{k} #{i} {r:.2f}" for r, k, i in ratio[:3] + ratio[-3:]))
    if a.json:
        Path(a.json).write_text(json.dumps({
            "target": a.target, "points": points, "alpha_c": c,
            "fit": dict(zip(KEYS, x)),
            "current": current, "fitted": new}, indent=1) + "\n")


if __name__ == "__main__":
    main()
