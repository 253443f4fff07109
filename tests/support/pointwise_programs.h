// Test support: programs of elementwise work (docs/search.md, "Pointwise seeds") at small
// shapes — rotary embedding of q and k (rotate-half, cos/sin broadcast over the heads), and a
// residual add + RMSNorm with a gain and two outputs.
#pragma once

#include <string>

namespace strata::testing {

inline constexpr const char* kRotaryProgram = R"(
input Q: f16[6, 4, 32]
input K: f16[6, 2, 32]
input Cos: f16[6, 1, 32]
input Sin: f16[6, 1, 32]
Qr = add(mul(Q, Cos), mul(concat(mul_scalar(slice(Q, -1, 16, 32), -1), slice(Q, -1, 0, 16), dim=-1), Sin))
Kr = add(mul(K, Cos), mul(concat(mul_scalar(slice(K, -1, 16, 32), -1), slice(K, -1, 0, 16), dim=-1), Sin))
output Qr, Kr
)";

/// Rows × width of the residual norm: more rows than the search's grid policy offers blocks
/// for when rows is large.
inline std::string residual_norm_program(int rows, int width) {
  const std::string shape = "[" + std::to_string(rows) + ", " + std::to_string(width) + "]";
  return "input X: f16" + shape + "\ninput R: f16" + shape + "\ninput G: f16[" +
         std::to_string(width) +
         "]\nH = add(X, R)\nO = mul(rms_norm(H, eps=1e-06), G)\noutput H, O\n";
}

}  // namespace strata::testing
