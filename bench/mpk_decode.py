#!/usr/bin/env python3
"""Decode with the persistent megakernel against PyTorch (docs/megakernel.md, "GPU benchmark").

For each model (a strata-mpk-model file), batch and KV length:
  1. `strata mpk compile` turns the model into a task file (the task graph of one step);
  2. random weights at the real shapes (shared by every implementation), caches filled with
     random entries for the first KV-length positions;
  3. correctness: the megakernel's logits of one step against a plain PyTorch implementation of
     the same model (eager), and 32 greedy steps' tokens;
  4. latency per token at that KV length (CUDA events, the same position replayed): the
     megakernel (static per-worker lists and the global queue), strata's task kernels launched
     one kernel per op in a CUDA graph, PyTorch eager, torch.compile(mode="reduce-overhead");
  5. the bandwidth floor (weights + KV read once per token) and the fraction of it achieved;
  6. for the configurations --generated selects, the megakernel with strata's generated task
     entries for the matmul-family ops (docs/megakernel.md, "Generated tasks"): in the
     background, per (model, batch), `strata mpk compile --generated all` (searched, the
     μGraphs saved) and an nvcc build of the library with that header; then per configuration
     the task file from the saved μGraphs, the same checks, and its latency (static, queue).
Writes mpk-<gpu>-<date>.md and .json to --out.

Needs torch with CUDA and the megakernel library (nvcc -shared runtime/mpk/megakernel.cu),
see scripts/gpu-mpk.sh.
"""
import argparse
import concurrent.futures
import ctypes
import datetime
import hashlib
import json
import math
import os
import signal
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

from mpk_abi import Params
import mpk_trace

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def log(*a):
    print(*a, flush=True)


# ---- model weights and the PyTorch reference -------------------------------------------------

def make_weights(m, buffers, seed, device="cuda"):
    """Random weights by buffer name (nn.Linear layout [out, in]); gains near 1."""
    g = torch.Generator(device=device).manual_seed(seed)
    w = {}
    for b in buffers:
        if b["kind"] != "weight":
            continue
        shape, name = b["shape"], b["name"]
        if name == "rope_inv_freq":
            d = m["head_dim"]
            w[name] = 1.0 / (m["rope_theta"] ** (torch.arange(0, d, 2, device=device,
                                                             dtype=torch.float32) / d))
            continue
        t = torch.empty(shape, device=device, dtype=torch.float16)
        if len(shape) == 1:
            t.uniform_(0.9, 1.1, generator=g)
        else:
            bound = math.sqrt(3.0) * (1.0 if name == "embed" else 1.0 / math.sqrt(shape[-1]))
            t.uniform_(-bound, bound, generator=g)
        w[name] = t
    return w


def rms(x, gain, eps):
    xf = x.float()
    r = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (xf * r * gain.float()).half()


def rope(x, cos, sin):
    """x [..., D] f16; rotates the pairs (i, i + D/2) in fp32, rounds to f16."""
    xf = x.float()
    h = xf.shape[-1] // 2
    x1, x2 = xf[..., :h], xf[..., h:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).half()


class Reference(torch.nn.Module):
    """The plain PyTorch model: one decode step over its own caches [L, B, Hkv, max_kv, D].

    masked=False: attention over cache[:pos+1] (pos a Python int; eager).
    masked=True: attention over the whole cache with a mask, pos a tensor (no recompilation per
    position; the torch.compile variant, as in gpt-fast)."""

    def __init__(self, m, w, kc, vc, masked):
        super().__init__()
        self.m, self.masked = m, masked
        for k, v in w.items():
            self.register_buffer(k.replace(".", "_"), v, persistent=False)
        self.register_buffer("kc", kc, persistent=False)
        self.register_buffer("vc", vc, persistent=False)

    def w(self, name):
        return getattr(self, name.replace(".", "_"))

    def forward(self, tokens, pos):
        m = self.m
        B, D, Hq, Hkv = tokens.shape[0], m["head_dim"], m["heads"], m["kv_heads"]
        G, QW, KVW, eps = Hq // Hkv, Hq * D, Hkv * D, m["eps"]
        x = F.embedding(tokens, self.w("embed"))
        if self.masked:
            ang = pos.float() * self.w("rope_inv_freq")
            mask = (torch.arange(self.kc.shape[3], device=tokens.device) <= pos).view(1, 1, 1, -1)
        else:
            ang = float(pos) * self.w("rope_inv_freq")
        cos, sin = torch.cos(ang), torch.sin(ang)
        for l in range(m["layers"]):
            p = f"layers.{l}."
            qkv = rms(x, self.w(p + "attn_norm"), eps) @ self.w(p + "wqkv").t()
            q = qkv[:, :QW].view(B, Hq, D)
            k = qkv[:, QW:QW + KVW].view(B, Hkv, D)
            v = qkv[:, QW + KVW:].view(B, Hkv, D)
            if m["qk_norm"]:
                q = rms(q, self.w(p + "q_norm"), eps)
                k = rms(k, self.w(p + "k_norm"), eps)
            q, k = rope(q, cos, sin), rope(k, cos, sin)
            if self.masked:
                self.kc[l].index_copy_(2, pos.view(1), k.unsqueeze(2))
                self.vc[l].index_copy_(2, pos.view(1), v.unsqueeze(2))
                o = F.scaled_dot_product_attention(q.view(B, Hkv, G, D), self.kc[l], self.vc[l],
                                                   attn_mask=mask)
            else:
                self.kc[l, :, :, pos] = k
                self.vc[l, :, :, pos] = v
                o = F.scaled_dot_product_attention(q.view(B, Hkv, G, D),
                                                   self.kc[l, :, :, :pos + 1],
                                                   self.vc[l, :, :, :pos + 1])
            x = x + o.reshape(B, QW) @ self.w(p + "wo").t()
            n = rms(x, self.w(p + "mlp_norm"), eps)
            h = F.silu(n @ self.w(p + "w_gate").t()) * (n @ self.w(p + "w_up").t())
            x = x + h @ self.w(p + "w_down").t()
        return (rms(x, self.w("final_norm"), eps) @ self.w("lm_head").t()).float()


