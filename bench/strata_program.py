"""A `.strata` program (docs/program-format.md) read in Python, standard library only: its
inputs, its ops in order, its outputs, every tensor's shape and dtype, the input recipes of
its annotations, and the floor's ingredients (minimal DRAM bytes, matmul FLOPs).

The benchmark harness of the suite (bench/suite_bench.py) evaluates such a program with
PyTorch (bench/torch_program.py); the parser here follows the grammar and signatures of the
C++ parser, and bench/tests/test_strata_program.py holds the two together (op names and
signatures against `strata check`, results against `strata run`).

Composites (softmax, layer_norm) are kept as single ops, not expanded: PyTorch has a function
for each, which is what a PyTorch user writes.

Input recipes. An input line may end in a comment `# recipe: KIND(ARGS)` that says how the
benchmark draws its values (bench/README.md, "The suite"):

  normal(s)            s · N(0, 1)
  weight               N(0, 1/fan_in), fan_in = the extent of dim -2 (the contracted dim of a
                       matmul's right operand)
  gain                 1 + 0.1 · N(0, 1) (a norm's learned scale)
  uniform(lo, hi)      U(lo, hi)
  rope_cos(theta)      cos(p · theta^(-2i/D)) with p the position (dim 0) and i the index in
  rope_sin(theta)      the last dim of extent D, taken modulo D/2 (the rotate-half layout)

Without an annotation, an input that is the right operand of a matmul is a `weight`, and
every other input is `normal(1)`.
"""

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

DTYPES = {"f16": 2, "bf16": 2, "f32": 4}
MAX_RANK = 4

# ---- op signatures ---------------------------------------------------------------------
# Per program op: its tensor parameters, then (name, type, default) for each attribute
# (type "int" or "real"; default None = required), and the keyword alias of `scalar`.
# These mirror the C++ parser's signatures (src/frontend/program_parser.cc and the
# attribute sets of src/ir/op.cc); the tests compare them with the tool's messages.
_UNARY = ["exp", "square", "sqrt", "silu", "gelu", "relu", "sigmoid", "tanh", "log"]
_BINARY = ["add", "sub", "mul", "div", "pow", "maximum", "minimum"]
SIGNATURES = {
    "matmul": (["a", "b"], []),
    **{op: (["x"], []) for op in _UNARY},
    "mul_scalar": (["x"], [("scalar", "real", None)]),
    "add_scalar": (["x"], [("scalar", "real", None)]),
    "clamp": (["x"], [("lo", "real", None), ("hi", "real", None)]),
    **{op: (["a", "b"], []) for op in _BINARY},
    "sum": (["x"], [("dim", "int", None), ("to", "int", 1)]),
    "mean": (["x"], [("dim", "int", None), ("to", "int", 1)]),
    "max": (["x"], [("dim", "int", None), ("to", "int", 1)]),
    "rms_norm": (["x"], [("dim", "int", -1), ("eps", "real", 0.0)]),
    "concat": (["a", "b"], [("dim", "int", None)]),
    "transpose": (["x"], []),
    "slice": (["x"], [("dim", "int", None), ("start", "int", None), ("end", "int", None)]),
    # the sum over the ranks of a tensor-parallel group (docs/tensor-parallel.md); programs
    # that declare `ranks` are not read here (bench/tp_bench.py states its own shapes)
    "all_reduce": (["x"], []),
    # composites
    "softmax": (["x"], [("dim", "int", -1)]),
    "layer_norm": (["x"], [("dim", "int", -1), ("eps", "real", 0.0)]),
}
ALIASES = {("mul_scalar", "c"): "scalar", ("add_scalar", "c"): "scalar"}
COMPOSITES = ("softmax", "layer_norm")


def signature_text(op):
    """"sum(x, dim, to=1)", as the C++ parser prints it."""
    tensors, attrs = SIGNATURES[op]
    parts = list(tensors)
    for name, kind, default in attrs:
        if default is None:
            parts.append(name)
        elif kind == "int":
            parts.append(f"{name}={int(default)}")
        else:
            parts.append(f"{name}={default:g}")
    return f"{op}({', '.join(parts)})"


class ProgramError(ValueError):
    """A program this module cannot read: FILE:LINE:COL: what, as the C++ parser reports."""


# ---- the graph ---------------------------------------------------------------------------


