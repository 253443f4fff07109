// Library forms (library_form.h, docs/search.md "Library forms").
#include "search/library_form.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "search/pointwise_seed.h"
#include "strata/opt/library_epilogues.h"
#include "strata/opt/matmul_lowering.h"
#include "strata/opt/packed_outputs.h"
#include "strata/opt/thread_fusion.h"

namespace strata::search {
namespace {

/// Rows per block a form offers (the pointwise seeds' choices).
constexpr int64_t kFormRows[] = {1, 2, 4, 8};

bool is_matmul(const KernelOp& op) {
  return op_category(op.kind) == Category::Matmul;
}

/// The name a copy of tensor `t` of `g` takes: its own where it has one, else none.
std::string name_of(const KernelGraph& g, int t) {
  return g.tensor(t).name;
}

/// Per tensor of `g`, the ops reading it.
std::vector<std::vector<int>> readers_of(const KernelGraph& g) {
  std::vector<std::vector<int>> readers(g.tensors().size());
  for (int i = 0; i < static_cast<int>(g.ops().size()); ++i)
    for (int t : g.op(i).inputs) readers[t].push_back(i);
  return readers;
}

std::vector<bool> output_mask(const KernelGraph& g) {
  std::vector<bool> out(g.tensors().size(), false);
  for (int t : g.outputs()) out[t] = true;
  return out;
}

/// The dim a slice op takes, normalized to its tensor's rank.
int slice_dim(const KernelGraph& g, const KernelOp& op) {
  const int r = g.tensor(op.outputs[0]).shape.rank();
  return op.attrs.dim < 0 ? op.attrs.dim + r : op.attrs.dim;
}

/// Per tensor of `g`: its packing (packed_outputs.h) where it is a matmul's result whose slices
/// are packed outputs, else nullopt.
std::vector<std::optional<PackedOutput>> packed_products(const KernelGraph& g) {
  std::vector<std::optional<PackedOutput>> packed = plan_packed_outputs(g, {}, {});
  for (size_t t = 0; t < packed.size(); ++t) {
    const int p = g.tensor(static_cast<int>(t)).producer;
    if (packed[t] && (p < 0 || !is_matmul(g.op(p)))) packed[t].reset();
  }
  return packed;
}

/// `program` with the slices of matmul results pushed into the operands (library_form.h),
/// except, with `keep_packed`, those of a product whose slices are packed outputs:
/// matmul(A, B) whose every reader is a slice along the last or the row dim, and which is no
/// output, is replaced by one matmul per slice. Tensor ids change; names are kept. `pushed`
/// counts the slices pushed.
Result<KernelGraph> push_slices(const KernelGraph& program, bool keep_packed, int& pushed) {
  const std::vector<std::vector<int>> readers = readers_of(program);
  const std::vector<bool> output = output_mask(program);
  const std::vector<std::optional<PackedOutput>> packed = packed_products(program);
  std::vector<bool> pushed_matmul(program.ops().size(), false);
  for (int i = 0; i < static_cast<int>(program.ops().size()); ++i) {
    const KernelOp& op = program.op(i);
    const int c = op.outputs.empty() ? -1 : op.outputs[0];
    if (!is_matmul(op) || output[c] || readers[c].empty()) continue;
    if (keep_packed && packed[c]) continue;
    const int r = program.tensor(c).shape.rank();
    bool all = true;
    for (int j : readers[c]) {
      const KernelOp& s = program.op(j);
      all = all && s.kind == OpKind::Slice && s.inputs[0] == c &&
            (slice_dim(program, s) == r - 1 || slice_dim(program, s) == r - 2);
    }
    pushed_matmul[i] = all;
  }
  KernelGraph out;
  std::vector<int> map(program.tensors().size(), -1);
  for (int t : program.inputs()) {
    STRATA_ASSIGN_OR_RETURN(map[t], out.add_input(name_of(program, t), program.tensor(t).shape,
                                                  program.tensor(t).dtype));
  }
  for (int i = 0; i < static_cast<int>(program.ops().size()); ++i) {
    const KernelOp& op = program.op(i);
    if (op.kind == OpKind::Input || pushed_matmul[i]) continue;
    const int p = op.inputs.empty() ? -1 : program.tensor(op.inputs[0]).producer;
    if (op.kind == OpKind::Slice && p >= 0 && pushed_matmul[p]) {
      // slice(matmul(A, B), d, a, b): the slice moves to B (last dim) or A (row dim).
      const KernelOp& mm = program.op(p);
      const int r = program.tensor(op.outputs[0]).shape.rank();
      const bool columns = slice_dim(program, op) == r - 1;
      OpAttrs sl = op.attrs;
      sl.dim = columns ? r - 1 : r - 2;
      const int operand = map[mm.inputs[columns ? 1 : 0]];
      STRATA_ASSIGN_OR_RETURN(const int view, out.add_op(OpKind::Slice, {operand}, sl));
      std::vector<int> args = {map[mm.inputs[0]], map[mm.inputs[1]]};
      args[columns ? 1 : 0] = view;
      STRATA_ASSIGN_OR_RETURN(map[op.outputs[0]],
                              out.add_op(mm.kind, args, mm.attrs, name_of(program, op.outputs[0])));
      ++pushed;
      continue;
    }
    std::vector<int> args;
    for (int t : op.inputs) args.push_back(map[t]);
    STRATA_ASSIGN_OR_RETURN(map[op.outputs[0]],
                            out.add_op(op.kind, args, op.attrs, name_of(program, op.outputs[0])));
  }
  for (int t : program.outputs())
    STRATA_RETURN_IF_ERROR(out.mark_output(map[t], program.tensor_name(t)));
  return out;
}

/// How the ops of the (pushed) program are grouped: matmuls, views and the ops a cuBLAS call
/// absorbs as its epilogue stay predefined; the others carry their level (library_form.h).
struct Partition {
  /// per op: a matmul, a view read only by matmuls, an op of a library epilogue, or an input
  std::vector<bool> kept;
  std::vector<int> level;  ///< per op: matmuls on the longest path from the inputs
};

Partition partition(const KernelGraph& g) {
  const int nops = static_cast<int>(g.ops().size());
  const std::vector<std::vector<int>> readers = readers_of(g);
  const std::vector<bool> output = output_mask(g);
  Partition p;
  p.kept.assign(nops, false);
  // The slices of a product packed in the caller's outputs stay predefined (no kernel).
  const std::vector<std::optional<PackedOutput>> packed = packed_products(g);
  // Views: layout ops, no output, read only by matmuls and views (decided from the last op
  // back, so that every reader is decided first).
  for (int i = nops - 1; i >= 0; --i) {
    const KernelOp& op = g.op(i);
    if (op.kind == OpKind::Input || is_matmul(op) || is_packed_slice(g, packed, i)) {
      p.kept[i] = true;
      continue;
    }
    if (op_category(op.kind) != Category::Layout || output[op.outputs[0]] ||
        readers[op.outputs[0]].empty())
      continue;
    bool view = true;
    for (int r : readers[op.outputs[0]])
      view = view &&
             (is_matmul(g.op(r)) || (op_category(g.op(r).kind) == Category::Layout && p.kept[r]));
    p.kept[i] = view;
  }
  // The ops a cuBLAS call applies as its epilogue (library_epilogues.h: a bias, then relu or
  // gelu) are no kernels: they stay as the program has them. Like a matmul they raise the
  // level, so that no region reaches around them (a region's kernels run in one place).
  const std::vector<std::optional<LibraryEpilogue>> epilogues = plan_library_epilogues(
      g,
      [&](int i) {
        const KernelOp& op = g.op(i);
        const KernelTensor &a = g.tensor(op.inputs[0]), &b = g.tensor(op.inputs[1]);
        return library_matmul_supported(a.shape, b.shape, a.dtype, b.dtype,
                                        g.tensor(op.outputs[0]).dtype);
      },
      {});
  std::vector<bool> absorbed(nops, false);
  for (int i = 0; i < nops; ++i) absorbed[i] = is_absorbed_epilogue(epilogues, i);
  std::vector<int> tensor_level(g.tensors().size(), 0);
  p.level.assign(nops, 0);
  for (int i = 0; i < nops; ++i) {
    const KernelOp& op = g.op(i);
    int level = 0;
    for (int t : op.inputs) level = std::max(level, tensor_level[t]);
    p.level[i] = level;
    if (absorbed[i]) p.kept[i] = true;
    for (int t : op.outputs) tensor_level[t] = level + (is_matmul(op) || absorbed[i] ? 1 : 0);
  }
  return p;
}

/// A region: a convex set of ops of `g` (ids in order), as a program of its own, its inputs
/// (tensors it reads from outside, in id order) and outputs (tensors read outside it or marked
/// as outputs, in id order).
struct Region {
  std::vector<int> ops;
  std::vector<int> inputs, outputs;
  KernelGraph program;
};

std::optional<Region> make_region(const KernelGraph& g, std::vector<int> ops) {
  Region reg;
  reg.ops = std::move(ops);
  std::set<int> inside(reg.ops.begin(), reg.ops.end());
  const std::vector<std::vector<int>> readers = readers_of(g);
  const std::vector<bool> output = output_mask(g);
  std::set<int> ins, outs;
  for (int i : reg.ops) {
    for (int t : g.op(i).inputs)
      if (!inside.count(g.tensor(t).producer)) ins.insert(t);
    for (int t : g.op(i).outputs) {
      bool outside = output[t];
      for (int r : readers[t]) outside = outside || !inside.count(r);
      if (outside) outs.insert(t);
    }
  }
  reg.inputs.assign(ins.begin(), ins.end());
  reg.outputs.assign(outs.begin(), outs.end());
  std::map<int, int> map;
  for (int t : reg.inputs) {
    auto in = reg.program.add_input(name_of(g, t), g.tensor(t).shape, g.tensor(t).dtype);
    if (!in.ok()) return std::nullopt;
    map[t] = *in;
  }
  for (int i : reg.ops) {
    const KernelOp& op = g.op(i);
    std::vector<int> args;
    for (int t : op.inputs) args.push_back(map.at(t));
    auto out = reg.program.add_op(op.kind, args, op.attrs, name_of(g, op.outputs[0]));
    if (!out.ok()) return std::nullopt;
    map[op.outputs[0]] = *out;
  }
  for (int t : reg.outputs)
    if (!reg.program.mark_output(map.at(t)).ok()) return std::nullopt;
  return reg;
}

/// A region with the programs its kernels are built from and the row counts they take.
struct FusedRegion {
  Region region;
  KernelGraph built_from;     ///< the caller's form of the region (RegionForm)
  std::vector<int64_t> rows;  ///< pointwise_seed_rows of it that pointwise_seed builds
};

/// The region of `ops` if the seed builder takes it (one row per block at least). A single op
/// is left alone: it is one kernel either way.
std::optional<FusedRegion> fuse(const KernelGraph& g, const std::vector<int>& ops,
                                int64_t min_blocks, const RegionForm& region_form) {
  if (ops.size() < 2) return std::nullopt;
  std::optional<Region> reg = make_region(g, ops);
  if (!reg || reg->outputs.empty()) return std::nullopt;
  FusedRegion f{std::move(*reg), KernelGraph{}, {}};
  f.built_from = region_form ? region_form(f.region.program) : f.region.program;
  for (int64_t rows : pointwise_seed_rows(f.built_from, min_blocks))
    if (pointwise_seed(f.built_from, rows)) f.rows.push_back(rows);
  if (f.rows.empty() || f.rows.front() != 1) return std::nullopt;
  return f;
}

/// The connected parts of `ops` (linked where one reads the other's result).
std::vector<std::vector<int>> connected_parts(const KernelGraph& g, const std::vector<int>& ops) {
  std::map<int, int> parent;
  for (int i : ops) parent[i] = i;
  auto find = [&](int x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  for (int i : ops)
    for (int t : g.op(i).inputs) {
      const int p = g.tensor(t).producer;
      if (parent.count(p)) parent[find(i)] = find(p);
    }
  std::map<int, std::vector<int>> parts;
  for (int i : ops) parts[find(i)].push_back(i);
  std::vector<std::vector<int>> out;
  for (auto& [root, part] : parts) out.push_back(std::move(part));
  return out;
}

/// The form of `g` in which every region of `fused` runs as the pointwise seed with the largest
/// of its row counts not above `rows`; the other ops are copied. Units (a kept op, an op of no
/// fused region, a fused region) are emitted in a topological order of their dependencies.
std::optional<LibraryForm> build_form(const KernelGraph& g, const std::vector<FusedRegion>& fused,
                                      int64_t rows) {
  const int nops = static_cast<int>(g.ops().size());
  std::vector<int> unit_of(nops, -1);
  for (size_t k = 0; k < fused.size(); ++k)
    for (int i : fused[k].region.ops) unit_of[i] = static_cast<int>(k);
  int units = static_cast<int>(fused.size());
  std::vector<int> op_unit(nops);
  for (int i = 0; i < nops; ++i) op_unit[i] = unit_of[i] >= 0 ? unit_of[i] : units++;
  // Dependencies between units and Kahn's order (ties: the unit with the smallest op first).
  std::vector<std::set<int>> deps(units);
  std::vector<int> first_op(units, nops);
  for (int i = 0; i < nops; ++i) {
    first_op[op_unit[i]] = std::min(first_op[op_unit[i]], i);
    for (int t : g.op(i).inputs) {
      const int p = g.tensor(t).producer;
      if (op_unit[p] != op_unit[i]) deps[op_unit[i]].insert(op_unit[p]);
    }
  }
  std::vector<int> order;
  std::vector<bool> done(units, false);
  while (static_cast<int>(order.size()) < units) {
    int next = -1;
    for (int u = 0; u < units; ++u) {
      if (done[u]) continue;
      bool ready = true;
      for (int d : deps[u]) ready = ready && done[d];
      if (ready && (next < 0 || first_op[u] < first_op[next])) next = u;
    }
    if (next < 0) return std::nullopt;  // a cycle: a region was not convex
    done[next] = true;
    order.push_back(next);
  }

  LibraryForm form;
  KernelGraph& f = form.graph;
  std::vector<int> map(g.tensors().size(), -1);
  for (int u : order) {
    if (u < static_cast<int>(fused.size())) {
      const FusedRegion& fr = fused[u];
      int64_t take = fr.rows.front();
      for (int64_t r : fr.rows)
        if (r <= rows) take = r;
      form.rows = std::max(form.rows, take);
      std::optional<KernelGraph> seed = pointwise_seed(fr.built_from, take);
      if (!seed) return std::nullopt;
      // Thread graphs fused as in every candidate the search ranks; the part proved is the
      // kernels the form holds.
      seed = fuse_thread_graphs(*seed);
      // The seed's inputs are the region's (same order); its kernels are copied with their
      // tensors mapped; its outputs are the region's outputs in order.
      std::vector<int> smap(seed->tensors().size(), -1);
      for (size_t k = 0; k < seed->inputs().size(); ++k)
        smap[seed->inputs()[k]] = map[fr.region.inputs[k]];
      std::map<int, int> seed_output_of;  // seed tensor → region output tensor of g
      for (size_t k = 0; k < seed->outputs().size(); ++k)
        seed_output_of[seed->outputs()[k]] = fr.region.outputs[k];
      for (const KernelOp& op : seed->ops()) {
        if (op.kind == OpKind::Input) continue;
        if (op.kind != OpKind::Customized) return std::nullopt;
        std::vector<int> args;
        for (int t : op.inputs) args.push_back(smap[t]);
        std::vector<std::string> names;
        for (int t : op.outputs) {
          auto it = seed_output_of.find(t);
          names.push_back(it == seed_output_of.end() ? "" : name_of(g, it->second));
        }
        auto outs = f.add_customized(args, *op.body, names);
        if (!outs.ok()) return std::nullopt;
        for (size_t k = 0; k < op.outputs.size(); ++k) smap[op.outputs[k]] = (*outs)[k];
      }
      for (const auto& [st, t] : seed_output_of) {
        if (smap[st] < 0 || f.tensor(smap[st]).shape != g.tensor(t).shape ||
            f.tensor(smap[st]).dtype != g.tensor(t).dtype)
          return std::nullopt;
        map[t] = smap[st];
      }
      form.parts.push_back({u, std::move(*seed)});
      continue;
    }
    const int i = first_op[u];
    const KernelOp& op = g.op(i);
    if (op.kind == OpKind::Input) {
      auto in = f.add_input(name_of(g, op.outputs[0]), g.tensor(op.outputs[0]).shape,
                            g.tensor(op.outputs[0]).dtype);
      if (!in.ok()) return std::nullopt;
      map[op.outputs[0]] = *in;
      continue;
    }
    std::vector<int> args;
    for (int t : op.inputs) args.push_back(map[t]);
    auto out = f.add_op(op.kind, args, op.attrs, name_of(g, op.outputs[0]));
    if (!out.ok()) return std::nullopt;
    map[op.outputs[0]] = *out;
  }
  for (int t : g.outputs())
    if (map[t] < 0 || !f.mark_output(map[t], g.tensor_name(t)).ok()) return std::nullopt;
  return form;
}

/// Adds the library forms of `g` (a program after push_slices, which pushed `pushed` slices)
/// to `result`: its fused regions appended to result.regions, its forms (one per row count,
/// graphs not already there) to result.forms. Nothing when it fuses no region and pushed none
/// (the program itself). Inputs come first in `g` (push_slices adds them first), so a form's
/// inputs have the program's ids.
void add_forms(const KernelGraph& g, int pushed, int64_t min_blocks,
               const RegionForm& region_form, LibraryForms& result) {
  const Partition part = partition(g);
  std::map<int, std::vector<int>> by_level;
  for (int i = 0; i < static_cast<int>(g.ops().size()); ++i)
    if (!part.kept[i]) by_level[part.level[i]].push_back(i);
  std::vector<FusedRegion> fused;
  for (const auto& [level, ops] : by_level) {
    if (std::optional<FusedRegion> f = fuse(g, ops, min_blocks, region_form)) {
      fused.push_back(std::move(*f));
      continue;
    }
    for (const std::vector<int>& piece : connected_parts(g, ops))
      if (std::optional<FusedRegion> f = fuse(g, piece, min_blocks, region_form))
        fused.push_back(std::move(*f));
  }
  if (fused.empty() && pushed == 0) return;
  const int first_region = static_cast<int>(result.regions.size());
  for (const FusedRegion& f : fused) result.regions.push_back(f.region.program);
  for (int64_t rows : kFormRows) {
    std::optional<LibraryForm> form = build_form(g, fused, rows);
    if (!form) continue;
    for (LibraryForm::Part& p : form->parts) p.region += first_region;
    form->pushed_slices = pushed;
    bool seen = false;
    for (const LibraryForm& other : result.forms)
      seen = seen || other.graph.structurally_equal(form->graph);
    if (!seen) result.forms.push_back(std::move(*form));
  }
}

}  // namespace

LibraryForms library_forms(const KernelGraph& program, int64_t min_blocks,
                           const RegionForm& region_form) {
  LibraryForms result;
  if (program.ranks() > 1 || program.outputs().empty()) return result;
  bool library = false;
  for (const KernelOp& op : program.ops())
    if (is_matmul(op)) {
      const KernelTensor &a = program.tensor(op.inputs[0]), &b = program.tensor(op.inputs[1]);
      library = library || library_matmul_supported(a.shape, b.shape, a.dtype, b.dtype,
                                                    program.tensor(op.outputs[0]).dtype);
    }
  if (!library) return result;
  // Slices pushed everywhere, then (where some product's slices are packed outputs) that
  // product kept whole: the packed form, one library call instead of one per slice.
  int pushed = 0;
  Result<KernelGraph> pushed_program = push_slices(program, false, pushed);
  if (!pushed_program.ok()) return result;
  add_forms(*pushed_program, pushed, min_blocks, region_form, result);
  result.pushed_slices = pushed;
  int pushed_around = 0;
  Result<KernelGraph> packed_program = push_slices(program, true, pushed_around);
  if (packed_program.ok() && pushed_around < pushed)
    add_forms(*packed_program, pushed_around, min_blocks, region_form, result);
  return result;
}

}  // namespace strata::search
