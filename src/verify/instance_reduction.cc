#include "verify/instance_reduction.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "verify/block_classes.h"
#include "strata/ir/dim_links.h"

namespace strata::verify {
namespace {

std::vector<Shape> input_shapes(const KernelGraph& g, const KernelOp& op) {
  std::vector<Shape> s;
  for (int t : op.inputs) s.push_back(g.tensor(t).shape);
  return s;
}

/// Union–find over (tensor, dim) pairs.
struct UnionFind {
  std::vector<int> parent;
  explicit UnionFind(int n) : parent(n) { std::iota(parent.begin(), parent.end(), 0); }
  int find(int x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  }
  void unite(int a, int b) { parent[find(a)] = find(b); }
};

/// The grid axis of a customized op that splits class c, per class.
struct Split {
  int cls = -1, op = -1, axis = -1;
  int64_t grid = 1, tile = 1;
};

/// A class a customized op's block graph computes index by index (block_classes.h): its
/// tiles, its grid axis (−1 none) and, when the for-loop iterates over it, the loop's trip
/// count may change.
struct Uniform {
  int cls = -1, op = -1, axis = -1;
  bool looped = false;
};

/// The classes a candidate respects, by propagating the program's input labels through it.
struct Propagation {
  std::vector<std::vector<int>> labels;  // per candidate tensor and dim
  std::vector<Split> splits;             // customized ops' splits of live classes (tiles kept)
  std::vector<Uniform> uniform;          // customized ops' uniform live classes
  std::vector<BlockClasses> blocks;      // per op id: a customized op's block labels
  std::vector<bool> live;
};

/// One pass of label propagation through `g` with the classes in `live`; records in `dead`
/// every class a violation concerns. Returns false when `g` has an op the reduction does not
/// know.
bool propagate(const KernelGraph& g, const ProgramClasses& pc, const KernelGraph& program,
               Propagation& p, std::vector<bool>& dead) {
  auto live = [&](int c) { return c >= 0 && p.live[c]; };
  auto kill = [&](int c) {
    if (c >= 0) dead[c] = true;
  };
  p.labels.assign(g.tensors().size(), {});
  p.splits.clear();
  p.uniform.clear();
  p.blocks.assign(g.ops().size(), {});
  for (size_t t = 0; t < g.tensors().size(); ++t)
    p.labels[t].assign(g.tensor(static_cast<int>(t)).shape.rank(), -1);
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const std::vector<int>& from = pc.labels[program.inputs()[i]];
    std::vector<int>& to = p.labels[g.inputs()[i]];
    for (size_t d = 0; d < to.size() && d < from.size(); ++d) to[d] = live(from[d]) ? from[d] : -1;
  }
  for (size_t id = 0; id < g.ops().size(); ++id) {
    const KernelOp& op = g.op(static_cast<int>(id));
    if (op.kind == OpKind::Input) continue;
    if (op.kind != OpKind::Customized) {
      const Shape& out = g.tensor(op.outputs[0]).shape;
      auto links = dim_links(op.kind, op.attrs, input_shapes(g, op), out);
      if (!links) return false;
      std::vector<int>& lo = p.labels[op.outputs[0]];
      for (int d = 0; d < out.rank(); ++d) {
        int common = -2;
        bool conflict = false;
        for (auto [i, di] : links->aligned[d]) {
          int c = p.labels[op.inputs[i]][di];
          if (common == -2) common = c;
          else if (common != c) conflict = true;
        }
        if (conflict) {
          for (auto [i, di] : links->aligned[d]) kill(p.labels[op.inputs[i]][di]);
          common = -1;
        }
        lo[d] = common < 0 ? -1 : common;
      }
      for (auto [i, di] : links->forbidden_in) kill(p.labels[op.inputs[i]][di]);
      for (int d : links->forbidden_out) {
        kill(lo[d]);
        lo[d] = -1;
      }
      continue;
    }
    // A customized op: each live class among its inputs' dims is either split by one grid
    // axis that maps exactly that class's dims (its tiles are kept), or one the block graph
    // computes index by index (its tiles may change: block_classes.h).
    const BlockGraph& b = *op.body;
    const int nc = static_cast<int>(pc.extent.size());
    std::vector<std::vector<int>> operands;
    for (int t : op.inputs) {
      operands.push_back(p.labels[t]);
      for (int& c : operands.back())
        if (!live(c)) c = -1;
    }
    BlockClasses bc = block_classes(b, operands, nc);
    std::vector<int> axis_class(3, -2);  // per grid axis: the class it splits, −1 none, −2 unset
    std::vector<int> class_axis(nc, -2);  // per class: its grid axis, −1 none, −2 not read
    for (const BlockOp& bop : b.ops()) {
      if (bop.kind != OpKind::Input) continue;
      const std::vector<int>& li = operands[bop.attrs.input_index];
      for (int a = 0; a < 3; ++a) {
        int d = bop.attrs.imap[a];
        if (d == kReplicate) continue;
        int c = li[d];
        if (axis_class[a] == -2) axis_class[a] = c;
        else if (axis_class[a] != c) {
          kill(axis_class[a]);
          kill(c);
        }
      }
      for (size_t d = 0; d < li.size(); ++d) {
        int c = li[d];
        if (c < 0) continue;
        int mapped = -1;
        for (int a = 0; a < 3; ++a)
          if (bop.attrs.imap[a] == static_cast<int>(d)) mapped = a;
        if (class_axis[c] != -2 && class_axis[c] != mapped) kill(c);
        class_axis[c] = mapped;
      }
    }
    std::vector<bool> uniform(nc, false);
    for (int c = 0; c < nc; ++c) {
      const int a = class_axis[c];
      if (a == -2 || !live(c)) continue;
      if (bc.uniform[c]) {
        uniform[c] = true;
        p.uniform.push_back({c, static_cast<int>(id), a, bc.loop_class == c});
      } else if (a >= 0) {
        int64_t grid = b.grid()[a];
        const int64_t tile = (pc.extent[c] + grid - 1) / grid;
        p.splits.push_back({c, static_cast<int>(id), a, grid, tile});
      } else {
        kill(c);  // held whole or looped over by a block that mixes its indices
      }
    }
    for (int o = 0; o < b.num_outputs(); ++o) {
      const BlockOp& saver = b.op(b.output_op(o));
      std::vector<int>& lo = p.labels[op.outputs[o]];
      for (int a = 0; a < 3; ++a) {
        int d = saver.attrs.omap[a];
        if (d == kReplicate) continue;
        int c = axis_class[a] >= 0 && class_axis[axis_class[a]] == a ? axis_class[a] : -1;
        lo[d] = live(c) ? c : -1;
      }
      // A uniform class is on the saved tile's dims that carry it (for a class split by a
      // grid axis, the dim that axis places: the same as above).
      const std::vector<int>& saved = bc.labels[saver.inputs[0]];
      for (size_t d = 0; d < saved.size(); ++d)
        if (saved[d] >= 0 && uniform[saved[d]]) lo[d] = saved[d];
    }
    p.blocks[id] = std::move(bc);
  }
  // The outputs must carry the program's classes, dim by dim.
  for (size_t o = 0; o < g.outputs().size(); ++o) {
    const std::vector<int>& want = pc.labels[program.outputs()[o]];
    const std::vector<int>& got = p.labels[g.outputs()[o]];
    for (size_t d = 0; d < got.size(); ++d) {
      int w = d < want.size() && live(want[d]) ? want[d] : -1;
      int h = live(got[d]) ? got[d] : -1;
      if (w != h) {
        kill(w);
        kill(h);
      }
    }
  }
  // Every dim of a live class has the class's extent (a check of the propagation itself).
  for (size_t t = 0; t < g.tensors().size(); ++t)
    for (size_t d = 0; d < p.labels[t].size(); ++d) {
      int c = p.labels[t][d];
      if (live(c) && g.tensor(static_cast<int>(t)).shape[static_cast<int>(d)] != pc.extent[c])
        kill(c);
    }
  return true;
}

/// How a customized op of the candidate is rebuilt: its grid and for-loop, and the new tile
/// extents of the classes its block graph computes index by index.
struct BlockPlan {
  Dim3 grid;
  int forloop = 1;
  /// Per class: the extent of its dims in loop tiles and in post tiles; 0: unchanged.
  std::vector<std::pair<int64_t, int64_t>> part;
  const BlockClasses* classes = nullptr;
};

/// The largest divisor of n that is at most `most` (n ≥ 1, most ≥ 1).
int64_t largest_divisor(int64_t n, int64_t most) {
  for (int64_t d = std::min(n, most); d > 1; --d)
    if (n % d == 0) return d;
  return 1;
}

/// `g` rebuilt with every dim labelled by a class in `extent` (≥ 0 entries) set to that
/// extent, and the customized ops rebuilt by `plans` (per op id; empty: unchanged). Returns
/// nullopt if the rebuilt graph is not well formed or a block tile changed other than the
/// plan says.
std::optional<KernelGraph> rebuild(const KernelGraph& g, const std::vector<std::vector<int>>& labels,
                                   const std::vector<int64_t>& extent,
                                   const std::vector<BlockPlan>& plans) {
  KernelGraph out;
  std::vector<int> map(g.tensors().size(), -1);
  auto reduced_shape = [&](int t) {
    Shape s = g.tensor(t).shape;
    for (int d = 0; d < s.rank(); ++d)
      if (int c = labels[t][d]; c >= 0 && extent[c] > 0) s[d] = extent[c];
    return s;
  };
  for (size_t id = 0; id < g.ops().size(); ++id) {
    const KernelOp& op = g.op(static_cast<int>(id));
    std::vector<int> ins;
    for (int t : op.inputs) ins.push_back(map[t]);
    if (op.kind == OpKind::Input) {
      int t = op.outputs[0];
      auto r = out.add_input(g.tensor(t).name, reduced_shape(t), g.tensor(t).dtype);
      if (!r.ok()) return std::nullopt;
      map[t] = *r;
      continue;
    }
    if (op.kind != OpKind::Customized) {
      auto r = out.add_op(op.kind, ins, op.attrs, g.tensor(op.outputs[0]).name);
      if (!r.ok()) return std::nullopt;
      map[op.outputs[0]] = *r;
      continue;
    }
    const BlockGraph& b = *op.body;
    const BlockPlan* plan = plans.empty() ? nullptr : &plans[id];
    const Dim3 grid = plan ? plan->grid : b.grid();
    auto made = BlockGraph::make(grid, b.block_threads(), plan ? plan->forloop : b.forloop());
    if (!made.ok()) return std::nullopt;
    BlockGraph nb = std::move(made).value();
    // A grid axis shrunk to one block maps φ.
    auto axes = [&](GridMap m) {
      for (int a = 0; a < 3; ++a)
        if (grid[a] == 1) m[a] = kReplicate;
      return m;
    };
    for (const BlockOp& bop : b.ops()) {
      Result<int> r = make_error("");
      switch (bop.kind) {
        case OpKind::Input:
          r = nb.add_input(out.tensor(ins[bop.attrs.input_index]).shape, axes(bop.attrs.imap),
                           bop.attrs.fmap);
          break;
        case OpKind::Output:
          r = nb.add_output(bop.inputs[0], axes(bop.attrs.omap));
          break;
        case OpKind::ThreadFused:
          r = nb.add_thread_graph(bop.inputs, bop.chain);
          break;
        default:
          r = nb.add_op(bop.kind, bop.inputs, bop.attrs);
      }
      if (!r.ok()) return std::nullopt;
      if (bop.output >= 0 && *r != bop.output) return std::nullopt;
    }
    // Every tile is the one the original's blocks see — the functions per tile are the same —
    // except along the classes the block computes index by index, which have the planned
    // extents.
    for (size_t t = 0; t < b.tensors().size(); ++t) {
      const BlockTensor &x = b.tensor(static_cast<int>(t)), &y = nb.tensor(static_cast<int>(t));
      if (x.stage != y.stage || x.shape.rank() != y.shape.rank()) return std::nullopt;
      for (int d = 0; d < x.shape.rank(); ++d) {
        int64_t want = x.shape[d];
        if (int c = plan ? plan->classes->labels[t][d] : -1; c >= 0 && plan->part[c].first > 0)
          want = x.stage == Stage::Loop ? plan->part[c].first : plan->part[c].second;
        if (y.shape[d] != want) return std::nullopt;
      }
      if (!x.name.empty() && !nb.set_tensor_name(static_cast<int>(t), x.name).ok())
        return std::nullopt;
    }
    std::vector<std::string> names;
    for (int t : op.outputs) names.push_back(g.tensor(t).name);
    auto r = out.add_customized(ins, std::move(nb), names);
    if (!r.ok()) return std::nullopt;
    for (size_t i = 0; i < op.outputs.size(); ++i) map[op.outputs[i]] = (*r)[i];
  }
  for (int t : g.outputs())
    if (!out.mark_output(map[t]).ok()) return std::nullopt;
  for (size_t t = 0; t < g.tensors().size(); ++t)
    if (out.tensor(map[t]).shape != reduced_shape(static_cast<int>(t))) return std::nullopt;
  return out;
}

}  // namespace

