// strata: a multi-level superoptimizer for GPU tensor programs. See `strata --help`.
#include <algorithm>
#include <cstdio>
#include <iostream>

#include "command.h"

namespace strata::cli {

std::vector<Command>& command_registry() {
  static std::vector<Command> commands;
  return commands;
}

int fail_bad_input(const std::string& message) {
  std::cerr << "strata: " << message << "\n";
  return kExitBadInput;
}

}  // namespace strata::cli

int main(int argc, char** argv) {
  using namespace strata::cli;
  CLI::App app{
      "strata " STRATA_VERSION
      " — a multi-level superoptimizer for GPU tensor programs.\n"
      "Programs are .strata text files, μGraph JSON documents or search result documents\n"
      "(`optimize -o`; --rank N picks an entry), see docs/.\n"
      "Exit codes: 0 success, 1 a well-formed negative answer (e.g. not equivalent) or no\n"
      "usable GPU, 2 bad input or arguments, 3 internal error."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "strata " STRATA_VERSION);
  auto& commands = command_registry();
  std::sort(commands.begin(), commands.end(),
            [](const Command& a, const Command& b) { return a.order < b.order; });
  std::function<int()> run;
  for (const Command& c : commands) {
    CLI::App* sub = app.add_subcommand(c.name, c.help);
    auto fn = c.setup(*sub);
    sub->callback([&run, fn] { run = fn; });
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? kExitOk : kExitBadInput;
  }
  if (!run) return kExitBadInput;
  try {
    return run();
  } catch (const std::exception& e) {
    std::cerr << "strata: internal error: " << e.what() << "\n";
    return kExitInternal;
  }
}
