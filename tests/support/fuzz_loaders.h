// Test support: the fuzzing harness of strata's loaders (docs/fuzzing.md).
//
// One function per loader takes the bytes of one input, feeds them to the loader in-process and,
// when the loader accepts them, to everything a command does with what it loaded (shape
// inference has already run in the constructors; then the listing, DOT, the JSON round trip,
// the cost model for every target, the CUDA emitter and, for graphs whose evaluation is small,
// the reference interpreter). Each returns the problems it saw: a thrown exception, an error
// that does not name its origin, a broken invariant (a JSON round trip that changes the graph,
// a negative byte count). A crash or a hang shows as the harness process dying or timing out.
//
// The mutators turn seed inputs into mutants: byte-level edits for any text, structure-aware
// edits (extreme numbers, wrong types, deleted, duplicated and copied members, deep nesting,
// empty arrays) for JSON documents.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "strata/cost/cost_model.h"
#include "strata/codegen/cuda_emitter.h"
#include "strata/ir/graph_dot.h"
#include "strata/ir/graph_json.h"
#include "strata/ir/graph_print.h"
#include "strata/interp/interpreter.h"
#include "strata/frontend/program_parser.h"
#include "strata/ir/result_graphs.h"
#include "strata/search/search_cache.h"
#include "strata/search/search_report.h"

