// The compute ops of a customized kernel: elementwise ops and thread graphs, reductions,
// concat, accumulators and matmuls (tensor-core and SIMT), each as one block-wide step.
#include <algorithm>

#include "block_emitter.h"
#include "reduction_code.h"
#include "strata/register_fusion.h"
#include "strata/schedule.h"

namespace strata::codegen {
namespace {

/// Opens a loop over `var` in [0, n) distributed over the block's threads; the caller closes it.
void open_thread_loop(CodeWriter& w, const std::string& var, int64_t n, int threads,
                      const std::string& tid) {
  const int64_t trips = (n + threads - 1) / threads;
  if (trips <= 8) {
    w.line("#pragma unroll");
    w.open("for (int " + var + "_k = 0; " + var + "_k < " + std::to_string(trips) + "; ++" + var +
           "_k)");
    w.line("const int " + var + " = " + tid + " + " + var + "_k * " + std::to_string(threads) +
           ";");
    if (n % threads != 0) w.line("if (" + var + " >= " + std::to_string(n) + ") break;");
  } else {
    w.open("for (int " + var + " = " + tid + "; " + var + " < " + std::to_string(n) + "; " + var +
           " += " + std::to_string(threads) + ")");
  }
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
    case Category::Scan:  // a running reduction into its state tile
      if (p.scan_of < 0) emit_reduction(i);  // else kept in registers by its matmul chain
      return;
    case Category::Collective:  // kernel level only
    case Category::Source:  // input iterators: loaded by the pipeline
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
  w_.line("float " + name + "[" + std::to_string(vec) + "];  // " + g_.tensor_name(t) +
          " along the chunk" + (tp.summed_at_read ? ", the loop groups' partials summed" : ""));
  if (tp.summed_at_read)
    emit_summed_vector(t, idx, vec, name);
  else
    w_.line("strata_rt::load_f32<" + std::to_string(vec) + ">(&" + access(t).ref(idx) + ", " +
            name + ");");
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
    w_.line("const float " + name + " = " + scalar_op_expr(s.kind, args, step_attrs(s)) + ";");
    vals.push_back(name);
  }
  return vals.back();
}

void BlockEmitter::emit_elementwise(int i) {
  const BlockOp& op = g_.op(i);
  const int t = op.output;
  const Shape& out = g_.tensor(t).shape;
  w_.open("");
  w_.line("// #" + std::to_string(i) + " " + g_.tensor_name(t) + " " + out.str() + " = " +
          std::string(op_name(op.kind)) + " (elementwise, shared memory)");
  open_thread_loop(w_, "e", out.numel(), threads(), tid_);
  std::vector<std::string> idx = unflatten("e", out);
  std::vector<std::string> vals;
  for (size_t k = 0; k < op.inputs.size(); ++k) {
    std::string name = "a" + std::to_string(k);
    const std::string value = operand_value(op.inputs[k], out, idx);
    w_.line("const float " + name + " = " + value + ";");
    vals.push_back(name);
  }
  std::string res = eval_elementwise(i, vals, "v");
  w_.line(access(t).ref(idx) + " = strata_rt::from_f32<" + dtype_of(t) + ">(" + res + ");");
  w_.close();
  w_.close();
}

void BlockEmitter::emit_reduction(int i) {
  const BlockOp& op = g_.op(i);
  const int x = op.inputs[0], t = op.output;
  const Shape& in = g_.tensor(x).shape;
  const ReductionShape rs = reduction_shape(op, in);
  const int64_t group = rs.group(), outs = rs.outputs();
  int team = reduction_team(group, outs, threads());
  if (team == 0 && group_scope_) team = 32;  // a loop group never reduces block-wide
  const bool folded = plan_.ops[i].fold_into >= 0;
  const ReductionCode red(op.kind, op.attrs);
  const bool norm = op_category(op.kind) == Category::Norm;
  // Accumulators (and running ops) fold this iteration's result into their loop state.
  const bool accumulate =
      op_category(op.kind) == Category::Accum || op_category(op.kind) == Category::Scan;
  // Output index space: the input shape with the reduced dim cut to `to` groups.
  Shape oshape = in;
  if (in.rank() > 0) oshape[rs.dim] = rs.to;
  Access xa = access(x), ya = access(t);
  w_.open("");
  w_.line("// #" + std::to_string(i) + " " + g_.tensor_name(t) + " " + g_.tensor(t).shape.str() +
          " = " + std::string(op_name(op.kind)) + "(" + g_.tensor_name(x) + ") over dim " +
          std::to_string(rs.dim) + (folded ? " (inverse RMS only: folded into a matmul)" : "") +
          ": " + std::to_string(outs) + " output(s) of " + std::to_string(group) + " element(s), " +
          (team == 0 ? std::string("block-wide") : std::to_string(team) + " lane(s) each"));
  const std::string lanes = team == 0 ? std::to_string(threads()) : std::to_string(team);
  const std::string lane = team == 0 ? tid_ : "lane";
  // Ragged tiles (docs/codegen.md, "Ragged tiles"): a reduced dim that is ragged combines its
  // present elements only, and a mean divides by their count; a loop state leaves the rows
  // absent in this iteration as they are.
  const OpPlan& rp = plan_.ops[i];
  const std::string group_end = rp.ragged_extent >= 0
                                    ? ragged_present(rp.ragged_extent, in_loop_ ? "it" : "0")
                                    : std::to_string(group);
  const std::string count = ragged_count(i);
  auto finalized = [&](const std::string& v) {
    return count.empty() ? red.finalize(v, group) : red.finalize(v, count);
  };
  auto inverted = [&](const std::string& v) {
    return count.empty() ? red.inverse(v, group) : red.inverse(v, count);
  };
  if (team == 0) {
    w_.line("#pragma unroll 1");
    w_.open("for (int o = 0; o < " + std::to_string(outs) + "; ++o)");
  } else {
    w_.line("const int lane = " + tid_ + " % " + lanes + ", team = " + tid_ + " / " + lanes + ";");
    const int teams = threads() / team;
    w_.line("#pragma unroll 1");
    w_.open("for (int o0 = 0; o0 < " + std::to_string(outs) + "; o0 += " + std::to_string(teams) +
            ")");
    w_.line("const int o = o0 + team;");
  }
  std::vector<std::string> oidx = unflatten("o", oshape);
  {
    std::string active = team == 0 ? "true" : "o < " + std::to_string(outs);
    const std::string absent = ragged_absent(x, oidx, rp.ragged_mask, "it");
    if (!absent.empty()) active = (team == 0 ? "" : active + " && ") + "!(" + absent + ")";
    w_.line("const bool active = " + active + ";");
  }
  std::vector<std::string> xidx = oidx;
  if (in.rank() > 0)
    xidx[rs.dim] = rs.to == 1 ? std::string("t") : paren(mul(oidx[rs.dim], group)) + " + t";
  w_.line("float acc = " + red.identity() + ";");
  w_.open("if (active)");
  w_.open("for (int t = " + lane + "; t < " + group_end + "; t += " + lanes + ")");
  const std::string xv =
      plan_.tensors[x].home == TensorHome::Inline ? operand_value(x, in, xidx) : xa.load(xidx);
  w_.line("const float v = " + xv + ";");
  w_.line(red.update("acc", red.premap("v")));
  w_.close();
  w_.close();
  if (team == 0)
    w_.line("acc = " + red.block(threads(), "acc", "scratch") + ";");
  else if (team > 1)
    w_.line("acc = " + red.team(team, "acc") + ";");
  if (folded) {
    // Folded into a matmul: only the inverse RMS is stored (the matmul scales its result).
    w_.open("if (active && " + lane + " == 0)");
    w_.line(ya.ref(oidx) + " = " + inverted("acc") + ";");
    w_.close();
  } else if (norm) {
    w_.open("if (active)");
    w_.line("const float inv = " + inverted("acc") + ";");
    w_.open("for (int t = " + lane + "; t < " + std::to_string(group) + "; t += " + lanes + ")");
    w_.line(ya.ref(xidx) + " = strata_rt::from_f32<" + dtype_of(t) + ">(" + xa.load(xidx) +
            " * inv);");
    w_.close();
    w_.close();
  } else {
    // One lane per output writes it (accumulators and running ops: fold it into the loop state,
    // finalized after the loop).
    std::vector<std::string> yidx = oidx;
    if (accumulate && rs.to == 1 && in.rank() > 0) yidx[rs.dim] = "0";
    w_.open("if (active && " + lane + " == 0)");
    if (rescales(op.kind)) {
      // accum_rescale_ld: the sum so far re-expressed in this iteration's shift, plus this one.
      const std::string mcur = operand_value(op.inputs[1], g_.tensor(t).shape, yidx);
      w_.line("const float m = " + mcur + ";");
      w_.line(ya.ref(yidx) + " = (it > 0 ? " + ya.ref(yidx) + " * strata_rt::rescale_factor(" +
              shift_slot(i, "(it + 1) % 2", g_.tensor(t).shape, yidx) + ", m) : 0.0f) + acc;");
    } else if (accumulate)
      w_.line(red.update(ya.ref(yidx), "acc"));
    else
      w_.line(ya.ref(yidx) + " = strata_rt::from_f32<" + dtype_of(t) + ">(" + finalized("acc") +
              ");");
    w_.close();
  }
  w_.close();
  w_.close();
  if (rescales(op.kind)) emit_shift_save(i);
}

std::string BlockEmitter::shift_slot(int i, const std::string& slot, const Shape& out,
                                     const std::vector<std::string>& out_idx) const {
  const BlockOp& op = g_.op(i);
  const Shape& ms = g_.tensor(op.inputs[1]).shape;
  const TensorPlan& tp = plan_.tensors[op.output];
  std::vector<std::string> midx = broadcast_index(ms, out_idx);
  std::vector<std::string> terms;
  int64_t stride = 1;
  for (int d = ms.rank() - 1; d >= 0; --d) {
    terms.insert(terms.begin(), mul(midx[d], stride));
    stride *= ms[d];
  }
  terms.push_back(mul(paren(slot), ms.numel()));
  return access(op.output).base + "[" + std::to_string(tp.shift_offset) + " + " +
         paren(sum(terms)) + "]";
}

void BlockEmitter::emit_shift_save(int i) {
  const BlockOp& op = g_.op(i);
  const int m = op.inputs[1];
  const Shape& ms = g_.tensor(m).shape;
  w_.open("");
  w_.line("// " + g_.tensor_name(op.output) + ": this iteration's shift " + g_.tensor_name(m) +
          " into slot it % 2 (the next iteration reads it; this one read the other slot)");
  open_thread_loop(w_, "e", ms.numel(), threads(), tid_);
  std::vector<std::string> idx = unflatten("e", ms);
  const std::string value = operand_value(m, ms, idx);
  w_.line(shift_slot(i, "it % 2", ms, idx) + " = " + value + ";");
  w_.close();
  w_.close();
}

void BlockEmitter::emit_concat(int i) {
  const BlockOp& op = g_.op(i);
  const int t = op.output, dim = op.attrs.dim;
  Access ya = access(t);
  w_.open("");
  w_.line("// #" + std::to_string(i) + " " + g_.tensor_name(t) + " " + g_.tensor(t).shape.str() +
          " = concat(" + g_.tensor_name(op.inputs[0]) + ", " + g_.tensor_name(op.inputs[1]) +
          ") along dim " + std::to_string(dim));
  int64_t at = 0;
  for (int k = 0; k < 2; ++k) {
    const int x = op.inputs[k];
    const Shape& xs = g_.tensor(x).shape;
    const TensorPlan& xp = plan_.tensors[x];
    if (xp.home == TensorHome::View && xp.view_of == t) {
      w_.line("// " + g_.tensor_name(x) + " is stored in place: nothing to copy");
    } else {
      open_thread_loop(w_, "e" + std::to_string(k), xs.numel(), threads(), tid_);
      std::vector<std::string> idx = unflatten("e" + std::to_string(k), xs);
      std::vector<std::string> yidx = idx;
      if (at != 0) yidx[dim] = paren(idx[dim]) + " + " + std::to_string(at);
      w_.line(ya.ref(yidx) + " = strata_rt::from_f32<" + dtype_of(t) + ">(" + access(x).load(idx) +
              ");");
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
  w_.line("// #" + std::to_string(i) + " " + g_.tensor_name(t) + " " + out.str() + " = " +
          std::string(op_name(op.kind)) + "(" + g_.tensor_name(x) +
          "): a copy (a tensor-core operand ldmatrix cannot read in place)");
  open_thread_loop(w_, "e", out.numel(), threads(), tid_);
  std::vector<std::string> idx = unflatten("e", out);
  w_.line(access(t).ref(idx) + " = strata_rt::from_f32<" + dtype_of(t) + ">(" + xa.load(idx) +
          ");");
  w_.close();
  w_.close();
}

void BlockEmitter::emit_accumulate(int i) {
  const BlockOp& op = g_.op(i);
  const int x = op.inputs[0], t = op.output;
  const Shape& xs = g_.tensor(x).shape;
  Access ya = access(t);
  w_.open("");
  w_.line("// #" + std::to_string(i) + " " + g_.tensor_name(t) + " " + g_.tensor(t).shape.str() +
          (op.attrs.fmap == kReplicate
               ? " += " + g_.tensor_name(x)
               : " [iteration it along dim " + std::to_string(op.attrs.fmap) +
                     "] = " + g_.tensor_name(x)));
  open_thread_loop(w_, "e", xs.numel(), threads(), tid_);
  std::vector<std::string> idx = unflatten("e", xs);
  // Ragged tiles: positions absent in this iteration add nothing.
  if (const std::string absent = ragged_absent(x, idx, plan_.ops[i].ragged_mask, "it");
      !absent.empty())
    w_.line("if (" + absent + ") continue;");
  const std::string value = operand_value(x, xs, idx);
  if (rescales(op.kind)) {
    // accum_rescale: the sum so far re-expressed in this iteration's shift, plus this one.
    w_.line("const float m = " + operand_value(op.inputs[1], xs, idx) + ";");
    w_.line(ya.ref(idx) + " = (it > 0 ? " + ya.ref(idx) + " * strata_rt::rescale_factor(" +
            shift_slot(i, "(it + 1) % 2", xs, idx) + ", m) : 0.0f) + " + value + ";");
  } else if (op.attrs.fmap == kReplicate) {
    w_.line(ya.ref(idx) + " += " + value + ";");
  } else {
    std::vector<std::string> yidx = idx;
    const int d = op.attrs.fmap;
    yidx[d] = sum({idx[d], mul("it", xs[d])});
    w_.line(ya.ref(yidx) + " = strata_rt::from_f32<" + dtype_of(t) + ">(" + value + ");");
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
  std::vector<std::string> idx = unflatten("b", batch_shape(out));
  idx.push_back("r");
  idx.push_back("c");
  std::vector<std::string> idx1 = idx;
  idx1.back() = "c + 1";
  const int nvals = pair ? 2 : 1;
  const std::vector<std::string>* at[2] = {&idx, &idx1};
  emit_matmul_scales(i, pair);
  if (p.accumulate_into >= 0 && p.ragged_mask != 0) {
    // Ragged tiles: positions absent in this iteration add nothing.
    Access acc = access(g_.op(p.accumulate_into).output);
    for (int v = 0; v < nvals; ++v) {
      const std::string absent = ragged_absent(op.output, *at[v], p.ragged_mask, "it");
      w_.line((absent.empty() ? "" : "if (!(" + absent + ")) ") + acc.ref(*at[v]) + " += v" +
              std::to_string(v) + ";");
    }
    return;
  }
  if (p.accumulate_into >= 0) {
    Access acc = access(g_.op(p.accumulate_into).output);
    if (pair) {
      w_.line("float* p = &" + acc.ref(idx) + ";");
      w_.line("p[0] += v0;");
      w_.line("p[1] += v1;");
    } else {
      w_.line(acc.ref(idx) + " += v0;");
    }
    return;
  }
  int dest = op.output;
  std::vector<std::string> vals;
  if (p.epilogue >= 0) {
    const BlockOp& e = g_.op(p.epilogue);
    dest = e.output;
    for (int v = 0; v < nvals; ++v) {
      std::vector<std::string> ins;
      for (int x : e.inputs)
        ins.push_back(x == op.output ? "v" + std::to_string(v) : operand_value(x, out, *at[v]));
      std::string res = eval_elementwise(p.epilogue, ins, "e" + std::to_string(v) + "_");
      w_.line("const float w" + std::to_string(v) + " = " + res + ";");
      vals.push_back("w" + std::to_string(v));
    }
  } else {
    vals = pair ? std::vector<std::string>{"v0", "v1"} : std::vector<std::string>{"v0"};
  }
  Access d = access(dest);
  if (pair)
    w_.line("strata_rt::store2(&" + d.ref(idx) + ", " + vals[0] + ", " + vals[1] + ");");
  else
    w_.line(d.ref(idx) + " = strata_rt::from_f32<" + dtype_of(dest) + ">(" + vals[0] + ");");
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
  w_.line("// #" + std::to_string(i) + " " + g_.tensor_name(op.output) + " " +
          g_.tensor(op.output).shape.str() + " = matmul(" + g_.tensor_name(op.inputs[0]) + ", " +
          g_.tensor_name(op.inputs[1]) + "): tensor cores, " + std::to_string(tl.warps_m) + "x" +
          std::to_string(tl.warps_n) + " warps of " + std::to_string(tl.mt) + "x" +
          std::to_string(tl.nt) + " m16n8 tiles" +
          (regs                     ? ", accumulated in registers"
           : p.accumulate_into >= 0 ? ", added into the shared accumulator"
           : p.epilogue >= 0        ? ", epilogue op #" + std::to_string(p.epilogue)
                                    : ""));
  w_.line("const int warp = " + tid_ + " >> 5;");
  w_.open("if (warp < " + std::to_string(tl.warps_m * tl.warps_n) + ")");
  w_.line("const int wm = warp / " + std::to_string(tl.warps_n) + ", wn = warp % " +
          std::to_string(tl.warps_n) + ";");
  const std::string A = a.pointer(), B = b.pointer();
  // Ragged tiles: a ragged contraction skips the k-steps past its present extent and zeroes
  // the fragments of operands that may hold anything at absent indices; a product added into
  // a register accumulator is masked where rows or columns are absent in this iteration.
  auto mma = [&](const std::string& acc, const std::string& mt, const std::string& nt,
                 const std::string& tm, const std::string& tn) {
    if (p.ragged_extent < 0 || p.ragged_zero_operands == 0)
      return "strata_rt::warp_mma<" + spec + ", " + T + ", " + mt + ", " + nt + ">(" + A + ", " +
             B + ", " + acc + ", " + tm + ", " + tn + ");";
    return "strata_rt::warp_mma_ragged<" + spec + ", " + T + ", " + mt + ", " + nt + ", " +
           (p.ragged_zero_operands & 1u ? "true" : "false") + ", " +
           (p.ragged_zero_operands & 2u ? "true" : "false") + ">(" + A + ", " + B + ", " + acc +
           ", " + tm + ", " + tn + ", " + ragged_present(p.ragged_extent, in_loop_ ? "it" : "0") +
           ");";
  };
  if (regs && p.scale_a < 0 && p.scale_b < 0 && p.ragged_mask == 0) {
    w_.line(mma("racc" + std::to_string(g_.op(p.accumulate_into).output), std::to_string(tl.mt),
                std::to_string(tl.nt), "wm * " + std::to_string(tl.mt),
                "wn * " + std::to_string(tl.nt)));
  } else if (regs) {
    // A folded norm scales this iteration's product before it is added.
    const std::string mt = std::to_string(tl.mt), nt = std::to_string(tl.nt);
    const std::string tm = "wm * " + mt, tn = "wn * " + nt;
    const std::string racc = "racc" + std::to_string(g_.op(p.accumulate_into).output);
    w_.line("float acc[" + mt + "][" + nt + "][4];");
    w_.line("strata_rt::mma_zero(acc);");
    w_.line(mma("acc", mt, nt, tm, tn));
    w_.line("strata_rt::mma_transform<" + spec + ", " + mt + ", " + nt + ">(acc, " + tm + ", " +
            tn + ", [&](int b, int r, int c, float& v0, float& v1) {");
    w_.open("");
    w_.line("(void)b;");
    emit_matmul_scales(i, true);
    if (p.ragged_mask != 0) {
      const Shape& out = g_.tensor(op.output).shape;
      std::vector<std::string> idx = unflatten("b", batch_shape(out));
      idx.push_back("r");
      idx.push_back("c");
      for (int v = 0; v < 2; ++v) {
        if (v == 1) idx.back() = "c + 1";
        const std::string absent = ragged_absent(op.output, idx, p.ragged_mask, "it");
        if (!absent.empty()) w_.line("if (" + absent + ") v" + std::to_string(v) + " = 0.0f;");
      }
    }
    w_.close("");
    w_.line("});");
    w_.line("#pragma unroll");
    w_.open("for (int x = 0; x < " + mt + "; ++x)");
    w_.line("#pragma unroll");
    w_.open("for (int y = 0; y < " + nt + "; ++y)");
    w_.line("#pragma unroll");
    w_.line("for (int z = 0; z < 4; ++z) " + racc + "[x][y][z] += acc[x][y][z];");
    w_.close();
    w_.close();
  } else {
    const bool loop_m = tl.chunk_mt < tl.mt, loop_n = tl.chunk_nt < tl.nt;
    if (loop_m) {
      w_.line("#pragma unroll 1");
      w_.open("for (int cm = 0; cm < " + std::to_string(tl.mt) +
              "; cm += " + std::to_string(tl.chunk_mt) + ")");
    } else {
      w_.line("const int cm = 0;");
    }
    if (loop_n) {
      w_.line("#pragma unroll 1");
      w_.open("for (int cn = 0; cn < " + std::to_string(tl.nt) +
              "; cn += " + std::to_string(tl.chunk_nt) + ")");
    } else {
      w_.line("const int cn = 0;");
    }
    const std::string cmt = std::to_string(tl.chunk_mt), cnt = std::to_string(tl.chunk_nt);
    const std::string tm = "wm * " + std::to_string(tl.mt) + " + cm",
                      tn = "wn * " + std::to_string(tl.nt) + " + cn";
    w_.line("float acc[" + cmt + "][" + cnt + "][4];");
    w_.line("strata_rt::mma_zero(acc);");
    w_.line(mma("acc", cmt, cnt, tm, tn));
    w_.line("strata_rt::mma_epilogue<" + spec + ", " + cmt + ", " + cnt + ">(acc, " + tm + ", " +
            tn + ", [&](int b, int r, int c, float v0, float v1) {");
    w_.open("");
    w_.line("(void)b;");
    emit_matmul_sink(i, true);
    w_.close("");
    w_.line("});");
    if (loop_n) w_.close();
    if (loop_m) w_.close();
  }
  w_.close();
  w_.close();
}

void BlockEmitter::emit_matmul_simt(int i) {
  const BlockOp& op = g_.op(i);
  const Shape& out = g_.tensor(op.output).shape;
  const int r = out.rank();
  const int64_t k = g_.tensor(op.inputs[0]).shape[r - 1];
  Access a = access(matmul_operand(plan_, i, 0)), b = access(matmul_operand(plan_, i, 1));
  w_.open("");
  w_.line("// #" + std::to_string(i) + " " + g_.tensor_name(op.output) + " " + out.str() +
          " = matmul(" + g_.tensor_name(op.inputs[0]) + ", " + g_.tensor_name(op.inputs[1]) +
          "): SIMT, one output element per thread and step");
  open_thread_loop(w_, "e", out.numel(), threads(), tid_);
  const Shape bs = batch_shape(out);
  int64_t mn = out[r - 2] * out[r - 1];
  w_.line("const int b = e / " + std::to_string(mn) + ", r = e / " + std::to_string(out[r - 1]) +
          " % " + std::to_string(out[r - 2]) + ", c = e % " + std::to_string(out[r - 1]) + ";");
  w_.line("(void)b;");
  std::vector<std::string> bidx = unflatten("b", bs);
  std::vector<std::string> ai = bidx, bi = bidx;
  ai.push_back("r");
  ai.push_back("kk");
  bi.push_back("kk");
  bi.push_back("c");
  w_.line("float v0 = 0.0f;");
  w_.line("#pragma unroll 4");
  // Ragged tiles: a ragged contraction stops at its present extent.
  const int e = plan_.ops[i].ragged_extent;
  const std::string k_end = e >= 0 ? ragged_present(e, in_loop_ ? "it" : "0") : std::to_string(k);
  w_.line("for (int kk = 0; kk < " + k_end + "; ++kk) v0 += " + a.load(ai) + " * " + b.load(bi) +
          ";");
  emit_matmul_sink(i, false);
  w_.close();
  w_.close();
}

}  // namespace strata::codegen
