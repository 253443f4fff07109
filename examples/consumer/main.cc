// strata used as a library (README, "Using strata from CMake"): parses a program, runs the
// reference interpreter on seeded random inputs, and checks the output against the same
// arithmetic written as plain loops. The program must be `O = matmul(rms_norm(X), W)` with
// inputs X [m, k] and W [k, n] (rmsnorm_matmul.strata beside this file).
//
// Usage: strata_consumer PROGRAM.strata. Exit codes: 0 the interpreter matches the loops,
// 1 it does not, 2 the program cannot be loaded or has another form.
#include <cmath>
#include <cstdio>

#include "strata/ir/graph_io.h"
#include "strata/frontend/graph_loader.h"
#include "strata/interp/interpreter.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s PROGRAM.strata\n", argv[0]);
    return 2;
  }
  auto program = strata::load_graph(argv[1]);
  if (!program.ok()) {
    std::fprintf(stderr, "strata_consumer: %s\n", program.error().message.c_str());
    return 2;
  }
  const strata::KernelGraph& g = *program;
  if (g.inputs().size() != 2 || g.outputs().size() != 1) {
    std::fprintf(stderr, "strata_consumer: expected inputs X, W and one output\n");
    return 2;
  }
  std::vector<strata::HostTensor> inputs = strata::random_inputs(g, /*seed=*/7);
  auto outputs = strata::run_reference(g, inputs);
  if (!outputs.ok()) {
    std::fprintf(stderr, "strata_consumer: %s\n", outputs.error().message.c_str());
    return 2;
  }
  const strata::HostTensor &x = inputs[0], &w = inputs[1], &o = (*outputs)[0];
  if (x.shape.rank() != 2 || w.shape.rank() != 2 || x.shape[1] != w.shape[0]) {
    std::fprintf(stderr, "strata_consumer: expected X [m, k] and W [k, n]\n");
    return 2;
  }
  const int64_t m = x.shape[0], k = x.shape[1], n = w.shape[1];
  // O = (X / sqrt(mean(X², last dim))) · W, as docs/program-format.md defines rms_norm.
  double max_error = 0;
  for (int64_t i = 0; i < m; ++i) {
    double sq = 0;
    for (int64_t j = 0; j < k; ++j) sq += x[i * k + j] * x[i * k + j];
    const double rms = std::sqrt(sq / static_cast<double>(k));
    for (int64_t c = 0; c < n; ++c) {
      double acc = 0;
      for (int64_t j = 0; j < k; ++j) acc += x[i * k + j] / rms * w[j * n + c];
      max_error = std::max(max_error, std::fabs(acc - o[i * n + c]));
    }
  }
  const bool ok = max_error <= 1e-9;
  std::printf(
      "%s: O %s computed by strata's reference interpreter %s the plain loops "
      "(max |difference| %.3g)\n",
      argv[1], o.shape.str().c_str(), ok ? "matches" : "DOES NOT MATCH", max_error);
  return ok ? 0 : 1;
}
