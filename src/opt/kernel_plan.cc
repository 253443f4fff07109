#include "strata/opt/kernel_plan.h"

#include <algorithm>
#include <sstream>

#include "strata/opt/ragged_tiles.h"

namespace strata {
namespace {

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::Prologue:
      return "prologue";
    case Phase::Loop:
      return "loop";
    case Phase::Post:
      return "post";
  }
  return "?";
}

const char* home_name(TensorHome h) {
  switch (h) {
    case TensorHome::Shared:
      return "shared";
    case TensorHome::Registers:
      return "registers";
    case TensorHome::Fused:
      return "fused";
    case TensorHome::View:
      return "view";
    case TensorHome::Inline:
      return "inline";
    case TensorHome::Scale:
      return "scale";
    case TensorHome::Owned:
      return "owned";
    case TensorHome::Alias:
      return "alias";
  }
  return "?";
}

}  // namespace

int KernelPlan::position(Phase phase, int level) const {
  int base = 0;
  for (int p = 0; p < static_cast<int>(phase); ++p)
    base += std::max<int>(1, static_cast<int>(levels[p].size()));
  return base + level;
}

Result<KernelPlan> make_kernel_plan(std::shared_ptr<const BlockGraph> graph,
                                    std::vector<DType> input_dtypes,
                                    std::vector<DType> output_dtypes, PlanOptions options,
                                    std::vector<std::optional<InputView>> input_views) {
  if (!graph) return make_error("kernel plan: no block graph");
  if (static_cast<int>(input_dtypes.size()) != graph->num_inputs())
    return make_error("kernel plan: " + std::to_string(input_dtypes.size()) +
                      " input dtypes given for a block graph with " +
                      std::to_string(graph->num_inputs()) + " inputs");
  if (static_cast<int>(output_dtypes.size()) != graph->num_outputs())
    return make_error("kernel plan: " + std::to_string(output_dtypes.size()) +
                      " output dtypes given for a block graph with " +
                      std::to_string(graph->num_outputs()) + " outputs");
  if (std::string why = block_graph_codegen_unsupported(*graph); !why.empty())
    return make_error(why);
  if (!input_views.empty() && static_cast<int>(input_views.size()) != graph->num_inputs())
    return make_error("kernel plan: " + std::to_string(input_views.size()) +
                      " input views given for a block graph with " +
                      std::to_string(graph->num_inputs()) + " inputs");
  for (size_t i = 0; i < input_views.size(); ++i) {
    if (!input_views[i]) continue;
    const InputView& v = *input_views[i];
    const Shape& d = graph->input_shape(static_cast<int>(i));
    const int r = d.rank();
    bool ok = v.storage.rank() == r && (v.map.origin.empty() || v.map.origin.size() == size_t(r));
    for (int k = 0; ok && k < r; ++k) {
      const int pk = v.map.transposed && k >= r - 2 ? 2 * r - 3 - k : k;
      const int64_t o = v.map.origin.empty() ? 0 : v.map.origin[pk];
      ok = o >= 0 && o + d[k] <= v.storage[pk];
    }
    if (!ok)
      return make_error("kernel plan: input " + std::to_string(i) + " " + d.str() +
                        " is not a view of its storage " + v.storage.str());
  }
  KernelPlan plan;
  plan.input_views = std::move(input_views);
  plan.graph = std::move(graph);
  plan.input_dtypes = std::move(input_dtypes);
  plan.output_dtypes = std::move(output_dtypes);
  plan.options = options;
  plan.threads = options.threads > 0 ? options.threads : plan.graph->block_threads();
  plan.ops.resize(plan.graph->ops().size());
  plan.tensors.resize(plan.graph->tensors().size());
  if (plan.graph->ragged()) plan.ragged = *ragged_tiles(*plan.graph);  // checked above
  // Input tiles of transposed kernel-level views are stored as device memory holds them.
  for (int i = 0; i < plan.graph->num_inputs() && !plan.input_views.empty(); ++i) {
    const int t = plan.graph->op(plan.graph->input_op(i)).output;
    plan.tensors[t].stored_transposed = plan.input_views[i] &&
                                        plan.input_views[i]->map.transposed &&
                                        plan.graph->tensor(t).shape.rank() >= 2;
  }
  if (std::optional<DType> t = mma_input_dtype(plan.input_dtypes)) {
    plan.mma_dtype = *t;
    plan.has_mma_dtype = true;
  }
  return plan;
}

