// The executor: one implementation of the μGraph semantics (docs/mugraph-semantics.md) for every
// value domain.
//
// Kernel graphs run op by op. Predefined ops are applied to whole tensors (or to the parts a
// PartialPlan asks for). A customized op runs its block graph exactly as docs/mugraph-semantics.md
// §3 defines
// it: for every block (bx, by, bz) and iteration i, each input iterator's tile is cut from its
// device tensor by imap/fmap, the loop-body ops compute on tiles, accumulators combine the
// iterations; after the loop the post-loop ops run and every output saver places the block's
// tile by omap. Blocks run in parallel; each block is computed by one thread, so results do not
// depend on the thread count.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "interp/accumulate.h"
#include "strata/ir/shape_infer.h"
#include "strata/ir/kernel_graph.h"
#include "strata/util/status.h"

namespace strata::interp {

/// Static per-tensor facts for a domain (see ValueHints). Empty vectors mean "all defaults".
struct ExecHints {
  std::vector<ValueHints> kernel;              ///< per kernel tensor id
  std::vector<std::vector<ValueHints>> block;  ///< per kernel op id: per block tensor id
};

/// Which parts of a kernel graph to evaluate; empty vectors mean "everything". Parts not
/// evaluated hold unspecified values, so a plan must cover everything the wanted results read.
struct PartialPlan {
  /// Per kernel op id (customized ops): the linear block ids (bx + gx·(by + gy·bz)) to run.
  std::vector<std::optional<std::vector<int64_t>>> blocks;
  /// Per kernel op id (predefined ops): the output elements to compute.
  std::vector<std::optional<Region>> regions;
};

struct ExecConfig {
  int threads = 1;                       ///< worker threads (blocks, rows of kernel ops)
  const ExecHints* hints = nullptr;      ///< null: every component needed, every exp Lax
  const PartialPlan* partial = nullptr;  ///< null: evaluate everything
  /// When set and true, evaluation gives up at its next check (before each kernel op and each
  /// block, and in the row chunks of a predefined matmul): execute returns kStoppedMessage.
  const std::atomic<bool>* stop = nullptr;
};

/// The error of an evaluation given up for ExecConfig::stop.
inline constexpr const char* kStoppedMessage = "evaluation stopped (time limit or interrupt)";

/// For each op of a block graph: whether its result reaches an output saver (only those run).
inline std::vector<char> live_block_ops(const BlockGraph& bg) {
  std::vector<char> live(bg.ops().size(), 0), need(bg.tensors().size(), 0);
  for (int i = static_cast<int>(bg.ops().size()) - 1; i >= 0; --i) {
    const BlockOp& op = bg.op(i);
    live[i] = op.kind == OpKind::Output || (op.output >= 0 && need[op.output]);
    if (live[i])
      for (int t : op.inputs) need[t] = 1;
  }
  return live;
}

namespace detail {

inline const ValueHints& default_hints() {
  static const ValueHints h;
  return h;
}

/// The tile of input iterator `attrs.input_index` that block b sees in iteration `iter`: its
/// offset inside the device tensor (per padded dim) and its shape, clipped where a ragged
/// split ends (BlockGraph::input_tile).
inline std::pair<std::array<int64_t, 4>, Shape> input_tile_box(const BlockGraph& bg,
                                                               const OpAttrs& attrs,
                                                               const Shape& nominal,
                                                               const std::array<int, 3>& b,
                                                               int iter) {
  auto r = bg.input_tile(attrs.input_index, b, iter);
  std::array<int64_t, 4> off{};
  Shape shape = nominal;
  const int pad = 4 - nominal.rank();
  for (int d = 0; d < 4; ++d) {
    off[d] = r[d].offset;
    if (d >= pad) shape[d - pad] = r[d].length;
  }
  return {off, shape};
}

/// The shape of a compute op's result on operands of the given (actual) shapes: the nominal
/// shape unless a ragged split made an operand's tile shorter.
inline Shape actual_shape(const BlockOp& op, const std::vector<Shape>& in, const Shape& nominal,
                          int forloop) {
  OpAttrs attrs = op.attrs;
  Result<Shape> r = op.kind == OpKind::ThreadFused ? infer_thread_graph_shape(op.chain, in)
                    : op_category(op.kind) == Category::Accum
                        ? infer_accum_shape(op.kind, in, forloop, attrs)
                        : infer_compute_shape(op.kind, in, attrs);
  return r.ok() ? *r : nominal;
}

/// Copies the box [off, off + dims(dst)) of src into dst (both already shaped).
template <class V>
void copy_in(const TensorData<V>& src, const std::array<int64_t, 4>& off, TensorData<V>& dst) {
  Operand os = Operand::of(src.shape), od = Operand::of(dst.shape);
  for (int64_t i0 = 0; i0 < od.dims[0]; ++i0)
    for (int64_t i1 = 0; i1 < od.dims[1]; ++i1)
      for (int64_t i2 = 0; i2 < od.dims[2]; ++i2) {
        const V* s = src.data.data() + os.row_base(off[0] + i0, off[1] + i1, off[2] + i2) + off[3];
        V* d = dst.data.data() + od.row_base(i0, i1, i2);
        std::copy(s, s + od.dims[3], d);
      }
}

/// Copies all of src into dst at offset `off` (the inverse of copy_in).
template <class V>
void copy_out(const TensorData<V>& src, const std::array<int64_t, 4>& off, TensorData<V>& dst) {
  Operand os = Operand::of(src.shape), od = Operand::of(dst.shape);
  for (int64_t i0 = 0; i0 < os.dims[0]; ++i0)
    for (int64_t i1 = 0; i1 < os.dims[1]; ++i1)
      for (int64_t i2 = 0; i2 < os.dims[2]; ++i2) {
        const V* s = src.data.data() + os.row_base(i0, i1, i2);
        V* d = dst.data.data() + od.row_base(off[0] + i0, off[1] + i1, off[2] + i2) + off[3];
        std::copy(s, s + os.dims[3], d);
      }
}

/// Runs one compute op of a block graph (a thread graph, a running op with its state, or any
/// other compute op) into `out`.
template <class A>
void run_compute(const A& ar, const BlockOp& op, const Shape& shape,
                 const std::vector<const Tensor<A>*>& args, Tensor<A>& out, LoopState<A>& state,
                 const ValueHints& hint) {
  if (op.kind == OpKind::ThreadFused) {
    thread_graph_op(ar, op.chain, args, out, hint);
    return;
  }
  if (op_category(op.kind) == Category::Scan) {
    scan_update(ar, op.kind, *args[0], state, out, hint);
    return;
  }
  Tensor<A> r(shape);
  compute_op(ar, op.kind, op.attrs, args, r, Box::full(r.shape), hint, 1);
  out = std::move(r);
}

/// Runs the given blocks of a block graph and writes their tiles into `outs` (device tensors of
/// the customized op's output shapes).
template <class A>
void run_blocks(const A& ar, const BlockGraph& bg, const std::vector<const Tensor<A>*>& ins,
                std::vector<Tensor<A>>& outs, const std::vector<int64_t>& block_ids,
                const std::vector<ValueHints>* hints, int threads,
                const std::atomic<bool>* stop = nullptr) {
  std::vector<char> live = live_block_ops(bg);
  auto hint = [&](int t) -> const ValueHints& {
    return hints && !hints->empty() ? (*hints)[t] : default_hints();
  };
  Dim3 grid = bg.grid();
  int F = bg.forloop();
  const bool ragged = bg.ragged();
  parallel_for_chunks(
      static_cast<int64_t>(block_ids.size()), threads, 1, [&](int64_t lo, int64_t hi) {
        std::vector<Tensor<A>> val(bg.tensors().size());
        std::vector<LoopState<A>> state(bg.ops().size());
        std::vector<const Tensor<A>*> args;
        std::vector<Shape> arg_shapes;
        // The actual shape of a compute op's result: its operands' tiles may be shorter than
        // their nominal shapes in the last block or iteration of a ragged split.
        auto shape_of = [&](const BlockOp& op) {
          if (!ragged) return bg.tensor(op.output).shape;
          arg_shapes.clear();
          for (const Tensor<A>* a : args) arg_shapes.push_back(a->shape);
          return actual_shape(op, arg_shapes, bg.tensor(op.output).shape, F);
        };
        for (int64_t bi = lo; bi < hi; ++bi) {
          if (stop_requested(stop)) return;  // execute reports it after the op
          int64_t id = block_ids[bi];
          std::array<int, 3> b{static_cast<int>(id % grid.x),
                               static_cast<int>((id / grid.x) % grid.y),
                               static_cast<int>(id / (int64_t{grid.x} * grid.y))};
          // Accumulators and running ops start from their identity (in the first iteration,
          // with their result's actual shape); loop-invariant tiles (fmap φ) are cut once per
          // block.
          for (int it = 0; it < F; ++it) {
            for (size_t i = 0; i < bg.ops().size(); ++i) {
              const BlockOp& op = bg.op(static_cast<int>(i));
              if (!live[i] || op.kind == OpKind::Output) continue;
              Category cat = op_category(op.kind);
              if (op.kind == OpKind::Input) {
                if (it > 0 && op.attrs.fmap == kReplicate) continue;
                const Tensor<A>& src = *ins[op.attrs.input_index];
                auto [off, tile] = input_tile_box(bg, op.attrs, bg.tensor(op.output).shape, b, it);
                if (val[op.output].shape != tile) val[op.output] = Tensor<A>(tile);
                copy_in(src, off, val[op.output]);
                continue;
              }
              args.clear();
              for (int t : op.inputs) args.push_back(&val[t]);
              if (cat == Category::Accum || cat == Category::Scan) {
                if (it == 0) state[i] = loop_state_init(ar, op.kind, shape_of(op));
              }
              if (cat == Category::Accum) {
                accum_update(ar, op.kind, op.attrs, it, args, state[i], hint(op.output));
                continue;
              }
              if (bg.tensor(op.output).stage != Stage::Loop) continue;
              run_compute(ar, op, shape_of(op), args, val[op.output], state[i], hint(op.output));
            }
          }
          for (size_t i = 0; i < bg.ops().size(); ++i) {
            const BlockOp& op = bg.op(static_cast<int>(i));
            if (!live[i]) continue;
            Category cat = op_category(op.kind);
            if (cat == Category::Accum) {
              accum_finalize(ar, op.kind, op.attrs, state[i], hint(op.output));
              val[op.output] = std::move(state[i].acc);
            } else if (op.kind != OpKind::Input && op.kind != OpKind::Output &&
                       bg.tensor(op.output).stage == Stage::Post) {
              args.clear();
              for (int t : op.inputs) args.push_back(&val[t]);
              run_compute(ar, op, shape_of(op), args, val[op.output], state[i], hint(op.output));
            }
          }
          for (int o = 0; o < bg.num_outputs(); ++o) {
            const BlockOp& saver = bg.op(bg.output_op(o));
            const Tensor<A>& tile = val[saver.inputs[0]];
            std::array<int64_t, 4> off{0, 0, 0, 0};
            const Shape& nominal = bg.tensor(saver.inputs[0]).shape;
            int pad = 4 - tile.shape.rank();
            for (int g = 0; g < 3; ++g)
              if (grid[g] > 1)
                off[saver.attrs.omap[g] + pad] += int64_t{b[g]} * nominal[saver.attrs.omap[g]];
            copy_out(tile, off, outs[o]);
          }
        }
      });
}

}  // namespace detail

/// Runs kernel graph `g` on `inputs` (one per graph input, in order, with matching shapes —
/// checked) and returns its outputs in order.
template <class A>
Result<std::vector<Tensor<A>>> execute(const A& ar, const KernelGraph& g,
                                       const std::vector<const Tensor<A>*>& inputs,
                                       const ExecConfig& cfg) {
  STRATA_RETURN_IF_ERROR(g.check_complete());
  if (g.ranks() > 1)  // all_reduce below is the identity of one rank
    return make_error("the graph runs on " + std::to_string(g.ranks()) +
                      " ranks; evaluate its unsharded form (expand_ranks)");
  if (inputs.size() != g.inputs().size())
    return make_error("the graph has " + std::to_string(g.inputs().size()) + " input(s) but " +
                      std::to_string(inputs.size()) + " tensor(s) were given");
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Shape& want = g.tensor(g.inputs()[i]).shape;
    if (inputs[i]->shape != want)
      return make_error("input " + std::to_string(i) + " (" + g.tensor_name(g.inputs()[i]) +
                        ") has shape " + inputs[i]->shape.str() + " but the graph expects " +
                        want.str());
    if (inputs[i]->numel() != want.numel())
      return make_error("input " + std::to_string(i) + " (" + g.tensor_name(g.inputs()[i]) +
                        ") holds " + std::to_string(inputs[i]->numel()) + " values for shape " +
                        want.str());
  }
  const size_t nt = g.tensors().size(), nops = g.ops().size();
  auto khint = [&](int t) -> const ValueHints& {
    return cfg.hints && !cfg.hints->kernel.empty() ? cfg.hints->kernel[t] : detail::default_hints();
  };
  // Release each intermediate after its last reader.
  std::vector<int> last_use(nt, -1);
  for (size_t i = 0; i < nops; ++i)
    for (int t : g.op(static_cast<int>(i)).inputs) last_use[t] = static_cast<int>(i);
  for (int t : g.outputs()) last_use[t] = static_cast<int>(nops);

