#!/usr/bin/env bash
# The whole suite on a machine with several GPUs, one part per GPU at the same time
# (bench/README.md, "The suite"):
#   1. build strata once (Release, the tool only) in build-gpu/ like scripts/gpu-suite.sh;
#   2. for each of the G visible GPUs, scripts/gpu-suite.sh OUT_DIR/p<I> with
#      CUDA_VISIBLE_DEVICES=<I-1>, STRATA_SUITE_PART=I/G (or, with STRATA_SUITE_NAMES, every
#      G-th of those programs from the I-th) and its own strata cache, all started together
#      (each part is timed on its own GPU; the CPUs are shared);
#   3. bench/report.py merge of the parts into OUT_DIR/suite (.md/.json) and a tarball of the
#      part folders without the compiled candidates (OUT_DIR/parts.tgz).
#
# Usage: scripts/gpu-suite-gpus.sh OUT_DIR
# Environment: STRATA_SUITE_GPUS (number of GPUs to use, default all that nvidia-smi lists),
#   STRATA_SUITE_TOTAL (seconds per part after the build, default 540), and the knobs of
#   scripts/gpu-suite.sh (STRATA_SUITE_TOP, STRATA_SUITE_MODES, STRATA_BENCH_VARIANTS, ...).
# Exit: 0 every part passed; 1 a part failed (its log says why: wrong answers, skipped
#   programs, the benchmark); 3 the build failed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 3
root=$PWD
. "$root/scripts/lib/gpu-script.sh"
[ $# -eq 1 ] || { echo "usage: scripts/gpu-suite-gpus.sh OUT_DIR"; exit 2; }
gpu_script_begin "$1" gpu-suite-gpus.log
build=${STRATA_BUILD_DIR:-$root/build-gpu}
case $build in /*) ;; *) build=$root/$build ;; esac
gpus=${STRATA_SUITE_GPUS:-$(nvidia-smi --list-gpus 2>/dev/null | wc -l)}
if ! [[ "$gpus" =~ ^[1-9][0-9]*$ ]]; then
  echo "gpu-suite-gpus: no GPU listed (STRATA_SUITE_GPUS=$gpus)"; exit 1
fi
build_strata_tool gpu-suite-gpus

step "suite in $gpus parts, one per GPU"
IFS=',' read -ra names <<<"${STRATA_SUITE_NAMES:-}"
pids=()
for ((i = 1; i <= gpus; i++)); do
  sel=(STRATA_SUITE_PART=$i/$gpus STRATA_SUITE_NAMES=)
  if [ ${#names[@]} -gt 0 ]; then
    mine=()
    for ((j = i - 1; j < ${#names[@]}; j += gpus)); do mine+=("${names[$j]}"); done
    [ ${#mine[@]} -gt 0 ] || continue
    sel=(STRATA_SUITE_PART= "STRATA_SUITE_NAMES=$(IFS=,; echo "${mine[*]}")")
  fi
  env "${sel[@]}" CUDA_VISIBLE_DEVICES=$((i - 1)) STRATA_SKIP_BUILD=1 \
    STRATA_BUILD_DIR="$build" STRATA_CACHE_DIR="$build/cache-p$i" \
    STRATA_SUITE_TOTAL=${STRATA_SUITE_TOTAL:-540} \
    scripts/gpu-suite.sh "$out/p$i" >/dev/null 2>&1 &
  pids+=($!)
done
failed=()
parts=()
for ((i = 1; i <= ${#pids[@]}; i++)); do
  wait "${pids[$((i - 1))]}" || failed+=("part $i (exit $?; $out/p$i/gpu-suite.log)")
  tail -n 3 "$out/p$i/gpu-suite.log" 2>/dev/null | sed "s/^/[p$i] /"
  parts+=("$out/p$i")
done

step "merge"
python3 bench/report.py merge "${parts[@]}" -o "$out/suite" || failed+=("the merge")
(cd "$out" && tar --exclude=candidates --exclude='*.compile.json' -czf parts.tgz p*/) ||
  failed+=("the tarball of the parts")
step "done in $((SECONDS - start)) s"
if [ ${#failed[@]} -gt 0 ]; then
  echo "gpu-suite-gpus: FAILED: ${failed[*]}"
  exit 1
fi
echo "gpu-suite-gpus: all parts passed"
