#include "strata/codegen/emit_knobs.h"

#include <cctype>
#include <functional>
#include <limits>
#include <sstream>

namespace strata {
namespace {

struct Knob {
  const char* name;
  const char* doc;
  std::function<void(EmitOptions&, int64_t)> set;
  std::function<int64_t(const EmitOptions&)> get;
  bool boolean = false;
  int64_t max = std::numeric_limits<int64_t>::max();  ///< largest value the field holds
};

/// An integer field of PlanOptions.
template <class T>
Knob plan_int(const char* name, T PlanOptions::*field, const char* doc) {
  return {name,
          doc,
          [field](EmitOptions& o, int64_t v) { o.plan.*field = static_cast<T>(v); },
          [field](const EmitOptions& o) { return static_cast<int64_t>(o.plan.*field); },
          false,
          static_cast<int64_t>(std::numeric_limits<T>::max())};
}

/// A boolean field of PlanOptions (0 or 1).
Knob plan_bool(const char* name, bool PlanOptions::*field, const char* doc) {
  return {name, doc, [field](EmitOptions& o, int64_t v) { o.plan.*field = v != 0; },
          [field](const EmitOptions& o) { return static_cast<int64_t>(o.plan.*field); }, true};
}

const std::vector<Knob>& knobs() {
  static const std::vector<Knob> k = {
      plan_int("groups", &PlanOptions::loop_groups,
               "loop groups per block (split-F; 0 auto, 1 off)"),
      plan_int("stages", &PlanOptions::forced_stages, "pipeline stages (0 auto)"),
      plan_bool("early", &PlanOptions::early_refill,
                "loop groups refill a stage before computing (one barrier per level)"),
      plan_bool("sumread", &PlanOptions::sum_at_read,
                "loop groups' partials summed by their post-loop readers (no in-place sum)"),
      plan_int("threads", &PlanOptions::threads, "threads per block (0 auto)"),
      plan_int("minblocks", &PlanOptions::min_blocks_per_sm,
               "blocks per SM the registers must allow (__launch_bounds__; 0 auto)"),
      plan_int("maxstages", &PlanOptions::max_stages, "cap of the automatic pipeline depth"),
      plan_int("inflight", &PlanOptions::bytes_in_flight,
               "bytes in flight per SM that size the pipeline"),
      plan_int("regfloats", &PlanOptions::register_accum_floats,
               "per-thread f32 budget of register accumulators"),
      plan_int("sms", &PlanOptions::sm_count, "SMs of the target"),
      plan_int("smem", &PlanOptions::smem_limit, "shared memory per block (bytes)"),
      plan_bool("tc", &PlanOptions::tensor_cores, "tensor-core (mma.sync) matmuls"),
      plan_bool("chain", &PlanOptions::chain_matmuls,
                "chained matmuls in registers (FlashAttention style)"),
      plan_int("chainmt", &PlanOptions::chain_row_tiles,
               "row tiles per warp of a matmul chain (0 auto)"),
      plan_bool("wgmma", &PlanOptions::wgmma,
                "warpgroup MMA (wgmma, sm_90a) for matmuls with 64-row warpgroup tiles"),
      plan_bool("fold", &PlanOptions::fold_norms, "rms_norm folded into a matmul as a scale"),
      plan_bool("regacc", &PlanOptions::register_accums, "non-matmul accumulators in registers"),
      plan_bool("rowwise", &PlanOptions::rowwise, "register-only rowwise kernels (F = 1)"),
      plan_bool("inline", &PlanOptions::inline_elementwise,
                "single-use elementwise ops evaluated where read"),
      plan_bool("epilogue", &PlanOptions::fuse_epilogues,
                "matmul epilogues evaluated in registers"),
      plan_bool("hoist", &PlanOptions::hoist_invariants, "loop-invariant ops run before the loop"),
      plan_bool("views", &PlanOptions::concat_views, "concat operands stored in place"),
      plan_bool("walk", &PlanOptions::split_chunk_walks,
                "chunk loops as per-thread bases plus unrolled offsets"),
      {"f32mid", "kernel-level intermediates in f32",
       [](EmitOptions& o, int64_t v) { o.f32_intermediates = v != 0; },
       [](const EmitOptions& o) { return static_cast<int64_t>(o.f32_intermediates); }, true},
      {"evict", "L2 streaming window on an input each block reads once (evicted first)",
       [](EmitOptions& o, int64_t v) { o.l2_streaming = v != 0; },
       [](const EmitOptions& o) { return static_cast<int64_t>(o.l2_streaming); }, true},
      {"evictmin", "smallest input the L2 streaming window marks (bytes)",
       [](EmitOptions& o, int64_t v) { o.l2_streaming_min_bytes = v; },
       [](const EmitOptions& o) { return o.l2_streaming_min_bytes; }, false},
      {"blas", "predefined f16/bf16 matmuls as cuBLAS calls (0: generated kernels)",
       [](EmitOptions& o, int64_t v) { o.library_matmul = v != 0; },
       [](const EmitOptions& o) { return static_cast<int64_t>(o.library_matmul); }, true},
      {"streams", "side streams for independent launches (0: all on the caller's stream)",
       [](EmitOptions& o, int64_t v) { o.max_side_streams = static_cast<int>(v); },
       [](const EmitOptions& o) { return static_cast<int64_t>(o.max_side_streams); }, false, 4},
  };
  return k;
}

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

}  // namespace

std::string emit_knobs_help() {
  const EmitOptions defaults;
  std::ostringstream os;
  for (const Knob& k : knobs()) {
    std::string name = k.name;
    name.resize(10, ' ');
    os << name << k.doc << " (default " << k.get(defaults) << ")\n";
  }
  return os.str();
}

std::string format_emit_knobs(const EmitOptions& options) {
  const EmitOptions defaults;
  std::string text;
  for (const Knob& k : knobs())
    if (k.get(options) != k.get(defaults))
      text +=
          (text.empty() ? "" : ",") + std::string(k.name) + "=" + std::to_string(k.get(options));
  return text.empty() ? "default" : text;
}

std::vector<std::string> emit_knob_names() {
  std::vector<std::string> names;
  for (const Knob& k : knobs()) names.push_back(k.name);
  return names;
}

Status apply_emit_knobs(const std::string& spec, EmitOptions& options) {
  const std::string all = trim(spec);
  if (all.empty() || all == "default") return Status::success();
  std::stringstream ss(all);
  for (std::string item; std::getline(ss, item, ',');) {
    item = trim(item);
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string::npos)
      return make_error("emitter knobs `" + spec + "`: expected knob=value, got `" + item + "`");
    const std::string name = trim(item.substr(0, eq)), text = trim(item.substr(eq + 1));
    const Knob* knob = nullptr;
    for (const Knob& k : knobs())
      if (name == k.name) knob = &k;
    if (!knob) {
      std::string known;
      for (const Knob& k : knobs()) known += (known.empty() ? "" : ", ") + std::string(k.name);
      return make_error("emitter knobs: unknown knob `" + name + "` (known: " + known + ")");
    }
    int64_t scale = 1;
    std::string digits = text;
    if (!digits.empty() && (digits.back() == 'k' || digits.back() == 'K')) {
      scale = 1024;
      digits.pop_back();
    }
    bool ok = !digits.empty();
    for (char c : digits) ok = ok && std::isdigit(static_cast<unsigned char>(c));
    if (!ok || digits.size() > 12)
      return make_error("emitter knobs: `" + name + "` needs a non-negative integer, got `" + text +
                        "`");
    const int64_t value = std::stoll(digits) * scale;
    if (knob->boolean && value > 1)
      return make_error("emitter knobs: `" + name + "` is 0 or 1, got `" + text + "`");
    if (value > knob->max)  // never truncated into the field
      return make_error("emitter knobs: `" + name + "` is at most " + std::to_string(knob->max) +
                        ", got `" + text + "`");
    knob->set(options, value);
  }
  return Status::success();
}

}  // namespace strata
