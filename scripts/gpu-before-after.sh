#!/usr/bin/env bash
# Two builds of strata, the six benchmarks' fastest picks timed side by side on one GPU
# (bench/before_after.py): a change of the code generator that must not cost speed is shown
# with it. BEFORE_SRC is a source tree of the earlier version (e.g. made with
# `git archive <commit> | tar -x -C before-src`); the current tree is the after.
# STRATA_BEFORE_AFTER_PICKS=DOC:RANK,... times those search results' entries instead (e.g. the
# suite's rotary programs), STRATA_BEFORE_AFTER_ROUNDS rounds (2).
# Usage: scripts/gpu-before-after.sh BEFORE_SRC OUT_DIR
# Exit: 0 all checked and timed; 1 a candidate failed; 3 a build failed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 3
root=$PWD
[ $# -eq 2 ] || { echo "usage: scripts/gpu-before-after.sh BEFORE_SRC OUT_DIR"; exit 2; }
before_src=$(cd "$1" && pwd) || exit 2
. "$root/scripts/lib/gpu-script.sh"
gpu_script_begin "$2" gpu-before-after.log
build=$root/build-gpu build_strata_tool gpu-before-after
step "build the earlier version (Release, strata only)"
if ! (cd "$before_src" && timeout -k 10 300 cmake -S . -B build-before -DCMAKE_BUILD_TYPE=Release \
        "${cmake_deps[@]}" >/dev/null && timeout -k 10 300 cmake --build build-before \
        -j"$(nproc)" --target strata >/dev/null); then
  echo "gpu-before-after: the earlier version did not build"
  exit 3
fi
export STRATA_CACHE_DIR=$root/build-gpu/cache-before-after
step "the fastest picks, before and after"
python3 bench/before_after.py --before "$before_src/build-before/strata" \
  --after "$root/build-gpu/strata" --out "$out" --rounds "${STRATA_BEFORE_AFTER_ROUNDS:-2}" \
  ${STRATA_BEFORE_AFTER_PICKS:+--picks "$STRATA_BEFORE_AFTER_PICKS"}
