#include "predefined_emitter.h"

#include <algorithm>

#include "elementwise_access.h"
#include "reduction_code.h"
#include "strata/opt/kernel_plan.h"

namespace strata::codegen {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;

std::vector<int64_t> dense_strides(const Shape& s) {
  std::vector<int64_t> st(s.rank(), 1);
  for (int d = s.rank() - 2; d >= 0; --d) st[d] = st[d + 1] * s[d + 1];
  return st;
}

ir::Expr offset(const Shape& s, const std::vector<ir::Expr>& idx) {
  std::vector<int64_t> st = dense_strides(s);
  std::vector<ir::Expr> terms;
  for (int d = 0; d < s.rank(); ++d) terms.push_back(idx[d] * st[d]);
  return ir::sum(terms);
}

/// `p[off]` widened to f32.
ir::Expr load_at(const std::string& p, DType t, const ir::Expr& off) {
  ir::Expr r = ir::index(ir::var(p), off);
  return t == DType::f32 ? r : ir::call("strata_rt::to_f32", {r});
}

/// `p[offset]` widened to f32 for a dense tensor of shape s.
ir::Expr load(const std::string& p, DType t, const Shape& s, const std::vector<ir::Expr>& idx) {
  return load_at(p, t, offset(s, idx));
}

ir::Expr ll(int64_t v) {
  return ir::int_lit(v, "LL");
}

int64_t blocks_for(int64_t work) {
  return std::clamp<int64_t>((work + kThreads - 1) / kThreads, 1, kMaxBlocks);
}

/// The integer type of a grid-stride loop's index arithmetic: `int` when index_fits_int32,
/// else `long long` (its literals suffixed LL so that products stay 64-bit).
struct IndexType {
  explicit IndexType(bool int32) : int32(int32), type(int32 ? "int" : "long long") {}
  bool int32;
  std::string type;
  ir::Expr lit(int64_t v) const { return int32 ? ir::int_lit(v) : ll(v); }
  /// blockIdx.x · threads + threadIdx.x.
  ir::Expr global_thread() const {
    return ir::binary("+", ir::var("blockIdx.x") * lit(kThreads), ir::var("threadIdx.x"));
  }
  std::string describe() const { return int32 ? "32-bit indices" : "64-bit indices"; }
};

/// The kernel of a unary or binary op (the op table's scalar_op_expr on f32 values) over the
/// output's elements as elementwise_access plans them: per grid-stride step, a thread loads
/// `vector` consecutive elements of each operand read along the innermost coalesced dim with
/// one strata_rt::load_f32 (one element of an operand broadcast along it), applies the op to
/// each and stores them with one strata_rt::store_f32; with a vector of 1, one element per step.
void emit_elementwise(const KernelGraph& g, const KernelOp& op, const std::vector<DType>& dtypes,
                      const std::string& title, const std::string& sig, int64_t max_elements,
                      CodeWriter& w, PredefinedLaunch& launch) {
  const int out = op.outputs[0];
  const DType ot = dtypes[out];
  std::vector<Shape> in;
  std::vector<int> sizes;
  for (int t : op.inputs) {
    in.push_back(g.tensor(t).shape);
    sizes.push_back(dtype_size(dtypes[t]));
  }
  const ElementwiseAccess acc = elementwise_access(g.tensor(out).shape, dtype_size(ot), in, sizes);
  const int V = acc.vector;
  const int64_t work = acc.out.numel() / V;
  launch.blocks = blocks_for(work);
  const int64_t stride = launch.blocks * kThreads;
  const IndexType it(index_fits_int32(work, stride, max_elements));
  const std::string step = V > 1 ? std::to_string(V) + " elements" : "one element";
  w.comment(title + ": " + step + " per thread step, " + it.describe());
  w.open(sig);
  const std::string loop = V > 1 ? "v" : "e";
  w.open(ir::for_typed(it.type, loop, it.global_thread(), ir::var(loop) < it.lit(work),
                       it.lit(stride)));
  if (V > 1) w.add(ir::decl("const " + it.type, "e", ir::var("v") * V));
  const ir::Expr e = ir::var("e");
  const std::vector<ir::Expr> idx = unflatten(e, acc.out);
  const std::string vec = "<" + std::to_string(V) + ">";
  std::vector<std::string> args;
  for (size_t k = 0; k < op.inputs.size(); ++k) {
    const Shape& s = acc.operands[k];
    const std::string p = "in" + std::to_string(k), a = "a" + std::to_string(k);
    const ir::Expr off = s == acc.out ? e : offset(s, broadcast_index(s, idx));
    if (V > 1 && s[s.rank() - 1] != 1) {  // read along the innermost dim: a vector
      w.add(ir::decl_array("float", a, {V}));
      w.call("strata_rt::load_f32" + vec, {ir::binary("+", ir::var(p), off), ir::var(a)});
      args.push_back(a + "[j]");
    } else {
      w.add(ir::decl("const float", a, load_at(p, dtypes[op.inputs[k]], off)));
      args.push_back(a);
    }
  }
  const ir::Expr value = ir::verbatim(scalar_op_expr(op.kind, args, op.attrs));
  if (V == 1) {
    w.add(ir::assign(ir::index(ir::var("out"), e),
                     ir::call("strata_rt::from_f32<" + cuda_type(ot) + ">", {value})));
  } else {
    const ir::Expr j = ir::var("j");
    w.add(ir::decl_array("float", "r", {V}));
    w.add(ir::for_compact("j", 0, j < V, ir::assign(ir::index(ir::var("r"), j), value), "unroll"));
    w.call("strata_rt::store_f32" + vec, {ir::binary("+", ir::var("out"), e), ir::var("r")});
  }
  w.close();
  w.close();
}

}  // namespace

