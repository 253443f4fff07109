"""strata.capture: PyTorch functions and modules into programs, through the one op table."""
import pathlib

import pytest
import torch
import torch.nn.functional as F

import strata
from strata.torch_ops import RULES

THIS = pathlib.Path(__file__).name


def check(fn, *inputs, atol=1e-4):
    p = strata.capture(fn, *inputs)
    got = strata.run(p, list(inputs))
    want = fn(*inputs)
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        torch.testing.assert_close(g, w, atol=atol, rtol=atol)
    return p


def test_rmsnorm_matmul_with_scalars():
    def f(x, w):
        h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
        return F.silu(h @ w) * 2.0 + 1

    p = check(f, torch.randn(4, 16), torch.randn(16, 8))
    assert "mul_scalar" in p.op_names and "silu" in p.op_names
    # Scalars that an op's attribute takes stay constants (eps and + 1 through add_scalar);
    # the rest (rsqrt's 1 / ·) are bound inputs of shape [1].
    assert "add_scalar" in p.op_names
    assert sorted(p.bound.values()) == [1.0]
    assert [s.name for s in p.free_inputs] == ["x", "w"]


def test_elementwise_and_arithmetic_forms():
    def f(a, b):
        y = torch.exp(a) - b / 4 + a * a + torch.sqrt(b * b + 1.0)
        y = y + F.relu(a) - 2 * F.gelu(b, approximate="tanh") + torch.square(a)
        y = y / (1.5 - a.neg().exp()) + 3 - a
        return torch.pow(y, 2) + a ** b.clone().detach().contiguous().sqrt().relu()

    def g(a, b):
        return torch.add(a, b, alpha=3).div(2.0).sub(b) * b.mul(a)

    a, b = torch.rand(3, 8) + 0.5, torch.rand(3, 8) + 0.5
    p = check(f, a, b, atol=1e-3)
    for op in ("exp", "square", "sqrt", "relu", "gelu", "pow", "mul_scalar", "div", "sub"):
        assert op in p.op_names, op
    check(g, a, b)


def test_unsupported_op_names_op_and_source_line():
    def f(a, b):
        y = a + b
        return y.abs()  # the line the error must name

    with pytest.raises(strata.UnsupportedError) as e:
        strata.capture(f, torch.randn(2, 4), torch.randn(2, 4))
    msg = str(e.value)
    assert "unsupported op `Tensor.abs`" in msg
    assert f"{THIS}:" in msg and "return y.abs()" in msg
    assert e.value.op == "Tensor.abs" and THIS in e.value.location


def test_reductions_concat_and_broadcasting():
    def f(x, y):
        s = x.sum(dim=-1, keepdim=True)
        m = torch.mean(x, 0, keepdim=True)
        return torch.cat([x / s, y], dim=1) - m.sum(1, keepdim=True)

    p = check(f, torch.rand(4, 6) + 0.1, torch.rand(4, 3))
    assert "concat" in p.op_names and "sum" in p.op_names


def test_keepdim_false_is_explained():
    with pytest.raises(strata.UnsupportedError, match="keepdim=False changes the rank"):
        strata.capture(lambda x: x.sum(-1), torch.randn(2, 3))


def test_gelu_exact_is_explained():
    with pytest.raises(strata.UnsupportedError, match="approximate='tanh'"):
        strata.capture(lambda x: F.gelu(x), torch.randn(2, 3))


def test_mixed_dtypes_and_bad_inputs():
    with pytest.raises(strata.UnsupportedError, match="conversion from torch.float16"):
        strata.capture(lambda x, w: x @ w.float(), torch.randn(2, 3), torch.randn(3, 2).half())
    with pytest.raises(strata.UnsupportedError, match="dtype torch.float64"):
        strata.capture(lambda x: x * 2, torch.randn(2, 3, dtype=torch.float64))
    with pytest.raises(strata.UnsupportedError, match="rank 5"):
        strata.capture(lambda x: x * 2, torch.randn(1, 1, 1, 2, 3))
    with pytest.raises(strata.UnsupportedError, match="2 arguments, got 1"):
        strata.capture(lambda x, y: x + y, torch.randn(2))


def test_matmul_rank_rule_comes_from_strata():
    with pytest.raises(strata.UnsupportedError, match="matmul"):
        strata.capture(lambda x, w: x @ w, torch.randn(2, 3, 4), torch.randn(4))


def test_matmul_broadcasts_batch_dims_through_bound_ones():
    # x [B, T, K] times a rank-2 weight: the weight is multiplied by bound ones [B, 1, 1],
    # which gives it x's batch dims; F.linear and nn.Linear go the same way.
    x, w = torch.randn(2, 3, 4), torch.randn(4, 5)
    p = check(lambda x, w: x @ w, x, w)
    assert p.op_names == ["mul", "matmul"]
    ones = [s for s in p.inputs if s.name in p.bound]
    assert [list(s.shape) for s in ones] == [[2, 1, 1]] and list(p.bound.values()) == [1.0]
    assert [s.name for s in p.free_inputs] == ["x", "w"]
    check(lambda x, w, b: F.linear(x, w, b), x, torch.randn(5, 4), torch.randn(5))
    lin = torch.nn.Linear(4, 6)
    with torch.no_grad():
        got = strata.run(strata.capture(lin, x), [x])
        torch.testing.assert_close(got, lin(x), atol=1e-4, rtol=1e-4)
    # Batch dims of extent 1 on either side, and a rank-2 left operand.
    check(lambda a, b: a @ b, torch.randn(2, 1, 3, 4), torch.randn(1, 5, 4, 2))
    check(lambda a, b: a @ b, torch.randn(3, 4), torch.randn(2, 4, 5))


def test_module_parameters_are_bound_inputs():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(8, 4))
            self.register_buffer("g", torch.rand(8) + 0.5)

        def forward(self, x):
            return torch.relu((x * self.g) @ self.w)

    m = M()
    x = torch.randn(3, 8)
    p = strata.capture(m, x)
    assert [s.name for s in p.free_inputs] == ["x"]
    assert len(p.bound) == 2
    with torch.no_grad():
        torch.testing.assert_close(strata.run(p, [x]), m(x), atol=1e-4, rtol=1e-4)


def test_leaf_modules():
    m = torch.nn.Sequential(torch.nn.SiLU(), torch.nn.GELU(approximate="tanh"), torch.nn.ReLU())
    check(m, torch.randn(2, 5))


def test_guarded_rules_follow_the_op_table(monkeypatch):
    import strata.ops as ops

    guarded = [r for r in RULES if r.requires]
    assert guarded, "the table maps ops other work adds"
    for rule in guarded:
        assert rule.available() == all(strata.has_op(*req) for req in rule.requires)
    # An op that is missing is reported as such, naming it.
    if not strata.has_op("tanh"):
        with pytest.raises(strata.UnsupportedError, match="needs the op tanh"):
            strata.capture(lambda x: torch.tanh(x), torch.randn(2, 3))
        # When the table has the op (simulated here), the rule turns on.
        table = dict(ops._table())
        table["tanh"] = dict(table["exp"], name="tanh", signature="tanh(x)")
        monkeypatch.setattr(ops, "_table", lambda: table)
        rule = next(r for r in RULES if torch.tanh in r.targets)
        assert rule.available()
