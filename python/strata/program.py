"""Programs and μGraphs in Python: ``Program`` wraps a checked C++ kernel graph, and
``ProgramBuilder`` builds a program op by op (docs/python.md, "Programs").

The builder writes ``.strata`` statements (docs/program-format.md) and has the C++ parser check
each op as it is added, so argument binding, attributes and shape rules are the parser's own:
an op added to the op table is callable here as ``builder.<op>(...)`` with its keyword
attributes, and an error is raised at the call that caused it.
"""
import json
import re
from collections import namedtuple

from . import _core
from .errors import ProgramError, StrataError
from .ops import op_info, op_names

TensorSpec = namedtuple("TensorSpec", ["name", "dtype", "shape"])
TensorSpec.__doc__ = "Name, dtype ('f16', 'bf16' or 'f32') and shape (a tuple) of a tensor."

_LOCATION = re.compile(r"^[^\n]*?:\d+:\d+: error: ")


def _specs(infos):
    return [TensorSpec(name, dtype, tuple(shape)) for name, dtype, shape in infos]


class Program:
    """A kernel graph: a program of predefined ops, or a μGraph with customized kernels (as
    found by the search). Built only through the C++ parser or JSON reader, so it always
    satisfies the graph rules.

    ``bound`` maps input names to values the program supplies itself: Python scalars lifted
    to inputs of shape [1] and parameters (tensors) found by ``strata.capture``. ``run`` and
    compiled kernels fill them in, so callers pass only the ``free_inputs``.
    """

    def __init__(self, graph, text=None, bound=None):
        if not isinstance(graph, _core.Graph):
            raise TypeError("Program wraps a strata._core.Graph; use Program.parse, "
                            "Program.load or ProgramBuilder")
        self._graph = graph
        self._text = text
        self.bound = dict(bound or {})
        names = {s.name for s in self.inputs}
        unknown = set(self.bound) - names
        if unknown:
            raise ProgramError(f"bound values for {sorted(unknown)}, which are not inputs of "
                               f"the program (inputs: {sorted(names)})")

    # ---- construction ----------------------------------------------------------------
    @classmethod
    def parse(cls, text, filename="<string>"):
        """Parses ``.strata`` program text; errors are ``ProgramError`` with file:line:col."""
        try:
            return cls(_core.Graph.parse(text, filename), text=text)
        except StrataError as e:
            raise ProgramError(str(e)) from None

    @classmethod
    def load(cls, path):
        """Loads a ``.strata`` program or a μGraph JSON file."""
        try:
            graph = _core.Graph.load(str(path))
        except StrataError as e:
            raise ProgramError(str(e)) from None
        text = None
        if not str(path).endswith(".json"):
            with open(path, encoding="utf-8") as f:
                text = f.read()
        return cls(graph, text=text)

    @classmethod
    def from_json(cls, doc, origin="<json>"):
        """Builds a graph from μGraph JSON (text or a dict, docs/mugraph-json.md)."""
        text = doc if isinstance(doc, str) else json.dumps(doc)
        try:
            return cls(_core.Graph.from_json(text, origin))
        except StrataError as e:
            raise ProgramError(str(e)) from None

    # ---- views ---------------------------------------------------------------------------
    @property
    def inputs(self):
        """``TensorSpec`` of every input, in order."""
        return _specs(self._graph.inputs)

    @property
    def outputs(self):
        """``TensorSpec`` of every output, in order."""
        return _specs(self._graph.outputs)

    @property
    def free_inputs(self):
        """The inputs a caller passes: those not in ``bound``."""
        return [s for s in self.inputs if s.name not in self.bound]

    @property
    def text(self):
        """The ``.strata`` source when the program came from text or the builder, else None."""
        return self._text

    @property
    def op_names(self):
        """Kernel-level ops in order (inputs excluded); ``customized`` for fused kernels."""
        return list(self._graph.op_names)

    @property
    def is_mugraph(self):
        """True when the graph has customized kernels (a search result), not just
        predefined ops."""
        return self._graph.num_customized > 0

    def to_json(self, indent=None):
        """Canonical μGraph JSON text."""
        return self._graph.to_json(-1 if indent is None else indent)

    def to_dict(self):
        """The μGraph JSON as a dict."""
        return json.loads(self.to_json())

    def structurally_equal(self, other):
        return self._graph.structurally_equal(other._graph)

    def __str__(self):
        return self._graph.format()

    def __repr__(self):
        return f"<strata.Program: {self._graph.summary()}>"


class Value:
    """A tensor of a program under construction (``ProgramBuilder``)."""

    __slots__ = ("builder", "name", "dtype", "shape")

    def __init__(self, builder, name, dtype, shape):
        self.builder, self.name, self.dtype, self.shape = builder, name, dtype, tuple(shape)

    def __repr__(self):
        return f"<Value {self.name}: {self.dtype}{list(self.shape)}>"


_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_RESERVED = {"input", "output"}