std::optional<DType> mma_input_dtype(const std::vector<DType>& input_dtypes) {
  for (DType t : input_dtypes)
    if (t != DType::f32) return t;
  return std::nullopt;
}

std::vector<int> tensor_consumers(const BlockGraph& g, int t) {
  std::vector<int> out;
  for (size_t i = 0; i < g.ops().size(); ++i)
    for (int in : g.op(static_cast<int>(i)).inputs)
      if (in == t) {
        out.push_back(static_cast<int>(i));
        break;
      }
  return out;
}

bool IndexMap::identity() const {
  if (transposed) return false;
  for (int64_t o : origin)
    if (o != 0) return false;
  return true;
}

IndexMap compose_layout(const IndexMap& m, const BlockOp& op, int rank) {
  IndexMap r = m;
  if (r.origin.empty()) r.origin.assign(rank, 0);
  if (op.kind == OpKind::Transpose) {
    r.transposed = !r.transposed;
    return r;
  }
  // slice along logical dim d: the physical dim it reads is d, or the other of the last two.
  int d = op.attrs.dim;
  if (r.transposed && d >= rank - 2) d = d == rank - 1 ? rank - 2 : rank - 1;
  r.origin[d] += op.attrs.start;
  return r;
}

int alias_root(const KernelPlan& plan, int t) {
  while (plan.tensors[t].home == TensorHome::Alias) t = plan.tensors[t].view_of;
  return t;
}

Shape stored_shape(const KernelPlan& plan, int t) {
  Shape s = plan.graph->tensor(t).shape;
  if (plan.tensors[t].stored_transposed) std::swap(s[s.rank() - 1], s[s.rank() - 2]);
  return s;
}

IndexMap alias_map(const KernelPlan& plan, int t) {
  const BlockGraph& g = *plan.graph;
  if (plan.tensors[t].home != TensorHome::Alias) {
    IndexMap stored;
    stored.transposed = plan.tensors[t].stored_transposed;
    return stored;
  }
  const int rank = g.tensor(t).shape.rank();
  return compose_layout(alias_map(plan, plan.tensors[t].view_of), g.op(g.tensor(t).producer), rank);
}

bool is_reduction(const BlockOp& op) {
  return op_reduction(op.kind) != nullptr;
}

std::string block_graph_codegen_unsupported(const BlockGraph& g) {
  for (size_t i = 0; i < g.ops().size(); ++i) {
    const BlockOp& op = g.op(static_cast<int>(i));
    if (!block_codegen_supports(op))
      return "block op #" + std::to_string(i) + " (" + std::string(op_name(op.kind)) +
             "): the code generator does not support this op in block graphs yet";
  }
  if (g.ragged())
    if (auto r = ragged_tiles(g); !r.ok()) return r.error().message;
  return "";
}

bool block_codegen_supports(const BlockOp& op) {
  switch (op_category(op.kind)) {
    case Category::Scan:
    case Category::Accum:
    case Category::Source:
    case Category::Sink:
    case Category::Customized:
    case Category::Matmul:
    case Category::Unary:
    case Category::Binary:
    case Category::Reduce:
    case Category::Norm:
    case Category::Concat:
    case Category::Layout:
    case Category::Fused:
    case Category::Collective:  // kernel level only: never in a block graph
      break;
  }
  return true;
}

