"""Tests of the megakernel benchmark's CPU side (bench/mpk_abi.py, bench/mpk_decode.py):
the ctypes mirror of the launch parameters matches runtime/mpk/mpk_tasks.cuh field by field;
the plain PyTorch model the megakernel is checked against computes, on the CPU, what an
independent float64 NumPy implementation of the model computes (within f16 rounding), with
exact and with masked attention.

The PyTorch parts need PyTorch, NumPy and the strata tool (STRATA_TOOL, else build/strata):
without them they are skipped with a message (scripts/python-test.sh runs them)."""

import argparse
import ctypes
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1]
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
import mpk_abi  # noqa: E402

try:
    import numpy as np
    import torch

    import mpk_decode as md
    MISSING = None
except ImportError as e:
    MISSING = (f"{e.name or e} is not installed: the PyTorch model tests are skipped "
               "(scripts/python-test.sh runs them in its virtual environment)")
    print(f"test_mpk_decode: {MISSING}", file=sys.stderr)

TOOL = os.environ.get("STRATA_TOOL") or str(ROOT / "build" / "strata")
HAVE_TOOL = Path(TOOL).is_file() and os.access(TOOL, os.X_OK)
if not MISSING and not HAVE_TOOL:
    MISSING = f"no strata tool at {TOOL}: the PyTorch model tests are skipped"
    print(f"test_mpk_decode: {MISSING}", file=sys.stderr)


class AbiTest(unittest.TestCase):
    def test_params_mirror_the_header(self):
        text = (ROOT / "runtime" / "mpk" / "mpk_tasks.cuh").read_text()
        body = re.search(r"struct MpkParams \{(.*?)\n\};", text, re.S).group(1)
        fields = []
        for line in body.splitlines():
            line = line.split("//")[0].strip()
            if not line:
                continue
            m = re.match(r"(.+?)\s*([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*);$", line)
            self.assertIsNotNone(m, line)
            ctype = m.group(1)
            for name in (n.strip() for n in m.group(2).split(",")):
                fields.append((name, "ptr" if "*" in ctype else ctype.strip()))
        mine = []
        for name, t in mpk_abi.Params._fields_:
            kind = {ctypes.c_void_p: "ptr", ctypes.c_int: "int", ctypes.c_uint: "unsigned",
                    ctypes.c_float: "float"}[t]
            mine.append((name, kind))
        self.assertEqual(mine, fields)


def numpy_step(m, w, kc, vc, tokens, pos):
    """The model in float64, written independently of the PyTorch one."""
    f = {k: v.double().numpy() for k, v in w.items()}
    D, Hq, Hkv = m["head_dim"], m["heads"], m["kv_heads"]
    G, QW, KVW = Hq // Hkv, Hq * D, Hkv * D

    def norm(x, g):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + m["eps"]) * g

    def rot(x):
        a = pos * f["rope_inv_freq"]
        h = D // 2
        return np.concatenate([x[..., :h] * np.cos(a) - x[..., h:] * np.sin(a),
                               x[..., h:] * np.cos(a) + x[..., :h] * np.sin(a)], -1)

    out = []
    for b, tok in enumerate(tokens):
        x = f["embed"][tok].copy()
        for l in range(m["layers"]):
            p = f"layers.{l}."
            qkv = f[p + "wqkv"] @ norm(x, f[p + "attn_norm"])
            q = qkv[:QW].reshape(Hq, D)
            k = qkv[QW:QW + KVW].reshape(Hkv, D)
            v = qkv[QW + KVW:].reshape(Hkv, D)
            if m["qk_norm"]:
                q, k = norm(q, f[p + "q_norm"]), norm(k, f[p + "k_norm"])
            q, k = rot(q), rot(k)
            kc[l, b, :, pos], vc[l, b, :, pos] = k, v
            o = np.zeros((Hq, D))
            for hq in range(Hq):
                h = hq // G
                s = kc[l, b, h, :pos + 1] @ q[hq] / np.sqrt(D)
                e = np.exp(s - s.max())
                o[hq] = (e / e.sum()) @ vc[l, b, h, :pos + 1]
            x = x + f[p + "wo"] @ o.reshape(-1)
            n = norm(x, f[p + "mlp_norm"])
            gt, up = f[p + "w_gate"] @ n, f[p + "w_up"] @ n
            x = x + f[p + "w_down"] @ (gt / (1 + np.exp(-gt)) * up)
        out.append(f["lm_head"] @ norm(x, f["final_norm"]))
    return np.stack(out)


