# Sourced by the GPU scripts after `cd` to the repository root: the common preamble.
#   gpu_script_begin OUT_DIR LOG_NAME [truncate]
# makes OUT_DIR (absolute in `out`), sends stdout and stderr also to OUT_DIR/LOG_NAME (appended,
# or truncated with a third argument), starts the clock of `step`, prints the machine, puts the
# CUDA toolkit on PATH when nvcc is not there, and sources devdeps.sh (`cmake_deps`). Expects
# `root` (the repository root).
#   build_strata_tool NAME
# configures and builds the `strata` target (Release) in $build (default $root/build-gpu),
# within 300 s each; on failure prints "NAME: the build failed" and exits 3. With
# STRATA_SKIP_BUILD=1 and $build/strata present it builds nothing (a caller that built it
# already and runs several scripts at once on the same build folder).
step() { echo; echo "== [$((SECONDS - start)) s] $*"; }

gpu_script_begin() {
  mkdir -p "$1"
  out=$(cd "$1" && pwd)
  if [ -n "${3:-}" ]; then
    exec > >(tee "$out/$2") 2>&1
  else
    exec > >(tee -a "$out/$2") 2>&1
  fi
  start=$SECONDS
  step "machine"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 || true
  if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH=/usr/local/cuda/bin:$PATH
  fi
  . "$root/scripts/lib/devdeps.sh"
}

build_strata_tool() {
  build=${build:-$root/build-gpu}
  if [ "${STRATA_SKIP_BUILD:-0}" = 1 ] && [ -x "$build/strata" ]; then
    step "build skipped (STRATA_SKIP_BUILD=1; $build/strata is there)"
    return 0
  fi
  step "build (Release, strata only)"
  if ! timeout -k 10 300 cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release "${cmake_deps[@]}" \
         >/dev/null ||
     ! timeout -k 10 300 cmake --build "$build" -j"$(nproc)" --target strata >/dev/null; then
    echo "$1: the build failed (or took over 300 s)"
    exit 3
  fi
}

#   suite_files NAME PROGRAM
# sets `program` and `result` to the suite program bench/suite/PROGRAM.strata and its kept
# search bench/search/suite/PROGRAM.json; when either is missing prints why, records it in
# `failed` and returns 1.
suite_files() {
  program=bench/suite/$2.strata
  result=bench/search/suite/$2.json
  if [ ! -f "$program" ] || [ ! -f "$result" ]; then
    echo "$1: $2: $program or $result missing"
    failed+=("$2: missing files")
    return 1
  fi
}

#   profile_rc NAME PROGRAM RC
# records in `failed` a `strata profile` run of PROGRAM that exited with RC (124 or 137: timed
# out), printing why; nothing for RC 0.
profile_rc() {
  case $3 in
    0) ;;
    124 | 137) echo "$1: $2: TIMED OUT after ${limit:-?} s"; failed+=("$2: timed out") ;;
    *) echo "$1: $2: strata profile exited with $3"; failed+=("$2: profile exit $3") ;;
  esac
}

#   profile_summary_and_exit NAME
# the profile reports of $out/profile as one table ($out/summary.md, bench/wgmma_rows.py report),
# a failure for any wrong answer among them, then the script's exit: 1 when `failed` holds
# anything, else 0.
profile_summary_and_exit() {
  step "summary (µs: median of CUDA-graph replays)"
  python3 bench/wgmma_rows.py report "$out/profile" >"$out/summary.md" || failed+=("summary")
  cat "$out/summary.md"
  if grep -l '"status": "wrong_answer"' "$out"/profile/*.json 2>/dev/null; then
    failed+=("candidates with wrong answers in the profile reports above")
  fi
  step "done in $((SECONDS - start)) s; outputs in $out"
  if [ ${#failed[@]} -gt 0 ]; then
    echo "$1: FAILED: ${failed[*]}"
    exit 1
  fi
  echo "$1: all steps passed"
  exit 0
}
