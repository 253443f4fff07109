// Hand-written skinny matmul that streams W straight into registers (no shared-memory tiles, no
// barrier in the loop), behind the ABI of a strata library so that bench/ablate.py --source
// checks it against float64 and times it with the benchmark's method next to strata's kernels.
//
//   rmsnorm  (RS_EPI 0): O[M, N] = (X · W) / rms(X),      inputs X [M, K], W [K, N]
//   gatedmlp (RS_EPI 1): O[M, N] = silu(X · W1) ⊙ (X · W3), inputs X [M, K], W1, W3 [K, N]
//
// Structure (the question it answers: does a loop without shared-memory stages and barriers
// stream W faster than strata's cp.async loop groups once the compute and the epilogue are in?):
// - grid (N / 64, RS_MSPLIT): block (bx, by) owns 64 columns and M / RS_MSPLIT rows of X;
// - RS_WARPS warps per block; warp w reads matrix w % NMAT and the 16-row K steps
//   w / NMAT, w / NMAT + WK, ... (WK = RS_WARPS / NMAT warps per matrix);
// - a step is one 16 x 64 slab of W: lane (g = lane / 4, q = lane % 4) loads rows 2q, 2q+1,
//   2q+8, 2q+9 of the slab, columns 8g..8g+7 (four 16-byte loads, 4 full 128-byte lines per
//   warp load); RS_DEPTH steps are in flight per warp (a register ring);
// - O^T = W^T X^T on tensor cores (mma.m16n8k16): the A fragment of m16 tile t is built from the
//   loaded words with byte permutes, its rows g / g + 8 being columns 8g + 2t / 8g + 2t + 1, so
//   a lane's accumulators hold 8 contiguous output columns of rows 2q, 2q + 1 (per n8 tile);
//   B = X^T fragments are 32-bit loads of X (rows g, k pairs), zero for rows past M;
// - after the loop: partials through shared memory (one barrier), summed by the savers, the
//   epilogue, 16-byte stores.
//
// Defines: RS_EPI (0 rmsnorm, 1 gatedmlp), RS_M, RS_N, RS_K, RS_MSPLIT, RS_WARPS, RS_DEPTH.
#include <cuda_fp16.h>
#include <cstdint>

#ifndef RS_EPI
#define RS_EPI 0
#endif
#ifndef RS_M
#define RS_M 2
#endif
#ifndef RS_K
#define RS_K 4096
#endif
#ifndef RS_N
#define RS_N (RS_EPI == 0 ? 6144 : 4096)
#endif
#ifndef RS_MSPLIT
#define RS_MSPLIT 1
#endif
#ifndef RS_WARPS
#define RS_WARPS 16
#endif
#ifndef RS_DEPTH
#define RS_DEPTH 2
#endif

