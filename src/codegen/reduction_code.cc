#include "reduction_code.h"

#include "code_writer.h"

namespace strata::codegen {

ReductionCode::ReductionCode(OpKind kind, const OpAttrs& attrs) {
  const ReductionInfo* r = op_reduction(kind);
  if (r) {
    r_ = *r;
    if (r_.finalize == Finalize::RootMean) eps_ = attrs.scalar;
  } else {
    r_ = ReductionInfo{Premap::Identity, Combine::Add, Finalize::None, kind};
  }
}

std::string ReductionCode::identity() const {
  return is_max() ? "strata_rt::neg_inf()" : "0.0f";
}

std::string ReductionCode::premap(const std::string& v) const {
  return squares() ? v + " * " + v : v;
}

std::string ReductionCode::combine(const std::string& a, const std::string& b) const {
  return is_max() ? "fmaxf(" + a + ", " + b + ")" : a + " + " + b;
}

std::string ReductionCode::update(const std::string& acc, const std::string& v) const {
  return is_max() ? acc + " = fmaxf(" + acc + ", " + v + ");" : acc + " += " + v + ";";
}

std::string ReductionCode::team(int lanes, const std::string& v) const {
  return std::string("strata_rt::team_") + (is_max() ? "max" : "sum") + "<" +
         std::to_string(lanes) + ">(" + v + ")";
}

std::string ReductionCode::block(int threads, const std::string& v, const std::string& scratch,
                                 int barrier) const {
  return std::string("strata_rt::block_") + (is_max() ? "max" : "sum") + "<" +
         std::to_string(threads) + (barrier != 0 ? ", " + std::to_string(barrier) : "") + ">(" + v +
         ", " + scratch + ")";
}

std::string ReductionCode::atomic_update(const std::string& ptr, const std::string& v) const {
  return std::string("strata_rt::atomic_") + (is_max() ? "max" : "add") + "_shared(" + ptr + ", " +
         v + ");";
}

std::string ReductionCode::finalize(const std::string& v, int64_t count) const {
  return finalize(v, float_lit(static_cast<double>(count)));
}

std::string ReductionCode::finalize(const std::string& v, const std::string& n) const {
  switch (r_.finalize) {
    case Finalize::None:
      return v;
    case Finalize::Mean:
      return v + " / " + n;
    case Finalize::RootMean:
      return "sqrtf(" + v + " / " + n + (eps_ != 0.0 ? " + " + float_lit(eps_) : "") + ")";
  }
  return v;
}

std::string ReductionCode::inverse(const std::string& v, int64_t count) const {
  return inverse(v, float_lit(static_cast<double>(count)));
}

std::string ReductionCode::inverse(const std::string& v, const std::string& n) const {
  if (r_.finalize == Finalize::RootMean)
    return "strata_rt::inv_rms(" + v + ", " + n + (eps_ != 0.0 ? ", " + float_lit(eps_) : "") + ")";
  return "1.0f / " + paren(finalize(v, n));
}

}  // namespace strata::codegen
