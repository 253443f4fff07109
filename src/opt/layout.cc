#include "strata/opt/layout.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "strata/opt/loop_groups.h"
#include "strata/opt/register_fusion.h"
#include "strata/opt/rowwise.h"
#include "strata/opt/schedule.h"
#include "strata/opt/wgmma_plan.h"

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

/// The divisors of n in increasing order, those up to `limit` (all by default). Trial division
/// up to √n, so that extents up to 2^48 (shape.h) cost at most 2^24 steps, not one per unit.
std::vector<int64_t> divisors(int64_t n, int64_t limit = std::numeric_limits<int64_t>::max()) {
  std::vector<int64_t> small, large;
  for (int64_t i = 1; i <= n / i && i <= limit; ++i) {
    if (n % i != 0) continue;
    small.push_back(i);
    if (n / i != i && n / i <= limit) large.push_back(n / i);
  }
  small.insert(small.end(), large.rbegin(), large.rend());
  return small;
}

/// Warp tiling of a tensor-core matmul (see MmaTiling). `reg_budget` > 0 asks for a tiling
/// whose whole warp tile fits that many floats per thread in one batch (register
/// accumulation); returns false when none does.
bool choose_tiling(int64_t batch, int64_t m, int64_t n, int warps, int chunk_floats, int reg_budget,
                   MmaTiling& out) {
  const int64_t mtiles = (m + 15) / 16, rt = batch * mtiles, ct = n / 8;
  bool found = false;
  int64_t best_used = 0, best_cost = 0;
  for (int64_t wm : divisors(rt, warps)) {
    if (wm > warps) break;
    for (int64_t wn : divisors(ct, warps / wm)) {
      if (wm * wn > warps) break;
      const int64_t mt = rt / wm, nt = ct / wn;
      int64_t cm = 0, cn = 0;
      if (reg_budget > 0) {
        if (mtiles % mt != 0 || mt * nt * 4 > reg_budget) continue;
        cm = mt;
        cn = nt;
      } else {
        const int64_t g = std::gcd(mt, mtiles);
        for (int64_t a : divisors(g, chunk_floats / 4))
          for (int64_t b : divisors(nt, chunk_floats / 4))
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

namespace {

/// The tile operand `k` of matmul `op` stands for: a transpose or slice is judged by the tile
/// it views.
int viewed_operand(const BlockGraph& g, const BlockOp& op, int k) {
  int t = op.inputs[k];
  while (op_category(g.op(g.tensor(t).producer).kind) == Category::Layout)
    t = g.op(g.tensor(t).producer).inputs[0];
  return t;
}

}  // namespace

int64_t mma_padded_extent(int64_t x, int64_t step) {
  const int64_t padded = (x + step - 1) / step * step;
  return padded <= 4 * x ? padded : 0;
}

bool matmul_needs_mma_padding(const BlockGraph& g, int id) {
  const BlockOp& op = g.op(id);
  if (op_category(op.kind) != Category::Matmul) return false;
  const Shape& a = g.tensor(op.inputs[0]).shape;
  const Shape& b = g.tensor(op.inputs[1]).shape;
  return a[a.rank() - 1] % 16 != 0 || b[b.rank() - 1] % 8 != 0;
}

bool matmul_tiles_fit_mma(const BlockGraph& g, int id) {
  const BlockOp& op = g.op(id);
  if (op_category(op.kind) != Category::Matmul) return false;
  const Shape& a = g.tensor(op.inputs[0]).shape;
  const Shape& b = g.tensor(op.inputs[1]).shape;
  if (mma_padded_extent(a[a.rank() - 1], 16) == 0 || mma_padded_extent(b[b.rank() - 1], 8) == 0)
    return false;
  // Padded operands are read through transposes only: the pad of a slice would lie in its
  // host's other elements.
  if (matmul_needs_mma_padding(g, id))
    for (int k = 0; k < 2; ++k)
      for (int t = op.inputs[k]; op_category(g.op(g.tensor(t).producer).kind) == Category::Layout;
           t = g.op(g.tensor(t).producer).inputs[0])
        if (g.op(g.tensor(t).producer).kind != OpKind::Transpose) return false;
  // Accumulators stay f32: a post-loop matmul on them runs on the SIMT path.
  for (int k = 0; k < 2; ++k)
    if (op_category(g.op(g.tensor(viewed_operand(g, op, k)).producer).kind) == Category::Accum)
      return false;
  return true;
}

Shape mma_storage_shape(const BlockGraph& g, int t) {
  Shape s = g.tensor(t).shape;
  const int r = s.rank();
  if (r < 2) return s;
  for (int i = 0; i < static_cast<int>(g.ops().size()); ++i) {
    if (!matmul_tiles_fit_mma(g, i) || !matmul_needs_mma_padding(g, i)) continue;
    const BlockOp& op = g.op(i);
    const Shape& as = g.tensor(op.inputs[0]).shape;
    const Shape& os = g.tensor(op.output).shape;
    const int64_t n = mma_padded_extent(os[os.rank() - 1], 8);
    const int64_t k = mma_padded_extent(as[as.rank() - 1], 16);
    if (op.output == t) s[r - 1] = std::max(s[r - 1], n);
    for (int o = 0; o < 2; ++o) {
      // Logical (rows, columns) of the operand: A [M, K], B [K, N]; each transpose on the way
      // to the stored tile swaps them.
      int64_t rows = o == 0 ? 0 : k, cols = o == 0 ? k : n;
      int x = op.inputs[o];
      while (op_category(g.op(g.tensor(x).producer).kind) == Category::Layout) {
        std::swap(rows, cols);
        x = g.op(g.tensor(x).producer).inputs[0];
      }
      if (x != t) continue;
      s[r - 2] = std::max(s[r - 2], rows);
      s[r - 1] = std::max(s[r - 1], cols);
    }
  }
  return s;
}

bool tensor_core_eligible(const KernelPlan& plan, int id) {
  const BlockGraph& g = *plan.graph;
  const BlockOp& op = g.op(id);
  if (!plan.options.tensor_cores || !plan.has_mma_dtype) return false;
  if (!matmul_tiles_fit_mma(g, id)) return false;
  const Shape& a = g.tensor(op.inputs[0]).shape;
  const Shape& b = g.tensor(op.inputs[1]).shape;
  if (matmul_needs_mma_padding(g, id)) {
    // Chains keep their fragments whole (the C tiles of S are the A tiles of the next
    // product), and a column scale would be read at the padded columns.
    const OpPlan& p = plan.ops[id];
    if (p.chain_into >= 0 || p.chain_from >= 0) return false;
    if (b[b.rank() - 1] % 8 != 0 && p.scale_b >= 0) return false;
  }
  for (int k = 0; k < 2; ++k) {
    const int t = viewed_operand(g, op, k);
    // An A operand stored transposed as it is read (a kernel-level transpose) needs whole
    // 16-row tiles (MmaSpec's TA); through layout ops or a norm it may still be copied.
    if (k == 0 && t == op.inputs[0] && plan.tensors[t].stored_transposed &&
        a[a.rank() - 2] % 16 != 0)
      return false;
    if (is_input_tile(g, t) && input_tile_dtype(plan, t) != plan.mma_dtype) return false;
  }
  return true;
}

namespace {

/// Whether every fragment-fed accumulator (outside matmul chains) gets a register tiling with
/// `warps` warps.
bool register_accumulators_fit(const KernelPlan& plan, int warps) {
  const BlockGraph& g = *plan.graph;
  int budget = plan.options.register_accum_floats;
  for (int i = 0; i < static_cast<int>(g.ops().size()); ++i) {
    const OpPlan& p = plan.ops[i];
    if (p.accumulate_into < 0 || p.chain_from >= 0 || !tensor_core_eligible(plan, i)) continue;
    if (budget <= 0) return false;
    const Shape& out = g.tensor(g.op(i).output).shape;
    MmaTiling t;
    if (!choose_tiling(batch_count(out), out[out.rank() - 2],
                       mma_padded_extent(out[out.rank() - 1], 8), warps,
                       plan.options.mma_chunk_floats, budget, t))
      return false;
    budget -= t.mt * t.nt * 4;
  }
  return true;
}

/// Row tiles of a matmul output and tiles per batch.
void row_tiles(const Shape& out, int64_t& rt, int64_t& mtiles) {
  mtiles = (out[out.rank() - 2] + 15) / 16;
  rt = batch_count(out) * mtiles;
}

/// Registers a chain's thread keeps for other than its accumulators: addresses and indices,
/// the operand fragments of a k-step, the row statistics and scales.
constexpr int64_t kChainRegisterReserve = 32;

/// The accumulator floats a thread of a block of `warps` warps can hold in registers: the
/// registers a thread may have at one block per SM, min(255, registers per SM / threads), less
/// kChainRegisterReserve. Binding at 16 warps only (96 floats); measured on an H200
/// (h200-2026-11-29-d128): chains of 128 floats per thread in blocks of 16 warps (256 query
/// rows, head dim 128, 128-key tiles) spilled 532–724 bytes per thread and ran 1.5–1.9× slower
/// than the same attention in blocks of 8 warps, while chains of 96 floats (head dim 64)
/// spill 40–128 bytes and are the fastest forms there.
int64_t chain_register_cap(const PlanOptions& o, int64_t warps) {
  if (o.sm_registers <= 0) return std::numeric_limits<int64_t>::max();  // not known: no cap
  const int64_t regs = std::min<int64_t>(255, o.sm_registers / std::max<int64_t>(32, 32 * warps));
  return regs - kChainRegisterReserve;
}

/// The warp layout of a matmul chain m1 → m2: `warps` warps (W) each own mt whole row tiles of
/// both products. With fixed_warps > 0 at most that many warps; else at most 16. mt is
/// PlanOptions::chain_row_tiles when that divides the row tiles of a batch and fits, else the
/// smallest that fits. Returns false when no layout keeps the chain's registers within
/// 2 × register_accum_floats and within what a thread of the block can hold
/// (chain_register_cap).
bool chain_layout(const KernelPlan& plan, int m1, int fixed_warps, int& warps, int& mt) {
  const BlockGraph& g = *plan.graph;
  const int m2 = plan.ops[m1].chain_into;
  const Shape& s1 = g.tensor(g.op(m1).output).shape;
  const Shape& s2 = g.tensor(g.op(m2).output).shape;
  int64_t rt = 0, mtiles = 0;
  row_tiles(s1, rt, mtiles);
  const int64_t nt = s1[s1.rank() - 1] / 8 + s2[s2.rank() - 1] / 8;
  const int max_warps = fixed_warps > 0 ? fixed_warps : 16;
  const auto registers_fit = [&](int64_t m) {
    const int64_t floats = m * nt * 4;
    const int64_t block_warps = std::max<int64_t>(rt / m, fixed_warps);
    return floats <= 2 * plan.options.register_accum_floats &&
           floats <= chain_register_cap(plan.options, block_warps);
  };
  std::vector<int64_t> order = divisors(mtiles);
  const int64_t preferred = plan.options.chain_row_tiles;
  if (preferred > 0 && mtiles % preferred == 0) order.insert(order.begin(), preferred);
  for (int64_t m : order) {
    if (rt / m > max_warps) continue;
    if (!registers_fit(m)) {
      if (m == preferred) continue;
      return false;
    }
    warps = static_cast<int>(rt / m);
    mt = static_cast<int>(m);
    return true;
  }
  return false;
}

void unchain(KernelPlan& plan, int m1) {
  const int m2 = plan.ops[m1].chain_into;
  if (m2 < 0) return;
  OpPlan& p1 = plan.ops[m1];
  OpPlan& p2 = plan.ops[m2];
  p1.chain_into = -1;
  p2.chain_from = -1;
  // A rescaling accumulator is fed from fragments only inside a chain.
  if (p2.accumulate_into >= 0 && rescales(plan.graph->op(p2.accumulate_into).kind))
    p2.accumulate_into = -1;
  for (int o : p1.chain_ops) plan.ops[o].host = -1;
  p1.chain_ops.clear();
  p1.shift_free = false;
  for (OpPlan& p : plan.ops) {
    if (p.rowsum_of == m1) p.rowsum_of = -1;
    if (p.scan_of == m1) p.scan_of = -1;
  }
}

bool any_tensor_cores(const KernelPlan& plan) {
  for (int i = 0; i < static_cast<int>(plan.graph->ops().size()); ++i)
    if (tensor_core_eligible(plan, i)) return true;
  return false;
}

/// The most elements one op of the kernel passes over on its own (shared_pass_elements).
int64_t largest_shared_pass(const KernelPlan& plan) {
  int64_t largest = 0;
  for (int i = 0; i < static_cast<int>(plan.graph->ops().size()); ++i)
    largest = std::max(largest, shared_pass_elements(plan, i));
  return largest;
}

/// Threads of one loop group (or of the block without groups): PlanOptions::threads when set;
/// matmul chains need one warp per `mt` row tiles; other tensor-core kernels are raised until
/// every fragment accumulator fits in registers (and, without a loop, until no warp owns fewer
/// than 8 output fragments of the largest matmul), then (blocks only, up to 512 threads) until
/// no op outside the matmuls passes over more than 32 elements per thread
/// (largest_shared_pass: a K tile's norm on 128 threads took 2.4 times as long as on 512); the
/// others until no loop tile has more than 8 (block) or 32 (group) elements per thread. Groups
/// start from one warp, blocks from the block graph's size.
int choose_group_threads(KernelPlan& plan, bool grouped) {
  const BlockGraph& g = *plan.graph;
  const int nops = static_cast<int>(g.ops().size());
  if (plan.options.threads > 0) {
    const int G = plan.options.loop_groups;
    if (grouped && G > 1 && plan.options.threads % (32 * G) == 0) return plan.options.threads / G;
    return plan.options.threads;
  }
  int threads = grouped ? 32 : g.block_threads();
  for (int i = 0; i < nops; ++i) {
    if (plan.ops[i].chain_into < 0) continue;
    int warps = 0, mt = 0;
    if (chain_layout(plan, i, 0, warps, mt))
      threads = std::max(threads, 32 * warps);
    else
      unchain(plan, i);
  }
  if (any_tensor_cores(plan)) {
    for (int t = threads; t <= std::min(512, plan.options.max_threads); t *= 2)
      if (register_accumulators_fit(plan, t / 32)) {
        threads = t;
        break;
      }
    if (g.forloop() == 1) {
      int64_t tiles = 0;
      for (int i = 0; i < nops; ++i) {
        if (!tensor_core_eligible(plan, i)) continue;
        const Shape& out = g.tensor(g.op(i).output).shape;
        int64_t rt = 0, mtiles = 0;
        row_tiles(out, rt, mtiles);
        tiles = std::max(tiles, rt * (mma_padded_extent(out[out.rank() - 1], 8) / 8));
      }
      while (threads < 256 && tiles >= int64_t{8} * 2 * (threads / 32)) threads *= 2;
    }
    if (!grouped) {
      const int64_t pass = largest_shared_pass(plan);
      const int cap = std::min(512, plan.options.max_threads);
      while (threads < cap && pass > int64_t{threads} * 32) threads *= 2;
    }
    return threads;
  }
  int64_t largest = 0;
  for (int t = 0; t < static_cast<int>(g.tensors().size()); ++t) {
    const Phase ph = plan.ops[g.tensor(t).producer].phase;
    if (grouped && ph != Phase::Loop) continue;
    largest = std::max(largest, g.tensor(t).shape.numel());
  }
  const int cap = grouped ? 256 : 512;
  const int64_t per_thread = grouped ? 32 : 8;
  while (threads < cap && largest > int64_t{threads} * per_thread) threads *= 2;
  return threads;
}

/// Width of the thread-owned chunks of a register accumulator reading tile x: the largest of
/// 8, 4, 2, 1 dividing the last extent (and the reduced groups for reducing accumulators).
int64_t accum_chunk(const BlockGraph& g, const BlockOp& op) {
  const Shape& xs = g.tensor(op.inputs[0]).shape;
  const int64_t last = last_extent(xs);
  const int64_t group = op_reduction(op.kind) ? reduction_shape(op, xs).group() : last;
  for (int64_t v : {8, 4, 2})
    if (last % v == 0 && group % v == 0) return v;
  return 1;
}

/// Whether accumulator `op` combines its input element by element (accum, accum_rescale: no
/// row of the reduction family) rather than reducing it.
bool elementwise_accum(const BlockOp& op) {
  return op_reduction(op.kind) == nullptr;
}

/// Registers per thread of a register accumulator with `trips` chunks of `v` elements: the
/// per-element (elementwise accumulators) or per-chunk sums, plus the previous shift per chunk
/// of a rescaling accumulator.
int64_t register_accum_floats(const BlockOp& op, int64_t trips, int64_t v) {
  return (elementwise_accum(op) ? trips * v : trips) + (rescales(op.kind) ? trips : 0);
}

/// Whether tile t gets one copy per loop group when the loop is split into groups (the rule of
/// TensorPlan::group_private in choose_layouts, for a tile stored in shared memory): the loop's
/// tiles and the partial sums of fmap-φ accumulators.
bool private_under_groups(const KernelPlan& plan, int t) {
  const BlockGraph& g = *plan.graph;
  const BlockOp& prod = g.op(g.tensor(t).producer);
  if (op_category(prod.kind) == Category::Accum) return prod.attrs.fmap == kReplicate;
  return plan.ops[g.tensor(t).producer].phase == Phase::Loop;
}

/// Whether every reader of accumulator tile t reads it element by element after the loop (an
/// elementwise op or thread graph evaluated on its own or inlined into its consumer, or an
/// output saver): such readers can add up the loop groups' copies themselves
/// (TensorPlan::summed_at_read). Matmuls, reductions and epilogues hosted by a matmul read tiles
/// another way and need the sum in place.
bool read_elementwise_after_loop(const KernelPlan& plan, int t) {
  const BlockGraph& g = *plan.graph;
  for (int c = 0; c < static_cast<int>(g.ops().size()); ++c) {
    const BlockOp& op = g.op(c);
    if (std::find(op.inputs.begin(), op.inputs.end(), t) == op.inputs.end()) continue;
    // An inlined op is evaluated by its consumer (transitively): that one must qualify too.
    for (int e = c; e >= 0; e = plan.ops[e].inline_into) {
      const OpPlan& p = plan.ops[e];
      const Category cat = op_category(g.op(e).kind);
      const bool elementwise =
          cat == Category::Unary || cat == Category::Binary || cat == Category::Fused;
      if (p.phase != Phase::Post || p.host >= 0) return false;
      if (!elementwise && cat != Category::Sink) return false;
    }
  }
  return true;
}

/// Every storage decision of choose_layouts for `warps` warps per group: matmul paths and
/// tilings, homes, storage types, views, layouts, register accumulators. `grouped`: the plan
/// is sized for loop groups (G > 1).
void assign_storage(KernelPlan& plan, int warps, bool grouped) {
  const BlockGraph& g = *plan.graph;
  const int nops = static_cast<int>(g.ops().size());
  const int ntensors = static_cast<int>(g.tensors().size());
  std::vector<bool> ldmatrix_read(ntensors, false), fragment_written(ntensors, false);
  // Storage each tile needs for padded tensor-core matmuls: a row stride and rows per matrix.
  std::vector<int64_t> need_ld(ntensors, 0), need_rows(ntensors, 0);

  // Storage types: input tiles keep the device type; computed tiles are f32 unless a tensor
  // core reads them.
  for (int t = 0; t < ntensors; ++t) {
    const bool stored_transposed = plan.tensors[t].stored_transposed;  // fixed by the inputs
    plan.tensors[t] = TensorPlan{};
    plan.tensors[t].stored_transposed = stored_transposed;
    plan.tensors[t].dtype = is_input_tile(g, t) ? input_tile_dtype(plan, t) : DType::f32;
    const OpPlan& pp = plan.ops[g.tensor(t).producer];
    const BlockOp& prod = g.op(g.tensor(t).producer);
    if (pp.inline_into >= 0) plan.tensors[t].home = TensorHome::Inline;
    if (pp.fold_into >= 0) plan.tensors[t].home = TensorHome::Scale;
    if (op_category(prod.kind) == Category::Layout && pp.in_place) {
      plan.tensors[t].home = TensorHome::Alias;  // plan_layout_views: read in place
      plan.tensors[t].view_of = prod.inputs[0];
      // A transpose of a folded norm reads the norm's input (fold_norms_into_matmuls).
      const int norm = g.tensor(prod.inputs[0]).producer;
      if (plan.ops[norm].fold_into >= 0) plan.tensors[t].view_of = g.op(norm).inputs[0];
    }
  }
  // Tiles that layout ops read in place keep their own storage (never a view inside another).
  std::vector<bool> aliased(ntensors, false);
  for (int t = 0; t < ntensors; ++t)
    if (plan.tensors[t].home == TensorHome::Alias) aliased[alias_root(plan, t)] = true;
  for (OpPlan& p : plan.ops) p.register_accum = false;
  // Matmul chains first: their warp layout is fixed by the rows.
  int reg_budget = plan.options.register_accum_floats;
  for (int i = 0; i < nops; ++i) {
    OpPlan& p = plan.ops[i];
    if (p.chain_into < 0) continue;
    int w = 0, mt = 0;
    if (!chain_layout(plan, i, warps, w, mt)) {
      unchain(plan, i);
      continue;
    }
    const int m2 = p.chain_into;
    const Shape& s1 = g.tensor(g.op(i).output).shape;
    const Shape& s2 = g.tensor(g.op(m2).output).shape;
    const int nt1 = static_cast<int>(s1[s1.rank() - 1] / 8);
    const int nt2 = static_cast<int>(s2[s2.rank() - 1] / 8);
    p.tiling = {w, 1, mt, nt1, mt, nt1};
    plan.ops[m2].tiling = {w, 1, mt, nt2, mt, nt2};
    // A loop-invariant A operand stays in registers as fragments when they are few and the
    // chain's estimated registers (accumulators, A and B fragments, rows sums, scales,
    // addressing) stay within 128.
    const int a = matmul_operand(plan, i, 0);
    const Shape& as = g.tensor(a).shape;
    const int64_t a_regs = mt * (last_extent(as) / 16) * 4;
    int rowsums = 0;
    for (const OpPlan& q : plan.ops)
      rowsums += (q.rowsum_of == i ? 1 : 0) + (q.scan_of == i ? 2 : 0);
    const int64_t estimate = 4 * mt * (nt1 + nt2) + a_regs + 2 * mt * rowsums + 2 * nt2 + 24 +
                             (p.scale_a >= 0 || p.scale_b >= 0 ? 12 : 0);
    // (A ragged contraction reads A through the masked path: no fragments kept.)
    p.a_in_registers = plan.ops[g.tensor(a).producer].phase == Phase::Prologue && a_regs <= 32 &&
                       estimate <= 128 && plan.ragged.dim(a, as.rank() - 1) < 0 &&
                       plan.ragged.dim(g.op(i).inputs[1], as.rank() - 2) < 0;
  }
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
    // The mma extents: N and K rounded up to the step (equal to them unless padded).
    const Shape& as = g.tensor(op.inputs[0]).shape;
    p.mma_n = p.matmul == MatmulPath::TensorCore ? mma_padded_extent(n, 8) : 0;
    p.mma_k = p.matmul == MatmulPath::TensorCore ? mma_padded_extent(as[as.rank() - 1], 16) : 0;
    if (p.epilogue >= 0 || p.accumulate_into >= 0 || p.chain_into >= 0)
      plan.tensors[op.output].home = TensorHome::Fused;
    if (p.epilogue >= 0 && p.chain_into >= 0)
      plan.tensors[g.op(p.epilogue).output].home = TensorHome::Fused;
    for (int o : p.chain_ops) plan.tensors[g.op(o).output].home = TensorHome::Fused;
    if (p.matmul != MatmulPath::TensorCore) continue;
    for (int k = 0; k < 2; ++k) {
      const int t = matmul_operand(plan, i, k);
      if (k == 0 && p.chain_from >= 0) continue;  // A comes from registers
      ldmatrix_read[t] = true;
      const int root = alias_root(plan, t);  // a view is read from the storage it aliases
      ldmatrix_read[root] = true;
      if (!is_input_tile(g, root)) plan.tensors[root].dtype = plan.mma_dtype;
    }
    if (p.chain_into >= 0) continue;
    bool in_registers = false;
    if (p.chain_from >= 0) {
      in_registers = true;  // the chain's layout was checked against its own budget
    } else if (p.accumulate_into >= 0 && reg_budget > 0) {
      in_registers =
          choose_tiling(bt, m, p.mma_n, warps, plan.options.mma_chunk_floats, reg_budget, p.tiling);
      if (in_registers) reg_budget -= p.tiling.mt * p.tiling.nt * 4;
    }
    if (!in_registers &&
        !choose_tiling(bt, m, p.mma_n, warps, plan.options.mma_chunk_floats, 0, p.tiling)) {
      p.matmul = MatmulPath::Simt;
      p.mma_n = p.mma_k = 0;
    }
    // Under wgmma a plain matmul whose B rows can be the descriptor's 128-byte rows prefers
    // one row tile per warp in one warp column, so that its warpgroups own 64-row tiles
    // (plan_wgmma then checks B's layout).
    if (plan.options.wgmma && p.matmul == MatmulPath::TensorCore && p.chain_from < 0 &&
        wgmma_b_rows_fit(plan, i)) {
      MmaTiling t;
      const int held = in_registers ? p.tiling.mt * p.tiling.nt * 4 : 0;
      if (wgmma_tiling(bt, m, p.mma_n, warps, in_registers, reg_budget + held, t)) {
        if (in_registers) reg_budget += held - t.mt * t.nt * 4;
        p.tiling = t;
      }
    }
    if (p.matmul != MatmulPath::TensorCore) continue;
    int dest = p.accumulate_into >= 0 ? g.op(p.accumulate_into).output
               : p.epilogue >= 0      ? g.op(p.epilogue).output
                                      : op.output;
    fragment_written[dest] = true;
    // Padding to the mma step: product pairs are stored at even columns, so a destination
    // of a padded N gets a row stride of the padded N.
    if (p.mma_n > n) need_ld[dest] = std::max(need_ld[dest], p.mma_n);
    if (in_registers) plan.tensors[dest].home = TensorHome::Registers;
  }
  // Padding to the mma step: the storage of each operand covers the padded extents, along its
  // stored rows or columns (a transpose read in place, or a tile stored transposed, swaps
  // them). Nothing writes the pad; the fragments are zeroed past K (plan_ragged_tiles) and
  // product columns past N are never written.
  for (int i = 0; i < nops; ++i) {
    const OpPlan& p = plan.ops[i];
    if (p.matmul != MatmulPath::TensorCore || !matmul_needs_mma_padding(g, i)) continue;
    for (int k = 0; k < 2; ++k) {
      if (k == 0 && p.chain_from >= 0) continue;
      const int t = matmul_operand(plan, i, k);
      int64_t rows = k == 0 ? 0 : p.mma_k, cols = k == 0 ? p.mma_k : p.mma_n;
      if (alias_map(plan, t).transposed) std::swap(rows, cols);
      const int root = alias_root(plan, t);
      need_rows[root] = std::max(need_rows[root], rows);
      need_ld[root] = std::max(need_ld[root], cols);
    }
  }
  // Accumulators fed from the row sums of a chain's fragments live in registers too, and so
  // does a running max of them (kept per lane; copied to its tile after the loop only for the
  // loop groups' combine).
  for (int i = 0; i < nops; ++i) {
    if (plan.ops[i].rowsum_of >= 0) plan.tensors[g.op(i).output].home = TensorHome::Registers;
    if (plan.ops[i].scan_of >= 0)
      plan.tensors[g.op(i).output].home = grouped ? TensorHome::Registers : TensorHome::Fused;
  }
  // Other loop accumulators: per thread in registers, over thread-owned chunks of their input.
  if (plan.options.register_accums && !plan.ragged.any()) {  // (ragged: general path)
    const int threads = warps * 32;
    for (int i = 0; i < nops; ++i) {
      const BlockOp& op = g.op(i);
      OpPlan& p = plan.ops[i];
      if (op_category(op.kind) != Category::Accum || op.attrs.fmap != kReplicate) continue;
      if (p.rowsum_of >= 0 || g.forloop() == 1) continue;
      const int src = g.tensor(op.inputs[0]).producer;
      if (plan.ops[src].accumulate_into == i) continue;
      TensorPlan& ap = plan.tensors[op.output];
      if (ap.home != TensorHome::Shared) continue;
      const Shape& xs = g.tensor(op.inputs[0]).shape;
      // accum_rescale keeps one shift per chunk: the shift must be constant along rows.
      if (op.kind == OpKind::AccumRescale && last_extent(g.tensor(op.inputs[1]).shape) != 1)
        continue;
      const int64_t v = accum_chunk(g, op), chunks = xs.numel() / v;
      const int64_t trips = (chunks + threads - 1) / threads;
      const int64_t floats = register_accum_floats(op, trips, v);
      if (floats > reg_budget || trips > 32) continue;
      reg_budget -= static_cast<int>(floats);
      p.register_accum = true;
      // Elementwise sums are dumped to their tile after the loop; reducing ones are added
      // into their (zeroed) shared accumulator.
      if (elementwise_accum(op)) ap.home = TensorHome::Registers;
    }
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
        if (xp.home != TensorHome::Shared || is_host[x] || aliased[x]) continue;
        if (need_ld[x] > 0 || need_rows[x] > 0) continue;  // padded storage of its own
        const OpPlan& src = plan.ops[g.tensor(x).producer];
        if (is_input_tile(g, x) && src.phase == Phase::Loop && g.forloop() > 1) continue;
        // Under loop groups a view shares its host's copies: per group for a loop tile, one for
        // the block otherwise. An operand on the other side of that line would be written into
        // one copy and read from another: a loop-invariant operand (LoRA's hoisted B in
        // [W ; B], loaded once by the whole block before the loop) would reach only the first
        // group's copy of the loop-computed host, and the other groups would read garbage.
        // Such an operand keeps its own tile and the concat copies it.
        if (grouped && private_under_groups(plan, x) != private_under_groups(plan, c)) continue;
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
  // Layout ops read in place have the storage type of the tile they alias.
  for (int t = 0; t < ntensors; ++t)
    if (plan.tensors[t].home == TensorHome::Alias)
      plan.tensors[t].dtype = plan.tensors[alias_root(plan, t)].dtype;
  // Layouts.
  for (int t = 0; t < ntensors; ++t) {
    TensorPlan& tp = plan.tensors[t];
    if (tp.home == TensorHome::Scale) {
      // The inverse-RMS vector: dense f32 over the non-normalized indices.
      const BlockOp& norm = g.op(g.tensor(t).producer);
      Shape vs = g.tensor(t).shape;
      vs[norm.attrs.dim] = 1;
      tp.dtype = DType::f32;
      tp.layout.ld = last_extent(vs);
      const int64_t per_align = kSmemAlign / 4;
      tp.layout.stage_elems = (vs.numel() + per_align - 1) / per_align * per_align;
      continue;
    }
    if (tp.home == TensorHome::Fused || tp.home == TensorHome::View ||
        tp.home == TensorHome::Inline || tp.home == TensorHome::Alias)
      continue;
    const Shape s = stored_shape(plan, t);
    // Rows and row length of the storage: padded tensor-core operands cover the padded extents.
    const int64_t last = std::max(last_extent(s), need_ld[t]);
    tp.layout.pad_rows = s.rank() >= 2 ? std::max<int64_t>(0, need_rows[t] - s[s.rank() - 2]) : 0;
    const int64_t rows = s.numel() / last_extent(s) + batch_count(s) * tp.layout.pad_rows;
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
      // ldmatrix reads an alias from a pointer to its first element: its offset must keep the
      // swizzle's phase (other readers apply the swizzle per element, from any offset).
      if (swizzle_ok && aliased[t]) {
        for (int v = 0; v < ntensors; ++v) {
          if (plan.tensors[v].home != TensorHome::Alias || !ldmatrix_read[v]) continue;
          if (alias_root(plan, v) != t) continue;
          const IndexMap m = alias_map(plan, v);
          if (m.origin.empty()) continue;
          const int r = s.rank();
          if (m.origin[r - 1] % 64 != 0 || m.origin[r - 2] % 8 != 0) swizzle_ok = false;
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
    // A rescaling accumulator in shared memory keeps its previous shift in two slots after it.
    const BlockOp& prod = g.op(g.tensor(t).producer);
    if (rescales(prod.kind) && tp.home == TensorHome::Shared) {
      tp.shift_offset = tp.layout.stage_elems;
      const int64_t slots = 2 * g.tensor(prod.inputs[1]).shape.numel();
      tp.layout.stage_elems += (slots + per_align - 1) / per_align * per_align;
    }
  }
}

/// Rough registers per thread of the loop body: accumulators held across the loop, the largest
/// set of fragments one k-step of a matmul needs, and a fixed allowance for addressing.
int register_estimate(const KernelPlan& plan) {
  const BlockGraph& g = *plan.graph;
  int64_t held = 0, frags = 0;
  for (int i = 0; i < static_cast<int>(g.ops().size()); ++i) {
    const OpPlan& p = plan.ops[i];
    const BlockOp& op = g.op(i);
    if (p.matmul == MatmulPath::TensorCore) {
      const MmaTiling& t = p.tiling;
      frags = std::max<int64_t>(frags, t.chunk_mt * 4 + t.chunk_nt * 2);
      if (p.chain_into >= 0) held += t.mt * t.nt * 4;  // the first product of a chain
      if (p.accumulate_into >= 0 &&
          plan.tensors[g.op(p.accumulate_into).output].home == TensorHome::Registers)
        held += t.mt * t.nt * 4;
      else if (p.chain_into < 0)
        frags += t.chunk_mt * t.chunk_nt * 4;
    }
    if (p.rowsum_of >= 0) held += plan.ops[p.rowsum_of].tiling.mt * 2;
    if (p.scan_of >= 0) held += plan.ops[p.scan_of].tiling.mt * 4;  // maxima and factors
    if (p.register_accum) {
      const Shape& xs = g.tensor(op.inputs[0]).shape;
      const int64_t v = accum_chunk(g, op);
      const int64_t trips = (xs.numel() / v + plan.group_threads - 1) / plan.group_threads;
      held += register_accum_floats(op, trips, v);
    }
  }
  return static_cast<int>(held + frags + 40);
}

}  // namespace

Result<KernelPlan> choose_layouts(KernelPlan plan) {
  // Ragged tiles are masked on the general path only (docs/codegen.md, "Ragged tiles"): no
  // rowwise kernels, loop groups or per-thread register accumulators.
  const bool ragged = plan.ragged.any();
  if (plan.options.rowwise && !ragged && rowwise_eligible(plan))
    return plan_rowwise(std::move(plan));
  const BlockGraph& g = *plan.graph;
  const int nops = static_cast<int>(g.ops().size());
  const int ntensors = static_cast<int>(g.tensors().size());
  plan.rowwise = false;
  // Loop groups: size one group, see how many fit; without groups, size the block.
  plan.groups = 1;
  if (loop_groups_allowed(plan) && plan.options.loop_groups != 1 &&
      (plan.options.threads == 0 || plan.options.loop_groups > 1)) {
    KernelPlan trial = plan;
    trial.group_threads = choose_group_threads(trial, true);
    assign_storage(trial, trial.group_threads / 32, true);
    // Above 256 threads a thread gets at most 128 registers (64 above 512).
    const int regs = register_estimate(trial);
    const int max_threads = regs > 120 ? 256 : regs > 60 ? 512 : 1024;
    choose_groups_and_stages(trial, smem_needs(trial), max_threads);
    if (trial.groups > 1) plan = std::move(trial);
  }
  if (plan.groups == 1) {
    plan.group_threads = choose_group_threads(plan, false);
    assign_storage(plan, plan.group_threads / 32, false);
    choose_groups_and_stages(plan, smem_needs(plan), 1024);
    plan.groups = 1;
  }
  plan.threads = plan.groups * plan.group_threads;
  if (plan.threads > plan.options.max_threads)
    return make_error("the kernel needs " + std::to_string(plan.threads) +
                      " threads per block; at most " + std::to_string(plan.options.max_threads) +
                      " allowed (PlanOptions::max_threads: the threads of a task entry's caller)");
  // Above 256 threads a thread has at most 128 registers: keep A fragments in shared memory.
  if (plan.threads > 256)
    for (OpPlan& p : plan.ops) p.a_in_registers = false;
  const int stages = plan.pipeline_stages;
  for (int i = 0; i < nops; ++i)
    if (g.op(i).kind == OpKind::Input && plan.ops[i].phase == Phase::Loop)
      plan.tensors[g.op(i).output].stages = stages;
  // Per-group copies: the loop's tiles and the partial sums of fmap-φ accumulators.
  for (int t = 0; t < ntensors; ++t) {
    TensorPlan& tp = plan.tensors[t];
    const BlockOp& prod = g.op(g.tensor(t).producer);
    const OpPlan& pp = plan.ops[g.tensor(t).producer];
    const bool accum = op_category(prod.kind) == Category::Accum;
    tp.group_private = plan.groups > 1 &&
                       (tp.home == TensorHome::Shared || tp.home == TensorHome::Registers ||
                        tp.home == TensorHome::Scale) &&
                       (accum ? prod.attrs.fmap == kReplicate : pp.phase == Phase::Loop);
    if (tp.home == TensorHome::Shared || tp.home == TensorHome::Registers ||
        tp.home == TensorHome::Scale) {
      tp.group_elems = tp.layout.stage_elems * tp.stages;
      tp.bytes = tp.group_elems * dtype_size(tp.dtype) * (tp.group_private ? plan.groups : 1);
    }
    // (Rescaling accumulators combine their groups' partials in place, rescaled by the groups'
    // maxima.)
    tp.summed_at_read = tp.group_private && accum && plan.options.sum_at_read &&
                        !rescales(prod.kind) && read_elementwise_after_loop(plan, t);
  }
  // Scratch for block-wide reductions (never inside a grouped loop: teams there stay in a warp).
  plan.scratch_bytes = 0;
  for (int i = 0; i < nops; ++i) {
    const BlockOp& op = g.op(i);
    if (!is_reduction(op) || plan.ops[i].register_accum) continue;
    if (plan.groups > 1 && plan.ops[i].phase == Phase::Loop) continue;
    ReductionShape r = reduction_shape(op, g.tensor(op.inputs[0]).shape);
    if (reduction_team(r.group(), r.outputs(), plan.threads) == 0)
      plan.scratch_bytes = plan.threads / 32 * 4;
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
    } else if (op_category(op.kind) == Category::Layout) {
      in_place = plan.tensors[op.output].home == TensorHome::Alias;
    }
    plan.ops[i].in_place = in_place;
  }
  return schedule_block_ops(std::move(plan));
}

int64_t shared_pass_elements(const KernelPlan& plan, int i) {
  const BlockGraph& g = *plan.graph;
  const BlockOp& op = g.op(i);
  const Category c = op_category(op.kind);
  const bool pass = is_elementwise(op.kind) || c == Category::Fused || c == Category::Reduce ||
                    c == Category::Norm;
  const OpPlan& p = plan.ops[i];
  if (!pass || p.fold_into >= 0 || p.host >= 0 || p.inline_into >= 0) return 0;
  int64_t n = g.tensor(op.output).shape.numel();
  if (c == Category::Reduce) n = std::max(n, g.tensor(op.inputs[0]).shape.numel());
  return n;
}

}  // namespace strata
