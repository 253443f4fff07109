#include "strata/block_graph.h"

#include "strata/shape_infer.h"

namespace strata {

char grid_axis_name(int axis) { return "xyz"[axis]; }

Result<BlockGraph> BlockGraph::make(Dim3 grid, int block_threads, int forloop) {
  for (int a = 0; a < 3; ++a)
    if (grid[a] < 1)
      return make_error(std::string("block graph: grid.") + grid_axis_name(a) + " is " +
                        std::to_string(grid[a]) + "; every grid extent must be at least 1");
  if (block_threads < 32 || block_threads > 1024 || block_threads % 32 != 0)
    return make_error("block graph: block size " + std::to_string(block_threads) +
                      " must be a multiple of 32 between 32 and 1024");
  if (forloop < 1)
    return make_error("block graph: forloop range " + std::to_string(forloop) +
                      " must be at least 1");
  BlockGraph g;
  g.grid_ = grid;
  g.block_threads_ = block_threads;
  g.forloop_ = forloop;
  return g;
}

std::string BlockGraph::where(int op_id, OpKind kind) const {
  return "block op #" + std::to_string(op_id) + " (" + std::string(op_name(kind)) + ")";
}

Result<int> BlockGraph::add_input(const Shape& kernel_shape, GridMap imap, int fmap) {
  int op_id = static_cast<int>(ops_.size());
  std::string at = where(op_id, OpKind::Input) + ", input " + std::to_string(num_inputs());
  if (Status st = kernel_shape.check(); !st.ok()) return make_error(at + ": " + st.error().message);
  Shape tile = kernel_shape;
  bool used[kMaxRank] = {false, false, false, false};
  for (int a = 0; a < 3; ++a) {
    int d = imap[a];
    std::string axis(1, grid_axis_name(a));
    if (d == kReplicate) continue;
    if (d < 0 || d >= kernel_shape.rank())
      return make_error(at + ": imap " + axis + "→" + std::to_string(d) +
                        " is not a dimension of " + kernel_shape.str());
    if (grid_[a] == 1)
      return make_error(at + ": imap maps grid axis " + axis +
                        " of size 1 to dim " + std::to_string(d) + "; it must map to φ");
    if (used[d])
      return make_error(at + ": imap maps two grid axes to dim " + std::to_string(d));
    used[d] = true;
    if (tile[d] % grid_[a] != 0)
      return make_error(at + ": imap " + axis + "→" + std::to_string(d) + " splits extent " +
                        std::to_string(tile[d]) + " into " + std::to_string(grid_[a]) +
                        " parts, which does not divide");
    tile[d] /= grid_[a];
  }
  if (fmap != kReplicate) {
    if (fmap < 0 || fmap >= kernel_shape.rank())
      return make_error(at + ": fmap " + std::to_string(fmap) + " is not a dimension of " +
                        kernel_shape.str());
    if (tile[fmap] % forloop_ != 0)
      return make_error(at + ": fmap " + std::to_string(fmap) + " splits extent " +
                        std::to_string(tile[fmap]) + " into " + std::to_string(forloop_) +
                        " iterations, which does not divide");
    tile[fmap] /= forloop_;
  }
  OpAttrs attrs;
  attrs.input_index = num_inputs();
  attrs.imap = imap;
  attrs.fmap = fmap;
  int t = static_cast<int>(tensors_.size());
  tensors_.push_back({tile, Stage::Loop, op_id, {}});
  ops_.push_back({OpKind::Input, {}, t, attrs, {}});
  input_shapes_.push_back(kernel_shape);
  input_ops_.push_back(op_id);
  return t;
}

Result<int> BlockGraph::add_op(OpKind kind, std::vector<int> inputs, OpAttrs attrs) {
  int op_id = static_cast<int>(ops_.size());
  std::string at = where(op_id, kind);
  const OpInfo& info = op_info(kind);
  bool accum = info.levels & kBlockAccum;
  if (!(info.levels & kBlock) && !accum) {
    return make_error(at + ": `" + std::string(info.name) +
                      "` cannot be added as a block compute op or accumulator");
  }
  if (kind == OpKind::ThreadFused)
    return make_error(at + ": use add_thread_graph for thread graphs");
  if (info.arity >= 0 && static_cast<int>(inputs.size()) != info.arity)
    return make_error(at + ": takes " + std::to_string(info.arity) + " input(s), got " +
                      std::to_string(inputs.size()));
  std::vector<Shape> shapes;
  for (int t : inputs) {
    if (t < 0 || t >= static_cast<int>(tensors_.size()))
      return make_error(at + ": input tensor #" + std::to_string(t) + " does not exist");
    shapes.push_back(tensors_[t].shape);
  }
  Stage stage = tensors_[inputs[0]].stage;
  Shape out;
  if (accum) {
    if (stage != Stage::Loop)
      return make_error(at + ": accumulators take loop-body tensors; tensor #" +
                        std::to_string(inputs[0]) + " is post-loop");
    auto s = infer_accum_shape(kind, shapes[0], forloop_, attrs);
    if (!s.ok()) return make_error(at + ": " + s.error().message);
    out = *s;
    stage = Stage::Post;
  } else {
    for (int t : inputs)
      if (tensors_[t].stage != stage)
        return make_error(at + ": mixes loop-body and post-loop tensors (#" +
                          std::to_string(inputs[0]) + " and #" + std::to_string(t) +
                          "); a loop result is only available after an accumulator");
    auto s = infer_compute_shape(kind, shapes, attrs);
    if (!s.ok()) return make_error(at + ": " + s.error().message);
    out = *s;
  }
  int t = static_cast<int>(tensors_.size());
  tensors_.push_back({out, stage, op_id, {}});
  ops_.push_back({kind, std::move(inputs), t, attrs, {}});
  return t;
}

Result<int> BlockGraph::add_thread_graph(std::vector<int> inputs, std::vector<ThreadStep> chain) {
  int op_id = static_cast<int>(ops_.size());
  std::string at = where(op_id, OpKind::ThreadFused);
  if (inputs.empty()) return make_error(at + ": a thread graph needs at least one input");
  std::vector<Shape> shapes;
  for (int t : inputs) {
    if (t < 0 || t >= static_cast<int>(tensors_.size()))
      return make_error(at + ": input tensor #" + std::to_string(t) + " does not exist");
    if (tensors_[t].stage != tensors_[inputs[0]].stage)
      return make_error(at + ": mixes loop-body and post-loop tensors");
    shapes.push_back(tensors_[t].shape);
  }
  auto s = infer_thread_graph_shape(chain, shapes);
  if (!s.ok()) return make_error(at + ": " + s.error().message);
  int t = static_cast<int>(tensors_.size());
  tensors_.push_back({*s, tensors_[inputs[0]].stage, op_id, {}});
  ops_.push_back({OpKind::ThreadFused, std::move(inputs), t, {}, std::move(chain)});
  return t;
}

Result<int> BlockGraph::add_output(int tensor, GridMap omap) {
  int op_id = static_cast<int>(ops_.size());
  std::string at = where(op_id, OpKind::Output) + ", output " + std::to_string(num_outputs());
  if (tensor < 0 || tensor >= static_cast<int>(tensors_.size()))
    return make_error(at + ": tensor #" + std::to_string(tensor) + " does not exist");
  const BlockTensor& bt = tensors_[tensor];
  if (bt.stage != Stage::Post)
    return make_error(at + ": only post-loop tensors may be saved; tensor #" +
                      std::to_string(tensor) + " is a loop-body tile (add an accumulator)");
  Shape full = bt.shape;
  bool used[kMaxRank] = {false, false, false, false};
  for (int a = 0; a < 3; ++a) {
    int d = omap[a];
    std::string axis(1, grid_axis_name(a));
    if (grid_[a] == 1) {
      if (d != kReplicate)
        return make_error(at + ": omap maps grid axis " + axis +
                          " of size 1 to dim " + std::to_string(d) + "; it must map to φ");
      continue;
    }
    if (d == kReplicate)
      return make_error(at + ": omap on a replicated axis: grid axis " + axis + " has " +
                        std::to_string(grid_[a]) +
                        " blocks but maps to φ, so they would write the same tile; map it to a "
                        "data dimension");
    if (d < 0 || d >= bt.shape.rank())
      return make_error(at + ": omap " + axis + "→" + std::to_string(d) +
                        " is not a dimension of tile " + bt.shape.str());
    if (used[d])
      return make_error(at + ": omap maps two grid axes to dim " + std::to_string(d));
    used[d] = true;
    full[d] = saturating_mul(full[d], grid_[a]);
  }
  if (Status st = full.check(); !st.ok())
    return make_error(at + ": saved tensor " + st.error().message);
  OpAttrs attrs;
  attrs.omap = omap;
  ops_.push_back({OpKind::Output, {tensor}, -1, attrs, {}});
  output_ops_.push_back(op_id);
  output_shapes_.push_back(full);
  return num_outputs() - 1;
}

Status BlockGraph::set_tensor_name(int tensor, std::string name) {
  if (tensor < 0 || tensor >= static_cast<int>(tensors_.size()))
    return make_error("tensor #" + std::to_string(tensor) + " does not exist");
  for (size_t i = 0; i < tensors_.size(); ++i)
    if (!name.empty() && static_cast<int>(i) != tensor && tensors_[i].name == name)
      return make_error("duplicate tensor name `" + name + "` in block graph");
  tensors_[tensor].name = std::move(name);
  return Status::success();
}

std::string BlockGraph::tensor_name(int tensor) const {
  if (tensor >= 0 && tensor < static_cast<int>(tensors_.size()) && !tensors_[tensor].name.empty())
    return tensors_[tensor].name;
  return "b" + std::to_string(tensor);
}

void BlockGraph::pop_op() {
  if (ops_.empty()) return;
  const BlockOp& op = ops_.back();
  if (op.kind == OpKind::Input) {
    input_shapes_.pop_back();
    input_ops_.pop_back();
  } else if (op.kind == OpKind::Output) {
    output_ops_.pop_back();
    output_shapes_.pop_back();
  }
  if (op.output >= 0) tensors_.pop_back();
  ops_.pop_back();
}

Status BlockGraph::check_complete() const {
  if (output_ops_.empty()) return make_error("block graph has no output saver");
  return Status::success();
}

bool BlockGraph::operator==(const BlockGraph& o) const {
  if (!(grid_ == o.grid_) || block_threads_ != o.block_threads_ || forloop_ != o.forloop_ ||
      ops_ != o.ops_ || input_shapes_ != o.input_shapes_)
    return false;
  return true;
}

}  // namespace strata
