#include "strata/gpu/gpu_jit.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "strata/gpu/gpu_device.h"
#include "strata/util/cache_dir.h"
#include "strata/ir/graph_io.h"
#include "strata/util/hash.h"
#include "strata/codegen/runtime_dir.h"
#include "strata/ir/json_read.h"

extern char** environ;

namespace strata {
namespace {

namespace fs = std::filesystem;

/// Bumped whenever the layout of an entry or the meaning of the key changes.
constexpr const char* kKeyPreamble = "strata-binary-cache v1\n";
/// Compiler output kept in errors and metadata.
constexpr size_t kMaxLogChars = 16000;

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

bool is_file(const fs::path& p) {
  std::error_code ec;
  return !p.empty() && fs::is_regular_file(p, ec);
}

std::string clip_log(std::string log) {
  if (log.size() > kMaxLogChars) log = log.substr(0, kMaxLogChars) + "\n[… output clipped]";
  return log;
}

/// Runs argv[0] (looked up in PATH) with stdout and stderr appended to `log_path`; returns
/// the exit status (128 + signal if killed).
Result<int> run_process(const std::vector<std::string>& argv, const std::string& log_path) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                   0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0)
    return make_error("cannot start `" + argv[0] + "`: " + std::strerror(rc) +
                      " (set STRATA_NVCC or CUDA_HOME, or put nvcc on PATH)");
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return make_error("waitpid failed for `" + argv[0] + "`");
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/// A fresh private directory under `parent`, removed by the destructor.
class TempDir {
 public:
  static Result<TempDir> make(const fs::path& parent) {
    std::error_code ec;
    fs::create_directories(parent, ec);
    std::string templ = (parent / "tmp-XXXXXX").string();
    if (!mkdtemp(templ.data()))
      return make_error(parent.string() + ": cannot create a temporary directory");
    TempDir t;
    t.path_ = templ;
    return t;
  }
  TempDir() = default;
  TempDir(TempDir&& o) noexcept : path_(std::move(o.path_)) { o.path_.clear(); }
  TempDir& operator=(TempDir&&) = delete;
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

/// SHA-256 over every regular file below the include directories (path and content), so an
/// edited runtime header changes the key.
std::string include_dirs_digest(const std::vector<std::string>& dirs) {
  Sha256 h;
  for (const std::string& dir : dirs) {
    h.update("dir " + dir + "\n");
    std::vector<fs::path> files;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(dir, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
      if (it->is_regular_file(ec)) files.push_back(it->path());
    std::sort(files.begin(), files.end());
    for (const fs::path& f : files) {
      auto text = read_text_file(f.string());
      h.update("file " + fs::relative(f, dir, ec).string() + "\n");
      h.update(text.ok() ? *text : std::string("<unreadable>"));
    }
  }
  return h.finish_hex();
}

Result<std::string> resolve_arch(const JitOptions& o) {
  if (!o.arch.empty()) return o.arch;
  auto dev = query_device();
  if (!dev.ok())
    return make_error("no target architecture given and none can be detected: " +
                      dev.error().message);
  return dev->arch();
}

/// The -I directories: JitOptions::include_dirs, else the runtime headers' directory
/// (find_runtime_dir, whose error names every place searched).
Result<std::vector<std::string>> include_dirs_of(const JitOptions& o) {
  if (!o.include_dirs.empty()) return o.include_dirs;
  STRATA_ASSIGN_OR_RETURN(std::string dir, find_runtime_dir());
  return std::vector<std::string>{dir};
}

/// Why the cache entry (`so`, `meta`) cannot be used for `key`; empty if it can.
std::string entry_problem(const fs::path& so, const fs::path& meta, const std::string& key,
                          std::string* log) {
  std::error_code ec;
  if (!fs::exists(so, ec) && !fs::exists(meta, ec)) return "absent";
  if (!fs::exists(meta, ec)) return "incomplete entry (metadata missing)";
  if (!fs::exists(so, ec)) return "incomplete entry (library missing)";
  auto text = read_text_file(meta.string());
  if (!text.ok()) return "metadata unreadable";
  auto parsed = parse_json_text(*text, meta.string());  // the limits of every JSON loader
  if (!parsed.ok() || !parsed->is_object()) return "metadata is not valid JSON";
  const Json& doc = *parsed;
  auto text_at = [&](const char* k) {  // "" when absent or not a string
    auto it = doc.find(k);
    return it != doc.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  if (text_at("key") != key) return "metadata names another key";
  auto bytes = fs::file_size(so, ec);
  if (ec || !doc.contains("bytes") || doc["bytes"] != bytes) return "library size mismatch";
  auto lib = read_text_file(so.string());
  if (!lib.ok() || sha256_hex(*lib) != text_at("sha256")) return "checksum mismatch";
  if (log) *log = text_at("log");
  return "";
}

/// The JSON object of a source's `// strata-meta: {…}` line, or null when the source has none
/// or it does not parse as an object (a hand-written source).
Json source_meta(const std::string& source) {
  static const std::string kTag = "// strata-meta: ";
  const size_t at = source.find(kTag);
  if (at == std::string::npos) return nullptr;
  const size_t begin = at + kTag.size();
  const size_t end = source.find('\n', begin);
  auto parsed = parse_json_text(
      source.substr(begin, end == std::string::npos ? std::string::npos : end - begin),
      "strata-meta line");
  return parsed.ok() && parsed->is_object() ? *parsed : Json(nullptr);
}

/// The directory of the toolkit's libcublas beside `nvcc` (<toolkit>/lib64 or lib), or "".
std::string toolkit_blas_dir(const std::string& nvcc) {
  std::error_code ec;
  const fs::path exe = fs::canonical(nvcc, ec);
  if (ec) return "";
  for (const char* sub : {"lib64", "lib"}) {
    const fs::path dir = exe.parent_path().parent_path() / sub;
    for (const char* name : {"libcublas.so", "libcublas.so.13", "libcublas.so.12"})
      if (fs::exists(dir / name, ec)) return dir.string();
  }
  return "";
}

}  // namespace

std::vector<std::string> source_link_flags(const std::string& source, const JitOptions& options) {
  const Json meta = source_meta(source);
  const auto it = meta.is_object() ? meta.find("cublas") : meta.end();
  if (!meta.is_object() || it == meta.end() || !it->is_boolean() || !it->get<bool>()) return {};
  std::vector<std::string> flags = {"-lcublas", "-lcublasLt"};
  const std::string dir = toolkit_blas_dir(nvcc_executable(options));
  if (!dir.empty()) flags.insert(flags.end(), {"-Xlinker", "-rpath=" + dir});
  return flags;
}

std::vector<std::string> default_include_dirs() {
  auto dir = find_runtime_dir();
  if (!dir.ok()) return {};
  return {*dir};
}

std::string nvcc_executable(const JitOptions& options) {
  if (!options.nvcc.empty()) return options.nvcc;
  std::string env = env_or("STRATA_NVCC", "");
  if (!env.empty()) return env;
#ifdef STRATA_NVCC_PATH
  if (is_file(STRATA_NVCC_PATH)) return STRATA_NVCC_PATH;
#endif
  std::string cuda_home = env_or("CUDA_HOME", "");
  if (!cuda_home.empty() && is_file(fs::path(cuda_home) / "bin" / "nvcc"))
    return (fs::path(cuda_home) / "bin" / "nvcc").string();
  const std::string path = env_or("PATH", "");
  for (size_t start = 0; start <= path.size();) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    fs::path cand = fs::path(path.substr(start, end - start)) / "nvcc";
    if (end > start && is_file(cand)) return cand.string();
    start = end + 1;
  }
  if (is_file("/usr/local/cuda/bin/nvcc")) return "/usr/local/cuda/bin/nvcc";
  return "nvcc";
}

std::string binary_cache_dir(const JitOptions& options) {
  return (fs::path(resolve_cache_dir(options.cache_dir)) / "bin").string();
}

Result<std::string> toolkit_version(const JitOptions& options) {
  static std::mutex mu;
  static std::map<std::string, std::string> known;
  std::string nvcc = nvcc_executable(options);
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = known.find(nvcc); it != known.end()) return it->second;
  }
  STRATA_ASSIGN_OR_RETURN(TempDir tmp, TempDir::make(fs::temp_directory_path()));
  std::string log = (tmp.path() / "version.txt").string();
  STRATA_ASSIGN_OR_RETURN(int rc, run_process({nvcc, "--version"}, log));
  auto text = read_text_file(log);
  if (rc != 0 || !text.ok())
    return make_error("`" + nvcc + " --version` failed (exit " + std::to_string(rc) + ")");
  std::string version;
  size_t pos = text->find("release");
  if (pos != std::string::npos) {
    size_t begin = text->rfind('\n', pos);
    size_t end = text->find('\n', pos);
    version = text->substr(begin == std::string::npos ? 0 : begin + 1,
                           end == std::string::npos ? std::string::npos : end - begin - 1);
  }
  if (version.empty()) return make_error("`" + nvcc + " --version` names no release");
  std::lock_guard<std::mutex> lock(mu);
  known[nvcc] = version;
  return version;
}

