#!/usr/bin/env python3
"""Fit the cost model's warpgroup-MMA rate (Target::wgmma_tensor_flops; docs/cost-model.md,
"Warpgroup MMA") to the graphs an H200 timed with and without the knob `wgmma`.

The records that profiled the tuning variant `wgmma=1` beside the default (bench/results/
h200-2026-11-29-wgmma.json: `strata profile` reports of the searches' top four and their
64-row forms; h200-2026-11-29-suite-wgmma.json: the suite's candidates under every tuning
variant) give, per μGraph, the time of its default code (mma.sync) and of its wgmma code. Each
μGraph is costed twice with `strata cost --json --target h200`: with `--no-wgmma` (the default
variant, what the dataset's points are) and as the model ranks it (a kernel whose plan under
the knob runs a matmul as wgmma predicted as that plan, its wgmma FLOPs at the rate). The rate
R is then the one that makes the model's time ratio wgmma / default of each such μGraph closest
to the measured one (least squares on the log ratio, R on a grid); a μGraph whose plan takes
no wgmma has ratio 1 either way and does not enter the fit.

Printed: the fit (the loss at each R, the best), the pairs (measured and predicted ratio), and
the within-program Spearman and top-1 regret over every timed (μGraph, variant) of the two
variants, before (the model without a wgmma term: both variants predicted alike) and with the
fitted rate. The 64-row forms that h200-2026-11-29-wgmma timed (`OUT/…/rows64/NAME.rI.kK_axisA_divF
.json`) are derived again from the search result (bench/wgmma_rows.py `regridded`).

    python3 bench/wgmma_rate.py [RECORD.json@REV ...] [--strata build/strata] [--json FILE]
"""

import argparse
import json
import math
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from calibrate import top1_regret  # noqa: E402
from report import spearman  # noqa: E402
from wgmma_rows import regridded  # noqa: E402

# The records (RECORD.json@REV: REV the revision of the search results, bench/search/suite/,
# that the record profiled) fitted by default.
GRAPHS_REV = "6817fcb"
RECORDS = [f"bench/results/h200-2026-11-29-wgmma.json@{GRAPHS_REV}",
           f"bench/results/h200-2026-11-29-suite-wgmma.json@{GRAPHS_REV}"]
VARIANTS = ("default", "wgmma=1")
SM_COUNT = 132
# The rates tried (FLOP/s); inf charges the wgmma FLOPs nothing.
GRID = [r * 1e12 for r in range(600, 4001, 50)] + [6e15, 8e15, 12e15, 20e15, math.inf]


def timed(spec):
    """(program, origin@REV, variant, measured µs) of every correct candidate of the two
    variants in the record `spec` (RECORD.json@REV; without @REV, GRAPHS_REV)."""
    record, sep, rev = spec.rpartition("@")
    if not sep:
        record, rev = spec, GRAPHS_REV
    doc = json.loads((ROOT / record).read_text())
    out = []
    for prof in (doc.get("profiles") or {}).values():  # strata profile reports
        program = Path(prof["program"]).stem
        for c in prof.get("candidates", []):
            if c.get("status") == "ok" and c.get("variant") in VARIANTS and c.get("timing"):
                out.append((program, f"{c['origin']}@{rev}", c["variant"],
                            c["timing"]["median_us"]))
    for r in doc.get("results") or []:  # a suite record
        for c in r.get("strata_candidates", []):
            if c.get("ok") and c.get("variant") in VARIANTS:
                us = c.get("profiler_median_us") or c.get("median_us")
                out.append((r["config"], f"{c['origin']}@{rev}", c["variant"], us))
    return out


def search_result(path, rev=GRAPHS_REV):
    """A search result document as it was at git revision `rev`."""
    r = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:{path}"], capture_output=True,
                       text=True, check=True)
    return json.loads(r.stdout)


def graph_of(origin, scratch):
    """A μGraph file for a candidate's origin: `RESULT.json: ranked[i].graph`, or a 64-row form
    `…/rows64/STEM.rI.kK_axisA_divF.json` derived again from bench/search/suite/STEM.json; the
    search results as the record profiled them (`origin@REV`; without it GRAPHS_REV)."""
    origin, sep, rev = origin.rpartition("@")
    if not sep:
        origin, rev = rev, GRAPHS_REV
    path, _, member = origin.partition(": ")
    m = re.search(r"/rows64/(.+)\.r(\d+)\.k(\d+)_axis(\d+)_div(\d+)\.json$", path)
    if m:
        stem, rank, k, axis, f = m.group(1), *map(int, m.groups()[1:])
        doc = search_result(f"bench/search/suite/{stem}.json", rev)
        g = regridded(doc["ranked"][rank]["graph"], k, axis, f)
        name = f"{rev}.{stem}.r{rank}.k{k}_axis{axis}_div{f}.json"
    else:
        rank = int(member.split("[", 1)[1].split("]", 1)[0])
        g = search_result(path, rev)["ranked"][rank]["graph"]
        name = f"{rev}.{Path(path).stem}.rank{rank}.json"
    out = scratch / name
    out.write_text(json.dumps(g))
    return out


