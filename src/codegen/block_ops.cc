// The compute ops of a customized kernel: elementwise ops and thread graphs, reductions,
// concat, accumulators and matmuls (tensor-core and SIMT), each as one block-wide step.
#include <algorithm>
#include <functional>

#include "block_emitter.h"
#include "reduction_code.h"
#include "strata/opt/register_fusion.h"
#include "strata/opt/schedule.h"

namespace strata::codegen {
namespace {

/// Opens a loop over `var` in [0, n) distributed over the block's threads; the caller closes it.
void open_thread_loop(CodeWriter& w, const std::string& var, int64_t n, int threads,
                      const std::string& tid) {
  const int64_t trips = (n + threads - 1) / threads;
  const ir::Expr v = ir::var(var), t = ir::var(tid);
  if (trips <= 8) {
    const ir::Expr k = ir::var(var + "_k");
    w.open(ir::for_loop(var + "_k", 0, k < trips, {}, "unroll"));
    w.add(ir::decl("const int", var, t + k * threads));
    if (n % threads != 0) w.add(ir::if_compact(v >= n, ir::brk()));
  } else {
    w.open(ir::for_loop(var, t, v < n, threads));
  }
}

/// `strata_rt::from_f32<T>(v)`: an f32 value stored as type T.
ir::Expr from_f32(const std::string& type, const ir::Expr& v) {
  return ir::call("strata_rt::from_f32<" + type + ">", {v});
}

}  // namespace

void BlockEmitter::emit_op(int i) {
  const BlockOp& op = g_.op(i);
  const OpPlan& p = plan_.ops[i];
  switch (op_category(op.kind)) {
    case Category::Matmul:
      if (p.chain_from >= 0) return;  // computed by the first matmul of its chain
      if (p.chain_into >= 0)
        emit_matmul_chain(i);
      else
        emit_matmul(i);
      return;
    case Category::Unary:
    case Category::Binary:
    case Category::Fused:
      if (p.host < 0 && p.inline_into < 0) emit_elementwise(i);
      return;
    case Category::Reduce:
    case Category::Norm:
      emit_reduction(i);
      return;
    case Category::Concat:
      emit_concat(i);
      return;
    case Category::Accum: {
      const int src = g_.tensor(op.inputs[0]).producer;
      if (plan_.ops[src].accumulate_into == i) return;  // done from the matmul's fragments
      if (p.rowsum_of >= 0) return;                     // done from the chain's row sums
      if (plan_.tensors[op.output].home == TensorHome::View) return;  // F = 1: the input itself
      if (p.register_accum)
        emit_register_accum(i);
      else if (is_reduction(op))
        emit_reduction(i);
      else
        emit_accumulate(i);
      return;
    }
    case Category::Sink:
      emit_save(i);
      return;
    case Category::Layout:
      if (!p.in_place) emit_layout_copy(i);  // else read in place (TensorHome::Alias)
      return;
    case Category::Scan:                     // a running reduction into its state tile
      if (p.scan_of < 0) emit_reduction(i);  // else kept in registers by its matmul chain
      return;
    case Category::Collective:  // kernel level only
    case Category::Source:      // input iterators: loaded by the pipeline
    case Category::Customized:
      return;
  }
}

std::string BlockEmitter::operand_value(int t, const Shape& out,
                                        const std::vector<std::string>& out_idx) {
  const Shape& ts = g_.tensor(t).shape;
  if (auto it = vector_operands_.find(t); it != vector_operands_.end()) return it->second + "[j]";
  std::vector<std::string> idx = broadcast_index(ts, out_idx);
  if (plan_.tensors[t].summed_at_read) return summed_value(t, idx);
  if (plan_.tensors[t].home != TensorHome::Inline) return access(t).load(idx);
  // Evaluate the inlined producer at this element.
  const int p = g_.tensor(t).producer;
  std::vector<std::string> ins;
  for (int x : g_.op(p).inputs) ins.push_back(paren(operand_value(x, ts, idx)));
  std::string prefix = "i" + std::to_string(t) + "_" + std::to_string(inline_counter_++) + "_";
  return eval_elementwise(p, ins, prefix);
}

void BlockEmitter::prefetch_vector_operands(int t, const Shape& out,
                                            const std::vector<std::string>& out_idx, int64_t vec) {
  const Shape& ts = g_.tensor(t).shape;
  const int r = ts.rank();
  // Along the chunk, t's last index is out's plus j only when t is not broadcast there.
  if (r == 0 || ts[r - 1] != out[out.rank() - 1] || ts[r - 1] == 1) return;
  if (vector_operands_.count(t)) return;
  std::vector<std::string> idx = broadcast_index(ts, out_idx);
  if (plan_.tensors[t].home == TensorHome::Inline) {
    for (int x : g_.op(g_.tensor(t).producer).inputs) prefetch_vector_operands(x, ts, idx, vec);
    return;
  }
  if (!vector_readable(t, vec)) return;
  const TensorPlan& tp = plan_.tensors[t];
  // A summed tensor's copies must start on a vector boundary too.
  if (tp.summed_at_read && tp.group_elems % vec != 0) return;
  const std::string name = "pv" + std::to_string(t);
  w_.add(ir::decl_array("float", name, {vec}, {},
                        g_.tensor_name(t) + " along the chunk" +
                            (tp.summed_at_read ? ", the loop groups' partials summed" : "")));
  if (tp.summed_at_read)
    emit_summed_vector(t, idx, vec, name);
  else
    w_.call("strata_rt::load_f32<" + std::to_string(vec) + ">",
            {ir::addr(access(t).ref(exprs(idx))), ir::var(name)});
  vector_operands_[t] = name;
}

std::string BlockEmitter::eval_elementwise(int i, const std::vector<std::string>& inputs,
                                           const std::string& prefix) {
  const BlockOp& op = g_.op(i);
  if (op.kind != OpKind::ThreadFused) return scalar_op_expr(op.kind, inputs, op.attrs);
  std::vector<std::string> vals = inputs;
  for (size_t k = 0; k < op.chain.size(); ++k) {
    const ThreadStep& s = op.chain[k];
    std::vector<std::string> args;
    for (int a = 0; a < op_info(s.kind).arity; ++a) args.push_back(vals[s.args[a]]);
    std::string name = prefix + std::to_string(k);
    w_.add(
        ir::decl("const float", name, ir::verbatim(scalar_op_expr(s.kind, args, step_attrs(s)))));
    vals.push_back(name);
  }
  return vals.back();
}

void BlockEmitter::emit_elementwise(int i) {
  const BlockOp& op = g_.op(i);
  const int t = op.output;
  const Shape& out = g_.tensor(t).shape;
  w_.open("");
  w_.comment("#" + std::to_string(i) + " " + g_.tensor_name(t) + " " + out.str() + " = " +
             std::string(op_name(op.kind)) + " (elementwise, shared memory)");
  open_thread_loop(w_, "e", out.numel(), threads(), tid_);
  const std::vector<ir::Expr> idx = unflatten(ir::var("e"), out);
  std::vector<std::string> vals;
  for (size_t k = 0; k < op.inputs.size(); ++k) {
    std::string name = "a" + std::to_string(k);
    const std::string value = operand_value(op.inputs[k], out, texts(idx));
    w_.add(ir::decl("const float", name, ir::verbatim(value)));
    vals.push_back(name);
  }
  std::string res = eval_elementwise(i, vals, "v");
  w_.add(ir::assign(access(t).ref(idx), from_f32(dtype_of(t), ir::verbatim(res))));
  w_.close();
  w_.close();
}

void BlockEmitter::emit_reduction(int i) {
  const BlockOp& op = g_.op(i);
  const int x = op.inputs[0], t = op.output;
  const Shape& in = g_.tensor(x).shape;
  const ReductionShape rs = reduction_shape(op, in);
  const int64_t group = rs.group(), outs = rs.outputs();
  const bool folded = plan_.ops[i].fold_into >= 0;
  const ReductionCode red(op.kind, op.attrs);
  const bool norm = op_category(op.kind) == Category::Norm;
  // A norm that writes its tile back keeps reduction_team's lanes along the row: with fewer
  // lanes its write-back walks each row with a stride of a few elements across the warp, and
  // the rows of a warp fall on the same banks (a queries' norm of 128 rows × 64 before
  // attention: 16-way conflicts, 4 µs on QK-norm prefill, h200-2026-11-29-rounds).
  int team = norm && !folded ? reduction_team(group, outs, threads())
                             : block_reduction_team(group, outs, threads());
  if (team == 0 && group_scope_) team = 32;  // a loop group never reduces block-wide
  // Accumulators (and running ops) fold this iteration's result into their loop state.
  const bool accumulate =
      op_category(op.kind) == Category::Accum || op_category(op.kind) == Category::Scan;
  // Output index space: the input shape with the reduced dim cut to `to` groups.
  Shape oshape = in;
  if (in.rank() > 0) oshape[rs.dim] = rs.to;
  Access xa = access(x), ya = access(t);
  w_.open("");
  w_.comment("#" + std::to_string(i) + " " + g_.tensor_name(t) + " " + g_.tensor(t).shape.str() +
             " = " + std::string(op_name(op.kind)) + "(" + g_.tensor_name(x) + ") over dim " +
             std::to_string(rs.dim) + (folded ? " (inverse RMS only: folded into a matmul)" : "") +
             ": " + std::to_string(outs) + " output(s) of " + std::to_string(group) +
             " element(s), " +
             (team == 0 ? std::string("block-wide") : std::to_string(team) + " lane(s) each"));
  const int64_t lanes = team == 0 ? threads() : team;
  const ir::Expr lane = team == 0 ? tid() : ir::var("lane");
  const ir::Expr o = ir::var("o"), tv = ir::var("t"), active = ir::var("active");
  const ir::Expr acc = ir::var("acc");
  // Ragged tiles (docs/codegen.md, "Ragged tiles"): a reduced dim that is ragged combines its
  // present elements only, and a mean divides by their count; a loop state leaves the rows
  // absent in this iteration as they are.
  const OpPlan& rp = plan_.ops[i];
  const ir::Expr group_end =
      rp.ragged_extent >= 0 ? ragged_present(rp.ragged_extent, ragged_iteration()) : group;
  const ir::Expr count = ragged_count(i);
  auto finalized = [&](const std::string& v) {
    return ir::verbatim(count ? red.finalize(v, ir::print_expr(count)) : red.finalize(v, group));
  };
  auto inverted = [&](const std::string& v) {
    return ir::verbatim(count ? red.inverse(v, ir::print_expr(count)) : red.inverse(v, group));
  };
  ir::Expr is_active;
  if (team == 0) {
    w_.open(ir::for_loop("o", 0, o < outs, {}, "unroll 1"));
    is_active = ir::var("true");
  } else {
    w_.add(ir::decl_many("const int", {"lane", "team"}, {tid() % lanes, tid() / lanes}));
    const int teams = threads() / team;
    const ir::Expr o0 = ir::var("o0");
    w_.open(ir::for_loop("o0", 0, o0 < outs, teams, "unroll 1"));
    w_.add(ir::decl("const int", "o", o0 + ir::var("team")));
    is_active = o < outs;
  }
  std::vector<ir::Expr> oidx = unflatten(o, oshape);
  if (const ir::Expr absent = ragged_absent(x, oidx, rp.ragged_mask, ir::var("it")))
    is_active = team == 0 ? ir::unary("!", absent) : ir::land(is_active, ir::unary("!", absent));
  w_.add(ir::decl("const bool", "active", is_active));
  std::vector<ir::Expr> xidx = oidx;
  if (in.rank() > 0) xidx[rs.dim] = rs.to == 1 ? tv : ir::binary("+", oidx[rs.dim] * group, tv);
  w_.add(ir::decl("float", "acc", ir::verbatim(red.identity())));
  auto element_loop = [&](const ir::Expr& end) { return ir::for_loop("t", lane, tv < end, lanes); };
  // Whole groups along the innermost dim of a tile in shared memory are read 16 bytes at a time:
  // lane k takes chunks k, k + lanes, … of `vec` consecutive elements.
  const TensorPlan& xp = plan_.tensors[x];
  const int64_t vec = 16 / dtype_size(xp.dtype);
  const bool vector = team != 0 && rs.to == 1 && rs.inner == 1 && rp.ragged_extent < 0 &&
                      xp.home != TensorHome::Inline && !xp.summed_at_read && group % vec == 0 &&
                      group / vec >= lanes && vector_readable(x, vec);
  w_.open(ir::if_then(active));
  if (vector) {
    std::vector<ir::Expr> vidx = oidx;
    vidx[rs.dim] = tv * vec;
    w_.open(element_loop(group / vec));
    w_.add(ir::decl_array("float", "v", {vec}, {}, ""));
    w_.call("strata_rt::load_f32<" + std::to_string(vec) + ">",
            {ir::addr(xa.ref(vidx)), ir::var("v")});
    w_.open(ir::for_loop("j", 0, ir::var("j") < vec, 1, "unroll"));
    w_.add(ir::verbatim_stmt(red.update("acc", red.premap("v[j]"))));
    w_.close();
    w_.close();
  } else {
    w_.open(element_loop(group_end));
    const ir::Expr xv =
        xp.home == TensorHome::Inline ? ir::verbatim(operand_value(x, in, texts(xidx))) : xa.load(xidx);
    w_.add(ir::decl("const float", "v", xv));
    w_.add(ir::verbatim_stmt(red.update("acc", red.premap("v"))));
    w_.close();
  }
  w_.close();
  if (team == 0)
    w_.add(ir::assign(acc, ir::verbatim(red.block(threads(), "acc", "scratch", barrier_id()))));
  else if (team > 1)
    w_.add(ir::assign(acc, ir::verbatim(red.team(team, "acc"))));
  if (folded) {
    // Folded into a matmul: only the inverse RMS is stored (the matmul scales its result).
    w_.open(ir::if_then(ir::land(active, ir::eq(lane, 0))));
    w_.add(ir::assign(ya.ref(oidx), inverted("acc")));
    w_.close();
  } else if (norm) {
    w_.open(ir::if_then(active));
    w_.add(ir::decl("const float", "inv", inverted("acc")));
    w_.open(element_loop(group));
    w_.add(ir::assign(ya.ref(xidx), from_f32(dtype_of(t), xa.load(xidx) * ir::var("inv"))));
    w_.close();
    w_.close();
  } else {
    // One lane per output writes it (accumulators and running ops: fold it into the loop state,
    // finalized after the loop).
    std::vector<ir::Expr> yidx = oidx;
    if (accumulate && rs.to == 1 && in.rank() > 0) yidx[rs.dim] = ir::int_lit(0);
    w_.open(ir::if_then(ir::land(active, ir::eq(lane, 0))));
    if (rescales(op.kind)) {
      // accum_rescale_ld: the sum so far re-expressed in this iteration's shift, plus this one.
      const std::string mcur = operand_value(op.inputs[1], g_.tensor(t).shape, texts(yidx));
      w_.add(ir::decl("const float", "m", ir::verbatim(mcur)));
      emit_rescaled_update(i, ya.ref(yidx), g_.tensor(t).shape, yidx, acc);
    } else if (accumulate)
      w_.add(ir::verbatim_stmt(red.update(ir::print_expr(ya.ref(yidx)), "acc")));
    else
      w_.add(ir::assign(ya.ref(yidx), from_f32(dtype_of(t), finalized("acc"))));
    w_.close();
  }
  w_.close();
  w_.close();
  if (rescales(op.kind)) emit_shift_save(i);
}

void BlockEmitter::emit_rescaled_update(int i, const ir::Expr& ref, const Shape& out,
                                        const std::vector<ir::Expr>& idx, const ir::Expr& value) {
  const ir::Expr it = ir::var("it");
  const ir::Expr old = ref * ir::call("strata_rt::rescale_factor",
                                      {shift_slot(i, (it + 1) % 2, out, idx), ir::var("m")});
  w_.add(ir::assign(ref, ir::binary("+", ir::select(it > 0, old, ir::float_lit(0.0)), value)));
}

ir::Expr BlockEmitter::shift_slot(int i, const ir::Expr& slot, const Shape& out,
                                  const std::vector<ir::Expr>& out_idx) const {
  const BlockOp& op = g_.op(i);
  const Shape& ms = g_.tensor(op.inputs[1]).shape;
  const TensorPlan& tp = plan_.tensors[op.output];
  std::vector<ir::Expr> midx = broadcast_index(ms, out_idx);
  std::vector<ir::Expr> terms;
  int64_t stride = 1;
  for (int d = ms.rank() - 1; d >= 0; --d) {
    terms.insert(terms.begin(), midx[d] * stride);
    stride *= ms[d];
  }
  terms.push_back(slot * ms.numel());
  return ir::index(access(op.output).base,
                   ir::binary("+", ir::int_lit(tp.shift_offset), ir::sum(terms)));
}

void BlockEmitter::emit_shift_save(int i) {
  const BlockOp& op = g_.op(i);
  const int m = op.inputs[1];
  const Shape& ms = g_.tensor(m).shape;
  w_.open("");
  w_.comment(g_.tensor_name(op.output) + ": this iteration's shift " + g_.tensor_name(m) +
             " into slot it % 2 (the next iteration reads it; this one read the other slot)");
  open_thread_loop(w_, "e", ms.numel(), threads(), tid_);
  const std::vector<ir::Expr> idx = unflatten(ir::var("e"), ms);
  const std::string value = operand_value(m, ms, texts(idx));
  w_.add(ir::assign(shift_slot(i, ir::var("it") % 2, ms, idx), ir::verbatim(value)));
  w_.close();
  w_.close();
}

void BlockEmitter::emit_concat(int i) {
  const BlockOp& op = g_.op(i);
  const int t = op.output, dim = op.attrs.dim;
  Access ya = access(t);
  w_.open("");
  w_.comment("#" + std::to_string(i) + " " + g_.tensor_name(t) + " " + g_.tensor(t).shape.str() +
             " = concat(" + g_.tensor_name(op.inputs[0]) + ", " + g_.tensor_name(op.inputs[1]) +
             ") along dim " + std::to_string(dim));
  int64_t at = 0;
  for (int k = 0; k < 2; ++k) {
    const int x = op.inputs[k];
    const Shape& xs = g_.tensor(x).shape;
    const TensorPlan& xp = plan_.tensors[x];
    if (xp.home == TensorHome::View && xp.view_of == t) {
      w_.comment(g_.tensor_name(x) + " is stored in place: nothing to copy");
    } else {
      open_thread_loop(w_, "e" + std::to_string(k), xs.numel(), threads(), tid_);
      const std::vector<ir::Expr> idx = unflatten(ir::var("e" + std::to_string(k)), xs);
      std::vector<ir::Expr> yidx = idx;
      yidx[dim] = idx[dim] + at;
      w_.add(ir::assign(ya.ref(yidx), from_f32(dtype_of(t), access(x).load(idx))));
      w_.close();
    }
    at += xs[dim];
  }
  w_.close();
}

void BlockEmitter::emit_layout_copy(int i) {
  const BlockOp& op = g_.op(i);
  const int x = op.inputs[0], t = op.output;
  const Shape& out = g_.tensor(t).shape;
  // The input's element that output element idx views (the layout op's index map).
  Access xa = access(x);
  xa.map = compose_layout(xa.map, op, out.rank());
  w_.open("");
  w_.comment("#" + std::to_string(i) + " " + g_.tensor_name(t) + " " + out.str() + " = " +
             std::string(op_name(op.kind)) + "(" + g_.tensor_name(x) +
             "): a copy (a tensor-core operand ldmatrix cannot read in place)");
  open_thread_loop(w_, "e", out.numel(), threads(), tid_);
  const std::vector<ir::Expr> idx = unflatten(ir::var("e"), out);
  w_.add(ir::assign(access(t).ref(idx), from_f32(dtype_of(t), xa.load(idx))));
  w_.close();
  w_.close();
}

void BlockEmitter::emit_accumulate(int i) {
  const BlockOp& op = g_.op(i);
  const int x = op.inputs[0], t = op.output;
  const Shape& xs = g_.tensor(x).shape;
  Access ya = access(t);
  w_.open("");
  w_.comment("#" + std::to_string(i) + " " + g_.tensor_name(t) + " " + g_.tensor(t).shape.str() +
             (op.attrs.fmap == kReplicate
                  ? " += " + g_.tensor_name(x)
                  : " [iteration it along dim " + std::to_string(op.attrs.fmap) +
                        "] = " + g_.tensor_name(x)));
  open_thread_loop(w_, "e", xs.numel(), threads(), tid_);
  const std::vector<ir::Expr> idx = unflatten(ir::var("e"), xs);
  // Ragged tiles: positions absent in this iteration add nothing.
  if (const ir::Expr absent = ragged_absent(x, idx, plan_.ops[i].ragged_mask, ir::var("it")))
    w_.add(ir::if_compact(absent, ir::cont()));
  const ir::Expr value = ir::verbatim(operand_value(x, xs, texts(idx)));
  if (rescales(op.kind)) {
    // accum_rescale: the sum so far re-expressed in this iteration's shift, plus this one.
    w_.add(ir::decl("const float", "m", ir::verbatim(operand_value(op.inputs[1], xs, texts(idx)))));
    emit_rescaled_update(i, ya.ref(idx), xs, idx, value);
  } else if (op.attrs.fmap == kReplicate) {
    w_.add(ir::assign(ya.ref(idx), value, "+="));
  } else {
    std::vector<ir::Expr> yidx = idx;
    const int d = op.attrs.fmap;
    yidx[d] = ir::sum({idx[d], ir::var("it") * xs[d]});
    w_.add(ir::assign(ya.ref(yidx), from_f32(dtype_of(t), value)));
  }
  w_.close();
  w_.close();
  if (rescales(op.kind)) emit_shift_save(i);
}

void BlockEmitter::emit_matmul(int i) {
  if (plan_.ops[i].matmul == MatmulPath::TensorCore)
    emit_matmul_tensor_core(i);
  else
    emit_matmul_simt(i);
}

void BlockEmitter::emit_matmul_sink(int i, bool pair) {
  const BlockOp& op = g_.op(i);
  const OpPlan& p = plan_.ops[i];
  const Shape& out = g_.tensor(op.output).shape;
  // Output indices: batch dims from the flat batch b, then r, c.
  std::vector<ir::Expr> idx = unflatten(ir::var("b"), batch_shape(out));
  idx.push_back(ir::var("r"));
  idx.push_back(ir::var("c"));
  std::vector<ir::Expr> idx1 = idx;
  idx1.back() = ir::var("c") + 1;
  const int nvals = pair ? 2 : 1;
  const std::vector<ir::Expr>* at[2] = {&idx, &idx1};
  emit_matmul_scales(i, pair);
  const ir::Expr v0 = ir::var("v0"), v1 = ir::var("v1");
  if (p.accumulate_into >= 0 && p.ragged_mask != 0) {
    // Ragged tiles: positions absent in this iteration add nothing.
    Access acc = access(g_.op(p.accumulate_into).output);
    for (int v = 0; v < nvals; ++v) {
      const ir::Stmt add = ir::assign(acc.ref(*at[v]), v == 0 ? v0 : v1, "+=");
      const ir::Expr absent = ragged_absent(op.output, *at[v], p.ragged_mask, ir::var("it"));
      w_.add(absent ? ir::if_compact(ir::unary("!", absent), add) : add);
    }
    return;
  }
  if (p.accumulate_into >= 0) {
    Access acc = access(g_.op(p.accumulate_into).output);
    if (pair) {
      const ir::Expr ptr = ir::var("p");
      w_.add(ir::decl("float*", "p", ir::addr(acc.ref(idx))));
      w_.add(ir::assign(ir::index(ptr, 0), v0, "+="));
      w_.add(ir::assign(ir::index(ptr, 1), v1, "+="));
    } else {
      w_.add(ir::assign(acc.ref(idx), v0, "+="));
    }
    return;
  }
  int dest = op.output;
  std::vector<ir::Expr> vals;
  if (p.epilogue >= 0) {
    const BlockOp& e = g_.op(p.epilogue);
    dest = e.output;
    for (int v = 0; v < nvals; ++v) {
      std::vector<std::string> ins;
      for (int x : e.inputs)
        ins.push_back(x == op.output ? "v" + std::to_string(v)
                                     : operand_value(x, out, texts(*at[v])));
      std::string res = eval_elementwise(p.epilogue, ins, "e" + std::to_string(v) + "_");
      w_.add(ir::decl("const float", "w" + std::to_string(v), ir::verbatim(res)));
      vals.push_back(ir::var("w" + std::to_string(v)));
    }
  } else {
    vals = pair ? std::vector<ir::Expr>{v0, v1} : std::vector<ir::Expr>{v0};
  }
  Access d = access(dest);
  if (pair)
    w_.call("strata_rt::store2", {ir::addr(d.ref(idx)), vals[0], vals[1]});
  else
    w_.add(ir::assign(d.ref(idx), from_f32(dtype_of(dest), vals[0])));
}

void BlockEmitter::emit_matmul_tensor_core(int i) {
  const BlockOp& op = g_.op(i);
  const OpPlan& p = plan_.ops[i];
  const MmaTiling& tl = p.tiling;
  const std::string spec = "mma" + std::to_string(i);
  const std::string T = cuda_type(plan_.mma_dtype);
  Access a = access(matmul_operand(plan_, i, 0)), b = access(matmul_operand(plan_, i, 1));
  const bool regs = p.accumulate_into >= 0 &&
                    plan_.tensors[g_.op(p.accumulate_into).output].home == TensorHome::Registers;
  w_.open("");
  w_.comment("#" + std::to_string(i) + " " + g_.tensor_name(op.output) + " " +
             g_.tensor(op.output).shape.str() + " = matmul(" + g_.tensor_name(op.inputs[0]) + ", " +
             g_.tensor_name(op.inputs[1]) + "): tensor cores, " + std::to_string(tl.warps_m) + "x" +
             std::to_string(tl.warps_n) + " warps of " + std::to_string(tl.mt) + "x" +
             std::to_string(tl.nt) + " m16n8 tiles" + (p.wgmma ? " as warpgroup MMA (wgmma)" : "") +
             (regs                     ? ", accumulated in registers"
              : p.accumulate_into >= 0 ? ", added into the shared accumulator"
              : p.epilogue >= 0        ? ", epilogue op #" + std::to_string(p.epilogue)
                                       : ""));
  const ir::Expr warp = ir::var("warp"), wm = ir::var("wm"), wn = ir::var("wn");
  const ir::Expr acc = ir::var("acc");
  w_.add(ir::decl("const int", "warp", ir::binary(">>", tid(), ir::int_lit(5))));
  w_.open(ir::if_then(warp < tl.warps_m * tl.warps_n));
  w_.add(ir::decl_many("const int", {"wm", "wn"}, {warp / tl.warps_n, warp % tl.warps_n}));
  const ir::Expr A = a.pointer(), B = b.pointer();
  // Ragged tiles: a ragged contraction skips the k-steps past its present extent and zeroes
  // the fragments of operands that may hold anything at absent indices
  // (OpPlan::ragged_zero_operands); a product added into a register accumulator is masked where
  // rows or columns are absent in this iteration (OpPlan::ragged_mask). A contraction padded
  // to the mma step (OpPlan::mma_k) has its true K as the present extent where it is not
  // ragged.
  const int64_t k_true = g_.tensor(op.inputs[0]).shape.dims().back();
  auto mma = [&](const ir::Expr& into, int64_t mt, int64_t nt, const ir::Expr& tm,
                 const ir::Expr& tn) {
    const std::string tiles = std::to_string(mt) + ", " + std::to_string(nt);
    if (p.wgmma) {
      // Warpgroup MMA (plan_wgmma): one row tile per warp, B through a descriptor; a ragged
      // contraction masks A only.
      const std::string wnt = std::to_string(nt);
      if (p.ragged_zero_operands == 0 || (p.ragged_extent < 0 && p.mma_k == k_true)) {
        w_.call("strata_rt::warpgroup_mma<" + spec + ", " + T + ", " + wnt + ">",
                {A, B, into, tm, tn});
        return;
      }
      const ir::Expr klimit = p.ragged_extent >= 0
                                  ? ragged_present(p.ragged_extent, ragged_iteration())
                                  : ir::int_lit(k_true);
      w_.call("strata_rt::warpgroup_mma<" + spec + ", " + T + ", " + wnt + ", " +
                  (p.ragged_zero_operands & 1u ? "true" : "false") + ">",
              {A, B, into, tm, tn, klimit});
      return;
    }
    if (p.ragged_zero_operands == 0 || (p.ragged_extent < 0 && p.mma_k == k_true)) {
      w_.call("strata_rt::warp_mma<" + spec + ", " + T + ", " + tiles + ">", {A, B, into, tm, tn});
      return;
    }
    const unsigned z = p.ragged_zero_operands;
    const ir::Expr klimit = p.ragged_extent >= 0
                                ? ragged_present(p.ragged_extent, ragged_iteration())
                                : ir::int_lit(k_true);
    w_.call("strata_rt::warp_mma_ragged<" + spec + ", " + T + ", " + tiles + ", " +
                (z & 1u ? "true" : "false") + ", " + (z & 2u ? "true" : "false") + ">",
            {A, B, into, tm, tn, klimit});
  };
  if (regs && p.scale_a < 0 && p.scale_b < 0 && p.ragged_mask == 0) {
    mma(ir::var("racc" + std::to_string(g_.op(p.accumulate_into).output)), tl.mt, tl.nt, wm * tl.mt,
        wn * tl.nt);
  } else if (regs) {
    // A folded norm scales this iteration's product before it is added; absent positions of a
    // ragged tile add nothing.
    const std::string mt = std::to_string(tl.mt), nt = std::to_string(tl.nt);
    const ir::Expr tm = wm * tl.mt, tn = wn * tl.nt;
    const ir::Expr racc = ir::var("racc" + std::to_string(g_.op(p.accumulate_into).output));
    w_.add(ir::decl_array("float", "acc", {tl.mt, tl.nt, 4}));
    w_.call("strata_rt::mma_zero", {acc});
    mma(acc, tl.mt, tl.nt, tm, tn);
    w_.open(ir::lambda_call("strata_rt::mma_transform<" + spec + ", " + mt + ", " + nt + ">",
                            {acc, tm, tn}, "int b, int r, int c, float& v0, float& v1"));
    w_.add(ir::eval(ir::c_cast("void", ir::var("b"))));
    emit_matmul_scales(i, true);
    if (p.ragged_mask != 0) {
      std::vector<ir::Expr> idx = unflatten(ir::var("b"), batch_shape(g_.tensor(op.output).shape));
      idx.push_back(ir::var("r"));
      idx.push_back(ir::var("c"));
      for (int v = 0; v < 2; ++v) {
        if (v == 1) idx.back() = ir::var("c") + 1;
        if (const ir::Expr absent = ragged_absent(op.output, idx, p.ragged_mask, ir::var("it")))
          w_.add(ir::if_compact(absent,
                                ir::assign(ir::var("v" + std::to_string(v)), ir::float_lit(0.0))));
      }
    }
    w_.close();
    const ir::Expr x = ir::var("x"), y = ir::var("y"), z = ir::var("z");
    auto xyz = [&](const ir::Expr& t) { return ir::index(ir::index(ir::index(t, x), y), z); };
    w_.open(ir::for_loop("x", 0, x < tl.mt, {}, "unroll"));
    w_.open(ir::for_loop("y", 0, y < tl.nt, {}, "unroll"));
    w_.add(ir::for_compact("z", 0, z < 4, ir::assign(xyz(racc), xyz(acc), "+="), "unroll"));
    w_.close();
    w_.close();
  } else {
    const bool loop_m = tl.chunk_mt < tl.mt, loop_n = tl.chunk_nt < tl.nt;
    const ir::Expr cm = ir::var("cm"), cn = ir::var("cn");
    if (loop_m)
      w_.open(ir::for_loop("cm", 0, cm < tl.mt, tl.chunk_mt, "unroll 1"));
    else
      w_.add(ir::decl("const int", "cm", 0));
    if (loop_n)
      w_.open(ir::for_loop("cn", 0, cn < tl.nt, tl.chunk_nt, "unroll 1"));
    else
      w_.add(ir::decl("const int", "cn", 0));
    const std::string cmt = std::to_string(tl.chunk_mt), cnt = std::to_string(tl.chunk_nt);
    // (cm / cn are kept even when 0: the chunk loop's variables)
    const ir::Expr tm = ir::binary("+", wm * tl.mt, cm), tn = ir::binary("+", wn * tl.nt, cn);
    w_.add(ir::decl_array("float", "acc", {tl.chunk_mt, tl.chunk_nt, 4}));
    w_.call("strata_rt::mma_zero", {acc});
    mma(acc, tl.chunk_mt, tl.chunk_nt, tm, tn);
    w_.open(ir::lambda_call("strata_rt::mma_epilogue<" + spec + ", " + cmt + ", " + cnt + ">",
                            {acc, tm, tn}, "int b, int r, int c, float v0, float v1"));
    w_.add(ir::eval(ir::c_cast("void", ir::var("b"))));
    emit_odd_tail_sink(i, [&](bool pair) { emit_matmul_sink(i, pair); });
    w_.close();
    if (loop_n) w_.close();
    if (loop_m) w_.close();
  }
  w_.close();
  w_.close();
}

void BlockEmitter::emit_odd_tail_sink(int i, const std::function<void(bool)>& sink) {
  const int64_t n = g_.tensor(g_.op(i).output).shape.dims().back();
  if (plan_.ops[i].mma_n == n || n % 2 == 0) {
    sink(true);
    return;
  }
  // An odd true N padded to the mma step: the pair at c = N − 1 has only its first element.
  w_.open(ir::if_then(ir::var("c") + 1 < n));
  sink(true);
  w_.close();
  w_.open(ir::if_then(ir::eq(ir::var("c") + 1, n)));
  sink(false);
  w_.close();
}

void BlockEmitter::emit_matmul_simt(int i) {
  const BlockOp& op = g_.op(i);
  const Shape& out = g_.tensor(op.output).shape;
  const int r = out.rank();
  const int64_t k = g_.tensor(op.inputs[0]).shape[r - 1];
  Access a = access(matmul_operand(plan_, i, 0)), b = access(matmul_operand(plan_, i, 1));
  w_.open("");
  w_.comment("#" + std::to_string(i) + " " + g_.tensor_name(op.output) + " " + out.str() +
             " = matmul(" + g_.tensor_name(op.inputs[0]) + ", " + g_.tensor_name(op.inputs[1]) +
             "): SIMT, one output element per thread and step");
  open_thread_loop(w_, "e", out.numel(), threads(), tid_);
  const Shape bs = batch_shape(out);
  const ir::Expr e = ir::var("e"), kk = ir::var("kk");
  w_.add(
      ir::decl_many("const int", {"b", "r", "c"},
                    {e / (out[r - 2] * out[r - 1]), e / out[r - 1] % out[r - 2], e % out[r - 1]}));
  w_.add(ir::eval(ir::c_cast("void", ir::var("b"))));
  std::vector<ir::Expr> bidx = unflatten(ir::var("b"), bs);
  std::vector<ir::Expr> ai = bidx, bi = bidx;
  ai.push_back(ir::var("r"));
  ai.push_back(kk);
  bi.push_back(kk);
  bi.push_back(ir::var("c"));
  w_.add(ir::decl("float", "v0", ir::float_lit(0.0)));
  // Ragged tiles: a ragged contraction stops at its present extent.
  const int re = plan_.ops[i].ragged_extent;
  const ir::Expr k_end = re >= 0 ? ragged_present(re, ragged_iteration()) : ir::Expr(k);
  w_.add(ir::for_compact("kk", 0, kk < k_end,
                         ir::assign(ir::var("v0"), a.load(ai) * b.load(bi), "+="), "unroll 4"));
  emit_matmul_sink(i, false);
  w_.close();
  w_.close();
}

}  // namespace strata::codegen
