#include "strata/ir/block_graph.h"

#include "strata/ir/shape_infer.h"

namespace strata {

char grid_axis_name(int axis) {
  return "xyz"[axis];
}

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
  std::array<int64_t, kMaxRank> ragged{};
  bool loop_ragged = false;
  int64_t loop_part = 0;  // the block part the for-loop splits (0: no fmap)
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
    const int64_t n = tile[d], parts = grid_[a], t = (n + parts - 1) / parts;
    if ((parts - 1) * t >= n)
      return make_error(at + ": imap " + axis + "→" + std::to_string(d) + " splits extent " +
                        std::to_string(n) + " into " + std::to_string(parts) +
                        " parts of " + std::to_string(t) + ", which leaves the last part empty");
    if (n % parts != 0) ragged[d] = n;
    tile[d] = t;
  }
  if (fmap != kReplicate) {
    if (fmap < 0 || fmap >= kernel_shape.rank())
      return make_error(at + ": fmap " + std::to_string(fmap) + " is not a dimension of " +
                        kernel_shape.str());
    // Every block's part (the last one's may be shorter) is split into F iterations, none empty.
    const int64_t t = (tile[fmap] + forloop_ - 1) / forloop_;
    int64_t shortest = tile[fmap];
    if (ragged[fmap] > 0) shortest = ragged[fmap] - (ragged[fmap] - 1) / tile[fmap] * tile[fmap];
    if ((forloop_ - 1) * t >= shortest)
      return make_error(at + ": fmap " + std::to_string(fmap) + " splits extent " +
                        std::to_string(shortest) + " into " + std::to_string(forloop_) +
                        " iterations of " + std::to_string(t) +
                        ", which leaves the last iteration empty");
    // The loop's own raggedness is per iteration, not across blocks. One iteration cuts nothing:
    // the block's part stays ragged across the grid (and its saver writes the true extent).
    if (forloop_ > 1) {
      loop_ragged = ragged[fmap] > 0 || tile[fmap] % forloop_ != 0;
      ragged[fmap] = 0;
    }
    loop_part = tile[fmap];
    tile[fmap] = t;
  }
  OpAttrs attrs;
  attrs.input_index = num_inputs();
  attrs.imap = imap;
  attrs.fmap = fmap;
  int t = static_cast<int>(tensors_.size());
  tensors_.push_back({tile, ragged, Stage::Loop, op_id, {}});
  ops_.push_back({OpKind::Input, {}, t, attrs, {}});
  input_shapes_.push_back(kernel_shape);
  input_ops_.push_back(op_id);
  input_loop_ragged_.push_back(loop_ragged);
  input_loop_part_.push_back(loop_part);
  return t;
}

