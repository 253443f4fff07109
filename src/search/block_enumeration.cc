// The block level of the enumeration: extending an open block graph by compute ops and
// accumulators, closing it with output savers, and recording complete graphs.
#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "search/enumerator_impl.h"

namespace strata::search {
namespace {

/// Classes whose per-block partial sums survive op `kind` (see BTensor::partial): a result
/// stays a per-block part of a sum over class c if it is linear in operands that are such
/// parts and the other operands do not depend on how c is split across blocks.
ClassMask partial_after(OpKind kind, const std::array<const BTensor*, 2>& in, ClassMask reduced) {
  ClassMask pa = in[0]->partial;
  switch (op_category(kind)) {
    case Category::Unary:
      return kind == OpKind::MulScalar ? pa : 0;  // x + c, exp, … are not linear
    case Category::Binary: {
      if (op_info(kind).algebra != Algebra::Lax) return 0;
      ClassMask pb = in[1]->partial, da = in[0]->dep, db = in[1]->dep;
      if (kind == OpKind::Mul) return (pa & ~db) | (pb & ~da);
      if (kind == OpKind::Div) return pa & ~db;
      return pa & pb;  // add, sub
    }
    case Category::Matmul: {
      ClassMask pb = in[1]->partial, da = in[0]->dep, db = in[1]->dep;
      return (pa & ~db) | (pb & ~da) | reduced;
    }
    case Category::Reduce:
      return pa | reduced;
    case Category::Concat:
      return pa & in[1]->partial;
    case Category::Layout:  // a view: the same values
      return pa;
    case Category::Norm:
    case Category::Scan:
    case Category::Source:
    case Category::Sink:
    case Category::Customized:
    case Category::Accum:
    case Category::Fused:
    case Category::Collective:
      break;
  }
  return 0;
}

/// Whether a grid axis of the open block splits class c (or a class c is made of): a block
/// then holds a part of c only, and a norm over its part is not the norm of the whole.
bool grid_splits(const OpenBlock& ob, const ClassTable& classes, DimClass c) {
  if (c == kNoClass) return false;
  const Dim3 grid = ob.b.grid();
  for (int a = 0; a < 3; ++a)
    if (grid[a] > 1 && (classes.plain_mask(c) & class_bit(ob.recipe.grid_class[a]))) return true;
  return false;
}

}  // namespace

void Enumerator::Impl::block_level(OpenBlock& ob) {
  if (stopped()) return;
  try_close(ob);
  if (stopped()) return;
  const int remaining = space.max_block_ops - ob.ops;
  if (remaining <= 0) return prune(Prune::OpLimit);
  const int F = ob.b.forloop();
  const int n = static_cast<int>(ob.bt.size());
  const int ni = ob.b.num_inputs();
  // Unread input tiles, and with a for-loop unread loop-body tiles, each need a reader; a
  // compute op reads at most two. Without a for-loop closing adds at least one accumulator.
  int unread = 0;
  for (int t = 0; t < n; ++t) {
    if (ob.bt[t].uses > 0) continue;
    if (t < ni || (F > 1 && ob.b.tensor(t).stage == Stage::Loop)) ++unread;
  }
  if ((unread + 1) / 2 + (F == 1 ? 1 : 0) > remaining) return prune(Prune::DeadEnd);
  auto shape_of = [&](int t) -> const Shape& { return ob.b.tensor(t).shape; };
  // Operands of one op share a stage, except that a post-loop op may read a loop-invariant
  // tile (a bias or gain next to a loop's result; docs/mugraph-semantics.md §3.4).
  auto same_stage = [&](int a, int b) {
    const Stage sa = ob.b.tensor(a).stage, sb = ob.b.tensor(b).stage;
    return sa == sb || (sa == Stage::Post ? !ob.bt[b].varying : !ob.bt[a].varying);
  };
  const int lo = ob.keys.empty() ? 0 : ob.keys.back().max_input();
  for (OpKind kind : space.block_kinds) {
    for_each_compute(kind, n, lo, shape_of, same_stage,
                     [&](Ins ins, const OpAttrs& attrs) { try_block_op(ob, kind, ins, attrs); });
    if (stopped()) return;
  }
  if (F > 1) block_accumulators(ob);
}

bool Enumerator::Impl::fused_sum_covers(const OpenBlock& ob, int t) const {
  if (std::find(space.accum_kinds.begin(), space.accum_kinds.end(), OpKind::AccumSumLd) ==
      space.accum_kinds.end())
    return false;
  const BlockOp& p = ob.b.op(ob.b.tensor(t).producer);
  if (p.kind != OpKind::Sum) return false;
  const int x = p.inputs[0];
  const int r = ob.b.tensor(x).shape.rank();
  const int dim = p.attrs.dim < 0 ? p.attrs.dim + r : p.attrs.dim;
  return dim == r - 1 && ob.bt[x].varying && dim_of_class(ob.bt[x].cls, r, ob.loop_class) == r - 1;
}

void Enumerator::Impl::block_accumulators(OpenBlock& ob) {
  const DimClass loop = ob.loop_class;
  const bool partial_loop = classes.info(loop).kind == ClassKind::Partial;
  const int n = static_cast<int>(ob.bt.size());
  const int lo = ob.keys.empty() ? 0 : ob.keys.back().max_input();
  for (int t = lo; t < n; ++t) {
    if (ob.b.tensor(t).stage != Stage::Loop) continue;
    // An accumulator of a tile that is the same in every iteration would add it F times
    // (or re-reduce it F times): never part of a useful graph.
    if (!ob.bt[t].varying) {
      prune(Prune::InvariantAccum);
      continue;
    }
    const int r = ob.b.tensor(t).shape.rank();
    const int d = partial_loop ? -1 : dim_of_class(ob.bt[t].cls, r, loop);
    OpAttrs attrs;
    const int m = ob.bt[t].shift;
    if (m >= 0) {
      // A tile shifted by a running max (exp(s − m), and what is linear in it) is accumulated
      // by the online-softmax recurrence against that max: reduced inside the body (d < 0) by
      // accum_rescale, still holding the loop class by accum_rescale_ld. The running max
      // itself is never accumulated (accum_max_ld of its input gives the final max).
      if (m == t) continue;
      if (d < 0) try_block_op(ob, OpKind::AccumRescale, Ins{{t, m}, 2}, attrs);
      if (d == r - 1) try_block_op(ob, OpKind::AccumRescaleLd, Ins{{t, m}, 2}, attrs);
      continue;
    }
    if (d < 0) {
      // The loop class was reduced inside the body: sum the per-iteration results. Unless t is
      // a last-dim sum of a tile whose last dim is the loop class: accum_sum_ld of that tile
      // is the same value in one fused op (emitted from registers, FlashAttention's row sums
      // for a matmul chain), which the other branch generates.
      if (fused_sum_covers(ob, t)) {
        prune(Prune::UnfusedReduction);
        continue;
      }
      try_block_op(ob, OpKind::AccumSum, Ins{{t, 0}, 1}, attrs);
      continue;
    }
    // The tile still has the loop class (its last dim): reduce it completely with a fused
    // accumulator. Summing tiles of different loop slices element by element would mix
    // unrelated elements, and concatenating them (fmap = d) only rebuilds the whole dim for a
    // reduction after the loop, which the same graph without the loop does with fewer ops.
    if (d != r - 1) continue;
    for (OpKind kind : space.accum_kinds) {
      if (kind == OpKind::AccumSum) continue;
      if (kind == OpKind::AccumSumToDimx) {
        for (int64_t to : space.reduce_tos) {
          if (to == 1) continue;
          attrs.to = to;
          try_block_op(ob, kind, Ins{{t, 0}, 1}, attrs);
        }
        attrs.to = 1;
        continue;
      }
      if (op_info(kind).attrs != AttrSet::None) {  // accum_rms_ld: the program's eps
        for (const OpAttrs& a : space.program_attrs[static_cast<int>(kind)])
          try_block_op(ob, kind, Ins{{t, 0}, 1}, a);
        continue;
      }
      try_block_op(ob, kind, Ins{{t, 0}, 1}, attrs);
    }
    if (stopped()) return;
  }
}

void Enumerator::Impl::try_block_op(OpenBlock& ob, OpKind kind, Ins ins, OpAttrs attrs) {
  if (stopped()) return;
  // The rank is built only when the largest input ties with the previous op's (the
  // generator never offers a smaller one).
  RankKey key;
  const int mx = ins.n > 1 ? std::max(ins[0], ins[1]) : ins[0];
  if (!ob.keys.empty() && mx <= ob.keys.back().max_input()) {
    key = rank_key(ins, kind, attrs);
    if (!(ob.keys.back() < key)) return prune(Prune::CanonicalOrder);
  }
  std::array<const BTensor*, 2> in{&ob.bt[ins[0]], &ob.bt[ins[ins.n - 1]]};
  BTensor nt;
  for (int i = 0; i < ins.n; ++i) {
    nt.varying |= in[i]->varying;
    nt.dep |= in[i]->dep;
  }
  // A running max runs over the loop: of a varying tile whose last dim is the loop class.
  if (op_category(kind) == Category::Scan) {
    const Shape& s = ob.b.tensor(ins[0]).shape;
    if (ob.b.forloop() == 1 || !in[0]->varying || ob.b.tensor(ins[0]).stage != Stage::Loop ||
        dim_of_class(in[0]->cls, s.rank(), ob.loop_class) != s.rank() - 1)
      return prune(Prune::ReduceClass);
  }
  // The running max a new loop tile depends on: a running op starts one (itself), compute ops
  // inherit it; two different ones do not mix. Accumulators end it.
  if (op_category(kind) == Category::Scan) {
    nt.shift = static_cast<int>(ob.bt.size());
  } else if (op_category(kind) != Category::Accum) {
    for (int i = 0; i < ins.n; ++i) {
      if (in[i]->shift < 0) continue;
      if (nt.shift >= 0 && nt.shift != in[i]->shift) return prune(Prune::ClassMismatch);
      nt.shift = in[i]->shift;
    }
  }
  if (op_category(kind) == Category::Accum) {
    const Shape& s = ob.b.tensor(ins[0]).shape;
    const int last = s.rank() - 1;
    nt.cls = in[0]->cls;
    nt.prov = in[0]->prov;
    nt.partial = in[0]->partial;
    ClassMask lmask = classes.plain_mask(ob.loop_class);
    if (op_reduction(kind) && !reducible(in[0]->cls[last], reduction_kind(kind), in[0]->prov[last]))
      return prune(Prune::ReduceClass);
    if (op_reduction(kind) && reduction_kind(kind) == RedKind::Norm &&
        grid_splits(ob, classes, in[0]->cls[last]))
      return prune(Prune::ReduceClass);
    switch (kind) {
      case OpKind::AccumSumLd:
      case OpKind::AccumMeanLd:
        nt.cls[last] = kNoClass;
        nt.prov[last] = 0;
        nt.partial |= lmask;
        break;
      case OpKind::AccumRmsLd:
      case OpKind::AccumMaxLd:
      case OpKind::AccumRescaleLd:
        nt.cls[last] = kNoClass;
        nt.prov[last] = 0;
        nt.partial = 0;
        break;
      case OpKind::AccumRescale:  // per-block results are combined only by rescaling
        nt.partial = 0;
        break;
      case OpKind::AccumSumToDimx:
        nt.cls[last] = classes.grouped(in[0]->cls[last], attrs.to);
        nt.partial |= lmask;
        break;
      case OpKind::AccumSum:
        break;
      case OpKind::Input:
      case OpKind::Output:
      case OpKind::Customized:
      case OpKind::Matmul:
      case OpKind::Exp:
      case OpKind::Square:
      case OpKind::Sqrt:
      case OpKind::Silu:
      case OpKind::Gelu:
      case OpKind::Relu:
      case OpKind::Sigmoid:
      case OpKind::Tanh:
      case OpKind::Log:
      case OpKind::MulScalar:
      case OpKind::AddScalar:
      case OpKind::Clamp:
      case OpKind::Add:
      case OpKind::Sub:
      case OpKind::Mul:
      case OpKind::Div:
      case OpKind::Pow:
      case OpKind::Maximum:
      case OpKind::Minimum:
      case OpKind::Sum:
      case OpKind::Mean:
      case OpKind::Max:
      case OpKind::RmsNorm:
      case OpKind::Concat:
      case OpKind::Transpose:
      case OpKind::Slice:
      case OpKind::AllReduce:
      case OpKind::RunningMax:
      case OpKind::ThreadFused:
        break;  // not an accumulator
    }
  } else {
    if ((kind == OpKind::Sub || kind == OpKind::Div) && ob.exprs[ins[0]] == ob.exprs[ins[1]])
      return prune(Prune::Trivial);
    std::array<Shape, 2> shapes;
    std::array<DimClassVec, 2> cls;
    std::array<DimProvVec, 2> prov;
    for (int i = 0; i < ins.n; ++i) {
      shapes[i] = ob.b.tensor(ins[i]).shape;
      cls[i] = ob.bt[ins[i]].cls;
      prov[i] = ob.bt[ins[i]].prov;
    }
    auto out = quick_shape(kind, std::span(shapes.data(), ins.n), attrs);
    if (!out) return prune(Prune::Shape);
    if (kind == OpKind::Concat &&
        !(space.program_concat &&
          matches_program_op(kind, attrs, {ob.exprs[ins[0]], ob.exprs[ins[1]]}))) {
      // A concat that is not one of the program's can only be concat-then-matmul,
      // [X | Y]·[W ; B]: two operands that are not concats themselves, joined along a dim that
      // a matmul contracts (the last two), of reduced classes, in a program with two matmuls.
      const int r = shapes[0].rank(), d = attrs.dim;
      bool ok = space.merge_concat && (d == r - 1 || d == r - 2) &&
                ob.bt[ins[0]].cls[d] != ob.bt[ins[1]].cls[d];
      for (int t : ins) {
        const BlockOp& producer = ob.b.op(ob.b.tensor(t).producer);
        DimClass c = ob.bt[t].cls[d];
        ok = ok && producer.kind != OpKind::Concat && c != kNoClass &&
             (classes.plain_mask(c) & space.reduced_classes) == classes.plain_mask(c);
      }
      if (!ok) return prune(Prune::ConcatForm);
    }
    ClassFlow f = flow_classes(classes, kind, attrs, std::span(shapes.data(), ins.n),
                               std::span(cls.data(), ins.n), std::span(prov.data(), ins.n), *out);
    if (!f.mismatch.empty()) return prune(Prune::ClassMismatch);
    if (!reducible(f.reduced, f.red, f.reduced_prov)) return prune(Prune::ReduceClass);
    if (f.red == RedKind::Norm && f.reduced != kNoClass && grid_splits(ob, classes, f.reduced))
      return prune(Prune::ReduceClass);
    nt.cls = f.out;
    nt.prov = f.prov;
    const bool linear = f.red == RedKind::Linear;
    ClassMask reduced = linear ? classes.plain_mask(f.reduced) : 0;
    nt.partial = linear ? partial_after(kind, in, reduced) : 0;
  }
  auto r = ob.b.add_op(kind, ins.vec(), attrs);
  if (!r.ok()) return prune(Prune::Shape);
  if (block_smem_bytes(ob.b, ob.dtypes) > space.smem_limit) {
    ob.b.pop_op();
    return prune(Prune::SharedMemory);
  }
  int op_id = static_cast<int>(ob.b.ops().size()) - 1;
  ExprId e = block_op_expr(*space.pool, ob.b, op_id, ob.exprs, ob.kin_exprs);
  if (space.oracle && !space.oracle->is_subexpr(e)) {
    ob.b.pop_op();
    return prune(Prune::AbstractExpr);
  }
  // The same expression twice in one block graph is a recomputation (with F = 1 an
  // accumulator keeps its input's expression, sum(1, x) = x, and is exempt).
  if (space.oracle && op_category(kind) != Category::Accum && duplicate_of(e, ob.exprs)) {
    ob.b.pop_op();
    return prune(Prune::Duplicate);
  }
  if (!sign_consistent(kind, {ob.exprs[ins[0]], ins.n > 1 ? ob.exprs[ins[1]] : kNoExpr}, e)) {
    ob.b.pop_op();
    return prune(Prune::Sign);
  }
  if (kind != OpKind::Concat &&  // concats: checked above (program's, or concat-then-matmul)
      !program_site(kind, attrs, {ob.exprs[ins[0]], ins.n > 1 ? ob.exprs[ins[1]] : kNoExpr})) {
    ob.b.pop_op();
    return prune(Prune::ProgramSite);
  }
  if (key.len == 0) key = rank_key(ins, kind, attrs);
  if (enter()) {
    if (trace_enabled()) {
      std::string line(2 * depth, ' ');
      line += std::string(op_name(kind)) + "(";
      for (int t : ins) line += std::to_string(t) + " ";
      line += "d" + std::to_string(attrs.dim) + " f" + std::to_string(attrs.fmap) +
              ") = " + ob.b.tensor(ob.b.ops().back().output).shape.str() + "  " +
              space.pool->str(e);
      std::fprintf(stderr, "%s\n", line.c_str());
    }
    ob.bt.push_back(nt);
    ob.exprs.push_back(e);
    for (int t : ins) ++ob.bt[t].uses;
    ob.recipe.ops.push_back({kind, ins.vec(), attrs});
    ob.keys.push_back(key);
    ++ob.ops;
    block_level(ob);
    --ob.ops;
    ob.keys.pop_back();
    ob.recipe.ops.pop_back();
    for (int t : ins) --ob.bt[t].uses;
    ob.exprs.pop_back();
    ob.bt.pop_back();
    leave();
  }
  ob.b.pop_op();
}

void Enumerator::Impl::try_close(OpenBlock& ob) {
  const int ni = ob.b.num_inputs();
  const int n = static_cast<int>(ob.bt.size());
  if (n == ni) return;  // nothing computed yet
  const int F = ob.b.forloop();
  for (int t = 0; t < ni; ++t)
    if (ob.bt[t].uses == 0) return prune(Prune::UnusedInput);
  std::vector<int> sinks;
  for (int t = ni; t < n; ++t) {
    if (ob.bt[t].uses > 0) continue;
    if (F > 1 && ob.b.tensor(t).stage == Stage::Loop) return prune(Prune::DeadTensor);
    sinks.push_back(t);
  }
  // A concat the program does not have only serves concat-then-matmul.
  if (!space.program_concat) {
    for (size_t i = 0; i < ob.recipe.ops.size(); ++i) {
      if (ob.recipe.ops[i].kind != OpKind::Concat) continue;
      int t = ni + static_cast<int>(i);
      if (ob.bt[t].uses == 0) return prune(Prune::DeadTensor);
      for (const BlockStep& s : ob.recipe.ops)
        if (s.kind != OpKind::Matmul &&
            std::find(s.inputs.begin(), s.inputs.end(), t) != s.inputs.end())
          return prune(Prune::DeadTensor);
    }
  }
  // A computed tensor that the kernel also reads may be saved as well when it could be a
  // program output (an output that later ops of the program read, like the residual sum
  // before a norm): without that, the kernel that computes it could not also consume it.
  // Closings are offered without such extra savers and, when there are any, with all of them.
  std::vector<int> extras;
  for (int t = ni; t < n; ++t)
    if (ob.bt[t].uses > 0 && (F == 1 || ob.b.tensor(t).stage != Stage::Loop) &&
        could_be_output(ob, t))
      extras.push_back(t);
  close_variant(ob, sinks);
  if (stopped() || extras.empty()) return;
  std::vector<int> all = sinks;
  all.insert(all.end(), extras.begin(), extras.end());
  close_variant(ob, all);
}

bool Enumerator::Impl::could_be_output(const OpenBlock& ob, int t) const {
  const KernelGraph& p = *space.program;
  const int r = ob.b.tensor(t).shape.rank();
  for (size_t i = 0; i < p.outputs().size(); ++i) {
    if (p.tensor(p.outputs()[i]).shape.rank() != r) continue;
    if (!space.oracle) return true;
    if (space.oracle->is_equivalent(ob.exprs[t], static_cast<int>(i)) &&
        std::find(kexprs.begin(), kexprs.end(), ob.exprs[t]) == kexprs.end())
      return true;
  }
  return false;
}

void Enumerator::Impl::close_variant(OpenBlock& ob, const std::vector<int>& sinks) {
  const int F = ob.b.forloop();
  if (static_cast<int>(sinks.size()) > space.max_block_outputs) return prune(Prune::TooManyOutputs);
  // A kernel with a single compute op is what the predefined op does, unless it adds up
  // per-block partial results or produces them (checked below, per output).
  int compute = 0;
  for (const BlockStep& s : ob.recipe.ops)
    if (op_category(s.kind) != Category::Accum) ++compute;
  bool single = compute < 2 && ob.recipe.loop_origin < 0;
  if (F == 1 && ob.ops + static_cast<int>(sinks.size()) > space.max_block_ops)
    return prune(Prune::OpLimit);

  // Output maps: a grid axis writes along the saved tile's dim of its class; if the tile has
  // summed that class away, the blocks' partial sums are placed side by side along a dim of
  // choice, for a later kernel to add up.
  const Dim3 grid = ob.b.grid();
  std::vector<std::vector<GridMap>> options;
  for (int t : sinks) {
    const BTensor& bt = ob.bt[t];
    const int r = ob.b.tensor(t).shape.rank();
    GridMap base = kAllReplicated;
    std::vector<bool> used(r, false);
    std::vector<int> partial_axes;
    for (int a = 0; a < 3; ++a) {
      if (grid[a] == 1) continue;
      DimClass c = ob.recipe.grid_class[a];
      int d = dim_of_class(bt.cls, r, c);
      ClassMask m = classes.plain_mask(c);
      if (d >= 0) {
        base[a] = d;
        used[d] = true;
      } else if (!(bt.dep & m)) {
        return prune(Prune::ReplicatedOutput);
      } else if ((bt.partial & m) != m) {
        return prune(Prune::PartialOutput);
      } else {
        partial_axes.push_back(a);
      }
    }
    if (partial_axes.empty() && !program_tensor_expr(ob.exprs[t]))
      return prune(Prune::KernelTensor);
    if (!partial_axes.empty()) single = false;
    if (space.oracle && duplicate_of(ob.exprs[t], kexprs)) return prune(Prune::Duplicate);
    std::vector<GridMap> opts;
    auto assign = [&](auto&& self, size_t i, GridMap m) -> void {
      if (i == partial_axes.size()) {
        opts.push_back(m);
        return;
      }
      for (int d = 0; d < r; ++d) {
        if (used[d]) continue;
        used[d] = true;
        m[partial_axes[i]] = d;
        self(self, i + 1, m);
        used[d] = false;
      }
    };
    assign(assign, 0, base);
    if (opts.empty()) return prune(Prune::PartialOutput);
    options.push_back(std::move(opts));
  }
  if (single) return prune(Prune::SingleOpKernel);
  std::vector<size_t> pick(sinks.size(), 0);
  while (true) {
    std::vector<GridMap> omaps;
    for (size_t i = 0; i < sinks.size(); ++i) omaps.push_back(options[i][pick[i]]);
    close_with(ob, sinks, omaps);
    if (stopped()) return;
    size_t i = 0;
    while (i < pick.size() && ++pick[i] == options[i].size()) pick[i++] = 0;
    if (i == pick.size()) break;
  }
}

void Enumerator::Impl::close_with(OpenBlock& ob, const std::vector<int>& sinks,
                                  const std::vector<GridMap>& omaps) {
  const Dim3 grid = ob.b.grid();
  BlockGraph b = ob.b;
  CustomRecipe recipe = ob.recipe;
  std::vector<int> saved = sinks;
  if (b.forloop() == 1) {
    // Without a for-loop, accumulators are identities that only move tiles to the post-loop
    // stage; they are added here, right before saving, instead of being enumerated.
    for (size_t i = 0; i < sinks.size(); ++i) {
      auto acc = b.add_op(OpKind::AccumSum, {sinks[i]});
      if (!acc.ok()) return prune(Prune::Shape);
      saved[i] = *acc;
      recipe.ops.push_back({OpKind::AccumSum, {sinks[i]}, OpAttrs{}});
    }
    if (block_smem_bytes(b, ob.dtypes) > space.smem_limit) return prune(Prune::SharedMemory);
  }
  for (size_t i = 0; i < sinks.size(); ++i) {
    if (!b.add_output(saved[i], omaps[i]).ok()) return prune(Prune::Shape);
    recipe.savers.push_back({saved[i], omaps[i]});
  }
  RankKey key = ob.prefix;
  key.body = recipe.key();
  if (!key_above_last(key)) return prune(Prune::CanonicalOrder);
  const int op_id = static_cast<int>(g.ops().size());
  auto outs = g.add_customized(recipe.inputs, std::move(b));
  if (!outs.ok()) return prune(Prune::Shape);
  if (enter()) {
    for (size_t i = 0; i < sinks.size(); ++i) {
      KTensor k;
      k.cls = ob.bt[sinks[i]].cls;
      k.prov = ob.bt[sinks[i]].prov;
      k.is_output = output_like(ob.exprs[sinks[i]], g.tensor((*outs)[i]).shape);
      const Shape& tile = ob.b.tensor(sinks[i]).shape;
      for (int a = 0; a < 3; ++a) {
        int d = omaps[i][a];
        if (grid[a] == 1 || d < 0) continue;
        DimClass c = recipe.grid_class[a];
        if (k.cls[d] != c) k.cls[d] = classes.partial(c, k.cls[d], tile[d], grid[a], op_id, a);
      }
      kt.push_back(k);
      kexprs.push_back(ob.exprs[sinks[i]]);
    }
    for (int t : recipe.inputs) ++kt[t].uses;
    steps.push_back({OpKind::Customized, recipe.inputs, OpAttrs{},
                     std::make_shared<const CustomRecipe>(std::move(recipe))});
    kernel_keys.push_back(std::move(key));
    ++num_customized;
    kernel_level();
    --num_customized;
    kernel_keys.pop_back();
    for (int t : steps.back().inputs) --kt[t].uses;
    steps.pop_back();
    kt.resize(kt.size() - sinks.size());
    kexprs.resize(kexprs.size() - sinks.size());
    leave();
  }
  g.pop_op();
}

bool Enumerator::Impl::try_complete() {
  const KernelGraph& p = *space.program;
  const std::vector<int>& outs = p.outputs();
  const int n = static_cast<int>(kt.size());
  std::vector<int> match(outs.size(), -1);
  std::vector<char> taken(n, 0);
  for (size_t i = 0; i < outs.size(); ++i) {
    const Shape& want = p.tensor(outs[i]).shape;
    // Prefer tensors nobody reads; an output may also feed a later op.
    for (int pass = 0; pass < 2 && match[i] < 0; ++pass)
      for (int t = num_program_inputs; t < n; ++t) {
        if (taken[t] || (pass == 0) != (kt[t].uses == 0)) continue;
        if (g.tensor(t).shape != want) continue;
        if (space.oracle && !space.oracle->is_equivalent(kexprs[t], static_cast<int>(i))) continue;
        match[i] = t;
        taken[t] = 1;
        break;
      }
    if (match[i] < 0) return false;
  }
  for (int t = num_program_inputs; t < n; ++t)
    if (kt[t].uses == 0 && !taken[t]) return false;
  if (collecting) {
    // A complete graph above the split depth is a task of its own.
    tasks->push_back(TaskPath(chosen.begin(), chosen.begin() + depth));
    return true;
  }
  ++stats->recipes;
  GraphRecipe recipe{steps, match};
  expand_recipe(recipe, p, classes, space.policy, space.smem_limit, [&](KernelGraph&& graph) {
    // The structure was checked with representative extents; check each instance again.
    if (space.oracle) {
      std::vector<ExprId> exprs = kernel_graph_exprs(*space.pool, graph);
      for (size_t i = 0; i < graph.outputs().size(); ++i)
        if (!space.oracle->is_equivalent(exprs[graph.outputs()[i]], static_cast<int>(i)))
          return prune(Prune::NotEquivalent);
    }
    ++stats->candidates;
    stop.live_found.fetch_add(1, std::memory_order_relaxed);
    if (sink) sink->offer(std::move(graph));
  }, &space.plan);
  return true;
}

}  // namespace strata::search
