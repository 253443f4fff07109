#include "strata/opt/register_fusion.h"

#include "strata/opt/layout.h"
#include "strata/opt/schedule.h"

namespace strata {
namespace {

/// An accumulator with one input reducing its last dim to one value per row (by the op table's
/// reduction family: sums, means, RMS, maxima).
bool is_last_dim_reducer(const BlockGraph& g, const BlockOp& op) {
  if (op_category(op.kind) != Category::Accum || !op_reduction(op.kind)) return false;
  if (op_info(op.kind).arity != 1) return false;
  const Shape& s = g.tensor(op.output).shape;
  return s.rank() >= 1 && s[s.rank() - 1] == 1;
}

/// Whether a chain m1 → m2 can run on fragments in a kernel with ragged tiles: the first
/// product's last dim — the second product's contraction — may be ragged in the loop only (a
/// key loop no tile divides: the last iteration's keys are partly absent), and its rows may be
/// ragged across blocks only (query rows no tile divides: the last block's rows are absent,
/// read as zeros and never saved); no other dim of the chain's operands and product is
/// ragged. The chain then masks the first product's absent columns (docs/codegen.md, "Ragged
/// tiles"); its loaded operands are zero-filled there.
bool ragged_chain_supported(const KernelPlan& plan, int m1, int m2) {
  if (!plan.ragged.any()) return true;
  const BlockGraph& g = *plan.graph;
  auto grid_only = [&](int e) { return e < 0 || !plan.ragged.extents[e].loop; };
  auto loop_only = [&](int e) { return e < 0 || plan.ragged.extents[e].axis < 0; };
  const int a = g.op(m1).inputs[0], out = g.op(m1).output, b2 = g.op(m2).inputs[1];
  const int r = g.tensor(out).shape.rank(), ra = g.tensor(a).shape.rank();
  const int rows = plan.ragged.dim(out, r - 2), keys = plan.ragged.dim(out, r - 1);
  for (int d = 0; d < r - 2; ++d)
    if (plan.ragged.dim(out, d) >= 0) return false;
  for (int d = 0; d < ra; ++d)
    if (plan.ragged.dim(a, d) >= 0 && !(d == ra - 2 && plan.ragged.dim(a, d) == rows))
      return false;
  const int rb = g.tensor(b2).shape.rank();
  return grid_only(rows) && loop_only(keys) &&
         (keys < 0 || plan.ragged.dim(b2, rb - 2) == keys);
}

}  // namespace

int matmul_operand(const KernelPlan& plan, int matmul, int k) {
  const BlockGraph& g = *plan.graph;
  const int t = g.op(matmul).inputs[k];
  const int norm = g.tensor(t).producer;
  if (plan.ops[norm].fold_into == matmul) return g.op(norm).inputs[0];
  return t;
}

Result<KernelPlan> fold_norms_into_matmuls(KernelPlan plan) {
  if (!plan.options.fold_norms || !plan.options.tensor_cores || !plan.has_mma_dtype) return plan;
  const BlockGraph& g = *plan.graph;
  for (int n = 0; n < static_cast<int>(g.ops().size()); ++n) {
    const BlockOp& op = g.op(n);
    if (op_category(op.kind) != Category::Norm || plan.ops[n].phase != Phase::Loop) continue;
    const int x = op.inputs[0];
    // The normalized tile: an input tile, or a transpose of one read in place (the matmul then
    // reads the input tile through the transpose, as it does without the norm).
    int base = x;
    if (const int tp = g.tensor(x).producer;
        g.op(tp).kind == OpKind::Transpose && plan.ops[tp].in_place)
      base = g.op(tp).inputs[0];
    const BlockOp& src = g.op(g.tensor(base).producer);
    if (src.kind != OpKind::Input || plan.input_dtypes[src.attrs.input_index] != plan.mma_dtype)
      continue;
    // A transposed A operand is read by ldmatrix in whole 16-row tiles only.
    const Shape& xs0 = g.tensor(x).shape;
    if (plan.tensors[x].stored_transposed && xs0[xs0.rank() - 2] % 16 != 0) continue;
    std::vector<int> cons = tensor_consumers(g, op.output);
    if (cons.size() != 1) continue;
    const int rank = g.tensor(x).shape.rank();
    // The norm of an input tile over its last dim read as B through a transpose read in place
    // (K [.., keys, d] normalized over d, then Kᵀ): the transpose then reads the input tile
    // (assign_storage) and the norm scales the product's columns.
    int operand = op.output;
    if (const int tr = cons[0]; g.op(tr).kind == OpKind::Transpose && plan.ops[tr].in_place &&
                                base == x && !plan.tensors[x].stored_transposed &&
                                op.attrs.dim == rank - 1) {
      operand = g.op(tr).output;
      cons = tensor_consumers(g, operand);
      if (cons.size() != 1) continue;
    }
    const int m = cons[0];
    const BlockOp& mm = g.op(m);
    if (op_category(mm.kind) != Category::Matmul || mm.inputs[0] == mm.inputs[1]) continue;
    if (plan.ops[m].phase != Phase::Loop) continue;
    OpPlan& mp = plan.ops[m];
    if (operand != op.output) {
      if (mm.inputs[1] != operand || mp.scale_b >= 0) continue;
      mp.scale_b = n;
    } else if (mm.inputs[0] == op.output && op.attrs.dim == rank - 1 && mp.scale_a < 0) {
      mp.scale_a = n;
    } else if (mm.inputs[1] == op.output && op.attrs.dim == rank - 2 && mp.scale_b < 0) {
      mp.scale_b = n;
    } else {
      continue;
    }
    plan.ops[n].fold_into = m;
  }
  return plan;
}

namespace {

bool is_elementwise_or_chain(OpKind k) {
  return is_elementwise(k) || op_category(k) == Category::Fused;
}

/// Whether tensor t can be read from shared memory by code running at matmul m1's level: made
/// before the loop or at a lower loop level, and stored (not a result fused into a matmul).
bool ready_at(const KernelPlan& plan, int t, int m1) {
  const OpPlan& src = plan.ops[plan.graph->tensor(t).producer];
  if (src.epilogue >= 0 || src.accumulate_into >= 0 || src.chain_into >= 0) return false;
  return src.phase != Phase::Loop || src.level < plan.ops[m1].level;
}

/// Whether the elementwise ops `ops` (each reading the one before) compute exp(x − m) exactly:
/// sub(x, m) then exp, or one thread graph of those two steps.
bool computes_shifted_exp(const BlockGraph& g, const std::vector<int>& ops, int x, int m) {
  if (ops.size() == 2) {
    const BlockOp& a = g.op(ops[0]);
    const BlockOp& b = g.op(ops[1]);
    return a.kind == OpKind::Sub && a.inputs == std::vector<int>{x, m} && b.kind == OpKind::Exp;
  }
  if (ops.size() != 1 || g.op(ops[0]).kind != OpKind::ThreadFused) return false;
  const BlockOp& t = g.op(ops[0]);
  if (t.chain.size() != 2 || t.inputs.size() != 2) return false;
  const int xi = t.inputs[0] == x ? 0 : t.inputs[1] == x ? 1 : -1;
  const int mi = t.inputs[0] == m ? 0 : t.inputs[1] == m ? 1 : -1;
  if (xi < 0 || mi < 0 || xi == mi) return false;
  const ThreadStep& s0 = t.chain[0];
  const ThreadStep& s1 = t.chain[1];
  return s0.kind == OpKind::Sub && s0.args[0] == xi && s0.args[1] == mi && s1.kind == OpKind::Exp &&
         s1.args[0] == 2;
}

}  // namespace

Result<KernelPlan> chain_matmuls(KernelPlan plan) {
  // Ragged tiles: only a key loop no tile divides (ragged_chain_supported); the chain masks
  // the absent columns of the first product (docs/codegen.md, "Ragged tiles"). Other ragged
  // graphs take the general path.
  if (!plan.options.chain_matmuls) return plan;
  const BlockGraph& g = *plan.graph;
  const int n = static_cast<int>(g.ops().size());
  for (int m1 = 0; m1 < n; ++m1) {
    const BlockOp& op = g.op(m1);
    OpPlan& p1 = plan.ops[m1];
    if (op_category(op.kind) != Category::Matmul || p1.phase != Phase::Loop) continue;
    if (p1.accumulate_into >= 0 || p1.chain_from >= 0 || p1.chain_into >= 0) continue;
    // A matmul padded to the mma step is in no chain (its fragments are not whole).
    if (!tensor_core_eligible(plan, m1) || matmul_needs_mma_padding(g, m1)) continue;
    const int x = p1.epilogue >= 0 ? g.op(p1.epilogue).output : op.output;
    const Shape& xs = g.tensor(x).shape;
    // The online softmax: a running max m of X, and elementwise ops of X and m (each the only
    // reader of the one before) computing the second matmul's operand E.
    int scan = -1, mx = -1;
    std::vector<int> chain_ops;
    int e = x;
    std::vector<int> xcons = tensor_consumers(g, x);
    for (int c : xcons)
      if (op_category(g.op(c).kind) == Category::Scan && plan.ops[c].phase == Phase::Loop &&
          scan < 0)
        scan = c;
    if (scan >= 0) {
      mx = g.op(scan).output;
      if (xcons.size() != 2) continue;
      int c = xcons[0] == scan ? xcons[1] : xcons[0];
      bool ok = true;
      for (;;) {
        const BlockOp& u = g.op(c);
        if (!is_elementwise_or_chain(u.kind) || plan.ops[c].phase != Phase::Loop ||
            plan.ops[c].host >= 0 || g.tensor(u.output).shape != xs) {
          ok = false;
          break;
        }
        for (int t : u.inputs) {
          bool known = t == x || t == mx;
          for (int o : chain_ops) known = known || t == g.op(o).output;
          if (!known && !ready_at(plan, t, m1)) ok = false;
        }
        chain_ops.push_back(c);
        const std::vector<int> next = tensor_consumers(g, u.output);
        if (next.size() == 1 && is_elementwise_or_chain(g.op(next[0]).kind) &&
            g.tensor(g.op(next[0]).output).shape == xs) {
          c = next[0];
          continue;
        }
        break;
      }
      if (!ok) continue;
      e = g.op(chain_ops.back()).output;
    }
    int m2 = -1;
    std::vector<int> reducers;
    bool ok = true;
    for (int c : tensor_consumers(g, e)) {
      const BlockOp& user = g.op(c);
      const bool loop_accum = user.attrs.fmap == kReplicate && plan.ops[c].phase == Phase::Loop;
      if (op_category(user.kind) == Category::Matmul && user.inputs[0] == e &&
          user.inputs[1] != e && m2 < 0) {
        m2 = c;
      } else if (is_last_dim_reducer(g, user) && loop_accum &&
                 (!plan.ragged.any() || user.kind == OpKind::AccumSumLd)) {
        // (Over ragged columns only sums: the masked columns count 0, not in a max or a mean.)
        reducers.push_back(c);
      } else if (scan >= 0 && user.kind == OpKind::AccumRescaleLd && loop_accum &&
                 user.inputs[0] == e && user.inputs[1] == mx) {
        reducers.push_back(c);  // the rescaled row sums of the online softmax
      } else {
        ok = false;
      }
    }
    if (!ok || m2 < 0) continue;
    OpPlan& p2 = plan.ops[m2];
    if (p2.phase != Phase::Loop || p2.epilogue >= 0) continue;
    if (!tensor_core_eligible(plan, m2) || matmul_needs_mma_padding(g, m2)) continue;
    if (!ragged_chain_supported(plan, m1, m2)) continue;
    // The second product accumulates into `accum`, or, with a running max, into
    // accum_rescale(P, m).
    int acc2 = p2.accumulate_into;
    if (acc2 < 0 && scan >= 0) {
      const std::vector<int> pc = tensor_consumers(g, g.op(m2).output);
      if (pc.size() == 1) {
        const BlockOp& a = g.op(pc[0]);
        if (a.kind == OpKind::AccumRescale && a.inputs[0] == g.op(m2).output && a.inputs[1] == mx &&
            a.attrs.fmap == kReplicate)
          acc2 = pc[0];
      }
    }
    if (acc2 < 0) continue;
    if (xs[xs.rank() - 1] % 16 != 0) continue;
    // The running max lives in registers: the chain's ops and its accumulators' shifts are its
    // only readers.
    if (scan >= 0) {
      for (int c : tensor_consumers(g, mx)) {
        bool known = c == acc2 && g.op(acc2).kind == OpKind::AccumRescale;
        for (int o : chain_ops) known = known || c == o;
        for (int r : reducers) known = known || (c == r && g.op(r).kind == OpKind::AccumRescaleLd);
        if (!known) ok = false;
      }
      if (!ok) continue;
    }
    p1.chain_into = m2;
    p2.chain_from = m1;
    p2.accumulate_into = acc2;
    for (int r : reducers) plan.ops[r].rowsum_of = m1;
    if (scan >= 0) {
      plan.ops[scan].scan_of = m1;
      p1.chain_ops = chain_ops;
      for (int o : chain_ops) plan.ops[o].host = m1;
      bool free = computes_shifted_exp(g, chain_ops, x, mx) && rescales(g.op(acc2).kind);
      for (int r : reducers) free = free && rescales(g.op(r).kind);
      p1.shift_free = free;
    }
  }
  return plan;
}

}  // namespace strata
