// The epilogue's quotients O = x / l, many per row and one l: div_rn's value bit for bit, at three FMAs an element
// where the operands lie in a domain the caller checks (QuotientDomain), instead of div.rn's expansion per
// element (a reciprocal, two FMAs to refine it, a range check and a branch around a slow path).
//
// Why the result is div_rn's (docs/error-model.md, "The quotient O = acc / l"):
//  - the sequence is div.rn's own fast path with the reciprocal refined once per row: y0 = rcp.approx(l),
//    y = y0 + y0 (1 - l y0), then per element q0 = RN(x y), r = RN(x - l q0), q = RN(q0 + y r), every step one FMA;
//  - on x, l in [1, 2) it equals div.rn for every pair of significands: 2^46 pairs, checked exhaustively on the GPU
//    (kernel_gpu_test, Gpu_RowQuotient.*), together with y(l 2^j) = y(l) 2^-j for every significand and every
//    exponent j of the domain;
//  - in the domain (|x| and l in [2^-60, 2^60), l > 0, x finite and non-zero) every intermediate is a normal number or
//    an exact zero, so each rounding commutes with the powers of two that take (x, l) to [1, 2)^2, and so does
//    div.rn's result: the exhaustive check covers the whole domain. Zeros (whose sign the sequence loses), NaN,
//    infinities and the extreme exponents take div_rn itself (the check: common/quotient_domain.h).
#pragma once

#include <cuda_runtime.h>

#include "common/quotient_domain.h"

namespace flashcheck::detail {

// One row's divisor and its refined reciprocal.
struct RowQuotient {
  float l;
  float y;
};

__device__ __forceinline__ RowQuotient row_quotient(float l) {
  float y0;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y0) : "f"(l));
  return {l, __fmaf_rn(y0, __fmaf_rn(-l, y0, 1.0f), y0)};
}

// x / l rounded once, for x and l in the domain (QuotientDomain::holds()).
__device__ __forceinline__ float fast_quotient(float x, const RowQuotient& r) {
  const float q0 = __fmaf_rn(x, r.y, 0.0f);
  return __fmaf_rn(r.y, __fmaf_rn(-r.l, q0, x), q0);
}

}  // namespace flashcheck::detail
