// Test support: runs emitted CUDA on the CPU emulator (runtime/strata_rt/emulate.h) and compares
// it with the reference interpreter (run_reference, docs/mugraph-semantics.md in doubles).
#pragma once

#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "strata/codegen/cuda_emitter.h"
#include "strata/interp/interpreter.h"
#include "support/cuda_tools.h"
#include "support/test_steps.h"

namespace strata::testing {

using strata::HostTensor;

/// Host program that loads inputs from files, runs strata_launch (or the function named by the
/// macro STRATA_EMU_LAUNCH, e.g. strata_launch_tasks) on the emulator and writes the outputs.
/// STRATA_EMU_REVERSE=1 runs the threads of each block in reverse order. STRATA_EMU_PACKED=1
/// places the outputs as the source declares (strata_output_base / _offset / _stride / _alloc,
/// docs/codegen.md "Packed outputs": compiled in with -DSTRATA_EMU_PACKED): one allocation per
/// base, the fast path; each output is then read through its strides. Otherwise every output
/// has its own dense allocation (the fallback path of a packing source).
inline const char* kEmulationHarness = R"(#include "graph.cu"
#ifndef STRATA_EMU_LAUNCH
#define STRATA_EMU_LAUNCH strata_launch
#endif
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
static long long bytes_of(int rank, long long (*dim)(int, int), int i, int dtype) {
  long long n = 1;
  for (int d = 0; d < rank; ++d) n *= dim(i, d);
  return n * (dtype == 2 ? 4 : 2);
}
int main(int argc, char** argv) {
  const char* rev = std::getenv("STRATA_EMU_REVERSE");
  strata_rt::emu::settings().reverse = rev && rev[0] == '1';
  const int ni = strata_num_inputs(), no = strata_num_outputs();
  if (argc != 1 + ni + no) { std::fprintf(stderr, "usage: inputs... outputs...\n"); return 2; }
  // Every buffer is followed by kSlack bytes no copy may touch (a tile not clipped where a
  // ragged split ends); an output's slack must also still hold its 0xff fill afterwards.
  const long long kSlack = 64;
  std::vector<std::vector<unsigned char>> ins(ni), outs(no);
  std::vector<const void*> ip(ni);
  std::vector<void*> op(no);
  for (int i = 0; i < ni; ++i) {
    long long n = bytes_of(strata_input_rank(i), strata_input_dim, i, strata_input_dtype(i));
    ins[i].assign(n + kSlack, 0xff);
    FILE* f = std::fopen(argv[1 + i], "rb");
    if (!f || std::fread(ins[i].data(), 1, n, f) != static_cast<size_t>(n)) return 2;
    std::fclose(f);
    ip[i] = ins[i].data();
    strata_rt::emu::add_forbidden(ins[i].data() + n, kSlack);
  }
  const char* packed_env = std::getenv("STRATA_EMU_PACKED");
  const bool packed = packed_env && packed_env[0] == '1';
#ifndef STRATA_EMU_PACKED
  if (packed) { std::fprintf(stderr, "the source declares no output placement\n"); return 5; }
#endif
  // An output's allocation (its own, or its base's when packed) holds alloc elements.
  auto elem = [](int i) { return strata_output_dtype(i) == 2 ? 4LL : 2LL; };
  auto base_of = [&](int i) {
#ifdef STRATA_EMU_PACKED
    if (packed) return strata_output_base(i);
#endif
    return i;
  };
  for (int i = 0; i < no; ++i) {
    long long n = bytes_of(strata_output_rank(i), strata_output_dim, i, strata_output_dtype(i));
#ifdef STRATA_EMU_PACKED
    if (packed) n = strata_output_alloc(i) * elem(i);
#endif
    if (base_of(i) != i) continue;
    outs[i].assign(n + kSlack, 0xff);
    strata_rt::emu::add_forbidden(outs[i].data() + n, kSlack);
  }
  for (int i = 0; i < no; ++i) {
    long long offset = 0;
#ifdef STRATA_EMU_PACKED
    if (packed) offset = strata_output_offset(i);
#endif
    op[i] = outs[base_of(i)].data() + offset * elem(i);
  }
  std::vector<unsigned char> ws(strata_workspace_bytes() + 256, 0xff);
  if (STRATA_EMU_LAUNCH(ip.data(), op.data(), ws.data(), nullptr) != 0) return 3;
  for (int i = 0; i < no; ++i) {
    if (base_of(i) != i) continue;
    const long long n = static_cast<long long>(outs[i].size()) - kSlack;
    for (long long b = n; b < n + kSlack; ++b)
      if (outs[i][b] != 0xff) {
        std::fprintf(stderr, "output %d written past its end (byte %lld)\n", i, b - n);
        return 4;
      }
  }
  for (int i = 0; i < no; ++i) {
    // Row-major, read through the strides of the output's placement (dense: unit row-major).
    const int rank = strata_output_rank(i);
    long long numel = 1, stride[8], index[8];
    for (int d = rank - 1; d >= 0; --d) {
      stride[d] = numel;
      index[d] = 0;
      numel *= strata_output_dim(i, d);
    }
#ifdef STRATA_EMU_PACKED
    if (packed)
      for (int d = 0; d < rank; ++d) stride[d] = strata_output_stride(i, d);
#endif
    std::vector<unsigned char> dense(numel * elem(i));
    const unsigned char* at = static_cast<const unsigned char*>(op[i]);
    for (long long e = 0; e < numel; ++e) {
      long long from = 0;
      for (int d = 0; d < rank; ++d) from += index[d] * stride[d];
      std::memcpy(dense.data() + e * elem(i), at + from * elem(i), elem(i));
      for (int d = rank - 1; d >= 0; --d) {
        if (++index[d] < strata_output_dim(i, d)) break;
        index[d] = 0;
      }
    }
    FILE* f = std::fopen(argv[1 + ni + i], "wb");
    std::fwrite(dense.data(), 1, dense.size(), f);
    std::fclose(f);
  }
  return 0;
}
)";

