"""The one table from PyTorch ops to strata ops (docs/python.md, "Supported PyTorch ops").

``strata.capture`` and the ``torch.compile`` backend both lower FX nodes through ``RULES``:
capture requires every node to have a rule that succeeds; the backend's partitioner calls a
node supported exactly when its rule succeeds on the node alone. A rule names the targets it
handles (torch functions, ``operator`` functions, Tensor method names as strings, nn.Module
types) and a lowering function ``lower(cx, *args, **kwargs)`` that emits strata ops through the
lowering context ``cx`` (capture.Lowering) or raises ``Unsupported`` with the reason.

Rules for ops that are not in every build's op table (softmax, transpose, slicing, max, …) are
guarded: ``requires`` names the op (and attributes) they need, checked against the C++ op table
through the bindings, so they start working when the op lands and are reported as unsupported
until then.
"""
import math
import operator
from dataclasses import dataclass, field
from typing import Callable, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from .ops import has_op, op_params


class Unsupported(Exception):
    """Raised by a rule: the node's pattern cannot be expressed (the message says why)."""


@dataclass
class Rule:
    targets: Sequence
    lower: Callable
    #: (op, *params) tuples the rule needs in the C++ op table; empty for the base ops.
    requires: Tuple = field(default_factory=tuple)

    def available(self):
        return all(has_op(*r) for r in self.requires)

    def missing(self):
        return [r for r in self.requires if not has_op(*r)]


def _dim_arg(cx, x, dim, what):
    """A single dimension index (int or 1-element list/tuple), normalized for x's rank."""
    if isinstance(dim, (list, tuple)):
        if len(dim) != 1:
            raise Unsupported(f"{what} over several dims {list(dim)}; strata reduces one dim")
        dim = dim[0]
    if not isinstance(dim, int) or isinstance(dim, bool):
        raise Unsupported(f"{what} needs an integer dim, got {dim!r}")
    rank = len(x.shape)
    if not -rank <= dim < rank:
        raise Unsupported(f"{what}: dim {dim} out of range for rank {rank}")
    return dim % rank


# ---- elementwise ------------------------------------------------------------------------
def _unary(op):
    def lower(cx, x, *rest, **kwargs):
        kwargs.pop("inplace", None)
        if rest or kwargs:
            raise Unsupported(f"{op} with extra arguments {list(rest)} {kwargs}")
        return cx.op(op, cx.tensor(x))

    return lower


def _gelu(cx, x, approximate="none", **kwargs):
    if approximate != "tanh":
        raise Unsupported(f"gelu with approximate={approximate!r}: strata's gelu is the tanh "
                          f"approximation; pass approximate='tanh'")
    return cx.op("gelu", cx.tensor(x))


def _gelu_module(cx, module, x):
    return _gelu(cx, x, approximate=module.approximate)


def _rsqrt(cx, x):
    x = cx.tensor(x)
    return cx.op("div", cx.const(1.0, x), cx.op("sqrt", x))


def _reciprocal(cx, x):
    x = cx.tensor(x)
    return cx.op("div", cx.const(1.0, x), x)


def _neg(cx, x):
    return cx.op("mul_scalar", cx.tensor(x), -1.0)


def _add_scalar(cx, x, c):
    """x + c for a tensor x and a number c."""
    if c == 0:
        return x
    if has_op("add_scalar"):
        return cx.op("add_scalar", x, float(c))
    return cx.op("add", x, cx.const(c, x))


def _add(cx, a, b, alpha=1, **kwargs):
    if kwargs:
        raise Unsupported(f"add with {kwargs}")
    if cx.is_number(a) and cx.is_number(b):
        return cx.number(a) + alpha * cx.number(b)
    if alpha != 1:
        b = _mul(cx, b, alpha)
    if cx.is_number(b):
        return _add_scalar(cx, cx.tensor(a), cx.number(b))
    if cx.is_number(a):
        return _add_scalar(cx, cx.tensor(b), cx.number(a))
    return cx.op("add", cx.tensor(a), cx.tensor(b))


