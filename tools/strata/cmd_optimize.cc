// `strata optimize PROGRAM`: the superoptimizer search (docs/search.md).
#include <csignal>
#include <cstdio>
#include <iostream>
#include <limits>

#include "command.h"
#include "graph_args.h"
#include "input_files.h"
#include "numeric_flags.h"
#include "strata/codegen/emit_knobs.h"
#include "strata/ir/graph_io.h"
#include "strata/frontend/graph_loader.h"
#include "strata/ir/graph_print.h"
#include "strata/search/search.h"
#include "strata/search/search_report.h"
#include "strata/codegen/tuning_variants.h"

#ifdef STRATA_HAVE_CUDA
#include "strata/gpu/gpu_device.h"
#include "strata/gpu/search_profile.h"
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
  std::vector<std::string> variants;  ///< empty: default_tuning_variants()
  std::string inputs_dir;    ///< profiling inputs as files (input_files.h); else uniform random
  double input_scale = 0.5;  ///< the random inputs' range ±scale
  SearchConfig config;
};

/// How the GPU profile gets its inputs: values read from files, or uniform in ±scale.
struct ProfileInputs {
  std::vector<std::vector<double>> values;
  double scale = 0.5;
  std::string description;  ///< recorded in the result's gpu_profile
};

/// With a GPU: profiles every ranked candidate once per emitter variant (search_profile.h),
/// prints a table and returns the report for the result document (null without a GPU). The
/// fastest correct (candidate, variant) pair is the report's "fastest" / "fastest_variant".
/// Failures of single candidates are statuses, never fatal.
Json profile_on_gpu(const KernelGraph& program, const SearchResult& result,
                    const std::vector<std::string>& variants, const ProfileInputs& inputs) {
#ifdef STRATA_HAVE_CUDA
  if (gpu_count() == 0) return nullptr;
  SearchProfileOptions options;
  options.variants = variants;
  options.inputs = inputs.values;
  options.input_scale = inputs.scale;
  options.inputs_description = inputs.description;
  auto profiled = profile_search_result(program, result, options);
  if (!profiled.ok()) {
    std::cerr << "strata: candidates not profiled: " << profiled.error().message << "\n";
    return nullptr;
  }
  const Json& report = *profiled;
  std::printf(
      "\nprofiled on %s (%s), median of CUDA-graph replays, best of %zu emitter "
      "variant(s) each:\n",
      report["device"].get<std::string>().c_str(), report["arch"].get<std::string>().c_str(),
      variants.size());
  for (const Json& e : report["candidates"]) {
    const int rank = e["rank"].get<int>();
    std::printf("  #%-2d %-14s predicted %8.2f µs", rank, e["status"].get<std::string>().c_str(),
                result.ranked[rank].cost.predicted_us);
    if (e.contains("measured_us"))
      std::printf("  measured %8.2f µs [%s]", e["measured_us"].get<double>(),
                  e["knobs"].get<std::string>().c_str());
    if (result.ranked[rank].is_program) std::printf("  (the program)");
    std::printf("\n");
  }
  if (!report["fastest"].is_null())
    std::printf("fastest correct candidate: #%d [%s], %.2f µs\n", report["fastest"].get<int>(),
                report["fastest_variant"].get<std::string>().c_str(),
                report["fastest_us"].get<double>());
  return report;
#else
  (void)program;
  (void)result;
  (void)variants;
  (void)inputs;
  return nullptr;
#endif
}

