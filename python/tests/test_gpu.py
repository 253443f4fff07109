"""GPU tests of the Python package (marker `gpu`): kernels on CUDA tensors, CUDA graphs,
torch.compile through kernels, and the strata backend end to end. `make test` deselects them;
scripts/gpu-python.sh runs them on a GPU machine. They fail, not skip, without a GPU."""
import logging
import math

import pytest
import torch
import torch.nn.functional as F

import strata
from strata.backend import register
from strata.models import LlamaConfig, LlamaDecoderLayer

pytestmark = pytest.mark.gpu
register()


def rel_l2(got, want):
    got, want = got.double(), want.double()
    assert torch.isfinite(got).all(), "non-finite output"
    return ((got - want).norm() / want.norm()).item()


@pytest.fixture(scope="module")
def rmsnorm_kernel(tmp_path_factory):
    assert strata.gpu_available(), "the GPU tests need a CUDA device"
    prog = strata.Program.parse("input X: f16[8, 1024]\ninput W: f16[1024, 2048]\n"
                                "O = matmul(rms_norm(X), W)\noutput O\n")
    result = strata.optimize(prog, top_k=2, cache_dir=tmp_path_factory.mktemp("cache"))
    assert result.gpu_profile is not None and result.gpu_profile["fastest"] is not None
    return result.kernel()


def rmsnorm_ref(x, w):
    x = x.double()
    return (x / x.pow(2).mean(-1, keepdim=True).sqrt()) @ w.double()


def test_kernel_matches_eager(rmsnorm_kernel):
    x = torch.randn(8, 1024, device="cuda", dtype=torch.float16)
    w = torch.randn(1024, 2048, device="cuda", dtype=torch.float16) / 32
    out = rmsnorm_kernel(x, w)
    assert out.shape == (8, 2048) and out.dtype == torch.float16 and out.is_cuda
    assert rel_l2(out, rmsnorm_ref(x, w)) < 1e-2
    given = torch.full_like(out, float("nan"))
    assert rmsnorm_kernel(x, w, out=given) is given
    assert rel_l2(given, rmsnorm_ref(x, w)) < 1e-2


def test_kernel_checks_its_arguments(rmsnorm_kernel):
    x = torch.randn(8, 1024, device="cuda", dtype=torch.float16)
    w = torch.randn(1024, 2048, device="cuda", dtype=torch.float16)
    with pytest.raises(strata.InputError, match="dtype torch.float32"):
        rmsnorm_kernel(x.float(), w)
    with pytest.raises(strata.InputError, match=r"shape \[8, 512\]"):
        rmsnorm_kernel(x[:, :512].contiguous(), w)
    with pytest.raises(strata.InputError, match="not contiguous"):
        rmsnorm_kernel(x, w.t().contiguous().t())
    with pytest.raises(strata.InputError, match="on cpu"):
        rmsnorm_kernel(x.cpu(), w)
    with pytest.raises(strata.InputError, match="got 1 input"):
        rmsnorm_kernel(x)


def test_kernel_runs_on_the_current_stream_and_in_cuda_graphs(rmsnorm_kernel):
    x = torch.randn(8, 1024, device="cuda", dtype=torch.float16)
    w = torch.randn(1024, 2048, device="cuda", dtype=torch.float16) / 32
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        out = rmsnorm_kernel(x, w)
    torch.cuda.current_stream().wait_stream(side)
    assert rel_l2(out, rmsnorm_ref(x, w)) < 1e-2
    graph = torch.cuda.CUDAGraph()
    static_x = x.clone()
    with torch.cuda.graph(graph):
        static_out = rmsnorm_kernel(static_x, w)
    for _ in range(3):
        static_x.copy_(torch.randn_like(static_x))
        graph.replay()
        torch.cuda.synchronize()
        assert rel_l2(static_out, rmsnorm_ref(static_x, w)) < 1e-2


def test_torch_compile_traces_through_a_kernel(rmsnorm_kernel):
    def f(x, w):
        return rmsnorm_kernel(x * 2.0, w) + 1.0

    x = torch.randn(8, 1024, device="cuda", dtype=torch.float16)
    w = torch.randn(1024, 2048, device="cuda", dtype=torch.float16) / 32
    torch._dynamo.reset()
    got = torch.compile(f, fullgraph=True)(x, w)
    assert rel_l2(got, rmsnorm_ref(x * 2.0, w) + 1.0) < 1e-2


