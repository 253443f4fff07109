// After the loop (post level 0): accumulators leave registers, loop groups' partial sums are
// added up, means and RMS values are taken. Two steps when the plan says so (FinalizePlan): every
// thread first writes what it holds (into its loop group's copy), then, after a barrier, the
// block sums the copies into the first one and finalizes.
#include "block_emitter.h"
#include "reduction_code.h"
#include "strata/schedule.h"

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
    copy.base = "(" + a.base + " + " + std::to_string(pg * tp.group_elems) + ")";
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
  w_.line("strata_rt::load_f32<" + n + ">(&" + a.ref(idx) + ", " + name + ");");
  w_.line("#pragma unroll");
  w_.open("for (int pg = 1; pg < " + std::to_string(plan_.groups) + "; ++pg)");
  w_.line("float part[" + n + "];  // loop group pg's partials");
  Access copy = a;
  copy.base = "(" + a.base + " + pg * " + std::to_string(tp.group_elems) + ")";
  w_.line("strata_rt::load_f32<" + n + ">(&" + copy.ref(idx) + ", part);");
  const ReductionCode red(op.kind, op.attrs);
  w_.line("#pragma unroll");
  w_.line("for (int q = 0; q < " + n + "; ++q) " + red.update(name + "[q]", "part[q]"));
  w_.close();
  if (accum_finalizes(op.kind)) {
    w_.line("#pragma unroll");
    w_.line("for (int q = 0; q < " + n + "; ++q) " + name +
            "[q] = " + finalized(op, name + "[q]", finalize_count(g_, op)) + ";");
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
  w_.line("// " + g_.tensor_name(t) + ": register fragments -> shared memory" +
          (grouped() ? " (this loop group's copy)" : ""));
  w_.line("const int warp = " + tid_ + " >> 5;");
  w_.open("if (warp < " + std::to_string(tl.warps_m * tl.warps_n) + ")");
  w_.line("const int wm = warp / " + std::to_string(tl.warps_n) + ", wn = warp % " +
          std::to_string(tl.warps_n) + ";");
  std::vector<std::string> oidx = unflatten("b", batch_shape(s));
  oidx.push_back("r");
  oidx.push_back("c");
  w_.line("strata_rt::mma_epilogue<mma" + std::to_string(m) + ", " + std::to_string(tl.mt) + ", " +
          std::to_string(tl.nt) + ">(racc" + std::to_string(t) + ", wm * " + std::to_string(tl.mt) +
          ", wn * " + std::to_string(tl.nt) + ", [&](int b, int r, int c, float v0, float v1) {");
  w_.line("  (void)b;");
  w_.line("  strata_rt::store2(&" + a.ref(oidx) + ", v0, v1);");
  w_.line("});");
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
  std::vector<std::string> oidx = unflatten("b", batch_shape(s));
  oidx.push_back("r");
  oidx.push_back("0");
  w_.open("");
  w_.line("// " + g_.tensor_name(t) +
          ": row sums of the chain's fragments, reduced over each quad" +
          (grouped() ? " (this loop group's copy)" : ""));
  w_.line("const int warp = " + tid_ + " >> 5;");
  w_.open("if (warp < " + std::to_string(tl.warps_m) + ")");
  const ReductionCode red(op.kind, op.attrs);
  w_.line("strata_rt::mma_row_reduce<mma" + std::to_string(m1) + ", " + std::to_string(tl.mt) +
          (red.is_max() ? ", true" : "") + ">(racc" + std::to_string(t) + ", warp * " +
          std::to_string(tl.mt) + ", [&](int b, int r, float v) {");
  w_.line("  (void)b;");
  const std::string value =
      grouped() ? std::string("v") : finalized(op, "v", finalize_count(g_, op));
  w_.line("  " + a.ref(oidx) + " = " + value + ";");
  w_.line("});");
  w_.close();
  w_.close();
}

