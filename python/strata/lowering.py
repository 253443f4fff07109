"""From PyTorch to strata programs: ``capture(fn, *example_tensors)`` traces a function or module
with torch.fx and lowers its graph through the one op table of ``torch_ops`` (docs/python.md,
"Capture"). The ``torch.compile`` backend lowers its partitions with the same ``lower_graph``.

Lowering keeps strata's rules: every tensor has a dtype of f16, bf16 or f32 and rank 1–4, each
op's result must have the shape and dtype PyTorch computed for the node (checked against the
node's metadata), Python scalars become op attributes (``mul_scalar``) or bound inputs of shape
[1] (``Program.bound``), and module parameters become bound inputs.
"""
import linecache
import re

import torch
import torch.fx

from .errors import ProgramError, UnsupportedError
from .program import ProgramBuilder, Value
from .torch_ops import Unsupported, rule_for

_DTYPES = {torch.float16: "f16", torch.bfloat16: "bf16", torch.float32: "f32"}
_TORCH = {v: k for k, v in _DTYPES.items()}
_FRAME = re.compile(r'File "([^"]+)", line (\d+), in ([^\n]+)\n\s*([^\n]*)')


def dtype_name(dtype):
    """strata's name of a torch dtype, or None when strata has no such dtype."""
    return _DTYPES.get(dtype)


def node_target_name(node):
    """A readable name of what an FX node calls: ``torch.exp``, ``Tensor.pow``, ``nn.Linear``."""
    if node.op == "call_method":
        return f"Tensor.{node.target}"
    if node.op == "call_module":
        try:
            mod = node.graph.owning_module.get_submodule(node.target)
            return f"{type(mod).__module__}.{type(mod).__name__}".replace("torch.nn.modules.", "nn.")
        except AttributeError:
            return str(node.target)
    t = node.target
    module = getattr(t, "__module__", None) or ""
    name = getattr(t, "__name__", None) or str(t)
    if module in ("_operator", "operator"):
        module = "operator"
    elif module.startswith("torch._C._nn"):
        module = "torch.nn.functional"
    elif module.startswith("torch._C") or module in ("torch.functional", ""):
        module = "torch" if hasattr(torch, name) else module
    return f"{module}.{name}" if module else name


def node_location(node):
    """``file:line`` (and the source line) of the user's code that created the node, from the
    stack trace FX (symbolic_trace with record_stack_traces) or Dynamo recorded; None if none."""
    trace = node.meta.get("stack_trace") or getattr(node, "stack_trace", None)
    if not trace:
        return None
    frames = _FRAME.findall(trace)
    if not frames:
        return None
    path, line, func, code = frames[-1]
    code = code.strip() or linecache.getline(path, int(line)).strip()
    return f"{path}:{line} in {func}: {code}" if code else f"{path}:{line} in {func}"


def tensor_meta(node):
    """(shape, dtype) of the tensor an FX node produces, from its metadata; None otherwise."""
    for key in ("val", "example_value"):
        v = node.meta.get(key)
        if isinstance(v, torch.Tensor):
            return tuple(int(s) for s in v.shape), v.dtype
    tm = node.meta.get("tensor_meta")
    if tm is not None and hasattr(tm, "shape"):
        return tuple(int(s) for s in tm.shape), tm.dtype
    return None


