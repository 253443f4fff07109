// The block graph: the body of a customized kernel (docs/mugraph-semantics.md §3).
//
// A block graph runs once per thread block of a grid (x, y, z), each block iterating a
// for-loop F times. Input iterators load, per block and iteration, the tile selected by their
// imap and fmap; loop-body ops compute on those tiles; accumulators turn per-iteration tiles
// into loop results; post-loop ops compute on loop results; output savers place each block's
// tile by omap. The kernel's output is defined by exactly that sentence.
//
// Invariants (held by construction; every mutator checks and returns an Error otherwise):
//  - ops are stored in a topological order; tensor and op ids are dense indices;
//  - every tensor has a stage: Loop (per iteration) or Post (after the loop);
//    inputs produce Loop tensors, accumulators map Loop to Post, compute ops keep the stage
//    of their inputs (which must agree), output savers take Post tensors;
//  - an imap/fmap split of extent n into k parts gives tiles of ⌈n/k⌉ and leaves no part
//    empty; a split that does not divide is *ragged*: the last part is shorter, and its missing
//    elements are absent (docs/mugraph-semantics.md §3.1); at most one grid axis maps to a data
//    dim; a grid axis of size 1 maps to φ; omap maps each grid axis of size > 1 to a distinct
//    data dim;
//  - a tile dim split raggedly across the grid records the device tensor's extent n along it
//    (BlockTensor::ragged): ops carry it like the extent itself, combine only operands whose
//    ragged extents agree, never slice, concatenate or group-reduce along it, and an output
//    saver writes n elements along it; a ragged for-loop split is never concatenated by an
//    accumulator.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "strata/ir/op.h"
#include "strata/ir/shape.h"
#include "strata/util/status.h"

namespace strata {

/// Grid or block extents along x, y, z.
struct Dim3 {
  int x = 1, y = 1, z = 1;
  int operator[](int axis) const { return axis == 0 ? x : axis == 1 ? y : z; }
  /// Blocks of the grid (saturated at INT64_MAX; a complete block graph has at most
  /// kMaxElements, since its savers place one tile per block in a bounded output).
  int64_t count() const { return saturating_mul(saturating_mul(x, y), z); }
  bool operator==(const Dim3&) const = default;
};

enum class Stage : uint8_t { Loop, Post };

struct BlockTensor {
  Shape shape;  ///< tile shape seen by one block (per iteration for Loop tensors); the
                ///< nominal shape: the last part of a ragged split holds fewer elements
  /// Per dim: 0, or — for a dim split raggedly across the grid — the device extent n the
  /// blocks' tiles cover together (the last block's tile is shorter than `shape`).
  std::array<int64_t, kMaxRank> ragged{};
  Stage stage;
  int producer;      ///< op id
  std::string name;  ///< optional, unique within the block graph when set
};

struct BlockOp {
  OpKind kind;
  std::vector<int> inputs;  ///< tensor ids (empty for Input)
  int output = -1;          ///< tensor id; -1 for Output savers
  OpAttrs attrs;
  std::vector<ThreadStep> chain;  ///< thread graph body, ThreadFused only
  bool operator==(const BlockOp&) const = default;
};

class BlockGraph {
 public:
  /// A new, empty block graph. Checks grid ≥ 1 per axis, 32 ≤ threads ≤ 1024 with threads a
  /// multiple of 32, and forloop ≥ 1.
  static Result<BlockGraph> make(Dim3 grid, int block_threads, int forloop);

  /// Adds the input iterator of the next kernel-level input (its index is num_inputs()).
  /// `kernel_shape` is that input's device-tensor shape. Returns the tile tensor id.
  Result<int> add_input(const Shape& kernel_shape, GridMap imap, int fmap);
  /// Adds a compute op (loop body or post-loop, by the stage of its inputs) or an
  /// accumulator. Returns the output tensor id. A compute op with a post-loop input is
  /// post-loop; its loop-body inputs must then be loop-invariant (docs/mugraph-semantics.md
  /// §3.4).
  Result<int> add_op(OpKind kind, std::vector<int> inputs, OpAttrs attrs = {});
  /// Adds a thread graph: an elementwise chain evaluated per element in registers.
  Result<int> add_thread_graph(std::vector<int> inputs, std::vector<ThreadStep> chain);
  /// Adds an output saver of a Post tensor; returns the output index.
  Result<int> add_output(int tensor, GridMap omap);
  /// Names a tensor (for printing and JSON); names are unique within the block graph.
  Status set_tensor_name(int tensor, std::string name);
  /// The tensor's name, or "b<id>" if it has none.
  std::string tensor_name(int tensor) const;
  /// Removes the last op (and its tensor). For backtracking search.
  void pop_op();
  /// Checks the graph is complete: at least one output saver.
  Status check_complete() const;

