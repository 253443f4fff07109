// The float64 reference interpreter (include/strata/interp/interpreter.h) on NumPy arrays.
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "strata/interp/interpreter.h"

namespace strata::py {
namespace {

using InArray = nb::ndarray<const double, nb::c_contig, nb::device::cpu>;
using OutArray = nb::ndarray<nb::numpy, double>;

}  // namespace

void bind_interpreter(nb::module_& m) {
  m.def(
      "run_reference",
      [](const KernelGraph& g, const std::vector<InArray>& inputs, int threads) {
        std::vector<HostTensor> hosts;
        for (size_t i = 0; i < inputs.size(); ++i) {
          const InArray& a = inputs[i];
          std::vector<int64_t> dims;
          for (size_t d = 0; d < a.ndim(); ++d) dims.push_back(static_cast<int64_t>(a.shape(d)));
          auto shape = Shape::make(dims);
          if (!shape.ok())
            throw StrataError("input " + std::to_string(i) + ": " + shape.error().message);
          hosts.emplace_back(*shape, std::vector<double>(a.data(), a.data() + a.size()));
        }
        std::vector<HostTensor> outs;
        {
          nb::gil_scoped_release release;
          outs = unwrap(run_reference(g, hosts, ExecOptions{threads}));
        }
        nb::list result;
        for (HostTensor& t : outs) {
          auto* data = new std::vector<double>(std::move(t.data));
          nb::capsule owner(data,
                            [](void* p) noexcept { delete static_cast<std::vector<double>*>(p); });
          std::vector<size_t> shape;
          for (int64_t d : t.shape.dims()) shape.push_back(static_cast<size_t>(d));
          result.append(OutArray(data->data(), shape.size(), shape.data(), owner));
        }
        return result;
      },
      nb::arg("graph"), nb::arg("inputs"), nb::arg("threads") = 0,
      "Runs the graph in the float64 reference interpreter on C-contiguous float64 arrays (one "
      "per input, in order); returns the outputs as float64 arrays.");
}

}  // namespace strata::py
