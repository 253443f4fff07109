"""A Llama-style decoder layer at decode shapes: PyTorch eager, torch.compile (default mode) and
torch.compile(backend="strata") side by side (docs/python.md, "The Llama decoder layer").

    python3 bench/llama_layer.py [--batches 1,8] [--cache-len 4096] [--out bench/results]

The layer is strata.models.LlamaDecoderLayer (Llama-3-8B dimensions by default: hidden 4096,
32 query heads, 8 key/value heads of 128, MLP 14336; fp16). Each system is first checked
against eager (relative L2 error of every output ≤ 1e-2, the fp16 tolerance), then timed with
bench/timing.py's method: a CUDA graph of launches over rotated input sets (activations and
KV caches; the weights, which alone exceed 4× L2, are shared), ≥ 100 launches per replay,
median of ≥ 100 replays bracketed by CUDA events. Writes <out>/<gpu>-<date>-llama.json and .md.
Needs a GPU and an installed strata package (pip install .); scripts/gpu-python.sh runs it.
"""
import argparse
import datetime
import json
import logging
import math
import pathlib
import sys
import time

import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import timing  # noqa: E402

import strata  # noqa: E402
from strata.backend import register  # noqa: E402
from strata.models import LlamaConfig, LlamaDecoderLayer  # noqa: E402

TOLERANCE = 1e-2


def log(msg):
    print(msg, flush=True)


def systems(layer, search_time):
    register()
    return {
        "eager": lambda: layer,
        "compile": lambda: torch.compile(layer, dynamic=False),
        "strata": lambda: torch.compile(layer, backend="strata", dynamic=False,
                                        options={"time_limit": search_time}),
    }


def bench_one(layer, batch, cache_len, modes, search_time, runs):
    inputs = layer.make_inputs(batch, cache_len)
    weight_bytes = sum(p.numel() * p.element_size() for p in layer.parameters())
    set_bytes = sum(t.numel() * t.element_size() for t in inputs)
    sets = timing.sets_for(weight_bytes + set_bytes)
    sets_inputs = [inputs] + [[t.clone() for t in inputs] for _ in range(sets - 1)]
    with torch.no_grad():
        want = layer(*inputs)
    torch.cuda.synchronize()
    row = {"batch": batch, "cache_len": cache_len, "weight_bytes": weight_bytes,
           "set_bytes": set_bytes, "sets": sets, "systems": {}}
    for mode in modes:
        torch._dynamo.reset()
        start = time.time()
        entry = {}
        try:
            fn = systems(layer, search_time)[mode]()
            with torch.no_grad():
                got = fn(*inputs)
                torch.cuda.synchronize()
                errs = [timing.relative_l2_error(g, w) for g, w in zip(got, want)]
                entry["rel_l2_error"] = max(errs) if all(map(math.isfinite, errs)) else "inf"
                entry["ok"] = all(e <= TOLERANCE for e in errs)
                outs = [None] * sets

                def launch(i):
                    outs[i] = fn(*sets_inputs[i])

                entry.update(timing.time_launches(launch, sets, runs=runs))
        except Exception as e:  # a failing system is reported, not fatal
            entry = {"ok": False, "error": f"{type(e).__name__}: {e}"[:800]}
        entry["wall_s"] = round(time.time() - start, 1)
        row["systems"][mode] = entry
        shown = f"{entry['median_us']:.2f} us" if "median_us" in entry else entry.get("error")
        log(f"  b={batch} S={cache_len} {mode}: {shown}"
            + ("" if entry.get("ok", False) or "error" in entry else " (WRONG ANSWER)"))
    return row


def markdown(doc):
    lines = [f"# Llama decoder layer at decode shapes — {doc['device']} ({doc['date']})", "",
             f"strata {doc['strata_version']}, torch {doc['torch_version']}; layer "
             f"{doc['config']}; fp16. Median µs per call (CUDA-graph replays, bench/timing.py); "
             f"outputs checked against eager (relative L2 ≤ {TOLERANCE}).", "",
             "| batch | cache | eager | torch.compile | strata | strata vs compile |",
             "|---|---|---|---|---|---|"]
    for r in doc["rows"]:
        s = r["systems"]

        def cell(m):
            e = s.get(m, {})
            if "median_us" not in e:
                return "error" if "error" in e else "—"
            return f"{e['median_us']:.2f}" + ("" if e.get("ok") else " (wrong)")

        ratio = "—"
        if "median_us" in s.get("strata", {}) and "median_us" in s.get("compile", {}):
            ratio = f"{s['compile']['median_us'] / s['strata']['median_us']:.2f}×"
        lines.append(f"| {r['batch']} | {r['cache_len']} | {cell('eager')} | {cell('compile')} "
                     f"| {cell('strata')} | {ratio} |")
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--batches", default="1,8")
    p.add_argument("--cache-len", type=int, default=4096)
    p.add_argument("--modes", default="eager,compile,strata")
    p.add_argument("--search-time", type=float, default=60.0, help="seconds per partition search")
    p.add_argument("--runs", type=int, default=100)
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--intermediate", type=int, default=14336)
    p.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    if not torch.cuda.is_available() or not strata.gpu_available():
        sys.exit("bench/llama_layer.py needs a CUDA GPU and strata built with CUDA")
    cfg = LlamaConfig(hidden=args.hidden, heads=args.heads, kv_heads=args.kv_heads,
                      head_dim=args.head_dim, intermediate=args.intermediate)
    layer = LlamaDecoderLayer(cfg, dtype=torch.float16, device="cuda")
    device = torch.cuda.get_device_name()
    doc = {"device": device, "date": datetime.date.today().isoformat(),
           "strata_version": strata.__version__, "torch_version": torch.__version__,
           "config": vars(cfg), "tolerance": TOLERANCE, "rows": []}
    for b in [int(x) for x in args.batches.split(",")]:
        doc["rows"].append(bench_one(layer, b, args.cache_len, args.modes.split(","),
                                     args.search_time, args.runs))
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"{device.split()[1].lower() if len(device.split()) > 1 else 'gpu'}-{doc['date']}-llama"
    (out / f"{stem}.json").write_text(json.dumps(doc, indent=2) + "\n")
    (out / f"{stem}.md").write_text(markdown(doc))
    log(f"wrote {out / stem}.json and .md")
    bad = [(r["batch"], m) for r in doc["rows"] for m, e in r["systems"].items() if not e.get("ok")]
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
