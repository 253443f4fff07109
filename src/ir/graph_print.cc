#include "strata/ir/graph_print.h"

#include <charconv>

namespace strata {
namespace {

/// Shortest decimal text that reads back as the same double.
std::string format_real(double v) {
  char buf[64];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, p) : std::to_string(v);
}

std::string join_names(const KernelGraph& g, const std::vector<int>& ids) {
  std::string s;
  for (int t : ids) {
    if (!s.empty()) s += ", ";
    s += g.tensor_name(t);
  }
  return s;
}

/// "X: f16[2, 4096]".
std::string typed_tensor(const KernelGraph& g, int t) {
  return g.tensor_name(t) + ": " + std::string(dtype_name(g.tensor(t).dtype)) +
         g.tensor(t).shape.str();
}

/// Where a block op runs, as a column of the listing.
const char* stage_label(const BlockGraph& g, const BlockOp& op) {
  if (op.kind == OpKind::Input) return "in   ";
  if (op.kind == OpKind::Output) return "save ";
  if (op_category(op.kind) == Category::Accum) return "accum";
  return g.tensor(op.output).stage == Stage::Loop ? "loop " : "post ";
}

void format_block_graph(const KernelGraph& kg, const KernelOp& kop, std::string& out) {
  const BlockGraph& g = *kop.body;
  const std::string indent = "    ";
  Dim3 grid = g.grid();
  out += indent + "grid (" + std::to_string(grid.x) + ", " + std::to_string(grid.y) + ", " +
         std::to_string(grid.z) + "), block " + std::to_string(g.block_threads()) + ", forloop " +
         std::to_string(g.forloop()) + "\n";
  size_t saved = 0;
  for (const BlockOp& op : g.ops()) {
    std::string line = indent + stage_label(g, op) + " ";
    if (op.kind == OpKind::Output) {
      size_t k = saved++;
      std::string dest = k < kop.outputs.size() ? kg.tensor_name(kop.outputs[k]) +
                                                      kg.tensor(kop.outputs[k]).shape.str()
                                                : "output " + std::to_string(k);
      line +=
          g.tensor_name(op.inputs[0]) + " -> " + dest + "  omap=" + format_grid_map(op.attrs.omap);
      out += line + "\n";
      continue;
    }
    line += g.tensor_name(op.output) + g.tensor(op.output).shape.str() + " = ";
    if (op.kind == OpKind::Input) {
      int i = op.attrs.input_index;
      line += kg.tensor_name(kop.inputs[i]) + "  imap=" + format_grid_map(op.attrs.imap) +
              " fmap=" + format_dim(op.attrs.fmap);
    } else {
      line += std::string(op_name(op.kind)) + "(";
      for (size_t k = 0; k < op.inputs.size(); ++k)
        line += (k ? ", " : "") + g.tensor_name(op.inputs[k]);
      std::string attrs = format_op_attrs(op.kind, op.attrs);
      if (!attrs.empty()) line += ", " + attrs;
      line += ")";
      if (op.kind == OpKind::ThreadFused) line += " { " + format_thread_chain(g, op) + " }";
    }
    out += line + "\n";
  }
}

}  // namespace

std::string format_dim(int d) {
  return d == kReplicate ? "φ" : std::to_string(d);
}

std::string format_grid_map(const GridMap& m) {
  return "{x:" + format_dim(m[0]) + ", y:" + format_dim(m[1]) + ", z:" + format_dim(m[2]) + "}";
}

std::string format_op_attrs(OpKind kind, const OpAttrs& a) {
  std::string s;
  auto add = [&](const std::string& item) { s += (s.empty() ? "" : ", ") + item; };
  if (op_category(kind) == Category::Accum) add("fmap=" + format_dim(a.fmap));
  for (const AttrSpec& spec : attr_specs(kind)) {
    std::string name(spec.name);
    if (spec.is_int) {
      int64_t v = get_int_attr(a, spec.field);
      if (spec.required || spec.field == AttrField::Dim ||
          v != static_cast<int64_t>(spec.default_value))
        add(name + "=" + std::to_string(v));
    } else {
      double v = get_real_attr(a, spec.field);
      if (spec.required || v != spec.default_value) add(name + "=" + format_real(v));
    }
  }
  return s;
}

