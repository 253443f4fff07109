#include "strata/search_cache.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "strata/cost_model.h"
#include "strata/dim_classes.h"
#include "strata/graph_io.h"

namespace strata {
namespace {

constexpr int kEnvelopeVersion = 1;

uint64_t fnv1a(std::string_view data, uint64_t basis, uint64_t prime) {
  uint64_t h = basis;
  for (unsigned char c : data) {
    h ^= c;
    h *= prime;
  }
  return h;
}

/// The splitmix64 finalizer: spreads FNV's weak low-order mixing over all bits.
uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

std::string content_hash(std::string_view data) {
  uint64_t a = mix(fnv1a(data, 0xcbf29ce484222325ULL, 0x100000001b3ULL) ^ data.size());
  uint64_t b =
      mix(fnv1a(data, 0x84222325cbf29ce4ULL, 0x100000000000233ULL) + 0x9e3779b97f4a7c15ULL);
  return hex64(a) + hex64(b);
}

std::string resolve_cache_dir(const std::string& configured) {
  if (!configured.empty()) return configured;
  if (const char* env = std::getenv("STRATA_CACHE_DIR"); env && *env) return env;
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.cache/strata";
  return ".strata-cache";
}

Json search_model_fingerprint(const std::string& target) {
  // Every field of Target and SplitPolicy, named through structured bindings: a field added to
  // either struct stops this from compiling until it is part of the fingerprint too (a stale
  // cache would otherwise keep rankings made under the old constants).
  Json f;
  if (auto t = Target::by_name(target); t.ok()) {
    const auto& [name, sm_count, smem_per_block_bytes, mem_bandwidth_Bps, l2_bandwidth_Bps,
                 narrow_bandwidth_Bps, l2_bytes, tensor_peak_flops, simt_peak_flops,
                 launch_overhead_s, alpha_sm_factor, iteration_latency_s] = *t;
    (void)name;  // the target's name is in the key beside the fingerprint
    // Non-finite rates ("free") are written as strings: JSON has no infinity.
    auto rate = [](double v) { return std::isfinite(v) ? Json(v) : Json("inf"); };
    f["sm_count"] = sm_count;
    f["smem_per_block_bytes"] = smem_per_block_bytes;
    f["mem_bandwidth_Bps"] = rate(mem_bandwidth_Bps);
    f["l2_bandwidth_Bps"] = rate(l2_bandwidth_Bps);
    f["narrow_bandwidth_Bps"] = rate(narrow_bandwidth_Bps);
    f["l2_bytes"] = l2_bytes;
    f["tensor_peak_flops"] = rate(tensor_peak_flops);
    f["simt_peak_flops"] = rate(simt_peak_flops);
    f["launch_overhead_s"] = launch_overhead_s;
    f["alpha_sm_factor"] = alpha_sm_factor;
    f["iteration_latency_s"] = iteration_latency_s;
  }
  const auto& [grid_tiles, max_unit_tile_extent, reduce_tiles, loop_tiles, max_blocks] =
      SplitPolicy{};
  f["grid_tiles"] = grid_tiles;
  f["max_unit_tile_extent"] = max_unit_tile_extent;
  f["reduce_tiles"] = reduce_tiles;
  f["loop_tiles"] = loop_tiles;
  f["max_blocks"] = max_blocks;
  return f;
}

std::string search_cache_key(const KernelGraph& program, const SearchConfig& c) {
  Json k;
  k["program"] = kernel_graph_to_json(program);
  k["max_kernel_ops"] = c.max_kernel_ops;
  k["max_block_ops"] = c.max_block_ops;
  k["max_customized_ops"] = c.max_customized_ops;
  k["max_block_inputs"] = c.max_block_inputs;
  k["max_block_outputs"] = c.max_block_outputs;
  k["abstract_pruning"] = c.abstract_pruning;
  k["target"] = c.target;
  k["top_k"] = c.top_k;
  k["model"] = search_model_fingerprint(c.target);
  k["strata_version"] = STRATA_VERSION;
  return content_hash(k.dump());
}

Status write_checked_json(const std::string& path, std::string_view format, const std::string& key,
                          const Json& payload) {
  std::error_code ec;
  auto dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  if (ec) return make_error(dir.string() + ": cannot create directory: " + ec.message());
  Json doc;
  doc["format"] = std::string(format);
  doc["version"] = kEnvelopeVersion;
  doc["key"] = key;
  std::string body = payload.dump();
  doc["checksum"] = content_hash(body);
  doc["payload"] = payload;
  return write_text_file(path, doc.dump() + "\n");
}

Result<Json> read_checked_json(const std::string& path, std::string_view format,
                               const std::string& key) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return make_error("missing: " + path);
  STRATA_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
  if (text.empty()) return make_error(path + ": empty file (truncated?)");
  STRATA_ASSIGN_OR_RETURN(Json doc, parse_json_text(text, path));
  auto field = [&](const char* name) -> const Json* {
    auto it = doc.find(name);
    return it == doc.end() ? nullptr : &*it;
  };
  const Json* f = field("format");
  if (!doc.is_object() || !f || !f->is_string() || f->get<std::string>() != format)
    return make_error(path + ": not a " + std::string(format) + " document");
  const Json* v = field("version");
  if (!v || !json_int(*v, "version", kEnvelopeVersion, kEnvelopeVersion).ok())
    return make_error(path + ": unsupported version (expected " + std::to_string(kEnvelopeVersion) +
                      ")");
  const Json* k = field("key");
  if (!k || !k->is_string() || k->get<std::string>() != key)
    return make_error(path + ": written for another program or configuration (key mismatch)");
  const Json* c = field("checksum");
  const Json* p = field("payload");
  if (!c || !c->is_string() || !p) return make_error(path + ": checksum or payload missing");
  if (content_hash(p->dump()) != c->get<std::string>())
    return make_error(path + ": checksum mismatch (the file was changed or damaged)");
  return *p;
}

}  // namespace strata