namespace {

/// The ragged extents of a compute op's result from its operands' (dims aligned as the op
/// aligns them), or an error when a ragged dim meets a dim that is not ragged the same way
/// (the last block's tiles would differ in length) or the op would slice, concatenate or
/// group-reduce along a ragged dim.
Result<std::array<int64_t, kMaxRank>> ragged_result(OpKind kind, const OpAttrs& attrs,
                                                    const std::vector<const BlockTensor*>& in,
                                                    const Shape& out) {
  constexpr int64_t kUnset = -1;
  std::array<int64_t, kMaxRank> r;
  r.fill(kUnset);
  const int ro = out.rank();
  const Category cat = op_category(kind);
  for (size_t k = 0; k < in.size(); ++k) {
    const BlockTensor& t = *in[k];
    const int ri = t.shape.rank();
    for (int d = 0; d < ri; ++d) {
      const int64_t v = t.ragged[d];
      int od = d + ro - ri;  // elementwise alignment
      if (cat == Category::Matmul) {
        // A's rows and B's columns carry through; the contracted dims must agree.
        if ((k == 0 && d == ri - 1) || (k == 1 && d == ri - 2)) {
          if (k == 1 && in[0]->ragged[in[0]->shape.rank() - 1] != v)
            return make_error("the contracted dims are split raggedly differently");
          continue;
        }
        od = d;
      } else if (cat == Category::Layout && kind == OpKind::Transpose && d >= ri - 2) {
        od = d == ri - 1 ? ri - 2 : ri - 1;
      } else if (v != 0 && (cat == Category::Layout || cat == Category::Concat) &&
                 d == attrs.dim) {
        return make_error(std::string(op_name(kind)) + " along dim " + std::to_string(d) +
                          ", which is split raggedly across blocks");
      } else if ((cat == Category::Reduce || cat == Category::Norm) && d == attrs.dim) {
        if (v != 0 && cat == Category::Reduce && attrs.to != 1)
          return make_error(std::string(op_name(kind)) + " to " + std::to_string(attrs.to) +
                            " groups along a dim split raggedly across blocks");
        if (cat == Category::Reduce) continue;  // reduced away
      } else if ((cat == Category::Scan || cat == Category::Accum) && d == ri - 1 &&
                 out[ro - 1] == 1 && t.shape[d] != 1) {
        continue;  // the last dim reduced away
      }
      if (od < 0 || od >= ro || t.shape[d] != out[od]) continue;  // broadcast or reduced
      if (t.shape[d] == 1) continue;
      if (r[od] != kUnset && r[od] != v)
        return make_error("dim " + std::to_string(od) +
                          " meets operands split differently across blocks (" +
                          (r[od] ? "ragged over " + std::to_string(r[od]) : "not ragged") +
                          " and " + (v ? "ragged over " + std::to_string(v) : "not ragged") + ")");
      r[od] = v;
    }
  }
  for (int64_t& v : r)
    if (v == kUnset) v = 0;
  return r;
}

}  // namespace

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
    for (int t : inputs)
      if (tensors_[t].stage != Stage::Loop)
        return make_error(at + ": accumulators take loop-body tensors; tensor #" +
                          std::to_string(t) + " is post-loop");
    auto s = infer_accum_shape(kind, shapes, forloop_, attrs);
    if (!s.ok()) return make_error(at + ": " + s.error().message);
    out = *s;
    stage = Stage::Post;
  } else {
    STRATA_ASSIGN_OR_RETURN(stage, compute_stage(at, inputs));
    if (info.category == Category::Scan && stage != Stage::Loop)
      return make_error(at +
                        ": a running op carries its value across iterations; it takes "
                        "loop-body tensors, and tensor #" +
                        std::to_string(inputs[0]) + " is post-loop");
    auto s = infer_compute_shape(kind, shapes, attrs);
    if (!s.ok()) return make_error(at + ": " + s.error().message);
    out = *s;
  }
  if (accum && kind == OpKind::AccumSum && attrs.fmap != kReplicate && ragged_loop())
    return make_error(at + ": concatenating the iterations of a for-loop that some input splits "
                      "raggedly (the last iteration's tile is shorter) is not supported");
  std::vector<const BlockTensor*> operands;
  for (int t : inputs) operands.push_back(&tensors_[t]);
  auto ragged = ragged_result(kind, attrs, operands, out);
  if (!ragged.ok()) return make_error(at + ": " + ragged.error().message);
  int t = static_cast<int>(tensors_.size());
  tensors_.push_back({out, *ragged, stage, op_id, {}});
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
    shapes.push_back(tensors_[t].shape);
  }
  STRATA_ASSIGN_OR_RETURN(Stage stage, compute_stage(at, inputs));
  auto s = infer_thread_graph_shape(chain, shapes);
  if (!s.ok()) return make_error(at + ": " + s.error().message);
  std::vector<const BlockTensor*> operands;  // elementwise: ragged extents align like shapes
  for (int x : inputs) operands.push_back(&tensors_[x]);
  auto ragged = ragged_result(OpKind::Add, {}, operands, *s);
  if (!ragged.ok()) return make_error(at + ": " + ragged.error().message);
  int t = static_cast<int>(tensors_.size());
  tensors_.push_back({*s, *ragged, stage, op_id, {}});
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
        return make_error(at + ": omap maps grid axis " + axis + " of size 1 to dim " +
                          std::to_string(d) + "; it must map to φ");
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
    if (used[d]) return make_error(at + ": omap maps two grid axes to dim " + std::to_string(d));
    used[d] = true;
    full[d] = saturating_mul(full[d], grid_[a]);
    if (int64_t n = bt.ragged[d]; n > 0) {  // the blocks' tiles cover n elements together
      if (n > full[d] || n <= full[d] - bt.shape[d])
        return make_error(at + ": dim " + std::to_string(d) + " covers " + std::to_string(n) +
                          " elements split raggedly, which " + std::to_string(grid_[a]) +
                          " tiles of " + std::to_string(bt.shape[d]) + " along grid axis " +
                          axis + " do not");
      full[d] = n;
    }
  }
  for (int d = 0; d < bt.shape.rank(); ++d)
    if (bt.ragged[d] > 0 && !used[d])
      return make_error(at + ": dim " + std::to_string(d) +
                        " is split raggedly across the grid but no omap axis places it");
  if (Status st = full.check(); !st.ok())
    return make_error(at + ": saved tensor " + st.error().message);
  OpAttrs attrs;
  attrs.omap = omap;
  ops_.push_back({OpKind::Output, {tensor}, -1, attrs, {}});
  output_ops_.push_back(op_id);
  output_shapes_.push_back(full);
  return num_outputs() - 1;
}

