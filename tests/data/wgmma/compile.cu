// The nvcc check of tests/wgmma_emulation_test.cc: instantiates every wgmma entry of
// runtime/strata_rt/wgmma.cuh (both B majors, f16 and bf16, several N, B in 128-byte rows and
// in 64-column atoms) so that ptxas verifies the inline PTX for sm_90a. For other targets the
// same source compiles (the calls trap).
#include "strata_rt/strata_rt.cuh"

template <class T, int N, int K, bool TB>
__global__ void probe(float* out, int klimit) {
  STRATA_RT_DYNAMIC_SMEM(smem);
  constexpr int M = 128, LDA = K + 8;
  // B's stored rows wider than 64 halves lie in 64-column atoms (MmaSpec's AB).
  constexpr int ROWS = TB ? N : K, WIDTH = TB ? K : N, ATOMS = WIDTH > 64 ? WIDTH / 64 : 1;
  constexpr int AB = ATOMS > 1 ? ROWS * 64 : 0;
  using S = strata_rt::MmaSpec<1, M, N, K, LDA, 0, false, 64, 0, true, false, TB, N, AB>;
  const T* b = reinterpret_cast<const T*>(smem);
  const T* a = reinterpret_cast<const T*>(smem + ROWS * 128 * ATOMS);
  const int warp = threadIdx.x >> 5;
  float acc[1][N / 8][4];
  strata_rt::mma_zero(acc);
  strata_rt::warpgroup_mma<S, T, N / 8>(a, b, acc, warp, 0);
  strata_rt::warpgroup_mma<S, T, N / 8, true>(a, b, acc, warp, 0, klimit);
  strata_rt::u32 af[1][K / 16][4];
  strata_rt::warp_load_a<S, T, 1>(a, af, warp);
  strata_rt::warpgroup_mma_rega<S, T, N / 8>(af, b, acc, warp, 0);
  float c[1][K / 8][4];
  strata_rt::mma_zero(c);
  strata_rt::warpgroup_mma_chained<S, T, N / 8>(c, b, acc, warp, 0);
  strata_rt::mma_epilogue<S, 1, N / 8>(acc, warp, 0, [&](int, int r, int col, float v0, float v1) {
    out[r * N + col] = v0 + v1;
  });
}

template __global__ void probe<__half, 64, 64, false>(float*, int);
template __global__ void probe<__nv_bfloat16, 64, 64, false>(float*, int);
template __global__ void probe<__half, 8, 32, false>(float*, int);
template __global__ void probe<__half, 64, 256, false>(float*, int);
template __global__ void probe<__half, 64, 64, true>(float*, int);
template __global__ void probe<__nv_bfloat16, 128, 64, true>(float*, int);
template __global__ void probe<__half, 256, 32, true>(float*, int);
template __global__ void probe<__nv_bfloat16, 8, 16, true>(float*, int);
template __global__ void probe<__half, 128, 64, false>(float*, int);         // 2 atoms
template __global__ void probe<__nv_bfloat16, 256, 32, false>(float*, int);  // 4 atoms
template __global__ void probe<__half, 64, 128, true>(float*, int);          // 2 atoms
template __global__ void probe<__nv_bfloat16, 128, 256, true>(float*, int);  // 4 atoms
