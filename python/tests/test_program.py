"""Programs: parse, load, JSON, the builder, and their errors."""
import json

import pytest

import strata


def test_parse_and_views():
    p = strata.Program.parse("input X: f16[2, 8]\ninput W: f16[8, 4]\n"
                             "O = matmul(rms_norm(X), W)\noutput O\n")
    assert p.inputs == [("X", "f16", (2, 8)), ("W", "f16", (8, 4))]
    assert p.outputs == [("O", "f16", (2, 4))]
    assert p.op_names == ["rms_norm", "matmul"]
    assert not p.is_mugraph
    assert "matmul" in str(p) and "2 inputs" in repr(p)


def test_parse_error_has_location():
    with pytest.raises(strata.ProgramError, match=r"prog\.strata:2:5: error: unknown op "
                                                  r"`matmull`.*did you mean `matmul`"):
        strata.Program.parse("input X: f16[2, 8]\nO = matmull(X, X)\noutput O\n", "prog.strata")


def test_load_program_and_mugraph_and_json_roundtrip(root):
    p = strata.Program.load(root / "examples/programs/gqa_small.strata")
    g = strata.Program.load(root / "examples/reference/gqa_small.json")
    assert g.is_mugraph and "customized" in g.op_names
    again = strata.Program.from_json(g.to_json())
    assert again.structurally_equal(g)
    assert strata.Program.from_json(g.to_dict()).to_json() == g.to_json()
    assert p.inputs == g.inputs


def test_from_json_error_names_the_path():
    doc = {"inputs": [], "ops": [{"op": "frobnicate"}]}
    with pytest.raises(strata.ProgramError):
        strata.Program.from_json(json.dumps(doc))


def test_builder_matches_the_parsed_program(examples):
    b = strata.ProgramBuilder()
    x = b.input("X", (4, 256), "f16")
    w = b.input("W", (256, 512), "f16")
    y = b.matmul(b.rms_norm(x), w)
    b.output(y, name="O")
    built = b.build()
    parsed = strata.Program.load(examples / "rmsnorm_small.strata")
    assert built.structurally_equal(parsed)
    assert strata.equiv(built, parsed)
    assert built.outputs[0].name == "O"
    assert strata.Program.parse(built.text).structurally_equal(built)


def test_builder_keyword_attributes_and_shapes():
    b = strata.ProgramBuilder()
    x = b.input("X", (4, 8, 16), "f32")
    a = b.op("sum", x, dim=-1, to=4)
    assert a.shape == (4, 8, 4)
    m = b.mean(x, 1)
    assert m.shape == (4, 1, 16)
    c = b.concat(a, a, dim=2)
    d = b.mul_scalar(b.rms_norm(c, dim=0), c=-0.25)
    b.output(d, m)
    p = b.build()
    assert [o.shape for o in p.outputs] == [(4, 8, 8), (4, 1, 16)]
    assert "to=4" in p.text and "c=-0.25" in p.text


def test_builder_errors_at_the_call():
    b = strata.ProgramBuilder()
    x = b.input("X", (2, 8), "f16")
    w = b.input("W", (4, 8), "f16")
    with pytest.raises(strata.ProgramError, match=r"matmul\(X, W\): invalid operands for "
                                                  r"`matmul`: matmul inner dimensions differ"):
        b.matmul(x, w)
    with pytest.raises(strata.ProgramError, match=r"unknown keyword argument `dims` for `sum`"):
        b.sum(x, dims=1)
    with pytest.raises(strata.ProgramError, match=r"missing argument `dim`"):
        b.sum(x)
    with pytest.raises(strata.ProgramError, match=r"unknown op 'frobnicate'"):
        b.op("frobnicate", x)
    with pytest.raises(AttributeError, match="frobnicate"):
        b.frobnicate(x)
    with pytest.raises(strata.ProgramError, match="bool"):
        b.mul_scalar(x, True)
    with pytest.raises(strata.ProgramError, match="unknown dtype `f64`"):
        b.input("Y", (2,), "f64")
    with pytest.raises(strata.ProgramError, match="no output"):
        b.build()
    other = strata.ProgramBuilder().input("Z", (2, 8), "f16")
    with pytest.raises(strata.ProgramError, match="another builder"):
        b.add(x, other)


def test_builder_constants_are_bound():
    b = strata.ProgramBuilder()
    x = b.input("X", (3, 5), "f32")
    c = b.constant(2.5, x)
    y = b.add(x, c)
    b.output(y)
    p = b.build()
    assert p.bound == {c.name: 2.5}
    assert [s.name for s in p.free_inputs] == ["X"]


def test_builder_tensor_parallel_program_equals_its_unsharded_form():
    # docs/tensor-parallel.md: a row-parallel matmul over 2 ranks, then a residual add.
    b = strata.ProgramBuilder(ranks=2)
    x = b.input("X", (4, 8), "f32", shard=1)
    w = b.input("W", (8, 16), "f32", shard=0)
    r = b.input("R", (4, 16), "f32")
    with pytest.raises(strata.ProgramError, match="differs between the ranks"):
        b.output(b.matmul(x, w))  # a partial sum is not the same on every rank
    o = b.add(b.all_reduce(b.matmul(x, w)), r)
    b.output(o, name="O")
    p = b.build()
    assert p.text.startswith("ranks 2\n") and "shard(dim=1)" in p.text
    full = strata.Program.parse("input X: f32[4, 16]\ninput W: f32[16, 16]\ninput R: f32[4, 16]\n"
                                "O = add(matmul(X, W), R)\noutput O\n")
    assert strata.equiv(p, full)
    wrong = strata.Program.parse("input X: f32[4, 16]\ninput W: f32[16, 16]\ninput R: f32[4, 16]\n"
                                 "O = add(matmul(X, W), add(R, R))\noutput O\n")
    assert not strata.equiv(p, wrong)