@dataclass
class Tensor:
    name: str
    shape: tuple
    dtype: str


@dataclass
class Op:
    """One op: `kind` (a key of SIGNATURES), input tensor names, attributes by name (dims
    normalized to non-negative), and the name of its result."""
    kind: str
    inputs: list
    attrs: dict
    out: str


@dataclass
class Recipe:
    kind: str
    args: tuple = ()

    def text(self):
        return self.kind + (f"({', '.join(f'{a:g}' for a in self.args)})" if self.args else "")


RECIPE_ARGS = {"normal": 1, "weight": 0, "gain": 0, "uniform": 2, "rope_cos": 1, "rope_sin": 1}


@dataclass
class Program:
    path: str
    origin: str
    inputs: list  # Tensor, in declaration order
    ops: list  # Op, in evaluation order
    outputs: list  # names
    tensors: dict  # name -> Tensor (inputs, named and unnamed results)
    recipes: dict = field(default_factory=dict)  # input name -> Recipe (annotated only)

    @property
    def name(self):
        return Path(self.path).stem

    def producer(self, name):
        for op in self.ops:
            if op.out == name:
                return op
        return None

    def readers(self, name):
        return [op for op in self.ops if name in op.inputs]

    def recipe(self, name):
        """The recipe of input `name`: its annotation, else the default (module docstring)."""
        if name in self.recipes:
            return self.recipes[name]
        if any(op.kind == "matmul" and op.inputs[1] == name for op in self.ops):
            return Recipe("weight")
        return Recipe("normal", (1.0,))

    def nbytes(self, name):
        t = self.tensors[name]
        return math.prod(t.shape) * DTYPES[t.dtype]

    @property
    def bytes(self):
        """Every input read once and every output written once, in their dtypes."""
        return sum(self.nbytes(t.name) for t in self.inputs) + sum(
            self.nbytes(o) for o in self.outputs)

    @property
    def input_bytes(self):
        return sum(self.nbytes(t.name) for t in self.inputs)

    @property
    def flops(self):
        """2·m·n·k per matmul and batch index."""
        total = 0
        for op in self.ops:
            if op.kind == "matmul":
                a, b = self.tensors[op.inputs[0]].shape, self.tensors[op.inputs[1]].shape
                total += 2 * math.prod(a[:-1]) * a[-1] * b[-1]
        return total

    def output_shapes(self):
        return [self.tensors[o].shape for o in self.outputs]


# ---- shapes -------------------------------------------------------------------------------


def broadcast(a, b):
    """NumPy broadcasting of two shapes, or None."""
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and x != 1 and y != 1:
            return None
        out.append(max(x, y))
    return tuple(reversed(out))


def infer_shape(kind, shapes, attrs):
    """The result shape of `kind` on input shapes, with attrs' dims normalized in place;
    raises ValueError naming the rule broken."""

    def norm_dim(key, rank):
        d = attrs[key]
        if not -rank <= d < rank:
            raise ValueError(f"dim {d} out of range for rank {rank}")
        attrs[key] = d % rank
        return attrs[key]

    x = shapes[0]
    if kind == "matmul":
        a, b = shapes
        if len(a) != len(b) or len(a) < 2:
            raise ValueError(f"matmul needs operands of the same rank >= 2: {list(a)} x {list(b)}")
        if a[-1] != b[-2]:
            raise ValueError(f"matmul inner dimensions differ: {list(a)} x {list(b)}")
        if a[:-2] != b[:-2]:
            raise ValueError(f"matmul batch dimensions differ: {list(a)} x {list(b)}")
        return a[:-1] + (b[-1],)
    if kind in _BINARY:
        out = broadcast(*shapes)
        if out is None:
            raise ValueError(f"shapes {list(shapes[0])} and {list(shapes[1])} do not broadcast")
        return out
    if kind in ("sum", "mean", "max"):
        d = norm_dim("dim", len(x))
        to = attrs["to"]
        if to < 1 or x[d] % to:
            raise ValueError(f"extent {x[d]} of dim {d} is not a multiple of to={to}")
        return x[:d] + (to,) + x[d + 1:]
    if kind in ("rms_norm", "softmax", "layer_norm"):
        norm_dim("dim", len(x))
        if attrs.get("eps", 0.0) < 0:
            raise ValueError("eps must be >= 0")
        return x
    if kind == "concat":
        a, b = shapes
        d = norm_dim("dim", len(a))
        if len(a) != len(b) or any(a[i] != b[i] for i in range(len(a)) if i != d):
            raise ValueError(f"concat of {list(a)} and {list(b)} along dim {d}")
        return a[:d] + (a[d] + b[d],) + a[d + 1:]
    if kind == "transpose":
        if len(x) < 2:
            raise ValueError("transpose needs rank >= 2")
        return x[:-2] + (x[-1], x[-2])
    if kind == "slice":
        d = norm_dim("dim", len(x))
        if not 0 <= attrs["start"] < attrs["end"] <= x[d]:
            raise ValueError(f"slice [{attrs['start']}, {attrs['end']}) of extent {x[d]}")
        return x[:d] + (attrs["end"] - attrs["start"],) + x[d + 1:]
    if kind == "clamp" and attrs["lo"] > attrs["hi"]:
        raise ValueError("clamp needs lo <= hi")
    return x  # unary


