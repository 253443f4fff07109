#!/usr/bin/env bash
# Tensor-parallel blocks on a machine with 2 GPUs (docs/tensor-parallel.md, bench/README.md
# "Tensor parallelism"):
#   1. compile the strata candidates: every bench/search/tp/<program>.r<K>.cu (emitted by
#      `strata emit` from the search result bench/search/tp/<program>.json, all_reduce as
#      ncclAllReduce) with nvcc against the NCCL that PyTorch loads (the nvidia-nccl wheel, else
#      the system's), in parallel; no build of strata is needed;
#   2. torchrun --standalone --nproc_per_node=N bench/tp_bench.py: strata's kernels with NCCL
#      against PyTorch eager and torch.compile with torch.distributed (NCCL) in one run, checked
#      against the unsharded float64 reference; report OUT_DIR/<gpu>xN-<date>-tp.md/.json.
# Usage: scripts/gpu-tp.sh OUT_DIR
# Environment: STRATA_TP_NPROC (ranks, default 2: the programs of bench/tp/ declare `ranks 2`),
#   STRATA_TP_TOTAL (seconds for the whole script, default 450), STRATA_TP_MODES (default
#   eager,compile), STRATA_TP_PROGRAMS (comma-separated names; default all of bench/tp/).
# Exit: 0 every program ran and strata's result was correct; 1 otherwise (the report says
#   what); 3 nothing could be compiled.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 3
root=$PWD
. "$root/scripts/lib/gpu-script.sh"
[ $# -eq 1 ] || { echo "usage: scripts/gpu-tp.sh OUT_DIR"; exit 2; }
gpu_script_begin "$1" gpu-tp.log
total=${STRATA_TP_TOTAL:-450}
nproc=${STRATA_TP_NPROC:-2}
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count(), "nccl", torch.cuda.nccl.version())'

step "NCCL and the target"
nccl_dir=$(python3 -c 'import nvidia.nccl, os; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null)
if [ -n "$nccl_dir" ] && [ -f "$nccl_dir/include/nccl.h" ]; then
  nccl_inc=$nccl_dir/include
  nccl_lib=$nccl_dir/lib
else
  nccl_inc=$(dirname "$(ls /usr/include/nccl.h /usr/local/cuda/include/nccl.h /usr/local/include/nccl.h 2>/dev/null | head -1)")
  nccl_lib=$(dirname "$(ls /usr/lib/x86_64-linux-gnu/libnccl.so.2 /usr/local/cuda/lib64/libnccl.so.2 /usr/local/lib/libnccl.so.2 2>/dev/null | head -1)")
fi
echo "nccl: include $nccl_inc, lib $nccl_lib"
[ -f "$nccl_inc/nccl.h" ] && [ -e "$nccl_lib/libnccl.so.2" ] || { echo "gpu-tp: NCCL not found"; exit 3; }
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')
arch=sm_${cc:-90}
[ "$arch" = sm_90 ] && arch=sm_90a
echo "arch $arch"

step "compile the strata candidates (nvcc, parallel)"
libs=$out/tp-libs
mkdir -p "$libs"
export libs nccl_inc nccl_lib arch root
ls bench/search/tp/*.cu | xargs -P "$(nproc)" -I{} bash -c '
  f={}; n=$(basename "$f" .cu)
  if timeout -k 5 240 nvcc -std=c++17 -O3 -arch=$arch -shared -Xcompiler -fPIC \
       -I "$root/runtime" -I "$nccl_inc" -o "$libs/$n.so" "$f" -L "$nccl_lib" -l:libnccl.so.2 \
       -Xlinker -rpath,"$nccl_lib" > "$libs/$n.log" 2>&1; then echo "  compiled $n"
  else echo "  FAILED $n:"; tail -5 "$libs/$n.log"; rm -f "$libs/$n.so"; fi'
ls "$libs"/*.so >/dev/null 2>&1 || { echo "gpu-tp: no candidate compiled"; exit 3; }

left=$((total - SECONDS))
budget=$((left - 90))
step "torchrun --nproc_per_node=$nproc bench/tp_bench.py (budget $budget s of $left s left)"
args=(--lib-dir "$libs" --out "$out" --modes "${STRATA_TP_MODES:-eager,compile}" --budget-s "$budget")
[ -n "${STRATA_TP_PROGRAMS:-}" ] && args+=(--programs "$STRATA_TP_PROGRAMS")
# python3 -m torch.distributed.run is torchrun (also where the script is not on PATH)
timeout -k 10 $((left - 15)) python3 -m torch.distributed.run --standalone \
  --nproc_per_node="$nproc" bench/tp_bench.py "${args[@]}"
rc=$?
step "done in $((SECONDS - start)) s (torchrun exit $rc); outputs in $out"
ls "$out"
cat "$out"/*-tp.md 2>/dev/null
[ $rc -eq 0 ] || { echo "gpu-tp: FAILED (exit $rc; 124/137: out of time)"; exit 1; }
echo "gpu-tp: all steps passed"
