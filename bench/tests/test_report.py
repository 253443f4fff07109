"""Tests of bench/report.py: statistics, the report built from a small synthetic run, the
Markdown table and "Targets:" line, `merge` of a run made in parts; the same for the suite's
kind of report (bench/suite_bench.py)."""

import contextlib
import io
import json
import math
import statistics
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import report  # noqa: E402

DEVICE = {"name": "Test GPU", "arch": "sm_90a", "sm_count": 132, "l2_bytes": 60 * 2**20,
          "torch": "2.11", "cuda": "13.0", "python": "3.11",
          "bandwidth_Bps": 4.0e12, "tensor_peak_flops": 700e12, "launch_us": 1.0}


def result(bench, batch, nbytes, flops, times, strata=None):
    """A raw benchmark result: PyTorch systems with the given medians (None: failed), and
    strata's fastest candidate."""
    systems = {}
    for mode, t in times.items():
        systems[mode] = {"ok": False} if t is None else {"ok": True, "median_us": t}
    if strata is not None:
        systems["strata"] = {"ok": True, "median_us": strata, "index": 0,
                             "origin": f"bench/search/{bench}_b{batch}.json: ranked[0].graph",
                             "variant": "default"}
    return {"benchmark": bench, "batch": batch, "bytes": nbytes, "flops": flops,
            "systems": systems}


def profile(*cands):
    """A `strata profile` report of candidates (predicted, measured, status, variant)."""
    out = []
    for i, (pred, meas, status, variant) in enumerate(cands):
        c = {"index": i, "origin": f"cand{i}", "status": status, "variant": variant,
             "predicted_us": pred}
        if meas is not None:
            c["timing"] = {"median_us": meas}
        out.append(c)
    return {"candidates": out}


class Statistics(unittest.TestCase):
    def test_pearson_matches_the_textbook_formula(self):
        xs, ys = [1.0, 2.0, 3.0, 4.0, 7.5], [2.0, 4.0, 5.0, 4.0, 9.0]
        self.assertAlmostEqual(report.pearson(xs, ys), statistics.correlation(xs, ys), places=12)
        self.assertAlmostEqual(report.pearson(xs, [2 * x + 1 for x in xs]), 1.0, places=12)
        self.assertAlmostEqual(report.pearson(xs, [-x for x in xs]), -1.0, places=12)

    def test_pearson_is_undefined_for_few_or_constant_values(self):
        self.assertIsNone(report.pearson([1, 2], [3, 4]))
        self.assertIsNone(report.pearson([1, 1, 1], [1, 2, 3]))
        self.assertIsNone(report.pearson([1, 2, 3], [5, 5, 5]))

    def test_ranks_share_the_mean_rank_on_ties(self):
        self.assertEqual(report.ranks([30, 10, 20, 20]), [3.0, 0.0, 1.5, 1.5])
        self.assertEqual(report.ranks([5, 5, 5]), [1.0, 1.0, 1.0])

    def test_spearman(self):
        xs = [1, 2, 3, 4, 5]
        self.assertAlmostEqual(report.spearman(xs, [x ** 3 for x in xs]), 1.0)  # monotone
        self.assertAlmostEqual(report.spearman(xs, [-math.exp(x) for x in xs]), -1.0)
        # 1 − 6 Σd² / (n(n² − 1)) without ties: d = (0, 0, 1, −1, 0) → 1 − 12/120.
        self.assertAlmostEqual(report.spearman(xs, [1, 2, 4, 3, 5]), 0.9)
        # With ties, Pearson of the mean ranks.
        self.assertAlmostEqual(report.spearman([1, 2, 2, 3], [1, 2, 3, 4]),
                               statistics.correlation([0, 1.5, 1.5, 3], [0, 1, 2, 3]))
        self.assertIsNone(report.spearman([1, 2], [2, 1]))

    def test_floor_is_the_largest_of_memory_compute_and_launch(self):
        dev = {"bandwidth_Bps": 1e12, "tensor_peak_flops": 1e15, "launch_us": 2.0}
        self.assertAlmostEqual(report.floor_us({"bytes": 5e6, "flops": 1e9}, dev), 5.0)
        self.assertAlmostEqual(report.floor_us({"bytes": 1e6, "flops": 8e9}, dev), 8.0)
        self.assertAlmostEqual(report.floor_us({"bytes": 1e3, "flops": 1e3}, dev), 2.0)


