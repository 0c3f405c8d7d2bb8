// Sharding of property runs (flashcheck/shard.h): for every shard count up to 9 and case totals from 0 to the
// GPU tier's 15,000, the shards' ranges are disjoint and cover every case exactly once, the shares differ by
// at most one, no two shards share a seed, and the plan is the same every time; 0/1 is the unsharded run.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "flashcheck/shard.h"

namespace flashcheck {
namespace {

TEST(Shard, ParsesIndexOverCount) {
  Shard s;
  ASSERT_TRUE(parse_shard("0/1", &s).ok());
  EXPECT_EQ(s.index, 0);
  EXPECT_EQ(s.count, 1);
  ASSERT_TRUE(parse_shard("3/4", &s).ok());
  EXPECT_EQ(s.index, 3);
  EXPECT_EQ(s.count, 4);
  for (const char* bad : {"", "1", "/", "1/", "/2", "2/2", "5/4", "0/0", "-1/2", "1/-2", "+1/2", "1/2/3", "a/2",
                          "1 /2", "0/99999999999"}) {
    Shard kept{1, 3};
    const Status st = parse_shard(bad, &kept);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << "'" << bad << "'";
    EXPECT_EQ(kept.index, 1) << "'" << bad << "'";
    EXPECT_EQ(kept.count, 3) << "'" << bad << "'";
  }
}

TEST(Shard, UnionOfShardsIsEveryCaseOnceAndSeedsAreDistinct) {
  const uint64_t kBase = 20261122;
  for (int count = 1; count <= 9; ++count) {
    for (int64_t total : {0, 1, 2, 7, 8, 9, 100, 750, 15000}) {
      std::vector<int> covered(static_cast<size_t>(total), 0);
      std::set<uint64_t> seeds;
      int64_t next = 0;
      for (int index = 0; index < count; ++index) {
        const Shard s{index, count};
        const int64_t first = shard_first_case(total, s);
        const int64_t n = shard_cases(total, s);
        EXPECT_EQ(first, next) << index << "/" << count << " of " << total;  // consecutive ranges
        EXPECT_GE(n, total / count);
        EXPECT_LE(n, total / count + 1);
        for (int64_t k = first; k < first + n && k < total; ++k) ++covered[static_cast<size_t>(k)];
        next = first + n;
        seeds.insert(shard_seed(kBase, s));
        // Deterministic: the same inputs give the same plan.
        EXPECT_EQ(shard_seed(kBase, s), shard_seed(kBase, Shard{index, count}));
      }
      EXPECT_EQ(next, total) << count << " shards of " << total;
      for (int64_t k = 0; k < total; ++k) EXPECT_EQ(covered[static_cast<size_t>(k)], 1) << "case " << k;
      EXPECT_EQ(seeds.size(), static_cast<size_t>(count));
    }
  }
}

TEST(Shard, OneShardIsTheUnshardedRun) {
  EXPECT_EQ(shard_seed(42, Shard{0, 1}), 42u);
  EXPECT_EQ(shard_cases(750, Shard{0, 1}), 750);
  EXPECT_EQ(shard_first_case(750, Shard{0, 1}), 0);
  // Shards of a run differ from the base seed and from the shards of a neighbouring base.
  EXPECT_NE(shard_seed(42, Shard{0, 2}), 42u);
  EXPECT_NE(shard_seed(42, Shard{1, 2}), shard_seed(43, Shard{1, 2}));
}

}  // namespace
}  // namespace flashcheck
