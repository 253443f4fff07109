#include "strata/opt/memory_plan.h"

#include <algorithm>

namespace strata {
namespace {

struct Item {
  int tensor;  ///< -1 for the reduction scratch
  int64_t bytes;
  int begin, end;
  int64_t offset = -1;
  int64_t align = kSmemAlign;  ///< the offset's alignment (TileLayout::align)
};

bool overlaps(const Item& a, const Item& b) {
  return a.begin <= b.end && b.begin <= a.end;
}

int64_t align_up(int64_t v, int64_t a = kSmemAlign) {
  return (v + a - 1) / a * a;
}

/// Live intervals of every tensor (Views included; they are merged into their host later).
void compute_intervals(KernelPlan& plan) {
  const BlockGraph& g = *plan.graph;
  const int loop_end = plan.position(Phase::Loop, plan.num_levels(Phase::Loop) - 1);
  auto pos = [&](int op) { return plan.position(plan.ops[op].phase, plan.ops[op].level); };
  // Where an op's inputs are read: an inlined op reads them where its consumer runs.
  auto use_op = [&](int op) {
    while (plan.ops[op].inline_into >= 0) op = plan.ops[op].inline_into;
    return op;
  };
  for (int t = 0; t < static_cast<int>(g.tensors().size()); ++t) {
    TensorPlan& tp = plan.tensors[t];
    const int prod = g.tensor(t).producer;
    const OpPlan& pp = plan.ops[prod];
    const OpKind kind = g.op(prod).kind;
    int begin = pos(prod), end = begin;
    std::vector<int> readers = tensor_consumers(g, t);
    // The input of an rms_norm folded into a matmul is read by that matmul too.
    for (size_t k = 0, n = readers.size(); k < n; ++k)
      if (plan.ops[readers[k]].fold_into >= 0) readers.push_back(plan.ops[readers[k]].fold_into);
    // A folded norm's inverse-RMS vector is read by its matmul (also through a transpose).
    if (pp.fold_into >= 0) readers.push_back(pp.fold_into);
    for (int c : readers) {
      c = use_op(c);
      const OpPlan& cp = plan.ops[c];
      // A tile read inside the loop from an earlier phase is read in every iteration.
      int use = (cp.phase == Phase::Loop && pp.phase != Phase::Loop) ? loop_end : pos(c);
      end = std::max(end, use);
    }
    if (kind == OpKind::Input && pp.phase == Phase::Loop) {
      begin = 0;  // prefetched before the loop; a loop-invariant tile may be read after it
      end = std::max(end, loop_end);
    } else if ((op_category(kind) == Category::Accum || op_category(kind) == Category::Scan) &&
               tp.home != TensorHome::View) {
      if (tp.home == TensorHome::Registers) {
        begin = plan.position(Phase::Post, 0);
        // A running max's copies are read by the combine of the rescaling accumulators.
        if (op_category(kind) == Category::Scan)
          end = plan.position(Phase::Post, plan.num_levels(Phase::Post) - 1);
      } else {
        begin = 0;  // zeroed (a running max: set to −∞) before the loop
        end = std::max(end, loop_end);
      }
    }
    tp.live_begin = begin;
    tp.live_end = std::max(begin, end);
  }
  // Views extend their host, layout ops read in place the storage they alias.
  auto storage = [&](int t) {
    const int r = alias_root(plan, t);  // an alias may view a view (F = 1 accum)
    return plan.tensors[r].home == TensorHome::View ? plan.tensors[r].view_of : r;
  };
  const int nt = static_cast<int>(plan.tensors.size());
  for (int t = 0; t < nt; ++t) {
    const TensorPlan& v = plan.tensors[t];
    if (v.home != TensorHome::View && v.home != TensorHome::Alias) continue;
    TensorPlan& h = plan.tensors[storage(t)];
    h.live_begin = std::min(h.live_begin, v.live_begin);
    h.live_end = std::max(h.live_end, v.live_end);
  }
  for (int t = 0; t < nt; ++t) {
    TensorPlan& v = plan.tensors[t];
    if (v.home != TensorHome::View && v.home != TensorHome::Alias) continue;
    v.live_begin = plan.tensors[storage(t)].live_begin;
    v.live_end = plan.tensors[storage(t)].live_end;
  }
}

/// First-fit placement, largest first. Returns the total bytes.
int64_t place(std::vector<Item>& items) {
  std::vector<int> order(items.size());
  for (size_t i = 0; i < items.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return items[a].bytes > items[b].bytes; });
  std::vector<int> placed;
  int64_t total = 0;
  for (int i : order) {
    Item& it = items[i];
    std::vector<int64_t> candidates{0};
    for (int j : placed)
      if (overlaps(it, items[j]))
        candidates.push_back(align_up(items[j].offset + items[j].bytes, it.align));
    std::sort(candidates.begin(), candidates.end());
    for (int64_t off : candidates) {
      bool free = true;
      for (int j : placed)
        if (overlaps(it, items[j]) && off < items[j].offset + items[j].bytes &&
            items[j].offset < off + it.bytes) {
          free = false;
          break;
        }
      if (free) {
        it.offset = off;
        break;
      }
    }
    placed.push_back(i);
    total = std::max(total, align_up(it.offset + it.bytes));
  }
  return total;
}

}  // namespace

