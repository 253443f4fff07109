"""Tests of bench/strata_program.py (standard library only) and of the suite's programs:
the Python reader agrees with the strata tool on op names, signatures and output shapes, reads
recipes and finds attention patterns; every suite program parses in both, has its origin line,
fp16 tensors and inputs below 2 GB.

The comparisons with the tool need `strata` (STRATA_TOOL, which CTest sets, else
build/strata); without one they are skipped with a message saying so."""

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

SUITE = BENCH / "suite"
TOOL = os.environ.get("STRATA_TOOL") or str(BENCH.parent / "build" / "strata")
HAVE_TOOL = Path(TOOL).is_file() and os.access(TOOL, os.X_OK)
NO_TOOL = f"no strata tool at {TOOL} (build it, or set STRATA_TOOL): comparison with the tool skipped"
if not HAVE_TOOL:
    print(f"test_strata_program: {NO_TOOL}", file=sys.stderr)


def check(text):
    """`strata check` on program text: (exit code, stdout + stderr)."""
    with tempfile.NamedTemporaryFile("w", suffix=".strata", delete=False) as f:
        f.write(text)
    try:
        r = subprocess.run([TOOL, "check", f.name], text=True, capture_output=True)
        return r.returncode, r.stdout + r.stderr
    finally:
        os.unlink(f.name)


ATTENTION = """# attention
input Q: f16[8, 4, 128]
input K: f16[8, 4096, 128]
input V: f16[8, 4096, 128]  # recipe: normal(1)
S = mul_scalar(matmul(Q, transpose(K)), 0.088388)
O = matmul(softmax(S, dim=-1), V)
output O
"""