def _sub(cx, a, b, alpha=1, **kwargs):
    if kwargs:
        raise Unsupported(f"sub with {kwargs}")
    if cx.is_number(a) and cx.is_number(b):
        return cx.number(a) - alpha * cx.number(b)
    if alpha != 1:
        b = _mul(cx, b, alpha)
    if cx.is_number(b):
        return _add_scalar(cx, cx.tensor(a), -cx.number(b))
    if cx.is_number(a):
        bt = cx.tensor(b)
        return cx.op("sub", cx.const(cx.number(a), bt), bt)
    return cx.op("sub", cx.tensor(a), cx.tensor(b))


def _rsub(cx, a, b, alpha=1):
    return _sub(cx, b, a, alpha=alpha)


def _mul(cx, a, b, **kwargs):
    if kwargs:
        raise Unsupported(f"mul with {kwargs}")
    if cx.is_number(a) and cx.is_number(b):
        return cx.number(a) * cx.number(b)
    if cx.is_number(a):
        a, b = b, a
    if cx.is_number(b):
        c = cx.number(b)
        return cx.tensor(a) if c == 1 else cx.op("mul_scalar", cx.tensor(a), float(c))
    ta, tb = cx.tensor(a), cx.tensor(b)
    if ta is tb:
        return cx.op("square", ta)
    return cx.op("mul", ta, tb)


def _div(cx, a, b, rounding_mode=None, **kwargs):
    if rounding_mode is not None or kwargs:
        raise Unsupported(f"div with rounding_mode={rounding_mode!r}")
    if cx.is_number(a) and cx.is_number(b):
        return cx.number(a) / cx.number(b)
    if cx.is_number(b):
        c = cx.number(b)
        if c == 0:
            raise Unsupported("division by the constant 0")
        return cx.op("mul_scalar", cx.tensor(a), 1.0 / c)
    tb = cx.tensor(b)
    ta = cx.const(cx.number(a), tb) if cx.is_number(a) else cx.tensor(a)
    return cx.op("div", ta, tb)


def _pow(cx, a, b):
    if cx.is_number(a) and cx.is_number(b):
        return cx.number(a) ** cx.number(b)
    if cx.is_number(b):
        x, e = cx.tensor(a), cx.number(b)
        if e == 1:
            return x
        if e == 2:
            return cx.op("square", x)
        if e == 0.5:
            return cx.op("sqrt", x)
        if e == -0.5:
            return _rsqrt(cx, x)
        if e == -1:
            return cx.op("div", cx.const(1.0, x), x)
        return cx.op("pow", x, cx.const(e, x))
    tb = cx.tensor(b)
    ta = cx.const(cx.number(a), tb) if cx.is_number(a) else cx.tensor(a)
    return cx.op("pow", ta, tb)


def _square(cx, x):
    return cx.op("square", cx.tensor(x))


def _binary_op(op):
    def lower(cx, a, b):
        return cx.op(op, cx.tensor(a), cx.tensor(b))

    return lower


def _clamp(cx, x, min=None, max=None):
    x = cx.tensor(x)
    if cx.is_tensor(min) or cx.is_tensor(max):
        raise Unsupported("clamp with tensor bounds")
    names = op_params("clamp") or []
    attrs = {}
    for value, choices in ((min, ("lo", "min", "low")), (max, ("hi", "max", "high"))):
        if value is None:
            continue
        key = next((c for c in choices if c in names), None)
        if key is None:
            raise Unsupported(f"clamp: the op table's clamp has no parameter for "
                              f"{choices[0]} (its parameters: {names})")
        attrs[key] = float(cx.number(value))
    if not attrs:
        return x
    # A missing bound is the largest f32 (strata's constants are finite; f16 and f32 values
    # never pass it).
    attrs.setdefault("lo", -3.4028234663852886e38)
    attrs.setdefault("hi", 3.4028234663852886e38)
    return cx.op("clamp", x, **attrs)


