// The wgmma probe of tests/wgmma_emulation_test.cc: runs wgmma on the CPU emulator
// (runtime/strata_rt/emulate.h) and compares it with a plain triple loop. Compiled as host C++
// with -DSTRATA_RT_EMULATE.
//   probe instr N MAJOR SWIZZLE BF16 KSTEP SCALE_D   one wgmma.mma_async (emu::wgmma) with a B
//       laid out independently of the emulator's decoding (MAJOR k or mn; SWIZZLE 128 or 0)
//   probe misuse WHAT       nofence | early | overwrite | exit: a wrong program the emulator
//       must catch (abort) or expose (NaN; prints "nan")
//   probe runtime VARIANT N K MAJOR BF16 KLIMIT     strata_rt::warpgroup_mma{,_rega,_chained}
//       (VARIANT smem | rega | chained) of a 64·2-row block tile against the triple loop; a B
//       whose stored rows (N for MN-major, K for K-major) are wider than 64 halves is stored
//       as 64-column atoms (MmaSpec's AB)
// Prints "ok" and exits 0 when the results match.
#include "strata_rt/strata_rt.cuh"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using strata_rt::u32;
using strata_rt::u64;

namespace {

bool g_bf16 = false;

unsigned short to_bits(float f) {
  unsigned short b;
  if (g_bf16) {
    __nv_bfloat16 h = __float2bfloat16_rn(f);
    std::memcpy(&b, &h, 2);
  } else {
    __half h = __float2half_rn(f);
    std::memcpy(&b, &h, 2);
  }
  return b;
}

/// Small multiples of 1/4: every product and sum below is exact in f32.
std::vector<float> random_matrix(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(static_cast<int>(rng() % 9) - 4) / 4.0f;
  return v;
}

void put16(unsigned char* p, float v) {
  const unsigned short b = to_bits(v);
  std::memcpy(p, &b, 2);
}

u32 pack(float lo, float hi) {
  return static_cast<u32>(to_bits(lo)) | (static_cast<u32>(to_bits(hi)) << 16);
}

/// The m16n8k16 A fragment of rows row0 … row0 + 15, columns k0 … k0 + 15 of A (ld columns).
void a_fragment(const std::vector<float>& A, int ld, int row0, int k0, int lane, u32 (&a)[4]) {
  const int g = lane / 4, t = lane % 4;
  auto at = [&](int r, int c) { return A[(row0 + r) * ld + k0 + c]; };
  a[0] = pack(at(g, 2 * t), at(g, 2 * t + 1));
  a[1] = pack(at(g + 8, 2 * t), at(g + 8, 2 * t + 1));
  a[2] = pack(at(g, 2 * t + 8), at(g, 2 * t + 9));
  a[3] = pack(at(g + 8, 2 * t + 8), at(g + 8, 2 * t + 9));
}

int compare(const std::vector<float>& got, const std::vector<double>& want) {
  int bad = 0;
  for (size_t i = 0; i < want.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= 1e-3 * (1 + std::fabs(want[i])))) {
      if (bad < 5) std::fprintf(stderr, "element %zu: got %g want %g\n", i, got[i], want[i]);
      ++bad;
    }
  if (bad) {
    std::fprintf(stderr, "%d of %zu elements differ\n", bad, want.size());
    return 1;
  }
  std::printf("ok\n");
  return 0;
}

constexpr int kBase = 1024;  // the B tile's offset in shared memory

/// Writes B [16][N] (k-step `kstep` of a wider K for a K-major 128-byte row) into shared memory
/// at kBase as the hardware expects it, and returns its descriptor. Independent of the
/// emulator's canonical-layout decoding: the swizzled layouts are written with strata's
/// swizzle_col convention on 128-byte rows.
u64 write_b(unsigned char* smem, const std::vector<float>& B, int n, bool kmajor, int swizzle,
            int kstep) {
  u64 lbo = 0, sbo = 0, layout = 0;
  for (int k = 0; k < 16; ++k)
    for (int j = 0; j < n; ++j) {
      size_t off;
      if (swizzle == 128 && kmajor) {
        const int c = kstep * 16 + k;  // row j holds 64 values of K
        off = j * 128 + 2 * (c ^ ((j & 7) << 3));
      } else if (swizzle == 128) {
        const int atom = j / 64, c = j % 64;  // 64-column atoms of 16 rows, 2048 bytes apart
        off = atom * 2048 + k * 128 + 2 * (c ^ ((k & 7) << 3));
      } else if (kmajor) {  // 8 × 16-byte core matrices: 8-row groups 256 B, k halves 128 B
        off = (j / 8) * 256 + (k / 8) * 128 + (j % 8) * 16 + (k % 8) * 2;
      } else {  // core matrices of 8 k-rows of 8 columns: column chunks 256 B, k halves 128 B
        off = (j / 8) * 256 + (k / 8) * 128 + (k % 8) * 16 + (j % 8) * 2;
      }
      put16(smem + kBase + off, B[k * n + j]);
    }
  u64 start = kBase;
  if (swizzle == 128) {
    layout = 1;
    sbo = 1024;
    lbo = kmajor ? 16 : 2048;
    if (kmajor) start += 32 * kstep;
  } else {
    layout = 0;
    lbo = 128;
    sbo = 256;
  }
  return (start >> 4) | ((lbo >> 4) << 16) | ((sbo >> 4) << 32) | (layout << 62);
}

