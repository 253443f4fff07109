#!/usr/bin/env python3
"""Tensor-parallel Llama-3-8B blocks on 2 GPUs: strata's kernels with NCCL against PyTorch with
torch.distributed (NCCL), in one run (docs/tensor-parallel.md, bench/README.md "Tensor
parallelism"). Launched one process per GPU:

    torchrun --standalone --nproc_per_node=2 bench/tp_bench.py --lib-dir DIR --out OUT

(scripts/gpu-tp.sh compiles the libraries and runs this). For every program of bench/tp/
(the program of one rank, `ranks 2`):
  1. inputs: the full (unsharded) fp16 tensors, drawn on every rank from the same seed; each
     rank takes its shard as the program's `shard(dim=D)` declarations say;
  2. reference: the unsharded program in float64 on the full inputs; every rank's output is
     checked against its part of it (a replicated output: all of it; `output O shard(dim=D)`:
     the rank's part along D);
  3. systems, each checked, then timed by bench/timing.py's method (a CUDA graph of launches
     over rotated input sets, ≥ 100 replays, the median): PyTorch eager per rank with
     torch.distributed.all_reduce, torch.compile of the same function (when it compiles and
     time remains), and every compiled strata candidate of <lib-dir>/<program>.r<K>.so
     (emitted by `strata emit` from bench/search/tp/<program>.json; its all_reduce is an
     ncclAllReduce on a communicator of its own, made from an id broadcast through
     torch.distributed); the fastest correct candidate is strata's time;
  4. report: rank 0 writes <out>/<gpu>x2-<date>-tp.json and .md after every program (a run
     cut short keeps what it measured).
Every decision that changes what a rank runs (a failed check, a capture that failed, the time
budget) is agreed on by all ranks first, so that no rank waits in a collective the others skip.
The time of a rank is its median; a program's time is the larger of the ranks' (the step waits
for the slower rank).
"""

import argparse
import ctypes
import datetime
import json
import math
import os
import re
import sys
import time
import traceback
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import timing  # noqa: E402

TOLERANCE = 2e-2  # relative L2 error of an fp16 result against the float64 reference
RUNS = 100
EPS = 1e-5
NCCL_ID_BYTES = 128  # NCCL_UNIQUE_ID_BYTES


def log(msg):
    if dist.get_rank() == 0:
        print(f"[tp {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def agreed(ok):
    """True when `ok` holds on every rank (a collective: every rank must call it)."""
    t = torch.tensor([1 if ok else 0], dtype=torch.int32, device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MIN)
    return bool(t.item())


def worst(value):
    """The largest value over the ranks (a collective)."""
    t = torch.tensor([float(value)], dtype=torch.float64, device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


# ---- programs ----------------------------------------------------------------------------

_INPUT = re.compile(r"^input\s+(\w+)\s*:\s*(\w+)\[([\d,\s]+)\]\s*(shard\(\s*(?:dim\s*=\s*)?(-?\d+)\s*\))?")
_OUTPUT_SHARD = re.compile(r"(\w+)\s+shard\(\s*(?:dim\s*=\s*)?(-?\d+)\s*\)")


def read_interface(path):
    """(ranks, {input: (local shape, shard dim or None)}, output shard dim or None) of a
    bench/tp program (the lines `ranks`, `input` and `output` of docs/program-format.md)."""
    ranks, inputs, out_shard = 1, {}, None
    for line in Path(path).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("ranks"):
            ranks = int(line.split()[1])
        m = _INPUT.match(line)
        if m:
            shape = tuple(int(x) for x in m.group(3).split(","))
            d = m.group(5)
            d = None if d is None else int(d) % len(shape)
            inputs[m.group(1)] = (shape, d)
        if line.startswith("output"):
            m = _OUTPUT_SHARD.search(line)
            if m:
                out_shard = int(m.group(2))
    return ranks, inputs, out_shard


def shard_of(full, dim, rank, ranks):
    if dim is None:
        return full
    e = full.shape[dim] // ranks
    return full.narrow(dim, rank * e, e).contiguous()


def rms(x):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS)).to(x.dtype)


