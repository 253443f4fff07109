#!/usr/bin/env python3
"""Fit the cost model's constants (src/cost/cost_model.cc, docs/cost-model.md) to measured times.

The calibration dataset, bench/calibration/points.json, holds for every timed candidate of the
recorded benchmark runs the model's per-kernel features (DRAM bytes, bytes re-read from L2,
bytes in narrow tiles, bytes stored, tensor and SIMT FLOPs, blocks, for-loop iterations) and
the measured median, with the record it comes from (bench/calibration/README.md), and the
features of each kernel's code (threads, barriers, reduction steps and ops per iteration; 0 for
a kernel the emitter does not plan). From it this script fits

    t = Σ_kernels [ (bytes / BW + l2_bytes / BW_L2 + narrow_bytes / BW_narrow) · α_c
                    + (tensor_flops / TP + simt_flops / SP) · u
                    + F · t_iter + waves · F · (t_serial + barriers · t_barrier
                                                + reduce_steps · t_reduce + loop_ops · t_op)
                    + waves · (F · loop_simt + once_simt) · t_simt
                    + waves · (bytes + l2_bytes) / (N_blocks · threads) · t_tbyte + L ],
    α_c = 1 + c · N_SM / N_blocks,   u = max(1, N_SM / N_blocks)

(waves = ⌈N_blocks / (N_SM · blocks per SM)⌉, so waves · F is the number of dependent loop
iterations each SM runs; barriers, reduce_steps and loop_ops those of one iteration of the
kernel's loop; loop_simt and once_simt the dependent multiply-adds of a thread's SIMT matmul
chains in one iteration and after the loop; (bytes + l2_bytes) / (N_blocks · threads) the bytes
each thread loads) for generated kernels, and max(bytes / BW_blas, tensor_flops / TP_blas)
+ L_blas for a predefined matmul run as a cuBLAS call (`library`), whose two rates and launch
are not fitted

(the model's α is c = 1) by least squares on the relative error (each point weighted by
1 / measured), with every rate and L non-negative, for c on a grid. It prints the fit, the error
of the current and the fitted constants (median and worst |log(pred / measured)|, Pearson of
logs, Spearman), and writes the points and both fits as JSON with --json.

Sources of points:
  (none)              the dataset (--dataset, default bench/calibration/points.json), only the
                      points of --target's GPU, optionally only some records (--records);
  OUT_DIR             a benchmark run (scripts/gpu-check.sh OUT: `profile/<key>.json` strata
                      profile reports, `candidates/<key>/cand<i>.json` μGraphs) or an emitter
                      sweep (scripts/gpu-sweep.sh OUT: candidates named by origin; only the
                      default emitter variant is used);
  RESULT.json[@REV]   a recorded result (bench/results/<gpu>-<date>.json, benchmark or suite
                      record): its calibration points name their μGraph as
                      `bench/search/[suite/]<key>.json: ranked[i].graph`; with @REV those files
                      are read as they were at git revision REV (the search results the run
                      profiled), else from this checkout.
For run folders and records the script asks `strata cost --json` (the build of this checkout)
for every candidate's features, with the target of the run's GPU where the record names it, and
with --no-library-matmul for the sources that `--generated-matmuls` names (runs whose strata
emitted predefined matmuls as generated kernels, before cuBLAS calls).
`--extract FILE SOURCE...` writes those points as a dataset instead of fitting.
`--holdout records|programs|configs` also reports the fit out of sample: each record (or each
tenth of the programs, or of the configs with all their records) predicted by constants fitted
without it.
`--per-program` prints the Spearman correlation of every program; `--subset NAME,...` the
quality on some records' points alone (of the fit on all). `--no-serial` and `--no-code` hold
t_serial and the code terms at 0; `--code-terms simt,...` fits only the code terms named, and
with `--on-table` only those, on top of the dataset's own predictions. `--library-launch` fits
the launch term of a cuBLAS call alone on the dataset's predictions;
`--ranking` the latency bound's constants and a generated kernel's launch together, on the
dataset's throughput bounds, to the ranking within programs (fit_ranking);
`--barrier-sync` t_sync, the barriers of the throughput bound, with the latency bound's
constants, on the throughput bounds less their t_sync term, to that ranking (fit_barrier_sync);
`--iteration-chain` t_chain, the latency bound's charge per dependent iteration over the blocks
an SM holds, with those four, the same way (fit_iteration_chain).

Usage: python3 bench/calibrate.py [OUT_DIR|RESULT.json[@REV]...] [--dataset FILE]
                                  [--records NAME,...] [--target h200] [--strata build/strata]
                                  [--tensor-peak FLOPS] [--alpha C] [--no-serial] [--no-code] [--code-terms NAME,...]
                                  [--holdout records|programs|configs] [--per-program]
                                  [--latency | --library-launch | --ranking | --barrier-sync
                                   | --iteration-chain]
                                  [--subset NAME,...]
                                  [--json calibration.json]
       python3 bench/calibrate.py --extract FILE [--generated-matmuls NAME,...]
                                  OUT_DIR|RESULT.json[@REV]...
Pure Python (no numpy), so it runs on a machine without the benchmark's dependencies.
"""
import argparse
import hashlib
import itertools
import json
import math
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import pearson, spearman  # noqa: E402

SM_COUNT = {"h100": 132, "h200": 132, "a100": 108}
NAMES = ["1/BW (s/byte)", "1/BW_L2 (s/byte)", "1/BW_narrow (s/byte)", "1/TP (s/tensor FLOP)",
         "1/SP (s/SIMT FLOP)", "L (s/kernel)", "t_iter (s/iteration)",
         "t_serial (s/SM iteration)", "t_barrier (s/SM it. barrier)",
         "t_reduce (s/SM it. step)", "t_op (s/SM it. op)", "t_simt (s/SM SIMT mm step)",
         "t_tbyte (s/byte a thread loads, per wave)",
         "t_pass (s/element a thread passes over, per wave)"]
KEYS = ["inv_bandwidth", "inv_l2_bandwidth", "inv_narrow_bandwidth", "inv_tensor_peak",
        "inv_simt_peak", "launch_s", "iteration_latency_s", "serial_latency_s",
        "barrier_latency_s", "reduce_step_latency_s", "loop_op_latency_s",
        "simt_mm_step_latency_s", "thread_byte_latency_s", "pass_step_latency_s"]
TENSOR = 3  # index of the tensor-core rate among the features
SERIAL = 7  # index of t_serial
# indices of the code-feature terms (t_barrier, t_reduce, t_op, t_simt, t_tbyte, t_pass)
CODE = (8, 9, 10, 11, 12, 13)
CODE_TERMS = {"barrier": 8, "reduce": 9, "op": 10, "simt": 11,
              "thread_bytes": 12, "pass": 13}  # --code-terms names
# cuBLAS's sustained (tensor FLOP/s, DRAM B/s) and its launch term (s) per target: held, not
# fitted by the full fit (the model's blas_tensor_flops, blas_bandwidth_Bps and blas_launch_s,
# src/cost/cost_model.cc; --library-launch fits the last on the dataset's predictions).
BLAS = {"h100": (600e12, 2.5e12, 2.53e-6), "h200": (600e12, 3.6e12, 2.53e-6),
        "a100": (190e12, 1.5e12, 1.5e-6)}
# Per-kernel features of `strata cost --json`, in the order the dataset stores them.
KERNEL_FIELDS = ["load_bytes", "l2_bytes", "narrow_bytes", "store_bytes", "tensor_flops",
                 "simt_flops", "blocks", "forloop", "waves", "library", "t_throughput_us",
                 "t_latency_us", "blocks_per_sm"]
