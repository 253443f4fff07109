// Exceptions: strata.StrataError (bad input, failed jobs) and its subclass
// strata.GpuUnavailableError (no CUDA toolkit at build time, or no driver/device at run time).
#include "bindings.h"

namespace strata::py {

void bind_errors(nb::module_& m) {
  static nb::exception<StrataError> base(m, "StrataError", PyExc_Exception);
  static nb::exception<GpuUnavailable> gpu(m, "GpuUnavailableError", base.ptr());
  (void)gpu;
}

}  // namespace strata::py
