#!/usr/bin/env bash
# The persistent megakernel of an earlier source tree, this tree, and variants of this tree's
# runtime built with other nvcc flags, timed side by side on one GPU (docs/megakernel.md,
# "Measured changes"): a change of the runtime or the task graph is measured against the
# version before it in the same run, on the same machine.
#   1. in parallel: the strata tool of both trees (CMake, Release, no CUDA runtime, no tests)
#      and one megakernel library (nvcc) per build;
#   2. ROUNDS rounds, each running bench/mpk_decode.py once per build in turn (so drift between
#      rounds shows): correctness (logits, 32 greedy tokens) and latency per token;
#   3. a table: per configuration and build, the median over the rounds of the static-list and
#      queue latencies, and whether every check passed (bench/mpk_ab.py).
# BEFORE_SRC: a source tree of the earlier version (`git archive COMMIT | tar -x -C DIR`).
# Knobs: STRATA_MPK_AB_VARIANTS  extra builds of this tree, "NAME=NVCC FLAGS[|DECODE ARGS];..."
#                                (default none; DECODE ARGS: more bench/mpk_decode.py arguments
#                                for that build, e.g. "chunks8=|--attn-chunks 8")
#        STRATA_MPK_AB_ARGS      bench/mpk_decode.py arguments (default "--batches 1,8 --kv 1024
#                                --no-compile --generated none")
#        STRATA_MPK_AB_ROUNDS    rounds (default 2)
# Output under OUT_DIR: gpu-mpk-ab.log, BUILD-rROUND/ (each run's record), mpk-ab.md and .json.
# Usage: scripts/gpu-mpk-ab.sh BEFORE_SRC OUT_DIR
# Exit: 0 every build ran and passed its checks; 1 a check failed; 3 a build failed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 3
root=$PWD
[ $# -eq 2 ] || { echo "usage: scripts/gpu-mpk-ab.sh BEFORE_SRC OUT_DIR"; exit 2; }
before_src=$(cd "$1" && pwd) || exit 2
. "$root/scripts/lib/gpu-script.sh"
gpu_script_begin "$2" gpu-mpk-ab.log
build=$root/build-gpu-mpk-ab
mkdir -p "$build"
args=${STRATA_MPK_AB_ARGS:---batches 1,8 --kv 1024 --no-compile --generated none}
rounds=${STRATA_MPK_AB_ROUNDS:-2}

# Builds: NAME SOURCE-TREE TOOL-DIR NVCC-FLAGS
names=(before after)
srcs=("$before_src" "$root")
flags=("" "")
dargs=("" "")
IFS=';' read -ra extra <<<"${STRATA_MPK_AB_VARIANTS:-}"
for v in "${extra[@]}"; do
  [ -n "$v" ] || continue
  names+=("${v%%=*}")
  srcs+=("$root")
  spec=${v#*=}
  flags+=("${spec%%|*}")
  if [[ $spec == *"|"* ]]; then dargs+=("${spec#*|}"); else dargs+=(""); fi
done

step "build: the strata tool of both trees, one megakernel library per build (${names[*]})"
pids=()
for i in "${!names[@]}"; do
  n=${names[$i]}
  # shellcheck disable=SC2086
  (cd "${srcs[$i]}" && timeout -k 10 400 nvcc -O3 -arch=sm_90a -std=c++17 -shared \
     -Xcompiler -fPIC -I include -I runtime ${flags[$i]} -o "$build/libmpk-$n.so" \
     runtime/mpk/megakernel.cu >"$build/nvcc-$n.log" 2>&1; echo $? >"$build/nvcc-$n.rc") &
  pids+=($!)
done
tool() {  # SOURCE-TREE BUILD-DIR
  (cd "$1" && timeout -k 10 300 cmake -S . -B "$2" -DCMAKE_BUILD_TYPE=Release \
     -DSTRATA_ENABLE_CUDA=OFF -DSTRATA_BUILD_TESTS=OFF -DSTRATA_INSTALL=OFF "${cmake_deps[@]}" \
     >"$2.log" 2>&1 && timeout -k 10 400 cmake --build "$2" -j"$(nproc)" --target strata \
     >>"$2.log" 2>&1)
}
tool "$before_src" "$build/tool-before" & tb=$!
tool "$root" "$build/tool-after" & ta=$!
failed=0
wait "$tb" || { tail -20 "$build/tool-before.log"; failed=1; }
wait "$ta" || { tail -20 "$build/tool-after.log"; failed=1; }
for p in "${pids[@]}"; do wait "$p"; done
for n in "${names[@]}"; do
  if [ "$(cat "$build/nvcc-$n.rc")" != 0 ]; then cat "$build/nvcc-$n.log"; failed=1; fi
done
[ $failed = 0 ] || { echo "gpu-mpk-ab: a build failed"; exit 3; }
echo "built in $SECONDS s"

rc=0
for r in $(seq 1 "$rounds"); do
  for i in "${!names[@]}"; do
    n=${names[$i]}
    t=$build/tool-after/strata
    [ "$n" = before ] && t=$build/tool-before/strata
    step "round $r: $n"
    # shellcheck disable=SC2086
    python3 bench/mpk_decode.py --lib "$build/libmpk-$n.so" --strata "$t" \
      --out "$out/$n-r$r" --build-dir "$build/work-$n" $args ${dargs[$i]} || rc=1
  done
done
step "summary"
python3 bench/mpk_ab.py "$out" --builds "${names[@]}" --rounds "$rounds" || rc=1
exit $rc
