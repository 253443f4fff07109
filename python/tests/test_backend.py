"""torch.compile(model, backend="strata") on the CPU: partitioning, fallback, the interpreter
path, and agreement with eager."""
import logging

import pytest
import torch
import torch.nn.functional as F

import strata
from strata.backend import node_supported, register, strata_backend

register()


class Mixed(torch.nn.Module):
    """Supported ops around unsupported ones (tanh without the op, cumsum, abs)."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.w = torch.nn.Parameter(torch.randn(16, 32, generator=g) / 4, requires_grad=False)

    def forward(self, x):
        h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
        y = F.silu(h @ self.w)
        z = torch.cumsum(y, -1).abs()
        return z.sum(-1, keepdim=True) * 0.5 + z


def _messages(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "strata"]


def _run_mixed(caplog, options, tol=None):
    """Mixed compiled with the strata backend and `options`, run once on a random input and
    checked against eager (within `tol`, else torch's defaults); the strata log's messages."""
    m, x = Mixed(), torch.randn(4, 16)
    f = torch.compile(m, backend="strata", options=options)
    with caplog.at_level(logging.INFO, logger="strata"):
        got = f(x)
    torch.testing.assert_close(got, m(x), **({"atol": tol, "rtol": tol} if tol else {}))
    return _messages(caplog)


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def test_interpreter_path_matches_eager(caplog):
    msgs = _run_mixed(caplog, {"cpu": "interpret", "fallback": "eager"}, tol=1e-4)
    assert any("2 partition(s), 2 run by strata" in s for s in msgs), msgs
    assert any("reference interpreter" in s and "matmul" in s for s in msgs), msgs


def test_no_gpu_falls_back_with_reason(caplog):
    if strata.gpu_available():
        pytest.skip("a GPU is present: the GPU tests cover the kernel path")
    msgs = _run_mixed(caplog, {"fallback": "eager"})
    assert any("falls back to eager: no GPU" in s for s in msgs), msgs


def test_inductor_handles_the_rest(caplog):
    msgs = _run_mixed(caplog, {"cpu": "interpret"}, tol=1e-4)
    assert any("the rest by inductor" in s for s in msgs)


def test_partitions_are_maximal_and_cut_at_unsupported_nodes():
    m, x = Mixed(), torch.randn(4, 16)
    gm = torch.fx.symbolic_trace(m)
    from torch.fx.passes.shape_prop import ShapeProp

    ShapeProp(gm).propagate(x)
    reasons = {n.name: node_supported(n, gm) for n in gm.graph.nodes
               if n.op.startswith("call_")}
    assert reasons["cumsum"] is not None and "no strata lowering" in reasons["cumsum"]
    assert reasons["abs_1"] is not None
    supported = [k for k, v in reasons.items() if v is None]
    assert {"pow_1", "mean", "add", "rsqrt", "mul", "matmul", "silu"} <= set(supported)


def test_failing_partition_falls_back_per_partition(caplog, monkeypatch):
    import strata.backend as backend

    def boom(*a, **k):
        raise strata.StrataError("search found nothing")

    monkeypatch.setattr(backend, "lower_graph", boom)
    msgs = _run_mixed(caplog, {"cpu": "interpret", "fallback": "eager"})
    assert sum("falls back to eager: StrataError: search found nothing" in s
               for s in msgs) == 2


def test_partition_without_a_faster_graph_stays_with_the_fallback(caplog, monkeypatch):
    """When strata's fastest graph is the program itself, the partition is left to the
    fallback (its plain program would run one predefined kernel per op)."""
    import types

    import strata.backend as backend
    import strata.search as search

    calls = []

    def fake_optimize(program, **kwargs):
        calls.append(program)
        fastest = types.SimpleNamespace(is_program=True, rank=0, predicted_us=1.0)
        return types.SimpleNamespace(gpu_profile={"fastest": 0}, fastest=fastest,
                                     stats={"candidates_found": 1})

    monkeypatch.setattr(search, "optimize", fake_optimize)
    monkeypatch.setattr(backend, "_on_gpu", lambda sub: True)
    monkeypatch.setattr(backend, "_gpu_present", lambda: True)
    msgs = _run_mixed(caplog, {"fallback": "eager"})
    assert len(calls) == 2, msgs
    assert sum("falls back to eager: strata found no graph faster than the program" in s
               for s in msgs) == 2, msgs


def long_chain(x, w):
    """A supported chain of about 40 program tensors: more than one search takes."""
    h = x @ w
    for i in range(12):
        h = torch.tanh(h * (0.5 + 0.01 * i) + 0.1) * x
    return h


def test_oversized_partition_is_split_within_the_search_limit(caplog):
    from strata.backend import _Support, split_partition
    from torch.fx.passes.shape_prop import ShapeProp

    x, w = torch.randn(4, 16), torch.randn(16, 16) / 4
    gm = torch.fx.symbolic_trace(long_chain)
    ShapeProp(gm).propagate(x, w)
    support = _Support(gm)
    calls = [n for n in gm.graph.nodes if n.op.startswith("call_")]
    assert all(support.is_node_supported({}, n) for n in calls)
    limit = strata._core.max_program_tensors
    runs = split_partition(calls, support.tensors, limit)
    assert len(runs) >= 2 and [n for r in runs for n in r] == calls
    for run in runs:  # each run, lowered on its own, is a program the search takes
        members = set(run)
        outside = {a for n in run for a in n.all_input_nodes if a not in members}
        assert len(outside) + sum(support.tensors[n] for n in run) <= limit
    # end to end: every run is a partition of its own, and the result matches eager
    f = torch.compile(long_chain, backend="strata",
                      options={"cpu": "interpret", "fallback": "eager"})
    with caplog.at_level(logging.INFO, logger="strata"):
        got = f(x, w)
    torch.testing.assert_close(got, long_chain(x, w), atol=1e-4, rtol=1e-4)
    msgs = _messages(caplog)
    assert any(f"split into {len(runs)} partitions" in s for s in msgs), msgs
    assert any(f"{len(runs)} partition(s), {len(runs)} run by strata" in s for s in msgs), msgs


def test_unknown_option():
    with pytest.raises(strata.StrataError, match="unknown option"):
        strata_backend(torch.fx.symbolic_trace(torch.nn.ReLU()), [torch.randn(2)],
                       options={"tim_limit": 3})
