#!/usr/bin/env bash
# The replay-cost study of the timing method, in one invocation on a GPU machine:
#   1. build the `strata` tool (Release) in build-gpu/ (with .devdeps/ when present);
#   2. bench/sets_study.py on each case of STRATA_SETS_CASES: the strata candidate, PyTorch eager
#      and torch.compile timed with 1, 5, 10, ... launches per CUDA-graph replay (passes over
#      the rotated input sets repeated), interleaved over repeats.
# Writes OUT_DIR/sets.log (the tables) and OUT_DIR/sets.jsonl (every timed row).
#
# Usage: scripts/gpu-sets.sh [OUT_DIR]
# Environment: STRATA_SETS_CASES (';'-separated "KEY GRAPH KNOBS" triples, KNOBS '-' for the
#   default; default: the rmsnorm and gatedmlp winners of bench/results/h200-2026-11-24-fused.md),
#   STRATA_SETS_LAUNCHES (default 1,5,10,20,50,100,200).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 3
root=$PWD
. "$root/scripts/lib/gpu-script.sh"
gpu_script_begin "${1:-bench/results/sets}" sets.log
build=$root/build-gpu
build_strata_tool gpu-sets

default_cases="rmsnorm_b1 bench/search/rmsnorm_b1.json:0 groups=4,walk=0;\
rmsnorm_b8 bench/search/rmsnorm_b8.json:2 groups=4,walk=0;\
gatedmlp_b1 bench/search/gatedmlp_b1.json:4 groups=4;\
gatedmlp_b8 bench/search/gatedmlp_b8.json:1 groups=4"
IFS=';' read -ra cases <<<"${STRATA_SETS_CASES:-$default_cases}"
step "replay-cost study"
PYTHONUNBUFFERED=1 python3 bench/sets_study.py --strata "$build/strata" "${cases[@]}" \
  --launches "${STRATA_SETS_LAUNCHES:-1,5,10,20,50,100,200}" --json "$out/sets.jsonl"
rc=$?
step "done in $((SECONDS - start)) s"
exit $rc