# ---- reductions and normalization -------------------------------------------------------
def _reduce(op, what):
    def lower(cx, x, dim=None, keepdim=False, *, dtype=None, **kwargs):
        if kwargs:
            raise Unsupported(f"{what} with {kwargs}")
        x = cx.tensor(x)
        if dim is None:
            raise Unsupported(f"{what} over all dims; pass dim=... and keepdim=True")
        d = _dim_arg(cx, x, dim, what)
        if not keepdim:
            raise Unsupported(f"{what}(dim={dim}) with keepdim=False changes the rank; strata's "
                              f"{op} keeps the reduced dim (write keepdim=True)")
        if dtype is not None and cx.torch_dtype(x) != dtype:
            raise Unsupported(f"{what} with dtype={dtype}")
        return cx.op(op, x, dim=d)

    return lower


def _max(cx, x, dim=None, keepdim=False, **kwargs):
    if cx.is_tensor(dim):
        return cx.op("maximum", cx.tensor(x), cx.tensor(dim))
    raise Unsupported("torch.max(x, dim) returns values and indices; use torch.amax(x, dim, "
                      "keepdim=True)")


def _softmax(cx, x, dim=None, *rest, dtype=None, _stacklevel=None, **kwargs):
    x = cx.tensor(x)
    if dim is None:
        raise Unsupported("softmax without dim")
    if dtype is not None and cx.torch_dtype(x) != dtype:
        raise Unsupported(f"softmax with dtype={dtype}")
    return cx.op("softmax", x, _dim_arg(cx, x, dim, "softmax"))


def _rms_norm(cx, x, normalized_shape, weight=None, eps=None):
    x = cx.tensor(x)
    shape = tuple(normalized_shape) if isinstance(normalized_shape, (list, tuple)) else (
        normalized_shape,)
    if len(shape) != 1 or shape[0] != x.shape[-1]:
        raise Unsupported(f"rms_norm over {list(shape)}: strata normalizes one (the last) dim")
    if eps is None:
        eps = torch.finfo(cx.torch_dtype(x)).eps
    if has_op("rms_norm", "eps"):
        y = cx.op("rms_norm", x, dim=len(x.shape) - 1, eps=float(eps))
    elif eps == 0:
        y = cx.op("rms_norm", x, dim=len(x.shape) - 1)
    else:
        raise Unsupported(f"rms_norm with eps={eps}: this build's rms_norm has no epsilon")
    if weight is not None:
        y = cx.op("mul", y, cx.tensor(weight))
    return y


def _rms_norm_module(cx, module, x):
    w = cx.parameter(module, "weight") if module.weight is not None else None
    return _rms_norm(cx, x, module.normalized_shape, w, module.eps)


def _cat(cx, tensors, dim=0):
    if not isinstance(tensors, (list, tuple)) or not tensors:
        raise Unsupported("cat of a non-list")
    ts = [cx.tensor(t) for t in tensors]
    d = _dim_arg(cx, ts[0], dim, "cat")
    out = ts[0]
    for t in ts[1:]:
        out = cx.op("concat", out, t, dim=d)
    return out


# ---- layout -----------------------------------------------------------------------------
def _transpose(cx, x, dim0, dim1):
    x = cx.tensor(x)
    d0, d1 = _dim_arg(cx, x, dim0, "transpose"), _dim_arg(cx, x, dim1, "transpose")
    if d0 == d1:
        return x
    r = len(x.shape)
    if {d0, d1} != {r - 2, r - 1}:
        raise Unsupported(f"transpose of dims {d0} and {d1} of a rank-{r} tensor (strata's "
                          f"transpose swaps the last two dims)")
    return cx.op("transpose", x)


def _t(cx, x):
    x = cx.tensor(x)
    if len(x.shape) != 2:
        raise Unsupported(f"t() of a rank-{len(x.shape)} tensor")
    return cx.op("transpose", x)


