// `strata profile`: check candidates against the float64 reference on the GPU and time them
// (docs/gpu-runtime.md). Writes a JSON report; used by bench/ and scripts/gpu-check.sh.
// Exit codes: 0 every candidate passed, 1 a candidate failed or no GPU is usable (an
// environment condition, not an internal error), 2 bad input or flags, 3 internal error.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>

#include "command.h"
#include "emit_flags.h"
#include "graph_args.h"
#include "input_files.h"
#include "numeric_flags.h"
#include "strata/cost/cost_model.h"
#include "strata/codegen/cuda_emitter.h"
#include "strata/codegen/emit_knobs.h"
#include "strata/ir/graph_io.h"
#include "strata/frontend/graph_loader.h"
#include "strata/ir/graph_json.h"

#ifdef STRATA_HAVE_CUDA
#include "strata/gpu/candidate_profiler.h"
#include "strata/gpu/gpu_device.h"
#include "strata/ir/result_graphs.h"
#include "strata/gpu/runtime_api.h"
#include "strata/gpu/variant_profile.h"
#endif

namespace strata::cli {
namespace {

struct ProfileArgs {
  std::string program;
  std::vector<std::string> candidates;
  int top = 5;
  std::string arch;
  std::string out;
  std::string export_dir;
  std::string inputs_dir;
  std::string only;
  int runs = 100;
  int warmup = 5;
  double tolerance = 1e-2;
  double input_scale = 0.5;
  uint64_t seed = 1;
  int jobs = 0;
  int64_t rank = -1;  ///< --rank: this entry of each result document instead of the top K
  std::string target;
  bool check_only = false;
  bool compile_only = false;
  bool quiet = false;
  EmitFlags emit;                     ///< emitter options of every variant
  std::vector<std::string> variants;  ///< knob specs; each graph candidate runs once per spec
};

#ifdef STRATA_HAVE_CUDA

namespace fs = std::filesystem;

/// One candidate to profile: a graph, and its source when given as a .cu file.
struct Entry {
  KernelGraph graph;
  std::string origin;
  std::optional<double> predicted_us;
  std::optional<std::string> source;
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Result<std::vector<Entry>> collect_entries(const ProfileArgs& a, const KernelGraph& program) {
  std::vector<Entry> entries;
  if (a.candidates.empty()) entries.push_back({program, a.program + " (the program)", {}, {}});
  for (const std::string& path : a.candidates) {
    if (ends_with(path, ".cu")) {
      STRATA_ASSIGN_OR_RETURN(std::string source, read_text_file(path));
      entries.push_back({program, path, {}, std::move(source)});
      continue;
    }
    if (ends_with(path, ".strata")) {
      STRATA_ASSIGN_OR_RETURN(KernelGraph g, load_graph(path));
      entries.push_back({std::move(g), path, {}, {}});
      continue;
    }
    if (a.rank >= 0) {  // the one entry --rank names, as every command takes it
      STRATA_ASSIGN_OR_RETURN(LoadedGraph g, load_graph_entry(path, a.rank));
      entries.push_back({std::move(g.graph), g.where, {}, {}});
      continue;
    }
    STRATA_ASSIGN_OR_RETURN(std::vector<ResultGraph> graphs, load_result_graphs(path));
    // The top K, and every derived form below them: the cost model cannot rank those
    // (docs/search.md, "Split-KV"), so the GPU decides.
    for (int i = 0; i < static_cast<int>(graphs.size()); ++i)
      if (i < a.top || !graphs[i].derived.empty())
        entries.push_back(
            {std::move(graphs[i].graph), graphs[i].where, graphs[i].predicted_us, {}});
  }
  return entries;
}

Result<std::set<int>> parse_only(const std::string& text) {
  std::set<int> only;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      only.insert(std::stoi(item));
    } catch (const std::exception&) {
      return make_error("--only: expected comma-separated candidate indices, got `" + text + "`");
    }
  }
  return only;
}

Json timing_json(const Timing& t) {
  return {{"median_us", t.median_us}, {"mean_us", t.mean_us}, {"min_us", t.min_us},
          {"p10_us", t.p10_us},       {"p90_us", t.p90_us},   {"runs", t.runs},
          {"sets", t.sets},           {"passes", t.passes},   {"bytes_per_set", t.bytes_per_set},
          {"l2_bytes", t.l2_bytes}};
}

/// --compile-only: compile every candidate through the binary cache and report.
int compile_only(const ProfileArgs& a, const std::string& arch, const Target& target,
                 const std::vector<std::string>& sources, const std::vector<int>& slot,
                 std::vector<Json>& reports) {
  JitOptions jit;
  jit.arch = arch;
  jit.threads = a.jobs;
  std::vector<Result<CompiledBinary>> binaries = compile_cuda_many(sources, jit);
  bool all_ok = true;
  for (size_t k = 0; k < binaries.size(); ++k) {
    Json& r = reports[slot[k]];
    if (binaries[k].ok()) {
      r["status"] = "compiled";
      r["library"] = binaries[k]->path;
      r["cache_hit"] = binaries[k]->cache_hit;
      r["compile_seconds"] = binaries[k]->compile_seconds;
      r["compiler_log"] = binaries[k]->log;
    } else {
      bool smem = binaries[k].error().message.find("too much shared data") != std::string::npos;
      r["status"] = candidate_status_name(smem ? CandidateStatus::SmemExceeded
                                               : CandidateStatus::CompileError);
      r["error"] = binaries[k].error().message;
    }
  }
  for (const Json& r : reports)
    all_ok = all_ok && (r.value("status", "") == "compiled" || r.value("status", "") == "skipped");
  Json doc = {{"format", "strata-profile"}, {"version", 1}, {"program", a.program},
              {"target", target.name},      {"arch", arch}, {"compile_only", true},
              {"candidates", reports}};
  if (!a.out.empty()) {
    Status st = write_text_file(a.out, doc.dump(2) + "\n");
    if (!st.ok()) return fail_bad_input(st.error().message);
  }
  if (!a.quiet)
    for (const Json& r : reports) {
      std::printf("  #%-3d %-15s %s [%s]\n", r["index"].get<int>(), r.value("status", "?").c_str(),
                  r["origin"].get<std::string>().c_str(), r.value("variant", "").c_str());
      if (r.contains("error")) {
        std::string e = r["error"].get<std::string>();
        std::printf("       %s\n", e.substr(0, e.find('\n')).c_str());
      }
    }
  return all_ok ? kExitOk : kExitFalse;
}

int run_profile(const ProfileArgs& a) {
  std::vector<std::string> files = {a.program};
  for (const std::string& c : a.candidates)
    if (!ends_with(c, ".cu")) files.push_back(c);
  auto loaded = load_graph_args(files, a.rank);  // also checks that --rank selects something
  if (!loaded.ok()) return fail_bad_input(loaded.error().message);
  Result<KernelGraph> program = std::move((*loaded)[0].graph);
  auto entries = collect_entries(a, *program);
  if (!entries.ok()) return fail_bad_input(entries.error().message);
  auto only = parse_only(a.only);
  if (!only.ok()) return fail_bad_input(only.error().message);
  std::vector<std::vector<double>> given_inputs;
  if (!a.inputs_dir.empty() && !a.compile_only) {
    auto inputs = read_input_files(a.inputs_dir, *program);
    if (!inputs.ok()) return fail_bad_input(inputs.error().message);
    given_inputs = std::move(inputs).value();
  }
  std::optional<DeviceInfo> dev;
  if (gpu_count() > 0) {
    auto info = query_device();
    if (!info.ok()) {
      std::cerr << "strata: no usable GPU: " << info.error().message << "\n";
      return kExitFalse;
    }
    dev = *info;
  } else if (!a.compile_only) {
    std::cerr << "strata: profile needs a GPU: no CUDA device is available (--compile-only "
                 "with --arch works without one)\n";
    return kExitFalse;
  }
  if (!dev && a.arch.empty()) return fail_bad_input("--compile-only without a GPU needs --arch");
  std::string arch = a.arch.empty() ? dev->arch() : a.arch;
  // The cost-model target: named by --target, else the device's (h100 when unknown).
  auto target = a.target.empty() ? Result<Target>(Target::for_device(dev ? dev->name : ""))
                                 : Target::by_name(a.target);
  if (!target.ok()) return fail_bad_input(target.error().message);

  ProfileOptions options;
  options.jit.arch = arch;
  options.jit.threads = a.jobs;
  options.timing.runs = a.runs;
  options.timing.warmup_runs = a.warmup;
  options.tolerance = a.tolerance;
  options.seed = a.seed;
  options.input_scale = a.input_scale;
  options.check_only = a.check_only;
  options.reference = *program;
  options.inputs = std::move(given_inputs);

  // Emitter variants: the flags give the base options, each --variants spec is applied on top.
  EmitOptions base;
  base.arch = arch;
  if (Status st = apply_emit_flags(a.emit, base); !st.ok())
    return fail_bad_input(st.error().message);
  std::vector<std::pair<std::string, EmitOptions>> variants;
  for (const std::string& spec : a.variants) {
    EmitOptions o = base;
    if (Status st = apply_emit_knobs(spec, o); !st.ok())
      return fail_bad_input("--variants: " + st.error().message);
    variants.emplace_back(format_emit_knobs(o), o);
  }
  if (variants.empty()) variants.emplace_back(format_emit_knobs(base), base);
  // Graph candidates run once per variant, .cu sources once (variant_profile.h); emitter
  // failures are reported like compile errors.
  std::vector<VariantCandidate> candidates;
  for (const Entry& e : *entries) candidates.push_back({e.graph, e.source});
  std::vector<EmitterVariant> emitters;
  for (const auto& [name, o] : variants)
    emitters.push_back({name, [o](const KernelGraph& g) { return emit_cuda(g, o); }});
  std::vector<VariantRun> runs = emit_variant_runs(
      candidates, emitters,
      [&](size_t i) { return only->empty() || only->count(static_cast<int>(i)) > 0; });

  std::vector<Json> reports(runs.size());
  std::vector<std::string> sources;
  std::vector<int> slot;  // compiled index → run index (--compile-only)
  if (!a.export_dir.empty()) fs::create_directories(a.export_dir);
  for (size_t i = 0; i < runs.size(); ++i) {
    const VariantRun& run = runs[i];
    const Entry& e = (*entries)[run.candidate];
    Json& r = reports[i];
    r = {{"index", i}, {"origin", e.origin}};
    r["variant"] = run.variant >= 0 ? variants[run.variant].first : "source";
    // The prediction for the way this variant emits predefined matmuls (cuBLAS or kernels).
    CostOptions cost;
    cost.library_matmul =
        run.variant >= 0 ? variants[run.variant].second.library_matmul : base.library_matmul;
    // … and for its matmuls: as warpgroup MMA where the variant's knob `wgmma` lets the plan
    // take it, else mma.sync.
    cost.wgmma = run.variant >= 0 ? variants[run.variant].second.plan.wgmma : base.plan.wgmma;
    // … and for its storage types (f32 intermediates: no routed or packed outputs of them).
    cost.f32_intermediates = run.variant >= 0 ? variants[run.variant].second.f32_intermediates
                                              : base.f32_intermediates;
    r["predicted_us"] = estimate_cost(e.graph, *target, cost).predicted_us;
    r["result_predicted_us"] = e.predicted_us ? Json(*e.predicted_us) : Json(nullptr);
    if (!run.selected) {
      r["status"] = "skipped";
      continue;
    }
    if (!run.source) {
      r["status"] = candidate_status_name(CandidateStatus::CompileError);
      r["error"] = run.emit_error;
      continue;
    }
    if (!a.export_dir.empty()) {
      std::string stem = (fs::path(a.export_dir) / ("cand" + std::to_string(i))).string();
      if (!write_text_file(stem + ".cu", *run.source).ok() ||
          !save_graph_json(e.graph, stem + ".json").ok())
        return fail_bad_input(a.export_dir + ": cannot write exported candidates");
      r["cuda"] = stem + ".cu";
      r["graph"] = stem + ".json";
    }
    sources.push_back(*run.source);
    slot.push_back(static_cast<int>(i));
  }

  if (a.compile_only) return compile_only(a, arch, *target, sources, slot, reports);
  if (Status st = profile_variant_runs(candidates, runs, options); !st.ok()) {
    std::cerr << "strata: " << st.error().message << "\n";
    return kExitInternal;
  }
  const int best = fastest_variant_run(runs);
  bool all_ok = true;
  for (const VariantRun& run : runs) {
    if (!run.outcome) continue;
    const ProfiledCandidate& pc = *run.outcome;
    Json& r = reports[pc.index];
    r["status"] = candidate_status_name(pc.status);
    if (!pc.error.empty()) r["error"] = pc.error;
    r["rel_l2_error"] = pc.rel_l2_error >= 0 && std::isfinite(pc.rel_l2_error)
                            ? Json(pc.rel_l2_error)
                            : (pc.rel_l2_error < 0 ? Json(nullptr) : Json("inf"));
    if (pc.binary) {
      r["library"] = pc.binary->path;
      r["cache_hit"] = pc.binary->cache_hit;
      r["compile_seconds"] = pc.binary->compile_seconds;
    }
    r["workspace_bytes"] = pc.workspace_bytes;
    if (pc.packed_outputs > 0) r["packed_outputs"] = pc.packed_outputs;  // timed packed
    if (pc.same_as >= 0) r["same_as"] = pc.same_as;  // its code and outcome repeat that one's
    if (pc.smem_bytes) r["smem_bytes"] = *pc.smem_bytes;
    if (pc.timing) r["timing"] = timing_json(*pc.timing);
    all_ok = all_ok && pc.status == CandidateStatus::Ok;
  }
  Json doc = {{"format", "strata-profile"},
              {"version", 1},
              {"program", a.program},
              {"target", target->name},
              {"device",
               {{"name", dev->name},
                {"arch", arch},
                {"sm_count", dev->traits.sm_count},
                {"l2_bytes", dev->traits.l2_bytes},
                {"smem_per_block", dev->traits.smem_per_block_bytes},
                {"driver_version", dev->driver_version}}},
              {"tolerance", a.tolerance},
              {"inputs", a.inputs_dir.empty() ? "uniform(±" + std::to_string(a.input_scale) +
                                                    ", seed " + std::to_string(a.seed) + ")"
                                              : a.inputs_dir},
              {"check_only", a.check_only},
              {"best", best >= 0 ? Json(best) : Json(nullptr)},
              {"candidates", reports}};
  if (!a.out.empty()) {
    Status st = write_text_file(a.out, doc.dump(2) + "\n");
    if (!st.ok()) return fail_bad_input(st.error().message);
  }
  if (!a.quiet) {
    std::printf("%s on %s (%s)\n", a.program.c_str(), dev->name.c_str(), arch.c_str());
    for (const Json& r : reports) {
      std::string status = r.value("status", "?");
      std::printf("  #%-3d %-15s", r["index"].get<int>(), status.c_str());
      if (r.contains("timing")) std::printf(" %9.2f us", r["timing"]["median_us"].get<double>());
      if (r.contains("predicted_us") && r["predicted_us"].is_number())
        std::printf("  (predicted %.2f us)", r["predicted_us"].get<double>());
      if (r.contains("rel_l2_error") && r["rel_l2_error"].is_number())
        std::printf("  err %.1e", r["rel_l2_error"].get<double>());
      std::printf("  %s [%s]\n", r["origin"].get<std::string>().c_str(),
                  r.value("variant", "").c_str());
      if (r.contains("error")) {
        std::string e = r["error"].get<std::string>();
        std::printf("       %s\n", e.substr(0, e.find('\n')).c_str());
      }
    }
  }
  return all_ok ? kExitOk : kExitFalse;
}

#endif  // STRATA_HAVE_CUDA

std::function<int()> setup(CLI::App& app) {
  auto a = std::make_shared<ProfileArgs>();
  app.add_option("program", a->program,
                 "the program (.strata, μGraph JSON or a search result document, whose entry "
                 "--rank or the default choice gives the program): its float64 reference is "
                 "the expected output")
      ->required();
  app.add_option("candidates", a->candidates,
                 "candidates: μGraph JSON, strata optimize results (top K of each, or the "
                 "entry --rank names), .strata programs or .cu sources; default: the program "
                 "itself");
  app.add_option("--top", a->top,
                 "candidates taken from each result document (and every derived form below "
                 "them: split-KV forms, pointwise seeds)")
      ->capture_default_str()
      ->transform(integer_in(1, 1 << 20));
  app.add_option("--rank", a->rank,
                 "take entry ranked[N] of every search result document given (the program "
                 "and candidates) instead of the default entry (program) or the top K "
                 "(candidates)")
      ->type_name("N")
      ->transform(integer_in(0, 1 << 20));
  app.add_option("--arch", a->arch, "nvcc -arch (default: the GPU's)");
  app.add_option("-o,--output", a->out, "write the JSON report here");
  app.add_option("--export-dir", a->export_dir, "write each candidate's .cu and μGraph JSON here");
  app.add_option("--inputs", a->inputs_dir,
                 "directory with <input name>.f64 files (raw little-endian float64) to use as "
                 "inputs");
  app.add_option("--input-scale", a->input_scale, "random inputs are uniform in ±scale")
      ->capture_default_str()
      ->check(number_in(0, 1e30, true));
  app.add_option("--seed", a->seed, "seed of the random inputs")
      ->capture_default_str()
      ->transform(any_uint64());
  app.add_option("--tolerance", a->tolerance, "relative L2 error allowed")
      ->capture_default_str()
      ->check(number_in(0, 1e30, true));
  app.add_option("--runs", a->runs, "timed CUDA-graph replays")
      ->capture_default_str()
      ->transform(integer_in(1, 1000000));
  app.add_option("--warmup", a->warmup, "untimed replays first")
      ->capture_default_str()
      ->transform(integer_in(0, 1000000));
  app.add_option(
      "--only", a->only,
      "profile only these candidate indices (e.g. 0,3; counted after expanding --variants)");
  app.add_option("--jobs", a->jobs, "parallel compilations (0: all cores)")
      ->transform(integer_in(0, kMaxThreads));
  app.add_option("--target", a->target,
                 "cost-model target for the predicted times (h100|h200|a100; default: from the "
                 "device name)");
  app.add_flag("--check-only", a->check_only, "check correctness, do not time");
  app.add_flag("--compile-only", a->compile_only,
               "emit and compile every candidate into the binary cache; no GPU needed with "
               "--arch");
  app.add_flag("-q,--quiet", a->quiet, "no summary on stdout");
  add_emit_flags(app, a->emit);
  app.add_option("--variants", a->variants,
                 "emitter variants: knob specs like --knobs, separated by ';' (\"default\" = "
                 "the flags alone); every graph candidate is emitted, checked and timed once per "
                 "variant, reported with its \"variant\"")
      ->delimiter(';');
  return [a]() -> int {
#ifdef STRATA_HAVE_CUDA
    return run_profile(*a);
#else
    std::cerr << "strata: this build has no CUDA support (no toolkit was found at build time)\n";
    return kExitFalse;
#endif
  };
}

}  // namespace

static CommandRegistrar reg{Command{
    "profile",
    "check candidates against the float64 reference on the GPU and time them (exit 1 if any "
    "candidate fails or there is no GPU)",
    setup, 60}};

}  // namespace strata::cli
