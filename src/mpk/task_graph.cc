// The task-graph compiler (docs/megakernel.md, "The task graph"): ops of a decode step, their
// tasks and footprints, and the events derived from the footprints.
#include "strata/mpk/task_graph.h"

#include <algorithm>
#include <array>
#include <map>

#include "mpk/region_index.h"
#include "strata/mpk/generated_ops.h"
#include "strata/mpk/task_schedule.h"
#include "strata/opt/kernel_views.h"

namespace strata::mpk {
namespace {
// A task's fixed cost (waiting, event updates, prologue) in bytes of weight streamed in the
// same time (about 0.7 µs at one SM's share of HBM bandwidth).
constexpr int64_t kTileOverheadBytes = 16384;
}  // namespace

int64_t dtype_bytes(DType t) {
  switch (t) {
    case DType::F16:
      return 2;
    case DType::F32:
    case DType::I32:
      return 4;
    case DType::ArgMax:
      return 8;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F16:
      return "f16";
    case DType::F32:
      return "f32";
    case DType::I32:
      return "i32";
    case DType::ArgMax:
      return "argmax";
  }
  return "?";
}

int64_t choose_matmul_tile(int64_t n, int64_t k, int64_t weights, const CompileOptions& o) {
  if (n <= 8) return n;
  const int64_t per_col = std::max<int64_t>(1, k * 2 * weights);
  const int64_t limit = std::max<int64_t>(8, o.max_tile_bytes / per_col);
  int64_t best = 8;
  double best_span = -1;
  for (int64_t t = 8; t <= limit && t < n + 8; t += 8) {
    const int64_t waves = ((n + t - 1) / t + o.workers - 1) / o.workers;
    const double span =
        static_cast<double>(waves) * static_cast<double>(t * per_col + kTileOverheadBytes);
    if (best_span < 0 || span <= best_span) {
      best = t;
      best_span = span;
    }
  }
  return std::min(best, n);
}

namespace {

// KV chunks per (batch row, kv head).
int64_t attention_chunks(const ModelConfig& m, const CompileOptions& o) {
  const int64_t c =
      o.attn_chunks > 0 ? o.attn_chunks : std::max<int64_t>(1, o.workers / (m.batch * m.kv_heads));
  return std::min(c, m.max_kv);
}

// The number of tasks build() makes, computed without making them (saturating).
double estimate_tasks(const ModelConfig& m, const CompileOptions& o) {
  // A generated op has one task per block of each of its kernels.
  auto tiles = [&](const char* op, int64_t n, int64_t k, int64_t w) {
    if (o.generated) {
      if (auto it = o.generated->find(op); it != o.generated->end()) {
        double blocks = 0;
        for (const GeneratedKernel& gk : it->second.kernels)
          blocks += static_cast<double>(gk.grid.x) * gk.grid.y * gk.grid.z;
        return blocks;
      }
    }
    const int64_t t = choose_matmul_tile(n, k, w, o);
    return static_cast<double>((n + t - 1) / t);
  };
  const double heads = static_cast<double>(m.batch) * static_cast<double>(m.kv_heads);
  const double per_layer = tiles("norm_qkv", m.qkv_width(), m.hidden, 1) + heads +
                           heads * static_cast<double>(attention_chunks(m, o)) +
                           tiles("o_proj_residual", m.hidden, m.q_width(), 1) +
                           tiles("norm_gate_up_silu", m.intermediate, m.hidden, 2) +
                           tiles("down_residual", m.hidden, m.intermediate, 1);
  return static_cast<double>(m.batch) + static_cast<double>(m.layers) * per_layer +
         tiles("lm_head", m.vocab, m.hidden, 1) + 1;
}

// Builds the graph op by op; tasks are appended in op order, so task ids are a topological
// order (every footprint dependency points to an earlier op).
class Builder {
 public:
  Builder(const ModelConfig& m, const CompileOptions& o) : m_(m), o_(o) {
    g_.model = m;
    g_.options = o;
  }

