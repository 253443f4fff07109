// `strata optimize PROGRAM`: the superoptimizer search (docs/search.md).
#include <cmath>
#include <csignal>
#include <cstdio>
#include <iostream>

#include "command.h"
#include "strata/graph_io.h"
#include "strata/graph_print.h"
#include "strata/search.h"
#include "strata/search_report.h"

#ifdef STRATA_HAVE_CUDA
#include "strata/candidate_profiler.h"
#include "strata/gpu_device.h"
#include "strata/runtime_api.h"
#endif

namespace strata::cli {
namespace {

std::atomic<bool> g_interrupted{false};

/// First Ctrl-C: stop the search, checkpoint and report. A second one kills the process.
extern "C" void on_sigint(int) {
  g_interrupted.store(true);
  std::signal(SIGINT, SIG_DFL);
}

struct Options {
  std::string program;
  std::string output;
  bool show_best = true;
  bool use_gpu = true;
  SearchConfig config;
};

/// With a GPU: emits, compiles, checks against the float64 reference and times every ranked
/// candidate (DESIGN §7, §9), prints a table and returns the report for the result document
/// (null without a GPU). Failures of single candidates are statuses, never fatal.
Json profile_on_gpu(const KernelGraph& program, const SearchResult& result) {
#ifdef STRATA_HAVE_CUDA
  if (gpu_count() == 0) return nullptr;
  auto dev = query_device();
  if (!dev.ok()) {
    std::cerr << "strata: no usable GPU, candidates not profiled: " << dev.error().message << "\n";
    return nullptr;
  }
  const std::string arch = dev->arch();
  std::vector<KernelGraph> graphs;
  std::vector<std::string> sources;
  std::vector<int> rank_of;  // profiled index → rank
  Json entries = Json::array();
  for (size_t i = 0; i < result.ranked.size(); ++i) {
    Json e = {{"rank", i}};
    auto source = emit_graph_source(result.ranked[i].graph, arch);
    if (!source.ok()) {
      e["status"] = candidate_status_name(CandidateStatus::CompileError);
      e["error"] = "CUDA emitter: " + source.error().message;
    } else {
      graphs.push_back(result.ranked[i].graph);
      sources.push_back(*source);
      rank_of.push_back(static_cast<int>(i));
    }
    entries.push_back(e);
  }
  ProfileOptions options;
  options.jit.arch = arch;
  options.reference = program;
  auto profiled = profile_candidates(graphs, sources, options);
  if (!profiled.ok()) {
    std::cerr << "strata: candidates not profiled: " << profiled.error().message << "\n";
    return nullptr;
  }
  int fastest = -1;
  double fastest_us = 0;
  for (const ProfiledCandidate& pc : *profiled) {
    const int rank = rank_of[pc.index];
    Json& e = entries[rank];
    e["status"] = candidate_status_name(pc.status);
    if (!pc.error.empty()) e["error"] = pc.error;
    if (pc.rel_l2_error >= 0 && std::isfinite(pc.rel_l2_error)) e["rel_l2_error"] = pc.rel_l2_error;
    if (pc.timing) {
      e["measured_us"] = pc.timing->median_us;
      if (fastest < 0 || pc.timing->median_us < fastest_us) {
        fastest = rank;
        fastest_us = pc.timing->median_us;
      }
    }
  }
  std::printf("\nprofiled on %s (%s), median of CUDA-graph replays:\n", dev->name.c_str(),
              arch.c_str());
  for (const Json& e : entries) {
    const int rank = e["rank"].get<int>();
    std::printf("  #%-2d %-14s predicted %8.2f µs", rank, e["status"].get<std::string>().c_str(),
                result.ranked[rank].cost.predicted_us);
    if (e.contains("measured_us")) std::printf("  measured %8.2f µs", e["measured_us"].get<double>());
    if (result.ranked[rank].is_program) std::printf("  (the program)");
    std::printf("\n");
  }
  if (fastest >= 0)
    std::printf("fastest correct candidate: #%d, %.2f µs\n", fastest, fastest_us);
  return {{"device", dev->name}, {"arch", arch},
          {"fastest", fastest >= 0 ? Json(fastest) : Json(nullptr)}, {"candidates", entries}};
#else
  (void)program;
  (void)result;
  return nullptr;
#endif
}

int run(const Options& o) {
  auto graph = load_graph(o.program);
  if (!graph.ok()) return fail_bad_input(graph.error().message);
  SearchConfig config = o.config;
  config.interrupt = &g_interrupted;
  auto previous = std::signal(SIGINT, on_sigint);
  auto result = superoptimize(*graph, config);
  std::signal(SIGINT, previous);
  if (!result.ok()) return fail_bad_input("optimize: " + o.program + ": " + result.error().message);
  std::cout << search_summary(*result);
  if (o.show_best && !result->ranked.empty() && !result->ranked[0].is_program)
    std::cout << "\nthe winning μGraph:\n" << format_graph(result->ranked[0].graph);
  std::cout.flush();
  Json doc = search_result_to_json(*result, config);
  if (o.use_gpu) {
    Json profile = profile_on_gpu(*graph, *result);
    if (!profile.is_null()) doc["gpu_profile"] = std::move(profile);
  }
  if (!o.output.empty()) {
    Status s = write_text_file(o.output, doc.dump(2) + "\n");
    if (!s.ok()) {
      std::cerr << "strata: " << s.error().message << "\n";
      return kExitInternal;
    }
  }
  for (const std::string& note : result->notes)
    if (note.rfind("checkpoint written", 0) == 0) std::cout << note << "\n";
  if (!o.output.empty()) std::cout << "result written to " << o.output << "\n";
  return kExitOk;
}

std::function<int()> setup(CLI::App& app) {
  auto o = std::make_shared<Options>();
  SearchConfig& c = o->config;
  app.add_option("program", o->program, "program (.strata or μGraph JSON)")->required();
  app.add_option("-o,--output", o->output,
                 "write the result (ranked μGraphs, costs, stats) as JSON");
  app.add_option("--threads", c.threads, "worker threads (0 = all cores)")
      ->default_val(0)
      ->check(CLI::NonNegativeNumber);
  app.add_option("--time-limit", c.time_limit_s, "stop the enumeration after S seconds (0 = none)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--max-states", c.max_states, "stop after N explored states (0 = none)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--max-kernel-ops", c.max_kernel_ops, "kernel ops per graph")
      ->default_val(c.max_kernel_ops);
  app.add_option("--max-block-ops", c.max_block_ops,
                 "ops per block graph (input iterators, compute ops, accumulators)")
      ->default_val(c.max_block_ops);
  app.add_flag_callback(
      "--no-abstract-pruning", [o] { o->config.abstract_pruning = false; },
      "do not prune by abstract subexpressions");
  app.add_option("--target", c.target, "GPU of the cost model: h100, h200 or a100")
      ->default_val(c.target);
  app.add_option("--top", c.top_k, "candidates to verify and report")->default_val(c.top_k);
  app.add_flag("--resume", c.resume, "continue from the checkpoint of a stopped run");
  app.add_flag("--quiet", c.quiet, "no progress line");
  app.add_flag_callback(
      "--no-show", [o] { o->show_best = false; }, "do not print the winning μGraph");
  app.add_flag_callback(
      "--no-gpu", [o] { o->use_gpu = false; },
      "do not profile the candidates even when a GPU is present (by default every ranked "
      "candidate is compiled, checked against the float64 reference and timed)");
  app.add_flag_callback(
      "--no-cache", [o] { o->config.use_cache = false; },
      "neither read nor write the result cache");
  return [o] { return run(*o); };
}

CommandRegistrar reg{
    Command{"optimize", "search for the fastest equivalent μGraph of a program (superoptimize)",
            setup, 30}};

}  // namespace
}  // namespace strata::cli
