// After the loop (post level 0): accumulators leave registers, loop groups' partial sums are
// added up, means and RMS values are taken. Two steps when the plan says so (FinalizePlan): every
// thread first writes what it holds (into its loop group's copy), then, after a barrier, the
// block sums the copies into the first one and finalizes.
#include "block_emitter.h"
#include "reduction_code.h"
#include "strata/opt/schedule.h"

namespace strata::codegen {
namespace {

/// Elements per output row over all iterations (the mean / RMS divisor).
int64_t finalize_count(const BlockGraph& g, const BlockOp& op) {
  const Shape& in = g.tensor(op.inputs[0]).shape;
  return int64_t{g.forloop()} * (in.rank() == 0 ? 1 : in[in.rank() - 1]);
}

/// The loop result of accumulator `op` from its combined state `v` (a mean, an RMS, or v).
std::string finalized(const BlockOp& op, const std::string& v, int64_t count) {
  return ReductionCode(op.kind, op.attrs).finalize(v, count);
}

}  // namespace

void BlockEmitter::emit_finalize() {
  const FinalizePlan& fin = plan_.emission.finalize;
  const int n = static_cast<int>(g_.ops().size());
  // Step 1: what each thread holds, into its loop group's copy.
  set_group_scope(true);
  for (int i = 0; i < n; ++i) {
    const BlockOp& op = g_.op(i);
    const OpPlan& p = plan_.ops[i];
    const TensorHome home = op.output >= 0 ? plan_.tensors[op.output].home : TensorHome::Shared;
    if (p.scan_of >= 0 && home == TensorHome::Registers) emit_dump_running_max(i);
    if (op_category(op.kind) != Category::Accum) continue;
    if (p.rowsum_of >= 0)
      emit_dump_rowsums(i);
    else if (p.register_accum)
      emit_dump_register_accum(i);
    else if (home == TensorHome::Registers)
      emit_dump_fragments(i);
  }
  set_group_scope(false);
  if (fin.two_steps) barrier();
  // Step 2: loop groups' copies summed; means and RMS values.
  for (int i = 0; i < n; ++i) {
    switch (fin.step_two[i]) {
      case StepTwo::SumPartials:
        emit_sum_partials(i, accum_finalizes(g_.op(i).kind));
        break;
      case StepTwo::FinalizeShared:
        emit_finalize_shared(i);
        break;
      case StepTwo::Nothing:
        break;
    }
  }
}

std::string BlockEmitter::summed_value(int t, const std::vector<std::string>& idx) const {
  const TensorPlan& tp = plan_.tensors[t];
  const BlockOp& op = g_.op(g_.tensor(t).producer);
  const Access a = access(t);
  const ReductionCode red(op.kind, op.attrs);
  std::string v = a.load(idx);
  for (int pg = 1; pg < plan_.groups; ++pg) {
    Access copy = a;
    copy.base = a.base + pg * tp.group_elems;
    v = red.is_max() ? red.combine(v, copy.load(idx)) : v + " + " + copy.load(idx);
  }
  return finalized(op, "(" + v + ")", finalize_count(g_, op));
}

void BlockEmitter::emit_summed_vector(int t, const std::vector<std::string>& idx, int64_t vec,
                                      const std::string& name) {
  const TensorPlan& tp = plan_.tensors[t];
  const BlockOp& op = g_.op(g_.tensor(t).producer);
  const Access a = access(t);
  const std::string n = std::to_string(vec);
  const ir::Expr pg = ir::var("pg"), q = ir::var("q"), part = ir::var("part");
  w_.call("strata_rt::load_f32<" + n + ">", {ir::addr(a.ref(exprs(idx))), ir::var(name)});
  w_.open(ir::for_loop("pg", 1, pg < plan_.groups, {}, "unroll"));
  w_.add(ir::decl_array("float", "part", {vec}, {}, "loop group pg's partials"));
  Access copy = a;
  copy.base = a.base + pg * tp.group_elems;
  w_.call("strata_rt::load_f32<" + n + ">", {ir::addr(copy.ref(exprs(idx))), part});
  const ReductionCode red(op.kind, op.attrs);
  w_.add(ir::for_compact("q", 0, q < vec, ir::verbatim_stmt(red.update(name + "[q]", "part[q]")),
                         "unroll"));
  w_.close();
  if (accum_finalizes(op.kind)) {
    const ir::Expr at = ir::index(ir::var(name), q);
    w_.add(ir::for_compact(
        "q", 0, q < vec,
        ir::assign(at, ir::verbatim(finalized(op, name + "[q]", finalize_count(g_, op)))),
        "unroll"));
  }
}

void BlockEmitter::emit_dump_fragments(int i) {
  const BlockOp& op = g_.op(i);
  const int t = op.output;
  const Shape& s = g_.tensor(t).shape;
  const int m = g_.tensor(op.inputs[0]).producer;
  const MmaTiling& tl = plan_.ops[m].tiling;
  Access a = access(t);
  w_.open("");
  w_.comment(g_.tensor_name(t) + ": register fragments -> shared memory" +
             (grouped() ? " (this loop group's copy)" : ""));
  const ir::Expr warp = ir::var("warp");
  w_.add(ir::decl("const int", "warp", ir::binary(">>", tid(), ir::int_lit(5))));
  w_.open(ir::if_then(warp < tl.warps_m * tl.warps_n));
  w_.add(ir::decl_many("const int", {"wm", "wn"}, {warp / tl.warps_n, warp % tl.warps_n}));
  std::vector<ir::Expr> oidx = unflatten(ir::var("b"), batch_shape(s));
  oidx.push_back(ir::var("r"));
  oidx.push_back(ir::var("c"));
  w_.open(ir::lambda_call(
      "strata_rt::mma_epilogue<mma" + std::to_string(m) + ", " + std::to_string(tl.mt) + ", " +
          std::to_string(tl.nt) + ">",
      {ir::var("racc" + std::to_string(t)), ir::var("wm") * tl.mt, ir::var("wn") * tl.nt},
      "int b, int r, int c, float v0, float v1"));
  w_.add(ir::eval(ir::c_cast("void", ir::var("b"))));
  emit_odd_tail_sink(m, [&](bool pair) {
    if (pair)
      w_.call("strata_rt::store2", {ir::addr(a.ref(oidx)), ir::var("v0"), ir::var("v1")});
    else
      w_.add(ir::assign(a.ref(oidx),
                        ir::call("strata_rt::from_f32<" + dtype_of(t) + ">", {ir::var("v0")})));
  });
  w_.close();
  w_.close();
  w_.close();
}

void BlockEmitter::emit_dump_rowsums(int i) {
  const BlockOp& op = g_.op(i);
  const int t = op.output;
  const Shape& s = g_.tensor(t).shape;
  const int m1 = plan_.ops[i].rowsum_of;
  const MmaTiling& tl = plan_.ops[m1].tiling;
  Access a = access(t);
  std::vector<ir::Expr> oidx = unflatten(ir::var("b"), batch_shape(s));
  oidx.push_back(ir::var("r"));
  oidx.push_back(ir::int_lit(0));
  w_.open("");
  w_.comment(g_.tensor_name(t) + ": row sums of the chain's fragments, reduced over each quad" +
             (grouped() ? " (this loop group's copy)" : ""));
  const ir::Expr warp = ir::var("warp");
  w_.add(ir::decl("const int", "warp", ir::binary(">>", tid(), ir::int_lit(5))));
  w_.open(ir::if_then(warp < tl.warps_m));
  const ReductionCode red(op.kind, op.attrs);
  w_.open(ir::lambda_call("strata_rt::mma_row_reduce<mma" + std::to_string(m1) + ", " +
                              std::to_string(tl.mt) + (red.is_max() ? ", true" : "") + ">",
                          {ir::var("racc" + std::to_string(t)), warp * tl.mt},
                          "int b, int r, float v"));
  w_.add(ir::eval(ir::c_cast("void", ir::var("b"))));
  const std::string value =
      grouped() ? std::string("v") : finalized(op, "v", finalize_count(g_, op));
  w_.add(ir::assign(a.ref(oidx), value == "v" ? ir::var("v") : ir::verbatim(value)));
  w_.close();
  w_.close();
  w_.close();
}

void BlockEmitter::emit_dump_running_max(int i) {
  const BlockOp& op = g_.op(i);
  const int t = op.output;
  const int m1 = plan_.ops[i].scan_of;
  const MmaTiling& tl = plan_.ops[m1].tiling;
  Access a = access(t);
  std::vector<ir::Expr> oidx = unflatten(ir::var("b"), batch_shape(g_.tensor(t).shape));
  oidx.push_back(ir::var("r"));
  oidx.push_back(ir::int_lit(0));
  w_.open("");
  w_.comment(g_.tensor_name(t) + ": the chain's running row maxima -> this loop group's copy");
  const ir::Expr warp = ir::var("warp");
  w_.add(ir::decl("const int", "warp", ir::binary(">>", tid(), ir::int_lit(5))));
  w_.open(ir::if_then(warp < tl.warps_m));
  w_.open(ir::lambda_call("strata_rt::mma_row_reduce<mma" + std::to_string(m1) + ", " +
                              std::to_string(tl.mt) + ", true>",
                          {ir::var("rmax" + std::to_string(t)), warp * tl.mt},
                          "int b, int r, float v"));
  w_.add(ir::eval(ir::c_cast("void", ir::var("b"))));
  w_.add(ir::assign(a.ref(oidx), ir::var("v")));
  w_.close();
  w_.close();
  w_.close();
}

void BlockEmitter::emit_dump_register_accum(int i) {
  const BlockOp& op = g_.op(i);
  const int t = op.output, x = op.inputs[0];
  const Shape& xs = g_.tensor(x).shape;
  const Shape& as = g_.tensor(t).shape;
  const int64_t vec = accum_vec(i), trips = accum_trips(i), chunks = xs.numel() / vec;
  const int r = xs.rank();
  const std::string racc = "racc" + std::to_string(t);
  Access a = access(t);
  w_.open("");
  const ir::Expr k = ir::var("k"), c = ir::var("c"), acc_k = ir::index(ir::var(racc), k);
  if (!op_reduction(op.kind)) {  // accum, accum_rescale: element by element
    w_.open(ir::for_loop("k", 0, k < trips, {}, "unroll"));
    w_.comment(g_.tensor_name(t) + ": thread-owned chunks -> shared memory");
    Shape cs = xs;
    if (r > 0) cs[r - 1] = xs[r - 1] / vec;
    const ChunkWalk walk = begin_chunk_step(cs);
    std::vector<ir::Expr> idx = walk.idx;
    if (r > 0) idx[r - 1] = idx[r - 1] * vec;
    w_.call("strata_rt::store_f32<" + std::to_string(vec) + ">",
            {ir::addr(a.ref(idx, walk.swizzle_row)), acc_k});
    w_.close();
    w_.close();
    return;
  }
  // Reducing accumulators: chunks of one output are added together, then into the (zeroed)
  // shared accumulator, by a team of lanes when they share a warp, else atomically.
  const int64_t last = r == 0 ? 1 : xs[r - 1];
  const int64_t group = op_reduction(op.kind) ? reduction_shape(op, xs).group() : last;
  const int64_t per_output = group / vec;
  const bool team = per_output <= 32 && 32 % per_output == 0 && threads() % per_output == 0;
  const ReductionCode red(op.kind, op.attrs);
  const std::string ref = ir::print_expr(a.ref(unflatten(ir::var("o"), as)));
  const auto trip_loop = [&] { return ir::for_loop("k", 0, k < trips, {}, "unroll"); };
  const auto chunk_of_k = [&] { w_.add(ir::decl("const int", "c", tid() + k * threads())); };
  const ir::Expr sums_k = ir::index(ir::var("sums"), k);
  if (team) {
    // Every team sum first, then the guarded updates: a branch between two team sums would
    // keep the compiler from overlapping their shuffle chains.
    w_.add(ir::decl_array("float", "sums", {trips}));
    w_.open(trip_loop());
    w_.comment(g_.tensor_name(t) + ": per-chunk partial sums, added over each team");
    chunk_of_k();
    w_.add(ir::assign(sums_k, ir::select(c < chunks, acc_k, ir::verbatim(red.identity()))));
    if (per_output > 1)
      w_.add(ir::assign(sums_k, ir::verbatim(red.team(static_cast<int>(per_output), "sums[k]"))));
    w_.close();
    w_.open(trip_loop());
    w_.comment(g_.tensor_name(t) + ": team sums -> shared accumulator");
    chunk_of_k();
    w_.add(ir::decl("const int", "o", c / per_output));
    w_.add(ir::if_compact(ir::land(c < chunks, ir::eq(tid() % per_output, 0)),
                          ir::verbatim_stmt(red.update(ref, "sums[k]"))));
  } else {
    w_.open(trip_loop());
    w_.comment(g_.tensor_name(t) + ": per-chunk partial sums -> shared accumulator");
    chunk_of_k();
    w_.add(ir::decl("const int", "o", c / per_output));
    w_.add(
        ir::if_compact(c < chunks, ir::verbatim_stmt(red.atomic_update("&" + ref, racc + "[k]"))));
  }
  w_.close();
  w_.close();
}

void BlockEmitter::emit_sum_partials(int i, bool finalize) {
  const BlockOp& op = g_.op(i);
  const int t = op.output;
  const TensorPlan& tp = plan_.tensors[t];
  const Shape& s = g_.tensor(t).shape;
  Access a = access(t);
  const ir::Expr e = ir::var("e"), pg = ir::var("pg"), v = ir::var("v");
  std::vector<ir::Expr> idx = unflatten(e, s);
  const ir::Expr off = a.offset(idx);
  w_.open("");
  w_.comment(g_.tensor_name(t) + ": sum of the " + std::to_string(plan_.groups) +
             " loop groups' partials" +
             (finalize ? ", then " + std::string(op_name(op.kind)) : ""));
  w_.open(ir::for_loop("e", ir::var("tid"), e < s.numel(), plan_.threads));
  const ReductionCode red(op.kind, op.attrs);
  // Loop group pg's copy of an element at offset `o` of storage `base`.
  auto copy_at = [&](const ir::Expr& base, const ir::Expr& o, const ir::Expr& g, int64_t elems) {
    return ir::index(base, g.is(0) ? o : ir::binary("+", g * elems, o));
  };
  if (rescales(op.kind)) {
    // Each group's partial is expressed in its own final max m_g (its copy of the shift): the
    // sum is Σ_g partial_g · e^(m_g − M) with M the max over the groups.
    const int m = op.inputs[1];
    const Shape& ms = g_.tensor(m).shape;
    const Access ma = access(m);
    const ir::Expr moff = ma.offset(broadcast_index(ms, idx));
    const int64_t mg = plan_.tensors[m].group_elems;
    auto shift = [&](const ir::Expr& g) { return copy_at(ma.base, moff, g, mg); };
    auto part = [&](const ir::Expr& g) { return copy_at(a.base, off, g, tp.group_elems); };
    const ir::Expr mmax = ir::var("mmax");
    w_.add(ir::decl("float", "mmax", shift(0)));
    w_.add(ir::for_compact("pg", 1, pg < plan_.groups,
                           ir::assign(mmax, ir::call("fmaxf", {mmax, shift(pg)})), "unroll"));
    w_.add(
        ir::decl("float", "v", part(0) * ir::call("strata_rt::rescale_factor", {shift(0), mmax})));
    w_.add(ir::for_compact(
        "pg", 1, pg < plan_.groups,
        ir::assign(v, part(pg) * ir::call("strata_rt::rescale_factor", {shift(pg), mmax}), "+="),
        "unroll"));
    w_.add(ir::assign(ir::index(a.base, off), v));
    w_.close();
    w_.close();
    return;
  }
  w_.add(ir::decl("float", "v", ir::index(a.base, off)));
  w_.add(ir::for_compact(
      "pg", 1, pg < plan_.groups,
      ir::verbatim_stmt(red.update("v", ir::print_expr(copy_at(a.base, off, pg, tp.group_elems)))),
      "unroll"));
  // Ragged tiles: a mean over a ragged dim divides by the elements present.
  const ir::Expr rc = ragged_count(i);
  w_.add(ir::assign(ir::index(a.base, off),
                    !finalize ? v
                    : rc      ? ir::verbatim(red.finalize("v", ir::print_expr(rc)))
                              : ir::verbatim(finalized(op, "v", finalize_count(g_, op)))));
  w_.close();
  w_.close();
}

void BlockEmitter::emit_finalize_shared(int i) {
  const BlockOp& op = g_.op(i);
  const int t = op.output;
  const Shape& s = g_.tensor(t).shape;
  Access a = access(t);
  const int64_t count = finalize_count(g_, op);
  // Ragged tiles: a mean over a ragged dim divides by the elements present.
  const ir::Expr rc = ragged_count(i);
  w_.open("");
  w_.comment("finalize " + g_.tensor_name(t) + ": " + std::string(op_name(op.kind)) + " over " +
             (rc ? ir::print_expr(rc) : std::to_string(count)) + " elements per row");
  const ir::Expr e = ir::var("e");
  w_.open(ir::for_loop("e", ir::var("tid"), e < s.numel(), plan_.threads));
  const ir::Expr ref = a.ref(unflatten(e, s));
  const std::string rtext = ir::print_expr(ref);
  w_.add(ir::assign(
      ref, ir::verbatim(rc ? ReductionCode(op.kind, op.attrs).finalize(rtext, ir::print_expr(rc))
                           : finalized(op, rtext, count))));
  w_.close();
  w_.close();
}

}  // namespace strata::codegen
