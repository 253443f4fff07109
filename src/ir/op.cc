#include "strata/op.h"

namespace strata {

const std::vector<OpInfo>& op_table() {
  static const std::vector<OpInfo> table = {
#define STRATA_OP(id, name, arity, cat, levels, alg) \
  OpInfo{OpKind::id, name, arity, Category::cat, static_cast<uint8_t>(levels), Algebra::alg},
#include "strata/op_table.def"
#undef STRATA_OP
  };
  return table;
}

std::optional<OpKind> parse_op_kind(std::string_view name) {
  for (const OpInfo& info : op_table())
    if (info.name == name) return info.kind;
  return std::nullopt;
}

}  // namespace strata
