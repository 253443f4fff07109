// A CPU emulator of the CUDA execution model, for testing generated kernels without a GPU.
//
// Compile generated code as host C++ with -DSTRATA_RT_EMULATE (and the CUDA include directory
// for cuda_fp16.h). Every thread of a block runs as a cooperative fiber (ucontext) on the
// calling OS thread; blocks run one after another. What is modelled:
//  - __syncthreads(): a block-wide barrier. Fibers run in thread order until they block, so a
//    missing barrier between a phase that writes shared memory and one that reads it makes
//    thread 0 read data that later threads have not written yet: the test sees wrong values.
//  - warp collectives (shuffles, ldmatrix, mma.sync m16n8k16): all 32 lanes must arrive; the
//    result is computed from every lane's operands with the PTX fragment layouts.
//  - cp.async: a copy lands only when its issuing thread waits for its group
//    (cp_async_wait<N>), so reading a pipeline stage before waiting sees stale data; a copy
//    with a src-size reads that many bytes and zero-fills the rest.
//  - copies (cp.async, copy_sync, vector stores) into ranges registered with add_forbidden
//    (the harness registers the bytes just past every tensor) abort: a tile was not clipped;
//    so do copies at addresses not aligned to their size (the GPU faults on those).
//  - wgmma.mma_async (sm_90a warpgroup MMA, A from registers, B through a shared-memory matrix
//    descriptor): all 128 threads of the 4 warps of a warpgroup must arrive; the product is
//    computed then from the shared memory it reads, but the accumulator registers hold NaN until
//    the issuing thread's wgmma_wait retires the op, so reading D before the wait is caught; so
//    are a first wgmma without wgmma_fence, a descriptor that differs across the warpgroup, a
//    B operand overwritten while its op is in flight and a thread exiting with ops in flight.
//    Shared addresses in descriptors are offsets from the block's shared memory, which starts
//    1024-byte aligned (as the hardware swizzle patterns are).
//  - dynamic shared memory starts filled with 0xFF bytes (NaN in f16, bf16 and f32), so reading
//    an element no thread wrote yields NaN.
// A deadlock (some fibers waiting at a barrier or collective no other fiber will reach) or a
// collective whose lanes disagree aborts with a message.
#pragma once

#include <ucontext.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#ifndef __launch_bounds__
#define __launch_bounds__(...)
#endif

