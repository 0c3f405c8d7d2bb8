// The host budget of a case (flashcheck/budget.h): the inputs' bytes as make_inputs allocates them, the terms of
// the checked rows as the oracle counts them, the working set growing with the longest row and the threads, the
// known sizes of long rows, and the memory cap's sources (a size with units, FLASHCHECK_MEMORY_CAP, the message
// that says how to raise it).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "flashcheck/budget.h"
#include "flashcheck/case.h"

namespace flashcheck {
namespace {

Case case_of(const std::string& line) {
  Case c;
  EXPECT_TRUE(parse_case(line, &c).ok()) << line;
  return c;
}

TEST(Budget, CountsInputsAsMakeInputsAllocatesThem) {
  // f32: Q 2*3*4 and K, V 5*4 elements each, 4 bytes encoded plus 8 decoded.
  const Budget b = estimate_budget(case_of("f32 b=1 hq=2 hkv=1 sq=3 sk=5 d=4 seed=1"));
  EXPECT_DOUBLE_EQ(b.input_bytes, (24 + 40) * (4 + 8));
  EXPECT_GT(b.output_bytes, 24 * (4 + 8));
  EXPECT_FALSE(b.is_large());
}

TEST(Budget, CountsTheTermsOfEveryCheckedRow) {
  // No mask: every row sees all 5 keys; 6 rows of d = 4.
  const Budget all = estimate_budget(case_of("f32 b=1 hq=2 hkv=1 sq=3 sk=5 d=4 seed=1"));
  EXPECT_EQ(all.rows_checked, 6);
  EXPECT_DOUBLE_EQ(all.oracle_terms, 6 * 5 * 4);
  EXPECT_EQ(all.longest_row, 5);
  // Causal, bottom-right aligned, sq = sk = 4: rows see 1, 2, 3, 4 keys.
  const Budget causal = estimate_budget(case_of("f32 b=1 hq=1 sq=4 sk=4 d=2 mask=causal-br seed=1"));
  EXPECT_DOUBLE_EQ(causal.oracle_terms, (1 + 2 + 3 + 4) * 2);
  // Above the full-check limit only sampled rows count: far fewer than all of them.
  const Budget sampled = estimate_budget(case_of("f32 b=1 hq=1 sq=100000 sk=100 d=8 seed=1"));
  EXPECT_LT(sampled.rows_checked, 1000);
  EXPECT_DOUBLE_EQ(sampled.oracle_terms, double(sampled.rows_checked) * 100 * 8);
}

TEST(Budget, WorkingSetGrowsWithTheLongestRowTimesTheThreads) {
  const Case c = case_of("f32 b=1 hq=1 sq=64 sk=100000 d=8 seed=1");
  BudgetOptions one, four;
  one.threads = 1;
  four.threads = 4;
  const Budget b1 = estimate_budget(c, one), b4 = estimate_budget(c, four);
  EXPECT_EQ(b4.threads, 4);
  // Each thread's working set, and the calling thread's fast-tier scratch once (six doubles and a flag per key).
  const double caller = 100000 * 49.0;
  EXPECT_DOUBLE_EQ(b4.oracle_bytes - caller, 4 * (b1.oracle_bytes - caller));
  EXPECT_GT(b1.oracle_bytes - caller, caller);
  // Threads beyond the checked rows do not count: one row, one thread.
  const Budget single = estimate_budget(case_of("f32 b=1 hq=1 sq=1 sk=1000 d=8 seed=1"), four);
  EXPECT_EQ(single.threads, 1);
}

TEST(Budget, LongRowsCostWhatWasMeasured) {
  // One fp32 row of 16M keys at d = 1 through flashcheck-repro: 1.53 GB at most (maximum resident set) and 6.3 s.
  const Budget row = estimate_budget(case_of("f32 b=1 hq=1 sq=1 sk=16777216 d=1 seed=1"));
  EXPECT_GT(row.total_bytes, 1.8e9);
  EXPECT_LT(row.total_bytes, 2.4e9);
  EXPECT_TRUE(row.is_large());
  // sq = sk = 10^6 at d = 64 on the host model: hours of model terms.
  BudgetOptions model;
  model.host_model = true;
  const Budget huge = estimate_budget(case_of("f32 b=1 hq=1 sq=1000000 sk=1000000 d=64 seed=1"), model);
  EXPECT_DOUBLE_EQ(huge.model_terms, 1e12 * 64 + 1e6 * 65);  // the visible keys' terms, and each row's walk
  // Rows of one key under 244 split-KV runs: the model walks each row once per run, whatever its keys.
  const Budget split = estimate_budget(case_of("f32 b=1 hq=1 sq=14127 sk=1 d=1 splits=244 seed=18"), model);
  EXPECT_DOUBLE_EQ(split.model_terms, 14127.0 + 14127.0 * 244 * 2);
  EXPECT_GT(huge.seconds, 3600);
  EXPECT_NE(huge.summary().find(" h "), std::string::npos) << huge.summary();
}

TEST(Budget, ParsesMemorySizes) {
  int64_t bytes = 0;
  ASSERT_TRUE(parse_memory_size("123", &bytes).ok());
  EXPECT_EQ(bytes, 123);
  ASSERT_TRUE(parse_memory_size("16G", &bytes).ok());
  EXPECT_EQ(bytes, int64_t{16} << 30);
  ASSERT_TRUE(parse_memory_size("512MiB", &bytes).ok());
  EXPECT_EQ(bytes, int64_t{512} << 20);
  ASSERT_TRUE(parse_memory_size("1.5g", &bytes).ok());
  EXPECT_EQ(bytes, int64_t{3} << 29);
  for (const char* bad : {"", "abc", "-1", "16X", "16GB2", " 16G", "1e30T"}) {
    EXPECT_FALSE(parse_memory_size(bad, &bytes).ok()) << bad;
  }
}

TEST(Budget, CapComesFromTheEnvironmentOrTheMachine) {
  int64_t cap = 0;
  unsetenv("FLASHCHECK_MEMORY_CAP");
  ASSERT_TRUE(memory_cap_from_environment(&cap).ok());
  EXPECT_EQ(cap, default_memory_cap());
  EXPECT_LE(cap, kDefaultMemoryCap);
  setenv("FLASHCHECK_MEMORY_CAP", "2G", 1);
  ASSERT_TRUE(memory_cap_from_environment(&cap).ok());
  EXPECT_EQ(cap, int64_t{2} << 30);
  setenv("FLASHCHECK_MEMORY_CAP", "lots", 1);
  const Status bad = memory_cap_from_environment(&cap);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("FLASHCHECK_MEMORY_CAP"), std::string::npos);
  unsetenv("FLASHCHECK_MEMORY_CAP");
}

TEST(Budget, OverTheCapIsRejectedWithHowToRaiseIt) {
  const Budget b = estimate_budget(case_of("f32 b=1 hq=1 sq=1 sk=16777216 d=1 seed=1"));
  EXPECT_TRUE(check_memory(b, int64_t{64} << 30).ok());
  const Status over = check_memory(b, int64_t{1} << 30);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(over.message().find("over the cap of 1.00 GiB"), std::string::npos) << over.message();
  // Sizes in the unit that shows them: a small cap is not "0.0 GiB".
  const Status small = check_memory(b, int64_t{2} << 20);
  EXPECT_NE(small.message().find("over the cap of 2.00 MiB"), std::string::npos) << small.message();
  EXPECT_EQ(small.message().find("0.0 GiB"), std::string::npos) << small.message();
  EXPECT_NE(over.message().find("--memory-cap"), std::string::npos);
  EXPECT_NE(over.message().find("FLASHCHECK_MEMORY_CAP"), std::string::npos);
}

// The estimate costs time in the sequences and one head's rows, never in the sizes a line names: a bound of 2^40
// query rows over a batch of three short sequences is refused on its buffers alone, at once.
TEST(Budget, StopsAtTheBuffersWhenTheyAloneAreOverTheCap) {
  BudgetOptions options;
  options.memory_cap = int64_t{1} << 30;
  const Budget b = estimate_budget(
      case_of("f16 b=1 hq=4 hkv=2 sq=1099511627776 sk=20 d=64 seqs=3:10 seed=9"), options);
  EXPECT_FALSE(b.rows_estimated);
  EXPECT_GT(b.total_bytes, 1e15);
  EXPECT_EQ(b.rows_checked, 0);
  const Status over = check_memory(b, options.memory_cap);
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.message().find("at least"), std::string::npos) << over.message();
  // Under the cap the rows are estimated, each sequence at its own length.
  const Budget fits = estimate_budget(case_of("f16 b=2 hq=4 hkv=2 sq=300 sk=20 d=64 seqs=3:10,2:20 seed=9"), options);
  EXPECT_TRUE(fits.rows_estimated);
  EXPECT_EQ(fits.rows_checked, 4 * (3 + 2));
}

// Drawing the inputs counts: millions of elements take seconds before any oracle term.
TEST(Budget, CountsTheTimeOfDrawingTheInputs) {
  const Budget b = estimate_budget(case_of("f32 b=1 hq=1 hkv=1 sq=1 sk=4000000 d=8 seed=1"));
  EXPECT_DOUBLE_EQ(b.elements, 8 + 2 * 4000000.0 * 8);
  EXPECT_GT(b.seconds, b.elements / kElementsPerSecond);
}

// A shape the kernel's contract refuses has nothing to estimate.
TEST(Budget, RefusedShapesAreNotEstimated) {
  for (const char* line : {"f32 b=1 hq=2 hkv=2147483648 sq=4 sk=4 d=4 seed=1", "f32 b=1 hq=1 sq=4 sk=4 d=1048576 seed=1",
                           "f16 b=1 hq=4 hkv=2 sq=9223372036854775807 sk=20 d=64 seqs=3:10 seed=9"}) {
    const Budget b = estimate_budget(case_of(line));
    EXPECT_EQ(b.total_bytes, 0.0) << line;
    EXPECT_FALSE(b.rows_estimated) << line;
  }
}

}  // namespace
}  // namespace flashcheck
