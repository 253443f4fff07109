// The execution plan of one customized kernel: everything the graph optimizer decides about a
// block graph without changing what it computes (docs/codegen.md, paper §6).
//
// A KernelPlan sits beside an immutable BlockGraph and records, per op, when it runs (phase
// and barrier-separated level) and how (tensor-core or SIMT matmul, fused epilogue, fragment
// accumulation); per tensor, where it lives (shared memory, registers, or nowhere), its storage
// type, layout (row stride, swizzle), pipeline stages and shared-memory offset. The passes in
// graph_optimizer.h fill it in; the CUDA emitter reads it.
//
// Invariants once optimize_block_graph has run:
//  - ops of level k of a phase read only tensors produced in an earlier phase or at a level < k
//    of the same phase (a fused epilogue op shares its matmul's level);
//  - two Shared tensors whose live intervals intersect occupy disjoint byte ranges;
//  - every Shared offset and stage size is a multiple of kSmemAlign bytes; smem_bytes covers
//    every tensor and the reduction scratch and is ≤ PlanOptions::smem_limit.
// The plan is the emitter's whole contract: every decision the emitted code follows (levels,
// barriers, homes, layouts, the rowwise layout, launch bounds, chunk-walk form, refill order,
// finalize steps) is a field here, filled by a pass; the emitter applies no planning rule and
// reads no PlanOptions field. verify_plan (plan_invariants.h) checks the invariants after every
// pass.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "strata/ir/block_graph.h"
#include "strata/ir/shape.h"
#include "strata/util/arch_traits.h"
#include "strata/util/status.h"

