// Turning CUDA runtime status codes into strata Errors (private to src/gpu).
#pragma once

#include <string>

#include <cuda_runtime_api.h>

#include "strata/util/status.h"

namespace strata::gpu {

/// "<what>: <cudaErrorName> (<description>)".
inline Error cuda_error(const std::string& what, cudaError_t e) {
  return make_error(what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

/// Status of a CUDA runtime call; `what` names the call site.
inline Status cuda_status(const std::string& what, cudaError_t e) {
  if (e == cudaSuccess) return Status::success();
  return cuda_error(what, e);
}

}  // namespace strata::gpu
