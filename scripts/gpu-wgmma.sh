#!/usr/bin/env bash
# Warpgroup MMA (the emitter knob wgmma=1; docs/codegen.md, "wgmma") on a GPU machine, in one
# invocation:
#   1. build strata (Release) with its tests in build-gpu/ like scripts/gpu-check.sh (with
#      .devdeps/ when present);
#   2. the GPU tests that cover wgmma against the float64 interpreter (ctest -R wgmma_gpu_test:
#      plain matmuls with MN- and K-major B, B tiles in 64-column atoms, the attention chain at
#      head dim 64 and 128, suite programs with 64-row tiles; on sm_90a each must take wgmma);
#   3. for each program (default llama32_1b_attn_p4096, llama32_1b_attn_qknorm_p1024,
#      qwen25_7b_attn_p1024, llama3_8b_attn_p2048 (head dim 128), mcfuser_s5 and the GEMM
#      chains mcfuser_g8, mcfuser_g10): `strata profile` of the top K
#      candidates of its search result (bench/search/suite/<program>.json) and of the same
#      graphs with 64-row tiles (bench/wgmma_rows.py), every candidate emitted with and
#      without the knob (--variants 'default;wgmma=1'), checked against the float64 reference
#      of bench/suite/<program>.strata and timed (CUDA-graph replays);
#   4. a table: per program the fastest correct candidate with each variant and its speedup
#      over the default (bench/wgmma_rows.py report). Each emitted plan says, per matmul, why it
#      took wgmma or kept mma.sync (`strata emit --knobs wgmma=1`, the plan comment).
# Every step logs its failure and the next one still runs. Everything is written under OUT_DIR
# (default bench/results/wgmma): gpu-wgmma.log, profile/<program>.json, rows64/ (the derived
# candidates), summary.md.
#
# Usage: scripts/gpu-wgmma.sh [OUT_DIR]
# Environment: STRATA_WGMMA_PROGRAMS (comma-separated suite programs instead of the default),
#   STRATA_WGMMA_TOP (candidates per search result, default 5), STRATA_WGMMA_RUNS (timed
#   replays, default 100), STRATA_WGMMA_STEP_TIMEOUT (seconds per program, default 300),
#   STRATA_WGMMA_VARIANTS (default 'default;wgmma=1'), STRATA_BUILD_DIR (default build-gpu),
#   STRATA_SKIP_BUILD=1 (use the strata and tests already built there),
#   STRATA_WGMMA_COMPILE_ONLY=1 (a dry run without a GPU: no device, no GPU test; every
#   candidate and variant only emitted and compiled for sm_90a, statuses read "compiled").
# Exit: 0 every step passed; 1 a test, a profile step or a candidate's check failed; 3 the
#   build failed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 3
root=$PWD
. "$root/scripts/lib/gpu-script.sh"
gpu_script_begin "${1:-bench/results/wgmma}" gpu-wgmma.log
failed=()
command -v nvcc >/dev/null || { echo "gpu-wgmma: nvcc not found"; exit 3; }
nvcc --version | tail -2
build=${STRATA_BUILD_DIR:-$root/build-gpu}
case $build in /*) ;; *) build=$root/$build ;; esac
export STRATA_CACHE_DIR=${STRATA_CACHE_DIR:-$build/cache}
strata=$build/strata
mkdir -p "$out/profile" "$out/rows64"

if [ "${STRATA_SKIP_BUILD:-0}" = 1 ] && [ -x "$strata" ] && [ -x "$build/wgmma_gpu_test" ]; then
  step "build skipped (STRATA_SKIP_BUILD=1)"
else
  step "build (Release, with the tests)"
  if ! timeout -k 10 900 cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release "${cmake_deps[@]}" \
         >/dev/null ||
     ! timeout -k 10 1200 cmake --build "$build" -j"$(nproc)" \
         --target strata wgmma_gpu_test >/dev/null; then
    echo "gpu-wgmma: the build failed"
    exit 3
  fi
fi
compile_only=${STRATA_WGMMA_COMPILE_ONLY:-0}
mode=()
if [ "$compile_only" = 1 ]; then
  echo "gpu-wgmma: dry run (STRATA_WGMMA_COMPILE_ONLY=1): compile only for sm_90a, no GPU test"
  mode=(--compile-only --arch sm_90a)
else
  timeout 60 "$strata" device || failed+=("strata device")
  arch=$("$strata" device 2>/dev/null | grep -o 'sm_[0-9]*a\?' | head -1)
  echo "gpu-wgmma: device architecture ${arch:-unknown} (wgmma is taken on sm_90a only)"
  mode=(--runs "${STRATA_WGMMA_RUNS:-100}" --warmup 10)

  step "GPU tests covering wgmma (float64 interpreter)"
  (cd "$build" && timeout -k 10 900 ctest -R wgmma_gpu_test --output-on-failure) ||
    failed+=("wgmma GPU tests")
fi

programs=${STRATA_WGMMA_PROGRAMS:-llama32_1b_attn_p4096,llama32_1b_attn_qknorm_p1024,qwen25_7b_attn_p1024,llama3_8b_attn_p2048,mcfuser_s5,mcfuser_g8,mcfuser_g10}
top=${STRATA_WGMMA_TOP:-5}
limit=${STRATA_WGMMA_STEP_TIMEOUT:-300}
variants=${STRATA_WGMMA_VARIANTS:-default;wgmma=1}
IFS=, read -r -a names <<<"$programs"
for p in "${names[@]}"; do
  step "profile $p ($variants; top $top and their 64-row forms)"
  suite_files gpu-wgmma "$p" || continue
  rows=()
  list=$out/rows64/$p.txt
  if python3 bench/wgmma_rows.py derive "$result" "$out/rows64" --top "$top" \
       --strata "$strata" >"$list"; then
    mapfile -t rows <"$list"
    echo "gpu-wgmma: $p: ${#rows[@]} candidate(s) with 64-row tiles"
  else
    echo "gpu-wgmma: $p: bench/wgmma_rows.py failed (only the search's candidates profiled)"
    failed+=("$p: wgmma_rows.py")
  fi
  timeout -k 10 "$limit" "$strata" profile "$program" "$result" "${rows[@]}" --top "$top" \
    --variants "$variants" "${mode[@]}" -o "$out/profile/$p.json" </dev/null
  profile_rc gpu-wgmma "$p" $?
done

profile_summary_and_exit gpu-wgmma
