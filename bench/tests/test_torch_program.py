"""Tests of bench/torch_program.py, the `.strata` → PyTorch interpreter behind the suite's
baselines: on the CPU in float64 it must compute what `strata run` (the reference
interpreter) computes, op by op and on the suite's own programs; the SDPA rewrite must not
change a value; the input recipes must draw what they say. Also bench/suite_bench.py's CPU
side: its parts, its per-program configurations, and a whole run with a stand-in for the tool
and the GPU timing stubbed.

Needs PyTorch and NumPy (scripts/python-test.sh runs this file in its virtual environment;
the CTest run without them skips it with a message) and the strata tool (STRATA_TOOL, else
build/strata) for the comparisons with `strata run`."""

import contextlib
import io
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(BENCH))
import strata_program as sp  # noqa: E402

try:
    import numpy as np
    import torch

    import torch_program as tp
    MISSING = None
except ImportError as e:  # the CTest run uses the system Python, which may lack them
    MISSING = (f"{e.name or e} is not installed: the torch interpreter tests are skipped "
               "(scripts/python-test.sh runs them in its virtual environment)")
    print(f"test_torch_program: {MISSING}", file=sys.stderr)

TOOL = os.environ.get("STRATA_TOOL") or str(BENCH.parent / "build" / "strata")
HAVE_TOOL = Path(TOOL).is_file() and os.access(TOOL, os.X_OK)
NO_TOOL = f"no strata tool at {TOOL} (build it, or set STRATA_TOOL): `strata run` comparisons skipped"
if not MISSING and not HAVE_TOOL:
    print(f"test_torch_program: {NO_TOOL}", file=sys.stderr)

M64 = (1 << 64) - 1


def mix64(x):
    """src/util/mix.h on uint64 arrays."""
    x = x ^ (x >> np.uint64(31))
    x = x * np.uint64(0x7FB5D329728EA185)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x81DADEF4BC2DD44D)
    return x ^ (x >> np.uint64(33))


def tool_inputs(program, seed):
    """The inputs `strata run --seed SEED` draws (random_inputs, src/interp/interpreter.cc):
    input i, element e: 2·U − 1 with U = (mix64(key + e·golden) >> 11)·2⁻⁵², key = mix64(seed ^
    mix64(0x5eed + i))."""
    out = []
    with np.errstate(over="ignore"):
        for i, t in enumerate(program.inputs):
            inner = int(mix64(np.array([0x5EED + i], dtype=np.uint64))[0])
            key = int(mix64(np.array([(seed ^ inner) & M64], dtype=np.uint64))[0])
            e = np.arange(math.prod(t.shape), dtype=np.uint64)
            r = mix64(np.uint64(key) + e * np.uint64(0x9E3779B97F4A7C15))
            v = (r >> np.uint64(11)).astype(np.float64) * 2.0**-52 - 1.0
            out.append(torch.from_numpy(v.reshape(t.shape)))
    return out


def strata_run(path, seed):
    """[(sum, sum|x|, l2)] per output from `strata run`."""
    r = subprocess.run([TOOL, "run", str(path), "--seed", str(seed)], text=True,
                       capture_output=True)
    if r.returncode != 0:
        raise AssertionError(f"strata run {path}: {r.stderr}")
    return [tuple(float(x) for x in m) for m in re.findall(
        r"sum (\S+)  sum\|x\| (\S+)  l2 (\S+)", r.stdout)]


def checksums(t):
    t = t.double()
    return (t.sum().item(), t.abs().sum().item(), torch.linalg.vector_norm(t).item())


