"""Compiled kernels called with torch CUDA tensors (docs/python.md, "Kernels").

A ``Kernel`` compiles a program or μGraph through the C++ GPU runtime (src/gpu: the CUDA
emitter, nvcc JIT and the binary cache, ``CompiledGraph``) and launches it on the current
stream. Every call goes through the torch custom op ``strata::launch`` (with a fake
implementation), so ``torch.compile`` traces through kernels and CUDA graphs capture them.

The launch path checks each input's device, dtype, shape and contiguity, takes the outputs
(unless ``out=`` is given) and the workspace from torch's caching allocator on the current
stream, and enqueues the generated launcher: no cudaMalloc, no synchronization and no host
transfer, so it can be captured in a CUDA graph. Everything that is not capturable happens
once, when the kernel is built: compilation, loading, the bound inputs' device copies, and one
launch on zeros followed by a synchronize, which performs the launcher's one-time setup
(shared-memory attributes) outside any capture.

Outputs are placed as the library declares (``CompiledGraph.placement``, docs/python.md
"Outputs"): outputs that are slices of one tensor the library computes whole (Q, K and V of a
fused projection) are views of one allocation, as ``torch.split`` returns them. The custom op
returns the allocations (a custom op's outputs may not alias each other) and the kernel makes
the views.
"""
import itertools
import threading

import torch

from . import _core
from .errors import GpuUnavailableError, InputError
from .program import Program
from .search import runtime_dir

_TORCH = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}
_KERNELS = {}  # key → Kernel (kernels live as long as the process, like their libraries)
_PROGRAMS = {}  # key → Program run by strata::interpret
_ids = itertools.count()
_lock = threading.Lock()


def _register(table, value, prefix):
    with _lock:
        key = f"{prefix}{next(_ids)}"
        table[key] = value
    return key


