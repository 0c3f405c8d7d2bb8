// Deterministic log and cos for the input generator: IEEE basic operations with fixed coefficients
// (exact hexadecimal literals), evaluated in a fixed order. Compiled with -ffp-contract=off so no
// compiler fuses a multiply-add; frexp/ldexp only move the exponent and are exact everywhere. libm's
// log/cos differ between libraries in the last bit, which would change a case's inputs between machines.
#include <cmath>
#include <cstdint>

#include "flashcheck/inputs.h"

namespace flashcheck::detmath {
namespace {

constexpr double kLn2 = 0x1.62e42fefa39efp-1;
constexpr double kSqrtHalf = 0x1.6a09e667f3bcdp-1;
constexpr double kTwoPi = 0x1.921fb54442d18p+2;

// 2 * atanh(s) = 2 * (s + s^3/3 + s^5/5 + ...): coefficients 1/(2k+1), k = 0..12. With |s| <= 0.1716
// (m in [sqrt(1/2), sqrt(2))) the first omitted term, s^27/27, is below 2^-70 relative.
constexpr double kAtanhCoeffs[] = {
    1.0,
    0x1.5555555555555p-2,  // 1/3
    0x1.999999999999ap-3,  // 1/5
    0x1.2492492492492p-3,  // 1/7
    0x1.c71c71c71c71cp-4,  // 1/9
    0x1.745d1745d1746p-4,  // 1/11
    0x1.3b13b13b13b14p-4,  // 1/13
    0x1.1111111111111p-4,  // 1/15
    0x1.e1e1e1e1e1e1ep-5,  // 1/17
    0x1.af286bca1af28p-5,  // 1/19
    0x1.8618618618618p-5,  // 1/21
    0x1.642c8590b2164p-5,  // 1/23
    0x1.47ae147ae147bp-5,  // 1/25
};

// Taylor coefficients on |x| <= pi/4; the first omitted terms (x^20/20!, x^21/21!) are below 2^-66.
constexpr double kCosCoeffs[] = {
    1.0,
    -0x1.0000000000000p-1,  // -1/2!
    0x1.5555555555555p-5,   // 1/4!
    -0x1.6c16c16c16c17p-10, // -1/6!
    0x1.a01a01a01a01ap-16,  // 1/8!
    -0x1.27e4fb7789f5cp-22, // -1/10!
    0x1.1eed8eff8d898p-29,  // 1/12!
    -0x1.93974a8c07c9dp-37, // -1/14!
    0x1.ae7f3e733b81fp-45,  // 1/16!
    -0x1.6827863b97d97p-53, // -1/18!
};
constexpr double kSinCoeffs[] = {
    1.0,
    -0x1.5555555555555p-3,  // -1/3!
    0x1.1111111111111p-7,   // 1/5!
    -0x1.a01a01a01a01ap-13, // -1/7!
    0x1.71de3a556c734p-19,  // 1/9!
    -0x1.ae64567f544e4p-26, // -1/11!
    0x1.6124613a86d09p-33,  // 1/13!
    -0x1.ae7f3e733b81fp-41, // -1/15!
    0x1.952c77030ad4ap-49,  // 1/17!
    -0x1.2f49b46814157p-57, // -1/19!
};

// sum_k coeffs[k] * x2^k by Horner's rule, highest degree first.
template <size_t N>
double horner(const double (&coeffs)[N], double x2) {
  double acc = coeffs[N - 1];
  for (size_t k = N - 1; k-- > 0;) acc = acc * x2 + coeffs[k];
  return acc;
}

}  // namespace

double log(double x) {
  int exponent = 0;
  double m = std::frexp(x, &exponent);  // x = m * 2^exponent, m in [1/2, 1)
  if (m < kSqrtHalf) {
    m = m * 2.0;  // exact
    --exponent;
  }
  // m in [sqrt(1/2), sqrt(2)): log m = 2 atanh(s) with s = (m-1)/(m+1); m - 1 is exact (Sterbenz).
  const double f = m - 1.0;
  const double s = f / (2.0 + f);
  const double log_m = 2.0 * s * horner(kAtanhCoeffs, s * s);
  return static_cast<double>(exponent) * kLn2 + log_m;
}

double cos_2pi(double turns) {
  // Nearest quarter turn n, remainder r in [-1/8, 1/8] turns. turns*8 and n*0.25 are exact, and so is
  // turns - n*0.25 (both are multiples of 2^-53 below 1 in magnitude).
  const int64_t octant = static_cast<int64_t>(turns * 8.0);
  const int64_t quarter = (octant + 1) / 2;
  const double r = turns - static_cast<double>(quarter) * 0.25;
  const double x = r * kTwoPi;  // |x| <= pi/4
  const double x2 = x * x;
  const double c = horner(kCosCoeffs, x2);
  const double s = x * horner(kSinCoeffs, x2);
  // cos(x + n*pi/2) by the quadrant n mod 4.
  switch (quarter & 3) {
    case 0:
      return c;
    case 1:
      return -s;
    case 2:
      return -c;
    default:
      return s;
  }
}

}  // namespace flashcheck::detmath
