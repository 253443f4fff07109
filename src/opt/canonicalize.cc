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

// ---- gains across a product --------------------------------------------------------------

/// Whether a tensor of shape g is a gain along dim `from_end` of a tensor of shape s (0: the
/// last dim, 1: the one before): of rank from_end + 1 to s's rank, s's extent on that dim, and 1
/// on every other dim (so it broadcasts along all of them).
bool is_gain_along(const Shape& g, const Shape& s, int from_end) {
  const int r = g.rank();
  if (r < from_end + 1 || r > s.rank()) return false;
  for (int i = 0; i < r; ++i) {
    const int64_t want = i == r - 1 - from_end ? s[s.rank() - 1 - from_end] : 1;
    if (g[i] != want) return false;
  }
  return true;
}

/// Whether x is an rms_norm over dim `from_end` (0: the last, 1: the one before): the norm the
/// code generator folds into a product as a row or column scale when it is the operand itself
/// (docs/codegen.md, "Matmul chains and folded norms").
bool is_norm_along(const Dag& g, int x, int from_end) {
  return g.kind(x) == OpKind::RmsNorm && g.at(x).attrs.dim == g.at(x).shape.rank() - 1 - from_end;
}

/// Whether operand `side` (0: A, 1: B) of matmul n is a norm over the contraction dim as the
/// code generator folds it: A = rms_norm(., last dim), B = rms_norm(., dim −2) or
/// B = transpose(rms_norm(., last dim)).
bool is_folding_operand(const Dag& g, int n, int side) {
  const int o = g.in(n, side);
  if (side == 0) return is_norm_along(g, o, 0);
  if (g.kind(o) == OpKind::Transpose) return is_norm_along(g, g.in(o, 0), 0);
  return is_norm_along(g, o, 1);
}

/// A gain on a matmul operand along the contraction dim: the operand is mul(x, gain) or
/// mul(gain, x), for B possibly under a transpose; x's shape and dtype are the product's
/// (the mul only scales), and the mul (and transpose) are read by the matmul only.
struct Gained {
  int x = -1;
  int gain = -1;
  int from_end = 0;         ///< the contraction dim of x, counted from the last (0 or 1)
  bool transposed = false;  ///< B = transpose(mul(x, gain))
};

/// The gained operand `side` of matmul n whose x is a norm over the contraction dim once the
/// gain is gone (is_folding_operand then holds for x in the operand's place).
std::optional<Gained> match_gained(const Dag& g, int n, int side) {
  int o = g.in(n, side), reader = n;
  Gained r;
  if (side == 1) {
    r.from_end = 1;
    if (g.kind(o) == OpKind::Transpose) {
      if (!g.private_to(o, n)) return std::nullopt;
      reader = o;
      o = g.in(o, 0);
      r.from_end = 0;
      r.transposed = true;
    }
  }
  if (g.kind(o) != OpKind::Mul || !g.private_to(o, reader)) return std::nullopt;
  for (int k = 0; k < 2; ++k) {
    const int x = g.in(o, k), gain = g.in(o, 1 - k);
    if (g.at(x).shape != g.at(o).shape || g.at(x).dtype != g.at(o).dtype) continue;
    if (!is_gain_along(g.at(gain).shape, g.at(x).shape, r.from_end)) continue;
    if (!is_norm_along(g, x, r.from_end)) continue;
    r.x = x;
    r.gain = gain;
    return r;
  }
  return std::nullopt;
}

/// The operand `side` of matmul n scaled by `gain` along the contraction dim, where gain is a
/// gain along dim `from_end` of the tensor it came from: A' = mul(A, gain) (gain transposed
/// when it was a column), B' = transpose(mul(Y, gain)) for B = transpose(Y), else
/// B' = mul(B, transpose(gain)); the operand first, so that the dtype stays its own. nullopt
/// where the IR cannot express it (a rank-1 gain as a column: there is no reshape).
std::optional<int> scaled_operand(Dag& g, int n, int side, int gain, int from_end) {
  const int o = g.in(n, side);
  auto scaled = [&](int t, int gn) -> std::optional<int> {
    auto m = g.add(OpKind::Mul, {t, gn}, {});
    if (!m || g.at(*m).shape != g.at(t).shape) return std::nullopt;  // gain broadcasts up
    return m;
  };
  // The gain as a row ([.., 1, K] or [K]) or as a column ([.., K, 1]).
  auto as = [&](int want_from_end) -> std::optional<int> {
    if (from_end == want_from_end) return gain;
    if (g.at(gain).shape.rank() < 2) return std::nullopt;
    return g.add(OpKind::Transpose, {gain}, {});
  };
  if (side == 0) {
    auto row = as(0);
    return row ? scaled(o, *row) : std::nullopt;
  }
  if (g.kind(o) == OpKind::Transpose) {
    auto row = as(0);
    if (!row) return std::nullopt;
    auto m = scaled(g.in(o, 0), *row);
    return m ? g.add(OpKind::Transpose, {*m}, {}) : std::nullopt;
  }
  auto col = as(1);
  return col ? scaled(o, *col) : std::nullopt;
}

