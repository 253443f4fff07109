// Reading and checking model files (docs/megakernel.md, "The model file").
#include "strata/mpk/model_config.h"

#include <fstream>
#include <limits>
#include <sstream>

namespace strata::mpk {
namespace {

constexpr int64_t kMaxExtent = int64_t{1} << 31;  // every extent fits an int32 on the device

// The fields of the document, in order; every one is required except where a default is named.
const char* const kFields[] = {"format", "version",    "name",     "layers",       "hidden",
                               "heads",  "kv_heads",   "head_dim", "intermediate", "vocab",
                               "eps",    "rope_theta", "qk_norm",  "max_kv",       "batch"};

Status check_product(const std::string& origin, const char* what,
                     std::initializer_list<int64_t> dims) {
  long double p = 1;
  for (int64_t d : dims) p *= static_cast<long double>(d);
  if (p >= static_cast<long double>(int64_t{1} << 48))
    return make_error(origin + ": the " + std::string(what) +
                      " would have 2^48 elements or more; shrink the model's shapes");
  return Status::success();
}

}  // namespace

Status validate_model_config(const ModelConfig& m, const std::string& origin) {
  struct Extent {
    const char* name;
    int64_t value;
  };
  const Extent extents[] = {
      {"layers", m.layers},     {"hidden", m.hidden},     {"heads", m.heads},
      {"kv_heads", m.kv_heads}, {"head_dim", m.head_dim}, {"intermediate", m.intermediate},
      {"vocab", m.vocab},       {"max_kv", m.max_kv},     {"batch", m.batch}};
  for (const Extent& e : extents)
    if (e.value < 1 || e.value >= kMaxExtent)
      return make_error(origin + ": " + e.name + ": expected an integer in [1, 2^31), got " +
                        std::to_string(e.value));
  if (m.heads % m.kv_heads != 0)
    return make_error(origin + ": heads (" + std::to_string(m.heads) +
                      ") must be a multiple of kv_heads (" + std::to_string(m.kv_heads) + ")");
  // The runtime's attention reads heads as 16-byte vectors of eight f16 values (rotary
  // embedding, which rotates pairs, needs only an even head_dim).
  if (m.head_dim % 8 != 0)
    return make_error(origin + ": head_dim must be a multiple of 8 (attention reads 16-byte "
                      "vectors of a head), got " + std::to_string(m.head_dim));
  if (!(m.eps > 0) || !(m.eps < 1))
    return make_error(origin + ": eps: expected a number in (0, 1), got " + std::to_string(m.eps));
  if (!(m.rope_theta > 1))
    return make_error(origin + ": rope_theta: expected a number above 1, got " +
                      std::to_string(m.rope_theta));
  STRATA_RETURN_IF_ERROR(check_product(origin, "embedding table", {m.vocab, m.hidden}));
  STRATA_RETURN_IF_ERROR(
      check_product(origin, "kv cache", {m.layers, m.batch, m.kv_heads, m.max_kv, m.head_dim}));
  STRATA_RETURN_IF_ERROR(check_product(origin, "MLP weight", {m.intermediate, m.hidden}));
  STRATA_RETURN_IF_ERROR(check_product(origin, "logits", {m.batch, m.vocab}));
  STRATA_RETURN_IF_ERROR(
      check_product(origin, "QKV weight", {m.heads + 2 * m.kv_heads, m.head_dim, m.hidden}));
  return Status::success();
}

Result<ModelConfig> model_config_from_json(const Json& doc, const std::string& origin) {
  const std::string p = origin + ": ";
  if (!doc.is_object())
    return make_error(p + "expected a JSON object (a strata-mpk-model document)");
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    bool known = false;
    for (const char* f : kFields) known = known || it.key() == f;
    if (!known)
      return make_error(p + "unknown field \"" + json_quote(it.key()) +
                        "\" (docs/megakernel.md lists the fields of a model file)");
  }
  STRATA_ASSIGN_OR_RETURN(const Json* fmt, json_member(doc, "format", origin));
  STRATA_ASSIGN_OR_RETURN(std::string format, json_string(*fmt, p + "format"));
  if (format != "strata-mpk-model")
    return make_error(p + "format: expected \"strata-mpk-model\", got \"" + json_quote(format) +
                      "\"");
  STRATA_ASSIGN_OR_RETURN(const Json* ver, json_member(doc, "version", origin));
  STRATA_ASSIGN_OR_RETURN(int64_t version, json_int(*ver, p + "version", 1, 1));
  (void)version;

  ModelConfig m;
  STRATA_ASSIGN_OR_RETURN(const Json* name, json_optional_member(doc, "name", origin));
  if (name) {
    STRATA_ASSIGN_OR_RETURN(m.name, json_string(*name, p + "name"));
  }
  struct IntField {
    const char* key;
    int64_t* dst;
    bool required;
  };
  const IntField ints[] = {{"layers", &m.layers, true},     {"hidden", &m.hidden, true},
                           {"heads", &m.heads, true},       {"kv_heads", &m.kv_heads, true},
                           {"head_dim", &m.head_dim, true}, {"intermediate", &m.intermediate, true},
                           {"vocab", &m.vocab, true},       {"max_kv", &m.max_kv, true},
                           {"batch", &m.batch, false}};
  for (const IntField& f : ints) {
    STRATA_ASSIGN_OR_RETURN(const Json* v, f.required ? json_member(doc, f.key, origin)
                                                      : json_optional_member(doc, f.key, origin));
    if (!v) continue;
    STRATA_ASSIGN_OR_RETURN(*f.dst, json_int(*v, p + f.key, 1, kMaxExtent - 1));
  }
  STRATA_ASSIGN_OR_RETURN(const Json* eps, json_optional_member(doc, "eps", origin));
  if (eps) {
    STRATA_ASSIGN_OR_RETURN(m.eps, json_number(*eps, p + "eps"));
  }
  STRATA_ASSIGN_OR_RETURN(const Json* theta, json_optional_member(doc, "rope_theta", origin));
  if (theta) {
    STRATA_ASSIGN_OR_RETURN(m.rope_theta, json_number(*theta, p + "rope_theta"));
  }
  STRATA_ASSIGN_OR_RETURN(const Json* qk, json_optional_member(doc, "qk_norm", origin));
  if (qk) {
    STRATA_ASSIGN_OR_RETURN(m.qk_norm, json_bool(*qk, p + "qk_norm"));
  }
  STRATA_RETURN_IF_ERROR(validate_model_config(m, origin));
  return m;
}

Result<ModelConfig> load_model_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(path + ": cannot open the model file");
  std::ostringstream text;
  text << in.rdbuf();
  STRATA_ASSIGN_OR_RETURN(Json doc, parse_json_text(text.str(), path));
  return model_config_from_json(doc, path);
}

Json model_config_to_json(const ModelConfig& m) {
  Json j;
  j["format"] = "strata-mpk-model";
  j["version"] = 1;
  j["name"] = m.name;
  j["layers"] = m.layers;
  j["hidden"] = m.hidden;
  j["heads"] = m.heads;
  j["kv_heads"] = m.kv_heads;
  j["head_dim"] = m.head_dim;
  j["intermediate"] = m.intermediate;
  j["vocab"] = m.vocab;
  j["eps"] = m.eps;
  j["rope_theta"] = m.rope_theta;
  j["qk_norm"] = m.qk_norm;
  j["max_kv"] = m.max_kv;
  j["batch"] = m.batch;
  return j;
}

}  // namespace strata::mpk
