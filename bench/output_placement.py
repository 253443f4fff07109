"""Where a strata library's outputs lie in the caller's memory (docs/gpu-runtime.md, "Packed
outputs"; the C++ runtime's include/strata/gpu/output_buffers.h): outputs that are slices of
one tensor the library computes whole (Q, K and V of a fused projection) are views of one
allocation, which the library writes in place (the fast path); outputs allocated each alone
are written dense by copies (the fallback).

A library declares the placement through four functions, read here through ctypes when it
exports them (libraries emitted before packed outputs do not: every output is then dense):
  int strata_output_base(int i)             the output whose pointer starts i's allocation
  long long strata_output_offset(int i)     elements from that pointer to i's first element
  long long strata_output_stride(int i, int d)  elements between indices of dim d
  long long strata_output_alloc(int i)      elements to allocate at i's own pointer (0: inside
                                            its base's)
Standard library only (bench/timing.py allocates the tensors).
"""
import ctypes

FUNCTIONS = ("strata_output_base", "strata_output_offset", "strata_output_stride",
             "strata_output_alloc")


def numel(shape):
    n = 1
    for extent in shape:
        n *= extent
    return n


def row_major(shape):
    strides, n = [], 1
    for extent in reversed(shape):
        strides.insert(0, n)
        n *= extent
    return strides


def dense(shapes):
    """Every output dense and alone."""
    return [{"base": i, "offset": 0, "strides": row_major(s), "alloc": numel(s)}
            for i, s in enumerate(shapes)]


def read(lib, shapes):
    """The placement of the outputs of `lib` (a ctypes.CDLL) of shapes `shapes`: per output a
    dict base, offset, strides, alloc; dense when the library exports none of the functions.
    Raises ValueError when it exports only some, or declares a placement check() rejects."""
    have = [hasattr(lib, f) for f in FUNCTIONS]
    if not any(have):
        return dense(shapes)
    if not all(have):
        missing = [f for f, h in zip(FUNCTIONS, have) if not h]
        raise ValueError(f"output placement: {', '.join(missing)} missing")
    base, offset, stride, alloc = (getattr(lib, f) for f in FUNCTIONS)
    base.restype, base.argtypes = ctypes.c_int, [ctypes.c_int]
    offset.restype, offset.argtypes = ctypes.c_longlong, [ctypes.c_int]
    stride.restype, stride.argtypes = ctypes.c_longlong, [ctypes.c_int, ctypes.c_int]
    alloc.restype, alloc.argtypes = ctypes.c_longlong, [ctypes.c_int]
    placement = [{"base": base(i), "offset": offset(i),
                  "strides": [stride(i, d) for d in range(len(s))], "alloc": alloc(i)}
                 for i, s in enumerate(shapes)]
    check(placement, shapes)
    return placement


def check(placement, shapes):
    """Raises ValueError unless every output's base is an output that is its own base, an
    output inside another's allocation allocates nothing, offsets and strides are ≥ 0 and
    every element of every output lies inside its base's allocation."""
    if len(placement) != len(shapes):
        raise ValueError(f"output placement: {len(placement)} entries for {len(shapes)} outputs")
    for i, (p, s) in enumerate(zip(placement, shapes)):
        b = p["base"]
        if not 0 <= b < len(placement):
            raise ValueError(f"output {i}: base {b} is not an output")
        if placement[b]["base"] != b:
            raise ValueError(f"output {i}: its base, output {b}, lies in another's allocation")
        if b != i and p["alloc"] != 0:
            raise ValueError(f"output {i}: lies in output {b}'s allocation but allocates "
                             f"{p['alloc']} elements itself")
        if p["offset"] < 0 or len(p["strides"]) != len(s) or min(p["strides"], default=0) < 0:
            raise ValueError(f"output {i}: offset {p['offset']}, strides {p['strides']} for "
                             f"shape {list(s)}")
        end = p["offset"] + 1 + sum((e - 1) * st for e, st in zip(s, p["strides"]))
        if end > placement[b]["alloc"]:
            raise ValueError(f"output {i}: reaches element {end} of output {b}'s allocation of "
                             f"{placement[b]['alloc']}")


def is_dense(placement, i, shape):
    p = placement[i]
    return (p["base"] == i and p["offset"] == 0 and p["strides"] == row_major(shape)
            and p["alloc"] == numel(shape))
