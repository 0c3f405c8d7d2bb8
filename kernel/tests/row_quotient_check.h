// Device checks of fast_quotient() (common/row_quotient.cuh) against div.rn, for kernel_gpu_test
// (Gpu_RowQuotient.*). Each returns how many cases it ran and how many differed from div.rn in any bit, with the
// first (x, l) that did.
#pragma once

#include <cstdint>

#include "flashcheck/attention.h"

namespace flashcheck::test {

struct QuotientCheck {
  uint64_t cases = 0;
  uint64_t mismatches = 0;
  float x = 0.0f;  // a failing case (mismatches > 0)
  float l = 0.0f;
};

// Every pair of significands, x and l in [1, 2): the x significands [x_begin, x_end) of 2^23 against all 2^23 of l.
Status quotient_significand_pairs(uint32_t x_begin, uint32_t x_end, QuotientCheck* out);
// The refined reciprocal is scale-free over the domain: y(l 2^j) = y(l) 2^-j for every significand of l and every
// j with l 2^j in [2^-60, 2^60).
Status quotient_reciprocal_scaling(QuotientCheck* out);
// `count` pairs drawn across the whole domain (counter-based, keyed by seed; exponents of x and l uniform over
// [-60, 59], either sign of x), the domain's edges among them.
Status quotient_domain_samples(uint64_t seed, uint64_t count, QuotientCheck* out);
// QuotientDomain's verdict on one thread's values: {x..., l} with keys_empty, as the epilogue feeds it.
Status quotient_domain_holds(const float* xs, int n, float l, bool keys_empty, bool* holds);

}  // namespace flashcheck::test
