// Internals of the Enumerator (enumerator.h), shared by its two sources: enumerator.cc (the
// tree walk, the kernel level and patterns of customized ops) and block_enumeration.cc (block
// graphs, closing them, complete graphs).
#pragma once

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <optional>
#include <span>
#include <unordered_map>

#include "search/enumerator.h"
#include "strata/expr/expr_normal_form.h"

namespace strata::search {

/// Rank of an op for the canonical order (Mirage §4.1): its input tensor ids, largest first,
/// then its kind, its inputs in order and its attributes; a customized op adds the text of its
/// body. An op that reads the output of another always ranks above it, so every graph has
/// exactly one order in which ranks increase, and only that order is generated.
struct RankKey {
  std::array<int64_t, 20> nums{};
  int len = 0;
  std::string body;
  /// Compares the numeric part only (lexicographically; a prefix ranks first).
  int compare_nums(const RankKey& o) const {
    for (int i = 0; i < len && i < o.len; ++i)
      if (nums[i] != o.nums[i]) return nums[i] < o.nums[i] ? -1 : 1;
    return len == o.len ? 0 : (len < o.len ? -1 : 1);
  }
  bool operator<(const RankKey& o) const {
    int c = compare_nums(o);
    return c != 0 ? c < 0 : body < o.body;
  }
  /// The largest input tensor id.
  int max_input() const { return static_cast<int>(nums[0]); }
};

/// The inputs of a compute op or accumulator (at most two).
struct Ins {
  std::array<int, 2> v{0, 0};
  int n = 0;
  int operator[](int i) const { return v[i]; }
  const int* begin() const { return v.data(); }
  const int* end() const { return v.data() + n; }
  std::vector<int> vec() const { return {begin(), end()}; }
};

RankKey rank_key(std::span<const int> inputs, OpKind kind, const OpAttrs& a);

/// Search-time facts about a kernel tensor.
struct KTensor {
  DimClassVec cls = kNoClasses;
  DimProvVec prov{};
  int uses = 0;            ///< ops of the graph reading it
  bool is_output = false;  ///< equivalent to a program output (complete-graph candidate)
  bool view = false;  ///< one of several views of a tensor (force_view): read in place, no kernel
};

/// Search-time facts about a block tensor.
struct BTensor {
  DimClassVec cls = kNoClasses;
  DimProvVec prov{};
  bool varying = false;   ///< depends on an input tile that moves with the for-loop
  ClassMask dep = 0;      ///< grid-split classes of the input tiles it depends on
  ClassMask partial = 0;  ///< classes it has summed over such that per-block results are
                          ///< still linear in that sum: a later kernel may add them up
  int shift = -1;         ///< the running max (block tensor id) it depends on, if any: it is
                          ///< accumulated only by the rescaling accumulators against that max
  int uses = 0;           ///< block ops reading it
};

/// A block graph being built, with everything needed to extend and close it.
struct OpenBlock {
  BlockGraph b;
  CustomRecipe recipe;
  RankKey prefix;  ///< kernel-level rank of the customized op without its body
  std::vector<BTensor> bt;
  std::vector<ExprId> exprs;
  std::vector<ExprId> kin_exprs;
  std::vector<DType> dtypes;
  std::vector<RankKey> keys;       ///< ranks of the block ops after the input iterators
  DimClass loop_class = kNoClass;  ///< plain or partial
  int ops = 0;                     ///< input iterators + compute ops + accumulators
};

/// Whether STRATA_SEARCH_TRACE is set: then every explored decision is printed to stderr,
/// indented by depth (for debugging the enumeration; very verbose).
inline bool trace_enabled() {
  static const bool on = std::getenv("STRATA_SEARCH_TRACE") != nullptr;
  return on;
}

/// Output shape of a compute op on inputs of the given shapes, or nullopt if invalid.
/// Allocation-free: most candidate ops of the enumeration fail here.
std::optional<Shape> quick_shape(OpKind kind, std::span<const Shape> in, const OpAttrs& attrs);

struct Enumerator::Impl {
  Impl(const SearchSpace& sp, StopControl& st, CandidateSink* sk)
      : space(sp), stop(st), sink(sk), classes(sp.classes) {}

