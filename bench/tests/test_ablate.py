"""Tests of bench/ablate.py that need no GPU: which emitted sources link cuBLAS."""

import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import ablate  # noqa: E402


class LinkFlags(unittest.TestCase):
    def test_strata_meta_line_decides_cublas(self):
        meta = '// strata-meta: {"graph":"g","nccl":false,"cublas":%s,"kernels":[]}\n'
        self.assertTrue(ablate.uses_cublas("// header\n" + meta % "true" + "int x;\n"))
        self.assertFalse(ablate.uses_cublas(meta % "false"))
        self.assertFalse(ablate.uses_cublas('// strata-meta: {"cublas": tru\n'))
        self.assertFalse(ablate.uses_cublas("// strata-meta: [true]\n"))
        self.assertFalse(ablate.uses_cublas("extern \"C\" int strata_launch();\n"))


if __name__ == "__main__":
    unittest.main()
