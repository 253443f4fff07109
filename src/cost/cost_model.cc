#include "strata/cost/cost_model.h"

#include <algorithm>
#include <limits>

#include "cost/launch_overlap.h"
#include "strata/ir/shape_infer.h"
#include "strata/opt/kernel_views.h"
#include "strata/opt/layout.h"
#include "strata/opt/library_epilogues.h"
#include "strata/opt/matmul_lowering.h"
#include "strata/opt/output_placement.h"
#include "strata/opt/output_routes.h"
#include "strata/opt/packed_outputs.h"

namespace strata {
namespace {

// FLOPs charged per element to an elementwise op outside the Lax fragment (exp, sqrt, silu,
// gelu, relu, pow): "a few" SIMT instructions each (docs/cost-model.md).
constexpr double kTranscendentalFlops = 4.0;
// FLOPs per input element of rms_norm: square, accumulate, divide.
constexpr double kRmsNormFlops = 3.0;
// FLOPs per element of accum_rms_ld per iteration: square and accumulate.
constexpr double kAccumRmsFlops = 2.0;
// Tiling of predefined ops as the code generator emits them (src/codegen/predefined_emitter.cc).
constexpr int64_t kMatmulTileM = 64;         // output rows per block
constexpr int64_t kMatmulTileN = 64;         // output columns per block
constexpr int64_t kMatmulTileK = 64;         // reduction depth per for-loop iteration
constexpr int64_t kElementsPerBlock = 1024;  // every other (memory-bound) op

// A rate the calibration found no cost for (bytes / kFree = 0).
constexpr double kFree = std::numeric_limits<double>::infinity();
// The effective rate of matmuls run as warpgroup MMA on an H100/H200 (Target::
// wgmma_tensor_flops; docs/cost-model.md, "Warpgroup MMA").
constexpr double kWgmmaTensorFlops = 3.6e15;

/// The built-in architecture of that name (every target's name is one).
const ArchTraits& arch(std::string_view name) {
  for (const ArchTraits& a : known_archs())
    if (a.name == name) return a;
  return ArchTraits::default_arch();
}

// The table of built-in targets; docs/cost-model.md gives the source of every figure.
const std::vector<Target>& target_table() {
  static const std::vector<Target> table = {
      // architecture (arch_traits.h)  DRAM B/s  L2 re-read B/s  narrow-tile B/s
      //   tensor FLOP/s  SIMT FLOP/s  launch s  c_α  t_iter s
      // h200: fitted to 244 candidates timed on an H200 in two runs of 2026-11-24
      // (bench/calibrate.py; docs/cost-model.md), c_α held at 0.1, the underfill of the
      // microbenchmark's 48- and 64-block streams; t_iter fits at 0. h100: the same SM, so the
      // H200 fit, with the DRAM and narrow-tile rates scaled by the HBM ratio 3.35 / 4.8 TB/s.
      // a100: MCFuser's analytical constants, not calibrated (L2 re-reads at the DRAM rate, no
      // narrow-tile cost).
      // The last two columns, cuBLAS on predefined matmuls (a library call): its sustained
      // tensor rate and DRAM rate. h200 from the suite on an H200
      // (bench/results/h200-2026-11-26-suite.md), where PyTorch runs these matmuls through
      // cuBLAS: compute-bound, mistral_7b_qkv_p4096 (206 GFLOP in 343.6 µs under
      // torch.compile) and llama32_1b_qkv_p2048 (25.8 GFLOP in 43.7 µs), both 0.60 PFLOP/s,
      // 0.61 of the data-sheet peak; bandwidth-bound, llama3_8b_mlp_down_d4 (three weights of
      // 117 MB in 98.1 µs eager, with its silu·mul kernel) 3.6 TB/s (llama3_8b_lmhead_d1's
      // 1.05 GB reached 3.95). h100: the same tensor rate (same SM and clocks) and the DRAM rate
      // scaled by the HBM ratio, not measured; a100: the same fractions of its data sheet, not
      // measured.
      // The last column, t_simt (per dependent SIMT matmul step and wave): h200 fitted alone
      // on top of the other constants to the 1212 H200 points of bench/calibration/points.json
      // (57 of them, in 16 programs, have SIMT matmuls; docs/cost-model.md, "SIMT matmul
      // chains"); h100 the same SM and clock, so the same; a100 scaled by the SM clock
      // (1.98 / 1.41 GHz), not measured.
      // The next three columns, t_barrier, t_tbyte and t_rbyte of the latency bound
      // (docs/cost-model.md, "Latency bound and the last wave's tail", "Loads into registers",
      // "The ranking within programs", "Barriers in the throughput bound"): h200 fitted
      // together with t_sync (the last column) on top of the throughput bounds to the ranking
      // within programs of the 2701 H200 points of bench/calibration/points.json, the barriers
      // counted after the first iteration (`bench/calibrate.py --barrier-sync`; the log-error
      // fit, `--latency`, gave 287 ns, 1.33 ns and 10 ns before t_sync); h100 the same SM and
      // clock, so the same; a100 scaled by the SM clock (1.98 / 1.41 GHz), not measured.
      // The next two columns, γ and β of library matmuls on unaligned rows (docs/cost-model.md,
      // "Library matmuls on unaligned rows"): h200 from 17 cuBLAS calls timed on an H200
      // (bench/blas_alignment.py, bench/results/h200-2026-11-28-blas-alignment.md); h100 the
      // same SM, so the same; a100 β scaled by the SM clock, not measured.
      // The next column, t_pass (per element a thread handles in a pass outside the matmuls,
      // per wave, a loop group's own iterations; docs/cost-model.md, "Passes outside the
      // matmuls"): h200 fitted alone on top of the other constants (log loss) to the 2364 H200
      // points of bench/calibration/points.json, blocks per SM from the plan (`bench/calibrate.py
      // --on-table --code-terms pass --loss log`: 46.4 ns); h100 the same SM and clock, so the
      // same; a100 scaled by the SM clock, not measured.
      // The last column, the launch of a cuBLAS call (docs/cost-model.md, "The launch of a
      // cuBLAS call"): h200 fitted alone on top of the other constants (log loss) to the 2509
      // H200 points of bench/calibration/points.json (`bench/calibrate.py --library-launch`);
      // h100 the same; a100 the h200's fraction (0.75) of its launch term, not measured.
      // The next column, the rate of matmuls run as warpgroup MMA (docs/cost-model.md,
      // "Warpgroup MMA"): h200 fitted to the time ratios of the graphs timed with and without
      // the knob `wgmma` on an H200 (bench/wgmma_rate.py); h100 the same SM, so the same;
      // a100 has no wgmma (0).
      // The next column, t_sync (per block-level barrier a block passes after its first loop
      // iteration, spread over the SMs, in the throughput bound; docs/cost-model.md, "Barriers
      // in the throughput bound"): h200 fitted with the latency bound's constants above;
      // h100 the same SM and clock, so the same; a100 scaled by the SM clock, not measured.
      // The last column, t_chain (per dependent loop iteration an SM runs after the first,
      // divided by the blocks it holds, in the latency bound; docs/cost-model.md, "The
      // iteration chain of few-block kernels"): h200 fitted alone on top of the other
      // constants to the ranking within programs of the 2863 H200 points of
      // bench/calibration/points.json (`bench/calibrate.py --iteration-chain`, which refits
      // t_sync and the latency bound's constants with it and keeps them); h100 the same SM and
      // clock, so the same; a100 scaled by the SM clock, not measured.
      {arch("h100"),
       {3.45e12, 4.16e13, 1.23e13, 734e12, 8.95e12, 3.38e-6, 0.1, 0.0, 600e12, 2.5e12, 9.3e-9,
        185e-9, 1.33e-9, 14.1e-9, 2.5, 5.7e9, 46e-9, 2.53e-6, kWgmmaTensorFlops, 27.2e-9,
        707.4e-9}},
      {arch("h200"),
       {4.94e12, 4.16e13, 1.76e13, 734e12, 8.95e12, 3.38e-6, 0.1, 0.0, 600e12, 3.6e12, 9.3e-9,
        185e-9, 1.33e-9, 14.1e-9, 2.5, 5.7e9, 46e-9, 2.53e-6, kWgmmaTensorFlops, 27.2e-9,
        707.4e-9}},
      {arch("a100"),
       {1.6e12, 1.6e12, kFree, 312e12, 19.5e12, 2e-6, 1.0, 0.0, 190e12, 1.5e12, 1.3e-8, 260e-9,
        1.87e-9, 19.8e-9, 2.5, 4.06e9, 65e-9, 1.5e-6, 0.0, 38.2e-9, 993e-9}},
  };
  return table;
}

struct Flops {
  double tensor = 0;
  double simt = 0;
};

// Byte and block counts: products of extents and trip counts. Every tensor has at most
// kMaxElements elements, but trip counts × tile bytes can exceed 64 bits, so counts are
// combined with saturating_mul / saturating_add (shape.h): a saturated count predicts an
// enormous time instead of wrapping into a negative one.

/// ⌈a / b⌉ for a ≥ 0, b ≥ 1, without overflow.
int64_t ceil_div(int64_t a, int64_t b) {
  return a / b + (a % b != 0 ? 1 : 0);
}

double elementwise_flops(OpKind k) {
  return op_info(k).algebra == Algebra::Lax ? 1.0 : kTranscendentalFlops;
}

// FLOPs of one thread graph: each step over the elements of its own (broadcast) shape.
double thread_graph_flops(const std::vector<ThreadStep>& chain, const std::vector<Shape>& in) {
  std::vector<Shape> vals = in;
  double total = 0;
  for (const ThreadStep& s : chain) {
    std::vector<Shape> args;
    for (int a = 0; a < op_info(s.kind).arity; ++a) args.push_back(vals[s.args[a]]);
    OpAttrs attrs = step_attrs(s);
    auto out = infer_compute_shape(s.kind, args, attrs);
    Shape o = out.ok() ? *out : args[0];  // chains were checked at construction
    total += elementwise_flops(s.kind) * static_cast<double>(o.numel());
    vals.push_back(o);
  }
  return total;
}

// Work of one execution of an op: a whole kernel-level op, or one block op on its tiles.
Flops op_flops(const std::vector<Shape>& in, const Shape& out, OpKind kind, const OpAttrs& attrs,
               const std::vector<ThreadStep>& chain) {
  Flops f;
  double in0 = in.empty() ? 0.0 : static_cast<double>(in[0].numel());
  switch (op_category(kind)) {
    case Category::Matmul:
      f.tensor =
          2.0 * static_cast<double>(out.numel()) * static_cast<double>(in[0][in[0].rank() - 1]);
      break;
    case Category::Unary:
    case Category::Binary:
      f.simt = elementwise_flops(kind) * static_cast<double>(out.numel());
      break;
    case Category::Reduce:
    case Category::Scan:
      f.simt = in0;
      break;
    case Category::Norm:
      f.simt = kRmsNormFlops * in0;
      break;
    case Category::Accum: {
      const ReductionInfo* r = op_reduction(kind);
      if (r && r->finalize == Finalize::RootMean)
        f.simt = kAccumRmsFlops * in0;
      else if (kind == OpKind::AccumSum && attrs.fmap != kReplicate)
        f.simt = 0;                       // concatenation: the tile is placed, nothing is computed
      else if (op_info(kind).arity == 2)  // rescaling: a multiply-add and an exp per row
        f.simt = 2.0 * in0 + kTranscendentalFlops * static_cast<double>(in[1].numel());
      else
        f.simt = in0;
      break;
    }
    case Category::Fused:
      f.simt = thread_graph_flops(chain, in);
      break;
    case Category::Source:
    case Category::Sink:
    case Category::Concat:
    case Category::Layout:
    case Category::Customized:
    case Category::Collective:  // communication: bytes moved (docs/tensor-parallel.md)
      break;  // data movement only
  }
  return f;
}

std::string label_of(const KernelGraph& g, const KernelOp& op) {
  std::string s(op_name(op.kind));
  s += " →";
  for (size_t i = 0; i < op.outputs.size(); ++i)
    s += (i ? ", " : " ") + g.tensor_name(op.outputs[i]);
  return s;
}

int64_t tensor_bytes(const KernelTensor& t) {
  return saturating_mul(t.shape.numel(), dtype_size(t.dtype));
}

/// Bytes a kernel reads of one of its inputs: all tile loads (trip counts included) and the
/// input's size, which is what a kernel that reads every element at least once takes from DRAM.
struct InputReads {
  int64_t loaded = 0;
  int64_t size = 0;
};

/// Splits a kernel's reads into DRAM bytes (load_bytes) and L2 hits (l2_bytes): what is read of
/// an input beyond its size are re-reads of tiles that other blocks read too. They hit in L2
/// when every block of the kernel is resident at once (one wave: the blocks sharing a tile read
/// it at about the same time) or when the kernel's inputs fit in half the L2; otherwise only
/// re-reads within a wave hit (a fraction 1 / waves). Sets k.waves.
void split_rereads(const std::vector<InputReads>& reads, int threads, int64_t smem, const Target& t,
                   KernelCost& k) {
  int64_t unique = 0;
  for (const InputReads& r : reads) unique = saturating_add(unique, std::min(r.loaded, r.size));
  const int64_t per_sm_smem = smem > 0 ? (t.smem_per_block_bytes + 1024) / smem : int64_t{32};
  const int64_t per_sm =
      std::max<int64_t>(1, std::min<int64_t>({per_sm_smem, 2048 / std::max(32, threads), 32}));
  const int64_t waves = std::max<int64_t>(1, ceil_div(k.blocks, per_sm * t.sm_count));
  k.waves = waves;
  k.blocks_per_sm = per_sm;
  const double hit = waves <= 1 || saturating_mul(2, unique) <= t.l2_bytes
                         ? 1.0
                         : 1.0 / static_cast<double>(waves);
  k.load_bytes = 0;
  k.l2_bytes = 0;
  for (const InputReads& r : reads) {
    const int64_t first = std::min(r.loaded, r.size);
    const int64_t again = r.loaded - first;
    const auto hits = std::min(again, static_cast<int64_t>(static_cast<double>(again) * hit));
    k.load_bytes = saturating_add(k.load_bytes, saturating_add(first, again - hits));
    k.l2_bytes = saturating_add(k.l2_bytes, hits);
  }
}

// A predefined op as one library kernel: every input read once, the output written once.
// Returns what it reads of each input.
std::vector<InputReads> predefined_cost(const KernelGraph& g, const KernelOp& op, KernelCost& k) {
  std::vector<Shape> in;
  std::vector<InputReads> reads;
  int64_t max_elems = 0;
  for (int t : op.inputs) {
    reads.push_back({tensor_bytes(g.tensor(t)), tensor_bytes(g.tensor(t))});
    in.push_back(g.tensor(t).shape);
    max_elems = std::max(max_elems, g.tensor(t).shape.numel());
  }
  const KernelTensor& out = g.tensor(op.outputs[0]);
  k.store_bytes = tensor_bytes(out);
  Flops f = op_flops(in, out.shape, op.kind, op.attrs, {});
  k.tensor_flops = f.tensor;
  k.simt_flops = f.simt;
  const Shape& s = out.shape;
  if (op_category(op.kind) == Category::Matmul) {
    // As the code generator runs it (lower_matmul_to_block_graph (matmul_lowering.h)): output tiles of
    // kMatmulTileM × kMatmulTileN per block, a for-loop over K in kMatmulTileK steps; A is
    // read once per column of blocks and B once per row of blocks.
    const Shape& a = in[0];
    int64_t m = s[s.rank() - 2], n = s[s.rank() - 1], kk = a[a.rank() - 1];
    int64_t batch = s.numel() / saturating_mul(m, n);
    int64_t row_blocks = ceil_div(m, kMatmulTileM), col_blocks = ceil_div(n, kMatmulTileN);
    k.blocks = saturating_mul(batch, saturating_mul(row_blocks, col_blocks));
    k.forloop = ceil_div(kk, kMatmulTileK);
    reads[0].loaded = saturating_mul(reads[0].loaded, col_blocks);
    reads[1].loaded = saturating_mul(reads[1].loaded, row_blocks);
  } else {
    k.blocks = std::max<int64_t>(1, ceil_div(std::max(max_elems, s.numel()), kElementsPerBlock));
  }
  return reads;
}

// A customized op: the loads, stores and FLOPs of its block graph times their trip counts.
// Returns what it reads of each input.
std::vector<InputReads> customized_cost(const KernelGraph& g, const KernelOp& op, KernelCost& k) {
  const BlockGraph& b = *op.body;
  const int64_t blocks = b.grid().count();
  const int64_t F = b.forloop();
  k.blocks = blocks;
  std::vector<DType> dtypes;
  std::vector<InputReads> reads;
  for (int t : op.inputs) {
    dtypes.push_back(g.tensor(t).dtype);
    reads.push_back({0, tensor_bytes(g.tensor(t))});
  }
  int saver = 0;
  for (const BlockOp& bop : b.ops()) {
    if (bop.kind == OpKind::Input) {
      // Hoisted out of the for-loop when the tile does not depend on the iteration.
      int64_t trips = saturating_mul(blocks, bop.attrs.fmap == kReplicate ? 1 : F);
      int64_t elem = dtype_size(dtypes[bop.attrs.input_index]);
      const Shape& tile = b.tensor(bop.output).shape;
      const int64_t bytes = saturating_mul(saturating_mul(tile.numel(), elem), trips);
      int64_t& loaded = reads[bop.attrs.input_index].loaded;
      loaded = saturating_add(loaded, bytes);
      const Shape& full = g.tensor(op.inputs[bop.attrs.input_index]).shape;
      const int64_t row = tile.rank() == 0 ? elem : tile[tile.rank() - 1] * elem;
      if (row < 128 && tile.rank() > 0 && tile[tile.rank() - 1] < full[full.rank() - 1])
        k.narrow_bytes = saturating_add(k.narrow_bytes, bytes);
    } else if (bop.kind == OpKind::Output) {
      int64_t elem = dtype_size(g.tensor(op.outputs[saver++]).dtype);
      k.store_bytes = saturating_add(
          k.store_bytes,
          saturating_mul(saturating_mul(b.tensor(bop.inputs[0]).shape.numel(), elem), blocks));
    } else {
      std::vector<Shape> in;
      for (int t : bop.inputs) in.push_back(b.tensor(t).shape);
      Flops f = op_flops(in, b.tensor(bop.output).shape, bop.kind, bop.attrs, bop.chain);
      // Accumulators and loop-body ops run every iteration; a post-loop op once, also when
      // it reads a loop-invariant tile.
      bool in_loop = op_category(bop.kind) == Category::Accum ||
                     b.tensor(bop.output).stage == Stage::Loop;
      double trips = static_cast<double>(blocks) * (in_loop ? static_cast<double>(F) : 1.0);
      k.tensor_flops += f.tensor * trips;
      k.simt_flops += f.simt * trips;
    }
  }
  k.smem_bytes = block_smem_bytes(b, dtypes);
  return reads;
}

// Whether cuBLAS reads operand (or writes result) `t` of a library matmul with 16-byte aligned
// rows: its row stride and its first element (gemm_operand, through `view` when it is read in
// place) are multiples of 16 bytes. An unaligned one makes cuBLAS choose alignment-1 kernels.
/// The output tile of cuBLAS's alignment-1 kernels (32 × 32, seen in Nsight Compute:
/// `…_32x32_128x1_nn_align1`), one block each.
constexpr int64_t kBlasUnalignedTile = 32;

bool rows_aligned(const KernelGraph& g, int t, const std::optional<KernelView>& view) {
  const std::optional<GemmOperand> o = gemm_operand(g, t, view);
  const int64_t per16 = 16 / std::max<int64_t>(1, dtype_size(g.tensor(t).dtype));
  return o && o->ld % per16 == 0 && o->offset % per16 == 0;
}

// A predefined matmul the emitter writes as a cuBLAS call (library_matmul_supported, on the
// graph's dtypes): every operand moved once (cuBLAS's tiles re-read from L2) at cuBLAS's
// sustained DRAM rate, compute at its sustained tensor rate, the two overlapped (a library kernel
// streams its operands while it computes): max(t_mem, t_comp) + the cuBLAS launch. cuBLAS chooses its own grid
// (split-K for few output tiles), so no underfill term. With rows that are not 16-byte aligned
// (rows_aligned) cuBLAS runs alignment-1 kernels: γ times that bound, and with an unaligned A or
// B and fewer 32 × 32 output tiles than SMs (no split-K there), and more than one row, at least
// the time one tile's block takes to stream its A and B panels at β (docs/cost-model.md, "Library matmuls on
// unaligned rows"). False (and `k` untouched) for any other op.
//
// With a library epilogue (library_epilogues.h) the call also reads the bias and stores the
// epilogue's result instead of its own (the same elements and type): the epilogue itself is free.
bool library_cost(const KernelGraph& g, const KernelOp& op,
                  const std::vector<std::optional<KernelView>>& views,
                  const std::optional<LibraryEpilogue>& epilogue, const Target& t,
                  KernelCost& k) {
  if (op_category(op.kind) != Category::Matmul) return false;
  const KernelTensor& a = g.tensor(op.inputs[0]);
  const KernelTensor& b = g.tensor(op.inputs[1]);
  const KernelTensor& c = g.tensor(op.outputs[0]);
  if (!library_matmul_supported(a.shape, b.shape, a.dtype, b.dtype, c.dtype)) return false;
  k.library = true;
  k.load_bytes = saturating_add(tensor_bytes(a), tensor_bytes(b));
  if (epilogue && epilogue->bias >= 0)
    k.load_bytes = saturating_add(k.load_bytes, tensor_bytes(g.tensor(epilogue->bias)));
  k.store_bytes = tensor_bytes(epilogue ? g.tensor(epilogue->result) : c);
  k.tensor_flops = op_flops({a.shape, b.shape}, c.shape, op.kind, op.attrs, {}).tensor;
  k.blocks = t.sm_count;
  k.forloop = 1;
  k.alpha = 1.0;
  k.underfill = 1.0;
  k.t_mem_s =
      static_cast<double>(saturating_add(k.load_bytes, k.store_bytes)) / t.blas_bandwidth_Bps;
  k.t_comp_s = k.tensor_flops / t.blas_tensor_flops;
  k.t_throughput_s = std::max(k.t_mem_s, k.t_comp_s);
  const bool ab_aligned = rows_aligned(g, op.inputs[0], views[op.inputs[0]]) &&
                          rows_aligned(g, op.inputs[1], views[op.inputs[1]]);
  if (!ab_aligned || !rows_aligned(g, op.outputs[0], std::nullopt)) {
    k.t_throughput_s *= t.blas_unaligned_factor;
    const int r = c.shape.rank();
    const int64_t tiles = saturating_mul(
        saturating_mul(c.shape.numel() / std::max<int64_t>(1, c.shape[r - 2] * c.shape[r - 1]),
                       ceil_div(c.shape[r - 2], kBlasUnalignedTile)),
        ceil_div(c.shape[r - 1], kBlasUnalignedTile));
    // One row per matrix is a matrix-vector call with kernels of its own (3.3x faster than the
    // tiles' rate on an H200): the factor alone.
    if (!ab_aligned && tiles < t.sm_count && c.shape[r - 2] > 1) {
      k.blocks = tiles;
      const double per_tile = static_cast<double>(k.load_bytes) / static_cast<double>(tiles);
      k.t_throughput_s = std::max(k.t_throughput_s, per_tile / t.blas_unaligned_block_Bps);
    }
  }
  k.predicted_s = k.t_throughput_s + t.blas_launch_s;
  return true;
}

// Whether customized kernel op `i` has a matmul that runs on the SIMT path whatever the plan:
// its tile shapes or an accumulator operand keep it off the tensor cores (matmul_tiles_fit_mma),
// or the kernel has no 16-bit input type (mma_input_dtype, kernel_plan.h). Predefined ops
// are not asked: a lowered matmul's 64 × 64 tiles run on the tensor cores.
bool may_have_simt_matmul(const KernelGraph& g, int i) {
  const KernelOp& op = g.op(i);
  if (op.kind != OpKind::Customized || !op.body) return false;
  std::vector<DType> input_dtypes;
  for (int t : op.inputs) input_dtypes.push_back(g.tensor(t).dtype);
  const bool mma_type = mma_input_dtype(input_dtypes).has_value();
  const BlockGraph& b = *op.body;
  for (int j = 0; j < static_cast<int>(b.ops().size()); ++j)
    if (op_category(b.op(j).kind) == Category::Matmul && (!mma_type || !matmul_tiles_fit_mma(b, j)))
      return true;
  return false;
}

// Whether customized kernel op `i` is predicted with the wgmma term: an attention chain (two
// matmuls and an exp between them, with or without a running max: the kind of kernel the rate
// was fitted and measured on; on GEMM chains — LoRA, MCFuser's G4 — it predicted the wgmma
// forms 1.4–2.6× too fast, h200-2026-11-29-fold, docs/cost-model.md "Warpgroup MMA"), a 16-bit
// input type for the tensor cores and a matmul whose rows per batch are whole 64-row
// warpgroup tiles (⌈M / 16⌉ a multiple of 4, plan_wgmma's first condition on the warps). A
// cheap test that spares the second plan of the kernels it leaves out.
bool may_take_wgmma(const KernelGraph& g, int i) {
  const KernelOp& op = g.op(i);
  if (op.kind != OpKind::Customized || !op.body) return false;
  const BlockGraph& body = *op.body;
  int matmuls = 0;
  bool exp = false;
  for (const BlockOp& o : body.ops()) {
    matmuls += op_category(o.kind) == Category::Matmul;
    exp = exp || o.kind == OpKind::Exp ||
          std::any_of(o.chain.begin(), o.chain.end(),
                      [](const ThreadStep& t) { return t.kind == OpKind::Exp; });
  }
  if (matmuls < 2 || !exp) return false;
  std::vector<DType> input_dtypes;
  for (int t : op.inputs) input_dtypes.push_back(g.tensor(t).dtype);
  if (!mma_input_dtype(input_dtypes).has_value()) return false;
  const BlockGraph& b = *op.body;
  for (int j = 0; j < static_cast<int>(b.ops().size()); ++j) {
    if (op_category(b.op(j).kind) != Category::Matmul) continue;
    const Shape& out = b.tensor(b.op(j).output).shape;
    if (out.rank() >= 2 && ((out[out.rank() - 2] + 15) / 16) % 4 == 0) return true;
  }
  return false;
}

}  // namespace

const std::vector<Target>& known_targets() {
  return target_table();
}

Result<Target> Target::by_name(std::string_view name) {
  std::string valid;
  for (const Target& t : target_table()) {
    if (t.name == name) return t;
    valid += (valid.empty() ? "" : ", ") + t.name;
  }
  return make_error("unknown target `" + std::string(name) + "`; valid targets: " + valid);
}

Target Target::for_device(std::string_view device_name) {
  const ArchTraits* known = known_arch_for_device(device_name);
  auto t = by_name(known ? known->name : ArchTraits::default_arch().name);
  return t.ok() ? *t : target_table().front();
}

GraphCost estimate_cost(const KernelGraph& g, const Target& t, const CostOptions& options) {
  GraphCost gc{0.0, {}};
  // A layout op that the code generator reads in place is no kernel and moves no bytes: its
  // readers load their tiles from the tensor it views (kernel_views.h), cuBLAS included where
  // the matmul is predicted as a library call (library_cost's condition).
  const LibraryMatmulReader library_reader = [&](int i) {
    const KernelOp& op = g.op(i);
    return options.library_matmul &&
           library_matmul_supported(g.tensor(op.inputs[0]).shape, g.tensor(op.inputs[1]).shape,
                                    g.tensor(op.inputs[0]).dtype, g.tensor(op.inputs[1]).dtype,
                                    g.tensor(op.outputs[0]).dtype);
  };
  const std::vector<std::optional<KernelView>> views = plan_kernel_views(g, library_reader);
  // A slice whose source's kernel writes it (a routed part, output_routes.h) is no kernel
  // either; that kernel stores the same bytes, into the parts instead of one tensor. A slice
  // that is a packed output (packed_outputs.h) is no kernel either: the prediction is that of a
  // caller who packs the outputs (the fallback copies them otherwise). Both are decided on the
  // storage types, through the emitter's own decision (output_placement.h): an f32
  // intermediate's slices are copies.
  const OutputPlacement placement = plan_output_placement(g, views, options.f32_intermediates);
  const std::vector<std::optional<OutputRoute>>& routes = placement.routes;
  const std::vector<std::optional<PackedOutput>>& packed = placement.packed;
  // The elementwise ops a cuBLAS call applies as its epilogue are no kernels either.
  const std::vector<std::optional<LibraryEpilogue>> epilogues =
      options.library_matmul ? plan_library_epilogues(g, library_reader, views)
                             : std::vector<std::optional<LibraryEpilogue>>(g.ops().size());
  for (int i = 0; i < static_cast<int>(g.ops().size()); ++i) {
    const KernelOp& op = g.op(i);
    if (op.kind == OpKind::Input || is_kernel_view(g, views, i) ||
        is_routed_slice(g, routes, i) || is_packed_slice(g, packed, i) ||
        is_absorbed_epilogue(epilogues, i))
      continue;
    KernelCost k{};
    k.op_id = i;
    k.forloop =
        op.kind == OpKind::Customized ? op.body->forloop() : 1;  // a predefined matmul sets its own
    k.label = label_of(g, op);
    if (options.library_matmul && library_cost(g, op, views, epilogues[i], t, k)) {
      gc.predicted_us += k.predicted_s * 1e6;
      gc.kernels.push_back(std::move(k));
      continue;
    }
    const std::vector<InputReads> reads =
        op.kind == OpKind::Customized ? customized_cost(g, op, k) : predefined_cost(g, op, k);
    // Every kernel the emitter plans (a customized kernel or a lowered predefined matmul) is
    // planned for its loop barriers and threads (t_latency_s, t_sync_s) when the target charges
    // the latency bound or the barriers of the throughput bound, and a customized kernel whose
    // matmul may run off the tensor cores for its SIMT chains' length (t_simt_s) in any case.
    const bool latency_bound = t.barrier_latency_s > 0 || t.thread_byte_latency_s > 0 ||
                               t.register_byte_latency_s > 0 || t.iteration_chain_s > 0;
    const bool barrier_terms = latency_bound || t.barrier_sync_s > 0;
    std::optional<KernelCodeFeatures> code;
    // On a target with wgmma, a kernel whose plan under the knob runs a matmul as warpgroup MMA
    // is predicted as that plan (the tuning variant `wgmma=1`, profiled beside the default);
    // any other kernel as the default plan.
    if (options.wgmma && t.wgmma && t.wgmma_tensor_flops > 0 && may_take_wgmma(g, i)) {
      PlanOptions wgmma_plan = PlanOptions::for_arch(t);
      wgmma_plan.wgmma = true;
      code = kernel_code_features(g, i, views, wgmma_plan);
      if (code && code->loop_wgmma_flops + code->once_wgmma_flops <= 0) code.reset();
    }
    if (!code && (options.code_features || barrier_terms || may_have_simt_matmul(g, i)))
      code = kernel_code_features(g, i, views, PlanOptions::for_arch(t));
    if (code)
      k.wgmma_flops = std::min(
          k.tensor_flops, static_cast<double>(k.blocks) *
                              (static_cast<double>(k.forloop) * code->loop_wgmma_flops +
                               code->once_wgmma_flops));
    // Blocks per SM follow the planned kernel's threads and shared memory where it is planned;
    // else the block graph's threads and the sum of its tiles (a predefined matmul block holds
    // two stages of a 64-row A and a 64-column B tile, 16-bit).
    const bool custom = op.kind == OpKind::Customized;
    const bool planned = custom && code && code->threads > 0 && code->smem_bytes > 0;
    const int64_t smem = planned ? code->smem_bytes
                         : custom ? k.smem_bytes
                         : op_category(op.kind) == Category::Matmul
                             ? 2 * (kMatmulTileM + kMatmulTileN) * kMatmulTileK * 2
                             : 0;
    split_rereads(reads, planned ? code->threads : custom ? op.body->block_threads() : 128, smem,
                  t, k);
    k.alpha =
        1.0 + t.alpha_sm_factor * static_cast<double>(t.sm_count) / static_cast<double>(k.blocks);
    k.t_mem_s = (static_cast<double>(k.load_bytes) + static_cast<double>(k.store_bytes)) /
                    t.mem_bandwidth_Bps +
                static_cast<double>(k.l2_bytes) / t.l2_bandwidth_Bps +
                static_cast<double>(k.narrow_bytes) / t.narrow_bandwidth_Bps;
    k.t_comp_s = (k.tensor_flops - k.wgmma_flops) / t.tensor_peak_flops +
                 (k.wgmma_flops > 0 ? k.wgmma_flops / t.wgmma_tensor_flops : 0.0) +
                 k.simt_flops / t.simt_peak_flops;
    k.underfill = std::max(1.0, static_cast<double>(t.sm_count) / static_cast<double>(k.blocks));
    if (code) {
      const double waves = static_cast<double>(k.waves);
      const double forloop = static_cast<double>(k.forloop);
      k.t_simt_s = waves *
                   (forloop * static_cast<double>(code->loop_simt_mm_steps) +
                    static_cast<double>(code->once_simt_mm_steps)) *
                   t.simt_mm_step_s;
      // Loop groups pass over their own iterations side by side: ⌈F / G⌉ of them in a row.
      const int64_t groups = std::max(1, code->loop_groups);
      const double group_iterations = static_cast<double>((k.forloop + groups - 1) / groups);
      k.t_pass_s = waves *
                   (group_iterations * static_cast<double>(code->loop_pass_steps) +
                    static_cast<double>(code->once_pass_steps)) *
                   t.pass_step_s;
      // Every block passes its loop barriers once per iteration of its group after the first
      // (whose wait on the prologue the launch term charges); the SMs share the blocks.
      k.t_sync_s = static_cast<double>(k.blocks) * std::max(0.0, group_iterations - 1.0) *
                   static_cast<double>(code->loop_barriers) /
                   static_cast<double>(t.sm_count) * t.barrier_sync_s;
    }
    // The latency bound of a planned kernel (a generic predefined kernel has no plan).
    if (code && latency_bound) {
      const double waves = static_cast<double>(k.waves);
      // Loop groups run their iterations side by side: ⌈F / G⌉ of them one after another, in
      // each wave. The first of them waits on the loads the kernel's prologue issues, which the
      // launch term charges (it absorbs every kernel's prologue and drain): the bound counts
      // the waves · ⌈F / G⌉ − 1 that follow. Each of them waits on its barriers and on its
      // dependent chain (tiles, matmuls, reductions), which the blocks an SM holds overlap:
      // t_chain per iteration shared among them.
      const int64_t groups = std::max(1, code->loop_groups);
      const double dependent = std::max(
          0.0, waves * static_cast<double>((k.forloop + groups - 1) / groups) - 1.0);
      const double thread_bytes =
          (static_cast<double>(k.load_bytes) + static_cast<double>(k.l2_bytes)) /
          (static_cast<double>(std::max<int64_t>(1, k.blocks)) *
           static_cast<double>(std::max(1, code->threads)));
      // A rowwise kernel's threads load into registers: t_rbyte per byte, not t_tbyte.
      const double per_byte =
          code->register_loads ? t.register_byte_latency_s : t.thread_byte_latency_s;
      k.t_latency_s =
          dependent * (static_cast<double>(code->loop_barriers) * t.barrier_latency_s +
                       t.iteration_chain_s / static_cast<double>(std::max<int64_t>(
                                                 1, k.blocks_per_sm))) +
          waves * thread_bytes * per_byte;
    }
    // The throughput bound; a launch of several waves runs its last wave partly empty, so it is
    // scaled by the slots of all waves over the blocks (1 for one wave, whose underfill α and
    // u charge); the barriers' share of the SMs (t_sync_s, an average over them) is added
    // after. The latency bound is hidden behind it unless it is the longer one.
    const double slots = static_cast<double>(ceil_div(k.blocks, t.sm_count)) *
                         static_cast<double>(t.sm_count);
    const double tail =
        k.waves > 1 ? std::max(1.0, slots / static_cast<double>(k.blocks)) : 1.0;
    k.t_throughput_s = (k.t_mem_s * k.alpha + k.t_comp_s * k.underfill +
                        static_cast<double>(k.forloop) * t.iteration_latency_s + k.t_simt_s +
                        k.t_pass_s) *
                           tail +
                       k.t_sync_s;
    k.predicted_s = std::max(k.t_throughput_s, k.t_latency_s) + t.launch_overhead_s;
    if (options.code_features) k.code = code;
    gc.predicted_us += k.predicted_s * 1e6;
    gc.kernels.push_back(std::move(k));
  }
  gc.sequential_us = gc.predicted_us;
  if (options.concurrent_launches)
    gc.predicted_us =
        concurrent_graph_seconds(g, views, routes, gc.kernels, t, options.max_side_streams) * 1e6;
  return gc;
}

bool fits_shared_memory(int64_t smem_bytes, const Target& t) {
  return static_cast<double>(smem_bytes) <=
         kSmemPruneSlack * static_cast<double>(t.smem_per_block_bytes);
}

int64_t block_smem_bytes(const BlockGraph& b) {
  return block_smem_bytes(b, {});
}

int64_t block_smem_bytes(const BlockGraph& b, const std::vector<DType>& input_dtypes) {
  auto elem = [&](int i) -> int64_t {
    return i < static_cast<int>(input_dtypes.size()) ? dtype_size(input_dtypes[i]) : 2;
  };
  const int64_t loop_elem = elem(0);
  const int64_t post_elem = dtype_size(DType::f32);
  int64_t total = 0;
  bool padding = false;
  for (int i = 0; i < static_cast<int>(b.ops().size()); ++i)
    padding = padding || matmul_needs_mma_padding(b, i);
  for (const BlockOp& op : b.ops()) {
    if (op.output < 0) continue;  // an output saver writes from its input's buffer
    const BlockTensor& t = b.tensor(op.output);
    // Tiles of matmuls padded to the mma step are stored with the padded extents.
    const int64_t elems = padding ? mma_storage_shape(b, op.output).numel() : t.shape.numel();
    if (op.kind == OpKind::Input) {
      bool streamed = op.attrs.fmap != kReplicate && b.forloop() > 1;
      total = saturating_add(
          total, saturating_mul(elems, elem(op.attrs.input_index) * (streamed ? 2 : 1)));
    } else {
      total = saturating_add(total,
                             saturating_mul(elems, t.stage == Stage::Post ? post_elem : loop_elem));
    }
  }
  return total;
}

}  // namespace strata
