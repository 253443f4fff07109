#include "strata/layout.h"

#include <algorithm>
#include <numeric>

#include "strata/schedule.h"

namespace strata {
namespace {

int64_t last_extent(const Shape& s) {
  return s.rank() == 0 ? 1 : s[s.rank() - 1];
}

bool is_input_tile(const BlockGraph& g, int t) {
  return g.op(g.tensor(t).producer).kind == OpKind::Input;
}

DType input_tile_dtype(const KernelPlan& plan, int t) {
  const BlockGraph& g = *plan.graph;
  return plan.input_dtypes[g.op(g.tensor(t).producer).attrs.input_index];
}

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> d;
  for (int64_t i = 1; i <= n; ++i)
    if (n % i == 0) d.push_back(i);
  return d;
}

/// Warp tiling of a tensor-core matmul (see MmaTiling). `reg_budget` > 0 asks for a tiling
/// whose whole warp tile fits that many floats per thread in one batch (register
/// accumulation); returns false when none does.
bool choose_tiling(int64_t batch, int64_t m, int64_t n, int warps, int chunk_floats, int reg_budget,
                   MmaTiling& out) {
  const int64_t mtiles = (m + 15) / 16, rt = batch * mtiles, ct = n / 8;
  bool found = false;
  int64_t best_used = 0, best_cost = 0;
  for (int64_t wm : divisors(rt)) {
    if (wm > warps) break;
    for (int64_t wn : divisors(ct)) {
      if (wm * wn > warps) break;
      const int64_t mt = rt / wm, nt = ct / wn;
      int64_t cm = 0, cn = 0;
      if (reg_budget > 0) {
        if (mtiles % mt != 0 || mt * nt * 4 > reg_budget) continue;
        cm = mt;
        cn = nt;
      } else {
        const int64_t g = std::gcd(mt, mtiles);
        for (int64_t a : divisors(g))
          for (int64_t b : divisors(nt))
            if (a * b * 4 <= chunk_floats && (a * b > cm * cn || (a * b == cm * cn && b > cn))) {
              cm = a;
              cn = b;
            }
        if (cm == 0) continue;
      }
      const int64_t cost = (mt / cm) * (nt / cn) * (cm + (cn + 1) / 2);
      const int64_t used = wm * wn;
      if (!found || used > best_used || (used == best_used && cost < best_cost)) {
        found = true;
        best_used = used;
        best_cost = cost;
        out = {static_cast<int>(wm), static_cast<int>(wn), static_cast<int>(mt),
               static_cast<int>(nt), static_cast<int>(cm), static_cast<int>(cn)};
      }
    }
  }
  return found;
}

int64_t batch_count(const Shape& s) {
  int64_t b = 1;
  for (int d = 0; d + 2 < s.rank(); ++d) b *= s[d];
  return b;
}

}  // namespace

bool tensor_core_eligible(const KernelPlan& plan, int id) {
  const BlockGraph& g = *plan.graph;
  const BlockOp& op = g.op(id);
  if (op_category(op.kind) != Category::Matmul) return false;
  if (!plan.options.tensor_cores || !plan.has_mma_dtype) return false;
  const Shape& a = g.tensor(op.inputs[0]).shape;
  const Shape& b = g.tensor(op.inputs[1]).shape;
  if (a[a.rank() - 1] % 16 != 0 || b[b.rank() - 1] % 8 != 0) return false;
  for (int t : op.inputs) {
    if (is_input_tile(g, t) && input_tile_dtype(plan, t) != plan.mma_dtype) return false;
    // Accumulators stay f32: a post-loop matmul on them runs on the SIMT path.
    if (op_category(g.op(g.tensor(t).producer).kind) == Category::Accum) return false;
  }
  return true;
}

namespace {

/// Whether every fragment-fed accumulator gets a register tiling with `warps` warps.
bool register_accumulators_fit(const KernelPlan& plan, int warps) {
  const BlockGraph& g = *plan.graph;
  int budget = plan.options.register_accum_floats;
  for (int i = 0; i < static_cast<int>(g.ops().size()); ++i) {
    const OpPlan& p = plan.ops[i];
    if (p.accumulate_into < 0 || !tensor_core_eligible(plan, i)) continue;
    const Shape& out = g.tensor(g.op(i).output).shape;
    MmaTiling t;
    if (!choose_tiling(batch_count(out), out[out.rank() - 2], out[out.rank() - 1], warps,
                       plan.options.mma_chunk_floats, budget, t))
      return false;
    budget -= t.mt * t.nt * 4;
  }
  return true;
}

/// Threads per block: PlanOptions::threads when set; else the block graph's, raised (up to 512)
/// until every fragment-fed accumulator fits in registers for kernels with tensor-core
/// matmuls, or until no tile has more than 8 elements per thread for the others.
int choose_threads(const KernelPlan& plan) {
  const BlockGraph& g = *plan.graph;
  if (plan.options.threads > 0) return plan.options.threads;
  int threads = g.block_threads();
  bool tensor_cores = false;
  for (int i = 0; i < static_cast<int>(g.ops().size()); ++i)
    tensor_cores = tensor_cores || tensor_core_eligible(plan, i);
  if (tensor_cores) {
    for (int t = threads; t <= 512; t *= 2)
      if (register_accumulators_fit(plan, t / 32)) return t;
    return threads;
  }
  int64_t largest = 0;
  for (const BlockTensor& t : g.tensors()) largest = std::max(largest, t.shape.numel());
  while (threads < 512 && largest > int64_t{threads} * 8) threads *= 2;
  return threads;
}

}  // namespace

