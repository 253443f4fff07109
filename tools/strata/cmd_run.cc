// `strata run FILE [--seed N]`: runs a program or μGraph in the reference interpreter (doubles)
// on random inputs and prints each output's shape and checksums.
//
// Inputs are uniform in [−1, 1) from the seed, so two graphs that compute the same function print
// the same checksums up to rounding. Exit codes: 0 ok, 2 unreadable or invalid graph, a bad
// flag, or a graph too large for the interpreter (interpreter.h, check_host_size).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "command.h"
#include "graph_args.h"
#include "numeric_flags.h"
#include "strata/interp/interpreter.h"

namespace strata::cli {
namespace {

struct RunArgs {
  std::string file;
  uint64_t seed = 1;
  int threads = 0;
  int64_t rank = -1;
};

int run_run(const RunArgs& args) {
  auto loaded = load_graph_arg(args.file, args.rank);
  if (!loaded.ok()) return fail_bad_input(loaded.error().message);
  const KernelGraph* g = &loaded->graph;
  if (Status fits = check_host_size(*g); !fits.ok())
    return fail_bad_input(loaded->where + ": " + fits.error().message);
  auto t0 = std::chrono::steady_clock::now();
  auto outs = run_reference(*g, random_inputs(*g, args.seed), ExecOptions{args.threads});
  if (!outs.ok()) return fail_bad_input(loaded->where + ": " + outs.error().message);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%s: reference interpreter, inputs uniform in [-1, 1) from seed %llu\n",
              loaded->where.c_str(), static_cast<unsigned long long>(args.seed));
  for (size_t i = 0; i < outs->size(); ++i) {
    const HostTensor& t = (*outs)[i];
    double sum = 0, sum_abs = 0, sum_sq = 0;
    for (double v : t.data) {
      sum += v;
      sum_abs += std::fabs(v);
      sum_sq += v * v;
    }
    std::printf("output %zu %s%s: sum %.9g  sum|x| %.9g  l2 %.9g\n", i,
                g->tensor_name(g->outputs()[i]).c_str(), t.shape.str().c_str(), sum, sum_abs,
                std::sqrt(sum_sq));
  }
  std::fprintf(stderr, "strata: ran in %.3f s\n", secs);
  return kExitOk;
}

CommandRegistrar reg{Command{
    "run", "Run a program or μGraph in the reference interpreter on random inputs; print checksums",
    [](CLI::App& app) -> std::function<int()> {
      auto args = std::make_shared<RunArgs>();
      app.add_option("FILE", args->file,
                     "Program (.strata), μGraph (.json) or search result document")
          ->required();
      add_rank_option(app, args->rank);
      app.add_option("--seed", args->seed, "Seed of the random inputs, 0 to 2^64-1 (default 1)")
          ->transform(any_uint64());
      app.add_option("--threads", args->threads, "Worker threads (default 0: all)")
          ->transform(integer_in(0, kMaxThreads));
      return [args] { return run_run(*args); };
    },
    30}};

}  // namespace
}  // namespace strata::cli
