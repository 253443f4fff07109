// The composed proof of a library form (library_form_proof.h).
#include "search/library_form_proof.h"

#include <algorithm>
#include <cmath>

namespace strata::search {

LibraryFormProver::LibraryFormProver(const LibraryForms& forms, const VerifyOptions& options)
    : forms_(forms), options_(options), checkers_(forms.regions.size()) {
  // Each part aims at the target less log2 of the parts a form can have, so that their sum
  // still meets it.
  if (forms.regions.size() > 1)
    options_.target_log2_bound -= std::ceil(std::log2(static_cast<double>(forms.regions.size())));
}

Result<VerifyResult> LibraryFormProver::prove(const LibraryForm& form) {
  VerifyResult v;
  v.equivalent = true;
  v.log2_bound = -INFINITY;
  double top = -INFINITY;
  std::vector<VerifyResult> parts;
  for (const LibraryForm::Part& part : form.parts) {
    if (part.region < 0 || part.region >= static_cast<int>(checkers_.size()))
      return make_error("library form: part of region " + std::to_string(part.region) +
                        ", which the forms do not have");
    std::unique_ptr<EquivalenceChecker>& checker = checkers_[part.region];
    if (!checker) {
      STRATA_ASSIGN_OR_RETURN(EquivalenceChecker made,
                              EquivalenceChecker::make(forms_.regions[part.region], options_));
      checker = std::make_unique<EquivalenceChecker>(std::move(made));
    }
    STRATA_ASSIGN_OR_RETURN(VerifyResult r, checker->verify(part.kernels));
    if (!r.equivalent || r.unknown) {
      r.detail = "region " + std::to_string(part.region + 1) + " of " +
                 std::to_string(forms_.regions.size()) + ": " + r.detail;
      return r;
    }
    top = std::max(top, r.log2_bound);
    parts.push_back(r);
  }
  double sum = 0;
  for (size_t k = 0; k < parts.size(); ++k) {
    sum += std::exp2(parts[k].log2_bound - top);
    v.trials = k == 0 ? parts[k].trials : std::min(v.trials, parts[k].trials);
  }
  if (!parts.empty()) v.log2_bound = top + std::log2(sum);
  v.detail =
      "composed: " + std::to_string(parts.size()) +
      " elementwise region(s), each proved equivalent to its part of the program; the "
      "matmuls are the program's" +
      (form.pushed_slices > 0 ? ", " + std::to_string(form.pushed_slices) +
                                      " slice(s) of a product pushed into its operand (exact)"
                                : std::string());
  return v;
}

}  // namespace strata::search
