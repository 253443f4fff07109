"""Joins the runs of scripts/gpu-mpk-ab.sh into one table (docs/megakernel.md, "Measured changes").

OUT holds BUILD-rROUND/mpk-*.json, each a record of bench/mpk_decode.py. Per configuration (model,
batch, KV length) and build: the median over the rounds of the static-list and queue latencies
(µs), the best of the two, and whether every check (logits, greedy tokens up to near ties) passed
in every round. Writes OUT/mpk-ab.md and OUT/mpk-ab.json; exit 1 when a run is missing or a check
failed.
"""
import argparse
import glob
import json
import os
import statistics
import sys


def load(out, build, rnd):
    files = sorted(glob.glob(os.path.join(out, f"{build}-r{rnd}", "mpk-*.json")))
    if not files:
        return None
    with open(files[-1]) as f:
        return json.load(f)


def passed(rec):
    check = rec.get("check", {})
    ok = all(c.get("within_tol") for c in check.values()) and bool(check)
    greedy = rec.get("greedy", {})
    return ok and bool(greedy.get("equal") or
                       greedy.get("first_difference", {}).get("near_tie", False))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--builds", nargs="+", required=True)
    ap.add_argument("--rounds", type=int, default=1)
    a = ap.parse_args(argv)
    rows, ok, gpu = {}, True, None
    for b in a.builds:
        for r in range(1, a.rounds + 1):
            doc = load(a.out, b, r)
            if doc is None:
                print(f"mpk_ab: no record for build {b}, round {r}", file=sys.stderr)
                ok = False
                continue
            gpu = gpu or doc.get("gpu")
            for rec in doc.get("records", []):
                key = (rec["model"], rec["batch"], rec["kv"])
                cell = rows.setdefault(key, {}).setdefault(b, {"static": [], "queue": [],
                                                               "passed": True})
                t = rec.get("times_ms", {})
                for mode in ("static", "queue"):
                    if f"megakernel_{mode}" in t:
                        cell[mode].append(t[f"megakernel_{mode}"] * 1000)
                cell["passed"] = cell["passed"] and passed(rec)
    table = []
    for key in sorted(rows):
        entry = {"model": key[0], "batch": key[1], "kv": key[2], "builds": {}}
        for b in a.builds:
            c = rows[key].get(b)
            if not c or not c["static"]:
                ok = False
                continue
            s, q = statistics.median(c["static"]), statistics.median(c["queue"] or c["static"])
            entry["builds"][b] = {"static_us": s, "queue_us": q, "best_us": min(s, q),
                                  "runs_static_us": c["static"], "runs_queue_us": c["queue"],
                                  "passed": c["passed"]}
            ok = ok and c["passed"]
        table.append(entry)
    base = a.builds[0]
    lines = [f"# Megakernel A/B on {gpu}", "",
             f"Latency per token in µs, median of {a.rounds} round(s) (static lists / queue); "
             f"ratio = best of {base} / best of the build.", "",
             "| model | B | KV | " + " | ".join(a.builds) + " | " +
             " | ".join(f"{base} / {b}" for b in a.builds[1:]) + " |",
             "|---|---|---|" + "---|" * (2 * len(a.builds) - 1)]
    for e in table:
        cells = []
        for b in a.builds:
            c = e["builds"].get(b)
            cells.append("-" if c is None else
                         f"{c['static_us']:.0f} / {c['queue_us']:.0f}" +
                         ("" if c["passed"] else " (check failed)"))
        ratios = []
        for b in a.builds[1:]:
            c0, c = e["builds"].get(base), e["builds"].get(b)
            ratios.append("-" if not (c0 and c) else f"{c0['best_us'] / c['best_us']:.3f}")
        lines.append(f"| {e['model']} | {e['batch']} | {e['kv']} | " + " | ".join(cells) +
                     " | " + " | ".join(ratios) + " |")
    text = "\n".join(lines) + "\n"
    print(text)
    with open(os.path.join(a.out, "mpk-ab.md"), "w") as f:
        f.write(text)
    with open(os.path.join(a.out, "mpk-ab.json"), "w") as f:
        json.dump({"gpu": gpu, "builds": a.builds, "rounds": a.rounds, "rows": table}, f,
                  indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
