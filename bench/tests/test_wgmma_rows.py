"""Tests of bench/wgmma_rows.py that need no GPU: regridded graphs and the summary table."""

import json
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import wgmma_rows  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


class Regrid(unittest.TestCase):
    def setUp(self):
        with open(ROOT / "bench/search/suite/mcfuser_s5.json") as f:
            self.graph = json.load(f)["ranked"][0]["graph"]

    def test_axis_divided_when_the_extents_divide(self):
        grid = self.graph["ops"][0]["block_graph"]["grid"]
        g = wgmma_rows.regridded(self.graph, 0, 1, 2)
        self.assertIsNotNone(g)
        self.assertEqual(g["ops"][0]["block_graph"]["grid"][1], grid[1] // 2)
        self.assertEqual(self.graph["ops"][0]["block_graph"]["grid"], grid)  # a copy

    def test_refused_when_the_grid_does_not_divide(self):
        grid = self.graph["ops"][0]["block_graph"]["grid"]
        self.assertIsNone(wgmma_rows.regridded(self.graph, 0, 1, grid[1] * 2))

    def test_variants_name_kernel_axis_and_factor(self):
        names = [d for d, _ in wgmma_rows.variants(self.graph)]
        self.assertIn("k0_axis1_div2", names)
        self.assertTrue(all(n.startswith("k0_axis") for n in names))


class Summary(unittest.TestCase):
    def test_fastest_correct_per_variant(self):
        doc = {"candidates": [
            {"variant": "default", "status": "ok", "timing": {"median_us": 10.0}, "origin": "a"},
            {"variant": "wgmma=1", "status": "ok", "timing": {"median_us": 8.0}, "origin": "b"},
            {"variant": "wgmma=1", "status": "ok", "timing": {"median_us": 9.0}, "origin": "c"},
            {"variant": "wgmma=1", "status": "wrong_answer", "origin": "d"},
            {"variant": "default", "status": "skipped"}]}
        best, counts = wgmma_rows.best_per_variant(doc)
        self.assertEqual(best["wgmma=1"], (8.0, "b"))
        self.assertEqual(best["default"], (10.0, "a"))
        self.assertEqual(counts["wgmma=1"], (2, 3))
        self.assertEqual(counts["default"], (1, 1))


if __name__ == "__main__":
    unittest.main()
