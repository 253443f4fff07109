#include "strata/opt/library_epilogues.h"

#include <algorithm>

namespace strata {
namespace {

/// Whether `bias` broadcasts along the rows of `result`: aligned from the right, every dim is
/// 1 but the last, which is N.
bool column_bias(const Shape& bias, const Shape& result) {
  const int rb = bias.rank(), rr = result.rank();
  if (rb < 1 || rb > rr || bias[rb - 1] != result[rr - 1]) return false;
  for (int d = 0; d + 1 < rb; ++d)
    if (bias[d] != 1) return false;
  return true;
}

}  // namespace

std::vector<std::optional<LibraryEpilogue>> plan_library_epilogues(
    const KernelGraph& g, const LibraryMatmulReader& library_call,
    const std::vector<std::optional<KernelView>>& views, const std::vector<DType>& dtype_of) {
  const int nops = static_cast<int>(g.ops().size());
  const int nt = static_cast<int>(g.tensors().size());
  std::vector<std::optional<LibraryEpilogue>> out(nops);
  if (!library_call) return out;
  std::vector<std::vector<int>> readers(nt);
  for (int i = 0; i < nops; ++i)
    for (int t : g.op(i).inputs) readers[t].push_back(i);
  std::vector<bool> graph_output(nt, false);
  for (int t : g.outputs()) graph_output[t] = true;
  auto dtype = [&](int t) { return dtype_of.empty() ? g.tensor(t).dtype : dtype_of[t]; };
  auto viewed = [&](int t) { return t < static_cast<int>(views.size()) && views[t]; };
  // The one op reading `t`, when `t` may stay unstored: else -1.
  auto sole_reader = [&](int t) {
    return readers[t].size() == 1 && !graph_output[t] && !viewed(t) ? readers[t][0] : -1;
  };
  for (int i = 0; i < nops; ++i) {
    const KernelOp& op = g.op(i);
    if (op_category(op.kind) != Category::Matmul || !library_call(i)) continue;
    LibraryEpilogue e;
    e.matmul = i;
    int t = op.outputs[0];
    const DType type = dtype(t);
    int next = sole_reader(t);
    if (next >= 0 && g.op(next).kind == OpKind::Add) {
      const KernelOp& add = g.op(next);
      const int other = add.inputs[0] == t ? add.inputs[1] : add.inputs[0];
      const int u = add.outputs[0];
      // The call runs where the matmul is: the bias must be ready by then.
      const int bias_op = g.tensor(other).producer;
      if (other != t && !viewed(other) && bias_op < i && dtype(other) == type && dtype(u) == type &&
          column_bias(g.tensor(other).shape, g.tensor(t).shape) &&
          g.tensor(u).shape == g.tensor(t).shape) {
        e.bias = other;
        e.absorbed.push_back(next);
        t = u;
        next = sole_reader(t);
      }
    }
    if (next >= 0 && (g.op(next).kind == OpKind::Relu || g.op(next).kind == OpKind::Gelu) &&
        dtype(g.op(next).outputs[0]) == type) {
      e.activation =
          g.op(next).kind == OpKind::Relu ? EpilogueActivation::Relu : EpilogueActivation::Gelu;
      e.absorbed.push_back(next);
      t = g.op(next).outputs[0];
    }
    if (e.absorbed.empty()) continue;
    e.result = t;
    out[i] = std::move(e);
  }
  return out;
}

bool is_absorbed_epilogue(const std::vector<std::optional<LibraryEpilogue>>& epilogues, int op) {
  for (const auto& e : epilogues)
    if (e && std::find(e->absorbed.begin(), e->absorbed.end(), op) != e->absorbed.end())
      return true;
  return false;
}

bool is_epilogue_intermediate(const std::vector<std::optional<LibraryEpilogue>>& epilogues,
                              const KernelGraph& g, int t) {
  for (const auto& e : epilogues) {
    if (!e) continue;
    if (g.op(e->matmul).outputs[0] == t) return true;
    for (int a : e->absorbed)
      if (g.op(a).outputs[0] == t && t != e->result) return true;
  }
  return false;
}

}  // namespace strata