  Dim3 grid() const { return grid_; }
  int block_threads() const { return block_threads_; }
  int forloop() const { return forloop_; }
  const std::vector<BlockOp>& ops() const { return ops_; }
  const std::vector<BlockTensor>& tensors() const { return tensors_; }
  const BlockOp& op(int id) const { return ops_[id]; }
  const BlockTensor& tensor(int id) const { return tensors_[id]; }
  int num_inputs() const { return static_cast<int>(input_shapes_.size()); }
  int num_outputs() const { return static_cast<int>(output_ops_.size()); }
  /// Device-tensor shape of kernel input i as declared by add_input.
  const Shape& input_shape(int i) const { return input_shapes_[i]; }
  /// The part of kernel input i that block `block` sees in iteration `iter`: per dim of the
  /// input (padded to rank 4, leading dims [0, 1)), the offset and the number of present
  /// elements — the nominal tile, clipped where a ragged split ends.
  struct Range {
    int64_t offset = 0, length = 1;
  };
  std::array<Range, 4> input_tile(int i, const std::array<int, 3>& block, int iter) const;
  /// Whether some split of an input does not divide its extent (docs/mugraph-semantics.md
  /// §3.1): then tiles of the last blocks or iterations are shorter than their nominal shape.
  bool ragged() const;
  /// Whether some input's for-loop split leaves a shorter last iteration in some block.
  bool ragged_loop() const;
  /// The extent the for-loop covers in a block holding the nominal part: the part, along its
  /// fmap dim, of every input with a for-loop split (the device extent, or ⌈n/g⌉ when a grid
  /// axis of size g splits that dim too). 0 without such inputs or when they disagree. A
  /// ragged loop covers fewer elements than F × the tile: F·⌈P/F⌉ > P.
  int64_t loop_extent() const;
  /// Whether loop-body tensor t is the same in every iteration: an input iterator with
  /// fmap φ, or a compute op (not a running op) of such tensors only. Post-loop ops may read
  /// it (docs/mugraph-semantics.md §3.4). False for post-loop tensors.
  bool loop_invariant(int t) const;
  /// Device-tensor shape of output i (the block tile scaled by the grid along omap).
  const Shape& output_shape(int i) const { return output_shapes_[i]; }
  /// Op id of the input iterator of input i / of the saver of output i.
  int input_op(int i) const { return input_ops_[i]; }
  int output_op(int i) const { return output_ops_[i]; }

  /// Structural equality (same ops, attributes, grid, loop and shapes).
  bool operator==(const BlockGraph& o) const;

 private:
  BlockGraph() = default;
  std::string where(int op_id, OpKind kind) const;
  /// The stage of a compute op with these inputs (Post if any is post-loop), or the error
  /// (prefixed by `at`) when a post-loop op would read a loop tile that is not invariant.
  Result<Stage> compute_stage(const std::string& at, const std::vector<int>& inputs) const;

  Dim3 grid_;
  int block_threads_ = 128;
  int forloop_ = 1;
  std::vector<BlockOp> ops_;
  std::vector<BlockTensor> tensors_;
  std::vector<Shape> input_shapes_;
  std::vector<Shape> output_shapes_;
  std::vector<int> input_ops_;
  std::vector<int> output_ops_;
  std::vector<bool> input_loop_ragged_;   ///< per input: its for-loop split is ragged
  std::vector<int64_t> input_loop_part_;  ///< per input: its block part along fmap (0: none)
};

/// "x", "y" or "z".
char grid_axis_name(int axis);

}  // namespace strata
