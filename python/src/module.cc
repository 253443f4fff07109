// The extension module strata._core: the C++ core behind the Python package (docs/python.md).
#include "bindings.h"

NB_MODULE(_core, m) {
  using namespace strata::py;
  m.doc() = "strata's C++ core: programs, interpreter, verifier, search, GPU runtime";
  m.attr("__version__") = STRATA_VERSION;
  // Graphs and kernels live in module-level caches until the interpreter exits.
  nanobind::set_leak_warnings(false);
  bind_errors(m);
  bind_ops(m);
  bind_graph(m);
  bind_interpreter(m);
  bind_verifier(m);
  bind_search(m);
  bind_gpu(m);
}
