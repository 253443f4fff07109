"""The GPU entry points on a machine without a GPU raise the documented error."""
import pytest

import strata

pytestmark = pytest.mark.skipif(strata.gpu_available(),
                                reason="a GPU is present: test_gpu.py covers kernels")


def test_compile_without_gpu_raises(examples):
    p = strata.Program.load(examples / "rmsnorm_small.strata")
    with pytest.raises(strata.GpuUnavailableError) as e:
        strata.compile(p)
    if strata.cuda_built():
        assert "no CUDA device is available" in str(e.value)
    else:
        assert "built without CUDA support" in str(e.value)
    assert isinstance(e.value, strata.StrataError)


def test_result_kernel_without_gpu_raises(examples, tmp_path):
    p = strata.Program.load(examples / "rmsnorm_small.strata")
    r = strata.optimize(p, top_k=1, cache_dir=tmp_path)  # profile: only with a GPU
    assert r.gpu_profile is None
    with pytest.raises(strata.GpuUnavailableError):
        r.kernel()
