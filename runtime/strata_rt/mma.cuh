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
// Preconditions: K % 16 == 0, N % 8 == 0 (padded extents: MmaSpec's NV, warp_mma_ragged's
// klimit give the true ones), LDA and LDB multiples of 8 (16-byte rows for
// ldmatrix), tile base addresses 16-byte aligned, a warp's MT row tiles lie in one batch
// (MT divides MTILES and the first tile index is a multiple of MT), and all 32 lanes of the
// warp call these functions together.
#pragma once

#include "strata_rt/copy.cuh"
#include "strata_rt/core.cuh"
#include "strata_rt/reduce.cuh"

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

/// Two 8×8 matrices; lanes 0-15 supply row addresses (the others must be valid).
STRATA_DEVICE void ldmatrix_x2(u32 (&r)[2], const void* row_addr) {
#if defined(STRATA_RT_EMULATE)
  emu::ldmatrix(r, 2, false, row_addr);
#else
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
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

/// Compile-time description of one block-level matmul (see the file comment). TA: A is stored
/// transposed (a row-major [K][M] tile read as its transpose: a transpose read in place, or K
/// stored as [N, D]); TB likewise for B ([N][K]). The strides and swizzles are those of the
/// stored tiles. A transposed A needs M % 16 == 0.
///
/// Padding to the mma step: N and K are the padded extents (multiples of 8 and 16) and NV ≤ N
/// the true N; the operand tiles have storage for the padded extents. Columns c ≥ NV of the
/// product are never handed to an epilogue (mma_epilogue). The contraction's true extent is
/// warp_mma_ragged's klimit, which zeroes the fragments past it: the pad may hold anything.
///
/// AB: B's stored rows split into atoms of LDB columns (strata's TileLayout::atoms, for wgmma's
/// 128-byte swizzle atoms): element (r, c) of a batch of B at (c / LDB) · AB + r · LDB +
/// swizzle_col(r, c % LDB); 0 when B's rows are not split. Only warpgroup MMA (wgmma.cuh)
/// reads such a B.
template <int BT_, int M_, int N_, int K_, int LDA_, int SA_, bool SWA_, int LDB_, int SB_,
          bool SWB_, bool TA_ = false, bool TB_ = false, int NV_ = N_, int AB_ = 0>
struct MmaSpec {
  static constexpr int BT = BT_, M = M_, N = N_, K = K_, NV = NV_;
  static_assert(NV_ >= 1 && NV_ <= N_, "the true N lies in the padded N");
  static constexpr int LDA = LDA_, SA = SA_, LDB = LDB_, SB = SB_, AB = AB_;
  static constexpr bool SWA = SWA_, SWB = SWB_, TA = TA_, TB = TB_;
  static_assert(!TA_ || M_ % 16 == 0, "a transposed A operand needs whole 16-row tiles");
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

/// B fragments of k-step k0 (rows k0 … k0+15) for column tiles tn0 … tn0+NT-1.
template <class S, class T, int NT>
STRATA_DEVICE void warp_load_b(const T* b, u32 (&bf)[NT][2], int k0, int tn0) {
  static_assert(S::AB == 0, "mma.sync reads B with one row stride: no rows in atoms");
  const int lane = threadIdx.x & 31;
  if constexpr (S::TB) {
    // B stored as [N][K]: each 8×8 matrix of rows n and columns k is a fragment as stored
    // (no .trans). Lane l addresses matrix l / 8: column tile j + (l / 16), k half (l / 8) % 2.
    const int kc = k0 + ((lane >> 3) & 1) * 8;
#pragma unroll
    for (int j = 0; j + 1 < NT; j += 2) {
      const int n = (tn0 + j + (lane >> 4)) * 8 + (lane & 7);
      u32 r[4];
      ldmatrix_x4(r, b + n * S::LDB + swizzle_col<S::SWB>(n, kc));
      bf[j][0] = r[0];
      bf[j][1] = r[1];
      bf[j + 1][0] = r[2];
      bf[j + 1][1] = r[3];
    }
    if constexpr (NT % 2 == 1) {
      const int n = (tn0 + NT - 1) * 8 + (lane & 7);
      ldmatrix_x2(bf[NT - 1], b + n * S::LDB + swizzle_col<S::SWB>(n, kc));
    }
    return;
  }
  const int k = k0 + (lane & 15), half8 = (lane >> 4) * 8;
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
}

/// The A fragment of rows m0 … m0+15 and k-step k0 from an A stored transposed ([K][M], S::TA):
/// the four 8×8 matrices (rows m0 / m0+8, columns k0 / k0+8) are stored with rows k and columns
/// m, so ldmatrix .trans gives them in the A layout. Lane l addresses matrix l / 8: m half
/// (l / 8) % 2, k half l / 16.
template <class S, class T>
STRATA_DEVICE void warp_load_a_transposed(const T* a, u32 (&af)[4], int m0, int k0) {
  const int lane = threadIdx.x & 31;
  const int k = k0 + (lane >> 4) * 8 + (lane & 7), m = m0 + ((lane >> 3) & 1) * 8;
  ldmatrix_x4_trans(af, a + k * S::LDA + swizzle_col<S::SWA>(k, m));
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
  const int half8 = (lane >> 4) * 8;
  constexpr int kSteps = S::K / 16;
  auto step = [&](int k0) {
    u32 af[MT][4];
    u32 bf[NT][2];
#pragma unroll
    for (int i = 0; i < MT; ++i) {
      if constexpr (S::TA) {
        warp_load_a_transposed<S>(a, af[i], (mi0 + i) * 16, k0);
        continue;
      }
      const int c = k0 + half8;
      ldmatrix_x4(af[i], a + a_row[i] * S::LDA + swizzle_col<S::SWA>(a_row[i], c));
    }
    warp_load_b<S, T, NT>(b, bf, k0, tn0);
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

// ---- ragged contractions (docs/codegen.md, "Ragged tiles") ----
// When only the first `klimit` indices of K are present (the last tile of a ragged split), the
// k-steps past klimit are skipped and, in the step that straddles it, the operand fragments
// whose tiles may hold anything at absent indices (computed tiles; loaded tiles are
// zero-filled) are zeroed there, so that no absent element (nor 0 · inf = NaN) reaches the
// product. klimit is warp-uniform, 1 ≤ klimit ≤ K.

/// The packed pair (k, k + 1) with the halves at indices ≥ limit zeroed.
STRATA_DEVICE u32 mask_pair(u32 w, int k, int limit) {
  return k + 1 < limit ? w : k < limit ? (w & 0xffffu) : 0u;
}

/// Zeroes an A fragment (rows g, g+8; columns k0 + 2t, k0 + 2t + 8 and their neighbours; g =
/// lane / 4, t = lane % 4) at columns ≥ limit.
STRATA_DEVICE void mask_a_fragment(u32 (&af)[4], int k0, int limit) {
  const int k = k0 + ((threadIdx.x & 31) & 3) * 2;
  af[0] = mask_pair(af[0], k, limit);
  af[1] = mask_pair(af[1], k, limit);
  af[2] = mask_pair(af[2], k + 8, limit);
  af[3] = mask_pair(af[3], k + 8, limit);
}

/// Zeroes a B fragment (rows k0 + 2t and k0 + 2t + 8 and their neighbours) at rows ≥ limit.
STRATA_DEVICE void mask_b_fragment(u32 (&bf)[2], int k0, int limit) {
  const int k = k0 + ((threadIdx.x & 31) & 3) * 2;
  bf[0] = mask_pair(bf[0], k, limit);
  bf[1] = mask_pair(bf[1], k + 8, limit);
}

/// warp_mma over the present rows k < klimit of K only (see above): MASK_A / MASK_B zero the
/// fragments of A / B at absent indices.
template <class S, class T, int MT, int NT, bool MASK_A, bool MASK_B>
STRATA_DEVICE void warp_mma_ragged(const T* A, const T* B, float (&acc)[MT][NT][4], int tm0,
                                   int tn0, int klimit) {
  const int lane = threadIdx.x & 31;
  const int batch = tm0 / S::MTILES, mi0 = tm0 % S::MTILES;
  const T* a = A + batch * S::SA;
  const T* b = B + batch * S::SB;
  int a_row[MT];
#pragma unroll
  for (int i = 0; i < MT; ++i) {
    int r = (mi0 + i) * 16 + (lane & 15);
    a_row[i] = r < S::M ? r : S::M - 1;
  }
  const int half8 = (lane >> 4) * 8;
  constexpr int kSteps = S::K / 16;
  auto step = [&](int k0) {
    u32 af[MT][4];
    u32 bf[NT][2];
#pragma unroll
    for (int i = 0; i < MT; ++i) {
      if constexpr (S::TA) {
        warp_load_a_transposed<S>(a, af[i], (mi0 + i) * 16, k0);
      } else {
        const int c = k0 + half8;
        ldmatrix_x4(af[i], a + a_row[i] * S::LDA + swizzle_col<S::SWA>(a_row[i], c));
      }
    }
    warp_load_b<S, T, NT>(b, bf, k0, tn0);
    if (k0 + 16 > klimit) {
      if constexpr (MASK_A) {
#pragma unroll
        for (int i = 0; i < MT; ++i) mask_a_fragment(af[i], k0, klimit);
      }
      if constexpr (MASK_B) {
#pragma unroll
        for (int j = 0; j < NT; ++j) mask_b_fragment(bf[j], k0, klimit);
      }
    }
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int j = 0; j < NT; ++j) mma_16816<T>(acc[i][j], af[i], bf[j]);
  };
  if constexpr (kSteps <= 16) {
#pragma unroll
    for (int s = 0; s < kSteps; ++s)
      if (s * 16 < klimit) step(s * 16);
  } else {
#pragma unroll 4
    for (int s = 0; s < kSteps; ++s)
      if (s * 16 < klimit) step(s * 16);
  }
}

/// The 32-bit register holding (lo, hi) narrowed to the 16-bit type T (lo in the low half).
template <class T>
STRATA_DEVICE u32 pack2(float lo, float hi) {
  u32 r;
  if constexpr (is_same<T, __nv_bfloat16>::value) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
#if defined(STRATA_RT_EMULATE)
    std::memcpy(&r, &h, 4);
#else
    r = *reinterpret_cast<u32*>(&h);
#endif
  } else {
    __half2 h = __floats2half2_rn(lo, hi);
#if defined(STRATA_RT_EMULATE)
    std::memcpy(&r, &h, 4);
#else
    r = *reinterpret_cast<u32*>(&h);
#endif
  }
  return r;
}

/// A fragments of the warp's MT row tiles (tm0 …) over all of K: af[i][s] is the A operand of
/// k-step s (columns 16s … 16s+15). For a loop-invariant A read once before the loop.
template <class S, class T, int MT>
STRATA_DEVICE void warp_load_a(const T* A, u32 (&af)[MT][S::K / 16][4], int tm0) {
  const int lane = threadIdx.x & 31;
  const int batch = tm0 / S::MTILES, mi0 = tm0 % S::MTILES;
  const T* a = A + batch * S::SA;
  const int half8 = (lane >> 4) * 8;
#pragma unroll
  for (int i = 0; i < MT; ++i) {
    int r = (mi0 + i) * 16 + (lane & 15);
    r = r < S::M ? r : S::M - 1;
#pragma unroll
    for (int s = 0; s < S::K / 16; ++s) {
      if constexpr (S::TA)
        warp_load_a_transposed<S>(a, af[i][s], (mi0 + i) * 16, s * 16);
      else
        ldmatrix_x4(af[i][s], a + r * S::LDA + swizzle_col<S::SWA>(r, s * 16 + half8));
    }
  }
}

/// acc += A · B with the warp's A fragments in registers (from warp_load_a).
template <class S, class T, int MT, int NT>
STRATA_DEVICE void warp_mma_rega(const u32 (&af)[MT][S::K / 16][4], const T* B,
                                 float (&acc)[MT][NT][4], int tm0, int tn0) {
  const int batch = tm0 / S::MTILES;
  const T* b = B + batch * S::SB;
#pragma unroll
  for (int s = 0; s < S::K / 16; ++s) {
    u32 bf[NT][2];
    warp_load_b<S, T, NT>(b, bf, s * 16, tn0);
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int j = 0; j < NT; ++j) mma_16816<T>(acc[i][j], af[i][s], bf[j]);
  }
}

/// acc += A · B where A is the f32 C-fragment result of a previous matmul of this warp over
/// the same row tiles and all K / 8 column tiles (kept in registers, FlashAttention style):
/// the C fragments of column tiles 2s and 2s+1, narrowed to T, are exactly the A fragment of
/// k-step s of m16n8k16.
template <class S, class T, int MT, int NT>
STRATA_DEVICE void warp_mma_chained(const float (&c)[MT][S::K / 8][4], const T* B,
                                    float (&acc)[MT][NT][4], int tm0, int tn0) {
  const int batch = tm0 / S::MTILES;
  const T* b = B + batch * S::SB;
#pragma unroll
  for (int s = 0; s < S::K / 16; ++s) {
    u32 bf[NT][2];
    warp_load_b<S, T, NT>(b, bf, s * 16, tn0);
#pragma unroll
    for (int i = 0; i < MT; ++i) {
      const u32 a[4] = {pack2<T>(c[i][2 * s][0], c[i][2 * s][1]),
                        pack2<T>(c[i][2 * s][2], c[i][2 * s][3]),
                        pack2<T>(c[i][2 * s + 1][0], c[i][2 * s + 1][1]),
                        pack2<T>(c[i][2 * s + 1][2], c[i][2 * s + 1][3])};
#pragma unroll
      for (int j = 0; j < NT; ++j) mma_16816<T>(acc[i][j], a, bf[j]);
    }
  }
}

/// Calls f(batch, row, col, v0, v1) with references to every pair of adjacent elements this
/// lane holds, padding rows included (their row index is clamped to M-1, so operand reads stay
/// in range; their values are never stored) and padding columns (col ≥ S::NV: never stored).
template <class S, int MT, int NT, class F>
STRATA_DEVICE void mma_transform(float (&acc)[MT][NT][4], int tm0, int tn0, F&& f) {
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
        f(batch, r < S::M ? r : S::M - 1, c, acc[i][j][2 * h], acc[i][j][2 * h + 1]);
      }
}

