// Internal: kernels for the predefined kernel-graph ops (matmul, elementwise, sum/mean,
// rms_norm, concat) on dense row-major device tensors.
#pragma once

#include <string>
#include <vector>

#include "code_writer.h"
#include "strata/ir/kernel_graph.h"
#include "strata/util/status.h"

namespace strata::codegen {

/// Launch shape of a generated predefined-op kernel (1-D grid).
struct PredefinedLaunch {
  int64_t blocks = 1;
  int threads = 256;
};

/// Emits a generic kernel named `name` computing predefined op `op` of `g` (every op except
/// Input and Customized). `dtypes` is the storage type of every kernel tensor. The kernel takes
/// the op's input pointers then its output pointer.
Status emit_predefined_kernel(const KernelGraph& g, int op, const std::vector<DType>& dtypes,
                              const std::string& name, CodeWriter& w, PredefinedLaunch& launch);

}  // namespace strata::codegen