ReductionShape reduction_shape(const BlockOp& op, const Shape& in) {
  ReductionShape r;
  int rank = std::max(1, in.rank());
  Category c = op_category(op.kind);
  r.dim = c == Category::Accum || c == Category::Scan ? rank - 1 : op.attrs.dim;
  // Ops whose attributes carry `to` reduce to that many groups (op_table.def's Attrs column).
  const AttrSet set = op_info(op.kind).attrs;
  r.to = set == AttrSet::Reduce || set == AttrSet::To ? op.attrs.to : 1;
  for (int d = 0; d < in.rank(); ++d) {
    if (d < r.dim) r.outer *= in[d];
    if (d == r.dim) r.reduced = in[d];
    if (d > r.dim) r.inner *= in[d];
  }
  return r;
}

int reduction_team(int64_t group, int64_t outputs, int threads) {
  if (group >= 512 && outputs * 32 < threads) return 0;
  int lanes = 1;
  while (lanes < 32 && int64_t{lanes} * 16 <= group) lanes *= 2;
  return lanes;
}

int block_reduction_team(int64_t group, int64_t outputs, int threads) {
  int lanes = reduction_team(group, outputs, threads);
  while (lanes > 1 && outputs * lanes > threads) lanes /= 2;
  return lanes;
}

