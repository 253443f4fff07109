#include "strata/search/search_cache.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "search_source_hash.h"
#include "strata/cost/cost_model.h"
#include "strata/opt/canonicalize.h"
#include "strata/search/dim_classes.h"
#include "strata/ir/graph_io.h"
#include "strata/util/hash.h"

namespace strata {
namespace {

constexpr int kEnvelopeVersion = 2;

/// JSON text that never throws: invalid UTF-8 in a string becomes U+FFFD.
std::string dump_safe(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

/// What the checksum covers: the key, the program and the payload.
std::string checksum_of(const std::string& key, const std::string& program,
                        const std::string& payload_text) {
  Sha256 h;
  h.update(key);
  h.update("\n");
  h.update(program);
  h.update("\n");
  h.update(payload_text);
  return h.finish_hex();
}

}  // namespace

std::string_view search_source_hash() {
  return STRATA_SEARCH_SOURCE_HASH;
}

std::string program_hash(const KernelGraph& program) {
  return sha256_hex(dump_safe(kernel_graph_to_json(program)));
}

Json search_model_fingerprint(const std::string& target) {
  // Every field of Target (its architecture's facts and the model's constants) and of
  // SplitPolicy, named through structured bindings: a field added to one of the structs stops
  // this from compiling until it is part of the fingerprint too (a stale cache would
  // otherwise keep rankings made under the old constants).
  Json f;
  if (auto t = Target::by_name(target); t.ok()) {
    const auto& [name, sm_arch, cc_major, cc_minor, sm_count, smem_per_block_bytes,
                 smem_per_sm_bytes, registers_per_sm, max_threads_per_sm, l2_bytes, peak_dram_Bps,
                 peak_tensor_flops, wgmma] = static_cast<const ArchTraits&>(*t);
    const auto& [mem_bandwidth_Bps, l2_bandwidth_Bps, narrow_bandwidth_Bps, tensor_peak_flops,
                 simt_peak_flops, launch_overhead_s, alpha_sm_factor, iteration_latency_s,
                 blas_tensor_flops, blas_bandwidth_Bps, simt_mm_step_s, barrier_latency_s,
                 thread_byte_latency_s, register_byte_latency_s, blas_unaligned_factor,
                 blas_unaligned_block_Bps, pass_step_s, blas_launch_s, wgmma_tensor_flops,
                 barrier_sync_s, iteration_chain_s] =
        static_cast<const CostConstants&>(*t);
    (void)name;  // the target's name is in the key beside the fingerprint
    // Non-finite rates ("free") are written as strings: JSON has no infinity.
    auto rate = [](double v) { return std::isfinite(v) ? Json(v) : Json("inf"); };
    f["sm_arch"] = sm_arch;
    f["compute_capability"] = std::to_string(cc_major) + "." + std::to_string(cc_minor);
    f["sm_count"] = sm_count;
    f["smem_per_block_bytes"] = smem_per_block_bytes;
    f["smem_per_sm_bytes"] = smem_per_sm_bytes;
    f["registers_per_sm"] = registers_per_sm;
    f["max_threads_per_sm"] = max_threads_per_sm;
    f["peak_dram_Bps"] = rate(peak_dram_Bps);
    f["peak_tensor_flops"] = rate(peak_tensor_flops);
    f["mem_bandwidth_Bps"] = rate(mem_bandwidth_Bps);
    f["l2_bandwidth_Bps"] = rate(l2_bandwidth_Bps);
    f["narrow_bandwidth_Bps"] = rate(narrow_bandwidth_Bps);
    f["l2_bytes"] = l2_bytes;
    f["tensor_peak_flops"] = rate(tensor_peak_flops);
    f["simt_peak_flops"] = rate(simt_peak_flops);
    f["launch_overhead_s"] = launch_overhead_s;
    f["alpha_sm_factor"] = alpha_sm_factor;
    f["iteration_latency_s"] = iteration_latency_s;
    f["blas_tensor_flops"] = rate(blas_tensor_flops);
    f["blas_bandwidth_Bps"] = rate(blas_bandwidth_Bps);
    f["simt_mm_step_s"] = simt_mm_step_s;
    f["barrier_latency_s"] = barrier_latency_s;
    f["thread_byte_latency_s"] = thread_byte_latency_s;
    f["register_byte_latency_s"] = register_byte_latency_s;
    f["blas_unaligned_factor"] = blas_unaligned_factor;
    f["blas_unaligned_block_Bps"] = rate(blas_unaligned_block_Bps);
    f["pass_step_s"] = pass_step_s;
    f["blas_launch_s"] = blas_launch_s;
    f["wgmma"] = wgmma;
    f["wgmma_tensor_flops"] = rate(wgmma_tensor_flops);
    f["barrier_sync_s"] = barrier_sync_s;
    f["iteration_chain_s"] = iteration_chain_s;
  }
  const auto& [grid_tiles, max_unit_tile_extent, reduce_tiles, loop_tiles, max_blocks,
               max_ragged_waste, large_grid_tiles, wgmma_grid_tiles, wgmma_tile_min_extent] =
      SplitPolicy{};
  f["grid_tiles"] = grid_tiles;
  f["max_unit_tile_extent"] = max_unit_tile_extent;
  f["reduce_tiles"] = reduce_tiles;
  f["loop_tiles"] = loop_tiles;
  f["max_blocks"] = max_blocks;
  f["max_ragged_waste"] = max_ragged_waste;
  f["large_grid_tiles"] = large_grid_tiles;
  f["wgmma_grid_tiles"] = wgmma_grid_tiles;
  f["wgmma_tile_min_extent"] = wgmma_tile_min_extent;
  return f;
}

std::string search_cache_key(const KernelGraph& program, const SearchConfig& config) {
  return search_cache_key(program, config, search_source_hash());
}

std::string search_cache_key(const KernelGraph& program, const SearchConfig& c,
                             std::string_view source_hash) {
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
  k["canonicalize"] = c.canonicalize;
  // The alternative forms searched (docs/search.md, "Alternative forms"): by the rules that
  // make them, so that a search with other forms (or none) never shares an entry.
  Json forms = Json::array();
  if (c.canonicalize && c.alternative_forms)
    for (std::string_view rule : alternative_rule_names()) forms.push_back(std::string(rule));
  k["alternative_forms"] = forms;
  k["split_layers"] = c.split_layers;
  k["model"] = search_model_fingerprint(c.target);
  k["strata_version"] = STRATA_VERSION;
  k["sources"] = std::string(source_hash);
  return sha256_hex(dump_safe(k));
}

std::string checked_json_checksum(const std::string& key, const std::string& program,
                                  const Json& payload) {
  return checksum_of(key, program, dump_safe(payload));
}

Status write_checked_json(const std::string& path, std::string_view format, const std::string& key,
                          const std::string& program, const Json& payload) {
  std::error_code ec;
  auto dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  if (ec) return make_error(dir.string() + ": cannot create directory: " + ec.message());
  Json doc;
  doc["format"] = std::string(format);
  doc["version"] = kEnvelopeVersion;
  doc["key"] = key;
  doc["program"] = program;
  doc["checksum"] = checksum_of(key, program, dump_safe(payload));
  doc["payload"] = payload;
  return write_text_file(path, dump_safe(doc) + "\n");
}

namespace {

Result<Json> read_checked_json_impl(const std::string& path, std::string_view format,
                                    const std::string& key, const std::string& program) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return make_error("missing: " + path);
  STRATA_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
  if (text.empty()) return make_error(path + ": empty file (truncated?)");
  STRATA_ASSIGN_OR_RETURN(Json doc, parse_json_text(text, path));
  if (!doc.is_object()) return make_error(path + ": not a " + std::string(format) + " document");
  auto string_field = [&](const char* name) -> const std::string* {
    auto it = doc.find(name);
    return it != doc.end() && it->is_string() ? it->get_ptr<const std::string*>() : nullptr;
  };
  auto field = [&](const char* name) -> const Json* {
    auto it = doc.find(name);
    return it != doc.end() ? &*it : nullptr;
  };
  const Json* f = field("format");
  if (!f || !f->is_string() || f->get<std::string>() != format)
    return make_error(path + ": not a " + std::string(format) + " document");
  const Json* v = field("version");
  if (!v || !json_int(*v, "version", kEnvelopeVersion, kEnvelopeVersion).ok())
    return make_error(path + ": unsupported version (expected " + std::to_string(kEnvelopeVersion) +
                      ")");
  const std::string* k = string_field("key");
  if (!k || *k != key)
    return make_error(path + ": written for another program or configuration (key mismatch)");
  const std::string* prog = string_field("program");
  if (!prog || *prog != program)
    return make_error(path + ": answers another program (its program hash differs)");
  const std::string* c = string_field("checksum");
  auto p = doc.find("payload");
  if (!c || p == doc.end()) return make_error(path + ": checksum or payload missing");
  if (checksum_of(*k, *prog, dump_safe(*p)) != *c)
    return make_error(path + ": checksum mismatch (the file was changed or damaged)");
  return *p;
}

}  // namespace

Result<Json> read_checked_json(const std::string& path, std::string_view format,
                               const std::string& key, const std::string& program) {
  // The JSON reader reports most damage as errors but throws on some (a number out of range
  // such as 1e400): a damaged file is never fatal.
  try {
    return read_checked_json_impl(path, format, key, program);
  } catch (const nlohmann::json::exception& e) {
    return make_error(path + ": invalid JSON: " + e.what());
  }
}

}  // namespace strata