class Build(unittest.TestCase):
    def setUp(self):
        # rmsnorm_b1: floor 40 MB / 4 TB/s = 10 µs; gqa_b1: floor = launch (1 µs).
        self.results = [
            result("rmsnorm", 1, 40e6, 1e9, {"eager": 30.0, "compile": 20.0, "max-autotune": None},
                   strata=11.0),
            result("gqa", 1, 1e3, 1e3, {"eager": 40.0, "compile": 50.0}, strata=10.0),
            result("lora", 1, 1e3, 1e3, {"eager": 5.0}),  # strata missing
        ]
        self.profiles = {
            "rmsnorm_b1": profile((10.0, 11.0, "ok", "default"), (12.0, 13.0, "ok", "default"),
                                  (14.0, 12.0, "ok", "default"), (9.0, 30.0, "ok", "groups=4"),
                                  (9.0, None, "wrong_answer", "default")),
            "gqa_b1": profile((5.0, 10.0, "ok", "default"), (6.0, 12.0, "ok", "source")),
        }
        self.plans = {"rmsnorm_b1": {"source": "search result"}, "gqa_b1": {"source": "x"}}
        self.doc = report.build(DEVICE, self.results, self.profiles, self.plans, {"bench": 1.5},
                                0.01)

    def test_rows(self):
        rows = {r["config"]: r for r in self.doc["results"]}
        r = rows["rmsnorm_b1"]
        self.assertAlmostEqual(r["floor_us"], 10.0)
        self.assertEqual(r["best_pytorch"]["mode"], "compile")  # the failed mode is ignored
        self.assertAlmostEqual(r["speedup"], 20.0 / 11.0)
        self.assertAlmostEqual(r["strata_fraction_of_floor"], 10.0 / 11.0)
        self.assertAlmostEqual(rows["gqa_b1"]["speedup"], 4.0)
        self.assertNotIn("speedup", rows["lora_b1"])

    def test_summary(self):
        sm = self.doc["summary"]
        self.assertEqual((sm["configs"], sm["configs_with_strata"]), (3, 2))
        self.assertAlmostEqual(sm["geomean_speedup"], math.sqrt(20.0 / 11.0 * 4.0))
        self.assertAlmostEqual(sm["min_speedup"], 20.0 / 11.0)
        self.assertEqual(list(sm["time_over_floor"]), ["rmsnorm_b1"])  # bandwidth-bound only
        self.assertAlmostEqual(sm["time_over_floor"]["rmsnorm_b1"], 1.1)

    def test_calibration_uses_correct_default_variant_candidates(self):
        cal = self.doc["calibration"]
        got = sorted((p["config"], p["index"]) for p in cal["points"])
        # The tuned variant and the wrong answer are left out; a `.cu` source is kept.
        self.assertEqual(got, [("gqa_b1", 0), ("gqa_b1", 1), ("rmsnorm_b1", 0),
                               ("rmsnorm_b1", 1), ("rmsnorm_b1", 2)])
        self.assertEqual(cal["candidates_by_status"], {"ok": 6, "wrong_answer": 1})
        self.assertAlmostEqual(cal["spearman_within_program"]["rmsnorm_b1"], 0.5)
        self.assertIsNone(cal["spearman_within_program"]["gqa_b1"])  # two points
        self.assertAlmostEqual(cal["mean_spearman_within_program"], 0.5)
        pred = [p["predicted_us"] for p in cal["points"]]
        meas = [p["measured_us"] for p in cal["points"]]
        self.assertAlmostEqual(cal["pearson_log"], statistics.correlation(
            [math.log(x) for x in pred], [math.log(y) for y in meas]))

    def test_markdown_table_and_targets(self):
        md = report.markdown(self.doc)
        self.assertIn("# strata vs PyTorch on Test GPU", md)
        self.assertIn("| rmsnorm_b1 | 30.00 | 20.00 | failed | 11.00 | 1.82× | 10.00 | 0.91 | "
                      "0.50 |", md)
        self.assertIn("| lora_b1 | 5.00 | — | — | — | — | 1.00 | — | 0.20 |", md)
        self.assertIn("floor / strata", md)
        target_lines = [l for l in md.splitlines() if l.startswith("Targets:")]
        self.assertEqual(len(target_lines), 1)
        line = target_lines[0]
        self.assertIn("geometric-mean speedup ≥ 1.5× holds", line)
        self.assertIn("lowest ≥ 0.95× holds", line)
        self.assertIn("within 1.15× of the floor holds (strata time / floor: rmsnorm_b1 1.100)",
                      line)
        self.assertIn("- rmsnorm_b1: search result; fastest bench/search/rmsnorm_b1.json: "
                      "ranked[0].graph [default]", md)
        self.assertIn("Wall time per step (s): bench 1.5", md)

    def test_targets_missed(self):
        sm = {"geomean_speedup": 1.2, "min_speedup": 0.9,
              "time_over_floor": {"rmsnorm_b8": 1.2, "gatedmlp_b1": 1.05}}
        line = report.targets(sm)[0]
        self.assertIn("≥ 1.5× MISSED", line)
        self.assertIn("≥ 0.95× MISSED", line)
        self.assertIn("of the floor MISSED", line)
        sm = {"geomean_speedup": 1.6, "min_speedup": 1.0, "time_over_floor": {}}
        line = report.targets(sm)[0]
        self.assertNotIn("floor", line)
        self.assertTrue(line.endswith("holds."))
        self.assertEqual(report.targets({"geomean_speedup": None}), [])

    def test_repo_relative(self):
        p = report.REPO_ROOT + "build-gpu/cache/bin/x.so"
        self.assertEqual(report.repo_relative({"a": [p, 3]}), {"a": ["build-gpu/cache/bin/x.so", 3]})