ProgramClasses independent_classes(const KernelGraph& program) {
  ProgramClasses pc;
  if (program.is_parallel()) return pc;
  const auto& ts = program.tensors();
  std::vector<int> base(ts.size() + 1, 0);
  for (size_t t = 0; t < ts.size(); ++t) base[t + 1] = base[t] + ts[t].shape.rank();
  UnionFind uf(base.back());
  std::vector<bool> bad(base.back(), false);
  for (const KernelOp& op : program.ops()) {
    if (op.kind == OpKind::Input) continue;
    if (op.kind == OpKind::Customized) return pc;
    const Shape& out = ts[op.outputs[0]].shape;
    auto links = dim_links(op.kind, op.attrs, input_shapes(program, op), out);
    if (!links) return pc;
    int o = base[op.outputs[0]];
    for (int d = 0; d < out.rank(); ++d)
      for (auto [i, di] : links->aligned[d]) uf.unite(o + d, base[op.inputs[i]] + di);
    for (auto [i, di] : links->forbidden_in) bad[base[op.inputs[i]] + di] = true;
    for (int d : links->forbidden_out) bad[o + d] = true;
  }
  std::vector<bool> root_bad(base.back(), false);
  for (int n = 0; n < base.back(); ++n)
    if (bad[n]) root_bad[uf.find(n)] = true;
  // Classes are numbered by their first input dim; dims of extent 1 have none.
  std::vector<int> class_of_root(base.back(), -1);
  pc.labels.resize(ts.size());
  for (size_t t = 0; t < ts.size(); ++t) pc.labels[t].assign(ts[t].shape.rank(), -1);
  for (int t : program.inputs())
    for (int d = 0; d < ts[t].shape.rank(); ++d) {
      int root = uf.find(base[t] + d);
      if (ts[t].shape[d] <= 1 || root_bad[root] || class_of_root[root] >= 0) continue;
      class_of_root[root] = static_cast<int>(pc.extent.size());
      pc.extent.push_back(ts[t].shape[d]);
      pc.names.push_back(program.tensor_name(t) + "." + std::to_string(d));
    }
  for (size_t t = 0; t < ts.size(); ++t)
    for (int d = 0; d < ts[t].shape.rank(); ++d)
      if (ts[t].shape[d] > 1) pc.labels[t][d] = class_of_root[uf.find(base[t] + d)];
  return pc;
}