def _slice(cx, x, dim, start, end):
    n = x.shape[dim]
    start, end, step = slice(start, end).indices(n)
    if end <= start:
        raise Unsupported(f"empty slice [{start}:{end}] of dim {dim}")
    if start == 0 and end == n:
        return x
    if not has_op("slice", "dim", "start", "end"):
        raise Unsupported("slicing needs the op table's slice(x, dim, start, end)")
    return cx.op("slice", x, dim=dim, start=start, end=end)


def _getitem(cx, x, idx):
    if isinstance(x, (list, tuple)):  # an element of a tuple result (split, chunk, shape)
        return x[idx]
    if cx.is_number(x):
        raise Unsupported("indexing a number")
    x = cx.tensor(x)
    items = idx if isinstance(idx, tuple) else (idx,)
    if sum(1 for i in items if i is Ellipsis) > 1:
        raise Unsupported("several ellipses in an index")
    explicit = sum(1 for i in items if i is not Ellipsis)
    rank = len(x.shape)
    if explicit > rank:
        raise Unsupported(f"index {idx!r} has more entries than rank {rank}")
    dims = []
    d = 0
    for i in items:
        if i is Ellipsis:
            d += rank - explicit
            continue
        if not isinstance(i, slice):
            raise Unsupported(f"indexing with {i!r} (only slices keep the rank; strata has no "
                              f"squeeze)")
        if i.step not in (None, 1):
            raise Unsupported(f"a slice with step {i.step}")
        dims.append((d, i.start, i.stop))
        d += 1
    out = x
    for dim, start, stop in dims:
        out = _slice(cx, out, dim, cx.number(start) if start is not None else None,
                     cx.number(stop) if stop is not None else None)
    return out


def _narrow(cx, x, dim, start, length):
    x = cx.tensor(x)
    d = _dim_arg(cx, x, dim, "narrow")
    return _slice(cx, x, d, cx.number(start), cx.number(start) + cx.number(length))


