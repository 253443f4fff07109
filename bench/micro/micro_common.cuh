// What the microbenchmarks of bench/micro share: a CUDA-call check that exits with the call's
// error, and pseudo-random f16 fills (a hash of the index and the seed: timing on zeros can
// flatter a kernel, since DRAM and the datapath toggle fewer bits).
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>

#define CHECK(x)                                                                       \
  do {                                                                                 \
    cudaError_t e_ = (x);                                                              \
    if (e_ != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)

/// Fills w[0, n) with values in [-scale, scale) (a grid-stride loop: any grid covers it).
__global__ void fill_random(__half* w, size_t n, unsigned seed, float scale = 1.0f) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    unsigned h = static_cast<unsigned>(i) * 0x9E3779B1u ^ seed;
    h ^= h >> 15;
    h *= 0x85EBCA77u;
    h ^= h >> 13;
    w[i] = __float2half((static_cast<float>(h >> 8) / 8388608.0f - 1.0f) * scale);
  }
}

/// A device buffer of n f16 values filled by fill_random (exits on failure).
inline __half* alloc_random(size_t n, unsigned seed, float scale = 1.0f) {
  __half* p = nullptr;
  CHECK(cudaMalloc(&p, n * sizeof(__half)));
  fill_random<<<1024, 256>>>(p, n, seed, scale);
  CHECK(cudaGetLastError());
  return p;
}
