#!/usr/bin/env python3
"""Why the cost model misorders candidates within programs (docs/cost-model.md, "The ranking
within programs"): reads the calibration dataset (bench/calibration/points.json) and prints

  - the run-to-run noise: the spread of a μGraph's measured time over the records that timed it,
    and the within-program Spearman correlation between two records' times of the same graphs
    (the ceiling a model could reach against one record's times);
  - the mean within-program Spearman's shortfall from 1, split over its causes: each program's
    1 − ρ is shared equally among its discordant pairs (predicted in one order, measured in the
    other), and each pair is given a cause from the kernels of its two graphs (by structure) and
    from the model's terms that put them in the wrong order (by term);
  - the shortfall per family of programs (the config's name).

Causes by structure, the first that applies: "noise" (measured within --noise of each other, the
run-to-run spread), "library vs customized" (a different number of cuBLAS calls), "rowwise" (a
rowwise kernel in either), "split forms" (a different number of kernels), "attention loop" (an
attention program with a looping kernel), "other loop kernels", "one-pass kernels (F = 1)".
Causes by term: the term of the dataset's prediction whose difference between the two graphs
puts the measured-slower one ahead the most: "throughput" (Σ of the generated kernels'
throughput bounds), "latency excess" (Σ max(0, latency − throughput)), "launch" (kernels times
the launch term), "library" (the cuBLAS calls' bounds). Programs whose candidates are all
predicted equal have no discordant pair: "(predicted ties)".

Usage: python3 bench/ranking_causes.py [--dataset FILE] [--target h200] [--noise 0.03]
Pure Python.
"""
import argparse
import collections
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import calibrate  # noqa: E402
from report import spearman  # noqa: E402

LAUNCH_S = {"h100": 3.38e-6, "h200": 3.38e-6, "a100": 2e-6}  # the model's launch term


def kind(k):
    """A kernel's kind: L (cuBLAS call), R (rowwise), G (generic predefined kernel, no plan) or
    C (a planned kernel: customized or a lowered matmul)."""
    if k.get("library"):
        return "L"
    if k.get("register_loads"):
        return "R"
    return "G" if k.get("threads", 0) == 0 else "C"


def structure_cause(a, b, program, noise):
    """The cause of a discordant pair (a, b) by the kernels of its two graphs."""
    if abs(math.log(a["measured_s"] / b["measured_s"])) < noise:
        return "noise"
    ka = collections.Counter(kind(k) for k in a["kernels"])
    kb = collections.Counter(kind(k) for k in b["kernels"])
    if ka["L"] != kb["L"]:
        return "library vs customized"
    if ka["R"] or kb["R"]:
        return "rowwise"
    if len(a["kernels"]) != len(b["kernels"]):
        return "split forms"
    looping = any(k["forloop"] > 1 and k.get("loop_barriers", 0) > 0
                  for k in a["kernels"] + b["kernels"])
    if looping:
        return "attention loop" if "attn" in program else "other loop kernels"
    return "one-pass kernels (F = 1)"


def term_parts(point, launch_s):
    """A point's prediction split into the model's terms (seconds)."""
    d = collections.Counter()
    for k in point["kernels"]:
        d["launch"] += launch_s
        if k.get("library"):
            d["library"] += k["t_throughput_us"] * 1e-6
            continue
        d["throughput"] += k["t_throughput_us"] * 1e-6
        d["latency excess"] += max(0.0, k["t_latency_us"] - k["t_throughput_us"]) * 1e-6
    return d


def term_cause(fast, slow, noise, launch_s):
    """The cause of a discordant pair by term: `fast` is predicted faster, measured slower."""
    if abs(math.log(fast["measured_s"] / slow["measured_s"])) < noise:
        return "noise"
    pf, ps = term_parts(fast, launch_s), term_parts(slow, launch_s)
    return max(set(pf) | set(ps), key=lambda t: ps[t] - pf[t])


def programs_of(points):
    """{record:config: [points]}: the candidates ranked against each other in one run."""
    progs = collections.defaultdict(list)
    for p in points:
        progs[f"{p['record']}:{p['config']}"].append(p)
    return progs


