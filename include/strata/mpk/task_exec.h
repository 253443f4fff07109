// Running a decode step on the CPU in float64, two ways (docs/megakernel.md, "Testing"):
//  - task by task, each task doing exactly its share on a workspace laid out by the memory
//    plan (the same decomposition the device runtime runs), and
//  - directly, as the plain model (the reference),
// so that tests can check the task decomposition, the footprints and the memory plan are exact.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "strata/mpk/task_graph.h"

namespace strata::mpk {

/// The values of every buffer (weights and state, by buffer id), row-major, in float64.
struct ModelBuffers {
  std::vector<std::vector<double>> data;
};

/// Random weights (uniform, scaled like the benchmark's: 1/√fan-in for matrices, 1 ± 0.1 for
/// gains), the rotary inverse frequencies θ^(-2i/D), zero caches.
ModelBuffers random_buffers(const TaskGraph& g, uint64_t seed);

/// A write the task makes: (workspace unit, value); units are 2 bytes (an f16 element is one
/// unit; the other units of a wider element are overwritten with NaN so that a tensor sharing
/// them with a still-live one corrupts it visibly).
using Write = std::pair<int64_t, double>;

/// The task executor over one workspace of workspace_bytes / 2 float64 units.
class TaskExecutor {
 public:
  TaskExecutor(const TaskGraph& g, ModelBuffers& buffers);

  /// Sets the step's inputs: one token per batch row and the position of the new token.
  void begin_step(std::vector<int64_t> tokens, int64_t pos);
  /// Runs task t against the current workspace, returning its workspace writes (not yet
  /// applied); writes to buffers (the caches) and the output tokens are applied at once.
  std::vector<Write> run(int t);
  void apply(const std::vector<Write>& writes);

  /// The logits [B, V] and the tokens of the step (after every task ran).
  std::vector<double> logits() const;
  const std::vector<int64_t>& next_tokens() const { return next_; }

 private:
  double rd(int tensor, int64_t idx, int field = 0) const;
  void wr(std::vector<Write>& out, int tensor, int64_t idx, double v, int field = 0) const;
  std::vector<double> normed_row(const OpInfo& op, int64_t b) const;
  /// The combination of C attention partials (o at `po`, (max, sum) at `pml`, rows r0..r0+C−1)
  /// at dimension d: Σ_c e^(m_c − M)·o_c / Σ_c e^(m_c − M)·l_c over the non-empty chunks.
  double combined(int po, int pml, int64_t r0, int64_t C, int64_t d) const;
  /// Appends the step's k (normed, rotated) and v of (batch row b, kv head h) to the caches.
  void append_kv(const OpInfo& op, int64_t b, int64_t h);

  const TaskGraph& g_;
  ModelBuffers& buf_;
  std::vector<double> mem_;
  std::vector<int64_t> tokens_, next_;
  int64_t pos_ = 0;
};

/// One step of the plain model (float64): updates the caches in `buffers` at `pos` and returns
/// the logits [B, V].
std::vector<double> reference_step(const TaskGraph& g, ModelBuffers& buffers,
                                   const std::vector<int64_t>& tokens, int64_t pos);

/// Greedy argmax of each row of logits [B, V] (the first index of the maximum).
std::vector<int64_t> argmax_rows(const std::vector<double>& logits, int64_t vocab);

}  // namespace strata::mpk
