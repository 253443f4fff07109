// Test support: sub-step lines for long tests. GoogleTest names each test as it starts; a test
// that works through many cases (graphs to compile or emulate, programs to verify) also names
// each case as it starts, so that a slow or stuck run shows where it is: live when the binary
// runs directly or under `ctest -V`, and in the output ctest prints for a failure or timeout.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

namespace strata::testing {

/// Prints "[   STEP   ] <what> (<seconds since the first step>)" to stdout and flushes it.
inline void test_step(const std::string& what) {
  using Clock = std::chrono::steady_clock;
  static const Clock::time_point t0 = Clock::now();
  std::printf("[   STEP   ] %s (%.1f s)\n", what.c_str(),
              std::chrono::duration<double>(Clock::now() - t0).count());
  std::fflush(stdout);
}

}  // namespace strata::testing
