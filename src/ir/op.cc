#include "strata/ir/op.h"

#include <array>

namespace strata {
namespace {

/// The reduction of each op kind (the reduction family of op_table.def), indexed by OpKind.
std::vector<std::optional<ReductionInfo>> reduction_rows() {
  std::vector<std::optional<ReductionInfo>> rows;
#define STRATA_OP(id, name, arity, cat, levels, alg, attrs) rows.emplace_back();
#include "strata/ir/op_table.def"
#define STRATA_REDUCTION(id, pre, comb, fin, acc) \
  rows[static_cast<int>(OpKind::id)] =            \
      ReductionInfo{Premap::pre, Combine::comb, Finalize::fin, OpKind::acc};
#include "strata/ir/op_table.def"
  return rows;
}

constexpr AttrSpec kScalarAttr{"scalar", "c", AttrField::Scalar, false, true, 0};
constexpr AttrSpec kDimAttr{"dim", "", AttrField::Dim, true, true, 0};

// The attribute sets named by the Attrs column of op_table.def.
constexpr std::array<AttrSpec, 1> kScalar{kScalarAttr};
constexpr std::array<AttrSpec, 2> kClamp{AttrSpec{"lo", "", AttrField::Scalar, false, true, 0},
                                         AttrSpec{"hi", "", AttrField::Scalar2, false, true, 0}};
constexpr std::array<AttrSpec, 2> kReduce{kDimAttr,
                                          AttrSpec{"to", "", AttrField::To, true, false, 1}};
constexpr std::array<AttrSpec, 2> kNorm{AttrSpec{"dim", "", AttrField::Dim, true, false, -1},
                                        AttrSpec{"eps", "", AttrField::Scalar, false, false, 0}};
constexpr std::array<AttrSpec, 1> kDim{kDimAttr};
constexpr std::array<AttrSpec, 3> kSlice{kDimAttr,
                                         AttrSpec{"start", "", AttrField::Start, true, true, 0},
                                         AttrSpec{"end", "", AttrField::End, true, true, 0}};
constexpr std::array<AttrSpec, 1> kEps{AttrSpec{"eps", "", AttrField::Scalar, false, false, 0}};
constexpr std::array<AttrSpec, 1> kTo{AttrSpec{"to", "", AttrField::To, true, true, 1}};

std::span<const AttrSpec> attr_set(AttrSet s) {
  switch (s) {
    case AttrSet::None:
      return {};
    case AttrSet::Scalar:
      return kScalar;
    case AttrSet::Clamp:
      return kClamp;
    case AttrSet::Reduce:
      return kReduce;
    case AttrSet::Norm:
      return kNorm;
    case AttrSet::Dim:
      return kDim;
    case AttrSet::Slice:
      return kSlice;
    case AttrSet::Eps:
      return kEps;
    case AttrSet::To:
      return kTo;
  }
  return {};
}

}  // namespace

const std::vector<OpInfo>& op_table() {
  static const std::vector<OpInfo> table = [] {
    std::vector<std::optional<ReductionInfo>> red = reduction_rows();
    std::vector<OpInfo> t = {
#define STRATA_OP(id, name, arity, cat, levels, alg, attrs)                                      \
  OpInfo{OpKind::id,   name,           arity,       Category::cat, static_cast<uint8_t>(levels), \
         Algebra::alg, AttrSet::attrs, std::nullopt},
#include "strata/ir/op_table.def"
    };
    for (size_t i = 0; i < t.size(); ++i) t[i].reduction = red[i];
    return t;
  }();
  return table;
}

std::optional<OpKind> parse_op_kind(std::string_view name) {
  for (const OpInfo& info : op_table())
    if (info.name == name) return info.kind;
  return std::nullopt;
}

std::span<const AttrSpec> attr_specs(OpKind k) {
  return attr_set(op_info(k).attrs);
}

double get_real_attr(const OpAttrs& a, AttrField f) {
  switch (f) {
    case AttrField::Scalar:
      return a.scalar;
    case AttrField::Scalar2:
      return a.scalar2;
    case AttrField::Dim:
    case AttrField::To:
    case AttrField::Start:
    case AttrField::End:
      return static_cast<double>(get_int_attr(a, f));
  }
  return 0;
}

void set_real_attr(OpAttrs& a, AttrField f, double v) {
  switch (f) {
    case AttrField::Scalar:
      a.scalar = v;
      return;
    case AttrField::Scalar2:
      a.scalar2 = v;
      return;
    case AttrField::Dim:
    case AttrField::To:
    case AttrField::Start:
    case AttrField::End:
      set_int_attr(a, f, static_cast<int64_t>(v));
      return;
  }
}

int64_t get_int_attr(const OpAttrs& a, AttrField f) {
  switch (f) {
    case AttrField::Dim:
      return a.dim;
    case AttrField::To:
      return a.to;
    case AttrField::Start:
      return a.start;
    case AttrField::End:
      return a.end;
    case AttrField::Scalar:
    case AttrField::Scalar2:
      return static_cast<int64_t>(get_real_attr(a, f));
  }
  return 0;
}

void set_int_attr(OpAttrs& a, AttrField f, int64_t v) {
  switch (f) {
    case AttrField::Dim:
      a.dim = static_cast<int>(v);
      return;
    case AttrField::To:
      a.to = v;
      return;
    case AttrField::Start:
      a.start = v;
      return;
    case AttrField::End:
      a.end = v;
      return;
    case AttrField::Scalar:
    case AttrField::Scalar2:
      set_real_attr(a, f, static_cast<double>(v));
      return;
  }
}

OpAttrs step_attrs(const ThreadStep& s) {
  OpAttrs a;
  a.scalar = s.scalar;
  a.scalar2 = s.scalar2;
  return a;
}

ThreadStep make_step(OpKind kind, std::array<int, 2> args, const OpAttrs& a) {
  return ThreadStep{kind, args, a.scalar, a.scalar2};
}

}  // namespace strata
