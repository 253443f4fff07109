// Per-op arithmetic of the interpreters: the one place that switches on individual op kinds
// (docs/architecture.md). Everything else dispatches on the op table's category and algebra
// columns.
//
// An arithmetic ("Arith") is a value domain with the operations below; the executor and the
// tensor ops are templates over it. DoubleArith is the reference semantics in doubles; the
// verifier's finite-field arithmetic (src/verify/field_arith.h) is the other instance.
//
//   using Value;                               element type
//   Value zero(), from_int(int64_t), from_scalar(double)
//   Value add(a, b), sub(a, b), mul(a, b)
//   Value prepare_divisor(b, hints)            once per divisor element; then
//   Value div_prepared(a, prepared_b)          a / b
//   Value exp(x, lax)                          lax: x's exponent component is meaningful
//   Value opaque(kind, x, attrs), opaque2(kind, a, b)
//                                              ops with algebra Opaque (sqrt, silu, …, clamp,
//                                              pow, maximum, minimum); attrs carry clamp's bounds
//   Value max_identity(), max_premap(x), max_combine(a, b), max_finish(s)
//                                              max reductions (algebra Max): the reduction of
//                                              x_1..x_n is max_finish(⊕ max_premap(x_j)); ⊕ must
//                                              be associative and commutative
//   void matmul(A, lda, B, ldb, C, ldc, m, k, n, hints)   C = A·B on row-major blocks
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "strata/ir/op.h"

namespace strata::interp {

/// Static facts about one tensor that a domain may use to skip work. The double domain ignores
/// them; the field domain computes only the components marked needed and evaluates an exp in
/// the Lax fragment (ω^b) only where its argument's exponent component is meaningful.
struct ValueHints {
  bool need_p = true;  ///< the p-component (outside exponents) is used downstream
  bool need_q = true;  ///< the q-component (inside exponents) is used downstream
  /// Bit j: the exp of thread-graph step j is in the Lax fragment; bit 0 for an exp op.
  uint64_t exp_lax = ~uint64_t{0};
  /// Bit j: thread-graph step j's p- / q-component is used (steps are not tensors of their own).
  uint64_t step_need_p = ~uint64_t{0};
  uint64_t step_need_q = ~uint64_t{0};
};

/// The preparation of a right operand that needs none (every binary op but div).
struct Unprepared {
  template <class V>
  V operator()(V y) const {
    return y;
  }
};

/// Reference semantics in IEEE doubles.
class DoubleArith {
 public:
  using Value = double;

  double zero() const { return 0.0; }
  double from_int(int64_t n) const { return static_cast<double>(n); }
  double from_scalar(double c) const { return c; }
  double add(double a, double b) const { return a + b; }
  double sub(double a, double b) const { return a - b; }
  double mul(double a, double b) const { return a * b; }
  double prepare_divisor(double b, const ValueHints&) const { return b; }
  double div_prepared(double a, double b) const { return a / b; }
  double exp(double x, bool) const { return std::exp(x); }

