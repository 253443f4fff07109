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
//  - tensor names, when given, are unique.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "strata/block_graph.h"
#include "strata/op.h"
#include "strata/shape.h"
#include "strata/status.h"

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
};

}  // namespace strata
