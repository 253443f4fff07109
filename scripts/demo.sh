#!/usr/bin/env bash
# The main job on a bundled example: superoptimize the RMSNorm + MatMul program (LLaMA-2-7B,
# batch 8, paper shapes) and print the winning μGraph. Usage: scripts/demo.sh path/to/strata
set -euo pipefail
strata=${1:-build/strata}
cd "$(dirname "$0")/.."
program=examples/programs/rmsnorm_b8.strata
echo "== strata check $program"
"$strata" check "$program"
echo
echo "== strata equiv $program examples/reference/rmsnorm_b8.json (the paper's μGraph)"
"$strata" equiv "$program" examples/reference/rmsnorm_b8.json
if "$strata" --help | grep -q '^ *optimize'; then
  echo
  echo "== strata optimize $program"
  out=$(mktemp -d)
  "$strata" optimize "$program" -o "$out/rmsnorm_b8.result.json"
  echo
  echo "(full result: $out/rmsnorm_b8.result.json)"
fi