class Merge(unittest.TestCase):
    def write_part(self, root, name, results, profiles, device, phases):
        d = Path(root) / name
        (d / "profile").mkdir(parents=True)
        plans = {k: {"source": f"search result {k}"} for k in profiles}
        doc = report.build(device, results, profiles, plans, phases, 0.01)
        (d / "testgpu-2026-01-02.json").write_text(json.dumps(doc))
        for key, prof in profiles.items():
            (d / "profile" / f"{key}.json").write_text(json.dumps(prof))
        return d

    def test_merge_joins_parts(self):
        dev2 = dict(DEVICE, bandwidth_Bps=2.0e12)
        with tempfile.TemporaryDirectory() as tmp:
            p1 = self.write_part(tmp, "p1", [result("rmsnorm", 1, 40e6, 1e9, {"eager": 22.0},
                                                     strata=11.0)],
                                 {"rmsnorm_b1": profile((10.0, 11.0, "ok", "default"),
                                                        (12.0, 13.0, "ok", "default"))},
                                 DEVICE, {"bench": 1.0, "compile": 2.0})
            p2 = self.write_part(tmp, "p2", [result("gqa", 1, 1e3, 1e3, {"eager": 40.0},
                                                     strata=10.0)],
                                 {"gqa_b1": profile((5.0, 10.0, "ok", "default"))},
                                 dev2, {"bench": 0.5})
            stem = Path(tmp) / "out" / "merged"
            stem.parent.mkdir()
            with contextlib.redirect_stdout(io.StringIO()) as printed:
                report.merge([p1, p2], str(stem))
            doc = json.loads(Path(f"{stem}.json").read_text())
            md = Path(f"{stem}.md").read_text()
        self.assertEqual([r["config"] for r in doc["results"]], ["rmsnorm_b1", "gqa_b1"])
        # Floors use the first part's device figures; every part's are kept.
        self.assertEqual(doc["device"]["bandwidth_Bps"], 4.0e12)
        self.assertEqual([p["bandwidth_Bps"] for p in doc["device"]["parts"]], [4.0e12, 2.0e12])
        self.assertAlmostEqual(doc["results"][0]["floor_us"], 10.0)
        self.assertAlmostEqual(doc["summary"]["geomean_speedup"], math.sqrt(2.0 * 4.0))
        self.assertEqual(doc["phases_s"], {"bench": 1.5, "compile": 2.0})
        self.assertEqual(len(doc["calibration"]["points"]), 3)
        self.assertEqual(set(doc["candidates"]), {"rmsnorm_b1", "gqa_b1"})
        self.assertIn("| gqa_b1 |", md)
        self.assertIn("Targets:", md)
        self.assertEqual(printed.getvalue().rstrip("\n"), md.rstrip("\n"))

    def test_merge_without_a_report_fails(self):
        with tempfile.TemporaryDirectory() as tmp:
            with self.assertRaises(SystemExit) as e:
                report.merge([tmp], str(Path(tmp) / "x"))
        self.assertIn("no <gpu>-<date>.json report", str(e.exception.code))


