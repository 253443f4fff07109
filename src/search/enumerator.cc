#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>

#include "search/enumerator_impl.h"
#include "strata/ir/shape_infer.h"

namespace strata::search {

bool trace_screen_failures() {
  static const bool on = std::getenv("STRATA_SCREEN_TRACE") != nullptr;
  return on;
}

RankKey rank_key(std::span<const int> inputs, OpKind kind, const OpAttrs& a) {
  RankKey k;
  std::array<int, 8> sorted{};
  const int n = static_cast<int>(std::min<size_t>(inputs.size(), 4));
  std::copy(inputs.begin(), inputs.begin() + n, sorted.begin());
  std::sort(sorted.begin(), sorted.begin() + n, std::greater<int>());
  auto push = [&](int64_t v) { k.nums[k.len++] = v; };
  for (int i = 0; i < n; ++i) push(sorted[i]);
  push(-1);
  push(static_cast<int64_t>(kind));
  for (int i = 0; i < n; ++i) push(inputs[i]);
  push(a.dim);
  push(a.to);
  push(a.fmap);
  push(std::bit_cast<int64_t>(a.scalar));
  push(std::bit_cast<int64_t>(a.scalar2));
  push(a.start);
  push(a.end);
  return k;
}

std::optional<Shape> quick_shape(OpKind kind, std::span<const Shape> in, const OpAttrs& attrs) {
  const Shape& a = in[0];
  switch (op_category(kind)) {
    case Category::Unary:
    case Category::Collective:
      return a;
    case Category::Matmul: {
      const Shape& b = in[1];
      int r = a.rank();
      if (r < 2 || b.rank() != r || a[r - 1] != b[r - 2]) return std::nullopt;
      for (int i = 0; i < r - 2; ++i)
        if (a[i] != b[i]) return std::nullopt;
      Shape out = a;
      out[r - 1] = b[r - 1];
      return out;
    }
    case Category::Binary:
      return broadcast_shapes(a, in[1]);
    case Category::Reduce: {
      if (attrs.dim < 0 || attrs.dim >= a.rank() || attrs.to < 1 || a[attrs.dim] % attrs.to)
        return std::nullopt;
      Shape out = a;
      out[attrs.dim] = attrs.to;
      return out;
    }
    case Category::Norm:
      if (attrs.dim < 0 || attrs.dim >= a.rank()) return std::nullopt;
      return a;
    case Category::Concat: {
      const Shape& b = in[1];
      if (a.rank() != b.rank() || attrs.dim < 0 || attrs.dim >= a.rank()) return std::nullopt;
      for (int d = 0; d < a.rank(); ++d)
        if (d != attrs.dim && a[d] != b[d]) return std::nullopt;
      Shape out = a;
      out[attrs.dim] = a[attrs.dim] + b[attrs.dim];
      return out;
    }
    case Category::Layout: {
      Shape out = a;
      if (kind == OpKind::Transpose) {
        if (a.rank() < 2) return std::nullopt;
        std::swap(out[a.rank() - 1], out[a.rank() - 2]);
        return out;
      }
      if (attrs.dim < 0 || attrs.dim >= a.rank() || attrs.start < 0 || attrs.end > a[attrs.dim] ||
          attrs.start >= attrs.end)
        return std::nullopt;
      out[attrs.dim] = attrs.end - attrs.start;
      return out;
    }
    case Category::Scan: {
      if (a.rank() < 1) return std::nullopt;
      Shape out = a;
      out[a.rank() - 1] = 1;
      return out;
    }
    case Category::Source:
    case Category::Sink:
    case Category::Customized:
    case Category::Accum:
    case Category::Fused:
      break;
  }
  return std::nullopt;
}

std::string_view prune_rule_name(Prune p) {
  static constexpr std::string_view names[] = {
      "shape",         "class_mismatch",   "reduce_class",      "kernel_tensor",  "program_op",
      "concat_form",   "nested_inputs",    "second_source",     "sign",           "trivial",
      "duplicate",     "unread",           "single_op_kernel",  "shared_memory",  "canonical_order",
      "abstract_expr", "invariant_accum",  "unfused_reduction", "block_op_limit", "unused_input",
      "dead_tensor",   "too_many_outputs", "replicated_output", "partial_output", "no_extents",
      "dead_end",      "not_equivalent",   "incomplete",        "program_site"};
  static_assert(std::size(names) == static_cast<size_t>(Prune::kCount));
  return names[static_cast<int>(p)];
}

void TaskStats::add(const TaskStats& o) {
  states += o.states;
  for (size_t i = 0; i < prunes.size(); ++i) prunes[i] += o.prunes[i];
  recipes += o.recipes;
  candidates += o.candidates;
}

Result<SearchSpace> SearchSpace::from_program(const KernelGraph& program) {
  SearchSpace s;
  s.program = &program;
  STRATA_ASSIGN_OR_RETURN(s.classes, ClassTable::analyze(program));
  std::vector<bool> has(op_table().size(), false);
  s.program_attrs.assign(op_table().size(), {});
  auto remember = [&](OpKind k, const OpAttrs& a) {
    auto& v = s.program_attrs[static_cast<int>(k)];
    if (std::find(v.begin(), v.end(), a) == v.end()) v.push_back(a);
  };
  int matmuls = 0;
  for (const KernelOp& op : program.ops()) {
    has[static_cast<int>(op.kind)] = true;
    if (op.kind == OpKind::Matmul) ++matmuls;
    if (op_category(op.kind) == Category::Reduce && op.attrs.to > 1)
      s.reduce_tos.push_back(op.attrs.to);
    // What the search does not enumerate by itself: scalars, bounds, eps, slice ranges.
    OpAttrs a;
    a.scalar = op.attrs.scalar;
    a.scalar2 = op.attrs.scalar2;
    if (op.kind == OpKind::Slice) {
      a.dim = op.attrs.dim;
      a.start = op.attrs.start;
      a.end = op.attrs.end;
    }
    remember(op.kind, a);
    if (op.kind == OpKind::RmsNorm) {  // the fused accumulator applies the same eps
      OpAttrs e;
      e.scalar = op.attrs.scalar;
      remember(OpKind::AccumRmsLd, e);
    }
  }
  // Besides the program's own ops: sum (to combine partial results), and div when the
  // program normalizes (rms_norm(x) = x / rms(x): the division can move past a matmul).
  has[static_cast<int>(OpKind::Sum)] = true;
  if (has[static_cast<int>(OpKind::RmsNorm)]) has[static_cast<int>(OpKind::Div)] = true;
  for (const OpInfo& info : op_table()) {
    if (!has[static_cast<int>(info.kind)] || info.kind == OpKind::Input) continue;
    s.kernel_kinds.push_back(info.kind);
    if (info.levels & kBlock) s.block_kinds.push_back(info.kind);
  }
  // Concat in block graphs serves concat-then-matmul ([X | Y]·[W ; B] = X·W + Y·B), so it is
  // offered when the program has two matmuls to merge (or concatenates by itself).
  s.program_concat = has[static_cast<int>(OpKind::Concat)];
  s.merge_concat = matmuls >= 2;
  s.has_views = has[static_cast<int>(OpKind::Slice)] || has[static_cast<int>(OpKind::Transpose)];
  {
    std::vector<int> views_of(program.tensors().size(), 0);
    for (const KernelOp& op : program.ops())
      if (op_category(op.kind) == Category::Layout) ++views_of[op.inputs[0]];
    for (size_t t = 0; t < views_of.size(); ++t)
      if (views_of[t] >= 2) s.multi_view_sources.push_back(static_cast<int>(t));
  }
  for (const KernelOp& op : program.ops())
    if (op.kind == OpKind::Concat && op.attrs.dim >= 0 && op.attrs.dim < 8)
      s.concat_dims.set(op.attrs.dim);
  s.block_concat = s.program_concat || s.merge_concat;
  if (s.block_concat && !has[static_cast<int>(OpKind::Concat)]) {
    s.block_kinds.push_back(OpKind::Concat);
    std::sort(s.block_kinds.begin(), s.block_kinds.end());
  }
  s.accum_kinds = {OpKind::AccumSum, OpKind::AccumSumLd};
  if (has[static_cast<int>(OpKind::Mean)]) s.accum_kinds.push_back(OpKind::AccumMeanLd);
  if (has[static_cast<int>(OpKind::RmsNorm)]) s.accum_kinds.push_back(OpKind::AccumRmsLd);
  if (has[static_cast<int>(OpKind::Max)]) {
    // A max over a looped class: its final value (accum_max_ld), or the running max that the
    // online softmax shifts by (running_max; accum_rescale(_ld) accumulate what depends on it).
    s.accum_kinds.push_back(OpKind::AccumMaxLd);
    s.block_kinds.push_back(OpKind::RunningMax);
    std::sort(s.block_kinds.begin(), s.block_kinds.end());
  }
  std::sort(s.reduce_tos.begin(), s.reduce_tos.end());
  s.reduce_tos.erase(std::unique(s.reduce_tos.begin(), s.reduce_tos.end()), s.reduce_tos.end());
  if (!s.reduce_tos.empty()) s.accum_kinds.push_back(OpKind::AccumSumToDimx);
  s.reduce_tos.insert(s.reduce_tos.begin(), 1);
  s.reduced_classes = s.classes.reduced_mask();
  s.loop_classes = s.reduced_classes;
  return s;
}

Result<std::unique_ptr<SearchSetup>> SearchSetup::make(const KernelGraph& program,
                                                       const SearchConfig& config,
                                                       const Target& target) {
  auto setup = std::make_unique<SearchSetup>();
  STRATA_ASSIGN_OR_RETURN(setup->space, SearchSpace::from_program(program));
  std::vector<ExprId> exprs = kernel_graph_exprs(setup->pool, program);
  std::vector<ExprId> targets;
  for (int t : program.outputs()) targets.push_back(exprs[t]);
  if (config.abstract_pruning) {
    setup->oracle = std::make_unique<SubexprOracle>(setup->pool, targets);
    setup->tensor_oracle = std::make_unique<SubexprOracle>(setup->pool, exprs);
  }
  SearchSpace& space = setup->space;
  space.pool = &setup->pool;
  space.oracle = setup->oracle.get();
  space.tensor_oracle = setup->tensor_oracle.get();
  space.input_exprs = exprs;
  space.max_kernel_ops = config.max_kernel_ops;
  space.max_block_ops = config.max_block_ops != 0 ? config.max_block_ops
                                                  : SearchConfig::auto_max_block_ops(program);
  space.max_customized_ops = config.max_customized_ops;
  space.max_block_inputs = config.max_block_inputs;
  space.max_block_outputs = config.max_block_outputs;
  space.smem_limit = static_cast<int64_t>(kSmemPruneSlack * target.smem_per_block_bytes);
  space.policy.max_blocks = 8 * static_cast<int64_t>(target.sm_count);
  if (!target.wgmma) space.policy.wgmma_grid_tiles.clear();
  space.plan = PlanOptions::for_arch(target);
  return setup;
}

// ---- the tree walk -------------------------------------------------------------------------

void Enumerator::Impl::flush_states() {
  if (unflushed_prunes > 0) {
    stop.live_prunes.fetch_add(unflushed_prunes, std::memory_order_relaxed);
    unflushed_prunes = 0;
  }
  if (unflushed == 0) return;
  int64_t total = stop.live_states.fetch_add(unflushed, std::memory_order_relaxed) + unflushed;
  unflushed = 0;
  if (stop.max_states > 0 && total >= stop.max_states) stop.stop.store(true);
}

bool Enumerator::Impl::enter() {
  int idx = counters[depth]++;
  int child = depth + 1;
  bool count = true;  // a child counted in this pass (a new state)
  if (collecting) {
    ++stats->states;
    count = false;
    if (child == split_depth + forced_views) {
      TaskPath p(chosen.begin(), chosen.begin() + depth);
      p.push_back(idx);
      tasks->push_back(std::move(p));
      return false;
    }
  } else if (child <= static_cast<int>(path.size())) {
    if (idx != path[depth]) return false;
    count = false;
  } else if (on_resume_path()) {
    // Resuming: the children before the one on `after` are finished, and so is the subtree
    // `after` itself; the node on `after` above it was counted when first entered.
    if (idx < after[depth]) return false;
    if (idx == after[depth]) {
      if (child == static_cast<int>(after.size())) return false;
      count = false;
    }
  }
  if (count) ++stats->states;
  if (!collecting && resume_match == depth && depth < static_cast<int>(after.size()) &&
      idx == after[depth])
    resume_match = child;
  if (++unflushed >= 64) flush_states();
  if (static_cast<int>(chosen.size()) <= depth) chosen.resize(depth + 1);
  chosen[depth] = idx;
  if (static_cast<int>(class_marks.size()) <= depth) class_marks.resize(depth + 1);
  class_marks[depth] = classes.size();
  ++depth;
  if (static_cast<int>(counters.size()) <= depth) counters.resize(depth + 1);
  counters[depth] = 0;
  return true;
}

void Enumerator::Impl::leave() {
  --depth;
  // Classes interned below this child are forgotten (ClassTable::truncate).
  classes.truncate(class_marks[depth]);
  if (resume_match > depth) resume_match = depth;
  // A subtree inside the task was explored to the end (stop is monotonic: not set now means it
  // was never set while the subtree ran): the task can continue after it.
  if (resume && depth >= static_cast<int>(path.size()) && !stopped()) {
    resume->after.assign(chosen.begin(), chosen.begin() + depth + 1);
    resume->stats = *stats;
  }
}

void Enumerator::Impl::reset() {
  classes.truncate(space.classes.size());
  g = KernelGraph();
  kt.clear();
  kexprs.clear();
  steps.clear();
  kernel_keys.clear();
  num_customized = 0;
  depth = 0;
  counters.assign(1, 0);
  chosen.clear();
  const KernelGraph& p = *space.program;
  for (int t : p.inputs()) {
    const KernelTensor& x = p.tensor(t);
    (void)g.add_input(x.name, x.shape, x.dtype);
    KTensor k;
    k.cls = space.classes.tensor_classes(t);
    k.prov = space.classes.tensor_provenance(t);
    kt.push_back(k);
    kexprs.push_back(space.input_exprs[t]);
  }
  g.copy_parallel_interface(p);
  num_program_inputs = static_cast<int>(kt.size());
}

// ---- kernel level --------------------------------------------------------------------------

void Enumerator::Impl::kernel_level() {
  if (stopped()) return;
  if (try_complete()) return;
  // Views (slice, transpose) are read in place by their consumers: no kernel of their own.
  if (static_cast<int>(steps.size()) - kernel_views >= space.max_kernel_ops)
    return prune(Prune::Incomplete);
  if (force_view()) return;
  predefined_ops();
  customized_ops();
}

bool Enumerator::Impl::force_view() {
  if (!space.tensor_oracle || space.multi_view_sources.empty()) return false;
  const KernelGraph& p = *space.program;
  const int n = static_cast<int>(kt.size());
  bool found = false;
  RankKey best;
  OpKind best_kind = OpKind::Transpose;
  OpAttrs best_attrs;
  int best_t = -1;
  for (const KernelOp& op : p.ops()) {
    // A single view has one place in the canonical order anyway; several of one tensor have
    // every interleaving with the other ops.
    if (op_category(op.kind) != Category::Layout ||
        std::find(space.multi_view_sources.begin(), space.multi_view_sources.end(),
                  op.inputs[0]) == space.multi_view_sources.end())
      continue;
    bool present = false;
    for (int u = num_program_inputs; u < n && !present; ++u)
      present = space.tensor_oracle->is_equivalent(kexprs[u], op.outputs[0]);
    if (present) continue;
    for (int t = 0; t < n; ++t) {  // a program input or a computed tensor
      if (!space.tensor_oracle->is_equivalent(kexprs[t], op.inputs[0])) continue;
      RankKey key = rank_key(std::span<const int>(&t, 1), op.kind, op.attrs);
      if (!found || key < best) {
        found = true;
        best = key;
        best_kind = op.kind;
        best_attrs = op.attrs;
        best_t = t;
      }
    }
  }
  if (!found) return false;
  Ins ins;
  ins.v[0] = best_t;
  ins.n = 1;
  // Forced views of program inputs come first and have no siblings: the tree is split that
  // many levels deeper, so that the tasks still divide the first real decisions.
  const int forced = best_t < num_program_inputs ? 1 : 0;
  forced_views += forced;
  try_predefined(best_kind, ins, best_attrs);
  forced_views -= forced;
  return true;
}

void Enumerator::Impl::predefined_ops() {
  const int n = static_cast<int>(kt.size());
  const int lo = kernel_keys.empty() ? 0 : kernel_keys.back().max_input();
  for (OpKind kind : space.kernel_kinds) {
    for_each_compute(
        kind, n, lo, [&](int t) -> const Shape& { return g.tensor(t).shape; },
        [](int, int) { return true; },
        [&](Ins ins, const OpAttrs& attrs) { try_predefined(kind, ins, attrs); });
    if (stopped()) return;
  }
}

void Enumerator::Impl::try_predefined(OpKind kind, Ins ins, OpAttrs attrs) {
  if (stopped()) return;
  RankKey key = rank_key(ins, kind, attrs);
  if (!key_above_last(key)) return prune(Prune::CanonicalOrder);
  if (op_category(kind) != Category::Layout && second_source(ins))
    return prune(Prune::SecondSource);
  if (!reads_unread(ins)) return prune(Prune::Unread);
  if ((kind == OpKind::Sub || kind == OpKind::Div) && kexprs[ins[0]] == kexprs[ins[1]])
    return prune(Prune::Trivial);
  std::array<Shape, 2> shapes;
  std::array<DimClassVec, 2> cls;
  std::array<DimProvVec, 2> prov;
  for (int i = 0; i < ins.n; ++i) {
    shapes[i] = g.tensor(ins[i]).shape;
    cls[i] = kt[ins[i]].cls;
    prov[i] = kt[ins[i]].prov;
  }
  auto out = quick_shape(kind, std::span(shapes.data(), ins.n), attrs);
  if (!out) return prune(Prune::Shape);
  ClassFlow f = flow_classes(classes, kind, attrs, std::span(shapes.data(), ins.n),
                             std::span(cls.data(), ins.n), std::span(prov.data(), ins.n), *out);
  if (!f.mismatch.empty()) return prune(Prune::ClassMismatch);
  if (!reducible(f.reduced, f.red, f.reduced_prov)) return prune(Prune::ReduceClass);
  if (!program_op(kind, ins, attrs, f.reduced)) return prune(Prune::ProgramOp);
  if (!g.add_op(kind, ins.vec(), attrs).ok()) return prune(Prune::Shape);
  int op_id = static_cast<int>(g.ops().size()) - 1;
  ExprId e = kernel_op_exprs(*space.pool, g, op_id, kexprs)[0];
  if (space.oracle && !space.oracle->is_subexpr(e)) {
    g.pop_op();
    return prune(Prune::AbstractExpr);
  }
  if (space.oracle && duplicate_of(e, kexprs)) {
    g.pop_op();
    return prune(Prune::Duplicate);
  }
  if (!program_tensor_expr(e)) {
    g.pop_op();
    return prune(Prune::KernelTensor);
  }
  if (!sign_consistent(kind, {kexprs[ins[0]], ins.n > 1 ? kexprs[ins[1]] : kNoExpr}, e)) {
    g.pop_op();
    return prune(Prune::Sign);
  }
  if (!program_site(kind, attrs, {kexprs[ins[0]], ins.n > 1 ? kexprs[ins[1]] : kNoExpr})) {
    g.pop_op();
    return prune(Prune::ProgramSite);
  }
  if (enter()) {
    if (trace_enabled())
      std::fprintf(stderr, "%*s%s(%d%s) = %s  %s\n", 2 * depth, "",
                   std::string(op_name(kind)).c_str(), ins[0],
                   ins.n > 1 ? (" " + std::to_string(ins[1])).c_str() : "", out->str().c_str(),
                   space.pool->str(e).c_str());
    KTensor k;
    k.cls = f.out;
    k.prov = f.prov;
    k.is_output = output_like(e, *out);
    k.view = op_category(kind) == Category::Layout && multi_view_source(kexprs[ins[0]]);
    kt.push_back(k);
    kexprs.push_back(e);
    for (int t : ins) ++kt[t].uses;
    steps.push_back({kind, ins.vec(), attrs, nullptr});
    kernel_keys.push_back(key);
    kernel_views += k.view;
    kernel_level();
    kernel_views -= k.view;
    kernel_keys.pop_back();
    steps.pop_back();
    for (int t : ins) --kt[t].uses;
    kexprs.pop_back();
    kt.pop_back();
    leave();
  }
  g.pop_op();
}

bool Enumerator::Impl::program_op(OpKind kind, const Ins& ins, const OpAttrs& attrs,
                                  DimClass reduced) const {
  if (!space.tensor_oracle) return true;
  // Adding up per-block partial results of a split reduction.
  if (op_category(kind) == Category::Reduce && reduced != kNoClass &&
      classes.info(reduced).kind == ClassKind::Partial)
    return true;
  const KernelGraph& p = *space.program;
  for (const KernelOp& op : p.ops()) {
    if (op.kind != kind || static_cast<int>(op.inputs.size()) != ins.n || !(op.attrs == attrs))
      continue;
    bool same = true;
    for (int j = 0; j < ins.n && same; ++j)
      same = space.tensor_oracle->is_equivalent(kexprs[ins[j]], op.inputs[j]);
    if (same) return true;
  }
  return false;
}

// ---- customized ops: patterns ----------------------------------------------------------------

void Enumerator::Impl::customized_ops() {
  if (num_customized >= space.max_customized_ops) return;
  const int n = static_cast<int>(kt.size());
  const int lo = kernel_keys.empty() ? 0 : kernel_keys.back().max_input();
  for (uint32_t mask = 1; mask < (1u << n); ++mask) {
    if (std::popcount(mask) > space.max_block_inputs) continue;
    if (static_cast<int>(std::bit_width(mask)) - 1 < lo) continue;
    std::vector<int> ins;
    for (int t = 0; t < n; ++t)
      if (mask & (1u << t)) ins.push_back(t);
    // The body is not known yet: compare the rank without it now, with it when closing.
    RankKey prefix = rank_key(ins, OpKind::Customized, OpAttrs{});
    if (nested(ins)) {
      prune(Prune::NestedInputs);
      continue;
    }
    if (second_source(ins)) {
      prune(Prune::SecondSource);
      continue;
    }
    if (!reads_unread(ins)) {
      prune(Prune::Unread);
      continue;
    }
    if (!kernel_keys.empty() && prefix.compare_nums(kernel_keys.back()) < 0) {
      prune(Prune::CanonicalOrder);
      continue;
    }
    patterns(ins, prefix);
    if (stopped()) return;
  }
}

bool Enumerator::Impl::program_site(OpKind kind, const OpAttrs& attrs,
                                    std::array<ExprId, 2> in) const {
  if (!space.tensor_oracle) return true;
  const Category cat = op_category(kind);
  const bool constants = cat == Category::Unary && op_info(kind).attrs != AttrSet::None;
  const bool view = cat == Category::Layout;
  const bool concat = cat == Category::Concat && space.program_concat;
  // Communication (all_reduce) happens where the program has it, on what it reduces there.
  const bool collective = cat == Category::Collective;
  if (kind == OpKind::Max) return max_site(attrs, in[0]);
  if (!constants && !view && !concat && !collective) return true;
  return matches_program_op(kind, attrs, in);
}

bool Enumerator::Impl::multi_view_source(ExprId e) const {
  if (!space.tensor_oracle) return false;
  for (int t : space.multi_view_sources)
    if (space.tensor_oracle->is_equivalent(e, t)) return true;
  return false;
}

bool Enumerator::Impl::max_site(const OpAttrs& attrs, ExprId in) const {
  // The abstraction keys a max by its operand and the reduced extent only, so a max over
  // another dim of the same extent looks alike (the query and key dims of self-attention
  // both come from the tokens). Max is not linear: it stays where the program puts it.
  bool any = false;
  for (const KernelOp& op : space.program->ops()) {
    if (op.kind != OpKind::Max || !space.tensor_oracle->is_equivalent(in, op.inputs[0]))
      continue;
    if (op.attrs.dim == attrs.dim) return true;
    any = true;
  }
  return !any;
}

bool Enumerator::Impl::matches_program_op(OpKind kind, const OpAttrs& attrs,
                                          std::array<ExprId, 2> in) const {
  if (!space.tensor_oracle) return true;
  const bool constants = op_info(kind).attrs != AttrSet::None &&
                         op_category(kind) == Category::Unary;
  for (const KernelOp& op : space.program->ops()) {
    if (op.kind != kind) continue;
    if (constants && (op.attrs.scalar != attrs.scalar || op.attrs.scalar2 != attrs.scalar2))
      continue;
    if (kind == OpKind::Slice && (op.attrs.dim != attrs.dim || op.attrs.start != attrs.start ||
                                  op.attrs.end != attrs.end))
      continue;
    if (kind == OpKind::Concat && op.attrs.dim != attrs.dim) continue;
    bool same = space.tensor_oracle->is_equivalent(in[0], op.inputs[0]);
    if (op_info(kind).arity == 2)
      same = same && space.tensor_oracle->is_equivalent(in[1], op.inputs[1]);
    if (same) return true;
  }
  return false;
}

bool Enumerator::Impl::sign_consistent(OpKind kind, std::array<ExprId, 2> in, ExprId e) const {
  if (!space.tensor_oracle || (kind != OpKind::Sub && kind != OpKind::Add)) return true;
  const KernelGraph& p = *space.program;
  for (const KernelOp& op : p.ops()) {
    if (op.kind != OpKind::Sub) continue;
    if (kind == OpKind::Sub && space.tensor_oracle->is_equivalent(in[0], op.inputs[0]) &&
        space.tensor_oracle->is_equivalent(in[1], op.inputs[1]))
      return true;
    if (kind == OpKind::Add && space.tensor_oracle->is_equivalent(e, op.outputs[0])) return false;
  }
  return kind == OpKind::Add;
}

bool Enumerator::Impl::subterm(ExprId a, ExprId b) {
  if (a == b) return true;
  uint64_t key = (uint64_t{a} << 32) | b;
  auto it = subterm_memo.find(key);
  if (it != subterm_memo.end()) return it->second;
  bool found = false;
  for (ExprId c : space.pool->children(b))
    if (c != kNoExpr && subterm(a, c)) {
      found = true;
      break;
    }
  subterm_memo.emplace(key, found);
  return found;
}

bool Enumerator::Impl::nested(const std::vector<int>& ins) {
  if (!space.oracle) return false;
  for (int a : ins)
    for (int b : ins)
      if (a != b && subterm(kexprs[a], kexprs[b])) return true;
  return false;
}

void Enumerator::Impl::patterns(const std::vector<int>& ins, const RankKey& prefix) {
  std::vector<DimClass> gridable, loopable;
  for (int t : ins) {
    int r = g.tensor(t).shape.rank();
    for (int d = 0; d < r; ++d) {
      DimClass c = kt[t].cls[d];
      if (c == kNoClass) continue;
      const DimClassInfo& info = classes.info(c);
      if (info.kind == ClassKind::Plain) {
        if (!grid_extent_candidates(info, space.policy).empty()) gridable.push_back(c);
        if (space.loop_classes & class_bit(c)) loopable.push_back(c);
      } else if (info.kind == ClassKind::Partial) {
        loopable.push_back(c);
      }
    }
  }
  auto uniq = [](std::vector<DimClass>& v) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  };
  uniq(gridable);
  uniq(loopable);
  // A class the program only normalizes over is split across blocks only by a kernel that
  // reads an operand contracting another class beside it (a weight W[k, n] whose columns n
  // the norm runs over: the decode GEMV before a row-wide norm). Elementwise kernels gain
  // nothing from such a split that a predefined op or a kernel of whole rows does not give.
  std::erase_if(gridable, [&](DimClass c) {
    const DimClassInfo& info = classes.info(c);
    if (!info.norm_reduced || info.sum_reduced) return false;
    for (int t : ins) {
      int r = g.tensor(t).shape.rank();
      bool has_c = false, contracts = false;
      for (int d = 0; d < r; ++d) {
        DimClass e = kt[t].cls[d];
        if (e == kNoClass) continue;
        has_c |= e == c;
        contracts |=
            e != c && classes.info(e).kind == ClassKind::Plain && classes.info(e).sum_reduced;
      }
      if (has_c && contracts) return false;
    }
    return true;
  });
  loopable.insert(loopable.begin(), kNoClass);
  // Grid axes take classes in increasing id order (x < y < z): permuting the axes of a grid
  // only renames its blocks.
  const int ng = static_cast<int>(gridable.size());
  std::vector<std::array<DimClass, 3>> grids{{kNoClass, kNoClass, kNoClass}};
  for (int i = 0; i < ng; ++i) {
    grids.push_back({gridable[i], kNoClass, kNoClass});
    for (int j = i + 1; j < ng; ++j) {
      grids.push_back({gridable[i], gridable[j], kNoClass});
      for (int k = j + 1; k < ng; ++k) grids.push_back({gridable[i], gridable[j], gridable[k]});
    }
  }
  for (const auto& grid : grids)
    for (DimClass loop : loopable) {
      open_block(ins, prefix, grid, loop);
      if (stopped()) return;
    }
}

