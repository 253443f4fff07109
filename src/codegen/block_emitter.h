// Internal: emission of one customized kernel (a block graph) from its KernelPlan.
//
// The generated __global__ function follows the plan exactly: shared-memory tiles at the
// planned offsets and layouts, prologue (accumulator zeroing, hoisted loads, pipeline
// prefetch, loop-invariant levels), the for-loop (pipeline wait, one barrier per level), and
// the post-loop levels ending with the output savers. Every element access goes through
// Access, so layouts (padding, swizzle, views) are applied in one place.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "code_writer.h"
#include "save_targets.h"
#include "strata/opt/kernel_plan.h"
#include "strata/util/status.h"

namespace strata::codegen {

/// How to address the elements of one tile in shared memory. The tile's logical indices map to
/// the physical indices of its storage by `map` (a transpose / slice read in place; identity
/// for a stored tile); strides and the swizzle apply to the physical indices.
struct Access {
  ir::Expr base;  ///< pointer expression to the storage's element (0, …, 0)
  DType dtype = DType::f32;
  std::vector<int64_t> strides;  ///< per physical dim, in elements; the last is 1
  bool swizzle = false;          ///< XOR swizzle of the last two dims (runtime swizzle_col)
  /// Rows split into atoms (TileLayout::atoms): elements between atom j and j + 1, each atom
  /// holding strides[rank−2] columns of every row; 0 when rows are not split.
  int64_t atom_stride = 0;
  IndexMap map;                  ///< logical → physical indices

  /// Element offset of index expressions `idx` (one per dim). `swizzle_row`, when given, is an
  /// expression congruent to idx[rank-2] modulo 8 that the swizzle reads instead (it only
  /// reads the row's low three bits); it is ignored where the map moves rows.
  ir::Expr offset(const std::vector<ir::Expr>& idx, const ir::Expr& swizzle_row = {}) const;
  /// A pointer to the tile's logical element (0, …, 0) (base plus the map's origin): how
  /// tensor-core operands are passed, with the strides and, for a transposed map, the TA / TB
  /// flags of MmaSpec. With a swizzle the origin must keep the swizzle's phase (rows by 8,
  /// columns by 64: the planner's rule); a column origin in a tile in atoms picks its atom.
  ir::Expr pointer() const;
  /// The element as an lvalue.
  ir::Expr ref(const std::vector<ir::Expr>& idx, const ir::Expr& swizzle_row = {}) const;
  /// The element widened to f32.
  ir::Expr load(const std::vector<ir::Expr>& idx) const;
  /// The same, for index expressions given as text.
  std::string offset(const std::vector<std::string>& idx,
                     const std::string& swizzle_row = "") const;
  std::string ref(const std::vector<std::string>& idx, const std::string& swizzle_row = "") const;
  std::string load(const std::vector<std::string>& idx) const;
  std::string pointer_text() const { return ir::print_expr(pointer()); }
  std::string base_text() const { return ir::print_expr(base); }
};

/// Where a thread's chunks lie in a chunk loop: chunk c = <tid> + k · threads() of a
/// row-major grid of chunks (the thread ↔ chunk assignment of every chunk loop).
struct ChunkWalk {
  std::vector<ir::Expr> idx;  ///< per dim, in chunks (the last dim is not scaled by the width)
  /// When the walk is split (!uses_c): idx[d] = step[d] + thread[d], where thread[d] depends
  /// on the thread alone and step[d] on k alone.
  std::vector<ir::Expr> thread, step;
  ir::Expr swizzle_row;  ///< congruent to idx[rank-2] modulo 8 (null: idx[rank-2] itself)
  ir::Expr past_end;     ///< true for a chunk past the end (null: none is)
  bool uses_c = true;    ///< the expressions read the variable `c`
};

/// The batch dims of a tile (all but the last two), as a shape (rank 0 for a matrix).
inline Shape batch_shape(const Shape& s) {
  std::vector<int64_t> bd;
  for (int d = 0; d + 2 < s.rank(); ++d) bd.push_back(s[d]);
  return Shape::make(bd).value();
}

/// Names and signature of a generated customized kernel.
struct BlockKernelInfo {
  std::string name;                 ///< the extern "C" function
  std::vector<DType> input_dtypes;  ///< as in the plan
  std::vector<DType> output_dtypes;
  /// The form (docs/codegen.md, "Task entries"): false, a __global__ kernel reading blockIdx;
  /// true, a __device__ task entry of one block, (bx, by, bz) and the dynamic shared memory
  /// passed in, run by the first plan.threads threads of a block of more (the rest return at
  /// once), its barriers the named barrier kTaskBarrierId over those threads, every cp.async
  /// group drained before it returns. The plan must have been made with
  /// PlanOptions::task_entry.
  bool task_entry = false;
};

/// The name of the constants emitted beside a task entry `name`: its threads and its dynamic
/// shared memory in bytes.
std::string task_threads_constant(const std::string& name);
std::string task_smem_constant(const std::string& name);

/// Emits the kernel of `plan` into `w`. `title` is a one-line description for the comment.
Status emit_block_kernel(const KernelPlan& plan, const BlockKernelInfo& info,
                         const std::string& title, CodeWriter& w);

/// A comment block listing the block graph (grid, block, forloop, maps, ops) and the plan.
std::string describe_block_graph(const KernelPlan& plan);

class BlockEmitter {
 public:
  BlockEmitter(const KernelPlan& plan, const BlockKernelInfo& info, CodeWriter& w);
  Status emit(const std::string& title);

