"""One decode step of a compiled model for Nsight Compute (scripts/gpu-mpk-ncu.sh): the
megakernel once (mpk_persistent) and strata's task kernels once per op (mpk_op_kernel), at one
configuration, random weights as bench/mpk_decode.py makes them. Run under `ncu`; it measures
nothing itself."""
import argparse
import ctypes
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpk_decode as md  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--strata", required=True)
    ap.add_argument("--model", default="examples/models/llama-3.2-1b.json")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--kv", type=int, default=1024)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    lib = ctypes.CDLL(a.lib)
    lib.mpk_smem_bytes.restype = ctypes.c_int
    workers = torch.cuda.get_device_properties(0).multi_processor_count
    tasks, _ = md.compile_tasks(a.strata, a.model, a.batch, a.kv + 48, workers, a.out)
    w, kc, vc, tokens = md.make_state(tasks, a.batch, a.kv)
    mk = md.Megakernel(lib, tasks, w, kc, vc, workers)
    tin = tokens.int()
    tout = torch.zeros_like(tin)
    for _ in range(3):  # warm (the first launches are not profiled: --launch-skip)
        mk.launch(tin, tout, a.kv, 0)
    mk.launch(tin, tout, a.kv, 0)
    mk.launch_per_op(tin, tout, a.kv)
    torch.cuda.synchronize()
    names = tasks["op_names"]
    print("ops in launch order:", ", ".join(f"{i}:{n}" for i, n in enumerate(names)))


if __name__ == "__main__":
    main()
