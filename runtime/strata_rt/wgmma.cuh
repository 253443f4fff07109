// strata device runtime: warpgroup MMA (wgmma.mma_async, sm_90a) for block matmuls whose
// warpgroups own 64-row tiles.
//
// A warpgroup is 4 consecutive warps (threads 128g … 128g + 127). With mma.cuh's warp tiling of
// one row tile per warp (MT = 1) and one warp column (4 × 1 warps per warpgroup), warp w of a
// warpgroup owns rows 16w … 16w + 15 and its acc[1][NT][4] is exactly its share of the D
// fragment of wgmma.m64n(8·NT)k16 (PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-
// Accumulate"): the accumulators and every epilogue of mma.cuh stay as they are. A comes from
// registers in the m16n8k16 A layout (the ldmatrix fragments of warp_mma, warp_load_a's or a
// chained product's); B is read by the tensor cores from shared memory through a matrix
// descriptor in the canonical 128-byte-swizzle layouts:
//  - B stored [K][N] (S::TB false: MN-major): 8-row groups along K 1024 bytes apart (the stride
//    byte offset), 64 columns of N per swizzle atom;
//  - B stored [N][K] (S::TB: K-major): 8-row groups along N 1024 bytes apart, the k-step
//    selected by the start address inside the 128-byte rows.
// Both need rows of exactly 128 bytes (S::LDB = 64, 16-bit elements) swizzled by swizzle_col
// (S::SWB) and B tiles starting 1024-byte aligned in the shared window: then strata's swizzle
// (16-byte chunk XOR row % 8) is the hardware's (address bits 4–6 XOR bits 7–9). A misaligned
// tile traps (the emulator reports it) rather than computing a wrong product.
//
// Wider rows are stored as 64-column atoms (S::AB elements apart, each a 1024-byte aligned tile
// of 128-byte rows: MmaSpec's AB, strata's TileLayout::atoms). A K-major B then takes the
// k-step's atom (k0 / 64) in the descriptor's start address; an MN-major B is multiplied one
// atom at a time, one m64n64k16 per atom a column chunk covers on the accumulators of its
// columns (the chunk covers whole atoms or lies inside one), so every descriptor describes one
// atom exactly as for 128-byte rows. Without atoms: K ≤ 64 (K-major), 8 · (tn0 + NT) ≤ 64
// (MN-major).
//
// The calls are synchronous for the warpgroup: fence.proxy.async (shared-memory writes of the
// generic proxy, after the block barrier that published them, become visible to the tensor
// cores), wgmma.fence, the k-steps' wgmma ops, commit, wait for all. All 128 threads of the
// warpgroup call them together. Preconditions beyond mma.cuh's: S::MTILES % 4 == 0 (a
// warpgroup's row tiles lie in one batch), 8 · NT ≤ 256, tm0 % 4 == 0.
#pragma once

#include "strata_rt/mma.cuh"
#include "strata_rt/wgmma_ops.cuh"