def cost(strata, graph, wgmma):
    args = [str(strata), "cost", "--json", "--target", "h200", str(graph)]
    if not wgmma:
        args.append("--no-wgmma")
    r = subprocess.run(args, capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def predicted_us(doc, rate):
    """The prediction of a `strata cost --json` document with its wgmma FLOPs charged at `rate`
    instead of the model's (the document's `wgmma_tensor_flops`): the throughput bound moves by
    the difference, times the kernel's underfill and last wave's tail."""
    model_rate = doc["wgmma_tensor_flops"]
    total = 0.0
    for k in doc["kernels"]:
        w = k.get("wgmma_flops", 0.0)
        thr, lat = k["t_throughput_us"], k["t_latency_us"]
        launch = k["predicted_us"] - max(thr, lat)
        if w > 0:
            blocks, waves = k["blocks"], k["waves"]
            slots = -(-blocks // SM_COUNT) * SM_COUNT
            tail = max(1.0, slots / blocks) if waves > 1 else 1.0
            thr += w * (1.0 / rate - 1.0 / model_rate) * 1e6 * k["underfill"] * tail
        total += max(thr, lat) + launch
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("records", nargs="*", default=RECORDS, metavar="RECORD.json@REV",
                    help="records that timed both variants, each with the revision of the "
                         "search results it profiled (default: the two of 2026-11-29)")
    ap.add_argument("--strata", default=str(ROOT / "build" / "strata"))
    ap.add_argument("--json", default="", help="write the points and the fit here")
    a = ap.parse_args()

    points = [p for rec in a.records for p in timed(rec)]
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        docs = {}
        for program, origin, _, _ in points:
            if origin not in docs:
                g = graph_of(origin, scratch)
                docs[origin] = (cost(a.strata, g, False), cost(a.strata, g, True))

    def pred(point, rate):
        _, origin, variant, _ = point
        plain, wg = docs[origin]
        if variant == "default" or rate is None:
            return plain["predicted_us"]
        return predicted_us(wg, rate)

    # Pairs: a μGraph timed under both variants whose wgmma plan takes a matmul.
    by = {}
    for p in points:
        by.setdefault((p[0], p[1]), {}).setdefault(p[2], []).append(p[3])
    pairs = []
    for (program, origin), v in sorted(by.items()):
        if set(v) != set(VARIANTS):
            continue
        flops = sum(k.get("wgmma_flops", 0.0) for k in docs[origin][1]["kernels"])
        if flops <= 0:
            continue
        meas = sorted(v["wgmma=1"])[len(v["wgmma=1"]) // 2] / sorted(v["default"])[len(v["default"]) // 2]
        pairs.append((program, origin, meas))

    def loss(rate):
        return sum((math.log(pred((pr, o, "wgmma=1", 0), rate) / pred((pr, o, "default", 0), rate))
                    - math.log(m)) ** 2 for pr, o, m in pairs)

    losses = [(loss(r), r) for r in GRID]
    best_loss, best = min(losses)
    print(f"{len(points)} timed candidates ({len(docs)} μGraphs), {len(pairs)} pairs whose wgmma "
          f"plan takes a matmul")
    print(f"loss (Σ log² of the ratio) without the term: "
          f"{sum(math.log(m) ** 2 for _, _, m in pairs):.4f}")
    for lo, r in losses[::6] + [losses[-1]]:
        print(f"  R = {r / 1e12:8.0f} TFLOP/s  loss {lo:.4f}")
    print(f"best: R = {best / 1e12:.0f} TFLOP/s, loss {best_loss:.4f}")
    print("\n| program | μGraph | measured wgmma / default | predicted |")
    print("|---|---|---:|---:|")
    for pr, o, m in pairs:
        p = pred((pr, o, "wgmma=1", 0), best) / pred((pr, o, "default", 0), best)
        print(f"| {pr} | {o.rpartition('@')[0].split('/')[-1]} | {m:.3f} | {p:.3f} |")

    configs = [p[0] for p in points]
    meas = [p[3] for p in points]
    print("\n| model | within-program Spearman (mean) | top-1 regret |")
    print("|---|---:|---:|")
    figures = {}
    for label, rate in (("without a wgmma term (both variants alike)", None),
                        (f"wgmma at {best / 1e12:.0f} TFLOP/s", best)):
        preds = [pred(p, rate) for p in points]
        rhos = []
        for cfg in sorted(set(configs)):
            ps = [x for x, c in zip(preds, configs) if c == cfg]
            ms = [x for x, c in zip(meas, configs) if c == cfg]
            s = spearman(ps, ms)
            if s is not None:
                rhos.append(s)
        mean = sum(rhos) / len(rhos) if rhos else float("nan")
        regret = top1_regret(preds, meas, configs)
        figures[label] = (mean, regret)
        print(f"| {label} | {mean:.3f} ({len(rhos)} programs) | {regret:.3f} |")
    if a.json:
        Path(a.json).write_text(json.dumps({"points": points, "pairs": pairs, "rate": best,
                                            "losses": losses, "figures": figures}, indent=1))


if __name__ == "__main__":
    main()