# Small programs that together call every program op, each family of the suite among them.
SMALL = {
    # all_reduce over the one rank of a program without `ranks`: the identity
    "all_reduce_one_rank": """input X: f32[3, 8]
input W: f32[8, 4]
O = add_scalar(all_reduce(matmul(X, W)), 1)
output O
""",
    "unary": """input X: f32[3, 5, 8]
A = add(add(add(exp(X), square(X)), sqrt(add_scalar(square(X), 1))), silu(X))
B = add(add(gelu(X), relu(X)), add(sigmoid(X), tanh(X)))
C = add(log(add_scalar(square(X), 0.5)), clamp(mul_scalar(X, 3), -0.5, 0.25))
output A, B, C
""",
    "binary": """input A: f32[2, 3, 4]
input B: f32[4]
input C: f32[3, 1]
O1 = sub(add(A, B), mul(A, C))
O2 = div(A, add_scalar(square(B), 1))
O3 = pow(add_scalar(square(A), 0.5), B)
O4 = sub(maximum(A, C), minimum(B, A))
output O1, O2, O3, O4
""",
    "reduce": """input X: f32[4, 6, 8]
S1 = sum(X, dim=1)
S2 = sum(X, -1, to=2)
M1 = mean(X, 0)
M2 = mean(X, dim=2, to=4)
X1 = max(X, dim=-1)
X2 = max(X, 1, to=3)
output S1, S2, M1, M2, X1, X2
""",
    "norms": """input X: f32[4, 6, 16]
N1 = rms_norm(X)
N2 = rms_norm(X, dim=1, eps=0.25)
L1 = layer_norm(X, eps=0.001)
L2 = layer_norm(X, dim=0)
P1 = softmax(X)
P2 = softmax(mul_scalar(X, 4), dim=1)
output N1, N2, L1, L2, P1, P2
""",
    "layout": """input X: f32[2, 6, 8]
input W: f32[2, 6, 5]
T = matmul(transpose(X), W)
C = concat(slice(X, -1, 4, 8), mul_scalar(slice(X, -1, 0, 4), -1), dim=-1)
D = concat(slice(X, 1, 0, 2), X, dim=1)
output T, C, D
""",
    "gqa_attention": """# 2 sequences x 2 KV heads, 3 query heads per KV head, 2 tokens; head dim 16
input Q: f32[4, 6, 16]
input K: f32[4, 40, 16]
input V: f32[4, 40, 16]
S = mul_scalar(matmul(Q, transpose(K)), 0.25)
O = matmul(softmax(S, dim=-1), V)
output O
""",
    "qknorm_attention": """input Q: f32[2, 8, 32]
input K: f32[2, 24, 32]
input V: f32[2, 24, 16]
input Gq: f32[32]
input Gk: f32[32]
S = mul_scalar(matmul(mul(rms_norm(Q, eps=1e-06), Gq), transpose(mul(rms_norm(K, eps=1e-06), Gk))), 0.17677669529663687)
O = matmul(softmax(S, dim=-1), V)
output O
""",
    "qkv_bias_sliced": """input X: f32[3, 32]
input G: f32[32]
input W: f32[32, 48]
input Bias: f32[48]
QKV = add(matmul(mul(rms_norm(X, eps=1e-05), G), W), Bias)
Q = slice(QKV, -1, 0, 32)
K = slice(QKV, -1, 32, 40)
V = slice(QKV, -1, 40, 48)
output Q, K, V
""",
    "layernorm_linear_gelu": """input X: f32[6, 24]
input G: f32[24]
input Bln: f32[24]
input W: f32[24, 40]
input B: f32[40]
O = gelu(add(matmul(add(mul(layer_norm(X, eps=1e-12), G), Bln), W), B))
output O
""",
    "mlp_lora_resid": """input X: f32[4, 32]
input W1: f32[32, 48]
input W3: f32[32, 48]
input W2: f32[48, 32]
input A: f32[32, 8]
input B: f32[8, 32]
input R: f32[4, 32]
input G: f32[32]
H = add(add(matmul(mul(silu(matmul(X, W1)), matmul(X, W3)), W2), mul_scalar(matmul(matmul(X, A), B), 2)), R)
O = mul(rms_norm(H, eps=1e-05), G)
output H, O
""",
}


