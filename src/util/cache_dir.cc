#include "strata/util/cache_dir.h"

#include <cstdlib>

namespace strata {

std::string resolve_cache_dir(const std::string& configured) {
  if (!configured.empty()) return configured;
  if (const char* env = std::getenv("STRATA_CACHE_DIR"); env && *env) return env;
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.cache/strata";
  return ".strata-cache";
}

}  // namespace strata
