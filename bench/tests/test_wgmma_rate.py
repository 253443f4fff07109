"""Tests of bench/wgmma_rate.py that need no GPU and no build: the records' timings of the two
variants, the μGraphs they name, and the prediction at another wgmma rate."""

import json
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import wgmma_rate  # noqa: E402


class Records(unittest.TestCase):
    def test_both_variants_of_both_programs(self):
        points = [p for rec in wgmma_rate.RECORDS for p in wgmma_rate.timed(rec)]
        self.assertEqual(len(points), 60)
        self.assertEqual({p[0] for p in points},
                         {"llama32_1b_attn_p4096", "llama32_1b_attn_qknorm_p1024"})
        self.assertEqual({p[2] for p in points}, set(wgmma_rate.VARIANTS))
        self.assertEqual(len({p[1] for p in points}), 18)
        # The 64-row form that ran 463 µs with the knob.
        best = min(p[3] for p in points if p[2] == "wgmma=1" and "axis1_div2" in p[1]
                   and ".r0." in p[1])
        self.assertAlmostEqual(best, 463.29, places=1)

    def test_origins_resolve_to_the_graphs_profiled(self):
        with tempfile.TemporaryDirectory() as tmp:
            rows = wgmma_rate.graph_of(
                "OUT/w2/rows64/llama32_1b_attn_p4096.r0.k0_axis1_div2.json", Path(tmp))
            ranked = wgmma_rate.graph_of(
                "bench/search/suite/llama32_1b_attn_p4096.json: ranked[0].graph", Path(tmp))
            g64 = json.loads(rows.read_text())
            g = json.loads(ranked.read_text())
        grid = [op for op in g["ops"] if op.get("op") == "customized"][0]["block_graph"]["grid"]
        grid64 = [op for op in g64["ops"]
                  if op.get("op") == "customized"][0]["block_graph"]["grid"]
        self.assertEqual(grid, [8, 128, 1])  # 128 query rows per block
        self.assertEqual(grid64, [8, 64, 1])  # 256


class Prediction(unittest.TestCase):
    DOC = {"wgmma_tensor_flops": 4e15, "predicted_us": 0, "kernels": [
        {"wgmma_flops": 4e9, "t_throughput_us": 100.0, "t_latency_us": 20.0,
         "predicted_us": 103.0, "blocks": 264, "waves": 2, "underfill": 1.0},
        {"wgmma_flops": 0.0, "t_throughput_us": 5.0, "t_latency_us": 9.0,
         "predicted_us": 12.0, "blocks": 1, "waves": 1, "underfill": 132.0}]}

    def test_the_model_rate_reproduces_the_document(self):
        self.assertAlmostEqual(wgmma_rate.predicted_us(self.DOC, 4e15), 115.0)

    def test_another_rate_moves_the_throughput_bound(self):
        # 4 GFLOP at 2 PFLOP/s instead of 4: 1 µs more (two full waves: no tail); the second
        # kernel, without wgmma FLOPs, stays latency-bound.
        self.assertAlmostEqual(wgmma_rate.predicted_us(self.DOC, 2e15), 116.0)
        # Free: the first kernel 1 µs less.
        self.assertAlmostEqual(wgmma_rate.predicted_us(self.DOC, float("inf")), 114.0)


if __name__ == "__main__":
    unittest.main()