namespace strata_rt {
namespace emu {

typedef unsigned int u32;
typedef unsigned long long u64;

enum class Collective { Shuffle, LdMatrix, Mma, SyncWarp };

struct Copy {
  void* dst;
  const void* src;
  int bytes;
  int src_bytes;  // bytes read from src; the rest of dst is zero-filled
  long group;
};

/// One wgmma.mma_async of a warpgroup, computed when its 128 threads arrived: every thread's
/// D fragment, and the shared-memory bytes of B it read (checked unchanged when it retires).
struct WgmmaOp {
  int n = 0;                   // N of m64nNk16: each thread holds N / 2 f32 values
  std::vector<float> d;        // [128][N / 2]
  std::vector<std::pair<const unsigned char*, unsigned short>> b_reads;
  bool checked = false;
};

/// A thread's share of an in-flight wgmma: its D registers and the commit group it belongs to.
struct WgmmaPending {
  std::shared_ptr<WgmmaOp> op;
  float* d;
  int slot;  // the thread's index in the warpgroup
  long group;
};

struct Fiber {
  ucontext_t ctx;
  uint3 idx;
  bool done = false;
  std::vector<Copy> pending;  // cp.async copies not yet landed
  long committed = 0;         // cp.async groups committed so far
  std::vector<WgmmaPending> wg_pending;  // wgmma ops issued and not yet retired
  long wg_committed = 0;                 // wgmma groups committed so far
  bool wg_fenced = false;                // wgmma.fence since the last retirement of all ops
};

/// The arrival state of one warpgroup (4 consecutive warps) at a wgmma.mma_async.
struct WarpGroup {
  int arrived = 0;
  unsigned gen = 0;
  u64 variant = 0, desc = 0;
  u32 a[128][4];
  float c[128][128];
  std::shared_ptr<WgmmaOp> op;
};

struct Warp {
  int arrived = 0;
  unsigned gen = 0;
  Collective kind = Collective::Shuffle;
  int variant = 0;
  u64 in[32][8];
  u64 out[32][8];
};

struct Block {
  uint3 idx;
  dim3 dim;
  int nthreads = 0;
  unsigned char* smem = nullptr;  // 1024-byte aligned
  size_t smem_bytes = 0;
  std::vector<Fiber> fibers;
  std::vector<Warp> warps;
  std::vector<WarpGroup> warpgroups;
  int barrier_arrived = 0;
  unsigned barrier_gen = 0;
  int named_arrived[16] = {};  // named barriers 1..15 (bar.sync id, count)
  int named_count[16] = {};
  unsigned named_gen[16] = {};
  int current = -1;
  long progress = 0;
  ucontext_t scheduler;
  std::function<void()> body;
};

/// Emulation settings: fiber order (reverse runs the highest thread first).
struct Settings {
  bool reverse = false;
  size_t stack_bytes = 256 * 1024;
};
inline Settings& settings() {
  static Settings s;
  return s;
}

inline Block*& current_block() {
  static Block* b = nullptr;
  return b;
}
inline Fiber& current_fiber() {
  Block* b = current_block();
  return b->fibers[b->current];
}

[[noreturn]] inline void fail(const char* what) {
  std::fprintf(stderr, "strata emulator: %s\n", what);
  std::abort();
}

/// Byte ranges no emulated copy may touch (the slack between a global buffer's end and the
/// next alignment boundary, registered by the test harness): an access there is a read or
/// write past the end of a tensor (a ragged tile that was not clipped).
inline std::vector<std::pair<const unsigned char*, const unsigned char*>>& forbidden() {
  static std::vector<std::pair<const unsigned char*, const unsigned char*>> f;
  return f;
}
inline void add_forbidden(const void* p, size_t bytes) {
  const unsigned char* b = static_cast<const unsigned char*>(p);
  forbidden().push_back({b, b + bytes});
}
/// Fails when [p, p + bytes) meets a forbidden range.
inline void check_access(const void* p, int bytes) {
  const unsigned char* b = static_cast<const unsigned char*>(p);
  for (const auto& r : forbidden())
    if (b < r.second && r.first < b + bytes)
      fail("a copy reads or writes past the end of a tensor");
}

/// Fails when p is not aligned to `bytes`: a vector access the GPU would fault on.
inline void check_aligned(const void* p, int bytes) {
  if (reinterpret_cast<unsigned long long>(p) % static_cast<unsigned>(bytes) != 0)
    fail("a vector access at an address not aligned to its size");
}

/// Returns control to the scheduler; resumes when the scheduler picks this fiber again.
inline void yield() {
  Block* b = current_block();
  swapcontext(&b->fibers[b->current].ctx, &b->scheduler);
}

inline void syncthreads() {
  Block* b = current_block();
  b->progress++;
  unsigned gen = b->barrier_gen;
  if (++b->barrier_arrived == b->nthreads) {
    b->barrier_arrived = 0;
    b->barrier_gen++;
    return;
  }
  while (b->barrier_gen == gen) yield();
}

/// bar.sync id, count: waits until `count` threads have arrived at named barrier `id`.
inline void named_barrier(int id, int count) {
  Block* b = current_block();
  if (id < 1 || id > 15) fail("named barrier id outside 1..15");
  if (count % 32 != 0 || count > b->nthreads) fail("named barrier count");
  b->progress++;
  if (b->named_arrived[id] == 0) {
    b->named_count[id] = count;
  } else if (b->named_count[id] != count) {
    fail("threads arrived at one named barrier with different counts");
  }
  unsigned gen = b->named_gen[id];
  if (++b->named_arrived[id] == count) {
    b->named_arrived[id] = 0;
    b->named_gen[id]++;
    return;
  }
  while (b->named_gen[id] == gen) yield();
}

inline int linear_tid() {
  Block* b = current_block();
  return b->current;
}

/// A warp-wide collective: deposits this lane's operands, waits for all 32 lanes, and returns
/// this lane's result computed by `compute(in, out)` over all lanes.
template <class Compute>
inline void collective(Collective kind, int variant, const u64* in, int nin, u64* out, int nout,
                       Compute compute) {
  Block* b = current_block();
  int tid = linear_tid();
  Warp& w = b->warps[tid / 32];
  int lane = tid % 32;
  if (w.arrived == 0) {
    w.kind = kind;
    w.variant = variant;
  } else if (w.kind != kind || w.variant != variant) {
    fail("lanes of one warp reached different collectives (divergent warp)");
  }
  for (int i = 0; i < nin; ++i) w.in[lane][i] = in[i];
  unsigned gen = w.gen;
  b->progress++;
  if (++w.arrived == 32) {
    compute(w.in, w.out);
    w.arrived = 0;
    w.gen++;
  } else {
    while (w.gen == gen) yield();
  }
  for (int i = 0; i < nout; ++i) out[i] = w.out[lane][i];
}

inline float shfl_xor(float v, int mask) {
  u64 in;
  u32 bits;
  std::memcpy(&bits, &v, 4);
  in = bits;
  u64 out;
  collective(Collective::Shuffle, mask, &in, 1, &out, 1, [mask](u64(*i)[8], u64(*o)[8]) {
    for (int l = 0; l < 32; ++l) o[l][0] = i[l ^ mask][0];
  });
  bits = static_cast<u32>(out);
  float r;
  std::memcpy(&r, &bits, 4);
  return r;
}

/// __syncwarp(): all 32 lanes of the warp meet (a collective without data).
inline void syncwarp() {
  u64 in = 0, out = 0;
  collective(Collective::SyncWarp, 0, &in, 1, &out, 1, [](u64(*)[8], u64(*)[8]) {});
}

inline unsigned short load16(const void* p, int e) {
  unsigned short v;
  std::memcpy(&v, static_cast<const unsigned char*>(p) + 2 * e, 2);
  return v;
}

/// ldmatrix .m8n8 .x{1,2,4} [.trans] .b16: lanes 8j..8j+7 give the row addresses of matrix j;
/// without .trans lane t receives row t/4, elements 2(t%4) and 2(t%4)+1 of each matrix; with
/// .trans it receives column t/4, rows 2(t%4) and 2(t%4)+1.
inline void ldmatrix(u32* r, int count, bool trans, const void* row_addr) {
  u64 in = reinterpret_cast<u64>(row_addr);
  u64 out[4];
  collective(Collective::LdMatrix, count * 2 + (trans ? 1 : 0), &in, 1, out, count,
             [count, trans](u64(*i)[8], u64(*o)[8]) {
               for (int m = 0; m < count; ++m)
                 for (int t = 0; t < 32; ++t) {
                   int row = t / 4, col = 2 * (t % 4);
                   unsigned short lo, hi;
                   if (!trans) {
                     const void* p = reinterpret_cast<const void*>(i[8 * m + row][0]);
                     lo = load16(p, col);
                     hi = load16(p, col + 1);
                   } else {
                     lo = load16(reinterpret_cast<const void*>(i[8 * m + col][0]), row);
                     hi = load16(reinterpret_cast<const void*>(i[8 * m + col + 1][0]), row);
                   }
                   o[t][m] = static_cast<u64>(lo) | (static_cast<u64>(hi) << 16);
                 }
             });
  for (int m = 0; m < count; ++m) r[m] = static_cast<u32>(out[m]);
}

inline float half_bits_to_float(unsigned short bits, bool bf16) {
  if (bf16) {
    u32 w = static_cast<u32>(bits) << 16;
    float f;
    std::memcpy(&f, &w, 4);
    return f;
  }
  __half h;
  std::memcpy(&h, &bits, 2);
  return __half2float(h);
}

/// mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}: with g = lane/4, t = lane%4, A holds
/// a0 = (g, 2t..2t+1), a1 = (g+8, 2t..), a2 = (g, 2t+8..), a3 = (g+8, 2t+8..); B holds
/// b0 = (k 2t..2t+1, n g), b1 = (k 2t+8.., n g); C/D hold (g, 2t..2t+1) and (g+8, 2t..2t+1).
inline void mma_16816(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2], bool bf16) {
  u64 in[8];
  for (int i = 0; i < 4; ++i) in[i] = a[i];
  in[4] = b[0];
  in[5] = b[1];
  for (int i = 0; i < 4; ++i) {
    u32 bits;
    std::memcpy(&bits, &d[i], 4);
    in[6 + i / 2] = (i % 2 == 0) ? bits : (in[6 + i / 2] | (static_cast<u64>(bits) << 32));
  }
  u64 out[2];
  collective(Collective::Mma, bf16 ? 1 : 0, in, 8, out, 2, [bf16](u64(*i)[8], u64(*o)[8]) {
    float A[16][16], B[16][8], C[16][8];
    auto lo = [](u64 w) { return static_cast<unsigned short>(w & 0xffff); };
    auto hi = [](u64 w) { return static_cast<unsigned short>((w >> 16) & 0xffff); };
    auto f32 = [](u64 w, int which) {
      u32 bits = static_cast<u32>(which ? (w >> 32) : w);
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    };
    for (int l = 0; l < 32; ++l) {
      int g = l / 4, t = l % 4;
      const int rows[4] = {g, g + 8, g, g + 8};
      const int cols[4] = {2 * t, 2 * t, 2 * t + 8, 2 * t + 8};
      for (int r = 0; r < 4; ++r) {
        A[rows[r]][cols[r]] = half_bits_to_float(lo(i[l][r]), bf16);
        A[rows[r]][cols[r] + 1] = half_bits_to_float(hi(i[l][r]), bf16);
      }
      B[2 * t][g] = half_bits_to_float(lo(i[l][4]), bf16);
      B[2 * t + 1][g] = half_bits_to_float(hi(i[l][4]), bf16);
      B[2 * t + 8][g] = half_bits_to_float(lo(i[l][5]), bf16);
      B[2 * t + 9][g] = half_bits_to_float(hi(i[l][5]), bf16);
      C[g][2 * t] = f32(i[l][6], 0);
      C[g][2 * t + 1] = f32(i[l][6], 1);
      C[g + 8][2 * t] = f32(i[l][7], 0);
      C[g + 8][2 * t + 1] = f32(i[l][7], 1);
    }
    float D[16][8];
    for (int m = 0; m < 16; ++m)
      for (int n = 0; n < 8; ++n) {
        float s = C[m][n];
        for (int k = 0; k < 16; ++k) s += A[m][k] * B[k][n];
        D[m][n] = s;
      }
    for (int l = 0; l < 32; ++l) {
      int g = l / 4, t = l % 4;
      u32 w[4];
      std::memcpy(&w[0], &D[g][2 * t], 4);
      std::memcpy(&w[1], &D[g][2 * t + 1], 4);
      std::memcpy(&w[2], &D[g + 8][2 * t], 4);
      std::memcpy(&w[3], &D[g + 8][2 * t + 1], 4);
      o[l][0] = w[0] | (static_cast<u64>(w[1]) << 32);
      o[l][1] = w[2] | (static_cast<u64>(w[3]) << 32);
    }
  });
  for (int i = 0; i < 2; ++i) {
    u32 w0 = static_cast<u32>(out[i]), w1 = static_cast<u32>(out[i] >> 32);
    std::memcpy(&d[2 * i], &w0, 4);
    std::memcpy(&d[2 * i + 1], &w1, 4);
  }
}

inline void cp_async_issue(void* dst, const void* src, int bytes, int src_bytes = -1) {
  if (src_bytes < 0) src_bytes = bytes;
  if (src_bytes > bytes) fail("cp.async src-size larger than the copy");
  if (src_bytes > 0) check_access(src, src_bytes);
  check_aligned(src, bytes);
  check_aligned(dst, bytes);
  Fiber& f = current_fiber();
  f.pending.push_back({dst, src, bytes, src_bytes, f.committed});
}
inline void cp_async_commit() {
  current_fiber().committed++;
}
inline void cp_async_wait(int n) {
  Fiber& f = current_fiber();
  long limit = f.committed - n;  // groups with index < limit must have landed
  std::vector<Copy> keep;
  for (const Copy& c : f.pending) {
    if (c.group < limit) {
      std::memcpy(c.dst, c.src, c.src_bytes);
      std::memset(static_cast<unsigned char*>(c.dst) + c.src_bytes, 0, c.bytes - c.src_bytes);
    } else
      keep.push_back(c);
  }
  f.pending.swap(keep);
}

inline void copy_bytes(void* dst, const void* src, unsigned long long bytes) {
  std::memmove(dst, src, bytes);
}

inline float expf_host(float x) {
  return std::exp(x);
}

// ---- wgmma.mma_async (sm_90a) ----

/// The shared-state-space address of p: its offset from the block's shared memory.
inline u32 shared_address(const void* p) {
  Block* b = current_block();
  const unsigned char* q = static_cast<const unsigned char*>(p);
  if (q < b->smem || q >= b->smem + b->smem_bytes) fail("a shared address outside shared memory");
  return static_cast<u32>(q - b->smem);
}

/// The byte offset of element (k, n) of a B operand of k16 described by a matrix descriptor, in
/// the canonical layouts of the PTX ISA ("Shared Memory Matrix Layout"), before the swizzle.
/// Units of 16 bytes (T = 8 elements of 16 bits); W = the swizzle atom's width in 16-byte units
/// (1 without swizzle, 2 / 4 / 8 for 32 / 64 / 128 bytes):
///   K-major  (trans-b 0), swizzled: ((8,n),2):((W,SBO),1)   unswizzled: ((8,n),2):((1,SBO),LBO)
///   MN-major (trans-b 1), swizzled: ((W,n),(8,k)):((1,LBO),(W,SBO))
///                       unswizzled: ((1,n),(8,k)):((X,SBO),(1,LBO))
/// (the first mode indexes N in 16-byte chunks for MN-major and N rows for K-major; the second
/// indexes K in 16-byte chunks for K-major and K rows for MN-major).
inline u32 wgmma_b_offset(int k, int n, bool mn_major, int w, u32 lbo, u32 sbo) {
  if (!mn_major) {
    const u32 kin = static_cast<u32>(k % 8) * 2;
    if (w > 1) return (n % 8) * w * 16 + (n / 8) * sbo + (k / 8) * 16 + kin;
    return (n % 8) * 16 + (n / 8) * sbo + (k / 8) * lbo + kin;
  }
  const u32 nin = static_cast<u32>(n % 8) * 2;
  const int chunk = n / 8;
  if (w > 1)
    return nin + (chunk % w) * 16 + (chunk / w) * lbo + (k % 8) * w * 16 + (k / 8) * sbo;
  return nin + chunk * sbo + (k % 8) * 16 + (k / 8) * lbo;
}

/// The swizzle of the descriptor's layout type applied to a shared address: bits 4.. of the
/// 16-byte chunk XORed with bits 7.. (3 bits for 128 bytes, 2 for 64, 1 for 32).
inline u32 wgmma_swizzle(u32 addr, int w) {
  const u32 mask = static_cast<u32>(w - 1);
  return addr ^ (((addr >> 7) & mask) << 4);
}

/// wgmma.fence.sync.aligned: orders this thread's register accesses before the wgmma ops
/// that follow.
inline void wgmma_fence() {
  current_fiber().wg_fenced = true;
}

/// wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16,bf16}.{f16,bf16} d, a, b-desc, scale-d, 1, 1,
/// trans-b: D = A · B + (scale_d ? D : 0) for the warpgroup's 64 × N tile. A from registers:
/// warp w of the warpgroup supplies rows 16w … 16w+15 in the m16n8k16 A layout (g = lane / 4,
/// t = lane % 4: a0 = (g, 2t..2t+1), a1 = (g+8, 2t..), a2 = (g, 2t+8..), a3 = (g+8, 2t+8..)).
/// D: thread holds d[4j + i] = row 16w + g + 8(i / 2), column 8j + 2t + (i % 2). B: [16][N]
/// through the descriptor (trans_b: MN-major). Asynchronous: d is written by the wgmma_wait
/// that retires the op; until then it holds NaN. A later wgmma on the same d (before the wait)
/// accumulates onto the pending result, as the hardware chains accumulators.
inline void wgmma(float* d, int n, const u32 (&a)[4], u64 desc, bool trans_b, bool bf16,
                  bool scale_d) {
  Block* b = current_block();
  Fiber& f = current_fiber();
  const int tid = linear_tid();
  if (n < 8 || n > 256 || n % 8 != 0) fail("wgmma: N must be a multiple of 8 in 8..256");
  if (f.wg_pending.empty() && !f.wg_fenced) fail("wgmma.mma_async without a preceding wgmma.fence");
  if (tid / 128 >= static_cast<int>(b->warpgroups.size()))
    fail("wgmma: the block has no whole warpgroup for this thread");
  WarpGroup& wg = b->warpgroups[tid / 128];
  const int slot = tid % 128;
  const u64 variant = static_cast<u64>(n) | (trans_b ? 1ull << 16 : 0) | (bf16 ? 1ull << 17 : 0) |
                      (scale_d ? 1ull << 18 : 0);
  if (wg.arrived == 0) {
    wg.variant = variant;
    wg.desc = desc;
  } else if (wg.variant != variant) {
    fail("threads of one warpgroup reached different wgmma instructions");
  } else if (wg.desc != desc) {
    fail("wgmma: the B descriptor differs across the warpgroup");
  }
  // The accumulator input: a pending op on the same registers chains onto its result.
  const float* c = d;
  for (auto it = f.wg_pending.rbegin(); it != f.wg_pending.rend(); ++it)
    if (it->d == d) {
      if (it->op->n != n) fail("wgmma: chained ops on one accumulator with different N");
      c = &it->op->d[static_cast<size_t>(it->slot) * (n / 2)];
      break;
    }
  for (int i = 0; i < n / 2; ++i) wg.c[slot][i] = scale_d ? c[i] : 0.0f;
  for (int i = 0; i < 4; ++i) wg.a[slot][i] = a[i];
  for (int i = 0; i < n / 2; ++i) d[i] = std::nanf("");  // undefined until the wait
  unsigned gen = wg.gen;
  b->progress++;
  if (++wg.arrived == 128) {
    auto op = std::make_shared<WgmmaOp>();
    op->n = n;
    // Decode the descriptor (PTX ISA "Matrix Descriptor Format").
    const u32 start = static_cast<u32>(desc & 0x3fff) << 4;
    const u32 lbo = static_cast<u32>((desc >> 16) & 0x3fff) << 4;
    const u32 sbo = static_cast<u32>((desc >> 32) & 0x3fff) << 4;
    const int base_offset = static_cast<int>((desc >> 49) & 7);
    const int layout = static_cast<int>(desc >> 62);
    const int w = layout == 1 ? 8 : layout == 2 ? 4 : layout == 3 ? 2 : 1;
    if (base_offset != 0) fail("wgmma: a matrix base offset other than 0 is not modelled");
    static float A[64][16], B[16][256];
    for (int s = 0; s < 128; ++s) {
      const int wr = s / 32, l = s % 32, g = l / 4, t = l % 4;
      const int rows[4] = {g, g + 8, g, g + 8};
      const int cols[4] = {2 * t, 2 * t, 2 * t + 8, 2 * t + 8};
      for (int r = 0; r < 4; ++r) {
        A[16 * wr + rows[r]][cols[r]] =
            half_bits_to_float(static_cast<unsigned short>(wg.a[s][r] & 0xffff), bf16);
        A[16 * wr + rows[r]][cols[r] + 1] =
            half_bits_to_float(static_cast<unsigned short>(wg.a[s][r] >> 16), bf16);
      }
    }
    for (int k = 0; k < 16; ++k)
      for (int j = 0; j < n; ++j) {
        const u32 addr = wgmma_swizzle(start + wgmma_b_offset(k, j, trans_b, w, lbo, sbo), w);
        if (addr % 2 != 0 || addr + 2 > b->smem_bytes)
          fail("wgmma: the B operand lies outside shared memory");
        const unsigned char* p = b->smem + addr;
        const unsigned short bits = load16(p, 0);
        op->b_reads.push_back({p, bits});
        B[k][j] = half_bits_to_float(bits, bf16);
      }
    op->d.assign(static_cast<size_t>(128) * (n / 2), 0.0f);
    for (int s = 0; s < 128; ++s) {
      const int wr = s / 32, l = s % 32, g = l / 4, t = l % 4;
      for (int i = 0; i < n / 2; ++i) {
        const int row = 16 * wr + g + 8 * ((i % 4) / 2), col = 8 * (i / 4) + 2 * t + (i % 2);
        float acc = wg.c[s][i];
        for (int k = 0; k < 16; ++k) acc += A[row][k] * B[k][col];
        op->d[static_cast<size_t>(s) * (n / 2) + i] = acc;
      }
    }
    wg.op = op;
    wg.arrived = 0;
    wg.gen++;
  } else {
    while (wg.gen == gen) yield();
  }
  f.wg_pending.push_back({wg.op, d, slot, f.wg_committed});
}

/// wgmma.commit_group.sync.aligned: the ops issued since the last commit form one group.
inline void wgmma_commit() {
  current_fiber().wg_committed++;
}

/// wgmma.wait_group.sync.aligned n: retires the ops of all but the newest n committed groups:
/// their D registers receive the product. Once no op is in flight, the next wgmma needs a
/// wgmma_fence again (registers may have been written in between).
inline void wgmma_wait(int n) {
  Fiber& f = current_fiber();
  const long limit = f.wg_committed - n;
  std::vector<WgmmaPending> keep;
  for (const WgmmaPending& p : f.wg_pending) {
    if (p.group >= limit) {
      keep.push_back(p);
      continue;
    }
    if (!p.op->checked) {
      for (const auto& r : p.op->b_reads)
        if (load16(r.first, 0) != r.second)
          fail("wgmma: shared memory read by an in-flight wgmma was written before its wait");
      p.op->checked = true;
    }
    const int h = p.op->n / 2;
    for (int i = 0; i < h; ++i) p.d[i] = p.op->d[static_cast<size_t>(p.slot) * h + i];
  }
  f.wg_pending.swap(keep);
  if (f.wg_pending.empty()) f.wg_fenced = false;
}

inline void fiber_entry() {
  Block* b = current_block();
  b->body();
  if (!b->fibers[b->current].wg_pending.empty()) fail("a thread exits with wgmma ops in flight");
  b->fibers[b->current].done = true;
  b->progress++;
  swapcontext(&b->fibers[b->current].ctx, &b->scheduler);
}

/// Runs body() as every thread of every block of the grid, blocks in order x, y, z.
inline void launch(dim3 grid, dim3 block, size_t smem_bytes, std::function<void()> body) {
  int nthreads = static_cast<int>(block.x * block.y * block.z);
  if (nthreads % 32 != 0) fail("block size must be a multiple of 32");
  // Shared memory starts 1024-byte aligned (the period of the 128-byte wgmma swizzle).
  std::vector<unsigned char> smem_store(smem_bytes + 16 + 1024);
  unsigned char* smem_base = smem_store.data() + (1024 - reinterpret_cast<unsigned long long>(
                                                             smem_store.data()) % 1024) % 1024;
  std::vector<std::vector<unsigned char>> stacks(
      nthreads, std::vector<unsigned char>(settings().stack_bytes));
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx) {
        Block b;
        b.idx = make_uint3(bx, by, bz);
        b.dim = block;
        b.nthreads = nthreads;
        std::memset(smem_base, 0xff, smem_bytes + 16);
        b.smem = smem_base;
        b.smem_bytes = smem_bytes + 16;
        b.fibers.resize(nthreads);
        b.warps.resize(nthreads / 32);
        b.warpgroups.resize(nthreads / 128);
        b.body = body;
        current_block() = &b;
        for (int t = 0; t < nthreads; ++t) {
          Fiber& f = b.fibers[t];
          f.idx = make_uint3(t % block.x, (t / block.x) % block.y, t / (block.x * block.y));
          getcontext(&f.ctx);
          f.ctx.uc_stack.ss_sp = stacks[t].data();
          f.ctx.uc_stack.ss_size = stacks[t].size();
          f.ctx.uc_link = nullptr;
          makecontext(&f.ctx, fiber_entry, 0);
        }
        for (;;) {
          bool all_done = true;
          long before = b.progress;
          for (int k = 0; k < nthreads; ++k) {
            int t = settings().reverse ? nthreads - 1 - k : k;
            if (b.fibers[t].done) continue;
            all_done = false;
            b.current = t;
            swapcontext(&b.scheduler, &b.fibers[t].ctx);
          }
          if (all_done) break;
          if (b.progress == before)
            fail("deadlock: threads wait at a barrier or warp collective that others never reach");
        }
        current_block() = nullptr;
      }
}