def _number(v, what):
    if isinstance(v, bool):
        raise ProgramError(f"{what}: found a bool ({v}); expected a number")
    try:
        import numpy as np

        if isinstance(v, np.generic):
            v = v.item()
    except ImportError:  # pragma: no cover - numpy is a dependency
        pass
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    raise ProgramError(f"{what}: found {type(v).__name__} {v!r}; expected a tensor of this "
                       f"builder, an int or a float")


class ProgramBuilder:
    """Builds a program op by op::

        b = strata.ProgramBuilder()
        x = b.input("X", (8, 4096), "f16")
        w = b.input("W", (4096, 1024), "f16")
        y = b.matmul(b.rms_norm(x), w)      # or b.op("matmul", ...)
        b.output(y, name="O")               # or name results when created: b.exp(x, name="E")
        program = b.build()

    Ops are the program ops of the C++ op table (``strata.op_names()``); positional and
    keyword arguments follow the op's signature (``strata.signature("sum")`` is
    ``"sum(x, dim, to=1)"``). Each call is checked by the parser at once.

    Tensor parallelism (docs/tensor-parallel.md): ``ProgramBuilder(ranks=2)`` writes the
    program of one of 2 ranks; ``input(..., shard=D)`` declares the rank's part of a tensor
    sharded along D, ``b.all_reduce(x)`` sums over the ranks, ``output(v, shard=D)`` declares
    a sharded output (others must be the same on every rank).
    """

    def __init__(self, ranks=1):
        if not isinstance(ranks, int) or isinstance(ranks, bool) or ranks < 1:
            raise ProgramError(f"ranks {ranks!r}: expected a positive integer")
        self._ranks = ranks
        self._shards = {}  # input or output name -> shard dim
        # Statements as structure, rendered to text on demand: ("input", name, dims, dtype) or
        # ("op", name, op, [(keyword or None, ("tensor", name) | ("number", text))]).
        self._stmts = []
        self._values = {}
        self._outputs = []
        self._bound = {}
        self._counter = 0

    # ---- names -----------------------------------------------------------------------
    def _fresh(self, hint):
        base = hint if hint and _NAME.match(hint) and hint not in _RESERVED else ""
        if base and base not in self._values:
            return base
        base = base or "v"
        while True:
            self._counter += 1
            name = f"{base}_{self._counter}"
            if name not in self._values:
                return name

    @staticmethod
    def _render(stmt):
        if stmt[0] == "input":
            _, name, dims, dtype = stmt[:4]
            shard = f" shard(dim={stmt[4]})" if len(stmt) > 4 and stmt[4] is not None else ""
            return f"input {name}: {dtype}[{', '.join(dims)}]{shard}"
        _, name, op, args = stmt
        parts = [(f"{k}=" if k else "") + v for k, (_, v) in args]
        return f"{name} = {op}({', '.join(parts)})"

    def _check(self, stmt, name, what):
        """Parses the program with `stmt` appended and `name` as a provisional output; returns
        its dtype and shape, or raises ProgramError naming `what`."""
        lines = self._head() + [self._render(t) for t in self._stmts + [stmt]]
        # A provisional output that may differ between ranks is declared sharded.
        probe = f"output {name}" + (" shard(dim=0)" if self._ranks > 1 else "")
        text = "\n".join(lines + [probe]) + "\n"
        try:
            graph = _core.Graph.parse(text, "<builder>")
        except StrataError as e:
            raise ProgramError(f"{what}: {_LOCATION.sub('', str(e))}") from None
        for out_name, dtype, shape in graph.outputs:
            if out_name == name:
                return dtype, tuple(shape)
        raise ProgramError(f"{what}: the parser lost the result")  # pragma: no cover

    # ---- statements --------------------------------------------------------------------
    def _head(self):
        return [f"ranks {self._ranks}"] if self._ranks > 1 else []

    def input(self, name, shape, dtype="f16", shard=None):
        """Declares an input ``name: dtype[shape]``; dtype is 'f16', 'bf16' or 'f32'. With
        ``shard=D`` (a program over several ranks) the shape is the rank's part of a tensor
        sharded along dim D."""
        if not isinstance(name, str) or not _NAME.match(name) or name in _RESERVED:
            raise ProgramError(f"input name {name!r}: expected a name [A-Za-z_][A-Za-z0-9_]* "
                               f"other than 'input' and 'output'")
        if name in self._values:
            raise ProgramError(f"input {name}: the name is already used")
        dims = [_number(int(d), f"input {name} shape") for d in shape]
        if shard is not None:
            shard = int(_number(int(shard), f"input {name} shard"))
        stmt = ("input", name, dims, str(dtype), shard)
        _, got = self._check(stmt, name, f"input {name}")
        self._stmts.append(stmt)
        v = Value(self, name, dtype, got)
        self._values[name] = v
        return v

    def constant(self, value, like, name=None, shape=(1,)):
        """An input of ``shape`` (default [1]) and ``like``'s dtype that the program binds to
        the scalar ``value`` everywhere (``Program.bound``): how capture expresses Python
        scalars that no op attribute takes, and (ones of shape [*batch, 1, 1]) the broadcast
        of a matmul operand over batch dims. Broadcasting applies it elementwise."""
        name = self._fresh(name or "c")
        v = self.input(name, tuple(shape), like.dtype)
        self._bound[name] = float(value)
        return v

    def bind(self, value, tensor):
        """Marks input ``value`` as supplied by the program itself (e.g. a module parameter)."""
        self._bound[value.name] = tensor

    def op(self, op, *args, name=None, **attrs):
        """Adds a call of program op ``op`` on ``args`` (tensors of this builder, or numbers
        for the op's attributes) with keyword attributes; returns its result."""
        if op_info(op) is None:
            raise ProgramError(f"unknown op {op!r}; expected one of: {', '.join(op_names())}")
        parts = [(None, self._arg(a, f"{op} argument {i}")) for i, a in enumerate(args)]
        parts += [(k, self._arg(a, f"{op} argument {k}")) for k, a in attrs.items()]
        out = self._fresh(name or op)
        if name and out != name:
            raise ProgramError(f"{op}: result name {name!r} is already used or invalid")
        stmt = ("op", out, op, parts)
        shown = self._render(stmt).split(" = ", 1)[1]
        dtype, shape = self._check(stmt, out, shown)
        self._stmts.append(stmt)
        v = Value(self, out, dtype, shape)
        self._values[out] = v
        return v

    def _arg(self, a, what):
        if isinstance(a, Value):
            if a.builder is not self or self._values.get(a.name) is not a:
                raise ProgramError(f"{what}: a tensor of another builder")
            return ("tensor", a.name)
        return ("number", _number(a, what))

    def __getattr__(self, op):
        if op.startswith("_") or op_info(op) is None:
            raise AttributeError(f"ProgramBuilder has no attribute or op {op!r} (ops: "
                                 f"{', '.join(op_names())})")

        def call(*args, name=None, **attrs):
            return self.op(op, *args, name=name, **attrs)

        call.__name__ = op
        return call

    def output(self, *values, name=None, shard=None):
        """Marks results as program outputs, in order. ``name`` (one value only) renames it;
        ``shard=D`` declares them sharded along dim D (their full value is the ranks' parts
        concatenated)."""
        if name is not None:
            if len(values) != 1:
                raise ProgramError("output(name=...) takes exactly one value")
            v = values[0]
            if name != v.name:
                # Renaming: an identity-free rename is not expressible in .strata, so the
                # statement that defined v is rewritten to define `name`.
                v = self._rename(v, name)
            values = (v,)
        for v in values:
            self._arg(v, "output")
            if v.name in self._outputs:
                raise ProgramError(f"output {v.name}: already an output (a tensor may be an "
                                   f"output only once)")
            self._outputs.append(v.name)
            if shard is not None:
                self._shards[v.name] = int(shard)
            try:  # a replicated output that differs between ranks is refused here
                _core.Graph.parse(self.text, "<builder>")
            except StrataError as e:
                self._outputs.pop()
                self._shards.pop(v.name, None)
                raise ProgramError(f"output {v.name}: {_LOCATION.sub('', str(e))}") from None
        return values[0] if len(values) == 1 else values

    def _rename(self, v, name):
        if not _NAME.match(name) or name in _RESERVED or name in self._values:
            raise ProgramError(f"output name {name!r}: expected a new name "
                               f"[A-Za-z_][A-Za-z0-9_]*")
        if v.name in self._bound:
            raise ProgramError(f"output {v.name}: a bound input cannot be renamed")
        old = v.name

        def ren(n):
            return name if n == old else n

        stmts = []
        for t in self._stmts:
            if t[0] == "input":
                stmts.append(("input", ren(t[1]), *t[2:]))
            else:
                args = [(k, ("tensor", ren(x)) if kind == "tensor" else (kind, x))
                        for k, (kind, x) in t[3]]
                stmts.append(("op", ren(t[1]), t[2], args))
        self._stmts = stmts
        self._outputs = [name if o == v.name else o for o in self._outputs]
        del self._values[v.name]
        v.name = name
        self._values[name] = v
        return v

    @property
    def statement_count(self):
        """How many statements (inputs and ops) the program has so far."""
        return len(self._stmts)

    @property
    def text(self):
        """The ``.strata`` text so far (with the output statements)."""
        lines = self._head() + [self._render(t) for t in self._stmts]
        if self._outputs:
            lines.append("output " + ", ".join(
                o + (f" shard(dim={self._shards[o]})" if o in self._shards else "")
                for o in self._outputs))
        return "\n".join(lines) + "\n"

    def build(self):
        """The finished ``Program``; needs at least one output."""
        if not self._outputs:
            raise ProgramError("the program has no output; call output(...) first")
        text = self.text
        try:
            graph = _core.Graph.parse(text, "<builder>")
        except StrataError as e:  # pragma: no cover - every line was checked
            raise ProgramError(str(e)) from None
        return Program(graph, text=text, bound=self._bound)
