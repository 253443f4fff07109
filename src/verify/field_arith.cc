#include "verify/field_arith.h"

namespace strata::verify {

FieldTrial FieldTrial::make(uint64_t seed, uint64_t trial, uint64_t attempt) {
  FieldTrial t;
  t.key = mix64(mix64(seed + kGolden) ^ mix64(trial * 0x100 + attempt + 1));
  // A uniform quadratic residue ≠ 1 is a uniform element of order q (p = 2q + 1).
  for (uint64_t c = 0;; ++c) {
    uint64_t g = ff::uniform<ff::ModP>(t.key ^ 0x0e6a, c);
    if (g == 0) continue;
    t.omega = ff::ModP::mul(g, g);
    if (t.omega != 1) break;
  }
  for (int i = 0; i < 8; ++i) {
    uint64_t base = ff::ModP::pow(t.omega, uint64_t{1} << (8 * i));
    uint64_t acc = 1;
    for (int d = 0; d < 256; ++d) {
      t.pow_table[i][d] = acc;
      acc = ff::ModP::mul(acc, base);
    }
  }
  return t;
}

}  // namespace strata::verify