class Block:
    """One program: its full inputs, float64 reference and per-rank PyTorch function."""

    def __init__(self, path):
        self.path = Path(path)
        self.name = self.path.stem
        self.ranks, self.inputs, self.out_shard = read_interface(path)
        m = re.search(r"_(mlp|qkv|attn)_d(\d+)$", self.name)
        self.kind, self.tokens = m.group(1), int(m.group(2))

    def full_shapes(self):
        out = {}
        for n, (shape, d) in self.inputs.items():
            s = list(shape)
            if d is not None:
                s[d] *= self.ranks
            out[n] = tuple(s)
        return out

    def draw(self, seed):
        """The full inputs, the same on every rank (a CUDA generator with a fixed seed)."""
        g = torch.Generator(device="cuda")
        g.manual_seed(seed)
        full = {}
        for n, shape in self.full_shapes().items():
            x = torch.randn(shape, generator=g, device="cuda", dtype=torch.float32)
            if n.startswith("G"):
                x = 1 + 0.1 * x  # a norm's gain
            elif n.startswith("W"):
                x = x / math.sqrt(shape[-2])  # N(0, 1/fan_in)
            full[n] = x.half()
        return full

    def reference(self, full):
        """The unsharded program in float64."""
        f = {n: t.double() for n, t in full.items()}
        if self.kind == "mlp":
            x = f["X"]
            y = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * f["G"]
            h = F.silu(y @ f["W1"]) * (y @ f["W3"])
            return h @ f["W2"] + x
        if self.kind == "qkv":
            x = f["X"]
            y = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * f["G"]
            return y @ f["Wqkv"]
        q, k, v, wo, r = f["Q"], f["K"], f["V"], f["Wo"], f["R"]
        s = (q @ k.transpose(-1, -2)) * 0.08838834764831843
        o = torch.softmax(s, dim=-1) @ v  # [KVH, G*T, D]
        t = self.tokens
        out = sum((o[:, g * t:(g + 1) * t, :] @ wo[:, g * 128:(g + 1) * 128, :]).sum(0)
                  for g in range(4))
        return (out + r).unsqueeze(0)

    def expected(self, ref, rank):
        return shard_of(ref, self.out_shard, rank, self.ranks)

    def torch_fn(self):
        """What a PyTorch user writes for one rank (fp16, torch.distributed.all_reduce)."""
        if self.kind == "mlp":
            def mlp(X, G, W1, W3, W2):
                y = rms(X) * G
                p = (F.silu(y @ W1) * (y @ W3)) @ W2
                dist.all_reduce(p)
                return p + X
            return mlp, ["X", "G", "W1", "W3", "W2"]
        if self.kind == "qkv":
            def qkv(X, G, Wqkv):
                return (rms(X) * G) @ Wqkv
            return qkv, ["X", "G", "Wqkv"]
        t = self.tokens

        def attn(Q, K, V, Wo, R):
            s = (Q @ K.transpose(-1, -2)) * 0.08838834764831843
            o = torch.softmax(s.float(), dim=-1).to(V.dtype) @ V  # [KVH, G*T, D]
            kvh = o.shape[0]
            # rows (kvh, g, d) of the rank's out-projection, one GEMM: [T, KVH*G*D] x [., 4096]
            o = o.view(kvh, 4, t, 128).permute(2, 0, 1, 3).reshape(t, kvh * 512)
            y = o @ Wo.view(kvh * 512, Wo.shape[-1])
            dist.all_reduce(y)
            return (y + R).unsqueeze(0)
        return attn, ["Q", "K", "V", "Wo", "R"]


# ---- strata libraries ----------------------------------------------------------------------


