// Rowwise kernels (include/strata/rowwise.h): every tensor of the block graph lives in
// registers, in thread-owned chunks of `vec` consecutive elements of the block's full tile;
// inputs are loaded and outputs stored with vector accesses straight from / to device memory;
// rows are reduced with shuffles (and one barrier through a double-buffered scratch area when a
// row spans several warps).
#include "block_emitter.h"
#include "reduction_code.h"
#include "strata/kernel_plan.h"

namespace strata::codegen {
namespace {

std::vector<int64_t> dense_strides(const Shape& s) {
  std::vector<int64_t> st(s.rank(), 1);
  for (int d = s.rank() - 2; d >= 0; --d) st[d] = st[d + 1] * s[d + 1];
  return st;
}

const char* axis_var(int a) {
  return a == 0 ? "bx" : a == 1 ? "by" : "bz";
}

std::string offset_of(const std::vector<std::string>& idx, const std::vector<int64_t>& st) {
  std::vector<std::string> terms;
  for (size_t d = 0; d < idx.size(); ++d) terms.push_back(mul(idx[d], st[d]));
  return sum(terms);
}

}  // namespace

Status BlockEmitter::emit_rowwise() {
  const RowwiseLayout& L = plan_.rowwise_layout;
  const int T = L.threads;
  const int64_t K = L.per_thread, V = L.vec, W = T / 32;
  const Shape& full = L.full;
  const int rank = full.rank();
  Shape row_shape = full;
  row_shape[rank - 1] = 1;
  const std::string Ks = std::to_string(K), Vs = std::to_string(V), Ts = std::to_string(T);
  w_.line("// rowwise: each thread owns chunks c = tid + k * " + Ts + " (k < " + Ks + ") of " + Vs +
          " elements of the " + full.str() + " tile, in registers");
  if (plan_.scratch_bytes > 0)
    w_.line("float* const red = reinterpret_cast<float*>(smem + " +
            std::to_string(plan_.scratch_offset) + ");  // row-reduction scratch, two buffers");
  w_.line("const int lane = tid & 31, warp = tid >> 5;");
  w_.line("(void)lane;");
  w_.line("(void)warp;");
  // Element indices of chunk k's first element, and the row of chunk k.
  auto chunk_index = [&](const std::string& k) {
    return unflatten("((tid + " + k + " * " + Ts + ") * " + Vs + ")", full);
  };
  auto row_of = [&](const std::string& k) {
    return "((tid + " + k + " * " + Ts + ") / " + std::to_string(L.chunks_per_row) + ")";
  };
  auto var = [](int t) { return "x" + std::to_string(t); };
  auto is_full = [&](int t) { return g_.tensor(t).shape == full; };
  int reductions = 0;
  for (int i = 0; i < static_cast<int>(g_.ops().size()); ++i) {
    const BlockOp& op = g_.op(i);
    const Category cat = op_category(op.kind);
    if (cat == Category::Source) {
      const int t = op.output, ii = op.attrs.input_index;
      const Shape& D = g_.input_shape(ii);
      // An input read in place through a kernel-level view: the rows of the tensor holding it.
      const InputView* view =
          plan_.input_views.empty() || !plan_.input_views[ii] ? nullptr : &*plan_.input_views[ii];
      const std::vector<int64_t> gs = dense_strides(view ? view->storage : D);
      std::vector<std::string> origin;
      for (int d = 0; d < D.rank(); ++d) {
        for (int a = 0; a < 3; ++a)
          if (op.attrs.imap[a] == d)
            origin.push_back(mul(axis_var(a), (D[d] / g_.grid()[a]) * gs[d]));
        if (view && !view->map.origin.empty()) origin.push_back(lit(view->map.origin[d] * gs[d]));
      }
      const std::string src = "gin" + std::to_string(ii) + " + " + paren(sum(origin));
      w_.line("// " + g_.tensor_name(t) + " " + g_.tensor(t).shape.str() + " <- input " +
              std::to_string(ii) + " " + D.str());
      if (is_full(t)) {
        w_.line("float " + var(t) + "[" + Ks + "][" + Vs + "];");
        w_.line("#pragma unroll");
        w_.open("for (int k = 0; k < " + Ks + "; ++k)");
        w_.line("strata_rt::load_f32<" + Vs + ">(" + src + " + " +
                paren(offset_of(chunk_index("k"), gs)) + ", " + var(t) + "[k]);");
      } else {
        w_.line("float " + var(t) + "[" + Ks + "];");
        w_.line("#pragma unroll");
        w_.open("for (int k = 0; k < " + Ks + "; ++k)");
        w_.line(var(t) + "[k] = strata_rt::to_f32((" + src + ")[" +
                offset_of(unflatten(row_of("k"), row_shape), gs) + "]);");
      }
      w_.close();
      continue;
    }
    if (cat == Category::Sink) {
      int oi = 0;
      while (g_.output_op(oi) != i) ++oi;
      const int t = op.inputs[0];
      const Shape& tile = g_.tensor(t).shape;
      const Shape& D = g_.output_shape(oi);
      const std::vector<int64_t> gs = dense_strides(D);
      std::vector<std::string> origin;
      for (int a = 0; a < 3; ++a)
        if (g_.grid()[a] > 1) {
          const int d = op.attrs.omap[a];
          origin.push_back(mul(axis_var(a), tile[d] * gs[d]));
        }
      const std::string OT = cuda_type(info_.output_dtypes[oi]);
      const std::string dst = "gout" + std::to_string(oi) + " + " + paren(sum(origin));
      w_.line("// save " + g_.tensor_name(t) + " -> output " + std::to_string(oi) + " " + D.str());
      w_.line("#pragma unroll");
      w_.open("for (int k = 0; k < " + Ks + "; ++k)");
      if (is_full(t)) {
        w_.line("strata_rt::store_f32<" + Vs + ">(" + dst + " + " +
                paren(offset_of(chunk_index("k"), gs)) + ", " + var(t) + "[k]);");
      } else {
        w_.line("if ((tid + k * " + Ts + ") % " + std::to_string(L.chunks_per_row) + " == 0) (" +
                dst + ")[" + offset_of(unflatten(row_of("k"), row_shape), gs) +
                "] = strata_rt::from_f32<" + OT + ">(" + var(t) + "[k]);");
      }
      w_.close();
      continue;
    }
    const int t = op.output;
    w_.line("// #" + std::to_string(i) + " " + g_.tensor_name(t) + " " + g_.tensor(t).shape.str() +
            " = " + std::string(op_name(op.kind)));
    if (cat == Category::Accum && !op_reduction(op.kind)) {  // F = 1: the input itself
      w_.line("auto& " + var(t) + " = " + var(op.inputs[0]) + ";");
      continue;
    }
    if (is_elementwise(op.kind) || cat == Category::Fused) {
      const bool f = is_full(t);
      w_.line("float " + var(t) + "[" + Ks + "]" + (f ? "[" + Vs + "]" : "") + ";");
      w_.line("#pragma unroll");
      w_.open("for (int k = 0; k < " + Ks + "; ++k)");
      if (f) {
        w_.line("#pragma unroll");
        w_.open("for (int j = 0; j < " + Vs + "; ++j)");
      }
      std::vector<std::string> ins;
      for (int x : op.inputs) ins.push_back(var(x) + (is_full(x) ? "[k][j]" : "[k]"));
      const std::string res = eval_elementwise(i, ins, "v" + std::to_string(t) + "_");
      w_.line(var(t) + (f ? "[k][j]" : "[k]") + " = " + res + ";");
      if (f) w_.close();
      w_.close();
      continue;
    }
    // A reduction over the last dim of a full tensor (its row of the reduction family).
    const int x = op.inputs[0];
    const ReductionCode red(op.kind, op.attrs);
    const std::string xe = var(x) + "[k][j]";
    w_.line("float s" + std::to_string(t) + "[" + Ks + "];  // row total of chunk k");
    w_.open("");
    w_.line("float p[" + Ks + "];");
    w_.line("#pragma unroll");
    w_.open("for (int k = 0; k < " + Ks + "; ++k)");
    w_.line("p[k] = " + red.identity() + ";");
    w_.line("#pragma unroll");
    w_.line("for (int j = 0; j < " + Vs + "; ++j) " + red.update("p[k]", red.premap(xe)));
    w_.close();
    if (L.block_rows) {
      const int64_t kpr = L.chunks_per_row / T, R = L.rows;
      const std::string Rs = std::to_string(R);
      const std::string buf = "red + " + std::to_string((reductions % 2) * W * R);
      w_.line("float pr[" + Rs + "];");
      w_.line("#pragma unroll");
      w_.open("for (int r = 0; r < " + Rs + "; ++r)");
      w_.line("pr[r] = " + red.identity() + ";");
      w_.line("#pragma unroll");
      w_.line("for (int q = 0; q < " + std::to_string(kpr) + "; ++q) " +
              red.update("pr[r]", "p[r * " + std::to_string(kpr) + " + q]"));
      w_.line("pr[r] = " + red.team(32, "pr[r]") + ";");
      w_.line("if (lane == 0) (" + buf + ")[warp * " + Rs + " + r] = pr[r];");
      w_.close();
      w_.line("__syncthreads();  // double-buffered: the next reduction uses the other buffer");
      w_.line("#pragma unroll");
      w_.open("for (int k = 0; k < " + Ks + "; ++k)");
      w_.line("const int r = k / " + std::to_string(kpr) + ";");
      w_.line("float total = " + red.identity() + ";");
      w_.line("#pragma unroll");
      w_.line("for (int q = 0; q < " + std::to_string(W) + "; ++q) " +
              red.update("total", "(" + buf + ")[q * " + Rs + " + r]"));
      w_.line("s" + std::to_string(t) + "[k] = total;");
      w_.close();
      ++reductions;
    } else {
      w_.line("#pragma unroll");
      w_.line("for (int k = 0; k < " + Ks + "; ++k) s" + std::to_string(t) +
              "[k] = " + red.team(static_cast<int>(L.chunks_per_row), "p[k]") + ";");
    }
    w_.close();
    const std::string s = "s" + std::to_string(t) + "[k]";
    if (op_category(op.kind) == Category::Norm) {
      w_.line("float " + var(t) + "[" + Ks + "][" + Vs + "];");
      w_.line("#pragma unroll");
      w_.open("for (int k = 0; k < " + Ks + "; ++k)");
      w_.line("const float inv = " + red.inverse(s, L.cols) + ";");
      w_.line("#pragma unroll");
      w_.line("for (int j = 0; j < " + Vs + "; ++j) " + var(t) + "[k][j] = " + var(x) +
              "[k][j] * inv;");
      w_.close();
    } else {
      w_.line("float " + var(t) + "[" + Ks + "];");
      w_.line("#pragma unroll");
      w_.line("for (int k = 0; k < " + Ks + "; ++k) " + var(t) +
              "[k] = " + red.finalize(s, L.cols) + ";");
    }
  }
  return Status::success();
}

}  // namespace strata::codegen