namespace strata {

/// Alignment of every shared-memory tile and stage (bytes).
inline constexpr int64_t kSmemAlign = 128;

/// Knobs of the graph optimizer. Defaults target an H100/H200 (132 SMs, 227 KB of shared
/// memory per block). None of them changes what a kernel computes, only how.
struct PlanOptions {
  // The target's hardware, by default ArchTraits::default_arch()'s (arch_traits.h); for_arch
  // sets all three from one architecture.
  /// Dynamic shared memory per block (bytes).
  int64_t smem_limit = ArchTraits::default_arch().smem_per_block_bytes;
  /// Shared memory per SM (sizes co-resident blocks).
  int64_t sm_smem = ArchTraits::default_arch().smem_per_sm_bytes;
  /// SMs of the target (blocks per SM for the budgets).
  int sm_count = ArchTraits::default_arch().sm_count;
  /// 32-bit registers per SM (bounds a thread's registers at a block size).
  int sm_registers = ArchTraits::default_arch().registers_per_sm;
  /// Default options for the GPU `arch`: its shared memory per block and per SM, its SMs and
  /// registers.
  static PlanOptions for_arch(const ArchTraits& arch) {
    PlanOptions o;
    o.smem_limit = arch.smem_per_block_bytes;
    o.sm_smem = arch.smem_per_sm_bytes;
    o.sm_count = arch.sm_count;
    o.sm_registers = arch.registers_per_sm;
    return o;
  }
  int max_stages = 12;                   ///< pipeline depth cap for per-iteration input tiles
  int64_t bytes_in_flight = 128 * 1024;  ///< per-SM prefetch target that sizes the pipeline
  int register_accum_floats = 64;        ///< per-thread f32 budget for register accumulators
  int mma_chunk_floats = 32;             ///< per-thread f32 budget of one matmul output chunk
  int forced_stages = 0;                 ///< > 0: use exactly this many stages (clamped to F)
  bool tensor_cores = true;              ///< allow mma.sync matmuls
  bool fuse_epilogues = true;            ///< evaluate a matmul's elementwise consumer in registers
  bool hoist_invariants = true;          ///< run loop-invariant ops once before the loop
  bool concat_views = true;              ///< store concat operands in place inside the result
  bool inline_elementwise = true;        ///< evaluate single-use elementwise ops where read
  /// Chunk loops (tile loads, stores, register accumulators) written as a per-thread base
  /// plus offsets in the unrolled index, unrolled up to 32 chunks per thread; false: the
  /// flat chunk index unflattened per chunk, unrolled up to 16 (the codegen's ChunkWalk).
  bool split_chunk_walks = true;
  int threads = 0;  ///< threads per block; 0 = choose (see choose_layouts). Set together with
                    ///< loop_groups = G > 1, each group gets threads / G; set alone, no groups.
  /// Loop groups (split-F): the block's warps form G groups; group g runs iterations g, g+G, …
  /// with its own pipeline, tiles and partial accumulators, synchronizing only its own warps;
  /// partials are summed after the loop. 0 = choose, 1 = off, n = n groups where legal.
  int loop_groups = 0;
  /// Refill order of a loop group's pipeline. true: at the top of iteration j, right after the
  /// barrier that makes j's tiles visible, the group refills the stage it consumed in j − 1
  /// with iteration j + S − 1 (S − 1 stages ahead, one barrier per loop level); false: it
  /// refills the stage of j after computing on it, behind a second barrier (S stages ahead).
  /// Early refill issues the next copies before the compute of j instead of after it.
  bool early_refill = false;
  /// Loop groups' partial sums read where they are used: when every post-loop reader of a
  /// group-private accumulator is an elementwise op, a thread graph or an output saver, the
  /// reader adds the groups' copies (and takes the mean / RMS) itself, so the partials are
  /// never summed in place and the barrier behind that sum goes (TensorPlan::summed_at_read).
  bool sum_at_read = true;
  /// Blocks per SM the compiler must fit in registers (`__launch_bounds__(threads, n)`);
  /// 0 = choose: 1 when the grid fills at most one block per SM (every register a block of this
  /// size can have), else no minimum. Forcing blocks_per_sm() blocks can make them co-resident
  /// at the price of register spills; the profiler decides.
  int min_blocks_per_sm = 0;
  bool chain_matmuls = true;  ///< keep S = A·B (and its epilogue) in registers as the A
                              ///< operand of a following matmul (FlashAttention style)
  /// Warpgroup MMA (wgmma.mma_async, sm_90a only; docs/codegen.md, "wgmma"): tensor-core
  /// matmuls whose warpgroups can own 64-row tiles and whose B tile has the descriptor's layout
  /// run as wgmma (OpPlan::wgmma); plain matmuls prefer a tiling of one row tile per warp and
  /// one warp column for it. Off: mma.sync everywhere.
  bool wgmma = false;
  /// Row tiles (16 rows each) per warp of a matmul chain; 0 = choose (the fewest that keep the
  /// chain within 16 warps). n > 1 shares each B fragment between n row tiles (half the
  /// shared-memory reads per product at n = 2) with fewer warps; used when n divides the row
  /// tiles of a batch and the chain's registers fit (else the automatic choice).
  int chain_row_tiles = 0;
  bool fold_norms = true;       ///< apply rms_norm over a matmul's contraction dim as a row /
                                ///< column scale of the product instead of a normalized tile
  bool register_accums = true;  ///< accumulate non-matmul accumulators in registers per thread
  bool rowwise = true;          ///< run F = 1 kernels of elementwise ops and last-dim reductions
                                ///< with every tensor in registers (no shared-memory tiles)
  /// The most threads the kernel may have. A task entry (EmitOptions::task_entry) is called by
  /// a block of that many threads; a plan needing more is refused.
  int max_threads = 1024;
  /// The kernel is also emitted as a task entry (docs/codegen.md, "Task entries"): its block
  /// barrier is the named barrier kTaskBarrierId over the kernel's threads, so loop groups
  /// (named barriers 1, 2, …) take at most kTaskBarrierId − 1 groups.
  bool task_entry = false;
};

/// The named barrier a task entry synchronizes its threads with (bar.sync 15, threads): not 0,
/// which __syncthreads of the calling block uses, nor a loop group's 1..14.
inline constexpr int kTaskBarrierId = 15;

/// When an op runs.
enum class Phase : uint8_t {
  Prologue,  ///< once before the loop: loads of fmap-φ inputs and ops computed only from them
  Loop,      ///< every iteration of the for-loop
  Post,      ///< once after the loop: accumulator finalization, post-loop ops, output savers
};

/// Where a block tensor lives.
enum class TensorHome : uint8_t {
  Shared,     ///< a tile in dynamic shared memory (`stages` copies for pipelined inputs)
  Registers,  ///< an accumulator kept as mma fragments during the loop, dumped to its Shared
              ///< tile (offset/bytes) after the loop
  Fused,      ///< never materialized: a matmul result consumed in registers by its epilogue op
              ///< or accumulator
  View,       ///< stored in place inside another tensor (a concat operand inside the concat,
              ///< or a one-iteration accumulator inside its input tile)
  Inline,     ///< never materialized: an elementwise result recomputed by its only consumer
  Scale,      ///< an rms_norm folded into a matmul: only its f32 inverse-RMS vector is stored
              ///< (one value per index of the non-normalized dims, dense)
  Owned,      ///< rowwise kernels: held in registers by the threads owning its elements
  Alias,      ///< a transpose / slice (Layout op) read in place: through the storage of its
              ///< input (view_of) with the input's indices permuted and offset (IndexMap)
};

/// How a matmul is computed.
enum class MatmulPath : uint8_t { None, TensorCore, Simt };

/// Row-major placement of a tile: rows of the last dimension are `ld` elements apart (≥ the
/// last extent: padding against bank conflicts), leading dimensions are dense over rows.
struct TileLayout {
  int64_t ld = 1;           ///< row stride in elements
  bool swizzle = false;     ///< 16-byte chunks XOR-permuted by (row % 8); 16-bit, ld % 64 == 0
  int64_t stage_elems = 0;  ///< elements of one stage, padded so a stage is `align`-aligned
  /// Byte alignment of the tile's offset and stages in shared memory: kSmemAlign, or 1024 for
  /// the B tile of a wgmma matmul (the period of the 128-byte swizzle).
  int64_t align = kSmemAlign;
  /// Rows of storage after each matrix's last row (rank ≥ 2): the padded rows of a tensor-core
  /// operand whose padded extent (OpPlan::mma_n / mma_k) lies along its rows. A batch of the
  /// stored tile is (rows + pad_rows) · ld elements. Nothing writes them (docs/codegen.md,
  /// "Ragged tiles": padding to the mma step).
  int64_t pad_rows = 0;
  /// The rows split into `atoms` column blocks of `ld` columns (1: not split). Atom j holds
  /// columns ld·j … ld·j + ld − 1 of every row of a matrix, laid out as a tile of its own
  /// ((rows + pad_rows) rows `ld` apart, swizzled as such); the atoms of a matrix follow each
  /// other, (rows + pad_rows) · ld elements apart, and a batch of the stored tile is
  /// atoms · (rows + pad_rows) · ld elements. Element (r, c) of a matrix lies at
  ///   (c / ld) · (rows + pad_rows) · ld + r · ld + swizzle_col(r, c % ld).
  /// Used for the B tile of a wgmma matmul whose rows are wider than the 128-byte swizzle
  /// atom (plan_wgmma: ld = 64 halves, docs/codegen.md "wgmma").
  int64_t atoms = 1;
  /// Elements of one row across its atoms: the stored row length.
  int64_t row_elems() const { return ld * atoms; }
};

/// Warp decomposition of a tensor-core matmul (see runtime/strata_rt/mma.cuh): warps_m × warps_n
/// warps each own mt × nt fragment tiles, computed in chunks of chunk_mt × chunk_nt.
struct MmaTiling {
  int warps_m = 1, warps_n = 1;
  int mt = 1, nt = 1;
  int chunk_mt = 1, chunk_nt = 1;
};

/// How the logical indices of a tile reach the storage it is read from: the last two indices
/// swapped when `transposed`, then `origin` (one offset per dim, or empty for none) added to the
/// physical indices. Layout ops read in place (TensorHome::Alias) compose these maps.
struct IndexMap {
  bool transposed = false;
  std::vector<int64_t> origin;
  bool identity() const;
};

/// The map of Layout op `op` (transpose or slice) applied to a tile read through `m`, for tiles
/// of rank `rank`.
IndexMap compose_layout(const IndexMap& m, const BlockOp& op, int rank);

/// A kernel input read in place through predefined layout ops (kernel_views.h): its elements
/// are those of a dense row-major device tensor of shape `storage` through `map`. Its input
/// tile is loaded in the storage's orientation (TensorPlan::stored_transposed).
struct InputView {
  Shape storage;
  IndexMap map;
};

/// A kernel output written into parts instead of one tensor (output_routes.h, "routed"): the
/// saved tile's dim `dim`, which grid axis `axis` splits in tiles of `tile`, goes to part p — a
/// dense device tensor of the output's shape but for extent ends[p] − starts[p] along `dim` —
/// in the blocks whose index along `axis` lies in [starts[p] / tile, ends[p] / tile). The parts
/// partition the dim and every boundary is a multiple of `tile`.
struct OutputParts {
  int dim = -1;
  int axis = -1;
  int64_t tile = 0;
  std::vector<int64_t> starts, ends;
  bool operator==(const OutputParts&) const = default;
};

/// A tile dim whose present extent can fall short of its nominal extent: the tile of the last
/// block or iteration of a ragged split (docs/mugraph-semantics.md §3.1; docs/codegen.md,
/// "Ragged tiles"). In block b and iteration `it` its first
///   present(b, it) = min(tile, part(b) − (loop ? it · tile : 0))
/// elements are present, with part(b) = axis ≥ 0 ? min(block_tile, extent − b_axis · block_tile)
/// : extent, the block's part of the dim. Never less than 1.
struct RaggedExtent {
  int axis = -1;           ///< grid axis that splits `extent` raggedly across blocks, or -1
  int64_t extent = 0;      ///< axis ≥ 0: the device extent split across the grid; else the
                           ///< block's part (the same in every block)
  int64_t block_tile = 0;  ///< axis ≥ 0: ⌈extent / grid⌉; else extent
  int64_t tile = 0;        ///< the nominal extent of the dim in the tile
  bool loop = false;       ///< the block's part is split again over the iterations (fmap)
  bool operator==(const RaggedExtent&) const = default;
};

/// The ragged dims of the tensors of a block graph (ragged_tiles.h).
struct RaggedTiles {
  std::vector<RaggedExtent> extents;            ///< the distinct ragged extents
  std::vector<std::array<int, kMaxRank>> dims;  ///< per tensor and dim: an extent id, or -1
  /// Whether some tile is ragged.
  bool any() const { return !extents.empty(); }
  /// The extent id of dim d of tensor t, or -1 (every element present).
  int dim(int t, int d) const { return dims.empty() || d < 0 ? -1 : dims[t][d]; }
};

struct OpPlan {
  Phase phase = Phase::Loop;
  int level = 0;             ///< barrier-separated step within the phase (loads are level 0)
  int epilogue = -1;         ///< matmul: the elementwise op evaluated on its output fragments
  int host = -1;             ///< elementwise op: the matmul whose epilogue computes it
  int accumulate_into = -1;  ///< matmul: the `accum` op fed directly from its fragments
  int inline_into = -1;      ///< elementwise op: the consumer that evaluates it where it reads it
  bool in_place = false;     ///< writes nothing: its result is already stored (a concat of
                             ///< views, a one-iteration accumulator aliasing its input, a
                             ///< layout op read in place)
  MatmulPath matmul = MatmulPath::None;
  MmaTiling tiling;  ///< TensorCore matmuls
  /// TensorCore matmuls: N and K rounded up to the mma step (8, 16); 0 on other paths. When
  /// they exceed the true extents, the operands' storage covers the padded extents (row stride
  /// or TileLayout::pad_rows), the fragments of both operands are zeroed at k ≥ K
  /// (ragged_zero_operands) and product columns c ≥ N are never written (docs/codegen.md,
  /// "Ragged tiles": padding to the mma step).
  int64_t mma_n = 0, mma_k = 0;
  /// TensorCore matmuls under PlanOptions::wgmma: computed by warpgroup MMA (wgmma.cuh) instead
  /// of mma.sync; wgmma_note says why it was or was not (printed with the plan).
  bool wgmma = false;
  std::string wgmma_note;
  int chain_into = -1;  ///< matmul: the matmul that takes its (epilogue) result from registers
                        ///< as its A operand (FlashAttention style)
  int chain_from = -1;  ///< matmul: the matmul whose registers give its A operand
  int rowsum_of = -1;   ///< accumulator reducing the last dim: fed from the row sums of this
                        ///< chained matmul's (epilogue) fragments
  int scan_of = -1;     ///< running_max: the running row maxima of this chained matmul's
                        ///< (epilogue) fragments, kept per lane in registers (online softmax)
  /// Chained matmul with a running max: the elementwise ops evaluated on its fragments after
  /// the max (reading it per row; their host is this matmul), in order; the last one's result
  /// is the second matmul's A operand.
  std::vector<int> chain_ops;
  /// Chained matmul with a running max whose results do not depend on the shifts along the way:
  /// the A operand of the second matmul is exp(X − m) for the max m of X, and every accumulator
  /// of it and of the second product rescales by m. Loop groups may then keep their own maxima
  /// and combine them after the loop (docs/codegen.md, "The online softmax").
  bool shift_free = false;
  int fold_into = -1;           ///< rms_norm: the matmul that applies it as a row / column scale
  int scale_a = -1;             ///< matmul: rms_norm folded into operand A (scales output rows)
  int scale_b = -1;             ///< matmul: rms_norm folded into operand B (scales output columns)
  bool a_in_registers = false;  ///< chained matmul: loop-invariant A fragments kept in registers
  bool register_accum = false;  ///< non-matmul accumulator kept in registers per thread
  // Ragged tiles (KernelPlan::ragged; docs/codegen.md, "Ragged tiles"): set by
  // plan_ragged_tiles.
  /// The extent id (RaggedTiles::extents) of the dim this op combines, or -1 when that dim is
  /// never ragged: a reduction's reduced dim (it combines the present elements only; a mean
  /// divides by their count) or a matmul's contraction (k-steps past it are skipped).
  int ragged_extent = -1;
  /// Bit d: positions absent along dim d are left out. An accumulator or a reduction folded
  /// into a loop state (running max, reducing accumulators) masks its input there to the
  /// reduction's identity (skips those rows); a matmul adding its product into an accumulator
  /// masks the product there. Set for dims whose tiles are ragged per iteration (a later
  /// iteration of the same block sees the position present).
  unsigned ragged_mask = 0;
  /// Matmul with a ragged contraction: operand fragments zeroed at absent contraction indices
  /// (bit 0: A, bit 1: B), for operands that may hold anything there (computed tiles; loaded
  /// tiles are zero-filled). A contraction padded to the mma step (mma_k > K) has absent
  /// indices k ≥ K in every iteration, which no load writes: both operands (but a chained A)
  /// are zeroed there.
  unsigned ragged_zero_operands = 0;
};

struct TensorPlan {
  TensorHome home = TensorHome::Shared;
  DType dtype = DType::f32;  ///< storage element type
  TileLayout layout;
  int stages = 1;              ///< copies of a pipelined input tile
  int view_of = -1;            ///< View: the tensor whose storage holds this one; Alias: the
                               ///< layout op's input, read in place
  int view_dim = 0;            ///< View: dimension of the host along which this tile is offset
  int64_t view_offset = 0;     ///< View: index offset along view_dim
  int64_t offset = -1;         ///< byte offset in dynamic shared memory (Shared, Registers)
  int64_t bytes = 0;           ///< bytes reserved, all stages
  int live_begin = 0;          ///< first timeline position the storage is in use (inclusive)
  int live_end = 0;            ///< last timeline position (inclusive)
  bool group_private = false;  ///< one copy per loop group (bytes covers all copies)
  int64_t group_elems = 0;     ///< elements from one group's copy to the next
  /// Group-private accumulator whose copies are summed by each post-loop reader (never in
  /// place; PlanOptions::sum_at_read); a mean / RMS is taken by the reader too.
  bool summed_at_read = false;
  /// A rescaling accumulator in shared memory: elements from its storage to two slots of its
  /// shift's shape (dense, f32) holding the shift of the previous iteration (slot (it + 1) % 2
  /// is read, slot it % 2 written), or -1.
  int64_t shift_offset = -1;
  /// An input tile of a transposed kernel-level view (InputView): stored with its last two
  /// dims swapped, as the device tensor holds it (rows stay contiguous for cp.async); layout,
  /// ld and swizzle describe the stored shape, and readers see it through a transposed map.
  bool stored_transposed = false;
};

/// How a rowwise kernel holds one block tensor (RowwiseLayout::forms). A tensor's dims align
/// with the full tile's from the right; a dim of 1 where the full tile's is larger broadcasts.
enum class RowwiseForm : uint8_t {
  /// Last dim the full tile's: per chunk its `vec` values at the chunk's position (for a
  /// broadcast tensor, e.g. a gain [cols] or cos [1, 1, cols], the values the chunk reads).
  Chunks,
  /// Last dim 1: per chunk the value of the chunk's row (a row reduction, a per-row input).
  Rows,
  /// Narrower than a row and wider than 1 (a slice along the last dim, an input or elementwise
  /// op of such width): never held; each concat that reads it evaluates it at the columns it
  /// reads, loading its inputs from device memory at those columns.
  Gathered,
};

/// A part of a rowwise kernel: ops connected through the tensors they compute (outputs of
/// different shapes computed from shared inputs, e.g. rotary's Q and K, are two parts of one
/// kernel). Its rows follow the previous parts' in the chunk grid.
struct RowwisePart {
  Shape full;              ///< the part's full tile: the largest tensor it computes or reads
  int64_t rows = 1;        ///< rows of `full` (all dims but the last flattened)
  int64_t row_offset = 0;  ///< its first row in the chunk grid
};

/// How a rowwise kernel's rows (of every part's full tile, all dims but the last flattened)
/// are spread over the block: chunk c = tid + k·threads (k < per_thread) of row
/// r = c / row_chunks covers the elements (c % row_chunks)·vec … + vec − 1 of that row
/// (rowwise.h).
struct RowwiseLayout {
  std::vector<RowwiseForm> forms;  ///< per block tensor
  std::vector<RowwisePart> parts;  ///< in the order of their first op
  std::vector<int> part_of_op;     ///< per op; -1 for inputs (loaded by each part reading them)
  Shape full;                      ///< the first part's full tile
  int64_t rows = 1, cols = 1;      ///< rows of all parts; the common row length
  int64_t vec = 1;                 ///< elements per chunk
  int64_t chunks_per_row = 1;
  /// Chunks a row takes in the chunk grid: chunks_per_row, or for rows inside a warp the next
  /// power of two (the row's team of lanes; the chunks past chunks_per_row are idle).
  int64_t row_chunks = 1;
  int64_t per_thread = 1;  ///< chunks per thread
  int threads = 32;
  /// true: each row spans a multiple of `threads` chunks, so chunk k of every thread lies in
  /// row k / (chunks_per_row / threads) and rows are reduced across the block (shuffles, then
  /// one barrier); false: a row is row_chunks (≤ 32, a power of two) consecutive lanes of
  /// one warp, reduced with shuffles only.
  bool block_rows = false;
  /// Chunk c (of threads · per_thread) is idle — loads, reduces and stores nothing — when
  /// c % row_chunks ≥ chunks_per_row or c ≥ rows · row_chunks; false when no chunk is.
  bool idle_chunks = false;
};

/// What post level 0's second step does for one op (FinalizePlan::step_two).
enum class StepTwo : uint8_t {
  Nothing,         ///< not an accumulator, done in step 1, or summed by its readers
  SumPartials,     ///< the loop groups' copies summed into the first (then mean / RMS)
  FinalizeShared,  ///< the mean / RMS taken in place in shared memory
};

/// What post level 0 (right after the loop) does: accumulators leave registers (step 1), loop
/// groups' partials are summed and means / RMS values taken (step 2).
struct FinalizePlan {
  bool work = false;       ///< post level 0 has work (its own barrier before and after)
  bool two_steps = false;  ///< step 1 and step 2 separated by a barrier
  /// Post level 1 needs a barrier of its own after post level 0 (the finalize wrote what it
  /// reads in one step, or step 2 wrote sums / means).
  bool barrier_before_level_one = false;
  std::vector<StepTwo> step_two;  ///< per op (indexed like graph->ops())
};

/// How the code of the kernel is shaped, beyond what it computes: every such decision the
/// emitter acts on, made by the plan_emission pass (emission_plan.h) from the plan and its
/// options, so that the emitter never applies a planning rule or reads an option itself.
struct EmissionPlan {
  bool decided = false;  ///< plan_emission has run (the fields below are meaningful)
  /// Second argument of `__launch_bounds__(threads, n)`: blocks per SM the compiler must fit
  /// in registers, or 0 for none.
  int min_blocks_per_sm = 0;
  /// Registers per thread that those launch bounds leave (≤ 255).
  int register_cap = 255;
  /// Chunk loops written as a per-thread base plus offsets in the unrolled index where the
  /// threads cover whole chunk rows (docs/codegen.md, "Chunk loops"); false: the flat chunk
  /// index unflattened per chunk.
  bool split_chunk_walks = true;
  /// A chunk loop is unrolled when each thread has at most this many chunks.
  int max_unrolled_chunks = 32;
  /// Input loads of a split walk address global memory as the thread's base pointer plus a
  /// constant per chunk (false: one integer offset sum per chunk; under a tight register cap
  /// the pointers were kept live and spilled).
  bool pointer_steps = true;
  /// Loop groups refill the stage consumed in the previous iteration at the top of the next.
  bool early_refill = false;
  FinalizePlan finalize;
};

/// The plan of one customized kernel; see the file comment.
struct KernelPlan {
  std::shared_ptr<const BlockGraph> graph;
  std::vector<DType> input_dtypes;   ///< dtype of each kernel input (device tensor)
  std::vector<DType> output_dtypes;  ///< dtype of each kernel output
  /// Per kernel input: the view of device memory it reads in place, or nullopt (a dense
  /// tensor of the input's shape). Empty: every input dense.
  std::vector<std::optional<InputView>> input_views;
  /// Per kernel output: the parts it is written into (OutputParts), or nullopt (one dense
  /// tensor of the output's shape). Empty: none routed.
  std::vector<std::optional<OutputParts>> output_parts;
  DType mma_dtype = DType::f16;  ///< 16-bit type of tensor-core operands
  bool has_mma_dtype = false;    ///< false when no input is 16-bit (no tensor cores)
  PlanOptions options;
  int threads = 0;        ///< threads per block of the generated kernel
  int groups = 1;         ///< loop groups (see PlanOptions::loop_groups)
  int group_threads = 0;  ///< threads per loop group (threads / groups)
  bool rowwise = false;   ///< rowwise kernel (see PlanOptions::rowwise)