class TPLibrary(timing.StrataLibrary):
    """A strata library of one rank; its all_reduce ops use `comm` (or a communicator made
    here from an id that rank 0 draws and broadcasts)."""

    def __init__(self, path, comm=None):
        super().__init__(path)
        L = self.lib
        L.strata_num_inputs.restype = ctypes.c_int
        L.strata_num_outputs.restype = ctypes.c_int
        for side in ("input", "output"):
            getattr(L, f"strata_{side}_name").restype = ctypes.c_char_p
            getattr(L, f"strata_{side}_name").argtypes = [ctypes.c_int]
            getattr(L, f"strata_{side}_rank").argtypes = [ctypes.c_int]
            getattr(L, f"strata_{side}_dim").restype = ctypes.c_longlong
            getattr(L, f"strata_{side}_dim").argtypes = [ctypes.c_int, ctypes.c_int]
        self.input_names = [L.strata_input_name(i).decode() for i in range(L.strata_num_inputs())]
        self.output_shapes = [
            tuple(L.strata_output_dim(i, d) for d in range(L.strata_output_rank(i)))
            for i in range(L.strata_num_outputs())]
        self.nccl = hasattr(L, "strata_nccl_init")
        self.comm = None
        if self.nccl:
            L.strata_nccl_comm.restype = ctypes.c_void_p
            L.strata_nccl_set_comm.argtypes = [ctypes.c_void_p]
            if comm:
                rc = L.strata_nccl_set_comm(comm)
            else:
                uid = ctypes.create_string_buffer(NCCL_ID_BYTES)
                if dist.get_rank() == 0:
                    rc = L.strata_nccl_unique_id(uid)
                    if rc != 0:
                        raise RuntimeError(f"strata_nccl_unique_id returned {rc}")
                t = torch.frombuffer(bytearray(uid.raw), dtype=torch.uint8).cuda()
                dist.broadcast(t, 0)
                uid = ctypes.create_string_buffer(bytes(t.cpu().tolist()), NCCL_ID_BYTES)
                L.strata_nccl_init.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
                rc = L.strata_nccl_init(uid, dist.get_world_size(), dist.get_rank())
            if rc != 0:
                raise RuntimeError(f"{path}: NCCL communicator setup returned {rc}")
            self.comm = L.strata_nccl_comm()


# ---- timing --------------------------------------------------------------------------------


def time_agreed(launch, sets):
    """timing.time_launches with the decisions agreed between the ranks: eager warm-up of every
    set, capture into one CUDA graph, replays timed by events. A capture that fails on any rank
    makes every rank time eager launches instead (the method is recorded)."""
    passes = timing.passes_for(sets)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for i in range(sets):
            launch(i)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph, err = torch.cuda.CUDAGraph(), None
    try:
        with torch.cuda.graph(graph):
            for _ in range(passes):
                for i in range(sets):
                    launch(i)
    except Exception as e:  # noqa: BLE001 - reported, and the ranks fall back together
        err = f"{type(e).__name__}: {e}"[:300]
        graph = None
    torch.cuda.synchronize()
    captured = agreed(graph is not None)
    launches = sets * passes
    if captured:
        for _ in range(5):
            graph.replay()
        replay = graph.replay
    else:
        def replay():
            for _ in range(passes):
                for i in range(sets):
                    launch(i)
    dist.barrier()
    torch.cuda.synchronize()
    events = [torch.cuda.Event(enable_timing=True) for _ in range(RUNS + 1)]
    events[0].record()
    for r in range(RUNS):
        replay()
        events[r + 1].record()
    torch.cuda.synchronize()
    samples = [1000.0 * events[r].elapsed_time(events[r + 1]) / launches for r in range(RUNS)]
    stats = timing.summarize(samples)
    stats.update({"sets": sets, "passes": passes,
                  "method": "cuda_graph" if captured else "eager (capture failed)"})
    if err:
        stats["capture_error"] = err
    stats["median_us_all_ranks"] = worst(stats["median_us"])
    return stats


def run_system(label, block, make, inputs_sets, expect, sets):
    """Checks then times one system on every rank; returns its report entry."""
    entry, fn = {}, None
    try:
        fn = make()
        got = fn(0)
        torch.cuda.synchronize()
        err = timing.relative_l2_error(got, expect)
    except Exception as e:  # noqa: BLE001
        err = float("inf")
        entry["error"] = f"{type(e).__name__}: {e}"[:600]
        if dist.get_rank() == 0:
            traceback.print_exc()
    err = worst(err if math.isfinite(err) else 1e300)
    entry["rel_l2_error"] = err if err < 1e300 else "inf"
    entry["ok"] = agreed(err <= TOLERANCE)
    if entry["ok"]:
        entry.update(time_agreed(fn, sets))
        log(f"   {block.name} {label}: {entry['median_us_all_ranks']:.2f} us "
            f"(error {err:.2e}, {entry['method']})")
    else:
        log(f"   {block.name} {label}: not timed (error {entry['rel_l2_error']}"
            f"{'; ' + entry['error'] if 'error' in entry else ''})")
    return entry


