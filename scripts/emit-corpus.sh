#!/usr/bin/env bash
# Emits the CUDA of every bundled graph with every emitter variant into one folder, so that two
# builds of the emitter can be compared file by file (`diff -r BEFORE AFTER`).
#
#   scripts/emit-corpus.sh [STRATA] OUT_DIR
#
# The corpus: the programs (examples/programs, examples/real, the suite's bench/suite and the
# tensor-parallel bench/tp, all *.strata), examples/reference/*.json, and every ranked entry of
# the search results the benchmarks use (bench/search/*.json and its suite, real and tp
# folders; the suite's odd extents give ragged tiles, the tp entries NCCL calls). The
# variants: the GPU tuning list (tuning_variants.cc) and each emitter knob set away from its
# default. One file per (graph, variant): OUT_DIR/<graph>[.r<rank>]/<variant>.cu, or
# <variant>.err when the emitter refuses the combination (its message; exit code on line 1).
# STRATA defaults to build/strata. EMIT_CORPUS_EXTRA names a folder of more μGraph JSON files
# (graph names extra.<file>), e.g. the ragged-tile cases of the tests:
#   STRATA_RAGGED_JSON_DIR=DIR build/codegen_ragged_test --gtest_filter='*Json*'
#   EMIT_CORPUS_EXTRA=DIR scripts/emit-corpus.sh ...
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -eq 2 ]; then strata=$1; out=$2; elif [ $# -eq 1 ]; then strata=build/strata; out=$1; else
  echo "usage: scripts/emit-corpus.sh [STRATA] OUT_DIR" >&2; exit 2; fi
strata=$(readlink -f "$strata")
[ -x "$strata" ] || { echo "emit-corpus: $strata is not an executable" >&2; exit 2; }
mkdir -p "$out"
out=$(readlink -f "$out")

variants=(default groups=4 minblocks=2 chainmt=2 groups=4,walk=0 walk=0 early=1 sumread=0 tc=0
  chain=0 fold=0 regacc=0 rowwise=0 inline=0 epilogue=0 hoist=0 views=0 f32mid=1 evict=0
  stages=2 threads=256 minblocks=1 groups=1 groups=2,early=1)

jobs=$(mktemp)
trap 'rm -f "$jobs"' EXIT
for f in examples/programs/*.strata examples/real/*.strata bench/suite/*.strata bench/tp/*.strata \
  examples/reference/*.json; do
  kind=$(basename "$(dirname "$f")")
  echo "$f -1 $kind.$(basename "${f%.*}")" >>"$jobs"
done
if [ -n "${EMIT_CORPUS_EXTRA:-}" ]; then
  for f in "$EMIT_CORPUS_EXTRA"/*.json; do echo "$f -1 extra.$(basename "${f%.*}")" >>"$jobs"; done
fi
for f in bench/search/*.json bench/search/suite/*.json bench/search/real/*.json \
  bench/search/tp/*.json; do
  n=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["ranked"]))' "$f")
  tag=search
  case $f in bench/search/suite/*) tag=suite ;; bench/search/real/*) tag=searchreal ;;
    bench/search/tp/*) tag=searchtp ;; esac
  for ((r = 0; r < n; r++)); do echo "$f $r $tag.$(basename "${f%.*}").r$r" >>"$jobs"; done
done

emit_one() {
  local strata=$1 out=$2 f=$3 rank=$4 name=$5
  shift 5
  mkdir -p "$out/$name"
  local rankarg=()
  [ "$rank" -ge 0 ] && rankarg=(--rank "$rank")
  for v in "$@"; do
    local file="$out/$name/${v//,/_}"
    local knobs=()
    [ "$v" != default ] && knobs=(--knobs "$v")
    local rc=0
    "$strata" emit "$f" "${rankarg[@]}" --name "$name" "${knobs[@]}" -o "$file.cu" \
      2>"$file.log" || rc=$?
    if [ "$rc" -ne 0 ]; then
      { echo "exit $rc"; cat "$file.log"; } >"$file.err"
      rm -f "$file.cu"
    fi
    rm -f "$file.log"
  done
}
export -f emit_one
xargs -P "${EMIT_CORPUS_JOBS:-2}" -L 1 bash -c 'emit_one "$0" "$1" "$2" "$3" "$4" "${@:5}"' \
  "$strata" "$out" <<<"$(sed "s|\$| ${variants[*]}|" "$jobs")"
echo "emit-corpus: $(find "$out" -name '*.cu' | wc -l) sources, $(find "$out" -name '*.err' | wc -l) refusals in $out"
