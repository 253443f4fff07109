"""Tests of bench/ranking_causes.py: the causes of discordant pairs within programs, the
shortfall's split over them and the run-to-run noise, on hand-made points."""

import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import ranking_causes as rc  # noqa: E402


def kernel(thr_us, lat_us=0.0, library=0, threads=128, forloop=1, barriers=0, register=0):
    return {"library": library, "t_throughput_us": thr_us, "t_latency_us": lat_us,
            "threads": 0 if library else threads, "forloop": forloop,
            "loop_barriers": barriers, "register_loads": register}


def point(record, config, graph, meas_us, pred_us, kernels):
    return {"record": record, "config": config, "graph": graph, "measured_s": meas_us * 1e-6,
            "predicted_s": pred_us * 1e-6, "kernels": kernels}


class Causes(unittest.TestCase):
    def test_structure_and_term_of_a_pair(self):
        fast = point("r", "attn_x", "a", 20.0, 10.0, [kernel(6.0, lat_us=1.0)])
        slow = point("r", "attn_x", "b", 12.0, 14.0, [kernel(2.0, lat_us=9.0, forloop=8,
                                                             barriers=3)])
        # Same kernel count, a looping kernel in an attention program.
        self.assertEqual(rc.structure_cause(fast, slow, "r:attn_x", 0.03), "attention loop")
        # The slower-predicted graph is put behind by its latency bound's excess.
        self.assertEqual(rc.term_cause(fast, slow, 0.03, 3.38e-6), "latency excess")
        lib = point("r", "mm", "c", 20.0, 10.0, [kernel(6.0, library=1)])
        self.assertEqual(rc.structure_cause(lib, slow, "r:mm", 0.03), "library vs customized")
        near = point("r", "mm", "d", 12.1, 9.0, [kernel(5.0)])
        self.assertEqual(rc.structure_cause(near, slow, "r:mm", 0.03), "noise")
        split = point("r", "mm", "e", 30.0, 10.0, [kernel(1.0), kernel(1.0)])
        self.assertEqual(rc.structure_cause(split, slow, "r:mm", 0.03), "split forms")
        self.assertEqual(rc.term_cause(split, slow, 0.03, 3.38e-6), "latency excess")
        # Without latency excess: the slower-predicted graph's extra kernel (its launch), or
        # its longer throughput bound.
        one = point("r", "mm", "f", 40.0, 9.0, [kernel(5.5)])
        two = point("r", "mm", "g", 20.0, 12.0, [kernel(1.0), kernel(1.0)])
        self.assertEqual(rc.term_cause(one, two, 0.03, 3.38e-6), "launch")
        longer = point("r", "mm", "h", 20.0, 15.0, [kernel(8.0)])
        self.assertEqual(rc.term_cause(one, longer, 0.03, 3.38e-6), "throughput")

    def test_shortfall_is_shared_over_discordant_pairs(self):
        # Program p: three candidates, one pair discordant (ρ = 0.5); program q in order (ρ = 1);
        # program t predicted all equal (no discordant pair, ρ undefined: not counted).
        pts = [point("r", "p", "a", 10.0, 10.0, [kernel(5.0)]),
               point("r", "p", "b", 30.0, 20.0, [kernel(15.0)]),
               point("r", "p", "c", 20.0, 30.0, [kernel(6.0), kernel(6.0)]),
               point("r", "q", "a", 1.0, 1.0, [kernel(1.0)]),
               point("r", "q", "b", 2.0, 2.0, [kernel(2.0)]),
               point("r", "q", "c", 3.0, 3.0, [kernel(3.0)])]
        n, by_structure, by_term, by_family = rc.shortfall(pts, 0.03, 3.38e-6)
        self.assertEqual(n, 2)
        self.assertAlmostEqual(sum(by_structure.values()), 0.5)
        self.assertAlmostEqual(by_structure["split forms"], 0.5)
        self.assertAlmostEqual(by_term["launch"], 0.5)
        self.assertAlmostEqual(by_family["p"], 0.5)
        self.assertAlmostEqual(by_family["q"], 0.0)

    def test_noise_figures(self):
        pts = [point(r, "p", g, t, 1.0, [kernel(1.0)])
               for r, times in (("r1", (1.0, 2.0, 3.0)), ("r2", (1.1, 2.0, 2.5)))
               for g, t in zip("abc", times)]
        spreads, rhos = rc.noise_figures(pts)
        self.assertEqual(len(spreads), 3)
        self.assertAlmostEqual(spreads[-1], 1.2)
        self.assertEqual(rhos, [1.0])

    def test_family(self):
        self.assertEqual(rc.family("mcfuser_s7"), "mcfuser")
        self.assertEqual(rc.family("llama3_8b_qkv_d4"), "qkv")
        self.assertEqual(rc.family("gatedmlp_b1"), "gatedmlp")


if __name__ == "__main__":
    unittest.main()
