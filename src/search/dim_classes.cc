#include "strata/search/dim_classes.h"

#include <algorithm>
#include <numeric>
#include <optional>

#include "strata/ir/dim_links.h"

namespace strata {
namespace {

/// Union–find over (tensor, dim) nodes of a program, node = tensor · kMaxRank + dim.
class UnionFind {
 public:
  explicit UnionFind(size_t n) : parent_(n) { std::iota(parent_.begin(), parent_.end(), 0); }
  int find(int x) {
    while (parent_[x] != x) x = parent_[x] = parent_[parent_[x]];
    return x;
  }
  /// Links two sets; the root with the smaller node index stays the root, so that class
  /// numbering by first appearance does not depend on the order of links.
  void link(int a, int b) {
    a = find(a);
    b = find(b);
    if (a == b) return;
    if (a > b) std::swap(a, b);
    parent_[b] = a;
  }

 private:
  std::vector<int> parent_;
};

int node(int tensor, int dim) {
  return tensor * kMaxRank + dim;
}

/// A derived dim of the program: the concatenated dim of a concat, or the dim of a sum/mean
/// reduced to `to` > 1 groups.
struct Derivation {
  int target;  ///< node
  bool concat;
  int a, b;  ///< source nodes (b unused for grouped)
  int64_t to;
};

}  // namespace

Result<ClassTable> ClassTable::analyze(const KernelGraph& program) {
  const int nt = static_cast<int>(program.tensors().size());
  UnionFind uf(static_cast<size_t>(nt) * kMaxRank);
  std::vector<bool> derived_node(static_cast<size_t>(nt) * kMaxRank, false);
  std::vector<Derivation> derivations;
  std::vector<bool> sum_red(static_cast<size_t>(nt) * kMaxRank, false);
  std::vector<bool> norm_red(static_cast<size_t>(nt) * kMaxRank, false);
  std::vector<bool> max_red(static_cast<size_t>(nt) * kMaxRank, false);
  std::vector<bool> batch_dim(static_cast<size_t>(nt) * kMaxRank, false);  // a matmul's batch
  std::vector<bool> matmul_rows(static_cast<size_t>(nt) * kMaxRank, false);
  auto ext = [&](int t, int d) { return program.tensor(t).shape[d]; };
  auto link_if = [&](int ta, int da, int tb, int db) {
    if (ext(ta, da) > 1 && ext(ta, da) == ext(tb, db)) uf.link(node(ta, da), node(tb, db));
  };

  for (size_t op_id = 0; op_id < program.ops().size(); ++op_id) {
    const KernelOp& op = program.op(static_cast<int>(op_id));
    if (op.kind == OpKind::Input) continue;
    const std::string where =
        "kernel op #" + std::to_string(op_id) + " (" + std::string(op_name(op.kind)) + ")";
    if (op.kind == OpKind::Customized)
      return make_error(where +
                        ": the program already contains a customized kernel; the "
                        "search takes programs of predefined ops only");
    int out = op.outputs[0];
    int r = program.tensor(out).shape.rank();
    // Only kernel-level ops (the op table's levels) make a program; dim_links also knows the
    // block-level ones (accumulators, running max, thread graphs).
    if (!(op_info(op.kind).levels & kKernel))
      return make_error(where + ": the search does not handle `" + std::string(op_name(op.kind)) +
                        "` in a program");
    // Dims that index the same thing (dim_links) are one class: those aligned, those the op
    // combines along but keeps (a norm's dim) and those it contracts together (a matmul's
    // inner dim). A sliced dim is a class of its own; a concatenated dim and one summed to
    // groups are derived from their operands' (below).
    std::vector<Shape> in_shapes;
    for (int t : op.inputs) in_shapes.push_back(program.tensor(t).shape);
    const std::optional<DimLinks> links =
        dim_links(op.kind, op.attrs, in_shapes, program.tensor(out).shape);
    if (!links)
      return make_error(where + ": the search does not handle `" + std::string(op_name(op.kind)) +
                        "` in a program");
    for (int d = 0; d < r; ++d) {
      for (auto [i, di] : links->aligned[d]) link_if(op.inputs[i], di, out, d);
      for (auto [i, di] : links->combined[d]) link_if(op.inputs[i], di, out, d);
    }
    for (const auto& [p, q] : links->contracted)
      link_if(op.inputs[p.first], p.second, op.inputs[q.first], q.second);
    // What the search records of the op beside its links: the dims it reduces and how, a
    // matmul's batch dims and rows, the derived dims.
    switch (op_category(op.kind)) {
      case Category::Matmul: {
        int a = op.inputs[0], b = op.inputs[1];
        for (int i = 0; i < r - 2; ++i)
          for (int t : {a, b, out}) batch_dim[node(t, i)] = true;
        sum_red[node(a, r - 1)] = true;
        matmul_rows[node(out, r - 2)] = true;
        break;
      }
      case Category::Reduce: {
        int in = op.inputs[0], dim = op.attrs.dim;
        (reduction_kind(op.kind) == RedKind::Max ? max_red : sum_red)[node(in, dim)] = true;
        if (op.attrs.to > 1) {
          derived_node[node(out, dim)] = true;
          derivations.push_back({node(out, dim), false, node(in, dim), -1, op.attrs.to});
        }
        break;
      }
      case Category::Norm:
        norm_red[node(op.inputs[0], op.attrs.dim)] = true;
        break;
      case Category::Concat: {
        int a = op.inputs[0], b = op.inputs[1], dim = op.attrs.dim;
        derived_node[node(out, dim)] = true;
        derivations.push_back({node(out, dim), true, node(a, dim), node(b, dim), 0});
        break;
      }
      default:  // Unary, Binary, Layout, Collective: links alone
        break;
    }
  }

  // A set that contains a derived dim takes the derived class; every other set is plain. A
  // concat whose dim the program also meets in one of its inputs (attention over a key cache
  // with the new token appended: V's rows are K's columns) is *anchored*: its set is the plain
  // class of that input dim, and the concat maps its operands' classes onto it (concat_rules_),
  // so that the class can be split like any other.
  std::vector<bool> input_node(static_cast<size_t>(nt) * kMaxRank, false);
  for (int t : program.inputs())
    for (int d = 0; d < program.tensor(t).shape.rank(); ++d) input_node[node(t, d)] = true;
  std::vector<bool> anchored_root(static_cast<size_t>(nt) * kMaxRank, false);
  for (int n = 0; n < nt * kMaxRank; ++n)
    if (input_node[n]) anchored_root[uf.find(n)] = true;
  std::vector<bool> derived_root(static_cast<size_t>(nt) * kMaxRank, false);
  for (const Derivation& d : derivations)
    if (!(d.concat && anchored_root[uf.find(d.target)])) derived_root[uf.find(d.target)] = true;

  ClassTable table;
  std::vector<DimClass> root_class(static_cast<size_t>(nt) * kMaxRank, kNoClass);
  for (int t = 0; t < nt; ++t) {
    for (int d = 0; d < program.tensor(t).shape.rank(); ++d) {
      if (ext(t, d) <= 1) continue;
      int root = uf.find(node(t, d));
      if (derived_root[root] || root_class[root] != kNoClass) continue;
      if (table.num_plain_ == 64)
        return make_error(
            "the program has more than 64 independent dimensions; the search "
            "handles at most 64");
      DimClassInfo info;
      info.extent = ext(t, d);
      info.label = program.tensor_name(t) + "." + std::to_string(d);
      root_class[root] = table.num_plain_++;
      table.classes_.push_back(info);
    }
  }
  for (int n = 0; n < nt * kMaxRank; ++n) {
    DimClass c = root_class[uf.find(n)];
    if (c == kNoClass) continue;
    if (sum_red[n]) table.classes_[c].sum_reduced = true;
    if (norm_red[n]) table.classes_[c].norm_reduced = true;
    if (max_red[n]) table.classes_[c].max_reduced = true;
    if (batch_dim[n]) table.classes_[c].matmul_batch = true;
    if (matmul_rows[n]) table.classes_[c].matmul_rows = true;
  }
  for (const Derivation& d : derivations) {
    int root = uf.find(d.target);
    if (d.concat && !derived_root[root]) continue;  // anchored: recorded below
    if (root_class[root] != kNoClass) continue;     // two derivations met in one set
    DimClass a = root_class[uf.find(d.a)];
    if (d.concat) {
      root_class[root] = table.concat(a, root_class[uf.find(d.b)]);
    } else {
      root_class[root] = table.grouped(a, d.to);
    }
  }

  for (const Derivation& d : derivations) {
    int root = uf.find(d.target);
    if (d.concat && !derived_root[root])
      table.concat_rules_.push_back(
          {root_class[uf.find(d.a)], root_class[uf.find(d.b)], root_class[root]});
  }

  table.tensor_classes_.assign(nt, kNoClasses);
  for (int t = 0; t < nt; ++t)
    for (int d = 0; d < program.tensor(t).shape.rank(); ++d)
      if (ext(t, d) > 1) table.tensor_classes_[t][d] = root_class[uf.find(node(t, d))];

  // The classes a slice of the program maps between: (input class, range) → output class.
  for (const KernelOp& op : program.ops()) {
    if (op.kind != OpKind::Slice) continue;
    table.slices_.push_back({table.tensor_classes_[op.inputs[0]][op.attrs.dim], op.attrs,
                             table.tensor_classes_[op.outputs[0]][op.attrs.dim]});
  }

  // Provenance of every program tensor, and the program's reductions.
  table.tensor_prov_.assign(nt, DimProvVec{});
  for (size_t i = 0; i < program.inputs().size() && i < 64; ++i) {
    int t = program.inputs()[i];
    for (int d = 0; d < program.tensor(t).shape.rank(); ++d)
      if (ext(t, d) > 1) table.tensor_prov_[t][d] = ProvMask{1} << i;
  }
  for (const KernelOp& op : program.ops()) {
    if (op.kind == OpKind::Input) continue;
    std::vector<Shape> shapes;
    std::vector<DimClassVec> cls;
    std::vector<DimProvVec> prov;
    for (int t : op.inputs) {
      shapes.push_back(program.tensor(t).shape);
      cls.push_back(table.tensor_classes_[t]);
      prov.push_back(table.tensor_prov_[t]);
    }
    int out = op.outputs[0];
    ClassFlow f =
        flow_classes(table, op.kind, op.attrs, shapes, cls, prov, program.tensor(out).shape);
    table.tensor_prov_[out] = f.prov;
    if (f.reduced != kNoClass && table.info(f.reduced).kind == ClassKind::Plain) {
      ProgramReduction red{f.reduced, f.red, f.reduced_prov};
      if (std::find(table.reductions_.begin(), table.reductions_.end(), red) ==
          table.reductions_.end())
        table.reductions_.push_back(red);
    }
  }
  return table;
}

RedKind reduction_kind(OpKind k) {
  if (op_category(k) == Category::Norm) return RedKind::Norm;
  const ReductionInfo* r = op_reduction(k);
  if (r && r->combine == Combine::Max) return RedKind::Max;
  if (r && r->finalize == Finalize::RootMean) return RedKind::Norm;  // accum_rms_ld
  return RedKind::Linear;
}

bool ClassTable::has_reduction(DimClass c, RedKind kind, ProvMask prov) const {
  for (const ProgramReduction& r : reductions_)
    if (r.cls == c && r.kind == kind && r.prov == prov) return true;
  return false;
}

ClassMask ClassTable::reduced_mask() const {
  ClassMask m = 0;
  for (int c = 0; c < num_plain_; ++c)
    if (classes_[c].sum_reduced || classes_[c].norm_reduced || classes_[c].max_reduced)
      m |= class_bit(c);
  return m;
}

DimClass ClassTable::concat_class(DimClass a, DimClass b) {
  for (const ConcatRule& r : concat_rules_)
    if (r.a == a && r.b == b) return r.to;
  return concat(a, b);
}

DimClass ClassTable::slice_class(DimClass from, const OpAttrs& attrs) const {
  for (const SliceRule& r : slices_)
    if (r.from == from && r.attrs.start == attrs.start && r.attrs.end == attrs.end) return r.to;
  return kNoClass;
}

DimClass ClassTable::intern(const DimClassInfo& info) {
  auto key = std::make_tuple(static_cast<int>(info.kind), info.a, info.b, info.inner_extent,
                             info.parts, info.origin, info.axis);
  auto it = derived_.find(key);
  if (it != derived_.end()) return it->second;
  DimClass c = size();
  classes_.push_back(info);
  derived_.emplace(key, c);
  return c;
}

void ClassTable::truncate(int n) {
  n = std::max(n, num_plain_);
  while (size() > n) {
    const DimClassInfo& info = classes_.back();
    derived_.erase(std::make_tuple(static_cast<int>(info.kind), info.a, info.b, info.inner_extent,
                                   info.parts, info.origin, info.axis));
    classes_.pop_back();
  }
}

DimClass ClassTable::concat(DimClass a, DimClass b) {
  DimClassInfo info;
  info.kind = ClassKind::Concat;
  info.a = a;
  info.b = b;
  info.extent = (a == kNoClass ? 1 : classes_[a].extent) + (b == kNoClass ? 1 : classes_[b].extent);
  return intern(info);
}

DimClass ClassTable::partial(DimClass split, DimClass inner, int64_t inner_extent, int64_t parts,
                             int origin, int axis) {
  DimClassInfo info;
  info.kind = ClassKind::Partial;
  info.a = split;
  info.b = inner;
  info.inner_extent = inner_extent;
  info.parts = parts;
  info.origin = origin;
  info.axis = axis;
  info.extent = parts * inner_extent;
  return intern(info);
}

DimClass ClassTable::grouped(DimClass c, int64_t groups) {
  DimClassInfo info;
  info.kind = ClassKind::Grouped;
  info.a = c;
  info.parts = groups;
  info.extent = groups;
  return intern(info);
}

ClassMask ClassTable::plain_mask(DimClass c) const {
  if (c == kNoClass) return 0;
  const DimClassInfo& i = classes_[c];
  switch (i.kind) {
    case ClassKind::Plain:
      return class_bit(c);
    case ClassKind::Concat:
      return plain_mask(i.a) | plain_mask(i.b);
    case ClassKind::Partial:
    case ClassKind::Grouped:
      return plain_mask(i.a);
  }
  return 0;
}

std::string ClassTable::name(DimClass c) const {
  if (c == kNoClass) return "1";
  const DimClassInfo& i = classes_[c];
  switch (i.kind) {
    case ClassKind::Plain:
      return i.label;
    case ClassKind::Concat:
      return "cat(" + name(i.a) + "," + name(i.b) + ")";
    case ClassKind::Partial:
      return "part(" + name(i.a) + "/" + std::to_string(i.parts) + ")";
    case ClassKind::Grouped:
      return "group(" + name(i.a) + "→" + std::to_string(i.parts) + ")";
  }
  return "?";
}

int dim_of_class(const DimClassVec& classes, int rank, DimClass c) {
  if (c == kNoClass) return -1;
  for (int d = 0; d < rank; ++d)
    if (classes[d] == c) return d;
  return -1;
}

ClassFlow flow_classes(ClassTable& table, OpKind kind, const OpAttrs& attrs,
                       std::span<const Shape> in_shapes, std::span<const DimClassVec> in,
                       std::span<const DimProvVec> in_prov, const Shape& out_shape) {
  ClassFlow f;
  const DimProvVec kNone{};
  auto prov = [&](size_t i) -> const DimProvVec& {
    return i < in_prov.size() ? in_prov[i] : kNone;
  };
  auto meet = [&](DimClass& slot, DimClass c) {
    if (c == kNoClass || slot == c) return;
    if (slot == kNoClass) {
      slot = c;
    } else if (f.mismatch.empty()) {
      f.mismatch = "dims of different classes meet";
    }
  };
  const int r = out_shape.rank();
  switch (op_category(kind)) {
    case Category::Unary:
    case Category::Collective:
      f.out = in[0];
      f.prov = prov(0);
      break;
    case Category::Binary:
      for (size_t i = 0; i < in.size(); ++i) {
        int ri = in_shapes[i].rank();
        for (int d = 0; d < ri; ++d) {
          DimClass c = in[i][d];
          int j = r - ri + d;
          if (c != kNoClass && in_shapes[i][d] != out_shape[j] && f.mismatch.empty())
            f.mismatch = "a dim with a class would be broadcast";
          meet(f.out[j], c);
          if (in_shapes[i][d] == out_shape[j]) f.prov[j] |= prov(i)[d];
        }
      }
      break;
    case Category::Matmul: {
      const DimClassVec &a = in[0], &b = in[1];
      for (int i = 0; i < r - 2; ++i) {
        meet(f.out[i], a[i]);
        meet(f.out[i], b[i]);
        f.prov[i] = prov(0)[i] | prov(1)[i];
      }
      f.out[r - 2] = a[r - 2];
      f.out[r - 1] = b[r - 1];
      f.prov[r - 2] = prov(0)[r - 2];
      f.prov[r - 1] = prov(1)[r - 1];
      if (a[r - 1] != b[r - 2] && f.mismatch.empty())
        f.mismatch = "matmul contracts dims of different classes";
      f.reduced = a[r - 1];
      f.reduced_prov = prov(0)[r - 1] | prov(1)[r - 2];
      break;
    }
    case Category::Reduce: {
      f.out = in[0];
      f.prov = prov(0);
      DimClass c = in[0][attrs.dim];
      f.out[attrs.dim] = (attrs.to == 1 || c == kNoClass) ? kNoClass : table.grouped(c, attrs.to);
      if (attrs.to == 1) f.prov[attrs.dim] = 0;
      f.reduced = c;
      f.reduced_prov = prov(0)[attrs.dim];
      f.red = reduction_kind(kind);
      break;
    }
    case Category::Norm:
      f.out = in[0];
      f.prov = prov(0);
      f.reduced = in[0][attrs.dim];
      f.reduced_prov = prov(0)[attrs.dim];
      f.red = RedKind::Norm;
      break;
    case Category::Scan: {  // running_max over the last dim (and the loop)
      int last = in_shapes[0].rank() - 1;
      f.out = in[0];
      f.prov = prov(0);
      f.out[last] = kNoClass;
      f.prov[last] = 0;
      f.reduced = in[0][last];
      f.reduced_prov = prov(0)[last];
      f.red = RedKind::Max;
      break;
    }
    case Category::Layout:
      f.out = in[0];
      f.prov = prov(0);
      if (kind == OpKind::Transpose) {
        std::swap(f.out[r - 1], f.out[r - 2]);
        std::swap(f.prov[r - 1], f.prov[r - 2]);
      } else if (out_shape[attrs.dim] != in_shapes[0][attrs.dim]) {
        f.out[attrs.dim] =
            out_shape[attrs.dim] > 1 ? table.slice_class(in[0][attrs.dim], attrs) : kNoClass;
        if (out_shape[attrs.dim] > 1 && f.out[attrs.dim] == kNoClass &&
            in[0][attrs.dim] != kNoClass && f.mismatch.empty())
          f.mismatch = "a slice the program does not take";
      }
      break;
    case Category::Concat:
      for (int d = 0; d < r; ++d) {
        f.prov[d] = prov(0)[d] | prov(1)[d];
        if (d == attrs.dim) continue;
        meet(f.out[d], in[0][d]);
        meet(f.out[d], in[1][d]);
      }
      f.out[attrs.dim] = table.concat_class(in[0][attrs.dim], in[1][attrs.dim]);
      break;
    case Category::Source:
    case Category::Sink:
    case Category::Customized:
    case Category::Accum:
    case Category::Fused:
      f.mismatch = std::string(op_name(kind)) + " is not a compute op";
      break;
  }
  return f;
}

std::vector<int64_t> grid_extent_candidates(const DimClassInfo& info, const SplitPolicy& policy) {
  std::vector<int64_t> out;
  if (!info.splittable()) return out;
  // A class that is only normalized over is split like a kept class: per-block norms of parts
  // do not combine into the norm of the whole, so no block normalizes over a class its grid
  // splits (the enumeration's rule `reduce_class`), but a kernel before the norm may split it
  // (the columns of a decode GEMV whose result a row-wide norm reads in a later kernel; the
  // enumeration offers the split only to kernels that read such a weight, Impl::patterns).
  // A class that is maxed over (softmax's keys) is also summed over in every program that
  // uses it; a max-only class is not split: its per-block maxima are combined only by the
  // rescaling of the online softmax, which needs the sums beside them.
  if (info.max_reduced && !info.sum_reduced) return out;
  const int64_t e = info.extent;
  // Tiles that divide the extent; the larger ones (all of them where none divides) as ragged
  // splits (the last block's tile shorter) with bounded padding: 2000 query rows are split by
  // 16 and also by 32, 64 and 128 (attention at head dim 256 needs the larger blocks to
  // amortize its keys and values).
  auto split_by = [&](const std::vector<int64_t>& tiles) {
    int64_t largest = 1;  // the largest tile offered that divides the extent
    for (int64_t t : tiles) {
      if (t < 1 || t >= e || e % t != 0) continue;
      if (t == 1 && e > policy.max_unit_tile_extent && !info.matmul_batch) continue;
      int64_t g = e / t;
      if (g > policy.max_blocks) continue;
      out.push_back(g);
      largest = std::max(largest, t);
    }
    for (int64_t t : tiles) {
      if (t <= largest || t >= e || e % t == 0) continue;
      int64_t g = (e + t - 1) / t;
      if (g > policy.max_blocks || static_cast<double>(g * t - e) > policy.max_ragged_waste * e)
        continue;
      out.push_back(g);
    }
  };
  split_by(info.sum_reduced ? policy.reduce_tiles : policy.grid_tiles);
  // Extents too large for any tile of the list within max_blocks: larger tiles, the smallest
  // that fit.
  for (size_t k = 0; out.empty() && !info.sum_reduced && k < policy.large_grid_tiles.size(); ++k)
    split_by({policy.large_grid_tiles[k]});
  // A long class of matmul rows also takes the tiles of four 64-row warpgroups (wgmma), where
  // they divide it.
  if (info.matmul_rows && !info.sum_reduced && e >= policy.wgmma_tile_min_extent)
    for (int64_t t : policy.wgmma_grid_tiles)
      if (t > 1 && t < e && e % t == 0 && e / t <= policy.max_blocks) out.push_back(e / t);
  // A small class also splits in two halves (X's 8 rows of a batch-1 matvec as two blocks of
  // 4, each block re-reading W's tile from L2 while it streams).
  if (!info.sum_reduced && e <= policy.max_unit_tile_extent && e % 2 == 0 && e > 2)
    out.push_back(2);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<int64_t> loop_extent_candidates(int64_t block_extent, int64_t last_extent,
                                            const SplitPolicy& policy) {
  std::vector<int64_t> out;
  for (int64_t t : policy.loop_tiles) {
    if (t < 1 || t >= block_extent || block_extent % t != 0 || last_extent % t != 0) continue;
    out.push_back(block_extent / t);
  }
  // No tile divides the extent (or the last block's): ragged loops (the last iteration
  // shorter), as long as no block's last iteration is empty. The iterations' tile is
  // ⌈extent/F⌉, which is the listed tile itself only for some F (4097 in 33 iterations gives
  // tiles of 125, not 128, which no tensor-core step divides): those F are offered; where
  // there are none (short extents: 67 gives tiles of 14, 23, 34), every F of a listed tile.
  for (bool keep_tile : {true, false}) {
    if (!out.empty()) break;
    for (int64_t t : policy.loop_tiles) {
      if (t <= 1 || t >= block_extent) continue;
      int64_t f = (block_extent + t - 1) / t;
      int64_t tile = (block_extent + f - 1) / f;
      if ((keep_tile && tile != t) || (f - 1) * tile >= last_extent) continue;
      out.push_back(f);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace strata