  TaskGraph build() {
    const int64_t B = m_.batch, H = m_.hidden, D = m_.head_dim, V = m_.vocab;
    // Buffers: weights first, then state.
    const int64_t embed = weight("embed", {V, H});
    const int64_t inv_freq = weight("rope_inv_freq", {D / 2}, DType::F32);
    struct LayerWeights {
      int64_t attn_norm, wqkv, q_norm = -1, k_norm = -1, wo, mlp_norm, wg, wu, wd;
    };
    std::vector<LayerWeights> lw;
    for (int64_t l = 0; l < m_.layers; ++l) {
      const std::string p = "layers." + std::to_string(l) + ".";
      LayerWeights w;
      w.attn_norm = weight(p + "attn_norm", {H});
      w.wqkv = weight(p + "wqkv", {m_.qkv_width(), H});
      if (m_.qk_norm) {
        w.q_norm = weight(p + "q_norm", {D});
        w.k_norm = weight(p + "k_norm", {D});
      }
      w.wo = weight(p + "wo", {H, m_.q_width()});
      w.mlp_norm = weight(p + "mlp_norm", {H});
      w.wg = weight(p + "w_gate", {m_.intermediate, H});
      w.wu = weight(p + "w_up", {m_.intermediate, H});
      w.wd = weight(p + "w_down", {H, m_.intermediate});
      lw.push_back(w);
    }
    const int64_t final_norm = weight("final_norm", {H});
    const int64_t lm_head = weight("lm_head", {V, H});
    const int64_t kc = state("k_cache", {m_.layers, B, m_.kv_heads, m_.max_kv, D});
    const int64_t vc = state("v_cache", {m_.layers, B, m_.kv_heads, m_.max_kv, D});

    chunks_ =
        o_.attn_chunks > 0 ? o_.attn_chunks : std::max<int64_t>(1, o_.workers / (B * m_.kv_heads));
    chunks_ = std::min(chunks_, m_.max_kv);

    int x = tensor("x.embed", DType::F16, {B, H});
    embed_op(embed, x);
    for (int64_t l = 0; l < m_.layers; ++l) {
      const LayerWeights& w = lw[l];
      const std::string p = "layers." + std::to_string(l) + ".";
      int qkv = tensor(p + "qkv", DType::F16, {B, m_.qkv_width()});
      if (!generated_op("norm_qkv", p, l, {x, buffer_tensor(w.attn_norm), buffer_tensor(w.wqkv)},
                        qkv))
        matmul_op(MPK_NORM_MATMUL, p + "norm_qkv", l, x, -1, qkv, {w.attn_norm, w.wqkv, -1}, H,
                  m_.qkv_width(), 1);
      int po = tensor(p + "attn_partial_o", DType::F32, {B, m_.heads, chunks_, D});
      int pml = tensor(p + "attn_partial_ml", DType::F32, {B, m_.heads, chunks_, 2});
      const int64_t rot[3] = {w.q_norm, w.k_norm, inv_freq};
      attn_op(p + "attention", l, qkv, po, pml, rot, kc, vc);
      int attn = tensor(p + "attn", DType::F16, {B, m_.q_width()});
      combine_op(p + "attn_combine", l, po, pml, qkv, attn, rot, kc, vc);
      int xa = tensor(p + "x.attn", DType::F16, {B, H});
      if (!generated_op("o_proj_residual", p, l, {attn, buffer_tensor(w.wo), x}, xa))
        matmul_op(MPK_MATMUL_RESIDUAL, p + "o_proj_residual", l, attn, x, xa, {-1, w.wo, -1},
                  m_.q_width(), H, 1);
      int h = tensor(p + "mlp_h", DType::F16, {B, m_.intermediate});
      if (!generated_op("norm_gate_up_silu", p, l,
                        {xa, buffer_tensor(w.mlp_norm), buffer_tensor(w.wg), buffer_tensor(w.wu)},
                        h))
        matmul_op(MPK_NORM_GATED, p + "norm_gate_up_silu", l, xa, -1, h, {w.mlp_norm, w.wg, w.wu},
                  H, m_.intermediate, 2);
      int xo = tensor(p + "x.out", DType::F16, {B, H});
      if (!generated_op("down_residual", p, l, {h, buffer_tensor(w.wd), xa}, xo))
        matmul_op(MPK_MATMUL_RESIDUAL, p + "down_residual", l, h, xa, xo, {-1, w.wd, -1},
                  m_.intermediate, H, 1);
      x = xo;
    }
    int logits = tensor("logits", DType::F32, {B, V});
    g_.tensors[logits].keep = true;
    const int64_t lm_tile = choose_matmul_tile(V, H, 1, o_);
    const int64_t lm_tiles = (V + lm_tile - 1) / lm_tile;
    int partial = tensor("argmax_partial", DType::ArgMax, {lm_tiles, B});
    matmul_op(MPK_NORM_LMHEAD, "lm_head_argmax_partial", -1, x, -1, logits,
              {final_norm, lm_head, -1}, H, V, 1, partial);
    argmax_op(partial, lm_tiles);
    derive_events();
    g_.order.resize(g_.tasks.size());
    for (size_t i = 0; i < g_.tasks.size(); ++i) g_.order[i] = static_cast<int>(i);
    return std::move(g_);
  }

