"""Results of a benchmark run as JSON and Markdown: times per system, speedup over the best
PyTorch system, fraction of the floor, and the cost model's calibration data. Two kinds of
run share it: the paper's six benchmarks (bench/strata_bench.py, kind "paper") and the suite of
LLM programs (bench/suite_bench.py, kind "suite"), which differ in their table and targets.

  python3 bench/report.py merge OUT_DIR... -o STEM
      joins the reports of a run made in parts (scripts/gpu-check.sh with STRATA_BENCH_NAMES,
      or scripts/gpu-suite.sh with STRATA_SUITE_PART; one call per part, each with its own
      OUT_DIR holding <gpu>-<date>.json, plans.json and profile/): one table, one calibration,
      written as STEM.json and STEM.md. Floors use the first part's device figures; every
      part's figures are kept under device["parts"].
"""

import json
import math
import sys
from pathlib import Path


def floor_terms(result, device):
    """The floor's terms in µs with this run's figures: memory (bytes / bandwidth), compute
    (FLOPs / tensor peak) and one launch."""
    return {"memory": result["bytes"] / device["bandwidth_Bps"] * 1e6,
            "compute": result["flops"] / device["tensor_peak_flops"] * 1e6,
            "launch": device["launch_us"]}


def floor_us(result, device):
    """max(bytes / bandwidth, FLOPs / tensor peak, one launch), µs, with this run's BW/peak."""
    return max(floor_terms(result, device).values())


def bound(result, device):
    """Which term sets the floor: "memory" (bandwidth-bound), "compute" or "launch"."""
    terms = floor_terms(result, device)
    return max(terms, key=terms.get)


def config_key(result):
    """A result's name: the suite's program, or <benchmark>_b<batch>."""
    return result["program"] if "program" in result else f"{result['benchmark']}_b{result['batch']}"


def pearson(xs, ys):
    n = len(xs)
    if n < 3:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    return sxy / math.sqrt(sxx * syy) if sxx > 0 and syy > 0 else None


def ranks(values):
    order = sorted(range(len(values)), key=lambda i: values[i])
    r = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2.0  # ties share their mean rank
        i = j + 1
    return r


def spearman(xs, ys):
    return pearson(ranks(xs), ranks(ys)) if len(xs) >= 3 else None


def calibration(profiles):
    """Predicted (cost model) vs measured (strata profile) time of every correct candidate."""
    points = []
    for key, prof in sorted(profiles.items()):
        for c in (prof or {}).get("candidates", []):
            t = c.get("timing")
            # The cost model predicts a graph as emitted by default: tuned variants are left out.
            if c.get("variant", "default") not in ("default", "source"):
                continue
            if c.get("status") == "ok" and t and isinstance(c.get("predicted_us"), (int, float)):
                points.append({"config": key, "index": c["index"], "origin": c["origin"],
                               "predicted_us": c["predicted_us"], "measured_us": t["median_us"]})
    statuses = {}
    for prof in profiles.values():
        for c in (prof or {}).get("candidates", []):
            statuses[c.get("status", "?")] = statuses.get(c.get("status", "?"), 0) + 1
    pred = [p["predicted_us"] for p in points]
    meas = [p["measured_us"] for p in points]
    per_config = {}
    for key in sorted({p["config"] for p in points}):
        ps = [p for p in points if p["config"] == key]
        per_config[key] = spearman([p["predicted_us"] for p in ps], [p["measured_us"] for p in ps])
    defined = [v for v in per_config.values() if v is not None]
    positive = [(x, y) for x, y in zip(pred, meas) if x > 0 and y > 0]
    return {
        "points": points,
        "candidates_by_status": statuses,
        "pearson_log": pearson([math.log(x) for x, _ in positive], [math.log(y) for _, y in positive]),
        "spearman": spearman(pred, meas),
        "spearman_within_program": per_config,
        "mean_spearman_within_program": sum(defined) / len(defined) if defined else None,
    }


