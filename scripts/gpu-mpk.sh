#!/usr/bin/env bash
# The persistent megakernel on a GPU machine, in one invocation (docs/megakernel.md, "GPU
# benchmark"):
#   1. in parallel: nvcc builds the megakernel library (runtime/mpk/megakernel.cu, sm_90a) and
#      CMake builds the strata tool (Release, no CUDA runtime, no tests) in build-gpu-mpk/;
#   2. bench/mpk_decode.py: for Llama-3.2-1B and Qwen3-0.6B shapes at batch 1 and 8, KV 1k and
#      8k: `strata mpk compile`, random weights, the megakernel's logits and 32 greedy tokens
#      against a plain PyTorch model, and latency per token of the megakernel (static lists and
#      global queue), strata's task kernels one launch per op in a CUDA graph, PyTorch eager
#      and torch.compile(mode="reduce-overhead"); the fraction of the bandwidth floor;
#   3. meanwhile, in the background of step 2, for the configurations STRATA_MPK_GENERATED
#      selects: the generated ops searched per (model, batch) (`strata mpk compile --generated
#      all`, search cache in build-gpu-mpk/search-cache) and a second megakernel library built
#      with their header (nvcc, ~80 s each, several at once); each such configuration is then
#      checked and timed with it too (column "megakernel, generated tasks"). What does not fit
#      the time budget is skipped and reported, not failed.
# Output under $OUT (or the first argument; default bench/results): gpu-mpk.log,
# mpk-<gpu>-<date>.md and .json.
#
# Usage: OUT=DIR bash scripts/gpu-mpk.sh   (or scripts/gpu-mpk.sh DIR)
# Knobs: STRATA_MPK_ARGS (extra arguments of bench/mpk_decode.py, e.g. "--batches 1 --kv 1024"
#   or "--no-compile"), STRATA_MPK_TOTAL (seconds for the whole script, default 530),
#   STRATA_MPK_GENERATED (configurations with generated tasks: BATCH:KV pairs for every model,
#   "all" or "none"; default 1:1024,8:1024), STRATA_MPK_SEARCH_SECONDS (each op's search, 20).
# Exit: 0 every check passed; 1 a check failed or the benchmark did not finish; 3 a build failed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 3
root=$PWD
. "$root/scripts/lib/gpu-script.sh"
gpu_script_begin "${OUT:-${1:-bench/results}}" gpu-mpk.log
total=${STRATA_MPK_TOTAL:-530}
build=$root/build-gpu-mpk
mkdir -p "$build"
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'

step "build: megakernel library (nvcc) and the strata tool, in parallel"
(timeout -k 10 400 nvcc -O3 -arch=sm_90a -std=c++17 -shared -Xcompiler -fPIC -I include -I runtime \
   -o "$build/libmpk.so" runtime/mpk/megakernel.cu >"$build/nvcc.log" 2>&1
 echo $? >"$build/nvcc.rc") &
nvcc_pid=$!
if ! timeout -k 10 300 cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DSTRATA_ENABLE_CUDA=OFF \
       -DSTRATA_BUILD_TESTS=OFF -DSTRATA_INSTALL=OFF "${cmake_deps[@]}" >"$build/cmake.log" 2>&1 ||
   ! timeout -k 10 400 cmake --build "$build" -j"$(nproc)" --target strata >>"$build/cmake.log" 2>&1; then
  tail -30 "$build/cmake.log"
  echo "gpu-mpk: the strata build failed"
  exit 3
fi
wait "$nvcc_pid"
if [ "$(cat "$build/nvcc.rc")" != 0 ]; then
  cat "$build/nvcc.log"
  echo "gpu-mpk: nvcc failed"
  exit 3
fi
echo "built in $SECONDS s"

left=$((total - SECONDS))
step "decode benchmark ($left s left)"
# shellcheck disable=SC2086
timeout -k 10 $((left - 10)) python3 bench/mpk_decode.py --lib "$build/libmpk.so" \
  --strata "$build/strata" --out "$out" --budget $((left - 150)) --total $((left - 20)) \
  --build-dir "$build" --generated "${STRATA_MPK_GENERATED:-1:1024,8:1024}" \
  --search-seconds "${STRATA_MPK_SEARCH_SECONDS:-20}" ${STRATA_MPK_ARGS:-}
rc=$?
step "done (exit $rc)"
[ $rc -eq 0 ] || exit 1
