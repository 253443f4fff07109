// `strata cost GRAPH [--target T] [--json] [--rank N] [--no-library-matmul] [--no-wgmma]`: the
// analytical cost model's prediction
// for every kernel of a program, μGraph or result entry (docs/cost-model.md).
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "command.h"
#include "graph_args.h"
#include "strata/cost/cost_json.h"
#include "strata/cost/cost_model.h"
#include "strata/ir/graph_io.h"
#include "strata/ir/graph_json.h"

namespace strata::cli {
namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// Prints rows of cells as a table: first column left-aligned, the rest right-aligned.
void print_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  auto cells = [](const std::string& s) {  // display width: count UTF-8 lead bytes
    size_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
  };
  for (const auto& r : rows)
    for (size_t i = 0; i < r.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], cells(r[i]));
    }
  for (const auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      std::string pad(width[i] - cells(r[i]), ' ');
      line += i == 0 ? r[i] + pad : "  " + pad + r[i];
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    std::cout << line << "\n";
  }
}

int run_cost(const std::string& path, const std::string& target_name, bool json, int64_t rank,
             const CostOptions& options) {
  auto target = Target::by_name(target_name);
  if (!target.ok()) return fail_bad_input(target.error().message);
  auto g = load_graph_arg(path, rank);
  if (!g.ok()) return fail_bad_input(g.error().message);
  GraphCost c = estimate_cost(g->graph, *target, options);
  if (json) {
    std::cout << graph_cost_to_json(c, *target).dump(2) << "\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows = {{"kernel", "loaded B", "L2 B", "stored B",
                                                 "tensor FLOP",
                                                 "SIMT FLOP", "blocks", "alpha", "t_mem us",
                                                 "t_comp us", "pred us", "smem B"}};
  bool over = false;
  for (const KernelCost& k : c.kernels) {
    bool too_big = k.smem_bytes > target->smem_per_block_bytes;  // over the limit itself
    over = over || too_big;
    rows.push_back({"#" + std::to_string(k.op_id) + " " + k.label + (k.library ? " (cuBLAS)" : ""),
                    std::to_string(k.load_bytes), std::to_string(k.l2_bytes),
                    std::to_string(k.store_bytes), fmt("%.4g", k.tensor_flops),
                    fmt("%.4g", k.simt_flops), std::to_string(k.blocks), fmt("%.3f", k.alpha),
                    fmt("%.3f", k.t_mem_s * 1e6), fmt("%.3f", k.t_comp_s * 1e6),
                    fmt("%.3f", k.predicted_s * 1e6),
                    k.smem_bytes ? std::to_string(k.smem_bytes) + (too_big ? "!" : "") : "-"});
  }
  std::cout << "target " << target->name << " (" << target->sm_count << " SMs, "
            << fmt("%.3g", target->mem_bandwidth_Bps / 1e12) << " TB/s, launch "
            << fmt("%.3g", target->launch_overhead_s * 1e6) << " us)\n";
  print_table(rows);
  std::cout << "total predicted " << fmt("%.3f", c.predicted_us) << " us over " << c.kernels.size()
            << " kernel(s)\n";
  if (over)
    std::cout << "! shared memory estimate exceeds the target's " << target->smem_per_block_bytes
              << " B per block (the estimate ignores tile reuse; pruning allows "
              << fmt("%.1f", kSmemPruneSlack) << "x)\n";
  return kExitOk;
}

std::function<int()> setup(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  auto target = std::make_shared<std::string>("h100");
  auto json = std::make_shared<bool>(false);
  auto rank = std::make_shared<int64_t>(-1);
  auto no_library = std::make_shared<bool>(false);
  auto no_wgmma = std::make_shared<bool>(false);
  app.add_option("graph", *path, "program (.strata), μGraph (.json) or search result document")
      ->required();
  add_rank_option(app, *rank);
  std::string names;
  for (const Target& t : known_targets()) names += (names.empty() ? "" : ", ") + t.name;
  app.add_option("--target", *target, "GPU whose constants are used: " + names)
      ->capture_default_str();
  app.add_flag("--json", *json, "print the prediction as JSON");
  app.add_flag("--no-library-matmul", *no_library,
               "predict predefined matmuls as generated kernels, not cuBLAS calls (code emitted "
               "with --no-library-matmul, or by a strata without library matmuls)");
  app.add_flag("--no-wgmma", *no_wgmma,
               "predict every kernel as the default variant emits it (mma.sync), also on a "
               "target with warpgroup MMA (by default a kernel whose plan under the knob `wgmma` "
               "takes it is predicted as that variant)");
  auto concurrent = std::make_shared<bool>(false);
  app.add_flag("--concurrent-launches", *concurrent,
               "predict launches that do not depend on each other as running at the same time "
               "(side streams; not adopted: the default is their sum)");
  return [=] {
    CostOptions options;
    options.library_matmul = !*no_library;
    options.wgmma = !*no_wgmma;
    options.concurrent_launches = *concurrent;
    options.code_features = *json;  // the calibration's per-kernel code features
    return run_cost(*path, *target, *json, *rank, options);
  };
}

CommandRegistrar reg{Command{"cost",
                             "Predict the run time of every kernel with the analytical "
                             "cost model",
                             setup, 50}};

}  // namespace
}  // namespace strata::cli