namespace strata::fuzz {

using Problems = std::vector<std::string>;

/// Element operations the reference interpreter performs on `g` (saturated): every kernel
/// tensor, plus for each customized kernel its tiles times their trip counts, plus the inner
/// products of matmuls. The harness runs the interpreter only below a small budget.
inline int64_t evaluation_work(const KernelGraph& g) {
  int64_t work = 0;
  auto matmul_work = [](const Shape& a, const Shape& out) {
    return a.rank() > 0 ? saturating_mul(out.numel(), a[a.rank() - 1]) : 0;
  };
  for (const KernelTensor& t : g.tensors()) work = saturating_add(work, t.shape.numel());
  for (const KernelOp& op : g.ops()) {
    if (op.kind == OpKind::Matmul)
      work = saturating_add(
          work, matmul_work(g.tensor(op.inputs[0]).shape, g.tensor(op.outputs[0]).shape));
    if (!op.body) continue;
    const BlockGraph& b = *op.body;
    int64_t loop = 0, post = 0;
    for (const BlockOp& bop : b.ops()) {
      if (bop.output < 0) continue;
      const BlockTensor& t = b.tensor(bop.output);
      int64_t w = t.shape.numel();
      if (bop.kind == OpKind::Matmul) w = matmul_work(b.tensor(bop.inputs[0]).shape, t.shape);
      if (t.stage == Stage::Loop)
        loop = saturating_add(loop, w);
      else
        post = saturating_add(post, w);
    }
    work = saturating_add(
        work,
        saturating_mul(b.grid().count(), saturating_add(saturating_mul(loop, b.forloop()), post)));
  }
  return work;
}

/// Largest evaluation_work the harness gives to the reference interpreter.
inline constexpr int64_t kMaxInterpreterWork = int64_t{1} << 21;

/// Everything a command does with a loaded graph; problems are prefixed with `origin`.
inline void exercise_graph(const KernelGraph& g, const std::string& origin, Problems& out) {
  auto problem = [&](const std::string& what) { out.push_back(origin + ": " + what); };
  if (!g.check_complete().ok()) problem("a loader returned an incomplete graph");
  (void)g.dead_tensors();
  (void)summarize_graph(g);
  (void)format_graph(g);
  (void)kernel_graph_to_dot(g);
  // The JSON round trip of docs/mugraph-json.md: same structure, canonical text.
  const Json j = kernel_graph_to_json(g);
  auto back = kernel_graph_from_json(j, "round-trip");
  if (!back.ok()) {
    problem("its canonical JSON does not load back: " + back.error().message);
  } else {
    if (!back->structurally_equal(g)) problem("the JSON round trip changed the graph");
    if (kernel_graph_to_json(*back).dump() != j.dump())
      problem("the JSON round trip changed the text");
  }
  for (const Target& t : known_targets()) {
    GraphCost c = estimate_cost(g, t);
    if (!(c.predicted_us >= 0))
      problem("cost model (" + t.name + "): predicted time " + std::to_string(c.predicted_us));
    for (const KernelCost& k : c.kernels)
      if (k.load_bytes < 0 || k.l2_bytes < 0 || k.store_bytes < 0 || k.narrow_bytes < 0 ||
          k.smem_bytes < 0 || k.blocks < 1 || !(k.predicted_s >= 0))
        problem("cost model (" + t.name + "): a negative count in kernel #" +
                std::to_string(k.op_id));
  }
  (void)emit_cuda_source(g, EmitOptions{});
  if (evaluation_work(g) <= kMaxInterpreterWork) {
    auto outs = run_reference(g, random_inputs(g, 1));
    if (outs.ok() && outs->size() != g.outputs().size())
      problem("the interpreter returned " + std::to_string(outs->size()) + " outputs for " +
              std::to_string(g.outputs().size()));
  }
}

/// Runs `fn`, turning an exception that escapes it into a problem.
template <class Fn>
Problems guarded(const std::string& origin, Fn&& fn) {
  Problems out;
  try {
    fn(out);
  } catch (const std::exception& e) {
    out.push_back(origin + ": threw past the API: " + e.what());
  } catch (...) {
    out.push_back(origin + ": threw past the API (not a std::exception)");
  }
  return out;
}

/// An error must say where: it starts with the origin (a file name).
inline void expect_located(const Error& e, const std::string& origin, Problems& out) {
  if (e.message.rfind(origin, 0) != 0)
    out.push_back(origin + ": an error that does not name the file: " + e.message);
}

/// The .strata parser.
inline Problems program_text(std::string_view text, const std::string& origin) {
  return guarded(origin, [&](Problems& out) {
    auto g = parse_program(text, origin);
    if (!g.ok()) return expect_located(g.error(), origin, out);
    exercise_graph(*g, origin, out);
  });
}

/// The μGraph reader (kernel_graph_from_json) on JSON text.
inline Problems mugraph_json(std::string_view text, const std::string& origin) {
  return guarded(origin, [&](Problems& out) {
    auto doc = parse_json_text(text, origin);
    if (!doc.ok()) return expect_located(doc.error(), origin, out);
    auto g = kernel_graph_from_json(*doc, origin);
    if (!g.ok()) return expect_located(g.error(), origin, out);
    exercise_graph(*g, origin, out);
  });
}

/// The result readers: the graphs of a result document (graphs_in_document, as profile and
/// the C++ API read them), the entries the commands take (result_graph_at: default, 0, 1) and
/// the search's own reader (search_result_from_json, as the cache is read).
inline Problems result_json(std::string_view text, const std::string& origin) {
  return guarded(origin, [&](Problems& out) {
    auto doc = parse_json_text(text, origin);
    if (!doc.ok()) return expect_located(doc.error(), origin, out);
    auto graphs = graphs_in_document(*doc, origin);
    if (!graphs.ok()) {
      expect_located(graphs.error(), origin, out);
    } else {
      if (graphs->empty()) out.push_back(origin + ": graphs_in_document returned no graph");
      int preferred = preferred_graph(*graphs);
      if (preferred < 0 || preferred >= static_cast<int>(graphs->size()))
        out.push_back(origin + ": preferred_graph out of range");
    }
    for (int64_t rank : {int64_t{-1}, int64_t{0}, int64_t{1}}) {
      auto r = result_graph_at(*doc, origin, rank);
      if (!r.ok()) {
        expect_located(r.error(), origin, out);
        continue;
      }
      exercise_graph(r->graph, r->where, out);
    }
    auto target = Target::by_name("h100");
    auto sr = search_result_from_json(*doc, *target);
    if (sr.ok())
      for (const Candidate& c : sr->ranked)
        exercise_graph(c.graph, origin + " (search reader)", out);
  });
}

/// The cache reader: the checked envelope at `path` (format "strata-search-cache", key `key`,
/// answering the program with hash `program`), then the search result in its payload.
inline Problems cache_entry(const std::string& path, const std::string& key,
                            const std::string& program) {
  return guarded(path, [&](Problems& out) {
    auto payload = read_checked_json(path, "strata-search-cache", key, program);
    if (!payload.ok()) {
      const std::string& m = payload.error().message;
      if (m.find(path) == std::string::npos)
        out.push_back(path + ": an error that does not name the file: " + m);
      return;
    }
    auto sr = search_result_from_json(*payload, *Target::by_name("h100"));
    if (sr.ok())
      for (const Candidate& c : sr->ranked) exercise_graph(c.graph, path, out);
  });
}

// ---- mutators -----------------------------------------------------------------------------

/// Numbers and fragments that trip readers: beyond every integer width, beyond double, below
/// the smallest subnormal, negative where counts are expected, and deep nesting.
inline const std::vector<std::string>& extreme_tokens() {
  static const std::vector<std::string> t = {"1e400",
                                             "-1e400",
                                             "1e-400",
                                             "4e-320",
                                             "-1",
                                             "0",
                                             "-0",
                                             "0.5",
                                             "1.5e3",
                                             "2147483647",
                                             "2147483648",
                                             "-2147483649",
                                             "4294967296",
                                             "4294967304",
                                             "9223372036854775807",
                                             "9223372036854775808",
                                             "18446744073709551616",
                                             "-9223372036854775809",
                                             "281474976710656",
                                             "281474976710657",
                                             "16777216",
                                             "99999999999999999999999",
                                             "null",
                                             "true",
                                             "\"\"",
                                             "\"x\"",
                                             "[]",
                                             "{}",
                                             "[null]"};
  return t;
}

class Mutator {
 public:
  explicit Mutator(uint64_t seed) : rng_(seed) {}

