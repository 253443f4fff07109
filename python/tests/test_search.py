"""strata.optimize: the search from Python, its result object, caching and logging."""
import json
import logging

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import strata


def test_optimize_program(examples, tmp_path, caplog):
    p = strata.Program.load(examples / "rmsnorm_small.strata")
    with caplog.at_level(logging.INFO, logger="strata"):
        r = strata.optimize(p, top_k=2, cache_dir=tmp_path, profile=False)
    assert r.stats["stop"] == "exhausted" and not r.from_cache
    assert len(r.ranked) == 3 and r.ranked[r.program_index].is_program
    best = r.best
    assert not best.is_program and best.program.is_mugraph
    assert best.verification["equivalent"] and best.log2_bound <= -60
    assert best.predicted_us < r.ranked[r.program_index].predicted_us
    assert json.loads(best.json) == best.to_dict()
    assert r.fastest is best and r.gpu_profile is None
    # The winner computes what the program computes (verifier and interpreter).
    assert strata.equiv(p, best.program)
    xs = [np.random.default_rng(1).standard_normal(s.shape).astype(np.float16)
          for s in p.inputs]
    np.testing.assert_allclose(strata.run(best.program, xs).astype(np.float64),
                               strata.run(p, xs).astype(np.float64), rtol=2e-3, atol=2e-3)
    messages = [rec.getMessage() for rec in caplog.records if rec.name == "strata"]
    assert any("stopped (exhausted)" in m for m in messages)
    # The on-disk cache answers the same search.
    again = strata.optimize(p, top_k=2, cache_dir=tmp_path, profile=False)
    assert again.from_cache and again.stats["stop"] == "cache_hit"
    assert again.best.program.structurally_equal(best.program)
    r.save(tmp_path / "result.json")
    assert json.loads((tmp_path / "result.json").read_text())["format"] == "strata-search-result"


def test_optimize_function_keeps_bound_inputs(tmp_path):
    def f(x, w):
        return F.silu(x @ w) * 0.5 + 1.0

    x, w = torch.randn(8, 64, dtype=torch.float16), torch.randn(64, 128, dtype=torch.float16)
    r = strata.optimize(f, (x, w), top_k=1, cache_dir=tmp_path, time_limit=60, profile=False)
    best = r.best.program
    assert [s.name for s in best.free_inputs] == ["x", "w"]
    got = strata.run(best, [x, w]).double()
    want = f(x.double(), w.double())
    assert (got - want).norm() / want.norm() < 1e-2


def test_optimize_errors(tmp_path):
    p = strata.Program.parse("input X: f16[4, 8]\noutput X\n")
    with pytest.raises(strata.StrataError, match="output"):
        strata.optimize(p, cache_dir=tmp_path, profile=False)
    q = strata.Program.parse("input X: f16[4, 8]\nO = exp(X)\noutput O\n")
    with pytest.raises(strata.StrataError, match="target"):
        strata.optimize(q, target="tpu", cache_dir=tmp_path, profile=False)
    with pytest.raises(TypeError):
        strata.optimize(42)
    with pytest.raises(strata.InputError, match="inputs have shapes"):
        strata.optimize(q, inputs=[np.zeros((4, 9))], profile=True, cache_dir=tmp_path)


def test_profile_inputs_keep_bound_values():
    from strata.search import profile_inputs

    p = strata.capture(lambda x: x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6),
                       torch.randn(4, 8))
    arrays = profile_inputs(p)
    assert [a.shape for a in arrays] == [s.shape for s in p.inputs]
    for a, s in zip(arrays, p.inputs):
        if s.name in p.bound:
            assert (a == p.bound[s.name]).all()
        else:
            assert a.dtype == np.float64 and np.abs(a).max() <= 0.5
