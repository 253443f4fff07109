"""The package builds, imports, and carries one version and the C++ op table."""
import importlib.metadata
import re

import strata
from strata import _core


def test_version_is_cmake_project_version(root):
    cmake = (root / "CMakeLists.txt").read_text()
    want = re.search(r"project\(strata\s+VERSION\s+([0-9.]+)", cmake).group(1)
    assert strata.__version__ == want
    assert importlib.metadata.version("strata") == want


def test_op_names_come_from_the_cpp_op_table(root):
    rows = re.findall(r'^STRATA_OP\(\s*\w+,\s*"(\w+)",\s*(-?\d+),\s*(\w+),\s*([^,]+),',
                      (root / "include/strata/ir/op_table.def").read_text(), re.M)
    table = {r["name"]: r for r in strata.op_table() if r["category"] != "composite"}
    assert [r[0] for r in rows] == list(table)
    composites = [r["name"] for r in strata.op_table() if r["category"] == "composite"]
    assert composites == ["softmax", "layer_norm"]
    assert all(name in strata.op_names() for name in composites)
    for name, arity, category, levels in rows:
        assert table[name]["arity"] == int(arity)
        assert table[name]["category"] == category.lower()
        kernel_op = "kKernel" in levels and name not in ("input", "customized")
        assert table[name]["program_op"] == kernel_op
        assert (name in strata.op_names()) == kernel_op


def test_signatures_are_the_parsers():
    assert strata.signature("sum") == "sum(x, dim, to=1)"
    assert strata.signature("rms_norm") == "rms_norm(x, dim=-1, eps=0)"
    assert strata.signature("softmax") == "softmax(x, dim=-1)"
    assert strata.signature("accum") is None
    assert strata.has_op("sum", "dim", "to")
    assert strata.has_op("mul_scalar", "c")  # the alias counts
    assert not strata.has_op("sum", "keepdim")
    assert not strata.has_op("no_such_op")


def test_gpu_parts_are_reported(root):
    assert strata.cuda_built() in (True, False)
    if strata.cuda_built():
        # Generated CUDA includes the device runtime shipped inside the package.
        from strata.search import runtime_dir

        assert runtime_dir(), "runtime headers missing from the installed package"
    assert isinstance(strata.gpu_available(), bool)


def test_emit_cuda_needs_no_gpu(examples):
    p = strata.Program.load(examples / "rmsnorm_small.strata")
    src = _core.emit_cuda(p._graph, "sm_90a", "")
    assert "strata_launch" in src and "strata_rt/strata_rt.cuh" in src
