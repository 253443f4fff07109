// Prologue folding (prologue_fold.h, docs/search.md "Prologue folding"), as a rewrite of the
// graph's JSON document: the loader then checks the result as it checks any μGraph.
#include "search/prologue_fold.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "strata/ir/graph_json.h"
#include "strata/ir/op.h"

namespace strata::search {
namespace {

constexpr int kAxes = 3;

/// The names an op of a kernel graph document writes.
std::vector<std::string> outputs_of(const Json& op) {
  std::vector<std::string> out;
  if (op.contains("output")) out.push_back(op["output"].get<std::string>());
  if (op.contains("outputs"))
    for (const Json& t : op["outputs"]) out.push_back(t.get<std::string>());
  return out;
}

/// Shapes of the document's tensors, from its inputs and the loaded graph.
std::map<std::string, Shape> shapes_of(const KernelGraph& g) {
  std::map<std::string, Shape> out;
  for (int t = 0; t < static_cast<int>(g.tensors().size()); ++t)
    out[g.tensor_name(t)] = g.tensor(t).shape;
  return out;
}

/// An imap entry: the dim an axis maps to, or -1 (φ).
int map_dim(const Json& m) {
  return m.is_null() ? -1 : m.get<int>();
}
Json map_json(int d) {
  return d < 0 ? Json(nullptr) : Json(d);
}

/// The block ops that compute T's tile from predefined op `p` (inputs read with T's imap
/// `imap` aligned from the right), the last one writing `result`; nullopt where `p` has no
/// block form or its norm dim is split. `first_input` is the index the first new input op
/// reads (the consumer's inputs are appended to).
std::optional<std::vector<Json>> predefined_prologue(const Json& p,
                                                     const std::map<std::string, Shape>& shapes,
                                                     const std::vector<int>& imap,
                                                     const std::string& result, int first_input,
                                                     const std::string& prefix) {
  const std::optional<OpKind> kind = parse_op_kind(p["op"].get<std::string>());
  if (!kind || !(op_info(*kind).levels & kBlock)) return std::nullopt;
  const Category c = op_category(*kind);
  if (c != Category::Unary && c != Category::Binary && c != Category::Norm) return std::nullopt;
  const Shape& t = shapes.at(outputs_of(p)[0]);
  if (c == Category::Norm) {
    const int dim = p.value("dim", t.rank() - 1);
    for (int d : imap)
      if (d == dim) return std::nullopt;  // the norm needs its dim whole in the tile
  }
  std::vector<Json> ops;
  Json op = p;
  op["inputs"] = Json::array();
  int k = 0;
  for (const Json& in : p["inputs"]) {
    const Shape& x = shapes.at(in.get<std::string>());
    Json imap_x = Json::array();
    for (int d : imap) {
      const int dx = d < 0 ? -1 : d - (t.rank() - x.rank());
      imap_x.push_back(map_json(dx >= 0 && x[dx] == t[d] ? dx : -1));
    }
    const std::string name = prefix + "in" + std::to_string(k);
    ops.push_back({{"op", "input"},
                   {"input", first_input + k},
                   {"imap", imap_x},
                   {"fmap", nullptr},
                   {"output", name}});
    op["inputs"].push_back(name);
    ++k;
  }
  op.erase("outputs");
  op["output"] = result;
  ops.push_back(op);
  return ops;
}

/// Whether block graph `bg` computes each index of dim `dim` of its rank-`rank` result from
/// that index alone: its ops are elementwise (unary, binary, fused thread graphs) or norms and
/// reductions over another dim. Then its blocks along that dim can be one block holding the
/// dim whole.
bool independent_along(const Json& bg, int dim, int rank) {
  for (const Json& op : bg["ops"]) {
    const std::string name = op["op"].get<std::string>();
    if (name == "input" || name == "output" || name == "accum") continue;
    const std::optional<OpKind> kind = parse_op_kind(name);
    if (!kind) return false;
    const Category c = op_category(*kind);
    if (c == Category::Unary || c == Category::Binary || c == Category::Fused) continue;
    if (c != Category::Norm && c != Category::Reduce) return false;
    int d = op.value("dim", rank - 1);
    if (d < 0) d += rank;
    if (d == dim) return false;
  }
  return true;
}

/// The block ops of customized prologue `p` (grid `pgrid`) moved into a consumer with grid
/// `cgrid` that reads T (of rank `rank`) with `imap`, the value saved written as `result`;
/// nullopt where the grids do not tile T alike or the body is not one loop-free value saved
/// once. Where the body is independent along a dim of T (`independent_along`), the consumer
/// may tile that dim otherwise: into parts of another size, or not at all.
std::optional<std::vector<Json>> customized_prologue(const Json& p,
                                                     const std::vector<int64_t>& cgrid,
                                                     const std::vector<int>& imap, int rank,
                                                     const std::string& result, int first_input,
                                                     const std::string& prefix) {
  const Json& bg = p["block_graph"];
  if (bg["forloop"].get<int64_t>() != 1 || outputs_of(p).size() != 1) return std::nullopt;
  const std::vector<int64_t> pgrid = bg["grid"].get<std::vector<int64_t>>();
  // The saver and its accumulator (with one iteration, the value it accumulates).
  const Json* saver = nullptr;
  std::map<std::string, const Json*> writer;
  for (const Json& op : bg["ops"]) {
    if (op["op"] == "output") {
      if (saver) return std::nullopt;
      saver = &op;
    } else if (op.contains("output")) {
      writer[op["output"].get<std::string>()] = &op;
    }
  }
  if (!saver) return std::nullopt;
  const Json* accum = writer[(*saver)["inputs"][0].get<std::string>()];
  if (!accum || (*accum)["op"] != "accum" || !(*accum)["fmap"].is_null()) return std::nullopt;
  const std::string value = (*accum)["inputs"][0].get<std::string>();
  // Axis matching: each prologue axis that splits T is a consumer axis splitting the same dim
  // into as many parts; where the body computes each index of that dim alone, a consumer axis
  // splitting it into other parts, or none (the axis is absorbed: the consumer holds the dim
  // whole). The tiles are then equal where no other axis splits T.
  std::vector<int> omap;
  for (const Json& m : (*saver)["omap"]) omap.push_back(map_dim(m));
  std::vector<int> to_consumer(kAxes, -1);
  std::vector<bool> absorbed(kAxes, false);
  for (int a = 0; a < kAxes; ++a) {
    if (pgrid[a] == 1) continue;
    if (omap[a] < 0) return std::nullopt;
    for (int b = 0; b < kAxes; ++b)
      if (imap[b] == omap[a] && cgrid[b] == pgrid[a]) to_consumer[a] = b;
    if (to_consumer[a] >= 0) continue;
    // Parts of another size: the same values where each index of the dim is computed alone.
    if (!independent_along(bg, omap[a], rank)) return std::nullopt;
    for (int b = 0; b < kAxes; ++b)
      if (imap[b] == omap[a] && cgrid[b] > 1) to_consumer[a] = b;
    absorbed[a] = to_consumer[a] < 0;
  }
  for (int b = 0; b < kAxes; ++b) {
    if (imap[b] < 0 || cgrid[b] == 1) continue;
    bool matched = false;
    for (int a = 0; a < kAxes; ++a) matched = matched || to_consumer[a] == b;
    if (!matched) return std::nullopt;  // the consumer splits a dim the prologue holds whole
  }
  auto rename = [&](const std::string& n) { return n == value ? result : prefix + n; };
  std::vector<Json> ops;
  for (const Json& op : bg["ops"]) {
    if (&op == saver || &op == accum) continue;
    Json o = op;
    if (o["op"] == "input") {
      if (!o["fmap"].is_null()) return std::nullopt;
      Json imap_o = Json::array();
      for (int b = 0; b < kAxes; ++b) {
        int d = -1;
        for (int a = 0; a < kAxes; ++a)
          if (to_consumer[a] == b) d = map_dim(op["imap"][a]);
        imap_o.push_back(map_json(d));
      }
      // Axes of the prologue that do not split T (grid 1) map nothing; the others moved, or
      // absorbed: the consumer reads their dims whole.
      for (int a = 0; a < kAxes; ++a)
        if (pgrid[a] > 1 && to_consumer[a] < 0 && !absorbed[a] && !op["imap"][a].is_null())
          return std::nullopt;
      o["imap"] = imap_o;
      o["input"] = first_input + op["input"].get<int>();
    }
    if (o.contains("inputs")) {
      Json ins = Json::array();
      for (const Json& n : o["inputs"]) ins.push_back(rename(n.get<std::string>()));
      o["inputs"] = ins;
    }
    if (o.contains("output")) o["output"] = rename(o["output"].get<std::string>());
    ops.push_back(o);
  }
  return ops;
}

/// One fold in `doc` (a kernel graph document of `g`), or false when none applies.
bool fold_one(Json& doc, const KernelGraph& g, int& serial) {
  Json& ops = doc["ops"];
  const std::map<std::string, Shape> shapes = shapes_of(g);
  std::map<std::string, int> producer;
  std::map<std::string, int> reads;
  for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
    for (const std::string& t : outputs_of(ops[i])) producer[t] = i;
    for (const Json& t : ops[i]["inputs"]) ++reads[t.get<std::string>()];
  }
  std::map<std::string, bool> is_output;
  for (const Json& t : doc["outputs"]) is_output[t.get<std::string>()] = true;
  for (int c = 0; c < static_cast<int>(ops.size()); ++c) {
    Json& consumer = ops[c];
    if (consumer["op"] != "customized") continue;
    Json& bg = consumer["block_graph"];
    const std::vector<int64_t> cgrid = bg["grid"].get<std::vector<int64_t>>();
    for (int bi = 0; bi < static_cast<int>(bg["ops"].size()); ++bi) {
      const Json& in = bg["ops"][bi];
      if (in["op"] != "input" || !in["fmap"].is_null()) continue;
      const int k = in["input"].get<int>();
      const std::string t = consumer["inputs"][k].get<std::string>();
      if (reads[t] != 1 || is_output[t] || !producer.count(t)) continue;
      const int p = producer[t];
      const Json& prologue = ops[p];
      std::vector<int> imap;
      for (const Json& m : in["imap"]) imap.push_back(map_dim(m));
      const int first = static_cast<int>(consumer["inputs"].size()) - 1;  // T's index goes
      const std::string result = in["output"].get<std::string>();
      const std::string prefix = "f" + std::to_string(serial) + "_";
      std::optional<std::vector<Json>> body =
          prologue["op"] == "customized"
              ? customized_prologue(prologue, cgrid, imap, shapes.at(t).rank(), result,
                                    first, prefix)
              : predefined_prologue(prologue, shapes, imap, result, first, prefix);
      if (!body) continue;
      // The consumer reads the prologue's inputs instead of T: T's index leaves (the indices
      // above it move down), the prologue's inputs are appended.
      Json inputs = Json::array();
      for (int j = 0; j < static_cast<int>(consumer["inputs"].size()); ++j)
        if (j != k) inputs.push_back(consumer["inputs"][j]);
      const Json& pin = prologue["inputs"];
      for (const Json& x : pin) inputs.push_back(x);
      Json new_ops = Json::array();
      for (int j = 0; j < static_cast<int>(bg["ops"].size()); ++j) {
        if (j == bi) {
          for (Json& o : *body) new_ops.push_back(std::move(o));
          continue;
        }
        Json o = bg["ops"][j];
        if (o["op"] == "input" && o["input"].get<int>() > k) o["input"] = o["input"].get<int>() - 1;
        new_ops.push_back(std::move(o));
      }
      // Input iterators first, in input order (the format's rule); the compute ops keep theirs.
      Json ordered = Json::array();
      std::vector<Json> iterators;
      for (const Json& o : new_ops)
        if (o["op"] == "input") iterators.push_back(o);
      std::stable_sort(iterators.begin(), iterators.end(), [](const Json& a, const Json& b) {
        return a["input"].get<int>() < b["input"].get<int>();
      });
      for (Json& o : iterators) ordered.push_back(std::move(o));
      for (Json& o : new_ops)
        if (o["op"] != "input") ordered.push_back(std::move(o));
      consumer["inputs"] = inputs;
      bg["ops"] = ordered;
      ops.erase(ops.begin() + p);
      ++serial;
      return true;
    }
  }
  return false;
}

}  // namespace

std::optional<KernelGraph> fold_prologues(const KernelGraph& g) {
  KernelGraph current = g;
  int serial = 0, folded_count = 0;
  for (int round = 0; round < 8; ++round) {
    Json doc = kernel_graph_to_json(current);
    if (!fold_one(doc, current, serial)) break;
    Result<KernelGraph> folded = kernel_graph_from_json(doc, "prologue fold");
    if (!folded.ok()) break;  // a fold the loader refuses (a shape it cannot broadcast)
    current = std::move(folded).value();
    ++folded_count;
  }
  if (folded_count == 0) return std::nullopt;
  return current;
}

}  // namespace strata::search