# ---- attention patterns ------------------------------------------------------------------


def attention_patterns(program):
    """Every softmax(scale·Q·Kᵀ)·V of the program whose intermediates are used only inside the
    pattern: dicts with q, k, v (tensor names), scale, out (the result's name) and dead (the
    intermediate results the pattern replaces)."""
    found = []
    outputs = set(program.outputs)

    def only_feeds(name, reader):
        """`name` is not an output and `reader` (a result name) is its only reader."""
        return name not in outputs and [op.out for op in program.readers(name)] == [reader]

    for op in program.ops:
        if op.kind != "matmul":
            continue
        p, v = op.inputs
        sm = program.producer(p)
        if sm is None or sm.kind != "softmax" or not only_feeds(p, op.out):
            continue
        if sm.attrs["dim"] != len(program.tensors[p].shape) - 1:
            continue
        dead, scale = {p}, 1.0
        s, reader = sm.inputs[0], sm.out
        node = program.producer(s)
        if node is not None and node.kind == "mul_scalar":  # scale after the matmul
            if not only_feeds(s, reader):
                continue
            dead.add(s)
            scale = node.attrs["scalar"]
            s, reader = node.inputs[0], node.out
            node = program.producer(s)
        if node is None or node.kind != "matmul" or not only_feeds(s, reader):
            continue
        dead.add(s)
        q, kt = node.inputs
        qs = program.producer(q)
        if qs is not None and qs.kind == "mul_scalar" and only_feeds(q, node.out):
            scale *= qs.attrs["scalar"]  # scale applied to Q
            dead.add(q)
            q = qs.inputs[0]
        tr = program.producer(kt)
        if tr is None or tr.kind != "transpose" or not only_feeds(kt, node.out):
            continue
        dead.add(kt)
        k = tr.inputs[0]
        ranks = {len(program.tensors[n].shape) for n in (q, k, v)}
        if len(ranks) != 1 or ranks.pop() not in (2, 3, 4):
            continue
        found.append({"q": q, "k": k, "v": v, "scale": scale, "out": op.out, "dead": dead})
    return found


# ---- lexer and parser ---------------------------------------------------------------------

_TOKEN = re.compile(r"""
    (?P<ws>[ \t\r]+)
  | (?P<number>[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<punct>[()\[\],=:])
""", re.X)
_RECIPE = re.compile(r"#\s*recipe:\s*([a-z_]+)\s*(?:\((.*)\))?\s*$")


@dataclass
class _Tok:
    kind: str  # name | number | punct | end
    text: str
    col: int


def _lex(line, where):
    code, hash_sign, comment = line.partition("#")
    toks, pos = [], 0
    while pos < len(code):
        m = _TOKEN.match(code, pos)
        if not m:
            raise ProgramError(f"{where}:{pos + 1}: error: unexpected character `{code[pos]}`")
        kind = m.lastgroup
        if kind == "number" and m.end() < len(code) and (code[m.end()].isalpha() or
                                                          code[m.end()] == "_"):
            raise ProgramError(f"{where}:{pos + 1}: error: malformed number "
                               f"`{code[pos:m.end() + 1]}`")
        if kind != "ws":
            toks.append(_Tok(kind, m.group(), pos + 1))
        pos = m.end()
    toks.append(_Tok("end", "", len(code) + 1))
    return toks, (hash_sign + comment)