# The benchmark's targets (bench/README.md, "Floor"): geometric-mean speedup over the best
# PyTorch, the lowest speedup, and strata's time over the floor on the bandwidth-bound programs.
TARGET_GEOMEAN, TARGET_MIN, TARGET_TIME_OVER_FLOOR = 1.5, 0.95, 1.15
BANDWIDTH_BOUND = ("rmsnorm", "gatedmlp")
# The suite's (bench/README.md, "The suite"): the same geometric mean over programs, no program
# below 1.0×, and every program whose floor is its memory term within 1.15× of it.
SUITE_TARGET_GEOMEAN, SUITE_TARGET_MIN, SUITE_TARGET_TIME_OVER_FLOOR = 1.5, 1.0, 1.15
# PyTorch systems in table order (sdpa-flash: the suite's attention programs only).
TORCH_SYSTEMS = ("eager", "compile", "max-autotune", "sdpa-flash")


def build(device, results, profiles, plans, phases, tolerance, kind="paper"):
    rows = []
    for r in results:
        fl = floor_us(r, device)
        systems = r.get("systems", {})
        torch_times = {m: s["median_us"] for m, s in systems.items()
                       if m != "strata" and s.get("ok") and "median_us" in s}
        best_torch = min(torch_times.items(), key=lambda kv: kv[1]) if torch_times else None
        strata = systems.get("strata")
        row = {"config": config_key(r), "floor_us": fl, "bound": bound(r, device), **r}
        if best_torch:
            row["best_pytorch"] = {"mode": best_torch[0], "median_us": best_torch[1],
                                   "fraction_of_floor": fl / best_torch[1]}
        if strata:
            row["strata_fraction_of_floor"] = fl / strata["median_us"]
            if best_torch:
                # The speedup is the head-to-head ratio (the two timed in interleaved replays)
                # where the run has one; the ratio of the separate medians is kept beside it.
                row["speedup_separate"] = best_torch[1] / strata["median_us"]
                h2h = r.get("head_to_head", {})
                row["speedup"] = h2h.get("speedup", row["speedup_separate"])
        rows.append(row)
    speedups = [r["speedup"] for r in rows if "speedup" in r]

    def bandwidth_bound(r):
        return r["bound"] == "memory" if kind == "suite" else r["benchmark"] in BANDWIDTH_BOUND

    summary = {
        "configs": len(rows),
        "configs_with_strata": len(speedups),
        "geomean_speedup": math.exp(sum(math.log(s) for s in speedups) / len(speedups)) if speedups else None,
        "min_speedup": min(speedups) if speedups else None,
        "min_speedup_config": min((r for r in rows if "speedup" in r),
                                  key=lambda r: r["speedup"])["config"] if speedups else None,
        # Configurations without a speedup (no correct strata time, or no PyTorch time).
        "without_speedup": [r["config"] for r in rows if "speedup" not in r],
        "below_parity": {r["config"]: r["speedup"] for r in rows
                         if "speedup" in r and r["speedup"] < 1.0},
        # strata's time over the floor where the programs are bandwidth-bound (target ≤ 1.15).
        "time_over_floor": {r["config"]: 1 / r["strata_fraction_of_floor"] for r in rows
                            if bandwidth_bound(r) and "strata_fraction_of_floor" in r},
        "bandwidth_bound": [r["config"] for r in rows if bandwidth_bound(r)],
    }
    return repo_relative({"format": "strata-bench", "version": 1, "kind": kind, "device": device,
                          "tolerance": tolerance, "phases_s": phases, "summary": summary,
                          "results": rows, "candidates": plans,
                          "calibration": calibration(profiles)})


REPO_ROOT = str(Path(__file__).resolve().parents[1]) + "/"


def repo_relative(value):
    """`value` with every string path inside the repository written relative to its root (a
    record names candidates and libraries the same way on any machine)."""
    if isinstance(value, str):
        return value.replace(REPO_ROOT, "")
    if isinstance(value, list):
        return [repo_relative(v) for v in value]
    if isinstance(value, dict):
        return {k: repo_relative(v) for k, v in value.items()}
    return value


def fmt_us(v):
    return f"{v:.2f}" if isinstance(v, (int, float)) else "—"


def verdict(ok):
    return "holds" if ok else "MISSED"


