// strata._core.Graph: a kernel graph (a program of predefined ops, or a μGraph with customized
// kernels) built only through the parser or the JSON reader, so every graph Python holds has
// passed the checking constructors (docs/architecture.md, "Invariants").
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "strata/ir/graph_io.h"
#include "strata/frontend/graph_loader.h"
#include "strata/ir/graph_json.h"
#include "strata/ir/graph_print.h"
#include "strata/ir/kernel_graph.h"
#include "strata/frontend/program_parser.h"

namespace strata::py {
namespace {

using TensorInfo = std::tuple<std::string, std::string, std::vector<int64_t>>;

std::vector<TensorInfo> tensor_infos(const KernelGraph& g, const std::vector<int>& ids) {
  std::vector<TensorInfo> out;
  for (int t : ids)
    out.emplace_back(g.tensor_name(t), std::string(dtype_name(g.tensor(t).dtype)),
                     g.tensor(t).shape.dims());
  return out;
}

}  // namespace

void bind_graph(nb::module_& m) {
  nb::class_<KernelGraph>(m, "Graph",
                          "A checked kernel graph: a program (predefined ops) or a μGraph.")
      .def_static(
          "parse",
          [](const std::string& text, const std::string& filename) {
            return unwrap(parse_program(text, filename));
          },
          nb::arg("text"), nb::arg("filename") = "<string>",
          "Parses .strata program text (docs/program-format.md).")
      .def_static(
          "load", [](const std::string& path) { return unwrap(load_graph(path)); }, nb::arg("path"),
          "Loads a .strata program or a μGraph JSON file.")
      .def_static(
          "from_json",
          [](const std::string& text, const std::string& origin) {
            Json doc = unwrap(parse_json_text(text, origin));
            return unwrap(kernel_graph_from_json(doc, origin));
          },
          nb::arg("text"), nb::arg("origin") = "<json>",
          "Builds a graph from μGraph JSON text (docs/mugraph-json.md).")
      .def(
          "to_json",
          [](const KernelGraph& g, int indent) { return kernel_graph_to_json(g).dump(indent); },
          nb::arg("indent") = -1, "The canonical μGraph JSON text.")
      .def("format", &format_graph, "A multi-line listing of every level of the graph.")
      .def("summary", &summarize_graph, "A one-paragraph summary.")
      .def_prop_ro(
          "inputs", [](const KernelGraph& g) { return tensor_infos(g, g.inputs()); },
          "(name, dtype, shape) of every input, in order.")
      .def_prop_ro(
          "outputs", [](const KernelGraph& g) { return tensor_infos(g, g.outputs()); },
          "(name, dtype, shape) of every output, in order.")
      .def_prop_ro(
          "op_names",
          [](const KernelGraph& g) {
            std::vector<std::string> names;
            for (const KernelOp& op : g.ops())
              if (op.kind != OpKind::Input) names.emplace_back(op_name(op.kind));
            return names;
          },
          "The kernel-level ops in order (inputs excluded).")
      .def_prop_ro("num_customized", &KernelGraph::num_customized)
      .def("structurally_equal", &KernelGraph::structurally_equal, nb::arg("other"),
           "Same ops, attributes, shapes and block graphs (names ignored).");
}

}  // namespace strata::py
