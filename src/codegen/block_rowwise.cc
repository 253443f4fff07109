// Rowwise kernels (include/strata/opt/rowwise.h): every tensor of the block graph lives in
// registers, in thread-owned chunks of `vec` consecutive elements of the block's full tile;
// inputs are loaded and outputs stored with vector accesses straight from / to device memory;
// rows are reduced with shuffles (and one barrier through a double-buffered scratch area when a
// row spans several warps). Tensors narrower than a row (slices along the last dim and what is
// computed from them) are evaluated where a concat reads them, from inputs loaded again at the
// columns read (RowwiseForm::Gathered).
//
// No register array is zero-filled: every value a chunk stores, reduces or gathers is written
// first under the guard of the chunk's part (`busy`: the chunk holds elements of the part), and
// read only under that same guard; the ops computed on every chunk (elementwise ops, a norm's
// scaling) compute unread values on the chunks outside it. Row reductions start from their
// identity on every chunk and add only under the guard.
#include <algorithm>
#include <functional>
#include <optional>

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
  // Chunk and element indices are unsigned: never negative where used (the column offsets
  // added to them wrap back into range), so / and % by powers of two are shifts and masks and
  // offsets widen to 64 bits without sign extension.
  w_.add(ir::decl("const unsigned", "utid", tid));
  const ir::Expr chunk = ir::var("utid") + k * T;  // chunk k of this thread
  // Per part: its full tile; chunk k's first element in it as a flat index, its row (rows of
  // row_chunks chunks, the last ones idle where a row has fewer) and its column; and whether
  // chunk k holds elements of the part (none when every chunk does).
  const int64_t P = L.row_chunks;
  struct Geometry {
    Shape full, row_shape;
    ir::Expr elem, row, col, busy;
  };
  std::vector<Geometry> geo;
  for (const RowwisePart& part : L.parts) {
    Geometry G;
    G.full = G.row_shape = part.full;
    G.row_shape[G.row_shape.rank() - 1] = 1;
    const ir::Expr c = part.row_offset == 0 ? chunk : chunk - part.row_offset * P;
    G.elem = P == L.chunks_per_row ? c * V : c / P * L.cols + c % P * V;
    G.row = c / P;
    G.col = P != L.chunks_per_row        ? c % P * V
            : part.full.numel() > L.cols ? G.elem % L.cols
                                         : G.elem;
    std::vector<ir::Expr> terms;
    if (P != L.chunks_per_row) terms.push_back(chunk % P < L.chunks_per_row);
    if (part.row_offset > 0) terms.push_back(chunk >= part.row_offset * P);
    if (K * T > (part.row_offset + part.rows) * P)
      terms.push_back(chunk < (part.row_offset + part.rows) * P);
    for (const ir::Expr& e : terms) G.busy = G.busy ? ir::land(G.busy, e) : e;
    geo.push_back(std::move(G));
  }
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
  auto k_loop = [&] { return ir::for_loop("k", 0, k < K, {}, "unroll"); };
  // A part without row reductions runs chunk by chunk: one k loop and one guard around all its
  // ops, each tensor one chunk's values (x[V], or x for a row value), so every address and
  // compare is computed once per chunk and the compiler schedules the chunk's loads, math and
  // store in one block. A part with reductions runs op by op over all its chunks (x[K][V],
  // x[K]), its shuffles and barriers outside any guard.
  bool by_chunk = false;
  auto held = [&](int t) { return by_chunk ? x_of(t) : ir::index(x_of(t), k); };
  auto decl_held = [&](int t, bool chunks) {
    const std::string n = "x" + std::to_string(t);
    if (by_chunk) return chunks ? ir::decl_array("float", n, {V}) : ir::decl("float", n);
    return ir::decl_array("float", n,
                          chunks ? std::vector<int64_t>{K, V} : std::vector<int64_t>{K});
  };
  // An op's loop over chunk k (under the part's guard where `guard`), none when by_chunk.
  auto open_chunks = [&](const Geometry& G, bool guard) {
    if (by_chunk) return;
    w_.open(k_loop());
    if (guard) open_busy(G);
  };
  auto close_chunks = [&](const Geometry& G, bool guard) {
    if (by_chunk) return;
    if (guard) close_busy(G);
    w_.close();
  };
  auto name_of = [](int t) { return "x" + std::to_string(t); };
  auto form = [&](int t) { return L.forms[t]; };
  // The device strides `gs` of a tile of shape `s` (aligned with `over` from the right) along
  // the dims of `over`: 0 along the dims `s` broadcasts.
  auto strides_over = [](const Shape& s, const std::vector<int64_t>& gs, const Shape& over) {
    std::vector<int64_t> out(over.rank(), 0);
    for (int fd = 0; fd < over.rank(); ++fd) {
      const int d = fd - (over.rank() - s.rank());
      if (d >= 0 && !(s[d] == 1 && over[fd] != 1)) out[fd] = gs[d];
    }
    return out;
  };
  // The offsets, from a tile's first element in device memory (device strides gs), of chunk k's
  // first element (a tile of the full width) and of the first element of chunk k's row. Dims
  // contiguous in device memory are addressed as one (linear_offset): a contiguous tile by the
  // chunk's flat index itself, so chunks of tiles of one layout share one offset.
  auto chunk_offset = [&](const Shape& s, const std::vector<int64_t>& gs, const Geometry& G) {
    return linear_offset(G.elem, G.full, strides_over(s, gs, G.full));
  };
  auto row_offset = [&](const Shape& s, const std::vector<int64_t>& gs, const Geometry& G) {
    return linear_offset(G.row, G.row_shape, strides_over(s, gs, G.row_shape));
  };
  // a + d, a constant d printed as a subtraction where negative.
  auto shifted = [](const ir::Expr& a, const ir::Expr& d) {
    int64_t v = 0;
    return d.is_int(&v) && v < 0 ? a - ir::int_lit(-v) : a + d;
  };
  // A tile in device memory: the tensor's pointer, the offset of the tile's first element and
  // the device strides; the element at offset `off` from the first one is data[origin + off]
  // (one sum: unsigned offsets add up unsigned, and the pointer moves once).
  struct DeviceTile {
    ir::Expr data, origin;
    std::vector<int64_t> gs;
    ir::Expr at(const ir::Expr& off) const { return ir::index(data, ir::sum({origin, off})); }
    ir::Expr ptr(const ir::Expr& off) const {
      return ir::binary("+", data, ir::sum({origin, off}));
    }
  };
  // Input op i's tile.
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
    return DeviceTile{ir::var("gin" + std::to_string(ii)), ir::sum(origin), std::move(gs)};
  };
  // Input t's values at chunk k's row, columns col + delta … col + delta + V − 1 of t (col:
  // the variable holding chunk k's column; delta: a constant or a variable), loaded into the
  // float[V] array `dst`.
  const Geometry* gather_at = nullptr;  // the part of the concat gathering
  auto load_at = [&](int t, const ir::Expr& delta, const std::string& dst) {
    const Shape& S = g_.tensor(t).shape;
    const DeviceTile src = input_source(g_.op(g_.tensor(t).producer));
    const std::vector<int64_t>& gs = src.gs;
    const ir::Expr off =
        S[S.rank() - 1] == L.cols
            ? shifted(chunk_offset(S, gs, *gather_at), delta * gs.back())
            : row_offset(S, gs, *gather_at) + shifted(ir::var("col"), delta) * gs.back();
    w_.call("strata_rt::load_f32<" + std::to_string(V) + ">", {src.ptr(off), ir::var(dst)});
  };
  // Statements leaving gathered (or row) tensor t's values at chunk k's row, columns
  // col + delta … col + delta + V − 1 of t, in the float[V] array `dst`.
  int temps = 0;
  std::function<void(int, int64_t, const std::string&)> gather = [&](int t, int64_t delta,
                                                                     const std::string& dst) {
    const ir::Expr j = ir::var("j");
    const BlockOp& p = g_.op(g_.tensor(t).producer);
    if (form(t) == RowwiseForm::Rows) {
      w_.add(ir::for_compact("j", 0, j < V, ir::assign(ir::index(ir::var(dst), j), held(t)),
                             "unroll"));
      return;
    }
    if (p.kind == OpKind::Input) {
      load_at(t, ir::int_lit(delta), dst);
      return;
    }
    if (p.kind == OpKind::Slice) {
      gather(p.inputs[0], delta + p.attrs.start, dst);
      return;
    }
    if (p.kind == OpKind::Concat) {  // col + delta < w0: the first operand
      const int64_t w0 = g_.tensor(p.inputs[0]).shape[g_.tensor(p.inputs[0]).shape.rank() - 1];
      w_.open(ir::if_then(ir::var("col") < w0 - delta));
      gather(p.inputs[0], delta, dst);
      w_.close();
      w_.open(ir::if_then(ir::var("col") >= w0 - delta));
      gather(p.inputs[1], delta - w0, dst);
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
      gather(x, delta, tmp);
      ins.push_back(tmp + "[j]");
    }
    w_.open(ir::for_loop("j", 0, j < V, {}, "unroll"));
    const std::string res = eval_elementwise(
        g_.tensor(t).producer, ins, "v" + std::to_string(t) + "_" + std::to_string(n) + "_");
    w_.add(ir::assign(ir::index(ir::var(dst), j), ir::verbatim(res)));
    w_.close();
  };
  // A concat whose operands are all (unary elementwise functions of) slices along the last dim
  // of one input — rotate-half: concat(-x[..., h:], x[..., :h]) — read as its parts: columns
  // begin … end − 1 of the concat are op_n(…op_1(x[..., c − begin + start])). nullopt for any
  // other concat (operands of different tensors, binary ops, rows), or where a part's columns
  // or start are not whole chunks (never, by the layout's chunk width: checked all the same).
  struct GatherPart {
    int64_t begin = 0, end = 0, start = 0;
    int source = -1;       // the input's tensor
    std::vector<int> ops;  // the ops applied to the slice, innermost first
  };
  auto one_source_parts = [&](int t) -> std::optional<std::vector<GatherPart>> {
    std::vector<GatherPart> out;
    std::function<bool(int, int64_t)> walk = [&](int u, int64_t begin) {
      const BlockOp& p = g_.op(g_.tensor(u).producer);
      if (p.kind == OpKind::Concat) {
        const Shape& s0 = g_.tensor(p.inputs[0]).shape;
        return walk(p.inputs[0], begin) && walk(p.inputs[1], begin + s0[s0.rank() - 1]);
      }
      const Shape& su = g_.tensor(u).shape;
      GatherPart part;
      part.begin = begin;
      part.end = begin + su[su.rank() - 1];
      for (int x = u;;) {
        if (form(x) == RowwiseForm::Rows) return false;
        const int pi = g_.tensor(x).producer;
        const BlockOp& q = g_.op(pi);
        if (q.kind == OpKind::Input) {
          part.source = x;
          break;
        }
        if (q.inputs.size() != 1) return false;
        if (q.kind == OpKind::Slice)
          part.start += q.attrs.start;
        else if (is_elementwise(q.kind) || q.kind == OpKind::ThreadFused)
          part.ops.insert(part.ops.begin(), pi);
        else
          return false;
        x = q.inputs[0];
      }
      if (part.begin % V != 0 || part.start % V != 0 || part.end % V != 0) return false;
      if (!out.empty() && out.front().source != part.source) return false;
      out.push_back(std::move(part));
      return true;
    };
    if (!walk(t, 0) || out.size() < 2) return std::nullopt;
    return out;
  };
  // Statements leaving concat t's values at chunk k's columns in the float[V] array `dst` from
  // its one-source parts: one load of the source at the column of the part holding col (the
  // offset from col picked by compares, no branch), the parts' ops picked likewise — as one
  // multiplier where each part scales by a constant (mul_scalar) or not at all, else as the
  // value of the part's ops.
  auto gather_one_source = [&](int t, const std::vector<GatherPart>& parts,
                               const std::string& dst) {
    const ir::Expr col = ir::var("col"), j = ir::var("j");
    // The value of the part holding col, from each part's value (nested selects).
    auto pick = [&](const std::function<ir::Expr(size_t)>& value) {
      ir::Expr e = value(parts.size() - 1);
      for (size_t p = parts.size() - 1; p-- > 0;) e = ir::select(col < parts[p].end, value(p), e);
      return e;
    };
    const std::string n = std::to_string(temps++);
    w_.add(ir::decl("const int", "from" + n,
                    pick([&](size_t p) { return ir::int_lit(parts[p].start - parts[p].begin); }),
                    "the source column minus col"));
    const bool plain =
        std::all_of(parts.begin(), parts.end(), [](const GatherPart& p) { return p.ops.empty(); });
    const std::string g = plain ? dst : "g" + n;
    if (!plain) w_.add(ir::decl_array("float", g, {V}));
    load_at(parts.front().source, ir::var("from" + n), g);
    if (plain) return;
    const bool scaled = std::all_of(parts.begin(), parts.end(), [&](const GatherPart& p) {
      return p.ops.empty() || (p.ops.size() == 1 && g_.op(p.ops[0]).kind == OpKind::MulScalar);
    });
    if (scaled)
      w_.add(ir::decl("const float", "scale" + n, pick([&](size_t p) {
                        return ir::float_lit(
                            parts[p].ops.empty() ? 1.0 : g_.op(parts[p].ops[0]).attrs.scalar);
                      }),
                      "the part's mul_scalar"));
    w_.open(ir::for_loop("j", 0, j < V, {}, "unroll"));
    if (scaled) {  // op_mul_scalar(x, c) = c · x
      w_.add(ir::assign(ir::index(ir::var(dst), j),
                        ir::binary("*", ir::var("scale" + n), ir::index(ir::var(g), j))));
    } else {
      std::vector<std::string> vals;
      for (size_t p = 0; p < parts.size(); ++p) {
        std::string v = g + "[j]";
        for (size_t s = 0; s < parts[p].ops.size(); ++s)
          v = eval_elementwise(parts[p].ops[s], {v},
                               "v" + std::to_string(t) + "_" + n + "_" + std::to_string(p) + "_" +
                                   std::to_string(s) + "_");
        vals.push_back(v);
      }
      w_.add(ir::assign(ir::index(ir::var(dst), j),
                        pick([&](size_t p) { return ir::verbatim(vals[p]); })));
    }
    w_.close();
  };
  // Whether op i is a row reduction (or a norm), emitted over all chunks of its part.
  auto reduces = [&](int i) {
    const BlockOp& op = g_.op(i);
    const Category cat = op_category(op.kind);
    if (cat == Category::Source || cat == Category::Sink || op.kind == OpKind::Concat ||
        form(op.output) == RowwiseForm::Gathered)
      return false;
    if (cat == Category::Accum && !op_reduction(op.kind)) return false;
    return !(is_elementwise(op.kind) || cat == Category::Fused);
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
        const DeviceTile src = input_source(op);
        const std::vector<int64_t>& gs = src.gs;
        w_.comment(g_.tensor_name(t) + " " + S.str() + " <- input " + std::to_string(ii) + " " +
                   D.str() + (form(t) == RowwiseForm::Gathered ? ": loaded where read" : ""));
        if (form(t) == RowwiseForm::Gathered) continue;
        const bool chunks = form(t) == RowwiseForm::Chunks;
        w_.add(decl_held(t, chunks));
        {  // each part reading the tile loads its chunks of it
          const Geometry& G = geo[cur];
          open_chunks(G, true);
          if (chunks)
            w_.call("strata_rt::load_f32<" + std::to_string(V) + ">",
                    {src.ptr(chunk_offset(S, gs, G)), held(t)});
          else
            w_.add(
                ir::assign(held(t), ir::call("strata_rt::to_f32", {src.at(row_offset(S, gs, G))})));
          close_chunks(G, true);
        }
        continue;
      }
      const Geometry& G = geo[L.part_of_op[i]];
      if (cat == Category::Sink) {
        int oi = 0;
        while (g_.output_op(oi) != i) ++oi;
        const int t = op.inputs[0];
        const Shape& tile = g_.tensor(t).shape;
        const std::string OT = cuda_type(info_.output_dtypes[oi]);
        const bool chunks = form(t) == RowwiseForm::Chunks;
        // A routed output (KernelPlan::output_parts) is saved once per part, each under its
        // block-uniform condition; a plain one has a single target.
        for (const SaveTarget& target : save_targets(plan_, oi)) {
          const Shape& D = target.shape;
          const std::vector<int64_t>& gs = target.strides;
          const DeviceTile dst{ir::var(target.pointer), ir::sum(target.origin), gs};
          if (target.when) w_.open(ir::if_then(target.when));
          w_.comment("save " + g_.tensor_name(t) + " -> output " + std::to_string(oi) +
                     (target.when ? " (" + target.pointer + ")" : "") + " " + D.str());
          open_chunks(G, chunks);
          if (chunks) {
            w_.call("strata_rt::store_f32<" + std::to_string(V) + ">",
                    {dst.ptr(chunk_offset(tile, gs, G)), held(t)});
          } else {  // the row's first chunk stores its value
            const ir::Expr first = ir::eq(chunk % P, 0);
            w_.add(ir::if_compact(
                G.busy && !by_chunk ? ir::land(first, G.busy) : first,
                ir::assign(dst.at(row_offset(tile, gs, G)),
                           ir::call("strata_rt::from_f32<" + OT + ">", {held(t)}))));
          }
          close_chunks(G, chunks);
          if (target.when) w_.close();
        }
        continue;
      }
      if (form(op.output) == RowwiseForm::Gathered) {
        w_.comment("#" + std::to_string(i) + " " + g_.tensor_name(op.output) + " " +
                   g_.tensor(op.output).shape.str() + " = " + std::string(op_name(op.kind)) +
                   ": evaluated where read");
        continue;
      }
      if (op.kind == OpKind::Concat) {
        // A full row from gathered operands: each chunk evaluates the operand its columns lie
        // in; where every operand is a function of a slice of one input, without branches.
        const int t = op.output;
        const std::optional<std::vector<GatherPart>> one = one_source_parts(t);
        w_.comment("#" + std::to_string(i) + " " + g_.tensor_name(t) + " " +
                   g_.tensor(t).shape.str() + " = concat, gathered per chunk" +
                   (one ? " from one load of " + g_.tensor_name(one->front().source) +
                              " at the columns of the chunk's part"
                        : ""));
        w_.add(decl_held(t, true));
        open_chunks(G, true);
        if (by_chunk) w_.open("");  // its own `col`
        w_.add(ir::decl("const int", "col", G.col));
        gather_at = &G;
        const std::string dst = ir::print_expr(held(t));
        if (one)
          gather_one_source(t, *one, dst);
        else
          gather(t, 0, dst);
        if (by_chunk) w_.close();
        close_chunks(G, true);
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
        return form(x) == RowwiseForm::Chunks ? ir::index(held(x), j) : held(x);
      };
      if (is_elementwise(op.kind) || cat == Category::Fused) {
        const bool f = form(t) == RowwiseForm::Chunks;
        w_.add(decl_held(t, f));
        open_chunks(G, false);
        if (f) w_.open(ir::for_loop("j", 0, j < V, {}, "unroll"));
        std::vector<std::string> ins;
        for (int x : op.inputs) ins.push_back(ir::print_expr(elem(x)));
        const std::string res = eval_elementwise(i, ins, "v" + std::to_string(t) + "_");
        w_.add(ir::assign(elem(t), ir::verbatim(res)));
        if (f) w_.close();
        close_chunks(G, false);
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
    by_chunk = true;
    for (int i = 0; i < static_cast<int>(g_.ops().size()); ++i)
      if (L.part_of_op[i] == cur && reduces(i)) by_chunk = false;
    if (by_chunk) {
      w_.comment("no row reductions: chunk by chunk");
      w_.open(k_loop());
      open_busy(geo[cur]);
    }
    emit_part(cur);
    if (by_chunk) {
      close_busy(geo[cur]);
      w_.close();
    }
    if (parts) w_.close();
  }
  return Status::success();
}

}  // namespace strata::codegen
