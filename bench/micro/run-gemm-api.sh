#!/usr/bin/env bash
# Builds and runs the cuBLAS entry-point microbenchmark (bench/micro/gemm_api.cu), then times
# torch.mm on the same shapes (bench/micro/torch_mm.py) when PyTorch is installed.
# Usage: bench/micro/run-gemm-api.sh
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
out=${TMPDIR:-/tmp}/strata-gemm-api
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o "$out" gemm_api.cu -lcublas -lcublasLt
"$out"
if python3 -c "import torch" 2>/dev/null; then python3 torch_mm.py; fi