# ---- the megakernel ------------------------------------------------------------------------------

class Megakernel:
    """A compiled task file on the device: tables, counters, workspace, caches."""

    def __init__(self, lib, tasks, weights, kc, vc, workers):
        m = tasks["model"]
        self.lib, self.tasks, self.m, self.workers = lib, tasks, m, workers
        G = m["heads"] // m["kv_heads"]
        if m["batch"] > 8 or G > 16 or m["head_dim"] % 8 or m["head_dim"] > 256:
            raise ValueError("the runtime takes batch <= 8, <= 16 q heads per kv head and a "
                             "head dim that is a multiple of 8 up to 256")
        # The op and task records' layout (task_abi.h); a library older than the check says
        # nothing and is taken as it is.
        if hasattr(lib, "mpk_abi_version") and tasks.get("abi_version") != lib.mpk_abi_version():
            raise ValueError(
                f"the task file has ABI version {tasks.get('abi_version')} but the library "
                f"{getattr(lib, '_name', '')} was built with {lib.mpk_abi_version()} "
                "(mpk_abi_version()); compile the task file with the strata of the same source")
        # A task file's MPK_GENERATED ops need the library built with the header of the same
        # compilation; a library without generated entries says 0.
        want_gen = len(tasks.get("generated", []))
        have_gen = (lib.mpk_generated_functions() if hasattr(lib, "mpk_generated_functions")
                    else 0)
        if want_gen != have_gen:
            raise ValueError(
                f"the task file has {want_gen} generated task entries but the library "
                f"{getattr(lib, '_name', '')} was built with {have_gen} "
                "(mpk_generated_functions()); build runtime/mpk/megakernel.cu with "
                "-DSTRATA_MPK_GENERATED_HEADER= the header of the same `strata mpk compile`")
        dev = kc.device
        i32 = lambda v: torch.tensor(v if len(v) else [0], dtype=torch.int32, device=dev)
        self.ops = torch.tensor(tasks["ops"], dtype=torch.int64, device=dev)
        self.task_tab = i32(tasks["tasks"])
        self.waits, self.triggers = i32(tasks["waits"]), i32(tasks["triggers"])
        self.event_counts = i32(tasks["events"])
        self.counters = torch.zeros(max(1, len(tasks["events"])), dtype=torch.int32, device=dev)
        offs, flat = [0], []
        for lst in tasks["worker_lists"]:
            flat += lst
            offs.append(len(flat))
        self.worker_offsets, self.worker_tasks = i32(offs), i32(flat)
        self.order = i32(tasks["order"])
        self.queue = torch.zeros(1, dtype=torch.int32, device=dev)
        bufs = []
        self.keep = []
        for b in tasks["buffers"]:
            t = weights[b["name"]] if b["kind"] == "weight" else {"k_cache": kc, "v_cache": vc}[b["name"]]
            assert list(t.shape) == b["shape"], (b["name"], t.shape, b["shape"])
            self.keep.append(t)
            bufs.append(t.data_ptr())
        self.buffers = torch.tensor(bufs, dtype=torch.int64, device=dev)
        self.workspace = torch.zeros(tasks["workspace_bytes"] + 256, dtype=torch.uint8, device=dev)
        lg = next(t for t in tasks["tensors"] if t["name"] == "logits")
        self.logits = self.workspace[lg["offset"]:lg["offset"] + lg["bytes"]].view(
            torch.float32).view(m["batch"], m["vocab"])
        max_k = max(m["hidden"], m["intermediate"], m["heads"] * m["head_dim"])
        self.smem = lib.mpk_smem_bytes(m["batch"], max_k, m["heads"], m["kv_heads"], m["head_dim"])
        if self.smem > 227 * 1024:
            raise ValueError(f"the step needs {self.smem} bytes of shared memory per block")
        err = lib.mpk_configure(self.smem)
        if err:
            raise RuntimeError(f"mpk_configure: CUDA error {err}")
        self.step = 0
        self.kc, self.vc = kc, vc
        # Task ranges per op (the compiler numbers the tasks of an op contiguously).
        counts = [0] * len(tasks["ops"])
        t, nf = tasks["tasks"], tasks["task_fields"]
        for i in range(0, len(t), nf):
            counts[t[i]] += 1
        self.op_ranges, first = [], 0
        for c in counts:
            self.op_ranges.append((first, c))
            first += c

    def reset(self):
        self.counters.zero_()
        self.queue.zero_()
        self.step = 0

    def params(self, tokens_in, tokens_out, pos, mode, prefetch=0, trace=None):
        m = self.m
        p = Params()
        p.trace = trace.data_ptr() if trace is not None else None
        for name, t in (("ops", self.ops), ("tasks", self.task_tab), ("waits", self.waits),
                        ("triggers", self.triggers), ("event_counts", self.event_counts),
                        ("event_counters", self.counters), ("worker_offsets", self.worker_offsets),
                        ("worker_tasks", self.worker_tasks), ("order", self.order),
                        ("queue_counter", self.queue), ("buffers", self.buffers),
                        ("workspace", self.workspace), ("tokens_in", tokens_in),
                        ("tokens_out", tokens_out)):
            setattr(p, name, t.data_ptr())
        p.num_tasks = len(self.tasks["tasks"]) // self.tasks["task_fields"]
        p.pos, p.step, p.mode, p.prefetch = pos, self.step, mode, prefetch
        for k in ("batch", "hidden", "heads", "kv_heads", "head_dim", "intermediate", "vocab",
                  "max_kv", "layers"):
            setattr(p, k, m[k])
        p.eps = m["eps"]
        return p

    def launch(self, tokens_in, tokens_out, pos, mode, prefetch=0):
        """One step; the parameter block is built once per argument set, only `step` changes."""
        self.step += 1
        key = (tokens_in.data_ptr(), tokens_out.data_ptr(), pos, mode, prefetch)
        if getattr(self, "_key", None) != key:
            self._key, self._p = key, self.params(tokens_in, tokens_out, pos, mode, prefetch)
        self._p.step = self.step
        err = self.lib.mpk_launch(ctypes.byref(self._p), self.workers, self.smem,
                                  ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
        if err:
            raise RuntimeError(f"mpk_launch: CUDA error {err}")

    def trace_step(self, tokens_in, tokens_out, pos, mode):
        """One step with the trace buffer set; returns mpk_trace.summarize of it."""
        n = len(self.tasks["tasks"]) // self.tasks["task_fields"]
        buf = torch.zeros(4 * n, dtype=torch.int64, device=self.kc.device)
        self.step += 1
        p = self.params(tokens_in, tokens_out, pos, mode, 0, buf)
        p.step = self.step
        err = self.lib.mpk_launch(ctypes.byref(p), self.workers, self.smem,
                                  ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
        if err:
            raise RuntimeError(f"mpk_launch: CUDA error {err}")
        torch.cuda.synchronize()
        return mpk_trace.summarize(self.tasks, buf.tolist(), self.workers)

    def launch_per_op(self, tokens_in, tokens_out, pos):
        p = self.params(tokens_in, tokens_out, pos, 0)
        s = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        for first, n in self.op_ranges:
            err = self.lib.mpk_launch_op(ctypes.byref(p), first, n, self.smem, s)
            if err:
                raise RuntimeError(f"mpk_launch_op: CUDA error {err}")


# ---- timing ---------------------------------------------------------------------------------------

def time_ms(fn, iters, reps=5, warmup=5):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    best = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(iters):
            fn()
        b.record()
        b.synchronize()
        best.append(a.elapsed_time(b) / iters)
    best.sort()
    return best[len(best) // 2]


def cudagraph_skips():
    """How often inductor has declined to use CUDA graphs in this process (-1: unknown)."""
    try:
        from torch._dynamo.utils import counters
        return int(counters["inductor"].get("cudagraph_skips", 0))
    except Exception:
        return -1


def peak_bandwidth():
    name = torch.cuda.get_device_name()
    peak = None
    if "H200" in name:
        peak = 4.8e12
    elif "H100" in name:
        peak = 2.0e12 if "PCIe" in name else (3.9e12 if "NVL" in name else 3.35e12)
    x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    ms = time_ms(lambda: y.copy_(x), 10, reps=3)
    measured = 2 * x.numel() / (ms * 1e-3)
    del x, y
    return name, peak, measured


# ---- one configuration ------------------------------------------------------------------------

def run_bounded(cmd, timeout, env=None, cwd=None):
    """Runs cmd (its own process group, killed with its children when `timeout` seconds pass);
    returns (returncode, stdout, stderr), returncode None on a timeout."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                         cwd=cwd, start_new_session=True)
    try:
        out, err = p.communicate(timeout=None if timeout == float("inf") else max(1.0, timeout))
        return p.returncode, out, err
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        return None, out, err


def compile_tasks(strata, model_file, batch, max_kv, workers, out_dir, extra=(), timeout=600,
                  env=None, keep=False):
    """`strata mpk compile` of one configuration; `extra`: more flags (--generated, --ugraph,
    --cuda ...). Returns the task document and the tool's stderr."""
    path = os.path.join(out_dir, f"tasks-{os.path.basename(model_file)[:-5]}-b{batch}-kv{max_kv}"
                                 f"{'-gen' if extra else ''}.json")
    r, _, err = run_bounded([strata, "mpk", "compile", model_file, "--batch", str(batch),
                             "--max-kv", str(max_kv), "--workers", str(workers), "-o", path,
                             *extra], timeout, env)
    if r is None:
        raise TimeoutError(f"strata mpk compile did not finish in {timeout:.0f} s")
    if r != 0:
        raise RuntimeError(f"strata mpk compile failed ({r}): {err.strip()[-600:]}")
    with open(path) as f:
        doc = json.load(f)
    if not keep:
        os.remove(path)
    return doc, err.strip().splitlines()[-1] if err.strip() else ""


def make_state(tasks, batch, kv):
    """Weights, the caches filled at the first kv positions, and the first tokens: a function
    of the shapes and fixed seeds only, so the generated-task pass sees the same data."""
    m = tasks["model"]
    L, Hkv, D, V = m["layers"], m["kv_heads"], m["head_dim"], m["vocab"]
    w = make_weights(m, tasks["buffers"], seed=1234)
    g = torch.Generator(device="cuda").manual_seed(99)
    kc0 = torch.zeros(L, batch, Hkv, m["max_kv"], D, dtype=torch.float16, device="cuda")
    kc0[:, :, :, :kv].normal_(generator=g)
    vc0 = torch.zeros_like(kc0)
    vc0[:, :, :, :kv].normal_(generator=g)
    tokens = torch.randint(0, V, (batch,), generator=g, device="cuda", dtype=torch.int64)
    return w, kc0, vc0, tokens


def reference_answers(m, w, kc0, vc0, tokens, kv, steps):
    """The plain PyTorch model (eager, exact attention): the logits of one step at position kv,
    and `steps` greedy tokens from there with the top-two logit gap of each. Its f16 matmuls
    accumulate in f32 throughout (cuBLAS's reduced-precision reductions off)."""
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    ref = Reference(m, w, kc0.clone(), vc0.clone(), masked=False)
    with torch.no_grad():
        want = ref(tokens, kv)
        ref.kc.copy_(kc0)
        ref.vc.copy_(vc0)
        ref_tok, gaps = [tokens], []
        for s in range(steps):
            lg = ref(ref_tok[-1], kv + s)
            top = lg.topk(2, dim=-1).values
            gaps.append((top[:, 0] - top[:, 1]).tolist())
            ref_tok.append(lg.argmax(-1))
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = True
    return ref, want, torch.stack(ref_tok[1:]).cpu(), gaps


def check_megakernel(mk, hist, want, ref_tok, gaps, kc0, vc0, kv, steps):
    """One step in both scheduling modes against the reference logits, then `steps` greedy
    steps (static lists) from the caches as filled, tokens against the reference's."""
    check = {}
    for mode, name in ((0, "static"), (1, "queue")):
        mk.reset()
        mk.launch(hist[0], hist[1], kv, mode)
        torch.cuda.synchronize()
        got = mk.logits.clone()
        err = (got - want).abs()
        tol = 2e-2 + 2e-2 * want.abs()
        check[name] = {"max_abs_err": err.max().item(),
                       "max_ref": want.abs().max().item(),
                       "within_tol": bool((err <= tol).all().item()),
                       "argmax_equal": bool((got.argmax(-1) == want.argmax(-1)).all().item())}
    mk.kc.copy_(kc0)
    mk.vc.copy_(vc0)
    mk.reset()
    for s in range(steps):
        mk.launch(hist[s], hist[s + 1], kv + s, 0)
    torch.cuda.synchronize()
    mk_tok = hist[1:].long().cpu()
    greedy = {"steps": steps, "equal": bool((mk_tok == ref_tok).all().item())}
    if not greedy["equal"]:
        s, b = (mk_tok != ref_tok).nonzero()[0].tolist()
        greedy["first_difference"] = {"step": s, "row": b, "megakernel": int(mk_tok[s, b]),
                                      "reference": int(ref_tok[s, b]),
                                      "reference_top2_gap": gaps[s][b],
                                      "near_tie": gaps[s][b] < 0.05}
    return check, greedy


def passed(r):
    """Whether a record (or its generated part) passed its checks."""
    return ("error" not in r and r["check"]["static"]["within_tol"] and
            r["check"]["queue"]["within_tol"] and
            (r["greedy"]["equal"] or r["greedy"]["first_difference"]["near_tie"]))


def run_config(lib, strata, model_file, batch, kv, args, deadline):
    steps = args.steps
    workers = torch.cuda.get_device_properties(0).multi_processor_count
    max_kv = kv + steps + 8
    t0 = time.time()
    extra = ["--attn-chunks", str(args.attn_chunks)] if args.attn_chunks else []
    tasks, summary = compile_tasks(strata, model_file, batch, max_kv, workers, args.out, extra)
    m = tasks["model"]
    log(f"  {summary} ({time.time() - t0:.1f} s)")
    L, Hkv, D = m["layers"], m["kv_heads"], m["head_dim"]
    w, kc0, vc0, tokens = make_state(tasks, batch, kv)
    rec = {"model": m["name"], "batch": batch, "kv": kv, "tasks": tasks["summary"]}

    mk = Megakernel(lib, tasks, w, kc0.clone(), vc0.clone(), workers)
    hist = torch.zeros(steps + 1, batch, dtype=torch.int32, device="cuda")
    hist[0] = tokens.int()
    ref, want, ref_tok, gaps = reference_answers(m, w, kc0, vc0, tokens, kv, steps)
    rec["check"], rec["greedy"] = check_megakernel(mk, hist, want, ref_tok, gaps, kc0, vc0, kv,
                                                   steps)
    log(f"  check: {rec['check']}  greedy: {rec['greedy']}")

    # Timing at position kv (the same position replayed; the caches hold kv entries before it).
    times = {}
    tin, tout = hist[0].clone(), hist[1].clone()
    # The L2 prefetch of a task's weights before its wait is off by default (measured slower once
    # attention chunks stream the cache well, docs/megakernel.md); timed as a variant.
    for mode, pf, name in ((0, 0, "megakernel_static"), (1, 0, "megakernel_queue"),
                           (0, args.prefetch_bytes, "megakernel_static_prefetch")):
        mk.reset()
        times[name] = time_ms(lambda: mk.launch(tin, tout, kv, mode, pf), args.iters)
    rec["trace"] = mk.trace_step(tin, tout, kv, 0)
    graph = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        mk.launch_per_op(tin, tout, kv)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        mk.launch_per_op(tin, tout, kv)
    times["strata_per_op_graph"] = time_ms(graph.replay, args.iters)
    del graph
    with torch.no_grad():
        times["torch_eager"] = time_ms(lambda: ref(tokens, kv), max(5, args.iters // 5))
    if args.compile and time.time() < deadline:
        try:
            t1 = time.time()
            torch._dynamo.reset()
            skips0 = cudagraph_skips()
            cm = Reference(m, w, kc0.clone(), vc0.clone(), masked=True)
            fn = torch.compile(cm, mode="reduce-overhead", fullgraph=True)
            pos_t = torch.tensor(kv, device="cuda")
            with torch.no_grad():
                for _ in range(3):
                    out = fn(tokens, pos_t)
                lg = out.clone()
                times["torch_compile_reduce_overhead"] = time_ms(lambda: fn(tokens, pos_t),
                                                                 args.iters)
            rec["torch_compile_seconds"] = round(time.time() - t1, 1)
            # Did inductor fall back from CUDA graphs (e.g. on the cache mutation)?
            rec["torch_compile_cudagraph_skips"] = cudagraph_skips() - skips0
            rec["torch_compile_max_abs_err_vs_eager"] = (lg - want).abs().max().item()
            del cm, fn
        except Exception as e:  # reported, not hidden
            rec["torch_compile_error"] = f"{type(e).__name__}: {e}"[:400]
    elif args.compile:
        rec["torch_compile_error"] = "skipped: the run's time budget was spent"

    # The bandwidth floor: every weight once (the embedding: the batch's rows), the KV read once.
    wbytes = sum(t.numel() * t.element_size() for n, t in w.items() if n != "embed")
    wbytes += batch * m["hidden"] * 2
    kvbytes = 2 * L * batch * Hkv * (kv + 1) * D * 2
    rec["bytes_per_token"] = wbytes + kvbytes
    rec["times_ms"] = times
    del mk, ref, w, kc0, vc0
    torch.cuda.empty_cache()
    return rec


# ---- the megakernel with generated tasks ---------------------------------------------------------

GENERATED_OPS = ("norm_qkv", "o_proj_residual", "norm_gate_up_silu", "down_residual")
# Seconds one configuration's generated pass takes at most (compile from the saved μGraphs,
# weights, the reference, checks, timing): it is not started with less left.
GENERATED_RUN_SECONDS = 30
NVCC_FLAGS = ["-O3", "-arch=sm_90a", "-std=c++17", "-shared", "-Xcompiler", "-fPIC", "-I",
              "include", "-I", "runtime"]


def parse_generated(spec, configs):
    """The configurations --generated selects: "none", "all", or BATCH:KV pairs (every model)."""
    if spec == "none":
        return []
    if spec == "all":
        return list(configs)
    pairs = set()
    for item in spec.split(","):
        try:
            b, kv = item.split(":")
            pairs.add((int(b), int(kv)))
        except ValueError:
            raise SystemExit(f"--generated {spec}: expected none, all or BATCH:KV,... "
                             f"(e.g. 1:1024,8:1024), got {item!r}")
    return [c for c in configs if (c[1], c[2]) in pairs]


def ugraph_flags(d):
    """--ugraph flags for the μGraphs saved under d/ugraphs (--save-ugraphs)."""
    flags = []
    for op in GENERATED_OPS:
        flags += ["--ugraph", f"{op}={os.path.join(d, 'ugraphs', op + '.json')}"]
    return flags


class GeneratedBuilds:
    """The libraries with generated task entries, prepared in the background per (model, batch)
    (the op programs depend on the model and the batch only): `strata mpk compile --generated
    all` searches the four ops (result cache in the build directory) and saves their μGraphs;
    a compilation from the saved μGraphs writes the header; nvcc builds the megakernel with it
    (one library per distinct header, reused when it exists). Each step is bounded by the
    deadline; what does not finish is reported as skipped."""

    def __init__(self, args, workers, deadline):
        self.args, self.workers, self.deadline = args, workers, deadline
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.generated_jobs))
        self.jobs = {}
        self.env = dict(os.environ, STRATA_CACHE_DIR=os.path.join(args.build_dir, "search-cache"))

    def submit(self, model_file, batch, max_kv):
        key = (model_file, batch)
        if key not in self.jobs:
            self.jobs[key] = self.pool.submit(self._prepare, model_file, batch, max_kv)
        return self.jobs[key]

    def left(self):
        """Seconds left for the next step; none left is a TimeoutError."""
        t = self.deadline - time.time()
        if t <= 0:
            raise TimeoutError("no time left in the run's budget")
        return t

    def _prepare(self, model_file, batch, max_kv):
        a = self.args
        d = os.path.abspath(os.path.join(a.build_dir, "generated",
                                         f"{os.path.basename(model_file)[:-5]}-b{batch}"))
        os.makedirs(d, exist_ok=True)
        t0 = time.time()
        compile_tasks(a.strata, model_file, batch, max_kv, self.workers, d,
                      ["--generated", "all", "--search-seconds", str(a.search_seconds),
                       "--save-ugraphs", os.path.join(d, "ugraphs"),
                       "--cuda", os.path.join(d, "searched.cuh")], self.left(), self.env)
        t1 = time.time()
        header = os.path.join(d, "header.cuh")
        compile_tasks(a.strata, model_file, batch, max_kv, self.workers, d,
                      ugraph_flags(d) + ["--cuda", header], self.left(), self.env)
        with open(header, "rb") as f:
            sha = hashlib.sha256(f.read()).hexdigest()
        lib = os.path.join(os.path.abspath(a.build_dir), "generated", f"libmpk-gen-{sha[:16]}.so")
        t2 = time.time()
        if not os.path.exists(lib):
            r, out, err = run_bounded(
                [a.nvcc, *NVCC_FLAGS, f'-DSTRATA_MPK_GENERATED_HEADER="{header}"', "-o",
                 lib + ".tmp", "runtime/mpk/megakernel.cu"], self.left(), cwd=ROOT)
            if r is None:
                raise TimeoutError(f"nvcc did not finish within the budget ({time.time() - t2:.0f}"
                                   " s)")
            if r != 0:
                raise RuntimeError(f"nvcc with {header} failed ({r}): {(out + err)[-800:]}")
            os.replace(lib + ".tmp", lib)
        return {"dir": d, "header_sha256": sha, "library": lib,
                "search_seconds": round(t1 - t0, 1), "header_seconds": round(t2 - t1, 1),
                "nvcc_seconds": round(time.time() - t2, 1)}

    def shutdown(self):
        self.pool.shutdown(wait=False, cancel_futures=True)


def run_generated(built, libs, model_file, batch, kv, args):
    """The megakernel with generated tasks at one configuration: the task file from the saved
    μGraphs (its header must be the one the library was built with), the checks of run_config
    and the latency of both scheduling modes."""
    steps = args.steps
    workers = torch.cuda.get_device_properties(0).multi_processor_count
    t0 = time.time()
    d = built["dir"]
    header = os.path.join(d, f"header-kv{kv}.cuh")
    tasks, summary = compile_tasks(args.strata, model_file, batch, kv + steps + 8, workers, d,
                                   ugraph_flags(d) + ["--cuda", header])
    with open(header, "rb") as f:
        if hashlib.sha256(f.read()).hexdigest() != built["header_sha256"]:
            raise ValueError(f"{header} differs from the header {built['library']} was built "
                             "with: the task file's generated entries may not match")
    rec = {"compile_seconds": round(time.time() - t0, 1), "summary": summary,
           "entries": [{k: e[k] for k in ("entry", "op", "grid", "threads", "smem_bytes")}
                       for e in tasks["generated"]],
           "library": os.path.relpath(built["library"], ROOT),
           **{k: built[k] for k in ("search_seconds", "header_seconds", "nvcc_seconds")}}
    if built["library"] not in libs:
        lib = ctypes.CDLL(built["library"])
        lib.mpk_smem_bytes.restype = ctypes.c_int
        if lib.mpk_params_size() != ctypes.sizeof(Params):
            raise ValueError(f"MpkParams mismatch: {built['library']} {lib.mpk_params_size()} "
                             f"bytes, driver {ctypes.sizeof(Params)}")
        libs[built["library"]] = lib
    lib = libs[built["library"]]
    m = tasks["model"]
    w, kc0, vc0, tokens = make_state(tasks, batch, kv)
    mk = Megakernel(lib, tasks, w, kc0.clone(), vc0.clone(), workers)
    hist = torch.zeros(steps + 1, batch, dtype=torch.int32, device="cuda")
    hist[0] = tokens.int()
    ref, want, ref_tok, gaps = reference_answers(m, w, kc0, vc0, tokens, kv, steps)
    del ref
    rec["check"], rec["greedy"] = check_megakernel(mk, hist, want, ref_tok, gaps, kc0, vc0, kv,
                                                   steps)
    times = {}
    tin, tout = hist[0].clone(), hist[1].clone()
    for mode, name in ((0, "megakernel_generated_static"), (1, "megakernel_generated_queue")):
        mk.reset()
        times[name] = time_ms(lambda: mk.launch(tin, tout, kv, mode), args.iters)
    rec["trace"] = mk.trace_step(tin, tout, kv, 0)
    rec["times_ms"] = times
    log(f"  generated tasks: check {rec['check']}  greedy {rec['greedy']}; " +
        ", ".join(f"{k} {v * 1e3:.0f} us" for k, v in times.items()))
    del mk, w, kc0, vc0
    torch.cuda.empty_cache()
    return rec


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--lib", required=True, help="the megakernel library (libmpk.so)")
    ap.add_argument("--strata", required=True, help="the strata tool")
    ap.add_argument("--models", default="examples/models/llama-3.2-1b.json,"
                                        "examples/models/qwen3-0.6b.json")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--kv", default="1024,8192")
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--no-compile", dest="compile", action="store_false",
                    help="leave out torch.compile")
    ap.add_argument("--budget", type=float, default=420,
                    help="seconds after which torch.compile is no longer started")
    ap.add_argument("--total", type=float, default=0,
                    help="seconds for the whole run (0: unbounded): generated-task builds and "
                         "runs that do not fit are skipped and reported")
    ap.add_argument("--generated", default="1:1024,8:1024",
                    help="configurations that also get the megakernel with generated tasks: "
                         "none, all, or BATCH:KV pairs (every model); default 1:1024,8:1024")
    ap.add_argument("--search-seconds", type=float, default=20,
                    help="time limit of each generated op's search (strata mpk compile)")
    ap.add_argument("--build-dir", default="build-gpu-mpk",
                    help="where the generated headers, libraries and the search cache go")
    ap.add_argument("--nvcc", default="nvcc")
    ap.add_argument("--generated-jobs", type=int, default=4,
                    help="(model, batch) preparations (search + nvcc) run at once")
    ap.add_argument("--prefetch-bytes", type=int, default=192 * 1024,
                    help="bytes of each streamed range a task asks L2 for before its wait, in "
                         "the 'static, L2 prefetch' timing (docs/megakernel.md, \"The runtime\")")
    ap.add_argument("--attn-chunks", type=int, default=0,
                    help="attention chunks per kv head (strata mpk compile --attn-chunks; 0: "
                         "the compiler's choice)")
    ap.add_argument("--out", default="bench/results")
    args = ap.parse_args()
    if not 16 <= args.prefetch_bytes < 2**31:
        ap.error(f"--prefetch-bytes: expected an integer in [16, 2^31), got {args.prefetch_bytes}")
    start = time.time()
    deadline = start + args.total if args.total > 0 else float("inf")
    os.makedirs(args.out, exist_ok=True)
    lib = ctypes.CDLL(args.lib)
    lib.mpk_smem_bytes.restype = ctypes.c_int
    if lib.mpk_params_size() != ctypes.sizeof(Params):
        sys.exit(f"MpkParams mismatch: library {lib.mpk_params_size()} bytes, driver "
                 f"{ctypes.sizeof(Params)}")
    configs = [(mf, b, kv) for b in map(int, args.batches.split(","))
               for mf in args.models.split(",") for kv in map(int, args.kv.split(","))]
    gen_configs = parse_generated(args.generated, configs)
    workers = torch.cuda.get_device_properties(0).multi_processor_count
    builds = None
    if gen_configs:  # started first: the searches and nvcc builds overlap everything below
        builds = GeneratedBuilds(args, workers, deadline - GENERATED_RUN_SECONDS)
        for mf, b, kv in gen_configs:
            builds.submit(mf, b, kv + args.steps + 8)
    gpu, peak, measured = peak_bandwidth()
    log(f"{gpu}: copy bandwidth {measured / 1e12:.2f} TB/s, peak {peak and peak / 1e12} TB/s")
    # One compilation per configuration (a new module each time): keep dynamo from falling back
    # to eager after its default of 8 recompilations of Reference.forward.
    for knob, value in (("cache_size_limit", 64), ("accumulated_cache_size_limit", 256)):
        if hasattr(torch._dynamo.config, knob):
            setattr(torch._dynamo.config, knob, value)
    records = []
    date = datetime.date.today().isoformat()
    tag = gpu.replace("NVIDIA ", "").split()[0].lower()
    base = os.path.join(args.out, f"mpk-{tag}-{date}")

    def write():  # after every configuration, so that a run cut short keeps what it measured
        doc = {"gpu": gpu, "peak_bandwidth": peak, "copy_bandwidth": measured, "date": date,
               "torch": torch.__version__, "generated_selection": args.generated,
               "prefetch_bytes": args.prefetch_bytes,
               "records": records}
        with open(base + ".json", "w") as f:
            json.dump(doc, f, indent=1)
        with open(base + ".md", "w") as f:
            f.write(report(doc))

    by_config, libs, pending = {}, {}, list(gen_configs)

    def run_generated_for(cfg, wait):
        """The generated pass of cfg when its library is ready (or, with wait, once it is, as
        long as the budget lasts); False when it is not ready yet and wait is off."""
        mf, b, kv = cfg
        rec, job = by_config[cfg], builds.jobs[(mf, b)]
        if not job.done() and not wait:
            return False
        log(f"== generated tasks: {os.path.basename(mf)} batch {b} kv {kv} "
            f"[{time.time() - start:.0f} s]")
        try:
            built = job.result(timeout=None if deadline == float("inf") else
                               max(0.0, deadline - GENERATED_RUN_SECONDS - time.time()))
        except (TimeoutError, concurrent.futures.TimeoutError) as e:
            rec["generated"] = {"skipped": "its library was not ready within the run's budget" +
                                           (f" ({e})" if str(e) else "")}
        except Exception as e:
            rec["generated"] = {"error": f"preparing: {type(e).__name__}: {e}"[:800]}
        else:
            if time.time() > deadline - GENERATED_RUN_SECONDS:
                rec["generated"] = {"skipped": "the run's time budget was spent"}
            else:
                try:
                    rec["generated"] = run_generated(built, libs, mf, b, kv, args)
                except Exception as e:  # reported, not hidden
                    rec["generated"] = {"error": f"{type(e).__name__}: {e}"[:800]}
        if "generated" in rec and "times_ms" not in rec["generated"]:
            log(f"  generated tasks: {rec['generated']}")
        return True

    for cfg in configs:
        mf, b, kv = cfg
        log(f"== {os.path.basename(mf)} batch {b} kv {kv} [{time.time() - start:.0f} s]")
        try:
            rec = run_config(lib, args.strata, mf, b, kv, args, start + args.budget)
        except Exception as e:
            rec = {"model": os.path.basename(mf), "batch": b, "kv": kv,
                   "error": f"{type(e).__name__}: {e}"[:600]}
            log(f"  ERROR {rec['error']}")
        records.append(rec)
        by_config[cfg] = rec
        if "times_ms" in rec:
            t = rec["times_ms"]
            floor = rec["bytes_per_token"] / (peak or measured) * 1e3
            rec["floor_ms"] = floor
            rec["floor_ms_measured_bw"] = rec["bytes_per_token"] / measured * 1e3
            log("  " + ", ".join(f"{k} {v * 1e3:.0f} us" for k, v in t.items()) +
                f"; floor {floor * 1e3:.0f} us")
        # Generated passes whose library is ready run between the configurations.
        for g in [c for c in pending if c in by_config]:
            if run_generated_for(g, wait=False):
                pending.remove(g)
        write()
    for g in pending:
        run_generated_for(g, wait=True)
        write()
    if builds:
        builds.shutdown()
    log(f"wrote {base}.md and {base}.json")
    ok = all(passed(r) and ("generated" not in r or "skipped" in r["generated"] or
                            passed(r["generated"])) for r in records)
    log("mpk: all checks passed" if ok else "mpk: SOME CHECKS FAILED")
    return 0 if ok else 1


def generated_cell(r):
    g = r.get("generated")
    if g is None:
        return "-"
    if "skipped" in g:
        return "skipped"
    if "error" in g:
        return "error"
    t = g["times_ms"]
    cell = (f"{t['megakernel_generated_static'] * 1e3:.0f} / "
            f"{t['megakernel_generated_queue'] * 1e3:.0f}")
    return cell if passed(g) else cell + " CHECK FAILED"


def report(doc):
    lines = [f"# Persistent megakernel decode on {doc['gpu']} ({doc['date']})", "",
             f"torch {doc['torch']}; copy bandwidth {doc['copy_bandwidth'] / 1e12:.2f} TB/s"
             f" (read + write), peak {doc['peak_bandwidth'] and doc['peak_bandwidth'] / 1e12} TB/s.",
             "Latency per token in µs (median of 5 runs of back-to-back steps at the same "
             "position); floor = (weights + KV cache bytes) / peak bandwidth.", "",
             "megakernel, generated tasks: the matmul-family ops from strata's searched "
             "μGraphs (static lists / global queue; - not selected).",
             f"static, L2 prefetch: each task first asks L2 for up to "
             f"{doc.get('prefetch_bytes', 192 * 1024)} bytes of each range it streams.", "",
             "| model | B | KV | megakernel static | megakernel queue | static, L2 prefetch | "
             "megakernel, generated tasks | "
             "strata per-op graph | eager | torch.compile r-o | vs compile | floor | % of floor | "
             "logits max err | greedy 32 |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in doc["records"]:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['batch']} | {r['kv']} | error: {r['error']} |")
            continue
        t = {k: v * 1e3 for k, v in r["times_ms"].items()}
        mk = min(t["megakernel_static"], t["megakernel_queue"])
        tc = t.get("torch_compile_reduce_overhead")
        g = r["greedy"]
        gs = "equal" if g["equal"] else (
            f"differs at step {g['first_difference']['step']} "
            f"(near tie, gap {g['first_difference']['reference_top2_gap']:.3f})"
            if g["first_difference"]["near_tie"] else
            f"DIFFERS at step {g['first_difference']['step']}")
        lines.append(
            f"| {r['model']} | {r['batch']} | {r['kv']} | {t['megakernel_static']:.0f} | "
            f"{t['megakernel_queue']:.0f} | {t['megakernel_static_prefetch']:.0f} | "
            f"{generated_cell(r)} | {t['strata_per_op_graph']:.0f} | "
            f"{t['torch_eager']:.0f} | {f'{tc:.0f}' if tc else r.get('torch_compile_error', '-')} | "
            f"{f'{tc / mk:.2f}x' if tc else '-'} | {r['floor_ms'] * 1e3:.0f} | "
            f"{100 * r['floor_ms'] * 1e3 / mk:.0f}% | "
            f"{r['check']['static']['max_abs_err']:.3g} | {gs} |")
    notes = []
    for r in doc["records"]:
        where = f"{r['model']} b{r['batch']} kv{r['kv']}"
        if r.get("torch_compile_cudagraph_skips", 0) > 0:
            notes.append(f"- {where}: inductor skipped CUDA graphs "
                         f"({r['torch_compile_cudagraph_skips']}x): torch.compile ran without them")
        g = r.get("generated")
        if g is not None:
            if "skipped" in g or "error" in g:
                notes.append(f"- {where}: generated tasks {'skipped' if 'skipped' in g else 'ERROR'}"
                             f": {g.get('skipped') or g.get('error')}")
            else:
                gr = g["greedy"]
                gs = "equal" if gr["equal"] else (
                    f"differs at step {gr['first_difference']['step']}"
                    f"{' (near tie)' if gr['first_difference']['near_tie'] else ''}")
                notes.append(
                    f"- {where}: generated tasks ({len(g['entries'])} entries): logits max err "
                    f"{g['check']['static']['max_abs_err']:.3g} (static), "
                    f"{g['check']['queue']['max_abs_err']:.3g} (queue), greedy {gs}; search "
                    f"{g['search_seconds']} s, header {g['header_seconds']} s, nvcc "
                    f"{g['nvcc_seconds']} s (0: built before)")
        if "torch_compile_seconds" in r:
            notes.append(f"- {where}: torch.compile took {r['torch_compile_seconds']} s, its "
                         f"logits differ from eager by at most "
                         f"{r['torch_compile_max_abs_err_vs_eager']:.3g}")
    if notes:
        lines += ["", "Notes:", ""] + notes
    traced = [(r, r["trace"], "") for r in doc["records"] if "trace" in r]
    traced += [(r, r["generated"]["trace"], " (generated tasks)") for r in doc["records"]
               if "trace" in r.get("generated", {})]
    if traced:
        lines += ["", "## Where the time goes", "",
                  "One traced step per configuration, static lists (bench/mpk_trace.py defines "
                  "the columns: a stage is the time an op adds to the step past every op before "
                  "it, summed over the layers).", ""]
    for r, tr, what in traced:
        lines += [f"### {r['model']} batch {r['batch']}, KV {r['kv']}{what}", ""]
        lines += mpk_trace.table(tr) + [""]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