  /// The unary ops of algebra Opaque (and exp): sqrt; silu(x) = x / (1 + e^−x); gelu by the
  /// tanh approximation 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))); relu(x) = max(x, 0);
  /// sigmoid(x) = 1 / (1 + e^−x); tanh; log (natural); clamp(x, lo, hi) = min(max(x, lo), hi).
  double opaque(OpKind kind, double x, const OpAttrs& a = OpAttrs{}) const {
    switch (kind) {
      case OpKind::Sqrt:
        return std::sqrt(x);
      case OpKind::Silu:
        return x / (1.0 + std::exp(-x));
      case OpKind::Gelu: {
        const double k = 0.7978845608028654;  // √(2/π)
        return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
      }
      case OpKind::Relu:
        return x > 0.0 ? x : 0.0;
      case OpKind::Sigmoid:
        return 1.0 / (1.0 + std::exp(-x));
      case OpKind::Tanh:
        return std::tanh(x);
      case OpKind::Log:
        return std::log(x);
      case OpKind::Clamp:
        return std::min(std::max(x, a.scalar), a.scalar2);
      case OpKind::Exp:
        return std::exp(x);
      case OpKind::Input:
      case OpKind::Output:
      case OpKind::Customized:
      case OpKind::Matmul:
      case OpKind::Square:
      case OpKind::MulScalar:
      case OpKind::AddScalar:
      case OpKind::Add:
      case OpKind::Sub:
      case OpKind::Mul:
      case OpKind::Div:
      case OpKind::Pow:
      case OpKind::Maximum:
      case OpKind::Minimum:
      case OpKind::Sum:
      case OpKind::Mean:
      case OpKind::Max:
      case OpKind::RmsNorm:
      case OpKind::Concat:
      case OpKind::Transpose:
      case OpKind::Slice:
      case OpKind::AllReduce:
      case OpKind::RunningMax:
      case OpKind::AccumSum:
      case OpKind::AccumSumLd:
      case OpKind::AccumMeanLd:
      case OpKind::AccumRmsLd:
      case OpKind::AccumSumToDimx:
      case OpKind::AccumMaxLd:
      case OpKind::AccumRescale:
      case OpKind::AccumRescaleLd:
      case OpKind::ThreadFused:
        break;  // not an opaque unary op; the op table rules this out
    }
    return std::nan("");
  }
  /// The binary ops of algebra Opaque: pow(a, b) = std::pow; maximum; minimum.
  double opaque2(OpKind kind, double a, double b) const {
    switch (kind) {
      case OpKind::Pow:
        return std::pow(a, b);
      case OpKind::Maximum:
        return std::max(a, b);
      case OpKind::Minimum:
        return std::min(a, b);
      case OpKind::Input:
      case OpKind::Output:
      case OpKind::Customized:
      case OpKind::Matmul:
      case OpKind::Exp:
      case OpKind::Square:
      case OpKind::Sqrt:
      case OpKind::Silu:
      case OpKind::Gelu:
      case OpKind::Relu:
      case OpKind::Sigmoid:
      case OpKind::Tanh:
      case OpKind::Log:
      case OpKind::MulScalar:
      case OpKind::AddScalar:
      case OpKind::Clamp:
      case OpKind::Add:
      case OpKind::Sub:
      case OpKind::Mul:
      case OpKind::Div:
      case OpKind::Sum:
      case OpKind::Mean:
      case OpKind::Max:
      case OpKind::RmsNorm:
      case OpKind::Concat:
      case OpKind::Transpose:
      case OpKind::Slice:
      case OpKind::AllReduce:
      case OpKind::RunningMax:
      case OpKind::AccumSum:
      case OpKind::AccumSumLd:
      case OpKind::AccumMeanLd:
      case OpKind::AccumRmsLd:
      case OpKind::AccumSumToDimx:
      case OpKind::AccumMaxLd:
      case OpKind::AccumRescale:
      case OpKind::AccumRescaleLd:
      case OpKind::ThreadFused:
        break;  // not an opaque binary op; the op table rules this out
    }
    return std::nan("");
  }

  /// Max reductions (algebra Max): each element is premapped, combined with max_combine from
  /// max_identity, and the combined state finished once. In doubles this is plain max.
  double max_identity() const { return -std::numeric_limits<double>::infinity(); }
  double max_premap(double x) const { return x; }
  double max_combine(double a, double b) const { return std::max(a, b); }
  double max_finish(double s) const { return s; }