namespace strata_rt {

/// The address of p in the shared state space.
STRATA_DEVICE u32 wgmma_shared_address(const void* p) {
#if defined(STRATA_RT_EMULATE)
  return emu::shared_address(p);
#else
  return smem_u32(p);
#endif
}

/// The matrix descriptor (PTX ISA, "Matrix Descriptor Format") of a 128-byte-swizzled operand
/// starting at shared address `addr`: start address >> 4 (bits 0–13), leading byte offset 16
/// (bits 16–29; not used by the layouts above), stride byte offset 1024 (bits 32–45: the
/// distance between 8-row groups of 128-byte rows), base offset 0 (bits 49–51: the tiles are
/// 1024-byte aligned), layout type 1 = 128-byte swizzle (bits 62–63).
STRATA_DEVICE u64 wgmma_desc_sw128(u32 addr) {
  return static_cast<u64>((addr >> 4) & 0x3fffu) | (static_cast<u64>(16 >> 4) << 16) |
         (static_cast<u64>(1024 >> 4) << 32) | (static_cast<u64>(1) << 62);
}

/// Traps when the B tile does not start 1024-byte aligned in the shared window.
STRATA_DEVICE void wgmma_check_aligned(const void* b) {
#if defined(STRATA_RT_EMULATE)
  if (wgmma_shared_address(b) % 1024 != 0)
    emu::fail("wgmma: a B tile not 1024-byte aligned in shared memory");
#elif defined(STRATA_RT_WGMMA_PTX)
  if (wgmma_shared_address(b) % 1024 != 0) __trap();
#else
  (void)b;
#endif
}

/// fence.proxy.async.shared::cta: shared-memory writes made through the generic proxy (stores,
/// cp.async) become visible to the async proxy the tensor cores read B through.
STRATA_DEVICE void fence_proxy_async_shared() {
#if defined(STRATA_RT_WGMMA_PTX)
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

/// wgmma.fence.sync.aligned: orders the warpgroup's register writes (accumulators, A fragments)
/// before the wgmma ops that follow.
STRATA_DEVICE void wgmma_fence() {
#if defined(STRATA_RT_EMULATE)
  emu::wgmma_fence();
#elif defined(STRATA_RT_WGMMA_PTX)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}

/// wgmma.commit_group.sync.aligned: the ops issued since the last commit form one group.
STRATA_DEVICE void wgmma_commit() {
#if defined(STRATA_RT_EMULATE)
  emu::wgmma_commit();
#elif defined(STRATA_RT_WGMMA_PTX)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}

/// wgmma.wait_group.sync.aligned N: all but the newest N committed groups have completed.
template <int N>
STRATA_DEVICE void wgmma_wait() {
#if defined(STRATA_RT_EMULATE)
  emu::wgmma_wait(N);
#elif defined(STRATA_RT_WGMMA_PTX)
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}

/// Keeps the compiler from moving accesses of the accumulators across the asynchronous ops.
template <int NT>
STRATA_DEVICE void wgmma_fence_operand(float (&acc)[1][NT][4]) {
#if !defined(STRATA_RT_EMULATE)
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(acc[0][j][e])::"memory");
#endif
}

/// The layout conditions of the file comment, at compile time.
template <class S, class T, int NT>
struct WgmmaCheck {
  static_assert(sizeof(T) == 2, "wgmma takes 16-bit operands");
  static_assert(S::SWB && S::LDB == 64, "wgmma needs B in swizzled 128-byte rows");
  static_assert(S::BT == 1 || (S::SB * 2) % 1024 == 0, "wgmma needs 1024-byte aligned batches");
  static_assert(S::MTILES % 4 == 0, "a warpgroup's 64 rows lie in one batch");
  static_assert(NT >= 1 && NT * 8 <= 256, "wgmma N is 8 … 256");
  static_assert(S::AB == 0 || (S::AB * 2) % 1024 == 0, "wgmma needs 1024-byte aligned atoms");
  static_assert(S::TB || S::AB > 0 || NT * 8 <= 64, "an MN-major B holds N in one 128-byte row");
  static_assert(S::TB || S::AB == 0 || NT * 8 <= 64 || NT % 8 == 0,
                "an MN-major B in atoms is multiplied in whole atoms");
  static_assert(!S::TB || S::AB > 0 || S::K <= 64, "a K-major B holds K in one 128-byte row");
  static constexpr bool ok = true;
};

/// The element of the batch's B tile b at stored row `row` and stored column `col` (through
/// the atom holding the column when B's rows are in atoms), before the swizzle: the start of a
/// descriptor.
template <class S, class T>
STRATA_DEVICE const T* wgmma_b_start(const T* b, int row, int col) {
  if constexpr (S::AB > 0) return b + (col / S::LDB) * S::AB + row * S::LDB + col % S::LDB;
  return b + row * S::LDB + col;
}

/// The B descriptor of k-step k0 for column tiles tn0 … of the batch's B tile b.
template <class S, class T>
STRATA_DEVICE u64 wgmma_b_desc(const T* b, int k0, int tn0) {
  const T* start = S::TB ? wgmma_b_start<S>(b, tn0 * 8, k0) : wgmma_b_start<S>(b, k0, tn0 * 8);
  return wgmma_desc_sw128(wgmma_shared_address(start));
}

/// Traps when an MN-major B's column chunk tn0 … tn0 + NT − 1 neither covers whole atoms nor
/// lies inside one (the plan's condition; the emulator reports it).
template <class S, int NT>
STRATA_DEVICE void wgmma_check_chunk(int tn0) {
  if constexpr (!S::TB && S::AB > 0) {
    const bool ok = NT * 8 <= 64 ? (tn0 * 8) % 64 + NT * 8 <= 64 : (tn0 * 8) % 64 == 0;
#if defined(STRATA_RT_EMULATE)
    if (!ok) emu::fail("wgmma: an MN-major column chunk straddles a 64-column atom of B");
#elif defined(STRATA_RT_WGMMA_PTX)
    if (!ok) __trap();
#else
    (void)ok;
#endif
  }
}

/// Issues the wgmma ops of k-steps s0 … s0 + NS − 1 with A fragments af (already in
/// registers), fenced, committed and waited for. An MN-major B in atoms wider than the chunk's
/// first atom: one m64n64k16 per atom (PIECES), on the accumulators of its 8 column tiles.
template <class S, class T, int NT, int NS>
STRATA_DEVICE void wgmma_steps(const u32 (&af)[NS][4], const T* b, float (&acc)[1][NT][4],
                               int s0, int tn0, int nsteps) {
  constexpr bool kBf16 = is_same<T, __nv_bfloat16>::value;
  constexpr int PIECES = !S::TB && S::AB > 0 && NT > 8 ? NT / 8 : 1;
  constexpr int PNT = NT / PIECES;  // column tiles per wgmma
  wgmma_check_chunk<S, NT>(tn0);
  wgmma_fence_operand(acc);
  wgmma_fence();
#pragma unroll
  for (int s = 0; s < NS; ++s)
    if (s < nsteps)
#pragma unroll
      for (int q = 0; q < PIECES; ++q)
        wgmma_rs<PNT * 8>::template run<kBf16, !S::TB>(
            &acc[0][q * PNT][0], af[s], wgmma_b_desc<S, T>(b, (s0 + s) * 16, tn0 + q * PNT), 1);
  wgmma_commit();
  wgmma_wait<0>();
  wgmma_fence_operand(acc);
}

/// k-steps per fenced batch of wgmma ops (their A fragments are loaded before the fence).
constexpr int kWgmmaBatch = 8;

/// acc += A · B for the warpgroup's 64 rows (warp row tile tm0, MT = 1) and column tiles
/// tn0 … tn0 + NT − 1: the wgmma counterpart of warp_mma (A from shared memory through
/// ldmatrix). With klimit < K (warp_mma_ragged, MASK_A) the k-steps past klimit are skipped and
/// A is zeroed at columns ≥ klimit; B must hold zeros (or finite values) there.
template <class S, class T, int NT, bool MASK_A = false>
STRATA_DEVICE void warpgroup_mma(const T* A, const T* B, float (&acc)[1][NT][4], int tm0, int tn0,
                                 int klimit = S::K) {
  static_assert(WgmmaCheck<S, T, NT>::ok, "");
  const int lane = threadIdx.x & 31;
  const int batch = tm0 / S::MTILES, mi0 = tm0 % S::MTILES;
  const T* a = A + batch * S::SA;
  const T* b = B + batch * S::SB;
  wgmma_check_aligned(b);
  fence_proxy_async_shared();
  int r = mi0 * 16 + (lane & 15);
  r = r < S::M ? r : S::M - 1;
  const int half8 = (lane >> 4) * 8;
  constexpr int kSteps = S::K / 16;
  const int steps = (imin(klimit, S::K) + 15) / 16;
  constexpr int NS = kSteps < kWgmmaBatch ? kSteps : kWgmmaBatch;
#pragma unroll 1
  for (int s0 = 0; s0 < steps; s0 += NS) {
    u32 af[NS][4];
#pragma unroll
    for (int s = 0; s < NS; ++s) {
      const int k0 = (s0 + s) * 16;
      if (k0 >= S::K) break;
      if constexpr (S::TA)
        warp_load_a_transposed<S>(a, af[s], mi0 * 16, k0);
      else
        ldmatrix_x4(af[s], a + r * S::LDA + swizzle_col<S::SWA>(r, k0 + half8));
      if constexpr (MASK_A)
        if (k0 + 16 > klimit) mask_a_fragment(af[s], k0, klimit);
    }
    wgmma_steps<S, T, NT, NS>(af, b, acc, s0, tn0, imin(NS, steps - s0));
  }
}

/// warp_mma_rega's counterpart: A fragments of all K in registers (warp_load_a, MT = 1).
template <class S, class T, int NT>
STRATA_DEVICE void warpgroup_mma_rega(const u32 (&af)[1][S::K / 16][4], const T* B,
                                      float (&acc)[1][NT][4], int tm0, int tn0) {
  static_assert(WgmmaCheck<S, T, NT>::ok, "");
  const T* b = B + (tm0 / S::MTILES) * S::SB;
  wgmma_check_aligned(b);
  fence_proxy_async_shared();
  constexpr int kSteps = S::K / 16;
  constexpr int NS = kSteps < kWgmmaBatch ? kSteps : kWgmmaBatch;
#pragma unroll
  for (int s0 = 0; s0 < kSteps; s0 += NS) {
    u32 a[NS][4];
#pragma unroll
    for (int s = 0; s < NS; ++s)
#pragma unroll
      for (int e = 0; e < 4; ++e) a[s][e] = s0 + s < kSteps ? af[0][s0 + s][e] : 0u;
    wgmma_steps<S, T, NT, NS>(a, b, acc, s0, tn0, imin(NS, kSteps - s0));
  }
}

/// warp_mma_chained's counterpart: A is the f32 C fragment of a previous product of this warp
/// over the same rows and all K / 8 column tiles, narrowed to T.
template <class S, class T, int NT>
STRATA_DEVICE void warpgroup_mma_chained(const float (&c)[1][S::K / 8][4], const T* B,
                                         float (&acc)[1][NT][4], int tm0, int tn0) {
  static_assert(WgmmaCheck<S, T, NT>::ok, "");
  const T* b = B + (tm0 / S::MTILES) * S::SB;
  wgmma_check_aligned(b);
  fence_proxy_async_shared();
  constexpr int kSteps = S::K / 16;
  constexpr int NS = kSteps < kWgmmaBatch ? kSteps : kWgmmaBatch;
#pragma unroll
  for (int s0 = 0; s0 < kSteps; s0 += NS) {
    u32 a[NS][4];
#pragma unroll
    for (int s = 0; s < NS; ++s) {
      const int k = s0 + s < kSteps ? s0 + s : kSteps - 1;
      a[s][0] = pack2<T>(c[0][2 * k][0], c[0][2 * k][1]);
      a[s][1] = pack2<T>(c[0][2 * k][2], c[0][2 * k][3]);
      a[s][2] = pack2<T>(c[0][2 * k + 1][0], c[0][2 * k + 1][1]);
      a[s][3] = pack2<T>(c[0][2 * k + 1][2], c[0][2 * k + 1][3]);
    }
    wgmma_steps<S, T, NT, NS>(a, b, acc, s0, tn0, imin(NS, kSteps - s0));
  }
}

}  // namespace strata_rt