def shortfall(points, noise, launch_s):
    """(number of programs with a correlation, {cause: Σ share} by structure, by term,
    {family: Σ 1 − ρ}); divide by the number for the mean's parts."""
    by_structure, by_term, by_family = (collections.Counter() for _ in range(3))
    n = 0
    for name, ps in programs_of(points).items():
        rho = spearman([p["predicted_s"] for p in ps], [p["measured_s"] for p in ps])
        if rho is None:
            continue
        n += 1
        by_family[family(name.split(":", 1)[1])] += 1 - rho
        pairs = []
        for i, a in enumerate(ps):
            for b in ps[i + 1:]:
                fast, slow = (a, b) if a["predicted_s"] < b["predicted_s"] else (b, a)
                if fast["predicted_s"] < slow["predicted_s"] and \
                        fast["measured_s"] > slow["measured_s"]:
                    pairs.append((fast, slow))
        if not pairs:
            by_structure["(predicted ties)"] += 1 - rho
            by_term["(predicted ties)"] += 1 - rho
            continue
        for fast, slow in pairs:
            by_structure[structure_cause(fast, slow, name, noise)] += (1 - rho) / len(pairs)
            by_term[term_cause(fast, slow, noise, launch_s)] += (1 - rho) / len(pairs)
    return n, by_structure, by_term, by_family


def family(config):
    """A program's family: MCFuser's chains by their prefix, the models' programs by their
    operator (qkv, attn, mlp, lmhead, ...)."""
    parts = config.split("_")
    if parts[0] in ("llama3", "llama32", "qwen25", "mistral") and len(parts) > 2:
        return parts[2]
    return parts[0]


def noise_figures(points):
    """(spreads max / min of a graph's times over the records that timed it,
    [within-program Spearman between two records' times of the same ≥ 3 graphs])."""
    times = collections.defaultdict(dict)
    for p in points:
        times[(p["config"], p["graph"])][p["record"]] = p["measured_s"]
    spreads = sorted(max(t.values()) / min(t.values()) for t in times.values() if len(t) > 1)
    by_config = collections.defaultdict(lambda: collections.defaultdict(dict))
    for p in points:
        by_config[p["config"]][p["record"]][p["graph"]] = p["measured_s"]
    rhos = []
    for recs in by_config.values():
        names = sorted(recs)
        for i, r1 in enumerate(names):
            for r2 in names[i + 1:]:
                common = sorted(set(recs[r1]) & set(recs[r2]))
                rho = spearman([recs[r1][g] for g in common], [recs[r2][g] for g in common])
                if rho is not None:
                    rhos.append(rho)
    return spreads, rhos


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default=str(calibrate.DATASET))
    ap.add_argument("--target", default="h200", choices=sorted(calibrate.SM_COUNT))
    ap.add_argument("--noise", type=float, default=0.03,
                    help="pairs measured within this |log ratio| count as noise (default 0.03)")
    a = ap.parse_args()
    try:
        points = calibrate.read_dataset(a.dataset, a.target)
    except calibrate.DatasetError as e:
        sys.exit(f"ranking_causes: {e}")
    spreads, rhos = noise_figures(points)
    if spreads:
        q = [spreads[int(f * (len(spreads) - 1))] for f in (0.5, 0.75, 0.9)]
        print(f"{len(spreads)} graphs timed in two or more records: max / min of their times, "
              f"median {q[0]:.3f}, 75th percentile {q[1]:.3f}, 90th {q[2]:.3f}")
    if rhos:
        print(f"{len(rhos)} pairs of records timing three or more of a program's graphs: "
              f"within-program Spearman between their times, mean {sum(rhos) / len(rhos):.3f}")
    n, by_structure, by_term, by_family = shortfall(points, a.noise, LAUNCH_S[a.target])
    total = sum(by_structure.values())
    print(f"{n} programs: within-program Spearman mean {1 - total / n:.3f}, shortfall "
          f"{total / n:.3f}; pairs measured within {a.noise:g} (log) count as noise")
    for title, parts in (("by structure", by_structure), ("by term", by_term),
                         ("by family", by_family)):
        print(f"shortfall {title}:")
        for cause, v in parts.most_common():
            print(f"  {cause:28s} {v / n:.3f}")


if __name__ == "__main__":
    main()
