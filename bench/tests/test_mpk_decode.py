"""Tests of the megakernel benchmark's CPU side (bench/mpk_abi.py, bench/mpk_decode.py):
the ctypes mirror of the launch parameters matches runtime/mpk/mpk_tasks.cuh field by field;
the plain PyTorch model the megakernel is checked against computes, on the CPU, what an
independent float64 NumPy implementation of the model computes (within f16 rounding), with
exact and with masked attention.

The PyTorch parts need PyTorch, NumPy and the strata tool (STRATA_TOOL, else build/strata):
without them they are skipped with a message (scripts/python-test.sh runs them)."""

import ctypes
import json
import os
import re
import subprocess
import sys
import tempfile
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

    def test_tables_and_report(self):
        tasks = ReferenceModelTest.model(True)
        m = tasks["model"]
        w = md.make_weights(m, tasks["buffers"], seed=1, device="cpu")
        shape = (m["layers"], m["batch"], m["kv_heads"], m["max_kv"], m["head_dim"])
        kc, vc = torch.zeros(shape, dtype=torch.float16), torch.zeros(shape, dtype=torch.float16)
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
                            "megakernel_static_no_prefetch": 1.2, "strata_per_op_graph": 1.5,
                            "torch_eager": 5.0, "torch_compile_reduce_overhead": 1.4},
               "check": {"static": {"max_abs_err": 0.01}},
               "greedy": {"equal": False, "first_difference": {
                   "step": 3, "near_tie": True, "reference_top2_gap": 0.01}}}
        text = md.report({"gpu": "X", "date": "d", "torch": "t", "copy_bandwidth": 3e12,
                          "peak_bandwidth": 3.35e12,
                          "records": [rec, {"model": "u", "batch": 1, "kv": 1, "error": "E"}]})
        self.assertIn("| t | 2 | 5 | 1000 | 1100 | 1200 | 1500 | 5000 | 1400 | 1.40x | 500 | 50% |",
                      text)
        self.assertIn("near tie", text)
        self.assertIn("error: E", text)