 private:
  // block_emitter.cc: kernel structure, loads, savers.
  void declare_tiles();
  void declare_registers();
  void emit_prologue();
  void emit_loop();
  void emit_group_loop();
  void emit_post();
  void emit_level(Phase phase, int level);
  void emit_load(int op, const ir::Expr& stage, const ir::Expr& iter);
  void emit_save(int op);
  /// The saver of output `oi` (op `op`) into one of its targets (save_targets.h).
  void emit_save_to(int op, int oi, const SaveTarget& target);
  /// Opens a loop over the chunks of a row-major grid `chunks` spread over the cooperating
  /// threads (chunk c = <tid> + k · threads(); unrolled over k when each thread has at most
  /// 32 chunks) and returns where the thread's chunk lies; the caller closes the loop.
  ChunkWalk open_chunk_loop(const Shape& chunks);
  /// The indices of chunk c = <tid> + k · threads() of `chunks` in a loop unrolled over k.
  /// When the threads cover whole chunk rows (threads() a multiple of the chunks per row),
  /// thread t owns chunk column t % Q and rows t / Q + k · (threads() / Q): the indices are
  /// written as a per-thread part plus a part in k alone, so that once k is a constant the
  /// compiler folds them into per-thread bases and immediate offsets, and the swizzle row
  /// into at most 8 values. Otherwise the generic unflattening of c.
  ChunkWalk chunk_walk(const Shape& chunks) const;
  /// Inside a loop unrolled over k: emits what the step of chunk_walk(chunks) needs (`c`
  /// when the indices read it, the break past the end) and returns the walk.
  ChunkWalk begin_chunk_step(const Shape& chunks);
  void emit_zero_accumulators();
  void emit_load_a_fragments();
  /// The block's barrier: __syncthreads, or in a task entry the named barrier kTaskBarrierId
  /// over the kernel's threads.
  void barrier();
  /// The named barrier block-wide reductions use: 0 (__syncthreads) or kTaskBarrierId.
  int barrier_id() const { return info_.task_entry ? kTaskBarrierId : 0; }
  /// The loop's barrier: __syncthreads, or the group's barrier with loop groups.
  void loop_barrier();

  // block_finalize.cc: after the loop, accumulators from registers, loop groups' partials,
  // means and RMS values.
  void emit_finalize();
  void emit_dump_fragments(int acc);
  void emit_dump_rowsums(int acc);
  void emit_dump_register_accum(int acc);
  void emit_sum_partials(int acc, bool finalize);
  void emit_finalize_shared(int acc);
  /// The value of a tensor summed at read (TensorPlan::summed_at_read) at `idx`: the loop
  /// groups' copies added, then the accumulator's mean / RMS taken.
  std::string summed_value(int t, const std::vector<std::string>& idx) const;
  /// Emits the vector read of `vec` elements at `idx` of a tensor summed at read into the
  /// registers `name` (declared by the caller): the groups' copies added, then the mean / RMS.
  void emit_summed_vector(int t, const std::vector<std::string>& idx, int64_t vec,
                          const std::string& name);

  // block_chain.cc: register accumulators of non-matmul accumulators, matmul chains.
  void emit_register_accum(int op);
  void emit_matmul_chain(int op);
  /// The online softmax inside chain `op` (OpPlan::chain_ops): the running row maxima of the
  /// fragments, the rescaling of the partial sums kept in registers, and the ops after the max
  /// evaluated on the fragments in place.
  void emit_online_softmax_step(int op);
  /// After the loop, with loop groups: a chain's running maxima into the group's copy.
  void emit_dump_running_max(int op);
  /// Statements scaling the matmul result pair (v0, v1) at (b, r, c) by the inverse-RMS
  /// vectors of norms folded into matmul `op`.
  void emit_matmul_scales(int op, bool pair);
  /// Chunk width and chunks per thread of a register accumulator.
  int64_t accum_vec(int op) const;
  int64_t accum_trips(int op) const;
  /// Whether chunks of `vec` elements of tensor t can be read with vector loads.
  bool vector_readable(int t, int64_t vec) const;

  // block_rowwise.cc: rowwise kernels.
  Status emit_rowwise();

