// `strata equiv A B`: decides whether two graphs compute the same outputs (docs/verifier.md).
//
// Exit codes: 0 equivalent (with the error bound printed); 1 not equivalent (the first
// differing output and element, or the mismatched input/output pair, printed) or unknown
// (every trial agreed but no error bound below 1 holds: not a yes); 2 unreadable or
// incomplete graphs, bad flags, or graphs too large to evaluate on this machine. Either graph
// may be a search result document (graph_args.h; --rank applies to each result document given).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "command.h"
#include "graph_args.h"
#include "numeric_flags.h"
#include "strata/verify/verifier.h"
#include "util/progress.h"

namespace strata::cli {
namespace {

struct EquivArgs {
  std::string a, b;
  VerifyOptions options;
  bool screen = false;
  bool timing = false;
  bool quiet = false;
  int64_t rank = -1;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// The option errors of `equiv`, named by flag (the library checks the same ranges).
std::string option_error(const VerifyOptions& o) {
  char buf[200];
  if (!std::isfinite(o.target_log2_bound) || o.target_log2_bound >= 0) {
    std::snprintf(buf, sizeof buf,
                  "--target: expected a finite negative number of bits (log2 of the error "
                  "bound, e.g. -60), got %g",
                  o.target_log2_bound);
    return buf;
  }
  if (o.trials < 0 || o.trials > 64)
    return "--trials: expected 0 (as many as the target needs) to 64, got " +
           std::to_string(o.trials);
  if (o.threads < 0)
    return "--threads: expected 0 (all cores) or more, got " + std::to_string(o.threads);
  return "";
}

int run_equiv(const EquivArgs& args) {
  if (std::string e = option_error(args.options); !e.empty()) return fail_bad_input(e);
  auto graphs = load_graph_args({args.a, args.b}, args.rank);
  if (!graphs.ok()) return fail_bad_input(graphs.error().message);
  const LoadedGraph& la = (*graphs)[0];
  const LoadedGraph& lb = (*graphs)[1];
  const KernelGraph* a = &la.graph;
  const KernelGraph* b = &lb.graph;
  for (const LoadedGraph* g : {&la, &lb})
    if (auto c = g->graph.check_complete(); !c.ok())
      return fail_bad_input(g->where + ": " + c.error().message);
  auto t0 = std::chrono::steady_clock::now();
  // A check at paper shapes runs for seconds to minutes: a progress line once a second.
  const char* what = args.screen ? "screening" : "verifying";
  ProgressTicker progress(!args.quiet, [&](double t) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "equiv: %.0f s, %s (finite-field evaluation of both graphs)", t,
                  what);
    return std::string(buf);
  });
  auto checker = EquivalenceChecker::make(*a, args.options);
  if (!checker.ok()) {
    progress.stop();
    return fail_bad_input(la.where + ": " + checker.error().message);
  }
  if (args.screen) {
    auto first = checker->screen(*b);  // also evaluates the program's outputs once
    if (!first.ok()) {
      progress.stop();
      return fail_bad_input(first.error().message);
    }
    double t_first = seconds_since(t0);
    auto t1 = std::chrono::steady_clock::now();
    auto again = checker->screen(*b);
    double t_again = seconds_since(t1);
    progress.stop();
    std::cout << (*again ? "passes" : "fails") << " the screen\n";
    if (args.timing)
      std::cerr << "strata: first screen (with the program's evaluation) " << t_first
                << " s; screen with a warm checker " << t_again << " s\n";
    return *again ? kExitOk : kExitFalse;
  }
  auto r = checker->verify(*b);
  progress.stop();
  if (!r.ok()) return fail_bad_input(r.error().message);
  if (args.timing) std::cerr << "strata: verification took " << seconds_since(t0) << " s\n";
  if (r->unknown) {
    std::cout << "unknown: " << r->detail << " (" << r->trials
              << " trial(s)); this is not a proof of equivalence\n";
    return kExitFalse;
  }
  if (!r->equivalent) {
    std::cout << "not equivalent: " << r->detail;
    if (r->trials > 0) std::cout << " (trial " << r->trials << ")";
    std::cout << "\n";
    return kExitFalse;
  }
  char bound[64];
  std::snprintf(bound, sizeof bound, "%.1f", r->log2_bound);
  std::cout << "equivalent: " << r->trials << " trial(s), P[non-equivalent graphs pass] ≤ 2^"
            << bound;
  if (!r->instance.empty()) std::cout << " (checked on the reduced instance " << r->instance << ")";
  std::cout << "\n";
  if (r->log2_bound > args.options.target_log2_bound)
    std::cerr << "strata: note: the bound 2^" << bound << " misses the target 2^"
              << args.options.target_log2_bound
              << (args.options.trials > 0 ? " with the trials asked for"
                                          : " (64 trials, the most that run)")
              << "\n";
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
                             "log2 of the error bound to reach, a finite negative number (default "
                             "-60; beyond what 64 trials reach, the bound they reach is reported)");
              app.add_option("--seed", args->options.seed,
                             "Seed of all randomness, 0 to 2^64-1 (default 1)")
                  ->transform(any_uint64());
              app.add_option("--threads", args->options.threads, "Worker threads (default 0: all)")
                  ->transform(integer_in(0, kMaxThreads));
              app.add_flag("--screen", args->screen,
                           "Only the cheap screen: a few sampled blocks of one trial");
              app.add_flag("--timing", args->timing, "Print how long the check took on stderr");
              app.add_flag("--full-instance",
                           [args](int64_t) { args->options.reduce_instances = false; },
                           "Check on the program's own shapes, not on a reduced instance (the "
                           "program's independent dims shrunk to a few of the candidate's tiles)");
              app.add_flag("--quiet", args->quiet,
                           "No progress line (printed on stderr once a second while checking)");
              return [args] { return run_equiv(*args); };
            },
            40}};

}  // namespace
}  // namespace strata::cli
