#include "strata/opt/loop_groups.h"

#include <algorithm>

#include "strata/opt/schedule.h"

namespace strata {
namespace {

int64_t align_up(int64_t v) {
  return (v + kSmemAlign - 1) / kSmemAlign * kSmemAlign;
}

bool has_tensor_cores(const KernelPlan& plan) {
  for (const OpPlan& p : plan.ops)
    if (p.matmul == MatmulPath::TensorCore) return true;
  return false;
}

}  // namespace

int64_t SmemNeeds::total(int g, int s) const {
  const int64_t loop = shared + g * (s * per_stage + per_group);
  return std::max(loop, post + g * post_per_group);
}

SmemNeeds smem_needs(const KernelPlan& plan) {
  const BlockGraph& g = *plan.graph;
  SmemNeeds n;
  for (int t = 0; t < static_cast<int>(g.tensors().size()); ++t) {
    const TensorPlan& tp = plan.tensors[t];
    if (tp.home != TensorHome::Shared && tp.home != TensorHome::Registers &&
        tp.home != TensorHome::Scale)
      continue;
    const BlockOp& prod = g.op(g.tensor(t).producer);
    const OpPlan& pp = plan.ops[g.tensor(t).producer];
    const int64_t bytes = align_up(tp.layout.stage_elems * dtype_size(tp.dtype));
    const bool accum = op_category(prod.kind) == Category::Accum;
    if (prod.kind == OpKind::Input && pp.phase == Phase::Loop) {
      n.per_stage += bytes;
    } else if ((accum || op_category(prod.kind) == Category::Scan) &&
               tp.home == TensorHome::Registers) {
      n.post_per_group += bytes;
    } else if (accum && prod.attrs.fmap == kReplicate) {
      n.per_group += bytes;
    } else if (accum || pp.phase == Phase::Prologue) {
      n.shared += bytes;
    } else if (pp.phase == Phase::Loop) {
      n.per_group += bytes;
    } else {
      n.post += bytes;
    }
  }
  n.shared += plan.scratch_bytes;
  n.post += n.shared;
  return n;
}

bool loop_groups_allowed(const KernelPlan& plan) {
  // Ragged tiles are masked without loop groups (docs/codegen.md, "Ragged tiles").
  if (plan.graph->forloop() < 2 || plan.rowwise || plan.ragged.any()) return false;
  // A running max and a rescaling accumulator carry their value from one iteration to the
  // next: groups would each see only their own iterations. The exception is the online softmax
  // of a matmul chain whose results do not depend on the shifts (OpPlan::shift_free): each
  // group keeps its own maxima, and the partials are combined with the groups' maxima.
  const BlockGraph& g = *plan.graph;
  auto free_chain = [&](int m1) { return m1 >= 0 && plan.ops[m1].shift_free; };
  for (int i = 0; i < static_cast<int>(g.ops().size()); ++i) {
    const BlockOp& op = g.op(i);
    const OpPlan& p = plan.ops[i];
    if (op_category(op.kind) == Category::Scan && !free_chain(p.scan_of)) return false;
    if (!rescales(op.kind)) continue;
    const int src = g.tensor(op.inputs[0]).producer;
    const bool fed = plan.ops[src].accumulate_into == i && free_chain(plan.ops[src].chain_from);
    if (!fed && !free_chain(p.rowsum_of)) return false;
  }
  return true;
}

bool refills_early(const KernelPlan& plan) {
  return plan.groups > 1 && plan.options.early_refill && plan.pipeline_stages >= 2;
}

int blocks_per_sm(const KernelPlan& plan) {
  const int64_t blocks = plan.graph->grid().count();
  const int sms = std::max(1, plan.options.sm_count);
  return static_cast<int>(std::clamp<int64_t>((blocks + sms - 1) / sms, 1, 8));
}

int64_t smem_budget(const KernelPlan& plan) {
  const int64_t per_block = plan.options.sm_smem / blocks_per_sm(plan) - 1024;
  return std::max<int64_t>(kSmemAlign,
                           std::min(plan.options.smem_limit, per_block / kSmemAlign * kSmemAlign));
}

void choose_groups_and_stages(KernelPlan& plan, const SmemNeeds& needs, int max_threads) {
  const int F = plan.graph->forloop();
  const int gt = std::max(32, plan.group_threads);
  const int64_t budget = smem_budget(plan);
  const int r = blocks_per_sm(plan);
  const PlanOptions& o = plan.options;
  auto min_stages = [&](int g) {
    return std::min(o.forced_stages > 0 ? o.forced_stages : 2, (F + g - 1) / g);
  };
  int groups = 1;
  if (loop_groups_allowed(plan) && o.loop_groups != 1) {
    const int thread_cap =
        std::min({max_threads, o.max_threads, has_tensor_cores(plan) ? 512 : 1024});
    int cap =
        std::min({F, gt > 32 ? (o.task_entry ? kTaskBarrierId - 1 : 15) : 32, thread_cap / gt});
    if (o.loop_groups > 1) {
      groups = std::max(1, std::min(o.loop_groups, cap));
      while (groups > 1 && needs.total(groups, min_stages(groups)) > o.smem_limit) --groups;
    } else {
      const int warps_wanted = std::max(1, 16 / r);
      cap = std::min(cap, std::max(1, warps_wanted / (gt / 32)));
      int best = 1;
      for (int g = cap; g >= 2 && best == 1; --g)
        if (needs.total(g, min_stages(g)) <= budget) best = g;
      // The fewest groups that need as few rounds of iterations as the most that fit.
      const int rounds = (F + best - 1) / best;
      groups = (F + rounds - 1) / rounds;
    }
  }
  plan.groups = groups;
  const int per_group_iters = (F + groups - 1) / groups;
  int stages = 1;
  if (F > 1 && needs.per_stage > 0) {
    if (o.forced_stages > 0) {
      stages = o.forced_stages;
    } else {
      const int64_t want = o.bytes_in_flight / r;
      stages = static_cast<int>((want + groups * needs.per_stage - 1) / (groups * needs.per_stage));
      // one stage is being consumed while the others load (groups refilling late keep all S
      // in flight once they refill)
      if (groups == 1 || o.early_refill) stages += 1;
      stages = std::clamp(stages, 2, std::max(2, o.max_stages));
      while (stages > 2 && needs.total(groups, stages) > budget) --stages;
    }
    stages = std::max(1, std::min(stages, per_group_iters));
  }
  plan.pipeline_stages = stages;
}

}  // namespace strata