  std::vector<const Tensor<A>*> val(nt, nullptr);
  std::vector<std::unique_ptr<Tensor<A>>> owned(nt);
  for (size_t i = 0; i < inputs.size(); ++i) val[g.inputs()[i]] = inputs[i];
  for (size_t i = 0; i < nops; ++i) {
    const KernelOp& op = g.op(static_cast<int>(i));
    if (op.kind == OpKind::Input) continue;
    if (stop_requested(cfg.stop)) return make_error(kStoppedMessage);
    bool used = false;
    for (int t : op.outputs) used = used || last_use[t] >= 0;
    if (!used) continue;
    std::vector<const Tensor<A>*> args;
    for (int t : op.inputs) args.push_back(val[t]);
    if (op.kind == OpKind::Customized) {
      const BlockGraph& bg = *op.body;
      std::vector<Tensor<A>> outs;
      for (int t : op.outputs) outs.emplace_back(g.tensor(t).shape);
      std::vector<int64_t> ids;
      if (cfg.partial && !cfg.partial->blocks.empty() && cfg.partial->blocks[i]) {
        ids = *cfg.partial->blocks[i];
      } else {
        ids.resize(static_cast<size_t>(bg.grid().count()));
        for (size_t b = 0; b < ids.size(); ++b) ids[b] = static_cast<int64_t>(b);
      }
      const std::vector<ValueHints>* bh =
          cfg.hints && !cfg.hints->block.empty() ? &cfg.hints->block[i] : nullptr;
      detail::run_blocks(ar, bg, args, outs, ids, bh, cfg.threads, cfg.stop);
      for (size_t k = 0; k < op.outputs.size(); ++k) {
        owned[op.outputs[k]] = std::make_unique<Tensor<A>>(std::move(outs[k]));
        val[op.outputs[k]] = owned[op.outputs[k]].get();
      }
    } else {
      int t = op.outputs[0];
      auto out = std::make_unique<Tensor<A>>(g.tensor(t).shape);
      Region whole{Box::full(out->shape)};
      const Region& region = cfg.partial && !cfg.partial->regions.empty() && cfg.partial->regions[i]
                                 ? *cfg.partial->regions[i]
                                 : whole;
      for (const Box& box : region)
        compute_op(ar, op.kind, op.attrs, args, *out, box, khint(t), cfg.threads, cfg.stop);
      owned[t] = std::move(out);
      val[t] = owned[t].get();
    }
    for (int t : op.inputs)
      if (last_use[t] == static_cast<int>(i) && owned[t]) {
        owned[t].reset();
        val[t] = nullptr;
      }
  }
  if (stop_requested(cfg.stop)) return make_error(kStoppedMessage);  // a last op cut short
  std::vector<Tensor<A>> result;
  for (int t : g.outputs()) result.push_back(owned[t] ? std::move(*owned[t]) : *val[t]);
  return result;
}

}  // namespace strata::interp
