// The seeded mutation fuzzer of every loader (docs/fuzzing.md): the bundled programs and
// reference μGraphs, the coverage μGraphs of the emitter tests, a search result, a cache entry
// and a checkpoint that the test produces, mutated byte by byte and structurally, fed to every
// loader in-process (tests/support/fuzz_loaders.h) and, for a smaller sample, to the real
// `strata` binary ($STRATA_BIN, set by CTest).
//
// Environment (for longer runs; the defaults take about 30 s on one idle core):
//   STRATA_FUZZ_SEED        seed of the mutations (default 20261125)
//   STRATA_FUZZ_ITERATIONS  mutants fed to the in-process loaders (default 6000)
//   STRATA_FUZZ_CHECKPOINTS mutated checkpoints resumed from (default 25)
//   STRATA_FUZZ_CLI_RUNS    mutants given to the binary (default 80)
//   STRATA_FUZZ_DUMP        if set, each mutant is written to this file before it is fed, so a
//                           crash leaves the input that caused it
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "strata/ir/graph_io.h"
#include "strata/frontend/graph_loader.h"
#include "strata/search/search.h"
#include "support/coverage_graphs.h"
#include "support/fuzz_loaders.h"

namespace strata {
namespace {

namespace fs = std::filesystem;
using fuzz::Problems;

int64_t env_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  return std::strtoll(v, nullptr, 10);
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void spit(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
}

/// A seed input: its text and the loader it is meant for.
struct Seed {
  enum Kind { Program, MuGraph, Result, Cache } kind;
  std::string name;
  std::string text;
};

/// Everything the fuzzer starts from. The result, cache entry and checkpoint come from a real
/// search of rmsnorm_small (a fraction of a second).
class Seeds {
 public:
  Seeds() {
    dir_ = fs::path(::testing::TempDir()) / ("strata_fuzz_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    for (const auto& e : fs::directory_iterator("examples/programs")) add(Seed::Program, e.path());
    for (const auto& e : fs::directory_iterator("examples/reference")) add(Seed::MuGraph, e.path());
    using namespace testing;
    for (const KernelGraph& g : {accumulators_and_maps(), simt_and_reductions(),
                                 batched_tensor_cores(), views_and_block_reductions(),
                                 folded_norms(), rowwise_rows(), predefined_ops(), split_combine()})
      seeds_.push_back({Seed::MuGraph, "coverage", kernel_graph_to_json(g).dump(2)});
    std::sort(seeds_.begin(), seeds_.end(),
              [](const Seed& a, const Seed& b) { return a.name < b.name; });

    auto program = load_graph("examples/programs/rmsnorm_small.strata");
    EXPECT_TRUE(program.ok());
    program_ = *program;
    SearchConfig config =
        SearchConfig{}.with_threads(1).with_quiet(true).with_cache(true).with_cache_dir(
            (dir_ / "cache").string());
    config.top_k = 3;
    auto result = superoptimize(program_, config);
    EXPECT_TRUE(result.ok()) << result.error().message;
    cache_key_ = result->cache_key;
    Json doc = search_result_to_json(*result, config);
    seeds_.push_back({Seed::Result, "result", doc.dump(2)});
    doc["gpu_profile"] = {{"fastest", 1}, {"fastest_variant", "groups=4"}};
    seeds_.push_back({Seed::Result, "profiled result", doc.dump(2)});
    cache_text_ = slurp(dir_ / "cache" / (cache_key_ + ".json"));
    EXPECT_FALSE(cache_text_.empty());
    seeds_.push_back({Seed::Cache, "cache entry", cache_text_});

    // A checkpoint: the same search stopped after a few states.
    SearchConfig stopped = config;
    stopped.use_cache = false;
    stopped.max_states = 40;
    stopped.checkpoint_path = (dir_ / "ckpt.json").string();
    checkpoint_config_ = stopped;
    auto partial = superoptimize(program_, stopped);
    EXPECT_TRUE(partial.ok());
    checkpoint_text_ = slurp(dir_ / "ckpt.json");
    EXPECT_FALSE(checkpoint_text_.empty()) << "the stopped search wrote no checkpoint";
  }
  ~Seeds() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  const std::vector<Seed>& all() const { return seeds_; }
  const fs::path& dir() const { return dir_; }
  const std::string& cache_key() const { return cache_key_; }
  const std::string& checkpoint_text() const { return checkpoint_text_; }
  const KernelGraph& program() const { return program_; }
  const SearchConfig& checkpoint_config() const { return checkpoint_config_; }

 private:
  void add(Seed::Kind kind, const fs::path& p) {
    seeds_.push_back({kind, p.filename().string(), slurp(p)});
  }

  fs::path dir_;
  std::vector<Seed> seeds_;
  KernelGraph program_;
  std::string cache_key_, cache_text_, checkpoint_text_;
  SearchConfig checkpoint_config_;
};

const Seeds& seeds() {
  static const Seeds s;
  return s;
}

/// Tokens the byte mutator inserts into programs and documents.
const std::vector<std::string>& tokens() {
  static const std::vector<std::string> t = [] {
    std::vector<std::string> v = fuzz::extreme_tokens();
    for (const char* s : {"input ",
                          "output ",
                          "sum(",
                          "matmul(",
                          "rms_norm(",
                          ")",
                          "(",
                          ",",
                          "dim=",
                          "to=",
                          "f16[",
                          "]",
                          "X",
                          "=",
                          "#",
                          "\n",
                          "[2, 4]",
                          "\"ops\":",
                          "\"outputs\": []",
                          "\"grid\": [4294967304, 1, 1]",
                          "\"customized\"",
                          "{\"op\": \"exp\", \"inputs\": [\"X\"], \"output\": \"Z\"}",
                          "\\u0000"})
      v.push_back(s);
    return v;
  }();
  return t;
}

/// A mutant of `seed`: structure-aware for JSON seeds (most of the time), else byte-level.
std::string mutate(fuzz::Mutator& m, const Seed& seed) {
  if (seed.kind != Seed::Program && m.chance(70)) {
    Json doc = Json::parse(seed.text);
    if (seed.kind == Seed::Cache) {
      // Mutate the payload and re-seal it, so that mutants get past the checksum to the
      // readers behind it.
      Json payload = doc["payload"];
      std::string text = m.json(payload);
      auto reparsed = parse_json_text(text, "payload");
      if (!reparsed.ok()) return m.bytes(seed.text, tokens());
      doc["payload"] = *reparsed;
      doc["checksum"] = checked_json_checksum(doc.value("key", ""), doc.value("program", ""),
                                              *reparsed);
      return doc.dump();
    }
    std::string text = m.json(std::move(doc));
    return m.chance(20) ? m.bytes(text, tokens()) : text;
  }
  return m.bytes(seed.text, tokens());
}

void dump_input(const std::string& text) {
  if (const char* path = std::getenv("STRATA_FUZZ_DUMP"); path && *path) spit(path, text);
}

Problems feed(const Seed& seed, const std::string& text, const fs::path& scratch) {
  dump_input(text);
  switch (seed.kind) {
    case Seed::Program:
      return fuzz::program_text(text, "mutant.strata");
    case Seed::MuGraph:
      return fuzz::mugraph_json(text, "mutant.json");
    case Seed::Result:
      return fuzz::result_json(text, "mutant.json");
    case Seed::Cache:
      spit(scratch, text);
      return fuzz::cache_entry(scratch.string(), seeds().cache_key(),
                               program_hash(seeds().program()));
  }
  return {};
}

TEST(FuzzLoaders, MutantsLoadOrFailWithAnErrorNamingTheFile) {
  const uint64_t seed = static_cast<uint64_t>(env_int("STRATA_FUZZ_SEED", 20261125));
  const int64_t iterations = env_int("STRATA_FUZZ_ITERATIONS", 6000);
  const auto& all = seeds().all();
  ASSERT_GT(all.size(), 40u);
  fuzz::Mutator m(seed);
  const fs::path scratch = seeds().dir() / "entry.json";
  int64_t loaded = 0, rejected = 0;
  std::map<std::string, int64_t> failures;
  auto t0 = std::chrono::steady_clock::now();
  // Every seed first, unmutated: they must all load.
  for (const Seed& s : all) {
    Problems p = feed(s, s.text, scratch);
    EXPECT_TRUE(p.empty()) << s.name << ": " << p.front();
  }
  for (int64_t i = 0; i < iterations; ++i) {
    const Seed& s = all[m.pick(all.size())];
    std::string text = mutate(m, s);
    Problems p = feed(s, text, scratch);
    ASSERT_TRUE(p.empty()) << "seed " << seed << ", iteration " << i << " (from " << s.name
                           << "): " << p.front() << "\ninput:\n"
                           << text.substr(0, 4000);
    // Count the outcome by re-reading cheaply: a mutant that parses as a graph is "loaded".
    bool ok = false;
    if (s.kind == Seed::Program) {
      ok = parse_program(text, "m").ok();
    } else if (auto doc = parse_json_text(text, "m"); doc.ok()) {
      ok = s.kind == Seed::MuGraph ? kernel_graph_from_json(*doc, "m").ok()
                                   : graphs_in_document(*doc, "m").ok();
    }
    ++(ok ? loaded : rejected);
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("fuzz: seed %llu, %lld mutants in %.1f s: %lld loaded, %lld rejected\n",
              static_cast<unsigned long long>(seed), static_cast<long long>(iterations), secs,
              static_cast<long long>(loaded), static_cast<long long>(rejected));
  // Both outcomes must be exercised, or the mutations are too weak or too strong.
  EXPECT_GT(loaded, iterations / 20);
  EXPECT_GT(rejected, iterations / 4);
}

// A checkpoint is read only when a search resumes: each mutant is resumed from (in a search
// capped at a few states), and the search either uses it or reports it and starts afresh.
TEST(FuzzLoaders, MutatedCheckpointsAreUsedOrReported) {
  const uint64_t seed = static_cast<uint64_t>(env_int("STRATA_FUZZ_SEED", 20261125)) + 1;
  const int64_t runs = env_int("STRATA_FUZZ_CHECKPOINTS", 25);
  const std::string& text = seeds().checkpoint_text();
  ASSERT_FALSE(text.empty());
  Seed ckpt{Seed::Cache, "checkpoint", text};
  fuzz::Mutator m(seed);
  SearchConfig config = seeds().checkpoint_config();
  config.resume = true;
  config.max_states = 10;
  const KernelGraph& program = seeds().program();
  int64_t used = 0, ignored = 0;
  for (int64_t i = 0; i < runs; ++i) {
    std::string mutant = mutate(m, ckpt);
    dump_input(mutant);
    spit(config.checkpoint_path, mutant);
    Problems p = fuzz::guarded("checkpoint", [&](Problems& out) {
      auto r = superoptimize(program, config);
      if (!r.ok()) {
        out.push_back("resuming failed instead of ignoring the checkpoint: " + r.error().message);
        return;
      }
      bool reported = false;
      for (const std::string& n : r->notes)
        reported = reported || n.rfind("checkpoint ignored", 0) == 0;
      ++(reported ? ignored : used);
    });
    ASSERT_TRUE(p.empty()) << "seed " << seed << ", run " << i << ": " << p.front() << "\ninput:\n"
                           << mutant.substr(0, 4000);
  }
  std::printf("fuzz: seed %llu, %lld checkpoints: %lld resumed from, %lld reported and ignored\n",
              static_cast<unsigned long long>(seed), static_cast<long long>(runs),
              static_cast<long long>(used), static_cast<long long>(ignored));
  EXPECT_GT(ignored, 0);  // the mutations reach the checks
}

/// Runs the binary on `args` with a time limit; returns the exit code, or -signal.
int run_binary(const std::string& bin, const std::string& args, const fs::path& err) {
  std::string cmd =
      "timeout -s KILL 60 '" + bin + "' " + args + " >/dev/null 2>'" + err.string() + "'";
  int status = std::system(cmd.c_str());
  if (WIFSIGNALED(status)) return -WTERMSIG(status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The tool on mutants: every command that takes a graph exits 0, 1 or 2 — never a signal,
// a timeout (137) or an internal error (3).
TEST(FuzzLoaders, TheToolExitsZeroOneOrTwoOnMutants) {
  const char* bin = std::getenv("STRATA_BIN");
  ASSERT_NE(bin, nullptr) << "STRATA_BIN is not set; run this test through ctest";
  const uint64_t seed = static_cast<uint64_t>(env_int("STRATA_FUZZ_SEED", 20261125)) + 2;
  const int64_t runs = env_int("STRATA_FUZZ_CLI_RUNS", 80);
  fuzz::Mutator m(seed);
  const fs::path dir = seeds().dir();
  const fs::path err = dir / "stderr.txt";
  const auto& all = seeds().all();
  std::map<int, int64_t> codes;  // exit code → commands
  for (int64_t i = 0; i < runs; ++i) {
    const Seed& s = all[m.pick(all.size())];
    if (s.kind == Seed::Cache) continue;  // the tool reads cache entries only inside optimize
    std::string text = mutate(m, s);
    const fs::path file = dir / (s.kind == Seed::Program ? "m.strata" : "m.json");
    spit(file, text);
    dump_input(text);
    // run and equiv evaluate the graph: only for mutants that are small to evaluate.
    auto g = load_graph(file.string());
    bool small = g.ok() && fuzz::evaluation_work(*g) <= fuzz::kMaxInterpreterWork;
    std::vector<std::string> commands = {"check", "show", "show --json", "cost --json", "emit"};
    if (s.kind == Seed::Result) commands.push_back("check --rank 1");
    if (small) {
      commands.push_back("run");
      commands.push_back("equiv '" + file.string() + "'");
    }
    for (const std::string& c : commands) {
      std::string args = c.substr(0, c.find(' ')) + " '" + file.string() + "'" +
                         (c.find(' ') == std::string::npos ? "" : c.substr(c.find(' ')));
      int code = run_binary(bin, args, err);
      ASSERT_TRUE(code == 0 || code == 1 || code == 2)
          << "strata " << args << " exited with " << code << " (seed " << seed << ", run " << i
          << ", from " << s.name << ")\nstderr: " << slurp(err) << "\ninput:\n"
          << text.substr(0, 4000);
      ++codes[code];
    }
  }
  std::printf("fuzz: seed %llu, %lld mutants: exit 0: %lld, 1: %lld, 2: %lld commands\n",
              static_cast<unsigned long long>(seed), static_cast<long long>(runs),
              static_cast<long long>(codes[0]), static_cast<long long>(codes[1]),
              static_cast<long long>(codes[2]));
}

}  // namespace
}  // namespace strata
