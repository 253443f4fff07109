// The strata command-line tool: subcommand registry and exit-code conventions.
//
// Each subcommand lives in its own tools/strata/cmd_<name>.cc and registers itself with a
// static CommandRegistrar; main.cc builds the CLI11 app from the registry. A command's run
// function returns the process exit code.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace strata::cli {

/// Exit codes shared by every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFalse = 1;     ///< a well-formed "no" (e.g. graphs not equivalent)
inline constexpr int kExitBadInput = 2;  ///< unreadable or invalid input, bad arguments
inline constexpr int kExitInternal = 3;  ///< anything else that went wrong

struct Command {
  std::string name;
  std::string help;
  /// Adds the command's options to `app` and returns the function that runs it.
  std::function<std::function<int()>(CLI::App& app)> setup;
  int order = 100;  ///< position in --help
};

std::vector<Command>& command_registry();

struct CommandRegistrar {
  explicit CommandRegistrar(Command c) { command_registry().push_back(std::move(c)); }
};

/// Prints "strata: <message>" to stderr and returns kExitBadInput.
int fail_bad_input(const std::string& message);

}  // namespace strata::cli
