#include "strata/opt/schedule.h"

#include <algorithm>

#include "strata/opt/loop_groups.h"

namespace strata {
namespace {

bool is_elementwise_or_chain(OpKind k) {
  return is_elementwise(k) || op_category(k) == Category::Fused;
}

}  // namespace

bool post_finalize_work(const KernelPlan& plan) {
  const BlockGraph& g = *plan.graph;
  for (size_t i = 0; i < g.ops().size(); ++i) {
    const BlockOp& op = g.op(static_cast<int>(i));
    if (op_category(op.kind) != Category::Accum) continue;
    if (accum_finalizes(op.kind)) return true;
    if (plan.tensors[op.output].home == TensorHome::Registers) return true;
    if (plan.ops[i].register_accum || plan.tensors[op.output].group_private) return true;
  }
  return false;
}

bool finalize_in_two_steps(const KernelPlan& plan) {
  const BlockGraph& g = *plan.graph;
  for (size_t i = 0; i < g.ops().size(); ++i) {
    const BlockOp& op = g.op(static_cast<int>(i));
    if (op_category(op.kind) != Category::Accum) continue;
    if (plan.groups > 1 && plan.tensors[op.output].group_private) return true;
    // Partials flushed from registers must all land before the mean / rms is taken.
    if (plan.ops[i].register_accum && accum_finalizes(op.kind)) return true;
  }
  return false;
}

bool rescales(OpKind kind) {
  return op_category(kind) == Category::Accum && op_info(kind).arity == 2;
}

bool accum_finalizes(OpKind kind) {
  const ReductionInfo* r = op_reduction(kind);
  return r && op_category(kind) == Category::Accum && r->finalize != Finalize::None;
}

StepTwo finalize_step_two(const KernelPlan& plan, int i) {
  const BlockOp& op = plan.graph->op(i);
  if (op_category(op.kind) != Category::Accum) return StepTwo::Nothing;
  const TensorPlan& tp = plan.tensors[op.output];
  const bool grouped = plan.groups > 1;
  if (grouped && tp.group_private)
    return tp.summed_at_read ? StepTwo::Nothing : StepTwo::SumPartials;
  // Without groups, row sums of a chain are finalized as they are written (step 1).
  const bool done_in_step1 = plan.ops[i].rowsum_of >= 0 && !grouped;
  return accum_finalizes(op.kind) && !done_in_step1 && tp.home == TensorHome::Shared
             ? StepTwo::FinalizeShared
             : StepTwo::Nothing;
}

bool finalize_step_two_work(const KernelPlan& plan) {
  for (int i = 0; i < static_cast<int>(plan.graph->ops().size()); ++i)
    if (finalize_step_two(plan, i) != StepTwo::Nothing) return true;
  return false;
}

bool barrier_before_post_level_one(const KernelPlan& plan) {
  if (!post_finalize_work(plan)) return false;  // the barrier right after the loop serves
  return !finalize_in_two_steps(plan) || finalize_step_two_work(plan);
}

void count_barriers(KernelPlan& plan) {
  if (plan.rowwise) {
    plan.barriers_prologue = plan.barriers_per_iteration = 0;
    plan.barriers_post = 0;
    for (const BlockOp& op : plan.graph->ops())
      if (is_reduction(op) && plan.scratch_bytes > 0) plan.barriers_post++;
    return;
  }
  plan.barriers_prologue = plan.num_levels(Phase::Prologue) - 1;
  // With loop groups these are group barriers, plus one before a stage is refilled unless the
  // group refills early (PlanOptions::early_refill), behind the top-of-iteration barrier.
  const bool late_refill = plan.groups > 1 && !refills_early(plan);
  plan.barriers_per_iteration =
      std::max(1, plan.num_levels(Phase::Loop) - 1) + (late_refill ? 1 : 0);
  // After the loop: one barrier, one between the two finalize steps, one before post level 1
  // when the finalize wrote what it reads, one before every later post level.
  const int levels = plan.num_levels(Phase::Post);
  plan.barriers_post = 1 + (finalize_in_two_steps(plan) ? 1 : 0) +
                       (levels > 1 && barrier_before_post_level_one(plan) ? 1 : 0) +
                       std::max(0, levels - 2);
}

Result<KernelPlan> schedule_block_ops(KernelPlan plan) {
  const BlockGraph& g = *plan.graph;
  const int n = static_cast<int>(g.ops().size());
  std::vector<bool> invariant(g.tensors().size(), false);
  auto producer_plan = [&](int t) -> const OpPlan& { return plan.ops[g.tensor(t).producer]; };
  // Level of tensor t as seen by a consumer in `phase`: its producer's level when produced in
  // the same phase, 0 when ready from an earlier phase.
  auto ready_level = [&](int t, Phase phase) {
    const OpPlan& p = producer_plan(t);
    return p.phase == phase ? p.level : 0;
  };
  for (int i = 0; i < n; ++i) {
    const BlockOp& op = g.op(i);
    OpPlan& p = plan.ops[i];
    Category cat = op_category(op.kind);
    if (cat == Category::Source) {
      bool inv = plan.options.hoist_invariants && op.attrs.fmap == kReplicate;
      invariant[op.output] = inv;
      p.phase = inv ? Phase::Prologue : Phase::Loop;
      p.level = 0;
      continue;
    }
    if (cat == Category::Sink) {
      p.phase = Phase::Post;
      p.level = 1 + ready_level(op.inputs[0], Phase::Post);
      continue;
    }
    if (cat == Category::Accum) {
      p.phase = Phase::Loop;
      int src = g.tensor(op.inputs[0]).producer;
      if (plan.ops[src].accumulate_into == i)
        p.level = plan.ops[src].phase == Phase::Loop ? plan.ops[src].level : 1;
      else if (p.rowsum_of >= 0)
        p.level = plan.ops[p.rowsum_of].level;
      else {
        int ready = 0;
        for (int t : op.inputs) ready = std::max(ready, ready_level(t, Phase::Loop));
        p.level = (p.in_place ? 0 : 1) + ready;
      }
      continue;
    }
    // Compute op (including thread graphs).
    Stage stage = g.tensor(op.output).stage;
    if (stage == Stage::Post) {
      p.phase = Phase::Post;
    } else {
      bool inv = plan.options.hoist_invariants;
      for (int t : op.inputs) inv = inv && invariant[t];
      invariant[op.output] = inv;
      p.phase = inv ? Phase::Prologue : Phase::Loop;
    }
    int level = 0;
    for (int t : op.inputs) level = std::max(level, ready_level(t, p.phase));
    // An inlined op runs inside its consumer: it is ready as soon as its inputs are.
    p.level = p.inline_into >= 0 || p.in_place ? level : level + 1;
    if (p.host >= 0) p.level = plan.ops[p.host].level;
    if (p.chain_from >= 0) p.level = plan.ops[p.chain_from].level;
    if (p.scan_of >= 0) p.level = plan.ops[p.scan_of].level;
  }
  for (auto& phase_levels : plan.levels) phase_levels.clear();
  for (int i = 0; i < n; ++i) {
    const OpPlan& p = plan.ops[i];
    auto& lv = plan.levels[static_cast<int>(p.phase)];
    if (static_cast<int>(lv.size()) <= p.level) lv.resize(p.level + 1);
    lv[p.level].push_back(i);
  }
  for (auto& phase_levels : plan.levels)
    if (phase_levels.empty()) phase_levels.resize(1);
  count_barriers(plan);
  return plan;
}

Result<KernelPlan> fuse_matmul_epilogues(KernelPlan plan) {
  if (!plan.options.fuse_epilogues) return plan;
  const BlockGraph& g = *plan.graph;
  const int n = static_cast<int>(g.ops().size());
  for (int i = 0; i < n; ++i) {
    const BlockOp& op = g.op(i);
    OpPlan& p = plan.ops[i];
    if (op_category(op.kind) != Category::Matmul || p.epilogue >= 0 || p.accumulate_into >= 0)
      continue;
    std::vector<int> cons = tensor_consumers(g, op.output);
    if (cons.size() != 1) continue;
    const int c = cons[0];
    const BlockOp& user = g.op(c);
    OpPlan& up = plan.ops[c];
    if (user.kind == OpKind::AccumSum && user.attrs.fmap == kReplicate && p.phase == Phase::Loop) {
      p.accumulate_into = c;
      continue;
    }
    if (!is_elementwise_or_chain(user.kind) || up.host >= 0 || up.phase != p.phase) continue;
    if (g.tensor(user.output).shape != g.tensor(op.output).shape) continue;
    bool ready = true;
    for (int t : user.inputs) {
      if (t == op.output) continue;
      const OpPlan& src = plan.ops[g.tensor(t).producer];
      if (src.phase == p.phase && src.level >= p.level) ready = false;
      if (src.epilogue >= 0 || src.accumulate_into >= 0) ready = false;
    }
    if (!ready) continue;
    p.epilogue = c;
    up.host = i;
  }
  return plan;
}

}  // namespace strata

namespace strata {

Result<KernelPlan> inline_elementwise_ops(KernelPlan plan) {
  if (!plan.options.inline_elementwise) return plan;
  const BlockGraph& g = *plan.graph;
  for (int i = 0; i < static_cast<int>(g.ops().size()); ++i) {
    const BlockOp& op = g.op(i);
    OpPlan& p = plan.ops[i];
    if (!is_elementwise_or_chain(op.kind) || p.host >= 0) continue;
    std::vector<int> cons = tensor_consumers(g, op.output);
    if (cons.size() != 1) continue;
    const BlockOp& user = g.op(cons[0]);
    const OpPlan& up = plan.ops[cons[0]];
    if (up.phase != p.phase || up.host >= 0) continue;
    bool ok = false;
    if (is_elementwise_or_chain(user.kind))
      ok = g.tensor(user.output).shape == g.tensor(op.output).shape;
    else
      ok = user.kind == OpKind::Output || user.kind == OpKind::AccumSum ||
           (rescales(user.kind) && user.inputs[0] == op.output && user.inputs[1] != op.output);
    if (ok) p.inline_into = cons[0];
  }
  return plan;
}

}  // namespace strata
