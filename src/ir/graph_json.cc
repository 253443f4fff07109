#include "strata/ir/graph_json.h"
#include "strata/ir/rank_expansion.h"

#include <climits>
#include <limits>
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

// ---- reading ----------------------------------------------------------------------------
//
// Every integer is read as 64 bits and checked against the range its field allows (so that
// nothing is truncated on the way into the int fields of the IR); the checking constructors
// then apply the rules of docs/mugraph-semantics.md that depend on the graph.

constexpr int64_t kIntMax = std::numeric_limits<int>::max();
/// Data dimension indices (imap/fmap/omap entries): 0 … kMaxRank − 1.
constexpr int64_t kMaxDimIndex = kMaxRank - 1;

/// Error at a JSON path.
Error at(const std::string& path, const std::string& msg) {
  return make_error(path + ": " + msg);
}

/// A dimension index or null (φ).
Result<int> get_dim_or_null(const Json& v, const std::string& path) {
  if (v.is_null()) return kReplicate;
  auto d = json_int(v, path, 0, kMaxDimIndex);
  if (!d.ok())
    return at(path, "expected a data dimension index (0 to " + std::to_string(kMaxDimIndex) +
                        ") or null, got " + json_brief(v));
  return static_cast<int>(*d);
}

Result<GridMap> get_grid_map(const Json& v, const std::string& path) {
  if (!v.is_array() || v.size() != 3)
    return at(path, "expected [x, y, z] with a dimension index or null each, got " + json_brief(v));
  GridMap m;
  for (int a = 0; a < 3; ++a) {
    STRATA_ASSIGN_OR_RETURN(m[a], get_dim_or_null(v[a], path + "[" + std::to_string(a) + "]"));
  }
  return m;
}

/// An array of integers, each in [lo, hi].
Result<std::vector<int64_t>> get_int_list(const Json& v, const std::string& path, int64_t lo,
                                          int64_t hi) {
  if (!v.is_array()) return at(path, "expected an array of integers, got " + json_brief(v));
  std::vector<int64_t> out;
  for (size_t i = 0; i < v.size(); ++i) {
    STRATA_ASSIGN_OR_RETURN(int64_t x,
                            json_int(v[i], path + "[" + std::to_string(i) + "]", lo, hi));
    out.push_back(x);
  }
  return out;
}

/// The integer member `key` of `obj` in [lo, hi].
Result<int64_t> int_member(const Json& obj, const char* key, const std::string& path, int64_t lo,
                           int64_t hi) {
  STRATA_ASSIGN_OR_RETURN(const Json* v, json_member(obj, key, path));
  return json_int(*v, path + "." + key, lo, hi);
}

/// The range an integer attribute may take in JSON (the constructors check the rest).
std::pair<int64_t, int64_t> attr_range(AttrField f) {
  switch (f) {
    case AttrField::Dim:
      return {-kMaxRank, kMaxDimIndex};
    case AttrField::To:
      return {1, kMaxElements};
    case AttrField::Start:
    case AttrField::End:
      return {0, kMaxElements};
    case AttrField::Scalar:
    case AttrField::Scalar2:
      break;
  }
  return {0, 0};
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
      auto [lo, hi] = attr_range(spec.field);
      STRATA_ASSIGN_OR_RETURN(int64_t v, json_int(*it, p, lo, hi));
      set_int_attr(a, spec.field, v);
    } else {
      STRATA_ASSIGN_OR_RETURN(double v, json_number(*it, p));
      set_real_attr(a, spec.field, v);
    }
  }
  return a;
}

Result<OpKind> read_kind(const Json& j, const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(const Json* o, json_member(j, "op", path));
  STRATA_ASSIGN_OR_RETURN(std::string name, json_string(*o, path + ".op"));
  auto k = parse_op_kind(name);
  if (!k) return at(path + ".op", "unknown op `" + json_quote(name) + "`");
  return *k;
}

/// Resolves a list of tensor names through a name table.
Result<std::vector<int>> read_refs(const Json& j, const std::map<std::string, int>& names,
                                   const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(const Json* ins, json_member(j, "inputs", path));
  if (!ins->is_array()) return at(path + ".inputs", "expected an array of tensor names");
  std::vector<int> out;
  for (size_t i = 0; i < ins->size(); ++i) {
    std::string p = path + ".inputs[" + std::to_string(i) + "]";
    STRATA_ASSIGN_OR_RETURN(std::string n, json_string((*ins)[i], p));
    auto it = names.find(n);
    if (it == names.end()) return at(p, "unknown tensor `" + json_quote(n) + "`");
    out.push_back(it->second);
  }
  return out;
}

