#!/usr/bin/env bash
# Where the skinny-matmul kernels lose time to a bare read, in one invocation on a GPU machine:
#   1. build the `strata` tool (Release) in build-gpu/ (with .devdeps/ when present);
#   2. the streaming microbenchmark's tile shapes (bench/micro/run.sh K N tiles) for the
#      rmsnorm W [4096, 6144] and gatedmlp's W1|W3 read as one [4096, 8192];
#   3. bench/ablate.py on each (benchmark, candidate, variant) of STRATA_ABLATE_CASES: the
#      emitted kernel timed uncut and with parts cut out (--cuts).
# Writes OUT_DIR/ablate.log (the tables) and OUT_DIR/ablate.jsonl (every timed row).
#
# Usage: scripts/gpu-ablate.sh [OUT_DIR]
# Environment: STRATA_ABLATE_CASES (';'-separated "KEY GRAPH KNOBS" triples, KNOBS '-' for the
#   default; default: the rmsnorm and gatedmlp winners of the last benchmark run),
#   STRATA_ABLATE_CUTS (default nomma,nox,nomma+nox,l2_256,l2_none; a case may carry its own
#   cuts as a fourth field), STRATA_ABLATE_SOURCES (';'-separated "KEY FILE.cu [NAME=VALUE,...]":
#   hand-written kernels with the strata ABI timed by the same harness, e.g.
#   "rmsnorm_b1 bench/micro/stream_abi.cu STREAM_LATE=true"), STRATA_ABLATE_MICRO=0
#   (skip step 2), STRATA_ABLATE_REPEAT (timings per version, default 2), STRATA_ABLATE_MICRO_MODES (default tiles; e.g. "tiles groups"; the
#   microbenchmark reads random values, STRATA_MICRO_ZEROS=1 zeros), STRATA_ABLATE_ZEROS=1 (also time on all-zero inputs).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 3
root=$PWD
. "$root/scripts/lib/gpu-script.sh"
gpu_script_begin "${1:-bench/results/ablate}" ablate.log
build=$root/build-gpu
build_strata_tool gpu-ablate

if [ "${STRATA_ABLATE_MICRO:-1}" != 0 ]; then
  step "microbenchmark: tile shapes"
  for mode in ${STRATA_ABLATE_MICRO_MODES:-tiles}; do
    bench/micro/run.sh 4096 6144 "$mode"
    bench/micro/run.sh 4096 8192 "$mode"
  done
fi

default_cases="rmsnorm_b1 bench/search/rmsnorm_b1.json:5 groups=4,walk=0;\
rmsnorm_b8 bench/search/rmsnorm_b8.json:0 groups=4,walk=0;\
gatedmlp_b1 bench/search/gatedmlp_b1.json:11 groups=4;\
gatedmlp_b8 bench/search/gatedmlp_b8.json:15 -;\
gatedmlp_b8 bench/search/gatedmlp_b8.json:8 -"
cuts=${STRATA_ABLATE_CUTS:-nomma,nox,nomma+nox,l2_256,l2_none}
rc=0
IFS=';' read -ra cases <<<"${STRATA_ABLATE_CASES:-$default_cases}"
for c in "${cases[@]}"; do
  read -r key graph knobs case_cuts <<<"$c"
  [ "$knobs" = - ] && knobs=
  step "ablate $key $graph [${knobs:-default}]"
  python3 bench/ablate.py --strata "$build/strata" "$key" "$graph" --knobs "$knobs" \
    --cuts "${case_cuts:-$cuts}" --out "$out/src" --json "$out/ablate.jsonl" \
    --repeat "${STRATA_ABLATE_REPEAT:-2}" \
    ${STRATA_ABLATE_ZEROS:+--zeros} || rc=1
done
IFS=';' read -ra sources <<<"${STRATA_ABLATE_SOURCES:-}"
for c in "${sources[@]}"; do
  read -r key file defines <<<"$c"
  [ -n "$key" ] || continue
  step "time $key $file [${defines:-}]"
  define_args=()
  IFS=',' read -ra ds <<<"${defines:-}"
  for d in "${ds[@]}"; do define_args+=(--define "$d"); done
  python3 bench/ablate.py --source "$key" "$file" "${define_args[@]}" --out "$out/src" \
    --json "$out/ablate.jsonl" || rc=1
done
step "done in $((SECONDS - start)) s"
exit $rc