Result<std::vector<std::string>> nvcc_flags(const JitOptions& options) {
  STRATA_ASSIGN_OR_RETURN(std::string arch, resolve_arch(options));
  STRATA_ASSIGN_OR_RETURN(std::vector<std::string> includes, include_dirs_of(options));
  std::vector<std::string> flags = {
      nvcc_executable(options), "-shared", "-Xcompiler", "-fPIC", "-O3", "-std=c++17",
      "-arch=" + arch,          "-Xptxas", "-v"};
  for (const std::string& dir : includes) flags.push_back("-I" + dir);
  flags.insert(flags.end(), options.extra_flags.begin(), options.extra_flags.end());
  return flags;
}

Result<std::string> binary_cache_key(const std::string& source, const JitOptions& options) {
  STRATA_ASSIGN_OR_RETURN(std::string arch, resolve_arch(options));
  STRATA_ASSIGN_OR_RETURN(std::string toolkit, toolkit_version(options));
  STRATA_ASSIGN_OR_RETURN(std::vector<std::string> flags, nvcc_flags(options));
  Sha256 h;
  h.update(kKeyPreamble);
  h.update("arch " + arch + "\n");
  h.update("toolkit " + toolkit + "\n");
  for (size_t i = 1; i < flags.size(); ++i) h.update("flag " + flags[i] + "\n");
  for (const std::string& f : source_link_flags(source, options)) h.update("link " + f + "\n");
  STRATA_ASSIGN_OR_RETURN(std::vector<std::string> includes, include_dirs_of(options));
  h.update("includes " + include_dirs_digest(includes) + "\n");
  h.update("source " + std::to_string(source.size()) + "\n");
  h.update(source);
  return h.finish_hex();
}

