#include "search/layers.h"

#include <algorithm>
#include <climits>

namespace strata::search {

bool is_program_operand(const KernelGraph& p, int t) {
  for (;;) {
    const int producer = p.tensor(t).producer;
    if (producer < 0) return true;
    const KernelOp& op = p.op(producer);
    if (op.kind == OpKind::Input) return true;
    if (op_category(op.kind) != Category::Layout || op.inputs.empty()) return false;
    t = op.inputs[0];
  }
}

LayerSplit split_weight_layers(const KernelGraph& p) {
  const int nops = static_cast<int>(p.ops().size());
  LayerSplit s;
  s.segment_of.assign(nops, -1);
  std::vector<int> layer_of_tensor(p.tensors().size(), 0);
  std::vector<int> layer(nops, 0);
  for (int i = 0; i < nops; ++i) {
    const KernelOp& op = p.op(i);
    if (op.kind == OpKind::Input) continue;
    int l = 0;
    for (int t : op.inputs) l = std::max(l, layer_of_tensor[t]);
    if (op_category(op.kind) == Category::Matmul &&
        std::any_of(op.inputs.begin(), op.inputs.end(),
                    [&](int t) { return is_program_operand(p, t); }))
      ++l;
    layer[i] = l;
    for (int t : op.outputs) layer_of_tensor[t] = l;
    s.layers = std::max(s.layers, l);
  }
  // Layers 1.. are segments 0..; layer-0 ops join the earliest segment among their readers
  // (readers come later in op order, so a reverse walk sees them first), else the first.
  std::vector<int> readers_min(p.tensors().size(), INT_MAX);
  for (int i = nops - 1; i >= 0; --i) {
    const KernelOp& op = p.op(i);
    if (op.kind == OpKind::Input) continue;
    int seg = layer[i] - 1;
    if (layer[i] == 0) {
      seg = INT_MAX;
      for (int t : op.outputs) seg = std::min(seg, readers_min[t]);
      if (seg == INT_MAX) seg = 0;
    }
    s.segment_of[i] = seg;
    for (int t : op.inputs) readers_min[t] = std::min(readers_min[t], seg);
  }
  return s;
}

}  // namespace strata::search