std::array<BlockGraph::Range, 4> BlockGraph::input_tile(int i, const std::array<int, 3>& block,
                                                        int iter) const {
  const BlockOp& op = ops_[input_ops_[i]];
  const Shape& k = input_shapes_[i];
  const int pad = 4 - k.rank();
  std::array<Range, 4> r;
  for (int d = 0; d < k.rank(); ++d) r[d + pad] = {0, k[d]};
  for (int g = 0; g < 3; ++g) {
    int d = op.attrs.imap[g];
    if (d == kReplicate) continue;
    int64_t t = (k[d] + grid_[g] - 1) / grid_[g];
    int64_t lo = int64_t{block[g]} * t;
    r[d + pad] = {lo, std::min(lo + t, k[d]) - lo};
  }
  if (op.attrs.fmap != kReplicate) {
    Range& x = r[op.attrs.fmap + pad];
    int64_t t = tensors_[op.output].shape[op.attrs.fmap];
    int64_t lo = x.offset + int64_t{iter} * t;
    x = {lo, std::min(lo + t, x.offset + x.length) - lo};
  }
  return r;
}

bool BlockGraph::loop_invariant(int t) const {
  const BlockTensor& bt = tensors_[t];
  if (bt.stage != Stage::Loop) return false;
  const BlockOp& op = ops_[bt.producer];
  if (op.kind == OpKind::Input) return op.attrs.fmap == kReplicate;
  if (op_category(op.kind) == Category::Scan) return false;
  for (int x : op.inputs)
    if (!loop_invariant(x)) return false;
  return true;
}

Result<Stage> BlockGraph::compute_stage(const std::string& at,
                                        const std::vector<int>& inputs) const {
  bool post = false;
  for (int t : inputs) post = post || tensors_[t].stage == Stage::Post;
  if (!post) return Stage::Loop;
  for (int t : inputs)
    if (tensors_[t].stage == Stage::Loop && !loop_invariant(t))
      return make_error(at + ": mixes loop-body and post-loop tensors (#" + std::to_string(t) +
                        " changes with the iteration); a loop result is only available after "
                        "an accumulator, and only loop-invariant tiles are read after the loop");
  return Stage::Post;
}

bool BlockGraph::ragged_loop() const {
  for (bool r : input_loop_ragged_)
    if (r) return true;
  return false;
}

int64_t BlockGraph::loop_extent() const {
  int64_t p = 0;
  for (int64_t part : input_loop_part_) {
    if (part == 0) continue;
    if (p != 0 && part != p) return 0;
    p = part;
  }
  return p;
}

bool BlockGraph::ragged() const {
  if (ragged_loop()) return true;
  for (int i = 0; i < num_inputs(); ++i)
    for (int64_t v : tensors_[ops_[input_ops_[i]].output].ragged)
      if (v != 0) return true;
  return false;
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
    input_loop_ragged_.pop_back();
    input_loop_part_.pop_back();
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