Result<CompiledBinary> compile_cuda(const std::string& source, const JitOptions& options) {
  STRATA_ASSIGN_OR_RETURN(std::string key, binary_cache_key(source, options));
  STRATA_ASSIGN_OR_RETURN(std::vector<std::string> flags, nvcc_flags(options));
  STRATA_ASSIGN_OR_RETURN(std::string arch, resolve_arch(options));
  fs::path dir = binary_cache_dir(options);
  fs::path so = dir / (key + ".so");
  fs::path meta = dir / (key + ".json");

  CompiledBinary out;
  out.key = key;
  out.path = so.string();
  out.arch = arch;
  out.miss_reason = options.use_cache ? entry_problem(so, meta, key, &out.log) : "cache disabled";
  if (out.miss_reason.empty()) {
    out.cache_hit = true;
    return out;
  }

  STRATA_ASSIGN_OR_RETURN(TempDir tmp, TempDir::make(dir));
  fs::path src = tmp.path() / "candidate.cu";
  fs::path lib = tmp.path() / "candidate.so";
  fs::path log_path = tmp.path() / "nvcc.log";
  STRATA_RETURN_IF_ERROR(write_text_file(src.string(), source));
  std::vector<std::string> argv = flags;
  argv.insert(argv.end(), {"-o", lib.string(), src.string()});
  // Libraries after the source that calls them (-lcublas for cuBLAS calls); in the key too.
  const std::vector<std::string> link = source_link_flags(source, options);
  argv.insert(argv.end(), link.begin(), link.end());
  auto start = std::chrono::steady_clock::now();
  STRATA_ASSIGN_OR_RETURN(int rc, run_process(argv, log_path.string()));
  out.compile_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  auto log = read_text_file(log_path.string());
  out.log = clip_log(log.ok() ? *log : "");
  std::error_code ec;
  if (rc != 0 || !fs::exists(lib, ec))
    return make_error("nvcc failed (exit " + std::to_string(rc) + ", -arch=" + arch + "):\n" +
                      out.log);

  STRATA_ASSIGN_OR_RETURN(std::string bytes, read_text_file(lib.string()));
  nlohmann::json doc = {{"format", "strata-binary-cache"},
                        {"version", 1},
                        {"key", key},
                        {"bytes", bytes.size()},
                        {"sha256", sha256_hex(bytes)},
                        {"arch", arch},
                        {"compile_seconds", out.compile_seconds},
                        {"flags", std::vector<std::string>(flags.begin() + 1, flags.end())},
                        {"link_flags", link},
                        {"log", out.log}};
  // Library first, metadata last: an entry is complete only once its metadata exists.
  fs::rename(lib, so, ec);
  if (ec) return make_error(so.string() + ": cannot place the compiled library: " + ec.message());
  fs::path meta_tmp = tmp.path() / "meta.json";
  STRATA_RETURN_IF_ERROR(write_text_file(meta_tmp.string(), doc.dump(2) + "\n"));
  fs::rename(meta_tmp, meta, ec);
  if (ec) return make_error(meta.string() + ": cannot write cache metadata: " + ec.message());
  return out;
}

