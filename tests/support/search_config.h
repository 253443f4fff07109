// Test support: the search configuration of the CPU search tests — two threads, quiet, no
// result cache, checkpoints in a fresh folder of its own per test (`prefix`-`name`-pid under
// the temporary directory).
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

#include "strata/search/search.h"

namespace strata::testing {

inline SearchConfig search_config(const std::string& prefix, const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() /
             (prefix + "-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return SearchConfig{}.with_threads(2).with_quiet(true).with_cache(false).with_cache_dir(
      dir.string());
}

}  // namespace strata::testing