 private:
  int64_t add_buffer(const std::string& name, std::vector<int64_t> shape, DType t, Storage s) {
    int id = tensor(name, t, std::move(shape));
    TensorInfo& ti = g_.tensors[id];
    ti.storage = s;
    ti.buffer = static_cast<int64_t>(g_.buffers.size());
    g_.buffers.push_back(id);
    return ti.buffer;
  }
  int64_t weight(const std::string& name, std::vector<int64_t> shape, DType t = DType::F16) {
    return add_buffer(name, std::move(shape), t, Storage::Weight);
  }
  int64_t state(const std::string& name, std::vector<int64_t> shape) {
    return add_buffer(name, std::move(shape), DType::F16, Storage::State);
  }
  int buffer_tensor(int64_t buffer) const { return g_.buffers[buffer]; }

  // The 2-D view of a tensor: rows = the first extent (for the caches: the first three, so a
  // row is one (layer, batch row, kv head)); for attention partials: (batch row, head).
  int tensor(const std::string& name, DType t, std::vector<int64_t> shape, size_t row_dims = 0) {
    TensorInfo ti;
    ti.name = name;
    ti.dtype = t;
    ti.shape = shape;
    if (row_dims == 0) {
      row_dims = 1;
      if (shape.size() == 5) row_dims = 3;  // caches
      if (shape.size() == 4) row_dims = 2;  // attention partials
    }
    ti.rows = 1;
    ti.cols = 1;
    for (size_t i = 0; i < shape.size(); ++i) (i < row_dims ? ti.rows : ti.cols) *= shape[i];
    g_.tensors.push_back(ti);
    return static_cast<int>(g_.tensors.size() - 1);
  }

  Region whole(int t) const { return Region{t, 0, g_.tensors[t].rows, 0, g_.tensors[t].cols}; }
  Region cols(int t, int64_t c0, int64_t c1) const {
    return Region{t, 0, g_.tensors[t].rows, c0, c1};
  }
  Region rect(int t, int64_t r0, int64_t r1, int64_t c0, int64_t c1) const {
    return Region{t, r0, r1, c0, c1};
  }

  OpInfo& new_op(int kind, const std::string& name, int64_t layer) {
    OpInfo op;
    op.kind = kind;
    op.name = name;
    op.layer = layer;
    op.first_task = static_cast<int>(g_.tasks.size());
    g_.ops.push_back(op);
    return g_.ops.back();
  }
  TaskInfo& new_task(int32_t i0, int32_t i1 = 0, int32_t i2 = 0) {
    OpInfo& op = g_.ops.back();
    TaskInfo t;
    t.op = static_cast<int>(g_.ops.size() - 1);
    t.i0 = i0;
    t.i1 = i1;
    t.i2 = i2;
    op.num_tasks++;
    g_.tasks.push_back(t);
    return g_.tasks.back();
  }

