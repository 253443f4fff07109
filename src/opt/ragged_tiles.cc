#include "strata/opt/ragged_tiles.h"

#include "strata/opt/register_fusion.h"
#include "strata/opt/schedule.h"

namespace strata {
namespace {

std::string at_op(const BlockGraph& g, int i) {
  return "block op #" + std::to_string(i) + " (" + std::string(op_name(g.op(i).kind)) + ")";
}

/// Builds RaggedTiles: extent ids are shared by equal extents.
class Builder {
 public:
  explicit Builder(const BlockGraph& g) : g_(g) {
    r_.dims.assign(g.tensors().size(), {-1, -1, -1, -1});
  }

  int intern(const RaggedExtent& e) {
    for (size_t i = 0; i < r_.extents.size(); ++i)
      if (r_.extents[i] == e) return static_cast<int>(i);
    r_.extents.push_back(e);
    return static_cast<int>(r_.extents.size()) - 1;
  }

  /// The extent an accumulator's result keeps along a dim of its input: a split per iteration
  /// ends with the loop (iteration 0 of every block is whole: no part of a ragged loop split
  /// is empty, docs/mugraph-semantics.md §3.1); a split across blocks stays.
  int after_loop(int e) const { return e >= 0 && r_.extents[e].loop ? -1 : e; }

  /// Merges extent e into the slot of a result dim; false when the slot holds another one.
  static bool meet(int& slot, int e) {
    if (e < 0) return true;
    if (slot >= 0 && slot != e) return false;
    slot = e;
    return true;
  }

  std::array<int, kMaxRank>& dims(int t) { return r_.dims[t]; }
  int dim(int t, int d) const { return r_.dims[t][d]; }
  const RaggedExtent& extent(int e) const { return r_.extents[e]; }
  RaggedTiles take() { return std::move(r_); }