int64_t Enumerator::Impl::tile_volume(const std::vector<int>& ins,
                                      const std::array<DimClass, 3>& grid, DimClass loop,
                                      const Extents& e) const {
  int64_t v = 0;
  for (int t : ins) {
    const Shape& s = g.tensor(t).shape;
    int64_t n = s.numel();
    for (int a = 0; a < 3; ++a)
      if (dim_of_class(kt[t].cls, s.rank(), grid[a]) >= 0) n /= e.grid[a];
    if (dim_of_class(kt[t].cls, s.rank(), loop) >= 0) n /= e.forloop;
    v += n;
  }
  return v;
}

void Enumerator::Impl::open_block(const std::vector<int>& ins, const RankKey& prefix,
                                  const std::array<DimClass, 3>& grid, DimClass loop) {
  const DimClassInfo* linfo = loop == kNoClass ? nullptr : &classes.info(loop);
  const bool partial_loop = linfo && linfo->kind == ClassKind::Partial;
  std::vector<Extents> choices = extent_choices(
      classes, space.policy, grid, partial_loop ? kNoClass : loop, partial_loop ? linfo->parts : 0);
  if (choices.empty()) return prune(Prune::NoExtents);
  // Representative extents: the smallest tiles, so that the shared-memory check during the
  // enumeration does not reject a structure that fits with some extents. expand_recipe
  // later builds every extent choice.
  const Extents* rep = &choices[0];
  int64_t best = tile_volume(ins, grid, loop, *rep);
  for (const Extents& e : choices) {
    int64_t v = tile_volume(ins, grid, loop, e);
    if (v < best) {
      best = v;
      rep = &e;
    }
  }
  Dim3 gdim{static_cast<int>(rep->grid[0]), static_cast<int>(rep->grid[1]),
            static_cast<int>(rep->grid[2])};
  auto made = BlockGraph::make(gdim, 128, static_cast<int>(rep->forloop));
  if (!made.ok()) return prune(Prune::Shape);
  OpenBlock ob{std::move(made).value(), {}, prefix, {}, {}, {}, {}, {}, loop, 0};
  ob.recipe.inputs = ins;
  ob.recipe.grid_class = grid;
  if (partial_loop) {
    ob.recipe.loop_origin = linfo->origin;
    ob.recipe.loop_axis = linfo->axis;
  } else {
    ob.recipe.loop_class = loop;
  }
  for (int t : ins) {
    const Shape& s = g.tensor(t).shape;
    GridMap imap = kAllReplicated;
    BTensor bt;
    bt.cls = kt[t].cls;
    bt.prov = kt[t].prov;
    for (int a = 0; a < 3; ++a) {
      imap[a] = dim_of_class(kt[t].cls, s.rank(), grid[a]);
      if (imap[a] >= 0) bt.dep |= classes.plain_mask(grid[a]);
    }
    int fmap = dim_of_class(kt[t].cls, s.rank(), loop);
    if (fmap >= 0) {
      bt.varying = true;
      // Iterating over per-block parts one part at a time leaves the part's own tile dim.
      if (partial_loop) bt.cls[fmap] = linfo->b;
    }
    if (!ob.b.add_input(s, imap, fmap).ok()) return prune(Prune::Shape);
    ob.recipe.imaps.push_back(imap);
    ob.recipe.fmaps.push_back(fmap);
    ob.bt.push_back(bt);
    ob.exprs.push_back(kexprs[t]);
    ob.kin_exprs.push_back(kexprs[t]);
    ob.dtypes.push_back(g.tensor(t).dtype);
    ++ob.ops;
  }
  if (ob.ops >= space.max_block_ops) return prune(Prune::OpLimit);
  if (block_smem_bytes(ob.b, ob.dtypes) > space.smem_limit) return prune(Prune::SharedMemory);
  ++opened;
  if (enter()) {
    if (trace_enabled()) {
      std::string line(2 * depth, ' ');
      line += "open [";
      for (int t : ins) line += std::to_string(t) + " ";
      line += "] grid " + std::to_string(gdim.x) + "," + std::to_string(gdim.y) + "," +
              std::to_string(gdim.z) + " F " + std::to_string(rep->forloop);
      for (int a = 0; a < 3; ++a) line += " " + classes.name(grid[a]);
      line += " loop " + classes.name(loop);
      std::fprintf(stderr, "%s\n", line.c_str());
    }
    block_level(ob);
    leave();
  }
}