@unittest.skipIf(MISSING, MISSING or "")
class Interpreter(unittest.TestCase):
    def assert_checksums(self, got, want, name):
        self.assertEqual(len(got), len(want), name)
        for i, (g, w) in enumerate(zip(got, want)):
            scale = max(abs(w[1]), 1e-30)
            self.assertLess(abs(g[0] - w[0]) / scale, 1e-7, f"{name} output {i} sum: {g} vs {w}")
            self.assertLess(abs(g[1] - w[1]) / scale, 1e-7, f"{name} output {i} sum|x|: {g} vs {w}")
            self.assertLess(abs(g[2] - w[2]) / max(w[2], 1e-30), 1e-7,
                            f"{name} output {i} l2: {g} vs {w}")

    def run_both(self, path, seed=3):
        p = sp.load(path)
        outs = tp.function(p)(*tool_inputs(p, seed))
        self.assert_checksums([checksums(o) for o in outs], strata_run(path, seed), p.name)
        return p

    def test_small_programs_cover_every_op(self):
        kinds = set()
        for text in SMALL.values():
            kinds |= {op.kind for op in sp.parse(text).ops}
        self.assertEqual(kinds, set(sp.SIGNATURES))
        self.assertEqual(set(tp.OPS), set(sp.SIGNATURES))

    @unittest.skipUnless(HAVE_TOOL, NO_TOOL)
    def test_inputs_are_the_tools(self):
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "id.strata"
            path.write_text("input X: f32[3, 7]\ninput Y: f32[5]\nA = mul_scalar(X, 1)\n"
                            "B = mul_scalar(Y, 1)\noutput A, B\n")
            for seed in (1, 12345):
                p = sp.load(path)
                got = [checksums(x) for x in tool_inputs(p, seed)]
                self.assert_checksums(got, strata_run(path, seed), f"inputs, seed {seed}")

    @unittest.skipUnless(HAVE_TOOL, NO_TOOL)
    def test_small_programs_against_strata_run(self):
        with tempfile.TemporaryDirectory() as d:
            for name, text in SMALL.items():
                with self.subTest(program=name):
                    path = Path(d) / f"{name}.strata"
                    path.write_text(text)
                    self.run_both(path)

    @unittest.skipUnless(HAVE_TOOL, NO_TOOL)
    def test_suite_programs_against_strata_run(self):
        """The suite programs small enough for the reference interpreter on two cores."""
        ran = []
        for path in sorted((BENCH / "suite").glob("*.strata")):
            p = sp.load(path)
            if p.flops > 3e8 or sum(math.prod(t.shape) for t in p.inputs) > 8e6:
                continue
            with self.subTest(program=p.name):
                self.run_both(path, seed=1)
                ran.append(p.name)
        self.assertGreaterEqual(len(ran), 10)  # rope, residual norm, GEMM chains, attention

    def test_sdpa_rewrite_computes_the_same(self):
        cases = [sp.parse(SMALL["gqa_attention"]), sp.parse(SMALL["qknorm_attention"]),
                 sp.load(BENCH / "suite" / "mcfuser_s7.strata")]
        for p in cases:
            with self.subTest(program=p.name):
                inputs = tool_inputs(p, 5)
                fn = tp.sdpa_function(p, backend="MATH")
                self.assertIsNotNone(fn)
                want = tp.function(p)(*inputs)
                got = fn(*inputs)
                for g, w in zip(got, want):
                    self.assertEqual(g.shape, w.shape)
                    torch.testing.assert_close(g, w, rtol=1e-10, atol=1e-12)
        self.assertIsNone(tp.sdpa_function(sp.parse(SMALL["mlp_lora_resid"])))
        # Rank 4 and rank 2 operands keep their shapes.
        for shape in ("2, 3, 5, 8", "5, 8"):
            p = sp.parse(f"input Q: f32[{shape}]\ninput K: f32[{shape}]\ninput V: f32[{shape}]\n"
                         "O = matmul(softmax(matmul(Q, transpose(K))), V)\noutput O\n")
            x = tool_inputs(p, 2)
            torch.testing.assert_close(tp.sdpa_function(p, "MATH")(*x)[0], tp.function(p)(*x)[0])

    def test_every_suite_attention_program_has_its_sdpa_pattern(self):
        for path in sorted((BENCH / "suite").glob("*.strata")):
            p = sp.load(path)
            has_softmax = any(op.kind == "softmax" for op in p.ops)
            with self.subTest(program=p.name):
                self.assertEqual(bool(sp.attention_patterns(p)), has_softmax)

    def test_recipes(self):
        p = sp.load(BENCH / "suite" / "llama3_8b_rope_d16.strata")
        q, k, cos, sin = tp.make_inputs(p, seed=1, device="cpu")
        self.assertEqual((q.dtype, tuple(q.shape)), (torch.float16, (16, 32, 128)))
        self.assertLess(abs(q.float().std().item() - 1.0), 0.02)
        pos, i = 5, 70  # cos(p · θ^(−2(i mod 64)/128)) broadcast over the heads
        want = math.cos(pos * 500000 ** (-2 * (i % 64) / 128))
        self.assertAlmostEqual(cos[pos, 0, i].item(), want, places=3)
        self.assertEqual(cos[0].abs().min().item(), 1.0)
        self.assertEqual(sin[0].abs().max().item(), 0.0)
        # Rotate-half RoPE rotates pairs (i, i + D/2): each row keeps its norm.
        qr, kr = tp.function(p)(*(x.double() for x in (q, k, cos, sin)))
        torch.testing.assert_close(torch.linalg.vector_norm(qr, dim=-1),
                                   torch.linalg.vector_norm(q.double(), dim=-1), rtol=2e-3, atol=0)
        p = sp.load(BENCH / "suite" / "llama3_8b_qkv_d4.strata")
        x, g, w = tp.make_inputs(p, seed=0, device="cpu")
        self.assertLess(abs(w.float().std().item() * math.sqrt(4096) - 1.0), 0.01)  # N(0, 1/fan_in)
        self.assertLess(abs(g.float().mean().item() - 1.0), 0.01)
        self.assertLess(abs(g.float().std().item() - 0.1), 0.01)
        again = tp.make_inputs(p, seed=0, device="cpu")
        self.assertTrue(all(torch.equal(a, b) for a, b in zip((x, g, w), again)))
        other = tp.make_inputs(p, seed=1, device="cpu")
        self.assertFalse(torch.equal(x, other[0]))

    def test_fp16_stays_close_to_float64_on_small_suite_programs(self):
        """The recipes keep fp16 finite and within the harness's tolerance (1e-2) where the CPU
        can run fp16 quickly."""
        for name in ("mcfuser_s7", "mcfuser_g1", "llama3_8b_rope_d16", "llama3_8b_resid_norm_d16"):
            with self.subTest(program=name):
                p = sp.load(BENCH / "suite" / f"{name}.strata")
                x = tp.make_inputs(p, seed=0, device="cpu")
                fn = tp.function(p)
                for got, want in zip(fn(*x), fn(*(t.double() for t in x))):
                    self.assertEqual(got.dtype, torch.float16)
                    err = (torch.linalg.vector_norm(got.double() - want)
                           / torch.linalg.vector_norm(want)).item()
                    self.assertLess(err, 1e-2)