  // Op program `name` (generated_ops.h) of layer `layer` from its generated μGraph, if the
  // options hold one: its inputs bound to `inputs` (tensor ids, in the program's order), its
  // output to `out`, its intermediates new workspace tensors; one op per kernel, one task per
  // block, the footprints those of the block graph (input tiles over every iteration, output
  // tiles by omap). False when the op is hand-written.
  bool generated_op(const std::string& name, const std::string& prefix, int64_t layer,
                    const std::vector<int>& inputs, int out) {
    if (!o_.generated) return false;
    auto it = o_.generated->find(name);
    if (it == o_.generated->end()) return false;
    const GeneratedGraph& gg = it->second;
    const KernelGraph& kg = gg.graph;
    const auto views = plan_kernel_views(kg);
    std::map<int, int> bound;  // μGraph tensor -> task graph tensor
    for (size_t i = 0; i < kg.inputs().size(); ++i) bound[kg.inputs()[i]] = inputs[i];
    bound[kg.outputs()[0]] = out;
    for (int k = 0; k < static_cast<int>(gg.kernels.size()); ++k) {
      const GeneratedKernel& gk = gg.kernels[k];
      const int func = function_id(name, k);
      const KernelOp& kop = kg.op(gk.kernel_op);
      const BlockGraph& body = *kop.body;
      std::vector<int> args;
      for (size_t a = 0; a < gk.args.size(); ++a) {
        const int t = gk.args[a];
        if (!bound.count(t)) {
          const DType dt = gk.arg_dtypes[a] == strata::DType::f32 ? DType::F32 : DType::F16;
          bound[t] =
              tensor(prefix + name + ".t" + std::to_string(t), dt, kg.tensor(t).shape.dims(), 1);
        }
        args.push_back(bound[t]);
      }
      OpInfo& op =
          new_op(MPK_GENERATED, prefix + name + ".k" + std::to_string(gk.kernel_op), layer);
      op.func = func;
      op.args = args;
      const Dim3 grid = body.grid();
      for (int bz = 0; bz < grid.z; ++bz)
        for (int by = 0; by < grid.y; ++by)
          for (int bx = 0; bx < grid.x; ++bx) {
            TaskInfo& t = new_task(bx, by, bz);
            const std::array<int, 3> block = {bx, by, bz};
            double bytes = 0;
            for (int i = 0; i < body.num_inputs(); ++i) {
              const int vt = kop.inputs[i];
              const int storage = views[vt] ? views[vt]->storage : vt;
              const int rank = kg.tensor(vt).shape.rank();
              std::vector<int64_t> lo(rank, INT64_MAX), hi(rank, 0);
              for (int itn = 0; itn < body.forloop(); ++itn) {
                const auto tile = body.input_tile(i, block, itn);
                for (int d = 0; d < rank; ++d) {
                  const auto& r = tile[4 - rank + d];
                  lo[d] = std::min(lo[d], r.offset);
                  hi[d] = std::max(hi[d], r.offset + r.length);
                }
              }
              if (views[vt]) to_storage(views[vt]->map, lo, hi);
              double n = 1;
              for (int d = 0; d < rank; ++d) n *= static_cast<double>(hi[d] - lo[d]);
              bytes += n * static_cast<double>(dtype_bytes(g_.tensors[bound[storage]].dtype));
              add_box(t.reads, bound[storage], lo, hi);
            }
            for (int i = 0; i < body.num_outputs(); ++i) {
              const BlockOp& saver = body.op(body.output_op(i));
              const Shape& tile = body.tensor(saver.inputs[0]).shape;
              const Shape& full = body.output_shape(i);
              const int rank = full.rank();
              std::vector<int64_t> lo(rank, 0), hi = full.dims();
              for (int a = 0; a < 3; ++a) {
                const int d = saver.attrs.omap[a];
                if (d == kReplicate) continue;
                lo[d] = block[a] * tile[d];
                hi[d] = std::min(full[d], lo[d] + tile[d]);
              }
              add_box(t.writes, bound[kop.outputs[i]], lo, hi);
            }
            t.cost = bytes;
          }
    }
    return true;
  }

  int function_id(const std::string& op, int kernel) {
    for (size_t f = 0; f < g_.functions.size(); ++f)
      if (g_.functions[f].op == op && g_.functions[f].kernel == kernel) return static_cast<int>(f);
    g_.functions.push_back({op, kernel});
    return static_cast<int>(g_.functions.size() - 1);
  }

  // A box [lo, hi) in the logical indices of a view → the indices of the tensor holding it
  // (IndexMap: the last two swapped when transposed, then the origin added).
  static void to_storage(const IndexMap& map, std::vector<int64_t>& lo, std::vector<int64_t>& hi) {
    const size_t r = lo.size();
    if (map.transposed && r >= 2) {
      std::swap(lo[r - 1], lo[r - 2]);
      std::swap(hi[r - 1], hi[r - 2]);
    }
    for (size_t d = 0; d < map.origin.size() && d < r; ++d) {
      lo[d] += map.origin[d];
      hi[d] += map.origin[d];
    }
  }