// ---- public interface ------------------------------------------------------------------------

Enumerator::Enumerator(const SearchSpace& space, StopControl& stop, CandidateSink* sink)
    : impl_(std::make_unique<Impl>(space, stop, sink)) {}

Enumerator::~Enumerator() = default;

std::vector<TaskPath> Enumerator::collect_tasks(int split_depth, TaskStats& stats) {
  std::vector<TaskPath> tasks;
  Impl& m = *impl_;
  m.stats = &stats;
  m.collecting = true;
  m.split_depth = split_depth;
  m.tasks = &tasks;
  m.path.clear();
  m.after.clear();
  m.resume_match = 0;
  m.resume = nullptr;
  m.reset();
  m.kernel_level();
  m.flush_states();
  m.tasks = nullptr;
  return tasks;
}

bool Enumerator::run_task(const TaskPath& path, TaskStats& stats) {
  return run_task(path, stats, nullptr, nullptr);
}

bool Enumerator::run_task(const TaskPath& path, TaskStats& stats, const TaskResume* from,
                          TaskResume* resume) {
  Impl& m = *impl_;
  if (from) stats = from->stats;
  m.stats = &stats;
  m.collecting = false;
  m.path = path;
  m.after = from ? from->after : TaskPath{};
  m.resume_match = 0;
  m.resume = resume;
  m.reset();
  m.kernel_level();
  m.flush_states();
  m.resume = nullptr;
  return !m.stopped();
}

int64_t Enumerator::blocks_opened() const {
  return impl_->opened;
}

}  // namespace strata::search