/// mma_transform with the value rows[i][h] of each element's row (a per-row quantity kept in
/// the row layout of mma_row_sums, e.g. a running max) passed as a sixth argument.
template <class S, int MT, int NT, class F>
STRATA_DEVICE void mma_transform_rows(float (&acc)[MT][NT][4], const float (&rows)[MT][2], int tm0,
                                      int tn0, F&& f) {
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
        f(batch, r < S::M ? r : S::M - 1, c, acc[i][j][2 * h], acc[i][j][2 * h + 1], rows[i][h]);
      }
}

/// Multiplies every element of a fragment accumulator by its row's factor (factors in the row
/// layout of mma_row_sums): the online softmax's rescaling of a partial product.
template <int MT, int NT>
STRATA_DEVICE void mma_scale_rows(float (&acc)[MT][NT][4], const float (&factor)[MT][2]) {
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        acc[i][j][2 * h] *= factor[i][h];
        acc[i][j][2 * h + 1] *= factor[i][h];
      }
}

/// rs[i][h] += this lane's part of the sum over columns of row (lane / 4 + 8h) of row tile i
/// (of the squares when SQUARES). The four lanes of a quad hold the parts of one row: reduce
/// them with mma_row_reduce.
template <bool SQUARES, int MT, int NT>
STRATA_DEVICE void mma_row_sums(const float (&acc)[MT][NT][4], float (&rs)[MT][2]) {
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float a = acc[i][j][2 * h], b = acc[i][j][2 * h + 1];
        rs[i][h] += SQUARES ? a * a + b * b : a + b;
      }
}

