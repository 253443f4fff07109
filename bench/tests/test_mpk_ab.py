"""Tests of bench/mpk_ab.py: the side-by-side table of scripts/gpu-mpk-ab.sh."""

import json
import os
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import mpk_ab  # noqa: E402


def record(model, batch, static_ms, queue_ms, ok=True, greedy_equal=True, near_tie=False):
    r = {"model": model, "batch": batch, "kv": 1024,
         "times_ms": {"megakernel_static": static_ms, "megakernel_queue": queue_ms},
         "check": {"static": {"within_tol": ok}, "queue": {"within_tol": True}},
         "greedy": {"equal": greedy_equal}}
    if not greedy_equal:
        r["greedy"]["first_difference"] = {"near_tie": near_tie}
    return r


class AbTest(unittest.TestCase):
    def write(self, out, build, rnd, records):
        d = os.path.join(out, f"{build}-r{rnd}")
        os.makedirs(d)
        with open(os.path.join(d, "mpk-h200-2026-01-01.json"), "w") as f:
            json.dump({"gpu": "H200", "records": records}, f)

    def run_ab(self, out, builds, rounds):
        import contextlib
        import io
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            rc = mpk_ab.main([out, "--builds", *builds, "--rounds", str(rounds)])
        with open(os.path.join(out, "mpk-ab.json")) as f:
            return rc, json.load(f)

    def test_medians_and_ratios(self):
        with tempfile.TemporaryDirectory() as out:
            self.write(out, "before", 1, [record("m", 1, 1.40, 1.30)])
            self.write(out, "before", 2, [record("m", 1, 1.20, 1.32)])
            self.write(out, "after", 1, [record("m", 1, 1.00, 1.10)])
            # a near tie in the greedy tokens still passes
            self.write(out, "after", 2, [record("m", 1, 1.04, 1.12, greedy_equal=False,
                                                near_tie=True)])
            rc, doc = self.run_ab(out, ["before", "after"], 2)
            self.assertEqual(rc, 0)
            b = doc["rows"][0]["builds"]
            self.assertAlmostEqual(b["before"]["static_us"], 1300.0)
            self.assertAlmostEqual(b["before"]["queue_us"], 1310.0)
            self.assertAlmostEqual(b["before"]["best_us"], 1300.0)
            self.assertAlmostEqual(b["after"]["best_us"], 1020.0)
            with open(os.path.join(out, "mpk-ab.md")) as f:
                self.assertIn(f"| {1300 / 1020:.3f} |", f.read())

    def test_failed_check_and_missing_run_fail(self):
        with tempfile.TemporaryDirectory() as out:
            self.write(out, "before", 1, [record("m", 1, 1.0, 1.0)])
            self.write(out, "after", 1, [record("m", 1, 1.0, 1.0, greedy_equal=False)])
            rc, doc = self.run_ab(out, ["before", "after"], 1)
            self.assertEqual(rc, 1)
            self.assertFalse(doc["rows"][0]["builds"]["after"]["passed"])
        with tempfile.TemporaryDirectory() as out:
            self.write(out, "before", 1, [record("m", 1, 1.0, 1.0)])
            rc, _ = self.run_ab(out, ["before", "after"], 1)
            self.assertEqual(rc, 1)


if __name__ == "__main__":
    unittest.main()
