#include "search/recipe.h"

#include <algorithm>
#include <map>

#include "strata/opt/graph_optimizer.h"

namespace strata::search {
namespace {

std::string grid_map_text(const GridMap& m) {
  std::string s;
  for (int a = 0; a < 3; ++a) s += (a ? "," : "") + std::to_string(m[a]);
  return s;
}

/// Depth-first rebuild of recipe steps [i, end) on top of `g`.
class Expander {
 public:
  Expander(const GraphRecipe& r, const KernelGraph& program, const ClassTable& classes,
           const SplitPolicy& policy, int64_t smem_limit,
           const std::function<void(KernelGraph&&)>& emit, const PlanOptions* plan)
      : r_(r),
        program_(program),
        classes_(classes),
        policy_(policy),
        smem_limit_(smem_limit),
        emit_(emit),
        plan_(plan) {}

  int64_t run() {
    KernelGraph g;
    for (int t : program_.inputs()) {
      const KernelTensor& kt = program_.tensor(t);
      if (!g.add_input(kt.name, kt.shape, kt.dtype).ok()) return 0;
    }
    base_ops_ = static_cast<int>(g.ops().size());
    chosen_.assign(r_.steps.size(), Extents{});
    step(0, g);
    return emitted_;
  }

 private:
  void step(size_t i, KernelGraph& g) {
    if (i == r_.steps.size()) {
      finish(g);
      return;
    }
    const KernelStep& s = r_.steps[i];
    if (!s.custom) {
      if (!g.add_op(s.kind, s.inputs, s.attrs).ok()) return;
      step(i + 1, g);
      g.pop_op();
      return;
    }
    const CustomRecipe& c = *s.custom;
    int64_t forced = 0;
    if (c.loop_origin >= 0) {
      size_t origin_step = static_cast<size_t>(c.loop_origin - base_ops_);
      if (origin_step >= i) return;
      forced = chosen_[origin_step].grid[c.loop_axis];
    }
    std::vector<Shape> shapes;
    for (int t : c.inputs) shapes.push_back(g.tensor(t).shape);
    for (const Extents& e : extent_choices(classes_, policy_, c.grid_class, c.loop_class, forced)) {
      auto b = build_block_graph(c, e, shapes);
      if (!b.ok()) continue;
      const std::vector<DType> dtypes = storage_dtypes(g, c.inputs, *b);
      const bool over = block_smem_bytes(*b, dtypes) > smem_limit_;
      // One input tile larger than the block's shared memory by itself: the estimate's slack
      // (tiles reused) cannot make it fit; only the plan can tell (a tile kept in registers).
      const bool tile_over = plan_ && largest_input_tile_bytes(*b, dtypes) > plan_->smem_limit;
      if (over && !plan_) continue;
      // Over the estimate: kept when the emitter's plan fits (inputs read as stored, no views).
      if ((over || tile_over) && !plan_fits(*b, g, c.inputs, dtypes)) continue;
      if (!g.add_customized(c.inputs, std::move(b).value()).ok()) continue;
      chosen_[i] = e;
      step(i + 1, g);
      g.pop_op();
    }
  }

  /// The storage type of each input of a customized op reading `inputs` of g with block
  /// graph b, as the emitter stores them (widened_tensors, cuda_emitter.cc): a 16-bit
  /// intermediate — not a program input nor an output of the recipe, possibly through layout
  /// ops, which the emitter reads in place — read in tiles whose rows (along the stored
  /// tensor: a transposed one's second-to-last dim) hold an odd number of elements is stored in
  /// f32. Other readers of the same tensor can only widen it more; this reader's rule is exact
  /// for this kernel's own tiles.
  std::vector<DType> storage_dtypes(const KernelGraph& g, const std::vector<int>& inputs,
                                    const BlockGraph& b) const {
    std::vector<DType> out;
    for (size_t k = 0; k < inputs.size(); ++k) {
      int t = inputs[k];
      bool transposed = false;
      for (;;) {
        const KernelOp& op = g.op(g.tensor(t).producer);
        if (op.kind != OpKind::Transpose && op.kind != OpKind::Slice) break;
        transposed = transposed != (op.kind == OpKind::Transpose);
        t = op.inputs[0];
      }
      const DType dt = g.tensor(inputs[k]).dtype;
      const bool intermediate =
          g.op(g.tensor(t).producer).kind != OpKind::Input &&
          std::find(r_.outputs.begin(), r_.outputs.end(), t) == r_.outputs.end();
      const Shape& tile = b.tensor(b.op(b.input_op(static_cast<int>(k))).output).shape;
      const int r = tile.rank();
      const int64_t row = r == 0 ? 1 : transposed && r >= 2 ? tile[r - 2] : tile[r - 1];
      out.push_back(intermediate && dtype_size(dt) == 2 && row % 2 != 0 ? DType::f32 : dt);
    }
    return out;
  }

  /// The bytes of b's largest input tile at `dtypes` (a streamed one double-buffered).
  static int64_t largest_input_tile_bytes(const BlockGraph& b, const std::vector<DType>& dtypes) {
    int64_t most = 0;
    for (int k = 0; k < b.num_inputs(); ++k) {
      const BlockOp& op = b.op(b.input_op(k));
      const bool streamed = op.attrs.fmap != kReplicate && b.forloop() > 1;
      most = std::max(most, b.tensor(op.output).shape.numel() * dtype_size(dtypes[k]) *
                                (streamed ? 2 : 1));
    }
    return most;
  }

