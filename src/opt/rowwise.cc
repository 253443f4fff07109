#include "strata/opt/rowwise.h"

#include <algorithm>

#include "strata/opt/schedule.h"

namespace strata {
namespace {

bool is_elementwise_or_chain(OpKind k) {
  return is_elementwise(k) || op_category(k) == Category::Fused;
}

/// A reduction of the last dim to one value per row (the reductions a row-wise kernel does).
bool last_dim_reduction(const BlockGraph& g, const BlockOp& op) {
  if (op.inputs.empty()) return false;
  const Shape& in = g.tensor(op.inputs[0]).shape;
  const int rank = in.rank();
  const ReductionInfo* r = op_reduction(op.kind);
  if (!r) return false;
  switch (op_category(op.kind)) {
    case Category::Reduce:
      return op.attrs.dim == rank - 1 && op.attrs.to == 1;
    case Category::Norm:
      return op.attrs.dim == rank - 1;
    case Category::Accum:  // with F = 1 an accumulator's shift (if any) cancels out
      return reduction_shape(op, in).to == 1;
    case Category::Scan:  // with F = 1 a running reduction is the reduction itself
      return true;
    case Category::Source:
    case Category::Sink:
    case Category::Customized:
    case Category::Matmul:
    case Category::Unary:
    case Category::Binary:
    case Category::Concat:
    case Category::Layout:
    case Category::Fused:
    case Category::Collective:
      break;
  }
  return false;
}

}  // namespace

Result<RowwiseLayout> rowwise_layout(const KernelPlan& plan) {
  const BlockGraph& g = *plan.graph;
  if (g.forloop() != 1) return make_error("rowwise: forloop > 1");
  RowwiseLayout L;
  // The full tile: the largest tensor.
  for (const BlockTensor& t : g.tensors())
    if (t.shape.numel() > L.full.numel()) L.full = t.shape;
  const int rank = L.full.rank();
  if (rank == 0) return make_error("rowwise: scalar tiles");
  L.cols = L.full[rank - 1];
  L.rows = L.full.numel() / L.cols;
  Shape row_shape = L.full;
  row_shape[rank - 1] = 1;
  bool any_block_reduction = false;
  for (const BlockOp& op : g.ops()) {
    const Category cat = op_category(op.kind);
    // accum and accum_rescale of one iteration are their input.
    const bool identity_accum = cat == Category::Accum && !op_reduction(op.kind);
    const bool ok = cat == Category::Source || cat == Category::Sink ||
                    is_elementwise_or_chain(op.kind) || identity_accum || last_dim_reduction(g, op);
    if (!ok) return make_error(std::string("rowwise: op ") + std::string(op_name(op.kind)));
    if (op.output >= 0) {
      const Shape& s = g.tensor(op.output).shape;
      if (s != L.full && s != row_shape) return make_error("rowwise: tile " + s.str());
    }
    for (int x : op.inputs) {
      const Shape& s = g.tensor(x).shape;
      if (s != L.full && s != row_shape) return make_error("rowwise: operand " + s.str());
    }
    if (last_dim_reduction(g, op) && g.tensor(op.inputs[0]).shape != L.full)
      return make_error("rowwise: reduction of a reduced tensor");
    any_block_reduction = any_block_reduction || last_dim_reduction(g, op);
  }
  // Chunk width: 16 bytes of the narrowest type, dividing every device row.
  int min_esize = 4;
  for (DType t : plan.input_dtypes) min_esize = std::min(min_esize, dtype_size(t));
  for (DType t : plan.output_dtypes) min_esize = std::min(min_esize, dtype_size(t));
  L.vec = 16 / min_esize;
  // Inputs read in place through kernel-level views: rows of the device tensor holding them,
  // from a column offset.
  auto input_view = [&](int i) -> const InputView* {
    return plan.input_views.empty() || !plan.input_views[i] ? nullptr : &*plan.input_views[i];
  };
  for (int i = 0; i < g.num_inputs(); ++i)
    if (input_view(i) && input_view(i)->map.transposed)
      return make_error("rowwise: input " + std::to_string(i) + " is a transposed view");
  auto fits = [&](int64_t v) {
    if (L.cols % v != 0) return false;
    for (int i = 0; i < g.num_inputs(); ++i) {
      const InputView* view = input_view(i);
      const Shape& d = view ? view->storage : g.input_shape(i);
      const int64_t col = view && !view->map.origin.empty() ? view->map.origin.back() : 0;
      const Shape& tile = g.tensor(g.op(g.input_op(i)).output).shape;
      if (tile == L.full && (d[d.rank() - 1] % v != 0 || col % v != 0)) return false;
    }
    for (int i = 0; i < g.num_outputs(); ++i) {
      const Shape& d = g.output_shape(i);
      const Shape& tile = g.tensor(g.op(g.output_op(i)).inputs[0]).shape;
      if (tile == L.full && d[d.rank() - 1] % v != 0) return false;
    }
    return true;
  };
  while (L.vec > 1 && !fits(L.vec)) L.vec /= 2;
  L.chunks_per_row = L.cols / L.vec;
  const int64_t chunks = L.rows * L.chunks_per_row;
  const int want = plan.options.threads;
  if (L.chunks_per_row <= 32 && 32 % L.chunks_per_row == 0) {
    // Rows inside a warp: any multiple of 32 threads dividing the chunks.
    L.block_rows = false;
    int t = 0;
    if (want > 0 && chunks % want == 0 && want <= plan.options.max_threads) t = want;
    for (int c = std::min(256, plan.options.max_threads) / 32 * 32; t == 0 && c >= 32; c -= 32)
      if (chunks % c == 0) t = c;
    if (t == 0) return make_error("rowwise: chunks not a multiple of a warp");
    L.threads = t;
  } else {
    L.block_rows = true;
    int t = 0;
    if (want > 0 && L.chunks_per_row % want == 0 && want % 32 == 0 &&
        want <= plan.options.max_threads)
      t = want;
    for (int c = std::min(512, plan.options.max_threads) / 32 * 32; t == 0 && c >= 32; c -= 32)
      if (L.chunks_per_row % c == 0) t = c;
    if (t == 0) return make_error("rowwise: rows not a multiple of a warp of chunks");
    L.threads = t;
    if (any_block_reduction && L.rows > 8) return make_error("rowwise: too many rows");
  }
  L.per_thread = chunks / L.threads;
  if (L.per_thread * L.vec > 64) return make_error("rowwise: too many values per thread");
  return L;
}

bool rowwise_eligible(const KernelPlan& plan) {
  return rowwise_layout(plan).ok();
}

Result<KernelPlan> plan_rowwise(KernelPlan plan) {
  STRATA_ASSIGN_OR_RETURN(RowwiseLayout L, rowwise_layout(plan));
  const BlockGraph& g = *plan.graph;
  plan.rowwise = true;
  plan.rowwise_layout = L;
  plan.threads = L.threads;
  plan.group_threads = L.threads;
  plan.groups = 1;
  plan.pipeline_stages = 1;
  for (size_t t = 0; t < g.tensors().size(); ++t) {
    plan.tensors[t] = TensorPlan{};
    plan.tensors[t].home = TensorHome::Owned;
    plan.tensors[t].dtype = DType::f32;
  }
  for (OpPlan& p : plan.ops) {
    p.matmul = MatmulPath::None;
    p.in_place = false;
  }
  bool reduces = false;
  for (const BlockOp& op : g.ops()) reduces = reduces || is_reduction(op);
  plan.scratch_bytes = L.block_rows && reduces ? 2 * (L.threads / 32) * L.rows * 4 : 0;
  return schedule_block_ops(std::move(plan));
}

}  // namespace strata