  // block_ragged.cc: ragged tiles (KernelPlan::ragged), as IR expressions.
  /// Declares the block's part of every extent split raggedly across the grid (rgp<e>).
  void declare_ragged_parts();
  /// The block's part of ragged extent e: rgp<e>, or a literal.
  ir::Expr ragged_part(int e) const;
  /// The iteration the code being emitted is in: `it` inside the for-loop, else 0.
  ir::Expr ragged_iteration() const;
  /// The present extent of ragged extent e in iteration `iter`.
  ir::Expr ragged_present(int e, const ir::Expr& iter) const;
  /// The condition that element `idx` of tensor t is absent along one of the dims in the bit
  /// set `dims` (in iteration `iter`); null when none of them is ragged.
  ir::Expr ragged_absent(int t, const std::vector<ir::Expr>& idx, unsigned dims,
                         const ir::Expr& iter) const;
  /// For a reduction over a ragged dim (OpPlan::ragged_extent): the f32 count of the elements
  /// combined per output (over all iterations for an accumulator); null otherwise.
  ir::Expr ragged_count(int op) const;

  // block_ops.cc: the compute ops.
  void emit_op(int op);
  void emit_elementwise(int op);
  void emit_reduction(int op);
  void emit_concat(int op);
  /// A layout op that is not read in place: its result copied into its own tile.
  void emit_layout_copy(int op);
  void emit_accumulate(int op);
  /// A rescaling accumulator in shared memory (TensorPlan::shift_offset): the element of its
  /// shift slot `slot` (an expression) that the accumulator's element at `out_idx` (of a tile of
  /// shape `out` the shift broadcasts to) reads.
  ir::Expr shift_slot(int op, const ir::Expr& slot, const Shape& out,
                      const std::vector<ir::Expr>& out_idx) const;
  /// `ref = (it > 0 ? ref · rescale_factor(previous shift, m) : 0) + value`: a rescaling
  /// accumulator's element re-expressed in this iteration's shift `m` (declared by the caller).
  void emit_rescaled_update(int op, const ir::Expr& ref, const Shape& out,
                            const std::vector<ir::Expr>& idx, const ir::Expr& value);
  /// Stores this iteration's shift of rescaling accumulator `op` into slot it % 2.
  void emit_shift_save(int op);
  void emit_matmul(int op);
  void emit_matmul_tensor_core(int op);
  void emit_matmul_simt(int op);
  /// Statements storing matmul results at (batch b, row r, col c): one value `v0`, or the
  /// pair (c, c+1) = (v0, v1) when `pair`.
  void emit_matmul_sink(int op, bool pair);
  /// Inside mma_epilogue's functor of tensor-core matmul `op`: `sink(true)` stores the pair
  /// (c, c + 1); where the plan pads an odd N (OpPlan::mma_n), the pair at c = N − 1 goes to
  /// `sink(false)` instead (its second element is padding).
  void emit_odd_tail_sink(int op, const std::function<void(bool)>& sink);
  /// Evaluates elementwise op `op` given the values of its inputs; emits temporaries named
  /// with `prefix` and returns the expression of the result.
  std::string eval_elementwise(int op, const std::vector<std::string>& inputs,
                               const std::string& prefix);
  /// f32 value of tensor t at the indices of a result of shape `out` (NumPy broadcasting).
  std::string operand_value(int t, const Shape& out, const std::vector<std::string>& out_idx);
  /// Before a loop `for (j < vec)` over the elements out_idx + (0, …, j) of a chunk: loads
  /// every shared-memory tile that the value of t reads along the chunk (t itself or the
  /// leaves of its inlined producers, not broadcast along the last dim) with one vector load
  /// into registers, which operand_value then reads as `name[j]`. End the loop with
  /// end_vector_operands().
  void prefetch_vector_operands(int t, const Shape& out, const std::vector<std::string>& out_idx,
                                int64_t vec);
  void end_vector_operands() { vector_operands_.clear(); }

  // Addressing.
  Access access(int tensor) const;
  Access access_stage(int tensor, const ir::Expr& stage) const;
  ir::Expr tile_ptr(int tensor) const;
  std::string tname(int tensor) const;
  std::string dtype_of(int tensor) const;
  /// Threads cooperating on the code being emitted (the block, or one loop group).
  int threads() const { return threads_; }
  bool grouped() const { return plan_.groups > 1; }
  /// Loop groups refill the stage consumed in the previous iteration at the top of the next
  /// (PlanOptions::early_refill; needs two or more stages).
  bool early_refill() const { return plan_.emission.early_refill; }
  /// Enters (true) or leaves the code of one loop group: thread index `gtid`, group threads,
  /// group copies of tiles.
  void set_group_scope(bool on);

  const KernelPlan& plan_;
  const BlockGraph& g_;
  const BlockKernelInfo& info_;
  CodeWriter& w_;
  bool in_loop_ = false;      ///< emitting inside the for-loop (pipelined tiles use `stage`)
  bool group_scope_ = false;  ///< emitting code of one loop group (group copies, `gtid`)
  std::string tid_ = "tid";   ///< the thread index variable of the code being emitted
  ir::Expr tid() const { return ir::var(tid_); }
  int threads_ = 0;
  int inline_counter_ = 0;  ///< makes temporaries of inlined thread graphs unique
  /// Tiles prefetched for the current chunk loop: tensor -> register array (indexed by j).
  std::map<int, std::string> vector_operands_;
};

}  // namespace strata::codegen
