#include "strata/emit_knobs.h"

#include <cctype>
#include <functional>
#include <sstream>

namespace strata {
namespace {

struct Knob {
  const char* name;
  std::function<void(EmitOptions&, int64_t)> set;
  bool boolean = false;
};

const std::vector<Knob>& knobs() {
  static const std::vector<Knob> k = {
      {"groups", [](EmitOptions& o, int64_t v) { o.plan.loop_groups = static_cast<int>(v); }},
      {"stages", [](EmitOptions& o, int64_t v) { o.plan.forced_stages = static_cast<int>(v); }},
      {"threads", [](EmitOptions& o, int64_t v) { o.plan.threads = static_cast<int>(v); }},
      {"maxstages", [](EmitOptions& o, int64_t v) { o.plan.max_stages = static_cast<int>(v); }},
      {"inflight", [](EmitOptions& o, int64_t v) { o.plan.bytes_in_flight = v; }},
      {"regfloats",
       [](EmitOptions& o, int64_t v) { o.plan.register_accum_floats = static_cast<int>(v); }},
      {"sms", [](EmitOptions& o, int64_t v) { o.plan.sm_count = static_cast<int>(v); }},
      {"smem", [](EmitOptions& o, int64_t v) { o.plan.smem_limit = v; }},
      {"tc", [](EmitOptions& o, int64_t v) { o.plan.tensor_cores = v != 0; }, true},
      {"chain", [](EmitOptions& o, int64_t v) { o.plan.chain_matmuls = v != 0; }, true},
      {"fold", [](EmitOptions& o, int64_t v) { o.plan.fold_norms = v != 0; }, true},
      {"regacc", [](EmitOptions& o, int64_t v) { o.plan.register_accums = v != 0; }, true},
      {"rowwise", [](EmitOptions& o, int64_t v) { o.plan.rowwise = v != 0; }, true},
      {"inline", [](EmitOptions& o, int64_t v) { o.plan.inline_elementwise = v != 0; }, true},
      {"epilogue", [](EmitOptions& o, int64_t v) { o.plan.fuse_epilogues = v != 0; }, true},
      {"hoist", [](EmitOptions& o, int64_t v) { o.plan.hoist_invariants = v != 0; }, true},
      {"views", [](EmitOptions& o, int64_t v) { o.plan.concat_views = v != 0; }, true},
      {"f32mid", [](EmitOptions& o, int64_t v) { o.f32_intermediates = v != 0; }, true},
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
    knob->set(options, value);
  }
  return Status::success();
}

}  // namespace strata
