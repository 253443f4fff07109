// The backtracking enumeration of μGraph prefixes (Mirage Algorithm 1; docs/search.md).
//
// An Enumerator walks the tree of graph prefixes depth first. Each edge of the tree is one
// decision: append a predefined kernel op, open a customized op with a pattern (inputs, grid
// classes, loop class), append a block op or accumulator, or close the block graph with its
// output savers. The tree is split into tasks at a fixed decision depth: collect_tasks()
// lists the paths to the nodes at that depth (and to complete graphs above it), run_task()
// replays one path and explores the subtree below it. Enumeration order is deterministic, so
// task i denotes the same subtree in every run and on every thread; statistics are counted
// so that their sums over tasks do not depend on how tasks are scheduled. A stopped task
// reports the last subtree it finished (TaskResume), and a later run continues after it with
// the statistics an uninterrupted run would have (docs/search.md, "Resuming inside a task").
#pragma once

#include <array>
#include <atomic>
#include <bitset>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "search/recipe.h"
#include "strata/expr/abstract_expr.h"
#include "strata/cost/cost_model.h"
#include "strata/search/dim_classes.h"
#include "strata/ir/kernel_graph.h"
#include "strata/search/search.h"
#include "strata/expr/subexpr_oracle.h"

namespace strata::search {

/// Whether STRATA_SCREEN_TRACE is set: the search then prints every candidate that fails the
/// equivalence screen to stderr (for debugging the enumeration's rules).
bool trace_screen_failures();

/// Why an extension was rejected. Names (prune_rule_name) appear in statistics.
enum class Prune : int {
  Shape,             ///< the checking constructors rejected the op (shapes, maps, stages)
  ClassMismatch,     ///< the op combines dims of different classes or broadcasts a class
  ReduceClass,       ///< the op reduces a class the program never reduces
  KernelTensor,      ///< a kernel tensor that is neither a program tensor nor partial results
  ProgramOp,         ///< a predefined kernel op that is not an op of the program
  ConcatForm,        ///< a concat that cannot serve concat-then-matmul
  NestedInputs,      ///< a customized op reading a tensor and one computed from it
  SecondSource,      ///< a kernel op after the first that reads program inputs only
  Sign,              ///< a sub, or an add, that the program's subtractions do not support
  Trivial,           ///< x − x or x / x (operands with one expression)
  Duplicate,         ///< a tensor with the expression of an earlier tensor of its graph
  Unread,            ///< a kernel op that reads none of the computed tensors nobody read yet
  SingleOpKernel,    ///< a customized kernel doing what one predefined op does
  SharedMemory,      ///< the block graph exceeds the target's shared memory per block
  CanonicalOrder,    ///< the op's rank does not exceed the previous op's
  AbstractExpr,      ///< the new tensor's expression is not an abstract subexpression
  InvariantAccum,    ///< accumulating a tile that does not change across the for-loop
  UnfusedReduction,  ///< accum of a last-dim sum that accum_sum_ld computes fused
  OpLimit,           ///< the block graph would exceed max_block_ops
  UnusedInput,       ///< closing a block graph with an input iterator nobody reads
  DeadTensor,        ///< closing with a loop-body tile nobody reads, or unused kernel tensors
  TooManyOutputs,    ///< closing with more unread tensors than max_block_outputs
  ReplicatedOutput,  ///< saving a tensor that does not depend on a grid axis's split
  PartialOutput,     ///< saving per-block parts of a reduction that cannot be combined
  NoExtents,         ///< no grid/for-loop extents fit a pattern
  DeadEnd,           ///< too few ops left to consume the unread tensors
  NotEquivalent,     ///< a complete graph whose abstract expression differs from the target
  Incomplete,        ///< the kernel-op limit was reached without producing every output
  ProgramSite,       ///< an op with constants, a view or a concat where the program has none
  kCount
};
std::string_view prune_rule_name(Prune p);

/// Counters of one task (or of the collection pass), summed into SearchStats.
struct TaskStats {
  int64_t states = 0;
  std::array<int64_t, static_cast<int>(Prune::kCount)> prunes{};
  int64_t recipes = 0;     ///< complete structures found
  int64_t candidates = 0;  ///< concrete graphs emitted by expanding them
  void add(const TaskStats& o);
};

/// A path from the root: the index of the chosen child at each depth.
using TaskPath = std::vector<int>;

/// How far an unfinished task got: `after` is the path (from the root, extending the task's
/// path) of the last subtree it finished, depth first; every subtree before it in enumeration
/// order is finished too. `stats` counts exactly the task's events up to that point.
struct TaskResume {
  TaskPath after;
  TaskStats stats;
};

/// Receives complete concrete graphs (thread-safe).
class CandidateSink {
 public:
  virtual ~CandidateSink() = default;
  virtual void offer(KernelGraph&& graph) = 0;
};

/// What the enumeration may use; shared read-only by all enumerators (the pool and the oracle
/// are thread-safe).
struct SearchSpace {
  const KernelGraph* program = nullptr;
  ClassTable classes;  ///< program classes; each enumerator extends its own copy
  SplitPolicy policy;
  int64_t smem_limit = 0;
  /// The emitter's plan options for the target: an extent choice whose shared-memory estimate
  /// exceeds smem_limit is kept when its plan fits (expand_recipe).
  PlanOptions plan;
  ExprPool* pool = nullptr;
  SubexprOracle* oracle = nullptr;  ///< null: no abstract pruning
  /// Targets: the expressions of every program tensor, by tensor id (null: no abstract
  /// pruning). Kernel tensors of a candidate must be one of them, or per-block partial
  /// results; predefined kernel ops must be ops of the program on equivalent inputs.
  SubexprOracle* tensor_oracle = nullptr;
  std::vector<ExprId> input_exprs;  ///< per program tensor id of an input: var(i)
  int max_kernel_ops = 5;
  int max_block_ops = 11;
  int max_customized_ops = 2;
  int max_block_inputs = 4;
  int max_block_outputs = 2;
  std::vector<OpKind> kernel_kinds;  ///< predefined ops the kernel level may append
  std::vector<OpKind> block_kinds;   ///< compute ops the block level may append
  std::vector<OpKind> accum_kinds;   ///< accumulators the block level may append
  std::vector<int64_t> reduce_tos;   ///< `to` values for sum/mean (1 first)
  /// Per op kind (indexed by OpKind): the distinct attributes the program uses with it, for
  /// the attributes the search does not enumerate itself (scalars, clamp bounds, eps, slice
  /// ranges). The search offers an op with exactly these; accum_rms_ld takes rms_norm's eps.
  std::vector<std::vector<OpAttrs>> program_attrs;
  bool block_concat = false;      ///< concat allowed in block graphs
  bool program_concat = false;    ///< the program itself concatenates
  bool merge_concat = false;      ///< concat-then-matmul merges possible (two matmuls)
  std::bitset<8> concat_dims;     ///< dims along which the program concatenates
  bool has_views = false;         ///< the program slices or transposes
  /// Program tensors the program takes two or more views of (the slices of a fused
  /// projection): the search forces those views right after an equivalent kernel tensor.
  std::vector<int> multi_view_sources;
  ClassMask loop_classes = 0;     ///< plain classes a for-loop may split
  ClassMask reduced_classes = 0;  ///< plain classes the program reduces

