#!/usr/bin/env bash
# The suite of LLM programs on a GPU machine, one part per invocation (bench/README.md, "The
# suite"):
#   1. build strata (Release, the tool only) in build-gpu/ like scripts/gpu-check.sh (with
#      .devdeps/ when present);
#   2. bench/suite_bench.py on the selected programs: the precomputed searches of
#      bench/search/suite/ (made on a CPU by bench/suite_search.py --keep; a program without
#      one is searched here for STRATA_SUITE_SEARCH_TIME seconds), `strata profile` (every
#      candidate checked against the float64 reference, then timed), then PyTorch eager,
#      torch.compile, max-autotune and, for attention, SDPA's flash backend against strata's
#      fastest correct candidate, in one process; report <gpu>-<date>.md/.json under OUT_DIR.
# The parts of a run are joined by `python3 bench/report.py merge OUT1 OUT2 ... -o STEM`.
#
# Usage: scripts/gpu-suite.sh OUT_DIR
# Environment: STRATA_SUITE_PART=I/N (the I-th of N parts: every N-th program in name order
#   from the I-th; default all programs), STRATA_SUITE_NAMES (comma-separated programs instead),
#   STRATA_SUITE_TOTAL (seconds for the whole script, build included, default 540: programs
#   not started in time are reported as skipped, and the benchmark is stopped 20 s before),
#   STRATA_SUITE_SEARCH_DIR (default bench/search/suite when present),
#   STRATA_SUITE_SEARCH_TIME (seconds per search run here, default 60), STRATA_SUITE_TOP
#   (candidates per search result, default 5), STRATA_SUITE_MODES (default
#   eager,compile,max-autotune,sdpa-flash), STRATA_BENCH_VARIANTS (emitter variants),
#   STRATA_SUITE_PHASE=all|profile|bench (as STRATA_BENCH_PHASE of gpu-check.sh),
#   STRATA_BUILD_DIR (default build-gpu).
# Exit: 0 the part ran and no candidate gave a wrong answer; 1 the benchmark failed, timed out
#   or left programs skipped, or a candidate gave a wrong answer; 3 the build failed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 3
root=$PWD
. "$root/scripts/lib/gpu-script.sh"
[ $# -eq 1 ] || { echo "usage: scripts/gpu-suite.sh OUT_DIR"; exit 2; }
gpu_script_begin "$1" gpu-suite.log
failed=()
total=${STRATA_SUITE_TOTAL:-540}
build=${STRATA_BUILD_DIR:-$root/build-gpu}
case $build in /*) ;; *) build=$root/$build ;; esac
export STRATA_CACHE_DIR=${STRATA_CACHE_DIR:-$build/cache}
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'

build_strata_tool gpu-suite
"$build/strata" device || { echo "gpu-suite: strata device: no usable GPU"; exit 1; }

args=(--out "$out" --strata "$build/strata" --top "${STRATA_SUITE_TOP:-5}"
      --search-time "${STRATA_SUITE_SEARCH_TIME:-60}"
      --modes "${STRATA_SUITE_MODES:-eager,compile,max-autotune,sdpa-flash}"
      --phase "${STRATA_SUITE_PHASE:-all}")
[ -n "${STRATA_SUITE_PART:-}" ] && args+=(--part "$STRATA_SUITE_PART")
[ -n "${STRATA_SUITE_NAMES:-}" ] && args+=(--programs "$STRATA_SUITE_NAMES")
search_dir=${STRATA_SUITE_SEARCH_DIR:-}
if [ -z "$search_dir" ] && [ -d bench/search/suite ]; then search_dir=bench/search/suite; fi
[ -n "$search_dir" ] && args+=(--search-dir "$search_dir")

left=$((total - SECONDS))
budget=$((left - 80))  # programs start until then; the last one has the remaining time
if [ "$budget" -lt 60 ]; then
  echo "gpu-suite: only $left s left of STRATA_SUITE_TOTAL=$total after the build"
  exit 1
fi
step "suite benchmark (${STRATA_SUITE_PART:-${STRATA_SUITE_NAMES:-all programs}}; budget $budget s)"
timeout -k 10 $((left - 20)) python3 bench/suite_bench.py "${args[@]}" --budget-s "$budget"
rc=$?
if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
  failed+=("the benchmark ran out of time (STRATA_SUITE_TOTAL=$total)")
elif [ $rc -ne 0 ]; then
  failed+=("the benchmark (exit $rc)")
fi
if grep -l '"status": "wrong_answer"' "$out"/profile/*.json 2>/dev/null; then
  failed+=("candidates with wrong answers in the profile reports above")
fi
if grep -q '"skipped": "time budget' "$out"/*-[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9].json 2>/dev/null; then
  failed+=("programs skipped for time (see the report)")
fi

step "done in $((SECONDS - start)) s; outputs in $out"
ls "$out"
if [ ${#failed[@]} -gt 0 ]; then
  echo "gpu-suite: FAILED: ${failed[*]}"
  exit 1
fi
echo "gpu-suite: all steps passed"
