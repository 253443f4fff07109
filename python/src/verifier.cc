// The finite-field equivalence verifier (include/strata/verify/verifier.h).
#include <cmath>

#include <nanobind/stl/string.h>

#include "bindings.h"
#include "strata/verify/verifier.h"

namespace strata::py {

void bind_verifier(nb::module_& m) {
  m.def(
      "verify_equivalent",
      [](const KernelGraph& a, const KernelGraph& b, int trials, double target_log2_bound,
         uint64_t seed, int threads, bool reduce_instances) {
        VerifyOptions o;
        o.reduce_instances = reduce_instances;
        o.trials = trials;
        o.target_log2_bound = target_log2_bound;
        o.seed = seed;
        o.threads = threads;
        VerifyResult r;
        {
          nb::gil_scoped_release release;
          r = unwrap(verify_equivalent(a, b, o));
        }
        nb::dict d;
        d["equivalent"] = r.equivalent;
        d["trials"] = r.trials;
        d["log2_bound"] = std::isfinite(r.log2_bound) ? nb::cast(r.log2_bound) : nb::none();
        d["output"] = r.output;
        d["element"] = r.element;
        d["detail"] = r.detail;
        d["instance"] = r.instance;
        return d;
      },
      nb::arg("a"), nb::arg("b"), nb::arg("trials") = 0, nb::arg("target_log2_bound") = -60.0,
      nb::arg("seed") = 1, nb::arg("threads") = 0,
      nb::arg("reduce_instances") = true,
      "Decides whether two graphs compute the same outputs (docs/verifier.md).");
}

}  // namespace strata::py