/// An alternative-form rule (docs/search.md, "Alternative forms"): the form it makes folds K's
/// norm into QK-norm's product but can search worse (more block ops on the gained side), so the
/// search enumerates it beside the canonical form, never instead of it.
///
/// matmul(A, transpose(mul(X, g))) → matmul(mul(A, g), transpose(X)) for a gain g along the
/// contraction dim (A·diag(g)·Xᵀ = (A∘g)·Xᵀ), and its variants: mul(g, X); B = mul(X, g) with
/// g a column [.., K, 1] (A gets transpose(g)); the mirror, a gain on A moving onto B. The gain
/// moves when that leaves its operand a norm over the contraction dim (a norm the code
/// generator folds into the product) and the other operand is not such a norm (it would stop
/// folding). B's gain moves onto A first, whatever their sizes: the fused kernels of a product
/// followed by a row reduction (softmax, a norm) give each block whole rows of the result and
/// stream all of B through every block, so a scale of A is applied once per element (QK-norm:
/// K's gain onto the queries, at prefill too) and a scale of B once per element and row block.
/// A's gain moves onto B only when B has no more elements than A (RMSNorm then a linear layer:
/// the gain stays on the activations rather than scaling the weight).
bool gain_across_matmul(Dag& g, int n) {
  if (g.kind(n) != OpKind::Matmul || g.in(n, 0) == g.in(n, 1)) return false;
  for (int from : {1, 0}) {
    const int to = 1 - from;
    auto m = match_gained(g, n, from);
    if (!m || is_folding_operand(g, n, to)) continue;
    if (from == 0 && g.at(g.in(n, 1)).shape.numel() > g.at(g.in(n, 0)).shape.numel()) continue;
    auto dest = scaled_operand(g, n, to, m->gain, m->from_end);
    if (!dest) continue;
    int src = m->x;
    if (m->transposed) {
      auto t = g.add(OpKind::Transpose, {m->x}, {});
      if (!t) continue;
      src = *t;
    }
    std::vector<int> in = from == 0 ? std::vector<int>{src, *dest} : std::vector<int>{*dest, src};
    if (g.redefine(n, OpKind::Matmul, in, g.at(n).attrs)) return true;
  }
  return false;
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
/// whether it rewrote tensor n; a rule leaves the value of every live tensor unchanged. An
/// `alternative` rule is not part of the canonical form: it makes a form that is better for
/// some programs and worse for others, which the search enumerates beside the canonical form
/// (alternative_forms) and canonicalize_program applies only when asked to.
struct Rule {
  std::string_view name;
  bool (*apply)(Dag&, int);
  bool alternative = false;
};
constexpr Rule kRules[] = {
    {"rms_norm_div", rms_norm_div},
    {"rms_norm_mul", rms_norm_mul},
    {"slice_full", slice_full},
    {"slice_of_slice", slice_of_slice},
    {"slice_of_matmul", slice_of_matmul},
    {"slice_of_elementwise", slice_of_elementwise},
    {"gain_across_matmul", gain_across_matmul, true},
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

std::vector<std::string_view> alternative_rule_names() {
  std::vector<std::string_view> names;
  for (const Rule& r : kRules)
    if (r.alternative) names.push_back(r.name);
  return names;
}

Result<CanonicalProgram> canonicalize_program(const KernelGraph& program,
                                              std::span<const std::string_view> alternatives) {
  for (std::string_view a : alternatives) {
    const bool known = std::any_of(std::begin(kRules), std::end(kRules),
                                   [&](const Rule& r) { return r.alternative && r.name == a; });
    if (!known) return make_error("no alternative-form rule is called `" + std::string(a) + "`");
  }
  for (const KernelOp& op : program.ops())
    if (op.kind == OpKind::Customized)
      return make_error("canonicalization takes programs of predefined ops only");
  std::vector<const Rule*> rules;
  for (const Rule& r : kRules)
    if (!r.alternative ||
        std::find(alternatives.begin(), alternatives.end(), r.name) != alternatives.end())
      rules.push_back(&r);
  Dag g = to_dag(program);
  CanonicalProgram result;
  for (int rewrites = 0; rewrites < kMaxRewrites; ++rewrites) {
    g.refresh();
    bool changed = false;
    for (int n : g.live_order()) {
      for (const Rule* r : rules)
        if (r->apply(g, n)) {
          ++result.rewrites[std::string(r->name)];
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

std::vector<AlternativeForm> alternative_forms(const KernelGraph& program) {
  std::vector<AlternativeForm> forms;
  forms.reserve(kMaxAlternativeForms);  // `seen` points into it
  auto base = canonicalize_program(program);
  if (!base.ok()) return forms;  // the search reports the canonical form's own failure
  std::vector<const KernelGraph*> seen{&base->program};
  for (std::string_view name : alternative_rule_names()) {
    if (static_cast<int>(forms.size()) >= kMaxAlternativeForms) break;
    const std::string_view one[] = {name};
    Result<CanonicalProgram> form = canonicalize_program(program, one);
    if (form.ok()) {
      if (!form->rewrites.contains(std::string(name))) continue;  // the rule does not fire
      if (std::any_of(seen.begin(), seen.end(), [&](const KernelGraph* g) {
            return g->structurally_equal(form->program);
          }))
        continue;  // it fired, but the fixpoint is a form already listed
    }
    forms.push_back({std::string(name), std::move(form)});
    if (forms.back().form.ok()) seen.push_back(&forms.back().form->program);
  }
  return forms;
}

}  // namespace strata