  // The box [lo, hi) of tensor t (rank-r indices) as rectangles of its 2-D view (rows = the
  // first dim, columns = the rest flattened): one per index of the middle dims, merged where
  // they abut.
  void add_box(std::vector<Region>& out, int t, const std::vector<int64_t>& lo,
               const std::vector<int64_t>& hi) {
    const size_t r = lo.size();
    if (r == 0) {
      out.push_back(whole(t));
      return;
    }
    if (r == 1) {
      out.push_back(rect(t, lo[0], hi[0], 0, 1));
      return;
    }
    const std::vector<int64_t>& shape = g_.tensors[t].shape;
    std::vector<int64_t> idx(lo.begin() + 1, lo.end() - 1);  // middle dims
    const size_t first = out.size();
    for (;;) {
      int64_t base = 0;
      for (size_t d = 1; d + 1 < r; ++d) base = base * shape[d] + idx[d - 1];
      base *= shape[r - 1];
      const int64_t c0 = base + lo[r - 1], c1 = base + hi[r - 1];
      if (out.size() > first && out.back().c1 == c0)
        out.back().c1 = c1;
      else
        out.push_back(rect(t, lo[0], hi[0], c0, c1));
      size_t d = idx.size();
      while (d > 0) {
        if (++idx[d - 1] < hi[d]) break;
        idx[d - 1] = lo[d];
        --d;
      }
      if (d == 0) break;
    }
  }

  void embed_op(int64_t table, int x) {
    OpInfo& op = new_op(MPK_EMBED, "embed", -1);
    op.w[0] = table;
    op.out0 = x;
    op.k = m_.hidden;
    for (int64_t b = 0; b < m_.batch; ++b) {
      TaskInfo& t = new_task(static_cast<int32_t>(b));
      t.reads.push_back(whole(buffer_tensor(table)));
      t.writes.push_back(rect(x, b, b + 1, 0, m_.hidden));
      t.cost = static_cast<double>(m_.hidden * 2);
    }
  }

  // A matmul over K inputs and N output columns split in tiles of columns; `weights` weight
  // matrices per column (2 for the gated MLP). MPK_MATMUL_RESIDUAL also reads the residual's
  // tile; MPK_NORM_LMHEAD also writes its per-tile argmax row.
  void matmul_op(int kind, const std::string& name, int64_t layer, int in, int residual, int out,
                 std::array<int64_t, 3> w, int64_t K, int64_t N, int64_t weights,
                 int partial = -1) {
    const int64_t tile = choose_matmul_tile(N, K, weights, o_);
    const int64_t tiles = (N + tile - 1) / tile;
    OpInfo& op = new_op(kind, name, layer);
    op.in0 = in;
    op.in1 = residual;
    op.out0 = out;
    op.out1 = partial;
    for (int i = 0; i < 3; ++i) op.w[i] = w[i];
    op.k = K;
    op.n = N;
    op.tile = tile;
    op.ntiles = tiles;
    for (int64_t i = 0; i < tiles; ++i) {
      const int64_t c0 = i * tile, c1 = std::min(N, c0 + tile);
      TaskInfo& t = new_task(static_cast<int32_t>(i));
      t.reads.push_back(whole(in));
      if (residual >= 0) t.reads.push_back(cols(residual, c0, c1));
      t.writes.push_back(cols(out, c0, c1));
      if (partial >= 0) t.writes.push_back(rect(partial, i, i + 1, 0, m_.batch));
      t.cost = static_cast<double>((c1 - c0) * K * 2 * weights + m_.batch * K * 2);
    }
  }

  int64_t cache_row(int64_t layer, int64_t b, int64_t h) const {
    return (layer * m_.batch + b) * m_.kv_heads + h;
  }

  // The columns of qkv's row b holding q head group h, k head h, v head h.
  Region q_cols(int qkv, int64_t b, int64_t h) const {
    const int64_t D = m_.head_dim, G = m_.heads / m_.kv_heads;
    return rect(qkv, b, b + 1, h * G * D, (h + 1) * G * D);
  }
  Region k_cols(int qkv, int64_t b, int64_t h) const {
    return rect(qkv, b, b + 1, m_.q_width() + h * m_.head_dim,
                m_.q_width() + (h + 1) * m_.head_dim);
  }
  Region v_cols(int qkv, int64_t b, int64_t h) const {
    const int64_t c0 = m_.q_width() + m_.kv_width() + h * m_.head_dim;
    return rect(qkv, b, b + 1, c0, c0 + m_.head_dim);
  }
  Region cache_rows(int64_t cache, int64_t layer, int64_t b, int64_t h) const {
    const int64_t r = cache_row(layer, b, h);
    return rect(buffer_tensor(cache), r, r + 1, 0, g_.tensors[buffer_tensor(cache)].cols);
  }

