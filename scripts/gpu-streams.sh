#!/usr/bin/env bash
# Concurrent launches (side streams for launches that do not depend on each other; the emitter
# knob streams, docs/codegen.md "Concurrent launches") on a GPU machine, in one invocation:
#   1. build strata (Release) and runtime_gpu_test in build-gpu/ like scripts/gpu-check.sh
#      (with .devdeps/ when present);
#   2. the GPU test of concurrent launches (GpuRuntime.ConcurrentLaunchesMatchTheInterpreterAndCapture:
#      QKV at Llama-3.2-1B prefill size through cuBLAS and as generated kernels, a LoRA, two
#      independent elementwise kernels; each against the float64 interpreter, timed from a
#      captured CUDA graph, with and without side streams);
#   3. for each program (default: the suite programs whose kept searches have independent
#      launches): `strata profile` of the top K candidates of bench/search/suite/<program>.json,
#      every candidate emitted with and without side streams (--variants 'default;streams=0'),
#      checked against the float64 reference of bench/suite/<program>.strata and timed
#      (CUDA-graph replays);
#   4. a table: per program the fastest correct candidate with each variant and its speedup
#      over the default (bench/wgmma_rows.py report, which reads any variants).
# Every step logs its failure and the next one still runs. Everything is written under OUT_DIR
# (default bench/results/streams): gpu-streams.log, profile/<program>.json, summary.md.
#
# Usage: scripts/gpu-streams.sh [OUT_DIR]
# Environment: STRATA_STREAMS_PROGRAMS (comma-separated suite programs instead of the default),
#   STRATA_STREAMS_TOP (candidates per search result, default 4), STRATA_STREAMS_RUNS (timed
#   replays, default 100), STRATA_STREAMS_STEP_TIMEOUT (seconds per program, default 300),
#   STRATA_STREAMS_VARIANTS (default 'default;streams=0'), STRATA_BUILD_DIR (default build-gpu),
#   STRATA_SKIP_BUILD=1 (use the strata and tests already built there).
# Exit: 0 every step passed; 1 a test, a profile step or a candidate's check failed; 3 the
#   build failed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 3
root=$PWD
. "$root/scripts/lib/gpu-script.sh"
gpu_script_begin "${1:-bench/results/streams}" gpu-streams.log
failed=()
command -v nvcc >/dev/null || { echo "gpu-streams: nvcc not found"; exit 3; }
nvcc --version | tail -2
build=${STRATA_BUILD_DIR:-$root/build-gpu}
case $build in /*) ;; *) build=$root/$build ;; esac
export STRATA_CACHE_DIR=${STRATA_CACHE_DIR:-$build/cache}
strata=$build/strata
mkdir -p "$out/profile"

if [ "${STRATA_SKIP_BUILD:-0}" = 1 ] && [ -x "$strata" ] && [ -x "$build/runtime_gpu_test" ]; then
  step "build skipped (STRATA_SKIP_BUILD=1)"
else
  step "build (Release, with the GPU runtime test)"
  if ! timeout -k 10 900 cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release "${cmake_deps[@]}" \
         >/dev/null ||
     ! timeout -k 10 1200 cmake --build "$build" -j"$(nproc)" \
         --target strata runtime_gpu_test >/dev/null; then
    echo "gpu-streams: the build failed"
    exit 3
  fi
fi
timeout 60 "$strata" device || failed+=("strata device")

step "GPU test of concurrent launches (float64 interpreter, CUDA-graph capture)"
timeout -k 10 900 "$build/runtime_gpu_test" \
  --gtest_filter='GpuRuntime.ConcurrentLaunchesMatchTheInterpreterAndCapture' ||
  failed+=("concurrent launches GPU test")

programs=${STRATA_STREAMS_PROGRAMS:-llama32_1b_qkv_p2048,mistral_7b_qkv_p4096,llama32_1b_lora_v_r32_p2048,qwen25_7b_lora_down_r64_p512,llama32_1b_mlp_p4096,qwen25_7b_mlp_down_p512,llama3_8b_rope_d16}
top=${STRATA_STREAMS_TOP:-4}
limit=${STRATA_STREAMS_STEP_TIMEOUT:-300}
variants=${STRATA_STREAMS_VARIANTS:-default;streams=0}
IFS=, read -r -a names <<<"$programs"
for p in "${names[@]}"; do
  step "profile $p ($variants; top $top)"
  suite_files gpu-streams "$p" || continue
  timeout -k 10 "$limit" "$strata" profile "$program" "$result" --top "$top" \
    --variants "$variants" --runs "${STRATA_STREAMS_RUNS:-100}" --warmup 10 \
    -o "$out/profile/$p.json" </dev/null
  profile_rc gpu-streams "$p" $?
done

profile_summary_and_exit gpu-streams
