#!/usr/bin/env python3
"""Candidates with 64-row warpgroup tiles for the wgmma variant (docs/codegen.md, "wgmma").

The searches' best graphs of GEMM chains and short attention give each block 16 or 32 rows,
too few for warpgroup MMA (m64). For each of the top K graphs of a search result this writes
the graphs whose customized kernels have one grid axis divided by 2 or 4 (each block takes a
2 or 4 times larger tile along the dims mapped to that axis; same semantics when the extents
divide), keeping those whose emitted code with `wgmma=1` calls warpgroup_mma (checked with
`strata emit`). `strata profile` then checks them against the float64 reference and times them
with and without the knob (scripts/gpu-wgmma.sh).

    python3 bench/wgmma_rows.py derive SEARCH_RESULT.json OUT_DIR [--top 5] [--strata build/strata]
        prints the paths written, one per line
    python3 bench/wgmma_rows.py report PROFILE_DIR
        the fastest correct candidate per program and variant of the `strata profile` reports
        PROFILE_DIR/<program>.json, as a Markdown table"""

import argparse
import copy
import json
import os
import subprocess
import sys


def regridded(graph, kernel, axis, factor):
    """The graph with the grid of customized kernel op `kernel` divided by `factor` along
    `axis`, or None when a dim mapped to that axis does not divide into the coarser tiles."""
    g = copy.deepcopy(graph)
    op = g["ops"][kernel]
    bg = op["block_graph"]
    grid = bg["grid"]
    if grid[axis] % factor != 0 or grid[axis] // factor < 1:
        return None
    new = grid[axis] // factor
    shapes = {t["name"]: t["shape"] for t in g["inputs"]}
    for bop in bg["ops"]:
        if bop["op"] != "input":
            continue
        imap = bop.get("imap") or []
        shape = shapes.get(op["inputs"][bop["input"]])
        if shape is None:
            return None  # an input made by another kernel: its shape is not at hand here
        for a, d in enumerate(imap):
            if a == axis and d is not None and shape[d] % new != 0:
                return None
    grid[axis] = new
    return g


def variants(graph):
    """(description, graph) for every customized kernel, grid axis and factor 2 or 4."""
    out = []
    for k, op in enumerate(graph["ops"]):
        if op.get("op") != "customized":
            continue
        for axis, size in enumerate(op["block_graph"]["grid"]):
            for factor in (2, 4):
                if size >= factor:
                    g = regridded(graph, k, axis, factor)
                    if g is not None:
                        out.append((f"k{k}_axis{axis}_div{factor}", g))
    return out


def takes_wgmma(strata, path):
    """Whether `strata emit --knobs wgmma=1` of the μGraph at `path` calls warpgroup MMA."""
    r = subprocess.run([strata, "emit", path, "--knobs", "wgmma=1", "--arch", "sm_90a"],
                       capture_output=True, text=True)
    return r.returncode == 0 and "warpgroup_mma" in r.stdout


def best_per_variant(doc):
    """{variant: (µs, origin)} of the fastest correct candidate per variant of a profile report,
    and the counts (correct, checked) per variant."""
    best, counts = {}, {}
    for c in doc.get("candidates", []):
        v = c.get("variant", "?")
        ok, checked = counts.get(v, (0, 0))
        status = c.get("status")
        if status in (None, "skipped"):
            continue
        checked += 1
        us = (c.get("timing") or {}).get("median_us")
        if status == "ok":
            ok += 1
            if us is not None and (v not in best or us < best[v][0]):
                best[v] = (us, c.get("origin", "?"))
        counts[v] = (ok, checked)
    return best, counts


def report(profile_dir):
    lines = ["| program | variant | fastest correct µs | candidate | correct / checked | vs default |",
             "|---|---|---|---|---|---|"]
    for name in sorted(os.listdir(profile_dir)):
        if not name.endswith(".json"):
            continue
        with open(os.path.join(profile_dir, name)) as f:
            doc = json.load(f)
        best, counts = best_per_variant(doc)
        base = best.get("default", (None,))[0]
        for v in sorted(counts, key=lambda v: (v != "default", v)):
            us, origin = best.get(v, (None, "-"))
            ok, checked = counts[v]
            ratio = f"{base / us:.2f}x" if us and base else "-"
            lines.append(f"| {name[:-5]} | {v} | {us:.2f} | {origin} | {ok} / {checked} | {ratio} |"
                         if us is not None else
                         f"| {name[:-5]} | {v} | - | - | {ok} / {checked} | - |")
    print("\n".join(lines))


def derive(a):
    with open(a.result) as f:
        doc = json.load(f)
    os.makedirs(a.out, exist_ok=True)
    stem = os.path.splitext(os.path.basename(a.result))[0]
    written = 0
    for entry in doc.get("ranked", [])[: a.top]:
        for desc, g in variants(entry["graph"]):
            path = os.path.join(a.out, f"{stem}.r{entry['rank']}.{desc}.json")
            with open(path, "w") as f:
                json.dump(g, f)
            if takes_wgmma(a.strata, path):
                print(path)
                written += 1
            else:
                os.remove(path)
    print(f"wgmma_rows: {written} candidate(s) with 64-row warpgroup tiles from {a.result}",
          file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("derive")
    d.add_argument("result")
    d.add_argument("out")
    d.add_argument("--top", type=int, default=5)
    d.add_argument("--strata", default="build/strata")
    r = sub.add_parser("report")
    r.add_argument("profile_dir")
    a = ap.parse_args()
    if a.cmd == "derive":
        derive(a)
    else:
        report(a.profile_dir)


if __name__ == "__main__":
    main()
