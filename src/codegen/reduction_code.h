// Internal: the CUDA spelling of a reduction, read off its row of the op table's reduction
// family (include/strata/ir/op_table.def; docs/mugraph-semantics.md §2.1): the premap applied to
// each element, the combine and its identity, the warp-team and block-wide collectives, the
// shared-memory atomic, and the finalize. Every emitter path that reduces (block reductions and
// norms, accumulators in shared memory and in registers, loop groups' partials, rowwise kernels,
// row reductions of matmul-chain fragments, predefined kernels) writes a reduction through this,
// so a new row of the family needs no emitter change.
#pragma once

#include <cstdint>
#include <string>

#include "strata/ir/op.h"

namespace strata::codegen {

class ReductionCode {
 public:
  /// The reduction of op kind `kind` (eps = attrs.scalar for RootMean); ops outside the family
  /// (accum, accum_rescale) reduce by plain sums.
  ReductionCode(OpKind kind, const OpAttrs& attrs);

  bool is_max() const { return r_.combine == Combine::Max; }
  bool squares() const { return r_.premap == Premap::Square; }
  /// Whether finalize() changes a value (a mean or a root mean).
  bool finalizes() const { return r_.finalize != Finalize::None; }
  /// "true" / "false": the SQUARES argument of the runtime's row reductions.
  std::string squares_arg() const { return squares() ? "true" : "false"; }

  /// The identity element: "0.0f" or strata_rt::neg_inf().
  std::string identity() const;
  /// The premapped element: `v` or `v * v`.
  std::string premap(const std::string& v) const;
  /// `a + b` or fmaxf(a, b).
  std::string combine(const std::string& a, const std::string& b) const;
  /// The statement folding `v` into the lvalue `acc`: "acc += v;" or "acc = fmaxf(acc, v);".
  std::string update(const std::string& acc, const std::string& v) const;
  /// The combine of `v` over a team of `lanes` lanes (strata_rt::team_sum / team_max).
  std::string team(int lanes, const std::string& v) const;
  /// The combine of `v` over the block (strata_rt::block_sum / block_max, two barriers:
  /// __syncthreads, or the named barrier `barrier` when it is not 0, as in a task entry).
  std::string block(int threads, const std::string& v, const std::string& scratch,
                    int barrier = 0) const;
  /// The statement folding `v` into *ptr atomically (shared memory).
  std::string atomic_update(const std::string& ptr, const std::string& v) const;
  /// The value of a combined state over `count` elements: `v`, `v / n` or sqrtf(v / n + eps).
  std::string finalize(const std::string& v, int64_t count) const;
  /// The same over a count known at run time: `count` a float expression (ragged tiles).
  std::string finalize(const std::string& v, const std::string& count) const;
  /// For a normalizing op (rms_norm): the factor its elements are multiplied by, the inverse of
  /// the finalized statistic (strata_rt::inv_rms for a root mean).
  std::string inverse(const std::string& v, int64_t count) const;
  std::string inverse(const std::string& v, const std::string& count) const;

 private:
  ReductionInfo r_;
  double eps_ = 0.0;
};

}  // namespace strata::codegen
