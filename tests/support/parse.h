// Test support: a program from its text (docs/program-format.md), with a test failure naming
// the parse error and the text when it does not parse (then an empty graph).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "strata/frontend/program_parser.h"

namespace strata::testing {

inline KernelGraph parse(const std::string& text) {
  auto g = parse_program(text, "test.strata");
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().message) << "\n" << text;
  return g.ok() ? std::move(g).value() : KernelGraph{};
}

}  // namespace strata::testing
