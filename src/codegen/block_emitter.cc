#include "block_emitter.h"

#include <algorithm>
#include <sstream>

#include "reduction_code.h"
#include "strata/opt/register_fusion.h"
#include "strata/opt/schedule.h"

namespace strata::codegen {
namespace {

/// Element strides of a tile of shape s stored with `layout`: rows `ld` apart, matrices of
/// (rows + pad_rows) rows (times the atoms of a split row), batch dims dense over them.
std::vector<int64_t> tile_strides(const Shape& s, const TileLayout& layout) {
  const int r = s.rank();
  std::vector<int64_t> st(r, 1);
  for (int d = r - 2; d >= 0; --d)
    st[d] = d == r - 2   ? layout.ld
            : d == r - 3 ? (s[r - 2] + layout.pad_rows) * layout.row_elems()
                         : st[d + 1] * s[d + 1];
  return st;
}

/// Elements between the atoms of a row split into atoms (TileLayout::atoms), 0 when not split.
int64_t tile_atom_stride(const Shape& s, const TileLayout& layout) {
  return layout.atoms > 1 ? (s[s.rank() - 2] + layout.pad_rows) * layout.ld : 0;
}

std::string map_str(const GridMap& m) {
  std::string s = "(";
  for (int a = 0; a < 3; ++a) {
    if (a) s += ", ";
    s += m[a] == kReplicate ? "φ" : std::to_string(m[a]);
  }
  return s + ")";
}

/// `p + t0 + t1 + …`: pointer arithmetic one term at a time (zero terms skipped; a term that is
/// itself a sum stays grouped).
ir::Expr pointer_plus(ir::Expr p, const std::vector<ir::Expr>& terms) {
  for (const ir::Expr& t : terms)
    if (!t.is(0)) p = ir::binary("+", p, t);
  return p;
}

const char* axis_var(int a) {
  return a == 0 ? "bx" : a == 1 ? "by" : "bz";
}

}  // namespace

ir::Expr Access::offset(const std::vector<ir::Expr>& logical,
                        const ir::Expr& swizzle_row_in) const {
  const int r = static_cast<int>(strides.size());
  std::vector<ir::Expr> idx = logical;
  ir::Expr swizzle_row = swizzle_row_in;
  if (!map.identity()) {
    if (map.transposed && r >= 2) std::swap(idx[r - 1], idx[r - 2]);
    for (int d = 0; d < r && d < static_cast<int>(map.origin.size()); ++d)
      idx[d] = idx[d] + map.origin[d];
    // The caller's row stands for the logical row: usable when that is the physical row up
    // to a multiple of 8.
    if (map.transposed ||
        (r >= 2 && map.origin.size() == static_cast<size_t>(r) && map.origin[r - 2] % 8 != 0))
      swizzle_row = {};
  }
  std::vector<ir::Expr> terms;
  for (int d = 0; d + 1 < r; ++d) terms.push_back(idx[d] * strides[d]);
  if (r >= 1) {
    ir::Expr c = idx[r - 1];
    if (atom_stride > 0) {
      // A row split into atoms: atom c / ld, column c % ld inside it (TileLayout::atoms).
      terms.push_back((c / strides[r - 2]) * atom_stride);
      c = c % strides[r - 2];
    }
    const ir::Expr row = !swizzle_row && r >= 2 ? idx[r - 2] : swizzle_row;
    if (swizzle && r >= 2 && !row.is(0)) c = ir::call("strata_rt::swizzle_col<true>", {row, c});
    terms.push_back(c);
  }
  return ir::sum(terms);
}

ir::Expr Access::pointer() const {
  int64_t off = 0;
  const size_t r = strides.size();
  for (size_t d = 0; d < map.origin.size() && d < r; ++d)
    off += d + 1 == r && atom_stride > 0
               ? map.origin[d] / strides[r - 2] * atom_stride + map.origin[d] % strides[r - 2]
               : map.origin[d] * strides[d];
  return base + off;
}

ir::Expr Access::ref(const std::vector<ir::Expr>& idx, const ir::Expr& swizzle_row) const {
  return ir::index(base, offset(idx, swizzle_row));
}

ir::Expr Access::load(const std::vector<ir::Expr>& idx) const {
  ir::Expr r = ref(idx);
  return dtype == DType::f32 ? r : ir::call("strata_rt::to_f32", {r});
}

std::string Access::offset(const std::vector<std::string>& idx,
                           const std::string& swizzle_row) const {
  return ir::print_expr(
      offset(exprs(idx), swizzle_row.empty() ? ir::Expr() : exprs({swizzle_row})[0]));
}

std::string Access::ref(const std::vector<std::string>& idx, const std::string& swizzle_row) const {
  return ir::print_expr(
      ref(exprs(idx), swizzle_row.empty() ? ir::Expr() : exprs({swizzle_row})[0]));
}

std::string Access::load(const std::vector<std::string>& idx) const {
  return ir::print_expr(load(exprs(idx)));
}

std::string describe_block_graph(const KernelPlan& plan) {
  const BlockGraph& g = *plan.graph;
  std::ostringstream os;
  os << "block graph: grid (" << g.grid().x << ", " << g.grid().y << ", " << g.grid().z << "), "
     << g.block_threads() << " threads, forloop " << g.forloop() << "\n";
  for (size_t i = 0; i < g.ops().size(); ++i) {
    const BlockOp& op = g.op(static_cast<int>(i));
    os << "  #" << i << " ";
    if (op.kind == OpKind::Input) {
      os << g.tensor_name(op.output) << " " << g.tensor(op.output).shape.str() << " = input "
         << op.attrs.input_index << " " << g.input_shape(op.attrs.input_index).str() << " imap "
         << map_str(op.attrs.imap) << " fmap "
         << (op.attrs.fmap == kReplicate ? std::string("φ") : std::to_string(op.attrs.fmap));
    } else if (op.kind == OpKind::Output) {
      int oi = 0;
      while (g.output_op(oi) != static_cast<int>(i)) ++oi;
      os << "output " << oi << " " << g.output_shape(oi).str() << " = "
         << g.tensor_name(op.inputs[0]) << " omap " << map_str(op.attrs.omap);
    } else {
      os << g.tensor_name(op.output) << " " << g.tensor(op.output).shape.str() << " = "
         << op_name(op.kind) << "(";
      for (size_t k = 0; k < op.inputs.size(); ++k)
        os << (k ? ", " : "") << g.tensor_name(op.inputs[k]);
      os << ")";
      if (op_category(op.kind) == Category::Accum)
        os << " fmap "
           << (op.attrs.fmap == kReplicate ? std::string("φ") : std::to_string(op.attrs.fmap));
      if (op_category(op.kind) == Category::Reduce || op_category(op.kind) == Category::Norm ||
          op_category(op.kind) == Category::Concat)
        os << " dim " << op.attrs.dim;
      if (op_category(op.kind) == Category::Reduce || op.kind == OpKind::AccumSumToDimx)
        os << " to " << op.attrs.to;
      if (op.kind == OpKind::MulScalar || op.kind == OpKind::AddScalar)
        os << " scalar " << op.attrs.scalar;
      if (op.kind == OpKind::Clamp)
        os << " to [" << op.attrs.scalar << ", " << op.attrs.scalar2 << "]";
      if (op.kind == OpKind::Slice)
        os << " dim " << op.attrs.dim << " [" << op.attrs.start << ", " << op.attrs.end << ")";
      const AttrSet set = op_info(op.kind).attrs;
      if ((set == AttrSet::Norm || set == AttrSet::Eps) && op.attrs.scalar != 0.0)
        os << " eps " << op.attrs.scalar;
      if (op.kind == OpKind::ThreadFused) {
        os << " chain [";
        for (size_t k = 0; k < op.chain.size(); ++k)
          os << (k ? ", " : "") << op_name(op.chain[k].kind);
        os << "]";
      }
    }
    os << "\n";
  }
  return os.str();
}

Status emit_block_kernel(const KernelPlan& plan, const BlockKernelInfo& info,
                         const std::string& title, CodeWriter& w) {
  BlockEmitter e(plan, info, w);
  return e.emit(title);
}

BlockEmitter::BlockEmitter(const KernelPlan& plan, const BlockKernelInfo& info, CodeWriter& w)
    : plan_(plan), g_(*plan.graph), info_(info), w_(w), threads_(plan.threads) {}

void BlockEmitter::set_group_scope(bool on) {
  group_scope_ = on && grouped();
  tid_ = group_scope_ ? "gtid" : "tid";
  threads_ = group_scope_ ? plan_.group_threads : plan_.threads;
}

std::string BlockEmitter::tname(int t) const {
  return identifier("s" + std::to_string(t) + "_", g_.tensor(t).name);
}

ir::Expr BlockEmitter::tile_ptr(int t) const {
  const TensorPlan& tp = plan_.tensors[t];
  const bool priv =
      tp.home == TensorHome::View ? plan_.tensors[tp.view_of].group_private : tp.group_private;
  return ir::var(group_scope_ && priv ? tname(t) + "g" : tname(t));
}

std::string BlockEmitter::dtype_of(int t) const {
  return cuda_type(plan_.tensors[t].dtype);
}

Access BlockEmitter::access_stage(int t, const ir::Expr& stage) const {
  const TensorPlan& tp = plan_.tensors[t];
  if (tp.home == TensorHome::Alias) {
    // A transpose / slice read in place: its input's access with the layout op's index map.
    Access a = access_stage(tp.view_of, stage);
    a.map = compose_layout(a.map, g_.op(g_.tensor(t).producer), g_.tensor(t).shape.rank());
    return a;
  }
  Access a;
  a.dtype = tp.dtype;
  a.base = tile_ptr(t);
  if (tp.home == TensorHome::View) {
    const TensorPlan& hp = plan_.tensors[tp.view_of];
    a.strides = tile_strides(g_.tensor(tp.view_of).shape, hp.layout);
    a.swizzle = hp.layout.swizzle;
    return a;
  }
  if (tp.home == TensorHome::Scale) {
    // The inverse-RMS vector of a folded norm: dense over the non-normalized indices.
    Shape vs = g_.tensor(t).shape;
    vs[g_.op(g_.tensor(t).producer).attrs.dim] = 1;
    a.strides = vs.strides();
    return a;
  }
  a.strides = tile_strides(stored_shape(plan_, t), tp.layout);
  a.swizzle = tp.layout.swizzle;
  a.atom_stride = tile_atom_stride(stored_shape(plan_, t), tp.layout);
  a.map.transposed = tp.stored_transposed;
  if (tp.stages > 1) a.base = tile_ptr(t) + stage * tp.layout.stage_elems;
  return a;
}

Access BlockEmitter::access(int t) const {
  // A layout op read in place reads the current stage of a pipelined tile it aliases.
  const int storage = alias_root(plan_, t);
  return access_stage(
      t, in_loop_ && plan_.tensors[storage].stages > 1 ? ir::var("stage") : ir::int_lit(0));
}

void BlockEmitter::barrier() {
  if (info_.task_entry)
    w_.call("strata_rt::block_barrier<" + std::to_string(plan_.threads) + ", " +
            std::to_string(kTaskBarrierId) + ">");
  else
    w_.sync();
}

std::string task_threads_constant(const std::string& name) {
  return name + "_threads";
}

std::string task_smem_constant(const std::string& name) {
  return name + "_smem_bytes";
}

Status BlockEmitter::emit(const std::string& title) {
  w_.comment(title);
  std::istringstream desc(describe_block_graph(plan_) + format_plan(plan_));
  for (std::string l; std::getline(desc, l);) w_.comment("  " + l);
  std::string params;
  for (int i = 0; i < g_.num_inputs(); ++i)
    params += (i ? ", " : "") + std::string("const ") + cuda_type(info_.input_dtypes[i]) +
              "* __restrict__ gin" + std::to_string(i);
  for (int i = 0; i < g_.num_outputs(); ++i)
    for (const std::string& name : output_params(plan_, i))
      params += ", " + cuda_type(info_.output_dtypes[i]) + "* __restrict__ " + name;
  if (info_.task_entry) {
    w_.comment("Task entry: block (bx, by, bz) of the kernel's grid, run by threads 0.." +
               std::to_string(plan_.threads - 1) +
               " of the calling block (the others return at once); smem: " +
               task_smem_constant(info_.name) +
               " bytes of dynamic shared memory, 128-byte aligned, owned by the entry until it "
               "returns; every cp.async group is drained before it returns.");
    w_.add(ir::decl("constexpr int", task_threads_constant(info_.name), plan_.threads));
    w_.add(ir::decl("constexpr long long", task_smem_constant(info_.name),
                    ir::int_lit(plan_.smem_bytes)));
    w_.open("extern \"C\" __device__ void " + info_.name + "(int bx, int by, int bz, " + params +
            ", unsigned char* __restrict__ smem)");
    w_.add(ir::if_compact(ir::var("threadIdx.x") >= plan_.threads, ir::ret()));
    w_.add(ir::decl("const int", "tid", ir::var("threadIdx.x")));
  } else {
    const int min_blocks = plan_.emission.min_blocks_per_sm;
    const std::string bounds =
        std::to_string(plan_.threads) + (min_blocks > 0 ? ", " + std::to_string(min_blocks) : "");
    w_.open("extern \"C\" __global__ void __launch_bounds__(" + bounds + ") " + info_.name + "(" +
            params + ")");
    w_.call("STRATA_RT_DYNAMIC_SMEM", {ir::var("smem")});
    w_.add(ir::decl("const int", "tid", ir::var("threadIdx.x")));
    w_.add(ir::decl_many("const int", {"bx", "by", "bz"},
                         {ir::var("blockIdx.x"), ir::var("blockIdx.y"), ir::var("blockIdx.z")}));
  }
  for (const char* b : {"bx", "by", "bz"}) w_.add(ir::eval(ir::c_cast("void", ir::var(b))));
  declare_ragged_parts();
  if (plan_.rowwise) {
    Status st = emit_rowwise();
    if (info_.task_entry) w_.call("strata_rt::cp_async_wait<0>", {}, "drained for the caller");
    w_.close();
    return st;
  }
  if (grouped()) {
    const int G = plan_.groups, GT = plan_.group_threads, F = g_.forloop();
    w_.comment("loop groups: " + std::to_string(G) + " groups of " + std::to_string(GT) +
               " threads; group grp runs iterations grp, grp + " + std::to_string(G) + ", ...");
    w_.add(ir::decl_many("const int", {"grp", "gtid"}, {ir::var("tid") / GT, ir::var("tid") % GT}));
    ir::Stmt n_it = ir::decl("const int", "n_it", (ir::int_lit(F + G - 1) - ir::var("grp")) / G,
                             "iterations of this group");
    w_.add(n_it);
  }
  declare_tiles();
  declare_registers();
  emit_prologue();
  if (grouped())
    emit_group_loop();
  else
    emit_loop();
  emit_post();
  if (info_.task_entry) w_.call("strata_rt::cp_async_wait<0>", {}, "drained for the caller");
  w_.close();
  return Status::success();
}

void BlockEmitter::declare_tiles() {
  const int n = static_cast<int>(g_.tensors().size());
  w_.comment("shared-memory tiles (" + std::to_string(plan_.smem_bytes) + " bytes)");
  auto stored = [](const TensorPlan& tp) {
    return tp.home == TensorHome::Shared || tp.home == TensorHome::Registers ||
           tp.home == TensorHome::Scale;
  };
  auto smem_at = [&](int t, int64_t offset) {
    return ir::reinterpret_cast_to(dtype_of(t) + "*",
                                   ir::binary("+", ir::var("smem"), ir::int_lit(offset)));
  };
  for (int t = 0; t < n; ++t) {
    const TensorPlan& tp = plan_.tensors[t];
    if (!stored(tp)) continue;
    std::string note =
        g_.tensor(t).shape.str() + " " + std::string(dtype_name(tp.dtype)) + ", row stride " +
        std::to_string(tp.layout.ld) + (tp.layout.swizzle ? ", swizzled" : "") +
        (tp.layout.atoms > 1 ? ", rows in " + std::to_string(tp.layout.atoms) + " atoms of " +
                                   std::to_string(tp.layout.ld) + " columns"
                             : "") +
        (tp.stages > 1 ? ", " + std::to_string(tp.stages) + " stages of " +
                             std::to_string(tp.layout.stage_elems)
                       : "") +
        (tp.home == TensorHome::Registers ? ", post-loop copy of a register accumulator" : "") +
        (tp.home == TensorHome::Scale ? ", inverse-RMS vector of a folded rms_norm" : "") +
        (tp.group_private ? ", one copy per loop group" : "");
    w_.add(ir::decl(dtype_of(t) + "* const", tname(t), smem_at(t, tp.offset), note));
  }
  for (int t = 0; t < n; ++t) {
    const TensorPlan& tp = plan_.tensors[t];
    if (tp.home != TensorHome::View) continue;
    const TensorPlan& hp = plan_.tensors[tp.view_of];
    std::vector<int64_t> st = tile_strides(g_.tensor(tp.view_of).shape, hp.layout);
    // (a zero offset is kept: `host + 0` says where the view lies)
    w_.add(ir::decl(
        dtype_of(t) + "* const", tname(t),
        ir::binary("+", ir::var(tname(tp.view_of)), ir::int_lit(tp.view_offset * st[tp.view_dim])),
        g_.tensor(t).shape.str() + " stored in place inside " + g_.tensor_name(tp.view_of)));
  }
  if (grouped()) {
    w_.comment("this loop group's copies");
    for (int t = 0; t < n; ++t) {
      const TensorPlan& tp = plan_.tensors[t];
      if (stored(tp) && tp.group_private)
        w_.add(ir::decl(dtype_of(t) + "* const", tname(t) + "g",
                        ir::var(tname(t)) + ir::var("grp") * tp.group_elems));
    }
    for (int t = 0; t < n; ++t) {
      const TensorPlan& tp = plan_.tensors[t];
      if (tp.home != TensorHome::View || !plan_.tensors[tp.view_of].group_private) continue;
      w_.add(ir::decl(dtype_of(t) + "* const", tname(t) + "g",
                      ir::binary("+", ir::var(tname(tp.view_of) + "g"),
                                 ir::var(tname(t)) - ir::var(tname(tp.view_of)))));
    }
  }
  if (plan_.scratch_bytes > 0)
    w_.add(
        ir::decl("float* const", "scratch",
                 ir::reinterpret_cast_to(
                     "float*", ir::binary("+", ir::var("smem"), ir::int_lit(plan_.scratch_offset))),
                 "block-wide reduction scratch"));
}

void BlockEmitter::declare_registers() {
  // Tensor-core matmul shapes and register accumulators.
  for (int i = 0; i < static_cast<int>(g_.ops().size()); ++i) {
    const OpPlan& p = plan_.ops[i];
    if (p.matmul != MatmulPath::TensorCore) continue;
    const BlockOp& op = g_.op(i);
    // A chained matmul's A comes from registers: describe it as a dense K-wide tile.
    const int ta = p.chain_from >= 0 ? -1 : matmul_operand(plan_, i, 0);
    Access a = ta >= 0 ? access(ta) : Access{}, b = access(matmul_operand(plan_, i, 1));
    const Shape& out = g_.tensor(op.output).shape;
    const int r = out.rank();
    int64_t bt = 1;
    for (int d = 0; d + 2 < r; ++d) bt *= out[d];
    // N and K as the plan pads them to the mma step; the true N is the spec's NV.
    const int64_t k = p.mma_k, n = p.mma_n, nv = out[r - 1];
    if (ta < 0) a.strides = {k * out[r - 2], k, 1};
    const int ra = static_cast<int>(a.strides.size());
    const bool transposed = a.map.transposed || b.map.transposed, padded = n != nv;
    const bool atoms = b.atom_stride > 0;  // B's rows in 64-column atoms (wgmma only)
    w_.line(
        "using mma" + std::to_string(i) + " = strata_rt::MmaSpec<" + std::to_string(bt) + ", " +
        std::to_string(out[r - 2]) + ", " + std::to_string(n) + ", " + std::to_string(k) + ", " +
        std::to_string(a.strides[ra - 2]) + ", " + std::to_string(ra >= 3 ? a.strides[ra - 3] : 0) +
        ", " + (a.swizzle ? "true" : "false") + ", " + std::to_string(b.strides[r - 2]) + ", " +
        std::to_string(r >= 3 ? b.strides[r - 3] : 0) + ", " + (b.swizzle ? "true" : "false") +
        (transposed || padded || atoms ? std::string(", ") + (a.map.transposed ? "true" : "false") +
                                             ", " + (b.map.transposed ? "true" : "false")
                                       : std::string()) +
        (padded || atoms ? ", " + std::to_string(nv) : std::string()) +
        (atoms ? ", " + std::to_string(b.atom_stride) : std::string()) + ">;  // op #" +
        std::to_string(i) + ": batch, M, N, K, A (ld, batch stride, swizzle), B (…)" +
        (transposed ? ", A / B stored transposed" : "") + (padded ? ", the true N" : "") +
        (atoms ? ", B's atom stride" : "") +
        (k != g_.tensor(op.inputs[0]).shape[r - 1]
             ? "; K padded from " + std::to_string(g_.tensor(op.inputs[0]).shape[r - 1])
             : ""));
    if (p.accumulate_into >= 0 &&
        plan_.tensors[g_.op(p.accumulate_into).output].home == TensorHome::Registers) {
      std::string acc = "racc" + std::to_string(g_.op(p.accumulate_into).output);
      w_.add(ir::decl_array("float", acc, {p.tiling.mt, p.tiling.nt, 4}, {},
                            "fragments of " + g_.tensor_name(g_.op(p.accumulate_into).output) +
                                " (registers across the loop)"));
      w_.call("strata_rt::mma_zero", {ir::var(acc)});
    }
  }
  // `for (x < n) name[x / 2][x % 2] = v` (pairs) or `name[x] = v`: the initial state.
  auto fill = [&](const std::string& name, int64_t n, bool pairs, const ir::Expr& v) {
    const ir::Expr x = ir::var("x");
    const ir::Expr at =
        pairs ? ir::index(ir::index(ir::var(name), x / 2), x % 2) : ir::index(ir::var(name), x);
    w_.add(ir::for_compact("x", 0, x < n, ir::assign(at, v)));
  };
  const ir::Expr neg_inf = ir::call("strata_rt::neg_inf");
  const std::string across = " (registers across the loop)";
  for (int i = 0; i < static_cast<int>(g_.ops().size()); ++i) {
    const OpPlan& p = plan_.ops[i];
    const BlockOp& op = g_.op(i);
    const ReductionCode red(op.kind, op.attrs);
    const std::string racc = "racc" + std::to_string(op.output);
    const std::string name = g_.tensor_name(op.output);
    if (p.scan_of >= 0) {
      const int mt = plan_.ops[p.scan_of].tiling.mt;
      const std::string rmax = "rmax" + std::to_string(op.output);
      w_.add(ir::decl_array("float", rmax, {mt, 2}, {},
                            "this lane's running row maxima " + name + across));
      fill(rmax, 2 * mt, true, neg_inf);
    }
    if (p.rowsum_of >= 0) {
      const int mt = plan_.ops[p.rowsum_of].tiling.mt;
      if (!red.is_max()) {
        w_.add(ir::decl_array("float", racc, {mt, 2}, ir::aggregate_zero(),
                              "this lane's row sums of " + name + across));
      } else {
        w_.add(ir::decl_array("float", racc, {mt, 2}, {},
                              "this lane's row maxima of " + name + across));
        fill(racc, 2 * mt, true, ir::verbatim(red.identity()));
      }
    }
    if (p.register_accum) {
      const int64_t trips = accum_trips(i);
      if (rescales(op.kind)) {
        const std::string rprev = "rprev" + std::to_string(op.output);
        w_.add(ir::decl_array("float", rprev, {trips}, {},
                              "the shift each chunk of " + name + " is expressed in" + across));
        fill(rprev, trips, false, neg_inf);
      }
      if (!op_reduction(op.kind)) {
        w_.add(ir::decl_array("float", racc, {trips, accum_vec(i)}, ir::aggregate_zero(),
                              "thread-owned chunks of " + name + across));
      } else if (!red.is_max()) {
        w_.add(ir::decl_array("float", racc, {trips}, ir::aggregate_zero(),
                              "per-chunk partial sums of " + name + across));
      } else {
        w_.add(ir::decl_array("float", racc, {trips}, {},
                              "per-chunk partial maxima of " + name + across));
        fill(racc, trips, false, ir::verbatim(red.identity()));
      }
    }
  }
}

void BlockEmitter::emit_zero_accumulators() {
  for (int i = 0; i < static_cast<int>(g_.ops().size()); ++i) {
    const BlockOp& op = g_.op(i);
    // Accumulators and the state of running ops (a running max starts at −∞).
    const Category cat = op_category(op.kind);
    if (cat != Category::Accum && cat != Category::Scan) continue;
    if (op.kind == OpKind::AccumSum && op.attrs.fmap != kReplicate) continue;  // fully overwritten
    const int t = op.output;
    const TensorPlan& tp = plan_.tensors[t];
    if (tp.home != TensorHome::Shared) continue;
    const Shape& s = g_.tensor(t).shape;
    Access a = access(t);
    w_.open("");
    const ReductionCode red(op.kind, op.attrs);
    w_.comment("zero accumulator " + g_.tensor_name(t) +
               (red.is_max() ? " (to the identity of max, −∞)" : "") +
               (tp.group_private ? " (every loop group's copy)" : ""));
    if (tp.group_private) {
      const ir::Expr zg = ir::var("zg");
      w_.open(ir::for_loop("zg", 0, zg < plan_.groups, {}, "unroll 1"));
      a.base = a.base + zg * tp.group_elems;
    }
    const ir::Expr e = ir::var("e");
    w_.open(ir::for_loop("e", tid(), e < s.numel(), plan_.threads));
    w_.add(ir::assign(a.ref(unflatten(e, s)), ir::verbatim(red.identity())));
    // (A rescaling accumulator's shift slots are written before they are read: no init.)
    w_.close();
    if (tp.group_private) w_.close();
    w_.close();
  }
}

void BlockEmitter::loop_barrier() {
  if (group_scope_)
    w_.call("strata_rt::group_sync<" + std::to_string(plan_.group_threads) + ">",
            {ir::int_lit(1) + ir::var("grp")});
  else
    barrier();
}

void BlockEmitter::emit_load_a_fragments() {
  for (int i = 0; i < static_cast<int>(g_.ops().size()); ++i) {
    const OpPlan& p = plan_.ops[i];
    if (!p.a_in_registers || p.matmul != MatmulPath::TensorCore) continue;
    const MmaTiling& tl = p.tiling;
    const int a = matmul_operand(plan_, i, 0);
    const int64_t k = g_.tensor(g_.op(i).inputs[0]).shape.dims().back();
    const std::string name = "afrag" + std::to_string(i);
    w_.add(ir::decl_array(
        "strata_rt::u32", name, {tl.mt, k / 16, 4}, {},
        "A fragments of op #" + std::to_string(i) + " (loop-invariant " + g_.tensor_name(a) + ")"));
    const ir::Expr warp = ir::binary(">>", tid(), ir::int_lit(5));
    w_.open(ir::if_then(warp < tl.warps_m));
    w_.call("strata_rt::warp_load_a<mma" + std::to_string(i) + ", " + cuda_type(plan_.mma_dtype) +
                ", " + std::to_string(tl.mt) + ">",
            {access(a).pointer(), ir::var(name), warp * tl.mt});
    w_.close();
  }
}

void BlockEmitter::emit_prologue() {
  const int S = plan_.pipeline_stages;
  std::vector<int> hoisted, piped;
  for (int i = 0; i < static_cast<int>(g_.ops().size()); ++i) {
    if (g_.op(i).kind != OpKind::Input) continue;
    (plan_.ops[i].phase == Phase::Prologue ? hoisted : piped).push_back(i);
  }
  bool a_frags = false;
  for (const OpPlan& p : plan_.ops) a_frags = a_frags || p.a_in_registers;
  auto commit = [&] { w_.call("strata_rt::cp_async_commit"); };
  auto wait = [&](int pending, const std::string& why) {
    w_.call("strata_rt::cp_async_wait<" + std::to_string(pending) + ">", {}, why);
  };
  // The copies go out first; zeroing the accumulators (whose storage no tile shares: both
  // live through the loop) overlaps their latency.
  w_.comment("---- prologue");
  if (!hoisted.empty()) {
    w_.comment("loads of loop-invariant tiles (fmap φ): once, before the loop");
    for (int i : hoisted) emit_load(i, 0, 0);
    commit();
  }
  const int levels = plan_.num_levels(Phase::Prologue);
  if (grouped()) {
    // Each group prefetches its first S iterations (S − 1 with early refill: the loop issues
    // the S-th before its first compute); then the whole block waits for the loop-invariant
    // tiles, runs the prologue levels and meets once before the groups part.
    const int ahead = early_refill() ? S - 1 : S;
    set_group_scope(true);
    w_.comment("pipeline prologue of this loop group: its iterations 0.." +
               std::to_string(ahead - 1));
    for (int s = 0; s < ahead; ++s) {
      if (!piped.empty()) {
        w_.open(ir::if_then(ir::int_lit(s) < ir::var("n_it")));
        for (int i : piped)
          emit_load(i, s, ir::binary("+", ir::var("grp"), ir::int_lit(s * plan_.groups)));
        w_.close();
      }
      commit();
    }
    set_group_scope(false);
    emit_zero_accumulators();
    if (!hoisted.empty()) wait(ahead, "the invariant tiles have landed");
    for (int l = 1; l < levels; ++l) {
      barrier();
      emit_level(Phase::Prologue, l);
    }
    w_.comment("zeroed accumulators and invariant tiles are visible to every group");
    barrier();
    if (a_frags) {
      set_group_scope(true);
      emit_load_a_fragments();
      set_group_scope(false);
    }
    return;
  }
  if (S >= 2 && !piped.empty()) {
    w_.comment("pipeline prologue: prefetch iterations 0.." + std::to_string(S - 2));
    for (int s = 0; s + 1 < S; ++s) {
      for (int i : piped) emit_load(i, s, s);
      commit();
    }
  }
  emit_zero_accumulators();
  const int pending = S >= 2 && !piped.empty() ? S - 1 : 0;
  if (!hoisted.empty() && (levels > 1 || a_frags)) wait(pending, "the invariant tiles have landed");
  if (!hoisted.empty() && levels > 1) {
    for (int l = 1; l < levels; ++l) {
      barrier();
      emit_level(Phase::Prologue, l);
    }
  }
  if (a_frags) {
    barrier();
    emit_load_a_fragments();
  }
}

void BlockEmitter::emit_loop() {
  const int S = plan_.pipeline_stages, F = g_.forloop();
  std::vector<int> piped;
  for (int i = 0; i < static_cast<int>(g_.ops().size()); ++i)
    if (g_.op(i).kind == OpKind::Input && plan_.ops[i].phase == Phase::Loop) piped.push_back(i);
  w_.comment("---- for-loop: " + std::to_string(F) + " iteration(s), " + std::to_string(S) +
             "-stage pipeline");
  const ir::Expr it = ir::var("it");
  w_.open(ir::for_loop("it", 0, it < F, {}, "unroll 1"));
  in_loop_ = true;
  if (S >= 2 && !piped.empty()) {
    w_.call("strata_rt::cp_async_wait<" + std::to_string(S - 2) + ">", {},
            "iteration it has landed");
    barrier();
    w_.add(ir::decl("const int", "stage", it % S));
    w_.open(ir::if_then(it + (S - 1) < F));
    w_.add(ir::decl_many("const int", {"next", "next_stage"}, {it + (S - 1), ir::var("next") % S}));
    for (int i : piped) emit_load(i, ir::var("next_stage"), ir::var("next"));
    w_.close();
    w_.call("strata_rt::cp_async_commit");
  } else {
    for (int i : piped) emit_load(i, 0, it);
    w_.call("strata_rt::cp_async_commit");
    w_.call("strata_rt::cp_async_wait<0>");
    barrier();
  }
  for (int l = 1; l < plan_.num_levels(Phase::Loop); ++l) {
    if (l > 1) barrier();
    emit_level(Phase::Loop, l);
  }
  if (S < 2 && F > 1 && !piped.empty()) {
    w_.comment("the next iteration's loads overwrite this iteration's tiles");
    barrier();
  }
  in_loop_ = false;
  w_.close();
  w_.call("strata_rt::cp_async_wait<0>");
}

void BlockEmitter::emit_group_loop() {
  const int S = plan_.pipeline_stages, F = g_.forloop(), G = plan_.groups;
  std::vector<int> piped;
  for (int i = 0; i < static_cast<int>(g_.ops().size()); ++i)
    if (g_.op(i).kind == OpKind::Input && plan_.ops[i].phase == Phase::Loop) piped.push_back(i);
  w_.comment("---- for-loop: " + std::to_string(F) + " iteration(s) over " + std::to_string(G) +
             " loop groups, " + std::to_string(S) + "-stage pipeline per group");
  set_group_scope(true);
  in_loop_ = true;
  const ir::Expr gj = ir::var("gj"), it = ir::var("it");
  w_.open(ir::for_loop("gj", 0, gj < ir::var("n_it"), {}, "unroll 1"));
  w_.add(ir::decl("const int", "it", ir::var("grp") + gj * G));
  w_.add(ir::eval(ir::c_cast("void", it)));
  w_.add(ir::decl("const int", "stage", gj % S));
  w_.add(ir::eval(ir::c_cast("void", ir::var("stage"))));
  // Late refill: the stage of gj is refilled with gj + S after the group has computed on it,
  // behind a second barrier. Early refill: the barrier that makes gj visible also proves the
  // group is done with the stage of gj − 1, which is refilled with gj + S − 1 before computing.
  const bool early = early_refill();
  const int ahead = early ? S - 1 : S;
  auto refill = [&] {
    if (!piped.empty()) {
      w_.open(ir::if_then(gj + ahead < ir::var("n_it")));
      if (early)
        w_.add(
            ir::decl_many("const int", {"next", "next_stage"}, {it + ahead * G, (gj + ahead) % S}));
      else
        w_.add(ir::decl("const int", "next", it + ahead * G));
      for (int i : piped) emit_load(i, ir::var(early ? "next_stage" : "stage"), ir::var("next"));
      w_.close();
    }
    w_.call("strata_rt::cp_async_commit");
  };
  w_.call("strata_rt::cp_async_wait<" + std::to_string(ahead - 1) + ">", {},
          "this group's iteration gj has landed");
  loop_barrier();
  if (early) refill();
  for (int l = 1; l < plan_.num_levels(Phase::Loop); ++l) {
    if (l > 1) loop_barrier();
    emit_level(Phase::Loop, l);
  }
  if (!early) {
    w_.comment("every thread of the group is done with this stage: refill it");
    loop_barrier();
    refill();
  }
  w_.close();
  in_loop_ = false;
  set_group_scope(false);
  w_.call("strata_rt::cp_async_wait<0>");
}

void BlockEmitter::emit_post() {
  w_.comment("---- after the loop");
  barrier();
  const FinalizePlan& fin = plan_.emission.finalize;
  if (fin.work) emit_finalize();
  for (int l = 1; l < plan_.num_levels(Phase::Post); ++l) {
    if (l > 1 || fin.barrier_before_level_one) barrier();
    emit_level(Phase::Post, l);
  }
}

void BlockEmitter::emit_level(Phase phase, int level) {
  const auto& ops = plan_.levels[static_cast<int>(phase)][level];
  for (int i : ops) emit_op(i);
}

void BlockEmitter::emit_load(int i, const ir::Expr& stage, const ir::Expr& iter) {
  const BlockOp& op = g_.op(i);
  const int t = op.output, ii = op.attrs.input_index;
  const Shape& D = g_.input_shape(ii);
  const int r = g_.tensor(t).shape.rank();
  // The input may be a kernel-level view (InputView): the tile is copied in the orientation of
  // the device tensor holding it (stored_shape), from that tensor's rows.
  const InputView* view =
      plan_.input_views.empty() || !plan_.input_views[ii] ? nullptr : &*plan_.input_views[ii];
  const Shape& S = view ? view->storage : D;
  const Shape tile = stored_shape(plan_, t);
  const bool swapped = plan_.tensors[t].stored_transposed;
  auto stored_dim = [&](int d) { return swapped && d >= r - 2 ? 2 * r - 3 - d : d; };
  const std::vector<int64_t> gs = S.strides();
  std::vector<ir::Expr> origin;
  int64_t view_offset = 0;
  for (int d = 0; d < r; ++d) {
    const int sd = stored_dim(d);
    for (int a = 0; a < 3; ++a)
      if (op.attrs.imap[a] == d)  // parts of ⌈D / grid⌉ (the last one shorter when ragged)
        origin.push_back(ir::var(axis_var(a)) *
                         (((D[d] + g_.grid()[a] - 1) / g_.grid()[a]) * gs[sd]));
    if (op.attrs.fmap == d) origin.push_back(iter * (tile[sd] * gs[sd]));
    if (view && !view->map.origin.empty()) view_offset += view->map.origin[d] * gs[d];
  }
  if (view_offset != 0) origin.push_back(view_offset);
  Access dst = access_stage(t, stage);
  dst.map = IndexMap{};  // the copy writes the stored layout
  const int esize = dtype_size(info_.input_dtypes[ii]);
  const int64_t last = r == 0 ? 1 : tile[r - 1];
  const int64_t view_col = view && !view->map.origin.empty() ? view->map.origin[r - 1] : 0;
  int bytes = esize;
  for (int b : {16, 8, 4}) {
    if (b < esize) break;
    bool ok = (last * esize) % b == 0 && (r == 0 || (S[r - 1] * esize) % b == 0) &&
              (view_col * esize) % b == 0;
    if (r >= 2) ok = ok && (dst.strides[r - 2] * esize) % b == 0;
    const TensorPlan& tp = plan_.tensors[t];
    if (tp.home == TensorHome::View) {
      const TensorPlan& hp = plan_.tensors[tp.view_of];
      std::vector<int64_t> st = tile_strides(g_.tensor(tp.view_of).shape, hp.layout);
      ok = ok && (tp.view_offset * st[tp.view_dim] * esize) % b == 0;
    }
    if (ok) {
      bytes = b;
      break;
    }
  }
  const int64_t vec = bytes / esize;
  Shape chunks = tile;
  if (r > 0) chunks[r - 1] = last / vec;
  w_.open("");
  const std::string it_text = ir::print_expr(iter);
  w_.comment(
      "load " + g_.tensor_name(t) + " " + g_.tensor(t).shape.str() + " <- input " +
      std::to_string(ii) + " " + D.str() +
      (view ? std::string(" (a view of ") + S.str() + (swapped ? ", stored transposed" : "") + ")"
            : std::string()) +
      (iter.is(0) ? ""
                  : ", iteration " +
                        (iter->kind == ir::ExprKind::Binary ? "(" + it_text + ")" : it_text)) +
      ", " + std::to_string(bytes) + "-byte copies");
  w_.add(ir::decl("const " + cuda_type(info_.input_dtypes[ii]) + "*", "src",
                  pointer_plus(ir::var("gin" + std::to_string(ii)), origin)));
  const ChunkWalk walk = open_chunk_loop(chunks);
  std::vector<ir::Expr> idx = walk.idx;
  if (r > 0) idx[r - 1] = idx[r - 1] * vec;
  // The global address as the thread's base pointer plus a part in k alone (a constant once
  // the loop is unrolled), when the walk splits that way and the plan allows it
  // (EmissionPlan::pointer_steps); otherwise the offset stays one integer sum.
  const bool pointer_steps = !walk.uses_c && plan_.emission.pointer_steps;
  std::vector<ir::Expr> goff, gstep;
  for (int d = 0; d < r; ++d) {
    if (!pointer_steps) {
      goff.push_back(idx[d] * gs[d]);
    } else {
      goff.push_back((d == r - 1 ? walk.thread[d] * vec : walk.thread[d]) * gs[d]);
      gstep.push_back(walk.step[d] * gs[d]);
    }
  }
  ir::Expr src_ptr = ir::binary("+", ir::var("src"), ir::sum(goff));
  if (!gstep.empty() && !ir::sum(gstep).is(0)) src_ptr = ir::binary("+", src_ptr, ir::sum(gstep));
  const ir::Expr dst_ptr = ir::addr(dst.ref(idx, walk.swizzle_row));
  // Ragged tiles: the bytes of this copy that hold present elements are read, the rest
  // zero-filled (nothing is read when none is present; the source then points at the tile's
  // first element, which is always present).
  ir::Expr absent, last_present;
  for (int sd = 0; sd < r; ++sd) {
    const int e = plan_.ragged.dim(t, stored_dim(sd));
    if (e < 0) continue;
    const ir::Expr present = ragged_present(e, iter);
    if (sd == r - 1)
      last_present = present;
    else
      absent = absent ? ir::lor(absent, idx[sd] >= present) : idx[sd] >= present;
  }
  if (absent || last_present) {
    ir::Expr nb = last_present ? ir::call("strata_rt::present_bytes<" + std::to_string(bytes) +
                                              ", " + std::to_string(esize) + ">",
                                          {last_present - idx[r - 1]})
                               : ir::int_lit(bytes);
    if (absent) nb = ir::select(absent, 0, nb);
    w_.add(ir::decl("const int", "nb", nb));
    const ir::Expr nbv = ir::var("nb");
    w_.call(std::string(bytes >= 4 ? "strata_rt::cp_async_zfill<" : "strata_rt::copy_sync_zfill<") +
                std::to_string(bytes) + ">",
            {dst_ptr, ir::select(nbv > 0, src_ptr, ir::var("src")), nbv});
  } else {
    w_.call(std::string(bytes >= 4 ? "strata_rt::cp_async<" : "strata_rt::copy_sync<") +
                std::to_string(bytes) + ">",
            {dst_ptr, src_ptr});
  }
  w_.close();
  w_.close();
}

ChunkWalk BlockEmitter::chunk_walk(const Shape& chunks) const {
  ChunkWalk w;
  const int r = chunks.rank();
  const int64_t n = chunks.numel(), T = threads();
  const int64_t Q = r == 0 ? 1 : chunks[r - 1];
  const int64_t R = r >= 2 ? chunks[r - 2] : 1, outer = n / Q;
  const int64_t RS = T % Q == 0 ? T / Q : 0;  // chunk rows per step of k
  const ir::Expr c = ir::var("c");
  // Whole rows per step; with batch dims, steps that never straddle two batches.
  if (!plan_.emission.split_chunk_walks || r < 2 || RS == 0 || (outer > R && R % RS != 0)) {
    w.idx = unflatten(c, chunks);
    if (n % T != 0) w.past_end = c >= n;
    return w;
  }
  w.uses_c = false;
  const ir::Expr trow = tid() / Q;
  const ir::Expr step = ir::var("k") * RS;
  std::vector<int64_t> od = chunks.dims();
  od.pop_back();
  w.step = unflatten(step, Shape::make(od).value());
  w.step.push_back(ir::int_lit(0));
  w.thread.assign(r, ir::int_lit(0));
  w.thread[r - 2] = trow;
  w.thread[r - 1] = Q == 1 ? ir::int_lit(0) : tid() % Q;
  for (int d = 0; d < r; ++d) w.idx.push_back(w.step[d] + w.thread[d]);
  // The swizzle reads the row's low 3 bits: the thread's row plus the step's row mod 8, which
  // is 0 when steps are whole multiples of 8 rows.
  const ir::Expr step_row = outer > R ? step % R : step;
  w.swizzle_row = RS % 8 == 0 ? trow : trow + step_row % 8;
  if (outer % RS != 0) w.past_end = w.idx[r - 2] >= R;
  return w;
}

ChunkWalk BlockEmitter::begin_chunk_step(const Shape& chunks) {
  ChunkWalk walk = chunk_walk(chunks);
  if (walk.uses_c) w_.add(ir::decl("const int", "c", tid() + ir::var("k") * threads()));
  if (walk.past_end) w_.add(ir::if_compact(walk.past_end, ir::brk()));
  return walk;
}

ChunkWalk BlockEmitter::open_chunk_loop(const Shape& chunks) {
  const int64_t n = chunks.numel();
  const int64_t trips = (n + threads() - 1) / threads();
  if (trips <= plan_.emission.max_unrolled_chunks) {
    w_.open(ir::for_loop("k", 0, ir::var("k") < trips, {}, "unroll"));
    return begin_chunk_step(chunks);
  }
  const ir::Expr c = ir::var("c");
  w_.open(ir::for_loop("c", tid(), c < n, threads()));
  ChunkWalk walk;
  walk.idx = unflatten(c, chunks);
  return walk;
}

void BlockEmitter::emit_save(int i) {
  int oi = 0;
  while (g_.output_op(oi) != i) ++oi;
  // A routed output (KernelPlan::output_parts) is saved by the same code once per part, each
  // under its block-uniform condition; a plain one has a single target.
  for (const SaveTarget& target : save_targets(plan_, oi)) emit_save_to(i, oi, target);
}

void BlockEmitter::emit_save_to(int i, int oi, const SaveTarget& target) {
  const BlockOp& op = g_.op(i);
  const int t = op.inputs[0];
  const Shape& tile = g_.tensor(t).shape;
  const Shape& full = target.shape;
  const int r = tile.rank();
  const std::vector<int64_t>& gs = target.strides;
  const DType out_t = info_.output_dtypes[oi];
  const int esize = dtype_size(out_t);
  const int64_t last = r == 0 ? 1 : tile[r - 1];
  int64_t vec = 16 / esize;
  if (r == 0 || last % vec != 0 || full[r - 1] % vec != 0) vec = 1;
  Shape chunks = tile;
  if (r > 0) chunks[r - 1] = last / vec;
  if (target.when)
    w_.open(ir::if_then(target.when));
  else
    w_.open("");
  w_.comment("save " + g_.tensor_name(t) + " " + tile.str() + " -> output " + std::to_string(oi) +
             (target.when ? " (" + target.pointer + ")" : "") + " " + full.str() +
             (vec > 1 ? ", 16-byte stores" : ""));
  w_.add(ir::decl(cuda_type(out_t) + "*", "dst", pointer_plus(ir::var(target.pointer), target.origin)));
  std::vector<ir::Expr> idx = open_chunk_loop(chunks).idx;
  if (r > 0) idx[r - 1] = idx[r - 1] * vec;
  // Ragged tiles: only present elements are written (a vector is wholly present or absent:
  // the tile and the true extent are both multiples of its width).
  if (const ir::Expr absent = ragged_absent(t, idx, ~0u, 0))
    w_.add(ir::if_compact(absent, ir::cont()));
  std::vector<ir::Expr> goff;
  for (int d = 0; d < r; ++d) goff.push_back(idx[d] * gs[d]);
  const ir::Expr dst = ir::var("dst");
  if (vec > 1) {
    w_.add(ir::decl_array("float", "v", {vec}));
    std::vector<std::string> jdx = texts(idx);
    jdx[r - 1] = paren(jdx[r - 1]) + " + j";
    prefetch_vector_operands(t, tile, texts(idx), vec);
    const ir::Expr j = ir::var("j");
    w_.open(ir::for_loop("j", 0, j < vec, {}, "unroll"));
    const std::string value = operand_value(t, tile, jdx);
    w_.add(ir::assign(ir::index(ir::var("v"), j), ir::verbatim(value)));
    w_.close();
    end_vector_operands();
    w_.call("strata_rt::store_global_vec<" + cuda_type(out_t) + ", " + std::to_string(vec) + ">",
            {ir::binary("+", dst, ir::sum(goff)), ir::var("v")});
  } else {
    const std::string value = operand_value(t, tile, texts(idx));
    w_.add(ir::assign(
        ir::index(dst, ir::sum(goff)),
        ir::call("strata_rt::from_f32<" + cuda_type(out_t) + ">", {ir::verbatim(value)})));
  }
  w_.close();
  w_.close();
}

}  // namespace strata::codegen
