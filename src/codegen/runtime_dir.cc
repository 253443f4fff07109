// The lookup of the device runtime headers (include/strata/codegen/runtime_dir.h). The places compiled
// in come from CMake (CMakeLists.txt sets them on this file only).
#include "strata/codegen/runtime_dir.h"

#include <cstdlib>
#include <filesystem>

#include "strata/codegen/cuda_emitter.h"

namespace strata {
namespace {

namespace fs = std::filesystem;

#ifndef STRATA_SOURCE_RUNTIME_DIR
#define STRATA_SOURCE_RUNTIME_DIR ""
#endif
#ifndef STRATA_BUILD_DIR
#define STRATA_BUILD_DIR ""
#endif
#ifndef STRATA_INSTALL_RUNTIME_DIR
#define STRATA_INSTALL_RUNTIME_DIR ""
#endif
#ifndef STRATA_RUNTIME_DIR_FROM_BINDIR
#define STRATA_RUNTIME_DIR_FROM_BINDIR "../share/strata/runtime"
#endif

bool holds_runtime(const std::string& dir) {
  std::error_code ec;
  return !dir.empty() && fs::is_regular_file(fs::path(dir) / "strata_rt" / "strata_rt.cuh", ec);
}

/// The running executable's path (canonical); empty if it cannot be read.
fs::path executable_path() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe;
}

/// Whether `p` lies inside directory `dir` (both canonical where they exist).
bool inside(const fs::path& p, const std::string& dir) {
  if (p.empty() || dir.empty()) return false;
  std::error_code ec;
  fs::path d = fs::weakly_canonical(dir, ec);
  if (ec) return false;
  fs::path rel = p.lexically_relative(d);
  return !rel.empty() && *rel.begin() != "..";
}

}  // namespace

std::vector<RuntimeDirCandidate> runtime_dir_candidates() {
  std::vector<RuntimeDirCandidate> out;
  auto add = [&](std::string dir, const std::string& origin) {
    if (dir.empty()) return;
    std::error_code ec;
    fs::path canon = fs::weakly_canonical(dir, ec);
    if (!ec) dir = canon.string();
    for (const RuntimeDirCandidate& c : out)
      if (c.dir == dir) return;
    out.push_back({dir, origin});
  };
  if (const char* env = std::getenv("STRATA_RUNTIME_DIR"); env && *env) {
    add(env, "STRATA_RUNTIME_DIR");
    return out;
  }
  const fs::path exe = executable_path();
  if (!exe.empty())
    add((exe.parent_path() / STRATA_RUNTIME_DIR_FROM_BINDIR).string(), "beside the executable");
  if (inside(exe, STRATA_BUILD_DIR)) add(STRATA_SOURCE_RUNTIME_DIR, "source tree (build tree)");
  add(STRATA_INSTALL_RUNTIME_DIR, "install location");
  add(STRATA_SOURCE_RUNTIME_DIR, "source tree");
  return out;
}

Result<std::string> find_runtime_dir() {
  const std::vector<RuntimeDirCandidate> candidates = runtime_dir_candidates();
  for (const RuntimeDirCandidate& c : candidates)
    if (holds_runtime(c.dir)) return c.dir;
  if (!candidates.empty() && candidates[0].origin == "STRATA_RUNTIME_DIR")
    return make_error("STRATA_RUNTIME_DIR=" + candidates[0].dir +
                      " does not hold strata_rt/strata_rt.cuh (the device runtime headers, "
                      "runtime/ of the source tree or share/strata/runtime of an install)");
  std::string searched;
  for (const RuntimeDirCandidate& c : candidates)
    searched += "\n  " + c.dir + " (" + c.origin + ")";
  return make_error(
      "the device runtime headers (strata_rt/strata_rt.cuh) are in none of the places "
      "searched; set STRATA_RUNTIME_DIR to the directory that holds strata_rt/:" +
      searched);
}

std::string cuda_runtime_include_dir() {
  auto dir = find_runtime_dir();
  return dir.ok() ? *dir : std::string();
}

}  // namespace strata
