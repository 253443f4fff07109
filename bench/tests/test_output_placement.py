"""Tests of bench/output_placement.py: the placement of a library's outputs read through
ctypes from small C libraries (packed Q, K, V; none declared: dense; some functions missing;
a placement out of bounds), and the checks of a placement."""

import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import output_placement as op  # noqa: E402

# Q, K, V: the column blocks 0-4, 4-6 and 6-8 of a [3, 8] product, packed in Q's allocation.
PACKED = """
int strata_output_base(int i) { return i >= 0 && i < 3 ? 0 : -1; }
long long strata_output_offset(int i) { static const long long o[] = {0, 4, 6}; return o[i]; }
long long strata_output_stride(int i, int d) { return d == 0 ? 8 : 1; }
long long strata_output_alloc(int i) { return i == 0 ? ALLOC : 0; }
"""
SHAPES = [(3, 4), (3, 2), (3, 2)]


class OutputPlacementTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def library(self, name, source):
        src = Path(self.dir.name) / f"{name}.c"
        so = Path(self.dir.name) / f"{name}.so"
        src.write_text(source)
        subprocess.run([self.cc, "-shared", "-fPIC", str(src), "-o", str(so)], check=True)
        return ctypes.CDLL(str(so))

    def test_packed_outputs_are_read(self):
        lib = self.library("packed", "#define ALLOC 24\n" + PACKED)
        p = op.read(lib, SHAPES)
        self.assertEqual(p, [{"base": 0, "offset": 0, "strides": [8, 1], "alloc": 24},
                             {"base": 0, "offset": 4, "strides": [8, 1], "alloc": 0},
                             {"base": 0, "offset": 6, "strides": [8, 1], "alloc": 0}])
        self.assertFalse(op.is_dense(p, 0, SHAPES[0]))

    def test_a_library_without_the_functions_is_dense(self):
        lib = self.library("old", "int strata_workspace_bytes(void) { return 0; }\n")
        p = op.read(lib, SHAPES)
        self.assertEqual(p, op.dense(SHAPES))
        self.assertEqual(p[1], {"base": 1, "offset": 0, "strides": [2, 1], "alloc": 6})
        self.assertTrue(all(op.is_dense(p, i, s) for i, s in enumerate(SHAPES)))

    def test_some_functions_missing_or_a_placement_out_of_bounds_raise(self):
        partial = self.library("partial", "int strata_output_base(int i) { return i; }\n")
        with self.assertRaisesRegex(ValueError, "strata_output_offset, strata_output_stride, "
                                                "strata_output_alloc missing"):
            op.read(partial, SHAPES)
        short = self.library("short", "#define ALLOC 23\n" + PACKED)
        with self.assertRaisesRegex(ValueError, "output 2: reaches element 24 of output 0's "
                                                "allocation of 23"):
            op.read(short, SHAPES)

    def test_checks(self):
        good = [{"base": 0, "offset": 0, "strides": [8, 1], "alloc": 24},
                {"base": 0, "offset": 4, "strides": [8, 1], "alloc": 0}]
        op.check(good, SHAPES[:2])
        cases = [({"base": 2}, "base 2 is not an output"),
                 ({"alloc": 6}, "lies in output 0's allocation but allocates 6"),
                 ({"offset": -1}, "offset -1"),
                 ({"strides": [8]}, "strides \\[8\\] for shape \\[3, 2\\]")]
        for change, message in cases:
            bad = [dict(good[0]), dict(good[1], **change)]
            with self.subTest(change=change), self.assertRaisesRegex(ValueError, message):
                op.check(bad, SHAPES[:2])
        with self.assertRaisesRegex(ValueError, "its base, output 1, lies in another"):
            op.check([dict(good[0], base=1), good[1]], SHAPES[:2])


if __name__ == "__main__":
    unittest.main()
