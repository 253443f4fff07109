#!/usr/bin/env bash
# Builds and runs the sibling-matmul microbenchmark (bench/micro/grouped_gemm.cu) on the local GPU:
# separate cuBLAS calls against one grouped / batched call and one call over concatenated weights.
# Usage: bench/micro/run-grouped.sh
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
out=${TMPDIR:-/tmp}/strata-grouped-gemm
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o "$out" grouped_gemm.cu -lcublas
"$out" "$@"