  // rot = {q-norm gain, k-norm gain, inverse frequencies} (buffer ids; gains -1 without
  // qk-norm). Every chunk rotates its q heads itself (no rotary stage between the QKV product
  // and attention); chunk 0 also scores the step's own position from qkv's k and v.
  void attn_op(const std::string& name, int64_t layer, int qkv, int po, int pml,
               const int64_t rot[3], int64_t kc, int64_t vc) {
    OpInfo& op = new_op(MPK_ATTN_CHUNK, name, layer);
    op.in0 = qkv;
    op.out0 = po;
    op.out1 = pml;
    for (int i = 0; i < 3; ++i) op.w[i] = rot[i];
    op.w[3] = kc;
    op.w[4] = vc;
    op.n = chunks_;
    const int64_t D = m_.head_dim, G = m_.heads / m_.kv_heads;
    const int64_t span = (m_.max_kv + chunks_ - 1) / chunks_;
    for (int64_t b = 0; b < m_.batch; ++b)
      for (int64_t h = 0; h < m_.kv_heads; ++h)
        for (int64_t c = 0; c < chunks_; ++c) {
          TaskInfo& t =
              new_task(static_cast<int32_t>(b), static_cast<int32_t>(h), static_cast<int32_t>(c));
          t.reads.push_back(q_cols(qkv, b, h));
          if (c == 0) {
            t.reads.push_back(k_cols(qkv, b, h));
            t.reads.push_back(v_cols(qkv, b, h));
          }
          t.reads.push_back(cache_rows(kc, layer, b, h));
          t.reads.push_back(cache_rows(vc, layer, b, h));
          const int64_t r0 = b * m_.heads + h * G;
          t.writes.push_back(rect(po, r0, r0 + G, c * D, (c + 1) * D));
          t.writes.push_back(rect(pml, r0, r0 + G, c * 2, c * 2 + 2));
          t.cost = static_cast<double>(span * D * 2 * 2);
        }
  }

  // Merges the chunks of a (batch row, kv head) and appends the step's k and v to the caches
  // (qkv at IN2, the k-norm gain and frequencies, the caches): after every chunk of the head has
  // read the cache rows (the partials order it, and so does the write-after-read rule), before
  // the next step.
  void combine_op(const std::string& name, int64_t layer, int po, int pml, int qkv, int attn,
                  const int64_t rot[3], int64_t kc, int64_t vc) {
    OpInfo& op = new_op(MPK_ATTN_COMBINE, name, layer);
    op.in0 = po;
    op.in1 = pml;
    op.in2 = qkv;
    op.out0 = attn;
    op.w[1] = rot[1];
    op.w[2] = rot[2];
    op.w[3] = kc;
    op.w[4] = vc;
    op.n = chunks_;
    const int64_t D = m_.head_dim, G = m_.heads / m_.kv_heads;
    for (int64_t b = 0; b < m_.batch; ++b)
      for (int64_t h = 0; h < m_.kv_heads; ++h) {
        TaskInfo& t = new_task(static_cast<int32_t>(b), static_cast<int32_t>(h));
        const int64_t r0 = b * m_.heads + h * G;
        t.reads.push_back(rect(po, r0, r0 + G, 0, chunks_ * D));
        t.reads.push_back(rect(pml, r0, r0 + G, 0, chunks_ * 2));
        t.reads.push_back(k_cols(qkv, b, h));
        t.reads.push_back(v_cols(qkv, b, h));
        t.writes.push_back(rect(attn, b, b + 1, h * G * D, (h + 1) * G * D));
        t.writes.push_back(cache_rows(kc, layer, b, h));
        t.writes.push_back(cache_rows(vc, layer, b, h));
        // The partials read, k and v read (f16) and written to the caches (f16).
        t.cost = static_cast<double>(G * chunks_ * (D + 2) * 4 + 2 * D * 4);
      }
  }

  void argmax_op(int partial, int64_t tiles) {
    OpInfo& op = new_op(MPK_ARGMAX, "argmax", -1);
    op.in0 = partial;
    op.ntiles = tiles;
    TaskInfo& t = new_task(0);
    t.reads.push_back(whole(partial));
    t.cost = static_cast<double>(tiles * m_.batch * 8);
  }