  size_t pick(size_t n) {
    return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(rng_);
  }
  bool chance(int percent) { return static_cast<int>(pick(100)) < percent; }

  /// `n` levels of array nesting around `inner`.
  static std::string nested(size_t n, const std::string& inner) {
    return std::string(n, '[') + inner + std::string(n, ']');
  }

  /// 1-4 byte-level edits; `tokens` are inserted or substituted besides random bytes.
  std::string bytes(std::string text, const std::vector<std::string>& tokens) {
    int edits = 1 + static_cast<int>(pick(4));
    for (int e = 0; e < edits; ++e) {
      size_t pos = pick(text.size() + 1);
      switch (pick(10)) {
        case 0:  // flip a bit
          if (pos < text.size()) text[pos] = static_cast<char>(text[pos] ^ (1 << pick(8)));
          break;
        case 1:  // insert a random byte
          text.insert(pos, 1, static_cast<char>(pick(256)));
          break;
        case 2:  // delete a run
          if (pos < text.size()) text.erase(pos, 1 + pick(16));
          break;
        case 3:  // duplicate a slice
          text.insert(pick(text.size() + 1), text.substr(pos, pick(40)));
          break;
        case 4:  // truncate
          text.resize(pos);
          break;
        case 5:  // replace a run of digits by an extreme number
        {
          size_t d = text.find_first_of("0123456789", pos);
          if (d == std::string::npos) break;
          size_t end = text.find_first_not_of("0123456789.eE+-", d);
          text.replace(d, (end == std::string::npos ? text.size() : end) - d,
                       extreme_tokens()[pick(extreme_tokens().size())]);
          break;
        }
        case 6:  // a byte-order mark, at the start or elsewhere
          text.insert(chance(70) ? 0 : pos, "\xEF\xBB\xBF");
          break;
        case 7:  // deep nesting
          text.insert(pos, nested(chance(50) ? 70 : 100000, ""));
          break;
        default:  // a token
          text.insert(pos, tokens[pick(tokens.size())]);
      }
    }
    return text;
  }

