// The op table (include/strata/ir/op_table.def) and the program-op signatures of the parser, as
// Python data: the package builds its op helpers and capture guards from these, so a new row of
// the table appears in Python without Python changes.
#include <nanobind/stl/string.h>

#include "bindings.h"
#include "strata/ir/op.h"
#include "strata/frontend/program_parser.h"

namespace strata::py {
namespace {

const char* category_name(Category c) {
  switch (c) {
    case Category::Source:
      return "source";
    case Category::Sink:
      return "sink";
    case Category::Customized:
      return "customized";
    case Category::Matmul:
      return "matmul";
    case Category::Unary:
      return "unary";
    case Category::Binary:
      return "binary";
    case Category::Reduce:
      return "reduce";
    case Category::Norm:
      return "norm";
    case Category::Concat:
      return "concat";
    case Category::Layout:
      return "layout";
    case Category::Scan:
      return "scan";
    case Category::Accum:
      return "accum";
    case Category::Fused:
      return "fused";
    case Category::Collective:
      return "collective";
  }
  return "unknown";
}

const char* algebra_name(Algebra a) {
  switch (a) {
    case Algebra::Lax:
      return "lax";
    case Algebra::Exp:
      return "exp";
    case Algebra::Opaque:
      return "opaque";
    case Algebra::Max:
      return "max";
  }
  return "unknown";
}

const char* param_kind_name(ProgramParam::Kind k) {
  switch (k) {
    case ProgramParam::Kind::Tensor:
      return "tensor";
    case ProgramParam::Kind::Int:
      return "int";
    case ProgramParam::Kind::Real:
      return "real";
  }
  return "unknown";
}

}  // namespace

void bind_ops(nb::module_& m) {
  m.def(
      "op_table",
      [] {
        nb::list rows;
        for (const OpInfo& info : op_table()) {
          nb::dict row;
          row["name"] = std::string(info.name);
          row["arity"] = info.arity;
          row["category"] = category_name(info.category);
          row["algebra"] = algebra_name(info.algebra);
          row["kernel_level"] = (info.levels & kKernel) != 0;
          row["block_level"] = (info.levels & kBlock) != 0;
          row["program_op"] = is_program_op(info.kind);
          nb::list params;
          for (const ProgramParam& p : program_op_signature(info.kind)) {
            nb::dict d;
            d["name"] = p.name;
            d["kind"] = param_kind_name(p.kind);
            d["required"] = p.required;
            d["default"] = p.default_value;
            d["alias"] = p.alias;
            params.append(d);
          }
          row["params"] = params;
          row["signature"] = is_program_op(info.kind) ? program_op_signature_text(info.kind) : "";
          rows.append(row);
        }
        // Composite program ops (softmax, layer_norm): the parser expands them.
        for (const std::string& name : program_composite_names()) {
          nb::dict row;
          row["name"] = name;
          row["arity"] = 1;
          row["category"] = "composite";
          row["algebra"] = "composite";
          row["kernel_level"] = true;
          row["block_level"] = false;
          row["program_op"] = true;
          nb::list params;
          for (const ProgramParam& p : program_composite_signature(name)) {
            nb::dict d;
            d["name"] = p.name;
            d["kind"] = param_kind_name(p.kind);
            d["required"] = p.required;
            d["default"] = p.default_value;
            d["alias"] = p.alias;
            params.append(d);
          }
          row["params"] = params;
          row["signature"] = program_composite_signature_text(name);
          rows.append(row);
        }
        return rows;
      },
      "The op table: one dict per op (name, arity, category, algebra, levels, and for program "
      "ops the call signature: params with name, kind tensor|int|real, required, default, "
      "alias), then the composite program ops (category 'composite').");
}

}  // namespace strata::py
