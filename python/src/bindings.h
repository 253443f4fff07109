// Shared declarations of the Python bindings (docs/python.md): one file per concept registers
// its functions on the module; errors cross into Python as the exceptions declared here.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

#include <nanobind/nanobind.h>

#include "strata/util/status.h"

namespace strata::py {

namespace nb = nanobind;

/// Raised as strata.StrataError: bad input (a program, a graph, an argument) or a failed job.
struct StrataError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
/// Raised as strata.GpuUnavailableError: the GPU parts need CUDA at build time (a toolkit) or at
/// run time (a driver and a device), and this one is missing.
struct GpuUnavailable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The value of a Result, or a StrataError with its message.
template <class T>
T unwrap(Result<T> r) {
  if (!r.ok()) throw StrataError(r.error().message);
  return std::move(r).value();
}
inline void check(const Status& s) {
  if (!s.ok()) throw StrataError(s.error().message);
}

void bind_errors(nb::module_& m);
void bind_ops(nb::module_& m);
void bind_graph(nb::module_& m);
void bind_interpreter(nb::module_& m);
void bind_verifier(nb::module_& m);
void bind_search(nb::module_& m);
void bind_gpu(nb::module_& m);

}  // namespace strata::py
