// kernel_gpu_test (gpu), Gpu_RowQuotient: the epilogue's fast quotient (common/row_quotient.cuh) returns div.rn's
// bits over its whole domain, and the domain check admits exactly what the argument covers. The first test is
// exhaustive over the significands (2^46 pairs, about a minute on an H100); with the reciprocal's scaling and the
// domain's exponent bounds it covers every quotient the fast path computes (docs/error-model.md).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "gpu_util.h"
#include "quotient_domain_cases.h"
#include "row_quotient_check.h"

namespace flashcheck {
namespace {

#if defined(FLASHCHECK_HAS_CUDA)

std::string failure(const test::QuotientCheck& c) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%llu of %llu differ from div.rn; one: x = %a, l = %a",
                static_cast<unsigned long long>(c.mismatches), static_cast<unsigned long long>(c.cases),
                static_cast<double>(c.x), static_cast<double>(c.l));
  return buf;
}

TEST(Gpu_RowQuotient, EverySignificandPairMatchesDivRn) {
  SKIP_WITHOUT_DEVICE();
  constexpr uint32_t kSignificands = 1u << 23;
  constexpr uint32_t kChunk = 1u << 18;  // x significands per launch
  uint64_t cases = 0;
  for (uint32_t x0 = 0; x0 < kSignificands; x0 += kChunk) {
    test::QuotientCheck c;
    const Status st = test::quotient_significand_pairs(x0, x0 + kChunk, &c);
    ASSERT_TRUE(st.ok()) << st.message();
    ASSERT_EQ(c.mismatches, 0u) << failure(c);
    cases += c.cases;
  }
  EXPECT_EQ(cases, uint64_t{1} << 46);
}

TEST(Gpu_RowQuotient, ReciprocalIsScaleFreeOverTheDomain) {
  SKIP_WITHOUT_DEVICE();
  test::QuotientCheck c;
  const Status st = test::quotient_reciprocal_scaling(&c);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(c.mismatches, 0u) << failure(c);
  EXPECT_EQ(c.cases, (uint64_t{1} << 23) * 120);
}

TEST(Gpu_RowQuotient, SampledDomainMatchesDivRn) {
  SKIP_WITHOUT_DEVICE();
  test::QuotientCheck c;
  const Status st = test::quotient_domain_samples(0x5eed, uint64_t{1} << 32, &c);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(c.mismatches, 0u) << failure(c);
}

TEST(Gpu_RowQuotient, DomainAdmitsExactlyWhatTheArgumentCovers) {
  SKIP_WITHOUT_DEVICE();
  for (const test::QuotientDomainCase& c : test::quotient_domain_cases()) {
    bool holds = !c.holds;
    const Status st = test::quotient_domain_holds(c.xs.data(), static_cast<int>(c.xs.size()), c.l, c.keys_empty, &holds);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(holds, c.holds) << "l = " << c.l << ", keys_empty = " << c.keys_empty << ", first x = "
                              << (c.xs.empty() ? 0.0f : c.xs[0]) << ", values = " << c.xs.size();
  }
}

#else

TEST(Gpu_RowQuotient, EverySignificandPairMatchesDivRn) { SKIP_WITHOUT_DEVICE(); }

#endif

}  // namespace
}  // namespace flashcheck