def bench_block(block, args, deadline, shared):
    rank, R = dist.get_rank(), dist.get_world_size()
    if R != block.ranks:
        return {"skipped": f"the program has {block.ranks} ranks, the run {R}"}
    full = block.draw(args.seed)
    ref = block.reference(full)
    expect = block.expected(ref, rank)
    local = {n: shard_of(full[n], d, rank, R) for n, (_, d) in block.inputs.items()}
    for n, (shape, _) in block.inputs.items():
        assert tuple(local[n].shape) == shape, (n, local[n].shape, shape)
    del full, ref
    per_set = sum(t.numel() * t.element_size() for t in local.values())
    sets = timing.sets_for(per_set)
    sets_inputs = [local] + [{n: t.clone() for n, t in local.items()} for _ in range(sets - 1)]
    result = {"program": f"bench/tp/{block.name}.strata", "ranks": R, "tokens": block.tokens,
              "bytes_per_rank": per_set, "sets": sets, "systems": {}, "strata_candidates": []}
    fn, order = block.torch_fn()
    outs = [None] * sets

    def torch_system(f):
        def launch(i):
            outs[i] = f(*[sets_inputs[i][n] for n in order])
            return outs[i]
        return launch

    result["systems"]["eager"] = run_system("eager", block, lambda: torch_system(fn),
                                            sets_inputs, expect, sets)
    compile_ok = agreed("compile" in args.modes and time.time() < deadline - args.compile_reserve_s)
    if compile_ok:
        torch._dynamo.reset()
        start = time.time()
        result["systems"]["compile"] = run_system(
            "torch.compile", block, lambda: torch_system(torch.compile(fn, dynamic=False)),
            sets_inputs, expect, sets)
        result["systems"]["compile"]["wall_s"] = round(time.time() - start, 1)
    else:
        result["systems"]["compile"] = {"ok": False, "skipped": "not requested or no time left"}

    libs = sorted(Path(args.lib_dir).glob(f"{block.name}.r*.so"),
                  key=lambda p: int(re.search(r"\.r(\d+)\.so$", p.name).group(1)))
    if not libs:
        log(f"   {block.name}: no compiled strata candidate in {args.lib_dir}")
    for path in libs:
        if not agreed(time.time() < deadline):
            result["strata_candidates"].append({"library": path.name, "skipped": "time budget"})
            continue

        def make(path=path):
            lib = TPLibrary(str(path), shared.get("comm"))
            if lib.comm and not shared.get("comm"):
                shared["comm"] = lib.comm
            shared.setdefault("libs", []).append(lib)  # keep every library loaded
            missing = [n for n in lib.input_names if n not in local]
            if missing:
                raise RuntimeError(f"inputs {missing} of the library are not in the program")
            placement = lib.placement(lib.output_shapes)
            outputs = [timing.placed_outputs(lib.output_shapes, placement, fill=float("nan"))
                       for _ in range(sets)]
            binders = [lib.binder([sets_inputs[i][n] for n in lib.input_names], outputs[i])
                       for i in range(sets)]

            def launch(i):
                binders[i]()
                return outputs[i][0]
            return launch

        entry = run_system(f"strata {path.name}", block, make, sets_inputs, expect, sets)
        entry["library"] = path.name
        result["strata_candidates"].append(entry)
    timed = [c for c in result["strata_candidates"] if c.get("ok") and "median_us_all_ranks" in c]
    if timed:
        best = min(timed, key=lambda c: c["median_us_all_ranks"])
        result["systems"]["strata"] = dict(best)
    else:
        result["systems"]["strata"] = {"ok": False, "error": "no correct strata candidate"}
    torch_best = [e["median_us_all_ranks"] for k, e in result["systems"].items()
                  if k != "strata" and e.get("ok") and "median_us_all_ranks" in e]
    if timed and torch_best:
        result["speedup_vs_best_pytorch"] = min(torch_best) / best["median_us_all_ranks"]
    del sets_inputs, outs
    torch.cuda.empty_cache()
    return result


# ---- report ----------------------------------------------------------------------------------


