#include "strata/ir/kernel_graph.h"

#include <algorithm>

#include "strata/ir/shape_infer.h"

namespace strata {
namespace {

std::string where(int op_id, OpKind kind) {
  return "kernel op #" + std::to_string(op_id) + " (" + std::string(op_name(kind)) + ")";
}

}  // namespace

Status KernelGraph::check_name(const std::string& name) const {
  if (!name.empty() && find_tensor(name) >= 0)
    return make_error("duplicate tensor name `" + name + "`");
  return Status::success();
}

int KernelGraph::add_tensor(const Shape& s, DType dt, int producer, std::string name) {
  tensors_.push_back({s, dt, producer, std::move(name)});
  return static_cast<int>(tensors_.size()) - 1;
}

Result<int> KernelGraph::add_input(std::string name, const Shape& shape, DType dtype) {
  STRATA_RETURN_IF_ERROR(check_name(name));
  if (shape.rank() < 1)
    return make_error("input `" + name + "` has no dimensions; expected 1 to " +
                      std::to_string(kMaxRank) + " extents");
  if (Status st = shape.check(); !st.ok())
    return make_error("input `" + name + "`: " + st.error().message);
  int op_id = static_cast<int>(ops_.size());
  int t = add_tensor(shape, dtype, op_id, std::move(name));
  ops_.push_back({OpKind::Input, {}, {t}, {}, nullptr});
  inputs_.push_back(t);
  input_shard_.push_back(kReplicated);
  return t;
}

Result<int> KernelGraph::add_op(OpKind kind, std::vector<int> inputs, OpAttrs attrs,
                                std::string name) {
  int op_id = static_cast<int>(ops_.size());
  std::string at = where(op_id, kind);
  const OpInfo& info = op_info(kind);
  if (!(info.levels & kKernel) || kind == OpKind::Input || kind == OpKind::Customized)
    return make_error(at + ": `" + std::string(info.name) +
                      "` is not a predefined kernel op" +
                      (kind == OpKind::Customized ? " (use add_customized)" : ""));
  std::vector<Shape> shapes;
  for (int t : inputs) {
    if (t < 0 || t >= static_cast<int>(tensors_.size()))
      return make_error(at + ": input tensor #" + std::to_string(t) + " does not exist");
    shapes.push_back(tensors_[t].shape);
  }
  auto s = infer_compute_shape(kind, shapes, attrs);
  if (!s.ok()) return make_error(at + ": " + s.error().message);
  STRATA_RETURN_IF_ERROR(check_name(name));
  DType dt = inputs.empty() ? DType::f16 : tensors_[inputs[0]].dtype;
  int t = add_tensor(*s, dt, op_id, std::move(name));
  ops_.push_back({kind, std::move(inputs), {t}, attrs, nullptr});
  return t;
}

Result<std::vector<int>> KernelGraph::add_customized(std::vector<int> inputs, BlockGraph body,
                                                     std::vector<std::string> names) {
  int op_id = static_cast<int>(ops_.size());
  std::string at = where(op_id, OpKind::Customized);
  if (inputs.empty()) return make_error(at + ": a customized op needs at least one input");
  if (body.num_inputs() != static_cast<int>(inputs.size()))
    return make_error(at + ": block graph has " + std::to_string(body.num_inputs()) +
                      " input iterator(s) but the op has " + std::to_string(inputs.size()) +
                      " input(s)");
  for (size_t i = 0; i < inputs.size(); ++i) {
    int t = inputs[i];
    if (t < 0 || t >= static_cast<int>(tensors_.size()))
      return make_error(at + ": input tensor #" + std::to_string(t) + " does not exist");
    if (tensors_[t].shape != body.input_shape(static_cast<int>(i)))
      return make_error(at + ": input " + std::to_string(i) + " (" + tensor_name(t) +
                        ") has shape " + tensors_[t].shape.str() +
                        " but the block graph's iterator expects " +
                        body.input_shape(static_cast<int>(i)).str());
  }
  auto complete = body.check_complete();
  if (!complete.ok()) return make_error(at + ": " + complete.error().message);
  if (!names.empty() && names.size() != static_cast<size_t>(body.num_outputs()))
    return make_error(at + ": " + std::to_string(names.size()) + " names given for " +
                      std::to_string(body.num_outputs()) + " outputs");
  for (size_t i = 0; i < names.size(); ++i) {
    STRATA_RETURN_IF_ERROR(check_name(names[i]));
    for (size_t j = 0; j < i; ++j)
      if (!names[i].empty() && names[i] == names[j])
        return make_error("duplicate tensor name `" + names[i] + "`");
  }
  DType dt = tensors_[inputs[0]].dtype;
  std::vector<int> outs;
  for (int i = 0; i < body.num_outputs(); ++i)
    outs.push_back(add_tensor(body.output_shape(i), dt, op_id, names.empty() ? "" : names[i]));
  ops_.push_back({OpKind::Customized, std::move(inputs), outs, {},
                  std::make_shared<const BlockGraph>(std::move(body))});
  return outs;
}

Status KernelGraph::mark_output(int tensor, std::string name) {
  if (tensor < 0 || tensor >= static_cast<int>(tensors_.size()))
    return make_error("output tensor #" + std::to_string(tensor) + " does not exist");
  if (std::find(outputs_.begin(), outputs_.end(), tensor) != outputs_.end())
    return make_error("tensor `" + tensor_name(tensor) + "` is already an output");
  if (!name.empty() && name != tensors_[tensor].name) {
    STRATA_RETURN_IF_ERROR(check_name(name));
    tensors_[tensor].name = std::move(name);
  }
  outputs_.push_back(tensor);
  output_shard_.push_back(kReplicated);
  return Status::success();
}

void KernelGraph::pop_op() {
  if (ops_.empty()) return;
  const KernelOp& op = ops_.back();
  for (int t : op.outputs) {
    for (size_t i = outputs_.size(); i-- > 0;)
      if (outputs_[i] == t) {
        outputs_.erase(outputs_.begin() + static_cast<std::ptrdiff_t>(i));
        output_shard_.erase(output_shard_.begin() + static_cast<std::ptrdiff_t>(i));
      }
    if (op.kind == OpKind::Input) {
      inputs_.pop_back();
      input_shard_.pop_back();
    }
  }
  tensors_.resize(tensors_.size() - op.outputs.size());
  ops_.pop_back();
}

Status KernelGraph::check_complete() const {
  if (outputs_.empty()) return make_error("kernel graph has no outputs");
  return Status::success();
}

Status KernelGraph::set_ranks(int ranks) {
  if (ranks < 1 || ranks > kMaxRanks)
    return make_error("ranks " + std::to_string(ranks) + " is out of range; expected 1 to " +
                      std::to_string(kMaxRanks));
  if (ranks == 1)
    for (size_t i = 0; i < input_shard_.size() + output_shard_.size(); ++i)
      if ((i < input_shard_.size() ? input_shard_[i]
                                   : output_shard_[i - input_shard_.size()]) != kReplicated)
        return make_error("a graph with sharded tensors needs ranks ≥ 2");
  ranks_ = ranks;
  return Status::success();
}

namespace {

// Normalizes `dim` of a sharded tensor and checks the full shape it implies.
Result<int> shard_dim(const std::string& what, const KernelTensor& t, int dim, int ranks) {
  if (dim == kReplicated) return kReplicated;
  const int r = t.shape.rank();
  if (dim < 0 || dim >= r)
    return make_error(what + ": shard dim " + std::to_string(dim) + " is out of range for " +
                      t.shape.str() + "; expected 0 to " + std::to_string(r - 1));
  if (ranks < 2)
    return make_error(what + ": a sharded tensor needs ranks ≥ 2 (declare `ranks R` first)");
  Shape full = t.shape;
  full[dim] = t.shape[dim] * ranks;
  if (Status st = full.check(); !st.ok())
    return make_error(what + ": the full tensor over " + std::to_string(ranks) +
                      " ranks: " + st.error().message);
  return dim;
}

}  // namespace

Status KernelGraph::set_input_shard(int index, int dim) {
  if (index < 0 || index >= static_cast<int>(inputs_.size()))
    return make_error("input #" + std::to_string(index) + " does not exist");
  STRATA_ASSIGN_OR_RETURN(input_shard_[index],
                          shard_dim("input `" + tensor_name(inputs_[index]) + "`",
                                    tensors_[inputs_[index]], dim, ranks_));
  return Status::success();
}

Status KernelGraph::set_output_shard(int index, int dim) {
  if (index < 0 || index >= static_cast<int>(outputs_.size()))
    return make_error("output #" + std::to_string(index) + " does not exist");
  STRATA_ASSIGN_OR_RETURN(output_shard_[index],
                          shard_dim("output `" + tensor_name(outputs_[index]) + "`",
                                    tensors_[outputs_[index]], dim, ranks_));
  return Status::success();
}

bool KernelGraph::is_parallel() const {
  if (ranks_ > 1) return true;
  return std::any_of(ops_.begin(), ops_.end(), [](const KernelOp& op) {
    return op_category(op.kind) == Category::Collective;
  });
}

void KernelGraph::copy_parallel_interface(const KernelGraph& from) {
  ranks_ = from.ranks_;
  for (size_t i = 0; i < input_shard_.size(); ++i)
    input_shard_[i] = i < from.input_shard_.size() ? from.input_shard_[i] : kReplicated;
  for (size_t i = 0; i < output_shard_.size(); ++i)
    output_shard_[i] = i < from.output_shard_.size() ? from.output_shard_[i] : kReplicated;
}

int KernelGraph::num_customized() const {
  return static_cast<int>(std::count_if(ops_.begin(), ops_.end(), [](const KernelOp& op) {
    return op.kind == OpKind::Customized;
  }));
}

std::vector<int> KernelGraph::dead_tensors() const {
  std::vector<char> used(tensors_.size(), 0);
  for (const KernelOp& op : ops_)
    for (int t : op.inputs) used[t] = 1;
  for (int t : outputs_) used[t] = 1;
  std::vector<int> dead;
  for (size_t t = 0; t < tensors_.size(); ++t) {
    const int producer = tensors_[t].producer;
    if (!used[t] && ops_[producer].kind != OpKind::Input) dead.push_back(static_cast<int>(t));
  }
  return dead;
}

std::string KernelGraph::tensor_name(int id) const {
  if (id >= 0 && id < static_cast<int>(tensors_.size()) && !tensors_[id].name.empty())
    return tensors_[id].name;
  return "t" + std::to_string(id);
}

int KernelGraph::find_tensor(const std::string& name) const {
  for (size_t i = 0; i < tensors_.size(); ++i)
    if (tensors_[i].name == name) return static_cast<int>(i);
  return -1;
}

bool KernelGraph::structurally_equal(const KernelGraph& o) const {
  if (ops_.size() != o.ops_.size() || tensors_.size() != o.tensors_.size() ||
      inputs_ != o.inputs_ || outputs_ != o.outputs_ || ranks_ != o.ranks_ ||
      input_shard_ != o.input_shard_ || output_shard_ != o.output_shard_)
    return false;
  for (size_t i = 0; i < tensors_.size(); ++i)
    if (tensors_[i].shape != o.tensors_[i].shape || tensors_[i].dtype != o.tensors_[i].dtype)
      return false;
  for (size_t i = 0; i < ops_.size(); ++i) {
    const KernelOp &a = ops_[i], &b = o.ops_[i];
    if (a.kind != b.kind || a.inputs != b.inputs || a.outputs != b.outputs || !(a.attrs == b.attrs))
      return false;
    if ((a.body == nullptr) != (b.body == nullptr)) return false;
    if (a.body && !(*a.body == *b.body)) return false;
  }
  return true;
}

}  // namespace strata