std::string format_plan(const KernelPlan& plan) {
  const BlockGraph& g = *plan.graph;
  std::ostringstream os;
  os << "kernel plan: grid (" << g.grid().x << ", " << g.grid().y << ", " << g.grid().z << "), "
     << plan.threads << " threads";
  if (plan.groups > 1) os << " in " << plan.groups << " loop groups of " << plan.group_threads;
  if (plan.rowwise) os << " (rowwise)";
  os << ", forloop " << g.forloop() << ", " << plan.pipeline_stages << " pipeline stage(s), "
     << plan.smem_bytes << " bytes of shared memory, barriers: " << plan.barriers_prologue
     << " prologue, " << plan.barriers_per_iteration << " per iteration, " << plan.barriers_post
     << " post\n";
  for (size_t i = 0; i < g.ops().size(); ++i) {
    const BlockOp& op = g.op(static_cast<int>(i));
    const OpPlan& p = plan.ops[i];
    os << "  op #" << i << " " << op_name(op.kind);
    if (op.output >= 0) os << " -> " << g.tensor_name(op.output);
    os << "  [" << phase_name(p.phase) << " level " << p.level << "]";
    if (p.matmul == MatmulPath::TensorCore)
      os << " tensor-core warps " << p.tiling.warps_m << "x" << p.tiling.warps_n << " tiles "
         << p.tiling.mt << "x" << p.tiling.nt << " chunk " << p.tiling.chunk_mt << "x"
         << p.tiling.chunk_nt;
    if (p.matmul == MatmulPath::TensorCore && (p.mma_n > 0 || p.mma_k > 0)) {
      const Shape& a = g.tensor(op.inputs[0]).shape;
      const Shape& b = g.tensor(op.inputs[1]).shape;
      if (p.mma_n != b[b.rank() - 1] || p.mma_k != a[a.rank() - 1])
        os << " padded to n " << p.mma_n << " k " << p.mma_k;
    }
    if (p.matmul == MatmulPath::TensorCore && !p.wgmma_note.empty())
      os << (p.wgmma ? " wgmma: " : " mma.sync, not wgmma: ") << p.wgmma_note;
    if (p.matmul == MatmulPath::Simt) os << " simt";
    if (p.epilogue >= 0) os << " epilogue op #" << p.epilogue;
    if (p.host >= 0) os << " in epilogue of op #" << p.host;
    if (p.accumulate_into >= 0) os << " accumulates into op #" << p.accumulate_into;
    if (p.inline_into >= 0) os << " inlined into op #" << p.inline_into;
    if (p.in_place) os << " in place";
    if (p.chain_into >= 0) os << " chained into op #" << p.chain_into;
    if (p.chain_from >= 0) os << " A from op #" << p.chain_from << " in registers";
    if (p.a_in_registers) os << " A fragments in registers";
    if (p.rowsum_of >= 0) os << " from row sums of op #" << p.rowsum_of;
    if (p.fold_into >= 0) os << " folded into op #" << p.fold_into;
    if (p.scale_a >= 0) os << " rows scaled by op #" << p.scale_a;
    if (p.scale_b >= 0) os << " columns scaled by op #" << p.scale_b;
    if (p.register_accum) os << " in registers per thread";
    if (p.ragged_extent >= 0)
      os << " combines present elements of ragged extent " << p.ragged_extent;
    if (p.ragged_mask != 0)
      os << " masks absent positions of dims 0x" << std::hex << p.ragged_mask << std::dec;
    if (p.ragged_zero_operands != 0)
      os << " zeroes absent fragments of operand(s) 0x" << std::hex << p.ragged_zero_operands
         << std::dec;
    os << "\n";
  }
  for (size_t t = 0; t < g.tensors().size(); ++t) {
    const TensorPlan& tp = plan.tensors[t];
    const BlockTensor& bt = g.tensor(static_cast<int>(t));
    os << "  tensor " << g.tensor_name(static_cast<int>(t)) << " " << bt.shape.str() << " "
       << home_name(tp.home) << " " << dtype_name(tp.dtype);
    if (tp.home == TensorHome::View)
      os << " in " << g.tensor_name(tp.view_of) << " at dim " << tp.view_dim << " +"
         << tp.view_offset;
    if (tp.home == TensorHome::Alias) os << " of " << g.tensor_name(tp.view_of);
    if (tp.home == TensorHome::Shared || tp.home == TensorHome::Registers ||
        tp.home == TensorHome::Scale) {
      os << " ld " << tp.layout.ld << (tp.layout.swizzle ? " swizzled" : "");
      if (tp.layout.atoms > 1) os << " in " << tp.layout.atoms << " atoms";
      if (tp.layout.pad_rows > 0) os << " +" << tp.layout.pad_rows << " pad rows";
      if (tp.stages > 1) os << " x" << tp.stages << " stages";
      if (tp.group_private) os << " per group";
      if (tp.offset >= 0) os << " @" << tp.offset << "+" << tp.bytes;
      os << " live [" << tp.live_begin << ", " << tp.live_end << "]";
    }
    os << "\n";
  }
  if (plan.scratch_bytes > 0)
    os << "  scratch @" << plan.scratch_offset << "+" << plan.scratch_bytes << "\n";
  for (size_t oi = 0; oi < plan.output_parts.size(); ++oi) {
    if (!plan.output_parts[oi]) continue;
    const OutputParts& p = *plan.output_parts[oi];
    os << "  output " << oi << " routed along dim " << p.dim << " (grid " << grid_axis_name(p.axis)
       << ", tiles of " << p.tile << ") into parts";
    for (size_t k = 0; k < p.starts.size(); ++k) os << " [" << p.starts[k] << ", " << p.ends[k] << ")";
    os << "\n";
  }
  for (size_t e = 0; e < plan.ragged.extents.size(); ++e) {
    const RaggedExtent& r = plan.ragged.extents[e];
    os << "  ragged extent " << e << ": tile " << r.tile;
    if (r.axis >= 0)
      os << " of parts of " << r.block_tile << " of " << r.extent << " along grid "
         << grid_axis_name(r.axis);
    else
      os << " of a part of " << r.extent;
    if (r.loop) os << ", split over the iterations";
    os << "; dims:";
    for (size_t t = 0; t < g.tensors().size(); ++t)
      for (int d = 0; d < g.tensor(static_cast<int>(t)).shape.rank(); ++d)
        if (plan.ragged.dims[t][d] == static_cast<int>(e))
          os << " " << g.tensor_name(static_cast<int>(t)) << "[" << d << "]";
    os << "\n";
  }
  return os.str();
}

}  // namespace strata