namespace {

constexpr int kNmat = RS_EPI == 0 ? 1 : 2;
constexpr int kMB = RS_M / RS_MSPLIT;                 // X rows per block
constexpr int kNT = (kMB + 7) / 8;                    // n8 tiles (batch rows)
constexpr int kWK = RS_WARPS / kNmat;                 // warps per matrix
constexpr int kSteps = RS_K / 16 / kWK;               // steps per warp
constexpr int kThreads = RS_WARPS * 32;
constexpr int kRedFloats = RS_WARPS * kNT * 8 * 64;   // partials [warp][row][64]
constexpr int kSmem = (kRedFloats + RS_WARPS * kNT * 8) * 4;
static_assert(RS_K % (16 * kWK) == 0, "K must split evenly over the warps");
static_assert(kSteps % RS_DEPTH == 0, "the ring depth must divide the steps per warp");
static_assert(RS_WARPS % kNmat == 0, "warps must split evenly over the matrices");

__device__ __forceinline__ uint4 ldg_stream(const __half* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::128B.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

__device__ __forceinline__ uint32_t word(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

__device__ __forceinline__ void mma16816(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                         uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ float half_lo(uint32_t w) { return __half2float(__ushort_as_half(w & 0xffff)); }
__device__ __forceinline__ float half_hi(uint32_t w) { return __half2float(__ushort_as_half(w >> 16)); }

__global__ void __launch_bounds__(kThreads, 1)
    regstream(const __half* __restrict__ x, const __half* __restrict__ w1,
              const __half* __restrict__ w3, __half* __restrict__ out) {
  extern __shared__ __align__(16) float red[];        // [warp][row][64] partials, then ss
  float* const red_ss = red + kRedFloats;             // [warp][row] sums of squares
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / 4, q = lane % 4;
  const int mat = warp % kNmat, wk = warp / kNmat;
  const int col0 = blockIdx.x * 64;
  const int row0 = blockIdx.y * kMB;
  const __half* const wm = (mat == 0 ? w1 : w3) + col0 + 8 * g;

  float acc[4][kNT][4];
#pragma unroll
  for (int t = 0; t < 4; ++t)
#pragma unroll
    for (int n = 0; n < kNT; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][n][i] = 0.f;
  float ss[kNT][2] = {};

  auto step_row = [&](int s) { return (wk + s * kWK) * 16; };
  auto load_step = [&](uint4 (&buf)[4], int s) {
    const __half* p = wm + static_cast<size_t>(step_row(s) + 2 * q) * RS_N;
    buf[0] = ldg_stream(p);
    buf[1] = ldg_stream(p + RS_N);
    buf[2] = ldg_stream(p + 8 * RS_N);
    buf[3] = ldg_stream(p + 9 * RS_N);
  };

  uint4 ring[RS_DEPTH][4];
#pragma unroll
  for (int d = 0; d < RS_DEPTH; ++d) load_step(ring[d], d);

#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    uint4 cur[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) cur[i] = ring[s % RS_DEPTH][i];
    if (s + RS_DEPTH < kSteps) load_step(ring[s % RS_DEPTH], s + RS_DEPTH);
    const int k0 = step_row(s);
    // B = X^T fragments: b0 = X[row g][k0 + 2q, +1], b1 = X[row g][k0 + 2q + 8, +9]
    uint32_t b[kNT][2];
#pragma unroll
    for (int n = 0; n < kNT; ++n) {
      const int r = n * 8 + g;
      if (r < kMB) {
        const uint32_t* xr = reinterpret_cast<const uint32_t*>(x + static_cast<size_t>(row0 + r) * RS_K + k0);
        b[n][0] = __ldg(xr + q);
        b[n][1] = __ldg(xr + q + 4);
      } else {
        b[n][0] = b[n][1] = 0u;
      }
      if (RS_EPI == 0 && mat == 0) {
        const float x0 = half_lo(b[n][0]), x1 = half_hi(b[n][0]);
        const float x2 = half_lo(b[n][1]), x3 = half_hi(b[n][1]);
        ss[n][0] += x0 * x0 + x1 * x1 + x2 * x2 + x3 * x3;
      }
    }
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      const uint32_t a0 = __byte_perm(word(cur[0], t), word(cur[1], t), 0x5410);
      const uint32_t a1 = __byte_perm(word(cur[0], t), word(cur[1], t), 0x7632);
      const uint32_t a2 = __byte_perm(word(cur[2], t), word(cur[3], t), 0x5410);
      const uint32_t a3 = __byte_perm(word(cur[2], t), word(cur[3], t), 0x7632);
#pragma unroll
      for (int n = 0; n < kNT; ++n) mma16816(acc[t][n], a0, a1, a2, a3, b[n][0], b[n][1]);
    }
  }

  // partials: lane holds rows 8n + 2q, 8n + 2q + 1, columns 8g .. 8g + 7 (j = 2t + h)
#pragma unroll
  for (int n = 0; n < kNT; ++n) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float* dst = red + (warp * kNT * 8 + n * 8 + 2 * q + h) * 64 + 8 * g;
      const float4 lo = make_float4(acc[0][n][h], acc[0][n][h + 2], acc[1][n][h], acc[1][n][h + 2]);
      const float4 hi = make_float4(acc[2][n][h], acc[2][n][h + 2], acc[3][n][h], acc[3][n][h + 2]);
      reinterpret_cast<float4*>(dst)[0] = lo;
      reinterpret_cast<float4*>(dst)[1] = hi;
    }
    if (RS_EPI == 0) {
      float v = ss[n][0];
      v += __shfl_xor_sync(0xffffffffu, v, 1);
      v += __shfl_xor_sync(0xffffffffu, v, 2);
      if (q == 0) red_ss[warp * kNT * 8 + n * 8 + g] = v;
    }
  }
  __syncthreads();

