"""The op table as Python sees it: read from the C++ table (include/strata/ir/op_table.def) and
the parser's call signatures through the bindings, never from a list kept here, so an op added
to the table is usable from Python (builder methods, capture guards) without Python changes."""
from functools import lru_cache

from . import _core


@lru_cache(maxsize=None)
def _table():
    return {row["name"]: row for row in _core.op_table()}


def op_table():
    """Every op of the table as a dict: name, arity, category, algebra, kernel_level,
    block_level, program_op and, for program ops, params and signature."""
    return [dict(row) for row in _table().values()]


def op_names():
    """Names of the ops a program may call (kernel-level predefined ops), in table order."""
    return [name for name, row in _table().items() if row["program_op"]]


def op_info(name):
    """The table row of a program op, or None."""
    row = _table().get(name)
    return row if row is not None and row["program_op"] else None


def op_params(name):
    """Names of an op's non-tensor parameters (with their aliases), or None for an unknown op."""
    row = op_info(name)
    if row is None:
        return None
    names = []
    for p in row["params"]:
        if p["kind"] != "tensor":
            names.append(p["name"])
            if p["alias"]:
                names.append(p["alias"])
    return names


def has_op(name, *params):
    """True when ``name`` is a program op whose signature has every parameter in ``params``
    (by name or alias). Capture rules for ops that other work adds to the table are guarded
    with this, so they start working when the op lands."""
    names = op_params(name)
    return names is not None and all(p in names for p in params)


def signature(name):
    """The call signature, e.g. ``"sum(x, dim, to=1)"``; None for an unknown op."""
    row = op_info(name)
    return row["signature"] if row else None
