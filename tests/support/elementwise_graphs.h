// Test support: a graph of predefined elementwise ops in every access form of their generic
// kernels (src/codegen/elementwise_access.h; docs/codegen.md, "Predefined elementwise kernels"),
// with the access each kernel's header comment must state. Shared by the emulation and the nvcc
// compile tests.
#pragma once

#include <string>
#include <vector>

#include "support/op_coverage_graphs.h"

namespace strata::testing {

struct ElementwiseCoverage {
  KernelGraph graph;
  /// Text of the emitted source: each kernel's op and the access planned for it.
  std::vector<std::string> expect;
};

/// Vectors of 8 (16-bit, and f16 results of f32 operands), 4 (f32) and fewer elements where the
/// innermost extent allows only those, one element per step for odd extents; operands broadcast
/// along the innermost dim (one element per vector), a middle dim, the outermost dim and a missing
/// leading dim; dims coalesced across odd extents; f16, bf16, f32 and mixed operands; unary ops
/// with scalar attributes; an op reading an intermediate.
inline ElementwiseCoverage predefined_elementwise() {
  KernelGraph g;
  ElementwiseCoverage c;
  auto in = [&](const char* name, Shape s, DType t = DType::f16) {
    return must(g.add_input(name, s, t));
  };
  // An output op whose kernel's header comment must end in `access`.
  auto op = [&](OpKind kind, std::vector<int> args, const char* name, const std::string& access,
                OpAttrs attrs = {}) {
    int t = must(g.add_op(kind, std::move(args), attrs, name));
    must(g.mark_output(t));
    c.expect.push_back(access);
    return t;
  };
  const std::string v8 = ": 8 elements per thread step, 32-bit indices";
  const std::string v4 = ": 4 elements per thread step, 32-bit indices";
  const std::string v2 = ": 2 elements per thread step, 32-bit indices";
  const std::string v1 = ": one element per thread step, 32-bit indices";
  // f16 [4, 8, 64] against operands broadcast along each dim.
  int x = in("X", Shape{4, 8, 64});
  int row = in("Row", Shape{64});        // along dims 0 and 1: a vector at e % 64
  int mid = in("Mid", Shape{4, 1, 64});  // along the middle dim
  int col = in("Col", Shape{4, 8, 1});   // along the innermost dim: one element per vector
  int lead = in("Lead", Shape{8, 64});   // a missing leading dim
  int top = in("Top", Shape{1, 8, 64});  // along the outermost dim
  int a = op(OpKind::Add, {x, row}, "xa", "xa [4, 8, 64] = add(X [4, 8, 64], Row [64])" + v8);
  op(OpKind::Mul, {x, mid}, "xm", "xm [4, 8, 64] = mul(X [4, 8, 64], Mid [4, 1, 64])" + v8);
  int s = op(OpKind::Sub, {x, col}, "xs", "xs [4, 8, 64] = sub(X [4, 8, 64], Col [4, 8, 1])" + v8);
  op(OpKind::Maximum, {lead, x}, "xl", "xl [4, 8, 64] = maximum(Lead [8, 64], X [4, 8, 64])" + v8);
  op(OpKind::Minimum, {x, top}, "xt", "xt [4, 8, 64] = minimum(X [4, 8, 64], Top [1, 8, 64])" + v8);
  int r = must(g.add_op(OpKind::Relu, {x}, {}, "xr"));  // an intermediate (workspace)
  op(OpKind::Add, {r, s}, "xrs", "xrs [4, 8, 64] = add(xr [4, 8, 64], xs [4, 8, 64])" + v8);
  op(OpKind::Add, {a, r}, "xar", "xar [4, 8, 64] = add(xa [4, 8, 64], xr [4, 8, 64])" + v8);
  op(OpKind::Mul, {col, row}, "outer",
     "outer [4, 8, 64] = mul(Col [4, 8, 1], Row [64])" + v8);  // both operands broadcast
  // Odd innermost extents: one element per step against a broadcast row, vectors when a unary
  // op's dims coalesce into an extent that allows them.
  int q = in("Q", Shape{1000, 37});
  int q2 = in("Q2", Shape{37});
  op(OpKind::Sub, {q, q2}, "qs", "qs [1000, 37] = sub(Q [1000, 37], Q2 [37])" + v1);
  op(OpKind::Exp, {q}, "qe", "qe [1000, 37] = exp(Q [1000, 37])" + v8);
  int w = in("W", Shape{8, 4097});
  int w1 = in("W1", Shape{8, 1});
  op(OpKind::Mul, {w, w1}, "wm", "wm [8, 4097] = mul(W [8, 4097], W1 [8, 1])" + v1);
  op(OpKind::Silu, {w}, "ws", "ws [8, 4097] = silu(W [8, 4097])" + v8);
  // Innermost extents that allow 4 and 2 elements of 16 bits.
  int n4 = in("N4", Shape{6, 20});
  op(OpKind::Add, {n4, in("N4b", Shape{20})}, "n4", "n4 [6, 20] = add(N4 [6, 20], N4b [20])" + v4);
  int n2 = in("N2", Shape{5, 6});
  op(OpKind::Mul, {n2, in("N2b", Shape{5, 1})}, "n2",
     "n2 [5, 6] = mul(N2 [5, 6], N2b [5, 1])" + v2);
  // f32: vectors of 4, broadcast rows and columns, an odd extent; unary ops with attributes.
  int f = in("F", Shape{16, 36}, DType::f32);
  op(OpKind::Add, {f, in("Fr", Shape{36}, DType::f32)}, "fa",
     "fa [16, 36] = add(F [16, 36], Fr [36])" + v4);
  op(OpKind::Sub, {f, in("Fc", Shape{16, 1}, DType::f32)}, "fs",
     "fs [16, 36] = sub(F [16, 36], Fc [16, 1])" + v4);
  op(OpKind::MulScalar, {f}, "fm", "fm [16, 36] = mul_scalar(F [16, 36])" + v4, scalar_attr(-1.5));
  op(OpKind::Clamp, {x}, "xc", "xc [4, 8, 64] = clamp(X [4, 8, 64])" + v8, clamp_attr(-0.2, 0.3));
  int fo = in("Fo", Shape{3, 5, 7}, DType::f32);
  op(OpKind::Sigmoid, {fo}, "fo", "fo [3, 5, 7] = sigmoid(Fo [3, 5, 7])" + v1);
  // Mixed: an f16 result of an f32 operand (8 elements: two 16-byte loads of the f32 one), an
  // f32 result of an f16 operand.
  int m16 = in("M16", Shape{16, 32});
  int m32 = in("M32", Shape{16, 32}, DType::f32);
  op(OpKind::Add, {m16, m32}, "mh", "mh [16, 32] = add(M16 [16, 32], M32 [16, 32])" + v8);
  op(OpKind::Mul, {m32, m16}, "mf", "mf [16, 32] = mul(M32 [16, 32], M16 [16, 32])" + v8);
  // bf16.
  int h = in("H", Shape{32, 48}, DType::bf16);
  op(OpKind::Gelu, {h}, "hg", "hg [32, 48] = gelu(H [32, 48])" + v8);
  op(OpKind::Mul, {h, in("Hr", Shape{48}, DType::bf16)}, "hm",
     "hm [32, 48] = mul(H [32, 48], Hr [48])" + v8);
  c.graph = std::move(g);
  return c;
}

}  // namespace strata::testing