struct Comparison {
  double rel_l2 = 0;   ///< ‖out − ref‖₂ / ‖ref‖₂
  double max_abs = 0;  ///< max |out − ref|
  double ref_rms = 0;  ///< root mean square of ref
  int64_t bad = 0;     ///< elements with |out − ref| > atol + rtol·|ref| (NaN counts)
};

inline Comparison compare(const HostTensor& out, const HostTensor& ref, double rtol = 2e-2) {
  Comparison c;
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.data.size(); ++i) den += ref.data[i] * ref.data[i];
  c.ref_rms = std::sqrt(den / std::max<size_t>(1, ref.data.size()));
  const double atol = rtol * c.ref_rms;
  for (size_t i = 0; i < ref.data.size(); ++i) {
    double d = out.data[i] - ref.data[i];
    if (!(std::fabs(d) <= atol + rtol * std::fabs(ref.data[i]))) ++c.bad;
    num += d * d;
    c.max_abs = std::max(c.max_abs, std::fabs(d));
  }
  c.rel_l2 = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  if (!(c.rel_l2 == c.rel_l2)) c.rel_l2 = 1e30;
  return c;
}

/// Random inputs rounded to each input's dtype, uniform in [-amp, amp].
inline std::vector<HostTensor> rounded_random_inputs(const KernelGraph& g, unsigned seed,
                                                     double amp) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-amp, amp);
  std::vector<HostTensor> ins;
  for (int t : g.inputs()) {
    HostTensor r(g.tensor(t).shape);
    for (double& v : r.data) {
      float f = static_cast<float>(u(rng));
      switch (g.tensor(t).dtype) {
        case DType::f16:
          v = f16_bits_to_f32(f32_to_f16_bits(f));
          break;
        case DType::bf16:
          v = bf16_bits_to_f32(f32_to_bf16_bits(f));
          break;
        case DType::f32:
          v = f;
          break;
      }
    }
    ins.push_back(std::move(r));
  }
  return ins;
}

inline void write_tensor(const std::string& path, const HostTensor& t, DType dt) {
  std::ofstream out(path, std::ios::binary);
  for (double v : t.data) {
    if (dt == DType::f32) {
      float f = static_cast<float>(v);
      out.write(reinterpret_cast<const char*>(&f), 4);
    } else {
      unsigned short h = dt == DType::f16 ? f32_to_f16_bits(static_cast<float>(v))
                                          : f32_to_bf16_bits(static_cast<float>(v));
      out.write(reinterpret_cast<const char*>(&h), 2);
    }
  }
}

inline bool read_tensor(const std::string& path, HostTensor& t, DType dt) {
  std::ifstream in(path, std::ios::binary);
  for (double& v : t.data) {
    if (dt == DType::f32) {
      float f;
      if (!in.read(reinterpret_cast<char*>(&f), 4)) return false;
      v = f;
    } else {
      unsigned short h;
      if (!in.read(reinterpret_cast<char*>(&h), 2)) return false;
      v = dt == DType::f16 ? f16_bits_to_f32(h) : bf16_bits_to_f32(h);
    }
  }
  return true;
}

