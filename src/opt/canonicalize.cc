// canonicalize_program(): the rewrite rules of docs/search.md, "Canonicalization", applied to a
// mutable copy of the program (a Dag) until none applies, then rebuilt through the checking
// constructors.
#include "strata/opt/canonicalize.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <span>

#include "strata/ir/shape_infer.h"

namespace strata {
namespace {

/// A value of the program being rewritten. Nodes are never removed: a rule redefines a node
/// in place (its value stays the same, so its readers and output mark stay valid), adds
/// helper nodes, or forwards a node's readers to an equal node. Nodes nobody reaches from the
/// roots are dropped when the graph is rebuilt.
struct Node {
  OpKind kind = OpKind::Input;
  std::vector<int> in;
  OpAttrs attrs;
  Shape shape;
  DType dtype = DType::f16;
  std::string name;  ///< the input program's name of the tensor ("" for new nodes)
};

struct Dag {
  std::vector<Node> nodes;
  std::vector<int> inputs;   ///< program inputs, in order
  std::vector<int> outputs;  ///< program outputs, in order
  std::vector<int> kept;     ///< tensors nobody read in the input program (kept as they were)
  /// After refresh(): the distinct live nodes that read each node, and the output marks.
  std::vector<std::vector<int>> readers;
  std::vector<char> is_output;

  const Node& at(int n) const { return nodes[n]; }
  OpKind kind(int n) const { return nodes[n].kind; }
  int in(int n, int i) const { return nodes[n].in[i]; }

  /// The live non-input nodes in a topological order (operands first).
  std::vector<int> live_order() const {
    std::vector<int> order;
    std::vector<char> state(nodes.size(), 0);  // 0 new, 1 open, 2 done
    std::vector<int> roots = outputs;
    roots.insert(roots.end(), kept.begin(), kept.end());
    for (int root : roots) {
      std::vector<std::pair<int, size_t>> stack{{root, 0}};
      while (!stack.empty()) {
        auto& [n, next] = stack.back();
        if (state[n] == 2) {
          stack.pop_back();
          continue;
        }
        state[n] = 1;
        if (next < nodes[n].in.size()) {
          int m = nodes[n].in[next++];
          if (state[m] == 0) stack.push_back({m, 0});
          continue;
        }
        state[n] = 2;
        if (nodes[n].kind != OpKind::Input) order.push_back(n);
        stack.pop_back();
      }
    }
    return order;
  }

  void refresh() {
    readers.assign(nodes.size(), {});
    is_output.assign(nodes.size(), 0);
    for (int o : outputs) is_output[o] = 1;
    for (int n : live_order())
      for (int m : nodes[n].in)
        if (std::find(readers[m].begin(), readers[m].end(), n) == readers[m].end())
          readers[m].push_back(n);
  }

  /// Whether `reader` is the only reader of n (once or more) and n is not an output: a
  /// rewrite of `reader` may then drop n.
  bool private_to(int n, int reader) const {
    return !is_output[n] && readers[n].size() == 1 && readers[n][0] == reader;
  }

  /// Adds kind(in) with attrs, or returns an existing node of that definition (two readers
  /// pushing the same slice share it); nullopt when the shape rules reject it.
  std::optional<int> add(OpKind kind, std::vector<int> in, OpAttrs attrs) {
    std::vector<Shape> shapes;
    for (int m : in) shapes.push_back(nodes[m].shape);
    auto s = infer_compute_shape(kind, shapes, attrs);
    if (!s.ok()) return std::nullopt;
    for (size_t n = 0; n < nodes.size(); ++n)
      if (nodes[n].kind == kind && nodes[n].in == in && nodes[n].attrs == attrs)
        return static_cast<int>(n);
    const DType dtype = nodes[in[0]].dtype;  // the result's dtype is the first operand's
    nodes.push_back({kind, std::move(in), attrs, *s, dtype, ""});
    return static_cast<int>(nodes.size()) - 1;
  }

  /// Redefines n as kind(in) with attrs if that has n's shape and dtype (else changes nothing
  /// and returns false).
  bool redefine(int n, OpKind kind, std::vector<int> in, OpAttrs attrs) {
    std::vector<Shape> shapes;
    for (int m : in) shapes.push_back(nodes[m].shape);
    auto s = infer_compute_shape(kind, shapes, attrs);
    if (!s.ok() || *s != nodes[n].shape || nodes[in[0]].dtype != nodes[n].dtype) return false;
    nodes[n].kind = kind;
    nodes[n].in = std::move(in);
    nodes[n].attrs = attrs;
    return true;
  }

