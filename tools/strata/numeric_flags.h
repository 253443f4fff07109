// Validators for the numeric options of every command.
//
// CLI11 alone converts "-1" into a wrapped uint64_t, "010" into 8 and accepts "nan"; and its
// range validators print bounds like 1.797…e308 in full. These validators check the option's
// text before it is converted: a value that is malformed, not finite or outside the option's
// range is a bad-argument error (exit 2) that names the option and the range. The integer
// validators also rewrite the text in canonical decimal, so attach them with ->transform()
// (->check() would discard the rewrite and let CLI11 read "010" as octal).
#pragma once

#include <cstdint>

#include <CLI/CLI.hpp>

namespace strata::cli {

/// Most worker threads a --threads or --jobs option accepts (0 = all hardware threads).
inline constexpr int kMaxThreads = 1024;

/// A decimal integer (optional '-', digits only) in [lo, hi].
CLI::Validator integer_in(int64_t lo, int64_t hi);
/// A decimal integer in [0, 2^64 - 1] (seeds): digits only, no sign.
CLI::Validator any_uint64();
/// A finite decimal number in [lo, hi] (or (lo, hi] when lo_open).
CLI::Validator number_in(double lo, double hi, bool lo_open = false);

}  // namespace strata::cli
