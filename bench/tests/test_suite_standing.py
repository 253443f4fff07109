"""Tests of bench/suite_standing.py: the newest record of each program wins, head-to-head
times are the ones reported, non-suite files are skipped, the summary names what is behind."""

import json
import math
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import suite_standing  # noqa: E402


def row(program, speedup, strata, torch, h2h=None):
    r = {"program": program, "speedup": speedup,
         "systems": {"strata": {"ok": True, "median_us": strata}},
         "best_pytorch": {"mode": "compile", "median_us": torch}}
    if h2h:
        r["head_to_head"] = {"speedup": speedup, "pytorch_us": h2h[0], "strata_us": h2h[1]}
    return r


class Standing(unittest.TestCase):
    def setUp(self):
        self.dir = Path(tempfile.mkdtemp())
        self.old = self.write("old", "suite", [row("a", 0.9, 10.0, 9.0), row("b", 1.5, 2.0, 3.0),
                                               row("c", 0.8, 5.0, 4.0)])
        # The newer record re-timed a head to head: its figure, and its times, win.
        self.new = self.write("new", "suite", [row("a", 1.02, 10.0, 9.0, h2h=(10.4, 10.2))])
        self.paper = self.write("paper", "paper", [row("c", 3.0, 1.0, 3.0)])

    def write(self, stem, kind, results):
        f = self.dir / f"h200-{stem}.json"
        f.write_text(json.dumps({"kind": kind, "results": results}))
        return f

    def test_newest_record_wins_and_non_suite_records_are_skipped(self):
        latest = suite_standing.standing([self.old, self.new, self.paper], {"a", "b", "c", "d"})
        self.assertEqual(latest["a"]["record"], "h200-new")
        self.assertAlmostEqual(latest["a"]["speedup"], 1.02)
        self.assertEqual((latest["a"]["pytorch_us"], latest["a"]["strata_us"]), (10.4, 10.2))
        self.assertTrue(latest["a"]["head_to_head"])
        self.assertEqual(latest["c"]["record"], "h200-old")  # the paper record is not the suite's
        self.assertFalse(latest["b"]["head_to_head"])
        self.assertNotIn("d", latest)
        # In the other order the old record is the newest.
        self.assertEqual(suite_standing.standing([self.new, self.old], {"a"})["a"]["speedup"], 0.9)

    def test_summary_and_markdown_name_what_is_behind(self):
        programs = ["a", "b", "c", "d"]
        latest = suite_standing.standing([self.old, self.new], set(programs))
        sm = suite_standing.summary(latest, programs)
        self.assertAlmostEqual(sm["geomean"], math.exp((math.log(1.02) + math.log(1.5)
                                                        + math.log(0.8)) / 3))
        self.assertEqual(sm["below_parity"], ["c"])
        self.assertEqual(sm["never_timed"], ["d"])
        md = suite_standing.markdown(latest, programs, below=1.05)
        self.assertIn("| c | 0.800× | 5.00 | compile | 4.00 | no | h200-old |", md)
        self.assertIn("| a | 1.020× | 10.20 | compile | 10.40 | yes | h200-new |", md)
        self.assertNotIn("| b |", md)  # 1.5× is not below 1.05×
        self.assertIn("below 1.0×: 1 (c); never timed: d.", md)

    def test_a_missing_record_is_a_clear_error(self):
        with self.assertRaises(SystemExit) as e:
            suite_standing.main(["--records", str(self.dir / "nope.json"),
                                 "--suite-dir", str(Path(__file__).resolve().parents[1] / "suite")])
        self.assertIn("no such record", str(e.exception))


if __name__ == "__main__":
    unittest.main()
