// `strata emit GRAPH -o OUT.cu [--arch sm_90a] [--rank N] [emitter flags]`: writes the CUDA
// source of a μGraph (or of an entry of a search result, with the emitter knobs its GPU profile
// timed it with); `strata emit --list-knobs` lists the emitter knobs (emit_flags.h).
#include <iostream>

#include "command.h"
#include "emit_flags.h"
#include "graph_args.h"
#include "numeric_flags.h"
#include "strata/codegen/cuda_emitter.h"
#include "strata/codegen/emit_knobs.h"
#include "strata/ir/graph_io.h"

namespace strata::cli {
namespace {

std::string stem(const std::string& path) {
  size_t slash = path.find_last_of('/');
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  size_t dot = base.find('.');
  return dot == std::string::npos ? base : base.substr(0, dot);
}

/// "sm_XY" or "sm_XYa" with XY ≥ 80 (cp.async and mma.sync m16n8k16 need sm_80).
bool valid_arch(const std::string& arch) {
  if (arch.rfind("sm_", 0) != 0) return false;
  std::string digits;
  size_t i = 3;
  while (i < arch.size() && arch[i] >= '0' && arch[i] <= '9') digits += arch[i++];
  if (digits.empty() || digits.size() > 3) return false;
  if (i < arch.size() && !(i + 1 == arch.size() && (arch[i] == 'a' || arch[i] == 'f')))
    return false;
  return std::stoi(digits) >= 80;
}

std::function<int()> setup(CLI::App& app) {
  struct Args {
    std::string graph, out, arch = "sm_90a", name;
    EmitFlags flags;
    bool plan = false, list_knobs = false;
    int64_t rank = -1;
    std::string task_entry;
    int task_threads = 256;
  };
  auto args = std::make_shared<Args>();
  app.add_option("graph", args->graph, "μGraph JSON, search result document or program to compile");
  add_rank_option(app, args->rank);
  app.add_option("-o,--output", args->out, "output .cu file (default: stdout)");
  app.add_option("--arch", args->arch, "target architecture named in the source (sm_80, sm_90a)")
      ->capture_default_str();
  app.add_option("--name", args->name, "graph name for kernel names (default: file stem)");
  add_emit_flags(app, args->flags);
  app.add_option("--task-entry", args->task_entry,
                 "also emit each customized kernel as a __device__ task entry of one block "
                 "(beside: with the kernels, wrappers and strata_launch_tasks; only: the entries "
                 "alone, for a persistent megakernel)")
      ->check(CLI::IsMember({"beside", "only"}));
  app.add_option("--task-threads", args->task_threads,
                 "threads of the block calling the task entries (a multiple of 32)")
      ->capture_default_str()
      ->transform(integer_in(32, 1024));
  app.add_flag("--plan", args->plan, "print each customized kernel's plan to stderr");
  app.add_flag("--list-knobs", args->list_knobs,
               "print the emitter knobs with their defaults and exit");
  return [args] {
    if (args->list_knobs) {
      std::cout << emit_knobs_help();
      return kExitOk;
    }
    if (args->graph.empty()) return fail_bad_input("emit: a μGraph JSON or program is required");
    if (!valid_arch(args->arch))
      return fail_bad_input("--arch " + args->arch + ": expected sm_80 or newer (e.g. sm_90a)");
    auto g = load_graph_arg(args->graph, args->rank);
    if (!g.ok()) return fail_bad_input(g.error().message);
    EmitOptions opts;
    opts.arch = args->arch;
    opts.name = args->name.empty() ? stem(args->graph) : args->name;
    // A result entry profiled fastest is emitted as it was timed; the flags apply on top.
    if (Status st = apply_emit_knobs(g->knobs, opts); !st.ok())
      return fail_bad_input(g->where + ": the knobs of its GPU profile: " + st.error().message);
    if (Status st = apply_emit_flags(args->flags, opts); !st.ok())
      return fail_bad_input(st.error().message);
    if (!args->task_entry.empty())
      opts.task_entry = args->task_entry == "only" ? TaskEntryForm::Only : TaskEntryForm::Beside;
    opts.task_threads = args->task_threads;
    auto src = emit_cuda_source(g->graph, opts);
    if (!src.ok()) return fail_bad_input(g->where + ": " + src.error().message);
    if (args->out.empty()) {
      std::cout << src->code;
    } else {
      auto st = write_text_file(args->out, src->code);
      if (!st.ok()) return fail_bad_input(st.error().message);
      for (const EmittedKernel& k : src->kernels) {
        if (k.library) {  // a cuBLAS or NCCL call on the launch stream
          std::cerr << "strata emit: " << k.op << " as a library call (" << k.name << ")\n";
          continue;
        }
        std::cerr << "strata emit: " << k.name << ": grid (" << k.grid.x << ", " << k.grid.y << ", "
                  << k.grid.z << "), " << k.threads << " threads";
        if (k.loop_groups > 1) std::cerr << " in " << k.loop_groups << " loop groups";
        std::cerr << ", " << k.smem_bytes << " bytes of shared memory";
        if (k.pipeline_stages > 1) std::cerr << ", " << k.pipeline_stages << " stages";
        std::cerr << "\n";
        if (args->plan && !k.plan.empty()) std::cerr << k.plan;
      }
    }
    return kExitOk;
  };
}

static CommandRegistrar reg{Command{
    "emit", "Write the CUDA source of a μGraph (kernels + extern \"C\" launcher)", setup, 60}};

}  // namespace
}  // namespace strata::cli
