#include "strata/graph_json.h"

#include <climits>
#include <map>

namespace strata {
namespace {

constexpr const char* kFormat = "strata-mugraph";
constexpr int kVersion = 1;

Json dim_or_null(int d) {
  return d == kReplicate ? Json(nullptr) : Json(d);
}

Json grid_map_json(const GridMap& m) {
  return Json::array({dim_or_null(m[0]), dim_or_null(m[1]), dim_or_null(m[2])});
}

/// The op's attributes (its attribute set in the op table), in canonical key order;
/// accumulators add their fmap. Optional attributes at their default are left out.
void write_attrs(Json& j, OpKind kind, const OpAttrs& a) {
  if (op_category(kind) == Category::Accum) j["fmap"] = dim_or_null(a.fmap);
  for (const AttrSpec& spec : attr_specs(kind)) {
    if (spec.is_int) {
      int64_t v = get_int_attr(a, spec.field);
      if (spec.required || spec.field == AttrField::Dim ||
          v != static_cast<int64_t>(spec.default_value))
        j[std::string(spec.name)] = v;
    } else {
      double v = get_real_attr(a, spec.field);
      if (spec.required || v != spec.default_value) j[std::string(spec.name)] = v;
    }
  }
}

// ---- reading ---------------------------------------------------------------------------

/// Error at a JSON path.
Error at(const std::string& path, const std::string& msg) {
  return make_error(path + ": " + msg);
}

Result<const Json*> member(const Json& obj, const char* key, const std::string& path) {
  if (!obj.is_object()) return at(path, "expected an object");
  auto it = obj.find(key);
  if (it == obj.end()) return at(path, std::string("missing key \"") + key + "\"");
  return &*it;
}

Result<int64_t> get_int(const Json& v, const std::string& path) {
  if (!v.is_number_integer()) return at(path, "expected an integer, got " + v.dump());
  return v.get<int64_t>();
}

Result<std::string> get_string(const Json& v, const std::string& path) {
  if (!v.is_string()) return at(path, "expected a string, got " + v.dump());
  return v.get<std::string>();
}

/// A dimension index or null (φ).
Result<int> get_dim_or_null(const Json& v, const std::string& path) {
  if (v.is_null()) return kReplicate;
  if (!v.is_number_integer())
    return at(path, "expected a dimension index or null, got " + v.dump());
  int d = v.get<int>();
  if (d < 0) return at(path, "expected a non-negative dimension index or null, got " + v.dump());
  return d;
}

Result<GridMap> get_grid_map(const Json& v, const std::string& path) {
  if (!v.is_array() || v.size() != 3)
    return at(path, "expected [x, y, z] with a dimension index or null each, got " + v.dump());
  GridMap m;
  for (int a = 0; a < 3; ++a) {
    STRATA_ASSIGN_OR_RETURN(m[a], get_dim_or_null(v[a], path + "[" + std::to_string(a) + "]"));
  }
  return m;
}

Result<std::vector<int64_t>> get_int_list(const Json& v, const std::string& path) {
  if (!v.is_array()) return at(path, "expected an array of integers, got " + v.dump());
  std::vector<int64_t> out;
  for (size_t i = 0; i < v.size(); ++i) {
    STRATA_ASSIGN_OR_RETURN(int64_t x, get_int(v[i], path + "[" + std::to_string(i) + "]"));
    out.push_back(x);
  }
  return out;
}

/// Reads the attributes of the op's attribute set (defaults for optional ones left out);
/// accumulators also read fmap.
Result<OpAttrs> read_attrs(const Json& j, OpKind kind, const std::string& path) {
  OpAttrs a;
  if (op_category(kind) == Category::Accum) {
    if (auto it = j.find("fmap"); it != j.end()) {
      STRATA_ASSIGN_OR_RETURN(a.fmap, get_dim_or_null(*it, path + ".fmap"));
    }
  }
  for (const AttrSpec& spec : attr_specs(kind)) {
    std::string key(spec.name), p = path + "." + key;
    auto it = j.find(key);
    if (it == j.end()) {
      if (spec.required) return at(path, "missing key \"" + key + "\"");
      set_real_attr(a, spec.field, spec.default_value);
      continue;
    }
    if (spec.is_int) {
      STRATA_ASSIGN_OR_RETURN(int64_t v, get_int(*it, p));
      if (spec.field == AttrField::Dim && (v < INT_MIN || v > INT_MAX))
        return at(p, "expected a dimension index, got " + it->dump());
      set_int_attr(a, spec.field, v);
    } else {
      if (!it->is_number()) return at(p, "expected a number, got " + it->dump());
      set_real_attr(a, spec.field, it->get<double>());
    }
  }
  return a;
}

Result<OpKind> read_kind(const Json& j, const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(const Json* o, member(j, "op", path));
  STRATA_ASSIGN_OR_RETURN(std::string name, get_string(*o, path + ".op"));
  auto k = parse_op_kind(name);
  if (!k) return at(path + ".op", "unknown op `" + name + "`");
  return *k;
}

/// Resolves a list of tensor names through a name table.
Result<std::vector<int>> read_refs(const Json& j, const std::map<std::string, int>& names,
                                   const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(const Json* ins, member(j, "inputs", path));
  if (!ins->is_array()) return at(path + ".inputs", "expected an array of tensor names");
  std::vector<int> out;
  for (size_t i = 0; i < ins->size(); ++i) {
    std::string p = path + ".inputs[" + std::to_string(i) + "]";
    STRATA_ASSIGN_OR_RETURN(std::string n, get_string((*ins)[i], p));
    auto it = names.find(n);
    if (it == names.end()) return at(p, "unknown tensor `" + n + "`");
    out.push_back(it->second);
  }
  return out;
}

Status bind_name(std::map<std::string, int>& names, const std::string& name, int id,
                 const std::string& path) {
  if (!names.emplace(name, id).second) return at(path, "duplicate tensor name `" + name + "`");
  return Status::success();
}

Result<std::vector<ThreadStep>> read_steps(const Json& j, const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(const Json* steps, member(j, "steps", path));
  if (!steps->is_array()) return at(path + ".steps", "expected an array");
  std::vector<ThreadStep> chain;
  for (size_t i = 0; i < steps->size(); ++i) {
    std::string p = path + ".steps[" + std::to_string(i) + "]";
    const Json& s = (*steps)[i];
    STRATA_ASSIGN_OR_RETURN(OpKind kind, read_kind(s, p));
    STRATA_ASSIGN_OR_RETURN(OpAttrs attrs, read_attrs(s, kind, p));
    ThreadStep step = make_step(kind, {0, 0}, attrs);
    STRATA_ASSIGN_OR_RETURN(const Json* args, member(s, "args", p));
    STRATA_ASSIGN_OR_RETURN(std::vector<int64_t> a, get_int_list(*args, p + ".args"));
    if (a.size() > 2) return at(p + ".args", "a thread step takes at most two arguments");
    for (size_t k = 0; k < a.size(); ++k) step.args[k] = static_cast<int>(a[k]);
    if (static_cast<int>(a.size()) != op_info(kind).arity)
      return at(p + ".args", std::string(op_name(kind)) + " takes " +
                                 std::to_string(op_info(kind).arity) + " argument(s)");
    chain.push_back(step);
  }
  return chain;
}

std::pair<int, int> line_col(const std::string& text, size_t byte) {
  int line = 1, col = 1;
  for (size_t i = 0; i < byte && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return {line, col};
}

}  // namespace

Json block_graph_to_json(const BlockGraph& g) {
  Json j;
  j["grid"] = Json::array({g.grid().x, g.grid().y, g.grid().z});
  j["block"] = g.block_threads();
  j["forloop"] = g.forloop();
  Json ops = Json::array();
  for (const BlockOp& op : g.ops()) {
    Json o;
    o["op"] = std::string(op_name(op.kind));
    if (op.kind == OpKind::Input) {
      o["input"] = op.attrs.input_index;
      o["imap"] = grid_map_json(op.attrs.imap);
      o["fmap"] = dim_or_null(op.attrs.fmap);
    } else {
      Json ins = Json::array();
      for (int t : op.inputs) ins.push_back(g.tensor_name(t));
      o["inputs"] = ins;
    }
    if (op.kind == OpKind::Output) {
      o["omap"] = grid_map_json(op.attrs.omap);
    } else {
      o["output"] = g.tensor_name(op.output);
    }
    write_attrs(o, op.kind, op.attrs);
    if (op.kind == OpKind::ThreadFused) {
      Json steps = Json::array();
      for (const ThreadStep& s : op.chain) {
        Json js;
        js["op"] = std::string(op_name(s.kind));
        Json args = Json::array();
        for (int a = 0; a < op_info(s.kind).arity; ++a) args.push_back(s.args[a]);
        js["args"] = args;
        write_attrs(js, s.kind, step_attrs(s));
        steps.push_back(js);
      }
      o["steps"] = steps;
    }
    ops.push_back(o);
  }
  j["ops"] = ops;
  return j;
}

Json kernel_graph_to_json(const KernelGraph& g) {
  Json j;
  j["format"] = kFormat;
  j["version"] = kVersion;
  Json inputs = Json::array();
  for (int t : g.inputs()) {
    const KernelTensor& kt = g.tensor(t);
    Json in;
    in["name"] = g.tensor_name(t);
    in["shape"] = kt.shape.dims();
    in["dtype"] = std::string(dtype_name(kt.dtype));
    inputs.push_back(in);
  }
  j["inputs"] = inputs;
  Json ops = Json::array();
  for (const KernelOp& op : g.ops()) {
    if (op.kind == OpKind::Input) continue;
    Json o;
    o["op"] = std::string(op_name(op.kind));
    Json ins = Json::array();
    for (int t : op.inputs) ins.push_back(g.tensor_name(t));
    o["inputs"] = ins;
    if (op.kind == OpKind::Customized) {
      Json outs = Json::array();
      for (int t : op.outputs) outs.push_back(g.tensor_name(t));
      o["outputs"] = outs;
      o["block_graph"] = block_graph_to_json(*op.body);
    } else {
      o["output"] = g.tensor_name(op.outputs[0]);
      write_attrs(o, op.kind, op.attrs);
    }
    ops.push_back(o);
  }
  j["ops"] = ops;
  Json outs = Json::array();
  for (int t : g.outputs()) outs.push_back(g.tensor_name(t));
  j["outputs"] = outs;
  return j;
}

Result<BlockGraph> block_graph_from_json(const Json& doc, const std::vector<Shape>& input_shapes,
                                         const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(const Json* grid_j, member(doc, "grid", path));
  STRATA_ASSIGN_OR_RETURN(std::vector<int64_t> grid, get_int_list(*grid_j, path + ".grid"));
  if (grid.size() != 3) return at(path + ".grid", "expected [x, y, z]");
  STRATA_ASSIGN_OR_RETURN(const Json* block_j, member(doc, "block", path));
  STRATA_ASSIGN_OR_RETURN(int64_t block, get_int(*block_j, path + ".block"));
  STRATA_ASSIGN_OR_RETURN(const Json* loop_j, member(doc, "forloop", path));
  STRATA_ASSIGN_OR_RETURN(int64_t forloop, get_int(*loop_j, path + ".forloop"));
  auto made = BlockGraph::make(
      Dim3{static_cast<int>(grid[0]), static_cast<int>(grid[1]), static_cast<int>(grid[2])},
      static_cast<int>(block), static_cast<int>(forloop));
  if (!made.ok()) return at(path, made.error().message);
  BlockGraph g = std::move(made).value();

  STRATA_ASSIGN_OR_RETURN(const Json* ops, member(doc, "ops", path));
  if (!ops->is_array()) return at(path + ".ops", "expected an array of ops");
  std::map<std::string, int> names;
  for (size_t i = 0; i < ops->size(); ++i) {
    std::string p = path + ".ops[" + std::to_string(i) + "]";
    const Json& o = (*ops)[i];
    STRATA_ASSIGN_OR_RETURN(OpKind kind, read_kind(o, p));
    Result<int> made_t = -1;
    if (kind == OpKind::Input) {
      STRATA_ASSIGN_OR_RETURN(const Json* idx_j, member(o, "input", p));
      STRATA_ASSIGN_OR_RETURN(int64_t idx, get_int(*idx_j, p + ".input"));
      if (idx != g.num_inputs())
        return at(p + ".input", "input iterators must appear in input order; expected " +
                                    std::to_string(g.num_inputs()) + ", got " +
                                    std::to_string(idx));
      if (idx >= static_cast<int64_t>(input_shapes.size()))
        return at(p + ".input", "the customized op has only " +
                                    std::to_string(input_shapes.size()) + " input(s)");
      STRATA_ASSIGN_OR_RETURN(const Json* imap_j, member(o, "imap", p));
      STRATA_ASSIGN_OR_RETURN(GridMap imap, get_grid_map(*imap_j, p + ".imap"));
      int fmap = kReplicate;
      if (auto it = o.find("fmap"); it != o.end()) {
        STRATA_ASSIGN_OR_RETURN(fmap, get_dim_or_null(*it, p + ".fmap"));
      }
      made_t = g.add_input(input_shapes[idx], imap, fmap);
    } else if (kind == OpKind::Output) {
      STRATA_ASSIGN_OR_RETURN(std::vector<int> refs, read_refs(o, names, p));
      if (refs.size() != 1) return at(p + ".inputs", "an output saver takes one tensor");
      STRATA_ASSIGN_OR_RETURN(const Json* omap_j, member(o, "omap", p));
      STRATA_ASSIGN_OR_RETURN(GridMap omap, get_grid_map(*omap_j, p + ".omap"));
      auto r = g.add_output(refs[0], omap);
      if (!r.ok()) return at(p, r.error().message);
      continue;
    } else if (kind == OpKind::ThreadFused) {
      STRATA_ASSIGN_OR_RETURN(std::vector<int> refs, read_refs(o, names, p));
      STRATA_ASSIGN_OR_RETURN(std::vector<ThreadStep> chain, read_steps(o, p));
      made_t = g.add_thread_graph(std::move(refs), std::move(chain));
    } else {
      STRATA_ASSIGN_OR_RETURN(std::vector<int> refs, read_refs(o, names, p));
      STRATA_ASSIGN_OR_RETURN(OpAttrs attrs, read_attrs(o, kind, p));
      made_t = g.add_op(kind, std::move(refs), attrs);
    }
    if (!made_t.ok()) return at(p, made_t.error().message);
    int t = *made_t;
    STRATA_ASSIGN_OR_RETURN(const Json* out_j, member(o, "output", p));
    STRATA_ASSIGN_OR_RETURN(std::string out_name, get_string(*out_j, p + ".output"));
    STRATA_RETURN_IF_ERROR(bind_name(names, out_name, t, p + ".output"));
    auto named = g.set_tensor_name(t, out_name);
    if (!named.ok()) return at(p + ".output", named.error().message);
  }
  if (g.num_inputs() != static_cast<int>(input_shapes.size()))
    return at(path, "block graph has " + std::to_string(g.num_inputs()) +
                        " input iterator(s) but the customized op has " +
                        std::to_string(input_shapes.size()) + " input(s)");
  auto complete = g.check_complete();
  if (!complete.ok()) return at(path, complete.error().message);
  return g;
}

Result<KernelGraph> kernel_graph_from_json(const Json& doc, const std::string& origin) {
  if (!doc.is_object()) return at(origin, "expected a JSON object (a μGraph document)");
  if (auto it = doc.find("format"); it != doc.end() && *it != kFormat)
    return at(origin + ": format", std::string("expected \"") + kFormat + "\", got " + it->dump());
  if (auto it = doc.find("version"); it != doc.end() && *it != kVersion)
    return at(origin + ": version", "unsupported version " + it->dump() + " (this strata reads " +
                                        std::to_string(kVersion) + ")");
  KernelGraph g;
  std::map<std::string, int> names;
  STRATA_ASSIGN_OR_RETURN(const Json* inputs, member(doc, "inputs", origin));
  if (!inputs->is_array()) return at(origin + ": inputs", "expected an array");
  for (size_t i = 0; i < inputs->size(); ++i) {
    std::string p = origin + ": inputs[" + std::to_string(i) + "]";
    const Json& in = (*inputs)[i];
    STRATA_ASSIGN_OR_RETURN(const Json* name_j, member(in, "name", p));
    STRATA_ASSIGN_OR_RETURN(std::string name, get_string(*name_j, p + ".name"));
    STRATA_ASSIGN_OR_RETURN(const Json* shape_j, member(in, "shape", p));
    STRATA_ASSIGN_OR_RETURN(std::vector<int64_t> dims, get_int_list(*shape_j, p + ".shape"));
    auto shape = Shape::make(dims);
    if (!shape.ok()) return at(p + ".shape", shape.error().message);
    DType dt = DType::f16;
    if (auto it = in.find("dtype"); it != in.end()) {
      STRATA_ASSIGN_OR_RETURN(std::string dn, get_string(*it, p + ".dtype"));
      auto d = parse_dtype(dn);
      if (!d) return at(p + ".dtype", "unknown dtype `" + dn + "` (expected f16, bf16 or f32)");
      dt = *d;
    }
    auto t = g.add_input(name, *shape, dt);
    if (!t.ok()) return at(p, t.error().message);
    names[name] = *t;
  }
  STRATA_ASSIGN_OR_RETURN(const Json* ops, member(doc, "ops", origin));
  if (!ops->is_array()) return at(origin + ": ops", "expected an array");
  for (size_t i = 0; i < ops->size(); ++i) {
    std::string p = origin + ": ops[" + std::to_string(i) + "]";
    const Json& o = (*ops)[i];
    STRATA_ASSIGN_OR_RETURN(OpKind kind, read_kind(o, p));
    STRATA_ASSIGN_OR_RETURN(std::vector<int> refs, read_refs(o, names, p));
    if (kind == OpKind::Customized) {
      std::vector<Shape> shapes;
      for (int t : refs) shapes.push_back(g.tensor(t).shape);
      STRATA_ASSIGN_OR_RETURN(const Json* body_j, member(o, "block_graph", p));
      STRATA_ASSIGN_OR_RETURN(BlockGraph body,
                              block_graph_from_json(*body_j, shapes, p + ".block_graph"));
      STRATA_ASSIGN_OR_RETURN(const Json* outs_j, member(o, "outputs", p));
      if (!outs_j->is_array()) return at(p + ".outputs", "expected an array of names");
      std::vector<std::string> out_names;
      for (size_t k = 0; k < outs_j->size(); ++k) {
        STRATA_ASSIGN_OR_RETURN(
            std::string n, get_string((*outs_j)[k], p + ".outputs[" + std::to_string(k) + "]"));
        out_names.push_back(n);
      }
      auto outs = g.add_customized(std::move(refs), std::move(body), out_names);
      if (!outs.ok()) return at(p, outs.error().message);
      for (size_t k = 0; k < outs->size(); ++k) names[out_names[k]] = (*outs)[k];
    } else {
      STRATA_ASSIGN_OR_RETURN(OpAttrs attrs, read_attrs(o, kind, p));
      STRATA_ASSIGN_OR_RETURN(const Json* out_j, member(o, "output", p));
      STRATA_ASSIGN_OR_RETURN(std::string out_name, get_string(*out_j, p + ".output"));
      auto t = g.add_op(kind, std::move(refs), attrs, out_name);
      if (!t.ok()) return at(p, t.error().message);
      names[out_name] = *t;
    }
  }
  STRATA_ASSIGN_OR_RETURN(const Json* outs, member(doc, "outputs", origin));
  if (!outs->is_array()) return at(origin + ": outputs", "expected an array of tensor names");
  for (size_t i = 0; i < outs->size(); ++i) {
    std::string p = origin + ": outputs[" + std::to_string(i) + "]";
    STRATA_ASSIGN_OR_RETURN(std::string n, get_string((*outs)[i], p));
    auto it = names.find(n);
    if (it == names.end()) return at(p, "unknown tensor `" + n + "`");
    auto st = g.mark_output(it->second);
    if (!st.ok()) return at(p, st.error().message);
  }
  auto complete = g.check_complete();
  if (!complete.ok()) return at(origin, complete.error().message);
  return g;
}

Result<Json> parse_json_text(const std::string& text, const std::string& origin) {
  try {
    return Json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    auto [line, col] = line_col(text, e.byte == 0 ? 0 : e.byte - 1);
    std::string what = e.what();
    // nlohmann's message is "[json.exception.parse_error.101] parse error at line L, column C: ..."
    auto pos = what.find(": ");
    std::string detail = pos == std::string::npos ? what : what.substr(pos + 2);
    return make_error(origin + ":" + std::to_string(line) + ":" + std::to_string(col) +
                      ": invalid JSON: " + detail);
  }
}

}  // namespace strata
