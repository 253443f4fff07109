// Rowwise kernels (include/strata/opt/rowwise.h): every tensor of the block graph lives in
// registers, in thread-owned chunks of `vec` consecutive elements of the block's full tile;
// inputs are loaded and outputs stored with vector accesses straight from / to device memory;
// rows are reduced with shuffles (and one barrier through a double-buffered scratch area when a
// row spans several warps). Tensors narrower than a row (slices along the last dim and what is
// computed from them) are evaluated where a concat reads them, from inputs loaded again at the
// columns read (RowwiseForm::Gathered).
#include <algorithm>
#include <functional>

#include "block_emitter.h"
#include "reduction_code.h"
#include "strata/opt/kernel_plan.h"

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

}  // namespace

Status BlockEmitter::emit_rowwise() {
  const RowwiseLayout& L = plan_.rowwise_layout;
  const int T = L.threads;
  const int64_t K = L.per_thread, V = L.vec, W = T / 32;
  const bool parts = L.parts.size() > 1;
  std::string tiles;
  for (const RowwisePart& part : L.parts) tiles += (tiles.empty() ? "" : " and ") + part.full.str();
  w_.comment("rowwise: each thread owns chunks c = tid + k * " + std::to_string(T) + " (k < " +
             std::to_string(K) + ") of " + std::to_string(V) + " elements of the " + tiles +
             (parts ? " tiles" : " tile") + ", in registers");
  if (plan_.scratch_bytes > 0)
    w_.add(
        ir::decl("float* const", "red",
                 ir::reinterpret_cast_to(
                     "float*", ir::binary("+", ir::var("smem"), ir::int_lit(plan_.scratch_offset))),
                 "row-reduction scratch, two buffers"));
  const ir::Expr tid = ir::var("tid"), k = ir::var("k"), j = ir::var("j"), q = ir::var("q");
  const ir::Expr r = ir::var("r"), lane = ir::var("lane"), warp = ir::var("warp");
  w_.add(ir::decl_many(
      "const int", {"lane", "warp"},
      {ir::binary("&", tid, ir::int_lit(31)), ir::binary(">>", tid, ir::int_lit(5))}));
  w_.add(ir::eval(ir::c_cast("void", lane)));
  w_.add(ir::eval(ir::c_cast("void", warp)));
  const ir::Expr chunk = tid + k * T;  // chunk k of this thread
  // Per part: its full tile, the element indices of chunk k's first element in it, the row of
  // chunk k in it (rows of row_chunks chunks, the last ones idle where a row has fewer), and
  // whether chunk k holds elements of the part (none when every chunk does).
  const int64_t P = L.row_chunks;
  struct Geometry {
    Shape full, row_shape;
    std::vector<ir::Expr> index;
    ir::Expr row, busy;
  };
  std::vector<Geometry> geo;
  for (const RowwisePart& part : L.parts) {
    Geometry G;
    G.full = G.row_shape = part.full;
    G.row_shape[G.row_shape.rank() - 1] = 1;
    const ir::Expr c = part.row_offset == 0 ? chunk : chunk - part.row_offset * P;
    G.index = P == L.chunks_per_row ? unflatten(c * V, part.full)
                                    : unflatten(c / P * L.cols + c % P * V, part.full);
    G.row = c / P;
    std::vector<ir::Expr> terms;
    if (P != L.chunks_per_row) terms.push_back(chunk % P < L.chunks_per_row);
    if (part.row_offset > 0) terms.push_back(chunk >= part.row_offset * P);
    if (K * T > (part.row_offset + part.rows) * P)
      terms.push_back(chunk < (part.row_offset + part.rows) * P);
    for (const ir::Expr& e : terms) G.busy = G.busy ? ir::land(G.busy, e) : e;
    geo.push_back(std::move(G));
  }
  const ir::Expr zero = L.idle_chunks || parts ? ir::aggregate_zero() : ir::Expr{};
  // Opens `if (chunk k holds elements of the part)` where some chunk does not; close_busy
  // closes it.
  auto open_busy = [&](const Geometry& G) {
    if (G.busy) w_.open(ir::if_then(G.busy));
  };
  auto close_busy = [&](const Geometry& G) {
    if (G.busy) w_.close();
  };
  // The parts that read each input op's tile.
  std::vector<std::vector<int>> readers(g_.ops().size());
  for (int i = 0; i < static_cast<int>(g_.ops().size()); ++i)
    for (int x : g_.op(i).inputs) {
      std::vector<int>& r = readers[g_.tensor(x).producer];
      if (L.part_of_op[i] >= 0 && std::find(r.begin(), r.end(), L.part_of_op[i]) == r.end())
        r.push_back(L.part_of_op[i]);
    }
  auto x_of = [](int t) { return ir::var("x" + std::to_string(t)); };
  auto name_of = [](int t) { return "x" + std::to_string(t); };
  auto form = [&](int t) { return L.forms[t]; };
  auto offset_of = [](const std::vector<ir::Expr>& idx, const std::vector<int64_t>& st) {
    std::vector<ir::Expr> terms;
    for (size_t d = 0; d < idx.size(); ++d) terms.push_back(idx[d] * st[d]);
    return ir::sum(terms);
  };
  // The indices in tile shape `s` (aligned with the full tile from the right) of the full
  // tile's element `idx`: 0 along the dims `s` broadcasts.
  auto tile_index = [&](const Shape& s, const Shape& full, const std::vector<ir::Expr>& idx) {
    std::vector<ir::Expr> out;
    for (int d = 0; d < s.rank(); ++d) {
      const int fd = d + full.rank() - s.rank();
      out.push_back(s[d] == 1 && full[fd] != 1 ? ir::int_lit(0) : idx[fd]);
    }
    return out;
  };
  auto k_loop = [&] { return ir::for_loop("k", 0, k < K, {}, "unroll"); };
  // Input op i's tile: its first element in device memory and the device strides.
  auto input_source = [&](const BlockOp& op) {
    const int ii = op.attrs.input_index;
    const Shape& D = g_.input_shape(ii);
    // An input read in place through a kernel-level view: the rows of the tensor holding it.
    const InputView* view =
        plan_.input_views.empty() || !plan_.input_views[ii] ? nullptr : &*plan_.input_views[ii];
    std::vector<int64_t> gs = dense_strides(view ? view->storage : D);
    std::vector<ir::Expr> origin;
    for (int d = 0; d < D.rank(); ++d) {
      for (int a = 0; a < 3; ++a)
        if (op.attrs.imap[a] == d)
          origin.push_back(ir::var(axis_var(a)) * ((D[d] / g_.grid()[a]) * gs[d]));
      if (view && !view->map.origin.empty())
        origin.push_back(ir::int_lit(view->map.origin[d] * gs[d]));
    }
    return std::pair{ir::binary("+", ir::var("gin" + std::to_string(ii)), ir::sum(origin)),
                     std::move(gs)};
  };
  // Statements leaving gathered (or row) tensor t's values at chunk k's row, columns
  // col … col + V − 1 of t, in the float[V] array `dst`.
  int temps = 0;
  const Geometry* gather_at = nullptr;  // the part of the concat gathering
  std::function<void(int, ir::Expr, const std::string&)> gather = [&](int t, ir::Expr col,
                                                                      const std::string& dst) {
    const ir::Expr j = ir::var("j");
    const BlockOp& p = g_.op(g_.tensor(t).producer);
    if (form(t) == RowwiseForm::Rows) {
      w_.add(ir::for_compact(
          "j", 0, j < V, ir::assign(ir::index(ir::var(dst), j), ir::index(x_of(t), k)), "unroll"));
      return;
    }
    if (p.kind == OpKind::Input) {
      auto [src, gs] = input_source(p);
      std::vector<ir::Expr> idx = gather_at->index;
      idx.back() = col;
      w_.call("strata_rt::load_f32<" + std::to_string(V) + ">",
              {ir::binary("+", src,
                          offset_of(tile_index(g_.tensor(t).shape, gather_at->full, idx), gs)),
               ir::var(dst)});
      return;
    }
    if (p.kind == OpKind::Slice) {
      gather(p.inputs[0], col + p.attrs.start, dst);
      return;
    }
    if (p.kind == OpKind::Concat) {
      const int64_t w0 = g_.tensor(p.inputs[0]).shape[g_.tensor(p.inputs[0]).shape.rank() - 1];
      w_.open(ir::if_then(col < w0));
      gather(p.inputs[0], col, dst);
      w_.close();
      w_.open(ir::if_then(col >= w0));
      gather(p.inputs[1], col - w0, dst);
      w_.close();
      return;
    }
    // An elementwise op or thread graph of gathered operands (and rows).
    std::vector<std::string> ins;
    const int n = temps++;
    for (size_t a = 0; a < p.inputs.size(); ++a) {
      const int x = p.inputs[a];
      if (form(x) == RowwiseForm::Rows) {
        ins.push_back(name_of(x) + "[k]");
        continue;
      }
      const std::string tmp = "g" + std::to_string(n) + "_" + std::to_string(a);
      w_.add(ir::decl_array("float", tmp, {V}));
      gather(x, col, tmp);
      ins.push_back(tmp + "[j]");
    }
    w_.open(ir::for_loop("j", 0, j < V, {}, "unroll"));
    const std::string res = eval_elementwise(
        g_.tensor(t).producer, ins, "v" + std::to_string(t) + "_" + std::to_string(n) + "_");
    w_.add(ir::assign(ir::index(ir::var(dst), j), ir::verbatim(res)));
    w_.close();
  };
  int reductions = 0;
  // Part `cur`'s ops (and its loads of the input tiles it reads), in graph order.
  auto emit_part = [&](int cur) {
    for (int i = 0; i < static_cast<int>(g_.ops().size()); ++i) {
      const BlockOp& op = g_.op(i);
      const Category cat = op_category(op.kind);
      if (cat == Category::Source
              ? std::find(readers[i].begin(), readers[i].end(), cur) == readers[i].end()
              : L.part_of_op[i] != cur)
        continue;
      if (cat == Category::Source) {
        const int t = op.output, ii = op.attrs.input_index;
        const Shape& D = g_.input_shape(ii);
        const Shape& S = g_.tensor(t).shape;
        auto [src, gs] = input_source(op);
        w_.comment(g_.tensor_name(t) + " " + S.str() + " <- input " + std::to_string(ii) + " " +
                   D.str() + (form(t) == RowwiseForm::Gathered ? ": loaded where read" : ""));
        if (form(t) == RowwiseForm::Gathered) continue;
        const bool chunks = form(t) == RowwiseForm::Chunks;
        w_.add(ir::decl_array("float", name_of(t),
                              chunks ? std::vector<int64_t>{K, V} : std::vector<int64_t>{K}, zero));
        {  // each part reading the tile loads its chunks of it
          const Geometry& G = geo[cur];
          w_.open(k_loop());
          open_busy(G);
          if (chunks)
            w_.call("strata_rt::load_f32<" + std::to_string(V) + ">",
                    {ir::binary("+", src, offset_of(tile_index(S, G.full, G.index), gs)),
                     ir::index(x_of(t), k)});
          else
            w_.add(ir::assign(
                ir::index(x_of(t), k),
                ir::call("strata_rt::to_f32",
                         {ir::index(src, offset_of(tile_index(S, G.row_shape,
                                                              unflatten(G.row, G.row_shape)),
                                                   gs))})));
          close_busy(G);
          w_.close();
        }
        continue;
      }
      const Geometry& G = geo[L.part_of_op[i]];
      if (cat == Category::Sink) {
        int oi = 0;
        while (g_.output_op(oi) != i) ++oi;
        const int t = op.inputs[0];
        const Shape& tile = g_.tensor(t).shape;
        const Shape& D = g_.output_shape(oi);
        const std::vector<int64_t> gs = dense_strides(D);
        std::vector<ir::Expr> origin;
        for (int a = 0; a < 3; ++a)
          if (g_.grid()[a] > 1) {
            const int d = op.attrs.omap[a];
            origin.push_back(ir::var(axis_var(a)) * (tile[d] * gs[d]));
          }
        const std::string OT = cuda_type(info_.output_dtypes[oi]);
        const ir::Expr dst = ir::binary("+", ir::var("gout" + std::to_string(oi)), ir::sum(origin));
        w_.comment("save " + g_.tensor_name(t) + " -> output " + std::to_string(oi) + " " +
                   D.str());
        w_.open(k_loop());
        if (form(t) == RowwiseForm::Chunks) {
          open_busy(G);
          w_.call("strata_rt::store_f32<" + std::to_string(V) + ">",
                  {ir::binary("+", dst, offset_of(G.index, gs)), ir::index(x_of(t), k)});
          close_busy(G);
        } else {
          const ir::Expr first = ir::eq(chunk % P, 0);
          w_.add(ir::if_compact(
              G.busy ? ir::land(first, G.busy) : first,
              ir::assign(ir::index(dst, offset_of(unflatten(G.row, G.row_shape), gs)),
                         ir::call("strata_rt::from_f32<" + OT + ">", {ir::index(x_of(t), k)}))));
        }
        w_.close();
        continue;
      }
      if (form(op.output) == RowwiseForm::Gathered) {
        w_.comment("#" + std::to_string(i) + " " + g_.tensor_name(op.output) + " " +
                   g_.tensor(op.output).shape.str() + " = " + std::string(op_name(op.kind)) +
                   ": evaluated where read");
        continue;
      }
      if (op.kind == OpKind::Concat) {
        // A full row from gathered operands: each chunk evaluates the operand its columns lie in.
        const int t = op.output;
        w_.comment("#" + std::to_string(i) + " " + g_.tensor_name(t) + " " +
                   g_.tensor(t).shape.str() + " = concat, gathered per chunk");
        w_.add(ir::decl_array("float", name_of(t), {K, V}, zero));
        w_.open(k_loop());
        open_busy(G);
        w_.add(ir::decl("const int", "col", G.index.back()));
        gather_at = &G;
        gather(t, ir::var("col"), name_of(t) + "[k]");
        close_busy(G);
        w_.close();
        continue;
      }
      const int t = op.output;
      w_.comment("#" + std::to_string(i) + " " + g_.tensor_name(t) + " " +
                 g_.tensor(t).shape.str() + " = " + std::string(op_name(op.kind)));
      if (cat == Category::Accum && !op_reduction(op.kind)) {  // F = 1: the input itself
        w_.add(ir::decl("auto&", name_of(t), x_of(op.inputs[0])));
        continue;
      }
      auto elem = [&](int x) {
        return form(x) == RowwiseForm::Chunks ? ir::index(ir::index(x_of(x), k), j)
                                              : ir::index(x_of(x), k);
      };
      if (is_elementwise(op.kind) || cat == Category::Fused) {
        const bool f = form(t) == RowwiseForm::Chunks;
        w_.add(ir::decl_array("float", name_of(t),
                              f ? std::vector<int64_t>{K, V} : std::vector<int64_t>{K}));
        w_.open(k_loop());
        if (f) w_.open(ir::for_loop("j", 0, j < V, {}, "unroll"));
        std::vector<std::string> ins;
        for (int x : op.inputs) ins.push_back(ir::print_expr(elem(x)));
        const std::string res = eval_elementwise(i, ins, "v" + std::to_string(t) + "_");
        w_.add(ir::assign(elem(t), ir::verbatim(res)));
        if (f) w_.close();
        w_.close();
        continue;
      }
      // A reduction over the last dim of a full tensor (its row of the reduction family).
      const int x = op.inputs[0];
      const ReductionCode red(op.kind, op.attrs);
      const std::string xe = "x" + std::to_string(x) + "[k][j]";
      const std::string sname = "s" + std::to_string(t);
      const ir::Expr p = ir::var("p"), identity = ir::verbatim(red.identity());
      w_.add(ir::decl_array("float", sname, {K}, {}, "row total of chunk k"));
      w_.open("");
      w_.add(ir::decl_array("float", "p", {K}));
      w_.open(k_loop());
      w_.add(ir::assign(ir::index(p, k), identity));
      open_busy(G);
      w_.add(ir::for_compact("j", 0, j < V, ir::verbatim_stmt(red.update("p[k]", red.premap(xe))),
                             "unroll"));
      close_busy(G);
      w_.close();
      if (L.block_rows) {
        const int64_t kpr = L.chunks_per_row / T, R = L.rows;
        const ir::Expr pr = ir::var("pr"), total = ir::var("total");
        const ir::Expr buf = ir::binary("+", ir::var("red"), ir::int_lit((reductions % 2) * W * R));
        w_.add(ir::decl_array("float", "pr", {R}));
        w_.open(ir::for_loop("r", 0, r < R, {}, "unroll"));
        w_.add(ir::assign(ir::index(pr, r), identity));
        w_.add(ir::for_compact(
            "q", 0, q < kpr,
            ir::verbatim_stmt(
                red.update("pr[r]", ir::print_expr(ir::index(p, ir::binary("+", r * kpr, q))))),
            "unroll"));
        w_.add(ir::assign(ir::index(pr, r), ir::verbatim(red.team(32, "pr[r]"))));
        w_.add(ir::if_compact(
            ir::eq(lane, 0),
            ir::assign(ir::index(buf, ir::binary("+", warp * R, r)), ir::index(pr, r))));
        w_.close();
        w_.comment("double-buffered: the next reduction uses the other buffer");
        barrier();
        w_.open(k_loop());
        w_.add(ir::decl("const int", "r", k / kpr));
        w_.add(ir::decl("float", "total", identity));
        w_.add(ir::for_compact(
            "q", 0, q < W,
            ir::verbatim_stmt(
                red.update("total", ir::print_expr(ir::index(buf, ir::binary("+", q * R, r))))),
            "unroll"));
        w_.add(ir::assign(ir::index(ir::var(sname), k), total));
        w_.close();
        ++reductions;
      } else {
        w_.add(ir::for_compact("k", 0, k < K,
                               ir::assign(ir::index(ir::var(sname), k),
                                          ir::verbatim(red.team(static_cast<int>(P), "p[k]"))),
                               "unroll"));
      }
      w_.close();
      const std::string sk = sname + "[k]";
      if (op_category(op.kind) == Category::Norm) {
        w_.add(ir::decl_array("float", name_of(t), {K, V}));
        w_.open(k_loop());
        w_.add(ir::decl("const float", "inv", ir::verbatim(red.inverse(sk, L.cols))));
        w_.add(ir::for_compact(
            "j", 0, j < V,
            ir::assign(elem(t), ir::index(ir::index(x_of(x), k), j) * ir::var("inv")), "unroll"));
        w_.close();
      } else {
        w_.add(ir::decl_array("float", name_of(t), {K}));
        w_.add(ir::for_compact(
            "k", 0, k < K,
            ir::assign(ir::index(x_of(t), k), ir::verbatim(red.finalize(sk, L.cols))), "unroll"));
      }
    }
  };
  // The parts one after the other, each in a scope of its own (its registers free after it);
  // every thread runs every part (its shuffles and barriers) on the chunks it holds of it.
  for (int cur = 0; cur < static_cast<int>(L.parts.size()); ++cur) {
    if (parts) {
      w_.comment("part " + std::to_string(cur) + ": " + L.parts[cur].full.str() + ", rows " +
                 std::to_string(L.parts[cur].row_offset) + " to " +
                 std::to_string(L.parts[cur].row_offset + L.parts[cur].rows - 1));
      w_.open("");
    }
    emit_part(cur);
    if (parts) w_.close();
  }
  return Status::success();
}

}  // namespace strata::codegen
