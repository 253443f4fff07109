#!/usr/bin/env bash
# Named GPU tests only, on a GPU machine: a quicker check than scripts/gpu-check.sh when a change
# touches a few of them (docs/gpu-runtime.md, "The GPU script"):
#   1. build strata (Release) and the named test executables in build-gpu/ (with .devdeps/ when
#      present, like scripts/gpu-check.sh);
#   2. run each, with its GoogleTest filter when one is given, from the repository root.
# Everything is logged to OUT_DIR/gpu-tests.log.
#
# Usage: scripts/gpu-tests.sh OUT_DIR TEST[:FILTER]...
#   e.g. scripts/gpu-tests.sh out runtime_gpu_test:GpuRuntime.LibraryEpiloguesAreStrataOps
# Environment: STRATA_BUILD_DIR (default build-gpu).
# Exit: 0 every test passed; 1 a test failed; 2 usage; 3 the build failed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 3
root=$PWD
[ $# -ge 2 ] || { echo "usage: scripts/gpu-tests.sh OUT_DIR TEST[:FILTER]..."; exit 2; }
. "$root/scripts/lib/gpu-script.sh"
gpu_script_begin "$1" gpu-tests.log
shift
build=${STRATA_BUILD_DIR:-$root/build-gpu}
case $build in /*) ;; *) build=$root/$build ;; esac
export STRATA_CACHE_DIR=${STRATA_CACHE_DIR:-$build/cache}
targets=(strata)
for spec in "$@"; do targets+=("${spec%%:*}"); done
step "build (Release: ${targets[*]})"
if ! timeout -k 10 900 cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release "${cmake_deps[@]}" \
       >/dev/null ||
   ! timeout -k 10 1200 cmake --build "$build" -j"$(nproc)" --target "${targets[@]}" >/dev/null; then
  echo "gpu-tests: the build failed"
  exit 3
fi
export STRATA_BIN=$build/strata
failed=()
for spec in "$@"; do
  test=${spec%%:*}
  filter=
  [ "$spec" != "$test" ] && filter=${spec#*:}
  step "$test${filter:+ ($filter)}"
  if ! timeout -k 10 900 "$build/$test" ${filter:+--gtest_filter="$filter"}; then
    failed+=("$spec")
  fi
done
step "done"
if [ ${#failed[@]} -gt 0 ]; then
  echo "gpu-tests: failed: ${failed[*]}"
  exit 1
fi
echo "gpu-tests: all passed"
