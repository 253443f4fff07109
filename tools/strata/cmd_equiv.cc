// `strata equiv A B`: decides whether two graphs compute the same outputs (DESIGN §5).
//
// Exit codes: 0 equivalent (with the error bound printed), 1 not equivalent (the first
// differing output and element printed), 2 unreadable graphs or mismatched interfaces.
#include <chrono>
#include <cstdio>
#include <iostream>

#include "command.h"
#include "strata/graph_io.h"
#include "strata/verifier.h"
#include "util/progress.h"

namespace strata::cli {
namespace {

struct EquivArgs {
  std::string a, b;
  VerifyOptions options;
  bool screen = false;
  bool timing = false;
  bool quiet = false;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int run_equiv(const EquivArgs& args) {
  auto a = load_graph(args.a);
  if (!a.ok()) return fail_bad_input(a.error().message);
  auto b = load_graph(args.b);
  if (!b.ok()) return fail_bad_input(b.error().message);
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
    return fail_bad_input(args.a + ": " + checker.error().message);
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

CommandRegistrar reg{Command{
    "equiv",
    "Prove two programs or μGraphs equivalent (finite-field random tests with an error bound)",
    [](CLI::App& app) -> std::function<int()> {
      auto args = std::make_shared<EquivArgs>();
      app.add_option("A", args->a, "Program or μGraph (reference)")->required();
      app.add_option("B", args->b, "Program or μGraph to compare with A")->required();
      app.add_option("--trials", args->options.trials,
                     "Trials to run (default: as many as the bound target needs)");
      app.add_option("--target", args->options.target_log2_bound,
                     "log2 of the error bound to reach (default -60)");
      app.add_option("--seed", args->options.seed, "Seed of all randomness (default 1)");
      app.add_option("--threads", args->options.threads, "Worker threads (default: all)");
      app.add_flag("--screen", args->screen,
                   "Only the cheap screen: a few sampled blocks of one trial");
      app.add_flag("--timing", args->timing, "Print how long the check took on stderr");
      app.add_flag("--quiet", args->quiet,
                   "No progress line (printed on stderr once a second while checking)");
      return [args] { return run_equiv(*args); };
    },
    40}};

}  // namespace
}  // namespace strata::cli
