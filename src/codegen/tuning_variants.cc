#include "strata/codegen/tuning_variants.h"

#include <algorithm>

#include "strata/codegen/emit_knobs.h"

namespace strata {

const std::vector<std::string>& default_tuning_variants() {
  static const std::vector<std::string> variants = {
      "default", "groups=4", "minblocks=2", "regfloats=96,chainmt=2", "groups=4,walk=0", "wgmma=1"};
  return variants;
}

Result<std::vector<std::string>> normalize_variants(const std::vector<std::string>& specs) {
  std::vector<std::string> variants;
  for (const std::string& given : specs) {
    EmitOptions parsed;
    Status ok = apply_emit_knobs(given, parsed);
    if (!ok.ok()) return make_error("variant \"" + given + "\": " + ok.error().message);
    std::string spec = format_emit_knobs(parsed);
    if (std::find(variants.begin(), variants.end(), spec) == variants.end())
      variants.push_back(spec);
  }
  if (variants.empty()) variants.push_back("default");
  return variants;
}

}  // namespace strata