  /// Fills everything from the program (kinds, scalars, classes); the caller sets the limits,
  /// pool, oracle and smem limit.
  static Result<SearchSpace> from_program(const KernelGraph& program);
};

/// A search space with the expression pool and oracles it points to (not movable: the space
/// keeps pointers into it).
struct SearchSetup {
  ExprPool pool;
  std::unique_ptr<SubexprOracle> oracle, tensor_oracle;
  SearchSpace space;

  /// Analyses the program and applies the limits of `config` and the shared memory and SM
  /// count of `target` (the smem limit includes the cost model's prune slack).
  static Result<std::unique_ptr<SearchSetup>> make(const KernelGraph& program,
                                                   const SearchConfig& config,
                                                   const Target& target);
};

/// Stop conditions shared by all enumerators of a search.
struct StopControl {
  std::atomic<bool> stop{false};
  std::atomic<int64_t> live_states{0};  ///< states of this run, for limits and progress
  std::atomic<int64_t> live_prunes{0};  ///< rejected extensions of this run, for progress
  std::atomic<int64_t> live_found{0};   ///< concrete candidates of this run, for progress
  int64_t max_states = 0;               ///< 0 = none
};

class Enumerator {
 public:
  Enumerator(const SearchSpace& space, StopControl& stop, CandidateSink* sink);
  ~Enumerator();

  /// Walks the tree down to `split_depth` and returns the paths of its tasks in order.
  std::vector<TaskPath> collect_tasks(int split_depth, TaskStats& stats);
  /// Explores the subtree of one task. Returns false if stopped before it was finished.
  bool run_task(const TaskPath& path, TaskStats& stats);
  /// Explores the subtree of one task, continuing after `from->after` when `from` is given:
  /// the subtrees up to it are skipped and their events are not counted again. `stats` starts
  /// at from->stats and counts on; when the task finishes (true) it holds the task's whole
  /// statistics, equal to an uninterrupted run's. When stopped (false), `stats` holds every
  /// event counted so far and `*resume` (if given) the latest point to continue from: updated
  /// whenever a subtree finishes, else left as it was (the caller initializes it to *from).
  bool run_task(const TaskPath& path, TaskStats& stats, const TaskResume* from, TaskResume* resume);
  /// Number of block graphs opened so far (patterns whose representative extents fit).
  int64_t blocks_opened() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata::search
