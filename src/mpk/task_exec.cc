// The float64 task executor and the plain reference step (docs/megakernel.md, "Testing").
#include "strata/mpk/task_exec.h"

#include <cmath>
#include <limits>
#include <random>

#include "strata/interp/interpreter.h"
#include "strata/mpk/generated_ops.h"

namespace strata::mpk {
namespace {

double silu(double a) {
  return a / (1 + std::exp(-a));
}

// Rotates the pairs (i, i + D/2) of v by pos·inv_freq[i] (the "rotate half" convention).
void rope(std::vector<double>& v, const std::vector<double>& inv_freq, int64_t pos) {
  const size_t half = v.size() / 2;
  for (size_t i = 0; i < half; ++i) {
    const double a = static_cast<double>(pos) * inv_freq[i];
    const double x1 = v[i], x2 = v[i + half];
    v[i] = x1 * std::cos(a) - x2 * std::sin(a);
    v[i + half] = x2 * std::cos(a) + x1 * std::sin(a);
  }
}

void rms_norm(std::vector<double>& v, const std::vector<double>& gain, double eps) {
  double ss = 0;
  for (double x : v) ss += x * x;
  const double r = 1 / std::sqrt(ss / static_cast<double>(v.size()) + eps);
  for (size_t i = 0; i < v.size(); ++i) v[i] = v[i] * r * gain[i];
}

int64_t cache_index(const ModelConfig& m, int64_t layer, int64_t b, int64_t h, int64_t pos) {
  return (((layer * m.batch + b) * m.kv_heads + h) * m.max_kv + pos) * m.head_dim;
}

}  // namespace

ModelBuffers random_buffers(const TaskGraph& g, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  ModelBuffers mb;
  for (int t : g.buffers) {
    const TensorInfo& T = g.tensors[t];
    std::vector<double> v(static_cast<size_t>(T.rows * T.cols), 0.0);
    if (T.name == "rope_inv_freq") {
      const double D = static_cast<double>(g.model.head_dim);
      for (size_t i = 0; i < v.size(); ++i)
        v[i] = std::pow(g.model.rope_theta, -2.0 * static_cast<double>(i) / D);
    } else if (T.storage == Storage::Weight) {
      const bool gain = T.shape.size() == 1;
      const double scale = gain ? 0.1 : 1 / std::sqrt(static_cast<double>(T.shape.back()));
      for (double& x : v) x = gain ? 1 + scale * u(rng) : scale * u(rng) * std::sqrt(3.0);
    }
    mb.data.push_back(std::move(v));
  }
  return mb;
}

TaskExecutor::TaskExecutor(const TaskGraph& g, ModelBuffers& buffers)
    : g_(g),
      buf_(buffers),
      mem_(static_cast<size_t>(g.workspace_bytes / 2 + 4),
           std::numeric_limits<double>::quiet_NaN()) {}

void TaskExecutor::begin_step(std::vector<int64_t> tokens, int64_t pos) {
  tokens_ = std::move(tokens);
  next_.assign(tokens_.size(), -1);
  pos_ = pos;
}

double TaskExecutor::rd(int tensor, int64_t idx, int field) const {
  const TensorInfo& T = g_.tensors[tensor];
  return mem_[T.offset / 2 + idx * (dtype_bytes(T.dtype) / 2) + 2 * field];
}

void TaskExecutor::wr(std::vector<Write>& out, int tensor, int64_t idx, double v, int field) const {
  const TensorInfo& T = g_.tensors[tensor];
  const int64_t u = T.offset / 2 + idx * (dtype_bytes(T.dtype) / 2) + 2 * field;
  out.push_back({u, v});
  if (dtype_bytes(T.dtype) >= 4) out.push_back({u + 1, std::numeric_limits<double>::quiet_NaN()});
}

void TaskExecutor::apply(const std::vector<Write>& writes) {
  for (const auto& [u, v] : writes) mem_[u] = v;
}

double TaskExecutor::combined(int po, int pml, int64_t r0, int64_t C, int64_t d) const {
  const int64_t D = g_.model.head_dim;
  double M = -std::numeric_limits<double>::infinity(), L = 0, o = 0;
  for (int64_t c = 0; c < C; ++c)
    if (rd(pml, (r0 + c) * 2 + 1) > 0) M = std::max(M, rd(pml, (r0 + c) * 2));
  for (int64_t c = 0; c < C; ++c) {
    const double l = rd(pml, (r0 + c) * 2 + 1);
    if (!(l > 0)) continue;  // an empty chunk
    const double w = std::exp(rd(pml, (r0 + c) * 2) - M);
    L += l * w;
    o += w * rd(po, (r0 + c) * D + d);
  }
  return o / L;
}

void TaskExecutor::append_kv(const OpInfo& op, int64_t b, int64_t h) {
  const ModelConfig& m = g_.model;
  const int64_t D = m.head_dim, QW = m.q_width();
  const int64_t row = b * m.qkv_width(), ci = cache_index(m, op.layer, b, h, pos_);
  std::vector<double> k(D);
  for (int64_t d = 0; d < D; ++d) k[d] = rd(op.in2, row + QW + h * D + d);
  if (op.w[1] >= 0) rms_norm(k, buf_.data[op.w[1]], m.eps);
  rope(k, buf_.data[op.w[2]], pos_);
  for (int64_t d = 0; d < D; ++d) {
    buf_.data[op.w[3]][ci + d] = k[d];
    buf_.data[op.w[4]][ci + d] = rd(op.in2, row + QW + m.kv_width() + h * D + d);
  }
}

std::vector<double> TaskExecutor::normed_row(const OpInfo& op, int64_t b) const {
  std::vector<double> x(op.k);
  for (int64_t k = 0; k < op.k; ++k) x[k] = rd(op.in0, b * op.k + k);
  if (op.w[0] >= 0) rms_norm(x, buf_.data[op.w[0]], g_.model.eps);
  return x;
}

std::vector<Write> TaskExecutor::run(int t) {
  const TaskInfo& task = g_.tasks[t];
  const OpInfo& op = g_.ops[task.op];
  const ModelConfig& m = g_.model;
  const int64_t B = m.batch, D = m.head_dim, G = m.heads / m.kv_heads, QW = m.q_width();
  std::vector<Write> out;
  switch (op.kind) {
    case MPK_GENERATED: {
      // The kernel alone in float64 on the operands as they are at the task's start; the task
      // writes only its block's tiles.
      const GeneratedFunction& f = g_.functions[op.func];
      const GeneratedKernel& gk = g_.options.generated->at(f.op).kernels[f.kernel];
      std::vector<HostTensor> ins;
      for (int a = 0; a < gk.num_inputs; ++a) {
        const TensorInfo& T = g_.tensors[op.args[a]];
        HostTensor h(gk.alone.tensor(gk.alone.inputs()[a]).shape);
        for (size_t i = 0; i < h.data.size(); ++i)
          h.data[i] = T.storage == Storage::Workspace ? rd(op.args[a], static_cast<int64_t>(i))
                                                      : buf_.data[T.buffer][i];
        ins.push_back(std::move(h));
      }
      auto outs = run_reference(gk.alone, ins, ExecOptions{1});
      for (const Region& r : task.writes) {
        size_t k = gk.num_inputs;
        while (k < op.args.size() && op.args[k] != r.tensor) ++k;
        const int64_t cols = g_.tensors[r.tensor].cols;
        for (int64_t row = r.r0; row < r.r1; ++row)
          for (int64_t c = r.c0; c < r.c1; ++c) {
            const int64_t i = row * cols + c;
            const double v = outs.ok() && k < op.args.size()
                                 ? (*outs)[k - gk.num_inputs].data[static_cast<size_t>(i)]
                                 : std::numeric_limits<double>::quiet_NaN();
            wr(out, r.tensor, i, v);
          }
      }
      break;
    }
    case MPK_EMBED: {
      const int64_t b = task.i0, tok = tokens_[b];
      for (int64_t k = 0; k < op.k; ++k)
        wr(out, op.out0, b * op.k + k, buf_.data[op.w[0]][tok * op.k + k]);
      break;
    }
    case MPK_NORM_MATMUL:
    case MPK_MATMUL_RESIDUAL:
    case MPK_NORM_GATED:
    case MPK_NORM_LMHEAD: {
      const int64_t c0 = task.i0 * op.tile, c1 = std::min(op.n, c0 + op.tile);
      for (int64_t b = 0; b < B; ++b) {
        const std::vector<double> x = normed_row(op, b);
        double best = -std::numeric_limits<double>::infinity();
        int64_t best_i = -1;
        for (int64_t c = c0; c < c1; ++c) {
          double y = 0, y2 = 0;
          for (int64_t k = 0; k < op.k; ++k) y += x[k] * buf_.data[op.w[1]][c * op.k + k];
          if (op.kind == MPK_NORM_GATED) {
            for (int64_t k = 0; k < op.k; ++k) y2 += x[k] * buf_.data[op.w[2]][c * op.k + k];
            y = silu(y) * y2;
          }
          if (op.kind == MPK_MATMUL_RESIDUAL) y += rd(op.in1, b * op.n + c);
          wr(out, op.out0, b * op.n + c, y);
          if (y > best) {
            best = y;
            best_i = c;
          }
        }
        if (op.kind == MPK_NORM_LMHEAD) {
          wr(out, op.out1, task.i0 * B + b, best, 0);
          wr(out, op.out1, task.i0 * B + b, static_cast<double>(best_i), 1);
        }
      }
      break;
    }
    case MPK_ATTN_CHUNK: {
      // Chunk c: the cached positions [c·len, (c+1)·len) ∩ [0, pos), len = ⌈pos/C⌉; chunk 0
      // also position pos, from qkv (task_abi.h).
      const int64_t b = task.i0, h = task.i1, c = task.i2, C = op.n, row = b * m.qkv_width();
      const int64_t len = (pos_ + C - 1) / C;
      const int64_t j0 = std::min(pos_, c * len), j1 = std::min(pos_, j0 + len);
      const std::vector<double>& inv_freq = buf_.data[op.w[2]];
      auto head = [&](int64_t col) {
        std::vector<double> v(D);
        for (int64_t d = 0; d < D; ++d) v[d] = rd(op.in0, row + col + d);
        return v;
      };
      std::vector<double> k_new, v_new;
      if (c == 0) {
        k_new = head(QW + h * D);
        v_new = head(QW + m.kv_width() + h * D);
        if (op.w[1] >= 0) rms_norm(k_new, buf_.data[op.w[1]], m.eps);
        rope(k_new, inv_freq, pos_);
      }
      const double scale = 1 / std::sqrt(static_cast<double>(D));
      for (int64_t gq = 0; gq < G; ++gq) {
        const int64_t hq = h * G + gq, r = (b * m.heads + hq) * C + c;
        std::vector<double> q = head(hq * D);
        if (op.w[0] >= 0) rms_norm(q, buf_.data[op.w[0]], m.eps);
        rope(q, inv_freq, pos_);
        // The positions' keys and values: the cache's, then (chunk 0) the step's own.
        std::vector<const double*> keys, values;
        for (int64_t j = j0; j < j1; ++j) {
          const int64_t ci = cache_index(m, op.layer, b, h, j);
          keys.push_back(&buf_.data[op.w[3]][ci]);
          values.push_back(&buf_.data[op.w[4]][ci]);
        }
        if (c == 0) {
          keys.push_back(k_new.data());
          values.push_back(v_new.data());
        }
        double mx = -std::numeric_limits<double>::infinity(), l = 0;
        std::vector<double> s, o(D, 0.0);
        for (const double* k : keys) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += q[d] * k[d];
          s.push_back(dot * scale);
          mx = std::max(mx, s.back());
        }
        for (size_t j = 0; j < keys.size(); ++j) {
          const double p = std::exp(s[j] - mx);
          l += p;
          for (int64_t d = 0; d < D; ++d) o[d] += p * values[j][d];
        }
        for (int64_t d = 0; d < D; ++d) wr(out, op.out0, r * D + d, o[d]);
        wr(out, op.out1, r * 2, mx);
        wr(out, op.out1, r * 2 + 1, l);
      }
      break;
    }
    case MPK_ATTN_COMBINE: {
      const int64_t b = task.i0, h = task.i1, C = op.n;
      for (int64_t gq = 0; gq < G; ++gq) {
        const int64_t hq = h * G + gq, r0 = (b * m.heads + hq) * C;
        for (int64_t d = 0; d < D; ++d)
          wr(out, op.out0, b * QW + hq * D + d, combined(op.in0, op.in1, r0, C, d));
      }
      append_kv(op, b, h);  // the step's k and v at position pos of the caches
      break;
    }
    case MPK_ARGMAX: {
      for (int64_t b = 0; b < B; ++b) {
        double best = -std::numeric_limits<double>::infinity();
        int64_t idx = -1;
        for (int64_t i = 0; i < op.ntiles; ++i) {
          const double v = rd(op.in0, i * B + b, 0);
          if (v > best || idx < 0) {
            best = v;
            idx = static_cast<int64_t>(rd(op.in0, i * B + b, 1));
          }
        }
        next_[b] = idx;
      }
      break;
    }
    default:
      break;
  }
  return out;
}