std::string format_thread_chain(const BlockGraph& g, const BlockOp& op) {
  const int n = static_cast<int>(op.inputs.size());
  auto value = [&](int v) {
    if (v >= 0 && v < n) return g.tensor_name(op.inputs[v]);
    return "s" + std::to_string(v - n);
  };
  std::string s;
  for (size_t j = 0; j < op.chain.size(); ++j) {
    const ThreadStep& step = op.chain[j];
    if (j) s += "; ";
    s += "s" + std::to_string(j) + " = " + std::string(op_name(step.kind)) + "(";
    for (int a = 0; a < op_info(step.kind).arity; ++a) s += (a ? ", " : "") + value(step.args[a]);
    std::string attrs = format_op_attrs(step.kind, step_attrs(step));
    if (!attrs.empty()) s += ", " + attrs;
    s += ")";
  }
  return s;
}

std::string format_graph(const KernelGraph& g) {
  std::string out;
  if (g.ranks() > 1) out += "ranks " + std::to_string(g.ranks()) + "\n";
  auto shard = [](int d) {
    return d == kReplicated ? std::string() : " shard(dim=" + std::to_string(d) + ")";
  };
  for (size_t i = 0; i < g.inputs().size(); ++i)
    out += "input " + typed_tensor(g, g.inputs()[i]) + shard(g.input_shard(static_cast<int>(i))) +
           "\n";
  for (size_t id = 0; id < g.ops().size(); ++id) {
    const KernelOp& op = g.op(static_cast<int>(id));
    if (op.kind == OpKind::Input) continue;
    std::string lhs;
    for (int t : op.outputs)
      lhs += (lhs.empty() ? "" : ", ") + g.tensor_name(t) + g.tensor(t).shape.str();
    std::string call = std::string(op_name(op.kind)) + "(" + join_names(g, op.inputs);
    std::string attrs = op.kind == OpKind::Customized ? "" : format_op_attrs(op.kind, op.attrs);
    if (!attrs.empty()) call += ", " + attrs;
    out += lhs + " = " + call + ")\n";
    if (op.kind == OpKind::Customized && op.body) format_block_graph(g, op, out);
  }
  if (!g.outputs().empty()) {
    out += "output ";
    for (size_t i = 0; i < g.outputs().size(); ++i)
      out += (i ? ", " : "") + g.tensor_name(g.outputs()[i]) +
             shard(g.output_shard(static_cast<int>(i)));
    out += "\n";
  }
  return out;
}

std::string summarize_graph(const KernelGraph& g) {
  int kernel_ops = 0, block_ops = 0;
  for (const KernelOp& op : g.ops()) {
    if (op.kind == OpKind::Input) continue;
    ++kernel_ops;
    if (op.body) block_ops += static_cast<int>(op.body->ops().size());
  }
  int customized = g.num_customized();
  auto count = [](int n, const char* noun) {
    return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
  };
  std::string s = customized == 0 ? "plain program (predefined ops only): "
                                  : "μGraph with customized kernels: ";
  s += count(static_cast<int>(g.inputs().size()), "input") + ", " +
       count(static_cast<int>(g.outputs().size()), "output") + ", " +
       count(kernel_ops, "kernel op") + ", " + count(customized, "customized kernel") + ", " +
       count(block_ops, "block op") +
       (g.ranks() > 1 ? ", per rank of " + std::to_string(g.ranks()) + " ranks" : "") + ".";
  auto list = [&](const std::vector<int>& ids) {
    std::string l;
    for (int t : ids) l += (l.empty() ? "" : ", ") + typed_tensor(g, t);
    return l.empty() ? std::string("none") : l;
  };
  s += " Inputs: " + list(g.inputs()) + ". Outputs: " + list(g.outputs()) + ".";
  return s;
}

}  // namespace strata
