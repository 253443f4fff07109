"""Tests of bench/calibrate.py: the least-squares fit recovers known constants from synthetic
points, the dataset format round-trips and rejects malformed files, extraction keeps a joined
part of a run once, and the committed dataset reproduces the fit docs/cost-model.md documents."""

import contextlib
import io
import json
import random
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(BENCH))
import calibrate  # noqa: E402

N_SM = calibrate.SM_COUNT["h200"]
# Known constants (seconds per byte / FLOP / kernel / iteration), in the order of KEYS.
TRUE = [1 / 4.5e12, 1 / 3.0e13, 1 / 1.5e13, 1 / 7.0e14, 1 / 9.0e12, 3.0e-6, 2.0e-8]


def synthetic_points(n, c, seed, configs=4, consts=TRUE):
    """n points with random kernels whose times follow the model exactly for α coefficient c."""
    rng = random.Random(seed)
    points = []
    for i in range(n):
        kernels = []
        for _ in range(rng.randint(1, 3)):
            kernels.append({"load_bytes": rng.uniform(1e5, 6e7), "l2_bytes": rng.uniform(0, 3e7),
                            "narrow_bytes": rng.choice([0.0, rng.uniform(0, 3e7)]),
                            "store_bytes": rng.uniform(1e3, 2e6),
                            "tensor_flops": rng.choice([0.0, rng.uniform(1e7, 1e10)]),
                            "simt_flops": rng.uniform(1e4, 1e8),
                            "blocks": rng.choice([1, 8, 32, 64, 96, 132, 256, 512]),
                            "forloop": rng.choice([1, 4, 16, 64, 256])})
        p = {"record": "synthetic", "target": "h200", "config": f"prog{i % configs}", "index": i,
             "origin": f"cand{i}", "graph": f"{i:016x}", "kernels": kernels}
        p["measured_s"] = sum(f * v for f, v in zip(calibrate.features(p, c, N_SM), consts))
        p["predicted_s"] = p["measured_s"] * rng.uniform(0.8, 1.25)
        points.append(p)
    return points


