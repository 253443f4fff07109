#include "strata/ir/rank_expansion.h"

#include <algorithm>
#include <string>

namespace strata {

namespace {

Shape full_shape(const Shape& s, int dim, int ranks) {
  Shape full = s;
  if (dim != kReplicated) full[dim] = s[dim] * ranks;
  return full;
}

}  // namespace

Shape full_input_shape(const KernelGraph& g, int index) {
  return full_shape(g.tensor(g.inputs()[index]).shape, g.input_shard(index), g.ranks());
}

Shape full_output_shape(const KernelGraph& g, int index) {
  return full_shape(g.tensor(g.outputs()[index]).shape, g.output_shard(index), g.ranks());
}

std::vector<bool> rank_varying_tensors(const KernelGraph& g) {
  std::vector<bool> varies(g.tensors().size(), false);
  for (size_t i = 0; i < g.inputs().size(); ++i)
    varies[g.inputs()[i]] = g.input_shard(static_cast<int>(i)) != kReplicated;
  for (const KernelOp& op : g.ops()) {
    if (op.kind == OpKind::Input) continue;
    bool v = false;
    if (op_category(op.kind) != Category::Collective)
      for (int t : op.inputs) v = v || varies[t];
    for (int t : op.outputs) varies[t] = v;
  }
  return varies;
}

Status check_replicated_outputs(const KernelGraph& g) {
  std::vector<bool> varies = rank_varying_tensors(g);
  for (size_t o = 0; o < g.outputs().size(); ++o) {
    if (g.output_shard(static_cast<int>(o)) != kReplicated || !varies[g.outputs()[o]]) continue;
    return make_error("output `" + g.tensor_name(g.outputs()[o]) +
                      "` is declared replicated but differs between the ranks (it depends on a "
                      "sharded input not summed by all_reduce); expected all_reduce of it, or "
                      "`output " +
                      g.tensor_name(g.outputs()[o]) + " shard(dim=D)`");
  }
  return Status::success();
}

Result<KernelGraph> expand_ranks(const KernelGraph& g) {
  STRATA_RETURN_IF_ERROR(g.check_complete());
  STRATA_RETURN_IF_ERROR(check_replicated_outputs(g));
  const int R = g.ranks();
  KernelGraph out;
  // val[r][t]: the tensor of `out` holding rank r's value of g's tensor t. A replicated value
  // has the same id for every rank.
  std::vector<std::vector<int>> val(R, std::vector<int>(g.tensors().size(), -1));
  auto replicated = [&](const std::vector<int>& ts) {
    for (int t : ts)
      for (int r = 1; r < R; ++r)
        if (val[r][t] != val[0][t]) return false;
    return true;
  };
  int input_pos = 0;
  for (size_t i = 0; i < g.ops().size(); ++i) {
    const KernelOp& op = g.op(static_cast<int>(i));
    const std::string at =
        "kernel op #" + std::to_string(i) + " (" + std::string(op_name(op.kind)) + ")";
    if (op.kind == OpKind::Input) {
      const int t = op.outputs[0];
      const KernelTensor& x = g.tensor(t);
      const int d = g.input_shard(input_pos++);
      Shape full = x.shape;
      if (d != kReplicated) full[d] = x.shape[d] * R;
      STRATA_ASSIGN_OR_RETURN(int ft, out.add_input(x.name, full, x.dtype));
      for (int r = 0; r < R; ++r) {
        if (d == kReplicated || R == 1) {
          val[r][t] = ft;
          continue;
        }
        OpAttrs a;
        a.dim = d;
        a.start = r * x.shape[d];
        a.end = (r + 1) * x.shape[d];
        STRATA_ASSIGN_OR_RETURN(val[r][t], out.add_op(OpKind::Slice, {ft}, a));
      }
      continue;
    }
    if (op_category(op.kind) == Category::Collective) {  // the sum over the ranks
      const int x = op.inputs[0];
      int sum = val[0][x];
      if (!replicated(op.inputs)) {
        for (int r = 1; r < R; ++r) {
          auto s = out.add_op(OpKind::Add, {sum, val[r][x]});
          if (!s.ok()) return make_error(at + ": " + s.error().message);
          sum = *s;
        }
      } else if (R > 1) {  // every rank holds the same x: R·x
        OpAttrs a;
        a.scalar = R;
        auto s = out.add_op(OpKind::MulScalar, {sum}, a);
        if (!s.ok()) return make_error(at + ": " + s.error().message);
        sum = *s;
      }
      for (int r = 0; r < R; ++r) val[r][op.outputs[0]] = sum;
      continue;
    }
    const bool once = replicated(op.inputs);
    for (int r = 0; r < R; ++r) {
      if (once && r > 0) {
        for (int t : op.outputs) val[r][t] = val[0][t];
        continue;
      }
      std::vector<int> ins;
      for (int t : op.inputs) ins.push_back(val[r][t]);
      if (op.kind == OpKind::Customized) {
        auto outs = out.add_customized(ins, *op.body);
        if (!outs.ok()) return make_error(at + ": " + outs.error().message);
        for (size_t k = 0; k < op.outputs.size(); ++k) val[r][op.outputs[k]] = (*outs)[k];
      } else {
        auto t = out.add_op(op.kind, ins, op.attrs);
        if (!t.ok()) return make_error(at + ": " + t.error().message);
        val[r][op.outputs[0]] = *t;
      }
    }
  }
  for (size_t o = 0; o < g.outputs().size(); ++o) {
    const int t = g.outputs()[o];
    const int d = g.output_shard(static_cast<int>(o));
    int v = val[0][t];
    if (d != kReplicated) {
      for (int r = 1; r < R; ++r) {
        OpAttrs a;
        a.dim = d;
        STRATA_ASSIGN_OR_RETURN(v, out.add_op(OpKind::Concat, {v, val[r][t]}, a));
      }
    }
    // Two outputs may meet in one tensor of the unsharded form (x and all_reduce(x) over one
    // rank): the second becomes a copy, x · 1.
    if (std::find(out.outputs().begin(), out.outputs().end(), v) != out.outputs().end()) {
      OpAttrs a;
      a.scalar = 1.0;
      STRATA_ASSIGN_OR_RETURN(v, out.add_op(OpKind::MulScalar, {v}, a));
    }
    const std::string& name = g.tensor(t).name;
    const bool free = !name.empty() && out.tensor(v).name.empty() && out.find_tensor(name) < 0;
    STRATA_RETURN_IF_ERROR(out.mark_output(v, free ? name : ""));
  }
  return out;
}

}  // namespace strata
