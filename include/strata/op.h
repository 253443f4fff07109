// Op kinds, their static properties, and op attributes (docs/mugraph-semantics.md). Generated from
// op_table.def: adding an op means one table row plus its semantics.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace strata {

/// Where an op may appear.
enum Level : uint8_t {
  kKernel = 1,       ///< a node of the kernel graph
  kBlock = 2,        ///< a compute op of a block graph (loop body or post-loop)
  kBlockInput = 4,   ///< an input iterator of a block graph
  kBlockOutput = 8,  ///< an output saver of a block graph
  kBlockAccum = 16,  ///< a for-loop accumulator of a block graph
};

enum class Category : uint8_t {
  Source,
  Sink,
  Customized,
  Matmul,
  Unary,
  Binary,
  Reduce,
  Norm,
  Concat,
  Accum,
  Fused
};

/// How the finite-field verifier treats an op (docs/verifier.md).
enum class Algebra : uint8_t { Lax, Exp, Opaque };

enum class OpKind : uint8_t {
#define STRATA_OP(id, name, arity, cat, levels, alg) id,
#include "strata/op_table.def"
#undef STRATA_OP
};

/// Static properties of an op kind: one row of the op table.
struct OpInfo {
  OpKind kind;
  std::string_view name;
  int arity;  ///< -1 = variadic
  Category category;
  uint8_t levels;
  Algebra algebra;
};

/// The op table as an array indexed by OpKind.
const std::vector<OpInfo>& op_table();
inline const OpInfo& op_info(OpKind k) {
  return op_table()[static_cast<int>(k)];
}
inline std::string_view op_name(OpKind k) {
  return op_info(k).name;
}
inline Category op_category(OpKind k) {
  return op_info(k).category;
}
/// Looks an op up by its table name ("rms_norm"); nullopt if unknown.
std::optional<OpKind> parse_op_kind(std::string_view name);
/// True for ops applied element by element (unary and binary categories).
inline bool is_elementwise(OpKind k) {
  auto c = op_category(k);
  return c == Category::Unary || c == Category::Binary;
}

/// φ: a grid axis or for-loop dimension that maps to no data dimension (replication for
/// inputs, summation for accumulators).
inline constexpr int kReplicate = -1;

/// For each grid axis x, y, z: a data dimension of the tensor, or kReplicate.
using GridMap = std::array<int, 3>;
inline constexpr GridMap kAllReplicated{kReplicate, kReplicate, kReplicate};

/// Attributes of an op; which fields are meaningful depends on the op's category
/// (see op_table.def). Dimensions are stored normalized (non-negative).
struct OpAttrs {
  int dim = 0;                    ///< Reduce, Norm, Concat
  int64_t to = 1;                 ///< Reduce, accum_sum_to_dimx: extent after reduction
  double scalar = 0.0;            ///< mul_scalar
  int input_index = 0;            ///< block Input: position among the kernel op's inputs
  GridMap imap = kAllReplicated;  ///< block Input
  int fmap = kReplicate;          ///< block Input and accumulators
  GridMap omap = kAllReplicated;  ///< block Output

  bool operator==(const OpAttrs&) const = default;
};

/// One elementwise step of a thread graph. Arguments index the fused op's inputs first
/// (0..num_inputs-1), then earlier steps (num_inputs + j).
struct ThreadStep {
  OpKind kind;
  std::array<int, 2> args{0, 0};
  double scalar = 0.0;  ///< mul_scalar
  bool operator==(const ThreadStep&) const = default;
};

}  // namespace strata