std::vector<Result<CompiledBinary>> compile_cuda_many(const std::vector<std::string>& sources,
                                                      const JitOptions& options) {
  // Compile each distinct source once; duplicates share the outcome.
  std::vector<int> first_of(sources.size());
  std::map<std::string_view, int> seen;
  std::vector<int> distinct;
  for (size_t i = 0; i < sources.size(); ++i) {
    auto [it, fresh] = seen.emplace(sources[i], static_cast<int>(i));
    first_of[i] = it->second;
    if (fresh) distinct.push_back(static_cast<int>(i));
  }
  std::vector<Result<CompiledBinary>> outcome(sources.size(), make_error("not compiled"));
  int threads =
      options.threads > 0 ? options.threads : static_cast<int>(std::thread::hardware_concurrency());
  threads = std::clamp(threads, 1, std::max<int>(1, static_cast<int>(distinct.size())));
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t k = next++; k < distinct.size(); k = next++) {
      int i = distinct[k];
      outcome[i] = compile_cuda(sources[i], options);
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  for (size_t i = 0; i < sources.size(); ++i)
    if (first_of[i] != static_cast<int>(i)) outcome[i] = outcome[first_of[i]];
  return outcome;
}

Result<SharedLibrary> SharedLibrary::open(const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    return make_error(path + ": cannot load shared library: " + (why ? why : "unknown error"));
  }
  SharedLibrary lib;
  lib.handle_ = handle;
  lib.path_ = path;
  return lib;
}

void* SharedLibrary::find(const char* symbol) const {
  return handle_ ? dlsym(handle_, symbol) : nullptr;
}

}  // namespace strata
