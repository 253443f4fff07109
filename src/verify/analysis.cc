#include "verify/analysis.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "verify/field.h"

namespace strata::verify {
namespace {

constexpr AxisMask kIter = 1 << 4;
/// log2 of the largest integer coefficient size the bound accepts: just below log2 p (and
/// log2 q); the margin absorbs rounding in the computed sizes.
const double kLog2CoefLimitP = std::log2(static_cast<double>(ff::kP)) - 1e-6;
const double kLog2CoefLimitQ = std::log2(static_cast<double>(ff::kQ)) - 1e-6;
constexpr AxisMask kGridAxes = 0b111 << 5;
constexpr AxisMask kScratch = 1 << 8;  // the reduction axis of a matmul while it is summed
constexpr AxisMask grid_bit(int g) {
  return static_cast<AxisMask>(1 << (5 + g));
}
constexpr AxisMask dim_bit(int padded) {
  return static_cast<AxisMask>(1 << padded);
}

int pad_of(const Shape& s) {
  return 4 - s.rank();
}

// ---- rules on Coef: sizes of integer coefficients -----------------------------------------

/// log2(2^a + 2^b).
double log2_sum(double a, double b) {
  if (a < b) std::swap(a, b);
  if (!std::isfinite(a)) return a;
  return a + std::log2(1 + std::exp2(b - a));
}

/// Moves the odd parts of x's content, and its power of two above 2^e, into the integer
/// polynomials: κ·Ñ/D̃ = 2^e·(2^(κ.e−e)·u·Ñ)/(v·D̃). Requires e ≤ x.c.e.
void fold_to(Coef& x, int64_t e) {
  x.hn += x.c.log2_u() + static_cast<double>(x.c.e - e);
  x.hd += x.c.log2_v();
  x.c = Content{e, 1, 1};
}

/// Gives a and b the same content (unchanged if they already share one).
void unify(Coef& a, Coef& b) {
  if (a.c == b.c) return;
  int64_t e = std::min(a.c.e, b.c.e);
  fold_to(a, e);
  fold_to(b, e);
}

Coef coef_mul(Coef a, Coef b) {  // κa·κb·(Ña·Ñb)/(D̃a·D̃b)
  auto c = Content::product(a.c, b.c);
  if (!c) {
    fold_to(a, a.c.e);
    fold_to(b, b.c.e);
    c = Content{a.c.e + b.c.e, 1, 1};
  }
  return {a.hn + b.hn, a.hd + b.hd, *c};
}

Coef coef_inv(const Coef& a) {
  return {a.hd, a.hn, a.c.inverse()};
}

Coef coef_add(Coef a, Coef b) {  // κ·(Ña·D̃b + Ñb·D̃a)/(D̃a·D̃b) after unify
  unify(a, b);
  return {log2_sum(a.hn + b.hd, b.hn + a.hd), a.hd + b.hd, a.c};
}

Coef coef_max(Coef a, Coef b) {  // a bound valid for both
  unify(a, b);
  return {std::max(a.hn, b.hn), std::max(a.hd, b.hd), a.c};
}

/// Σ of g terms: over a common denominator (Σ Ñ_i)/D̃, else (Σ_i Ñ_i Π_{j≠i} D̃_j) / Π_j D̃_j.
Coef coef_sum(const Coef& x, double g, bool common_denominator) {
  if (common_denominator) return {x.hn + std::log2(g), x.hd, x.c};
  return {std::log2(g) + x.hn + (g - 1) * x.hd, g * x.hd, x.c};
}

/// x·k for an exact constant k.
Coef coef_scale(const Coef& x, const Content& k) {
  return coef_mul(x, Coef{0, 0, k});
}

// ---- rules on Poly: the value N/D under the field operations ----------------------------

Poly normalize(Poly p) {
  if (p.exp_free()) {
    p.kn = p.kd = 1;  // terms with exponent 0 merge into one
    p.exp_coef = Coef{};
  }
  return p;
}

/// Degrees and coefficient sizes of the sum of an exponent of `a` and an exponent of `b`
/// (rational functions over Z_q).
void exponent_sum(const Poly& a, const Poly& b, Poly& r) {
  if (a.exp_free()) {
    r.en = b.en;
    r.ed = b.ed;
    r.exp_coef = b.exp_coef;
  } else if (b.exp_free()) {
    r.en = a.en;
    r.ed = a.ed;
    r.exp_coef = a.exp_coef;
  } else {
    r.en = std::max(a.en + b.ed, b.en + a.ed);
    r.ed = a.ed + b.ed;
    r.exp_coef = coef_add(a.exp_coef, b.exp_coef);
  }
}

Poly pmul(const Poly& a, const Poly& b) {  // (Na·Nb) / (Da·Db)
  Poly r;
  r.dn = a.dn + b.dn;
  r.dd = a.dd + b.dd;
  r.kn = a.kn * b.kn;
  r.kd = a.kd * b.kd;
  r.coef = coef_mul(a.coef, b.coef);
  exponent_sum(a, b, r);
  return normalize(r);
}

Poly precip(Poly a) {  // D / N
  std::swap(a.dn, a.dd);
  std::swap(a.kn, a.kd);
  a.coef = coef_inv(a.coef);
  return a;
}

Poly padd(const Poly& a, const Poly& b) {  // (Na·Db + Nb·Da) / (Da·Db)
  Poly r;
  r.dn = std::max(a.dn + b.dd, b.dn + a.dd);
  r.dd = a.dd + b.dd;
  r.kn = a.kn * b.kd + b.kn * a.kd;
  r.kd = a.kd * b.kd;
  r.coef = coef_add(a.coef, b.coef);
  exponent_sum(a, b, r);
  return normalize(r);
}

Poly pmax(const Poly& a, const Poly& b) {
  Poly r;
  r.dn = std::max(a.dn, b.dn);
  r.dd = std::max(a.dd, b.dd);
  r.kn = std::max(a.kn, b.kn);
  r.kd = std::max(a.kd, b.kd);
  r.en = std::max(a.en, b.en);
  r.ed = std::max(a.ed, b.ed);
  r.coef = coef_max(a.coef, b.coef);
  r.exp_coef = a.exp_free()   ? b.exp_coef
               : b.exp_free() ? a.exp_coef
                              : coef_max(a.exp_coef, b.exp_coef);
  return r;
}

/// The value times the exact constant k (mul_scalar, the 1/n of a mean).
Poly pscale(Poly p, const Content& k) {
  p.coef = coef_scale(p.coef, k);
  return p;
}

/// The value times the constant c = mul_scalar's scalar. 0 leaves a zero polynomial (any
/// bound holds); a non-finite c has no rational value, so no coefficient bound holds.
Poly pscale_scalar(Poly p, double c) {
  if (!exact_constant(c)) {  // a symbolic constant: one more variable in every term
    p.dn += 1;
    return p;
  }
  if (auto k = Content::of_scalar(c)) return pscale(std::move(p), *k);
  return p;
}

/// The value divided by the positive integer n (mean, accum_mean_ld, accum_rms_ld).
Poly pscale_inverse(Poly p, int64_t n) {
  if (auto k = Content::of_int(n)) return pscale(std::move(p), k->inverse());
  p.coef.hd += std::log2(static_cast<double>(n));  // n itself joins the integer denominator
  return p;
}

/// The denominator may be more than the number 1 (an integer constant from folded contents
/// counts: elements of a concat may carry different ones).
bool has_denominator(const Poly& p) {
  return p.dd > 0 || p.kd > 1 || p.coef.hd > 0;
}

// ---- rules on Profile -------------------------------------------------------------------

/// Combines groups that vary along the same axes.
void merge_groups(std::vector<SiteGroup>& gs) {
  std::sort(gs.begin(), gs.end(),
            [](const SiteGroup& a, const SiteGroup& b) { return a.vary < b.vary; });
  std::vector<SiteGroup> out;
  for (const SiteGroup& g : gs) {
    if (g.count == 0) continue;
    if (!out.empty() && out.back().vary == g.vary)
      out.back().count += g.count;
    else
      out.push_back(g);
  }
  gs = std::move(out);
}

void add_sites(std::vector<SiteGroup>& into, const std::vector<SiteGroup>& from) {
  into.insert(into.end(), from.begin(), from.end());
  merge_groups(into);
}

/// Applies fn to every axis mask of p (value, denominator, exponents, site groups).
template <class Fn>
void for_masks(Profile& p, Fn&& fn) {
  fn(p.val);
  fn(p.den);
  fn(p.expo);
  for (SiteGroup& g : p.sites) fn(g.vary);
  merge_groups(p.sites);
}

/// Clears the dim bits of dims of extent 1 (an element cannot vary along them).
void clip(Profile& p, const Shape& s) {
  auto dims = padded_dims(s);
  AxisMask keep = static_cast<AxisMask>(~0);
  for (int d = 0; d < 4; ++d)
    if (dims[d] == 1) keep &= static_cast<AxisMask>(~dim_bit(d));
  for_masks(p, [&](AxisMask& m) { m &= keep; });
}

void clear(Profile& p, AxisMask bits) {
  for_masks(p, [&](AxisMask& m) { m &= static_cast<AxisMask>(~bits); });
}

Profile input_profile(const Shape& s) {
  Profile p;
  p.val = 0b1111;
  clip(p, s);
  return p;
}

/// Componentwise bound on the opaque arguments of a and b (an operand without sites has none).
Poly merged_arg(const Profile& a, const Profile& b) {
  if (a.sites.empty()) return b.arg;
  if (b.sites.empty()) return a.arg;
  return pmax(a.arg, b.arg);
}

/// The result of an opaque function applied to `args`: a fresh variable.
Profile opaque_result(std::initializer_list<const Profile*> args) {
  Profile r;
  bool any = false;
  auto take = [&](const Poly& p) {
    r.arg = any ? pmax(r.arg, p) : p;
    any = true;
  };
  for (const Profile* a : args) {
    add_sites(r.sites, a->sites);
    if (!a->sites.empty()) take(a->arg);
    take(a->v);
    r.val |= a->val;
  }
  add_sites(r.sites, {SiteGroup{1, r.val}});  // the new application varies with its argument
  return r;
}

/// Σ over the axes R (g terms in all) of elements with profile x.
Profile reduce_axes(const Profile& x, AxisMask R, double g) {
  Profile r = x;
  if (!(x.den & R) || !has_denominator(x.v)) {  // one common denominator
    if (!x.v.exp_free() && (x.expo & R)) r.v.kn = x.v.kn * g;
    r.v.coef = coef_sum(x.v.coef, g, true);
  } else {  // Σ_i N_i/D_i = (Σ_i N_i Π_{j≠i} D_j) / Π_j D_j
    r.v.kn = g * x.v.kn * std::pow(x.v.kd, g - 1);
    r.v.dn = x.v.dn + (g - 1) * x.v.dd;
    r.v.kd = std::pow(x.v.kd, g);
    r.v.dd = g * x.v.dd;
    r.v.coef = coef_sum(x.v.coef, g, false);
    if (!x.v.exp_free()) {  // the exponents of the products Π D_j are sums of g exponents
      r.v.en = x.v.en + (g - 1) * x.v.ed;
      r.v.ed = g * x.v.ed;
      r.v.exp_coef = coef_sum(x.v.exp_coef, g, false);
    }
  }
  for (SiteGroup& sg : r.sites)
    if (sg.vary & R) sg.count *= g;
  r.v = normalize(r.v);
  return r;
}

/// The profile of the constant c: degree 0, varying along no axis, coefficient c (exact when
/// it is a finite double; else folded into the integer polynomials as a bound).
Poly constant_poly(double c) {
  Poly k{0, 0, 1, 1, 0, 0, Coef{}, Coef{}};
  return pscale_scalar(k, c);  // a symbolic constant: a variable (degree 1)
}

/// `scalar` is the op's constant (mul_scalar, add_scalar).
Profile unary_profile(OpKind kind, const Profile& x, bool lax, double scalar = 0) {
  if (op_info(kind).algebra == Algebra::Opaque || (kind == OpKind::Exp && !lax))
    return opaque_result({&x});
  Profile r = x;
  switch (kind) {
    case OpKind::Exp:  // ω^x: coefficient 1, exponent x
      r.v = Poly{0, 0, 1, 1, std::max(1.0, x.v.dn), x.v.dd, Coef{}, x.v.coef};
      r.den = 0;
      r.expo = x.val;
      break;
    case OpKind::Square:
      r.v = pmul(x.v, x.v);
      break;
    case OpKind::MulScalar:  // a constant factor changes no degree
      r.v = pscale_scalar(x.v, scalar);
      break;
    case OpKind::AddScalar:  // N/D + c = (N + c·D)/D
      r.v = padd(x.v, constant_poly(scalar));
      break;
    case OpKind::Input:
    case OpKind::Output:
    case OpKind::Customized:
    case OpKind::Matmul:
    case OpKind::Sqrt:
    case OpKind::Silu:
    case OpKind::Gelu:
    case OpKind::Relu:
    case OpKind::Sigmoid:
    case OpKind::Tanh:
    case OpKind::Log:
    case OpKind::Clamp:
    case OpKind::Add:
    case OpKind::Sub:
    case OpKind::Mul:
    case OpKind::Div:
    case OpKind::Pow:
    case OpKind::Maximum:
    case OpKind::Minimum:
    case OpKind::Sum:
    case OpKind::Mean:
    case OpKind::Max:
    case OpKind::RmsNorm:
    case OpKind::Concat:
    case OpKind::Transpose:
    case OpKind::Slice:
    case OpKind::AllReduce:
    case OpKind::RunningMax:
    case OpKind::AccumSum:
    case OpKind::AccumSumLd:
    case OpKind::AccumMeanLd:
    case OpKind::AccumRmsLd:
    case OpKind::AccumSumToDimx:
    case OpKind::AccumMaxLd:
    case OpKind::AccumRescale:
    case OpKind::AccumRescaleLd:
    case OpKind::ThreadFused:
      break;  // not a Lax or Exp unary op
  }
  return r;
}

Profile binary_profile(OpKind kind, const Profile& a, const Profile& b) {
  if (op_info(kind).algebra == Algebra::Opaque) return opaque_result({&a, &b});
  Profile r;
  switch (kind) {
    case OpKind::Mul:
      r.v = pmul(a.v, b.v);
      break;
    case OpKind::Div:
      r.v = pmul(a.v, precip(b.v));
      break;
    case OpKind::Add:
    case OpKind::Sub:
      r.v = padd(a.v, b.v);
      break;
    case OpKind::Input:
    case OpKind::Output:
    case OpKind::Customized:
    case OpKind::Matmul:
    case OpKind::Exp:
    case OpKind::Square:
    case OpKind::Sqrt:
    case OpKind::Silu:
    case OpKind::Gelu:
    case OpKind::Relu:
    case OpKind::Sigmoid:
    case OpKind::Tanh:
    case OpKind::Log:
    case OpKind::MulScalar:
    case OpKind::AddScalar:
    case OpKind::Clamp:
    case OpKind::Pow:
    case OpKind::Maximum:
    case OpKind::Minimum:
    case OpKind::Sum:
    case OpKind::Mean:
    case OpKind::Max:
    case OpKind::RmsNorm:
    case OpKind::Concat:
    case OpKind::Transpose:
    case OpKind::Slice:
    case OpKind::AllReduce:
    case OpKind::RunningMax:
    case OpKind::AccumSum:
    case OpKind::AccumSumLd:
    case OpKind::AccumMeanLd:
    case OpKind::AccumRmsLd:
    case OpKind::AccumSumToDimx:
    case OpKind::AccumMaxLd:
    case OpKind::AccumRescale:
    case OpKind::AccumRescaleLd:
    case OpKind::ThreadFused:
      break;  // not a Lax binary op
  }
  r.sites = a.sites;
  add_sites(r.sites, b.sites);
  r.arg = merged_arg(a, b);
  r.val = a.val | b.val;
  r.expo = a.expo | b.expo;
  r.den = kind == OpKind::Div ? (a.den | b.val) : (a.den | b.den);
  return r;
}

Profile matmul_profile(const Profile& a, const Profile& b, int64_t k) {
  // Move each operand's reduction dim to the scratch axis, then sum over it.
  Profile pa = a, pb = b;
  for_masks(pa, [](AxisMask& m) {
    m = static_cast<AxisMask>((m & ~dim_bit(3)) | ((m & dim_bit(3)) ? kScratch : 0));
  });
  for_masks(pb, [](AxisMask& m) {
    m = static_cast<AxisMask>((m & ~dim_bit(2)) | ((m & dim_bit(2)) ? kScratch : 0));
  });
  Profile r = reduce_axes(binary_profile(OpKind::Mul, pa, pb), kScratch, static_cast<double>(k));
  clear(r, kScratch);
  return r;
}

/// A max over the axes R (g elements each): G(Σ F(x_j)) with F and G keyed functions
/// (docs/verifier.md): g applications of F per result, then one of G.
Profile max_profile(const Profile& x, AxisMask R, double g) {
  Profile f = reduce_axes(opaque_result({&x}), R, g);
  clear(f, R);
  return opaque_result({&f});
}

/// The root-mean-square statistic over the axes R (n elements each): the opaque sqrt of
/// mean(x²) + eps.
Profile rms_profile(const Profile& x, AxisMask R, int64_t n, double eps) {
  Profile ms = reduce_axes(unary_profile(OpKind::Square, x, true), R, static_cast<double>(n));
  ms.v = pscale_inverse(ms.v, n);  // mean(x²)
  if (eps != 0.0) ms.v = padd(ms.v, constant_poly(eps));
  clear(ms, R);
  return opaque_result({&ms});
}

Profile rms_norm_profile(const Profile& x, int d, int64_t n, double eps) {
  Profile s = rms_profile(x, dim_bit(d), n, eps);
  return binary_profile(OpKind::Div, x, s);
}

/// transpose: the last two dims swap places in every mask.
Profile transpose_profile(const Profile& x) {
  Profile r = x;
  for_masks(r, [](AxisMask& m) {
    AxisMask a = m & dim_bit(2), b = m & dim_bit(3);
    m = static_cast<AxisMask>((m & ~(dim_bit(2) | dim_bit(3))) | (a ? dim_bit(3) : 0) |
                              (b ? dim_bit(2) : 0));
  });
  return r;
}

Profile concat_profile(const Profile& a, const Profile& b, int d) {
  Profile r;
  r.v = pmax(a.v, b.v);
  r.sites = a.sites;  // an element comes from a or from b: count both, varying along d
  add_sites(r.sites, b.sites);
  for (SiteGroup& g : r.sites) g.vary |= dim_bit(d);
  merge_groups(r.sites);
  r.arg = merged_arg(a, b);
  r.val = a.val | b.val | dim_bit(d);
  r.den = a.den | b.den;
  r.expo = a.expo | b.expo;
  // The parts' denominators differ when either has one, or when their constants differed
  // (pmax moved them into the integer polynomials).
  if (has_denominator(a.v) || has_denominator(b.v) || !(a.v.coef.c == b.v.coef.c))
    r.den |= dim_bit(d);
  if (!a.v.exp_free() || !b.v.exp_free()) r.expo |= dim_bit(d);
  return r;
}

/// Profile of a compute op's output (categories Matmul … Concat); sets bit 0 of *lax for exp.
Profile compute_profile(OpKind kind, const OpAttrs& attrs, const std::vector<const Profile*>& in,
                        const std::vector<Shape>& in_shapes, const Shape& out_shape,
                        uint64_t* lax) {
  Profile r;
  switch (op_category(kind)) {
    case Category::Matmul:
      r = matmul_profile(*in[0], *in[1], in_shapes[0][in_shapes[0].rank() - 1]);
      break;
    case Category::Unary: {
      bool l = in[0]->v.exp_free();
      if (kind == OpKind::Exp && !l) *lax &= ~uint64_t{1};
      r = unary_profile(kind, *in[0], l, attrs.scalar);
      break;
    }
    case Category::Binary:
      r = binary_profile(kind, *in[0], *in[1]);
      break;
    case Category::Reduce: {
      int d = attrs.dim + pad_of(in_shapes[0]);
      int64_t group = in_shapes[0][attrs.dim] / attrs.to;
      const ReductionInfo& red = *op_reduction(kind);
      if (red.combine == Combine::Max) {
        r = max_profile(*in[0], dim_bit(d), static_cast<double>(group));
      } else {
        r = reduce_axes(*in[0], dim_bit(d), static_cast<double>(group));
        if (red.finalize == Finalize::Mean) r.v = pscale_inverse(r.v, group);
      }
      break;
    }
    case Category::Norm:
      r = rms_norm_profile(*in[0], attrs.dim + pad_of(in_shapes[0]), in_shapes[0][attrs.dim],
                           attrs.scalar);
      break;
    case Category::Concat:
      r = concat_profile(*in[0], *in[1], attrs.dim + pad_of(in_shapes[0]));
      break;
    case Category::Layout:
      r = kind == OpKind::Transpose ? transpose_profile(*in[0]) : *in[0];
      break;
    case Category::Collective:  // over one rank: the identity (several: expand_ranks first)
      r = *in[0];
      break;
    case Category::Source:
    case Category::Sink:
    case Category::Customized:
    case Category::Scan:
    case Category::Accum:
    case Category::Fused:
      break;  // handled by the callers
  }
  clip(r, out_shape);
  return r;
}

/// Profile of a thread graph's result; clears bit j of *lax for each non-Lax exp step.
Profile thread_graph_profile(const std::vector<ThreadStep>& chain,
                             const std::vector<const Profile*>& in, uint64_t* lax) {
  std::vector<Profile> steps;
  steps.reserve(chain.size());
  auto value = [&](int i) -> const Profile& {
    return i < static_cast<int>(in.size()) ? *in[i] : steps[i - in.size()];
  };
  for (size_t j = 0; j < chain.size(); ++j) {
    const ThreadStep& s = chain[j];
    if (op_info(s.kind).arity == 1) {
      bool l = value(s.args[0]).v.exp_free();
      if (s.kind == OpKind::Exp && !l) *lax &= ~(uint64_t{1} << j);
      steps.push_back(unary_profile(s.kind, value(s.args[0]), l, s.scalar));
    } else {
      steps.push_back(binary_profile(s.kind, value(s.args[0]), value(s.args[1])));
    }
  }
  return steps.back();
}

Profile tile_profile(const Profile& t, const OpAttrs& attrs, const Shape& kernel_shape,
                     const Shape& tile) {
  Profile r = t;
  int pad = pad_of(kernel_shape);
  for_masks(r, [&](AxisMask& m) {
    AxisMask add = 0;
    for (int g = 0; g < 3; ++g)
      if (attrs.imap[g] != kReplicate && (m & dim_bit(attrs.imap[g] + pad))) add |= grid_bit(g);
    if (attrs.fmap != kReplicate && (m & dim_bit(attrs.fmap + pad))) add |= kIter;
    m |= add;
  });
  clip(r, tile);
  return r;
}

/// The running max of a loop tile: a max over the iterations so far and the last dim; it
/// varies with the iteration.
Profile scan_profile(const Profile& x, const Shape& tile, int forloop, const Shape& out_shape) {
  double n = static_cast<double>(tile[tile.rank() - 1]);
  Profile r = max_profile(x, kIter | dim_bit(3), forloop * n);
  for_masks(r, [](AxisMask& m) { m |= kIter; });
  clip(r, out_shape);
  return r;
}

Profile accum_profile(OpKind kind, const OpAttrs& attrs, const std::vector<const Profile*>& in,
                      const Shape& tile, int forloop, const Shape& out_shape) {
  const Profile& x = *in[0];
  double F = forloop;
  int pad = pad_of(tile);
  double n = static_cast<double>(tile[tile.rank() - 1]);
  int64_t count = int64_t{forloop} * tile[tile.rank() - 1];  // what the mean ones divide by
  Profile r;
  switch (kind) {
    case OpKind::AccumSum:
      if (attrs.fmap == kReplicate) {
        r = reduce_axes(x, kIter, F);
      } else {
        r = x;
        for_masks(r, [&](AxisMask& m) {
          if (m & kIter) m |= dim_bit(attrs.fmap + pad);
        });
      }
      break;
    case OpKind::AccumRmsLd:
      r = rms_profile(x, kIter | dim_bit(3), count, attrs.scalar);
      break;
    case OpKind::AccumMaxLd:
      r = max_profile(x, kIter | dim_bit(3), F * n);
      break;
    case OpKind::AccumSumToDimx:
      r = reduce_axes(x, kIter | dim_bit(3), F * (n / static_cast<double>(attrs.to)));
      break;
    case OpKind::AccumSumLd:
    case OpKind::AccumMeanLd:
      r = reduce_axes(x, kIter | dim_bit(3), F * n);
      if (kind == OpKind::AccumMeanLd) r.v = pscale_inverse(r.v, count);
      break;
    case OpKind::AccumRescale:
    case OpKind::AccumRescaleLd: {
      // Σ_i y_i · exp(m_i − m_F): each term is y times an exponential of shifts (opaque
      // values varying with the iteration).
      Profile shift = binary_profile(OpKind::Sub, *in[1], *in[1]);
      Profile factor = unary_profile(OpKind::Exp, shift, shift.v.exp_free());
      Profile term = binary_profile(OpKind::Mul, x, factor);
      const bool ld = kind == OpKind::AccumRescaleLd;
      r = reduce_axes(term, ld ? (kIter | dim_bit(3)) : kIter, ld ? F * n : F);
      break;
    }
    case OpKind::Input:
    case OpKind::Output:
    case OpKind::Customized:
    case OpKind::Matmul:
    case OpKind::Exp:
    case OpKind::Square:
    case OpKind::Sqrt:
    case OpKind::Silu:
    case OpKind::Gelu:
    case OpKind::Relu:
    case OpKind::Sigmoid:
    case OpKind::Tanh:
    case OpKind::Log:
    case OpKind::MulScalar:
    case OpKind::AddScalar:
    case OpKind::Clamp:
    case OpKind::Add:
    case OpKind::Sub:
    case OpKind::Mul:
    case OpKind::Div:
    case OpKind::Pow:
    case OpKind::Maximum:
    case OpKind::Minimum:
    case OpKind::Sum:
    case OpKind::Mean:
    case OpKind::Max:
    case OpKind::RmsNorm:
    case OpKind::Concat:
    case OpKind::Transpose:
    case OpKind::Slice:
    case OpKind::AllReduce:
    case OpKind::RunningMax:
    case OpKind::ThreadFused:
      break;  // not an accumulator
  }
  clear(r, kIter);
  clip(r, out_shape);
  return r;
}

Profile saved_profile(const Profile& tile, const GridMap& omap, Dim3 grid, const Shape& shape) {
  Profile r = tile;
  int pad = pad_of(shape);
  for_masks(r, [&](AxisMask& m) {
    for (int g = 0; g < 3; ++g)
      if (grid[g] > 1 && (m & grid_bit(g))) m |= dim_bit(omap[g] + pad);
    m &= static_cast<AxisMask>(~(kIter | kGridAxes));
  });
  clip(r, shape);
  return r;
}

// ---- which components are needed (backward) ----------------------------------------------

struct Need {
  bool p = false, q = false;
};

/// Adds to `in` what an op of this kind needs from its input number `index`, given its output
/// needs `out`.
void need_input(OpKind kind, bool exp_lax, Need out, Need& in, int index = 0) {
  bool any = out.p || out.q;
  Algebra alg = op_info(kind).algebra;
  if ((alg == Algebra::Opaque && kind != OpKind::RmsNorm) || alg == Algebra::Max) {
    in.p |= any;  // keyed on the argument's p-component (also accum_rms_ld's sqrt)
  } else if (kind == OpKind::AccumRescale || kind == OpKind::AccumRescaleLd) {
    if (index == 1) {  // the shift: read by ω^(m_prev − m), i.e. its q-component
      in.q |= out.p;
    } else {
      in.p |= out.p;
      in.q |= out.q;
    }
  } else if (kind == OpKind::Exp) {
    if (exp_lax)
      in.q |= out.p;  // ω^b reads the q-component
    else
      in.p |= any;
  } else if (kind == OpKind::RmsNorm) {
    in.p |= any;  // x itself, and the key of the sqrt
    in.q |= out.q;
  } else {  // Lax: each component from the same component
    in.p |= out.p;
    in.q |= out.q;
  }
}

/// Backward pass over a thread graph: inputs' needs and per-step need bits in `h`.
void thread_graph_needs(const std::vector<ThreadStep>& chain, Need out, std::vector<Need>& in,
                        interp::ValueHints& h) {
  size_t n_in = in.size();
  std::vector<Need> steps(chain.size());
  steps.back() = out;
  h.step_need_p = h.step_need_q = 0;
  for (int j = static_cast<int>(chain.size()) - 1; j >= 0; --j) {
    const ThreadStep& s = chain[j];
    if (steps[j].p) h.step_need_p |= uint64_t{1} << j;
    if (steps[j].q) h.step_need_q |= uint64_t{1} << j;
    for (int a = 0; a < op_info(s.kind).arity; ++a) {
      int v = s.args[a];
      Need& target = v < static_cast<int>(n_in) ? in[v] : steps[v - n_in];
      need_input(s.kind, (h.exp_lax >> j) & 1, steps[j], target);
    }
  }
}

}  // namespace

Result<GraphAnalysis> analyze_graph(const KernelGraph& g) {
  STRATA_RETURN_IF_ERROR(g.check_complete());
  GraphAnalysis an;
  const size_t nt = g.tensors().size(), nops = g.ops().size();
  an.kernel.resize(nt);
  an.block.resize(nops);
  an.hints.kernel.resize(nt);
  an.hints.block.resize(nops);

  for (size_t i = 0; i < nops; ++i) {
    const KernelOp& op = g.op(static_cast<int>(i));
    if (op.kind == OpKind::Input) {
      an.kernel[op.outputs[0]] = input_profile(g.tensor(op.outputs[0]).shape);
      continue;
    }
    if (op.kind != OpKind::Customized) {
      std::vector<const Profile*> in;
      std::vector<Shape> shapes;
      for (int t : op.inputs) {
        in.push_back(&an.kernel[t]);
        shapes.push_back(g.tensor(t).shape);
      }
      int t = op.outputs[0];
      an.kernel[t] = compute_profile(op.kind, op.attrs, in, shapes, g.tensor(t).shape,
                                     &an.hints.kernel[t].exp_lax);
      continue;
    }
    const BlockGraph& bg = *op.body;
    std::vector<Profile>& bp = an.block[i];
    std::vector<interp::ValueHints>& bh = an.hints.block[i];
    bp.resize(bg.tensors().size());
    bh.resize(bg.tensors().size());
    for (const BlockOp& bop : bg.ops()) {
      if (bop.kind == OpKind::Output) continue;
      const Shape& shape = bg.tensor(bop.output).shape;
      std::vector<const Profile*> in;
      std::vector<Shape> shapes;
      for (int t : bop.inputs) {
        in.push_back(&bp[t]);
        shapes.push_back(bg.tensor(t).shape);
      }
      Profile& out = bp[bop.output];
      if (bop.kind == OpKind::Input) {
        int kt = op.inputs[bop.attrs.input_index];
        out = tile_profile(an.kernel[kt], bop.attrs, g.tensor(kt).shape, shape);
      } else if (op_category(bop.kind) == Category::Accum) {
        out = accum_profile(bop.kind, bop.attrs, in, shapes[0], bg.forloop(), shape);
      } else if (op_category(bop.kind) == Category::Scan) {
        out = scan_profile(*in[0], shapes[0], bg.forloop(), shape);
      } else if (bop.kind == OpKind::ThreadFused) {
        if (bop.chain.size() > 64)
          return make_error("the verifier supports thread graphs of at most 64 steps; one has " +
                            std::to_string(bop.chain.size()));
        out = thread_graph_profile(bop.chain, in, &bh[bop.output].exp_lax);
        clip(out, shape);
      } else {
        out = compute_profile(bop.kind, bop.attrs, in, shapes, shape, &bh[bop.output].exp_lax);
      }
    }
    for (int o = 0; o < bg.num_outputs(); ++o) {
      const BlockOp& saver = bg.op(bg.output_op(o));
      int kt = op.outputs[o];
      an.kernel[kt] =
          saved_profile(bp[saver.inputs[0]], saver.attrs.omap, bg.grid(), g.tensor(kt).shape);
    }
  }

  // Backward: which components each tensor's readers need.
  std::vector<Need> kneed(nt);
  for (int t : g.outputs()) kneed[t].p = true;
  for (int i = static_cast<int>(nops) - 1; i >= 0; --i) {
    const KernelOp& op = g.op(i);
    if (op.kind == OpKind::Input) continue;
    if (op.kind != OpKind::Customized) {
      int t = op.outputs[0];
      for (int in : op.inputs)
        need_input(op.kind, an.hints.kernel[t].exp_lax & 1, kneed[t], kneed[in]);
      continue;
    }
    const BlockGraph& bg = *op.body;
    std::vector<interp::ValueHints>& bh = an.hints.block[i];
    std::vector<Need> bneed(bg.tensors().size());
    for (int o = 0; o < bg.num_outputs(); ++o) {
      Need& n = bneed[bg.op(bg.output_op(o)).inputs[0]];
      n.p |= kneed[op.outputs[o]].p;
      n.q |= kneed[op.outputs[o]].q;
    }
    for (int j = static_cast<int>(bg.ops().size()) - 1; j >= 0; --j) {
      const BlockOp& bop = bg.op(j);
      if (bop.kind == OpKind::Output) continue;
      Need out = bneed[bop.output];
      bh[bop.output].need_p = out.p;
      bh[bop.output].need_q = out.q;
      if (bop.kind == OpKind::Input) {
        Need& k = kneed[op.inputs[bop.attrs.input_index]];
        k.p |= out.p;
        k.q |= out.q;
      } else if (bop.kind == OpKind::ThreadFused) {
        std::vector<Need> in(bop.inputs.size());
        thread_graph_needs(bop.chain, out, in, bh[bop.output]);
        for (size_t a = 0; a < in.size(); ++a) {
          bneed[bop.inputs[a]].p |= in[a].p;
          bneed[bop.inputs[a]].q |= in[a].q;
        }
      } else {
        for (size_t a = 0; a < bop.inputs.size(); ++a)
          need_input(bop.kind, bh[bop.output].exp_lax & 1, out, bneed[bop.inputs[a]],
                     static_cast<int>(a));
      }
    }
  }
  for (size_t t = 0; t < nt; ++t) {
    an.hints.kernel[t].need_p = kneed[t].p;
    an.hints.kernel[t].need_q = kneed[t].q;
  }
  return an;
}

TrialBound identity_test_bound(const Poly& a, const Poly& b) {
  const double p = static_cast<double>(ff::kP), q = static_cast<double>(ff::kQ);
  char buf[160];
  Poly w = padd(a, b);  // the numerator of a − b
  // The proof needs W ≢ 0 mod p: a non-zero integer coefficient below p in absolute value is
  // not divisible by p. Likewise every difference of two exponents must stay non-zero mod q:
  // its numerator Ñ_t·D̃_* − Ñ_*·D̃_t has coefficients below 2^(hn + hd + 1).
  if (!(w.coef.hn < kLog2CoefLimitP)) {
    std::snprintf(buf, sizeof buf,
                  "the integer coefficients of the difference may reach 2^%.1f, so p ≈ 2^62 "
                  "could divide them",
                  w.coef.hn);
    return {1, buf};
  }
  double e = w.dn / p;
  if (!w.exp_free()) {
    double h = w.exp_coef.hn + w.exp_coef.hd + 1;
    if (!(h < kLog2CoefLimitQ)) {
      std::snprintf(buf, sizeof buf,
                    "the integer coefficients of differences of exponents may reach 2^%.1f, "
                    "so q ≈ 2^61 could divide them",
                    h);
      return {1, buf};
    }
    double K = w.kn, g = w.en + w.ed;
    e += (K - 1) * g / q + (K - 1) / (q - 1);
  }
  if (!(e < 1)) {
    if (w.exp_free())
      std::snprintf(buf, sizeof buf, "the difference has degree up to %.3g, not below p", w.dn);
    else
      std::snprintf(buf, sizeof buf,
                    "the difference has degree up to %.3g and %.3g exponential terms with "
                    "exponents of degree %.3g",
                    w.dn, w.kn, w.en + w.ed);
    return {1, buf};
  }
  return {e, ""};
}

OutputBound output_bound(const Profile& a, const Profile& b) {
  TrialBound t = identity_test_bound(a.v, b.v);
  double e = t.e;
  std::string limit = t.limit;
  double S = a.site_count() + b.site_count();
  if (S >= 2 && limit.empty()) {
    Poly arg = merged_arg(a, b);
    TrialBound c = identity_test_bound(arg, arg);
    e += S * (S - 1) / 2 * c.e;
    if (!c.limit.empty())
      limit = "arguments of opaque functions: " + c.limit;
    else if (!(e < 1))
      limit = "collisions among " + std::to_string(static_cast<long long>(S)) +
              " opaque applications bound one trial only by 1";
  }
  if (!(e < 1)) return {0, limit.empty() ? "no bound below 1" : limit};
  return {e <= 0 ? -1000.0 : std::max(-1000.0, std::log2(e)), ""};
}

}  // namespace strata::verify
