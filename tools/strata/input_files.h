// Input values given as files (`strata profile --inputs`, `strata optimize --inputs`): one raw
// little-endian float64 file <dir>/<input name>.f64 per program input, numel values each (the
// format `python3 bench/benchmarks.py inputs KEY DIR` writes). Values must be finite.
#pragma once

#include <string>
#include <vector>

#include "strata/ir/kernel_graph.h"
#include "strata/util/status.h"

namespace strata::cli {

/// The values of every input of `program`, in input order; an Error naming the file when one
/// is missing or holds the wrong number of values.
Result<std::vector<std::vector<double>>> read_input_files(const std::string& dir,
                                                          const KernelGraph& program);

}  // namespace strata::cli