class Lowering:
    """The context rules of torch_ops lower through: values of FX nodes, numbers, strata ops.

    ``env`` maps FX nodes to what they denote: a builder ``Value`` (a tensor), a Python number
    or a tuple of those.
    """

    def __init__(self, builder, root=None):
        self.b = builder
        self.env = {}
        self.root = root  # the traced module (for call_module and parameters)
        self.node = None
        self._params = {}

    # ---- what rules call ------------------------------------------------------------------
    def value(self, arg):
        if isinstance(arg, torch.fx.Node):
            if arg not in self.env:
                raise Unsupported(f"uses {arg.name}, which has no strata value")
            return self.env[arg]
        if isinstance(arg, (list, tuple)):
            return type(arg)(self.value(a) for a in arg)
        return arg

    def tensor(self, arg):
        v = self.value(arg) if not isinstance(arg, Value) else arg
        if not isinstance(v, Value):
            raise Unsupported(f"expected a tensor, got {type(v).__name__} {v!r}")
        return v

    def is_tensor(self, arg):
        if isinstance(arg, Value):
            return True
        return isinstance(arg, torch.fx.Node) and isinstance(self.env.get(arg), Value)

    def is_number(self, arg):
        v = self.env.get(arg) if isinstance(arg, torch.fx.Node) else arg
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    def number(self, arg):
        v = self.env.get(arg) if isinstance(arg, torch.fx.Node) else arg
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise Unsupported(f"expected a number, got {v!r}")
        return v

    def torch_dtype(self, v):
        return _TORCH[v.dtype]

    def op(self, name, *args, **attrs):
        hint = self._name(self.node.name) if self.node is not None else None
        try:
            return self.b.op(name, *args, name=self.b._fresh(hint or name), **attrs)
        except ProgramError as e:
            raise Unsupported(f"strata rejects {e}") from None

    def const(self, value, like, shape=(1,)):
        return self.b.constant(float(value), like, shape=shape)

    def parameter(self, module, attr):
        """A module parameter or buffer as a bound input of the program."""
        t = getattr(module, attr)
        key = id(t)
        if key not in self._params:
            self._params[key] = self._input(f"{self._name(attr)}", t, bind=True)
        return self._params[key]

    # ---- internals ----------------------------------------------------------------------
    def _name(self, hint):
        return re.sub(r"[^A-Za-z0-9_]", "_", hint) if hint else None

    def _input(self, name, tensor_or_meta, bind=False, where=None):
        if isinstance(tensor_or_meta, torch.Tensor):
            shape, dtype = tuple(tensor_or_meta.shape), tensor_or_meta.dtype
        else:
            shape, dtype = tensor_or_meta
        where = where or f"input {name}"
        if dtype not in _DTYPES:
            raise Unsupported(f"{where} has dtype {dtype}; strata supports float16, bfloat16 "
                              f"and float32")
        if not 1 <= len(shape) <= 4:
            raise Unsupported(f"{where} has rank {len(shape)}; strata tensors have rank 1 to 4")
        name = self._name(name)
        if name in ("input", "output") or name in self.b._values:
            name = self.b._fresh(name)
        try:
            v = self.b.input(name, shape, _DTYPES[dtype])
        except ProgramError as e:
            raise Unsupported(str(e)) from None
        if bind:
            self.b.bind(v, tensor_or_meta)
        return v


def _check_result(node, value):
    """The strata result must match what PyTorch computed for the node."""
    meta = tensor_meta(node)
    if meta is None or not isinstance(value, Value):
        return
    shape, dtype = meta
    if tuple(value.shape) != shape:
        raise Unsupported(f"strata's result has shape {list(value.shape)}, PyTorch's "
                          f"{list(shape)}")
    if _DTYPES.get(dtype) != value.dtype:
        raise Unsupported(f"strata's result has dtype {value.dtype}, PyTorch's {dtype} "
                          f"(mixed dtypes)")


def lower_node(cx, node):
    """Lowers one call node into the context; raises Unsupported with the reason."""
    cx.node = node
    if node.op == "call_module":
        module = cx.root.get_submodule(node.target)
        rule = rule_for(type(module))
        args = (module,) + tuple(node.args)
    elif node.op in ("call_function", "call_method"):
        rule = rule_for(node.target)
        args = tuple(node.args)
    else:
        raise Unsupported(f"FX node kind {node.op}")
    if rule is None:
        raise Unsupported("no strata lowering for this op")
    if not rule.available():
        missing = ", ".join(r[0] + ("(" + ", ".join(r[1:]) + ")" if len(r) > 1 else "")
                            for r in rule.missing())
        raise Unsupported(f"needs the op {missing}, which this build's op table does not have")
    resolved = tuple(cx.value(a) if not isinstance(a, torch.nn.Module) else a for a in args)
    kwargs = {k: cx.value(v) for k, v in node.kwargs.items()}
    try:
        out = rule.lower(cx, *resolved, **kwargs)
    except TypeError as e:
        raise Unsupported(f"unexpected arguments ({e})") from None
    _check_result(node, out)
    cx.env[node] = out
    return out


def unsupported_error(node, reason, what="capture"):
    op = node_target_name(node)
    loc = node_location(node)
    where = f" at {loc}" if loc else ""
    return UnsupportedError(f"strata.{what}: unsupported op `{op}` (node {node.name}){where}: "
                            f"{reason}", op=op, location=loc)