 private:
  const BlockGraph& g_;
  RaggedTiles r_;
};

}  // namespace

Result<RaggedTiles> ragged_tiles(const BlockGraph& g) {
  Builder b(g);
  const int F = g.forloop();
  const std::string mixed = "ragged dims of two different splits meet";
  for (int i = 0; i < static_cast<int>(g.ops().size()); ++i) {
    const BlockOp& op = g.op(i);
    const Category cat = op_category(op.kind);
    if (op.kind == OpKind::Input) {
      const Shape& D = g.input_shape(op.attrs.input_index);
      const Shape& tile = g.tensor(op.output).shape;
      for (int d = 0; d < D.rank(); ++d) {
        int axis = -1;
        for (int a = 0; a < 3; ++a)
          if (op.attrs.imap[a] == d) axis = a;
        const int64_t n = D[d];
        const int64_t parts = axis >= 0 ? g.grid()[axis] : 1;
        const int64_t part = (n + parts - 1) / parts;
        const bool across = n % parts != 0;
        const bool loop = op.attrs.fmap == d && F > 1;
        const bool per_iteration = loop && (across || part != tile[d] * F);
        if (!across && !per_iteration) continue;
        b.dims(op.output)[d] =
            b.intern({across ? axis : -1, across ? n : part, part, tile[d], loop});
      }
      continue;
    }
    if (op.kind == OpKind::Output) continue;
    const int t = op.output;
    const Shape& out = g.tensor(t).shape;
    const int ro = out.rank();
    std::array<int, kMaxRank>& r = b.dims(t);
    auto fail = [&](const std::string& what) {
      return make_error(at_op(g, i) + ": " + what +
                        " (ragged tiles, docs/codegen.md); the code generator does not support it");
    };
    // Elementwise alignment of operand x into the result (broadcast dims carry nothing).
    auto carry = [&](int x) -> bool {
      const Shape& s = g.tensor(x).shape;
      for (int d = 0; d < s.rank(); ++d) {
        const int od = d + ro - s.rank();
        if (od < 0 || s[d] != out[od] || s[d] == 1) continue;
        if (!Builder::meet(r[od], b.dim(x, d))) return false;
      }
      return true;
    };
    switch (cat) {
      case Category::Unary:
      case Category::Binary:
      case Category::Fused:
        for (int x : op.inputs)
          if (!carry(x)) return fail(mixed);
        break;
      case Category::Matmul: {
        const int a = op.inputs[0], bm = op.inputs[1];
        for (int d = 0; d + 2 < ro; ++d)
          if (!Builder::meet(r[d], b.dim(a, d)) || !Builder::meet(r[d], b.dim(bm, d)))
            return fail(mixed);
        r[ro - 2] = b.dim(a, ro - 2);
        r[ro - 1] = b.dim(bm, ro - 1);
        int k = -1;
        if (!Builder::meet(k, b.dim(a, ro - 1)) || !Builder::meet(k, b.dim(bm, ro - 2)))
          return fail("the contraction meets ragged dims of two different splits");
        break;
      }
      case Category::Layout: {
        const int x = op.inputs[0];
        for (int d = 0; d < ro; ++d) r[d] = b.dim(x, d);
        if (op.kind == OpKind::Transpose && ro >= 2) {
          std::swap(r[ro - 1], r[ro - 2]);
        } else if (op.kind == OpKind::Slice && r[op.attrs.dim] >= 0) {
          return fail("a slice along a ragged dim");
        }
        break;
      }
      case Category::Concat:
        for (int x : op.inputs) {
          if (b.dim(x, op.attrs.dim) >= 0) return fail("a concat along a ragged dim");
          for (int d = 0; d < ro; ++d)
            if (d != op.attrs.dim && !Builder::meet(r[d], b.dim(x, d))) return fail(mixed);
        }
        break;
      case Category::Reduce:
      case Category::Norm:
      case Category::Scan: {
        const int x = op.inputs[0];
        const ReductionShape rs = reduction_shape(op, g.tensor(x).shape);
        if (b.dim(x, rs.dim) >= 0 && rs.to != 1)
          return fail("a reduction to " + std::to_string(rs.to) + " groups along a ragged dim");
        for (int d = 0; d < ro; ++d) r[d] = cat == Category::Norm || d != rs.dim ? b.dim(x, d) : -1;
        break;
      }
      case Category::Accum: {
        const int x = op.inputs[0];
        const Shape& xs = g.tensor(x).shape;
        const bool reducing = op_reduction(op.kind) != nullptr;
        // A dim kept by the accumulator and split raggedly both across blocks and by the loop:
        // the last block's result would be shorter than its first iteration's tile says.
        const int reduced = reducing ? reduction_shape(op, xs).dim : -1;
        for (int d = 0; d < xs.rank(); ++d) {
          const int e = b.dim(x, d);
          if (d != reduced && e >= 0 && b.extent(e).loop && b.extent(e).axis >= 0)
            return fail("an accumulator keeping a dim ragged both across blocks and per iteration");
        }
        if (reducing) {
          const ReductionShape rs = reduction_shape(op, xs);
          if (b.dim(x, rs.dim) >= 0 && rs.to != 1)
            return fail("an accumulator reducing to " + std::to_string(rs.to) +
                        " groups along a ragged dim");
          for (int d = 0; d < ro; ++d) r[d] = d == rs.dim ? -1 : b.after_loop(b.dim(x, d));
        } else if (op.kind == OpKind::AccumSum && op.attrs.fmap != kReplicate) {
          if (b.dim(x, op.attrs.fmap) >= 0)
            return fail("iterations concatenated along a ragged dim");
          for (int d = 0; d < ro; ++d) r[d] = d == op.attrs.fmap ? -1 : b.after_loop(b.dim(x, d));
        } else {
          if (op_info(op.kind).arity == 2)
            for (int d = 0; d < xs.rank(); ++d)
              if (b.dim(x, d) >= 0 && b.after_loop(b.dim(x, d)) < 0)
                return fail("a rescaling accumulator over a tile ragged per iteration");
          for (int d = 0; d < ro; ++d) r[d] = b.after_loop(b.dim(x, d));
        }
        break;
      }
      case Category::Source:
      case Category::Sink:
      case Category::Customized:
      case Category::Collective:  // kernel level only
        break;
    }
  }
  return b.take();
}

namespace {

/// Whether tile t holds zeros at its absent positions: a loaded input tile (zero-filled) or a
/// layout op read in place from one.
bool zero_filled(const KernelPlan& plan, int t) {
  const BlockGraph& g = *plan.graph;
  return g.op(g.tensor(alias_root(plan, t)).producer).kind == OpKind::Input;
}

/// Bits of the dims of tensor t whose extent is ragged per iteration.
unsigned loop_dims(const KernelPlan& plan, int t) {
  unsigned bits = 0;
  const int rank = plan.graph->tensor(t).shape.rank();
  for (int d = 0; d < rank; ++d) {
    const int e = plan.ragged.dim(t, d);
    if (e >= 0 && plan.ragged.extents[e].loop) bits |= 1u << d;
  }
  return bits;
}

}  // namespace

Result<KernelPlan> plan_ragged_tiles(KernelPlan plan) {
  const BlockGraph& g = *plan.graph;
  for (OpPlan& p : plan.ops) {
    p.ragged_extent = -1;
    p.ragged_mask = 0;
    p.ragged_zero_operands = 0;
  }
  // A contraction padded to the mma step: indices K … mma_k − 1 are absent in every
  // iteration and no load writes them, so both operands (a chained A aside) are zeroed there.
  for (int i = 0; i < static_cast<int>(g.ops().size()); ++i) {
    OpPlan& p = plan.ops[i];
    if (p.matmul != MatmulPath::TensorCore) continue;
    const Shape& as = g.tensor(g.op(i).inputs[0]).shape;
    if (p.mma_k > as[as.rank() - 1]) p.ragged_zero_operands = p.chain_from >= 0 ? 2u : 3u;
  }
  if (!plan.ragged.any()) return plan;
  for (int i = 0; i < static_cast<int>(g.ops().size()); ++i) {
    const BlockOp& op = g.op(i);
    OpPlan& p = plan.ops[i];
    const Category cat = op_category(op.kind);
    if (cat == Category::Matmul) {
      const int a = op.inputs[0];
      const int rank = g.tensor(a).shape.rank();
      p.ragged_extent = plan.ragged.dim(a, rank - 1);
      if (p.ragged_extent < 0) p.ragged_extent = plan.ragged.dim(op.inputs[1], rank - 2);
      if (p.ragged_extent >= 0)
        for (int k = 0; k < 2; ++k) {
          // A chained matmul's A comes from registers, masked by the chain itself.
          if (k == 0 && p.chain_from >= 0) continue;
          if (!zero_filled(plan, matmul_operand(plan, i, k))) p.ragged_zero_operands |= 1u << k;
        }
      // A product added into a loop state: rows / columns absent in this iteration add 0,
      // which loaded operands (zero rows, finite columns) give without masking.
      if (p.accumulate_into >= 0) {
        const bool zero = zero_filled(plan, matmul_operand(plan, i, 0)) &&
                          zero_filled(plan, matmul_operand(plan, i, 1)) && p.scale_a < 0 &&
                          p.scale_b < 0 && p.chain_from < 0;
        if (!zero) p.ragged_mask = loop_dims(plan, op.output);
      }
      continue;
    }
    if (is_reduction(op)) {
      const int x = op.inputs[0];
      const ReductionShape rs = reduction_shape(op, g.tensor(x).shape);
      p.ragged_extent = plan.ragged.dim(x, rs.dim);
      // A loop state keeps rows absent in this iteration as they are.
      if (cat == Category::Accum || cat == Category::Scan)
        p.ragged_mask = loop_dims(plan, x) & ~(1u << rs.dim);
      continue;
    }
    if (cat == Category::Accum) p.ragged_mask = loop_dims(plan, op.inputs[0]);
  }
  return plan;
}

}  // namespace strata