  const SearchSpace& space;
  StopControl& stop;
  CandidateSink* sink;
  ClassTable classes;
  TaskStats* stats = nullptr;
  int64_t opened = 0;

  // ---- position in the tree ------------------------------------------------------------
  bool collecting = false;
  int split_depth = 0;
  int forced_views = 0;                    // forced views of program inputs above the node
  TaskPath path;                           // Run: the task's path
  TaskPath after;                          // Run: continue after this finished subtree (or empty)
  int resume_match = 0;                    // the current node is on `after` iff this == depth
  TaskResume* resume = nullptr;            // Run: where the task is, updated as subtrees finish
  std::vector<TaskPath>* tasks = nullptr;  // Collect: output
  std::vector<int> counters{0};            // children seen so far, per depth
  std::vector<int> chosen;                 // child chosen at each depth above the node
  std::vector<int> class_marks;            // classes.size() when the node at each depth opened
  int depth = 0;
  int64_t unflushed = 0;         // states not yet added to stop.live_states
  int64_t unflushed_prunes = 0;  // prunes not yet added to stop.live_prunes

  // ---- the kernel graph under construction ---------------------------------------------
  KernelGraph g;
  std::vector<KTensor> kt;
  int kernel_views = 0;  ///< kernel ops in `steps` that are layout views (no kernel)
  std::vector<ExprId> kexprs;
  std::vector<KernelStep> steps;
  std::vector<RankKey> kernel_keys;
  int num_customized = 0;
  int num_program_inputs = 0;

  bool stopped() const { return stop.stop.load(std::memory_order_relaxed); }
  /// The `duplicate` rule: whether e is the expression of one of `seen`, the same term or the
  /// same normal form (a product of three factors built in another order is the same value:
  /// (a·b)·c and (a·c)·b are distinct terms with one normal form); terms too large to
  /// normalize compare as terms.
  bool duplicate_of(ExprId e, std::span<const ExprId> seen) const {
    if (std::find(seen.begin(), seen.end(), e) != seen.end()) return true;
    const std::optional<ExprId> nf = normal_form(*space.pool, e);
    if (!nf) return false;
    for (ExprId x : seen) {
      if (x == kNoExpr) continue;
      const std::optional<ExprId> nx = normal_form(*space.pool, x);
      if (nx && *nx == *nf) return true;
    }
    return false;
  }
  /// Whether the current node lies on the path `after` of a resumed task (its own subtree not
  /// finished: the node is an ancestor of the finished subtree `after`).
  bool on_resume_path() const {
    return resume_match == depth && depth < static_cast<int>(after.size());
  }
  /// Whether events at the children of the current node are counted in this pass (so that
  /// every event is counted exactly once over the collection pass and all tasks, and over the
  /// runs of a resumed task: at a node on `after`, the events before its child on `after` was
  /// entered were counted before the task stopped).
  bool counting_child() const {
    int child = depth + 1;
    if (collecting) return child <= split_depth + forced_views;
    if (child <= static_cast<int>(path.size())) return false;
    return !on_resume_path() || counters[depth] > after[depth];
  }
  void prune(Prune p) {
    ++unflushed_prunes;
    if (counting_child()) ++stats->prunes[static_cast<int>(p)];
  }
  /// Whether an op may reduce (sum, normalize or contract) a dim of class c: only classes the
  /// program reduces somewhere. Summing over an index the program keeps cannot be undone
  /// without cancellation, which the abstract expressions cannot see (they forget which
  /// dim a sum runs over).
  /// A plain class must moreover be reduced the same way (linear or normalization) over
  /// the same inputs as in the program (see ProvMask).
  bool reducible(DimClass c, RedKind kind, ProvMask prov) const {
    if (c == kNoClass) return true;
    if (classes.info(c).kind == ClassKind::Plain) return classes.has_reduction(c, kind, prov);
    ClassMask m = classes.plain_mask(c);
    return (m & space.reduced_classes) == m;
  }
  /// Whether a kernel tensor with expression e materializes a tensor of the program (always
  /// true without abstract pruning). A kernel tensor is written to device memory; one that
  /// the program does not compute is a fragment of a computation that a single kernel could
  /// keep in shared memory, so graphs with such tensors are not generated (per-block partial
  /// results of split reductions are the exception, see close_with).
  bool program_tensor_expr(ExprId e) const {
    if (!space.tensor_oracle) return true;
    const int n = static_cast<int>(space.tensor_oracle->targets().size());
    for (int i = 0; i < n; ++i)
      if (space.tensor_oracle->is_equivalent(e, i)) return true;
    return false;
  }
  void flush_states();
  /// Called for a child that passed every check: whether to explore it.
  bool enter();
  /// Called after a child's subtree was explored (or abandoned when stopped): forgets the
  /// classes interned below it (ClassTable::truncate) and, when the subtree was finished,
  /// makes it the task's resume point.
  void leave();
  void reset();

