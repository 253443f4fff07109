#!/usr/bin/env bash
# Builds and runs the cuBLASLt algorithm microbenchmark (bench/micro/gemm_algos.cu).
# Usage: bench/micro/run-gemm-algos.sh
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
out=${TMPDIR:-/tmp}/strata-gemm-algos
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o "$out" gemm_algos.cu -lcublas -lcublasLt
"$out"