def targets(sm):
    """The lines of the markdown report that hold the run against the benchmark's targets."""
    if not sm.get("geomean_speedup"):
        return []
    over = sm.get("time_over_floor", {})
    line = ("Targets: "
            f"geometric-mean speedup ≥ {TARGET_GEOMEAN}× {verdict(sm['geomean_speedup'] >= TARGET_GEOMEAN)}; "
            f"lowest ≥ {TARGET_MIN}× {verdict(sm['min_speedup'] >= TARGET_MIN)}")
    if over:
        line += (f"; {' and '.join(BANDWIDTH_BOUND)} within {TARGET_TIME_OVER_FLOOR}× of the floor "
                 f"{verdict(max(over.values()) <= TARGET_TIME_OVER_FLOOR)} (strata time / floor: "
                 + ", ".join(f"{k} {v:.3f}" for k, v in over.items()) + ")")
    return [line + ".", ""]


def suite_targets(sm):
    """The suite's "Targets:" line. A program without a speedup (strata had no correct
    candidate, or it was not run) fails "no program below 1.0×" and is named; so does a
    bandwidth-bound program without a strata time."""
    missing = sm.get("without_speedup", [])
    gm = sm.get("geomean_speedup")
    parts = [f"geometric-mean speedup over the best PyTorch per program ≥ {SUITE_TARGET_GEOMEAN}× "
             + (f"{verdict(gm >= SUITE_TARGET_GEOMEAN)} ({gm:.2f}× over "
                f"{sm['configs_with_strata']} programs)" if gm else "MISSED (no program timed)")]
    low = sm.get("min_speedup")
    text = (f"no program below {SUITE_TARGET_MIN:.1f}× "
            f"{verdict(low is not None and low >= SUITE_TARGET_MIN and not missing)}")
    details = []
    below = sm.get("below_parity", {})
    if len(below) > 1:
        details.append(f"{len(below)} below: " + ", ".join(
            f"{k} {v:.2f}×" for k, v in sorted(below.items(), key=lambda kv: kv[1])))
    elif low is not None:
        details.append(f"lowest {low:.2f}×, {sm['min_speedup_config']}")
    if missing:
        details.append(f"{len(missing)} without a strata speedup: {', '.join(missing)}")
    parts.append(text + (f" ({'; '.join(details)})" if details else ""))
    bw = sm.get("bandwidth_bound", [])
    over = sm.get("time_over_floor", {})
    if bw:
        untimed = [k for k in bw if k not in over]
        worst = max(over.items(), key=lambda kv: kv[1]) if over else None
        ok = not untimed and worst is not None and worst[1] <= SUITE_TARGET_TIME_OVER_FLOOR
        details = []
        if worst:
            details.append(f"worst {worst[0]} {worst[1]:.3f}")
        if untimed:
            details.append(f"{len(untimed)} without a strata time")
        parts.append(f"bandwidth-bound programs ({len(bw)}) within "
                     f"{SUITE_TARGET_TIME_OVER_FLOOR}× of the floor {verdict(ok)} (strata time / "
                     f"floor: {'; '.join(details)})")
    return ["Targets: " + "; ".join(parts) + ".", ""]


def device_lines(d):
    return [f"torch {d['torch']}, CUDA {d['cuda']}, {d['arch']}, {d['sm_count']} SMs, "
            f"L2 {d['l2_bytes'] / 2**20:.0f} MiB. Measured in this run: DRAM "
            f"{d['bandwidth_Bps'] / 1e12:.2f} TB/s (device-to-device copy), fp16 tensor peak "
            f"{d['tensor_peak_flops'] / 1e12:.0f} TFLOP/s (8192³ matmul), one launch "
            f"{d['launch_us']:.2f} µs (trivial kernel in a CUDA graph).", ""]


def method_line(doc, extra=""):
    return ["Median µs per call over ≥ 100 CUDA-graph replays, inputs rotated over enough sets "
            "that one pass moves > 4× L2; every output checked against a float64 reference "
            f"(relative L2 error ≤ {doc['tolerance']}) before timing. max-autotune is "
            "`torch.compile(mode=\"max-autotune-no-cudagraphs\")` (its kernels; our own CUDA "
            "graph). " + extra + "floor = max(bytes/BW, FLOPs/peak, one launch)."
            + (" speedup: the best PyTorch system and strata's pick timed again head to head, "
               "in interleaved CUDA-graph replays (the median of the per-round ratios); in "
               "parentheses the ratio of the medians in the columns, each system timed after "
               "the other." if any("head_to_head" in r for r in doc.get("results", [])) else ""),
            ""]