  // enumerator.cc: kernel level and patterns
  void kernel_level();
  bool key_above_last(const RankKey& k) const {
    return kernel_keys.empty() || kernel_keys.back() < k;
  }
  void predefined_ops();
  /// With a tensor oracle, a view (slice, transpose) that the program applies to a tensor it
  /// takes several views of, equivalent to a computed kernel tensor, is forced as the next op
  /// while the graph lacks it:
  /// views cost no kernel and sit at program sites only (program_site), so the one remaining
  /// choice, where in the order to place them, is fixed — right after their source. This
  /// keeps a consumer of several views (the three slices of a fused QKV projection) from
  /// being searched behind every order of them. Returns whether a view was forced.
  bool force_view();
  void try_predefined(OpKind kind, Ins ins, OpAttrs attrs);
  /// With abstract pruning, predefined kernel ops replay ops of the program (same kind and
  /// attributes on inputs with equivalent expressions), or add up per-block partial results
  /// of a split reduction; everything else is left to customized kernels.
  bool program_op(OpKind kind, const Ins& ins, const OpAttrs& attrs, DimClass reduced) const;
  void customized_ops();
  void patterns(const std::vector<int>& ins, const RankKey& prefix);
  /// Abstract expressions map sub to add, so they cannot tell a−b, b−a and a+b apart. With
  /// abstract pruning, sub(a, b) is generated only where the program subtracts operands with
  /// the expressions of a and b, and add is not generated where its result would have the
  /// expression of one of the program's differences.
  bool sign_consistent(OpKind kind, std::array<ExprId, 2> in, ExprId e) const;
  /// Ops the abstraction sees coarsely make equivalent or useless graphs many: constants
  /// (c·(x·y) = (c·x)·y = x·(c·y)), views (a slice or transpose of anything), and concats (any
  /// two subexpressions concatenated pass the concat rule). With abstract pruning such an op
  /// (mul_scalar, add_scalar, clamp, transpose, slice, and concat when the program
  /// concatenates) is applied only to operands with the expressions of an op of the program of
  /// the same kind and attributes; a concat may also be the concat-then-matmul merge.
  bool program_site(OpKind kind, const OpAttrs& attrs, std::array<ExprId, 2> in) const;
  /// A max of a tensor equivalent to one the program takes a max of reduces one of the dims
  /// the program reduces it over.
  bool max_site(const OpAttrs& attrs, ExprId in) const;
  /// Whether `e` is equivalent to a program tensor in space.multi_view_sources.
  bool multi_view_source(ExprId e) const;
  /// Whether `kind(in)` with `attrs` is an op of the program on equivalent operands (same
  /// kind, constants, slice range or concat dim). True without a tensor oracle.
  bool matches_program_op(OpKind kind, const OpAttrs& attrs, std::array<ExprId, 2> in) const;
  /// Whether expression a occurs in expression b (structurally).
  bool subterm(ExprId a, ExprId b);
  /// With abstract pruning, a customized op does not read both a tensor and one whose
  /// expression contains it: what it could compute from the first alone, it could compute
  /// from the program inputs, so the combination only widens the search.
  bool nested(const std::vector<int>& ins);
  std::unordered_map<uint64_t, bool> subterm_memo;
  /// Whether a kernel op with these inputs would be a second op that reads program inputs
  /// only. Generated kernel graphs have a single such op (the first); every later op reads a
  /// tensor computed before it. This bounds the breadth of the kernel level: independent
  /// kernels side by side are better fused into one customized kernel, which the search
  /// does generate. (The program itself, always a candidate, is exempt.) Views (slice,
  /// transpose) cost no kernel and are exempt too, on either side: the views a program takes
  /// of its inputs (the column blocks of a fused QKV weight) come before the first kernel.
  /// Whether a kernel op with these inputs reads a computed tensor that nothing has read yet,
  /// when there is one. Such a tensor must be read by a later op (or be an output); the
  /// canonical order can always put a reader of it next, so only graphs in which it is read
  /// first are generated. Outputs of the program count as read.
  template <class Range>
  bool reads_unread(const Range& ins) const {
    bool any = false;
    // Views are exempt: a reader of one may need several (three slices of a fused QKV
    // projection feed one attention kernel), and they cost no kernel.
    for (int t = num_program_inputs; t < static_cast<int>(kt.size()); ++t)
      if (kt[t].uses == 0 && !kt[t].is_output && !kt[t].view) any = true;
    if (!any) return true;
    for (int t : ins)
      if (t >= num_program_inputs && kt[t].uses == 0) return true;
    return false;
  }
  /// Whether a kernel tensor could be matched to a program output (see try_complete).
  bool output_like(ExprId e, const Shape& shape) const {
    const KernelGraph& p = *space.program;
    for (size_t i = 0; i < p.outputs().size(); ++i)
      if (p.tensor(p.outputs()[i]).shape == shape &&
          (!space.oracle || space.oracle->is_equivalent(e, static_cast<int>(i))))
        return true;
    return false;
  }
  template <class Range>
  bool second_source(const Range& ins) const {
    if (static_cast<int>(steps.size()) == kernel_views) return false;
    for (int t : ins)
      if (t >= num_program_inputs) return false;
    return true;
  }
  int64_t tile_volume(const std::vector<int>& ins, const std::array<DimClass, 3>& grid,
                      DimClass loop, const Extents& e) const;
  void open_block(const std::vector<int>& ins, const RankKey& prefix,
                  const std::array<DimClass, 3>& grid, DimClass loop);