@unittest.skipIf(MISSING, MISSING or "")
class ReferenceModelTest(unittest.TestCase):
    @staticmethod
    def model(qk_norm):
        m = {"format": "strata-mpk-model", "version": 1, "name": "t", "layers": 2, "hidden": 32,
             "heads": 4, "kv_heads": 2, "head_dim": 8, "intermediate": 48, "vocab": 50,
             "eps": 1e-5, "rope_theta": 10000.0, "qk_norm": qk_norm, "max_kv": 12, "batch": 2}
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "m.json")
            with open(path, "w") as fh:
                json.dump(m, fh)
            out = subprocess.run([TOOL, "mpk", "compile", path, "--workers", "4"],
                                 capture_output=True, text=True, check=True).stdout
        return json.loads(out)

    def test_eager_and_masked_match_float64(self):
        for qk in (False, True):
            tasks = ReferenceModelTest.model(qk)
            m = tasks["model"]
            w = md.make_weights(m, tasks["buffers"], seed=3, device="cpu")
            shape = (m["layers"], m["batch"], m["kv_heads"], m["max_kv"], m["head_dim"])
            g = torch.Generator().manual_seed(5)
            pos = 7
            kc = torch.zeros(shape, dtype=torch.float16)
            kc[:, :, :, :pos] = torch.randn(shape[:3] + (pos, shape[4]), generator=g).half()
            vc = kc.clone()
            vc[:, :, :, :pos] = torch.randn(shape[:3] + (pos, shape[4]), generator=g).half()
            tokens = torch.tensor([3, 41])
            want = numpy_step(m, w, kc.double().numpy().copy(), vc.double().numpy().copy(),
                              tokens.tolist(), pos)
            with torch.no_grad():
                eager = md.Reference(m, w, kc.clone(), vc.clone(), masked=False)(tokens, pos)
                masked = md.Reference(m, w, kc.clone(), vc.clone(), masked=True)(
                    tokens, torch.tensor(pos))
            for got in (eager, masked):
                err = np.abs(got.double().numpy() - want) / (1 + np.abs(want))
                self.assertLess(err.max(), 2e-2, f"qk_norm={qk}")
            self.assertTrue(torch.allclose(eager, masked, atol=1e-2, rtol=1e-2))


if __name__ == "__main__":
    unittest.main()


