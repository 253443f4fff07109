// `strata show FILE [--dot OUT] [--json] [--rank N]`: prints a program, μGraph or result entry
// at every level.
#include <iostream>

#include "command.h"
#include "graph_args.h"
#include "strata/ir/graph_dot.h"
#include "strata/ir/graph_io.h"
#include "strata/ir/graph_json.h"
#include "strata/ir/graph_print.h"

namespace strata::cli {
namespace {

struct ShowOptions {
  std::string file;
  std::string dot;
  bool json = false;
  int64_t rank = -1;
};

std::function<int()> setup(CLI::App& app) {
  auto opts = std::make_shared<ShowOptions>();
  app.add_option("FILE", opts->file,
                 "a .strata program, a μGraph .json document or a search result document")
      ->required();
  add_rank_option(app, opts->rank);
  app.add_option("--dot", opts->dot,
                 "also write a Graphviz rendering (kernel graph, one cluster per customized "
                 "kernel with its block graph) to OUT; `-` writes it to stdout instead of the "
                 "listing")
      ->type_name("OUT");
  app.add_flag("--json", opts->json,
               "print the canonical μGraph JSON (docs/mugraph-json.md) instead of the listing");
  app.footer(
      "Without options, prints a readable listing of every level: kernel ops, each\n"
      "customized kernel's block graph (grid, forloop, imap/fmap, accumulators, omap) and\n"
      "thread graphs. Exits 2 on an invalid file.");
  return [opts] {
    if (opts->json && opts->dot == "-")
      return fail_bad_input("--json and --dot - both write to stdout; choose one");
    auto loaded = load_graph_arg(opts->file, opts->rank);
    if (!loaded.ok()) return fail_bad_input(loaded.error().message);
    const KernelGraph* g = &loaded->graph;
    if (!opts->dot.empty()) {
      std::string dot = kernel_graph_to_dot(*g);
      if (opts->dot == "-") {
        std::cout << dot;
        return kExitOk;
      }
      auto written = write_text_file(opts->dot, dot);
      if (!written.ok()) return fail_bad_input(written.error().message);
    }
    if (opts->json) {
      std::cout << kernel_graph_to_json(*g).dump(2) << "\n";
    } else {
      std::cout << format_graph(*g);
    }
    return kExitOk;
  };
}

CommandRegistrar reg{
    Command{"show", "Print a program or μGraph (listing, JSON or Graphviz DOT)", setup, 20}};

}  // namespace
}  // namespace strata::cli
