#include "predefined_emitter.h"

#include <algorithm>

#include "reduction_code.h"
#include "strata/kernel_plan.h"

namespace strata::codegen {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;

std::vector<int64_t> dense_strides(const Shape& s) {
  std::vector<int64_t> st(s.rank(), 1);
  for (int d = s.rank() - 2; d >= 0; --d) st[d] = st[d + 1] * s[d + 1];
  return st;
}

/// `p[offset]` widened to f32 for a dense tensor of shape s.
std::string load(const std::string& p, DType t, const Shape& s,
                 const std::vector<std::string>& idx) {
  std::vector<int64_t> st = dense_strides(s);
  std::vector<std::string> terms;
  for (int d = 0; d < s.rank(); ++d) terms.push_back(mul(idx[d], st[d]));
  std::string r = p + "[" + sum(terms) + "]";
  return t == DType::f32 ? r : "strata_rt::to_f32(" + r + ")";
}

std::string offset(const Shape& s, const std::vector<std::string>& idx) {
  std::vector<int64_t> st = dense_strides(s);
  std::vector<std::string> terms;
  for (int d = 0; d < s.rank(); ++d) terms.push_back(mul(idx[d], st[d]));
  return sum(terms);
}

int64_t blocks_for(int64_t work) {
  return std::clamp<int64_t>((work + kThreads - 1) / kThreads, 1, kMaxBlocks);
}

}  // namespace

