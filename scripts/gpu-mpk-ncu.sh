#!/usr/bin/env bash
# Nsight Compute counters of the persistent megakernel (docs/megakernel.md, "Tracing"), in one
# invocation on a GPU machine: builds the library and the strata tool like scripts/gpu-mpk.sh,
# then profiles with `ncu` one megakernel step (mpk_persistent: speed of light, warp states,
# the source-level stall table) and the first layer's ops launched one kernel per op
# (mpk_op_kernel: speed of light, memory, warp states), at one configuration
# (STRATA_MPK_NCU_ARGS, default Llama-3.2-1B batch 1 KV 1024; see bench/mpk_ncu.py).
# Output under $OUT (or the first argument): ncu-step.txt, ncu-ops.txt, gpu-mpk-ncu.log.
# Exit: 0 profiled; 1 ncu failed; 3 a build failed or ncu is missing.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 3
root=$PWD
. "$root/scripts/lib/gpu-script.sh"
gpu_script_begin "${OUT:-${1:-bench/results}}" gpu-mpk-ncu.log
command -v ncu >/dev/null || { echo "gpu-mpk-ncu: ncu not found"; exit 3; }
build=$root/build-gpu-mpk
mkdir -p "$build"
step "build: megakernel library (nvcc, with line info) and the strata tool, in parallel"
(timeout -k 10 400 nvcc -O3 -lineinfo -arch=sm_90a -std=c++17 -shared -Xcompiler -fPIC \
   -I include -I runtime -o "$build/libmpk.so" runtime/mpk/megakernel.cu >"$build/nvcc.log" 2>&1
 echo $? >"$build/nvcc.rc") &
nvcc_pid=$!
if ! timeout -k 10 300 cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DSTRATA_ENABLE_CUDA=OFF \
       -DSTRATA_BUILD_TESTS=OFF -DSTRATA_INSTALL=OFF "${cmake_deps[@]}" >"$build/cmake.log" 2>&1 ||
   ! timeout -k 10 400 cmake --build "$build" -j"$(nproc)" --target strata >>"$build/cmake.log" 2>&1; then
  tail -30 "$build/cmake.log"; echo "gpu-mpk-ncu: the strata build failed"; exit 3
fi
wait "$nvcc_pid"
[ "$(cat "$build/nvcc.rc")" = 0 ] || { cat "$build/nvcc.log"; echo "gpu-mpk-ncu: nvcc failed"; exit 3; }
args=(--lib "$build/libmpk.so" --strata "$build/strata" --out "$build" ${STRATA_MPK_NCU_ARGS:-})
step "ncu: one megakernel step"
timeout -k 10 300 ncu --kernel-name mpk_persistent --launch-skip 3 --launch-count 1 \
  --section SpeedOfLight --section WarpStateStats --section SourceCounters \
  --section MemoryWorkloadAnalysis python3 bench/mpk_ncu.py "${args[@]}" >"$out/ncu-step.txt" 2>&1
rc1=$?
step "ncu: the first layer's ops, one kernel each"
timeout -k 10 300 ncu --kernel-name mpk_op_kernel --launch-skip 0 --launch-count 9 \
  --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis \
  --section LaunchStats python3 bench/mpk_ncu.py "${args[@]}" >"$out/ncu-ops.txt" 2>&1
rc2=$?
step "done (ncu exits $rc1, $rc2)"
[ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] || exit 1