# The kernel's code features (src/cost/code_features.cc; 0 for a kernel without a plan: a cuBLAS
# call or a generic predefined kernel), after the totals in the dataset's kernel lists.
CODE_FIELDS = ["threads", "loop_groups", "loop_ops", "once_ops", "loop_barriers",
               "once_barriers", "loop_reduce_steps", "once_reduce_steps",
               "loop_simt_mm_steps", "once_simt_mm_steps", "register_loads",
               "loop_pass_steps", "once_pass_steps"]
KERNEL_FIELDS = KERNEL_FIELDS + CODE_FIELDS
DATASET = ROOT / "bench" / "calibration" / "points.json"
DATASET_FORMAT = "strata-calibration-points"


class DatasetError(Exception):
    """A calibration dataset that cannot be read; the message names the file and the problem."""


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
        local = scratch / f"{rev}.{Path(path).name}"
        if not local.exists():
            r = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:{path}"],
                               capture_output=True, text=True)
            if r.returncode != 0:
                return None
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
                                "predicted_us": p.get("predicted_us"),
                                "timing": {"median_us": p["measured_us"]}}
        return
    for report in sorted((out / "profile").glob("*_b[0-9]*.json")):
        doc = json.loads(report.read_text())
        for c in doc.get("candidates", []):
            if c.get("status") != "ok" or not c.get("timing"):
                continue
            if c.get("variant", "default") == "default":
                yield report.stem, c


def target_of_gpu(name):
    """The cost-model target of a GPU name ("NVIDIA H100 80GB HBM3" → "h100"), or None."""
    for t in SM_COUNT:
        if t in (name or "").lower():
            return t
    return None


def split_spec(spec):
    """(path, rev) of a source `PATH` or `PATH@REV` (rev None without one)."""
    path, sep, rev = spec.rpartition("@")
    return (Path(path), rev) if sep and rev else (Path(spec), None)


def source_info(spec, default_target, generated_matmuls=()):
    """Provenance of a source: record name, GPU, date, git revision of its μGraphs, the commit
    that added the record (the code that produced its times), the cost-model target, and the
    flags `strata cost` is given for it (--no-library-matmul when its name is one of
    `generated_matmuls`)."""
    out, rev = split_spec(spec)
    gpu = None
    if out.is_file():
        gpu = json.loads(out.read_text()).get("device", {}).get("name")
    else:
        for report in sorted((out / "profile").glob("*.json")):
            dev = json.loads(report.read_text()).get("device")
            gpu = dev.get("name") if isinstance(dev, dict) else dev
            if gpu:
                break
    name = out.stem if out.is_file() else out.name
    date = re.search(r"\d{4}-\d{2}-\d{2}", name)
    added = None
    if out.is_file():
        r = subprocess.run(["git", "-C", str(ROOT), "log", "--diff-filter=A", "--format=%h", "--",
                            str(out.resolve())], capture_output=True, text=True)
        added = (r.stdout.split() or [None])[-1]
    return {"name": name, "source": spec, "gpu": gpu, "date": date.group(0) if date else None,
            "graphs_rev": rev, "added_in": added,
            "target": target_of_gpu(gpu) or default_target,
            "cost_flags": ["--no-library-matmul"] if name in generated_matmuls else []}


