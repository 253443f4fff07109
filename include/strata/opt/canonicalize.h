// The canonical form of a program: exact rewrites into forms the search fuses well
// (docs/search.md, "Canonicalization").
//
// Programs written by hand or captured from PyTorch spell some computations in ways the
// search does not fuse, although an equivalent form exists that it fuses: RMSNorm written
// out as x · (1 / sqrt(mean(x²) + eps)), or one matmul of a fused QKV weight followed by
// slices of its result. canonicalize_program() rewrites such patterns by a fixed list of
// rules (canonical_rule_names) until none applies. Every rule is an identity of real
// arithmetic for all inputs (no input value is assumed), rewrites only patterns whose
// intermediate values nobody else reads (so no value is computed twice), and keeps the
// program's interface: the same inputs (order, names, shapes, dtypes; every input is still
// read if it was) and the same outputs (order, shapes, dtypes, names).
//
// Some rules make a form that fuses better for some programs and searches worse for others
// (docs/search.md, "Alternative forms"). These *alternative-form rules* are not part of the
// canonical form; alternative_forms() returns the forms they make, which the search enumerates
// beside the canonical form.
#pragma once

#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "strata/ir/kernel_graph.h"
#include "strata/util/status.h"

namespace strata {

/// A program's canonical form and the rewrites that led to it.
struct CanonicalProgram {
  KernelGraph program;                  ///< the input itself when no rule applied
  std::map<std::string, int> rewrites;  ///< rule name → times applied
  bool changed() const { return !rewrites.empty(); }
};

/// Rewrites `program` (a complete kernel graph of predefined ops) by the canonical rules, and
/// the alternative-form rules named in `alternatives`, until none applies. Tensors the rewrites
/// leave unread disappear; tensors of the input that were already unread are kept. Errors: a
/// name in `alternatives` that is no alternative-form rule, a program with customized ops, or
/// (a bug) a rewritten graph that the checking constructors reject or whose interface differs
/// from the input's.
Result<CanonicalProgram> canonicalize_program(const KernelGraph& program,
                                              std::span<const std::string_view> alternatives = {});

/// The most alternative forms alternative_forms() returns.
inline constexpr int kMaxAlternativeForms = 2;

/// A form of a program besides its canonical form: the canonical rules and one alternative-form
/// rule applied until none applies (or the error that made).
struct AlternativeForm {
  std::string name;  ///< the alternative-form rule
  Result<CanonicalProgram> form;
};

/// The alternative forms of `program`, at most kMaxAlternativeForms, in the order of the rule
/// table: one per alternative-form rule that fires on it (the rule appears in the form's
/// rewrites) and whose form differs from the canonical form and from the forms before it. A
/// rule whose canonicalization fails gives an entry with the error (the search skips it with a
/// note). Empty when no such rule fires, or when the canonical form itself fails.
std::vector<AlternativeForm> alternative_forms(const KernelGraph& program);

/// Checks the interface canonicalize_program promises: `canonical` has the inputs of `program`
/// (number, order, names, shapes, dtypes), reads every input `program` reads, and has its
/// outputs (number, order, shapes, dtypes). The error names the first difference.
Status check_canonical_interface(const KernelGraph& program, const KernelGraph& canonical);

/// The rules, in the order they are tried at each tensor (the names of `rewrites`), the
/// alternative-form rules among them.
std::vector<std::string_view> canonical_rule_names();

/// The alternative-form rules, in table order (the names alternative_forms() gives its forms).
std::vector<std::string_view> alternative_rule_names();

}  // namespace strata