  /// Whether the emitter plans `body` reading `inputs` of g stored as `dtypes` (outputs at the
  /// graph's dtype, no views) within plan_->smem_limit.
  bool plan_fits(const BlockGraph& b, const KernelGraph& g, const std::vector<int>& inputs,
                 const std::vector<DType>& dtypes) const {
    std::vector<DType> out_t(b.num_outputs(), g.tensor(inputs.front()).dtype);
    return optimize_block_graph(std::make_shared<const BlockGraph>(b), dtypes, out_t, *plan_, {})
        .ok();
  }

  void finish(const KernelGraph& g) {
    KernelGraph out = g;
    for (size_t i = 0; i < r_.outputs.size(); ++i) {
      std::string name = program_.tensor_name(program_.outputs()[i]);
      if (!out.mark_output(r_.outputs[i], name).ok()) {
        // The name is taken by another tensor of the graph: keep the tensor's own name.
        if (!out.mark_output(r_.outputs[i]).ok()) return;
      }
    }
    out.copy_parallel_interface(program_);
    ++emitted_;
    emit_(std::move(out));
  }

  const GraphRecipe& r_;
  const KernelGraph& program_;
  const ClassTable& classes_;
  const SplitPolicy& policy_;
  int64_t smem_limit_;
  const std::function<void(KernelGraph&&)>& emit_;
  const PlanOptions* plan_;
  int base_ops_ = 0;
  std::vector<Extents> chosen_;
  int64_t emitted_ = 0;
};

}  // namespace

std::string CustomRecipe::key() const {
  std::string s = "in";
  for (int t : inputs) s += " " + std::to_string(t);
  s += "|grid";
  for (DimClass c : grid_class) s += " " + std::to_string(c);
  s += "|loop " + std::to_string(loop_class) + " " + std::to_string(loop_origin) + " " +
       std::to_string(loop_axis) + "|maps";
  for (size_t i = 0; i < imaps.size(); ++i)
    s += " " + grid_map_text(imaps[i]) + "/" + std::to_string(fmaps[i]);
  s += "|ops";
  for (const BlockStep& o : ops) {
    s += " " + std::string(op_name(o.kind)) + "(";
    for (int t : o.inputs) s += std::to_string(t) + ",";
    s += std::to_string(o.attrs.dim) + "," + std::to_string(o.attrs.to) + "," +
         std::to_string(o.attrs.fmap) + "," + std::to_string(o.attrs.scalar) + ")";
  }
  s += "|save";
  for (const SaverStep& sv : savers)
    s += " " + std::to_string(sv.tensor) + ":" + grid_map_text(sv.omap);
  return s;
}

std::vector<Extents> extent_choices(const ClassTable& classes, const SplitPolicy& policy,
                                    const std::array<DimClass, 3>& grid_class, DimClass loop_class,
                                    int64_t forced_loop) {
  std::array<std::vector<int64_t>, 3> axis_cands;
  for (int a = 0; a < 3; ++a) {
    if (grid_class[a] == kNoClass) {
      axis_cands[a] = {1};
    } else {
      axis_cands[a] = grid_extent_candidates(classes.info(grid_class[a]), policy);
      if (axis_cands[a].empty()) return {};
    }
  }
  std::vector<Extents> out;
  for (int64_t gx : axis_cands[0])
    for (int64_t gy : axis_cands[1])
      for (int64_t gz : axis_cands[2]) {
        if (gx * gy * gz > policy.max_blocks) continue;
        Extents e;
        e.grid = {gx, gy, gz};
        if (forced_loop > 0) {
          e.forloop = forced_loop;
          out.push_back(e);
          continue;
        }
        if (loop_class == kNoClass) {
          out.push_back(e);
          continue;
        }
        // The per-block extent of the loop class (a ragged grid split leaves the last block
        // a shorter part).
        int64_t block_extent = classes.info(loop_class).extent, last_extent = block_extent;
        for (int a = 0; a < 3; ++a)
          if (grid_class[a] == loop_class) {
            const int64_t n = block_extent;
            block_extent = (n + e.grid[a] - 1) / e.grid[a];
            last_extent = n - (e.grid[a] - 1) * block_extent;
          }
        for (int64_t f : loop_extent_candidates(block_extent, last_extent, policy)) {
          e.forloop = f;
          out.push_back(e);
        }
      }
  return out;
}

Result<BlockGraph> build_block_graph(const CustomRecipe& r, const Extents& e,
                                     const std::vector<Shape>& input_shapes) {
  Dim3 grid{static_cast<int>(e.grid[0]), static_cast<int>(e.grid[1]), static_cast<int>(e.grid[2])};
  STRATA_ASSIGN_OR_RETURN(BlockGraph b, BlockGraph::make(grid, 128, static_cast<int>(e.forloop)));
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    STRATA_RETURN_IF_ERROR(b.add_input(input_shapes[i], r.imaps[i], r.fmaps[i]));
  }
  for (const BlockStep& s : r.ops) {
    STRATA_RETURN_IF_ERROR(b.add_op(s.kind, s.inputs, s.attrs));
  }
  for (const SaverStep& s : r.savers) {
    STRATA_RETURN_IF_ERROR(b.add_output(s.tensor, s.omap));
  }
  return b;
}

int64_t expand_recipe(const GraphRecipe& recipe, const KernelGraph& program,
                      const ClassTable& classes, const SplitPolicy& policy, int64_t smem_limit,
                      const std::function<void(KernelGraph&&)>& emit, const PlanOptions* plan) {
  return Expander(recipe, program, classes, policy, smem_limit, emit, plan).run();
}

}  // namespace strata::search