def lower_graph(gm, input_meta=None, what="capture"):
    """Lowers a whole FX graph into a Program. Placeholders become inputs (shapes and dtypes
    from ``input_meta`` — a list of tensors or (shape, dtype) — or their metadata), get_attr
    nodes bound inputs, every call node an op; raises UnsupportedError naming the first node
    that cannot be lowered and its source line."""
    b = ProgramBuilder()
    cx = Lowering(b, root=gm)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if input_meta is not None and len(input_meta) != len(placeholders):
        raise UnsupportedError(f"strata.{what}: {len(placeholders)} inputs but "
                               f"{len(input_meta)} example tensors")
    out_node = None
    for node in gm.graph.nodes:
        try:
            if node.op == "placeholder":
                i = placeholders.index(node)
                meta = input_meta[i] if input_meta is not None else tensor_meta(node)
                if meta is None:
                    raise Unsupported("an input without a known shape (not a tensor?)")
                cx.env[node] = cx._input(node.name, meta, where=f"input `{node.name}`")
            elif node.op == "get_attr":
                t = gm
                for part in node.target.split("."):
                    t = getattr(t, part)
                if not isinstance(t, torch.Tensor):
                    raise Unsupported(f"attribute {node.target} is not a tensor")
                cx.env[node] = cx._input(node.name, t.detach(), bind=True,
                                         where=f"parameter `{node.target}`")
            elif node.op == "output":
                out_node = node
            else:
                lower_node(cx, node)
        except Unsupported as e:
            raise unsupported_error(node, str(e), what) from None
    outs = out_node.args[0]
    flat = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    seen = set()
    for o in flat:
        v = cx.env.get(o) if isinstance(o, torch.fx.Node) else o
        if not isinstance(v, Value):
            raise UnsupportedError(f"strata.{what}: an output is not a tensor ({o!r}); strata "
                                   f"programs return tensors")
        if v.name in seen:
            raise UnsupportedError(f"strata.{what}: the tensor {v.name} is returned twice; a "
                                   f"strata output appears once")
        seen.add(v.name)
        b.output(v)
    return b.build()


class _Tracer(torch.fx.Tracer):
    """symbolic_trace's tracer, recording for every node the user's frames (torch.fx keeps them
    only below a `forward` method; a plain function has none)."""

    record_stack_traces = True

    def _filter_traceback_frames(self, summary):
        import os
        import traceback

        skip = (os.path.dirname(torch.__file__), os.path.dirname(__file__))
        frames = [f for f in summary if not f.filename.startswith(skip)]
        return traceback.StackSummary.from_list(frames)


def capture(fn, *example_tensors):
    """Traces ``fn`` (a function or nn.Module of tensors) with torch.fx.symbolic_trace and
    returns the strata ``Program`` it computes for inputs shaped like ``example_tensors``.

    The program's inputs are ``fn``'s tensor arguments in order, then the parameters it uses
    and the scalar constants no op attribute takes (both in ``Program.bound``). An op without
    a strata lowering raises ``UnsupportedError`` naming the op and the source line.
    """
    tracer = _Tracer()
    root = fn if isinstance(fn, torch.nn.Module) else torch.nn.Module()
    try:
        graph = tracer.trace(fn)
    except Exception as e:  # noqa: BLE001 - FX raises many kinds of errors
        raise UnsupportedError(f"strata.capture: torch.fx could not trace "
                               f"{getattr(fn, '__name__', type(fn).__name__)}: {e}") from e
    gm = torch.fx.GraphModule(root, graph)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(example_tensors):
        raise UnsupportedError(f"strata.capture: the function takes {len(placeholders)} "
                               f"arguments, got {len(example_tensors)} example tensors")
    for i, t in enumerate(example_tensors):
        if not isinstance(t, torch.Tensor):
            raise UnsupportedError(f"strata.capture: example input {i} is a "
                                   f"{type(t).__name__}; expected a tensor")
    # Shapes of every node, from a run on fake tensors shaped like the examples.
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    mode = FakeTensorMode(allow_non_fake_inputs=True)
    try:
        FakeTensorProp(gm, mode).propagate(*[mode.from_tensor(t) for t in example_tensors])
    except Exception as e:  # noqa: BLE001
        raise UnsupportedError(f"strata.capture: running the traced graph on the example "
                               f"shapes failed: {e}") from e
    return lower_graph(gm, [(tuple(t.shape), t.dtype) for t in example_tensors])
