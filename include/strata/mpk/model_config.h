// A decoder-only transformer described by its shapes: the input of the megakernel compiler
// (docs/megakernel.md, "The model file").
//
// The model file is a JSON object with "format": "strata-mpk-model", "version": 1 and the
// fields of ModelConfig. Every field is range-checked when read; an error names the file, the
// JSON path and the expected range.
#pragma once

#include <cstdint>
#include <string>

#include "strata/ir/json_read.h"
#include "strata/util/status.h"

namespace strata::mpk {

/// The shapes of one decode step. Invariants (checked by validate_model_config): every extent
/// positive; heads a multiple of kv_heads; head_dim even (rotary pairs); every tensor of the
/// step and the caches below 2^48 elements.
struct ModelConfig {
  std::string name = "model";
  int64_t layers = 1;
  int64_t hidden = 64;
  int64_t heads = 4;
  int64_t kv_heads = 2;
  int64_t head_dim = 16;
  int64_t intermediate = 128;
  int64_t vocab = 256;
  double eps = 1e-6;
  double rope_theta = 10000.0;
  bool qk_norm = false;  ///< RMSNorm with gain over each q and k head before the rotation
  int64_t max_kv = 64;   ///< cache capacity in positions; a step at position p needs p < max_kv
  int64_t batch = 1;

  int64_t q_width() const { return heads * head_dim; }
  int64_t kv_width() const { return kv_heads * head_dim; }
  int64_t qkv_width() const { return (heads + 2 * kv_heads) * head_dim; }
};

/// Checks the invariants above; the error names `origin` and the field.
Status validate_model_config(const ModelConfig& m, const std::string& origin);

/// Reads a model document (already parsed); `origin` prefixes errors ("FILE: path: ...").
Result<ModelConfig> model_config_from_json(const Json& doc, const std::string& origin);

/// Reads and validates a model file.
Result<ModelConfig> load_model_config(const std::string& path);

/// The model as a model document (round-trips through model_config_from_json).
Json model_config_to_json(const ModelConfig& m);

}  // namespace strata::mpk