  /// Calls fn(inputs, attrs) for every instance of compute op `kind` over tensors 0..n-1
  /// whose largest input is at least `lo` (the canonical order allows no other) and whose
  /// pairs satisfy same_group.
  template <class ShapeOf, class SameGroup, class Fn>
  void for_each_compute(OpKind kind, int n, int lo, ShapeOf shape_of, SameGroup same_group, Fn fn);

  // block_enumeration.cc: block graphs and complete graphs
  void block_level(OpenBlock& ob);
  void try_block_op(OpenBlock& ob, OpKind kind, Ins ins, OpAttrs attrs);
  void block_accumulators(OpenBlock& ob);
  /// Whether loop tile t is a last-dim sum of a varying tile whose last dim is the loop
  /// class, so that accum_sum_ld of that tile gives accum(t) fused (rule unfused_reduction).
  bool fused_sum_covers(const OpenBlock& ob, int t) const;
  void try_close(OpenBlock& ob);
  /// Whether computed tile t, read inside the block, may also be saved: its rank is that of a
  /// program output and, with abstract pruning, its expression is equivalent to that output's
  /// and no kernel tensor has it yet.
  bool could_be_output(const OpenBlock& ob, int t) const;
  /// Closes the block saving exactly `sinks` (every choice of output maps).
  void close_variant(OpenBlock& ob, const std::vector<int>& sinks);
  void close_with(OpenBlock& ob, const std::vector<int>& sinks, const std::vector<GridMap>& omaps);
  bool try_complete();
};

inline bool commutative(OpKind k) {
  return k == OpKind::Add || k == OpKind::Mul;
}

template <class ShapeOf, class SameGroup, class Fn>
void Enumerator::Impl::for_each_compute(OpKind kind, int n, int lo, ShapeOf shape_of,
                                        SameGroup same_group, Fn fn) {
  OpAttrs attrs;
  auto one = [](int t) { return Ins{{t, 0}, 1}; };
  auto two = [](int a, int b) { return Ins{{a, b}, 2}; };
  switch (op_category(kind)) {
    case Category::Collective:  // all_reduce: only where the program has it (program_site)
    case Category::Unary:
      for (int t = lo; t < n; ++t) {
        if (op_info(kind).attrs == AttrSet::None) {
          fn(one(t), attrs);
          continue;
        }
        for (const OpAttrs& a : space.program_attrs[static_cast<int>(kind)]) fn(one(t), a);
      }
      break;
    case Category::Binary:
    case Category::Matmul:
      for (int a = 0; a < n; ++a)
        for (int b = 0; b < n; ++b) {
          if (std::max(a, b) < lo || (commutative(kind) && b < a)) continue;
          if (!same_group(a, b)) continue;
          const Shape &sa = shape_of(a), &sb = shape_of(b);
          bool fits;
          if (kind == OpKind::Matmul) {
            int r = sa.rank();
            fits = r >= 2 && sb.rank() == r && sa[r - 1] == sb[r - 2];
          } else {
            fits = true;
            for (int i = 1; i <= std::min(sa.rank(), sb.rank()) && fits; ++i) {
              int64_t x = sa[sa.rank() - i], y = sb[sb.rank() - i];
              fits = x == y || x == 1 || y == 1;
            }
          }
          if (!fits) {
            prune(Prune::Shape);
            continue;
          }
          fn(two(a, b), attrs);
        }
      break;
    case Category::Reduce:
      for (int t = lo; t < n; ++t) {
        const Shape s = shape_of(t);  // a copy: fn may grow the tensor list
        for (int d = 0; d < s.rank(); ++d) {
          if (s[d] <= 1) continue;
          for (int64_t to : space.reduce_tos) {
            if (to != 1 && (to >= s[d] || s[d] % to != 0)) continue;
            attrs.dim = d;
            attrs.to = to;
            fn(one(t), attrs);
          }
        }
      }
      break;
    case Category::Norm:
      for (int t = lo; t < n; ++t) {
        const Shape s = shape_of(t);  // a copy: fn may grow the tensor list
        for (int d = 0; d < s.rank(); ++d) {
          if (s[d] <= 1) continue;
          for (const OpAttrs& a : space.program_attrs[static_cast<int>(kind)]) {
            attrs = a;
            attrs.dim = d;
            fn(one(t), attrs);
          }
        }
      }
      break;
    case Category::Layout:
      for (int t = lo; t < n; ++t) {
        if (kind == OpKind::Transpose) {
          if (shape_of(t).rank() >= 2) fn(one(t), attrs);
          continue;
        }
        for (const OpAttrs& a : space.program_attrs[static_cast<int>(kind)]) {
          const Shape s = shape_of(t);  // a copy: fn may grow the tensor list
          if (a.dim < s.rank() && a.end <= s[a.dim]) fn(one(t), a);
        }
      }
      break;
    case Category::Scan:  // running ops: over the last dim of a loop tile (block level)
      for (int t = lo; t < n; ++t)
        if (shape_of(t)[shape_of(t).rank() - 1] > 1) fn(one(t), attrs);
      break;
    case Category::Concat:
      for (int a = 0; a < n; ++a)
        for (int b = 0; b < n; ++b) {
          if (std::max(a, b) < lo || !same_group(a, b)) continue;
          const Shape sa = shape_of(a), sb = shape_of(b);  // copies: fn may grow the list
          if (sa.rank() != sb.rank()) continue;
          for (int d = 0; d < sa.rank(); ++d) {
            // Concat-then-matmul is the only use of a concat the program does not have: it
            // joins distinct operands along one of the two dims a matmul contracts.
            // The program's own concats join along their dims (checked on expressions later).
            const bool program_dim = space.program_concat && space.concat_dims.test(d);
            if (!program_dim && (a == b || d < sa.rank() - 2)) continue;
            attrs.dim = d;
            fn(two(a, b), attrs);
          }
        }
      break;
    case Category::Source:
    case Category::Sink:
    case Category::Customized:
    case Category::Accum:
    case Category::Fused:
      break;  // not appended as compute ops
  }
}

}  // namespace strata::search
