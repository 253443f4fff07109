// Test support: prefill-like programs with matmuls that run as library calls (docs/search.md,
// "Library forms") at small, odd shapes — RMSNorm with a gain, a fused QKV projection and its
// three column slices; LayerNorm (written out by the parser's layer_norm) with gain and bias, a
// projection, its bias and gelu; a gated MLP's gate and up projections with silu·mul. `rows`
// tokens (not a multiple of the rows per block where odd), K and the widths odd where asked.
#pragma once

#include <initializer_list>
#include <string>

namespace strata::testing {

inline std::string dims(std::initializer_list<int> d) {
  std::string s = "[";
  for (int x : d) s += (s.size() > 1 ? ", " : "") + std::to_string(x);
  return s + "]";
}

/// Q, K, V = the column slices [0, q), [q, q + kv), [q + kv, q + 2·kv) of
/// matmul(rms_norm(X)·G, W), X [rows, hidden].
inline std::string norm_qkv_program(int rows, int hidden, int q, int kv) {
  const int n = q + 2 * kv;
  return "input X: f16" + dims({rows, hidden}) + "\ninput G: f16" + dims({hidden}) +
         "\ninput W: f16" + dims({hidden, n}) +
         "\nY = mul(rms_norm(X, eps=1e-05), G)\nQKV = matmul(Y, W)\nQ = slice(QKV, -1, 0, " +
         std::to_string(q) + ")\nK = slice(QKV, -1, " + std::to_string(q) + ", " +
         std::to_string(q + kv) + ")\nV = slice(QKV, -1, " + std::to_string(q + kv) + ", " +
         std::to_string(n) + ")\noutput Q, K, V\n";
}

/// O = gelu(matmul(layer_norm(X)·G + Bln, W) + B), X [rows, hidden], W [hidden, ffn].
inline std::string layernorm_ffn_program(int rows, int hidden, int ffn) {
  return "input X: f16" + dims({rows, hidden}) + "\ninput G: f16" + dims({hidden}) +
         "\ninput Bln: f16" + dims({hidden}) + "\ninput W: f16" + dims({hidden, ffn}) +
         "\ninput B: f16" + dims({ffn}) +
         "\nY = add(mul(layer_norm(X, eps=1e-05), G), Bln)\nO = gelu(add(matmul(Y, W), B))\n"
         "output O\n";
}

/// H = silu(X·W1) · (X·W3), X [rows, hidden], W1, W3 [hidden, inter].
inline std::string gated_mlp_program(int rows, int hidden, int inter) {
  return "input X: f16" + dims({rows, hidden}) + "\ninput W1: f16" + dims({hidden, inter}) +
         "\ninput W3: f16" + dims({hidden, inter}) +
         "\nH = mul(silu(matmul(X, W1)), matmul(X, W3))\noutput H\n";
}

}  // namespace strata::testing
