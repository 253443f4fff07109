// Logical dimension classes: which tensor dimensions of a program index the same thing
// (docs/search.md, "Dimension classes").
//
// The search derives its grid, for-loop, imap, fmap and omap candidates from these classes
// instead of enumerating every mapping: a grid axis splits one class across blocks (every
// input's imap for that axis is its dim of that class, or φ), the for-loop splits one class
// (fmap likewise), so all inputs of a block graph are split consistently.
//
// Classes of a program come from a union–find over its (tensor, dim) pairs of extent > 1,
// linked as each op's dim_links (strata/ir/dim_links.h) relates them: matmul links A's k with
// B's k, A's m and B's n with the output's, and batch dims everywhere; elementwise ops link
// dims matched by broadcasting; reductions and norms link every dim they keep; the analysis
// marks the class each reduces. Tensors built during the search get classes by propagation
// through the same relation (flow_classes), which also rejects ops that would combine dims of
// different classes; it states the relation again because on tiles a dim of extent 1 may carry
// a class (one index per block), which dim_links leaves unlinked. Derived classes — a concatenation of two classes,
// per-block partial results of a split reduction, a reduction to `to` groups — are interned
// in the table on demand.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "strata/ir/kernel_graph.h"
#include "strata/ir/op.h"
#include "strata/ir/shape.h"
#include "strata/util/status.h"

namespace strata {

/// Index of a class in a ClassTable; kNoClass for dims of extent 1 (never split).
using DimClass = int;
inline constexpr DimClass kNoClass = -1;

/// The class of each dim of one tensor; entries past the rank are kNoClass.
using DimClassVec = std::array<DimClass, kMaxRank>;
inline constexpr DimClassVec kNoClasses{kNoClass, kNoClass, kNoClass, kNoClass};

enum class ClassKind : uint8_t {
  Plain,    ///< a class of the program (union–find result)
  Concat,   ///< concat(a, b) along a dim of class a and one of class b; never split
  Partial,  ///< blocks of a grid split of class `a` (a reduced class) saved side by side:
            ///< `parts` tiles of class `b` with extent `inner_extent` each
  Grouped,  ///< a class reduced to `parts` groups of consecutive elements (sum with to > 1)
};

struct DimClassInfo {
  ClassKind kind = ClassKind::Plain;
  int64_t extent = 1;         ///< extent of every dim of the class
  bool sum_reduced = false;   ///< Plain: summed over in the program (matmul k, sum, mean)
  bool norm_reduced = false;  ///< Plain: normalized over in the program (rms_norm)
  bool max_reduced = false;   ///< Plain: maxed over in the program (max, softmax)
  /// Plain: a batch dim of some matmul (attention's heads): a block may take one index of it
  /// whatever the extent, since the matmul's tensor-core tiles come from its other dims.
  bool matmul_batch = false;
  bool matmul_rows = false;   ///< Plain: the rows (M) of a matmul's output in the program
  std::string label;          ///< Plain: "X.1", the first program dim in the class
  DimClass a = kNoClass;      ///< Concat: first part; Partial, Grouped: the split class
  DimClass b = kNoClass;      ///< Concat: second part; Partial: class of the tile dim
  int64_t parts = 0;          ///< Partial: number of blocks; Grouped: number of groups
  int64_t inner_extent = 1;   ///< Partial: extent of one block's tile along the dim
  int origin = -1;            ///< Partial: kernel op that produced it (with `axis`)
  int axis = -1;              ///< Partial: grid axis of that op
  bool splittable() const { return kind == ClassKind::Plain && extent > 1; }
};

/// Bit set of plain classes (a program has at most 64 plain classes).
using ClassMask = uint64_t;
inline ClassMask class_bit(DimClass c) {
  return c >= 0 && c < 64 ? ClassMask{1} << c : 0;
}

/// Which program inputs reach a dim: bit i for program input i (by input position). The
/// provenance of a reduction — the inputs whose dims of the reduced class meet in it — tells
/// apart reductions that abstract expressions confuse: Σ_k X[k]·W[k] reduces k over {X, W},
/// (Σ_k X[k])·W over {X} alone.
using ProvMask = uint64_t;
/// The provenance of each dim of one tensor.
using DimProvVec = std::array<ProvMask, kMaxRank>;

/// How a reduction combines: linearly (sum, mean, matmul), as a normalization (rms_norm), or
/// by max. Reductions of different kinds over the same class are not interchangeable.
enum class RedKind : uint8_t { Linear, Norm, Max };

/// The kind of a reduction op (Reduce, Norm, Scan or a reducing accumulator).
RedKind reduction_kind(OpKind k);

/// A reduction of the program: over which class, of which kind, and its provenance.
struct ProgramReduction {
  DimClass cls = kNoClass;         ///< a plain class
  RedKind kind = RedKind::Linear;  ///< how it combines
  ProvMask prov = 0;               ///< inputs whose dims of `cls` meet in the reduction
  bool operator==(const ProgramReduction&) const = default;
};

/// Outcome of propagating classes through one compute op (flow_classes).
struct ClassFlow {
  DimClassVec out = kNoClasses;   ///< classes of the output's dims
  DimProvVec prov{};              ///< provenance of the output's dims
  DimClass reduced = kNoClass;    ///< the class the op sums, normalizes or maxes over, if any
  ProvMask reduced_prov = 0;      ///< provenance of the reduced dim(s)
  RedKind red = RedKind::Linear;  ///< how the op reduces (when `reduced` is set)
  std::string mismatch;           ///< non-empty: dims of different classes meet (rejected)
};

/// The classes of a program plus the derived classes interned during a search. Copyable;
/// every search thread works on its own copy (interning is not synchronized).
class ClassTable {
 public:
  /// Classes of a program of predefined ops. Fails on more than 64 plain classes.
  static Result<ClassTable> analyze(const KernelGraph& program);