def write_report(doc, out):
    stem = out / doc["stem"]
    (stem.with_suffix(".json")).write_text(json.dumps(doc, indent=2) + "\n")
    lines = [f"# Tensor-parallel blocks on {doc['world_size']}× {doc['gpu']} ({doc['date']})", "",
             "strata (fastest correct candidate, its all_reduce an ncclAllReduce) against PyTorch "
             "eager and torch.compile with torch.distributed.all_reduce (NCCL), in one "
             "`torchrun` run. Per-call median µs (bench/timing.py: CUDA graph over rotated "
             "input sets, 100 replays), the larger of the ranks' medians; errors are relative "
             "L2 against the unsharded float64 reference, the worst rank's.", "",
             f"torch {doc['torch']}, CUDA {doc['cuda']}, NCCL {doc['nccl']}; command: "
             f"`{doc['command']}`", "",
             "| program | tokens | eager µs | compile µs | strata µs | strata / best PyTorch | "
             "strata error | strata candidate |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]

    def us(e):
        return f"{e['median_us_all_ranks']:.2f}" if e.get("ok") and "median_us_all_ranks" in e \
            else ("—" if e.get("skipped") else "failed")

    for name, r in doc["programs"].items():
        if "systems" not in r:
            lines.append(f"| {name} | | | | | {r.get('skipped', r.get('error', ''))[:80]} | | |")
            continue
        s = r["systems"]
        sp = r.get("speedup_vs_best_pytorch")
        st = s.get("strata", {})
        lines.append(f"| {name} | {r['tokens']} | {us(s['eager'])} | {us(s['compile'])} | "
                     f"{us(st)} | {f'{sp:.2f}×' if sp else '—'} | "
                     f"{fmt_error(st)} | "
                     f"{st.get('library', '')} |")
    lines += ["", "Timing method per system and every candidate: the JSON file of the same name."]
    (stem.with_suffix(".md")).write_text("\n".join(lines) + "\n")


def nccl_version():
    try:
        v = torch.cuda.nccl.version()
        return ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    except Exception:  # noqa: BLE001
        return "unknown"


def fmt_error(e):
    v = e.get("rel_l2_error")
    return v if isinstance(v, str) else ("—" if v is None else f"{v:.1e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib-dir", required=True, help="compiled <program>.r<K>.so files")
    ap.add_argument("--out", required=True)
    ap.add_argument("--programs", default="", help="comma-separated names (default: bench/tp/)")
    ap.add_argument("--modes", default="eager,compile")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--budget-s", type=float, default=360,
                    help="no new strata candidate or program starts after this many seconds")
    ap.add_argument("--compile-reserve-s", type=float, default=150,
                    help="torch.compile is skipped when less than this is left of the budget")
    args = ap.parse_args()
    t0 = time.time()
    deadline = t0 + args.budget_s
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    try:  # device_id binds the communicator to this GPU (newer PyTorch)
        dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=180),
                                device_id=torch.device("cuda", local_rank))
    except TypeError:
        dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=180))
    R = dist.get_world_size()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    # The MLP first, then the attention block's parts: torch.compile gets the time first.
    order = {"mlp": 0, "attn": 1, "qkv": 2}
    names = [n for n in args.programs.split(",") if n] or sorted(
        (p.stem for p in (HERE / "tp").glob("*.strata")),
        key=lambda n: (order.get(re.search(r"_(mlp|qkv|attn)_", n).group(1), 3)
                       if re.search(r"_(mlp|qkv|attn)_", n) else 3, n))
    gpu = torch.cuda.get_device_name()
    slug = re.sub(r"[^a-z0-9]+", "", gpu.lower().replace("nvidia", "").split()[0]) or "gpu"
    for word in ("h100", "h200", "a100"):
        if word in gpu.lower():
            slug = word
    date = datetime.date.today().isoformat()
    doc = {"kind": "tp", "stem": f"{slug}x{R}-{date}-tp", "gpu": gpu, "world_size": R,
           "date": date, "torch": torch.__version__, "cuda": torch.version.cuda,
           "nccl": nccl_version(),
           "command": f"torchrun --standalone --nproc_per_node={R} bench/tp_bench.py "
                      + " ".join(sys.argv[1:]),
           "tolerance": TOLERANCE, "programs": {}}
    shared = {}
    log(f"{R} ranks on {gpu}; programs: {', '.join(names)}")
    for name in names:
        if not agreed(time.time() < deadline):
            doc["programs"][name] = {"skipped": "time budget"}
            continue
        log(f"== {name}")
        try:
            block = Block(HERE / "tp" / f"{name}.strata")
            doc["programs"][name] = bench_block(block, args, deadline, shared)
        except Exception as e:  # noqa: BLE001 - one program's failure is reported, not fatal
            doc["programs"][name] = {"error": f"{type(e).__name__}: {e}"[:800]}
            if dist.get_rank() == 0:
                traceback.print_exc()
        if dist.get_rank() == 0:
            doc["elapsed_s"] = round(time.time() - t0, 1)
            write_report(doc, out)
    dist.barrier()
    ok = all("systems" in r and r["systems"].get("strata", {}).get("ok")
             for r in doc["programs"].values())
    log(f"done in {time.time() - t0:.0f} s; report {out / doc['stem']}.md")
    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