/// rs[i][h] = max(rs[i][h], this lane's part of the max over columns of row (lane / 4 + 8h) of
/// row tile i (of the squares when SQUARES): the max counterpart of mma_row_sums (reduce the
/// quad with mma_row_reduce<S, MT, true>).
template <bool SQUARES, int MT, int NT>
STRATA_DEVICE void mma_row_max(const float (&acc)[MT][NT][4], float (&rs)[MT][2]) {
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float a = acc[i][j][2 * h], b = acc[i][j][2 * h + 1];
        rs[i][h] = fmaxf(rs[i][h], SQUARES ? fmaxf(a * a, b * b) : fmaxf(a, b));
      }
}

/// The row values of the warp's row tiles complete in every lane of each quad: rs[i][h] combined
/// (sum, or max when MAX) over the four lanes holding parts of row (lane / 4 + 8h).
template <bool MAX, int MT>
STRATA_DEVICE void mma_quad_reduce(float (&rs)[MT][2]) {
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float v = rs[i][h];
      if constexpr (MAX) {
        v = fmaxf(v, shfl_xor(v, 1));
        v = fmaxf(v, shfl_xor(v, 2));
      } else {
        v += shfl_xor(v, 1);
        v += shfl_xor(v, 2);
      }
      rs[i][h] = v;
    }
}