class Parse(unittest.TestCase):
    def test_shapes_attrs_and_defaults(self):
        p = sp.parse("""# origin line
input X: f32[4, 8, 16]
A = sum(X, dim=-1, to=4)
B = mean(X, 1)
C = concat(A, A, dim=2)
D = mul_scalar(rms_norm(C, dim=0), c=-2.5e-1)
E = slice(transpose(X), -2, 2, 10)
output D, B, E
""", "x.strata")
        self.assertEqual(p.origin, "origin line")
        t = p.tensors
        self.assertEqual(t["A"].shape, (4, 8, 4))
        self.assertEqual(t["B"].shape, (4, 1, 16))
        self.assertEqual(t["C"].shape, (4, 8, 8))
        self.assertEqual(t["D"].shape, (4, 8, 8))
        self.assertEqual(t["E"].shape, (4, 8, 8))
        ops = {op.out: op for op in p.ops}
        self.assertEqual(ops["A"].attrs, {"dim": 2, "to": 4})  # normalized dim
        self.assertEqual(ops["B"].attrs, {"dim": 1, "to": 1})  # default to
        self.assertEqual(ops["D"].attrs, {"scalar": -0.25})  # alias c
        self.assertEqual(ops["E"].attrs, {"dim": 1, "start": 2, "end": 10})
        norm = p.producer(ops["D"].inputs[0])
        self.assertEqual((norm.kind, norm.attrs), ("rms_norm", {"dim": 0, "eps": 0.0}))
        self.assertEqual(p.outputs, ["D", "B", "E"])
        self.assertEqual([o.kind for o in p.ops],
                         ["sum", "mean", "concat", "rms_norm", "mul_scalar", "transpose", "slice"])

    def test_bytes_and_flops(self):
        p = sp.parse(ATTENTION)
        n_in = 8 * 4 * 128 + 2 * 8 * 4096 * 128
        self.assertEqual(p.bytes, 2 * (n_in + 8 * 4 * 128))
        self.assertEqual(p.flops, 2 * (2 * 8 * 4 * 4096 * 128))
        self.assertEqual(p.output_shapes(), [(8, 4, 128)])

    def test_errors_name_line_and_column(self):
        cases = [
            ("input X: f16[4]\nO = matmull(X, X)\noutput O\n", r"x:2:5: error: unknown op `matmull`"),
            ("input X: f16[4]\nO = exp(Y)\noutput O\n", r"x:2:9: error: undefined name `Y`"),
            ("input X: f16[4, 2]\nO = sum(X)\noutput O\n", r"x:2:5: .*missing argument `dim`.*sum\(x, dim, to=1\)"),
            ("input X: f16[4, 2]\nO = sum(X, 1.5)\noutput O\n", r"x:2:12: .*expected an integer"),
            ("input X: f16[2, 3]\ninput W: f16[4, 5]\nO = matmul(X, W)\noutput O\n",
             r"x:3:5: .*inner dimensions differ"),
            ("input X: f16[4]\nO = exp(X)\n", r"no `output` statement"),
            ("input X: f64[4]\nO = exp(X)\noutput O\n", r"x:1:10: error: unknown dtype `f64`"),
            ("input X: f16[4]\nO = sub(X, X) X\noutput O\n", r"x:2:15: .*expected end of line"),
            ("input X: f16[4]  # recipe: weird(1)\nO = exp(X)\noutput O\n", r"unknown recipe `weird`"),
            ("input X: f16[4]  # recipe: normal(1, 2)\nO = exp(X)\noutput O\n", r"takes 1 argument"),
            ("input X: f16[4]\nO = exp(X)\nO = exp(X)\noutput O\n", r"x:3:1: error: duplicate name `O`"),
            ("input X: f16[4]  # recipe normal(1)\nO = exp(X)\noutput O\n",
             r"x:1:1: error: malformed recipe comment"),
        ]
        for text, pattern in cases:
            with self.subTest(text=text):
                with self.assertRaisesRegex(sp.ProgramError, pattern):
                    sp.parse(text, "x")

    def test_recipes_annotated_and_default(self):
        p = sp.parse("""input X: f16[4, 8]
input W: f16[8, 8]
input G: f16[8]  # recipe: gain
input C: f16[4, 8]  # recipe: rope_cos(500000)
input U: f16[4, 8]  #recipe:uniform(-1, 0.5)
O = add(mul(matmul(mul(X, G), W), C), U)
output O
""")
        self.assertEqual(p.recipe("X").text(), "normal(1)")
        self.assertEqual(p.recipe("W").text(), "weight")  # a matmul's right operand
        self.assertEqual(p.recipe("G").text(), "gain")
        self.assertEqual(p.recipe("C").text(), "rope_cos(500000)")
        self.assertEqual(p.recipe("U").args, (-1.0, 0.5))
        # Another comment is no recipe.
        p = sp.parse("input X: f16[4]  # the recipe is the default\nO = exp(X)\noutput O\n")
        self.assertEqual(p.recipe("X").text(), "normal(1)")


class AttentionPatterns(unittest.TestCase):
    def test_scaled_attention_is_found(self):
        p = sp.parse(ATTENTION)
        (pat,) = sp.attention_patterns(p)
        self.assertEqual((pat["q"], pat["k"], pat["v"], pat["out"]), ("Q", "K", "V", "O"))
        self.assertAlmostEqual(pat["scale"], 0.088388)
        self.assertEqual(len(pat["dead"]), 4)  # transpose, matmul, mul_scalar, softmax

    def test_scale_on_q_and_no_scale(self):
        p = sp.parse(ATTENTION.replace("S = mul_scalar(matmul(Q, transpose(K)), 0.088388)",
                                       "S = matmul(mul_scalar(Q, 0.5), transpose(K))"))
        (pat,) = sp.attention_patterns(p)
        self.assertEqual((pat["q"], pat["scale"]), ("Q", 0.5))
        p = sp.parse(ATTENTION.replace("mul_scalar(matmul(Q, transpose(K)), 0.088388)",
                                       "matmul(Q, transpose(K))"))
        self.assertEqual(sp.attention_patterns(p)[0]["scale"], 1.0)

    def test_no_pattern_when_an_intermediate_is_used_elsewhere(self):
        # The scores are an output too: SDPA would not compute them.
        p = sp.parse(ATTENTION.replace("output O", "output O, S"))
        self.assertEqual(sp.attention_patterns(p), [])
        # K not transposed (stored as [D, N]), softmax over another dim, no softmax.
        self.assertEqual(sp.attention_patterns(sp.parse("""input Q: f16[8, 4, 128]
input K: f16[8, 128, 64]
input V: f16[8, 64, 128]
O = matmul(softmax(matmul(Q, K), dim=-1), V)
output O
""")), [])
        self.assertEqual(sp.attention_patterns(sp.parse(ATTENTION.replace("dim=-1", "dim=1"))), [])
        self.assertEqual(sp.attention_patterns(sp.parse("""input A: f16[4, 8]
input B: f16[8, 8]
input C: f16[8, 8]
O = matmul(matmul(A, B), C)
output O
""")), [])


