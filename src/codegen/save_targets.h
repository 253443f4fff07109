// Where a customized kernel saves each output (docs/codegen.md, "Routed outputs"): one dense
// device tensor, or — for an output the plan routes into parts (KernelPlan::output_parts) — the
// part each block's tile falls in. Both savers (block_emitter.cc, block_rowwise.cc) and the
// kernel's signature read this one description.
#pragma once

#include <string>
#include <vector>

#include "cuda_ir.h"
#include "strata/opt/kernel_plan.h"

namespace strata::codegen {

/// One place output `oi` is saved to: the kernel parameter `pointer`, a dense device tensor of
/// shape `shape` (row-major `strides`), the block's tile at the element offset that is the sum of
/// the terms of `origin` (one per grid axis that splits the output), in the blocks
/// where `when` holds (null: every block). A routed output's targets are exclusive: each block
/// takes exactly one.
struct SaveTarget {
  std::string pointer;
  Shape shape;
  std::vector<int64_t> strides;
  std::vector<ir::Expr> origin;
  ir::Expr when;
};

/// The save targets of output `oi` of `plan` (grid axis variables bx, by, bz).
std::vector<SaveTarget> save_targets(const KernelPlan& plan, int oi);

/// The names of the kernel parameters output `oi` is saved through, in order: `gout<oi>`, or
/// `gout<oi>_<p>` per part of a routed output.
std::vector<std::string> output_params(const KernelPlan& plan, int oi);

}  // namespace strata::codegen
