// The kernel graph: the top level of a μGraph (docs/mugraph-semantics.md §2.1).
//
// Nodes are kernels over the whole GPU; edges are device tensors. A node is a predefined op
// (matmul, elementwise, sum, rms_norm, concat …) or a customized op whose body is a block
// graph. A program is a kernel graph of predefined ops only.
//
// Invariants (held by construction; every mutator checks and returns an Error otherwise):
//  - ops are stored in topological order; op and tensor ids are dense indices;
//  - Input ops come from add_input and produce one tensor each;
//  - a customized op's block graph has one input iterator per op input, with the same
//    device shape, and is complete;
//  - tensor names, when given, are unique;
//  - ranks() ≥ 1; every input and every output has a shard dim (kReplicated or a dim of the
//    tensor): the tensor-parallel interface of docs/tensor-parallel.md.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "strata/ir/block_graph.h"
#include "strata/ir/op.h"
#include "strata/ir/shape.h"
#include "strata/util/status.h"

namespace strata {

struct KernelTensor {
  Shape shape;
  DType dtype = DType::f16;
  int producer = -1;  ///< op id
  std::string name;   ///< may be empty
};

struct KernelOp {
  OpKind kind;
  std::vector<int> inputs;   ///< tensor ids
  std::vector<int> outputs;  ///< tensor ids
  OpAttrs attrs;
  std::shared_ptr<const BlockGraph> body;  ///< Customized only
};

/// A tensor of the tensor-parallel interface that is the same on every rank.
inline constexpr int kReplicated = -1;
/// The most ranks a tensor-parallel graph may declare (docs/tensor-parallel.md).
inline constexpr int kMaxRanks = 64;

class KernelGraph {
 public:
  /// Adds a program input (a device tensor). Returns its tensor id.
  Result<int> add_input(std::string name, const Shape& shape, DType dtype);
  /// Adds a predefined op with one output. Returns the output tensor id.
  Result<int> add_op(OpKind kind, std::vector<int> inputs, OpAttrs attrs = {},
                     std::string name = "");
  /// Adds a customized op running `body` on `inputs`. Returns the output tensor ids.
  Result<std::vector<int>> add_customized(std::vector<int> inputs, BlockGraph body,
                                          std::vector<std::string> names = {});
  /// Marks a tensor as a graph output (in order). A name, if given, renames the tensor.
  Status mark_output(int tensor, std::string name = "");
  /// Removes the last op and its output tensors (and any output marks on them).
  void pop_op();
  /// Checks the graph is complete: at least one output.
  Status check_complete() const;

  // ---- tensor parallelism (docs/tensor-parallel.md) --------------------------------------
  // A graph describes what one rank of a group of ranks() ranks computes (SPMD). Input i is
  // either replicated (every rank holds the whole tensor) or sharded along a dim d: rank r
  // holds the r-th of ranks() equal parts of the full tensor along d, whose extent is the
  // declared one times ranks(). Outputs likewise: a replicated output is the same on every
  // rank; a sharded output's full value is the rank values concatenated along its dim.

  /// Sets the number of ranks, 1 to kMaxRanks.
  Status set_ranks(int ranks);
  /// Shards input `index` (a position in inputs()) along `dim` (0 to rank − 1), or
  /// replicates it with kReplicated. Requires ranks() ≥ 2 for a shard, and a full
  /// shape within Shape's element bound.
  Status set_input_shard(int index, int dim);
  /// As set_input_shard, for output `index` (a position in outputs()).
  Status set_output_shard(int index, int dim);
  int ranks() const { return ranks_; }
  /// The shard dim of input / output `index`, or kReplicated.
  int input_shard(int index) const { return input_shard_[index]; }
  int output_shard(int index) const { return output_shard_[index]; }
  /// True when the graph has more than one rank, or an all_reduce op.
  bool is_parallel() const;
  /// Copies ranks() and the shard dims of the inputs and outputs that both graphs have from
  /// `from` (a program whose interface this graph implements: search candidates, rebuilt
  /// graphs). The interfaces must match in shapes (not checked).
  void copy_parallel_interface(const KernelGraph& from);

  const std::vector<KernelOp>& ops() const { return ops_; }
  const std::vector<KernelTensor>& tensors() const { return tensors_; }
  const KernelOp& op(int id) const { return ops_[id]; }
  const KernelTensor& tensor(int id) const { return tensors_[id]; }
  const std::vector<int>& inputs() const { return inputs_; }
  const std::vector<int>& outputs() const { return outputs_; }
  int num_customized() const;
  /// Tensors computed by an op (not inputs) that no op reads and that are not outputs, in id
  /// order: dead code, which `strata check` warns about.
  std::vector<int> dead_tensors() const;
  /// The tensor's name, or "t<id>" if it has none.
  std::string tensor_name(int id) const;
  /// Tensor id by name, or -1.
  int find_tensor(const std::string& name) const;

  /// Structural equality: same ops, attributes, shapes and block graphs (names ignored).
  bool structurally_equal(const KernelGraph& o) const;

 private:
  Status check_name(const std::string& name) const;
  int add_tensor(const Shape& s, DType dt, int producer, std::string name);

  std::vector<KernelOp> ops_;
  std::vector<KernelTensor> tensors_;
  std::vector<int> inputs_;
  std::vector<int> outputs_;
  int ranks_ = 1;
  std::vector<int> input_shard_;   ///< per input position: a dim or kReplicated
  std::vector<int> output_shard_;  ///< per output position: a dim or kReplicated
};

}  // namespace strata