int instr(int n, bool kmajor, int swizzle, int kstep, bool scale_d) {
  const std::vector<float> A = random_matrix(128 * 16, 1), B = random_matrix(16 * n, 2),
                           C = random_matrix(128 * n, 3);
  std::vector<float> D(128 * n, -1.0f);
  const int smem_bytes = kBase + 256 * 128 + 4096;  // K-major: N rows of 128 bytes
  strata_rt::emu::launch(dim3(1), dim3(256), smem_bytes, [&] {
    unsigned char* smem = STRATA_RT_EMU_SMEM;
    const int tid = threadIdx.x;
    static u64 desc;
    if (tid == 0) desc = write_b(smem, B, n, kmajor, swizzle, kstep);
    __syncthreads();
    const int wg = tid / 128, w = (tid / 32) % 4, lane = tid % 32, g = lane / 4, t = lane % 4;
    const int row0 = 64 * wg + 16 * w;
    u32 a[4];
    a_fragment(A, 16, row0, 0, lane, a);
    std::vector<float> d(n / 2);
    for (int i = 0; i < n / 2; ++i) {
      const int r = row0 + g + 8 * ((i % 4) / 2), c = 8 * (i / 4) + 2 * t + (i % 2);
      d[i] = C[r * n + c];
    }
    strata_rt::emu::wgmma_fence();
    strata_rt::emu::wgmma(d.data(), n, a, desc, !kmajor, g_bf16, scale_d);
    strata_rt::emu::wgmma_commit();
    strata_rt::emu::wgmma_wait(0);
    for (int i = 0; i < n / 2; ++i) {
      const int r = row0 + g + 8 * ((i % 4) / 2), c = 8 * (i / 4) + 2 * t + (i % 2);
      D[r * n + c] = d[i];
    }
  });
  std::vector<double> want(128 * n);
  for (int r = 0; r < 128; ++r)
    for (int c = 0; c < n; ++c) {
      double s = scale_d ? C[r * n + c] : 0.0;
      for (int k = 0; k < 16; ++k) s += static_cast<double>(A[r * 16 + k]) * B[k * n + c];
      want[r * n + c] = s;
    }
  return compare(D, want);
}

int misuse(const std::string& what) {
  const int n = 16;
  const std::vector<float> A = random_matrix(64 * 16, 1), B = random_matrix(16 * n, 2);
  bool saw_nan = false;
  strata_rt::emu::launch(dim3(1), dim3(128), kBase + 8192, [&] {
    unsigned char* smem = STRATA_RT_EMU_SMEM;
    const int tid = threadIdx.x;
    static u64 desc;
    if (tid == 0) desc = write_b(smem, B, n, true, 128, 0);
    __syncthreads();
    u32 a[4];
    a_fragment(A, 16, 16 * (tid / 32), 0, tid % 32, a);
    float d[n / 2] = {};
    if (what != "nofence") strata_rt::emu::wgmma_fence();
    strata_rt::emu::wgmma(d, n, a, desc, false, g_bf16, true);
    strata_rt::emu::wgmma_commit();
    if (what == "early" && std::isnan(d[0])) saw_nan = true;
    if (what == "overwrite" && tid == 0) put16(smem + kBase, 3.0f);
    __syncthreads();
    if (what == "exit") return;
    strata_rt::emu::wgmma_wait(0);
  });
  if (saw_nan) std::printf("nan\n");
  return 0;
}

