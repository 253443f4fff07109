#!/usr/bin/env python3
"""Where the suite stands between whole runs: for every program of bench/suite/, its speedup in
the newest GPU record that timed it (bench/results/, suite reports of bench/suite_bench.py),
the geometric mean over those and the programs below 1.0×.

This is a standing over mixed runs, not a run: each program's figure comes from its own record
(its own baselines, timed in the same process as strata's pick), and records differ in code,
searches and machine. A whole run (bench/README.md, "The suite") is the measurement; this
answers "after the partial re-runs since, which programs are still behind?".

Records are ordered by the commit that added them (`git log --diff-filter=A`; a record not
committed yet counts as the newest), or, with --records, in the order given.

  python3 bench/suite_standing.py [--gpu h200] [--records A.json,B.json,...] [--below 1.05]
"""

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def added_time(path):
    """Unix time of the commit that added `path`; None when git does not know it."""
    try:
        out = subprocess.run(["git", "log", "--diff-filter=A", "--format=%ct", "--", str(path)],
                             capture_output=True, text=True, cwd=ROOT, check=False).stdout.split()
    except OSError:
        return None
    return int(out[-1]) if out else None


def ordered_records(gpu, results_dir):
    """The GPU's JSON records in results_dir, oldest first (by the commit that added them;
    uncommitted ones last, by name)."""
    found = sorted(Path(results_dir).glob(f"{gpu}-*.json"))
    keyed = []
    for f in found:
        t = added_time(f)
        keyed.append((t is None, t or 0, f.name, f))
    return [f for *_, f in sorted(keyed)]


def standing(records, programs):
    """Per program of `programs`, the entry of the last record in `records` (oldest first)
    that gives it a speedup: {program: {"speedup", "strata_us", "pytorch", "pytorch_us",
    "head_to_head", "record"}}, the times those of the head-to-head step where the record has
    one (the speedup's own). Files that are not suite reports are skipped."""
    latest = {}
    for f in records:
        try:
            doc = json.loads(Path(f).read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(doc, dict) or doc.get("kind") != "suite":
            continue
        for r in doc.get("results", []):
            name = r.get("program")
            if name not in programs or "speedup" not in r:
                continue
            best = r.get("best_pytorch", {})
            h2h = r.get("head_to_head", {})
            if "speedup" in h2h:  # the times the speedup was taken from
                strata_us, torch_us = h2h.get("strata_us"), h2h.get("pytorch_us")
            else:
                strata_us = r.get("systems", {}).get("strata", {}).get("median_us")
                torch_us = best.get("median_us")
            latest[name] = {"speedup": r["speedup"], "strata_us": strata_us,
                            "pytorch": best.get("mode"), "pytorch_us": torch_us,
                            "head_to_head": "speedup" in h2h, "record": Path(f).stem}
    return latest


def summary(latest, programs):
    speedups = [e["speedup"] for e in latest.values()]
    return {"programs": len(programs), "with_speedup": len(speedups),
            "geomean": math.exp(sum(map(math.log, speedups)) / len(speedups)) if speedups else None,
            "below_parity": sorted((n for n, e in latest.items() if e["speedup"] < 1.0),
                                   key=lambda n: latest[n]["speedup"]),
            "never_timed": sorted(set(programs) - set(latest))}


def markdown(latest, programs, below):
    sm = summary(latest, programs)
    out = ["| program | speedup | strata µs | best PyTorch | µs | head to head | record |",
           "|---|---:|---:|---|---:|---|---|"]
    for name, e in sorted(latest.items(), key=lambda kv: kv[1]["speedup"]):
        if e["speedup"] >= below:
            continue
        fmt = lambda x: f"{x:.2f}" if isinstance(x, (int, float)) else "—"  # noqa: E731
        out.append(f"| {name} | {e['speedup']:.3f}× | {fmt(e['strata_us'])} | "
                   f"{e['pytorch'] or '—'} | {fmt(e['pytorch_us'])} | "
                   f"{'yes' if e['head_to_head'] else 'no'} | {e['record']} |")
    gm = f"{sm['geomean']:.3f}×" if sm["geomean"] else "—"
    out += ["", f"{sm['with_speedup']} of {sm['programs']} programs with a speedup; geometric "
            f"mean {gm}; below 1.0×: {len(sm['below_parity'])}"
            + (f" ({', '.join(sm['below_parity'])})" if sm["below_parity"] else "")
            + (f"; never timed: {', '.join(sm['never_timed'])}" if sm["never_timed"] else "")
            + f". Rows: programs below {below:g}×. Mixed runs, not one run."]
    return "\n".join(out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--gpu", default="h200", help="record prefix (h200, h100)")
    p.add_argument("--results", default=str(HERE / "results"), help="folder of the records")
    p.add_argument("--suite-dir", default=str(HERE / "suite"), help="folder of the programs")
    p.add_argument("--records", default="",
                   help="comma-separated record files, oldest first (default: every record of "
                        "--gpu in --results, by the commit that added it)")
    p.add_argument("--below", type=float, default=1.05,
                   help="list the programs whose speedup is below this (default 1.05)")
    p.add_argument("--json", action="store_true", help="print the standing as JSON")
    args = p.parse_args(argv)
    programs = sorted(f.stem for f in Path(args.suite_dir).glob("*.strata"))
    if not programs:
        sys.exit(f"suite_standing: no .strata program in {args.suite_dir}")
    records = ([Path(r) for r in args.records.split(",") if r] if args.records
               else ordered_records(args.gpu, args.results))
    missing = [str(r) for r in records if not Path(r).exists()]
    if missing:
        sys.exit(f"suite_standing: no such record: {', '.join(missing)}")
    latest = standing(records, set(programs))
    if args.json:
        print(json.dumps({"summary": summary(latest, programs), "programs": latest}, indent=2))
    else:
        print(markdown(latest, programs, args.below))


if __name__ == "__main__":
    main()