Status emit_predefined_kernel(const KernelGraph& g, int id, const std::vector<DType>& dtypes,
                              const std::string& name, CodeWriter& w, PredefinedLaunch& launch) {
  const KernelOp& op = g.op(id);
  const int out = op.outputs[0];
  const Shape& os = g.tensor(out).shape;
  const DType ot = dtypes[out];
  const std::string OT = cuda_type(ot);
  std::string sig = "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(kThreads) +
                    ") " + name + "(";
  for (size_t k = 0; k < op.inputs.size(); ++k)
    sig +=
        "const " + cuda_type(dtypes[op.inputs[k]]) + "* __restrict__ in" + std::to_string(k) + ", ";
  sig += OT + "* __restrict__ out)";
  std::string title = "// kernel op #" + std::to_string(id) + ": " + g.tensor_name(out) + " " +
                      os.str() + " = " + std::string(op_name(op.kind)) + "(";
  for (size_t k = 0; k < op.inputs.size(); ++k)
    title +=
        (k ? ", " : "") + g.tensor_name(op.inputs[k]) + " " + g.tensor(op.inputs[k]).shape.str();
  title += ")";
  const Category cat = op_category(op.kind);
  launch.threads = kThreads;
  auto in_shape = [&](int k) -> const Shape& { return g.tensor(op.inputs[k]).shape; };
  auto in_type = [&](int k) { return dtypes[op.inputs[k]]; };

  auto from_f32 = [&](const ir::Expr& v) {
    return ir::call("strata_rt::from_f32<" + OT + ">", {v});
  };
  const ir::Expr gt = ir::binary("+", ir::var("blockIdx.x") * ll(kThreads), ir::var("threadIdx.x"));
  const ir::Expr outv = ir::var("out");
  if (cat == Category::Reduce || cat == Category::Norm) {
    BlockOp bop{op.kind, {0}, 0, op.attrs, {}};
    const Shape& xs = in_shape(0);
    ReductionShape rs = reduction_shape(bop, xs);
    const int64_t group = rs.group(), outs = rs.outputs();
    int team = reduction_team(group, outs, kThreads);
    if (team == 0) team = 32;
    launch.blocks = blocks_for(outs * team);
    const int64_t teams = launch.blocks * kThreads / team;
    const ir::Expr o = ir::var("o"), o0 = ir::var("o0"), t = ir::var("t"), lane = ir::var("lane");
    const ir::Expr active = ir::var("active"), acc = ir::var("acc");
    w.comment(title.substr(3) + ": " + std::to_string(team) + " lane(s) per output");
    w.open(sig);
    w.add(ir::decl("const long long", "gt", gt));
    w.add(ir::decl("const int", "lane", ir::static_cast_to("int", ir::var("gt") % team)));
    w.add(ir::decl("const long long", "team", ir::var("gt") / team));
    w.open(ir::for_typed("long long", "o0", 0, o0 < ll(outs), ll(teams), "unroll 1"));
    w.add(ir::decl("const long long", "o", o0 + ir::var("team")));
    w.add(ir::decl("const bool", "active", o < ll(outs)));
    Shape oshape = xs;
    oshape[rs.dim] = rs.to;
    std::vector<ir::Expr> oidx = unflatten(o, oshape);
    std::vector<ir::Expr> xidx = oidx;
    xidx[rs.dim] = rs.to == 1 ? t : ir::binary("+", oidx[rs.dim] * group, t);
    // The reduction family of the op table: premap, combine, identity, finalize.
    const ReductionCode red(op.kind, op.attrs);
    const bool norm = cat == Category::Norm;
    auto element_loop = [&] { return ir::for_typed("long long", "t", lane, t < group, team); };
    w.add(ir::decl("float", "acc", ir::verbatim(red.identity())));
    w.open(ir::if_then(active));
    w.open(element_loop());
    w.add(ir::decl("const float", "v", load("in0", in_type(0), xs, xidx)));
    w.add(ir::verbatim_stmt(red.update("acc", red.premap("v"))));
    w.close();
    w.close();
    if (team > 1) w.add(ir::assign(acc, ir::verbatim(red.team(team, "acc"))));
    if (norm) {
      w.open(ir::if_then(active));
      w.add(ir::decl("const float", "inv", ir::verbatim(red.inverse("acc", group))));
      w.open(element_loop());
      w.add(ir::assign(ir::index(outv, offset(os, xidx)),
                       from_f32(load("in0", in_type(0), xs, xidx) * ir::var("inv"))));
      w.close();
      w.close();
    } else {
      w.add(ir::if_compact(ir::land(active, ir::eq(lane, 0)),
                           ir::assign(ir::index(outv, offset(os, oidx)),
                                      from_f32(ir::verbatim(red.finalize("acc", group))))));
    }
    w.close();
    w.close();
    return Status::success();
  }

  // Grid-stride kernels over the output's elements (elementwise ops: over vectors of them),
  // with 32-bit index arithmetic when every index fits (index_fits_int32).
  const int64_t n = os.numel();
  int64_t max_elements = n;
  for (size_t k = 0; k < op.inputs.size(); ++k)
    max_elements = std::max(max_elements, in_shape(static_cast<int>(k)).numel());
  if (cat == Category::Unary || cat == Category::Binary) {
    emit_elementwise(g, op, dtypes, title.substr(3), sig, max_elements, w, launch);
    return Status::success();
  }
  launch.blocks = blocks_for(n);
  const int64_t stride = launch.blocks * kThreads;
  const IndexType it(index_fits_int32(n, stride, max_elements));
  const ir::Expr e = ir::var("e");
  w.comment(title.substr(3) + ": " + it.describe());
  w.open(sig);
  w.open(ir::for_typed(it.type, "e", it.global_thread(), e < it.lit(n), it.lit(stride)));
  std::vector<ir::Expr> idx = unflatten(e, os);
  const ir::Expr out_e = ir::index(outv, e);
  switch (cat) {
    case Category::Concat: {
      const int d = op.attrs.dim;
      const int64_t split = in_shape(0)[d];
      std::vector<ir::Expr> bidx = idx;
      bidx[d] = idx[d] - split;
      w.add(ir::decl("const float", "v",
                     ir::select(idx[d] < split, load("in0", in_type(0), in_shape(0), idx),
                                load("in1", in_type(1), in_shape(1), bidx))));
      w.add(ir::assign(out_e, from_f32(ir::var("v"))));
      break;
    }
    case Category::Matmul: {
      const int r = os.rank();
      const int64_t k = in_shape(0)[r - 1];
      const ir::Expr kk = ir::var("kk"), acc = ir::var("acc");
      std::vector<ir::Expr> ai = idx, bi = idx;
      ai[r - 1] = kk;
      bi[r - 2] = kk;
      w.add(ir::decl("float", "acc", ir::float_lit(0.0)));
      w.add(ir::for_compact("kk", 0, kk < k,
                            ir::assign(acc,
                                       load("in0", in_type(0), in_shape(0), ai) *
                                           load("in1", in_type(1), in_shape(1), bi),
                                       "+="),
                            "unroll 4"));
      w.add(ir::assign(out_e, from_f32(acc)));
      break;
    }
    case Category::Layout: {  // a copy through the view
      std::vector<ir::Expr> src = idx;
      if (op.kind == OpKind::Transpose)
        std::swap(src[os.rank() - 1], src[os.rank() - 2]);
      else
        src[op.attrs.dim] = idx[op.attrs.dim] + op.attrs.start;
      w.add(ir::assign(out_e, from_f32(load("in0", in_type(0), in_shape(0), src))));
      break;
    }
    case Category::Unary:   // emit_elementwise
    case Category::Binary:  // emit_elementwise
    case Category::Reduce:
    case Category::Norm:
    case Category::Source:
    case Category::Sink:
    case Category::Customized:
    case Category::Scan:
    case Category::Accum:
    case Category::Fused:
    case Category::Collective:  // communication: the host API calls NCCL (cuda_emitter.cc)
      return make_error("kernel op #" + std::to_string(id) + " (" + std::string(op_name(op.kind)) +
                        "): no CUDA lowering for this op");
  }
  w.close();
  w.close();
  return Status::success();
}

}  // namespace strata::codegen
