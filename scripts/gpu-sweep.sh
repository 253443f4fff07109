#!/usr/bin/env bash
# The emitter sweep, in one invocation on a GPU machine (bench/README.md, "Emitter sweep"):
#   1. build strata (Release) in build-gpu/ like scripts/gpu-check.sh (with .devdeps/ when
#      present); only the `strata` tool;
#   2. for the 12 reference μGraphs (examples/reference/<bench>_b{1,8}.json), alternative
#      tilings of the rmsnorm / gatedmlp / gqa / qknorm graphs and the search results
#      bench/search/<bench>_b<b>.json (if present): one `strata profile` call per step that
#      emits every graph once per emitter variant (`strata emit --list-knobs`), compiles them in
#      parallel, checks each output against the float64 reference of the benchmark program
#      (examples/programs/<bench>_b<b>.strata) and times it (CUDA-graph replays); the inputs
#      follow the benchmark's recipe (bench/benchmarks.py, when PyTorch is installed);
#   3. prints one table (graph, variant, µs, × memory floor, error, status) and the best
#      variant per benchmark (bench/sweep.py report).
# Everything is written under OUT_DIR (default bench/results/sweep): sweep.log, sweep.json (all
# rows), profile/<step>.json (full strata profile reports), graphs/ (the generated tilings).
#
# Usage: scripts/gpu-sweep.sh [OUT_DIR]
# Environment: STRATA_SWEEP_TOTAL (seconds for the whole script, build included, default 470:
#   steps that would start too late are skipped and reported),
#   STRATA_SWEEP_STEP_TIMEOUT (seconds per step, default 120), STRATA_SWEEP_RUNS (timed
#   replays, default 100), STRATA_SEARCH_DIR (default bench/search), STRATA_SWEEP_ONLY (a
#   regular expression: run only the steps whose key matches, e.g. 'rmsnorm|gatedmlp'),
#   STRATA_BUILD_DIR (default build-gpu), STRATA_SWEEP_COMPILE_ONLY=1 (a dry run without a GPU:
#   every variant is only emitted and compiled for sm_90a; statuses read "compiled"),
#   STRATA_SWEEP_VARIANTS (the emitter variants of every step instead of the plan's, e.g.
#   'default;chainmt=2'), STRATA_SWEEP_TOP (candidates taken from each search result, default 3).
# Exit: 0 every step ran and every variant is correct; 1 a step failed, timed out or was
#   skipped, or a variant failed its check; 3 the build failed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 3
root=$PWD
. "$root/scripts/lib/gpu-script.sh"
gpu_script_begin "${1:-bench/results/sweep}" sweep.log truncate
mkdir -p "$out/profile"
die() { echo "gpu-sweep: FAILED: $1"; exit "${2:-1}"; }

command -v nvcc >/dev/null || die "nvcc not found" 3
command -v timeout >/dev/null || die "coreutils timeout not found" 3
nvcc --version | tail -2
build=${STRATA_BUILD_DIR:-$root/build-gpu}
case $build in /*) ;; *) build=$root/$build ;; esac
compile_only=${STRATA_SWEEP_COMPILE_ONLY:-0}
export STRATA_CACHE_DIR=${STRATA_CACHE_DIR:-$build/cache}
strata=$build/strata
runs=${STRATA_SWEEP_RUNS:-100}

build_strata_tool gpu-sweep
mode=()
if [ "$compile_only" = 1 ]; then
  echo "gpu-sweep: dry run (STRATA_SWEEP_COMPILE_ONLY=1): compile only, nothing is checked or timed"
  mode=(--compile-only --arch sm_90a)
else
  timeout 60 "$strata" device || die "strata device: no usable GPU" 3
  mode=(--runs "$runs" --warmup 10)
fi
"$strata" emit --list-knobs

step "plan"
search_dir=${STRATA_SEARCH_DIR:-}
if [ -z "$search_dir" ] && [ -d bench/search ]; then search_dir=bench/search; fi
[ -n "$search_dir" ] || echo "gpu-sweep: note: no bench/search directory; no search results swept"
plan_file=$out/plan.tsv
python3 bench/sweep.py plan "$out" "$search_dir" >"$plan_file" || die "bench/sweep.py plan failed"
only=${STRATA_SWEEP_ONLY:-}
total=${STRATA_SWEEP_TOTAL:-470}
step_limit=${STRATA_SWEEP_STEP_TIMEOUT:-120}
top=${STRATA_SWEEP_TOP:-3}
steps_file=$out/steps.tsv
: >"$steps_file"

while IFS=$'\t' read -r key program variants candidates; do
  [ -n "$key" ] || continue
  variants=${STRATA_SWEEP_VARIANTS:-$variants}
  if [ -n "$only" ] && ! [[ $key =~ $only ]]; then continue; fi
  left=$((total - 10 - (SECONDS - start)))  # 10 s kept for the report
  if [ "$left" -lt 20 ]; then
    echo "gpu-sweep: SKIPPED $key: the time budget of $total s is spent"
    printf '%s\t%s\t%s\n' "$key" -1 0 >>"$steps_file"
    continue
  fi
  limit=$((left < step_limit ? left : step_limit))
  step "$key (limit ${limit} s)"
  t0=$SECONDS
  # shellcheck disable=SC2086  # candidates: space-separated paths without spaces
  inputs=()  # the benchmark's own input recipe where PyTorch is there (bench/benchmarks.py)
  bkey=${key%%.*}
  if [ "$compile_only" != 1 ] && { [ -d "$out/inputs/$bkey" ] ||
       python3 bench/benchmarks.py inputs "$bkey" "$out/inputs/$bkey" 2>/dev/null; }; then
    inputs=(--inputs "$out/inputs/$bkey")
  fi
  timeout -k 10 "$limit" "$strata" profile "$program" $candidates --top "$top" \
    --variants "$variants" "${mode[@]}" "${inputs[@]}" -o "$out/profile/$key.json" </dev/null
  rc=$?
  case $rc in
    0) ;;
    1) echo "gpu-sweep: $key: some variants failed (see the table)" ;;
    124 | 137) echo "gpu-sweep: $key: TIMED OUT after $limit s" ;;
    *) echo "gpu-sweep: $key: strata profile exited with $rc" ;;
  esac
  printf '%s\t%s\t%s\n' "$key" "$rc" "$((SECONDS - t0))" >>"$steps_file"
done <"$plan_file"

step "results (µs: median of CUDA-graph replays; x floor: µs / memory-or-compute floor)"
python3 bench/sweep.py report "$out"
rc=$?
step "done in $((SECONDS - start)) s; outputs in $out"
if [ $rc -ne 0 ]; then die "see the failures above" 1; fi
echo "gpu-sweep: all steps passed"
