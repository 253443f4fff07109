// A μGraph with two prologues before a matmul kernel (tests of prologue folding:
// tests/search_prologue_fold_test.cc, the emulation of its folds in codegen_emulation_test.cc).
#pragma once

#include <string>

namespace strata::testing {

/// rms_norm(X) · (G1·G2), then a matmul with W, as the prologues and the consumer are given:
/// a predefined norm, a loop-free gain kernel over `gain_grid` row blocks, and a matmul kernel
/// over `grid` row blocks whose X tile is `x_fmap` (null: loop-invariant) with `forloop`
/// iterations over W's columns. `extra` adds ops after the consumer; `outputs` names the
/// outputs.
inline std::string prologue_graph(int gain_grid, int grid, const std::string& x_fmap = "null",
                                  int forloop = 2, const std::string& extra = "",
                                  const std::string& outputs = R"(["O"])") {
  // An axis of one block maps to φ.
  auto rows = [](int n) { return std::string(n > 1 ? "[0, null, null]" : "[null, null, null]"); };
  return R"({"format": "strata-mugraph", "version": 1,
  "inputs": [{"name": "X", "shape": [16, 64], "dtype": "f16"},
             {"name": "G1", "shape": [64], "dtype": "f16"},
             {"name": "G2", "shape": [64], "dtype": "f16"},
             {"name": "W", "shape": [64, 32], "dtype": "f16"}],
  "ops": [
    {"op": "rms_norm", "inputs": ["X"], "output": "N", "dim": 1, "eps": 1e-06},
    {"op": "customized", "inputs": ["G1", "G2", "N"], "outputs": ["Y"], "block_graph": {
      "grid": [)" +
         std::to_string(gain_grid) + R"(, 1, 1], "block": 128, "forloop": 1, "ops": [
        {"op": "input", "input": 0, "imap": [null, null, null], "fmap": null, "output": "g1"},
        {"op": "input", "input": 1, "imap": [null, null, null], "fmap": null, "output": "g2"},
        {"op": "input", "input": 2, "imap": )" +
         rows(gain_grid) + R"(, "fmap": null, "output": "n"},
        {"op": "thread_graph", "inputs": ["g1", "g2", "n"], "output": "y",
         "steps": [{"op": "mul", "args": [0, 1]}, {"op": "mul", "args": [2, 3]}]},
        {"op": "accum", "inputs": ["y"], "output": "a", "fmap": null},
        {"op": "output", "inputs": ["a"], "omap": )" +
         rows(gain_grid) + R"(}]}},
    {"op": "customized", "inputs": ["Y", "W"], "outputs": ["O"], "block_graph": {
      "grid": [)" +
         std::to_string(grid) + R"(, 1, 1], "block": 128, "forloop": )" + std::to_string(forloop) +
         R"(, "ops": [
        {"op": "input", "input": 0, "imap": )" +
         rows(grid) + R"(, "fmap": )" + x_fmap +
         R"(, "output": "x"},
        {"op": "input", "input": 1, "imap": [null, null, null], "fmap": 1, "output": "w"},
        {"op": "matmul", "inputs": ["x", "w"], "output": "m"},
        {"op": "accum", "inputs": ["m"], "output": "acc", "fmap": 1},
        {"op": "output", "inputs": ["acc"], "omap": )" +
         rows(grid) + R"(}]}})" + extra + R"(],
  "outputs": )" +
         outputs + "}";
}

}  // namespace strata::testing
