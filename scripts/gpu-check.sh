#!/usr/bin/env bash
# The GPU check, in one invocation on a GPU machine (docs/gpu-runtime.md, "The GPU script"):
#   1. build strata (Release) in build-gpu/, using .devdeps/ (scripts/fetch-device-deps.sh)
#      when the machine lacks the Debian build dependencies;
#   2. run the GPU tests (ctest -L gpu, ragged-tile graphs included) and the C++ API example,
#      and `strata optimize` on the rmsnorm b8 program and on programs with ragged and large
#      extents (search, then every ranked candidate checked and timed on the GPU);
#   3. check every benchmark's result: every candidate against the float64 reference
#      (strata profile, through bench/strata_bench.py --phase profile);
#   4. the benchmark: PyTorch eager / torch.compile / max-autotune vs strata, in one process.
# Everything is written under OUT_DIR (default bench/results): the log, the benchmark report
# <gpu>-<date>.md/.json, per-program profile reports, exported candidates.
#
# Usage: scripts/gpu-check.sh [OUT_DIR]
# Knobs (environment): STRATA_SEARCH_DIR (precomputed `strata optimize` results
#   <bench>_b<b>.json; default bench/search when it exists), STRATA_SEARCH_TIME (seconds per
#   search run here otherwise, default 10), STRATA_BENCH_MODES (default
#   eager,compile,max-autotune), STRATA_BENCH_TOP (candidates per program, default 5),
#   STRATA_BENCH_ONLY=1 (skip step 2: only the build, the check and the benchmark),
#   STRATA_BENCH_VARIANTS (emitter variants per candidate, default that of strata_bench.py),
#   STRATA_BENCH_NAMES (benchmarks to run, default all: e.g. gqa,qknorm for a run made in
#   parts, joined afterwards by `bench/report.py merge`),
#   STRATA_BENCH_PHASE=profile|bench|none (only step 3, only step 4 — e.g. in two calls with
#   the same OUT_DIR when both do not fit one time limit — or neither; default: both).
# Exit: 0 all passed; 1 a test, a check or a benchmark step failed; 3 the build failed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 3
root=$PWD
. "$root/scripts/lib/gpu-script.sh"
gpu_script_begin "${1:-bench/results}" gpu-check.log
failed=()
nvcc --version | tail -2
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
build=$root/build-gpu
export STRATA_CACHE_DIR=${STRATA_CACHE_DIR:-$build/cache}

step "build (Release)"
if ! cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release "${cmake_deps[@]}" >/dev/null ||
   ! cmake --build "$build" -j"$(nproc)"; then
  echo "gpu-check: the build failed"
  exit 3
fi
"$build/strata" device || failed+=("strata device")

if [ "${STRATA_BENCH_ONLY:-0}" = 1 ]; then
  echo "STRATA_BENCH_ONLY=1: GPU tests, C++ API example and optimize step skipped"
else
step "GPU tests (ctest -L gpu)"
(cd "$build" && ctest -L gpu --output-on-failure) || failed+=("GPU tests")

step "C++ API example"
"$build/cpp_api_example" examples/reference/rmsnorm_small.json || failed+=("C++ API example")

step "strata optimize with GPU profiling (rmsnorm b8: search, then check and time the ranking)"
opt_inputs=()  # the benchmark's input recipe where PyTorch is there (bench/benchmarks.py)
if python3 bench/benchmarks.py inputs rmsnorm_b8 "$build/inputs-rmsnorm_b8" 2>/dev/null; then
  opt_inputs=(--inputs "$build/inputs-rmsnorm_b8")
fi
"$build/strata" optimize examples/programs/rmsnorm_b8.strata --no-cache --quiet \
  "${opt_inputs[@]}" -o "$out/optimize-rmsnorm_b8.json" || failed+=("strata optimize on the GPU")
grep -q '"gpu_profile"' "$out/optimize-rmsnorm_b8.json" 2>/dev/null ||
  failed+=("strata optimize did not profile on the GPU")

step "C++ API example on the optimize result (the profiled fastest, with its emitter variant)"
"$build/cpp_api_example" "$out/optimize-rmsnorm_b8.json" || failed+=("C++ API example on the result")

# Ragged tiles (docs/codegen.md): extents no tile divides (a vocabulary of 50257, an
# intermediate size of 11000) and vocabularies too large for the default tiles (128256); every
# ranked candidate is checked against the float64 reference. (The emitted ragged test graphs
# are checked by runtime_gpu_test, GpuRuntime.EmittedRaggedGraphsMatchTheInterpreter, above.)
step "strata optimize on ragged and large extents, candidates checked against float64"
mkdir -p "$build/ragged"
printf 'input X: f16[2, 2048]\ninput G: f16[1, 2048]\ninput W: f16[2048, 50257]\nY = rms_norm(X)\nZ = mul(Y, G)\nO = matmul(Z, W)\noutput O\n' \
  >"$build/ragged/vocab50257.strata"
printf 'input X: f16[4, 2048]\ninput W1: f16[2048, 11000]\ninput W3: f16[2048, 11000]\nA = matmul(X, W1)\nB = matmul(X, W3)\nO = mul(silu(A), B)\noutput O\n' \
  >"$build/ragged/mlp11000.strata"
printf 'input X: f16[8, 2048]\ninput W: f16[2048, 128256]\nY = rms_norm(X)\nO = matmul(Y, W)\noutput O\n' \
  >"$build/ragged/head128256.strata"
for prog in vocab50257 mlp11000 head128256; do
  "$build/strata" optimize "$build/ragged/$prog.strata" --no-cache --quiet --top 1 \
    -o "$out/optimize-$prog.json" || failed+=("strata optimize on $prog")
  if ! grep -q '"gpu_profile"' "$out/optimize-$prog.json" 2>/dev/null ||
     grep -Eq '"status": *"(wrong_answer|compile_error|launch_failure)"' "$out/optimize-$prog.json"; then
    failed+=("ragged candidates of $prog")
  fi
done
fi

bench_args=(--out "$out" --strata "$build/strata" --top "${STRATA_BENCH_TOP:-5}"
            --search-time "${STRATA_SEARCH_TIME:-10}"
            --modes "${STRATA_BENCH_MODES:-eager,compile,max-autotune}")
if [ -n "${STRATA_BENCH_NAMES:-}" ]; then bench_args+=(--benchmarks "$STRATA_BENCH_NAMES"); fi
search_dir=${STRATA_SEARCH_DIR:-}
if [ -z "$search_dir" ] && [ -d bench/search ]; then search_dir=bench/search; fi
if [ -n "$search_dir" ]; then bench_args+=(--search-dir "$search_dir"); fi

phase=${STRATA_BENCH_PHASE:-all}
if [ "$phase" = all ] || [ "$phase" = profile ]; then
step "correctness check of every benchmark's candidates (strata profile)"
python3 bench/strata_bench.py "${bench_args[@]}" --phase profile || failed+=("strata profile")
if grep -l '"status": "wrong_answer"' "$out"/profile/*_b[0-9].json 2>/dev/null; then
  echo "gpu-check: candidates with wrong answers in the reports above"
  failed+=("wrong answers")
fi
fi

if [ "$phase" = all ] || [ "$phase" = bench ]; then
step "benchmark (PyTorch vs strata)"
python3 bench/strata_bench.py "${bench_args[@]}" --phase bench || failed+=("benchmark")
fi

step "done in $((SECONDS - start)) s; outputs in $out"
ls "$out"
if [ ${#failed[@]} -gt 0 ]; then
  echo "gpu-check: FAILED: ${failed[*]}"
  exit 1
fi
echo "gpu-check: all steps passed"
