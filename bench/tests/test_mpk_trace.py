"""Tests of bench/mpk_trace.py: the per-op-kind summary of a traced megakernel step."""

import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import mpk_trace  # noqa: E402


def task_file(op_of_task, names):
    fields = 8
    tab = []
    for op in op_of_task:
        tab += [op, 0, 0, 0, 0, 0, 0, 0]
    return {"tasks": tab, "task_fields": fields, "op_names": names}


class SummaryTest(unittest.TestCase):
    def setUp(self):
        # Two layers of (a, b) plus a head; two workers.
        self.names = ["embed", "layers.0.a", "layers.0.b", "layers.1.a", "layers.1.b", "head"]
        self.tasks = task_file([0, 1, 1, 2, 3, 3, 4, 5], self.names)
        # worker, taken, ready, end (ns)
        self.trace = [0, 1000, 1000, 2000,     # embed: ends 2000
                      0, 2000, 2500, 4000,     # layers.0.a
                      1, 1500, 2500, 5000,     # layers.0.a: op ends 5000
                      0, 4000, 5000, 6000,     # layers.0.b: ends 6000
                      0, 6000, 6000, 7000,     # layers.1.a
                      1, 5000, 6500, 6800,     # layers.1.a: op ends 7000
                      1, 6800, 7000, 9000,     # layers.1.b: ends 9000
                      0, 7000, 8500, 8600]     # head ends 8600, hidden behind layers.1.b

    def test_stages_sum_to_the_span_and_attribute_by_kind(self):
        s = mpk_trace.summarize(self.tasks, self.trace, workers=2)
        self.assertAlmostEqual(s["span_us"], 8.0)
        kinds = {r["kind"]: r for r in s["by_kind"]}
        self.assertEqual(list(kinds), ["embed", "a", "b", "head"])
        self.assertEqual(kinds["a"]["ops"], 2)
        self.assertEqual(kinds["a"]["tasks"], 4)
        # embed 1000 past the start; a: 3000 + 1000; b: 1000 + 2000; head: 0 (hidden).
        self.assertAlmostEqual(kinds["embed"]["stage_us"], 1.0)
        self.assertAlmostEqual(kinds["a"]["stage_us"], 4.0)
        self.assertAlmostEqual(kinds["b"]["stage_us"], 3.0)
        self.assertAlmostEqual(kinds["head"]["stage_us"], 0.0)
        self.assertAlmostEqual(sum(r["stage_us"] for r in s["by_kind"]), s["span_us"])
        # a's bodies: 1500, 2500, 1000, 300 ns; waits 500, 1000, 0, 1500.
        self.assertAlmostEqual(kinds["a"]["body_mean_us"], 1.325)
        self.assertAlmostEqual(kinds["a"]["body_max_us"], 2.5)
        self.assertAlmostEqual(kinds["a"]["wait_mean_us"], 0.75)
        busy = (1000 + 1500 + 2500 + 1000 + 1000 + 300 + 2000 + 100) / (2 * 8000)
        self.assertAlmostEqual(s["busy"], round(busy, 4))
        self.assertEqual(s["timer_resolution_ns"], 100)
        text = "\n".join(mpk_trace.table(s))
        self.assertIn("| a | 2 | 4 | 4.0 | 50 % |", text)

    def test_kind_names(self):
        self.assertEqual(mpk_trace.op_kind("layers.12.norm_gate_up_silu"), "norm_gate_up_silu")
        self.assertEqual(mpk_trace.op_kind("layers.0.gen.k1"), "gen.k1")
        self.assertEqual(mpk_trace.op_kind("lm_head_argmax_partial"), "lm_head_argmax_partial")
        self.assertEqual(mpk_trace.op_kind("layers.x.y"), "layers.x.y")

    def test_a_task_not_run_or_a_short_trace_is_refused(self):
        bad = list(self.trace)
        bad[4 * 3 + 1:4 * 3 + 4] = [0, 0, 0]  # task 3 never ran
        with self.assertRaisesRegex(ValueError, "task 3"):
            mpk_trace.summarize(self.tasks, bad, workers=2)
        bad = list(self.trace)
        bad[4 * 2] = 2  # worker out of range
        with self.assertRaisesRegex(ValueError, "task 2"):
            mpk_trace.summarize(self.tasks, bad, workers=2)
        with self.assertRaisesRegex(ValueError, "8 tasks"):
            mpk_trace.summarize(self.tasks, self.trace[:-4], workers=2)


if __name__ == "__main__":
    unittest.main()