  // Events from footprints: for every region a task reads, the tasks of earlier ops that write
  // an overlapping region (its inputs); for every region it writes, those that read one (they
  // must be done with it first: a cache row read by attention chunks, then appended to; no two
  // tasks write overlapping regions, the validator checks). One event per distinct producer set.
  void derive_events() {
    const RegionIndex writes(g_, Access::Writes), reads(g_, Access::Reads);
    std::map<std::vector<int>, int> event_of;
    for (size_t ti = 0; ti < g_.tasks.size(); ++ti) {
      TaskInfo& t = g_.tasks[ti];
      auto wait_for = [&](const Region& r, const RegionIndex& index) {
        std::vector<int> producers;
        index.for_each_overlap(r, [&](int w, const Region&) {
          if (g_.tasks[w].op < t.op) producers.push_back(w);
        });
        if (producers.empty()) return;
        std::sort(producers.begin(), producers.end());
        producers.erase(std::unique(producers.begin(), producers.end()), producers.end());
        auto [it, inserted] = event_of.emplace(producers, static_cast<int>(g_.events.size()));
        if (inserted) g_.events.push_back(EventInfo{producers});
        if (std::find(t.waits.begin(), t.waits.end(), it->second) == t.waits.end())
          t.waits.push_back(it->second);
      };
      for (const Region& r : t.reads) wait_for(r, writes);
      for (const Region& r : t.writes) wait_for(r, reads);
    }
    for (size_t e = 0; e < g_.events.size(); ++e)
      for (int p : g_.events[e].producers) g_.tasks[p].triggers.push_back(static_cast<int>(e));
  }

  const ModelConfig& m_;
  const CompileOptions& o_;
  TaskGraph g_;
  int64_t chunks_ = 1;
};

}  // namespace

std::vector<int64_t> op_record(const TaskGraph& g, int op_id) {
  const OpInfo& op = g.ops[op_id];
  std::vector<int64_t> r(MPK_OP_FIELDS, -1);
  auto offset = [&](int t) { return t < 0 ? int64_t{-1} : g.tensors[t].offset; };
  r[MPK_OP_KIND] = op.kind;
  r[MPK_OP_LAYER] = op.layer;
  r[MPK_OP_IN0] = offset(op.in0);
  r[MPK_OP_IN1] = offset(op.in1);
  r[MPK_OP_IN2] = offset(op.in2);
  r[MPK_OP_OUT0] = offset(op.out0);
  r[MPK_OP_OUT1] = offset(op.out1);
  for (int i = 0; i < 5; ++i) r[MPK_OP_W0 + i] = op.w[i];
  r[MPK_OP_K] = op.k;
  r[MPK_OP_N] = op.n;
  r[MPK_OP_TILE] = op.tile;
  r[MPK_OP_NTILES] = op.ntiles;
  if (op.kind == MPK_GENERATED) {
    r[MPK_OP_FUNC] = op.func;
    for (size_t a = 0; a < op.args.size(); ++a) {
      const TensorInfo& T = g.tensors[op.args[a]];
      r[MPK_OP_ARG0 + a] = T.storage == Storage::Workspace ? T.offset : MPK_ARG_BUFFER(T.buffer);
    }
  }
  return r;
}

Result<TaskGraph> build_task_graph(const ModelConfig& model, const CompileOptions& options) {
  STRATA_RETURN_IF_ERROR(validate_model_config(model, "model"));
  if (options.workers < 1 || options.workers > 4096)
    return make_error("workers: expected an integer in [1, 4096], got " +
                      std::to_string(options.workers));
  if (options.max_tile_bytes < 1)
    return make_error("max tile bytes: expected a positive integer, got " +
                      std::to_string(options.max_tile_bytes));
  if (options.attn_chunks < 0 || options.attn_chunks > 65536)
    return make_error("attention chunks: expected an integer in [0, 65536], got " +
                      std::to_string(options.attn_chunks));
  const double tasks = estimate_tasks(model, options);
  if (tasks > static_cast<double>(kMaxTasks))
    return make_error("the model needs about " + std::to_string(static_cast<int64_t>(tasks)) +
                      " tasks, more than the " + std::to_string(kMaxTasks) +
                      " the compiler takes (fewer layers, a smaller batch, larger tiles or "
                      "fewer attention chunks)");
  Builder b(model, options);
  return b.build();
}

Result<TaskGraph> compile_task_graph(const ModelConfig& model, const CompileOptions& options) {
  STRATA_ASSIGN_OR_RETURN(TaskGraph g, build_task_graph(model, options));
  plan_workspace(g);
  assign_workers(g);
  return g;
}

}  // namespace strata::mpk
