#include "strata/opt/plan_invariants.h"

#include <algorithm>
#include <string>

#include "strata/opt/register_fusion.h"

namespace strata {
namespace {

std::string op_str(const BlockGraph& g, int i) {
  return "op #" + std::to_string(i) + " (" + std::string(op_name(g.op(i).kind)) + ")";
}

std::string tensor_str(const BlockGraph& g, int t) {
  return "tensor " + g.tensor_name(t) + " (#" + std::to_string(t) + ")";
}

bool stored(TensorHome h) {
  return h == TensorHome::Shared || h == TensorHome::Registers || h == TensorHome::Scale;
}

Status check_shapes(const KernelPlan& plan) {
  const BlockGraph& g = *plan.graph;
  if (plan.ops.size() != g.ops().size())
    return make_error(std::to_string(plan.ops.size()) + " op plans for " +
                      std::to_string(g.ops().size()) + " ops");
  if (plan.tensors.size() != g.tensors().size())
    return make_error(std::to_string(plan.tensors.size()) + " tensor plans for " +
                      std::to_string(g.tensors().size()) + " tensors");
  if (static_cast<int>(plan.input_dtypes.size()) != g.num_inputs() ||
      static_cast<int>(plan.output_dtypes.size()) != g.num_outputs())
    return make_error("one dtype per kernel input and output expected");
  return Status::success();
}

Status check_references(const KernelPlan& plan) {
  const BlockGraph& g = *plan.graph;
  const int n = static_cast<int>(g.ops().size()), nt = static_cast<int>(g.tensors().size());
  auto in_range = [&](int v) { return v >= -1 && v < n; };
  for (int i = 0; i < n; ++i) {
    const OpPlan& p = plan.ops[i];
    for (int v : {p.epilogue, p.host, p.accumulate_into, p.inline_into, p.chain_into, p.chain_from,
                  p.rowsum_of, p.scan_of, p.fold_into, p.scale_a, p.scale_b})
      if (!in_range(v)) return make_error(op_str(g, i) + ": an op reference out of range");
    if (p.epilogue >= 0 && plan.ops[p.epilogue].host != i)
      return make_error(op_str(g, i) + ": epilogue op #" + std::to_string(p.epilogue) +
                        " does not name it as its host");
    if (p.chain_into >= 0 && plan.ops[p.chain_into].chain_from != i)
      return make_error(op_str(g, i) + ": chained into op #" + std::to_string(p.chain_into) +
                        ", which does not take its A from it");
    if (p.matmul != MatmulPath::None && op_category(g.op(i).kind) != Category::Matmul)
      return make_error(op_str(g, i) + ": a matmul path on an op that is no matmul");
  }
  for (int t = 0; t < nt; ++t) {
    const TensorPlan& tp = plan.tensors[t];
    if (tp.home != TensorHome::View && tp.home != TensorHome::Alias) continue;
    if (tp.view_of < 0 || tp.view_of >= nt || tp.view_of == t)
      return make_error(tensor_str(g, t) + ": view of tensor #" + std::to_string(tp.view_of) +
                        " (out of range)");
    if (tp.home == TensorHome::View && !stored(plan.tensors[tp.view_of].home))
      return make_error(tensor_str(g, t) + ": stored inside " + tensor_str(g, tp.view_of) +
                        ", which has no storage");
  }
  return Status::success();
}

/// Ops that run together with `producer` in registers, or inside their reader, may share the
/// reader's level.
bool same_level_allowed(const KernelPlan& plan, int producer, int reader) {
  const OpPlan& p = plan.ops[producer];
  const OpPlan& r = plan.ops[reader];
  return p.inline_into >= 0 || p.in_place || p.epilogue == reader || r.host == producer ||
         p.host >= 0 || p.accumulate_into == reader || p.chain_into == reader ||
         r.chain_from == producer || r.rowsum_of == producer || r.scan_of == producer ||
         p.scan_of >= 0 ||  // a chain's running maxima, read from registers inside the chain
         r.host >= 0 || r.in_place || r.inline_into >= 0 ||
         std::find(p.chain_ops.begin(), p.chain_ops.end(), reader) != p.chain_ops.end() ||
         std::find(r.chain_ops.begin(), r.chain_ops.end(), producer) != r.chain_ops.end() ||
         plan.tensors[plan.graph->op(producer).output].home == TensorHome::Alias;
}

Status check_levels(const KernelPlan& plan) {
  const BlockGraph& g = *plan.graph;
  const int n = static_cast<int>(g.ops().size());
  int listed_total = 0;
  for (const auto& lv : plan.levels)
    for (const auto& ops : lv) listed_total += static_cast<int>(ops.size());
  if (listed_total == 0) return Status::success();  // not scheduled yet
  std::vector<int> listed(n, 0);
  for (int ph = 0; ph < 3; ++ph)
    for (int l = 0; l < static_cast<int>(plan.levels[ph].size()); ++l)
      for (int i : plan.levels[ph][l]) {
        if (i < 0 || i >= n) return make_error("level lists name op #" + std::to_string(i));
        if (static_cast<int>(plan.ops[i].phase) != ph || plan.ops[i].level != l)
          return make_error(op_str(g, i) + " listed at phase " + std::to_string(ph) + " level " +
                            std::to_string(l) + " but planned at phase " +
                            std::to_string(static_cast<int>(plan.ops[i].phase)) + " level " +
                            std::to_string(plan.ops[i].level));
        ++listed[i];
      }
  for (int i = 0; i < n; ++i)
    if (listed[i] != 1)
      return make_error(op_str(g, i) + " listed " + std::to_string(listed[i]) +
                        " times in the levels");
  for (int i = 0; i < n; ++i) {
    const OpPlan& r = plan.ops[i];
    if (r.level == 0) continue;
    for (int t : g.op(i).inputs) {
      const int pr = g.tensor(t).producer;
      const OpPlan& p = plan.ops[pr];
      if (p.phase > r.phase)
        return make_error(op_str(g, i) + " reads " + tensor_str(g, t) + " from a later phase");
      if (p.phase != r.phase || p.level < r.level) continue;
      if (p.level == r.level && same_level_allowed(plan, pr, i)) continue;
      return make_error(op_str(g, i) + " at level " + std::to_string(r.level) + " reads " +
                        tensor_str(g, t) + " produced at level " + std::to_string(p.level) +
                        " of the same phase (no barrier between them)");
    }
  }
  return Status::success();
}

Status check_threads(const KernelPlan& plan) {
  if (plan.group_threads == 0) return Status::success();  // not laid out yet
  if (plan.threads % 32 != 0 || plan.group_threads % 32 != 0 || plan.groups < 1 ||
      plan.groups * plan.group_threads != plan.threads)
    return make_error("threads " + std::to_string(plan.threads) + " are not " +
                      std::to_string(plan.groups) + " loop group(s) of " +
                      std::to_string(plan.group_threads) + " whole warps");
  if (plan.pipeline_stages < 1) return make_error("pipeline stages below 1");
  const BlockGraph& g = *plan.graph;
  if (plan.rowwise) {
    if (plan.rowwise_layout.threads != plan.threads)
      return make_error("rowwise layout of " + std::to_string(plan.rowwise_layout.threads) +
                        " threads in a block of " + std::to_string(plan.threads));
    return Status::success();
  }
  for (int i = 0; i < static_cast<int>(g.ops().size()); ++i) {
    const BlockOp& op = g.op(i);
    if (op.kind != OpKind::Input || plan.ops[i].phase != Phase::Loop) continue;
    const TensorPlan& tp = plan.tensors[op.output];
    if (tp.home == TensorHome::Shared && tp.stages != plan.pipeline_stages)
      return make_error(tensor_str(g, op.output) + ": " + std::to_string(tp.stages) +
                        " stages in a pipeline of " + std::to_string(plan.pipeline_stages));
  }
  return Status::success();
}

Status check_memory(const KernelPlan& plan) {
  if (plan.smem_bytes == 0) return Status::success();  // not planned yet
  const BlockGraph& g = *plan.graph;
  const int nt = static_cast<int>(g.tensors().size());
  if (plan.smem_bytes > plan.options.smem_limit)
    return make_error("shared memory " + std::to_string(plan.smem_bytes) +
                      " bytes above the limit " + std::to_string(plan.options.smem_limit));
  auto range_ok = [&](int64_t off, int64_t bytes) {
    return off >= 0 && off % kSmemAlign == 0 && off + bytes <= plan.smem_bytes;
  };
  if (plan.scratch_bytes > 0 && !range_ok(plan.scratch_offset, plan.scratch_bytes))
    return make_error("reduction scratch @" + std::to_string(plan.scratch_offset) + "+" +
                      std::to_string(plan.scratch_bytes) + " outside " +
                      std::to_string(plan.smem_bytes) + " aligned bytes");
  std::vector<int> placed;
  for (int t = 0; t < nt; ++t) {
    const TensorPlan& tp = plan.tensors[t];
    if (!stored(tp.home) || tp.offset < 0) continue;
    if (!range_ok(tp.offset, tp.bytes))
      return make_error(tensor_str(g, t) + " @" + std::to_string(tp.offset) + "+" +
                        std::to_string(tp.bytes) + " is not kSmemAlign-aligned inside " +
                        std::to_string(plan.smem_bytes) + " bytes");
    if (tp.stages > 1 && (tp.layout.stage_elems * dtype_size(tp.dtype)) % kSmemAlign != 0)
      return make_error(tensor_str(g, t) + ": a stage of " + std::to_string(tp.layout.stage_elems) +
                        " elements is not kSmemAlign-aligned");
    placed.push_back(t);
  }
  for (size_t a = 0; a < placed.size(); ++a)
    for (size_t b = a + 1; b < placed.size(); ++b) {
      const TensorPlan& x = plan.tensors[placed[a]];
      const TensorPlan& y = plan.tensors[placed[b]];
      const bool live = x.live_begin <= y.live_end && y.live_begin <= x.live_end;
      const bool overlap = x.offset < y.offset + y.bytes && y.offset < x.offset + x.bytes;
      if (live && overlap && x.bytes > 0 && y.bytes > 0)
        return make_error(tensor_str(g, placed[a]) + " and " + tensor_str(g, placed[b]) +
                          " are live at the same time and overlap in shared memory");
    }
  return Status::success();
}

Status check_emission(const KernelPlan& plan) {
  const EmissionPlan& e = plan.emission;
  if (!e.decided) return Status::success();
  const BlockGraph& g = *plan.graph;
  const FinalizePlan& f = e.finalize;
  if (f.step_two.size() != g.ops().size())
    return make_error("finalize steps for " + std::to_string(f.step_two.size()) + " of " +
                      std::to_string(g.ops().size()) + " ops");
  for (size_t i = 0; i < f.step_two.size(); ++i)
    if (f.step_two[i] != StepTwo::Nothing &&
        op_category(g.op(static_cast<int>(i)).kind) != Category::Accum)
      return make_error(op_str(g, static_cast<int>(i)) +
                        ": a finalize step on an op that is no "
                        "accumulator");
  if (e.min_blocks_per_sm < 0) return make_error("negative minimum blocks per SM");
  const int cap =
      std::min(255, 65536 / (std::max(1, plan.threads) * std::max(1, e.min_blocks_per_sm)));
  if (e.register_cap != cap)
    return make_error("register cap " + std::to_string(e.register_cap) + ", but launch bounds (" +
                      std::to_string(plan.threads) + ", " + std::to_string(e.min_blocks_per_sm) +
                      ") leave " + std::to_string(cap));
  if (e.early_refill && (plan.groups < 2 || plan.pipeline_stages < 2))
    return make_error("early refill without loop groups and two stages");
  if (!plan.rowwise) {
    const int levels = plan.num_levels(Phase::Post);
    const int post = 1 + (f.two_steps ? 1 : 0) +
                     (levels > 1 && f.barrier_before_level_one ? 1 : 0) + std::max(0, levels - 2);
    if (plan.barriers_post != post)
      return make_error("post-loop barriers " + std::to_string(plan.barriers_post) +
                        ", but the finalize decisions give " + std::to_string(post));
  }
  return Status::success();
}

/// Whether matmul op i runs on tensor cores with its contraction padded past K.
bool padded_contraction(const KernelPlan& plan, int i) {
  const BlockGraph& g = *plan.graph;
  const OpPlan& p = plan.ops[i];
  if (p.matmul != MatmulPath::TensorCore) return false;
  const Shape& a = g.tensor(g.op(i).inputs[0]).shape;
  return p.mma_k > a[a.rank() - 1];
}

/// Padding to the mma step (OpPlan::mma_n / mma_k): the mma extents are N and K rounded up to
/// 8 and 16 on the tensor-core path (0 elsewhere); a padded matmul is in no chain, has no
/// folded column scale over a padded N, zeroes both operands (a chained A aside) past K, and
/// every operand's storage covers the padded extents; a padded N's destination tile has a row
/// stride of the padded N.
Status check_mma_padding(const KernelPlan& plan) {
  const BlockGraph& g = *plan.graph;
  for (int i = 0; i < static_cast<int>(g.ops().size()); ++i) {
    const OpPlan& p = plan.ops[i];
    const BlockOp& op = g.op(i);
    if (p.matmul != MatmulPath::TensorCore) {
      if (p.mma_n != 0 || p.mma_k != 0)
        return make_error(op_str(g, i) + ": mma extents off the tensor-core path");
      continue;
    }
    const Shape& a = g.tensor(op.inputs[0]).shape;
    const Shape& b = g.tensor(op.inputs[1]).shape;
    const int64_t k = a[a.rank() - 1], n = b[b.rank() - 1];
    if (p.mma_k != (k + 15) / 16 * 16 || p.mma_n != (n + 7) / 8 * 8)
      return make_error(op_str(g, i) + ": mma extents n " + std::to_string(p.mma_n) + " k " +
                        std::to_string(p.mma_k) + " are not N " + std::to_string(n) + " and K " +
                        std::to_string(k) + " rounded up to 8 and 16");
    if (p.mma_n == n && p.mma_k == k) continue;
    const std::string what =
        op_str(g, i) + " padded to n " + std::to_string(p.mma_n) + " k " + std::to_string(p.mma_k);
    if (p.chain_into >= 0 || p.chain_from >= 0) return make_error(what + ": in a matmul chain");
    if (p.mma_n > n && p.scale_b >= 0) return make_error(what + ": with a folded column scale");
    const unsigned zero = p.chain_from >= 0 ? 2u : 3u;
    if (p.mma_k > k && (p.ragged_zero_operands & zero) != zero && plan.emission.decided)
      return make_error(what + ": operands not zeroed past K");
    if (plan.group_threads == 0) continue;  // not laid out yet
    for (int o = 0; o < 2; ++o) {
      const int t = matmul_operand(plan, i, o);
      const int root = alias_root(plan, t);
      const TensorPlan& rp = plan.tensors[root];
      if (!stored(rp.home)) return make_error(what + ": operand " + tensor_str(g, t) + " unstored");
      int64_t rows = o == 0 ? 0 : p.mma_k, cols = o == 0 ? p.mma_k : p.mma_n;
      if (alias_map(plan, t).transposed) std::swap(rows, cols);
      const Shape s = stored_shape(plan, root);
      if (rp.layout.row_elems() < cols || s[s.rank() - 2] + rp.layout.pad_rows < rows)
        return make_error(what + ": the storage of " + tensor_str(g, root) + " (" +
                          std::to_string(s[s.rank() - 2]) + " + " +
                          std::to_string(rp.layout.pad_rows) + " rows of " +
                          std::to_string(rp.layout.row_elems()) +
                          ") does not cover the padded extents");
    }
    const int dest = p.accumulate_into >= 0 ? g.op(p.accumulate_into).output
                     : p.epilogue >= 0      ? g.op(p.epilogue).output
                                            : op.output;
    const TensorPlan& dp = plan.tensors[dest];
    if (p.mma_n > n && stored(dp.home) && dp.layout.row_elems() < p.mma_n)
      return make_error(what + ": destination " + tensor_str(g, dest) + " with row stride " +
                        std::to_string(dp.layout.ld));
  }
  return Status::success();
}

/// Tiles whose rows are split into atoms (TileLayout::atoms): 128-byte swizzled rows of a 16-bit
/// type in a tile of its own, 1024-byte aligned with whole 8-row groups per atom, every
/// tensor-core read of it a wgmma B read (mma.sync's ldmatrix readers address rows with one
/// stride), hosting no view.
Status check_atoms(const KernelPlan& plan) {
  const BlockGraph& g = *plan.graph;
  const int nt = static_cast<int>(g.tensors().size());
  for (int t = 0; t < nt; ++t) {
    const TensorPlan& tp = plan.tensors[t];
    if (tp.layout.atoms == 1) continue;
    const std::string what = tensor_str(g, t) + " in " + std::to_string(tp.layout.atoms) + " atoms";
    if (tp.layout.atoms < 1) return make_error(what + ": fewer than one");
    const Shape s = stored_shape(plan, t);
    if (tp.home != TensorHome::Shared || dtype_size(tp.dtype) != 2 || !tp.layout.swizzle ||
        tp.layout.ld != 64 || tp.layout.align != 1024 || s.rank() < 2 ||
        (s[s.rank() - 2] + tp.layout.pad_rows) % 8 != 0)
      return make_error(what +
                        ": not a 1024-byte aligned shared tile of 128-byte swizzled rows "
                        "with whole 8-row groups");
    for (int v = 0; v < nt; ++v)
      if (plan.tensors[v].home == TensorHome::View && plan.tensors[v].view_of == t)
        return make_error(what + ": hosts a view");
  }
  for (int i = 0; i < static_cast<int>(g.ops().size()); ++i) {
    const OpPlan& p = plan.ops[i];
    if (p.matmul != MatmulPath::TensorCore) continue;
    for (int o = 0; o < 2; ++o) {
      const int root = alias_root(plan, matmul_operand(plan, i, o));
      if (plan.tensors[root].layout.atoms == 1 || (o == 1 && p.wgmma)) continue;
      if (o == 0 && p.chain_from >= 0) continue;  // A from registers
      return make_error(op_str(g, i) + " reads " + tensor_str(g, root) +
                        ", a tile in atoms, other than as a wgmma B operand");
    }
  }
  return Status::success();
}

Status check_ragged(const KernelPlan& plan) {
  const BlockGraph& g = *plan.graph;
  const RaggedTiles& r = plan.ragged;
  const int n = static_cast<int>(g.ops().size()), ne = static_cast<int>(r.extents.size());
  if (!r.any()) {
    for (int i = 0; i < n; ++i) {
      const OpPlan& p = plan.ops[i];
      if (p.ragged_extent >= 0 || p.ragged_mask != 0 ||
          (p.ragged_zero_operands != 0 && !padded_contraction(plan, i)))
        return make_error(op_str(g, i) +
                          ": ragged-tile decisions in a kernel without ragged tiles");
    }
    return Status::success();
  }
  if (r.dims.size() != g.tensors().size())
    return make_error("ragged dims for " + std::to_string(r.dims.size()) + " of " +
                      std::to_string(g.tensors().size()) + " tensors");
  for (int t = 0; t < static_cast<int>(g.tensors().size()); ++t)
    for (int d = 0; d < kMaxRank; ++d) {
      const int e = r.dims[t][d];
      if (e < -1 || e >= ne || (e >= 0 && d >= g.tensor(t).shape.rank()))
        return make_error(tensor_str(g, t) + ": dim " + std::to_string(d) +
                          " names ragged extent " + std::to_string(e) + " (" + std::to_string(ne) +
                          " extents)");
    }
  for (int e = 0; e < ne; ++e) {
    const RaggedExtent& x = r.extents[e];
    const std::string what = "ragged extent " + std::to_string(e);
    if (x.tile <= 0 || x.extent <= 0 || x.block_tile <= 0 || x.axis < -1 || x.axis > 2)
      return make_error(what + ": a non-positive extent or tile, or no grid axis");
    if (x.axis >= 0) {
      const int64_t parts = g.grid()[x.axis];
      if (x.extent % parts == 0 || x.block_tile != (x.extent + parts - 1) / parts)
        return make_error(what + ": " + std::to_string(x.extent) + " over " +
                          std::to_string(parts) + " blocks is not split raggedly in parts of " +
                          std::to_string(x.block_tile));
    } else if (!x.loop || x.block_tile != x.extent) {
      return make_error(what + ": ragged neither across blocks nor per iteration");
    }
    // A block's part is the tile (no loop split) or covered by the iterations.
    if (x.loop ? x.tile * g.forloop() < x.block_tile : x.tile != x.block_tile)
      return make_error(what + ": tiles of " + std::to_string(x.tile) + " do not cover parts of " +
                        std::to_string(x.block_tile));
  }
  // Ragged tiles are masked on the general path only (docs/codegen.md, "Ragged tiles").
  if (plan.rowwise || plan.groups > 1)
    return make_error("a kernel with ragged tiles planned as a rowwise kernel or with loop groups");
  for (int i = 0; i < n; ++i) {
    const OpPlan& p = plan.ops[i];
    const BlockOp& op = g.op(i);
    const Category cat = op_category(op.kind);
    const bool matmul = cat == Category::Matmul;
    // (A matmul chain may be: chain_matmuls masks a ragged key loop, ragged_chain_supported.)
    if (p.register_accum)
      return make_error(op_str(g, i) + ": a register accumulator in a kernel with ragged tiles");
    if (p.ragged_extent < -1 || p.ragged_extent >= ne ||
        (p.ragged_extent >= 0 && !matmul && !is_reduction(op)))
      return make_error(op_str(g, i) + ": ragged extent " + std::to_string(p.ragged_extent) +
                        " on an op that combines no elements, or out of range");
    const bool loop_state =
        cat == Category::Accum || cat == Category::Scan || (matmul && p.accumulate_into >= 0);
    if (p.ragged_mask != 0 && (!loop_state || (p.ragged_mask >> kMaxRank) != 0))
      return make_error(op_str(g, i) + ": masks absent positions but adds into no loop state");
    if (p.ragged_zero_operands != 0 &&
        (!matmul || (p.ragged_extent < 0 && !padded_contraction(plan, i)) ||
         (p.ragged_zero_operands & ~3u) != 0))
      return make_error(op_str(g, i) + ": zeroes operand fragments without a ragged contraction");
  }
  return Status::success();
}

}  // namespace

Status verify_plan(const KernelPlan& plan) {
  STRATA_RETURN_IF_ERROR(check_shapes(plan));
  STRATA_RETURN_IF_ERROR(check_references(plan));
  STRATA_RETURN_IF_ERROR(check_levels(plan));
  STRATA_RETURN_IF_ERROR(check_threads(plan));
  STRATA_RETURN_IF_ERROR(check_memory(plan));
  STRATA_RETURN_IF_ERROR(check_emission(plan));
  STRATA_RETURN_IF_ERROR(check_ragged(plan));
  STRATA_RETURN_IF_ERROR(check_mma_padding(plan));
  STRATA_RETURN_IF_ERROR(check_atoms(plan));
  return Status::success();
}

}  // namespace strata
