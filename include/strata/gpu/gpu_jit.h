// Just-in-time compilation of generated CUDA sources and the persistent binary cache
// (docs/gpu-runtime.md).
//
// A generated source is a self-contained .cu file with extern "C" host entry points
// (strata_launch, strata_workspace_bytes, …). It is compiled with nvcc into a shared library
// (device code and host launcher together) and loaded with dlopen. Compiled libraries are
// cached on disk under <cache>/bin/<key>.so with a metadata file <key>.json; the key is the
// SHA-256 of the source, the target architecture, the toolkit version, the compiler flags and
// the contents of the include directories. An entry is used only if its metadata parses, names
// the same key and matches the library's size and SHA-256; anything else (a crash between the
// two renames, a truncated or edited file) is reported as a miss and rebuilt. Files are
// written to a temporary name and renamed into place, so concurrent processes never see a
// partial entry.
//
// Nothing here needs a GPU: compiling needs nvcc and an explicit architecture; only the
// default architecture (empty JitOptions::arch) asks the current device.
#pragma once

#include <string>
#include <vector>

#include "strata/util/status.h"

namespace strata {

/// How generated sources are compiled.
struct JitOptions {
  /// nvcc -arch value ("sm_90a", "sm_80", …); empty = the current device's
  /// (DeviceInfo::arch()); an Error if there is no device.
  std::string arch;
  /// Directories passed with -I (the device runtime headers). Empty = default_include_dirs().
  std::vector<std::string> include_dirs;
  /// Extra nvcc flags appended after the defaults; part of the cache key.
  std::vector<std::string> extra_flags;
  /// Root of the cache; binaries live in <cache_dir>/bin. Empty = resolve_cache_dir's folder
  /// (cache_dir.h: $STRATA_CACHE_DIR, else ~/.cache/strata), the search cache's too.
  std::string cache_dir;
  /// nvcc executable. Empty = nvcc_executable()'s lookup.
  std::string nvcc;
  /// false: ignore existing entries (always compile); the fresh binary still replaces the entry.
  bool use_cache = true;
  /// Compiler processes run at once by compile_cuda_many; 0 = hardware threads.
  int threads = 0;
};

/// A compiled shared library in the cache.
struct CompiledBinary {
  std::string key;         ///< cache key: 64 hex digits
  std::string path;        ///< <cache>/bin/<key>.so
  std::string arch;        ///< architecture it was compiled for
  std::string log;         ///< compiler output (nvcc/ptxas warnings and resource usage)
  bool cache_hit = false;  ///< true when taken from the cache without compiling
  /// On a miss, why the entry could not be used: "absent", "checksum mismatch", "library size
  /// mismatch", "incomplete entry (…)", "metadata …", or "cache disabled".
  std::string miss_reason;
  double compile_seconds = 0;  ///< wall time of the compiler (0 on a cache hit)
};

/// The include directories used when JitOptions::include_dirs is empty: the device runtime
/// headers' directory (find_runtime_dir, include/strata/codegen/runtime_dir.h); empty when none is
/// found (compiling then fails with find_runtime_dir's error, naming the places searched).
std::vector<std::string> default_include_dirs();

/// The nvcc that compiles (docs/gpu-runtime.md, "Finding the runtime headers and nvcc"), the
/// first of: JitOptions::nvcc; $STRATA_NVCC; the toolkit's nvcc found at build time, if that
/// file exists; $CUDA_HOME/bin/nvcc; `nvcc` on $PATH; /usr/local/cuda/bin/nvcc. "nvcc" when
/// none exists (starting it then fails with a message naming these settings).
std::string nvcc_executable(const JitOptions& options);

/// <cache_dir>/bin for these options (see JitOptions::cache_dir); not created.
std::string binary_cache_dir(const JitOptions& options);

/// The first line of `nvcc --version` that names the release, e.g.
/// "Cuda compilation tools, release 13.0, V13.0.88"; cached per nvcc path.
Result<std::string> toolkit_version(const JitOptions& options);

/// The full nvcc command line (without input/output files) used for these options, with the
/// architecture resolved.
Result<std::vector<std::string>> nvcc_flags(const JitOptions& options);

/// The link flags `source` needs after it on nvcc's command line: -lcublas, with the toolkit's
/// library directory as the library's run path (-Xlinker -rpath=DIR, so dlopen finds libcublas
/// without LD_LIBRARY_PATH), when its `// strata-meta:` line says "cublas": true (an emitted
/// graph with predefined matmuls through cuBLAS, EmitOptions::library_matmul); none otherwise,
/// also for a source without a (parsable) strata-meta line.
std::vector<std::string> source_link_flags(const std::string& source, const JitOptions& options);

/// Cache key of `source` under `options`: SHA-256 over a versioned preamble, the resolved
/// architecture, the toolkit version, the flags (source_link_flags included), the include
/// directories' file contents and the source text.
Result<std::string> binary_cache_key(const std::string& source, const JitOptions& options);

/// Compiles `source` into a shared library, or returns the valid cached one. Compiler
/// failures (syntax errors, too much shared memory reported by ptxas, a missing nvcc) are
/// returned as an Error whose message holds the compiler output.
Result<CompiledBinary> compile_cuda(const std::string& source, const JitOptions& options);

/// Compiles several sources on a pool of options.threads threads. Element i is the outcome
/// for sources[i]; identical sources are compiled once.
std::vector<Result<CompiledBinary>> compile_cuda_many(const std::vector<std::string>& sources,
                                                      const JitOptions& options);

/// A shared library opened with dlopen. Libraries stay loaded until the process exits
/// (unloading a library that holds a CUDA runtime is not safe while its module is in use).
class SharedLibrary {
 public:
  /// Opens the library at `path` (RTLD_NOW | RTLD_LOCAL); the error carries dlerror().
  static Result<SharedLibrary> open(const std::string& path);
  /// Address of an exported symbol, or nullptr.
  void* find(const char* symbol) const;
  const std::string& path() const { return path_; }

 private:
  void* handle_ = nullptr;
  std::string path_;
};

}  // namespace strata