Result<KernelPlan> plan_shared_memory(KernelPlan plan) {
  const BlockGraph& g = *plan.graph;
  compute_intervals(plan);
  const int last_pos = plan.position(Phase::Post, plan.num_levels(Phase::Post) - 1);
  for (;;) {
    std::vector<Item> items;
    for (int t = 0; t < static_cast<int>(g.tensors().size()); ++t) {
      TensorPlan& tp = plan.tensors[t];
      tp.offset = -1;
      if (tp.home != TensorHome::Shared && tp.home != TensorHome::Registers &&
          tp.home != TensorHome::Scale)
        continue;
      tp.group_elems = tp.layout.stage_elems * tp.stages;
      tp.bytes = tp.group_elems * dtype_size(tp.dtype) * (tp.group_private ? plan.groups : 1);
      items.push_back({t, tp.bytes, tp.live_begin, tp.live_end, -1, tp.layout.align});
    }
    if (plan.scratch_bytes > 0) items.push_back({-1, plan.scratch_bytes, 0, last_pos});
    int64_t total = place(items);
    for (const Item& it : items) {
      if (it.tensor >= 0)
        plan.tensors[it.tensor].offset = it.offset;
      else
        plan.scratch_offset = it.offset;
    }
    plan.smem_bytes = total;
    if (total <= plan.options.smem_limit) return plan;
    if (plan.pipeline_stages > 2 && plan.options.forced_stages == 0) {
      plan.pipeline_stages--;
      for (int i = 0; i < static_cast<int>(g.ops().size()); ++i)
        if (g.op(i).kind == OpKind::Input && plan.ops[i].phase == Phase::Loop)
          plan.tensors[g.op(i).output].stages = plan.pipeline_stages;
      continue;
    }
    std::vector<int> big;
    for (int t = 0; t < static_cast<int>(g.tensors().size()); ++t)
      if (plan.tensors[t].offset >= 0) big.push_back(t);
    std::sort(big.begin(), big.end(),
              [&](int a, int b) { return plan.tensors[a].bytes > plan.tensors[b].bytes; });
    std::string detail;
    for (size_t i = 0; i < big.size() && i < 3; ++i)
      detail += (i ? ", " : "") + g.tensor_name(big[i]) + " " +
                std::to_string(plan.tensors[big[i]].bytes) + " B";
    return make_error("block graph needs " + std::to_string(total) +
                      " bytes of shared memory per block (largest tiles: " + detail +
                      "), more than the limit of " + std::to_string(plan.options.smem_limit) +
                      " bytes");
  }
}

}  // namespace strata