// Streams (runtime/strata_rt/streams.cuh). Outside a StreamFork every launch, gemm and copy
// runs when it is enqueued. Inside one, each of the fork's streams has a queue; nothing runs
// until a wait or the end forces it, so work runs as late as the plan's events allow and a
// consumer that does not wait for its producer runs first. At the end the queues run in stream
// order (settings().reverse: the last side stream first, the caller's stream last), so a
// missing wait in either direction between the caller's stream and a side stream is caught by
// one of the two orders.

/// A point in a stream's queue: an event's record.
struct StreamMark {
  int queue;
  size_t pos;
};

struct StreamQueues {
  bool active = false;
  std::vector<cudaStream_t> streams;
  std::vector<std::vector<std::function<void()>>> items;
  std::vector<size_t> done;
};
inline StreamQueues& stream_queues() {
  static StreamQueues q;
  return q;
}

inline void streams_begin(const std::vector<cudaStream_t>& streams) {
  StreamQueues& q = stream_queues();
  if (q.active) fail("a launch with streams inside another");
  q.active = true;
  q.streams = streams;
  q.items.assign(streams.size(), {});
  q.done.assign(streams.size(), 0);
}

/// Runs queue `k` up to position `pos`.
inline void stream_run(int k, size_t pos) {
  StreamQueues& q = stream_queues();
  while (q.done[k] < pos) {
    std::function<void()> f = q.items[k][q.done[k]++];
    f();
  }
}