# ---- the custom ops -------------------------------------------------------------------
@torch.library.custom_op("strata::launch", mutates_args=())
def _launch_op(key: str, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    """The output allocations of one launch (output_views makes the outputs of them)."""
    k = _KERNELS[key]
    allocations = output_allocations(k.outputs, k.placement, k.device)
    k._launch(inputs, output_views(k.outputs, k.placement, allocations))
    return allocations


@_launch_op.register_fake
def _launch_fake(key, inputs):
    k = _KERNELS[key]
    return output_allocations(k.outputs, k.placement, k.device)


@torch.library.custom_op("strata::interpret", mutates_args=())
def _interpret_op(key: str, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    """Runs a program in the float64 reference interpreter (testing; the torch.compile backend
    on machines without a GPU, docs/python.md)."""
    from .interp import run

    program = _PROGRAMS[key]
    device = inputs[0].device if inputs else torch.device("cpu")
    outs = run(program, [t.detach().cpu() for t in inputs])
    outs = outs if isinstance(outs, tuple) else (outs,)
    return [o.to(device) for o in outs]


@_interpret_op.register_fake
def _interpret_fake(key, inputs):
    program = _PROGRAMS[key]
    device = inputs[0].device if inputs else torch.device("cpu")
    return [torch.empty(s.shape, dtype=_TORCH[s.dtype], device=device) for s in program.outputs]


def register_interpreted(program):
    """A key for ``torch.ops.strata.interpret`` that runs ``program``."""
    return _register(_PROGRAMS, program, "p")


# ---- output placement -----------------------------------------------------------------
def dense_placement(outputs):
    """The placement of outputs that are each dense and alone (a library that packs none)."""
    placement = []
    for i, s in enumerate(outputs):
        strides, n = [], 1
        for extent in reversed(s.shape):
            strides.insert(0, n)
            n *= extent
        placement.append({"base": i, "offset": 0, "strides": strides, "alloc": n})
    return placement


def output_allocations(outputs, placement, device):
    """One tensor per output that has its own allocation (``alloc`` > 0; in output order): a
    dense output's in its shape, a packed tensor's (the base of others) flat, of ``alloc``
    elements."""
    allocations = []
    for i, (s, p) in enumerate(zip(outputs, placement)):
        if p["base"] != i:
            continue
        dense = {**p, "base": 0} == dense_placement([s])[0]
        allocations.append(torch.empty(s.shape if dense else (p["alloc"],),
                                       dtype=_TORCH[s.dtype], device=device))
    return allocations


def output_views(outputs, placement, allocations):
    """The outputs as views of ``allocations`` (output_allocations, or the strata::launch op's
    result: fresh tensors, storage offset 0): output i's element (i0, …) is at its base's
    allocation + offset + Σ i_d · strides[d] (torch.as_strided). The offset is taken as given,
    not added to the allocation's storage offset, which Dynamo cannot trace."""
    own = [i for i, p in enumerate(placement) if p["base"] == i]
    if len(own) != len(allocations):
        raise InputError(f"strata kernel: {len(allocations)} output allocation(s); expected "
                         f"{len(own)}")
    of = dict(zip(own, allocations))
    views = []
    for i, (s, p) in enumerate(zip(outputs, placement)):
        a = of[p["base"]]
        if p["base"] == i and tuple(a.shape) == tuple(s.shape):
            views.append(a)
        else:
            views.append(torch.as_strided(a, s.shape, p["strides"], p["offset"]))
    return views


def placed_as_declared(outputs, placement, tensors):
    """Whether ``tensors`` (one per output) are placed as ``placement`` declares: every
    output's strides as declared and its first element ``offset`` elements after its base's
    (the library then writes them in place, the fast path)."""
    for s, p, t in zip(outputs, placement, tensors):
        if list(t.stride()) != list(p["strides"]) and t.numel() > 1:
            return False
        base = tensors[p["base"]]
        if t.data_ptr() != base.data_ptr() + p["offset"] * t.element_size():
            return False
    return True


# ---- kernels --------------------------------------------------------------------------
def require_gpu():
    if not _core.cuda_built:
        raise GpuUnavailableError(_core.no_toolkit_message)
    if _core.gpu_count() == 0:
        raise GpuUnavailableError("no CUDA device is available (no NVIDIA driver, or no GPU "
                                  "visible to this process)")
    if not torch.cuda.is_available():
        raise GpuUnavailableError("PyTorch sees no CUDA device (torch.cuda.is_available() is "
                                  "False: a CPU-only torch build?)")


class Kernel:
    """A program or μGraph compiled for the current CUDA device, called with torch tensors::

        k = strata.compile(program)          # or result.kernel()
        y = k(x, w)                          # one output: a tensor; several: a tuple
        k(x, w, out=(y,))                    # into given tensors

    Arguments are the program's free inputs (``Program.free_inputs``) in order: CUDA tensors
    on the kernel's device, contiguous, with the input's dtype and shape; bound inputs (lifted
    scalars, captured parameters) are supplied by the kernel. ``knobs`` are emitter knobs
    (docs/codegen.md). Raises ``GpuUnavailableError`` without a CUDA build, driver or device.
    """

    def __init__(self, program, *, knobs="", device=None, cache_dir=None):
        require_gpu()
        if not isinstance(program, Program):
            program = Program.load(program)
        self.program = program
        self.device = torch.device("cuda", torch.cuda.current_device()) if device is None \
            else torch.device(device)
        with torch.cuda.device(self.device):
            self._graph = _core.CompiledGraph.from_graph(
                program._graph, knobs=knobs or "", include_dirs=runtime_dir(),
                cache_dir=str(cache_dir or ""))
        specs = program.inputs
        self.inputs = specs
        self.outputs = program.outputs
        # Where each output lies: views of one allocation where the library packs them.
        self.placement = self._graph.placement
        self.workspace_bytes = self._graph.workspace_bytes
        self.key = _register(_KERNELS, self, "k")
        # Bound inputs on the device, once: lifted scalars filled, parameters converted.
        self._bound = {}
        for s in specs:
            if s.name not in program.bound:
                continue
            v = program.bound[s.name]
            if isinstance(v, float):
                t = torch.full(s.shape, v, dtype=_TORCH[s.dtype], device=self.device)
            else:
                t = v.detach().to(device=self.device, dtype=_TORCH[s.dtype]).contiguous()
            self._bound[s.name] = t
        self._free = [(i, s, _TORCH[s.dtype]) for i, s in enumerate(specs)
                      if s.name not in self._bound]
        # The launcher's one-time setup happens here, outside any CUDA-graph capture.
        zeros = [torch.zeros(s.shape, dtype=dt, device=self.device) for _, s, dt in self._free]
        with torch.cuda.device(self.device):
            self._launch(zeros, None)
            torch.cuda.current_stream(self.device).synchronize()

    def _check(self, i, spec, dtype, t, what):
        label = f"strata kernel: {what} {i} ({spec.name})"
        want = f"{spec.dtype}{list(spec.shape)} on {self.device}"
        if not isinstance(t, torch.Tensor):
            raise InputError(f"{label}: a {type(t).__name__}; expected a tensor {want}")
        if t.device != self.device:
            raise InputError(f"{label}: a tensor on {t.device}; expected {want}")
        if t.dtype != dtype:
            raise InputError(f"{label}: dtype {t.dtype}; expected {want}")
        if tuple(t.shape) != spec.shape:
            raise InputError(f"{label}: shape {list(t.shape)}; expected {want}")
        if not t.is_contiguous() and what != "output":
            raise InputError(f"{label}: not contiguous (strides {list(t.stride())}); expected "
                             f"a dense row-major tensor (call .contiguous())")

    def _launch(self, inputs, out):
        if len(inputs) != len(self._free):
            names = ", ".join(f"{s.name}: {s.dtype}{list(s.shape)}" for _, s, _ in self._free)
            raise InputError(f"strata kernel: got {len(inputs)} input(s); expected "
                             f"{len(self._free)} ({names})")
        ptrs = [0] * len(self.inputs)
        for (i, spec, dtype), t in zip(self._free, inputs):
            self._check(i, spec, dtype, t, "input")
            ptrs[i] = t.data_ptr()
        for i, s in enumerate(self.inputs):
            if s.name in self._bound:
                ptrs[i] = self._bound[s.name].data_ptr()
        if out is None:
            out = output_views(self.outputs, self.placement,
                               output_allocations(self.outputs, self.placement, self.device))
        else:
            out = list(out) if isinstance(out, (list, tuple)) else [out]
            if len(out) != len(self.outputs):
                raise InputError(f"strata kernel: out= has {len(out)} tensor(s); expected "
                                 f"{len(self.outputs)}")
            for i, (s, t) in enumerate(zip(self.outputs, out)):
                self._check(i, s, _TORCH[s.dtype], t, "output")
            # Either every output dense and alone (the library copies into them) or all of
            # them placed as declared (views of one allocation, e.g. an earlier call's).
            if not (all(t.is_contiguous() for t in out)
                    or placed_as_declared(self.outputs, self.placement, out)):
                raise InputError("strata kernel: out= tensors are neither all contiguous nor "
                                 "placed as the kernel's outputs (Kernel.placement)")
        ws = torch.empty(self.workspace_bytes, dtype=torch.uint8, device=self.device) \
            if self.workspace_bytes else None
        stream = torch.cuda.current_stream(self.device).cuda_stream
        self._graph.launch(ptrs, [t.data_ptr() for t in out],
                           ws.data_ptr() if ws is not None else 0, stream)
        return out

    def __call__(self, *inputs, out=None):
        if out is not None:
            outs = self._launch(list(inputs), out)
        else:
            outs = output_views(self.outputs, self.placement,
                                torch.ops.strata.launch(self.key, list(inputs)))
        return outs[0] if len(outs) == 1 else tuple(outs)

    def __repr__(self):
        ins = ", ".join(f"{s.name}: {s.dtype}{list(s.shape)}" for _, s, _ in self._free)
        outs = ", ".join(f"{s.name}: {s.dtype}{list(s.shape)}" for s in self.outputs)
        return f"<strata.Kernel ({ins}) -> ({outs}) on {self.device}>"


__all__ = ["Kernel", "require_gpu", "register_interpreted", "output_allocations", "output_views",
           "placed_as_declared", "dense_placement"]