  /// Facts about class c (0 ≤ c < size()).
  const DimClassInfo& info(DimClass c) const { return classes_[c]; }
  /// Number of classes, plain and derived. Plain classes are 0 .. num_plain()−1, numbered in
  /// order of first appearance among the program's (tensor, dim) pairs.
  int size() const { return static_cast<int>(classes_.size()); }
  int num_plain() const { return num_plain_; }
  /// Classes of program tensor t.
  const DimClassVec& tensor_classes(int t) const { return tensor_classes_[t]; }
  /// Provenance of program tensor t's dims.
  const DimProvVec& tensor_provenance(int t) const { return tensor_prov_[t]; }
  /// The reductions of the program (distinct).
  const std::vector<ProgramReduction>& reductions() const { return reductions_; }
  /// Whether the program has a reduction of plain class c, of the given kind and provenance.
  bool has_reduction(DimClass c, RedKind kind, ProvMask prov) const;
  /// Plain classes among program tensors' dims that are sum-, norm- or max-reduced.
  ClassMask reduced_mask() const;

  /// The class of a dim concatenating a dim of class a with one of class b (interned).
  DimClass concat(DimClass a, DimClass b);
  /// The class a concat of dims of classes a and b makes: the plain class of an anchored
  /// program concat (one whose dim the program meets in an input) with these operand classes,
  /// else concat(a, b).
  DimClass concat_class(DimClass a, DimClass b);
  /// The class of an output dim holding `parts` per-block partial results of a grid split of
  /// class `split` along `axis` of kernel op `origin`, each a tile of class `inner` with
  /// extent `inner_extent` (interned).
  DimClass partial(DimClass split, DimClass inner, int64_t inner_extent, int64_t parts, int origin,
                   int axis);
  /// The class of a dim of class c summed to `groups` groups of consecutive elements.
  DimClass grouped(DimClass c, int64_t groups);

  /// The plain classes a (possibly derived) class stands for: itself, both parts of a
  /// concat, the split class of a partial or grouped class.
  ClassMask plain_mask(DimClass c) const;

  /// Human-readable name: "X.1", "cat(X.1,A.1)", "part(K.2/8)".
  std::string name(DimClass c) const;

  /// The class of the dim that a slice of the program (range attrs.start .. attrs.end) makes
  /// of a dim of class `from`, or kNoClass if the program has no such slice.
  DimClass slice_class(DimClass from, const OpAttrs& attrs) const;

  /// A slice of the program: it maps a dim of class `from` to one of class `to`.
  struct SliceRule {
    DimClass from = kNoClass;
    OpAttrs attrs;
    DimClass to = kNoClass;
  };

  /// An anchored concat of the program: operands of classes a and b make a dim of plain class
  /// `to`.
  struct ConcatRule {
    DimClass a = kNoClass, b = kNoClass;
    DimClass to = kNoClass;
  };

