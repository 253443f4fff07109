// `strata optimize PROGRAM`: the superoptimizer search (docs/search.md).
#include <csignal>
#include <iostream>

#include "command.h"
#include "strata/graph_io.h"
#include "strata/graph_print.h"
#include "strata/search.h"
#include "strata/search_report.h"

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
  SearchConfig config;
};

int run(const Options& o) {
  auto graph = load_graph(o.program);
  if (!graph.ok()) return fail_bad_input(graph.error().message);
  SearchConfig config = o.config;
  config.interrupt = &g_interrupted;
  auto previous = std::signal(SIGINT, on_sigint);
  auto result = superoptimize(*graph, config);
  std::signal(SIGINT, previous);
  if (!result.ok()) return fail_bad_input("optimize: " + o.program + ": " + result.error().message);
  if (!o.output.empty()) {
    Status s = write_text_file(o.output, search_result_to_json(*result, config).dump(2) + "\n");
    if (!s.ok()) {
      std::cerr << "strata: " << s.error().message << "\n";
      return kExitInternal;
    }
  }
  std::cout << search_summary(*result);
  if (o.show_best && !result->ranked.empty() && !result->ranked[0].is_program)
    std::cout << "\nthe winning μGraph:\n" << format_graph(result->ranked[0].graph);
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
      "--no-cache", [o] { o->config.use_cache = false; },
      "neither read nor write the result cache");
  return [o] { return run(*o); };
}

CommandRegistrar reg{
    Command{"optimize", "search for the fastest equivalent μGraph of a program (superoptimize)",
            setup, 30}};

}  // namespace
}  // namespace strata::cli