Result<KernelPlan> choose_layouts(KernelPlan plan) {
  const BlockGraph& g = *plan.graph;
  const int nops = static_cast<int>(g.ops().size());
  const int ntensors = static_cast<int>(g.tensors().size());
  plan.threads = choose_threads(plan);
  const int warps = plan.threads / 32;
  std::vector<bool> ldmatrix_read(ntensors, false), fragment_written(ntensors, false);

  // Storage types: input tiles keep the device type; computed tiles are f32 unless a tensor
  // core reads them.
  for (int t = 0; t < ntensors; ++t) {
    plan.tensors[t] = TensorPlan{};
    plan.tensors[t].dtype = is_input_tile(g, t) ? input_tile_dtype(plan, t) : DType::f32;
    if (plan.ops[g.tensor(t).producer].inline_into >= 0) plan.tensors[t].home = TensorHome::Inline;
  }
  // Matmul paths, fused results, fragment writers.
  int reg_budget = plan.options.register_accum_floats;
  for (int i = 0; i < nops; ++i) {
    const BlockOp& op = g.op(i);
    OpPlan& p = plan.ops[i];
    if (op_category(op.kind) != Category::Matmul) {
      p.matmul = MatmulPath::None;
      continue;
    }
    const Shape& out = g.tensor(op.output).shape;
    const int64_t bt = batch_count(out), m = out[out.rank() - 2], n = out[out.rank() - 1];
    p.matmul = tensor_core_eligible(plan, i) ? MatmulPath::TensorCore : MatmulPath::Simt;
    if (p.epilogue >= 0 || p.accumulate_into >= 0) plan.tensors[op.output].home = TensorHome::Fused;
    if (p.matmul != MatmulPath::TensorCore) continue;
    for (int t : op.inputs) {
      ldmatrix_read[t] = true;
      if (!is_input_tile(g, t)) plan.tensors[t].dtype = plan.mma_dtype;
    }
    bool in_registers = false;
    if (p.accumulate_into >= 0 && reg_budget > 0) {
      in_registers =
          choose_tiling(bt, m, n, warps, plan.options.mma_chunk_floats, reg_budget, p.tiling);
      if (in_registers) reg_budget -= p.tiling.mt * p.tiling.nt * 4;
    }
    if (!in_registers &&
        !choose_tiling(bt, m, n, warps, plan.options.mma_chunk_floats, 0, p.tiling))
      p.matmul = MatmulPath::Simt;
    if (p.matmul != MatmulPath::TensorCore) continue;
    int dest = p.accumulate_into >= 0 ? g.op(p.accumulate_into).output
               : p.epilogue >= 0      ? g.op(p.epilogue).output
                                      : op.output;
    fragment_written[dest] = true;
    if (in_registers) plan.tensors[dest].home = TensorHome::Registers;
  }
  std::vector<bool> is_host(ntensors, false);
  // A one-iteration accumulator is its input: store it in place.
  if (g.forloop() == 1) {
    for (int i = 0; i < nops; ++i) {
      const BlockOp& op = g.op(i);
      if (op.kind != OpKind::AccumSum) continue;
      const int x = op.inputs[0];
      TensorPlan& ap = plan.tensors[op.output];
      if (ap.home != TensorHome::Shared || plan.tensors[x].home != TensorHome::Shared) continue;
      ap.home = TensorHome::View;
      ap.view_of = x;
      ap.view_dim = 0;
      ap.view_offset = 0;
      ap.dtype = plan.tensors[x].dtype;
      is_host[x] = true;
    }
  }
  // Concat operands stored in place inside the concat result.
  if (plan.options.concat_views) {
    for (int i = 0; i < nops; ++i) {
      const BlockOp& op = g.op(i);
      if (op.kind != OpKind::Concat || op.inputs[0] == op.inputs[1]) continue;
      const int c = op.output, dim = op.attrs.dim;
      const Shape& cs = g.tensor(c).shape;
      if (plan.tensors[c].home != TensorHome::Shared) continue;
      int64_t offset = 0;
      for (int k = 0; k < 2; ++k) {
        const int x = op.inputs[k];
        TensorPlan& xp = plan.tensors[x];
        const int64_t at = offset;
        offset += g.tensor(x).shape[dim];
        if (xp.home != TensorHome::Shared || is_host[x]) continue;
        const OpPlan& src = plan.ops[g.tensor(x).producer];
        if (is_input_tile(g, x) && src.phase == Phase::Loop && g.forloop() > 1) continue;
        // Tensor-core operands address batches with one flat stride: no views across them.
        if ((ldmatrix_read[c] || ldmatrix_read[x]) && dim < cs.rank() - 2) continue;
        if (xp.dtype != plan.tensors[c].dtype) {
          if (is_input_tile(g, x) || ldmatrix_read[x]) continue;
          if (op_category(g.op(g.tensor(x).producer).kind) == Category::Accum) continue;
          xp.dtype = plan.tensors[c].dtype;
        }
        // 16-byte alignment of rows inside the host for vector copies and ldmatrix.
        const int esize = dtype_size(xp.dtype);
        if (dim == cs.rank() - 1 && (at * esize) % 16 != 0) continue;
        xp.home = TensorHome::View;
        xp.view_of = c;
        xp.view_dim = dim;
        xp.view_offset = at;
        is_host[c] = true;
        if (ldmatrix_read[x]) ldmatrix_read[c] = true;
        if (fragment_written[x]) fragment_written[c] = true;
      }
    }
  }
  // Layouts.
  for (int t = 0; t < ntensors; ++t) {
    TensorPlan& tp = plan.tensors[t];
    if (tp.home == TensorHome::Fused || tp.home == TensorHome::View ||
        tp.home == TensorHome::Inline)
      continue;
    const Shape& s = g.tensor(t).shape;
    const int64_t last = last_extent(s), rows = s.numel() / last;
    const int esize = dtype_size(tp.dtype);
    tp.layout.ld = last;
    tp.layout.swizzle = false;
    if (s.rank() >= 2 && esize == 2 && (ldmatrix_read[t] || fragment_written[t]) && last % 8 == 0) {
      const int64_t chunks = last / 8;
      bool swizzle_ok = chunks % 8 == 0;
      if (swizzle_ok && is_host[t]) {
        for (int v = 0; v < ntensors; ++v) {
          const TensorPlan& vp = plan.tensors[v];
          if (vp.home != TensorHome::View || vp.view_of != t) continue;
          if (vp.view_dim == s.rank() - 1 && vp.view_offset % 64 != 0) swizzle_ok = false;
          if (vp.view_dim == s.rank() - 2 && vp.view_offset % 8 != 0) swizzle_ok = false;
        }
      }
      if (swizzle_ok)
        tp.layout.swizzle = true;
      else if (chunks % 2 == 0)
        tp.layout.ld = last + 8;
    } else if (s.rank() >= 2 && esize == 4 && fragment_written[t] && last % 16 == 0) {
      tp.layout.ld = last + 8;
    }
    const int64_t per_align = kSmemAlign / esize;
    tp.layout.stage_elems = (rows * tp.layout.ld + per_align - 1) / per_align * per_align;
  }
  // Pipeline depth of per-iteration input tiles.
  int64_t per_iteration = 0;
  for (int i = 0; i < nops; ++i)
    if (g.op(i).kind == OpKind::Input && plan.ops[i].phase == Phase::Loop) {
      const TensorPlan& tp = plan.tensors[g.op(i).output];
      if (tp.home == TensorHome::Shared)
        per_iteration += tp.layout.stage_elems * dtype_size(tp.dtype);
    }
  int stages = 1;
  if (g.forloop() > 1 && per_iteration > 0) {
    if (plan.options.forced_stages > 0) {
      stages = plan.options.forced_stages;
    } else {
      stages =
          static_cast<int>((plan.options.bytes_in_flight + per_iteration - 1) / per_iteration) + 1;
      stages = std::clamp(stages, 2, std::max(2, plan.options.max_stages));
    }
    stages = std::min(stages, g.forloop());
  }
  plan.pipeline_stages = stages;
  for (int i = 0; i < nops; ++i)
    if (g.op(i).kind == OpKind::Input && plan.ops[i].phase == Phase::Loop)
      plan.tensors[g.op(i).output].stages = stages;
  for (int t = 0; t < ntensors; ++t) {
    TensorPlan& tp = plan.tensors[t];
    if (tp.home == TensorHome::Shared || tp.home == TensorHome::Registers)
      tp.bytes = tp.layout.stage_elems * dtype_size(tp.dtype) * tp.stages;
  }
  // Scratch for block-wide reductions.
  plan.scratch_bytes = 0;
  for (int i = 0; i < nops; ++i) {
    const BlockOp& op = g.op(i);
    if (!is_reduction(op)) continue;
    ReductionShape r = reduction_shape(op, g.tensor(op.inputs[0]).shape);
    if (reduction_team(r.group(), r.outputs(), plan.threads) == 0) plan.scratch_bytes = warps * 4;
  }
  // Ops whose result is already in place cost no level: schedule again.
  for (int i = 0; i < nops; ++i) {
    const BlockOp& op = g.op(i);
    bool in_place = false;
    if (op.kind == OpKind::Concat) {
      in_place = true;
      for (int x : op.inputs)
        in_place = in_place && plan.tensors[x].home == TensorHome::View &&
                   plan.tensors[x].view_of == op.output;
    } else if (op_category(op.kind) == Category::Accum) {
      in_place = plan.tensors[op.output].home == TensorHome::View;
    }
    plan.ops[i].in_place = in_place;
  }
  return schedule_block_ops(std::move(plan));
}

}  // namespace strata
