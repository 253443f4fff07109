// `strata emit GRAPH -o OUT.cu [--arch sm_90a]`: writes the CUDA source of a μGraph.
#include <iostream>

#include "command.h"
#include "strata/cuda_emitter.h"
#include "strata/graph_io.h"

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
    int stages = 0;
    bool no_tensor_cores = false, f32_intermediates = false;
  };
  auto args = std::make_shared<Args>();
  app.add_option("graph", args->graph, "μGraph JSON (or program) to compile")->required();
  app.add_option("-o,--output", args->out, "output .cu file (default: stdout)");
  app.add_option("--arch", args->arch, "target architecture named in the source (sm_80, sm_90a)")
      ->capture_default_str();
  app.add_option("--name", args->name, "graph name for kernel names (default: file stem)");
  app.add_option("--stages", args->stages, "force this pipeline depth for every loop (0: auto)");
  app.add_flag("--no-tensor-cores", args->no_tensor_cores, "use the SIMT matmul path everywhere");
  app.add_flag("--f32-intermediates", args->f32_intermediates,
               "store tensors passed between kernels in f32");
  return [args] {
    if (!valid_arch(args->arch))
      return fail_bad_input("--arch " + args->arch + ": expected sm_80 or newer (e.g. sm_90a)");
    auto g = load_graph(args->graph);
    if (!g.ok()) return fail_bad_input(g.error().message);
    EmitOptions opts;
    opts.arch = args->arch;
    opts.name = args->name.empty() ? stem(args->graph) : args->name;
    opts.plan.forced_stages = args->stages;
    opts.plan.tensor_cores = !args->no_tensor_cores;
    opts.f32_intermediates = args->f32_intermediates;
    auto src = emit_cuda_source(*g, opts);
    if (!src.ok()) return fail_bad_input(args->graph + ": " + src.error().message);
    if (args->out.empty()) {
      std::cout << src->code;
    } else {
      auto st = write_text_file(args->out, src->code);
      if (!st.ok()) return fail_bad_input(st.error().message);
      for (const EmittedKernel& k : src->kernels)
        std::cerr << "strata emit: " << k.name << ": grid (" << k.grid.x << ", " << k.grid.y << ", "
                  << k.grid.z << "), " << k.threads << " threads, " << k.smem_bytes
                  << " bytes of shared memory\n";
    }
    return kExitOk;
  };
}

static CommandRegistrar reg{Command{
    "emit", "Write the CUDA source of a μGraph (kernels + extern \"C\" launcher)", setup, 60}};

}  // namespace
}  // namespace strata::cli