  /// Forgets the derived classes numbered n and above, returning to the table as it was when
  /// size() was n (n ≥ num_plain()). The search calls it when it backtracks, so that the
  /// number of a derived class depends only on the current prefix, never on the subtrees
  /// explored before it: enumeration order (which sorts by class number) is then the same
  /// in every run, on every thread and when a task resumes in the middle.
  void truncate(int n);

 private:
  DimClass intern(const DimClassInfo& info);

  std::vector<DimClassInfo> classes_;
  int num_plain_ = 0;
  std::vector<DimClassVec> tensor_classes_;
  std::vector<DimProvVec> tensor_prov_;
  std::vector<ProgramReduction> reductions_;
  std::vector<SliceRule> slices_;
  std::vector<ConcatRule> concat_rules_;
  std::map<std::tuple<int, int, int, int64_t, int64_t, int, int>, DimClass> derived_;
};

/// Propagates classes and provenance through a compute op (categories Matmul, Unary,
/// Binary, Reduce, Norm, Concat, Layout, Scan) with inputs of the given shapes, classes and
/// provenance and output `out_shape`. A dim with a class may only meet dims of the same class or of
/// no class, and may not be broadcast.
ClassFlow flow_classes(ClassTable& table, OpKind kind, const OpAttrs& attrs,
                       std::span<const Shape> in_shapes, std::span<const DimClassVec> in,
                       std::span<const DimProvVec> in_prov, const Shape& out_shape);

/// The first dim of `classes` (rank `rank`) in class c, or -1.
int dim_of_class(const DimClassVec& classes, int rank, DimClass c);

/// How grid and for-loop extents are derived from class extents (docs/search.md).
struct SplitPolicy {
  /// Per-block tile extents for a grid split of a class that is not reduced in the program;
  /// tile 1 (one block per index) only for classes of extent ≤ max_unit_tile_extent, which
  /// may also be split in two halves (grid extent 2) whatever their tile, and for matmul
  /// batch classes (DimClassInfo::matmul_batch) of any extent within max_blocks.
  std::vector<int64_t> grid_tiles{1, 16, 32, 64, 128};
  int64_t max_unit_tile_extent = 64;
  /// Per-block tile extents for a grid split of a reduced class (split-K, FlashDecoding):
  /// each block reduces its share, a later kernel combines the partial results.
  std::vector<int64_t> reduce_tiles{128, 256, 512, 1024};
  /// Per-iteration tile extents of the for-loop class.
  std::vector<int64_t> loop_tiles{16, 32, 64, 128};
  /// Upper bound of the total number of blocks of a grid (the search sets 8 × SM count).
  int64_t max_blocks = 1056;
  /// A grid split also takes the tiles of the lists larger than every one that divides the
  /// class (all of them where none does) raggedly (docs/mugraph-semantics.md §3.1: the last
  /// tile is shorter), those whose padding, ⌈e/t⌉·t − e, is at most this fraction of the
  /// extent e; a loop split is ragged only where no tile divides.
  double max_ragged_waste = 0.125;
  /// Larger per-block tiles for a class that is not reduced in the program and that no tile
  /// of grid_tiles splits into at most max_blocks blocks (an LM head's vocabulary of 128256
  /// or 152064): tried in order by the same rules (dividing, else ragged with bounded
  /// padding), and the first that gives a split is offered.
  std::vector<int64_t> large_grid_tiles{256, 512, 1024};
  /// Tiles offered beside grid_tiles, where they divide, to a class of matmul rows
  /// (DimClassInfo::matmul_rows) that is not reduced in the program and has at least
  /// wgmma_tile_min_extent elements (16 blocks along it or more): 256 rows are four warpgroups of
  /// 64, the most a block of 16 warps gives warpgroup MMA with one row tile per warp
  /// (docs/codegen.md, "wgmma"). The search clears the list for a target without wgmma
  /// (ArchTraits::wgmma).
  std::vector<int64_t> wgmma_grid_tiles{256};
  int64_t wgmma_tile_min_extent = 4096;
};

/// Candidate grid extents (≥ 2, ascending) for splitting class `info` across blocks.
std::vector<int64_t> grid_extent_candidates(const DimClassInfo& info, const SplitPolicy& policy);
/// Candidate for-loop ranges (≥ 2, ascending) for a class whose per-block extent is
/// `block_extent` (the nominal tile of a grid split) and whose last block holds `last_extent`
/// elements (less than block_extent when the grid split is ragged).
std::vector<int64_t> loop_extent_candidates(int64_t block_extent, int64_t last_extent,
                                            const SplitPolicy& policy);

}  // namespace strata
