// Where the device runtime headers are (runtime/strata_rt: strata_rt.cuh, host.cuh, the CPU
// emulator emulate.h): emitted CUDA includes "strata_rt/strata_rt.cuh", so whatever compiles
// it (the JIT, the tests, a user's own build) passes this directory with -I.
//
// Lookup order (docs/gpu-runtime.md, "Finding the runtime headers and nvcc"); the first place
// that holds strata_rt/strata_rt.cuh wins:
//   1. $STRATA_RUNTIME_DIR: when set, the only place searched (a wrong value is an error);
//   2. beside the running executable: <exe dir>/../share/strata/runtime (an installed tool,
//      wherever its prefix was moved);
//   3. the source tree, when the running executable lies in the build tree it was built in;
//   4. the install location configured at build time (<prefix>/share/strata/runtime);
//   5. the source tree the library was built from.
#pragma once

#include <string>
#include <vector>

#include "strata/util/status.h"

namespace strata {

/// One place searched for the runtime headers.
struct RuntimeDirCandidate {
  std::string dir;     ///< the directory passed with -I (it holds strata_rt/)
  std::string origin;  ///< why it is searched: "STRATA_RUNTIME_DIR", "beside the executable", …
};

/// The places searched, in lookup order, without repeats.
std::vector<RuntimeDirCandidate> runtime_dir_candidates();

/// The first candidate that holds strata_rt/strata_rt.cuh; an Error naming every place
/// searched when none does (or naming $STRATA_RUNTIME_DIR when it is set and wrong).
Result<std::string> find_runtime_dir();

}  // namespace strata
