// Pointwise seeds (pointwise_seed.h, docs/search.md "Pointwise seeds").
#include "search/pointwise_seed.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "strata/ir/block_graph.h"

namespace strata::search {
namespace {

/// Threads of a seed's blocks: its rows are short (a few rows of every output per block).
constexpr int kSeedThreads = 128;
/// Rows of the split dim per block, one seed each (the GPU profile picks: a derived form).
constexpr int64_t kSeedRows[] = {1, 2, 4, 8};
/// The longest row of the last dim a block holds where nothing reduces along it: a longer one
/// is cut into column chunks (a second grid axis), so that a block's tiles stay a few KB and
/// several blocks per SM overlap their loads (one 18944-element row of a SwiGLU's silu·mul held
/// 151 KB of shared memory per block, one block per SM, 35 % of DRAM bandwidth).
constexpr int64_t kSeedMaxRow = 2048;

/// The column chunk of a seed kernel whose outputs have shape `shape` and whose cone is `ops`:
/// the largest divisor of the last extent L that is at most kSeedMaxRow and a multiple of 8
/// (16-byte copies of 16-bit elements), when L exceeds kSeedMaxRow, the shape has a split dim
/// before the last, no op of the cone slices, concatenates, normalizes or reduces along the last
/// dim, and every tensor an op of the cone reads has L or 1 elements along it; else L (no
/// chunks).
int64_t column_chunk(const KernelGraph& g, const std::vector<int>& ops, const Shape& shape) {
  const int r = shape.rank();
  if (r < 2 || shape[r - 1] <= kSeedMaxRow) return r < 1 ? 1 : shape[r - 1];
  const int64_t L = shape[r - 1];
  for (int id : ops) {
    const KernelOp& op = g.op(id);
    const Category cat = op_category(op.kind);
    const int out_rank = g.tensor(op.outputs[0]).shape.rank();
    const int dim = op.attrs.dim < 0 ? op.attrs.dim + out_rank : op.attrs.dim;
    if ((cat == Category::Concat || cat == Category::Norm || cat == Category::Layout ||
         cat == Category::Reduce) &&
        dim == out_rank - 1)
      return L;
    for (int t : op.inputs) {
      const Shape& s = g.tensor(t).shape;
      if (s.rank() > 0 && s[s.rank() - 1] != L && s[s.rank() - 1] != 1) return L;
    }
  }
  for (int64_t chunk = kSeedMaxRow - kSeedMaxRow % 8; chunk >= 8; chunk -= 8)
    if (L % chunk == 0) return chunk;
  return L;
}

/// Whether the op is elementwise work a seed can hold: unary and binary ops, slices,
/// concats, RMSNorm and reductions (the dims of the last three are checked against the split
/// dim separately: a block holds whole rows of every other dim).
bool seedable(OpKind kind) {
  switch (op_category(kind)) {
    case Category::Unary:
    case Category::Binary:
    case Category::Concat:
    case Category::Norm:
    case Category::Reduce:
      return true;
    case Category::Layout:
      return kind == OpKind::Slice;
    default:
      return false;
  }
}

/// The split dim of an output shape: the first non-last dim with more than one element, or -1.
int split_dim(const Shape& shape) {
  for (int d = 0; d + 1 < shape.rank(); ++d)
    if (shape[d] > 1) return d;
  return -1;
}

/// The program ops (ids) the outputs `outs` depend on, in program order (a topological one).
std::vector<int> cone(const KernelGraph& g, const std::vector<int>& outs) {
  std::set<int> ops;
  std::vector<int> stack(outs.begin(), outs.end());
  while (!stack.empty()) {
    const int t = stack.back();
    stack.pop_back();
    const int p = g.tensor(t).producer;
    if (p < 0 || g.op(p).kind == OpKind::Input || !ops.insert(p).second) continue;
    for (int in : g.op(p).inputs) stack.push_back(in);
  }
  return {ops.begin(), ops.end()};
}

/// One customized kernel computing the outputs `outs` of `g` into `seed`, whose inputs mirror
/// g's (same ids): the seed's tensors of those outputs, in order, or nothing when the kernel
/// cannot be built. The outputs have the rank, split dim and split extent of `shape` (the
/// first one's).
std::optional<std::vector<int>> add_kernel(const KernelGraph& g, const std::vector<int>& outs,
                                           const Shape& shape, int64_t rows, KernelGraph& seed) {
  const int r = shape.rank();
  const int sd = split_dim(shape);
  const std::vector<int> ops = cone(g, outs);
  for (int id : ops) {
    const KernelOp& op = g.op(id);
    if (!seedable(op.kind)) return std::nullopt;
    const Category cat = op_category(op.kind);
    // Slices, concats, norms and reductions along the split dim would need other blocks' rows.
    const int out_rank = g.tensor(op.outputs[0]).shape.rank();
    const int dim = op.attrs.dim < 0 ? op.attrs.dim + out_rank : op.attrs.dim;
    if ((cat == Category::Concat || cat == Category::Norm || cat == Category::Layout ||
         cat == Category::Reduce) &&
        sd >= 0 && dim == sd + out_rank - r)
      return std::nullopt;
  }
  if (sd >= 0 && shape[sd] % rows != 0) return std::nullopt;
  const int64_t extent = sd < 0 ? 1 : shape[sd], blocks = extent / rows;
  // Column chunks along the last dim (a second grid axis) where rows are long.
  const int64_t chunk = sd < 0 ? 0 : column_chunk(g, ops, shape);
  const int64_t parts = chunk > 0 ? shape[r - 1] / chunk : 1;
  auto body = BlockGraph::make(
      Dim3{static_cast<int>(blocks), static_cast<int>(parts), 1}, kSeedThreads, 1);
  if (!body.ok()) return std::nullopt;
  BlockGraph& b = *body;
  std::map<int, int> tile;          // program tensor → block tensor
  std::vector<int> kernel_inputs;   // program input tensors, in the order they are loaded
  auto load = [&](int t) -> bool {  // false: the input does not broadcast along sd
    if (tile.count(t)) return true;
    const Shape& s = g.tensor(t).shape;
    // The input's dim under the split dim (inputs broadcast right-aligned): split with the
    // output when it has the same extent, replicated when it has one element or none.
    const int di = sd < 0 ? -1 : sd - (r - s.rank());
    GridMap imap = kAllReplicated;
    if (di >= 0 && s[di] == extent && blocks > 1)
      imap[0] = di;
    else if (di >= 0 && s[di] != 1)
      return false;
    // Along the last dim: chunked with the outputs, or replicated (one element).
    if (parts > 1 && s.rank() > 0 && s[s.rank() - 1] == shape[r - 1]) imap[1] = s.rank() - 1;
    auto in = b.add_input(s, imap, kReplicate);
    if (!in.ok()) return false;
    tile[t] = *in;
    kernel_inputs.push_back(t);
    return true;
  };
  for (int id : ops) {
    const KernelOp& op = g.op(id);
    std::vector<int> args;
    for (int t : op.inputs) {
      const int p = g.tensor(t).producer;
      if ((p < 0 || g.op(p).kind == OpKind::Input) && !load(t)) return std::nullopt;
      args.push_back(tile.at(t));
    }
    auto out = b.add_op(op.kind, args, op.attrs);
    if (!out.ok()) return std::nullopt;
    tile[op.outputs[0]] = *out;
  }
  for (int t : outs) {
    if (!tile.count(t) && !load(t)) return std::nullopt;  // an output that is an input: copied
    OpAttrs keep;
    keep.fmap = kReplicate;
    auto post = b.add_op(OpKind::AccumSum, {tile.at(t)}, keep);  // F = 1: the tile itself
    if (!post.ok()) return std::nullopt;
    GridMap omap = kAllReplicated;
    if (blocks > 1) omap[0] = sd;
    if (parts > 1) omap[1] = r - 1;
    if (!b.add_output(*post, omap).ok()) return std::nullopt;
  }
  std::vector<std::string> names;
  for (int t : outs) names.push_back(g.tensor_name(t));
  auto made = seed.add_customized(kernel_inputs, std::move(b), names);
  if (!made.ok()) return std::nullopt;
  for (size_t k = 0; k < outs.size(); ++k)
    if (seed.tensor((*made)[k]).shape != g.tensor(outs[k]).shape) return std::nullopt;
  return *made;
}

/// The seed with one kernel per group of outputs: outputs of one shape (`merge` false), or of
/// one rank, split dim and split extent (`merge` true).
std::optional<KernelGraph> seed_of(const KernelGraph& program, int64_t rows, bool merge) {
  if (program.ranks() > 1 || program.outputs().empty()) return std::nullopt;
  KernelGraph seed;
  for (int t : program.inputs()) {  // the same ids: inputs come first in every program
    auto in =
        seed.add_input(program.tensor_name(t), program.tensor(t).shape, program.tensor(t).dtype);
    if (!in.ok() || *in != t) return std::nullopt;
  }
  // Outputs grouped, in the order of their first appearance.
  auto same_group = [&](const Shape& a, const Shape& b) {
    if (!merge) return a == b;
    const int sa = split_dim(a), sb = split_dim(b);
    return a.rank() == b.rank() && sa == sb && (sa < 0 || a[sa] == b[sb]);
  };
  std::vector<std::pair<Shape, std::vector<int>>> groups;
  for (int t : program.outputs()) {
    const Shape& s = program.tensor(t).shape;
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto& x) { return same_group(x.first, s); });
    if (it == groups.end())
      groups.push_back({s, {t}});
    else
      it->second.push_back(t);
  }
  std::map<int, int> made;  // program output → seed tensor
  for (const auto& [shape, outs] : groups) {
    const std::optional<std::vector<int>> ids = add_kernel(program, outs, shape, rows, seed);
    if (!ids) return std::nullopt;
    for (size_t k = 0; k < outs.size(); ++k) made[outs[k]] = (*ids)[k];
  }
  for (int t : program.outputs()) {
    if (program.tensor(t).dtype != seed.tensor(made.at(t)).dtype) return std::nullopt;
    if (!seed.mark_output(made.at(t), program.tensor_name(t)).ok()) return std::nullopt;
  }
  return seed;
}

}  // namespace

std::optional<KernelGraph> pointwise_seed(const KernelGraph& program, int64_t rows) {
  if (std::optional<KernelGraph> merged = seed_of(program, rows, true)) return merged;
  return seed_of(program, rows, false);
}

std::vector<int64_t> pointwise_seed_rows(const KernelGraph& program, int64_t min_blocks) {
  std::vector<int64_t> out;
  for (int64_t rows : kSeedRows) {
    // More rows per block only while min_blocks blocks remain, for every output shape.
    bool enough = true;
    for (int t : program.outputs()) {
      const Shape& s = program.tensor(t).shape;
      const int sd = split_dim(s);
      const int64_t extent = sd < 0 ? 1 : s[sd];
      enough = enough && (rows == 1 || (extent % rows == 0 && extent / rows >= min_blocks));
    }
    if (enough) out.push_back(rows);
  }
  return out;
}

std::vector<KernelGraph> pointwise_seeds(const KernelGraph& program, int64_t min_blocks) {
  std::vector<KernelGraph> out;
  for (int64_t rows : pointwise_seed_rows(program, min_blocks))
    if (std::optional<KernelGraph> g = pointwise_seed(program, rows)) out.push_back(std::move(*g));
  return out;
}

}  // namespace strata::search
