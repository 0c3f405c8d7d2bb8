// kernel_model_test (cpu), QuotientDomain: the check that sends a warp's epilogue quotients through div_rn
// (common/quotient_domain.h) admits exactly the domain of docs/error-model.md §3.2, judged on the host; the GPU tier
// judges the same cases on the device and the quotient itself over the domain (Gpu_RowQuotient).
#include <gtest/gtest.h>

#include "common/quotient_domain.h"
#include "quotient_domain_cases.h"

namespace flashcheck {
namespace {

TEST(QuotientDomain, AdmitsExactlyWhatTheArgumentCovers) {
  for (const test::QuotientDomainCase& c : test::quotient_domain_cases()) {
    detail::QuotientDomain domain;
    domain.divisor(c.l, c.keys_empty);
    for (float x : c.xs) domain.numerator(x);
    EXPECT_EQ(domain.holds(), c.holds) << "l = " << c.l << ", keys_empty = " << c.keys_empty << ", first x = "
                                       << (c.xs.empty() ? 0.0f : c.xs[0]) << ", values = " << c.xs.size();
  }
}

}  // namespace
}  // namespace flashcheck