std::optional<ReducedPair> reduce_instance(const KernelGraph& program,
                                           const ProgramClasses& pc,
                                           const KernelGraph& candidate) {
  if (pc.empty() || candidate.is_parallel()) return std::nullopt;
  const int nc = static_cast<int>(pc.extent.size());
  Propagation p;
  p.live.assign(nc, true);
  for (;;) {
    std::vector<bool> dead(nc, false);
    if (!propagate(candidate, pc, program, p, dead)) return std::nullopt;
    bool changed = false;
    for (int c = 0; c < nc; ++c)
      if (dead[c] && p.live[c]) p.live[c] = false, changed = true;
    if (!changed) break;
  }
  // Per live class: the unit L (lcm of its tiles) and the largest k such that shrinking by
  // k·L keeps every split's tile and last part, with at least two units left.
  std::vector<int64_t> extent(nc, -1);
  std::vector<int64_t> tail(nc, 0);
  std::vector<BlockPlan> plans(candidate.ops().size());
  for (size_t id = 0; id < candidate.ops().size(); ++id)
    if (const KernelOp& op = candidate.op(static_cast<int>(id)); op.kind == OpKind::Customized)
      plans[id] = {op.body->grid(), op.body->forloop(),
                   std::vector<std::pair<int64_t, int64_t>>(nc), &p.blocks[id]};
  bool any = false;
  for (int c = 0; c < nc; ++c) {
    if (!p.live[c]) continue;
    const int64_t e = pc.extent[c];
    int64_t unit = 1;
    std::vector<const Split*> mine;
    for (const Split& s : p.splits)
      if (s.cls == c) {
        mine.push_back(&s);
        unit = std::lcm(unit, s.tile);
        if (unit > e) break;
      }
    if (unit > e) continue;
    int64_t k = e / unit - 2;
    for (; k > 0; --k) {
      const int64_t reduced = e - k * unit;
      bool fits = true;
      for (const Split* s : mine) {
        int64_t g = s->grid - k * unit / s->tile;
        if (g < 1 || (reduced + g - 1) / g != s->tile ||
            reduced - (g - 1) * s->tile != e - (s->grid - 1) * s->tile)
          fits = false;
      }
      if (fits) break;
    }
    if (k <= 0) continue;
    extent[c] = e - k * unit;
    tail[c] = e % unit == 0 ? extent[c] : extent[c] - e % unit - unit;
    for (const Split* s : mine) {
      Dim3& g = plans[s->op].grid;
      int v = static_cast<int>(s->grid - k * unit / s->tile);
      (s->axis == 0 ? g.x : s->axis == 1 ? g.y : g.z) = v;
    }
    any = true;
  }
  if (!any) return std::nullopt;
  // The blocks that compute a shrunk class index by index: as many blocks along its axis as
  // divide the new extent evenly (at most the original's), as many iterations of a loop over
  // it as divide a block's part evenly.
  for (const Uniform& u : p.uniform) {
    if (extent[u.cls] < 0) continue;
    BlockPlan& plan = plans[u.op];
    int64_t part = extent[u.cls];
    if (u.axis >= 0) {
      Dim3& g = plan.grid;
      int& v = u.axis == 0 ? g.x : u.axis == 1 ? g.y : g.z;
      v = static_cast<int>(largest_divisor(part, v));
      part /= v;
    }
    int64_t step = part;
    if (u.looped) {
      plan.forloop = static_cast<int>(largest_divisor(part, plan.forloop));
      step = part / plan.forloop;
    }
    plan.part[u.cls] = {step, part};
  }
  // Only the shrunk classes keep their labels.
  auto shrunk = [&](std::vector<std::vector<int>> labels) {
    for (auto& v : labels)
      for (int& c : v)
        if (c >= 0 && extent[c] < 0) c = -1;
    return labels;
  };
  auto rp = rebuild(program, shrunk(pc.labels), extent, {});
  auto rc = rebuild(candidate, shrunk(p.labels), extent, plans);
  if (!rp || !rc) return std::nullopt;
  ReducedPair out{std::move(*rp), std::move(*rc), {}, {}, ""};
  for (int c = 0; c < nc; ++c) {
    out.extents.push_back(extent[c] < 0 ? pc.extent[c] : extent[c]);
    out.tail_start.push_back(extent[c] < 0 ? pc.extent[c] : tail[c]);
    if (extent[c] < 0) continue;
    if (!out.description.empty()) out.description += ", ";
    out.description += pc.names[c] + " " + std::to_string(pc.extent[c]) + " → " +
                       std::to_string(extent[c]);
  }
  return out;
}

int64_t original_element(const KernelGraph& program, const ProgramClasses& pc,
                         const ReducedPair& reduced, int output, int64_t element) {
  const int t = program.outputs()[output];
  const Shape& full = program.tensor(t).shape;
  const Shape& small = reduced.program.tensor(reduced.program.outputs()[output]).shape;
  int64_t rest = element, index = 0, stride = 1;
  for (int d = full.rank() - 1; d >= 0; --d) {
    int64_t x = rest % small[d];
    rest /= small[d];
    int c = pc.labels[t][d];
    if (c >= 0 && x >= reduced.tail_start[c]) x += full[d] - small[d];
    index += x * stride;
    stride *= full[d];
  }
  return index;
}

}  // namespace strata::verify