std::vector<double> TaskExecutor::logits() const {
  const ModelConfig& m = g_.model;
  for (const OpInfo& op : g_.ops)
    if (op.kind == MPK_NORM_LMHEAD) {
      std::vector<double> v(static_cast<size_t>(m.batch * m.vocab));
      for (size_t i = 0; i < v.size(); ++i) v[i] = rd(op.out0, static_cast<int64_t>(i));
      return v;
    }
  return {};
}

std::vector<double> reference_step(const TaskGraph& g, ModelBuffers& mb,
                                   const std::vector<int64_t>& tokens, int64_t pos) {
  const ModelConfig& m = g.model;
  const int64_t B = m.batch, H = m.hidden, D = m.head_dim, G = m.heads / m.kv_heads;
  auto buf = [&](const std::string& name) -> std::vector<double>& {
    for (size_t i = 0; i < g.buffers.size(); ++i)
      if (g.tensors[g.buffers[i]].name == name) return mb.data[i];
    static std::vector<double> none;
    return none;
  };
  auto matvec = [](const std::vector<double>& W, const std::vector<double>& x, int64_t N) {
    const int64_t K = static_cast<int64_t>(x.size());
    std::vector<double> y(N, 0.0);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) y[n] += W[n * K + k] * x[k];
    return y;
  };
  std::vector<double>&kc = buf("k_cache"), &vc = buf("v_cache"), &inv = buf("rope_inv_freq");
  std::vector<double> logits;
  for (int64_t b = 0; b < B; ++b) {
    std::vector<double> x(H);
    for (int64_t k = 0; k < H; ++k) x[k] = buf("embed")[tokens[b] * H + k];
    for (int64_t l = 0; l < m.layers; ++l) {
      const std::string p = "layers." + std::to_string(l) + ".";
      std::vector<double> n = x;
      rms_norm(n, buf(p + "attn_norm"), m.eps);
      const std::vector<double> qkv = matvec(buf(p + "wqkv"), n, m.qkv_width());
      std::vector<double> attn(m.q_width());
      for (int64_t h = 0; h < m.kv_heads; ++h) {
        std::vector<double> k(qkv.begin() + m.q_width() + h * D,
                              qkv.begin() + m.q_width() + (h + 1) * D);
        std::vector<double> v(qkv.begin() + m.q_width() + m.kv_width() + h * D,
                              qkv.begin() + m.q_width() + m.kv_width() + (h + 1) * D);
        if (m.qk_norm) rms_norm(k, buf(p + "k_norm"), m.eps);
        rope(k, inv, pos);
        const int64_t ci = cache_index(m, l, b, h, pos);
        for (int64_t d = 0; d < D; ++d) {
          kc[ci + d] = k[d];
          vc[ci + d] = v[d];
        }
        for (int64_t gq = 0; gq < G; ++gq) {
          const int64_t hq = h * G + gq;
          std::vector<double> q(qkv.begin() + hq * D, qkv.begin() + (hq + 1) * D);
          if (m.qk_norm) rms_norm(q, buf(p + "q_norm"), m.eps);
          rope(q, inv, pos);
          std::vector<double> s(pos + 1);
          double mx = -std::numeric_limits<double>::infinity(), sum = 0;
          for (int64_t j = 0; j <= pos; ++j) {
            double dot = 0;
            for (int64_t d = 0; d < D; ++d) dot += q[d] * kc[cache_index(m, l, b, h, j) + d];
            s[j] = dot / std::sqrt(static_cast<double>(D));
            mx = std::max(mx, s[j]);
          }
          for (int64_t j = 0; j <= pos; ++j) sum += s[j] = std::exp(s[j] - mx);
          for (int64_t d = 0; d < D; ++d) {
            double o = 0;
            for (int64_t j = 0; j <= pos; ++j) o += s[j] * vc[cache_index(m, l, b, h, j) + d];
            attn[hq * D + d] = o / sum;
          }
        }
      }
      const std::vector<double> o = matvec(buf(p + "wo"), attn, H);
      for (int64_t k = 0; k < H; ++k) x[k] += o[k];
      n = x;
      rms_norm(n, buf(p + "mlp_norm"), m.eps);
      const std::vector<double> gt = matvec(buf(p + "w_gate"), n, m.intermediate);
      const std::vector<double> up = matvec(buf(p + "w_up"), n, m.intermediate);
      std::vector<double> hmid(m.intermediate);
      for (int64_t i = 0; i < m.intermediate; ++i) hmid[i] = silu(gt[i]) * up[i];
      const std::vector<double> dn = matvec(buf(p + "w_down"), hmid, H);
      for (int64_t k = 0; k < H; ++k) x[k] += dn[k];
    }
    rms_norm(x, buf("final_norm"), m.eps);
    const std::vector<double> lg = matvec(buf("lm_head"), x, m.vocab);
    logits.insert(logits.end(), lg.begin(), lg.end());
  }
  return logits;
}

std::vector<int64_t> argmax_rows(const std::vector<double>& logits, int64_t vocab) {
  std::vector<int64_t> r;
  for (size_t b = 0; b * vocab < logits.size(); ++b) {
    int64_t best = 0;
    for (int64_t i = 1; i < vocab; ++i)
      if (logits[b * vocab + i] > logits[b * vocab + best]) best = i;
    r.push_back(best);
  }
  return r;
}

}  // namespace strata::mpk