/// A tensor name: an identifier [A-Za-z_][A-Za-z0-9_]*, as in .strata programs (names reach
/// listings, DOT files and comments of generated CUDA, so nothing else is let in).
Result<std::string> read_name(const Json& v, const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(std::string n, json_string(v, path));
  auto ident_start = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  };
  bool ok = !n.empty();
  for (size_t i = 0; ok && i < n.size(); ++i)
    ok = ident_start(n[i]) || (i > 0 && n[i] >= '0' && n[i] <= '9');
  if (!ok)
    return at(path, "invalid tensor name " + json_brief(v) +
                        "; expected a name of letters, digits and `_` not starting with a digit");
  return n;
}

/// Binds `name` to tensor `id` (-1: only checks that the name is free).
Status bind_name(std::map<std::string, int>& names, const std::string& name, int id,
                 const std::string& path) {
  if (names.count(name)) return at(path, "duplicate tensor name `" + name + "`");
  if (id >= 0) names.emplace(name, id);
  return Status::success();
}

Result<std::vector<ThreadStep>> read_steps(const Json& j, const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(const Json* steps, json_member(j, "steps", path));
  if (!steps->is_array()) return at(path + ".steps", "expected an array");
  std::vector<ThreadStep> chain;
  for (size_t i = 0; i < steps->size(); ++i) {
    std::string p = path + ".steps[" + std::to_string(i) + "]";
    const Json& s = (*steps)[i];
    STRATA_ASSIGN_OR_RETURN(OpKind kind, read_kind(s, p));
    STRATA_ASSIGN_OR_RETURN(OpAttrs attrs, read_attrs(s, kind, p));
    ThreadStep step = make_step(kind, {0, 0}, attrs);
    STRATA_ASSIGN_OR_RETURN(const Json* args, json_member(s, "args", p));
    STRATA_ASSIGN_OR_RETURN(std::vector<int64_t> a, get_int_list(*args, p + ".args", 0, kIntMax));
    if (a.size() > 2) return at(p + ".args", "a thread step takes at most two arguments");
    for (size_t k = 0; k < a.size(); ++k) step.args[k] = static_cast<int>(a[k]);
    if (static_cast<int>(a.size()) != op_info(kind).arity)
      return at(p + ".args", std::string(op_name(kind)) + " takes " +
                                 std::to_string(op_info(kind).arity) + " argument(s)");
    chain.push_back(step);
  }
  return chain;
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
  if (g.ranks() > 1) j["ranks"] = g.ranks();
  Json inputs = Json::array();
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const int t = g.inputs()[i];
    const KernelTensor& kt = g.tensor(t);
    Json in;
    in["name"] = g.tensor_name(t);
    in["shape"] = kt.shape.dims();
    in["dtype"] = std::string(dtype_name(kt.dtype));
    if (g.input_shard(static_cast<int>(i)) != kReplicated)
      in["shard"] = g.input_shard(static_cast<int>(i));
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
  Json shards = Json::array();
  bool sharded = false;
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    outs.push_back(g.tensor_name(g.outputs()[i]));
    shards.push_back(g.output_shard(static_cast<int>(i)));
    sharded = sharded || g.output_shard(static_cast<int>(i)) != kReplicated;
  }
  j["outputs"] = outs;
  if (sharded) j["output_shards"] = shards;
  return j;
}

