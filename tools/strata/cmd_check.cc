// `strata check FILE [--rank N]`: loads a program, μGraph or result entry, validates it and
// prints a summary; warns on stderr about tensors that are computed but never used.
#include <iostream>

#include "command.h"
#include "graph_args.h"
#include "strata/ir/graph_print.h"

namespace strata::cli {
namespace {

std::function<int()> setup(CLI::App& app) {
  auto file = std::make_shared<std::string>();
  auto rank = std::make_shared<int64_t>(-1);
  app.add_option("FILE", *file,
                 "a .strata program, a μGraph .json document or a search result document; the "
                 "kind is chosen by the .json extension or a leading `{`")
      ->required();
  add_rank_option(app, *rank);
  app.footer(
      "Prints a one-paragraph summary and exits 0 when the file is valid; a tensor that is\n"
      "computed but neither used nor an output gets a warning on stderr (still exit 0).\n"
      "Otherwise prints the first error (file:line:col for text, the JSON path for μGraphs)\n"
      "and exits 2.");
  return [file, rank] {
    auto loaded = load_graph_arg(*file, *rank);
    if (!loaded.ok()) return fail_bad_input(loaded.error().message);
    const KernelGraph& g = loaded->graph;
    const std::string& where = loaded->where;
    auto complete = g.check_complete();
    if (!complete.ok()) return fail_bad_input(where + ": " + complete.error().message);
    for (const KernelOp& op : g.ops()) {
      if (!op.body) continue;
      auto body = op.body->check_complete();
      if (!body.ok()) return fail_bad_input(where + ": " + body.error().message);
    }
    for (int t : g.dead_tensors()) {
      const int op = g.tensor(t).producer;
      std::cerr << "strata: warning: " << where << ": tensor `" << g.tensor_name(t)
                << "` (computed by kernel op #" << op << ", " << op_name(g.op(op).kind)
                << ") is never used and is not an output\n";
    }
    std::cout << where << ": ok: " << summarize_graph(g) << "\n";
    return kExitOk;
  };
}

CommandRegistrar reg{Command{
    "check", "Validate a program or μGraph file (or a result entry) and summarize it", setup, 10}};

}  // namespace
}  // namespace strata::cli