def graph_digest(path):
    """A short content hash of a μGraph file (independent of formatting)."""
    doc = json.loads(Path(path).read_text())
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def load_points(spec, strata, target, scratch, info=None):
    """One point per correct timed candidate of SPEC (a run folder, a result JSON, or
    RESULT.json@REV with its μGraph origins read at git revision REV): its config, index,
    origin, graph digest, measured time and the features `strata cost` gives for the target of
    the source's GPU (`target` when the source does not name one)."""
    info = info or source_info(spec, target)
    out, rev = split_spec(spec)
    points = []
    for key, c in timed_candidates(out):
        graph = resolve_graph(out if out.is_dir() else out.parent, key, c, scratch, rev)
        if graph is None:
            print(f"calibrate: no μGraph for {key} #{c['index']}, point skipped", file=sys.stderr)
            continue
        # The points are times of the default emitter variant: mma.sync code (--no-wgmma).
        r = subprocess.run([str(strata), "cost", "--json", "--target", info["target"],
                            "--no-wgmma"] + info.get("cost_flags", []) + [str(graph)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            print(f"calibrate: strata cost {graph}: {r.stderr.strip()}", file=sys.stderr)
            continue
        cost = json.loads(r.stdout)
        points.append({"record": info["name"], "target": info["target"], "config": key,
                       "index": c["index"], "origin": c.get("origin", ""),
                       "graph": graph_digest(graph),
                       "measured_s": c["timing"]["median_us"] * 1e-6,
                       "predicted_s": cost["predicted_us"] * 1e-6,
                       "recorded_s": (c["predicted_us"] * 1e-6 if c.get("predicted_us")
                                      else None),
                       "kernels": [{k: int(kern.get(k, 0)) if k == "library" else kern.get(k, 0)
                                    for k in KERNEL_FIELDS}
                                   for kern in cost["kernels"]]})
    return points


def prediction_drift(points):
    """The largest |predicted / recorded − 1| over the points that carry the prediction their
    run recorded (`recorded_s`: the model that ranked and timed them), or None when none does.
    Near 0 for a record made with the extracting model whose μGraphs were read at the right
    revision; a μGraph of another revision shows as a large drift (so do the constants and
    terms changed since an older record was made)."""
    drifts = [abs(p["predicted_s"] / p["recorded_s"] - 1) for p in points if p.get("recorded_s")]
    return max(drifts) if drifts else None


def extract(specs, strata, target, generated_matmuls=()):
    """(records, points) of the given sources, for a dataset. A program whose points in one
    source are exactly those of an earlier source (the same μGraphs with the same measured
    times: a part of a run joined into a later record by `report.py merge`) is kept once.
    Records named in `generated_matmuls` are costed with predefined matmuls as generated
    kernels (their runs predate cuBLAS calls). Prints each record's points and their
    prediction_drift to stderr."""
    records, points, seen = [], [], set()
    with tempfile.TemporaryDirectory() as scratch:
        for spec in specs:
            info = source_info(spec, target, generated_matmuls)
            by_config = {}
            for p in load_points(spec, strata, target, Path(scratch), info):
                by_config.setdefault(p["config"], []).append(p)
            kept = 0
            for config, ps in by_config.items():
                key = (config, tuple(sorted((p["graph"], p["measured_s"]) for p in ps)))
                if key in seen:
                    print(f"calibrate: {info['name']}: {config} repeats an earlier source's "
                          "points, left out", file=sys.stderr)
                    continue
                seen.add(key)
                points.extend(ps)
                kept += len(ps)
            info["points"] = kept
            records.append(info)
            drift = prediction_drift([p for ps in by_config.values() for p in ps])
            print(f"calibrate: {info['name']}: {kept} points" +
                  (f", predictions at most {drift:.1%} off the record's own"
                   if drift is not None else ""), file=sys.stderr)
    return records, points


def write_dataset(path, records, points, command):
    """Writes a dataset: one JSON document, one point per line (readable diffs)."""
    def point_json(p):
        return json.dumps({"record": p["record"], "config": p["config"], "index": p["index"],
                           "origin": p["origin"], "graph": p["graph"],
                           "measured_us": round(p["measured_s"] * 1e6, 4),
                           "predicted_us": round(p["predicted_s"] * 1e6, 4),
                           "kernels": [[kern.get(k, 0) for k in KERNEL_FIELDS]
                                       for kern in p["kernels"]]},
                          ensure_ascii=False, separators=(",", ":"))
    head = {"format": DATASET_FORMAT, "version": 1, "command": command,
            "kernel_fields": KERNEL_FIELDS}
    lines = ["{"]
    for k, v in head.items():
        lines.append(f" {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)},")
    lines.append(' "records": [')
    lines.append(",\n".join("  " + json.dumps(r, ensure_ascii=False) for r in records))
    lines.append(" ],")
    lines.append(' "points": [')
    lines.append(",\n".join("  " + point_json(p) for p in points))
    lines.append(" ]")
    lines.append("}")
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text("\n".join(lines) + "\n")


def read_dataset(path, target=None, records=None):
    """The points of a dataset whose record's target is `target` (any when None) and, when
    `records` is given, whose record is one of them. Raises DatasetError naming the file and
    the problem for anything malformed, and for names in `records` the dataset does not have."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except OSError as e:
        raise DatasetError(f"{path}: cannot read: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise DatasetError(f"{path}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}") from None
    if not isinstance(doc, dict) or doc.get("format") != DATASET_FORMAT:
        raise DatasetError(f"{path}: not a calibration dataset (expected \"format\": "
                           f"\"{DATASET_FORMAT}\")")
    if doc.get("version") != 1:
        raise DatasetError(f"{path}: version {doc.get('version')!r}; expected 1")
    fields = doc.get("kernel_fields")
    if not isinstance(fields, list) or sorted(fields) != sorted(KERNEL_FIELDS):
        raise DatasetError(f"{path}: kernel_fields {fields!r}; expected the fields "
                           f"{', '.join(KERNEL_FIELDS)}")
    recs = doc.get("records")
    if not isinstance(recs, list) or not all(isinstance(r, dict) and "name" in r and "target" in r
                                             for r in recs):
        raise DatasetError(f"{path}: records: expected a list of objects with name and target")
    target_of = {r["name"]: r["target"] for r in recs}
    if records:
        unknown = [r for r in records if r not in target_of]
        if unknown:
            raise DatasetError(f"{path}: no record {', '.join(unknown)}; it has "
                               f"{', '.join(target_of)}")
    if not isinstance(doc.get("points"), list):
        raise DatasetError(f"{path}: points: expected a list")
    points = []
    for i, p in enumerate(doc["points"]):
        where = f"{path}: points[{i}]"
        if not isinstance(p, dict):
            raise DatasetError(f"{where}: expected an object")
        for key in ("record", "config", "index", "measured_us", "predicted_us", "kernels"):
            if key not in p:
                raise DatasetError(f"{where}: missing \"{key}\"")
        if p["record"] not in target_of:
            raise DatasetError(f"{where}: record {p['record']!r} is not listed under records")
        meas, pred = p["measured_us"], p["predicted_us"]
        if not all(isinstance(v, (int, float)) and v > 0 for v in (meas, pred)):
            raise DatasetError(f"{where}: measured_us and predicted_us must be positive numbers")
        kernels = p["kernels"]
        if (not isinstance(kernels, list) or not kernels or
                not all(isinstance(k, list) and len(k) == len(fields) and
                        all(isinstance(v, (int, float)) and v >= 0 for v in k) for k in kernels)):
            raise DatasetError(f"{where}: kernels: expected a non-empty list of {len(fields)} "
                               "non-negative numbers per kernel")
        if target is not None and target_of[p["record"]] != target:
            continue
        if records and p["record"] not in records:
            continue
        points.append({"record": p["record"], "target": target_of[p["record"]],
                       "config": p["config"], "index": p["index"],
                       "origin": p.get("origin", ""), "graph": p.get("graph"),
                       "measured_s": meas * 1e-6, "predicted_s": pred * 1e-6,
                       "kernels": [dict(zip(fields, k)) for k in kernels]})
    return points


def thread_bytes(k):
    """waves · (DRAM + L2 bytes loaded) / (blocks · threads): the bytes one thread loads over
    the kernel, per wave (the coefficient of t_tbyte; 0 for a kernel without a plan)."""
    if k.get("threads", 0) <= 0:
        return 0.0
    return k.get("waves", 1) * (k["load_bytes"] + k["l2_bytes"]) / (max(1, k["blocks"]) *
                                                                   k["threads"])


def dependent_iterations(k):
    """waves · ⌈F / loop groups⌉ − 1: the loop iterations an SM runs one after another after
    the first (loop groups run theirs side by side; the first waits on the loads of the
    kernel's prologue, which the launch term charges)."""
    groups = max(1, int(k.get("loop_groups", 1)))
    return max(0, k.get("waves", 1) * -(-int(k["forloop"]) // groups) - 1)


def chain_coefficient(k):
    """The coefficient of t_chain in a kernel's latency bound: dependent_iterations / blocks per
    SM, each iteration's dependent chain shared among the blocks an SM holds (0 for a kernel
    without a plan, which has no latency bound)."""
    if k.get("threads", 0) <= 0:
        return 0.0
    return dependent_iterations(k) / max(1, int(k.get("blocks_per_sm", 1)))


def latency_features(k):
    """The coefficients of (t_barrier, t_tbyte, t_rbyte, t_chain) in a kernel's latency bound
    (the model's KernelCost::t_latency_s): dependent_iterations · loop barriers, thread_bytes —
    charged at t_rbyte for a kernel that loads into registers (a rowwise kernel), at t_tbyte for
    the others — and chain_coefficient."""
    tb = thread_bytes(k)
    reg = bool(k.get("register_loads", 0))
    return (dependent_iterations(k) * k.get("loop_barriers", 0), 0.0 if reg else tb,
            tb if reg else 0.0, chain_coefficient(k))


def features(point, c, n_sm):
    """Coefficients of (1/BW, 1/BW_L2, 1/BW_narrow, 1/TP, 1/SP, L, t_iter, t_serial, t_barrier,
    t_reduce, t_op, t_simt, t_tbyte, t_pass) in the predicted time of one graph. A cuBLAS kernel
    contributes nothing: its time, launch included, is fixed_time's. The code terms charge
    each dependent iteration an SM runs (waves · F) per block-level barrier, per serial reduction
    step and per op of the loop body, each wave per dependent multiply-add of a thread's SIMT
    matmul chains (F times those in the loop, plus those after it), each wave per byte one
    thread loads from DRAM or L2, and each wave per element a thread handles in the passes
    outside the matmuls (⌈F / loop groups⌉ times those in the loop, plus those after it; the kernel's code
    features; 0 for a kernel without a plan)."""
    f = [0.0] * len(KEYS)
    for k in point["kernels"]:
        if k.get("library"):
            continue
        alpha = 1.0 + c * n_sm / max(1, k["blocks"])
        f[0] += (k["load_bytes"] + k["store_bytes"]) * alpha
        f[1] += k["l2_bytes"] * alpha
        f[2] += k["narrow_bytes"] * alpha
        under = max(1.0, n_sm / max(1, k["blocks"]))  # compute runs on min(N_blocks, N_SM) SMs
        f[3] += k["tensor_flops"] * under
        f[4] += k["simt_flops"] * under
        f[5] += 1.0
        f[6] += k["forloop"]
        serial = k.get("waves", 1) * k["forloop"]
        f[SERIAL] += serial
        f[CODE[0]] += serial * k.get("loop_barriers", 0)
        f[CODE[1]] += serial * k.get("loop_reduce_steps", 0)
        f[CODE[2]] += serial * k.get("loop_ops", 0)
        f[CODE[3]] += k.get("waves", 1) * (k["forloop"] * k.get("loop_simt_mm_steps", 0)
                                          + k.get("once_simt_mm_steps", 0))
        f[CODE[4]] += thread_bytes(k)
        group_iterations = -(-int(k["forloop"]) // max(1, int(k.get("loop_groups", 1))))
        f[CODE[5]] += k.get("waves", 1) * (group_iterations * k.get("loop_pass_steps", 0)
                                          + k.get("once_pass_steps", 0))
    return f


def fixed_time(point):
    """Seconds of a graph's time that no fitted constant scales: its cuBLAS kernels'
    max(bytes / BW_blas, tensor FLOPs / TP_blas) + L_blas, at the held rates and launch of the
    point's target."""
    flops, bandwidth, launch = BLAS[point.get("target") or "h200"]
    return sum(max((k["load_bytes"] + k["store_bytes"]) / bandwidth, k["tensor_flops"] / flops)
               + launch for k in point["kernels"] if k.get("library"))


def predict(point, c, x, n_sm):
    """The time of one graph under α coefficient c and constants x (in the order of KEYS)."""
    return sum(f * v for f, v in zip(features(point, c, n_sm), x)) + fixed_time(point)


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
    # The normal equations once; a subset's system and error are read from them.
    gram = [[sum(r[i] * r[j] for r in srows) for j in range(nvar)] for i in range(nvar)]
    aty = [sum(r[i] * y for r, y in zip(srows, ys)) for i in range(nvar)]
    yy = sum(y * y for y in ys)
    best, best_err = [0.0] * nvar, yy
    for size in range(1, nvar + 1):
        for free in itertools.combinations(range(nvar), size):
            sol = solve([[gram[i][j] for j in free] for i in free], [aty[i] for i in free])
            if sol is None or any(v < 0 for v in sol):
                continue
            # |A x − y|² = yy − 2 x·Aᵀy + xᵀ AᵀA x = yy − x·Aᵀy at the subset's optimum.
            err = max(0.0, yy - sum(v * aty[i] for i, v in zip(free, sol)))
            if err < best_err - 1e-12 * yy:
                x = [0.0] * nvar
                for i, v in zip(free, sol):
                    x[i] = v
                best, best_err = x, err
    return [best[j] / scale[j] for j in range(nvar)], best_err


def fit(points, n_sm, tensor_peak, alpha=None, serial=True, code=True):
    """The best (c, x, error) over a grid of α coefficients c (or c = alpha when given). With
    tensor_peak > 0 the tensor rate is held at it (the benchmarks are memory-bound: their
    tensor FLOPs barely constrain it) and only the other constants are fitted. serial=False
    holds t_serial at 0 (the model without the serial-latency term), code=False the code-feature
    terms t_barrier, t_reduce, t_op, t_simt, t_tbyte and t_pass (the model without them); a set of their
    indices
    fits only those."""
    held = ({TENSOR: 1.0 / tensor_peak} if tensor_peak > 0 else {})
    if not serial:
        held[SERIAL] = 0.0
    if code is not True:
        held.update({j: 0.0 for j in CODE if not code or j not in code})
    best = None
    for c in [alpha] if alpha is not None else [i / 20 for i in range(0, 41)]:
        rows, ys = [], []
        for p in points:
            w = 1.0 / p["measured_s"]
            f = features(p, c, n_sm)
            rows.append([v * w for j, v in enumerate(f) if j not in held])
            ys.append(1.0 - (fixed_time(p) + sum(f[j] * v for j, v in held.items())) * w)
        free, err = nnls(rows, ys)
        x = [held[j] if j in held else free.pop(0) for j in range(len(KEYS))]
        if best is None or err < best[2]:
            best = (c, x, err)
    return best


def within_programs(pred, meas, configs):
    """{program: Spearman of its points} for every program with a defined correlation (two or
    more points, not all measured or predicted equal)."""
    groups = {}  # one pass over the points (the ranking fits call this thousands of times)
    for p, m, c in zip(pred, meas, configs):
        ps, ms = groups.setdefault(c, ([], []))
        ps.append(p)
        ms.append(m)
    out = {}
    for cfg in sorted(groups):
        s = spearman(*groups[cfg])
        if s is not None:
            out[cfg] = s
    return out


def holdout_groups(points, by):
    """The held-out groups of a cross-validation: one per record (by="records"), the programs
    (record and config) dealt in sorted order into ten folds (by="programs"), or the configs
    dealt so into ten folds with all their records (by="configs": a suite program timed in
    several records is held out from all of them at once, so none of its times trains the
    fit that predicts it)."""
    if by == "records":
        names = sorted({p["record"] for p in points})
        return [[i for i, p in enumerate(points) if p["record"] == n] for n in names]
    key = (lambda p: p["config"]) if by == "configs" else (lambda p: (p["record"], p["config"]))
    fold = {k: i % 10 for i, k in enumerate(sorted({key(p) for p in points}))}
    return [g for g in ([i for i, p in enumerate(points) if fold[key(p)] == f]
                        for f in range(10)) if g]


def fit_on_table(points, n_sm, code, loss="relative"):
    """The code terms `code` (indices into KEYS) fitted alone on top of the dataset's
    predictions (the model of the commit that extracted it), coefficients non-negative: with
    loss "relative" least squares on the relative error of predicted_s + Σ feature ·
    coefficient; with "log" the mean squared log(pred / measured) (fit_on_table_log). Returns
    the coefficients of all KEYS (0 but for `code`)."""
    terms = sorted(code)
    if loss == "log":
        return fit_on_table_log(points, n_sm, terms)
    rows, ys = [], []
    for p in points:
        w = 1.0 / p["measured_s"]
        f = features(p, 0.0, n_sm)
        rows.append([f[j] * w for j in terms])
        ys.append(1.0 - p["predicted_s"] * w)
    free, _ = nnls(rows, ys)
    x = [0.0] * len(KEYS)
    for j, v in zip(terms, free):
        x[j] = v
    return x


def descend_on_grid(loss, n):
    """The n non-negative coefficients minimizing loss(coefficients): coordinate descent, each
    coefficient in turn set to the best of 0 and a log-spaced grid (10⁻¹³ … 10⁻⁶ s, 24 values
    per decade) with the others held, until a pass changes none (at most 20 passes)."""
    grid = [0.0] + [10 ** (-13 + i / 24) for i in range(7 * 24 + 1)]
    coef = [0.0] * n
    for _ in range(20):
        changed = False
        for t in range(n):
            best = min(grid, key=lambda v: loss(coef[:t] + [v] + coef[t + 1:]))
            if best != coef[t]:
                coef[t], changed = best, True
        if not changed:
            break
    return coef


def fit_on_table_log(points, n_sm, terms):
    """The coefficients of `terms` minimizing the mean squared log(pred / measured) of
    predicted_s + Σ feature · coefficient (descend_on_grid). Unlike the relative error, the log
    loss weighs a prediction 3× too low like one 3× too high, so a term that fixes large
    under-predictions is not held back by the points it over-predicts a little."""
    feats = [[features(p, 0.0, n_sm)[j] for j in terms] for p in points]
    base = [p["predicted_s"] for p in points]
    meas = [p["measured_s"] for p in points]

    def loss(coef):
        total = 0.0
        for f, b, m in zip(feats, base, meas):
            total += math.log((b + sum(fi * ci for fi, ci in zip(f, coef))) / m) ** 2
        return total / len(points)

    coef = descend_on_grid(loss, len(terms))
    x = [0.0] * len(KEYS)
    for j, v in zip(terms, coef):
        x[j] = v
    return x


def fit_latency(points):
    """(t_barrier, t_tbyte, t_rbyte) of the model's latency bound, each kernel max(t_throughput,
    t_barrier · (waves · ⌈F / G⌉ − 1) · loop barriers + t_tbyte or t_rbyte · thread_bytes) + launch
    (docs/cost-model.md, "Latency bound and the last wave's tail"), fitted on top of the
    dataset's throughput bounds (the kernels' t_throughput_us, from the model of the commit that
    extracted it): the mean squared log(pred / measured) (descend_on_grid)."""
    rows = [latency_rows(p) for p in points]
    meas = [p["measured_s"] for p in points]

    def loss(coef):
        return sum(math.log(predict_latency(r, coef) / m) ** 2
                   for r, m in zip(rows, meas)) / len(points)

    return descend_on_grid(loss, 3)


def latency_rows(point):
    """(the point's time outside its kernels' max(throughput, latency) bounds — launches —,
    [(t_throughput_s, barrier, thread-byte, register-byte and chain coefficients) per
    kernel]); a kernel without a plan (threads 0) has none."""
    kernels = [(k["t_throughput_us"] * 1e-6,) + latency_features(k) for k in point["kernels"]]
    bounds = sum(max(k["t_throughput_us"], k["t_latency_us"]) * 1e-6 for k in point["kernels"])
    return point["predicted_s"] - bounds, kernels


def predict_latency(row, coef, t_chain=None):
    """A point's time under latency constants coef = (t_barrier, t_tbyte, t_rbyte)
    (latency_rows), t_chain held (the H200's when None)."""
    rest, kernels = row
    t_chain = ITERATION_CHAIN["h200"] if t_chain is None else t_chain
    return rest + sum(max(t, b * coef[0] + tb * coef[1] + rb * coef[2] + ch * t_chain)
                      for t, b, tb, rb, ch in kernels)


def predict_on_table(point, x, n_sm):
    """The dataset's prediction of `point` plus the code terms of fit_on_table."""
    return point["predicted_s"] + sum(f * v for f, v in zip(features(point, 0.0, n_sm), x))


def cross_validate(points, n_sm, by, tensor_peak, alpha=None, serial=True, code=True):
    """Out-of-sample predictions: every point predicted by constants fitted on the points
    outside its holdout group (holdout_groups)."""
    pred = [0.0] * len(points)
    for group in holdout_groups(points, by):
        held = set(group)
        train = [p for i, p in enumerate(points) if i not in held]
        c, x, _ = fit(train, n_sm, tensor_peak, alpha, serial, code)
        for i in group:
            pred[i] = predict(points[i], c, x, n_sm)
    return pred


def quality(pred, meas, configs):
    logs = [abs(math.log(p / m)) for p, m in zip(pred, meas) if p > 0 and m > 0]
    logs.sort()
    within = list(within_programs(pred, meas, configs).values())
    return {"median_abs_log_ratio": logs[len(logs) // 2] if logs else None,
            "max_abs_log_ratio": logs[-1] if logs else None,
            "pearson_log": pearson([math.log(p) for p in pred], [math.log(m) for m in meas]),
            "spearman": spearman(pred, meas),
            "mean_spearman_within_program": sum(within) / len(within) if within else None}


def fit_and_report_latency(points, meas, configs, a, where):
    """--latency: the fit of fit_latency and its quality (with --holdout also out of sample)."""
    coef = fit_latency(points)
    rows = [latency_rows(p) for p in points]
    preds = [("without the bound", [predict_latency(r, (0.0, 0.0, 0.0)) for r in rows]),
             ("current constants", [p["predicted_s"] for p in points]),
             ("fitted constants", [predict_latency(r, coef) for r in rows])]
    if a.holdout:
        preds.append((f"held out ({a.holdout})",
                       held_out_predictions(points, a.holdout, fit_latency,
                                            lambda i, c: predict_latency(rows[i], c))))
    print(f"{len(points)} timed candidates from {len(set(configs))} programs ({where})")
    print(f"  t_barrier (s/SM it. barrier)     {coef[0]:.4g}")
    print(f"  t_tbyte (s/byte a thread loads)  {coef[1]:.4g}")
    print(f"  t_rbyte (the same, into registers) {coef[2]:.4g}")
    print_quality(preds, meas, configs, 3)


def held_out_predictions(points, by, fit, predict):
    """Out-of-sample predictions: for each group of holdout_groups(points, by), `fit` on the
    other points and `predict(i, fitted)` for each point i of the group."""
    held = [0.0] * len(points)
    for group in holdout_groups(points, by):
        out = set(group)
        fitted = fit([p for i, p in enumerate(points) if i not in out])
        for i in group:
            held[i] = predict(i, fitted)
    return held


def print_quality(preds, meas, configs, digits):
    """One line per (label, predictions): log error, Spearman, within programs, top-1 regret
    (the last two with `digits` decimals)."""
    for label, pred in preds:
        q = quality(pred, meas, configs)
        print(f"{label:18s} median |log(pred/meas)| {q['median_abs_log_ratio']:.3f}, Spearman "
              f"{q['spearman']:.3f}, within programs (mean) "
              f"{q['mean_spearman_within_program']:.{digits}f}, top-1 regret "
              f"{top1_regret(pred, meas, configs):.{digits}f}")


def library_launches(point):
    """The number of cuBLAS calls among a point's kernels (the coefficient of L_blas)."""
    return sum(1 for k in point["kernels"] if k.get("library"))


def fit_library_launch(points):
    """L_blas, the launch term of a cuBLAS call (the model's blas_launch_s), fitted alone on top
    of the dataset's predictions (made with the held L_blas of BLAS): the value on a grid of
    0.01 µs steps up to 6 µs minimizing the mean squared log(pred / measured)."""
    rows = [(p["predicted_s"] - library_launches(p) * BLAS[p.get("target") or "h200"][2],
             library_launches(p), p["measured_s"]) for p in points]

    def loss(v):
        return sum(math.log((rest + n * v) / m) ** 2 for rest, n, m in rows) / len(rows)

    return min((i * 1e-8 for i in range(601)), key=loss)


def predict_library_launch(point, launch):
    """The dataset's prediction of `point` with each cuBLAS call's launch term `launch`."""
    held = BLAS[point.get("target") or "h200"][2]
    return point["predicted_s"] + library_launches(point) * (launch - held)


def fit_and_report_library_launch(points, meas, configs, a, where):
    """--library-launch: the fit of fit_library_launch and its quality (with --holdout also out
    of sample)."""
    value = fit_library_launch(points)
    held = BLAS[a.target][2]
    preds = [(f"current ({held * 1e6:.2f} µs)", [p["predicted_s"] for p in points]),
             ("fitted", [predict_library_launch(p, value) for p in points])]
    if a.holdout:
        preds.append((f"held out ({a.holdout})",
                       held_out_predictions(points, a.holdout, fit_library_launch,
                                            lambda i, v: predict_library_launch(points[i], v))))
    print(f"{len(points)} timed candidates from {len(set(configs))} programs ({where}), "
          f"{sum(library_launches(p) for p in points)} cuBLAS calls")
    print(f"  L_blas (s/cuBLAS call)           {value:.4g}")
    print_quality(preds, meas, configs, 4)


RANKING_REGRET_WEIGHT = 5.0  # what fit_ranking trades one unit of top-1 regret − 1 against
# The grids fit_ranking descends on: 5 % steps around the constants fitted before it by the log
# loss (t_barrier 287 ns, t_tbyte 1.33 ns, t_rbyte 10 ns) and 0.1 µs steps of a kernel's launch
# from 2.6 µs, above a cuBLAS call's 2.53 µs (a kernel's launch term also absorbs the prologue
# and drain of its pipeline, docs/cost-model.md "The launch of a cuBLAS call").
RANKING_GRIDS = ([287e-9 * 1.05 ** i for i in range(-10, 15)],
                 [1.33e-9 * 1.05 ** i for i in range(-10, 15)],
                 [10e-9 * 1.05 ** i for i in range(-14, 15)],
                 [2.6e-6 + 0.1e-6 * i for i in range(20)])
RANKING_START = (287e-9, 1.33e-9, 10e-9, 3.38e-6)  # the table's constants before the fit


def ranking_rows(point):
    """Per kernel of a point: (cuBLAS call?, t_throughput_s, barrier, thread-byte,
    register-byte and chain coefficients) — what a prediction under other latency constants
    and another launch term of a generated kernel needs (predict_ranking)."""
    return [(bool(k["library"]), k["t_throughput_us"] * 1e-6) + latency_features(k)
            for k in point["kernels"]]


def predict_ranking(row, coef, blas_launch, t_chain=None):
    """A point's time under coef = (t_barrier, t_tbyte, t_rbyte, L), t_chain held (the H200's
    when None): each generated kernel max(t_throughput, its latency bound) + L, each cuBLAS call
    its throughput + blas_launch."""
    t_barrier, t_tbyte, t_rbyte, launch = coef
    t_chain = ITERATION_CHAIN["h200"] if t_chain is None else t_chain
    return sum(t + blas_launch if library else
               max(t, b * t_barrier + tb * t_tbyte + rb * t_rbyte + ch * t_chain) + launch
               for library, t, b, tb, rb, ch in row)


def ranking_score(pred, meas, configs):
    """Within-program Spearman mean − RANKING_REGRET_WEIGHT · (top-1 regret − 1)."""
    within = list(within_programs(pred, meas, configs).values())
    return (sum(within) / len(within) -
            RANKING_REGRET_WEIGHT * (top1_regret(pred, meas, configs) - 1.0))


def coordinate_ascent(score, start, grids, rounds=4):
    """The coefficients maximizing score(coef) by coordinate ascent from `start`: each
    coefficient in turn takes the value of its grid that scores best with the others fixed,
    for up to `rounds` sweeps or until a sweep changes none."""
    coef = list(start)
    for _ in range(rounds):
        changed = False
        for t, grid in enumerate(grids):
            best = max(grid, key=lambda v: score(coef[:t] + [v] + coef[t + 1:]))
            if score(coef[:t] + [best] + coef[t + 1:]) > score(coef):
                coef[t], changed = best, True
        if not changed:
            break
    return tuple(coef)


def fit_ranking(points):
    """(t_barrier, t_tbyte, t_rbyte, L) fitted together on the dataset's throughput bounds to the
    ranking within programs (ranking_score) instead of the log error: coordinate descent, each
    constant in turn set to the best value of its grid (RANKING_GRIDS; ties keep the earlier
    value) with the others held, from RANKING_START, until a pass changes none (at most 4)."""
    rows = [ranking_rows(p) for p in points]
    meas = [p["measured_s"] for p in points]
    configs = [f"{p['record']}:{p['config']}" for p in points]
    blas = [BLAS[p.get("target") or "h200"][2] for p in points]

    def score(coef):
        return ranking_score([predict_ranking(r, coef, b) for r, b in zip(rows, blas)], meas,
                             configs)

    return coordinate_ascent(score, RANKING_START, RANKING_GRIDS)


def fit_and_report_ranking(points, meas, configs, a, where):
    """--ranking: the fit of fit_ranking and its quality (with --holdout also out of sample)."""
    coef = fit_ranking(points)
    rows = [ranking_rows(p) for p in points]
    blas = BLAS[a.target][2]
    preds = [("current constants", [p["predicted_s"] for p in points]),
             ("fitted constants", [predict_ranking(r, coef, blas) for r in rows])]
    if a.holdout:
        preds.append((f"held out ({a.holdout})",
                       held_out_predictions(points, a.holdout, fit_ranking,
                                            lambda i, c: predict_ranking(rows[i], c, blas))))
    print(f"{len(points)} timed candidates from {len(set(configs))} programs ({where})")
    print(f"  t_barrier (s/SM it. barrier)     {coef[0]:.4g}")
    print(f"  t_tbyte (s/byte a thread loads)  {coef[1]:.4g}")
    print(f"  t_rbyte (the same, into registers) {coef[2]:.4g}")
    print(f"  L (s/generated kernel)           {coef[3]:.4g}")
    print_quality(preds, meas, configs, 4)


# The model's t_sync per target (src/cost/cost_model.cc), which the dataset's throughput bounds
# hold since it entered the model (docs/cost-model.md, "Barriers in the throughput bound"), and
# the launch term of a generated kernel (held by fit_barrier_sync).
BARRIER_SYNC = {"h100": 27.2e-9, "h200": 27.2e-9, "a100": 38.2e-9}
# The model's t_chain per target (src/cost/cost_model.cc), which the dataset's latency bounds
# hold since it entered the model (docs/cost-model.md, "The iteration chain of few-block
# kernels"); the fits of the other latency constants hold it (--iteration-chain fits it).
ITERATION_CHAIN = {"h100": 707.4e-9, "h200": 707.4e-9, "a100": 993e-9}
LAUNCH = {"h100": 3.38e-6, "h200": 3.38e-6, "a100": 2e-6}
# The grids fit_barrier_sync descends on, in this order: t_sync from 0 (the model without it) in
# 5 % steps about 30 ns, then the latency bound's three constants in 5 % steps about the values
# the log-error fit gave before t_sync (SYNC_START).
SYNC_GRIDS = ([0.0] + [30e-9 * 1.05 ** i for i in range(-30, 20)],
              [287e-9 * 1.05 ** i for i in range(-20, 15)],
              [1.33e-9 * 1.05 ** i for i in range(-14, 15)],
              [10e-9 * 1.05 ** i for i in range(-14, 15)])
SYNC_START = (0.0, 287e-9, 1.33e-9, 10e-9)  # (t_sync, t_barrier, t_tbyte, t_rbyte) before it


def sync_coefficient(k, n_sm):
    """The coefficient of t_sync in a kernel's throughput bound: N_blocks · (⌈F / loop groups⌉ −
    1) · loop barriers / N_SM, the barriers its blocks pass after their first iteration spread
    over the SMs (0 for a kernel without a plan, whose loop_barriers is 0)."""
    groups = max(1, int(k.get("loop_groups", 1)))
    rounds = -(-int(k["forloop"]) // groups)
    return k["blocks"] * max(0, rounds - 1) * k.get("loop_barriers", 0) / n_sm


def sync_rows(point, n_sm):
    """Per kernel of a point: (cuBLAS call?, its throughput bound without the t_sync term at the
    target's held value, t_sync coefficient, barrier, thread-byte, register-byte and chain
    coefficients of the latency bound) — what predict_sync needs."""
    held = BARRIER_SYNC[point.get("target") or "h200"]
    rows = []
    for k in point["kernels"]:
        c = 0.0 if k["library"] else sync_coefficient(k, n_sm)
        rows.append((bool(k["library"]), k["t_throughput_us"] * 1e-6 - c * held, c) +
                    latency_features(k))
    return rows


def predict_sync(row, coef, launch, blas_launch):
    """A point's time under coef = (t_sync, t_barrier, t_tbyte, t_rbyte[, t_chain]; t_chain the
    H200's when not given): each generated kernel max(throughput + t_sync term, latency bound)
    + launch, each cuBLAS call its throughput + blas_launch."""
    t_sync, t_barrier, t_tbyte, t_rbyte = coef[:4]
    t_chain = coef[4] if len(coef) > 4 else ITERATION_CHAIN["h200"]
    return sum(t + blas_launch if library else
               max(t + c * t_sync, b * t_barrier + tb * t_tbyte + rb * t_rbyte + ch * t_chain) +
               launch for library, t, c, b, tb, rb, ch in row)


def fit_barrier_sync(points, n_sm=SM_COUNT["h200"]):
    """(t_sync, t_barrier, t_tbyte, t_rbyte) fitted together on the dataset's throughput bounds
    (less their held t_sync term) to the ranking within programs (ranking_score; the launch terms
    held): coordinate descent from SYNC_START, each constant in turn set to the best value of its
    grid (SYNC_GRIDS; ties keep the earlier value) with the others held, until a pass changes
    none (at most 4)."""
    return ranking_fit_sync(points, n_sm, SYNC_START, SYNC_GRIDS)


def ranking_fit_sync(points, n_sm, start, grids):
    """The constants of predict_sync fitted to the ranking within programs (ranking_score; the
    launch terms held) by coordinate_ascent from `start` on `grids` (one per constant)."""
    rows = [sync_rows(p, n_sm) for p in points]
    meas = [p["measured_s"] for p in points]
    configs = [f"{p['record']}:{p['config']}" for p in points]
    launches = [(LAUNCH[p.get("target") or "h200"], BLAS[p.get("target") or "h200"][2])
                for p in points]

    def score(coef):
        return ranking_score([predict_sync(r, coef, *l) for r, l in zip(rows, launches)], meas,
                             configs)

    return coordinate_ascent(score, start, grids)


def fit_and_report_latency_fit(points, meas, configs, a, where, fit, before, before_label,
                               names):
    """A fit of the latency bound's constants with the throughput bound's t_sync (fit, from
    `before`: the constants without the term the fit adds, reported as `before_label`) and its
    quality (with --holdout also out of sample); `names` labels the fitted constants."""
    n_sm = SM_COUNT[a.target]
    coef = fit(points, n_sm)
    rows = [sync_rows(p, n_sm) for p in points]
    launch, blas = LAUNCH[a.target], BLAS[a.target][2]
    preds = [(before_label, [predict_sync(r, before, launch, blas) for r in rows]),
             ("current constants", [p["predicted_s"] for p in points]),
             ("fitted constants", [predict_sync(r, coef, launch, blas) for r in rows])]
    if a.holdout:
        preds.append((f"held out ({a.holdout})",
                       held_out_predictions(points, a.holdout, lambda ps: fit(ps, n_sm),
                                            lambda i, c: predict_sync(rows[i], c, launch, blas))))
    print(f"{len(points)} timed candidates from {len(set(configs))} programs ({where})")
    for name, value in zip(names, coef):
        print(f"  {name:34s} {value:.4g}")
    print_quality(preds, meas, configs, 4)


SYNC_NAMES = ("t_sync (s/block barrier, per SM)", "t_barrier (s/SM it. barrier)",
              "t_tbyte (s/byte a thread loads)", "t_rbyte (the same, into registers)")


def fit_and_report_barrier_sync(points, meas, configs, a, where):
    """--barrier-sync: the fit of fit_barrier_sync and its quality."""
    fit_and_report_latency_fit(points, meas, configs, a, where, fit_barrier_sync,
                               (0.0,) + SYNC_START[1:], "without t_sync", SYNC_NAMES)


# The grid fit_iteration_chain descends on for t_chain: from 0 (the model without it) in 10 %
# steps about 300 ns; the other four constants on SYNC_GRIDS, from the table's values.
CHAIN_GRID = [0.0] + [300e-9 * 1.1 ** i for i in range(-25, 20)]
CHAIN_START = (27.2e-9, 185e-9, 1.33e-9, 14.1e-9, 0.0)  # (t_sync, …, t_rbyte, t_chain) before it


def fit_iteration_chain(points, n_sm=SM_COUNT["h200"]):
    """(t_sync, t_barrier, t_tbyte, t_rbyte, t_chain) fitted together on the dataset's
    throughput bounds (less their held t_sync term) to the ranking within programs
    (ranking_score; the launch terms held): coordinate descent from CHAIN_START on SYNC_GRIDS
    and CHAIN_GRID, as fit_barrier_sync."""
    return ranking_fit_sync(points, n_sm, CHAIN_START, list(SYNC_GRIDS) + [CHAIN_GRID])


def fit_and_report_iteration_chain(points, meas, configs, a, where):
    """--iteration-chain: the fit of fit_iteration_chain and its quality."""
    fit_and_report_latency_fit(points, meas, configs, a, where, fit_iteration_chain,
                               CHAIN_START, "without t_chain",
                               SYNC_NAMES + ("t_chain (s/SM it., over blocks per SM)",))


def top1_regret(pred, meas, configs):
    """Geometric mean over programs of measured(model's pick) / measured(fastest timed)."""
    best, pick = {}, {}
    for p, m, c in zip(pred, meas, configs):
        best[c] = min(best.get(c, m), m)
        if c not in pick or p < pick[c][0]:
            pick[c] = (p, m)
    logs = [math.log(pick[c][1] / best[c]) for c in best]
    return math.exp(sum(logs) / len(logs))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sources", nargs="*", metavar="SOURCE",
                    help="run folders or RESULT.json[@REV] records (default: the dataset)")
    ap.add_argument("--dataset", default=str(DATASET),
                    help="the calibration dataset to fit from when no SOURCE is given")
    ap.add_argument("--records", default="",
                    help="comma-separated record names: fit only their points of the dataset")
    ap.add_argument("--extract", default="", metavar="FILE",
                    help="write the points of the SOURCEs as a dataset to FILE and stop")
    ap.add_argument("--strata", default=str(ROOT / "build" / "strata"))
    ap.add_argument("--target", default="h200", choices=sorted(SM_COUNT))
    ap.add_argument("--json", default="", help="write points and fits here")
    ap.add_argument("--tensor-peak", type=float, default=0.0,
                    help="hold the tensor rate at this FLOP/s (e.g. the run's measured peak)")
    ap.add_argument("--alpha", type=float, default=None,
                    help="hold c_α at this value (when the points do not constrain small grids)")
    ap.add_argument("--no-serial", action="store_true",
                    help="hold t_serial at 0 (the model without the serial-latency term)")
    ap.add_argument("--no-code", action="store_true",
                    help="hold the code-feature terms t_barrier, t_reduce, t_op, t_simt, t_pass and "
                         "t_tbyte at 0 "
                         "(the model without them)")
    ap.add_argument("--code-terms", default="", metavar="NAME,...",
                    help="fit only these code terms (of barrier, reduce, op, simt, thread_bytes, pass), "
                         "the others "
                         "held at 0")
    ap.add_argument("--on-table", action="store_true",
                    help="fit only the code terms of --code-terms on top of the dataset's own "
                         "predictions (the model of the commit that extracted it), the other "
                         "constants as they are")
    ap.add_argument("--latency", action="store_true",
                    help="fit the model's latency bound (t_barrier, t_tbyte; each kernel "
                         "max(throughput, latency)) on top of the dataset's throughput bounds")
    ap.add_argument("--ranking", action="store_true",
                    help="fit the latency bound's three constants and a generated kernel's "
                         "launch together on top of the dataset's throughput bounds, to the "
                         "ranking within programs (Spearman mean less 5 × (top-1 regret − 1))")
    ap.add_argument("--barrier-sync", action="store_true",
                    help="fit t_sync (the barriers of the throughput bound) and the latency "
                         "bound's three constants together on top of the dataset's throughput "
                         "bounds, to the ranking within programs")
    ap.add_argument("--iteration-chain", action="store_true",
                    help="fit t_chain (the latency bound's charge per dependent iteration, "
                         "over the blocks an SM holds) with t_sync and the bound's three "
                         "constants, as --barrier-sync")
    ap.add_argument("--library-launch", action="store_true",
                    help="fit the launch term of a cuBLAS call alone on top of the dataset's "
                         "predictions (log loss)")
    ap.add_argument("--loss", choices=["relative", "log"], default="relative",
                    help="what --on-table minimizes: the squared relative error (least squares) "
                         "or the squared log(pred / measured) (a grid per term)")
    ap.add_argument("--subset", action="append", default=[], metavar="NAME,...",
                    help="also report the quality on the points of these records alone "
                         "(repeatable)")
    ap.add_argument("--generated-matmuls", default="", metavar="NAME,...",
                    help="records whose runs emitted predefined matmuls as generated kernels "
                         "(before cuBLAS calls): costed with strata cost --no-library-matmul")
    ap.add_argument("--holdout", choices=["records", "programs", "configs"], default=None,
                    help="also report out-of-sample quality: each record, each tenth of the "
                         "programs, or each tenth of the configs with all their records, "
                         "predicted by a fit without it")
    ap.add_argument("--per-program", action="store_true",
                    help="print the Spearman correlation within every program")
    a = ap.parse_args()
    n_sm = SM_COUNT[a.target]
    code = not a.no_code
    if a.code_terms and not a.no_code:
        names = [t for t in a.code_terms.split(",") if t]
        bad = [t for t in names if t not in CODE_TERMS]
        if bad:
            ap.error(f"--code-terms: unknown {', '.join(bad)} (expected names of "
                     f"{', '.join(CODE_TERMS)})")
        code = {CODE_TERMS[t] for t in names}
    generated = [r for r in a.generated_matmuls.split(",") if r]
    if a.extract:
        if not a.sources:
            ap.error("--extract needs the sources to read")
        records, points = extract(a.sources, a.strata, a.target, generated)
        command = ("python3 bench/calibrate.py --extract " + a.extract +
                   (f" --generated-matmuls {','.join(generated)}" if generated else "") +
                   " " + " ".join(a.sources))
        write_dataset(a.extract, records, points, command)
        print(f"{len(points)} points of {len(records)} records written to {a.extract}")
        return
    if a.sources:
        with tempfile.TemporaryDirectory() as scratch:
            points = [p for out in a.sources
                      for p in load_points(out, a.strata, a.target, Path(scratch),
                                           source_info(out, a.target, generated))]
        other = [p for p in points if p["target"] != a.target]
        if other:
            print(f"calibrate: {len(other)} points of another GPU than --target {a.target} "
                  "left out", file=sys.stderr)
        points = [p for p in points if p["target"] == a.target]
        where = " ".join(a.sources)
    else:
        records = [r for r in a.records.split(",") if r]
        try:
            points = read_dataset(a.dataset, a.target, records)
        except DatasetError as e:
            print(f"calibrate: {e}", file=sys.stderr)
            sys.exit(2)
        where = f"{a.dataset} ({a.target}" + (f"; {', '.join(records)})" if records else ")")
    if len(points) < 5:
        sys.exit(f"calibrate: only {len(points)} timed candidates in {where}; need at least 5")
    meas = [p["measured_s"] for p in points]
    # A program is a config of one record: candidates ranked against each other in one run.
    configs = [f"{p['record']}:{p['config']}" for p in points]
    current = quality([p["predicted_s"] for p in points], meas, configs)
    if a.latency:
        fit_and_report_latency(points, meas, configs, a, where)
        return
    if a.ranking:
        fit_and_report_ranking(points, meas, configs, a, where)
        return
    if a.library_launch:
        fit_and_report_library_launch(points, meas, configs, a, where)
        return
    if a.barrier_sync:
        fit_and_report_barrier_sync(points, meas, configs, a, where)
        return
    if a.iteration_chain:
        fit_and_report_iteration_chain(points, meas, configs, a, where)
        return
    if a.on_table and not isinstance(code, set):
        ap.error("--on-table needs --code-terms (the terms to fit on the dataset's predictions)")
    if a.on_table:
        c, x = 0.0, fit_on_table(points, n_sm, code, a.loss)
        fitted = [predict_on_table(p, x, n_sm) for p in points]
    else:
        c, x, _ = fit(points, n_sm, a.tensor_peak, a.alpha, not a.no_serial, code)
        fitted = [predict(p, c, x, n_sm) for p in points]
    new = quality(fitted, meas, configs)
    held_out = None
    if a.holdout and len(holdout_groups(points, a.holdout)) < 2:
        sys.exit(f"calibrate: --holdout {a.holdout} needs two or more {a.holdout} in {where}")
    if a.holdout and a.on_table:
        held_out_pred = [0.0] * len(points)
        for group in holdout_groups(points, a.holdout):
            held = set(group)
            xg = fit_on_table([p for i, p in enumerate(points) if i not in held], n_sm, code,
                              a.loss)
            for i in group:
                held_out_pred[i] = predict_on_table(points[i], xg, n_sm)
        held_out = quality(held_out_pred, meas, configs)
    elif a.holdout:
        held_out_pred = cross_validate(points, n_sm, a.holdout, a.tensor_peak, a.alpha,
                                       not a.no_serial, code)
        held_out = quality(held_out_pred, meas, configs)
    print(f"{len(points)} timed candidates from {len(set(configs))} programs")
    print(f"fitted α = 1 + {c:.2f} · N_SM / N_blocks")
    for name, v in zip(NAMES, x):
        inv = f"  (= {1 / v:.4g} per s)" if v > 0 and name.startswith("1/") else ""
        print(f"  {name:24s} {v:.4g}{inv}")
    def f3(v):
        return f"{v:.3f}" if isinstance(v, (int, float)) else "n/a"

    def print_rows(rows):
        for label, q in rows:
            print(f"{label:18s} median |log(pred/meas)| {f3(q['median_abs_log_ratio'])}, worst "
                  f"{f3(q['max_abs_log_ratio'])}, Pearson(log) {f3(q['pearson_log'])}, "
                  f"Spearman {f3(q['spearman'])}, within programs (mean) "
                  f"{f3(q['mean_spearman_within_program'])}")

    rows = [("current constants", current), ("fitted constants", new)]
    if held_out:
        rows.append((f"held out ({a.holdout})", held_out))
    print_rows(rows)
    for subset in a.subset:
        names = [r for r in subset.split(",") if r]
        idx = [i for i, p in enumerate(points) if p["record"] in names]
        if not idx:
            sys.exit(f"calibrate: --subset {subset}: no points of these records in {where}")

        def part(pred):
            return quality([pred[i] for i in idx], [meas[i] for i in idx],
                           [configs[i] for i in idx])
        print(f"on {', '.join(names)} ({len(idx)} points):")
        sub = [("current constants", part([p["predicted_s"] for p in points])),
               ("fitted constants", part(fitted))]
        if held_out:
            sub.append((f"held out ({a.holdout})", part(held_out_pred)))
        print_rows(sub)
    several = len({p.get("record") for p in points}) > 1  # name the record of each miss
    if a.per_program:
        now = within_programs([p["predicted_s"] for p in points], meas, configs)
        after = within_programs(fitted, meas, configs)
        print("Spearman within programs (current → fitted):")
        for cfg in sorted(set(now) | set(after)):
            n = sum(1 for k in configs if k == cfg)
            print(f"  {cfg:64s} {n:3d} points  {f3(now.get(cfg))} → {f3(after.get(cfg))}")

    def label(p):
        return (f"{p['record']}:" if several else "") + f"{p['config']} #{p['index']}"

    ratio = sorted(((f / p["measured_s"], label(p)) for f, p in zip(fitted, points)))
    print("largest misses (fitted / measured):",
          ", ".join(f"{k} {r:.2f}" for r, k in ratio[:3] + ratio[-3:]))
    if a.json:
        Path(a.json).write_text(json.dumps({
            "target": a.target, "points": points, "alpha_c": c,
            "fit": dict(zip(KEYS, x)),
            "current": current, "fitted": new, "held_out": held_out}, indent=1) + "\n")


if __name__ == "__main__":
    main()
