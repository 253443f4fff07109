#!/usr/bin/env bash
# The main job on a bundled example: superoptimize the RMSNorm + MatMul program (LLaMA-2-7B,
# batch 8, paper shapes), print the winning μGraph and prove it equivalent to the program.
# Usage: scripts/demo.sh path/to/strata
set -euo pipefail
strata=${1:-build/strata}
cd "$(dirname "$0")/.."
program=examples/programs/rmsnorm_b8.strata
out=$(mktemp -d)
echo "== strata check $program"
"$strata" check "$program"
echo
echo "== strata optimize $program -o $out/rmsnorm_b8.result.json"
"$strata" optimize "$program" -o "$out/rmsnorm_b8.result.json"
echo
echo "(full result with the ranking and cost breakdowns: $out/rmsnorm_b8.result.json)"
