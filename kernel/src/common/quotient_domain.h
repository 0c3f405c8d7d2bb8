// The domain in which fast_quotient() (common/row_quotient.cuh) is div.rn's result, and the check a thread runs
// over its numerators and divisors. Host and device: the CPU tier tests the check itself (kernel_model_test,
// QuotientDomain.*), the GPU tier the quotient over the domain (kernel_gpu_test, Gpu_RowQuotient.*).
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>

#include "common/host_device.h"

namespace flashcheck::detail {

inline constexpr int kQuotientDomainExponent = 60;
// |x| and l in [kQuotientDomainMin, kQuotientDomainMax): 2^-60 to 2^60.
inline constexpr float kQuotientDomainMax = static_cast<float>(uint64_t{1} << kQuotientDomainExponent);
inline constexpr float kQuotientDomainMin = 1.0f / kQuotientDomainMax;

// Whether every numerator and divisor a thread saw lies in the domain, one shift-add and one unsigned max per value:
// with the sign shifted out, |v| in [2^-60, 2^60) is an unsigned interval of the bit patterns, and shifted down by
// its lower end it is everything below one bound. Zeros and subnormals wrap around past it, infinities and NaN
// (above every finite pattern) stay past it; a negative divisor is caught by its sign.
struct QuotientDomain {
  static constexpr uint32_t kLowBits = std::bit_cast<uint32_t>(kQuotientDomainMin) << 1;
  static constexpr uint32_t kHighBits = std::bit_cast<uint32_t>(kQuotientDomainMax) << 1;
  uint32_t span = 0;  // max over values of (bits << 1) - kLowBits
  bool rows = true;   // no negative divisor, no row whose keys carried no weight (its O is 0 or NaN by rule)

  FLASHCHECK_HOST_DEVICE void numerator(float x) {
    span = std::max(span, (std::bit_cast<uint32_t>(x) << 1) - kLowBits);
  }
  FLASHCHECK_HOST_DEVICE void divisor(float l, bool keys_empty) {
    numerator(l);
    rows = rows && !signbit_f32(l) && !keys_empty;
  }
  FLASHCHECK_HOST_DEVICE bool holds() const { return rows && span < kHighBits - kLowBits; }
};

}  // namespace flashcheck::detail