  /// 1-3 structure-aware edits of a JSON document, then its text (with raw fragments such as
  /// 1e400 or 100000 nested arrays that a document cannot hold).
  std::string json(Json doc) {
    std::vector<std::pair<std::string, std::string>> raw;  // placeholder → text
    auto placeholder = [&](std::string text) {
      std::string key = "@@raw" + std::to_string(raw.size()) + "@@";
      raw.emplace_back("\"" + key + "\"", std::move(text));
      return Json(key);
    };
    int edits = 1 + static_cast<int>(pick(3));
    for (int e = 0; e < edits; ++e) {
      std::vector<Json*> nodes;
      collect(doc, nodes);
      Json& n = *nodes[pick(nodes.size())];
      switch (pick(9)) {
        case 0:  // an extreme or wrongly typed value
          n = placeholder(extreme_tokens()[pick(extreme_tokens().size())]);
          break;
        case 1:  // a number nudged: ±1, doubled, negated, 2^32 added
          if (n.is_number_integer()) {
            int64_t v = n.get<int64_t>();
            const int64_t options[] = {v + 1, v - 1, v * 2, -v, v + (int64_t{1} << 32), 0};
            n = options[pick(6)];
          } else {
            n = placeholder(extreme_tokens()[pick(extreme_tokens().size())]);
          }
          break;
        case 2:  // deep nesting in place of a value
          n = placeholder(nested(pick(3) == 0 ? 100000 : 60 + pick(10), "0"));
          break;
        case 3:  // an empty array or object
          n = chance(50) ? Json::array() : Json::object();
          break;
        case 4:  // a copy of another node
        {
          Json copy = *nodes[pick(nodes.size())];
          n = std::move(copy);
          break;
        }
        case 5:  // delete a member or an element
          erase_child(n);
          break;
        case 6:  // duplicate a member with another value (a duplicate key in the text)
          if (n.is_object() && !n.empty()) {
            auto it = std::next(n.begin(), static_cast<long>(pick(n.size())));
            std::string other = extreme_tokens()[pick(extreme_tokens().size())];
            it.value() = placeholder(it.value().dump() + ", \"" + it.key() + "\": " + other);
          }
          break;
        case 7:  // duplicate or swap elements of an array
          if (n.is_array() && !n.empty()) {
            if (chance(50))
              n.push_back(n[pick(n.size())]);
            else
              std::swap(n[pick(n.size())], n[pick(n.size())]);
          }
          break;
        default:  // change a string
          if (n.is_string()) {
            std::string s = n.get<std::string>();
            const char* variants[] = {"", "t0", "b1", "O", "X", "x\ny", "a b", "0X", "customized"};
            n = chance(50) ? std::string(variants[pick(9)]) : s + s;
          }
      }
    }
    std::string text = doc.dump();
    for (const auto& [key, value] : raw) {
      size_t at = text.find(key);
      if (at != std::string::npos) text.replace(at, key.size(), value);
    }
    return text;
  }

 private:
  static void collect(Json& v, std::vector<Json*>& out) {
    std::vector<Json*> stack = {&v};
    while (!stack.empty()) {
      Json* n = stack.back();
      stack.pop_back();
      out.push_back(n);
      if (n->is_structured())
        for (auto& child : *n) stack.push_back(&child);
    }
  }

  void erase_child(Json& n) {
    if (n.is_object() && !n.empty()) {
      const std::string key = std::next(n.begin(), static_cast<long>(pick(n.size()))).key();
      n.erase(key);
    } else if (n.is_array() && !n.empty())
      n.erase(n.begin() + static_cast<long>(pick(n.size())));
  }

  std::mt19937_64 rng_;
};

}  // namespace strata::fuzz