int run(const Options& o) {
  auto graph = load_graph(o.program);
  if (!graph.ok()) return fail_bad_input(graph.error().message);
  auto variants = normalize_variants(o.variants.empty() ? default_tuning_variants() : o.variants);
  if (!variants.ok()) return fail_bad_input("--variants: " + variants.error().message);
  // Input files are read before the search, so that a bad one stops the run at once.
  ProfileInputs inputs;
  inputs.scale = o.input_scale;
  inputs.description = "uniform(±" + std::to_string(o.input_scale) + ")";
  if (!(o.input_scale > 0)) return fail_bad_input("--input-scale must be positive");
  if (!o.inputs_dir.empty()) {
    auto values = read_input_files(o.inputs_dir, *graph);
    if (!values.ok()) return fail_bad_input("--inputs: " + values.error().message);
    inputs.values = std::move(values).value();
    inputs.description = o.inputs_dir;
  }
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
    Json profile = profile_on_gpu(*graph, *result, *variants, inputs);
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
  app.add_option("program", o->program,
                 "program (.strata or μGraph JSON; of a search result document, its default "
                 "entry)")
      ->required();
  app.add_option("-o,--output", o->output,
                 "write the result (ranked μGraphs, costs, stats) as JSON");
  app.add_option("--threads", c.threads, "worker threads (0 = all cores)")
      ->default_val(0)
      ->transform(integer_in(0, kMaxThreads));
  app.add_option("--time-limit", c.time_limit_s,
                 "bound on the whole search in seconds: setup, enumeration, screening and "
                 "verification (not GPU profiling); 0 = none")
      ->check(number_in(0, 1e9));
  app.add_option("--enum-time-limit", c.enum_time_limit_s,
                 "bound on the enumeration in seconds (default: half of --time-limit, leaving "
                 "the rest to verification; else none)")
      ->check(number_in(0, 1e9));
  app.add_option("--max-states", c.max_states, "stop after N explored states (0 = none)")
      ->transform(integer_in(0, std::numeric_limits<int64_t>::max()));
  app.add_option("--max-kernel-ops", c.max_kernel_ops, "kernel ops per graph, 1 to 8")
      ->default_val(c.max_kernel_ops)
      ->transform(integer_in(1, 8));
  app.add_option("--max-block-ops", c.max_block_ops,
                 "ops per block graph (input iterators, compute ops, accumulators); 0 = from "
                 "the program: max(11, its inputs and ops + 2), at most 16")
      ->default_val(c.max_block_ops)
      ->transform(integer_in(0, 16));
  app.add_flag_callback(
      "--no-abstract-pruning", [o] { o->config.abstract_pruning = false; },
      "do not prune by abstract subexpressions");
  app.add_flag_callback(
      "--no-canonicalize", [o] { o->config.canonicalize = false; },
      "search the program as written, without its canonical rewrites or alternative forms "
      "(docs/search.md)");
  app.add_flag_callback(
      "--no-alternative-forms", [o] { o->config.alternative_forms = false; },
      "search the canonical form only, not also the alternative forms (docs/search.md, "
      "\"Alternative forms\")");
  app.add_flag_callback(
      "--no-layer-split", [o] { o->config.split_layers = false; },
      "search a program with many weight layers as a whole only, not layer by layer first "
      "(docs/search.md, \"Layers\")");
  app.add_option("--target", c.target, "GPU of the cost model: h100, h200 or a100")
      ->default_val(c.target);
  app.add_option("--top", c.top_k, "candidates to verify and report, 1 to 1000")
      ->default_val(c.top_k)
      ->transform(integer_in(1, 1000));
  app.add_flag("--resume", c.resume, "continue from the checkpoint of a stopped run");
  app.add_flag("--quiet", c.quiet, "no progress lines");
  app.add_flag_callback(
      "--no-show", [o] { o->show_best = false; }, "do not print the winning μGraph");
  app.add_flag_callback(
      "--no-gpu", [o] { o->use_gpu = false; },
      "do not profile the candidates even when a GPU is present (by default every ranked "
      "candidate is compiled, checked against the float64 reference and timed)");
  app.add_option("--variants", o->variants,
                 "emitter variants profiled per candidate on the GPU, knob specs separated by "
                 "';' (see `strata emit --list-knobs`; \"default\": the emitter's choice only; "
                 "default: default;groups=4;minblocks=2;regfloats=96,chainmt=2;groups=4,walk=0;wgmma=1)")
      ->delimiter(';');
  app.add_option("--inputs", o->inputs_dir,
                 "directory with <input name>.f64 files (raw little-endian float64) to profile "
                 "with on the GPU, e.g. from `python3 bench/benchmarks.py inputs KEY DIR` "
                 "(default: uniform random inputs)");
  app.add_option("--input-scale", o->input_scale, "random profiling inputs are uniform in ±scale")
      ->default_val(o->input_scale)
      ->check(number_in(0, 1e30, true));
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
