// Register-resident work of the loop body: accumulators kept per thread in registers
// (thread-owned chunks of their input tile), matmul chains (FlashAttention style: the first
// product, its epilogue and its row sums never leave registers), and the row / column scales
// of rms_norms folded into matmuls.
#include "block_emitter.h"
#include "reduction_code.h"
#include "strata/opt/register_fusion.h"
#include "strata/opt/schedule.h"

namespace strata::codegen {
int64_t BlockEmitter::accum_vec(int i) const {
  const BlockOp& op = g_.op(i);
  const Shape& xs = g_.tensor(op.inputs[0]).shape;
  const int64_t last = xs.rank() == 0 ? 1 : xs[xs.rank() - 1];
  const int64_t group = op_reduction(op.kind) ? reduction_shape(op, xs).group() : last;
  for (int64_t v : {8, 4, 2})
    if (last % v == 0 && group % v == 0) return v;
  return 1;
}

int64_t BlockEmitter::accum_trips(int i) const {
  const Shape& xs = g_.tensor(g_.op(i).inputs[0]).shape;
  const int64_t chunks = xs.numel() / accum_vec(i);
  const int gt = grouped() ? plan_.group_threads : plan_.threads;
  return (chunks + gt - 1) / gt;
}

bool BlockEmitter::vector_readable(int t, int64_t vec) const {
  const TensorPlan& tp = plan_.tensors[t];
  if (tp.home == TensorHome::Alias) {
    // Read in place: consecutive along the last dim unless transposed, and aligned as the
    // storage is when the column offset is a multiple of one access.
    const Access a = access_stage(t, 0);
    if (a.map.transposed || vec <= 1) return false;
    const int64_t bytes = std::min<int64_t>(16, vec * dtype_size(tp.dtype));
    if (!a.map.origin.empty() && (a.map.origin.back() * dtype_size(tp.dtype)) % bytes != 0)
      return false;
    return vector_readable(alias_root(plan_, t), vec);
  }
  if (tp.stored_transposed) return false;  // the logical rows are the stored columns
  // A register accumulator is read after the loop from its shared-memory copy.
  const bool dumped = tp.home == TensorHome::Registers && !in_loop_;
  if (tp.home != TensorHome::Shared && tp.home != TensorHome::View && !dumped) return false;
  if (vec <= 1) return false;
  const int esize = dtype_size(tp.dtype);
  const int64_t bytes = std::min<int64_t>(16, vec * esize);
  const Access a = access_stage(t, 0);
  if (a.swizzle && vec * esize > 16) return false;  // the swizzle permutes 16-byte chunks
  // Every row start (and the view's offset inside its host) must be aligned to one access.
  for (size_t d = 0; d + 1 < a.strides.size(); ++d)
    if ((a.strides[d] * esize) % bytes != 0) return false;
  if (tp.home == TensorHome::View) {
    const TensorPlan& hp = plan_.tensors[tp.view_of];
    const Access h = access_stage(tp.view_of, 0);
    if ((tp.view_offset * h.strides[tp.view_dim] * esize) % bytes != 0) return false;
    if (hp.layout.swizzle && vec * esize > 16) return false;
  }
  return vec * esize == 2 || vec * esize == 4 || vec * esize == 8 || (vec * esize) % 16 == 0;
}

void BlockEmitter::emit_register_accum(int i) {
  const BlockOp& op = g_.op(i);
  const int x = op.inputs[0], t = op.output;
  const Shape& xs = g_.tensor(x).shape;
  const int64_t vec = accum_vec(i), trips = accum_trips(i);
  const int r = xs.rank();
  const std::string racc = "racc" + std::to_string(t);
  const bool elementwise = !op_reduction(op.kind);  // accum, accum_rescale
  const bool rescale = rescales(op.kind);
  const ReductionCode red(op.kind, op.attrs);
  w_.open("");
  w_.comment("#" + std::to_string(i) + " " + g_.tensor_name(t) + " " + g_.tensor(t).shape.str() +
             " = " + std::string(op_name(op.kind)) + "(" + g_.tensor_name(x) + "): " +
             (elementwise ? "thread-owned chunks of "
                          : std::string("per-chunk partial ") + (red.is_max() ? "maxima" : "sums") +
                                " over ") +
             std::to_string(vec) + " element(s), kept in registers");
  const ir::Expr k = ir::var("k"), j = ir::var("j"), v = ir::var("v");
  w_.open(ir::for_loop("k", 0, k < trips, {}, "unroll"));
  Shape cs = xs;
  if (r > 0) cs[r - 1] = xs[r - 1] / vec;
  const ChunkWalk walk = begin_chunk_step(cs);
  std::vector<ir::Expr> idx = walk.idx;
  if (r > 0) idx[r - 1] = idx[r - 1] * vec;
  w_.add(ir::decl_array("float", "v", {vec}));
  if (vector_readable(x, vec)) {
    w_.call("strata_rt::load_f32<" + std::to_string(vec) + ">",
            {ir::addr(access(x).ref(idx, walk.swizzle_row)), v});
  } else {
    std::vector<std::string> jdx = texts(idx);
    if (r > 0) jdx[r - 1] = paren(jdx[r - 1]) + " + j";
    prefetch_vector_operands(x, xs, texts(idx), vec);
    w_.open(ir::for_loop("j", 0, j < vec, {}, "unroll"));
    const std::string value = operand_value(x, xs, jdx);
    w_.add(ir::assign(ir::index(v, j), ir::verbatim(value)));
    w_.close();
    end_vector_operands();
  }
  const ir::Expr acc_k = ir::index(ir::var(racc), k);
  const ir::Expr v_j = ir::index(v, j);
  if (rescale) {
    // The chunk's sums so far re-expressed in this iteration's shift (one per chunk: a chunk
    // lies in one row, and the reduced accumulator reads the shift at the row's first column).
    std::vector<std::string> row = texts(idx);
    if (r > 0 && !elementwise) row[r - 1] = "0";
    const ir::Expr rprev = ir::index(ir::var("rprev" + std::to_string(t)), k);
    const ir::Expr m = ir::var("m"), f = ir::var("f");
    w_.add(ir::decl("const float", "m", ir::verbatim(operand_value(op.inputs[1], xs, row))));
    w_.add(ir::decl("const float", "f", ir::call("strata_rt::rescale_factor", {rprev, m})));
    w_.add(ir::assign(rprev, m));
    if (elementwise) {
      const ir::Expr acc_kj = ir::index(acc_k, j);
      w_.add(ir::for_compact("j", 0, j < vec, ir::assign(acc_kj, acc_kj * f + v_j), "unroll"));
    } else {
      w_.add(ir::decl("float", "s", ir::float_lit(0.0)));
      w_.add(ir::for_compact("j", 0, j < vec, ir::assign(ir::var("s"), v_j, "+="), "unroll"));
      w_.add(ir::assign(acc_k, acc_k * f + ir::var("s")));
    }
  } else if (elementwise) {
    w_.add(ir::for_compact("j", 0, j < vec, ir::assign(ir::index(acc_k, j), v_j, "+="), "unroll"));
  } else {
    w_.add(ir::for_compact("j", 0, j < vec,
                           ir::verbatim_stmt(red.update(ir::print_expr(acc_k), red.premap("v[j]"))),
                           "unroll"));
  }
  w_.close();
  w_.close();
}

void BlockEmitter::emit_matmul_scales(int i, bool pair) {
  const OpPlan& p = plan_.ops[i];
  const Shape& out = g_.tensor(g_.op(i).output).shape;
  std::vector<ir::Expr> idx = unflatten(ir::var("b"), batch_shape(out));
  idx.push_back(ir::var("r"));
  idx.push_back(ir::var("c"));
  std::vector<ir::Expr> idx1 = idx;
  idx1.back() = ir::var("c") + 1;
  for (int k = 0; k < 2; ++k) {
    const int norm = k == 0 ? p.scale_a : p.scale_b;
    if (norm < 0) continue;
    const int t = g_.op(norm).output;
    Shape vs = g_.tensor(t).shape;
    vs[g_.op(norm).attrs.dim] = 1;
    const Access a = access(t);
    // A norm read through a transpose (fold_norms_into_matmuls) has its vector transposed.
    const bool through = g_.op(i).inputs[k] != t;
    auto at = [&](std::vector<ir::Expr> v) {
      if (through) std::swap(v[v.size() - 1], v[v.size() - 2]);
      return broadcast_index(vs, v);
    };
    w_.add(ir::assign(ir::var("v0"), a.ref(at(idx)), "*=", "folded " + g_.tensor_name(t)));
    if (pair) w_.add(ir::assign(ir::var("v1"), a.ref(at(idx1)), "*="));
  }
}

void BlockEmitter::emit_matmul_chain(int i) {
  const BlockOp& op = g_.op(i);
  const OpPlan& p = plan_.ops[i];
  const int m2 = p.chain_into;
  const OpPlan& p2 = plan_.ops[m2];
  const MmaTiling& tl = p.tiling;
  const std::string T = cuda_type(plan_.mma_dtype);
  const std::string mt = std::to_string(tl.mt), nt1 = std::to_string(tl.nt),
                    nt2 = std::to_string(p2.tiling.nt);
  const std::string spec1 = "mma" + std::to_string(i), spec2 = "mma" + std::to_string(m2);
  const int e = p.epilogue >= 0 ? g_.op(p.epilogue).output : op.output;
  const int acc2 = g_.op(p2.accumulate_into).output;
  const Shape& out = g_.tensor(op.output).shape;
  w_.open("");
  w_.comment("#" + std::to_string(i) + " " + g_.tensor_name(op.output) + " = matmul(" +
             g_.tensor_name(op.inputs[0]) + ", " + g_.tensor_name(op.inputs[1]) + ")" +
             (p.epilogue >= 0
                  ? ", " + g_.tensor_name(e) + " = its epilogue op #" + std::to_string(p.epilogue)
                  : "") +
             ", then #" + std::to_string(m2) + " " + g_.tensor_name(g_.op(m2).output) +
             " = matmul(" + g_.tensor_name(e) + ", " + g_.tensor_name(g_.op(m2).inputs[1]) +
             ") from registers (" + std::to_string(tl.warps_m) + " warps of " + mt +
             " row tiles, FlashAttention style" +
             (p.wgmma || p2.wgmma ? std::string(", warpgroup MMA for ") +
                                        (p.wgmma && p2.wgmma ? "both products"
                                         : p.wgmma           ? "the first product"
                                                             : "the second product")
                                  : "") +
             ")");
  const ir::Expr warp = ir::var("warp"), sacc = ir::var("sacc"), tm = ir::var("tm");
  w_.add(ir::decl("const int", "warp", ir::binary(">>", tid(), ir::int_lit(5))));
  w_.open(ir::if_then(warp < tl.warps_m));
  w_.add(ir::decl("const int", "tm", warp * tl.mt));
  w_.add(ir::decl_array("float", "sacc", {tl.mt, tl.nt, 4}));
  w_.call("strata_rt::mma_zero", {sacc});
  const ir::Expr B1 = access(matmul_operand(plan_, i, 1)).pointer();
  // Warpgroup MMA (plan_wgmma) takes the same fragments with one row tile per warp.
  const std::string tiles1 = p.wgmma ? nt1 : mt + ", " + nt1;
  const std::string tiles2 = p2.wgmma ? nt2 : mt + ", " + nt2;
  if (p.a_in_registers)
    w_.call(std::string(p.wgmma ? "strata_rt::warpgroup_mma_rega<" : "strata_rt::warp_mma_rega<") +
                spec1 + ", " + T + ", " + tiles1 + ">",
            {ir::var("afrag" + std::to_string(i)), B1, sacc, tm, 0});
  else
    w_.call(std::string(p.wgmma ? "strata_rt::warpgroup_mma<" : "strata_rt::warp_mma<") + spec1 +
                ", " + T + ", " + tiles1 + ">",
            {access(matmul_operand(plan_, i, 0)).pointer(), B1, sacc, tm, 0});
  const bool scaled = p.scale_a >= 0 || p.scale_b >= 0;
  if (scaled || p.epilogue >= 0) {
    w_.line("strata_rt::mma_transform<" + spec1 + ", " + mt + ", " + nt1 +
            ">(sacc, tm, 0, [&](int b, int r, int c, float& v0, float& v1) {");
    w_.open("");
    w_.add(ir::eval(ir::c_cast("void", ir::var("b"))));
    emit_matmul_scales(i, true);
    if (p.epilogue >= 0) {
      const BlockOp& ep = g_.op(p.epilogue);
      std::vector<std::string> idx = texts(unflatten(ir::var("b"), batch_shape(out)));
      idx.push_back("r");
      idx.push_back("c");
      std::vector<std::string> idx1 = idx;
      idx1.back() = "c + 1";
      const std::vector<std::string>* at[2] = {&idx, &idx1};
      for (int v = 0; v < 2; ++v) {
        std::vector<std::string> ins;
        for (int x : ep.inputs)
          ins.push_back(x == op.output ? "v" + std::to_string(v) : operand_value(x, out, *at[v]));
        std::string res = eval_elementwise(p.epilogue, ins, "e" + std::to_string(v) + "_");
        w_.add(ir::decl("const float", "w" + std::to_string(v), ir::verbatim(res)));
      }
      w_.add(ir::assign(ir::var("v0"), ir::var("w0")));
      w_.add(ir::assign(ir::var("v1"), ir::var("w1")));
    }
    w_.close("");
    w_.line("});");
  }
  // A key loop no tile divides (ragged_chain_supported): the columns absent in this
  // iteration leave the chain — −∞ before the online softmax's max (its exp is then 0), else 0
  // (row sums and the second product skip them; its operand's rows there are zero-filled).
  if (const int keys = plan_.ragged.dim(op.output, out.rank() - 1); keys >= 0) {
    const std::string present = texts({ragged_present(keys, ragged_iteration())})[0];
    const std::string mask = p.chain_ops.empty() ? "0.0f" : "strata_rt::neg_inf()";
    w_.line("strata_rt::mma_transform<" + spec1 + ", " + mt + ", " + nt1 +
            ">(sacc, tm, 0, [&](int b, int r, int c, float& v0, float& v1) {");
    w_.open("");
    w_.add(ir::eval(ir::c_cast("void", ir::var("b"))));
    w_.add(ir::eval(ir::c_cast("void", ir::var("r"))));
    w_.line("if (c >= " + present + ") v0 = " + mask + ";  // absent keys");
    w_.line("if (c + 1 >= " + present + ") v1 = " + mask + ";");
    w_.close("");
    w_.line("});");
  }
  if (!p.chain_ops.empty()) emit_online_softmax_step(i);
  for (int a = 0; a < static_cast<int>(g_.ops().size()); ++a) {
    if (plan_.ops[a].rowsum_of != i) continue;
    const ReductionCode red(g_.op(a).kind, g_.op(a).attrs);
    w_.call(std::string("strata_rt::mma_row_") + (red.is_max() ? "max" : "sums") + "<" +
                red.squares_arg() + ", " + mt + ", " + nt1 + ">",
            {sacc, ir::var("racc" + std::to_string(g_.op(a).output))},
            g_.tensor_name(g_.op(a).output) +
                (red.finalizes() ? " (" + std::string(op_name(g_.op(a).kind)) + ")" : ""));
  }
  w_.call(
      std::string(p2.wgmma ? "strata_rt::warpgroup_mma_chained<" : "strata_rt::warp_mma_chained<") +
          spec2 + ", " + T + ", " + tiles2 + ">",
      {sacc, access(g_.op(m2).inputs[1]).pointer(), ir::var("racc" + std::to_string(acc2)), tm, 0});
  w_.close();
  w_.close();
}

void BlockEmitter::emit_online_softmax_step(int i) {
  const BlockOp& op = g_.op(i);
  const OpPlan& p = plan_.ops[i];
  const MmaTiling& tl = p.tiling;
  const std::string mt = std::to_string(tl.mt), nt1 = std::to_string(tl.nt);
  const int x = p.epilogue >= 0 ? g_.op(p.epilogue).output : op.output;
  int scan = -1;
  for (int a = 0; a < static_cast<int>(g_.ops().size()); ++a)
    if (plan_.ops[a].scan_of == i) scan = a;
  const int m = g_.op(scan).output;
  const std::string rmax = "rmax" + std::to_string(m);
  // The running max of each row: this lane's columns, then its quad (the four lanes holding a
  // row of the mma layout); the sums kept so far are re-expressed in the new max.
  w_.comment("the online softmax: " + g_.tensor_name(m) + " = running_max(" + g_.tensor_name(x) +
             ") per row of this warp; the partial sums rescaled by e^(old max - new max)");
  w_.open("");
  const ir::Expr xv = ir::var("x"), mnew = ir::var("mnew"), factor = ir::var("factor");
  auto pair_at = [&](const ir::Expr& a) { return ir::index(ir::index(a, xv / 2), xv % 2); };
  w_.add(ir::decl_array("float", "mnew", {tl.mt, 2}));
  w_.add(
      ir::for_compact("x", 0, xv < 2 * tl.mt, ir::assign(pair_at(mnew), pair_at(ir::var(rmax)))));
  w_.call("strata_rt::mma_row_max<false, " + mt + ", " + nt1 + ">", {ir::var("sacc"), mnew});
  w_.call("strata_rt::mma_quad_reduce<true, " + mt + ">", {mnew});
  w_.add(ir::decl_array("float", "factor", {tl.mt, 2}));
  w_.open(ir::for_loop("x", 0, xv < 2 * tl.mt));
  w_.add(ir::assign(pair_at(factor), ir::call("strata_rt::rescale_factor",
                                              {pair_at(ir::var(rmax)), pair_at(mnew)})));
  w_.add(ir::assign(pair_at(ir::var(rmax)), pair_at(mnew)));
  w_.close();
  const int acc2 = plan_.ops[p.chain_into].accumulate_into;
  if (rescales(g_.op(acc2).kind))
    w_.call("strata_rt::mma_scale_rows",
            {ir::var("racc" + std::to_string(g_.op(acc2).output)), factor},
            g_.tensor_name(g_.op(acc2).output));
  for (int a = 0; a < static_cast<int>(g_.ops().size()); ++a)
    if (plan_.ops[a].rowsum_of == i && rescales(g_.op(a).kind)) {
      ir::Stmt scale = ir::assign(pair_at(ir::var("racc" + std::to_string(g_.op(a).output))),
                                  pair_at(factor), "*=", g_.tensor_name(g_.op(a).output));
      w_.add(ir::for_compact("x", 0, xv < 2 * tl.mt, scale));
    }
  w_.close();
  // The elementwise ops after the max (exp(x − m)), on the fragments, in place.
  const Shape& out = g_.tensor(op.output).shape;
  w_.line("strata_rt::mma_transform_rows<mma" + std::to_string(i) + ", " + mt + ", " + nt1 +
          ">(sacc, " + rmax +
          ", tm, 0, [&](int b, int r, int c, float& v0, float& v1, float mr) {");
  w_.open("");
  w_.add(ir::eval(ir::c_cast("void", ir::var("b"))));
  std::vector<std::string> idx = texts(unflatten(ir::var("b"), batch_shape(out)));
  idx.push_back("r");
  idx.push_back("c");
  std::vector<std::string> idx1 = idx;
  idx1.back() = "c + 1";
  const std::vector<std::string>* at[2] = {&idx, &idx1};
  for (int v = 0; v < 2; ++v) {
    std::map<int, std::string> vals{{x, "v" + std::to_string(v)}, {m, "mr"}};
    for (int o : p.chain_ops) {
      std::vector<std::string> ins;
      for (int t : g_.op(o).inputs) {
        auto it = vals.find(t);
        ins.push_back(it != vals.end() ? it->second : operand_value(t, out, *at[v]));
      }
      const std::string name = "g" + std::to_string(v) + "_" + std::to_string(o);
      const std::string res = eval_elementwise(o, ins, name + "_");
      w_.add(ir::decl("const float", name, ir::verbatim(res)));
      vals[g_.op(o).output] = name;
    }
  }
  const int e = g_.op(p.chain_ops.back()).output;
  w_.add(ir::assign(ir::var("v0"), ir::var("g0_" + std::to_string(p.chain_ops.back()))));
  w_.add(ir::assign(ir::var("v1"), ir::var("g1_" + std::to_string(p.chain_ops.back()))));
  w_.add(ir::eval(ir::c_cast("void", ir::var("mr")),
                  g_.tensor_name(e) + " in place of " + g_.tensor_name(x)));
  w_.close("");
  w_.line("});");
}

}  // namespace strata::codegen