def suite_result(program, nbytes, flops, times, strata=None, skipped=None):
    """A raw suite result (bench/suite_bench.py): PyTorch systems (None: failed) and strata."""
    r = result("x", 0, nbytes, flops, times, strata)
    del r["benchmark"], r["batch"]
    r["program"] = program
    if skipped:
        r["skipped"] = skipped
    return r


class Suite(unittest.TestCase):
    """DEVICE: 4 TB/s, 700 TFLOP/s, 1 µs launch."""

    def build(self, results):
        plans = {r["program"]: {"source": "search result"} for r in results}
        return report.build(DEVICE, results, {}, plans, {"bench": 2.0}, 0.01, kind="suite")

    def test_rows_bound_speedup_and_best_pytorch(self):
        doc = self.build([
            # memory-bound: 40 MB → 10 µs floor; sdpa not present
            suite_result("llama_mlp_d1", 40e6, 1e9, {"eager": 30.0, "compile": 25.0,
                                                     "max-autotune": 20.0}, strata=11.0),
            # compute-bound: 7e9 FLOPs → 10 µs; sdpa-flash is the best PyTorch
            suite_result("attn_p2048", 1e6, 7e9, {"eager": 80.0, "compile": 60.0,
                                                  "max-autotune": 50.0, "sdpa-flash": 20.0},
                         strata=16.0),
            # launch-bound
            suite_result("rope_d16", 1e3, 0, {"eager": 8.0}, strata=2.0),
        ])
        rows = {r["config"]: r for r in doc["results"]}
        self.assertEqual(doc["kind"], "suite")
        self.assertEqual([rows[k]["bound"] for k in ("llama_mlp_d1", "attn_p2048", "rope_d16")],
                         ["memory", "compute", "launch"])
        self.assertEqual(rows["attn_p2048"]["best_pytorch"]["mode"], "sdpa-flash")
        self.assertAlmostEqual(rows["attn_p2048"]["speedup"], 1.25)
        sm = doc["summary"]
        self.assertAlmostEqual(sm["geomean_speedup"], (20 / 11 * 1.25 * 4.0) ** (1 / 3))
        self.assertEqual(sm["min_speedup_config"], "attn_p2048")
        self.assertEqual(sm["bandwidth_bound"], ["llama_mlp_d1"])
        self.assertAlmostEqual(sm["time_over_floor"]["llama_mlp_d1"], 1.1)
        md = report.markdown(doc)
        self.assertIn("# The suite: strata vs PyTorch on Test GPU", md)
        self.assertIn("| program | bound | eager | compile | max-autotune | sdpa-flash | strata |", md)
        self.assertIn("| attn_p2048 | compute | 80.00 | 60.00 | 50.00 | 20.00 | 16.00 | 1.25× | "
                      "sdpa-flash | 10.00 | 0.62 | 0.50 |", md)
        self.assertIn("| rope_d16 | launch | 8.00 | — | — | — | 2.00 | 4.00× | eager |", md)
        (line,) = [l for l in md.splitlines() if l.startswith("Targets:")]
        self.assertEqual(
            line, "Targets: geometric-mean speedup over the best PyTorch per program ≥ 1.5× "
            "holds (2.09× over 3 programs); no program below 1.0× holds (lowest 1.25×, "
            "attn_p2048); bandwidth-bound programs (1) within 1.15× of the floor holds (strata "
            "time / floor: worst llama_mlp_d1 1.100).")

    def test_head_to_head_ratio_is_the_speedup(self):
        # Separately 10 / 10.5 = 0.95×; timed head to head the per-round ratio was 1.02×: the
        # report takes the head-to-head figure and shows the separate one beside it.
        r = suite_result("qkv_p2048", 1e6, 7e9, {"compile": 10.0}, strata=10.5)
        r["head_to_head"] = {"pytorch": "compile", "pytorch_us": 10.3, "strata_us": 10.1,
                             "speedup": 1.02, "runs": 100}
        plain = suite_result("rope_d16", 1e3, 0, {"eager": 8.0}, strata=2.0)
        doc = self.build([r, plain])
        rows = {x["config"]: x for x in doc["results"]}
        self.assertAlmostEqual(rows["qkv_p2048"]["speedup"], 1.02)
        self.assertAlmostEqual(rows["qkv_p2048"]["speedup_separate"], 10.0 / 10.5)
        self.assertAlmostEqual(rows["rope_d16"]["speedup"], 4.0)
        self.assertEqual(doc["summary"]["below_parity"], {})
        md = report.markdown(doc)
        self.assertIn("| 10.50 | 1.02× (0.95×) | compile |", md)
        self.assertIn("| 2.00 | 4.00× | eager |", md)
        self.assertIn("timed again head to head", md)
        # A merge rebuilds the rows from the raw results: the head-to-head figure survives.
        again = report.build(DEVICE, [{k: v for k, v in x.items() if k not in report.DERIVED}
                                      for x in doc["results"]], {}, doc["candidates"],
                             {}, 0.01, kind="suite")
        self.assertAlmostEqual(again["results"][0]["speedup"], 1.02)

    def test_targets_missed_names_the_programs(self):
        doc = self.build([
            suite_result("a", 40e6, 0, {"eager": 12.0}, strata=12.5),  # 0.96×, 1.25× the floor
            suite_result("b", 80e6, 0, {"eager": 40.0}),  # no strata time
            suite_result("c", 1e3, 0, {"eager": 5.0}, strata=5.0, skipped=None),
            suite_result("d", 60e6, 0, {}, skipped="time budget spent before its benchmark"),
        ])
        sm = doc["summary"]
        self.assertEqual(sm["without_speedup"], ["b", "d"])
        line = report.suite_targets(sm)[0]
        self.assertIn("≥ 1.5× MISSED (0.98× over 2 programs)", line)
        self.assertIn("no program below 1.0× MISSED (lowest 0.96×, a; 2 without a strata "
                      "speedup: b, d)", line)
        self.assertIn("bandwidth-bound programs (3) within 1.15× of the floor MISSED (strata "
                      "time / floor: worst a 1.250; 2 without a strata time)", line)
        md = report.markdown(doc)
        self.assertIn("| d | memory | — | — | — | — | — | skipped: time budget spent before its "
                      "benchmark | — | 15.00 | — | — |", md)
        line = report.suite_targets(self.build([
            suite_result("e", 1e3, 0, {"eager": 4.0}, strata=5.0),
            suite_result("f", 1e3, 0, {"eager": 4.0}, strata=8.0),
            suite_result("g", 1e3, 0, {"eager": 4.0}, strata=2.0)])["summary"])[0]
        self.assertIn("no program below 1.0× MISSED (2 below: f 0.50×, e 0.80×)", line)
        line = report.suite_targets(self.build([suite_result("b", 1e3, 0, {"eager": 4.0})])
                                    ["summary"])[0]
        self.assertIn("≥ 1.5× MISSED (no program timed)", line)

    def test_merge_of_suite_parts_keeps_the_kind(self):
        with tempfile.TemporaryDirectory() as tmp:
            dirs = []
            for i, r in enumerate([suite_result("p", 40e6, 0, {"eager": 20.0}, strata=10.5),
                                   suite_result("q", 1e3, 0, {"eager": 3.0}, strata=1.5)]):
                d = Path(tmp) / f"part{i}"
                (d / "profile").mkdir(parents=True)
                (d / "h100-2026-01-02.json").write_text(json.dumps(self.build([r])))
                dirs.append(d)
            with contextlib.redirect_stdout(io.StringIO()):
                report.merge(dirs, str(Path(tmp) / "m"))
            doc = json.loads((Path(tmp) / "m.json").read_text())
            self.assertEqual(doc["kind"], "suite")
            self.assertEqual([r["config"] for r in doc["results"]], ["p", "q"])
            self.assertAlmostEqual(doc["summary"]["geomean_speedup"], math.sqrt(20 / 10.5 * 2))
            self.assertIn("Targets: geometric-mean speedup over the best PyTorch per program",
                          (Path(tmp) / "m.md").read_text())
            # A program skipped for time in one part and run in a later one counts once, as run;
            # a part without its profile files keeps its report's calibration points.
            late = Path(tmp) / "part2"
            (late / "profile").mkdir(parents=True)
            skipped = self.build([suite_result("q", 1e3, 0, {}, skipped="time budget")])
            (dirs[1] / "h100-2026-01-02.json").write_text(json.dumps(skipped))
            ran = self.build([suite_result("q", 1e3, 0, {"eager": 3.0}, strata=1.5)])
            ran["calibration"]["points"] = [{"config": "q", "index": 0, "origin": "o",
                                             "predicted_us": 1.0, "measured_us": 1.5}]
            ran["calibration"]["candidates_by_status"] = {"ok": 3}
            (late / "h100-2026-01-02.json").write_text(json.dumps(ran))
            with contextlib.redirect_stdout(io.StringIO()):
                report.merge([dirs[0], dirs[1], late], str(Path(tmp) / "m2"))
            doc = json.loads((Path(tmp) / "m2.json").read_text())
            self.assertEqual([r["config"] for r in doc["results"]], ["p", "q"])
            self.assertNotIn("skipped", doc["results"][1])
            self.assertEqual([p["measured_us"] for p in doc["calibration"]["points"]], [1.5])
            self.assertEqual(doc["calibration"]["candidates_by_status"], {"ok": 3})
            # A paper part and a suite part do not merge.
            paper = Path(tmp) / "paper"
            (paper / "profile").mkdir(parents=True)
            (paper / "h100-2026-01-02.json").write_text(json.dumps(report.build(
                DEVICE, [result("gqa", 1, 1e3, 1e3, {"eager": 4.0}, strata=2.0)], {}, {}, {},
                0.01)))
            with self.assertRaises(SystemExit) as e:
                report.merge([dirs[0], paper], str(Path(tmp) / "x"))
            self.assertIn("different kinds", str(e.exception.code))


if __name__ == "__main__":
    unittest.main()
