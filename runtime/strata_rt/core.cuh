// strata device runtime: element types, conversions and portability macros.
//
// Contract for every header under runtime/strata_rt/: includable from code compiled by nvcc or
// NVRTC (no host-only headers, no C++ standard library), and from host C++ when
// STRATA_RT_EMULATE is defined (the CPU emulator of runtime/strata_rt/emulate.h, used by the
// tests). Generated code includes "strata_rt/strata_rt.cuh" with the runtime directory on the
// include path (-I <repo>/runtime).
#pragma once

#if defined(STRATA_RT_EMULATE)
#include "strata_rt/emulate.h"
#endif

#include <cuda_bf16.h>
#include <cuda_fp16.h>

/// Every runtime function is a force-inlined device function.
#define STRATA_DEVICE __device__ __forceinline__

/// Declares `name`, the block's dynamic shared memory (128-byte aligned).
#if defined(STRATA_RT_EMULATE)
#define STRATA_RT_DYNAMIC_SMEM(name) unsigned char* name = STRATA_RT_EMU_SMEM
#else
#define STRATA_RT_DYNAMIC_SMEM(name) extern __shared__ __align__(128) unsigned char name[]
#endif

namespace strata_rt {

typedef unsigned int u32;
typedef unsigned long long u64;

/// Type equality (the runtime avoids <type_traits> so that NVRTC needs no standard headers).
template <class A, class B>
struct is_same {
  static constexpr bool value = false;
};
template <class A>
struct is_same<A, A> {
  static constexpr bool value = true;
};

/// Widens a stored element to the f32 compute type.
STRATA_DEVICE float to_f32(float x) {
  return x;
}
STRATA_DEVICE float to_f32(__half x) {
  return __half2float(x);
}
STRATA_DEVICE float to_f32(__nv_bfloat16 x) {
  return __bfloat162float(x);
}

/// Narrows an f32 value to the storage type T (round to nearest even).
template <class T>
STRATA_DEVICE T from_f32(float x);
template <>
STRATA_DEVICE float from_f32<float>(float x) {
  return x;
}
template <>
STRATA_DEVICE __half from_f32<__half>(float x) {
  return __float2half_rn(x);
}
template <>
STRATA_DEVICE __nv_bfloat16 from_f32<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

/// Stores two adjacent elements p[0] = a, p[1] = b. For 16-bit types p must be 4-byte aligned
/// and the pair is written with one 32-bit store.
STRATA_DEVICE void store2(float* p, float a, float b) {
  p[0] = a;
  p[1] = b;
}
STRATA_DEVICE void store2(__half* p, float a, float b) {
  *reinterpret_cast<__half2*>(p) = __floats2half2_rn(a, b);
}
STRATA_DEVICE void store2(__nv_bfloat16* p, float a, float b) {
  *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(a, b);
}

/// −∞ in f32: the identity of max reductions (op_table.def, the reduction family).
STRATA_DEVICE float neg_inf() {
#if defined(STRATA_RT_EMULATE)
  return -__builtin_huge_valf();
#else
  return __int_as_float(0xff800000);
#endif
}

/// The smaller of two ints (present extents of ragged tiles; docs/codegen.md, "Ragged tiles").
STRATA_DEVICE int imin(int a, int b) {
  return a < b ? a : b;
}

/// Integer ceiling division for compile-time extents.
__host__ __device__ constexpr int ceil_div(int a, int b) {
  return (a + b - 1) / b;
}

/// The 16-byte-chunk XOR swizzle of a 16-bit tile whose rows are a multiple of 128 bytes:
/// element (r, c) of a row-major tile with row stride `ld` lives at r * ld + swizzle_col(r, c).
/// Chunks of 8 elements are permuted within each row by the low 3 bits of the row index, so the
/// 8 rows read by one ldmatrix phase hit 8 different bank groups. Identity when SW is false.
template <bool SW>
STRATA_DEVICE int swizzle_col(int r, int c) {
  if constexpr (SW) {
    return c ^ ((r & 7) << 3);
  } else {
    return c;
  }
}

}  // namespace strata_rt
