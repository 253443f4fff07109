"""The launch parameters of the persistent megakernel, as ctypes (docs/megakernel.md).

Params mirrors `struct MpkParams` of runtime/mpk/mpk_tasks.cuh field by field (the library's
mpk_params_size() is checked against it at load time, and bench/tests/test_mpk_abi.py checks
the names and order against the header).
"""
import ctypes

POINTERS = ("ops", "tasks", "waits", "triggers", "event_counts", "event_counters",
            "worker_offsets", "worker_tasks", "order", "queue_counter", "buffers", "workspace",
            "tokens_in", "tokens_out", "trace")
INTS = ("num_tasks", "pos", "step", "mode", "prefetch", "batch", "hidden", "heads", "kv_heads",
        "head_dim", "intermediate", "vocab", "max_kv", "layers")


class Params(ctypes.Structure):
    _fields_ = ([(n, ctypes.c_void_p) for n in POINTERS] +
                [(n, ctypes.c_uint if n == "step" else ctypes.c_int) for n in INTS] +
                [("eps", ctypes.c_float)])