def _number(tok):
    text = tok.text
    if re.fullmatch(r"[+-]?\d+", text):
        return int(text)
    return float(text)


class _Parser:
    def __init__(self, path):
        self.path = str(path)
        self.tensors = {}
        self.inputs, self.ops, self.outputs = [], [], []
        self.recipes = {}
        self.temp = 0

    def err(self, lineno, col, msg):
        return ProgramError(f"{self.path}:{lineno}:{col}: error: {msg}")

    def parse(self, text):
        origin = ""
        for lineno, line in enumerate(text.split("\n"), 1):
            if lineno == 1 and line.lstrip().startswith("#"):
                origin = line.lstrip()[1:].strip()
            toks, comment = _lex(line, f"{self.path}:{lineno}")
            if toks[0].kind == "end":
                continue
            self.line(lineno, toks, comment)
        if not self.outputs:
            raise ProgramError(f"{self.path}: error: no `output` statement; expected at least "
                               "one `output NAME`")
        return Program(self.path, origin, self.inputs, self.ops, self.outputs, self.tensors,
                       self.recipes)

    def expect(self, lineno, toks, i, kind, text=None, what=None):
        t = toks[i]
        if t.kind != kind or (text is not None and t.text != text):
            found = "end of line" if t.kind == "end" else f"`{t.text}`"
            raise self.err(lineno, t.col, f"found {found}; expected {what or text or kind}")
        return t

    def line(self, lineno, toks, comment):
        first = toks[0]
        if first.kind == "name" and first.text == "input" and toks[1].kind == "name" and \
                toks[2].text == ":":
            self.input(lineno, toks, comment)
        elif first.kind == "name" and first.text == "output" and toks[1].kind == "name" and \
                toks[2].text != "=":
            i = 1
            while True:
                t = self.expect(lineno, toks, i, "name", what="an output name")
                if t.text not in self.tensors:
                    raise self.err(lineno, t.col, f"undefined name `{t.text}`")
                if t.text in self.outputs:
                    raise self.err(lineno, t.col, f"`{t.text}` is already an output")
                self.outputs.append(t.text)
                i += 1
                if toks[i].kind == "end":
                    break
                self.expect(lineno, toks, i, "punct", ",")
                i += 1
        else:
            name = self.expect(lineno, toks, 0, "name", what="a statement")
            self.expect(lineno, toks, 1, "punct", "=")
            self.define(lineno, name)
            i, _ = self.call(lineno, toks, 2, name.text)
            self.expect(lineno, toks, i, "end", what="end of line")

    def define(self, lineno, tok):
        if tok.text in self.tensors:
            raise self.err(lineno, tok.col, f"duplicate name `{tok.text}`")

    def input(self, lineno, toks, comment):
        name = toks[1]
        self.define(lineno, name)
        dtype = self.expect(lineno, toks, 3, "name", what="a dtype")
        if dtype.text not in DTYPES:
            raise self.err(lineno, dtype.col, f"unknown dtype `{dtype.text}`")
        self.expect(lineno, toks, 4, "punct", "[")
        dims, i = [], 5
        while True:
            t = self.expect(lineno, toks, i, "number", what="an extent")
            v = _number(t)
            if not isinstance(v, int) or v < 1:
                raise self.err(lineno, t.col, f"extent `{t.text}`; expected an integer >= 1")
            dims.append(v)
            i += 1
            if toks[i].text == "]":
                break
            self.expect(lineno, toks, i, "punct", ",", what="`,` or `]`")
            i += 1
        self.expect(lineno, toks, i + 1, "end", what="end of line")
        if len(dims) > MAX_RANK:
            raise self.err(lineno, name.col, f"rank {len(dims)}; expected at most {MAX_RANK}")
        t = Tensor(name.text, tuple(dims), dtype.text)
        self.tensors[t.name] = t
        self.inputs.append(t)
        m = _RECIPE.match(comment)
        if re.match(r"#\s*recipe\b", comment) and not m:
            raise self.err(lineno, 1, f"malformed recipe comment `{comment.strip()}`; "
                           "expected `# recipe: KIND(ARGS)`")
        if m:
            kind, args = m.group(1), m.group(2)
            if kind not in RECIPE_ARGS:
                raise self.err(lineno, 1, f"unknown recipe `{kind}`; expected one of: "
                               + ", ".join(RECIPE_ARGS))
            vals = tuple(float(a) for a in args.split(",")) if args and args.strip() else ()
            if len(vals) != RECIPE_ARGS[kind]:
                raise self.err(lineno, 1, f"recipe `{kind}` takes {RECIPE_ARGS[kind]} "
                               f"argument(s), found {len(vals)}")
            self.recipes[t.name] = Recipe(kind, vals)

    def call(self, lineno, toks, i, result=None):
        """Parses CALL at toks[i]; returns (index after it, the result tensor's name)."""
        op = self.expect(lineno, toks, i, "name", what="an op call")
        if op.text not in SIGNATURES:
            raise self.err(lineno, op.col, f"unknown op `{op.text}`")
        self.expect(lineno, toks, i + 1, "punct", "(")
        i += 2
        tensors, attr_specs = SIGNATURES[op.text]
        params = list(tensors) + [a[0] for a in attr_specs]
        bound = {}
        positional = 0
        seen_keyword = False
        while toks[i].text != ")":
            key = None
            if toks[i].kind == "name" and toks[i + 1].text == "=":
                key = ALIASES.get((op.text, toks[i].text), toks[i].text)
                if key not in params:
                    raise self.err(lineno, toks[i].col, f"unknown keyword argument "
                                   f"`{toks[i].text}` for `{op.text}`")
                seen_keyword = True
                i += 2
            elif seen_keyword:
                raise self.err(lineno, toks[i].col, "positional argument after a keyword "
                               "argument")
            else:
                if positional >= len(params):
                    raise self.err(lineno, toks[i].col, f"extra argument in the call to "
                                   f"`{op.text}`: {signature_text(op.text)}")
                key = params[positional]
                positional += 1
            if key in bound:
                raise self.err(lineno, toks[i].col, f"`{key}` given twice")
            col = toks[i].col
            if key in tensors:
                if toks[i].kind == "name" and toks[i + 1].text == "(":
                    i, value = self.call(lineno, toks, i)
                elif toks[i].kind == "name":
                    if toks[i].text not in self.tensors:
                        raise self.err(lineno, col, f"undefined name `{toks[i].text}`")
                    value = toks[i].text
                    i += 1
                else:
                    raise self.err(lineno, col, f"found `{toks[i].text}` for tensor argument "
                                   f"`{key}` of `{op.text}`; expected a tensor")
            else:
                t = self.expect(lineno, toks, i, "number", what=f"a number for `{key}`")
                value = _number(t)
                kind = next(a[1] for a in attr_specs if a[0] == key)
                if kind == "int" and not isinstance(value, int):
                    raise self.err(lineno, col, f"found `{t.text}` for `{key}` of `{op.text}`; "
                                   "expected an integer")
                if kind == "real":
                    value = float(value)
                    if not math.isfinite(value):
                        raise self.err(lineno, col, f"`{key}` must be finite")
                i += 1
            bound[key] = value
            if toks[i].text == ",":
                i += 1
            elif toks[i].text != ")":
                self.expect(lineno, toks, i, "punct", ")", what="`,` or `)`")
        i += 1
        for name in tensors:
            if name not in bound:
                raise self.err(lineno, op.col, f"missing tensor `{name}` in the call to "
                               f"`{op.text}`; expected {signature_text(op.text)}")
        attrs = {}
        for name, kind, default in attr_specs:
            if name in bound:
                attrs[name] = bound[name]
            elif default is None:
                raise self.err(lineno, op.col, f"missing argument `{name}` in the call to "
                               f"`{op.text}`; expected {signature_text(op.text)}")
            else:
                attrs[name] = default
        ins = [bound[n] for n in tensors]
        shapes = [self.tensors[n].shape for n in ins]
        try:
            shape = infer_shape(op.text, shapes, attrs)
        except ValueError as e:
            raise self.err(lineno, op.col, f"invalid operands for `{op.text}`: {e}") from None
        if result is None:  # an unnamed intermediate: a name no program can write
            result = f"%{self.temp}"
            self.temp += 1
        self.tensors[result] = Tensor(result, shape, self.tensors[ins[0]].dtype)
        self.ops.append(Op(op.text, ins, attrs, result))
        return i, result


def parse(text, path="<program>"):
    """The Program of `.strata` text; raises ProgramError."""
    return _Parser(path).parse(text)


def load(path):
    return parse(Path(path).read_text(encoding="utf-8"), str(path))