  // savers: chunk c = 8 columns of one row; sums the partials of every warp of each matrix
  constexpr int kChunks = kMB * 8;
  for (int c = threadIdx.x; c < kChunks; c += kThreads) {
    const int r = c / 8, cc = (c % 8) * 8;
    float v[kNmat][8] = {};
    for (int wp = 0; wp < RS_WARPS; ++wp) {
      const float4* src = reinterpret_cast<const float4*>(red + (wp * kNT * 8 + r) * 64 + cc);
      const float4 lo = src[0], hi = src[1];
      float* d = v[wp % kNmat];
      d[0] += lo.x; d[1] += lo.y; d[2] += lo.z; d[3] += lo.w;
      d[4] += hi.x; d[5] += hi.y; d[6] += hi.z; d[7] += hi.w;
    }
    float o[8];
    if (RS_EPI == 0) {
      float s = 0.f;
      for (int wp = 0; wp < RS_WARPS; ++wp) s += red_ss[wp * kNT * 8 + r];
      const float inv = rsqrtf(s / RS_K);
#pragma unroll
      for (int j = 0; j < 8; ++j) o[j] = v[0][j] * inv;
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float a = v[0][j];
        o[j] = a / (1.f + __expf(-a)) * v[kNmat - 1][j];
      }
    }
    uint4 packed;
    __half2 h0 = __floats2half2_rn(o[0], o[1]), h1 = __floats2half2_rn(o[2], o[3]);
    __half2 h2 = __floats2half2_rn(o[4], o[5]), h3 = __floats2half2_rn(o[6], o[7]);
    packed.x = *reinterpret_cast<uint32_t*>(&h0);
    packed.y = *reinterpret_cast<uint32_t*>(&h1);
    packed.z = *reinterpret_cast<uint32_t*>(&h2);
    packed.w = *reinterpret_cast<uint32_t*>(&h3);
    *reinterpret_cast<uint4*>(out + static_cast<size_t>(row0 + r) * RS_N + col0 + cc) = packed;
  }
}

}  // namespace

extern "C" int strata_launch(const void* const* inputs, void* const* outputs, void* workspace,
                             cudaStream_t stream) {
  (void)workspace;
  static const cudaError_t init =
      cudaFuncSetAttribute(regstream, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  if (init != cudaSuccess) return static_cast<int>(init);
  const __half* x = static_cast<const __half*>(inputs[0]);
  const __half* w1 = static_cast<const __half*>(inputs[1]);
  const __half* w3 = static_cast<const __half*>(inputs[kNmat]);
  regstream<<<dim3(RS_N / 64, RS_MSPLIT), kThreads, kSmem, stream>>>(x, w1, w3,
                                                                    static_cast<__half*>(outputs[0]));
  return static_cast<int>(cudaGetLastError());
}
extern "C" unsigned long long strata_workspace_bytes(void) { return 0ULL; }
extern "C" int strata_num_inputs(void) { return 1 + kNmat; }
extern "C" int strata_num_outputs(void) { return 1; }