@unittest.skipIf(MISSING, MISSING or "")
class DriverTest(unittest.TestCase):
    """The driver's plumbing without a GPU: a stand-in library records what would be launched."""

    class FakeLib:
        def __init__(self):
            self.launches = []

        def mpk_smem_bytes(self, *a):
            return 4096

        def mpk_configure(self, smem):
            return 0

        def mpk_launch_op(self, p, first, n, smem, stream):
            self.launches.append((first, n))
            return 0

    @staticmethod
    def compiled(qk_norm):
        """A small model's task file, its random weights and empty caches (on the CPU)."""
        tasks = ReferenceModelTest.model(qk_norm)
        m = tasks["model"]
        w = md.make_weights(m, tasks["buffers"], seed=1, device="cpu")
        shape = (m["layers"], m["batch"], m["kv_heads"], m["max_kv"], m["head_dim"])
        kc, vc = torch.zeros(shape, dtype=torch.float16), torch.zeros(shape, dtype=torch.float16)
        return tasks, w, kc, vc

    def test_tables_and_report(self):
        tasks, w, kc, vc = self.compiled(True)
        m = tasks["model"]
        lib = self.FakeLib()
        mk = md.Megakernel(lib, tasks, w, kc, vc, 4)
        n = len(tasks["tasks"]) // tasks["task_fields"]
        self.assertEqual(sum(c for _, c in mk.op_ranges), n)
        self.assertEqual(tuple(mk.logits.shape), (m["batch"], m["vocab"]))
        self.assertEqual(mk.buffers[-2].item(), kc.data_ptr())
        tok = torch.zeros(m["batch"], dtype=torch.int32)
        p = mk.params(tok, tok, 5, 1)
        self.assertEqual((p.num_tasks, p.pos, p.mode, p.heads), (n, 5, 1, m["heads"]))
        self.assertEqual(p.buffers, mk.buffers.data_ptr())
        rec = {"model": "t", "batch": 2, "kv": 5, "floor_ms": 0.5,
               "times_ms": {"megakernel_static": 1.0, "megakernel_queue": 1.1,
                            "megakernel_static_prefetch": 1.2, "strata_per_op_graph": 1.5,
                            "torch_eager": 5.0, "torch_compile_reduce_overhead": 1.4},
               "check": {"static": {"max_abs_err": 0.01}},
               "greedy": {"equal": False, "first_difference": {
                   "step": 3, "near_tie": True, "reference_top2_gap": 0.01}}}
        gen = {"times_ms": {"megakernel_generated_static": 0.9, "megakernel_generated_queue": 0.95},
               "check": {"static": {"max_abs_err": 0.02, "within_tol": True},
                         "queue": {"max_abs_err": 0.03, "within_tol": True}},
               "greedy": {"equal": True}, "entries": [{}] * 4, "search_seconds": 12.5,
               "header_seconds": 3.0, "nvcc_seconds": 85.0}
        rec2 = dict(rec, batch=8, generated={"skipped": "its library was not ready"})
        text = md.report({"gpu": "X", "date": "d", "torch": "t", "copy_bandwidth": 3e12,
                          "peak_bandwidth": 3.35e12,
                          "records": [rec, dict(rec, kv=6, generated=gen), rec2,
                                      {"model": "u", "batch": 1, "kv": 1, "error": "E"}]})
        self.assertIn("| t | 2 | 5 | 1000 | 1100 | 1200 | - | 1500 | 5000 | 1400 | 1.40x | 500 | "
                      "50% |", text)
        self.assertIn("| t | 2 | 6 | 1000 | 1100 | 1200 | 900 / 950 | 1500 |", text)
        self.assertIn("| t | 8 | 5 | 1000 | 1100 | 1200 | skipped | 1500 |", text)
        self.assertIn("t b2 kv6: generated tasks (4 entries): logits max err 0.02 (static), 0.03 "
                      "(queue), greedy equal; search 12.5 s, header 3.0 s, nvcc 85.0 s", text)
        self.assertIn("t b8 kv5: generated tasks skipped: its library was not ready", text)
        self.assertIn("megakernel, generated tasks", text)
        self.assertIn("near tie", text)
        self.assertIn("error: E", text)
        # A failed check of the generated tasks is marked in the table.
        bad = dict(gen, check={"static": {"max_abs_err": 9.0, "within_tol": False},
                               "queue": {"max_abs_err": 9.0, "within_tol": True}})
        self.assertEqual(md.generated_cell(dict(rec, generated=bad)), "900 / 950 CHECK FAILED")
        self.assertFalse(md.passed(bad))
        self.assertTrue(md.passed(gen))

    def test_a_task_file_needs_a_library_with_its_generated_entries(self):
        tasks, w, kc, vc = self.compiled(False)
        gen = dict(tasks, generated=[{"id": i} for i in range(4)])
        with self.assertRaisesRegex(ValueError, "4 generated task entries but the library .* "
                                                "built with 0"):
            md.Megakernel(self.FakeLib(), gen, w, kc, vc, 4)  # no mpk_generated_functions
        lib = self.FakeLib()
        lib.mpk_generated_functions = lambda: 3
        with self.assertRaisesRegex(ValueError, "built with 3"):
            md.Megakernel(lib, gen, w, kc, vc, 4)
        lib.mpk_generated_functions = lambda: 4
        md.Megakernel(lib, gen, w, kc, vc, 4)
        with self.assertRaisesRegex(ValueError, "0 generated task entries .* built with 4"):
            md.Megakernel(lib, tasks, w, kc, vc, 4)

    def test_a_task_file_of_another_abi_is_refused(self):
        tasks, w, kc, vc = self.compiled(False)
        lib = self.FakeLib()
        lib.mpk_abi_version = lambda: tasks["abi_version"] + 1
        with self.assertRaisesRegex(ValueError, "ABI version .* built with"):
            md.Megakernel(lib, tasks, w, kc, vc, 4)
        lib.mpk_abi_version = lambda: tasks["abi_version"]
        md.Megakernel(lib, tasks, w, kc, vc, 4)

    def test_generated_selection(self):
        configs = [(mf, b, kv) for b in (1, 8) for mf in ("a", "b") for kv in (1024, 8192)]
        self.assertEqual(md.parse_generated("1:1024,8:1024", configs),
                         [("a", 1, 1024), ("b", 1, 1024), ("a", 8, 1024), ("b", 8, 1024)])
        self.assertEqual(md.parse_generated("all", configs), configs)
        self.assertEqual(md.parse_generated("none", configs), [])
        self.assertEqual(md.parse_generated("8:8192", configs), [("a", 8, 8192), ("b", 8, 8192)])
        with self.assertRaises(SystemExit) as e:
            md.parse_generated("1-1024", configs)
        self.assertIn("expected none, all or BATCH:KV", str(e.exception))

    def test_generated_builds_without_a_gpu(self):
        """The background preparation with the real tool at small shapes and a stand-in nvcc:
        the μGraphs are searched once and saved, a header is written from them, one library per
        distinct header; a later compilation from the saved μGraphs gives the same header; a
        failing nvcc and a spent budget are reported."""
        with tempfile.TemporaryDirectory() as d:
            model = os.path.join(d, "m.json")
            with open(model, "w") as fh:
                json.dump({"format": "strata-mpk-model", "version": 1, "name": "s", "layers": 1,
                           "hidden": 64, "heads": 4, "kv_heads": 2, "head_dim": 16,
                           "intermediate": 96, "vocab": 50, "max_kv": 40, "batch": 1}, fh)
            nvcc = os.path.join(d, "nvcc")
            with open(nvcc, "w") as fh:  # records its arguments, writes the -o file
                fh.write('#!/bin/sh\necho "$@" >> "$(dirname "$0")/nvcc.log"\n'
                         'while [ $# -gt 0 ]; do [ "$1" = -o ] && : > "$2"; shift; done\n')
            os.chmod(nvcc, 0o755)
            args = argparse.Namespace(strata=TOOL, nvcc=nvcc, build_dir=os.path.join(d, "b"),
                                      search_seconds=10, generated_jobs=2)
            builds = md.GeneratedBuilds(args, 6, time.time() + 300)
            a = builds.submit(model, 1, 40).result()
            self.assertIs(builds.submit(model, 1, 80), builds.jobs[(model, 1)])  # once per batch
            b = builds.submit(model, 2, 40).result()
            for r in (a, b):
                self.assertTrue(os.path.exists(r["library"]))
                for op in md.GENERATED_OPS:
                    self.assertTrue(os.path.exists(os.path.join(r["dir"], "ugraphs", op + ".json")))
            self.assertNotEqual(a["header_sha256"], b["header_sha256"])
            with open(os.path.join(d, "nvcc.log")) as fh:
                calls = fh.read().splitlines()
            self.assertEqual(len(calls), 2)
            self.assertIn(f'-DSTRATA_MPK_GENERATED_HEADER="{a["dir"]}/header.cuh"', calls[0] + calls[1])
            # The same μGraphs at another KV length: the same header, so the same library.
            header = os.path.join(d, "again.cuh")
            tasks, _ = md.compile_tasks(TOOL, model, 1, 1064, 6, d,
                                        md.ugraph_flags(a["dir"]) + ["--cuda", header])
            self.assertEqual(len(tasks["generated"]), 4)
            with open(header, "rb") as fh:
                self.assertEqual(hashlib.sha256(fh.read()).hexdigest(), a["header_sha256"])
            # Built before: no nvcc call.
            again = md.GeneratedBuilds(args, 6, time.time() + 300).submit(model, 1, 40).result()
            self.assertEqual(again["library"], a["library"])
            with open(os.path.join(d, "nvcc.log")) as fh:
                self.assertEqual(len(fh.read().splitlines()), 2)
            # nvcc fails: the error says so.
            with open(nvcc, "w") as fh:
                fh.write("#!/bin/sh\necho 'bad header' >&2\nexit 2\n")
            os.remove(a["library"])
            with self.assertRaisesRegex(RuntimeError, "nvcc with .* failed \\(2\\): bad header"):
                md.GeneratedBuilds(args, 6, time.time() + 300).submit(model, 1, 40).result()
            # No time left: the tool is stopped and the job says so.
            with self.assertRaisesRegex(TimeoutError, "no time left"):
                md.GeneratedBuilds(args, 6, time.time() - 1).submit(model, 3, 40).result()
