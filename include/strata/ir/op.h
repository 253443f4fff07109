// Op kinds, their static properties, and op attributes (docs/mugraph-semantics.md). Generated
// from op_table.def: adding an op means one table row plus its semantics
// (docs/architecture.md, "Adding an op").
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
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
  Layout,  ///< transpose, slice: a view of the input, no arithmetic
  Scan,    ///< running_max: a loop-body op whose value carries across iterations
  Accum,
  Fused,
  /// all_reduce: the sum of a tensor over the ranks of a tensor-parallel group
  /// (docs/tensor-parallel.md). A kernel-level op only: communication between kernels.
  Collective
};

/// How the finite-field verifier treats an op (docs/verifier.md).
enum class Algebra : uint8_t { Lax, Exp, Opaque, Max };

/// Which attributes an op carries (the Attrs column of op_table.def); attr_specs() lists
/// them with their names, types and defaults.
enum class AttrSet : uint8_t { None, Scalar, Clamp, Reduce, Norm, Dim, Slice, Eps, To };

enum class OpKind : uint8_t {
#define STRATA_OP(id, name, arity, cat, levels, alg, attrs) id,
#include "strata/ir/op_table.def"
};

/// How a reduction treats its elements (the reduction family of op_table.def).
enum class Premap : uint8_t { Identity, Square };
enum class Combine : uint8_t { Add, Max };
enum class Finalize : uint8_t { None, Mean, RootMean };

/// One row of the reduction family.
struct ReductionInfo {
  Premap premap = Premap::Identity;
  Combine combine = Combine::Add;
  Finalize finalize = Finalize::None;
  OpKind accumulator;  ///< the for-loop accumulator performing the same reduction
};

/// Static properties of an op kind: one row of the op table.
struct OpInfo {
  OpKind kind;
  std::string_view name;
  int arity;  ///< -1 = variadic
  Category category;
  uint8_t levels;
  Algebra algebra;
  AttrSet attrs;
  /// Set for ops that reduce elements (Reduce, Norm, running_max and the reducing
  /// accumulators): how they reduce.
  std::optional<ReductionInfo> reduction;
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
/// The op's reduction (combine, premap, finalize), or nullptr if it does not reduce.
inline const ReductionInfo* op_reduction(OpKind k) {
  const auto& r = op_info(k).reduction;
  return r ? &*r : nullptr;
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
  int dim = 0;                    ///< Reduce, Norm, Concat, Slice
  int64_t to = 1;                 ///< Reduce, accum_sum_to_dimx: extent after reduction
  double scalar = 0.0;            ///< mul_scalar, add_scalar: c; clamp: lo; norms: eps
  double scalar2 = 0.0;           ///< clamp: hi
  int64_t start = 0, end = 0;     ///< Slice: the half-open range [start, end) of dim
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
  double scalar = 0.0;   ///< OpAttrs::scalar of the step's op
  double scalar2 = 0.0;  ///< OpAttrs::scalar2 of the step's op
  bool operator==(const ThreadStep&) const = default;
};

/// Which OpAttrs field an attribute sets.
enum class AttrField : uint8_t { Dim, To, Scalar, Scalar2, Start, End };

/// One attribute of an op as programs and μGraph JSON name it.
struct AttrSpec {
  std::string_view name;   ///< keyword in programs and key in JSON
  std::string_view alias;  ///< a second accepted keyword in programs ("" if none)
  AttrField field;
  bool is_int;    ///< an integer (else a real number)
  bool required;  ///< else `default_value` applies
  double default_value;
};

/// The attributes of op kind k, in canonical order (parser signatures, JSON keys, printing).
std::span<const AttrSpec> attr_specs(OpKind k);
/// Reads / writes the OpAttrs field of an attribute (integers as doubles are exact up to 2^53;
/// the integer fields use get_int_attr / set_int_attr).
double get_real_attr(const OpAttrs& a, AttrField f);
void set_real_attr(OpAttrs& a, AttrField f, double v);
int64_t get_int_attr(const OpAttrs& a, AttrField f);
void set_int_attr(OpAttrs& a, AttrField f, int64_t v);
/// The attributes of an elementwise op carried by a thread step, and back.
OpAttrs step_attrs(const ThreadStep& s);
ThreadStep make_step(OpKind kind, std::array<int, 2> args, const OpAttrs& a);

}  // namespace strata
