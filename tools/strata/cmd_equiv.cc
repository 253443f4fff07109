// `strata equiv A B`: decides whether two graphs compute the same outputs (DESIGN §5).
//
// Exit codes: 0 equivalent (with the error bound printed), 1 not equivalent (the first
// differing output and element printed), 2 unreadable graphs or mismatched interfaces, bad
// flags, or graphs too large to evaluate on this machine. Either graph may be a search result
// document (graph_args.h; --rank applies to each result document given).
#include <chrono>
#include <cstdio>
#include <iostream>

#include "command.h"
#include "graph_args.h"
#include "numeric_flags.h"
#include "strata/interpreter.h"
#include "strata/verifier.h"

namespace strata::cli {
namespace {

struct EquivArgs {
  std::string a, b;
  VerifyOptions options;
  bool screen = false;
  bool timing = false;
  int64_t rank = -1;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int run_equiv(const EquivArgs& args) {
  auto graphs = load_graph_args({args.a, args.b}, args.rank);
  if (!graphs.ok()) return fail_bad_input(graphs.error().message);
  const LoadedGraph& la = (*graphs)[0];
  const LoadedGraph& lb = (*graphs)[1];
  const KernelGraph* a = &la.graph;
  const KernelGraph* b = &lb.graph;
  // The verifier evaluates both graphs in full on the host, in pairs of 64-bit field elements.
  for (const LoadedGraph* g : {&la, &lb})
    if (Status fits = check_host_size(g->graph, 16); !fits.ok())
      return fail_bad_input(g->where + ": " + fits.error().message);
  auto t0 = std::chrono::steady_clock::now();
  auto checker = EquivalenceChecker::make(*a, args.options);
  if (!checker.ok()) return fail_bad_input(la.where + ": " + checker.error().message);
  if (args.screen) {
    auto first = checker->screen(*b);  // also evaluates the program's outputs once
    if (!first.ok()) return fail_bad_input(first.error().message);
    double t_first = seconds_since(t0);
    auto t1 = std::chrono::steady_clock::now();
    auto again = checker->screen(*b);
    double t_again = seconds_since(t1);
    std::cout << (*again ? "passes" : "fails") << " the screen\n";
    if (args.timing)
      std::cerr << "strata: first screen (with the program's evaluation) " << t_first
                << " s; screen with a warm checker " << t_again << " s\n";
    return *again ? kExitOk : kExitFalse;
  }
  auto r = checker->verify(*b);
  if (!r.ok()) return fail_bad_input(r.error().message);
  if (args.timing) std::cerr << "strata: verification took " << seconds_since(t0) << " s\n";
  if (!r->equivalent) {
    std::cout << "not equivalent: " << r->detail << " (trial " << r->trials << ")\n";
    return kExitFalse;
  }
  char bound[64];
  std::snprintf(bound, sizeof bound, "%.1f", r->log2_bound);
  std::cout << "equivalent: " << r->trials << " trial(s), P[non-equivalent graphs pass] ≤ 2^"
            << bound << "\n";
  return kExitOk;
}

CommandRegistrar reg{
    Command{"equiv", "Prove two programs or μGraphs equivalent (finite-field random tests with an error bound)",
            [](CLI::App& app) -> std::function<int()> {
              auto args = std::make_shared<EquivArgs>();
              app.add_option("A", args->a, "Program, μGraph or search result document (reference)")
                  ->required();
              app.add_option("B", args->b,
                             "Program, μGraph or search result document to compare with A")
                  ->required();
              add_rank_option(app, args->rank);
              app.add_option("--trials", args->options.trials,
                             "Trials to run, 1 to 64 (default 0: as many as the bound target "
                             "needs)")
                  ->transform(integer_in(0, 64));
              app.add_option("--target", args->options.target_log2_bound,
                             "log2 of the error bound to reach, -1000 to 0 (default -60)")
                  ->check(number_in(-1000, 0));
              app.add_option("--seed", args->options.seed,
                             "Seed of all randomness, 0 to 2^64-1 (default 1)")
                  ->transform(any_uint64());
              app.add_option("--threads", args->options.threads, "Worker threads (default 0: all)")
                  ->transform(integer_in(0, kMaxThreads));
              app.add_flag("--screen", args->screen,
                           "Only the cheap screen: a few sampled blocks of one trial");
              app.add_flag("--timing", args->timing, "Print how long the check took on stderr");
              return [args] { return run_equiv(*args); };
            },
            40}};

}  // namespace
}  // namespace strata::cli
