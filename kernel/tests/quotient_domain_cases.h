// What QuotientDomain (common/quotient_domain.h) must admit and reject: one thread's numerators, its row's divisor
// and whether the row's keys carried no weight. Judged on the host in the CPU tier (kernel_model_test) and on the
// device in the GPU tier (kernel_gpu_test, Gpu_RowQuotient).
#pragma once

#include <cmath>
#include <limits>
#include <vector>

namespace flashcheck::test {

struct QuotientDomainCase {
  std::vector<float> xs;
  float l;
  bool keys_empty;
  bool holds;
};

inline std::vector<QuotientDomainCase> quotient_domain_cases() {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
  const float lo = 0x1p-60f, hi = 0x1p60f;  // the domain's bounds, as docs/error-model.md §3.2 states them
  const float below_hi = std::nextafter(hi, 0.0f), below_lo = std::nextafter(lo, 0.0f);
  return {
      {{1.0f, -3.5f, lo, -lo, below_hi, -below_hi}, 1.0f, false, true},
      {{1.0f}, lo, false, true},
      {{1.0f}, below_hi, false, true},
      {{}, 2.0f, false, true},
      {{1.0f}, 2.0f, true, false},  // a row whose keys carried no weight
      {{0.0f}, 1.0f, false, false},  // zeros keep their sign through div_rn only
      {{-0.0f}, 1.0f, false, false},
      {{below_lo}, 1.0f, false, false},
      {{-below_lo}, 1.0f, false, false},
      {{hi}, 1.0f, false, false},
      {{-hi}, 1.0f, false, false},
      {{kInf}, 1.0f, false, false},
      {{-kInf}, 1.0f, false, false},
      {{kNan}, 1.0f, false, false},
      {{-kNan}, 1.0f, false, false},
      {{1.0f, kNan, 2.0f}, 1.0f, false, false},
      {{0x1p-149f}, 1.0f, false, false},  // subnormal
      {{1.0f}, below_lo, false, false},
      {{1.0f}, hi, false, false},
      {{1.0f}, 0.0f, false, false},
      {{1.0f}, -0.0f, false, false},
      {{1.0f}, -1.0f, false, false},
      {{1.0f}, kInf, false, false},
      {{1.0f}, kNan, false, false},
  };
}

}  // namespace flashcheck::test
