#include "strata/ir/graph_dot.h"

#include "strata/ir/graph_print.h"

namespace strata {
namespace {

/// A DOT double-quoted string; `\n` in `text` becomes a centered line break.
std::string quoted(const std::string& text) {
  std::string s = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      s += '\\';
      s += c;
    } else if (c == '\n') {
      s += "\\n";
    } else if (c == '\r') {
      continue;
    } else {
      s += c;
    }
  }
  return s + "\"";
}

std::string tensor_node(int t) {
  return "t" + std::to_string(t);
}
std::string kernel_node(int op) {
  return "k" + std::to_string(op);
}
std::string block_node(int kop, int bop) {
  return "k" + std::to_string(kop) + "_b" + std::to_string(bop);
}

/// Node attributes of a block op: its shape and colour say what kind of op it is.
std::string block_op_node(const BlockGraph& g, const BlockOp& op, const KernelGraph& kg,
                          const KernelOp& kop) {
  std::string label, style;
  std::string result =
      op.output >= 0 ? g.tensor_name(op.output) + g.tensor(op.output).shape.str() : "";
  if (op.kind == OpKind::Input) {
    label = "iterator: " + kg.tensor_name(kop.inputs[op.attrs.input_index]) + "\n" + result;
    style = "shape=invhouse, style=filled, fillcolor=\"#dbe9f6\"";
  } else if (op.kind == OpKind::Output) {
    label = "save " + g.tensor_name(op.inputs[0]);
    style = "shape=house, style=filled, fillcolor=\"#dbe9f6\"";
  } else {
    label = std::string(op_name(op.kind));
    std::string attrs = format_op_attrs(op.kind, op.attrs);
    if (!attrs.empty()) label += " " + attrs;
    if (op.kind == OpKind::ThreadFused) {
      std::string chain = format_thread_chain(g, op);
      for (size_t p; (p = chain.find("; ")) != std::string::npos;) chain.replace(p, 2, "\n");
      label += "\n" + chain;
    }
    label += "\n" + result;
    if (op_category(op.kind) == Category::Accum) {
      style = "shape=hexagon, style=filled, fillcolor=\"#fde9c9\"";
    } else if (g.tensor(op.output).stage == Stage::Post) {
      style = "shape=box, style=filled, fillcolor=\"#e2f0d9\"";
    } else {
      style = "shape=box";
    }
    if (op.kind == OpKind::ThreadFused) style += ", peripheries=2";
  }
  return "label=" + quoted(label) + ", " + style;
}

void emit_customized(const KernelGraph& kg, int kop_id, std::string& out) {
  const KernelOp& kop = kg.op(kop_id);
  const BlockGraph& g = *kop.body;
  Dim3 grid = g.grid();
  std::string title = "customized #" + std::to_string(kop_id) + "\ngrid (" +
                      std::to_string(grid.x) + ", " + std::to_string(grid.y) + ", " +
                      std::to_string(grid.z) + ")  block " + std::to_string(g.block_threads()) +
                      "  forloop " + std::to_string(g.forloop());
  out += "  subgraph cluster_" + kernel_node(kop_id) + " {\n";
  out += "    label=" + quoted(title) + ";\n";
  out += "    style=rounded; color=\"#555555\";\n";
  std::string edges;
  size_t saved = 0;
  for (size_t b = 0; b < g.ops().size(); ++b) {
    const BlockOp& op = g.ops()[b];
    std::string id = block_node(kop_id, static_cast<int>(b));
    out += "    " + id + " [" + block_op_node(g, op, kg, kop) + "];\n";
    for (int t : op.inputs)
      edges += "  " + block_node(kop_id, g.tensor(t).producer) + " -> " + id + ";\n";
    if (op.kind == OpKind::Input) {
      edges +=
          "  " + tensor_node(kop.inputs[op.attrs.input_index]) + " -> " + id + " [label=" +
          quoted("imap=" + format_grid_map(op.attrs.imap) + " fmap=" + format_dim(op.attrs.fmap)) +
          "];\n";
    } else if (op.kind == OpKind::Output && saved < kop.outputs.size()) {
      edges += "  " + id + " -> " + tensor_node(kop.outputs[saved++]) +
               " [label=" + quoted("omap=" + format_grid_map(op.attrs.omap)) + "];\n";
    }
  }
  out += "  }\n" + edges;
}

}  // namespace

std::string kernel_graph_to_dot(const KernelGraph& g) {
  std::string out = "digraph strata {\n";
  out += "  graph [rankdir=TB, fontname=\"Helvetica\", fontsize=11];\n";
  out += "  node [fontname=\"Helvetica\", fontsize=10];\n";
  out += "  edge [fontname=\"Helvetica\", fontsize=9];\n";
  std::vector<bool> is_output(g.tensors().size(), false);
  for (int t : g.outputs()) is_output[t] = true;
  for (size_t t = 0; t < g.tensors().size(); ++t) {
    const KernelTensor& kt = g.tensor(static_cast<int>(t));
    bool input = g.op(kt.producer).kind == OpKind::Input;
    std::string attrs = "label=" +
                        quoted(g.tensor_name(static_cast<int>(t)) + "\n" +
                               std::string(dtype_name(kt.dtype)) + kt.shape.str()) +
                        ", shape=ellipse";
    if (input) attrs += ", style=filled, fillcolor=\"#eeeeee\"";
    if (is_output[t]) attrs += ", peripheries=2";
    out += "  " + tensor_node(static_cast<int>(t)) + " [" + attrs + "];\n";
  }
  for (size_t id = 0; id < g.ops().size(); ++id) {
    const KernelOp& op = g.op(static_cast<int>(id));
    if (op.kind == OpKind::Input) continue;
    if (op.kind == OpKind::Customized && op.body) {
      emit_customized(g, static_cast<int>(id), out);
      continue;
    }
    std::string label(op_name(op.kind));
    std::string attrs = format_op_attrs(op.kind, op.attrs);
    if (!attrs.empty()) label += "\n" + attrs;
    std::string node = kernel_node(static_cast<int>(id));
    out += "  " + node + " [label=" + quoted(label) + ", shape=box, style=rounded];\n";
    for (int t : op.inputs) out += "  " + tensor_node(t) + " -> " + node + ";\n";
    for (int t : op.outputs) out += "  " + node + " -> " + tensor_node(t) + ";\n";
  }
  out += "}\n";
  return out;
}

}  // namespace strata