class Fit(unittest.TestCase):
    def assert_constants(self, got, want, rel=1e-6):
        for name, g, w in zip(calibrate.KEYS, got, want):
            self.assertAlmostEqual(g / w if w else g, 1.0 if w else 0.0, delta=rel, msg=name)

    def test_recovers_known_constants_with_fixed_alpha(self):
        points = synthetic_points(40, 0.1, seed=1)
        c, x, err = calibrate.fit(points, N_SM, 0.0, alpha=0.1)
        self.assertEqual(c, 0.1)
        self.assert_constants(x, TRUE)
        self.assertLess(err, 1e-12)

    def test_recovers_alpha_on_the_grid_with_the_tensor_rate_held(self):
        points = synthetic_points(24, 0.35, seed=2)
        c, x, _ = calibrate.fit(points, N_SM, 1 / TRUE[calibrate.TENSOR])
        self.assertAlmostEqual(c, 0.35)
        self.assert_constants(x, TRUE)

    def test_rates_stay_non_negative(self):
        # Times that a negative iteration latency would explain best: t_iter is clamped at 0.
        consts = TRUE[:6] + [-5e-9]
        points = [p for p in synthetic_points(40, 0.1, seed=3, consts=consts)
                  if p["measured_s"] > 0]
        _, x, _ = calibrate.fit(points, N_SM, 0.0, alpha=0.1)
        self.assertTrue(all(v >= 0 for v in x), x)
        self.assertEqual(x[-1], 0.0)

    def test_features(self):
        p = {"kernels": [{"load_bytes": 100, "l2_bytes": 10, "narrow_bytes": 5, "store_bytes": 20,
                          "tensor_flops": 1000, "simt_flops": 50, "blocks": 66, "forloop": 4},
                         {"load_bytes": 1, "l2_bytes": 0, "narrow_bytes": 0, "store_bytes": 1,
                          "tensor_flops": 0, "simt_flops": 2, "blocks": 264, "forloop": 1}]}
        f = calibrate.features(p, 0.5, 132)
        alpha1, alpha2 = 1 + 0.5 * 2, 1 + 0.5 * 0.5
        self.assertEqual(f, [120 * alpha1 + 2 * alpha2, 10 * alpha1, 5 * alpha1, 1000 * 2,
                             50 * 2 + 2 * 1, 2, 5])

    def test_solve_and_nnls(self):
        self.assertIsNone(calibrate.solve([[1.0, 2.0], [2.0, 4.0]], [1.0, 2.0]))
        self.assertEqual(calibrate.solve([[2.0, 0.0], [0.0, 4.0]], [2.0, 2.0]), [1.0, 0.5])
        # Unconstrained least squares gives y = 2·a − 1·b; with b ≥ 0 the best is b = 0.
        rows = [[1.0, 1.0], [2.0, 1.0], [3.0, 1.0]]
        ys = [2 * a - b for a, b in rows]
        x, _ = calibrate.nnls(rows, ys)
        self.assertEqual(x[1], 0.0)
        self.assertGreater(x[0], 0.0)

    def test_quality(self):
        q = calibrate.quality([1.0, 2.0, 4.0], [1.0, 2.0, 4.0], ["a", "a", "a"])
        self.assertEqual(q["median_abs_log_ratio"], 0.0)
        self.assertAlmostEqual(q["pearson_log"], 1.0)
        self.assertAlmostEqual(q["mean_spearman_within_program"], 1.0)
        q = calibrate.quality([2.0, 1.0, 4.0], [1.0, 2.0, 4.0], ["a", "a", "a"])
        self.assertAlmostEqual(q["max_abs_log_ratio"], 0.6931471805599453)
        self.assertAlmostEqual(q["spearman"], 0.5)


