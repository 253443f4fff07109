// Static analysis of a μGraph for the finite-field verifier (docs/verifier.md).
//
// Every element of every tensor computes a formal expression over the graph inputs: field
// operations, exp, and applications of opaque (uninterpreted) functions. Written as
//     N / D,   N = Σ_{j<kn} P_j·ω^{E_j},   D = Σ_{l<kd} Q_l·ω^{F_l},
// with P_j, Q_l polynomials over Z_p in the inputs and the opaque results, and exponents E_j,
// F_l rational functions over Z_q, a tensor's Profile bounds, over all its elements: the degrees
// of the P (dn) and Q (dd), the term counts kn and kd, the degrees of the exponents' numerators
// and denominators (en, ed), and how many opaque applications the element depends on (sites)
// with a bound on their arguments' profiles (arg). The formal expressions have rational
// coefficients (scalars, 1/n of means); the profile also bounds their sizes (Coef), since a
// non-zero coefficient divisible by p (or an exponent coefficient divisible by q) would
// vanish in the fields: the bound of a comparison holds only while those sizes stay below p
// and q. Masks record along which index axes the
// denominator, the exponents, the opaque applications and the value may differ, so that a sum
// over an axis along which the denominator is the same keeps one denominator (Σ a_i/D =
// (Σ a_i)/D) instead of multiplying them.
//
// The same pass decides, per tensor, which field components later ops need (so the executor
// can skip them) and whether each exp is in the Lax fragment (its argument has no exp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "interp/value_domain.h"
#include "strata/ir/kernel_graph.h"
#include "strata/util/status.h"
#include "verify/content.h"

namespace strata::verify {

/// Sizes of integer coefficients: the value (or exponent) is κ·Ñ/D̃ with Ñ, D̃ polynomials with
/// integer coefficients (exponential terms ω^E count as monomials) and κ an exact rational
/// whose prime factors are below 2^60 (src/verify/content.h). hn and hd bound log2 of the ℓ1
/// norms (sums of absolute coefficients) of Ñ and D̃, so every coefficient of Ñ is below 2^hn.
struct Coef {
  double hn = 0, hd = 0;
  Content c;
};

/// Bounds on the formal value N/D of every element of a tensor (see the header comment).
struct Poly {
  double dn = 1, dd = 0;  ///< degrees of the numerator / denominator coefficient polynomials
  double kn = 1, kd = 1;  ///< numbers of exponential terms in the numerator / denominator
  double en = 0, ed = 0;  ///< degrees of the exponents' numerators / denominators (over Z_q)
  Coef coef;              ///< coefficient sizes of N and D
  Coef exp_coef;          ///< coefficient sizes of the exponents' numerators / denominators
  /// No exp in the value (outside opaque arguments): its q-component is meaningful.
  bool exp_free() const { return en == 0 && ed == 0; }
};

/// Index axes an element may vary along: padded dims 0–3, the for-loop iteration, grid x/y/z.
using AxisMask = uint16_t;

/// Opaque applications an element depends on, as a group that varies along the same axes: a
/// sum along an axis the group does not vary on shares the group's applications (count once),
/// while a sum along one it varies on may meet new ones in every term.
struct SiteGroup {
  double count = 0;   ///< at most this many distinct applications
  AxisMask vary = 0;  ///< they may differ along these axes
};

struct Profile {
  Poly v;
  std::vector<SiteGroup> sites;  ///< the opaque applications the value depends on
  Poly arg{0, 0, 1, 1, 0, 0, {}, {}};  ///< componentwise bound on those applications' arguments
  AxisMask val = 0;              ///< the value may differ along these axes
  AxisMask den = 0;              ///< the denominator D may differ along these axes
  AxisMask expo = 0;             ///< the exponents may differ along these axes

  /// Total opaque applications an element depends on (an upper bound).
  double site_count() const {
    double n = 0;
    for (const SiteGroup& g : sites) n += g.count;
    return n;
  }
};

struct GraphAnalysis {
  std::vector<Profile> kernel;              ///< per kernel tensor id
  std::vector<std::vector<Profile>> block;  ///< per kernel op id: per block tensor id
  interp::ExecHints hints;                  ///< components needed, Lax exps
};

/// Analyzes a complete graph. Fails only on thread graphs longer than 64 steps.
Result<GraphAnalysis> analyze_graph(const KernelGraph& g);

/// A bound on P[a and b agree on one random trial] for two elements with these profiles
/// whose formal values differ (Schwartz–Zippel over Z_p and Z_q plus Assumption E of
/// docs/verifier.md), not counting opaque-argument collisions. `e` is at most 1; when it is 1,
/// `limit` says which quantity gave no bound.
struct TrialBound {
  double e = 1;
  std::string limit;
};
TrialBound identity_test_bound(const Poly& a, const Poly& b);

/// The per-trial bound for comparing output `o` of graph A with output `o` of graph B:
/// identity_test_bound of the two outputs plus a union bound over colliding opaque arguments,
/// as log2 (≤ 0; 0 when no bound below 1 holds, with `limit` saying why). The bound for the
/// whole comparison is the maximum over outputs.
struct OutputBound {
  double log2 = 0;
  std::string limit;
};
OutputBound output_bound(const Profile& a, const Profile& b);

}  // namespace strata::verify