/// Enqueues f on `stream` (runs it now outside a StreamFork).
inline void enqueue(cudaStream_t stream, std::function<void()> f) {
  StreamQueues& q = stream_queues();
  if (!q.active) {
    f();
    return;
  }
  for (size_t k = 0; k < q.streams.size(); ++k)
    if (q.streams[k] == stream) {
      q.items[k].push_back(std::move(f));
      return;
    }
  fail("a launch on a stream that is neither the caller's nor one of the side streams");
}

/// The current end of queue k (an event recorded there).
inline StreamMark stream_mark(int k) {
  return StreamMark{k, stream_queues().items[k].size()};
}

/// Queue k waits for `m`: when it gets there, m's queue runs up to m.
inline void stream_wait(int k, StreamMark m) {
  stream_queues().items[k].push_back([m] { stream_run(m.queue, m.pos); });
}

/// Runs every queue to its end; fails when a side stream's work was not ordered before the end
/// of the caller's stream (queue 0) by its waits.
inline void streams_end() {
  StreamQueues& q = stream_queues();
  const int n = static_cast<int>(q.items.size());
  std::vector<size_t> joined(n);
  if (settings().reverse) {
    for (int k = n - 1; k > 0; --k) stream_run(k, q.items[k].size());
    stream_run(0, q.items[0].size());
  } else {
    stream_run(0, q.items[0].size());
    for (int k = 1; k < n; ++k) joined[k] = q.done[k];
    for (int k = 1; k < n; ++k) stream_run(k, q.items[k].size());
  }
  q.active = false;
  if (!settings().reverse)
    for (int k = 1; k < n; ++k)
      if (joined[k] != q.items[k].size())
        fail("a side stream's launches are not joined to the caller's stream");
}

}  // namespace emu
}  // namespace strata_rt

/// The CUDA built-ins seen by emulated device code.
#define threadIdx (::strata_rt::emu::current_fiber().idx)
#define blockIdx (::strata_rt::emu::current_block()->idx)
#define blockDim (::strata_rt::emu::current_block()->dim)
inline void __syncthreads() {
  ::strata_rt::emu::syncthreads();
}

/// Dynamic shared memory of the running block.
#define STRATA_RT_EMU_SMEM (::strata_rt::emu::current_block()->smem)
