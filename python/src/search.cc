// The search (include/strata/search/search.h) with progress for Python's logging, Ctrl-C, and the GPU
// profile of the ranked candidates when a GPU is present (include/strata/gpu/search_profile.h).
// The answer is the result document of docs/search.md ("Result format") as JSON text.
#include <atomic>
#include <chrono>
#include <future>
#include <optional>
#include <thread>

#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "strata/search/search.h"
#include "strata/search/search_report.h"

#ifdef STRATA_HAVE_CUDA
#include "strata/gpu/gpu_device.h"
#include "strata/gpu/search_profile.h"
#endif

namespace strata::py {
namespace {

struct SearchArgs {
  SearchConfig config;
  bool profile = true;
  std::vector<std::string> variants;
  std::vector<std::string> include_dirs;
  std::vector<std::vector<double>> profile_inputs;  ///< per program input; empty = random
};

/// Runs the search on a worker thread while this thread (without the GIL) reports progress
/// about once a second and watches for Ctrl-C, which stops the search (it checkpoints).
std::string run_search(const KernelGraph& program, SearchArgs args, nb::object progress) {
  std::atomic<bool> interrupt{false};
  std::atomic<int64_t> found{0};
  args.config.quiet = true;
  args.config.interrupt = &interrupt;
  args.config.observer = [&found](const KernelGraph&) { found.fetch_add(1); };
  std::optional<nb::python_error> pending;  // a KeyboardInterrupt to re-raise at the end
  Result<SearchResult> result = make_error("search did not run");
  {
    nb::gil_scoped_release release;
    auto job = std::async(std::launch::async, [&] { return superoptimize(program, args.config); });
    const auto t0 = std::chrono::steady_clock::now();
    auto last = t0;
    while (job.wait_for(std::chrono::milliseconds(200)) != std::future_status::ready) {
      nb::gil_scoped_acquire gil;
      if (!pending && PyErr_CheckSignals() != 0) {
        pending.emplace();  // fetches the error (KeyboardInterrupt)
        interrupt.store(true);
      }
      auto now = std::chrono::steady_clock::now();
      if (!progress.is_none() && now - last >= std::chrono::seconds(1)) {
        last = now;
        double elapsed = std::chrono::duration<double>(now - t0).count();
        try {
          progress(elapsed, found.load());
        } catch (nb::python_error& e) {
          e.discard_as_unraisable("strata search progress callback");
        }
      }
    }
    result = job.get();
  }
  if (!result.ok()) throw StrataError(result.error().message);
  Json doc = search_result_to_json(*result, args.config);
#ifdef STRATA_HAVE_CUDA
  if (args.profile && !pending && gpu_count() > 0) {
    SearchProfileOptions po;
    if (!args.variants.empty()) po.variants = args.variants;
    po.jit.include_dirs = args.include_dirs;
    if (!args.profile_inputs.empty()) {
      po.inputs = args.profile_inputs;
      po.inputs_description = "given by the caller";
    }
    Result<Json> report = make_error("not profiled");
    {
      nb::gil_scoped_release release;
      report = profile_search_result(program, *result, po);
    }
    if (report.ok())
      doc["gpu_profile"] = std::move(report).value();
    else
      doc["notes"].push_back("candidates not profiled on the GPU: " + report.error().message);
  }
#endif
  if (pending) {
    pending->restore();
    throw nb::python_error();
  }
  return doc.dump();
}

}  // namespace

void bind_search(nb::module_& m) {
  m.attr("max_program_tensors") = kMaxProgramTensors;
  m.def(
      "superoptimize",
      [](const KernelGraph& program, int threads, double time_limit, int64_t max_states,
         int max_kernel_ops, int max_block_ops, int max_customized_ops, bool abstract_pruning,
         const std::string& target, int top_k, bool resume, bool use_cache,
         const std::string& cache_dir, bool profile, const std::vector<std::string>& variants,
         const std::vector<std::string>& include_dirs,
         const std::vector<nb::ndarray<const double, nb::c_contig, nb::device::cpu>>& inputs,
         nb::object progress) {
        SearchArgs a;
        a.config.threads = threads;
        a.config.time_limit_s = time_limit;
        a.config.max_states = max_states;
        a.config.max_kernel_ops = max_kernel_ops;
        a.config.max_block_ops = max_block_ops;
        a.config.max_customized_ops = max_customized_ops;
        a.config.abstract_pruning = abstract_pruning;
        a.config.target = target;
        a.config.top_k = top_k;
        a.config.resume = resume;
        a.config.use_cache = use_cache;
        a.config.cache_dir = cache_dir;
        a.profile = profile;
        a.variants = variants;
        a.include_dirs = include_dirs;
        for (const auto& x : inputs) a.profile_inputs.emplace_back(x.data(), x.data() + x.size());
        return run_search(program, std::move(a), std::move(progress));
      },
      nb::arg("program"), nb::arg("threads") = 0, nb::arg("time_limit") = 0.0,
      nb::arg("max_states") = 0, nb::arg("max_kernel_ops") = SearchConfig{}.max_kernel_ops,
      nb::arg("max_block_ops") = SearchConfig{}.max_block_ops,
      nb::arg("max_customized_ops") = SearchConfig{}.max_customized_ops,
      nb::arg("abstract_pruning") = true, nb::arg("target") = SearchConfig{}.target,
      nb::arg("top_k") = SearchConfig{}.top_k, nb::arg("resume") = false,
      nb::arg("use_cache") = true, nb::arg("cache_dir") = "", nb::arg("profile") = true,
      nb::arg("variants") = std::vector<std::string>{},
      nb::arg("include_dirs") = std::vector<std::string>{},
      nb::arg("profile_inputs") =
          std::vector<nb::ndarray<const double, nb::c_contig, nb::device::cpu>>{},
      nb::arg("progress") = nb::none(),
      "Runs the search (docs/search.md) and, when a GPU is present and `profile` is set, "
      "profiles the ranked candidates (on `profile_inputs`: float64 arrays, one per program input, "
      "else uniform random ones); returns the result document as JSON text. `progress` is "
      "called about once a second with (elapsed seconds, complete graphs found).");
}

}  // namespace strata::py
