// Lowering of predefined kernel ops to block graphs (docs/codegen.md, "How each op lowers"): a
// graph pass of the optimizer that decides which kernels of a kernel graph run as tiled block
// graphs (and get the pipeline and tensor cores) before the emitter sees them.
#pragma once

#include <memory>
#include <optional>

#include "strata/ir/block_graph.h"
#include "strata/ir/kernel_graph.h"

namespace strata {

/// A block graph computing matmul(A, B) for device shapes a, b as a tiled tensor-core kernel:
/// grid over N (x), M (y) and the first batch dim (z), forloop over K, one `accum`. nullopt
/// when the extents do not tile (N % 8, K % 16) or a grid extent exceeds CUDA's limits.
std::optional<BlockGraph> lower_matmul_to_block_graph(const Shape& a, const Shape& b);

/// Whether a predefined matmul of device shapes a × b with operand types ta, tb and result type
/// tc runs as a BLAS library call (cuBLAS, docs/codegen.md "Predefined matmuls through cuBLAS")
/// when the emitter is asked for library matmuls (EmitOptions::library_matmul): ta and tb the
/// same 16-bit type (f16 or bf16), tc that type or f32, and every extent (rows, columns,
/// contraction, the batch dims' product) within cuBLAS's 32-bit arguments. f32 or mixed operands
/// keep the generated kernel (lower_matmul_to_block_graph, else the generic one). The cost model
/// predicts a matmul this accepts as the library's (docs/cost-model.md).
bool library_matmul_supported(const Shape& a, const Shape& b, DType ta, DType tb, DType tc);

/// The block graph kernel op `op` of `g` runs as: a customized op's body, a predefined matmul's
/// tiled lowering (when it tiles), or null (a predefined op the emitter writes as a generic
/// kernel). A lowered matmul whose plan does not fit falls back to the generic kernel.
std::shared_ptr<const BlockGraph> kernel_block_graph(const KernelGraph& g, int op);

}  // namespace strata