/// A compiled emulation of one emitted graph.
class EmulatedGraph {
 public:
  /// Emits `g`, compiles it with the host compiler against the emulator. Check ok() / log().
  /// `launch` is the host function the harness calls (strata_launch_tasks: the task entries).
  EmulatedGraph(const KernelGraph& g, const EmitOptions& opts, const std::string& tag,
                const std::string& launch = "strata_launch")
      : g_(g), dir_(tag) {
    tag_ = tag;
    test_step(tag + ": emit and compile on the emulator");
    auto src = emit_cuda_source(g, opts);
    if (!src.ok()) {
      log_ = "emit failed: " + src.error().message;
      return;
    }
    source_ = src->code;
    const std::string nvcc = find_nvcc(), inc = cuda_include_dir(nvcc);
    if (inc.empty()) {
      log_ = "CUDA headers (cuda_fp16.h) not found: install the CUDA toolkit or set NVCC";
      return;
    }
    write_file(dir_.file("graph.cu"), source_);
    write_file(dir_.file("harness.cc"), kEmulationHarness);
    const char* cxx = std::getenv("CXX");
    // A source that declares its outputs' placement can run with them packed; it packs some
    // when its strata-meta line gives an output a "layout" (docs/codegen.md, "Packed outputs").
    places_ = source_.find("strata_output_base") != std::string::npos;
    const size_t meta = source_.find("// strata-meta: ");
    packs_ = places_ && meta != std::string::npos &&
             source_.substr(meta, source_.find('\n', meta) - meta).find("\"layout\"") !=
                 std::string::npos;
    std::string cmd = std::string(cxx && *cxx ? cxx : "c++") +
                      " -std=c++20 -O1 -w -DSTRATA_RT_EMULATE -DSTRATA_EMU_LAUNCH=" + launch +
                      (places_ ? " -DSTRATA_EMU_PACKED" : "") +
                      " -x c++ -I" + dir_.path.string() + " -I" + cuda_runtime_include_dir() +
                      " -I" + inc + " " + dir_.file("harness.cc") + " -o " + dir_.file("prog");
    ok_ = run_command(cmd, log_) == 0;
    if (!ok_) log_ = "host compile of the emulation failed:\n" + cmd + "\n" + log_;
  }
  bool ok() const { return ok_; }
  const std::string& log() const { return log_; }
  const std::string& source() const { return source_; }

  /// Whether the source packs some of its outputs (gives them a non-dense placement): then
  /// run(..., packed = true) takes the fast path.
  bool packs() const { return packs_; }

  /// Runs on `inputs`; fills `outputs` (one per graph output, row-major) or returns false with
  /// log(). `packed`: the outputs placed as the source declares (the fast path), else each in
  /// its own dense buffer.
  bool run(const std::vector<HostTensor>& inputs, std::vector<HostTensor>& outputs, bool reverse,
           bool packed = false) {
    test_step(tag_ + ": run" + (reverse ? " (threads in reverse)" : "") +
              (packed ? " (outputs packed)" : ""));
    std::string args;
    for (size_t i = 0; i < inputs.size(); ++i) {
      std::string p = dir_.file("in" + std::to_string(i) + ".bin");
      write_tensor(p, inputs[i], g_.tensor(g_.inputs()[i]).dtype);
      args += " " + p;
    }
    for (size_t i = 0; i < g_.outputs().size(); ++i)
      args += " " + dir_.file("out" + std::to_string(i) + ".bin");
    std::string out;
    int rc = run_command(std::string("STRATA_EMU_REVERSE=") + (reverse ? "1 " : "0 ") +
                             "STRATA_EMU_PACKED=" + (packed ? "1 " : "0 ") + dir_.file("prog") +
                             args,
                         out);
    if (rc != 0) {
      log_ = "emulated run failed (exit " + std::to_string(rc) + "):\n" + out;
      return false;
    }
    outputs.clear();
    for (size_t i = 0; i < g_.outputs().size(); ++i) {
      int t = g_.outputs()[i];
      HostTensor r(g_.tensor(t).shape);
      if (!read_tensor(dir_.file("out" + std::to_string(i) + ".bin"), r, g_.tensor(t).dtype)) {
        log_ = "missing output " + std::to_string(i);
        return false;
      }
      outputs.push_back(std::move(r));
    }
    return true;
  }

 private:
  const KernelGraph& g_;
  TempDir dir_;
  std::string tag_;
  std::string source_, log_;
  bool ok_ = false;
  bool places_ = false, packs_ = false;
};

}  // namespace strata::testing