if __name__ == "__main__":
    unittest.main()


@unittest.skipIf(MISSING, MISSING or "")
class TimingRule(unittest.TestCase):
    """timing.passes_for: ≥ MIN_LAUNCHES launches or ≥ MIN_REPLAY_US of work per replay,
    whichever needs fewer passes (the same rule as passes_for of src/gpu/profiler.cc)."""

    def test_passes_by_count_or_by_time(self):
        import timing
        self.assertEqual(timing.passes_for(4), 25)                  # unknown launch time
        self.assertEqual(timing.passes_for(4, launch_us=3.0), 25)   # short launches: by count
        self.assertEqual(timing.passes_for(4, launch_us=100.0), 5)  # 5 × 4 × 100 µs = 2 ms
        self.assertEqual(timing.passes_for(2, launch_us=4600.0), 1)
        self.assertEqual(timing.passes_for(300, launch_us=1.0), 1)
        self.assertEqual(timing.passes_for(0, launch_us=50.0), 40)

    def test_head_to_head_rotates_the_order_and_pairs_the_rounds(self):
        import timing
        names = ["compile", "strata"]
        self.assertEqual(timing.round_order(names, 0), ["compile", "strata"])
        self.assertEqual(timing.round_order(names, 1), ["strata", "compile"])
        three = ["a", "b", "c"]
        firsts = [timing.round_order(three, r)[0] for r in range(3)]
        self.assertEqual(sorted(firsts), three)  # each system first once per len(names) rounds
        # A clock that slows round by round moves both systems alike: the paired ratio stays
        # 1.1 where the ratio of the separate medians would drift with the rounds' spread.
        slow = [1.0, 1.5, 2.0, 2.5, 3.0]
        got = timing.paired_ratios({"compile": [1.1 * x for x in slow], "strata": slow})
        self.assertAlmostEqual(got["compile/strata"], 1.1)
        self.assertAlmostEqual(got["strata/compile"], 1 / 1.1)
        # The median of the rounds' ratios, not the ratio of the medians.
        got = timing.paired_ratios({"a": [2.0, 10.0, 3.0], "b": [1.0, 4.0, 3.0]})
        self.assertAlmostEqual(got["a/b"], 2.0)  # ratios 2, 2.5, 1


