"""Exceptions of the strata package (docs/python.md, "Errors").

``StrataError`` is the base of everything strata raises on bad input or a failed job; its
message says where the problem is and what was expected. ``GpuUnavailableError`` is raised by
every GPU entry point when CUDA is missing: a package built without a CUDA toolkit, or a
machine without an NVIDIA driver or device.
"""
from ._core import GpuUnavailableError, StrataError


class ProgramError(StrataError, ValueError):
    """A program (text, builder call or JSON) that strata rejects: unknown op, bad argument,
    shapes that violate an op's rule. The message carries the C++ parser's explanation."""


class UnsupportedError(StrataError):
    """A PyTorch op or call pattern that strata cannot express. ``op`` names the op and
    ``location`` the user's source line (``file:line``) when PyTorch recorded it."""

    def __init__(self, message, op=None, location=None):
        super().__init__(message)
        self.op = op
        self.location = location


class InputError(StrataError, ValueError):
    """Arguments that do not fit a program or a kernel: count, dtype, shape, device,
    contiguity. The message names the input and what was expected."""


__all__ = ["StrataError", "GpuUnavailableError", "ProgramError", "UnsupportedError", "InputError"]
