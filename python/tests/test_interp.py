"""strata.run (the float64 reference interpreter) and strata.equiv (the verifier)."""
import numpy as np
import pytest
import torch

import strata

PROGRAM = """
input X: f32[3, 8]
input W: f32[8, 5]
O = matmul(rms_norm(X), W)
S = sum(exp(X), dim=1)
output O, S
"""


def reference(x, w):
    x = x.astype(np.float64)
    y = x / np.sqrt((x * x).mean(-1, keepdims=True))
    return y @ w.astype(np.float64), np.exp(x).sum(1, keepdims=True)


def test_run_numpy_returns_numpy():
    p = strata.Program.parse(PROGRAM)
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((3, 8), np.float32), rng.standard_normal((8, 5), np.float32)
    o, s = strata.run(p, [x, w])
    assert isinstance(o, np.ndarray) and o.dtype == np.float32 and o.shape == (3, 5)
    want_o, want_s = reference(x, w)
    np.testing.assert_allclose(o, want_o, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(s, want_s, rtol=1e-5)


def test_run_torch_returns_torch_in_the_output_dtype():
    p = strata.Program.parse(PROGRAM.replace("f32", "f16"))
    x = torch.randn(3, 8, dtype=torch.float16)
    w = torch.randn(8, 5, dtype=torch.float16)
    o, s = strata.run(p, [x, w])
    assert isinstance(o, torch.Tensor) and o.dtype == torch.float16
    want_o, want_s = reference(x.numpy(), w.numpy())
    np.testing.assert_allclose(o.double().numpy(), want_o, rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(s.double().numpy(), want_s, rtol=2e-3)


def test_run_single_output_is_not_a_tuple(root):
    p = strata.Program.load(root / "examples/programs/rmsnorm_small.strata")
    out = strata.run(p, [torch.randn(4, 256).half(), torch.randn(256, 512).half()])
    assert isinstance(out, torch.Tensor) and out.shape == (4, 512)


def test_run_input_errors():
    p = strata.Program.parse(PROGRAM)
    x, w = np.zeros((3, 8), np.float32), np.zeros((8, 5), np.float32)
    with pytest.raises(strata.InputError, match=r"input 0 \(X\): dtype float64; expected "
                                                r"f32\[3, 8\]"):
        strata.run(p, [x.astype(np.float64), w])
    with pytest.raises(strata.InputError, match=r"input 1 \(W\): shape \[5, 8\]; expected "
                                                r"f32\[8, 5\]"):
        strata.run(p, [x, w.T.copy()])
    with pytest.raises(strata.InputError, match=r"got 1 input\(s\); expected 2"):
        strata.run(p, [x])
    with pytest.raises(strata.InputError, match=r"dtype torch.float16; expected f32"):
        strata.run(p, [torch.zeros(3, 8, dtype=torch.float16), torch.zeros(8, 5)])
    with pytest.raises(strata.InputError, match="mix of torch tensors"):
        strata.run(p, [torch.zeros(3, 8), w])
    with pytest.raises(strata.InputError, match="a list; expected a torch tensor"):
        strata.run(p, [[0.0] * 8, w])


def test_equiv():
    a = strata.Program.parse("input X: f32[4, 8]\nO = mul(X, X)\noutput O\n")
    b = strata.Program.parse("input X: f32[4, 8]\nO = square(X)\noutput O\n")
    c = strata.Program.parse("input X: f32[4, 8]\nO = add(X, X)\noutput O\n")
    r = strata.equiv(a, b)
    assert r and r.equivalent and r.trials >= 1 and r.log2_bound <= -60
    r = strata.equiv(a, c)
    assert not r and "output 0" in r.detail
    d = strata.Program.parse("input X: f32[4, 9]\nO = square(X)\noutput O\n")
    r = strata.equiv(a, d)  # different shapes: a well-formed "not equivalent"
    assert not r and "shape" in r.detail


def test_equiv_reduced_instance():
    # Elementwise over [64, 32]: both dims are independent and shrink (docs/verifier.md §7).
    a = strata.Program.parse("input X: f32[64, 32]\nO = mul(X, X)\noutput O\n")
    b = strata.Program.parse("input X: f32[64, 32]\nO = square(X)\noutput O\n")
    r = strata.equiv(a, b)
    assert r and r.instance == "X.0 64 → 2, X.1 32 → 2"
    r = strata.equiv(a, b, full_instance=True)
    assert r and r.instance == ""


def test_equiv_program_and_reference_mugraph(root):
    assert strata.equiv(str(root / "examples/programs/gqa_small.strata"),
                        str(root / "examples/reference/gqa_small.json"))