@unittest.skipIf(MISSING, MISSING or "")
class SuiteHarness(unittest.TestCase):
    """bench/suite_bench.py's CPU-side logic: the parts, the configuration of every program,
    and one program through its benchmark step with the timing stubbed out (the GPU-only
    timing itself is timing.py's, shared with strata_bench.py)."""

    def setUp(self):
        import suite_bench
        self.sb = suite_bench

    def args(self, **kw):
        import argparse
        return argparse.Namespace(**{"programs": "", "part": "", **kw})

    def test_another_folder_of_programs(self):
        chosen = self.sb.select(self.args(suite_dir=str(BENCH.parent / "examples" / "real")))
        self.assertIn("rotary", [c.key for c in chosen])
        self.assertNotIn("mcfuser_s7", [c.key for c in chosen])

    def test_parts_cover_every_program_once(self):
        every = [c.key for c in self.sb.select(self.args())]
        self.assertEqual(every, sorted(p.stem for p in (BENCH / "suite").glob("*.strata")))
        parts = [c.key for i in range(1, 9) for c in self.sb.select(self.args(part=f"{i}/8"))]
        self.assertEqual(sorted(parts), every)
        chosen = self.sb.select(self.args(programs="mcfuser_s7,mcfuser_g1"))
        self.assertEqual([c.key for c in chosen], ["mcfuser_s7", "mcfuser_g1"])
        for bad in ("0/8", "9/8", "x", "1/0"):
            with self.assertRaises(SystemExit):
                self.sb.select(self.args(part=bad))
        with self.assertRaises(SystemExit):
            self.sb.select(self.args(programs="no_such_program"))

    def test_every_program_gets_its_baselines(self):
        for cfg in self.sb.select(self.args()):
            with self.subTest(program=cfg.key):
                self.assertEqual(cfg.bytes, cfg.program.bytes)
                self.assertEqual(cfg.output, cfg.program.output_shapes())
                self.assertEqual(cfg.sdpa_fn is not None,
                                 any(op.kind == "softmax" for op in cfg.program.ops))

    def test_bench_program_and_report_on_the_cpu(self):
        import report
        import timing

        calls = []

        def fake_time(launch, sets, runs=100, **_):
            for i in range(sets):
                launch(i)
            calls.append(sets)
            return {"median_us": 10.0 + len(calls), "sets": sets, "passes": 1}

        saved = (timing.time_launches, timing.sets_for, torch.cuda.synchronize)
        timing.time_launches, timing.sets_for = fake_time, lambda nbytes: 2
        torch.cuda.synchronize = lambda: None
        try:
            cfg = self.sb.select(self.args(programs="mcfuser_s7"))[0]
            make = cfg.make_inputs
            cfg.make_inputs = lambda seed=0: make(seed=seed, device="cpu")
            with contextlib.redirect_stdout(io.StringIO()):
                r = self.sb.bench_program(cfg, None, ["eager", "sdpa-flash"], runs=100, seed=0)
        finally:
            timing.time_launches, timing.sets_for, torch.cuda.synchronize = saved
        eager = r["systems"]["eager"]
        self.assertTrue(eager["ok"], eager)  # fp16 eager within 1e-2 of the float64 reference
        self.assertLess(eager["rel_l2_error"], 1e-2)
        self.assertEqual(eager["median_us"], 11.0)
        # PyTorch's CPU build has a flash backend of its own: the SDPA rewrite runs and checks.
        self.assertTrue(r["systems"]["sdpa-flash"]["ok"])
        self.assertLess(r["systems"]["sdpa-flash"]["rel_l2_error"], 1e-2)
        self.assertTrue(r["attention"])
        self.assertEqual(r["outputs"], [[1, 512, 64]])
        device = {"name": "CPU", "arch": "-", "sm_count": 0, "l2_bytes": 2**20, "torch": "-",
                  "cuda": "-", "python": "-", "bandwidth_Bps": 1e12, "tensor_peak_flops": 1e14,
                  "launch_us": 2.0}
        doc = report.build(device, [r], {}, {"mcfuser_s7": {"source": "x"}}, {}, 0.01,
                           kind="suite")
        md = report.markdown(doc)
        self.assertIn("| mcfuser_s7 | launch | 11.00 | — | — | 12.00 | — | — | eager | 2.00 | — | 0.18 |", md)
        self.assertIn("no program below 1.0× MISSED (1 without a strata speedup: mcfuser_s7)", md)