Result<BlockGraph> block_graph_from_json(const Json& doc, const std::vector<Shape>& input_shapes,
                                         const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(const Json* grid_j, json_member(doc, "grid", path));
  STRATA_ASSIGN_OR_RETURN(std::vector<int64_t> grid,
                          get_int_list(*grid_j, path + ".grid", 1, kIntMax));
  if (grid.size() != 3) return at(path + ".grid", "expected [x, y, z]");
  STRATA_ASSIGN_OR_RETURN(int64_t block, int_member(doc, "block", path, 32, 1024));
  STRATA_ASSIGN_OR_RETURN(int64_t forloop, int_member(doc, "forloop", path, 1, kIntMax));
  auto made = BlockGraph::make(Dim3{static_cast<int>(grid[0]), static_cast<int>(grid[1]),
                                    static_cast<int>(grid[2])},
                               static_cast<int>(block), static_cast<int>(forloop));
  if (!made.ok()) return at(path, made.error().message);
  BlockGraph g = std::move(made).value();

  STRATA_ASSIGN_OR_RETURN(const Json* ops, json_member(doc, "ops", path));
  if (!ops->is_array()) return at(path + ".ops", "expected an array of ops");
  std::map<std::string, int> names;
  for (size_t i = 0; i < ops->size(); ++i) {
    std::string p = path + ".ops[" + std::to_string(i) + "]";
    const Json& o = (*ops)[i];
    STRATA_ASSIGN_OR_RETURN(OpKind kind, read_kind(o, p));
    Result<int> made_t = -1;
    if (kind == OpKind::Input) {
      STRATA_ASSIGN_OR_RETURN(int64_t idx, int_member(o, "input", p, 0, kIntMax));
      if (idx != g.num_inputs())
        return at(p + ".input", "input iterators must appear in input order; expected " +
                                    std::to_string(g.num_inputs()) + ", got " +
                                    std::to_string(idx));
      if (idx >= static_cast<int64_t>(input_shapes.size()))
        return at(p + ".input", "the customized op has only " +
                                    std::to_string(input_shapes.size()) + " input(s)");
      STRATA_ASSIGN_OR_RETURN(const Json* imap_j, json_member(o, "imap", p));
      STRATA_ASSIGN_OR_RETURN(GridMap imap, get_grid_map(*imap_j, p + ".imap"));
      int fmap = kReplicate;
      if (auto it = o.find("fmap"); it != o.end()) {
        STRATA_ASSIGN_OR_RETURN(fmap, get_dim_or_null(*it, p + ".fmap"));
      }
      made_t = g.add_input(input_shapes[idx], imap, fmap);
    } else if (kind == OpKind::Output) {
      STRATA_ASSIGN_OR_RETURN(std::vector<int> refs, read_refs(o, names, p));
      if (refs.size() != 1) return at(p + ".inputs", "an output saver takes one tensor");
      STRATA_ASSIGN_OR_RETURN(const Json* omap_j, json_member(o, "omap", p));
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
    STRATA_ASSIGN_OR_RETURN(const Json* out_j, json_member(o, "output", p));
    STRATA_ASSIGN_OR_RETURN(std::string out_name, read_name(*out_j, p + ".output"));
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
    return at(origin + ": format",
              std::string("expected \"") + kFormat + "\", got " + json_brief(*it));
  if (auto it = doc.find("version"); it != doc.end() && *it != kVersion)
    return at(origin + ": version", "unsupported version " + json_brief(*it) +
                                        " (this strata reads " + std::to_string(kVersion) + ")");
  KernelGraph g;
  if (auto it = doc.find("ranks"); it != doc.end()) {
    STRATA_ASSIGN_OR_RETURN(int64_t r, json_int(*it, origin + ": ranks", 1, kMaxRanks));
    STRATA_RETURN_IF_ERROR(g.set_ranks(static_cast<int>(r)));
  }
  std::map<std::string, int> names;
  STRATA_ASSIGN_OR_RETURN(const Json* inputs, json_member(doc, "inputs", origin));
  if (!inputs->is_array()) return at(origin + ": inputs", "expected an array");
  for (size_t i = 0; i < inputs->size(); ++i) {
    std::string p = origin + ": inputs[" + std::to_string(i) + "]";
    const Json& in = (*inputs)[i];
    STRATA_ASSIGN_OR_RETURN(const Json* name_j, json_member(in, "name", p));
    STRATA_ASSIGN_OR_RETURN(std::string name, read_name(*name_j, p + ".name"));
    STRATA_ASSIGN_OR_RETURN(const Json* shape_j, json_member(in, "shape", p));
    STRATA_ASSIGN_OR_RETURN(std::vector<int64_t> dims,
                            get_int_list(*shape_j, p + ".shape", 1, kMaxElements));
    auto shape = Shape::make(dims);
    if (!shape.ok()) return at(p + ".shape", shape.error().message);
    DType dt = DType::f16;
    if (auto it = in.find("dtype"); it != in.end()) {
      STRATA_ASSIGN_OR_RETURN(std::string dn, json_string(*it, p + ".dtype"));
      auto d = parse_dtype(dn);
      if (!d)
        return at(p + ".dtype",
                  "unknown dtype `" + json_quote(dn) + "` (expected f16, bf16 or f32)");
      dt = *d;
    }
    STRATA_RETURN_IF_ERROR(bind_name(names, name, -1, p + ".name"));
    auto t = g.add_input(name, *shape, dt);
    if (!t.ok()) return at(p, t.error().message);
    names[name] = *t;
    if (auto it = in.find("shard"); it != in.end()) {
      STRATA_ASSIGN_OR_RETURN(int64_t d, json_int(*it, p + ".shard", 0, kMaxRank - 1));
      if (Status st = g.set_input_shard(static_cast<int>(i), static_cast<int>(d)); !st.ok())
        return at(p + ".shard", st.error().message);
    }
  }
  STRATA_ASSIGN_OR_RETURN(const Json* ops, json_member(doc, "ops", origin));
  if (!ops->is_array()) return at(origin + ": ops", "expected an array");
  for (size_t i = 0; i < ops->size(); ++i) {
    std::string p = origin + ": ops[" + std::to_string(i) + "]";
    const Json& o = (*ops)[i];
    STRATA_ASSIGN_OR_RETURN(OpKind kind, read_kind(o, p));
    STRATA_ASSIGN_OR_RETURN(std::vector<int> refs, read_refs(o, names, p));
    if (kind == OpKind::Customized) {
      std::vector<Shape> shapes;
      for (int t : refs) shapes.push_back(g.tensor(t).shape);
      STRATA_ASSIGN_OR_RETURN(const Json* body_j, json_member(o, "block_graph", p));
      STRATA_ASSIGN_OR_RETURN(BlockGraph body,
                              block_graph_from_json(*body_j, shapes, p + ".block_graph"));
      STRATA_ASSIGN_OR_RETURN(const Json* outs_j, json_member(o, "outputs", p));
      if (!outs_j->is_array()) return at(p + ".outputs", "expected an array of names");
      // One name per saver: an unnamed output could never be read or be a graph output.
      if (outs_j->size() != static_cast<size_t>(body.num_outputs()))
        return at(p + ".outputs", "the block graph has " + std::to_string(body.num_outputs()) +
                                      " output saver(s) but " + std::to_string(outs_j->size()) +
                                      " name(s) are given; expected one name per saver");
      std::vector<std::string> out_names;
      for (size_t k = 0; k < outs_j->size(); ++k) {
        std::string pk = p + ".outputs[" + std::to_string(k) + "]";
        STRATA_ASSIGN_OR_RETURN(std::string n, read_name((*outs_j)[k], pk));
        STRATA_RETURN_IF_ERROR(bind_name(names, n, -1, pk));
        out_names.push_back(n);
      }
      auto outs = g.add_customized(std::move(refs), std::move(body), out_names);
      if (!outs.ok()) return at(p, outs.error().message);
      for (size_t k = 0; k < outs->size(); ++k) names[out_names[k]] = (*outs)[k];
    } else {
      STRATA_ASSIGN_OR_RETURN(OpAttrs attrs, read_attrs(o, kind, p));
      STRATA_ASSIGN_OR_RETURN(const Json* out_j, json_member(o, "output", p));
      STRATA_ASSIGN_OR_RETURN(std::string out_name, read_name(*out_j, p + ".output"));
      STRATA_RETURN_IF_ERROR(bind_name(names, out_name, -1, p + ".output"));
      auto t = g.add_op(kind, std::move(refs), attrs, out_name);
      if (!t.ok()) return at(p, t.error().message);
      names[out_name] = *t;
    }
  }
  STRATA_ASSIGN_OR_RETURN(const Json* outs, json_member(doc, "outputs", origin));
  if (!outs->is_array()) return at(origin + ": outputs", "expected an array of tensor names");
  for (size_t i = 0; i < outs->size(); ++i) {
    std::string p = origin + ": outputs[" + std::to_string(i) + "]";
    STRATA_ASSIGN_OR_RETURN(std::string n, json_string((*outs)[i], p));
    auto it = names.find(n);
    if (it == names.end()) return at(p, "unknown tensor `" + json_quote(n) + "`");
    auto st = g.mark_output(it->second);
    if (!st.ok()) return at(p, st.error().message);
  }
  if (auto it = doc.find("output_shards"); it != doc.end()) {
    const std::string p = origin + ": output_shards";
    if (!it->is_array() || it->size() != outs->size())
      return at(p, "expected an array of one shard dim (or -1, replicated) per output");
    for (size_t i = 0; i < it->size(); ++i) {
      STRATA_ASSIGN_OR_RETURN(int64_t d, json_int((*it)[i], p + "[" + std::to_string(i) + "]",
                                                  -1, kMaxRank - 1));
      if (d == kReplicated) continue;
      if (Status st = g.set_output_shard(static_cast<int>(i), static_cast<int>(d)); !st.ok())
        return at(p + "[" + std::to_string(i) + "]", st.error().message);
    }
  }
  if (Status st = check_replicated_outputs(g); !st.ok())
    return at(origin + ": outputs", st.error().message);
  auto complete = g.check_complete();
  if (!complete.ok()) return at(origin, complete.error().message);
  return g;
}

}  // namespace strata