void BlockEmitter::emit_dump_running_max(int i) {
  const BlockOp& op = g_.op(i);
  const int t = op.output;
  const int m1 = plan_.ops[i].scan_of;
  const MmaTiling& tl = plan_.ops[m1].tiling;
  Access a = access(t);
  std::vector<std::string> oidx = unflatten("b", batch_shape(g_.tensor(t).shape));
  oidx.push_back("r");
  oidx.push_back("0");
  w_.open("");
  w_.line("// " + g_.tensor_name(t) + ": the chain's running row maxima -> this loop group's copy");
  w_.line("const int warp = " + tid_ + " >> 5;");
  w_.open("if (warp < " + std::to_string(tl.warps_m) + ")");
  w_.line("strata_rt::mma_row_reduce<mma" + std::to_string(m1) + ", " + std::to_string(tl.mt) +
          ", true>(rmax" + std::to_string(t) + ", warp * " + std::to_string(tl.mt) +
          ", [&](int b, int r, float v) {");
  w_.line("  (void)b;");
  w_.line("  " + a.ref(oidx) + " = v;");
  w_.line("});");
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
  if (!op_reduction(op.kind)) {  // accum, accum_rescale: element by element
    w_.line("#pragma unroll");
    w_.open("for (int k = 0; k < " + std::to_string(trips) + "; ++k)");
    w_.line("// " + g_.tensor_name(t) + ": thread-owned chunks -> shared memory");
    Shape cs = xs;
    if (r > 0) cs[r - 1] = xs[r - 1] / vec;
    const ChunkWalk walk = begin_chunk_step(cs);
    std::vector<std::string> idx = walk.idx;
    if (r > 0) idx[r - 1] = mul(idx[r - 1], vec);
    w_.line("strata_rt::store_f32<" + std::to_string(vec) + ">(&" + a.ref(idx, walk.swizzle_row) +
            ", " + racc + "[k]);");
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
  const std::string ref = a.ref(unflatten("o", as));
  const std::string trip_loop = "for (int k = 0; k < " + std::to_string(trips) + "; ++k)";
  const auto chunk_of_k = [&] {
    w_.line("const int c = " + tid_ + " + k * " + std::to_string(threads()) + ";");
  };
  if (team) {
    // Every team sum first, then the guarded updates: a branch between two team sums would
    // keep the compiler from overlapping their shuffle chains.
    w_.line("float sums[" + std::to_string(trips) + "];");
    w_.line("#pragma unroll");
    w_.open(trip_loop);
    w_.line("// " + g_.tensor_name(t) + ": per-chunk partial sums, added over each team");
    chunk_of_k();
    w_.line("sums[k] = c < " + std::to_string(chunks) + " ? " + racc + "[k] : " + red.identity() +
            ";");
    if (per_output > 1)
      w_.line("sums[k] = " + red.team(static_cast<int>(per_output), "sums[k]") + ";");
    w_.close();
    w_.line("#pragma unroll");
    w_.open(trip_loop);
    w_.line("// " + g_.tensor_name(t) + ": team sums -> shared accumulator");
    chunk_of_k();
    w_.line("const int o = c / " + std::to_string(per_output) + ";");
    w_.line("if (c < " + std::to_string(chunks) + " && " + tid_ + " % " +
            std::to_string(per_output) + " == 0) " + red.update(ref, "sums[k]"));
  } else {
    w_.line("#pragma unroll");
    w_.open(trip_loop);
    w_.line("// " + g_.tensor_name(t) + ": per-chunk partial sums -> shared accumulator");
    chunk_of_k();
    w_.line("const int o = c / " + std::to_string(per_output) + ";");
    w_.line("if (c < " + std::to_string(chunks) + ") " +
            red.atomic_update("&" + ref, racc + "[k]"));
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
  std::vector<std::string> idx = unflatten("e", s);
  const std::string off = a.offset(idx);
  w_.open("");
  w_.line("// " + g_.tensor_name(t) + ": sum of the " + std::to_string(plan_.groups) +
          " loop groups' partials" + (finalize ? ", then " + std::string(op_name(op.kind)) : ""));
  w_.open("for (int e = tid; e < " + std::to_string(s.numel()) +
          "; e += " + std::to_string(plan_.threads) + ")");
  const ReductionCode red(op.kind, op.attrs);
  if (rescales(op.kind)) {
    // Each group's partial is expressed in its own final max m_g (its copy of the shift): the
    // sum is Σ_g partial_g · e^(m_g − M) with M the max over the groups.
    const int m = op.inputs[1];
    const Shape& ms = g_.tensor(m).shape;
    const Access ma = access(m);
    const std::string moff = ma.offset(broadcast_index(ms, idx));
    const std::string mg = std::to_string(plan_.tensors[m].group_elems);
    auto shift = [&](const std::string& pg) {
      return ma.base + "[" + (pg == "0" ? moff : pg + " * " + mg + " + " + paren(moff)) + "]";
    };
    auto part = [&](const std::string& pg) {
      return a.base + "[" +
             (pg == "0" ? off : pg + " * " + std::to_string(tp.group_elems) + " + " + paren(off)) +
             "]";
    };
    w_.line("float mmax = " + shift("0") + ";");
    w_.line("#pragma unroll");
    w_.line("for (int pg = 1; pg < " + std::to_string(plan_.groups) +
            "; ++pg) mmax = fmaxf(mmax, " + shift("pg") + ");");
    w_.line("float v = " + part("0") + " * strata_rt::rescale_factor(" + shift("0") + ", mmax);");
    w_.line("#pragma unroll");
    w_.line("for (int pg = 1; pg < " + std::to_string(plan_.groups) + "; ++pg) v += " + part("pg") +
            " * strata_rt::rescale_factor(" + shift("pg") + ", mmax);");
    w_.line(a.base + "[" + off + "] = v;");
    w_.close();
    w_.close();
    return;
  }
  w_.line("float v = " + a.base + "[" + off + "];");
  w_.line("#pragma unroll");
  w_.line("for (int pg = 1; pg < " + std::to_string(plan_.groups) + "; ++pg) " +
          red.update(
              "v", a.base + "[pg * " + std::to_string(tp.group_elems) + " + " + paren(off) + "]"));
  w_.line(a.base + "[" + off + "] = " +
          (finalize ? finalized(op, "v", finalize_count(g_, op)) : std::string("v")) + ";");
  w_.close();
  w_.close();
}

void BlockEmitter::emit_finalize_shared(int i) {
  const BlockOp& op = g_.op(i);
  const int t = op.output;
  const Shape& s = g_.tensor(t).shape;
  Access a = access(t);
  const int64_t count = finalize_count(g_, op);
  w_.open("");
  w_.line("// finalize " + g_.tensor_name(t) + ": " + std::string(op_name(op.kind)) + " over " +
          std::to_string(count) + " elements per row");
  w_.open("for (int e = tid; e < " + std::to_string(s.numel()) +
          "; e += " + std::to_string(plan_.threads) + ")");
  std::string ref = a.ref(unflatten("e", s));
  w_.line(ref + " = " + finalized(op, ref, count) + ";");
  w_.close();
  w_.close();
}

}  // namespace strata::codegen