  std::vector<OpPlan> ops;                  ///< indexed like graph->ops()
  std::vector<TensorPlan> tensors;          ///< indexed like graph->tensors()
  std::vector<std::vector<int>> levels[3];  ///< op ids per phase and level

  RaggedTiles ragged;  ///< the ragged dims of the graph's tensors (empty: none)

  int pipeline_stages = 1;      ///< stages of every per-iteration input tile
  int64_t scratch_offset = -1;  ///< reduction scratch (one float per warp), if any
  int64_t scratch_bytes = 0;
  int64_t smem_bytes = 0;  ///< total dynamic shared memory

  int barriers_prologue = 0;       ///< __syncthreads before the loop (after the loads)
  int barriers_per_iteration = 0;  ///< one before each loop level ≥ 1
  int barriers_post = 0;           ///< one before each post level

  /// Rowwise kernels: how the block's full tile is spread over the threads.
  RowwiseLayout rowwise_layout;
  EmissionPlan emission;  ///< how the emitter shapes the code (plan_emission)

  const OpPlan& op(int id) const { return ops[id]; }
  const TensorPlan& tensor(int id) const { return tensors[id]; }
  /// Timeline position of a level of a phase (memory planning): prologue levels first, then
  /// loop levels, then post levels.
  int position(Phase phase, int level) const;
  /// Number of levels of a phase.
  int num_levels(Phase phase) const {
    return static_cast<int>(levels[static_cast<int>(phase)].size());
  }
};

/// Makes an empty plan for `graph` (no pass run yet). Checks one dtype per kernel input and
/// output.
Result<KernelPlan> make_kernel_plan(std::shared_ptr<const BlockGraph> graph,
                                    std::vector<DType> input_dtypes,
                                    std::vector<DType> output_dtypes, PlanOptions options = {},
                                    std::vector<std::optional<InputView>> input_views = {});

/// Multi-line human-readable listing of a plan (what STRATA_DUMP_PASSES=1 prints).
std::string format_plan(const KernelPlan& plan);

/// Ids of the ops that read tensor `t` (compute ops, accumulators and output savers).
std::vector<int> tensor_consumers(const BlockGraph& g, int t);

/// The type of a kernel's tensor-core operands given its input types: the first that is not
/// f32 (KernelPlan::mma_dtype); nullopt when every input is f32 (no tensor cores).
std::optional<DType> mma_input_dtype(const std::vector<DType>& input_dtypes);

/// The tensor whose storage a tile is read from: t itself, or for a layout op read in place
/// (TensorHome::Alias) the storage its input chain ends in.
int alias_root(const KernelPlan& plan, int t);
/// How tile t's indices reach the storage of alias_root(plan, t) (identity for stored tiles,
/// transposed for a tile stored transposed).
IndexMap alias_map(const KernelPlan& plan, int t);
/// The shape tile t is stored in (its shape with the last two dims swapped when
/// TensorPlan::stored_transposed).
Shape stored_shape(const KernelPlan& plan, int t);

/// The reduction an op performs over one dimension of its input tile, viewed as
/// [outer, reduced, inner] with the reduced extent cut into `to` groups of consecutive
/// elements: sum/mean/max (dim, to), rms_norm (dim, to = 1), and the fused accumulators and
/// running_max, which reduce the last dim (to = 1, or `to` for accum_sum_to_dimx).
struct ReductionShape {
  int64_t outer = 1, reduced = 1, inner = 1, to = 1;
  int dim = 0;
  int64_t group() const { return reduced / to; }
  int64_t outputs() const { return outer * to * inner; }
};

/// True for ops that reduce (those with a row in the op table's reduction family).
bool is_reduction(const BlockOp& op);
/// Whether the code generator handles block op `op` (make_kernel_plan refuses graphs with
/// others, naming the op). Every op the IR can build in a block graph is handled.
bool block_codegen_supports(const BlockOp& op);
/// Why the code generator cannot emit block graph g ("" if it can): an op it does not support,
/// or a construct on ragged tiles it does not handle (ragged_tiles.h).
std::string block_graph_codegen_unsupported(const BlockGraph& g);
/// The reduction of such an op on its input tile shape.
ReductionShape reduction_shape(const BlockOp& op, const Shape& input);

/// Lanes that cooperate on one output of a reduction over groups of `group` elements
/// (1, 2, 4, …, 32), or 0 for a block-wide reduction (all threads on one output at a time,
/// through the scratch area). `outputs` is the number of reduced values, `threads` the block size.
int reduction_team(int64_t group, int64_t outputs, int threads);

/// The team of a block-level reduction in a customized kernel: `reduction_team`'s, halved while
/// its teams would need more than one round over the outputs (outputs · lanes > threads), so
/// that every output is reduced in the first round: a lane then sums more elements with
/// independent loads rather than the block looping over rounds of loads and shuffles (a K tile
/// of 64 keys × 128 normalized per iteration: 2 lanes per key, not 16 lanes in 8 rounds). 0
/// stays 0 (block-wide). For reductions that write one value per output (folded norms, sums,
/// maxima, accumulators); a norm that writes its normalized tile back keeps reduction_team's.
int block_reduction_team(int64_t group, int64_t outputs, int threads);

}  // namespace strata