QKV_PROGRAM = ("input X: f16[64, 128]\ninput W: f16[128, 96]\nQKV = matmul(X, W)\n"
               "Q = slice(QKV, -1, 0, 64)\nK = slice(QKV, -1, 64, 80)\n"
               "V = slice(QKV, -1, 80, 96)\noutput Q, K, V\n")


def test_packed_outputs_are_views_of_one_product(tmp_path):
    """Q, K, V of one product (docs/python.md, "Outputs"): views of one allocation as
    torch.split gives them, in eager calls, out= with them, CUDA graphs and torch.compile."""
    k = strata.compile(strata.Program.parse(QKV_PROGRAM), cache_dir=tmp_path)
    assert k.placement[1] == {"base": 0, "offset": 64, "strides": [96, 1], "alloc": 0}
    x = torch.randn(64, 128, device="cuda", dtype=torch.float16)
    w = torch.randn(128, 96, device="cuda", dtype=torch.float16) / 11
    want = torch.split(x.double() @ w.double(), [64, 16, 16], dim=1)
    q, kk, v = k(x, w)
    assert [t.stride() for t in (q, kk, v)] == [(96, 1)] * 3
    assert kk.data_ptr() == q.data_ptr() + 64 * 2 and v.data_ptr() == q.data_ptr() + 80 * 2
    for got, ref in zip((q, kk, v), want):
        assert rel_l2(got, ref) < 1e-2
    # out=: the views of an earlier call (in place), or separate dense tensors (copies).
    for t in (q, kk, v):
        t.fill_(float("nan"))
    assert k(x, w, out=(q, kk, v))[1] is kk
    dense = [torch.full(r.shape, float("nan"), device="cuda", dtype=torch.float16) for r in want]
    k(x, w, out=dense)
    for got, again, ref in zip((q, kk, v), dense, want):
        assert rel_l2(got, ref) < 1e-2 and rel_l2(again, ref) < 1e-2
    with pytest.raises(strata.InputError, match="neither all contiguous nor placed"):
        k(x, w, out=(q, v, kk.contiguous()))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static = k(x, w)
    graph.replay()
    torch.cuda.synchronize()
    for got, ref in zip(static, want):
        assert rel_l2(got, ref) < 1e-2
    torch._dynamo.reset()
    got = torch.compile(lambda a, b: [t * 2.0 for t in k(a, b)], fullgraph=True)(x, w)
    for g2, ref in zip(got, want):
        assert rel_l2(g2, 2.0 * ref) < 1e-2


def test_capture_optimize_kernel_with_bound_scalars(tmp_path):
    def f(x, w1, w3):
        return F.silu(x @ w1) * (x @ w3) * 0.5 + 1.0

    x = torch.randn(8, 512, device="cuda", dtype=torch.float16)
    w1 = torch.randn(512, 1024, device="cuda", dtype=torch.float16) / 16
    w3 = torch.randn(512, 1024, device="cuda", dtype=torch.float16) / 16
    k = strata.optimize(f, (x, w1, w3), top_k=2, cache_dir=tmp_path, time_limit=60).kernel()
    assert rel_l2(k(x, w1, w3), f(x.double(), w1.double(), w3.double())) < 1e-2


def test_backend_on_a_model(caplog):
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(1024, 2048, dtype=torch.float16,
                                                    device="cuda") / 32, requires_grad=False)

        def forward(self, x):
            h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
            y = F.silu(h @ self.w)
            return torch.cumsum(y, -1)  # not strata: Inductor

    torch._dynamo.reset()
    m = M()
    x = torch.randn(8, 1024, device="cuda", dtype=torch.float16)
    with caplog.at_level(logging.INFO, logger="strata"):
        got = torch.compile(m, backend="strata", options={"time_limit": 30})(x)
    assert rel_l2(got, m(x)) < 1e-2
    msgs = [r.getMessage() for r in caplog.records if r.name == "strata"]
    assert any("strata kernel" in s for s in msgs), msgs


def test_backend_on_the_llama_layer():
    torch._dynamo.reset()
    cfg = LlamaConfig(hidden=1024, heads=8, kv_heads=2, head_dim=128, intermediate=2816)
    layer = LlamaDecoderLayer(cfg, dtype=torch.float16, device="cuda")
    inputs = layer.make_inputs(batch=2, cache_len=256)
    got = torch.compile(layer, backend="strata", options={"time_limit": 30})(*inputs)
    want = layer(*inputs)
    for g, w in zip(got, want):
        assert rel_l2(g, w) < 1e-2
    assert math.isfinite(rel_l2(got[0], want[0]))
