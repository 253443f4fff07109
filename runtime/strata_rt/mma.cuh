// strata device runtime: tensor-core matmul of shared-memory tiles (mma.sync m16n8k16).
//
// A block-level matmul C[BT][M][N] = A[BT][M][K] · B[BT][K][N] on 16-bit tiles (f16 or bf16)
// accumulates in f32 registers. Both operands are row-major tiles in shared memory with row
// strides LDA / LDB and batch strides SA / SB (elements), optionally XOR-swizzled
// (swizzle_col). The output is cut into m16×n8 fragment tiles: ROW_TILES = BT·⌈M/16⌉ row tiles
// (a row tile never spans two batches; rows ≥ M are padding) and COL_TILES = N/8 column tiles.
// Each warp owns a rectangle of MT row tiles × NT column tiles and keeps them in
// `float acc[MT][NT][4]` (the mma C fragment layout); warp_mma adds A·B into it, mma_epilogue
// hands every element to a functor.
//
// Preconditions: K % 16 == 0, N % 8 == 0, LDA and LDB multiples of 8 (16-byte rows for
// ldmatrix), tile base addresses 16-byte aligned, a warp's MT row tiles lie in one batch
// (MT divides MTILES and the first tile index is a multiple of MT), and all 32 lanes of the
// warp call these functions together.
#pragma once

#include "strata_rt/copy.cuh"
#include "strata_rt/core.cuh"

namespace strata_rt {

/// Loads four 8×8 16-bit matrices; lane l supplies the address of row l%8 of matrix l/8.
STRATA_DEVICE void ldmatrix_x4(u32 (&r)[4], const void* row_addr) {
#if defined(STRATA_RT_EMULATE)
  emu::ldmatrix(r, 4, false, row_addr);
#else
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(row_addr)));
#endif
}

/// ldmatrix_x4 with each 8×8 matrix transposed.
STRATA_DEVICE void ldmatrix_x4_trans(u32 (&r)[4], const void* row_addr) {
#if defined(STRATA_RT_EMULATE)
  emu::ldmatrix(r, 4, true, row_addr);
#else
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(row_addr)));
#endif
}

/// Two transposed 8×8 matrices; lanes 0-15 supply row addresses (the others must be valid).
STRATA_DEVICE void ldmatrix_x2_trans(u32 (&r)[2], const void* row_addr) {
#if defined(STRATA_RT_EMULATE)
  emu::ldmatrix(r, 2, true, row_addr);
#else
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(smem_u32(row_addr)));
#endif
}

/// d += a · b for one m16n8k16 tile (A row-major fragment, B column fragment, f32 accumulate).
template <class T>
STRATA_DEVICE void mma_16816(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
#if defined(STRATA_RT_EMULATE)
  emu::mma_16816(d, a, b, is_same<T, __nv_bfloat16>::value);
#else
  if constexpr (is_same<T, __nv_bfloat16>::value) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
#endif
}

/// Compile-time description of one block-level matmul (see the file comment).
template <int BT_, int M_, int N_, int K_, int LDA_, int SA_, bool SWA_, int LDB_, int SB_,
          bool SWB_>
struct MmaSpec {
  static constexpr int BT = BT_, M = M_, N = N_, K = K_;
  static constexpr int LDA = LDA_, SA = SA_, LDB = LDB_, SB = SB_;
  static constexpr bool SWA = SWA_, SWB = SWB_;
  static constexpr int MTILES = ceil_div(M_, 16);
  static constexpr int ROW_TILES = BT_ * MTILES;
  static constexpr int COL_TILES = N_ / 8;
  static_assert(K_ % 16 == 0 && N_ % 8 == 0, "tensor-core matmul needs K % 16 == 0, N % 8 == 0");
  static_assert(LDA_ % 8 == 0 && LDB_ % 8 == 0, "ldmatrix needs 16-byte rows");
};

/// Zeroes a fragment accumulator.
template <int MT, int NT>
STRATA_DEVICE void mma_zero(float (&acc)[MT][NT][4]) {
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
}

/// acc += A · B over the warp's fragment tiles: row tiles tm0 .. tm0+MT-1, column tiles
/// tn0 .. tn0+NT-1 (all in range).
template <class S, class T, int MT, int NT>
STRATA_DEVICE void warp_mma(const T* A, const T* B, float (&acc)[MT][NT][4], int tm0, int tn0) {
  const int lane = threadIdx.x & 31;
  const int batch = tm0 / S::MTILES, mi0 = tm0 % S::MTILES;
  const T* a = A + batch * S::SA;
  const T* b = B + batch * S::SB;
  // ldmatrix row addresses: lane l reads row (l & 15) of a 16-row slab at column offset
  // 8 * (l >> 4). A rows past M (padding) re-read row M-1; their results are never stored.
  int a_row[MT];
#pragma unroll
  for (int i = 0; i < MT; ++i) {
    int r = (mi0 + i) * 16 + (lane & 15);
    a_row[i] = r < S::M ? r : S::M - 1;
  }
  const int sub = lane & 15, half8 = (lane >> 4) * 8;
  constexpr int kSteps = S::K / 16;
  auto step = [&](int k0) {
    u32 af[MT][4];
    u32 bf[NT][2];
#pragma unroll
    for (int i = 0; i < MT; ++i) {
      const int c = k0 + half8;
      ldmatrix_x4(af[i], a + a_row[i] * S::LDA + swizzle_col<S::SWA>(a_row[i], c));
    }
    const int k = k0 + sub;
#pragma unroll
    for (int j = 0; j + 1 < NT; j += 2) {
      const int n = (tn0 + j) * 8 + half8;
      u32 r[4];
      ldmatrix_x4_trans(r, b + k * S::LDB + swizzle_col<S::SWB>(k, n));
      bf[j][0] = r[0];
      bf[j][1] = r[1];
      bf[j + 1][0] = r[2];
      bf[j + 1][1] = r[3];
    }
    if constexpr (NT % 2 == 1) {
      const int n = (tn0 + NT - 1) * 8;
      ldmatrix_x2_trans(bf[NT - 1], b + k * S::LDB + swizzle_col<S::SWB>(k, n));
    }
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int j = 0; j < NT; ++j) mma_16816<T>(acc[i][j], af[i], bf[j]);
  };
  if constexpr (kSteps <= 16) {
#pragma unroll
    for (int s = 0; s < kSteps; ++s) step(s * 16);
  } else {
#pragma unroll 4
    for (int s = 0; s < kSteps; ++s) step(s * 16);
  }
}

/// Calls f(batch, row, col, v0, v1) for each pair of adjacent output elements (row, col) and
/// (row, col+1) held by this lane, skipping padding rows (row ≥ M).
template <class S, int MT, int NT, class F>
STRATA_DEVICE void mma_epilogue(const float (&acc)[MT][NT][4], int tm0, int tn0, F&& f) {
  const int lane = threadIdx.x & 31;
  const int batch = tm0 / S::MTILES, mi0 = tm0 % S::MTILES;
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = (mi0 + i) * 16 + (lane >> 2) + 8 * h;
        const int c = (tn0 + j) * 8 + (lane & 3) * 2;
        if (r < S::M) f(batch, r, c, acc[i][j][2 * h], acc[i][j][2 * h + 1]);
      }
}

}  // namespace strata_rt
