// Graph recipes: the structure of a μGraph found by the enumeration, without extents.
//
// The enumeration builds block graphs with one representative choice of grid and for-loop
// extents per (inputs, grid classes, loop class) pattern; a recipe records what was chosen
// structurally — which class each grid axis and the for-loop split, the block ops and the
// output savers — so that expand_recipe can rebuild the graph for every extent combination
// the split policy allows. Rebuilding goes through the checking constructors.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "strata/ir/block_graph.h"
#include "strata/cost/cost_model.h"
#include "strata/search/dim_classes.h"
#include "strata/ir/kernel_graph.h"
#include "strata/opt/kernel_plan.h"

namespace strata::search {

/// A compute op or accumulator of a block graph (tensor ids are block tensor ids).
struct BlockStep {
  OpKind kind;
  std::vector<int> inputs;
  OpAttrs attrs;
};

/// An output saver.
struct SaverStep {
  int tensor;
  GridMap omap;
};

/// The structure of one customized op.
struct CustomRecipe {
  std::vector<int> inputs;                                           ///< kernel tensor ids
  std::array<DimClass, 3> grid_class{kNoClass, kNoClass, kNoClass};  ///< plain class per axis
  DimClass loop_class = kNoClass;  ///< plain loop class (kNoClass: see loop_origin)
  int loop_origin = -1;            ///< partial loop class: kernel op that split it …
  int loop_axis = -1;              ///< … along this grid axis; F equals that axis's extent
  std::vector<GridMap> imaps;      ///< per input
  std::vector<int> fmaps;          ///< per input
  std::vector<BlockStep> ops;      ///< compute ops and accumulators, in order
  std::vector<SaverStep> savers;
  /// A canonical text of the structure (used to order customized ops with equal inputs).
  std::string key() const;
};

/// A kernel op: predefined (custom == nullptr) or customized.
struct KernelStep {
  OpKind kind;
  std::vector<int> inputs;
  OpAttrs attrs;
  std::shared_ptr<const CustomRecipe> custom;
};

struct GraphRecipe {
  std::vector<KernelStep> steps;  ///< after the program's inputs
  std::vector<int> outputs;       ///< kernel tensor per program output
};

/// Grid extents (per axis, 1 = unused) and for-loop range of one customized op.
struct Extents {
  std::array<int64_t, 3> grid{1, 1, 1};
  int64_t forloop = 1;
};

/// Every valid extent choice for a customized op with grid classes `grid_class` and loop class
/// `loop_class` (plain) or a forced range `forced_loop` (> 0 for a partial loop class),
/// in a deterministic order. The total block count is bounded by policy.max_blocks.
std::vector<Extents> extent_choices(const ClassTable& classes, const SplitPolicy& policy,
                                    const std::array<DimClass, 3>& grid_class, DimClass loop_class,
                                    int64_t forced_loop);

/// Builds the block graph of `r` with extents `e` on kernel inputs of the given shapes;
/// errors come from the checking constructors.
Result<BlockGraph> build_block_graph(const CustomRecipe& r, const Extents& e,
                                     const std::vector<Shape>& input_shapes);

/// Rebuilds the recipe on the program's inputs for every extent combination of its
/// customized ops whose block graphs fit `smem_limit` bytes, calling `emit` with each
/// complete graph (outputs marked with the program's output names). Returns the number of
/// graphs emitted. The fit is block_smem_bytes, an upper bound; with `plan` a block graph above
/// it is kept when the plan the emitter makes for it with those options succeeds (its shared
/// memory fits plan->smem_limit: matmul chains and accumulators in registers, tiles reused),
/// as a block of 256 query rows of attention does (docs/search.md, "Dimension classes").
/// Input tiles count at the types the emitter stores them in (a 16-bit intermediate read in
/// tiles of odd-length rows: f32); with `plan`, a block graph one of whose input tiles alone
/// exceeds plan->smem_limit is kept only when that plan succeeds too.
int64_t expand_recipe(const GraphRecipe& recipe, const KernelGraph& program,
                      const ClassTable& classes, const SplitPolicy& policy, int64_t smem_limit,
                      const std::function<void(KernelGraph&&)>& emit,
                      const PlanOptions* plan = nullptr);

}  // namespace strata::search