def cell(r, m):
    e = r.get("systems", {}).get(m)
    if not e:
        return "—"
    if not e.get("ok"):
        return "wrong" if "median_us" in e else "failed"
    return fmt_us(e.get("median_us"))


def ratio_cells(r):
    bp = r.get("best_pytorch")
    speedup = f"{r['speedup']:.2f}×" if "speedup" in r else "—"
    if "speedup" in r and "speedup" in r.get("head_to_head", {}):
        speedup += f" ({r['speedup_separate']:.2f}×)"
    strata_floor = (f"{r['strata_fraction_of_floor']:.2f}" if "strata_fraction_of_floor" in r
                    else "—")
    torch_floor = f"{bp['fraction_of_floor']:.2f}" if bp else "—"
    return speedup, strata_floor, torch_floor


def paper_table(doc):
    out = ["| benchmark | eager | compile | max-autotune | strata | speedup vs best PyTorch | "
           "floor | floor / strata | floor / best PyTorch |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in doc["results"]:
        speedup, strata_floor, torch_floor = ratio_cells(r)
        out.append(f"| {r['config']} | {cell(r, 'eager')} | {cell(r, 'compile')} | "
                   f"{cell(r, 'max-autotune')} | {cell(r, 'strata')} | {speedup} | "
                   f"{fmt_us(r['floor_us'])} | {strata_floor} | {torch_floor} |")
    return out


def suite_table(doc):
    out = ["| program | bound | eager | compile | max-autotune | sdpa-flash | strata | "
           "speedup vs best PyTorch | best PyTorch | floor | floor / strata | floor / best PyTorch |",
           "|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|"]
    for r in doc["results"]:
        speedup, strata_floor, torch_floor = ratio_cells(r)
        if "skipped" in r:
            speedup = f"skipped: {r['skipped']}"
        bp = r.get("best_pytorch")
        out.append(f"| {r['config']} | {r['bound']} | {cell(r, 'eager')} | {cell(r, 'compile')} | "
                   f"{cell(r, 'max-autotune')} | {cell(r, 'sdpa-flash')} | {cell(r, 'strata')} | "
                   f"{speedup} | {bp['mode'] if bp else '—'} | {fmt_us(r['floor_us'])} | "
                   f"{strata_floor} | {torch_floor} |")
    return out


def markdown(doc):
    d = doc["device"]
    suite = doc.get("kind") == "suite"
    if suite:
        out = [f"# The suite: strata vs PyTorch on {d['name']}", "",
               "The programs of bench/suite/ (bench/suite/README.md); the PyTorch systems run "
               "each program as bench/torch_program.py derives it from its file.", ""]
        out += device_lines(d)
        out += method_line(doc, "sdpa-flash is the program with its attention computed by "
                                "`scaled_dot_product_attention` under the flash backend. bound: "
                                "the floor's largest term. ")
        out += suite_table(doc)
    else:
        out = [f"# strata vs PyTorch on {d['name']}", ""]
        out += device_lines(d)
        out += method_line(doc)
        out += paper_table(doc)
    sm = doc["summary"]
    what = "programs" if suite else "configurations"
    out += ["", f"strata timed on {sm['configs_with_strata']} of {sm['configs']} {what}"
            + (f"; geometric-mean speedup {sm['geomean_speedup']:.2f}×, lowest "
               f"{sm['min_speedup']:.2f}×." if sm["geomean_speedup"] else "."), ""]
    out += suite_targets(sm) if suite else targets(sm)
    out += [f"Candidates per {'program' if suite else 'configuration'} (and strata's fastest: "
            "candidate [emitter variant]):", ""]
    winners = {r["config"]: r.get("systems", {}).get("strata") for r in doc["results"]}
    for key, plan in doc["candidates"].items():
        w = winners.get(key)
        won = f"; fastest {w['origin']} [{w.get('variant') or 'default'}]" if w else ""
        out.append(f"- {key}: {plan['source']}{won}")
    cal = doc["calibration"]
    out += ["", "## Cost-model calibration", "",
            f"{len(cal['points'])} correct candidates timed by `strata profile` with the default "
            "emitter variant "
            f"(statuses of all candidates: {cal['candidates_by_status']}).", ""]

    def corr(v):
        return f"{v:.3f}" if isinstance(v, (int, float)) else "n/a"

    out += [f"- Pearson correlation of log(predicted) and log(measured): {corr(cal['pearson_log'])}",
            f"- Spearman rank correlation, all candidates: {corr(cal['spearman'])}",
            f"- Spearman within each program, mean: {corr(cal['mean_spearman_within_program'])} "
            "(" + ", ".join(f"{k} {corr(v)}" for k, v in cal["spearman_within_program"].items()) + ")",
            "", "| program | candidate | predicted µs | measured µs | measured / predicted |",
            "|---|---|---:|---:|---:|"]
    for p in cal["points"]:
        ratio = p["measured_us"] / p["predicted_us"] if p["predicted_us"] else float("nan")
        out.append(f"| {p['config']} | #{p['index']} {p['origin']} | {fmt_us(p['predicted_us'])} | "
                   f"{fmt_us(p['measured_us'])} | {ratio:.2f} |")
    out += ["", "Wall time per step (s): " + ", ".join(f"{k} {v}" for k, v in doc["phases_s"].items()), ""]
    return "\n".join(out)


# Fields build() adds to a raw benchmark result (stripped before building again).
DERIVED = ("config", "floor_us", "bound", "best_pytorch", "strata_fraction_of_floor", "speedup",
           "speedup_separate")


def merge(dirs, stem):
    docs, results, profiles, plans, phases = [], [], {}, {}, {}
    statuses, synthesized = {}, False
    for d in map(Path, dirs):
        found = sorted(d.glob("*-[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9].json"))
        if not found:
            sys.exit(f"report.py: no <gpu>-<date>.json report in {d}")
        doc = json.loads(found[-1].read_text())
        docs.append(doc)
        for r in doc["results"]:
            r = {k: v for k, v in r.items() if k not in DERIVED}
            # A suite program skipped for time in one part and run in a later one: the run counts.
            same = [i for i, q in enumerate(results)
                    if "program" in r and q.get("program") == r["program"]]
            if same and "skipped" in r:
                continue
            for i in reversed(same):
                del results[i]
            results.append(r)
        plans.update(doc.get("candidates", {}))
        points = doc.get("calibration", {}).get("points", [])
        for key in doc.get("candidates", {}):
            f = d / "profile" / f"{key}.json"
            if f.exists():
                profiles[key] = json.loads(f.read_text())
            else:  # a part kept without its profile files: its report's calibration points
                profiles[key] = {"candidates": [
                    {"index": p["index"], "origin": p["origin"], "status": "ok",
                     "variant": "default", "predicted_us": p["predicted_us"],
                     "timing": {"median_us": p["measured_us"]}}
                    for p in points if p["config"] == key]}
                synthesized = True
        for k, v in doc.get("calibration", {}).get("candidates_by_status", {}).items():
            statuses[k] = statuses.get(k, 0) + v
        for k, v in doc.get("phases_s", {}).items():
            phases[k] = round(phases.get(k, 0) + v, 1)
    device = dict(docs[0]["device"])
    device["parts"] = [doc["device"] for doc in docs]
    kinds = {doc.get("kind", "paper") for doc in docs}
    if len(kinds) > 1:
        sys.exit(f"report.py: the parts are of different kinds ({', '.join(sorted(kinds))})")
    doc = build(device, results, profiles, plans, phases, docs[0]["tolerance"], kinds.pop())
    if synthesized:  # the statuses of every candidate, as the parts counted them
        doc["calibration"]["candidates_by_status"] = statuses
    Path(f"{stem}.json").write_text(json.dumps(doc, indent=2) + "\n")
    Path(f"{stem}.md").write_text(markdown(doc))
    print(markdown(doc))


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) < 4 or args[0] != "merge" or args[-2] != "-o":
        sys.exit("usage: report.py merge OUT_DIR... -o STEM")
    merge(args[1:-2], args[-1])
