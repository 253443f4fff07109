#include "verify/demand.h"

#include <algorithm>

#include "util/mix.h"

namespace strata::verify {
namespace {

constexpr size_t kMaxBoxes = 32;

void add_box(Region& r, const Box& b) {
  if (b.empty()) return;
  for (const Box& x : r)
    if (x.intersect(b) == b) return;  // already covered
  r.push_back(b);
  if (r.size() > kMaxBoxes) r = Region{bounding_box(r)};
}

std::array<int, 3> block_coords(int64_t id, Dim3 grid) {
  return {static_cast<int>(id % grid.x), static_cast<int>((id / grid.x) % grid.y),
          static_cast<int>(id / (int64_t{grid.x} * grid.y))};
}

/// The box of output `o` that block `id` writes.
Box write_box(const BlockGraph& bg, int o, int64_t id) {
  const BlockOp& saver = bg.op(bg.output_op(o));
  const Shape& tile = bg.tensor(saver.inputs[0]).shape;
  int pad = 4 - tile.rank();
  auto b = block_coords(id, bg.grid());
  Box box;
  auto dims = padded_dims(tile);
  box.hi = dims;
  auto out = padded_dims(bg.output_shape(o));
  for (int g = 0; g < 3; ++g)
    if (bg.grid()[g] > 1) {
      int d = saver.attrs.omap[g] + pad;
      box.lo[d] = int64_t{b[g]} * dims[d];
      box.hi[d] = std::min(box.lo[d] + dims[d], out[d]);  // a ragged split's last tile
    }
  return box;
}

/// The part of a device tensor that block `id` reads through input iterator `attrs` over all
/// iterations.
Box read_box(const BlockGraph& bg, const OpAttrs& attrs, const Shape& kernel_shape, int64_t id) {
  Box box = Box::full(kernel_shape);
  int pad = 4 - kernel_shape.rank();
  auto b = block_coords(id, bg.grid());
  for (int g = 0; g < 3; ++g) {
    if (attrs.imap[g] == kReplicate) continue;
    int d = attrs.imap[g] + pad;
    const int64_t n = kernel_shape[attrs.imap[g]];
    const int64_t part = (n + bg.grid()[g] - 1) / bg.grid()[g];  // ⌈n/k⌉: ragged splits too
    box.lo[d] = int64_t{b[g]} * part;
    box.hi[d] = std::min(box.lo[d] + part, n);
  }
  return box;
}

/// Boxes of each input of predefined op `op` that computing `box` of its output reads.
void input_boxes(const KernelGraph& g, const KernelOp& op, const Box& box,
                 std::vector<Region>& need) {
  const Shape& out = g.tensor(op.outputs[0]).shape;
  int pad = 4 - out.rank();
  auto in_shape = [&](int k) { return g.tensor(op.inputs[k]).shape; };
  switch (op_category(op.kind)) {
    case Category::Unary:
    case Category::Binary:
    case Category::Collective:  // all_reduce over one rank: the identity (expand_ranks)
      for (size_t k = 0; k < op.inputs.size(); ++k) {
        Box b = box;
        auto dims = padded_dims(in_shape(static_cast<int>(k)));
        for (int d = 0; d < 4; ++d)
          if (dims[d] == 1) {
            b.lo[d] = 0;
            b.hi[d] = 1;
          }
        add_box(need[op.inputs[k]], b);
      }
      break;
    case Category::Reduce: {
      int d = op.attrs.dim + pad;
      int64_t grp = in_shape(0)[op.attrs.dim] / op.attrs.to;
      Box b = box;
      b.lo[d] *= grp;
      b.hi[d] *= grp;
      add_box(need[op.inputs[0]], b);
      break;
    }
    case Category::Norm: {
      int d = op.attrs.dim + pad;
      Box b = box;
      b.lo[d] = 0;
      b.hi[d] = padded_dims(in_shape(0))[d];
      add_box(need[op.inputs[0]], b);
      break;
    }
    case Category::Concat: {
      int d = op.attrs.dim + pad;
      int64_t split = padded_dims(in_shape(0))[d];
      Box a = box, b = box;
      a.hi[d] = std::min(a.hi[d], split);
      b.lo[d] = std::max(b.lo[d], split) - split;
      b.hi[d] -= split;
      add_box(need[op.inputs[0]], a);
      add_box(need[op.inputs[1]], b);
      break;
    }
    case Category::Matmul: {
      Box a = box, b = box;
      a.lo[3] = 0;
      a.hi[3] = padded_dims(in_shape(0))[3];
      b.lo[2] = 0;
      b.hi[2] = padded_dims(in_shape(1))[2];
      add_box(need[op.inputs[0]], a);
      add_box(need[op.inputs[1]], b);
      break;
    }
    case Category::Layout: {
      Box b = box;
      if (op.kind == OpKind::Transpose) {  // the last two dims swapped
        std::swap(b.lo[2], b.lo[3]);
        std::swap(b.hi[2], b.hi[3]);
      } else {  // slice: the same box shifted by start along its dim
        int d = op.attrs.dim + pad;
        b.lo[d] += op.attrs.start;
        b.hi[d] += op.attrs.start;
      }
      add_box(need[op.inputs[0]], b);
      break;
    }
    case Category::Source:
    case Category::Sink:
    case Category::Customized:
    case Category::Scan:
    case Category::Accum:
    case Category::Fused:
      break;  // not a predefined kernel op
  }
}

/// Up to `n` distinct pseudo-random values in [0, count), sorted.
std::vector<int64_t> sample(int64_t count, int n, uint64_t key) {
  std::vector<int64_t> out;
  if (count <= n) {
    for (int64_t i = 0; i < count; ++i) out.push_back(i);
    return out;
  }
  for (uint64_t c = 0; static_cast<int>(out.size()) < n; ++c) {
    auto v = static_cast<int64_t>(mix64(key + c * kGolden) % static_cast<uint64_t>(count));
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// Rough work of a compute op producing `out_elems` elements (multiply-adds).
double op_work(OpKind kind, const std::vector<Shape>& in, double out_elems) {
  switch (op_category(kind)) {
    case Category::Matmul:
      return out_elems * static_cast<double>(in[0][in[0].rank() - 1]);
    case Category::Reduce:
    case Category::Norm:
    case Category::Scan:
      return out_elems * 2 + static_cast<double>(in[0].numel());
    case Category::Unary:
    case Category::Binary:
      return out_elems * (op_info(kind).algebra == Algebra::Lax ? 1 : 8);
    case Category::Concat:
    case Category::Layout:
    case Category::Collective:
    case Category::Source:
    case Category::Sink:
    case Category::Customized:
    case Category::Accum:
    case Category::Fused:
      break;
  }
  return out_elems;
}

/// Rough work of one block of `bg`: every loop-body op F times, post-loop ops once.
double block_work(const BlockGraph& bg) {
  double w = 0;
  for (const BlockOp& op : bg.ops()) {
    if (op.kind == OpKind::Output) continue;
    const BlockTensor& out = bg.tensor(op.output);
    std::vector<Shape> in;
    for (int t : op.inputs) in.push_back(bg.tensor(t).shape);
    double e = static_cast<double>(out.shape.numel());
    double cost = op.kind == OpKind::Input                  ? e
                  : op_category(op.kind) == Category::Accum ? static_cast<double>(in[0].numel())
                                                            : op_work(op.kind, in, e);
    bool per_iteration = out.stage == Stage::Loop || op_category(op.kind) == Category::Accum;
    w += per_iteration ? cost * bg.forloop() : cost;
  }
  return w;
}

/// Rough work of evaluating `g` as `dp` says.
double plan_work(const KernelGraph& g, const DemandPlan& dp) {
  double w = 0;
  for (size_t i = 0; i < g.ops().size(); ++i) {
    const KernelOp& op = g.op(static_cast<int>(i));
    if (op.kind == OpKind::Input) continue;
    if (op.kind == OpKind::Customized) {
      w += block_work(*op.body) * static_cast<double>(dp.plan.blocks[i]->size());
      continue;
    }
    std::vector<Shape> in;
    for (int t : op.inputs) in.push_back(g.tensor(t).shape);
    for (const Box& b : *dp.plan.regions[i])
      w += op_work(op.kind, in, static_cast<double>(b.numel()));
  }
  return w;
}

/// Step 2: from the elements `need` of each tensor that must be computed, what each op computes
/// (dp.plan) and what it reads, down to the graph inputs (dp.inputs).
void plan_backward(const KernelGraph& g, std::vector<Region>& need, DemandPlan& dp) {
  const size_t nops = g.ops().size();
  dp.plan.blocks.resize(nops);
  dp.plan.regions.resize(nops);
  for (int i = static_cast<int>(nops) - 1; i >= 0; --i) {
    const KernelOp& op = g.op(i);
    if (op.kind == OpKind::Input) continue;
    if (op.kind != OpKind::Customized) {
      const Region& r = need[op.outputs[0]];
      dp.plan.regions[i] = r;
      for (const Box& b : r) input_boxes(g, op, b, need);
      continue;
    }
    const BlockGraph& bg = *op.body;
    std::vector<int64_t> ids;
    for (int64_t id = 0; id < bg.grid().count(); ++id) {
      bool wanted = false;
      for (int o = 0; o < bg.num_outputs() && !wanted; ++o)
        for (const Box& b : need[op.outputs[o]])
          if (write_box(bg, o, id).intersects(b)) {
            wanted = true;
            break;
          }
      if (wanted) ids.push_back(id);
    }
    std::vector<char> live = interp::live_block_ops(bg);
    for (int64_t id : ids)
      for (int k = 0; k < bg.num_inputs(); ++k) {
        int iop = bg.input_op(k);
        if (!live[iop]) continue;
        int kt = op.inputs[k];
        add_box(need[kt], read_box(bg, bg.op(iop).attrs, g.tensor(kt).shape, id));
      }
    dp.plan.blocks[i] = std::move(ids);
  }
  for (int t : g.inputs()) dp.inputs.push_back(need[t]);
}

}  // namespace

DemandPlan plan_with_samples(const KernelGraph& g, uint64_t seed, int samples) {
  const size_t nops = g.ops().size(), nt = g.tensors().size();
  DemandPlan dp;
  dp.plan.blocks.resize(nops);
  dp.plan.regions.resize(nops);
  std::vector<Region> need(nt);
  std::vector<std::vector<int64_t>> sampled(nops);

  // 1. What to compare.
  for (size_t j = 0; j < g.outputs().size(); ++j) {
    int t = g.outputs()[j];
    int prod = g.tensor(t).producer;
    const KernelOp& op = g.op(prod);
    Region cmp;
    if (op.kind == OpKind::Customized) {
      if (sampled[prod].empty())
        sampled[prod] = sample(op.body->grid().count(), samples,
                               mix64(seed ^ mix64(0xb10c + static_cast<uint64_t>(prod))));
      int o =
          static_cast<int>(std::find(op.outputs.begin(), op.outputs.end(), t) - op.outputs.begin());
      for (int64_t id : sampled[prod]) add_box(cmp, write_box(*op.body, o, id));
    } else {
      const Shape& s = g.tensor(t).shape;
      auto dims = padded_dims(s);
      for (int64_t flat : sample(s.numel(), samples, mix64(seed ^ mix64(0xe1e + j)))) {
        Box b;
        int64_t rest = flat;
        for (int d = 3; d >= 0; --d) {
          b.lo[d] = rest % dims[d];
          b.hi[d] = b.lo[d] + 1;
          rest /= dims[d];
        }
        add_box(cmp, b);
      }
    }
    for (const Box& b : cmp) add_box(need[t], b);
    dp.compare.push_back(std::move(cmp));
  }

  plan_backward(g, need, dp);
  return dp;
}

DemandPlan plan_for_compare(const KernelGraph& g, const std::vector<Region>& compare) {
  DemandPlan dp;
  std::vector<Region> need(g.tensors().size());
  for (size_t j = 0; j < g.outputs().size() && j < compare.size(); ++j)
    for (const Box& b : compare[j]) add_box(need[g.outputs()[j]], b);
  dp.compare = compare;
  plan_backward(g, need, dp);
  return dp;
}

DemandPlan plan_demand(const KernelGraph& g, uint64_t seed, int samples, double budget) {
  DemandPlan dp = plan_with_samples(g, seed, samples);
  while (samples > 1 && plan_work(g, dp) > budget) dp = plan_with_samples(g, seed, --samples);
  return dp;
}

}  // namespace strata::verify