  /// C = A·B, each C element summed in increasing order of the reduction index.
  void matmul(const double* A, int64_t lda, const double* B, int64_t ldb, double* C, int64_t ldc,
              int64_t m, int64_t k, int64_t n, const ValueHints&) const {
    for (int64_t i = 0; i < m; ++i) {
      double* c = C + i * ldc;
      for (int64_t j = 0; j < n; ++j) c[j] = 0.0;
      for (int64_t t = 0; t < k; ++t) {
        double a = A[i * lda + t];
        const double* b = B + t * ldb;
        for (int64_t j = 0; j < n; ++j) c[j] += a * b[j];
      }
    }
  }
};

/// Calls fn(f) with the element function f(x) of unary op `kind` (attributes `attrs`) and
/// returns fn's result. `exp_lax` says whether an exp is in the Lax fragment.
template <class A, class Fn>
decltype(auto) with_unary(const A& ar, OpKind kind, const OpAttrs& attrs, bool exp_lax, Fn&& fn) {
  using V = typename A::Value;
  if (op_info(kind).algebra == Algebra::Opaque)
    return fn([&ar, kind, attrs](V x) { return ar.opaque(kind, x, attrs); });
  switch (kind) {
    case OpKind::Exp:
      return fn([&ar, exp_lax](V x) { return ar.exp(x, exp_lax); });
    case OpKind::Square:
      return fn([&ar](V x) { return ar.mul(x, x); });
    case OpKind::MulScalar: {
      V c = ar.from_scalar(attrs.scalar);
      return fn([&ar, c](V x) { return ar.mul(x, c); });
    }
    case OpKind::AddScalar: {
      V c = ar.from_scalar(attrs.scalar);
      return fn([&ar, c](V x) { return ar.add(x, c); });
    }
    case OpKind::Input:
    case OpKind::Output:
    case OpKind::Customized:
    case OpKind::Matmul:
    case OpKind::Sqrt:
    case OpKind::Silu:
    case OpKind::Gelu:
    case OpKind::Relu:
    case OpKind::Sigmoid:
    case OpKind::Tanh:
    case OpKind::Log:
    case OpKind::Clamp:
    case OpKind::Add:
    case OpKind::Sub:
    case OpKind::Mul:
    case OpKind::Div:
    case OpKind::Pow:
    case OpKind::Maximum:
    case OpKind::Minimum:
    case OpKind::Sum:
    case OpKind::Mean:
    case OpKind::Max:
    case OpKind::RmsNorm:
    case OpKind::Concat:
    case OpKind::Transpose:
    case OpKind::Slice:
    case OpKind::AllReduce:
    case OpKind::RunningMax:
    case OpKind::AccumSum:
    case OpKind::AccumSumLd:
    case OpKind::AccumMeanLd:
    case OpKind::AccumRmsLd:
    case OpKind::AccumSumToDimx:
    case OpKind::AccumMaxLd:
    case OpKind::AccumRescale:
    case OpKind::AccumRescaleLd:
    case OpKind::ThreadFused:
      break;  // not a Lax or Exp unary op; the op table rules this out
  }
  return fn([&ar](V) { return ar.zero(); });
}

/// Calls fn(prep, f) for binary op `kind`: prep(b) is applied once to every element of the
/// right operand, then f(a, prep(b)) computes each output element.
template <class A, class Fn>
decltype(auto) with_binary(const A& ar, OpKind kind, const ValueHints& hints, Fn&& fn) {
  using V = typename A::Value;
  Unprepared same;
  if (op_info(kind).algebra == Algebra::Opaque)
    return fn(same, [&ar, kind](V x, V y) { return ar.opaque2(kind, x, y); });
  switch (kind) {
    case OpKind::Add:
      return fn(same, [&ar](V x, V y) { return ar.add(x, y); });
    case OpKind::Sub:
      return fn(same, [&ar](V x, V y) { return ar.sub(x, y); });
    case OpKind::Mul:
      return fn(same, [&ar](V x, V y) { return ar.mul(x, y); });
    case OpKind::Div:
      return fn([&ar, &hints](V y) { return ar.prepare_divisor(y, hints); },
                [&ar](V x, V y) { return ar.div_prepared(x, y); });
    case OpKind::Input:
    case OpKind::Output:
    case OpKind::Customized:
    case OpKind::Matmul:
    case OpKind::Exp:
    case OpKind::Square:
    case OpKind::Sqrt:
    case OpKind::Silu:
    case OpKind::Gelu:
    case OpKind::Relu:
    case OpKind::Sigmoid:
    case OpKind::Tanh:
    case OpKind::Log:
    case OpKind::MulScalar:
    case OpKind::AddScalar:
    case OpKind::Clamp:
    case OpKind::Pow:
    case OpKind::Maximum:
    case OpKind::Minimum:
    case OpKind::Sum:
    case OpKind::Mean:
    case OpKind::Max:
    case OpKind::RmsNorm:
    case OpKind::Concat:
    case OpKind::Transpose:
    case OpKind::Slice:
    case OpKind::AllReduce:
    case OpKind::RunningMax:
    case OpKind::AccumSum:
    case OpKind::AccumSumLd:
    case OpKind::AccumMeanLd:
    case OpKind::AccumRmsLd:
    case OpKind::AccumSumToDimx:
    case OpKind::AccumMaxLd:
    case OpKind::AccumRescale:
    case OpKind::AccumRescaleLd:
    case OpKind::ThreadFused:
      break;  // not a Lax binary op; the op table rules this out
  }
  return fn(same, [&ar](V, V) { return ar.zero(); });
}

}  // namespace strata::interp
