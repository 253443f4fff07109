// `strata check FILE`: loads a program or μGraph, validates it and prints a summary.
#include <iostream>

#include "command.h"
#include "strata/graph_io.h"
#include "strata/graph_print.h"

namespace strata::cli {
namespace {

std::function<int()> setup(CLI::App& app) {
  auto file = std::make_shared<std::string>();
  app.add_option("FILE", *file,
                 "a .strata program or a μGraph .json document; the kind is chosen by the "
                 ".json extension or a leading `{`")
      ->required();
  app.footer(
      "Prints a one-paragraph summary and exits 0 when the file is valid. Otherwise prints\n"
      "the first error (file:line:col for text, the JSON path for μGraphs) and exits 2.");
  return [file] {
    auto g = load_graph(*file);
    if (!g.ok()) return fail_bad_input(g.error().message);
    auto complete = g->check_complete();
    if (!complete.ok()) return fail_bad_input(*file + ": " + complete.error().message);
    for (const KernelOp& op : g->ops()) {
      if (!op.body) continue;
      auto body = op.body->check_complete();
      if (!body.ok()) return fail_bad_input(*file + ": " + body.error().message);
    }
    std::cout << *file << ": ok: " << summarize_graph(*g) << "\n";
    return kExitOk;
  };
}

CommandRegistrar reg{
    Command{"check", "Validate a program or μGraph file and summarize it", setup, 10}};

}  // namespace
}  // namespace strata::cli
