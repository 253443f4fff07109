#include "strata/opt/output_placement.h"

#include "strata/opt/storage_types.h"

namespace strata {

OutputPlacement plan_output_placement(const KernelGraph& g,
                                      const std::vector<std::optional<KernelView>>& views,
                                      bool f32_intermediates) {
  OutputPlacement p;
  p.stored = storage_types(g, views, f32_intermediates);
  p.routes = plan_output_routes(g, views, p.stored);
  p.packed = plan_packed_outputs(g, views, p.routes, p.stored);
  return p;
}

}  // namespace strata