STAND_IN_TOOL = '''#!/usr/bin/env python3
# Answers like the strata tool: --help lists optimize; optimize writes a result document;
# profile writes a report whose one candidate failed to compile. Logs every call.
import json, sys
from pathlib import Path
args = sys.argv[1:]
with open(Path(__file__).with_suffix(".log"), "a") as f:
    f.write(" ".join(args) + "\\n")
if args[0] == "--help":
    print("Subcommands:\\n  optimize  search\\n  profile   time")
elif args[0] == "optimize":
    Path(args[args.index("-o") + 1]).write_text(json.dumps({"ranked": []}))
elif args[0] == "profile":
    Path(args[args.index("-o") + 1]).write_text(json.dumps({"candidates": [
        {"index": 0, "origin": "stand-in", "status": "compile_error", "variant": "default",
         "error": "stand-in tool"}]}))
'''


@unittest.skipIf(MISSING, MISSING or "")
class SuiteRunOnTheCpu(unittest.TestCase):
    """suite_bench.run_steps end to end with a stand-in for the tool and the GPU parts stubbed:
    inputs written for `strata profile`, candidates from a search directory or a search, the
    tool's calls, the report on disk."""

    def test_run_steps(self):
        import argparse

        import strata_bench
        import suite_bench
        import timing

        with tempfile.TemporaryDirectory() as d:
            d = Path(d)
            tool = d / "strata"
            tool.write_text(STAND_IN_TOOL)
            tool.chmod(0o755)
            (d / "search").mkdir()
            (d / "search" / "mcfuser_g1.json").write_text("{}")
            device = {"name": "NVIDIA H100 80GB HBM3", "arch": "sm_90a", "sm_count": 132,
                      "l2_bytes": 50 * 2**20, "torch": "-", "cuda": "-", "python": "-",
                      "bandwidth_Bps": 3e12, "tensor_peak_flops": 7e14, "launch_us": 1.0}
            args = argparse.Namespace(
                out=str(d / "out"), strata=str(tool), programs="mcfuser_g1,mcfuser_s7", part="",
                modes="eager,sdpa-flash", top=3, variants="default", search_dir=str(d / "search"),
                search_time=5.0, runs=100, seed=0, budget_s=0, work=str(d / "work"), phase="all",
                no_head_to_head=False)
            saved = (strata_bench.measure_device, timing.time_launches, timing.sets_for,
                     torch.cuda.synchronize, suite_bench.SuiteProgram.make_inputs)
            make = suite_bench.SuiteProgram.make_inputs
            strata_bench.measure_device = lambda: dict(device)
            timing.time_launches = lambda launch, sets, runs=100, **_: (
                [launch(i) for i in range(sets)], {"median_us": 7.0})[1]
            timing.sets_for = lambda nbytes: 2
            torch.cuda.synchronize = lambda: None
            suite_bench.SuiteProgram.make_inputs = (
                lambda self, seed=0, device="cuda": make(self, seed=seed, device="cpu"))
            try:
                (d / "out" / "profile").mkdir(parents=True)
                with contextlib.redirect_stdout(io.StringIO()):
                    suite_bench.run_steps(args, d / "out")
            finally:
                (strata_bench.measure_device, timing.time_launches, timing.sets_for,
                 torch.cuda.synchronize, suite_bench.SuiteProgram.make_inputs) = saved
            # float64 input files for `strata profile`, one per input
            self.assertEqual(sorted(p.name for p in (d / "work" / "inputs" / "mcfuser_s7").iterdir()),
                             ["K.f64", "Q.f64", "V.f64"])
            self.assertEqual((d / "work" / "inputs" / "mcfuser_g1" / "A.f64").stat().st_size,
                             512 * 64 * 8)
            calls = (d / "strata.log").read_text().splitlines()
            self.assertTrue(any(c.startswith("optimize") and "mcfuser_s7.strata" in c
                                and "--time-limit 5.0" in c for c in calls), calls)
            profiles = [c for c in calls if c.startswith("profile") and "--compile-only" not in c]
            self.assertEqual(len(profiles), 2)
            self.assertTrue(all("--inputs" in c and "--variants default" in c for c in profiles))
            plans = json.loads((d / "out" / "plans.json").read_text())
            self.assertEqual(plans["mcfuser_g1"]["documents"], [str(d / "search" / "mcfuser_g1.json")])
            self.assertIn("strata optimize --time-limit 5", plans["mcfuser_s7"]["source"])
            (report_json,) = (d / "out").glob("h100-*.json")
            doc = json.loads(report_json.read_text())
            self.assertEqual(doc["kind"], "suite")
            rows = {r["config"]: r for r in doc["results"]}
            self.assertEqual(set(rows), {"mcfuser_g1", "mcfuser_s7"})
            self.assertTrue(rows["mcfuser_s7"]["systems"]["eager"]["ok"])
            self.assertIn("sdpa-flash", rows["mcfuser_s7"]["systems"])
            self.assertNotIn("sdpa-flash", rows["mcfuser_g1"]["systems"])
            self.assertNotIn("strata", rows["mcfuser_g1"]["systems"])  # its candidate failed
            self.assertEqual(doc["calibration"]["candidates_by_status"], {"compile_error": 2})
            md = report_json.with_suffix(".md").read_text()
            self.assertIn("2 without a strata speedup: mcfuser_g1, mcfuser_s7", md)