std::optional<BlockGraph> lower_matmul_to_block_graph(const Shape& a, const Shape& b) {
  const int r = a.rank();
  const int64_t m = a[r - 2], k = a[r - 1], n = b[r - 1];
  auto pick = [](int64_t extent, std::initializer_list<int64_t> sizes) -> int64_t {
    for (int64_t s : sizes)
      if (extent % s == 0) return s;
    return 0;
  };
  const int64_t tn = pick(n, {64, 32, 16, 8});
  const int64_t tk = pick(k, {64, 32, 16});
  const int64_t tm = m <= 64 ? m : pick(m, {64, 32, 16});
  if (tn == 0 || tk == 0 || tm == 0) return std::nullopt;
  const int64_t batch0 = r >= 3 ? a[0] : 1;
  if (n / tn > (int64_t{1} << 31) - 1 || m / tm > 65535 || batch0 > 65535) return std::nullopt;
  Dim3 grid{static_cast<int>(n / tn), static_cast<int>(m / tm), static_cast<int>(batch0)};
  auto bg = BlockGraph::make(grid, 128, static_cast<int>(k / tk));
  if (!bg.ok()) return std::nullopt;
  BlockGraph g = std::move(bg).value();
  const int zdim = grid.z > 1 ? 0 : kReplicate;
  auto xa = g.add_input(a, {kReplicate, grid.y > 1 ? r - 2 : kReplicate, zdim}, r - 1);
  if (!xa.ok()) return std::nullopt;
  auto xb = g.add_input(b, {grid.x > 1 ? r - 1 : kReplicate, kReplicate, zdim}, r - 2);
  if (!xb.ok()) return std::nullopt;
  auto mm = g.add_op(OpKind::Matmul, {*xa, *xb});
  if (!mm.ok()) return std::nullopt;
  auto acc = g.add_op(OpKind::AccumSum, {*mm});
  if (!acc.ok()) return std::nullopt;
  if (!g.add_output(*acc, {grid.x > 1 ? r - 1 : kReplicate, grid.y > 1 ? r - 2 : kReplicate, zdim})
           .ok())
    return std::nullopt;
  return g;
}

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

  if (cat == Category::Reduce || cat == Category::Norm) {
    BlockOp bop{op.kind, {0}, 0, op.attrs, {}};
    const Shape& xs = in_shape(0);
    ReductionShape rs = reduction_shape(bop, xs);
    const int64_t group = rs.group(), outs = rs.outputs();
    int team = reduction_team(group, outs, kThreads);
    if (team == 0) team = 32;
    launch.blocks = blocks_for(outs * team);
    const int64_t teams = launch.blocks * kThreads / team;
    w.line(title + ": " + std::to_string(team) + " lane(s) per output");
    w.open(sig);
    w.line("const long long gt = blockIdx.x * " + std::to_string(kThreads) + "LL + threadIdx.x;");
    w.line("const int lane = static_cast<int>(gt % " + std::to_string(team) + ");");
    w.line("const long long team = gt / " + std::to_string(team) + ";");
    w.line("#pragma unroll 1");
    w.open("for (long long o0 = 0; o0 < " + std::to_string(outs) +
           "LL; o0 += " + std::to_string(teams) + "LL)");
    w.line("const long long o = o0 + team;");
    w.line("const bool active = o < " + std::to_string(outs) + "LL;");
    Shape oshape = xs;
    oshape[rs.dim] = rs.to;
    std::vector<std::string> oidx = unflatten("o", oshape);
    std::vector<std::string> xidx = oidx;
    xidx[rs.dim] = rs.to == 1 ? std::string("t") : paren(mul(oidx[rs.dim], group)) + " + t";
    // The reduction family of the op table: premap, combine, identity, finalize.
    const ReductionCode red(op.kind, op.attrs);
    const bool norm = cat == Category::Norm;
    w.line("float acc = " + red.identity() + ";");
    w.open("if (active)");
    w.open("for (long long t = lane; t < " + std::to_string(group) +
           "; t += " + std::to_string(team) + ")");
    w.line("const float v = " + load("in0", in_type(0), xs, xidx) + ";");
    w.line(red.update("acc", red.premap("v")));
    w.close();
    w.close();
    if (team > 1) w.line("acc = " + red.team(team, "acc") + ";");
    if (norm) {
      w.open("if (active)");
      w.line("const float inv = " + red.inverse("acc", group) + ";");
      w.open("for (long long t = lane; t < " + std::to_string(group) +
             "; t += " + std::to_string(team) + ")");
      w.line("out[" + offset(os, xidx) + "] = strata_rt::from_f32<" + OT + ">(" +
             load("in0", in_type(0), xs, xidx) + " * inv);");
      w.close();
      w.close();
    } else {
      w.line("if (active && lane == 0) out[" + offset(os, oidx) + "] = strata_rt::from_f32<" + OT +
             ">(" + red.finalize("acc", group) + ");");
    }
    w.close();
    w.close();
    return Status::success();
  }

  const int64_t n = os.numel();
  launch.blocks = blocks_for(n);
  const int64_t stride = launch.blocks * kThreads;
  w.line(title);
  w.open(sig);
  w.open("for (long long e = blockIdx.x * " + std::to_string(kThreads) + "LL + threadIdx.x; e < " +
         std::to_string(n) + "LL; e += " + std::to_string(stride) + "LL)");
  std::vector<std::string> idx = unflatten("e", os);
  switch (cat) {
    case Category::Unary:
    case Category::Binary: {
      std::vector<std::string> args;
      for (size_t k = 0; k < op.inputs.size(); ++k) {
        const std::string a = "a" + std::to_string(k);
        w.line("const float " + a + " = " +
               load("in" + std::to_string(k), in_type(static_cast<int>(k)),
                    in_shape(static_cast<int>(k)),
                    broadcast_index(in_shape(static_cast<int>(k)), idx)) +
               ";");
        args.push_back(a);
      }
      w.line("out[e] = strata_rt::from_f32<" + OT + ">(" + scalar_op_expr(op.kind, args, op.attrs) +
             ");");
      break;
    }
    case Category::Concat: {
      const int d = op.attrs.dim;
      const int64_t split = in_shape(0)[d];
      std::vector<std::string> bidx = idx;
      bidx[d] = paren(idx[d]) + " - " + std::to_string(split);
      w.line("const float v = " + paren(idx[d]) + " < " + std::to_string(split) + " ? " +
             load("in0", in_type(0), in_shape(0), idx) + " : " +
             load("in1", in_type(1), in_shape(1), bidx) + ";");
      w.line("out[e] = strata_rt::from_f32<" + OT + ">(v);");
      break;
    }
    case Category::Matmul: {
      const int r = os.rank();
      const int64_t k = in_shape(0)[r - 1];
      std::vector<std::string> ai = idx, bi = idx;
      ai[r - 1] = "kk";
      bi[r - 2] = "kk";
      w.line("float acc = 0.0f;");
      w.line("#pragma unroll 4");
      w.line("for (int kk = 0; kk < " + std::to_string(k) +
             "; ++kk) acc += " + load("in0", in_type(0), in_shape(0), ai) + " * " +
             load("in1", in_type(1), in_shape(1), bi) + ";");
      w.line("out[e] = strata_rt::from_f32<" + OT + ">(acc);");
      break;
    }
    case Category::Layout: {  // a copy through the view
      std::vector<std::string> src = idx;
      if (op.kind == OpKind::Transpose) {
        std::swap(src[os.rank() - 1], src[os.rank() - 2]);
      } else {
        src[op.attrs.dim] = paren(idx[op.attrs.dim]) + " + " + std::to_string(op.attrs.start);
      }
      w.line("out[e] = strata_rt::from_f32<" + OT + ">(" +
             load("in0", in_type(0), in_shape(0), src) + ");");
      break;
    }
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
