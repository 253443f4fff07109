// Split-KV forms of online-softmax kernels (split_kv.h, docs/search.md "Split-KV").
#include "search/split_kv.h"

#include <optional>

#include "strata/ir/block_graph.h"
#include "strata/search/dim_classes.h"

namespace strata::search {
namespace {

/// The parts of an online-softmax body a split needs.
struct OnlineSoftmax {
  int scores = -1;          ///< the running max's input
  int running_max = -1;     ///< tensor id
  std::vector<int> accums;  ///< the rescaling accumulators' tensor ids, in op order
  int axis = -1;            ///< the free grid axis that splits the keys
  int rank = 0;             ///< of the accumulators and the saved tensors
};

/// The body's online softmax, when every accumulator rescales against its one running max,
/// post-loop ops read post-loop tensors only, every tile has one rank, a grid axis is free
/// and no used axis places its blocks along the last dim (where the parts go).
std::optional<OnlineSoftmax> match(const BlockGraph& b) {
  if (b.forloop() < 2 || b.loop_extent() <= 0) return std::nullopt;
  OnlineSoftmax m;
  std::vector<const BlockOp*> savers;
  for (const BlockOp& op : b.ops()) {
    const Category cat = op_category(op.kind);
    if (op.kind == OpKind::Input) continue;
    if (op.kind == OpKind::Output) {
      savers.push_back(&op);
      continue;
    }
    if (op.kind == OpKind::RunningMax) {
      if (m.running_max >= 0) return std::nullopt;
      m.running_max = op.output;
      m.scores = op.inputs[0];
      continue;
    }
    if (cat == Category::Accum) {
      if ((op.kind != OpKind::AccumRescale && op.kind != OpKind::AccumRescaleLd) ||
          op.inputs[1] != m.running_max)
        return std::nullopt;
      m.accums.push_back(op.output);
      continue;
    }
    if (b.tensor(op.output).stage == Stage::Post)
      for (int t : op.inputs)
        if (b.tensor(t).stage != Stage::Post) return std::nullopt;
  }
  if (m.running_max < 0 || m.accums.empty() || savers.empty()) return std::nullopt;
  m.rank = b.tensor(m.accums[0]).shape.rank();
  for (int t : m.accums)
    if (b.tensor(t).shape.rank() != m.rank) return std::nullopt;
  for (const BlockOp* s : savers)
    if (b.tensor(s->inputs[0]).shape.rank() != m.rank) return std::nullopt;
  for (int a = 0; a < 3 && m.axis < 0; ++a)
    if (b.grid()[a] == 1) m.axis = a;
  if (m.axis < 0) return std::nullopt;
  const GridMap& ref = savers[0]->attrs.omap;
  for (int a = 0; a < 3; ++a) {
    if (b.grid()[a] == 1) continue;
    for (const BlockOp* s : savers)
      if (s->attrs.omap[a] != ref[a]) return std::nullopt;
    const int k = ref[a];
    if (k < 0 || k == m.rank - 1) return std::nullopt;
    const int64_t want = b.tensor(savers[0]->inputs[0]).shape[k];
    for (int t : m.accums)
      if (b.tensor(t).shape[k] != want) return std::nullopt;
  }
  return m;
}

Dim3 with_axis(Dim3 d, int axis, int v) {
  (axis == 0 ? d.x : axis == 1 ? d.y : d.z) = v;
  return d;
}

/// The grid map of the parts: the saved tensors' dims for the used axes, the last dim for the
/// split axis (φ when `split` is false: the combine kernel's grid leaves it at 1).
GridMap parts_map(const BlockGraph& b, const OnlineSoftmax& m, bool split) {
  GridMap map = kAllReplicated;
  for (const BlockOp& op : b.ops())
    if (op.kind == OpKind::Output) {
      for (int a = 0; a < 3; ++a)
        if (b.grid()[a] > 1) map[a] = op.attrs.omap[a];
      break;
    }
  if (split) map[m.axis] = m.rank - 1;
  return map;
}

/// Kernel 1: the body on a part of the keys per block in `loops` iterations, saving the
/// accumulators and the part's max along the last dim.
Result<BlockGraph> partial_body(const BlockGraph& b, const OnlineSoftmax& m, int splits,
                                int loops) {
  STRATA_ASSIGN_OR_RETURN(BlockGraph nb, BlockGraph::make(with_axis(b.grid(), m.axis, splits),
                                                          b.block_threads(), loops));
  std::vector<int> map(b.tensors().size(), -1);
  auto mapped = [&](const std::vector<int>& ins) {
    std::vector<int> out;
    for (int t : ins) out.push_back(map[t]);
    return out;
  };
  for (const BlockOp& op : b.ops()) {
    if (op.kind == OpKind::Output) continue;
    if (op.kind == OpKind::Input) {
      GridMap imap = op.attrs.imap;
      if (op.attrs.fmap != kReplicate) imap[m.axis] = op.attrs.fmap;
      STRATA_ASSIGN_OR_RETURN(
          map[op.output], nb.add_input(b.input_shape(op.attrs.input_index), imap, op.attrs.fmap));
      continue;
    }
    if (b.tensor(op.output).stage == Stage::Post && op_category(op.kind) != Category::Accum)
      continue;  // recomputed by the combine kernel
    if (op.kind == OpKind::ThreadFused) {
      STRATA_ASSIGN_OR_RETURN(map[op.output], nb.add_thread_graph(mapped(op.inputs), op.chain));
    } else {
      STRATA_ASSIGN_OR_RETURN(map[op.output], nb.add_op(op.kind, mapped(op.inputs), op.attrs));
    }
  }
  STRATA_ASSIGN_OR_RETURN(int mx, nb.add_op(OpKind::AccumMaxLd, {map[m.scores]}));
  const GridMap omap = parts_map(b, m, true);
  for (int t : m.accums) STRATA_RETURN_IF_ERROR(nb.add_output(map[t], omap));
  STRATA_RETURN_IF_ERROR(nb.add_output(mx, omap));
  return nb;
}

/// Kernel 2: per part (the for-loop), w = e^(m_b − max_b m_b) and Σ w·acc_b per accumulator,
/// then the original post-loop ops and savers. Inputs: the accumulators' parts, the maxima's
/// parts per iteration, and the maxima's parts whole.
Result<BlockGraph> combine_body(const BlockGraph& b, const OnlineSoftmax& m,
                                const std::vector<Shape>& part_shapes, int splits) {
  STRATA_ASSIGN_OR_RETURN(BlockGraph nb, BlockGraph::make(b.grid(), b.block_threads(), splits));
  const GridMap imap = parts_map(b, m, false);
  const int last = m.rank - 1;
  std::vector<int> parts;
  for (size_t j = 0; j < m.accums.size(); ++j) {
    STRATA_ASSIGN_OR_RETURN(int t, nb.add_input(part_shapes[j], imap, last));
    parts.push_back(t);
  }
  STRATA_ASSIGN_OR_RETURN(int mb, nb.add_input(part_shapes.back(), imap, last));
  STRATA_ASSIGN_OR_RETURN(int mall, nb.add_input(part_shapes.back(), imap, kReplicate));
  OpAttrs over_parts;
  over_parts.dim = last;
  STRATA_ASSIGN_OR_RETURN(int top, nb.add_op(OpKind::Max, {mall}, over_parts));
  STRATA_ASSIGN_OR_RETURN(int shift, nb.add_op(OpKind::Sub, {mb, top}));
  STRATA_ASSIGN_OR_RETURN(int w, nb.add_op(OpKind::Exp, {shift}));
  std::vector<int> map(b.tensors().size(), -1);
  for (size_t j = 0; j < m.accums.size(); ++j) {
    STRATA_ASSIGN_OR_RETURN(int y, nb.add_op(OpKind::Mul, {parts[j], w}));
    STRATA_ASSIGN_OR_RETURN(map[m.accums[j]], nb.add_op(OpKind::AccumSum, {y}));
  }
  for (const BlockOp& op : b.ops()) {
    if (op.kind == OpKind::Input || op_category(op.kind) == Category::Accum) continue;
    std::vector<int> ins;
    for (int t : op.inputs) ins.push_back(map[t]);
    if (op.kind == OpKind::Output) {
      STRATA_RETURN_IF_ERROR(nb.add_output(ins[0], op.attrs.omap));
      continue;
    }
    if (b.tensor(op.output).stage != Stage::Post) continue;
    if (op.kind == OpKind::ThreadFused) {
      STRATA_ASSIGN_OR_RETURN(map[op.output], nb.add_thread_graph(ins, op.chain));
    } else {
      STRATA_ASSIGN_OR_RETURN(map[op.output], nb.add_op(op.kind, ins, op.attrs));
    }
  }
  return nb;
}

/// g with kernel op `k` replaced by its split-KV form with `splits` parts.
Result<KernelGraph> split_kernel(const KernelGraph& g, int k, const OnlineSoftmax& m, int splits,
                                 int loops) {
  const BlockGraph& body = *g.op(k).body;
  STRATA_ASSIGN_OR_RETURN(BlockGraph partial, partial_body(body, m, splits, loops));
  KernelGraph out;
  std::vector<int> map(g.tensors().size(), -1);
  for (int i = 0; i < static_cast<int>(g.ops().size()); ++i) {
    const KernelOp& op = g.op(i);
    if (op.kind == OpKind::Input) {
      const KernelTensor& t = g.tensor(op.outputs[0]);
      STRATA_ASSIGN_OR_RETURN(map[op.outputs[0]], out.add_input(t.name, t.shape, t.dtype));
      continue;
    }
    std::vector<int> ins;
    for (int t : op.inputs) ins.push_back(map[t]);
    std::vector<int> outs;
    if (i == k) {
      std::vector<Shape> shapes;
      for (int o = 0; o < partial.num_outputs(); ++o) shapes.push_back(partial.output_shape(o));
      STRATA_ASSIGN_OR_RETURN(std::vector<int> parts, out.add_customized(ins, std::move(partial)));
      STRATA_ASSIGN_OR_RETURN(BlockGraph combine, combine_body(body, m, shapes, splits));
      std::vector<int> cins(parts.begin(), parts.end());
      cins.push_back(parts.back());  // the maxima, whole
      STRATA_ASSIGN_OR_RETURN(outs, out.add_customized(cins, std::move(combine)));
    } else if (op.kind == OpKind::Customized) {
      STRATA_ASSIGN_OR_RETURN(outs, out.add_customized(ins, *op.body));
    } else {
      STRATA_ASSIGN_OR_RETURN(int t, out.add_op(op.kind, ins, op.attrs));
      outs.push_back(t);
    }
    for (size_t o = 0; o < outs.size(); ++o) map[op.outputs[o]] = outs[o];
  }
  for (int t : g.outputs()) STRATA_RETURN_IF_ERROR(out.mark_output(map[t], g.tensor(t).name));
  out.copy_parallel_interface(g);
  return out;
}

}  // namespace

std::vector<KernelGraph> split_kv_forms(const KernelGraph& g, int64_t max_blocks,
                                        int64_t min_blocks) {
  std::vector<KernelGraph> out;
  for (int k = 0; k < static_cast<int>(g.ops().size()); ++k) {
    const KernelOp& op = g.op(k);
    if (op.kind != OpKind::Customized) continue;
    const std::optional<OnlineSoftmax> m = match(*op.body);
    if (!m) continue;
    const int64_t f = op.body->forloop(), p = op.body->loop_extent();
    const int64_t blocks = op.body->grid().count();
    for (int splits : {2, 4, 8, 16, 32}) {
      if (splits > f || blocks * splits > max_blocks) break;
      if (blocks * splits < min_blocks) continue;
      // Each part is looped over as the search loops over an extent: tiles of the split
      // policy where some iteration count keeps them (docs/search.md, "Dimension classes").
      const int64_t part = (p + splits - 1) / splits, last = p - (splits - 1) * part;
      if (last <= 0) continue;
      for (int64_t loops : loop_extent_candidates(part, last, SplitPolicy{})) {
        auto split = split_kernel(g, k, *m, splits, static_cast<int>(loops));
        if (split.ok()) out.push_back(std::move(split).value());
      }
    }
  }
  return out;
}

}  // namespace strata::search
