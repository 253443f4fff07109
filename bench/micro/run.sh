#!/usr/bin/env bash
# Builds and runs the streaming microbenchmark (bench/micro/stream.cu) on the local GPU.
# Usage: bench/micro/run.sh [K N [tiles|groups]]   (default: the rmsnorm W, 4096 6144; all modes)
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
out=${TMPDIR:-/tmp}/strata-stream
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o "$out" stream.cu -lcuda
"$out" "$@"
