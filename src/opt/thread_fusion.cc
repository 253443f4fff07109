#include "strata/opt/thread_fusion.h"

#include <algorithm>
#include <cctype>
#include <map>

namespace strata {
namespace {

// True for names of the form "b<digits>": the default name of a block tensor, which stops
// meaning anything once tensor ids are renumbered.
bool is_default_name(const std::string& name) {
  if (name.size() < 2 || name[0] != 'b') return false;
  for (size_t i = 1; i < name.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return false;
  return true;
}

// For every op of `b`, the root of the elementwise chain it belongs to, or -1.
// An elementwise op joins the chain of its consumer when it has exactly one consumer op (an
// output saver counts as one) and that consumer is elementwise. Following these links from
// any op ends at the chain's root: its last op, whose result stays visible.
std::vector<int> chain_roots(const BlockGraph& b) {
  const int n = static_cast<int>(b.ops().size());
  std::vector<std::vector<int>> consumers(b.tensors().size());
  for (int i = 0; i < n; ++i)
    for (int t : b.op(i).inputs)
      if (consumers[t].empty() || consumers[t].back() != i) consumers[t].push_back(i);
  std::vector<int> next(n, -1);
  for (int i = 0; i < n; ++i) {
    const BlockOp& op = b.op(i);
    if (!is_elementwise(op.kind)) continue;
    const std::vector<int>& c = consumers[op.output];
    if (c.size() == 1 && is_elementwise(b.op(c[0]).kind)) next[i] = c[0];
  }
  std::vector<int> root(n, -1);
  for (int i = n - 1; i >= 0; --i) {  // consumers come later, so their root is known
    if (!is_elementwise(b.op(i).kind)) continue;
    root[i] = next[i] < 0 ? i : root[next[i]];
  }
  return root;
}

// The thread graph replacing the chain whose root is `root`: its inputs (old tensor ids, in
// order of first use) and its steps (chain ops in topological order).
struct Chain {
  std::vector<int> inputs;
  std::vector<ThreadStep> steps;
};

Chain build_chain(const BlockGraph& b, const std::vector<int>& root_of, int root) {
  Chain c;
  std::vector<int> members;
  for (int i = 0; i <= root; ++i)
    if (root_of[i] == root) members.push_back(i);
  std::map<int, int> step_of;  // op id → step index
  for (int m : members) {
    for (int t : b.op(m).inputs) {
      int p = b.tensor(t).producer;
      bool internal = p >= 0 && p < static_cast<int>(root_of.size()) && root_of[p] == root;
      if (!internal && std::find(c.inputs.begin(), c.inputs.end(), t) == c.inputs.end())
        c.inputs.push_back(t);
    }
    step_of[m] = static_cast<int>(step_of.size());
  }
  const int k = static_cast<int>(c.inputs.size());
  for (int m : members) {
    const BlockOp& op = b.op(m);
    ThreadStep s{op.kind, {0, 0}, op.attrs.scalar};
    for (size_t a = 0; a < op.inputs.size(); ++a) {
      int t = op.inputs[a];
      auto it = step_of.find(b.tensor(t).producer);
      if (it != step_of.end())
        s.args[a] = k + it->second;
      else
        s.args[a] =
            static_cast<int>(std::find(c.inputs.begin(), c.inputs.end(), t) - c.inputs.begin());
    }
    c.steps.push_back(s);
  }
  return c;
}

// Rebuilds `b` through the checking constructors with every chain of ≥ 2 ops fused; sets
// `changed` to false (and returns `b`) when there is no such chain.
Result<BlockGraph> fuse_block_graph(const BlockGraph& b, bool& changed) {
  const int n = static_cast<int>(b.ops().size());
  std::vector<int> root_of = chain_roots(b);
  std::vector<int> size(n, 0);
  for (int i = 0; i < n; ++i)
    if (root_of[i] >= 0) ++size[root_of[i]];
  changed = false;
  for (int i = 0; i < n; ++i) changed = changed || size[i] >= 2;
  if (!changed) return b;

  STRATA_ASSIGN_OR_RETURN(BlockGraph out,
                          BlockGraph::make(b.grid(), b.block_threads(), b.forloop()));
  std::vector<int> remap(b.tensors().size(), -1);
  auto mapped = [&](const std::vector<int>& ts) {
    std::vector<int> r;
    for (int t : ts) r.push_back(remap[t]);
    return r;
  };
  for (int i = 0; i < n; ++i) {
    const BlockOp& op = b.op(i);
    const bool fused = root_of[i] >= 0 && size[root_of[i]] >= 2;
    if (fused && root_of[i] != i) continue;  // folded into its chain's thread graph
    int t = -1;
    if (fused) {
      Chain c = build_chain(b, root_of, i);
      STRATA_ASSIGN_OR_RETURN(t, out.add_thread_graph(mapped(c.inputs), std::move(c.steps)));
    } else if (op.kind == OpKind::Input) {
      STRATA_ASSIGN_OR_RETURN(
          t, out.add_input(b.input_shape(op.attrs.input_index), op.attrs.imap, op.attrs.fmap));
    } else if (op.kind == OpKind::Output) {
      STRATA_RETURN_IF_ERROR(out.add_output(remap[op.inputs[0]], op.attrs.omap));
      continue;
    } else if (op.kind == OpKind::ThreadFused) {
      STRATA_ASSIGN_OR_RETURN(t, out.add_thread_graph(mapped(op.inputs), op.chain));
    } else {
      STRATA_ASSIGN_OR_RETURN(t, out.add_op(op.kind, mapped(op.inputs), op.attrs));
    }
    remap[op.output] = t;
    const std::string& name = b.tensor(op.output).name;
    if (!name.empty() && !is_default_name(name))
      STRATA_RETURN_IF_ERROR(out.set_tensor_name(t, name));
  }
  return out;
}

// Rebuilds the kernel graph op by op, replacing customized bodies by `bodies[op id]`.
Result<KernelGraph> rebuild(const KernelGraph& g,
                            const std::vector<std::shared_ptr<const BlockGraph>>& bodies) {
  KernelGraph out;
  for (size_t i = 0; i < g.ops().size(); ++i) {
    const KernelOp& op = g.op(static_cast<int>(i));
    if (op.kind == OpKind::Input) {
      const KernelTensor& t = g.tensor(op.outputs[0]);
      STRATA_RETURN_IF_ERROR(out.add_input(t.name, t.shape, t.dtype));
    } else if (op.kind == OpKind::Customized) {
      std::vector<std::string> names;
      for (int t : op.outputs) names.push_back(g.tensor(t).name);
      STRATA_RETURN_IF_ERROR(out.add_customized(op.inputs, *bodies[i], names));
    } else {
      STRATA_RETURN_IF_ERROR(
          out.add_op(op.kind, op.inputs, op.attrs, g.tensor(op.outputs[0]).name));
    }
  }
  for (int t : g.outputs()) STRATA_RETURN_IF_ERROR(out.mark_output(t));
  out.copy_parallel_interface(g);
  return out;
}

}  // namespace

KernelGraph fuse_thread_graphs(const KernelGraph& g) {
  std::vector<std::shared_ptr<const BlockGraph>> bodies(g.ops().size());
  bool any = false;
  for (size_t i = 0; i < g.ops().size(); ++i) {
    const KernelOp& op = g.op(static_cast<int>(i));
    if (op.kind != OpKind::Customized) continue;
    bodies[i] = op.body;
    bool changed = false;
    auto fused = fuse_block_graph(*op.body, changed);
    // A rebuild failure would be a bug in the rule; the unfused body is always correct.
    if (fused.ok() && changed) {
      bodies[i] = std::make_shared<const BlockGraph>(std::move(fused).value());
      any = true;
    }
  }
  if (!any) return g;
  auto out = rebuild(g, bodies);
  return out.ok() ? std::move(out).value() : g;
}

int count_thread_graphs(const KernelGraph& g) {
  int count = 0;
  for (const KernelOp& op : g.ops())
    if (op.body)
      for (const BlockOp& bop : op.body->ops()) count += bop.kind == OpKind::ThreadFused;
  return count;
}

}  // namespace strata
