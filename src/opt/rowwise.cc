#include "strata/opt/rowwise.h"

#include <algorithm>

#include "strata/opt/schedule.h"

namespace strata {
namespace {

/// The most values of one tensor a thread of a rowwise kernel holds: every tensor is a register
/// array, and a residual norm with 64 (8 rows of 3584 per block) spilled 548 bytes (ptxas).
constexpr int64_t kRowwiseValuesPerThread = 32;
/// Values of all the tensors a part holds in chunks above which a block takes more threads
/// (up to 1024): rotary prefill with 2 tokens per block, 160 threads of 4 chunks of its 5
/// tensors, took 139 registers.
constexpr int64_t kRowwiseHeldValues = 64;

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
  // Parts: the ops connected through the tensors they compute (an input tile connects nothing:
  // each part that reads it loads it).
  const int n_ops = static_cast<int>(g.ops().size());
  std::vector<int> root(n_ops);
  for (int i = 0; i < n_ops; ++i) root[i] = i;
  auto find = [&](int i) {
    while (root[i] != i) i = root[i] = root[root[i]];
    return i;
  };
  for (int i = 0; i < n_ops; ++i)
    for (int x : g.op(i).inputs) {
      const int p = g.tensor(x).producer;
      if (g.op(p).kind != OpKind::Input) root[find(i)] = find(p);
    }
  L.part_of_op.assign(n_ops, -1);
  std::vector<int> part_of_root(n_ops, -1);
  for (int i = 0; i < n_ops; ++i) {
    if (g.op(i).kind == OpKind::Input) continue;
    int& part = part_of_root[find(i)];
    if (part < 0) {
      part = static_cast<int>(L.parts.size());
      L.parts.push_back({});
    }
    L.part_of_op[i] = part;
  }
  if (L.parts.empty()) return make_error("rowwise: no outputs");
  // Each part's full tile: the largest tensor it computes or reads; the parts' rows follow
  // one another in the chunk grid.
  for (int i = 0; i < n_ops; ++i) {
    if (L.part_of_op[i] < 0) continue;
    Shape& f = L.parts[L.part_of_op[i]].full;
    std::vector<int> ts = g.op(i).inputs;
    if (g.op(i).output >= 0) ts.push_back(g.op(i).output);
    for (int t : ts)
      if (g.tensor(t).shape.numel() > f.numel()) f = g.tensor(t).shape;
  }
  int64_t rows = 0;
  for (size_t q = 0; q < L.parts.size(); ++q) {
    RowwisePart& part = L.parts[q];
    if (part.full.rank() == 0) return make_error("rowwise: scalar tiles");
    const int64_t c = part.full[part.full.rank() - 1];
    if (q > 0 && c != L.cols) return make_error("rowwise: parts of different row lengths");
    L.cols = c;
    part.row_offset = rows;
    part.rows = part.full.numel() / c;
    rows += part.rows;
  }
  L.rows = rows;
  L.full = L.parts[0].full;
  if (L.cols == 1) return make_error("rowwise: rows of one element");
  auto part_full = [&](int part) -> const Shape& { return L.parts[part].full; };
  auto width = [&](int t) { return g.tensor(t).shape[g.tensor(t).shape.rank() - 1]; };
  // Every dim but the last broadcasts to the part's full tile's (aligned from the right).
  auto rows_broadcast = [&](int t, int part) {
    const Shape& s = g.tensor(t).shape;
    const Shape& full = part_full(part);
    const int rank = full.rank();
    if (s.rank() > rank) return false;
    const int off = rank - s.rank();
    for (int d = 0; d + 1 < s.rank(); ++d)
      if (s[d] != full[d + off] && s[d] != 1) return false;
    return true;
  };
  // The form a tensor's shape alone gives (Gathered: narrower than a row).
  auto form_of_shape = [&](int t, int part) -> Result<RowwiseForm> {
    if (part >= 0 && !rows_broadcast(t, part))
      return make_error("rowwise: tile " + g.tensor(t).shape.str());
    const int64_t w = width(t);
    if (w == L.cols) return RowwiseForm::Chunks;
    if (w == 1) return RowwiseForm::Rows;
    if (w < L.cols) return RowwiseForm::Gathered;
    return make_error("rowwise: tile " + g.tensor(t).shape.str());
  };
  L.forms.assign(g.tensors().size(), RowwiseForm::Chunks);
  auto form = [&](int t) { return L.forms[t]; };
  auto from_input = [&](int t) { return g.op(g.tensor(t).producer).kind == OpKind::Input; };
  bool any_block_reduction = false;
  for (int i = 0; i < n_ops; ++i) {
    const BlockOp& op = g.op(i);
    const Category cat = op_category(op.kind);
    const std::string name(op_name(op.kind));
    const int part = L.part_of_op[i];
    if (cat == Category::Source) {
      STRATA_ASSIGN_OR_RETURN(L.forms[op.output], form_of_shape(op.output, -1));
      continue;
    }
    const Shape& full = part_full(part);
    Shape row_shape = full;
    row_shape[full.rank() - 1] = 1;
    bool gathered_operand = false;
    for (int x : op.inputs) {
      gathered_operand = gathered_operand || form(x) == RowwiseForm::Gathered;
      if (!rows_broadcast(x, part))
        return make_error("rowwise: operand " + g.tensor(x).shape.str());
    }
    if (cat == Category::Sink) {
      const Shape& s = g.tensor(op.inputs[0]).shape;
      if (s != full && s != row_shape) return make_error("rowwise: saved tile " + s.str());
      continue;
    }
    // accum and accum_rescale of one iteration are their input.
    if (cat == Category::Accum && !op_reduction(op.kind)) {
      if (gathered_operand) return make_error("rowwise: accum of a gathered tile");
      L.forms[op.output] = form(op.inputs[0]);
      continue;
    }
    if (last_dim_reduction(g, op)) {
      if (g.tensor(op.inputs[0]).shape != full)
        return make_error("rowwise: reduction of a reduced or broadcast tensor");
      const Shape& s = g.tensor(op.output).shape;
      const bool norm = cat == Category::Norm;
      if (s != (norm ? full : row_shape)) return make_error("rowwise: tile " + s.str());
      L.forms[op.output] = norm ? RowwiseForm::Chunks : RowwiseForm::Rows;
      any_block_reduction = true;
      continue;
    }
    if (op.kind == OpKind::Slice) {
      // A slice of the last dim of an input (loaded again at the columns read) or of a
      // gathered tensor.
      const int x = op.inputs[0];
      const int in_rank = g.tensor(x).shape.rank();
      const int dim = op.attrs.dim < 0 ? op.attrs.dim + in_rank : op.attrs.dim;
      if (dim != in_rank - 1) return make_error("rowwise: slice of another dim than the last");
      if (form(x) == RowwiseForm::Rows || (form(x) == RowwiseForm::Chunks && !from_input(x)))
        return make_error("rowwise: slice of a computed row");
      if (!rows_broadcast(op.output, part)) return make_error("rowwise: slice tile");
      L.forms[op.output] = RowwiseForm::Gathered;
      continue;
    }
    if (op.kind == OpKind::Concat) {
      const int out_rank = g.tensor(op.output).shape.rank();
      const int dim = op.attrs.dim < 0 ? op.attrs.dim + out_rank : op.attrs.dim;
      if (dim != out_rank - 1) return make_error("rowwise: concat of another dim than the last");
      for (int x : op.inputs)
        if (form(x) == RowwiseForm::Chunks) return make_error("rowwise: concat of a full row");
      STRATA_ASSIGN_OR_RETURN(RowwiseForm f, form_of_shape(op.output, part));
      if (f == RowwiseForm::Rows) return make_error("rowwise: concat to one column");
      L.forms[op.output] = f;  // Chunks: materialized here; Gathered: where a concat reads it
      continue;
    }
    if (!is_elementwise_or_chain(op.kind)) return make_error("rowwise: op " + name);
    if (gathered_operand) {
      // Evaluated at the columns its reader needs: every operand gathered (same width) or a row.
      for (int x : op.inputs)
        if (form(x) == RowwiseForm::Chunks ||
            (form(x) == RowwiseForm::Gathered && width(x) != width(op.output)))
          return make_error("rowwise: " + name + " of a gathered and a full tile");
      if (!rows_broadcast(op.output, part)) return make_error("rowwise: elementwise tile");
      L.forms[op.output] = RowwiseForm::Gathered;
      continue;
    }
    STRATA_ASSIGN_OR_RETURN(RowwiseForm f, form_of_shape(op.output, part));
    if (f == RowwiseForm::Gathered)
      return make_error("rowwise: " + name + " of a narrow tile");  // (no gathered operand)
    for (int x : op.inputs)
      if (f == RowwiseForm::Rows && form(x) != RowwiseForm::Rows)
        return make_error("rowwise: " + name + " to a row of full operands");
    L.forms[op.output] = f;
  }
  // Gathered tensors are read only where they are evaluated: by slices, concats and elementwise
  // ops (themselves gathered).
  for (const BlockOp& op : g.ops())
    for (int x : op.inputs)
      if (form(x) == RowwiseForm::Gathered && op.kind != OpKind::Slice &&
          op.kind != OpKind::Concat && !is_elementwise_or_chain(op.kind))
        return make_error("rowwise: " + std::string(op_name(op.kind)) + " of a gathered tile");
  // Chunk width: 16 bytes of the narrowest type, dividing every device row, every gathered
  // width and every slice's start.
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
      const int tile = g.op(g.input_op(i)).output;
      if (form(tile) != RowwiseForm::Rows && (d[d.rank() - 1] % v != 0 || col % v != 0))
        return false;
    }
    for (size_t t = 0; t < g.tensors().size(); ++t)
      if (form(static_cast<int>(t)) == RowwiseForm::Gathered && width(static_cast<int>(t)) % v != 0)
        return false;
    for (const BlockOp& op : g.ops())
      if (op.kind == OpKind::Slice && op.attrs.start % v != 0) return false;
    for (int i = 0; i < g.num_outputs(); ++i) {
      const Shape& d = g.output_shape(i);
      const int tile = g.op(g.output_op(i)).inputs[0];
      if (form(tile) == RowwiseForm::Chunks && d[d.rank() - 1] % v != 0) return false;
    }
    return true;
  };
  while (L.vec > 1 && !fits(L.vec)) L.vec /= 2;
  L.chunks_per_row = L.cols / L.vec;
  const int want = plan.options.threads;
  // Launch shape: a grid of fewer blocks than SMs leaves most SMs idle, so its blocks take up
  // to 1024 threads (fewer chunks per thread); otherwise up to 256 (rows inside a warp) or 512
  // (rows across warps), raised to 1024 where a thread would hold more than
  // kRowwiseValuesPerThread values of a tensor, or kRowwiseHeldValues of all a part holds in
  // chunks (each tensor a register array: more registers, spills).
  const bool few_blocks = g.grid().count() < plan.options.sm_count;
  const int max_threads = plan.options.max_threads / 32 * 32;
  int64_t chunks = 0;  // the chunk grid, idle chunks included
  auto values = [&](int t) { return (chunks + t - 1) / t * L.vec; };
  // The most tensors a part holds in chunks (an accum of one iteration is its input).
  auto alias = [&](int t) {
    const BlockOp& p = g.op(g.tensor(t).producer);
    return op_category(p.kind) == Category::Accum && !op_reduction(p.kind);
  };
  int64_t held = 1;
  for (size_t q = 0; q < L.parts.size(); ++q) {
    std::vector<bool> counted(g.tensors().size(), false);
    int64_t n = 0;
    for (int i = 0; i < n_ops; ++i) {
      if (L.part_of_op[i] != static_cast<int>(q)) continue;
      const BlockOp& op = g.op(i);
      std::vector<int> ts = op.inputs;
      if (op.output >= 0) ts.push_back(op.output);
      for (int t : ts)
        if (form(t) == RowwiseForm::Chunks && !counted[t] && !alias(t)) {
          counted[t] = true;
          ++n;
        }
    }
    held = std::max(held, n);
  }
  auto too_many = [&](int t) {
    return values(t) > kRowwiseValuesPerThread || values(t) * held > kRowwiseHeldValues;
  };
  if (L.chunks_per_row <= 32) {
    // Rows inside a warp: a row is a team of a power of two of lanes; any multiple of 32
    // threads dividing the chunks, else as many warps as cover them (the last chunks idle).
    L.block_rows = false;
    L.row_chunks = 1;
    while (L.row_chunks < L.chunks_per_row) L.row_chunks *= 2;
    chunks = L.rows * L.row_chunks;
    auto pick = [&](int cap) {
      cap = std::min(cap, max_threads);
      for (int c = cap; c >= 32; c -= 32)
        if (chunks % c == 0) return c;
      return static_cast<int>(std::min<int64_t>(cap, (chunks + 31) / 32 * 32));
    };
    int t = want > 0 && want % 32 == 0 && want <= max_threads ? want : 0;
    if (t == 0) t = pick(few_blocks ? 1024 : 256);
    if (want == 0 && too_many(t)) t = pick(1024);
    if (t < 32) return make_error("rowwise: fewer than 32 threads");
    L.threads = t;
  } else {
    L.block_rows = true;
    L.row_chunks = L.chunks_per_row;
    chunks = L.rows * L.row_chunks;
    auto pick = [&](int cap) {
      for (int c = std::min(cap, max_threads); c >= 32; c -= 32)
        if (L.chunks_per_row % c == 0) return c;
      return 0;
    };
    int t = want > 0 && L.chunks_per_row % want == 0 && want % 32 == 0 && want <= max_threads ? want
                                                                                              : 0;
    if (t == 0) t = pick(few_blocks ? 1024 : 512);
    if (want == 0 && t > 0 && too_many(t)) t = pick(1024);
    if (t == 0) return make_error("rowwise: rows not a multiple of a warp of chunks");
    L.threads = t;
    if (any_block_reduction && L.rows > 8) return make_error("rowwise: too many rows");
  }
  L.per_thread = (chunks + L.threads - 1) / L.threads;
  L.idle_chunks = L.row_chunks != L.chunks_per_row || L.per_thread * L.threads != chunks;
  if (L.per_thread * L.vec > kRowwiseValuesPerThread)
    return make_error("rowwise: more than " + std::to_string(kRowwiseValuesPerThread) +
                      " values of a tensor per thread");
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