class Suite(unittest.TestCase):
    def setUp(self):
        self.files = sorted(SUITE.glob("*.strata"))

    def test_at_least_40_programs_with_origin_fp16_and_inputs_below_2gb(self):
        self.assertGreaterEqual(len(self.files), 40)
        for f in self.files:
            with self.subTest(program=f.stem):
                first = f.read_text().split("\n", 1)[0]
                self.assertRegex(first, r"^# \S")
                p = sp.load(f)
                self.assertTrue(all(t.dtype == "f16" for t in p.inputs))
                self.assertLess(p.input_bytes, 2 * 10**9)
                self.assertRegex(f.stem, r"^[a-z0-9_]+$")

    def test_suite_covers_the_issue(self):
        names = {f.stem for f in self.files}
        for i in range(1, 13):
            self.assertIn(f"mcfuser_g{i}", names)
        for i in range(1, 10):
            self.assertIn(f"mcfuser_s{i}", names)
        kinds = set()
        extents = set()
        for f in self.files:
            p = sp.load(f)
            kinds |= {op.kind for op in p.ops}
            for t in p.tensors.values():
                extents |= set(t.shape)
            if any(op.kind == "rms_norm" and op.attrs["eps"] > 0 for op in p.ops):
                kinds.add("rms_norm with eps")
        for k in ("softmax", "layer_norm", "transpose", "slice", "concat", "silu", "gelu",
                  "rms_norm with eps", "mul_scalar"):
            self.assertIn(k, kinds)
        for n in (128256, 152064, 18944, 14336):
            self.assertIn(n, extents)

    @unittest.skipUnless(HAVE_TOOL, NO_TOOL)
    def test_tool_agrees_on_every_program(self):
        for f in self.files:
            with self.subTest(program=f.stem):
                r = subprocess.run([TOOL, "check", str(f)], text=True, capture_output=True)
                self.assertEqual(r.returncode, 0, r.stderr)
                outs = re.search(r"Outputs: (.*)\.$", r.stdout.strip()).group(1)
                shapes = [tuple(int(d) for d in m.split(", "))
                          for m in re.findall(r"\w+: f16\[([^\]]*)\]", outs)]
                self.assertEqual(shapes, sp.load(f).output_shapes())


@unittest.skipUnless(HAVE_TOOL, NO_TOOL)
class AgainstTheTool(unittest.TestCase):
    def test_program_op_names(self):
        rc, msg = check("input X: f32[4, 4]\nO = frobnicate(X)\noutput O\n")
        self.assertEqual(rc, 2)
        names = re.search(r"expected one of: (.*)$", msg.strip()).group(1).split(", ")
        self.assertEqual(sorted(names), sorted(sp.SIGNATURES))

    def test_signatures_and_aliases(self):
        for op in sp.SIGNATURES:
            with self.subTest(op=op):
                rc, msg = check(f"input X: f32[4, 4]\nO = {op}()\noutput O\n")
                self.assertEqual(rc, 2)
                self.assertIn(f": {sp.signature_text(op)}", msg)
                rc, msg = check(f"input X: f32[4, 4]\nO = {op}(X, zzz=1)\noutput O\n")
                expected = sp.SIGNATURES[op][0][:1] + [a[0] for a in sp.SIGNATURES[op][1]]
                aliases = {v: k for (o, k), v in sp.ALIASES.items() if o == op}
                listed = ", ".join(n + (f" (or {aliases[n]})" if n in aliases else "")
                                   for n in expected)
                if len(sp.SIGNATURES[op][0]) == 1:
                    self.assertIn(f"expected one of: {listed}", msg)


if __name__ == "__main__":
    unittest.main()
