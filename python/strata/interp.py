"""The CPU reference interpreter and the equivalence verifier from Python (docs/python.md).

``run`` executes a program or μGraph in float64 (include/strata/interp/interpreter.h) on CPU torch
tensors or NumPy arrays and returns the same type; ``equiv`` runs the finite-field verifier
(docs/verifier.md).
"""
from dataclasses import dataclass
from typing import Optional

import numpy as np

from . import _core
from .errors import InputError
from .program import Program

# NumPy has no bfloat16: bf16 tensors are passed and returned as float32 arrays.
_NUMPY_DTYPES = {"f16": np.float16, "bf16": np.float32, "f32": np.float32}


def _as_program(p):
    if isinstance(p, Program):
        return p
    if isinstance(p, str):
        return Program.load(p)
    raise TypeError(f"expected a strata.Program or a file path, got {type(p).__name__}")


def _torch_dtypes():
    import torch

    return {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}


def _is_torch(x):
    t = type(x)
    return t.__module__.startswith("torch") and t.__name__ in ("Tensor", "Parameter")


def check_inputs(program, inputs, where):
    """Pairs caller inputs with the program's inputs: either every input, or only the free
    ones (the bound ones are then filled in). Returns a list of (spec, value-or-bound)."""
    inputs = list(inputs)
    specs = program.inputs
    free = program.free_inputs
    if len(inputs) == len(specs) and len(free) != len(specs):
        pairs = list(zip(specs, inputs))
    elif len(inputs) == len(free):
        it = iter(inputs)
        pairs = [(s, program.bound[s.name] if s.name in program.bound else next(it)) for s in specs]
    else:
        names = ", ".join(f"{s.name}: {s.dtype}{list(s.shape)}" for s in free)
        raise InputError(f"{where}: got {len(inputs)} input(s); expected {len(free)} ({names})")
    return pairs


def run(program, inputs, *, threads=0):
    """Runs ``program`` (a Program or a file path) in the float64 reference interpreter.

    ``inputs``: CPU torch tensors or NumPy arrays, one per free input (``program.free_inputs``)
    or one per input, with the input's shape and dtype (torch.float16/bfloat16/float32; NumPy
    float16/float32, bf16 as float32). Returns the output (several: a tuple) as the type
    given, rounded to each output's dtype.
    """
    program = _as_program(program)
    if not isinstance(inputs, (list, tuple)):
        raise TypeError("run(program, inputs): inputs must be a list or tuple of tensors/arrays")
    given = [x for x in inputs]
    use_torch = any(_is_torch(x) for x in given)
    if use_torch and not all(_is_torch(x) for x in given):
        raise InputError("run: mix of torch tensors and other values; pass one kind")
    pairs = check_inputs(program, given, "run")
    arrays = []
    for i, (spec, x) in enumerate(pairs):
        label = f"run: input {i} ({spec.name})"
        want = f"{spec.dtype}{list(spec.shape)}"
        if spec.name in program.bound and isinstance(program.bound[spec.name], float):
            arrays.append(np.full(spec.shape, program.bound[spec.name], dtype=np.float64))
            continue
        if _is_torch(x):
            import torch

            if x.device.type != "cpu":
                raise InputError(f"{label}: a tensor on {x.device}; the reference interpreter "
                                 f"runs on the CPU (pass x.cpu())")
            if x.dtype != _torch_dtypes()[spec.dtype]:
                raise InputError(f"{label}: dtype {x.dtype}; expected {want}")
            if tuple(x.shape) != spec.shape:
                raise InputError(f"{label}: shape {list(x.shape)}; expected {want}")
            arrays.append(np.ascontiguousarray(x.detach().to(torch.float64).numpy()))
        elif isinstance(x, np.ndarray):
            if x.dtype != _NUMPY_DTYPES[spec.dtype]:
                raise InputError(f"{label}: dtype {x.dtype}; expected {want} "
                                 f"(NumPy {np.dtype(_NUMPY_DTYPES[spec.dtype]).name})")
            if tuple(x.shape) != spec.shape:
                raise InputError(f"{label}: shape {list(x.shape)}; expected {want}")
            arrays.append(np.ascontiguousarray(x, dtype=np.float64))
        else:
            raise InputError(f"{label}: a {type(x).__name__}; expected a torch tensor or a "
                             f"NumPy array")
    outs = _core.run_reference(program._graph, arrays, threads)
    results = []
    for spec, o in zip(program.outputs, outs):
        if use_torch:
            import torch

            results.append(torch.from_numpy(o).to(_torch_dtypes()[spec.dtype]))
        else:
            results.append(o.astype(_NUMPY_DTYPES[spec.dtype]))
    return results[0] if len(results) == 1 else tuple(results)


@dataclass
class EquivResult:
    """Outcome of ``equiv``: truthy when equivalent. ``log2_bound`` bounds the probability that
    non-equivalent graphs pass all trials (None for identical graphs); ``detail`` names the
    first differing output and element when not equivalent; ``instance`` the reduced instance
    the check ran on ("Q.1 16384 → 128"; empty for the program's own shapes, docs/verifier.md
    §7)."""

    equivalent: bool
    trials: int
    log2_bound: Optional[float]
    detail: str
    instance: str = ""

    def __bool__(self):
        return self.equivalent


def equiv(a, b, *, trials=0, seed=1, target_log2_bound=-60.0, threads=0, full_instance=False):
    """Decides whether two programs/μGraphs (Programs or file paths) compute the same outputs
    with the finite-field verifier (docs/verifier.md). Inputs and outputs match by position;
    different counts or shapes raise ``StrataError``. ``full_instance`` checks on the program's
    own shapes instead of a reduced instance (``strata equiv --full-instance``)."""
    a, b = _as_program(a), _as_program(b)
    r = _core.verify_equivalent(a._graph, b._graph, trials, target_log2_bound, seed, threads,
                                not full_instance)
    return EquivResult(r["equivalent"], r["trials"], r["log2_bound"], r["detail"], r["instance"])