/// Calls f(batch, row, value) once per row of the warp's row tiles (rows < M): the quad-reduced
/// row sums of mma_row_sums (row maxima of mma_row_max when MAX), handed to lane 4g of each
/// quad g. All 32 lanes must call it.
template <class S, int MT, bool MAX = false, class F>
STRATA_DEVICE void mma_row_reduce(float (&rs)[MT][2], int tm0, F&& f) {
  const int lane = threadIdx.x & 31;
  const int batch = tm0 / S::MTILES, mi0 = tm0 % S::MTILES;
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float v = rs[i][h];
      if constexpr (MAX) {
        v = fmaxf(v, shfl_xor(v, 1));
        v = fmaxf(v, shfl_xor(v, 2));
      } else {
        v += shfl_xor(v, 1);
        v += shfl_xor(v, 2);
      }
      const int r = (mi0 + i) * 16 + (lane >> 2) + 8 * h;
      if ((lane & 3) == 0 && r < S::M) f(batch, r, v);
    }
}

/// Calls f(batch, row, col, v0, v1) for each pair of adjacent output elements (row, col) and
/// (row, col+1) held by this lane, skipping padding rows (row ≥ M) and padding columns
/// (col ≥ S::NV). With an odd NV the pair at col = NV − 1 is handed over too: its second
/// element is padding, which f must not store.
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
        if (r < S::M && c < S::NV) f(batch, r, c, acc[i][j][2 * h], acc[i][j][2 * h + 1]);
      }
}

}  // namespace strata_rt
