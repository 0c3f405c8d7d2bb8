// The budgeted tier's schedule (budget.h), apart from RapidCheck and the clock.
#include "budget.h"

#include <gtest/gtest.h>

#include <set>

namespace flashcheck::properties {
namespace {

TEST(PropertyBudget, ParsesDurations) {
  double s = 0.0;
  ASSERT_TRUE(parse_budget("60", &s));
  EXPECT_EQ(s, 60.0);
  ASSERT_TRUE(parse_budget("60s", &s));
  EXPECT_EQ(s, 60.0);
  ASSERT_TRUE(parse_budget("1.5m", &s));
  EXPECT_EQ(s, 90.0);
  ASSERT_TRUE(parse_budget("2h", &s));
  EXPECT_EQ(s, 7200.0);
  for (const char* bad : {"", "0", "-5", "s", "60x", "1e999", "nan", "60 s"}) {
    EXPECT_FALSE(parse_budget(bad, &s)) << bad;
  }
}

TEST(PropertyBudget, TheLeastServedPropertyGoesNextAndSkippedOnesNever) {
  std::vector<BudgetEntry> e(3);
  e[0].seconds = 2.0;
  e[1].seconds = 1.0;
  e[2].seconds = 0.5;
  e[2].skipped = "needs GQA";
  EXPECT_EQ(next_entry(e), 1);
  e[1].seconds = 2.0;
  EXPECT_EQ(next_entry(e), 0);  // a tie goes to the first
  e[0].skipped = e[1].skipped = "x";
  EXPECT_EQ(next_entry(e), -1);
}

TEST(PropertyBudget, EqualSharesWhateverTheCostPerCase) {
  // Simulated clock: property i costs (i + 1)^2 ms per case; a 10 s budget in chunks of 50 ms.
  std::vector<BudgetEntry> e(4);
  double clock = 0.0;
  while (clock < 10.0) {
    const int i = next_entry(e);
    const int n = chunk_cases(e[static_cast<size_t>(i)], 0.05);
    const double cost = n * 1e-3 * (i + 1) * (i + 1);
    e[static_cast<size_t>(i)].seconds += cost;
    e[static_cast<size_t>(i)].cases += n;
    clock += cost;
  }
  for (const BudgetEntry& x : e) EXPECT_NEAR(x.seconds, 2.5, 0.1);
  EXPECT_GT(e[0].cases, 10 * e[3].cases);
}

TEST(PropertyBudget, ChunksStartSmallGrowAtMostTwofoldAndStayBounded) {
  BudgetEntry e;
  EXPECT_EQ(chunk_cases(e, 1.0), 4);
  e.cases = 10;
  e.seconds = 1.0;  // 0.1 s per case
  EXPECT_EQ(chunk_cases(e, 0.5), 5);
  EXPECT_EQ(chunk_cases(e, 0.01), 4);
  e.seconds = 1e-6;
  EXPECT_EQ(chunk_cases(e, 1.0), 20);  // cheap so far: twice the cases so far, no more
  e.cases = 1000;
  EXPECT_EQ(chunk_cases(e, 1.0), 256);
}

TEST(PropertyBudget, ChunkSeedsDifferByPropertyAndChunkAndRepeat) {
  std::set<uint64_t> seeds;
  for (const char* name : {"OracleAgreement", "MemorySafety"}) {
    for (int64_t i = 0; i < 100; ++i) seeds.insert(chunk_seed(7, name, i));
  }
  EXPECT_EQ(seeds.size(), 200u);
  EXPECT_EQ(chunk_seed(7, "OracleAgreement", 3), chunk_seed(7, "OracleAgreement", 3));
  EXPECT_NE(chunk_seed(7, "OracleAgreement", 3), chunk_seed(8, "OracleAgreement", 3));
}

}  // namespace
}  // namespace flashcheck::properties
