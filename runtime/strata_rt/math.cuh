// strata device runtime: the scalar arithmetic of every elementwise op
// (docs/mugraph-semantics.md §2.1), in f32.
//
// Generated code evaluates elementwise ops, thread graphs, fused epilogues and accumulator
// finalizers through these functions only, so the semantics of an op live in one place. The
// function of op `name` is op_<name>(tensor arguments…, the op's scalar attributes…) — the code
// generator derives the call from the op table:
//   exp(x), square(x) = x², sqrt(x), silu(x) = x / (1 + e^-x),
//   gelu(x) = 0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³))) (tanh approximation), relu(x) = max(x, 0),
//   sigmoid(x) = 1 / (1 + e^-x), tanh(x), log(x) (natural), mul_scalar(x, c) = c·x,
//   add_scalar(x, c) = x + c, clamp(x, lo, hi) = min(max(x, lo), hi), add, sub, mul, div,
//   pow(a, b) = a^b, maximum(a, b), minimum(a, b).
#pragma once

#include "strata_rt/core.cuh"

namespace strata_rt {

/// e^x. Uses the hardware exp2 approximation (relative error ~2^-21 for |x| < 80).
STRATA_DEVICE float op_exp(float x) {
#if defined(STRATA_RT_EMULATE)
  return emu::expf_host(x);
#else
  return __expf(x);
#endif
}
STRATA_DEVICE float op_square(float x) {
  return x * x;
}
STRATA_DEVICE float op_sqrt(float x) {
  return sqrtf(x);
}
/// 1 / x by the hardware approximation (rcp.approx.ftz.f32: at most 1 ulp off, no branch).
/// For divisors known to be ≥ 1 or +inf, where the correctly rounded reciprocal's range
/// fix-ups never apply but its slow-path branch still serializes the code around it.
STRATA_DEVICE float rcp_at_least_one(float x) {
#if defined(STRATA_RT_EMULATE)
  return 1.0f / x;
#else
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
#endif
}
/// x / (1 + e^-x), the divisor being ≥ 1 (+inf for x < -88: the result is then -0).
STRATA_DEVICE float op_silu(float x) {
  return x * rcp_at_least_one(1.0f + op_exp(-x));
}
STRATA_DEVICE float op_gelu(float x) {
  const float k = 0.7978845608028654f;  // √(2/π)
  return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}
STRATA_DEVICE float op_relu(float x) {
  return x > 0.0f ? x : 0.0f;
}
STRATA_DEVICE float op_sigmoid(float x) {
  return rcp_at_least_one(1.0f + op_exp(-x));
}
STRATA_DEVICE float op_tanh(float x) {
  return tanhf(x);
}
STRATA_DEVICE float op_log(float x) {
  return logf(x);
}
STRATA_DEVICE float op_mul_scalar(float x, float c) {
  return c * x;
}
STRATA_DEVICE float op_add_scalar(float x, float c) {
  return x + c;
}
STRATA_DEVICE float op_clamp(float x, float lo, float hi) {
  return fminf(fmaxf(x, lo), hi);
}
STRATA_DEVICE float op_maximum(float a, float b) {
  return fmaxf(a, b);
}
STRATA_DEVICE float op_minimum(float a, float b) {
  return fminf(a, b);
}
STRATA_DEVICE float op_add(float a, float b) {
  return a + b;
}
STRATA_DEVICE float op_sub(float a, float b) {
  return a - b;
}
STRATA_DEVICE float op_mul(float a, float b) {
  return a * b;
}
/// a / b as a times the correctly rounded reciprocal of b: within 1.5 ulp of a / b, the same
/// for zeros, infinities and NaNs, but infinite when 1 / b overflows (|b| < 2^-126, a
/// denormal divisor). A divisor shared by many elements (a row sum, a norm) then costs one
/// reciprocal instead of one full division per element; the compiler hoists it.
STRATA_DEVICE float op_div(float a, float b) {
#if defined(STRATA_RT_EMULATE)
  return a * (1.0f / b);
#else
  return a * __frcp_rn(b);
#endif
}
STRATA_DEVICE float op_pow(float a, float b) {
  return powf(a, b);
}

/// 1 / sqrt(mean + eps) for the RMS normalizers: rms_norm, accum_rms_ld
/// (x / sqrt(mean(x²) + eps)), mean = sum_squares / count.
STRATA_DEVICE float inv_rms(float sum_squares, float count, float eps = 0.0f) {
  return 1.0f / sqrtf(sum_squares / count + eps);
}

}  // namespace strata_rt