template <class T, int N, int K, bool TB, int VARIANT>
int runtime_case(int klimit) {
  // Two warpgroups of 64 rows; A [128][K] unswizzled with ld K + 8; B swizzled 128-byte rows,
  // in atoms of 64 columns AB elements apart when its stored rows are wider.
  constexpr int M = 128, LDA = K + 8;
  constexpr int ROWS = TB ? N : K, WIDTH = TB ? K : N, ATOMS = WIDTH > 64 ? WIDTH / 64 : 1;
  constexpr int AB = ATOMS > 1 ? ROWS * 64 : 0;
  using S = strata_rt::MmaSpec<1, M, N, K, LDA, 0, false, 64, 0, true, false, TB, N, AB>;
  const std::vector<float> A = random_matrix(M * K, 5), B = random_matrix(K * N, 6);
  std::vector<float> D(M * N, -1.0f);
  constexpr int kA = kBase + ROWS * 128 * ATOMS;  // B at kBase, A after it
  strata_rt::emu::launch(dim3(1), dim3(256), kA + M * LDA * 2, [&] {
    unsigned char* smem = STRATA_RT_EMU_SMEM;
    T* a = reinterpret_cast<T*>(smem + kA);
    T* b = reinterpret_cast<T*>(smem + kBase);
    const int tid = threadIdx.x;
    for (int e = tid; e < M * K; e += 256)
      put16(reinterpret_cast<unsigned char*>(a + (e / K) * LDA + e % K), A[e]);
    for (int e = tid; e < K * N; e += 256) {
      const int k = e / N, j = e % N;
      const int r = TB ? j : k, c = TB ? k : j;
      put16(reinterpret_cast<unsigned char*>(b + (c / 64) * AB + r * 64 +
                                             strata_rt::swizzle_col<true>(r, c % 64)),
            B[e]);
    }
    __syncthreads();
    const int warp = tid / 32, lane = tid % 32;
    float acc[1][N / 8][4];
    strata_rt::mma_zero(acc);
    if constexpr (VARIANT == 0) {
      if (klimit < K)
        strata_rt::warpgroup_mma<S, T, N / 8, true>(a, b, acc, warp, 0, klimit);
      else
        strata_rt::warpgroup_mma<S, T, N / 8>(a, b, acc, warp, 0);
    } else if constexpr (VARIANT == 1) {
      u32 af[1][K / 16][4];
      strata_rt::warp_load_a<S, T, 1>(a, af, warp);
      strata_rt::warpgroup_mma_rega<S, T, N / 8>(af, b, acc, warp, 0);
    } else {
      // A as the f32 C fragments of a previous product over K / 8 column tiles.
      float c[1][K / 8][4];
      const int g = lane / 4, t = lane % 4;
      for (int j = 0; j < K / 8; ++j)
        for (int e = 0; e < 4; ++e)
          c[0][j][e] = A[(16 * warp + g + 8 * (e / 2)) * K + 8 * j + 2 * t + e % 2];
      strata_rt::warpgroup_mma_chained<S, T, N / 8>(c, b, acc, warp, 0);
    }
    strata_rt::mma_epilogue<S, 1, N / 8>(acc, warp, 0, [&](int, int r, int c, float v0, float v1) {
      D[r * N + c] = v0;
      D[r * N + c + 1] = v1;
    });
  });
  std::vector<double> want(M * N);
  for (int r = 0; r < M; ++r)
    for (int c = 0; c < N; ++c) {
      double s = 0;
      for (int k = 0; k < klimit; ++k) s += static_cast<double>(A[r * K + k]) * B[k * N + c];
      want[r * N + c] = s;
    }
  return compare(D, want);
}

template <class T>
int runtime_dispatch(const std::string& v, int n, int k, bool kmajor, int klimit) {
  const int variant = v == "smem" ? 0 : v == "rega" ? 1 : 2;
#define STRATA_PROBE_CASE(NN, KK, TB)                                                \
  if (n == NN && k == KK && kmajor == TB) {                                          \
    if (variant == 0) return runtime_case<T, NN, KK, TB, 0>(klimit);                 \
    if (variant == 1) return runtime_case<T, NN, KK, TB, 1>(klimit);                 \
    return runtime_case<T, NN, KK, TB, 2>(klimit);                                   \
  }
  STRATA_PROBE_CASE(64, 64, false)
  STRATA_PROBE_CASE(32, 64, false)
  STRATA_PROBE_CASE(8, 32, false)
  STRATA_PROBE_CASE(64, 256, false)
  STRATA_PROBE_CASE(64, 64, true)
  STRATA_PROBE_CASE(128, 64, true)
  STRATA_PROBE_CASE(256, 32, true)
  STRATA_PROBE_CASE(8, 16, true)
  STRATA_PROBE_CASE(128, 64, false)  // B in atoms: 2 (MN-major, one m64n64k16 per atom)
  STRATA_PROBE_CASE(256, 32, false)  // 4 atoms
  STRATA_PROBE_CASE(64, 128, true)   // 2 atoms (K-major: the k-step picks the atom)
  STRATA_PROBE_CASE(128, 256, true)  // 4 atoms
#undef STRATA_PROBE_CASE
  std::fprintf(stderr, "no such runtime case\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const std::string mode = argv[1];
  if (mode == "instr" && argc == 8) {
    g_bf16 = std::atoi(argv[5]) != 0;
    return instr(std::atoi(argv[2]), std::string(argv[3]) == "k", std::atoi(argv[4]),
                 std::atoi(argv[6]), std::atoi(argv[7]) != 0);
  }
  if (mode == "misuse" && argc == 3) return misuse(argv[2]);
  if (mode == "runtime" && argc == 8) {
    g_bf16 = std::atoi(argv[6]) != 0;
    const int n = std::atoi(argv[3]), k = std::atoi(argv[4]), klimit = std::atoi(argv[7]);
    const bool kmajor = std::string(argv[5]) == "k";
    return g_bf16 ? runtime_dispatch<__nv_bfloat16>(argv[2], n, k, kmajor, klimit)
                  : runtime_dispatch<__half>(argv[2], n, k, kmajor, klimit);
  }
  std::fprintf(stderr, "usage: see the file comment\n");
  return 2;
}