class Dataset(unittest.TestCase):
    RECORDS = [{"name": "synthetic", "target": "h200", "gpu": "NVIDIA H200", "points": 30},
               {"name": "other", "target": "h100", "gpu": "NVIDIA H100", "points": 5}]

    def write(self, tmp, points=None, records=None):
        points = points if points is not None else synthetic_points(30, 0.1, seed=4)
        other = synthetic_points(5, 0.1, seed=5)
        for p in other:
            p["record"], p["target"] = "other", "h100"
        path = Path(tmp) / "points.json"
        calibrate.write_dataset(path, records or self.RECORDS, points + other, "test")
        return path, points

    def test_round_trip_and_filters(self):
        with tempfile.TemporaryDirectory() as tmp:
            path, points = self.write(tmp)
            doc = json.loads(path.read_text())
            self.assertEqual(doc["format"], "strata-calibration-points")
            self.assertEqual(len(path.read_text().splitlines()), 12 + 35)  # a point per line
            got = calibrate.read_dataset(path, "h200")
            self.assertEqual(len(calibrate.read_dataset(path)), 35)
            self.assertEqual(len(calibrate.read_dataset(path, "h100")), 5)
            self.assertEqual(len(calibrate.read_dataset(path, None, ["other"])), 5)
            self.assertEqual(calibrate.read_dataset(path, "h200", ["other"]), [])
        self.assertEqual(len(got), 30)
        for p, q in zip(points, got):
            self.assertEqual((q["record"], q["config"], q["index"], q["origin"], q["graph"]),
                             (p["record"], p["config"], p["index"], p["origin"], p["graph"]))
            # Times are stored in µs to 4 decimals (0.1 ns, far below timer resolution).
            self.assertAlmostEqual(q["measured_s"] * 1e6, p["measured_s"] * 1e6, delta=5.1e-5)
            for kq, kp in zip(q["kernels"], p["kernels"]):
                self.assertEqual(kq, kp)

    def test_fit_from_a_dataset_recovers_the_constants(self):
        with tempfile.TemporaryDirectory() as tmp:
            path, _ = self.write(tmp)
            points = calibrate.read_dataset(path, "h200")
        _, x, _ = calibrate.fit(points, N_SM, 0.0, alpha=0.1)
        for name, g, w in zip(calibrate.KEYS, x, TRUE):
            self.assertAlmostEqual(g / w, 1.0, delta=1e-4, msg=name)  # times rounded to 0.1 ns

    def test_command_line_fits_from_a_dataset(self):
        with tempfile.TemporaryDirectory() as tmp:
            path, _ = self.write(tmp)
            out = Path(tmp) / "fit.json"
            r = subprocess.run([sys.executable, str(BENCH / "calibrate.py"), "--dataset", str(path),
                                "--records", "synthetic", "--alpha", "0.1", "--json", str(out)],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("30 timed candidates from 4 programs", r.stdout)
            fit = json.loads(out.read_text())
        self.assertEqual(fit["alpha_c"], 0.1)
        for key, w in zip(calibrate.KEYS, TRUE):
            self.assertAlmostEqual(fit["fit"][key] / w, 1.0, delta=1e-4, msg=key)

    def test_command_line_rejects_a_bad_dataset(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "points.json"
            path.write_text('{"format": "something else"}')
            r = subprocess.run([sys.executable, str(BENCH / "calibrate.py"), "--dataset",
                                str(path)], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("not a calibration dataset", r.stderr)

    def test_malformed_datasets_name_the_problem(self):
        good = {"format": "strata-calibration-points", "version": 1,
                "kernel_fields": calibrate.KERNEL_FIELDS,
                "records": [{"name": "r", "target": "h200"}],
                "points": [{"record": "r", "config": "c", "index": 0, "measured_us": 1.0,
                            "predicted_us": 1.0, "kernels": [[1, 0, 0, 1, 0, 1, 1, 1]]}]}

        def variant(**changes):
            doc = json.loads(json.dumps(good))
            point = changes.pop("point", {})
            doc.update(changes)
            if point:
                doc["points"][0].update(point)
            return json.dumps(doc)

        cases = [
            ('{"format": ', "invalid JSON"),
            (variant(format="strata-search-result"), "not a calibration dataset"),
            (variant(version=2), "version 2; expected 1"),
            (variant(kernel_fields=["load_bytes"]), "kernel_fields"),
            (variant(records={"r": 1}), "records: expected a list"),
            (variant(points={}), "points: expected a list"),
            (variant(point={"record": "unknown"}), "points[0]: record 'unknown' is not listed"),
            (variant(point={"measured_us": -1.0}), "points[0]: measured_us and predicted_us"),
            (variant(point={"kernels": [[1, 2, 3]]}), "points[0]: kernels: expected"),
            (variant(point={"kernels": []}), "points[0]: kernels: expected"),
        ]
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "d.json"
            path.write_text(variant())
            self.assertEqual(len(calibrate.read_dataset(path)), 1)
            with self.assertRaisesRegex(calibrate.DatasetError, "no record nope"):
                calibrate.read_dataset(path, None, ["nope"])
            bad = json.loads(variant())
            del bad["points"][0]["kernels"]
            path.write_text(json.dumps(bad))
            with self.assertRaisesRegex(calibrate.DatasetError, 'missing "kernels"'):
                calibrate.read_dataset(path)
            for text, message in cases:
                path.write_text(text)
                with self.assertRaises(calibrate.DatasetError, msg=message) as e:
                    calibrate.read_dataset(path)
                self.assertIn(message, str(e.exception))
                self.assertIn(str(path), str(e.exception))
            with self.assertRaisesRegex(calibrate.DatasetError, "cannot read"):
                calibrate.read_dataset(Path(tmp) / "missing.json")


class Extract(unittest.TestCase):
    def test_a_joined_part_is_kept_once(self):
        """Record B repeats record A's points of program p exactly (a joined part) but measured
        q again, one time equal to A's by chance: p is left out of B, q is kept."""
        def pt(config, graph, t):
            return {"record": "", "target": "h200", "config": config, "index": 0, "origin": "",
                    "graph": graph, "measured_s": t, "predicted_s": t,
                    "kernels": [dict.fromkeys(calibrate.KERNEL_FIELDS, 1)]}
        sources = {"A": [pt("p", "g1", 1.0), pt("p", "g2", 2.0), pt("q", "g3", 3.0),
                         pt("q", "g4", 4.0)],
                   "B": [pt("p", "g1", 1.0), pt("p", "g2", 2.0), pt("q", "g3", 3.0),
                         pt("q", "g4", 4.5)]}
        saved = calibrate.source_info, calibrate.load_points
        calibrate.source_info = lambda spec, target: {"name": spec, "target": target}
        calibrate.load_points = lambda spec, strata, target, scratch, info: [
            dict(p, record=spec) for p in sources[spec]]
        try:
            with contextlib.redirect_stderr(io.StringIO()) as err:
                records, points = calibrate.extract(["A", "B"], "strata", "h200")
        finally:
            calibrate.source_info, calibrate.load_points = saved
        self.assertEqual([r["points"] for r in records], [4, 2])
        self.assertEqual([(p["record"], p["config"]) for p in points],
                         [("A", "p"), ("A", "p"), ("A", "q"), ("A", "q"), ("B", "q"), ("B", "q")])
        self.assertIn("B: p repeats an earlier source's points", err.getvalue())

    def test_target_of_gpu(self):
        self.assertEqual(calibrate.target_of_gpu("NVIDIA H100 80GB HBM3"), "h100")
        self.assertEqual(calibrate.target_of_gpu("NVIDIA H200"), "h200")
        self.assertIsNone(calibrate.target_of_gpu("NVIDIA B200"))
        self.assertIsNone(calibrate.target_of_gpu(None))

    def test_split_spec(self):
        self.assertEqual(calibrate.split_spec("a/b.json@81b06c4"), (Path("a/b.json"), "81b06c4"))
        self.assertEqual(calibrate.split_spec("a/b.json"), (Path("a/b.json"), None))


class CommittedDataset(unittest.TestCase):
    """bench/calibration/points.json against docs/cost-model.md and bench/calibration/README.md."""

    def test_reproduces_the_documented_h200_fit(self):
        points = calibrate.read_dataset(calibrate.DATASET, "h200",
                                        ["h200-2026-11-24", "h200-2026-11-24-l2-first"])
        self.assertEqual(len(points), 244)
        c, x, _ = calibrate.fit(points, N_SM, 734e12, alpha=0.1)
        fitted = dict(zip(calibrate.KEYS, x))
        # The h200 row of docs/cost-model.md, "Targets".
        documented = {"inv_bandwidth": 1 / 4.94e12, "inv_l2_bandwidth": 1 / 4.16e13,
                      "inv_narrow_bandwidth": 1 / 1.76e13, "inv_simt_peak": 1 / 8.95e12,
                      "launch_s": 3.38e-6}
        for key, want in documented.items():
            self.assertAlmostEqual(fitted[key] / want, 1.0, delta=0.005, msg=key)
        self.assertEqual(fitted["iteration_latency_s"], 0.0)
        self.assertAlmostEqual(fitted["inv_tensor_peak"], 1 / 734e12)

    def test_records_and_sizes(self):
        doc = json.loads(calibrate.DATASET.read_text())
        self.assertEqual(sum(r["points"] for r in doc["records"]), len(doc["points"]))
        self.assertEqual(len(calibrate.read_dataset(calibrate.DATASET, "h200")), 764)
        self.assertEqual(len(calibrate.read_dataset(calibrate.DATASET, "h100")), 160)
        self.assertLess(calibrate.DATASET.stat().st_size, 1 << 20)


if __name__ == "__main__":
    unittest.main()
