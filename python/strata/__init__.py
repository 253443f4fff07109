"""strata from Python and PyTorch (docs/python.md).

    import strata
    prog = strata.capture(fn, *example_tensors)     # a PyTorch function → a strata Program
    result = strata.optimize(prog)                  # the superoptimizer search (+ GPU profile)
    kernel = result.kernel()                        # the fastest, called with CUDA tensors
    y = kernel(x, w)

    torch.compile(model, backend="strata")          # partitions, superoptimizes, rest: Inductor

PyTorch is needed only by capture, kernels and the backend; programs, the interpreter, the
verifier and the search work with NumPy alone.
"""
from . import _core
from .errors import GpuUnavailableError, InputError, ProgramError, StrataError, UnsupportedError
from .interp import EquivResult, equiv, run
from .ops import has_op, op_names, op_table, signature
from .program import Program, ProgramBuilder, TensorSpec, Value

__version__ = _core.__version__


def cuda_built():
    """True when the package was built with a CUDA toolkit (the GPU parts are present)."""
    return bool(_core.cuda_built)


def gpu_available():
    """True when kernels can run: built with CUDA and a driver with a device is present."""
    return _core.cuda_built and _core.gpu_count() > 0


def capture(fn, *example_tensors):
    """Traces a PyTorch function or module into a Program (see strata.lowering.capture)."""
    from .lowering import capture as _capture

    return _capture(fn, *example_tensors)


def optimize(program_or_fn, example_inputs=None, **kwargs):
    """Superoptimizes a Program, a program file or a PyTorch function (see
    strata.search.optimize)."""
    from .search import optimize as _optimize

    return _optimize(program_or_fn, example_inputs, **kwargs)


def compile(program, **kwargs):
    """Compiles a Program or μGraph into a Kernel callable with CUDA tensors (see
    strata.kernel.Kernel)."""
    from .kernel import Kernel

    return Kernel(program, **kwargs)


__all__ = [
    "Program", "ProgramBuilder", "TensorSpec", "Value", "capture", "optimize", "compile", "run",
    "equiv", "EquivResult", "op_names", "op_table", "has_op", "signature", "cuda_built",
    "gpu_available", "StrataError", "ProgramError", "UnsupportedError", "InputError",
    "GpuUnavailableError", "__version__",
]