def _split(cx, x, split_size_or_sections, dim=0):
    x = cx.tensor(x)
    d = _dim_arg(cx, x, dim, "split")
    n = x.shape[d]
    s = split_size_or_sections
    sizes = [s] * (n // s) + ([n % s] if n % s else []) if isinstance(s, int) else list(s)
    if sum(sizes) != n:
        raise Unsupported(f"split sizes {sizes} do not add up to {n}")
    out, at = [], 0
    for size in sizes:
        out.append(_slice(cx, x, d, at, at + size))
        at += size
    return tuple(out)


def _chunk(cx, x, chunks, dim=0):
    x = cx.tensor(x)
    d = _dim_arg(cx, x, dim, "chunk")
    n = x.shape[d]
    size = -(-n // chunks)
    return _split(cx, x, size, d)


def _matmul(cx, a, b):
    """a @ b with PyTorch's batch broadcasting: strata's matmul takes operands of one rank with
    equal batch dims, so an operand whose batch dims differ from the broadcast batch shape
    (fewer dims, or extent 1) is first multiplied by ones of shape [*batch, 1, 1], a bound
    input; the search fuses that product into the kernel that reads the operand."""
    a, b = cx.tensor(a), cx.tensor(b)
    ra, rb = len(a.shape), len(b.shape)
    if ra < 2 or rb < 2:
        raise Unsupported(f"matmul of a rank-{min(ra, rb)} operand (strata multiplies "
                          f"matrices; make vectors [1, n] or [n, 1])")
    ba, bb = tuple(a.shape[:-2]), tuple(b.shape[:-2])
    if ba != bb:
        try:
            batch = tuple(torch.broadcast_shapes(ba, bb))
        except RuntimeError:
            raise Unsupported(f"matmul batch dims {list(ba)} and {list(bb)} do not "
                              f"broadcast") from None
        if len(batch) + 2 > 4:
            raise Unsupported(f"matmul broadcast to rank {len(batch) + 2}; strata tensors "
                              f"have rank 1 to 4")
        ones = {}

        def widen(v, have):
            if have == batch:
                return v
            if v.dtype not in ones:
                ones[v.dtype] = cx.const(1.0, v, shape=batch + (1, 1))
            return cx.op("mul", v, ones[v.dtype])

        a, b = widen(a, ba), widen(b, bb)
    return cx.op("matmul", a, b)


def _linear(cx, x, weight, bias=None):
    x, w = cx.tensor(x), cx.tensor(weight)
    if not has_op("transpose"):
        raise Unsupported("linear multiplies by the transposed weight and this build has no "
                          "transpose op; store the weight as [in, out] and write x @ w")
    y = _matmul(cx, x, _transpose(cx, w, -2, -1))
    return y if bias is None else cx.op("add", y, cx.tensor(bias))


def _linear_module(cx, module, x):
    b = cx.parameter(module, "bias") if module.bias is not None else None
    return _linear(cx, x, cx.parameter(module, "weight"), b)


# ---- no-ops and shape queries -----------------------------------------------------------
def _alias(cx, x, *args, **kwargs):
    return cx.tensor(x)


def _dropout(cx, x, p=0.5, training=True, inplace=False):
    if training and p > 0:
        raise Unsupported("dropout in training mode")
    return cx.tensor(x)


def _dropout_module(cx, module, x):
    return _dropout(cx, x, module.p, module.training)


def _to(cx, x, *args, **kwargs):
    x = cx.tensor(x)
    dtype = kwargs.get("dtype")
    for a in args:
        if isinstance(a, torch.dtype):
            dtype = a
        elif isinstance(a, (torch.device, str)) or a is None:
            continue
        elif cx.is_tensor(a):
            dtype = cx.torch_dtype(cx.tensor(a))
    if dtype is not None and dtype != cx.torch_dtype(x):
        raise Unsupported(f"conversion from {cx.torch_dtype(x)} to {dtype} (strata keeps each "
                          f"tensor's dtype)")
    return x


def _cast(dtype):
    def lower(cx, x):
        x = cx.tensor(x)
        if cx.torch_dtype(x) != dtype:
            raise Unsupported(f"conversion from {cx.torch_dtype(x)} to {dtype}")
        return x

    return lower


def _reshape(cx, x, *shape):
    x = cx.tensor(x)
    if len(shape) == 1 and isinstance(shape[0], (list, tuple, torch.Size)):
        shape = tuple(shape[0])
    shape = tuple(cx.number(s) for s in shape)
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        shape = tuple(math.prod(x.shape) // known if s == -1 else s for s in shape)
    if tuple(shape) != tuple(x.shape):
        raise Unsupported(f"reshape from {list(x.shape)} to {list(shape)} (strata has no "
                          f"reshape)")
    return x


def _size(cx, x, dim=None):
    x = cx.tensor(x)
    return tuple(x.shape) if dim is None else x.shape[dim]


def _dim(cx, x):
    return len(cx.tensor(x).shape)


def _getattr(cx, x, name):
    if name == "shape":
        return tuple(cx.tensor(x).shape)
    if name == "T":
        return _t(cx, x)
    raise Unsupported(f"attribute .{name}")


# ---- the table --------------------------------------------------------------------------
T = torch.Tensor
RULES = [
    Rule([torch.matmul, operator.matmul, "matmul", T.matmul, torch.mm, "mm", torch.bmm, "bmm"],
         _matmul),
    Rule([torch.exp, "exp", T.exp], _unary("exp")),
    Rule([torch.sqrt, "sqrt", T.sqrt], _unary("sqrt")),
    Rule([torch.rsqrt, "rsqrt", T.rsqrt], _rsqrt),
    Rule([torch.reciprocal, "reciprocal"], _reciprocal),
    Rule([torch.square, "square"], _square),
    Rule([F.relu, torch.relu, "relu"], _unary("relu")),
    Rule([nn.ReLU], lambda cx, m, x: cx.op("relu", cx.tensor(x))),
    Rule([F.silu, "silu"], _unary("silu")),
    Rule([nn.SiLU], lambda cx, m, x: cx.op("silu", cx.tensor(x))),
    Rule([F.gelu, "gelu"], _gelu),
    Rule([nn.GELU], _gelu_module),
    Rule([torch.neg, operator.neg, "neg", T.neg], _neg),
    Rule([operator.add, torch.add, "add", T.add], _add),
    Rule([operator.sub, torch.sub, "sub", T.sub, torch.subtract], _sub),
    Rule([torch.rsub], _rsub),
    Rule([operator.mul, torch.mul, "mul", T.mul, torch.multiply], _mul),
    Rule([operator.truediv, torch.div, "div", T.div, torch.true_divide, torch.divide], _div),
    Rule([operator.pow, torch.pow, "pow", T.pow], _pow),
    Rule([torch.sum, "sum", T.sum], _reduce("sum", "sum")),
    Rule([torch.mean, "mean", T.mean], _reduce("mean", "mean")),
    Rule([torch.cat, torch.concat, torch.concatenate], _cat),
    # Ops other work adds to the op table; each rule is live once its op is there.
    Rule([torch.sigmoid, F.sigmoid, "sigmoid"], _unary("sigmoid"), (("sigmoid",),)),
    Rule([nn.Sigmoid], lambda cx, m, x: cx.op("sigmoid", cx.tensor(x)), (("sigmoid",),)),
    Rule([torch.tanh, F.tanh, "tanh"], _unary("tanh"), (("tanh",),)),
    Rule([torch.log, "log"], _unary("log"), (("log",),)),
    Rule([torch.maximum, "maximum"], _binary_op("maximum"), (("maximum",),)),
    Rule([torch.minimum, "minimum"], _binary_op("minimum"), (("minimum",),)),
    Rule([torch.max, "max"], _max, (("maximum",),)),
    Rule([torch.amax, "amax"], _reduce("max", "amax"), (("max", "dim"),)),
    Rule([torch.clamp, torch.clip, "clamp", "clip"], _clamp, (("clamp",),)),
    Rule([F.softmax, torch.softmax, "softmax"], _softmax, (("softmax",),)),
    Rule([torch.transpose, "transpose", T.transpose], _transpose, (("transpose",),)),
    Rule([torch.t, "t"], _t, (("transpose",),)),
    Rule([F.linear], _linear, (("transpose",),)),
    Rule([nn.Linear], _linear_module, (("transpose",),)),
    Rule([operator.getitem], _getitem),
    Rule([torch.narrow, "narrow"], _narrow, (("slice", "dim", "start", "end"),)),
    Rule([torch.split, "split"], _split, (("slice", "dim", "start", "end"),)),
    Rule([torch.chunk, "chunk"], _chunk, (("slice", "dim", "start", "end"),)),
    Rule([F.rms_norm], _rms_norm),
    Rule([nn.RMSNorm], _rms_norm_module),
    Rule(["contiguous", "clone", "detach", torch.clone, torch.detach], _alias),
    Rule([F.dropout], _dropout),
    Rule([nn.Dropout, nn.Identity], lambda cx, m, x, *a: (
        _dropout_module(cx, m, x) if isinstance(m, nn.Dropout) else cx.tensor(x))),
    Rule(["to", "type"], _to),
    Rule(["float"], _cast(torch.float32)),
    Rule(["half"], _cast(torch.float16)),
    Rule(["bfloat16"], _cast(torch.bfloat16)),
    Rule(["view", "reshape", torch.reshape], _reshape),
    Rule(["size"], _size),
    Rule(["dim"], _dim),
    Rule([getattr], _getattr),
]

_BY_TARGET = {}
for _rule in RULES:
    for _target in _rule.targets:
        _BY_TARGET.setdefault(_target, _rule)


def rule_for(target):
    """The rule of an FX target (function, method name or module type), or None."""
    try:
        return _BY_TARGET.get(target)
    except TypeError:  # unhashable target
        return None


def supported_targets():
    """(target, available) for every target of the table: the documentation's list."""
    return [(t, r.available()) for r in RULES for t in r.targets]
