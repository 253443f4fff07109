"""Tests of bench/suite_search.py with a stand-in for the strata tool (a script that answers
like `strata optimize` or hangs): the record's fields, the reason of an unfused result, a
search killed past --kill-after, the kept result documents and the Markdown record."""

import argparse
import json
import os
import stat
import sys
import tempfile
import textwrap
import time
import unittest
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(BENCH))
import suite_search  # noqa: E402

# Answers `optimize PROGRAM ... -o OUT` like the tool: a fused result for programs named
# fused*, the program itself with a reason for plain*, a hang for hang*, exit 2 for bad*.
FAKE_TOOL = textwrap.dedent('''\
    #!/usr/bin/env python3
    import json, sys, time
    from pathlib import Path
    args = sys.argv[1:]
    program = Path(args[1]).stem
    out = args[args.index("-o") + 1]
    if program.startswith("hang"):
        time.sleep(60)
    if program.startswith("bad"):
        print("strata: bad.strata:1:1: error: something", file=sys.stderr)
        sys.exit(2)
    def entry(is_program, kernels, customized, us, speedup):
        return {"is_program": is_program, "kernels": kernels, "customized_kernels": customized,
                "predicted_us": us, "speedup_vs_program": speedup}
    fused = program.startswith("fused")
    ranked = [entry(False, 1, 1, 5.0, 2.0), entry(True, 3, 0, 10.0, 1.0)] if fused else \\
             [entry(True, 3, 0, 10.0, 1.0)]
    if fused:
        ranked[0]["form"] = "gain_across_matmul"
    stats = {"states": 1234, "pruned": 99, "candidates_found": 7, "candidates_screened": 2,
             "candidates_verified": 2, "stop": "exhausted" if fused else "time_limit",
             "stop_phase": "none" if fused else "verification",
             "verification_complete": fused,
             "prunes_by_rule": {"codegen_unsupported": 0 if fused else 6}}
    notes = ["checkpoint written to " + str(Path.home() / ".cache/strata/x.ckpt.json")]
    Path(out).write_text(json.dumps({"best": 0, "program_index": len(ranked) - 1,
                                     "ranked": ranked, "stats": stats, "notes": notes}))
    if fused:
        print("best: 1 kernel(s), 1 customized, predicted 5.00 µs vs 10.00 µs for the program (2.00x)")
    else:
        print("best: the input program itself (3 kernels), predicted 10.00 µs; no faster "
              "equivalent graph was found: 6 other candidate(s) found, but the code generator "
              "cannot emit the best ones (6 use ops it does not support, 0 do not fit shared "
              "memory)")
    print("search: ...")
    ''')

PROGRAM = "# origin of {name}\ninput X: f16[4, 8]\nO = exp(X)\noutput O\n"