  /// Makes every reader of n read x instead (x has n's value, shape and dtype). Refused for
  /// an output n, whose tensor must stay distinct from the inputs and the other outputs.
  bool forward(int n, int x) {
    if (is_output[n] || nodes[n].shape != nodes[x].shape || nodes[n].dtype != nodes[x].dtype)
      return false;
    for (Node& node : nodes)
      for (int& m : node.in)
        if (m == n) m = x;
    for (int& k : kept)
      if (k == n) k = x;
    return true;
  }
};

// ---- RMSNorm ----------------------------------------------------------------------------

/// The statistic mean(x², d) + eps of a written-out RMSNorm.
struct MeanSquare {
  int x = -1;
  int dim = 0;
  double eps = 0;
};

/// Matches s = add_scalar(m, eps) (eps ≥ 0) or s = m (eps 0), with m = mean(p, dim=d, to=1)
/// and p = square(x) or mul(x, x); s, m and p must be read only inside the pattern (s by
/// `reader`).
std::optional<MeanSquare> match_mean_square(const Dag& g, int s, int reader) {
  MeanSquare r;
  if (!g.private_to(s, reader)) return std::nullopt;
  int m = s;
  if (g.kind(s) == OpKind::AddScalar) {
    r.eps = g.at(s).attrs.scalar;
    if (!(r.eps >= 0) || !std::isfinite(r.eps)) return std::nullopt;
    m = g.in(s, 0);
    if (!g.private_to(m, s)) return std::nullopt;
  }
  if (g.kind(m) != OpKind::Mean || g.at(m).attrs.to != 1) return std::nullopt;
  r.dim = g.at(m).attrs.dim;
  const int p = g.in(m, 0);
  if (!g.private_to(p, m)) return std::nullopt;
  if (g.kind(p) == OpKind::Square)
    r.x = g.in(p, 0);
  else if (g.kind(p) == OpKind::Mul && g.in(p, 0) == g.in(p, 1))
    r.x = g.in(p, 0);
  else
    return std::nullopt;
  return r;
}

/// The statistic under q = sqrt(s) when its x is `x`, q read only by `reader`.
std::optional<MeanSquare> match_root(const Dag& g, int q, int reader, int x) {
  if (g.kind(q) != OpKind::Sqrt || !g.private_to(q, reader)) return std::nullopt;
  auto st = match_mean_square(g, g.in(q, 0), q);
  if (!st || st->x != x) return std::nullopt;
  return st;
}

OpAttrs norm_attrs(const MeanSquare& st) {
  OpAttrs a;
  a.dim = st.dim;
  a.scalar = st.eps;
  return a;
}

/// div(x, sqrt(S)) with S = mean(x², d) [+ eps] → rms_norm(x, dim=d, eps).
bool rms_norm_div(Dag& g, int n) {
  if (g.kind(n) != OpKind::Div) return false;
  const int x = g.in(n, 0);
  auto st = match_root(g, g.in(n, 1), n, x);
  return st && g.redefine(n, OpKind::RmsNorm, {x}, norm_attrs(*st));
}

/// mul(x, div(c, sqrt(S))) → mul(rms_norm(x, d, eps), c), and mul(div(c, sqrt(S)), x) →
/// mul(c, rms_norm(x, d, eps)), S as in rms_norm_div: x·c/sqrt(S) for any tensor c (the
/// capture's rsqrt writes c as an input bound to 1; a gain works the same), operand order
/// kept so that the result's dtype stays that of the first operand.
bool rms_norm_mul(Dag& g, int n) {
  if (g.kind(n) != OpKind::Mul) return false;
  for (int side = 0; side < 2; ++side) {
    const int x = g.in(n, side), r = g.in(n, 1 - side);
    if (g.kind(r) != OpKind::Div || !g.private_to(r, n)) continue;
    auto st = match_root(g, g.in(r, 1), r, x);
    if (!st) continue;
    const int c = g.in(r, 0);
    auto norm = g.add(OpKind::RmsNorm, {x}, norm_attrs(*st));
    if (!norm) continue;
    std::vector<int> in = side == 0 ? std::vector<int>{*norm, c} : std::vector<int>{c, *norm};
    if (g.redefine(n, OpKind::Mul, in, {})) return true;
  }
  return false;
}

// ---- slices -----------------------------------------------------------------------------

OpAttrs slice_attrs(int dim, int64_t start, int64_t end) {
  OpAttrs a;
  a.dim = dim;
  a.start = start;
  a.end = end;
  return a;
}

/// slice(x, d, 0, extent) → x (readers read x; not for an output).
bool slice_full(Dag& g, int n) {
  if (g.kind(n) != OpKind::Slice) return false;
  const OpAttrs& a = g.at(n).attrs;
  const int x = g.in(n, 0);
  return a.start == 0 && a.end == g.at(x).shape[a.dim] && g.forward(n, x);
}

/// slice(slice(x, d, s1, e1), d, s2, e2) → slice(x, d, s1 + s2, s1 + e2).
bool slice_of_slice(Dag& g, int n) {
  if (g.kind(n) != OpKind::Slice) return false;
  const int y = g.in(n, 0);
  if (g.kind(y) != OpKind::Slice || g.at(y).attrs.dim != g.at(n).attrs.dim) return false;
  const OpAttrs &inner = g.at(y).attrs, &outer = g.at(n).attrs;
  return g.redefine(n, OpKind::Slice, {g.in(y, 0)},
                    slice_attrs(outer.dim, inner.start + outer.start, inner.start + outer.end));
}

/// Whether every reader of y is a slice and y is not an output: pushing all of them through
/// y then leaves y unread (no value is computed twice).
bool read_by_slices_only(const Dag& g, int y) {
  if (g.is_output[y]) return false;
  return std::all_of(g.readers[y].begin(), g.readers[y].end(),
                     [&](int r) { return g.kind(r) == OpKind::Slice; });
}

/// Whether everything computed from n is elementwise or a slice, up to the outputs: the
/// slices pushed towards the inputs then end in output tensors. Where a slice feeds more
/// (attention reading the Q, K, V slices of one projection), the search does better with the
/// one matmul and the slices as views read in place (docs/search.md, "Canonicalization"), so
/// the pushdown rules leave such slices alone.
bool only_elementwise_after(const Dag& g, int n) {
  std::vector<char> seen(g.nodes.size(), 0);
  std::vector<int> todo{n};
  while (!todo.empty()) {
    const int m = todo.back();
    todo.pop_back();
    for (int r : g.readers[m]) {
      if (!is_elementwise(g.kind(r)) && g.kind(r) != OpKind::Slice) return false;
      if (!seen[r]) {
        seen[r] = 1;
        todo.push_back(r);
      }
    }
  }
  return true;
}

/// Whether x is a program input or a view (slice, transpose) of one.
bool input_or_view(const Dag& g, int x) {
  const OpKind k = g.kind(x);
  return k == OpKind::Input ||
         ((k == OpKind::Slice || k == OpKind::Transpose) && g.kind(g.in(x, 0)) == OpKind::Input);
}

/// Whether the slices pushed into x end on program inputs: x is an input or a view of one, a
/// matmul of such (slice_of_matmul pushes through it), or an elementwise op of such. After
/// computed operands (an RMSNorm before a QKV projection) the search does better with the one
/// matmul and its slices as views (docs/search.md, "Canonicalization"), so the pushdown rules
/// leave those alone.
bool reaches_inputs(const Dag& g, int x) {
  const OpKind k = g.kind(x);
  if (input_or_view(g, x)) return true;
  if (k == OpKind::Matmul) return input_or_view(g, g.in(x, 0)) && input_or_view(g, g.in(x, 1));
  if (!is_elementwise(k)) return false;
  for (int m : g.at(x).in)
    if (!reaches_inputs(g, m)) return false;
  return true;
}

/// slice(matmul(A, B), d, s, e) → matmul(A, slice(B, d, s, e)) for the column dim (d = rank−1),
/// matmul(slice(A, d, s, e), B) for the row dim (rank−2), both operands sliced for a batch
/// dim; when every reader of the matmul is a slice (so the matmul disappears once all are
/// pushed), and only elementwise ops follow (only_elementwise_after). A fused QKV projection
/// whose slices are the outputs becomes three matmuls of X with views of W.
bool slice_of_matmul(Dag& g, int n) {
  if (g.kind(n) != OpKind::Slice) return false;
  const int m = g.in(n, 0);
  if (g.kind(m) != OpKind::Matmul || !read_by_slices_only(g, m) || !only_elementwise_after(g, m) ||
      !reaches_inputs(g, m))
    return false;
  const OpAttrs& a = g.at(n).attrs;
  const int rank = g.at(m).shape.rank();
  int lhs = g.in(m, 0), rhs = g.in(m, 1);
  if (a.dim != rank - 1) {  // rows or batch: A is sliced
    auto s = g.add(OpKind::Slice, {lhs}, slice_attrs(a.dim, a.start, a.end));
    if (!s) return false;
    lhs = *s;
  }
  if (a.dim != rank - 2) {  // columns or batch: B is sliced
    auto s = g.add(OpKind::Slice, {rhs}, slice_attrs(a.dim, a.start, a.end));
    if (!s) return false;
    rhs = *s;
  }
  return g.redefine(n, OpKind::Matmul, {lhs, rhs}, {});
}

/// slice(f(a, b), d, s, e) → f(a', b') for an elementwise f (op table categories Unary and
/// Binary), where an operand is sliced along its dim matching d unless it broadcasts there
/// (missing, or extent 1 against a larger extent); when every reader of f's result is a slice
/// and only elementwise ops follow (only_elementwise_after).
bool slice_of_elementwise(Dag& g, int n) {
  if (g.kind(n) != OpKind::Slice) return false;
  const int y = g.in(n, 0);
  if (!is_elementwise(g.kind(y)) || !read_by_slices_only(g, y) || !only_elementwise_after(g, y) ||
      !reaches_inputs(g, y))
    return false;
  const OpAttrs& a = g.at(n).attrs;
  const int rank = g.at(y).shape.rank();
  std::vector<int> in;
  std::vector<std::pair<int, int>> sliced;  // operand → its slice (a(x, x) slices x once)
  for (int x : g.at(y).in) {
    const int d = a.dim - (rank - g.at(x).shape.rank());
    if (d < 0 || g.at(x).shape[d] != g.at(y).shape[a.dim]) {
      in.push_back(x);  // broadcast along the sliced dim: every element is read anyway
      continue;
    }
    auto it = std::find_if(sliced.begin(), sliced.end(), [&](auto& p) { return p.first == x; });
    if (it != sliced.end()) {
      in.push_back(it->second);
      continue;
    }
    auto s = g.add(OpKind::Slice, {x}, slice_attrs(d, a.start, a.end));
    if (!s) return false;
    sliced.push_back({x, *s});
    in.push_back(*s);
  }
  return g.redefine(n, g.kind(y), in, g.at(y).attrs);
}

// ---- other cheap identities -------------------------------------------------------------

/// transpose(transpose(x)) → x (readers read x; not for an output).
bool transpose_pair(Dag& g, int n) {
  if (g.kind(n) != OpKind::Transpose || g.kind(g.in(n, 0)) != OpKind::Transpose) return false;
  return g.forward(n, g.in(g.in(n, 0), 0));
}

/// mul_scalar(mul_scalar(x, a), b) → mul_scalar(x, a·b) when a·b is exact in double (the
/// inner op read only here).
bool mul_scalar_chain(Dag& g, int n) {
  if (g.kind(n) != OpKind::MulScalar) return false;
  const int y = g.in(n, 0);
  if (g.kind(y) != OpKind::MulScalar || !g.private_to(y, n)) return false;
  const double a = g.at(y).attrs.scalar, b = g.at(n).attrs.scalar, p = a * b;
  if (!std::isfinite(p) || std::fma(a, b, -p) != 0 || (p == 0 && a != 0 && b != 0)) return false;
  OpAttrs attrs = g.at(n).attrs;
  attrs.scalar = p;
  return g.redefine(n, OpKind::MulScalar, {g.in(y, 0)}, attrs);
}

/// add_scalar(add_scalar(x, a), b) → add_scalar(x, a + b) when a + b is exact in double (the
/// inner op read only here).
bool add_scalar_chain(Dag& g, int n) {
  if (g.kind(n) != OpKind::AddScalar) return false;
  const int y = g.in(n, 0);
  if (g.kind(y) != OpKind::AddScalar || !g.private_to(y, n)) return false;
  const double a = g.at(y).attrs.scalar, b = g.at(n).attrs.scalar, s = a + b;
  // Exact iff the rounding error of the sum (Knuth's two-sum) is zero.
  const double bb = s - a, err = (a - (s - bb)) + (b - bb);
  if (!std::isfinite(s) || err != 0) return false;
  OpAttrs attrs = g.at(n).attrs;
  attrs.scalar = s;
  return g.redefine(n, OpKind::AddScalar, {g.in(y, 0)}, attrs);
}

/// The rules, tried in this order at each live tensor, operands before readers. Each returns
/// whether it rewrote tensor n; a rule leaves the value of every live tensor unchanged.
struct Rule {
  std::string_view name;
  bool (*apply)(Dag&, int);
};
constexpr Rule kRules[] = {
    {"rms_norm_div", rms_norm_div},
    {"rms_norm_mul", rms_norm_mul},
    {"slice_full", slice_full},
    {"slice_of_slice", slice_of_slice},
    {"slice_of_matmul", slice_of_matmul},
    {"slice_of_elementwise", slice_of_elementwise},
    {"transpose_pair", transpose_pair},
    {"mul_scalar_chain", mul_scalar_chain},
    {"add_scalar_chain", add_scalar_chain},
};
/// A bound on rewrites (each rule removes an op, moves a slice towards the inputs or makes a
/// product's operand a folding norm without unmaking one, so the rewriting ends long before on
/// any program the search takes).
constexpr int kMaxRewrites = 10000;

Dag to_dag(const KernelGraph& p) {
  Dag g;
  for (const KernelTensor& t : p.tensors()) {
    const KernelOp& op = p.op(t.producer);
    g.nodes.push_back({op.kind, op.inputs, op.attrs, t.shape, t.dtype, t.name});
  }
  g.inputs = p.inputs();
  g.outputs = p.outputs();
  g.kept = p.dead_tensors();
  return g;
}

Result<KernelGraph> from_dag(const Dag& g, const KernelGraph& program) {
  KernelGraph out;
  std::vector<int> id(g.nodes.size(), -1);
  for (int n : g.inputs) {
    STRATA_ASSIGN_OR_RETURN(id[n], out.add_input(g.at(n).name, g.at(n).shape, g.at(n).dtype));
  }
  for (int n : g.live_order()) {
    std::vector<int> in;
    for (int m : g.at(n).in) in.push_back(id[m]);
    STRATA_ASSIGN_OR_RETURN(id[n], out.add_op(g.at(n).kind, in, g.at(n).attrs, g.at(n).name));
  }
  for (size_t i = 0; i < g.outputs.size(); ++i)
    STRATA_RETURN_IF_ERROR(
        out.mark_output(id[g.outputs[i]], program.tensor_name(program.outputs()[i])));
  out.copy_parallel_interface(program);
  return out;
}

}  // namespace

Status check_canonical_interface(const KernelGraph& p, const KernelGraph& c) {
  if (p.inputs().size() != c.inputs().size() || p.outputs().size() != c.outputs().size())
    return make_error("the canonical program's inputs or outputs differ in number");
  auto same = [&](int a, int b) {
    return p.tensor(a).shape == c.tensor(b).shape && p.tensor(a).dtype == c.tensor(b).dtype;
  };
  auto read = [](const KernelGraph& g, int t) {
    for (const KernelOp& op : g.ops())
      if (std::find(op.inputs.begin(), op.inputs.end(), t) != op.inputs.end()) return true;
    return false;
  };
  for (size_t i = 0; i < p.inputs().size(); ++i) {
    const int a = p.inputs()[i], b = c.inputs()[i];
    if (!same(a, b) || p.tensor(a).name != c.tensor(b).name)
      return make_error("input " + std::to_string(i) + " differs in the canonical program");
    if (read(p, a) && !read(c, b))
      return make_error("input `" + p.tensor_name(a) + "` is no longer read");
  }
  for (size_t i = 0; i < p.outputs().size(); ++i)
    if (!same(p.outputs()[i], c.outputs()[i]))
      return make_error("output " + std::to_string(i) + " differs in the canonical program");
  return Status::success();
}

std::vector<std::string_view> canonical_rule_names() {
  std::vector<std::string_view> names;
  for (const Rule& r : kRules) names.push_back(r.name);
  return names;
}

Result<CanonicalProgram> canonicalize_program(const KernelGraph& program) {
  for (const KernelOp& op : program.ops())
    if (op.kind == OpKind::Customized)
      return make_error("canonicalization takes programs of predefined ops only");
  Dag g = to_dag(program);
  CanonicalProgram result;
  for (int rewrites = 0; rewrites < kMaxRewrites; ++rewrites) {
    g.refresh();
    bool changed = false;
    for (int n : g.live_order()) {
      for (const Rule& r : kRules)
        if (r.apply(g, n)) {
          ++result.rewrites[std::string(r.name)];
          changed = true;
          break;
        }
      if (changed) break;
    }
    if (!changed) break;
  }
  if (!result.changed()) {
    result.program = program;
    return result;
  }
  auto rebuilt = from_dag(g, program);
  if (!rebuilt.ok())
    return make_error("canonicalization built an invalid graph: " + rebuilt.error().message);
  STRATA_RETURN_IF_ERROR(check_canonical_interface(program, *rebuilt));
  result.program = std::move(rebuilt).value();
  return result;
}

}  // namespace strata
