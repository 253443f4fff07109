"""The six benchmarks' fastest picks emitted by two builds of strata, timed side by side.

For each configuration of a benchmark record (default bench/results/h100-2026-11-25.json),
the graph and emitter variant that were strata's fastest there are checked against the float64
reference and timed by `strata profile` with each of two tools, alternating BEFORE, AFTER,
BEFORE, AFTER so that drift of the machine falls on both alike. A change of the code generator
that must not change performance (docs/codegen.md) is shown this way: the table gives the
median of the profiler's medians per tool and their ratio.

With --picks, the given search results' entries instead of a record's (e.g. the rotary
programs of the suite: --picks bench/search/suite/llama32_1b_rope_p4096.json:0,...:2), each
with the default emitter variant and random inputs.

Usage: python3 bench/before_after.py --before B/strata --after A/strata --out DIR
         [--record R | --picks DOC:RANK,...] [--rounds N]
Writes DIR/before-after.md and .json; exit 1 if a candidate fails its check.
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def benchmark_inputs(config, folder):
    """The benchmark's input recipe (bench/benchmarks.py: qknorm needs inputs that keep its
    exponentials finite) written to `folder`, as `strata profile --inputs` arguments; none
    where the recipe is unavailable (no PyTorch) or unknown."""
    r = subprocess.run([sys.executable, str(ROOT / "bench/benchmarks.py"), "inputs", config,
                        str(folder)], capture_output=True, text=True)
    return ["--inputs", str(folder)] if r.returncode == 0 else []


def profile(tool, doc, rank, variant, out, inputs=()):
    cmd = [tool, "profile", doc, doc, "--rank", str(rank), "--variants", variant, "-q",
           "-o", str(out), *inputs]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if not out.exists():
        raise RuntimeError(f"{' '.join(cmd)} wrote no report (exit {r.returncode}): {r.stderr[-400:]}")
    rep = json.loads(out.read_text())
    cands = rep.get("candidates", [])
    ok = [c for c in cands if c.get("status") == "ok"]
    if not ok:
        raise RuntimeError(f"{' '.join(cmd)}: no correct candidate: {json.dumps(cands)[:400]}")
    return min(c["timing"]["median_us"] for c in ok)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--before", required=True)
    p.add_argument("--after", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--record", default=str(ROOT / "bench/results/h100-2026-11-25.json"))
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--picks", default="",
                   help="DOC:RANK,... search results' entries to time instead of the record's")
    a = p.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    record = json.loads(Path(a.record).read_text()) if not a.picks else {"results": [
        {"config": f"{Path(doc).stem}_r{rank}",
         "systems": {"strata": {"origin": f"{doc}: ranked[{rank}].graph", "variant": "default"}}}
        for doc, rank in (x.rsplit(":", 1) for x in a.picks.split(","))]}
    rows, failed = [], False
    with tempfile.TemporaryDirectory() as tmp:
        for r in record["results"]:
            s = r["systems"]["strata"]
            doc = s["origin"].split(":")[0]
            rank = int(s["origin"].split("ranked[")[1].split("]")[0])
            times = {"before": [], "after": []}
            inputs = benchmark_inputs(r["config"], Path(tmp) / f"{r['config']}-inputs")
            try:
                for i in range(a.rounds):
                    for side in ("before", "after"):
                        tool = a.before if side == "before" else a.after
                        f = Path(tmp) / f"{r['config']}-{side}-{i}.json"
                        times[side].append(
                            profile(tool, str(ROOT / doc), rank, s["variant"], f, inputs))
            except RuntimeError as e:
                print(f"{r['config']}: {e}", file=sys.stderr)
                failed = True
                continue
            b, af = statistics.median(times["before"]), statistics.median(times["after"])
            rows.append({"config": r["config"], "graph": s["origin"], "variant": s["variant"],
                         "before_us": round(b, 3), "after_us": round(af, 3),
                         "after_over_before": round(af / b, 4)})
            print(f"{r['config']}: before {b:.2f} µs, after {af:.2f} µs ({af / b:.3f}x)", flush=True)
    (out / "before-after.json").write_text(json.dumps({"rows": rows, "failed": failed}, indent=2))
    lines = ["| config | graph [variant] | before µs | after µs | after / before |",
             "|---|---|---:|---:|---:|"]
    for x in rows:
        lines.append(f"| {x['config']} | {x['graph']} [{x['variant']}] | {x['before_us']:.2f} | "
                     f"{x['after_us']:.2f} | {x['after_over_before']:.3f} |")
    if rows:
        g = statistics.geometric_mean([x["after_over_before"] for x in rows])
        lines.append(f"\nGeometric mean after / before: {g:.3f}; worst "
                     f"{max(x['after_over_before'] for x in rows):.3f}.")
    (out / "before-after.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