class SuiteSearch(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = Path(self.tmp.name)
        self.tool = self.dir / "strata"
        self.tool.write_text(FAKE_TOOL)
        self.tool.chmod(self.tool.stat().st_mode | stat.S_IEXEC)

    def tearDown(self):
        self.tmp.cleanup()

    def search(self, name, kill_after=30.0, keep=None):
        path = self.dir / f"{name}.strata"
        path.write_text(PROGRAM.format(name=name))
        args = argparse.Namespace(strata=str(self.tool), time_limit=60.0, top=0, cache=False,
                                  kill_after=kill_after)
        return suite_search.search_one(path, args, keep)

    def test_fused_result_and_kept_document(self):
        keep = self.dir / "kept"
        e = self.search("fused_a", keep=keep)
        self.assertEqual(e["origin"], "origin of fused_a")
        self.assertTrue(e["fused"])
        self.assertEqual((e["states"], e["stop"], e["best_kernels"], e["program_kernels"]),
                         (1234, "exhausted", 1, 3))
        self.assertEqual(e["speedup"], 2.0)
        self.assertIsInstance(e["wall_s"], float)
        self.assertIsInstance(e["user_s"], float)
        self.assertNotIn("reason", e)
        kept = json.loads((keep / "fused_a.json").read_text())
        self.assertEqual(kept["stats"]["states"], 1234)
        # The home directory in the notes is written as ~ (no machine's path is kept).
        self.assertEqual(kept["notes"], ["checkpoint written to ~/.cache/strata/x.ckpt.json"])
        self.assertEqual(e["notes"], kept["notes"])
        self.assertIn("fused: 1 kernel(s) (1 customized) vs 3", suite_search.best_text(e))
        # The winner's form is recorded, and named where it is an alternative form.
        self.assertEqual(e["best_form"], "gain_across_matmul")
        self.assertIn("form gain_across_matmul", suite_search.best_text(e))
        self.assertNotIn("form", suite_search.best_text(dict(e, best_form="canonical")))

    def test_unfused_result_records_the_reason(self):
        e = self.search("plain_b")
        self.assertFalse(e["fused"])
        self.assertTrue(e["best_is_program"])
        self.assertTrue(e["reason"].startswith("6 other candidate(s) found, but the code "
                                               "generator cannot emit the best ones"))
        self.assertEqual(suite_search.reason_kind(e["reason"]), "cannot emit")
        self.assertEqual(e["codegen_unsupported"], 6)

    def test_failure_and_kill(self):
        e = self.search("bad_c")
        self.assertEqual(e["exit"], 2)
        self.assertIn("error: something", e["error"])
        t0 = time.time()
        e = self.search("hang_d", kill_after=1.0)
        self.assertLess(time.time() - t0, 20)
        self.assertIn("killed after 1 s: the search did not stop at its 60 s time limit",
                      e["error"])
        self.assertIsNone(e["exit"])

    def test_markdown_record(self):
        entries = [self.search("fused_a"), self.search("plain_b"), self.search("bad_c")]
        doc = {"revision": "abc", "time_limit_s": 60.0, "top": 0, "cache": False,
               "machine": {"cpus": 2, "platform": "test", "load_start": "1", "load_end": "2"},
               "programs": entries, "summary": suite_search.summary(entries)}
        sm = doc["summary"]
        self.assertEqual((sm["programs"], sm["fused"], sm["not_fused"], sm["errors"]), (3, 1, 1, 1))
        self.assertEqual(sm["reasons"], {"cannot emit": 1})
        md = suite_search.markdown(doc)
        self.assertIn("--time-limit 60 --no-cache -o OUT.json", md)
        self.assertIn("| plain_b |", md)
        self.assertIn("time_limit (verification), verification cut short | the program: 6 other "
                      "candidate(s) found, but the code generator cannot emit", md)
        self.assertIn("| 5.00 (10.00) | 2.00× |", md)
        self.assertIn("- cannot emit: 1", md)
        self.assertNotIn("Re-made", md)

    def test_markdown_lists_entries_remade_with_other_settings(self):
        a, b = self.search("fused_a"), self.search("fused_b")
        self.assertEqual(a["time_limit_s"], 60.0)
        self.assertIn("load_start", a)
        self.assertIn("load_end", a)
        a["revision"] = "abc"
        b.update(revision="def", time_limit_s=150.0, load_start="0.10", load_end="1.90")
        doc = {"revision": "abc", "time_limit_s": 60.0, "top": 0, "cache": False,
               "machine": {"cpus": 2, "platform": "test", "load_start": "1", "load_end": "2"},
               "programs": [a, b], "summary": suite_search.summary([a, b])}
        md = suite_search.markdown(doc)
        self.assertIn("--time-limit 60 --no-cache", md)
        self.assertIn("Re-made after that run", md)
        self.assertIn("- fused_b: strata def, `--time-limit 150`, load average 0.10 at the "
                      "start, 1.90 at the end", md)
        self.assertNotIn("- fused_a:", md)

    def test_parse_time(self):
        self.assertEqual(suite_search.parse_time("noise\n12.34 20.50\n"), (12.34, 20.5))
        self.assertEqual(suite_search.parse_time("Command exited with non-zero status 2\n"
                                                 "0.01 0.00\n"), (0.01, 0.0))
        self.assertEqual(suite_search.parse_time("no time here"), (None, None))


if __name__ == "__main__":
    unittest.main()
