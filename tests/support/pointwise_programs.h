// Test support: programs of elementwise work (docs/search.md, "Pointwise seeds") at small
// shapes — rotary embedding of q and k (rotate-half, cos/sin broadcast over the heads), a
// residual add + RMSNorm with a gain and two outputs, and a SwiGLU product of long rows.
#pragma once

#include <string>

namespace strata::testing {

/// Rotate-half rotary embedding of Q [tokens, q_heads, dim] and K [tokens, k_heads, dim], cos
/// and sin [tokens, 1, dim] broadcast over the heads.
inline std::string rotary_program(int tokens, int q_heads, int k_heads, int dim) {
  const std::string t = std::to_string(tokens), d = std::to_string(dim),
                    h = std::to_string(dim / 2);
  auto rotated = [&](const std::string& x) {
    return "add(mul(" + x + ", Cos), mul(concat(mul_scalar(slice(" + x + ", -1, " + h + ", " + d +
           "), -1), slice(" + x + ", -1, 0, " + h + "), dim=-1), Sin))";
  };
  return "input Q: f16[" + t + ", " + std::to_string(q_heads) + ", " + d + "]\n" +
         "input K: f16[" + t + ", " + std::to_string(k_heads) + ", " + d + "]\n" +
         "input Cos: f16[" + t + ", 1, " + d + "]\n" + "input Sin: f16[" + t + ", 1, " + d +
         "]\n" + "Qr = " + rotated("Q") + "\n" + "Kr = " + rotated("K") + "\n" +
         "output Qr, Kr\n";
}

inline const std::string kRotaryProgram = rotary_program(6, 4, 2, 32);

/// A SwiGLU's silu·mul over 4 rows of 4608 with a gain along the row and a scale per row: a
/// seed cuts its rows into column chunks of 1536 (three per row), the gain chunked with them,
/// the per-row scale replicated.
inline const std::string kChunkedSwigluProgram = R"(input A: f16[4, 4608]
input B: f16[4, 4608]
input G: f16[4608]
input S: f16[4, 1]
H = mul(mul(mul(silu(A), B), G), S)
output H
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
