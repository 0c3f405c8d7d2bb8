// The classes of known peer deviations (tier.h, FLASHCHECK_KNOWN_DEVIATIONS), on case lines.
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "flashcheck/case.h"
#include "tier.h"

namespace flashcheck::properties {
namespace {

Case parsed(const std::string& line) {
  Case c;
  const Status st = parse_case(line, &c);
  EXPECT_TRUE(st.ok()) << st.message();
  return c;
}

constexpr const char* kBase = "bf16 b=1 hq=1 hkv=1 sq=2 sk=2 d=8 ";

TEST(KnownDeviation, MaskedNonfiniteVNeedsAMaskAndANonfiniteV) {
  const std::string tail = " q=normal(0,1) k=normal(0,1) v=normal(0,1) ";
  EXPECT_TRUE(in_deviation_class("masked-nonfinite-v",
                                 parsed(kBase + std::string("mask=causal-tl") + tail + "inject=v[0,0,1,0]:nan seed=1")));
  EXPECT_FALSE(in_deviation_class("masked-nonfinite-v",
                                  parsed(kBase + std::string("mask=none") + tail + "inject=v[0,0,1,0]:nan seed=1")));
  EXPECT_FALSE(in_deviation_class("masked-nonfinite-v",
                                  parsed(kBase + std::string("mask=causal-tl") + tail + "inject=v[0,0,1,0]:2 seed=1")));
  EXPECT_FALSE(in_deviation_class("masked-nonfinite-v",
                                  parsed(kBase + std::string("mask=causal-tl") + tail + "inject=k[0,0,1,0]:inf seed=1")));
}

// The sequence classes: spare-key-slots needs a sequence with slots past its keys, keyless-row-lse one with rows and no
// keys; neither applies to a dense case.
TEST(KnownDeviation, SequenceClassesNeedTheirSequences) {
  const std::string head = "bf16 b=2 hq=1 hkv=1 sq=4 sk=9 d=8 mask=none ";
  const std::string qkv = " q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=1";
  for (const auto& [name, member, other] : {std::tuple{"spare-key-slots", "seqs=4:5+4,2:3", "seqs=4:9,2:3"},
                                            std::tuple{"keyless-row-lse", "seqs=4:0,2:3", "seqs=0:0,2:3"}}) {
    EXPECT_TRUE(in_deviation_class(name, parsed(head + member + qkv))) << name;
    EXPECT_FALSE(in_deviation_class(name, parsed(head + other + qkv))) << name;
    EXPECT_FALSE(in_deviation_class(name, parsed(kBase + std::string("mask=none") + qkv))) << name;
  }
}

TEST(KnownDeviation, OtherClasses) {
  const std::string qkv = " q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=1";
  const std::string nan_k = " q=normal(0,1) k=normal(0,1) v=normal(0,1) inject=k[0,0,0,0]:nan seed=1";
  EXPECT_TRUE(in_deviation_class("nonfinite-qk", parsed(kBase + std::string("mask=none softcap=20") + nan_k)));
  EXPECT_TRUE(in_deviation_class("nonfinite-qk", parsed(kBase + std::string("mask=none") + nan_k)));
  EXPECT_FALSE(in_deviation_class("nonfinite-qk", parsed(kBase + std::string("mask=none softcap=20") + qkv)));
  EXPECT_FALSE(in_deviation_class("nonfinite-qk-softcap", parsed(kBase + std::string("mask=none softcap=20") + nan_k)));
  EXPECT_TRUE(in_deviation_class("nonpositive-scale", parsed(kBase + std::string("mask=none scale=0") + qkv)));
  EXPECT_TRUE(in_deviation_class("nonpositive-scale", parsed(kBase + std::string("mask=none scale=-0.5") + qkv)));
  EXPECT_FALSE(in_deviation_class("nonpositive-scale", parsed(kBase + std::string("mask=none scale=0.5") + qkv)));
  EXPECT_FALSE(in_deviation_class("nonpositive-scale", parsed(kBase + std::string("mask=none") + qkv)));
  EXPECT_TRUE(in_deviation_class(
      "subnormal-v", parsed(kBase + std::string("mask=none q=normal(0,1) k=normal(0,1) v=subnormal() seed=1"))));
  EXPECT_TRUE(in_deviation_class(
      "nonfinite-qk", parsed(kBase + std::string("mask=none") + " q=normal(0,1) k=normal(0,1) v=normal(0,1) "
                                                                 "inject=k[0,0,0,0]:-inf seed=1")));
  EXPECT_TRUE(in_deviation_class(
      "nonfinite-qk", parsed(kBase + std::string("mask=none") + " q=normal(0,1) k=normal(0,1) v=normal(0,1) "
                                                                 "inject=q[0,0,0,0]:nan seed=1")));
  EXPECT_FALSE(in_deviation_class(
      "nonfinite-qk", parsed(kBase + std::string("mask=none") + " q=normal(0,1) k=normal(0,1) v=normal(0,1) "
                                                                 "inject=v[0,0,0,0]:nan seed=1")));
  const std::string huge_k = " q=normal(0,2) k=normal(0,1) v=normal(0,1) inject=k[0,0,1,0]:-3.3895313892515355e+38 seed=1";
  EXPECT_TRUE(in_deviation_class("masked-overflow-qk", parsed(kBase + std::string("mask=causal-tl") + huge_k)));
  EXPECT_FALSE(in_deviation_class("masked-overflow-qk", parsed(kBase + std::string("mask=none") + huge_k)));
  EXPECT_FALSE(in_deviation_class(
      "masked-overflow-qk", parsed(kBase + std::string("mask=causal-tl") + " q=normal(0,1) k=normal(0,1) v=normal(0,1) "
                                                                          "inject=k[0,0,1,0]:1000 seed=1")));
  EXPECT_FALSE(in_deviation_class(
      "masked-overflow-qk", parsed(kBase + std::string("mask=causal-tl") + " q=normal(0,1) k=normal(0,1) v=normal(0,1) "
                                                                          "inject=k[0,0,1,0]:-inf seed=1")));
  // huge-qk: with or without a mask, Q or K near the dtype's max or a huge finite injection; not an infinite one.
  EXPECT_TRUE(in_deviation_class("huge-qk", parsed(kBase + std::string("mask=none") + huge_k)));
  EXPECT_TRUE(in_deviation_class("huge-qk", parsed(kBase + std::string("mask=causal-br") + huge_k)));
  EXPECT_TRUE(in_deviation_class(
      "huge-qk", parsed(kBase + std::string("mask=none q=nearmax(1) k=normal(0,1e-30) v=normal(0,1) seed=1"))));
  EXPECT_TRUE(in_deviation_class(
      "huge-qk", parsed(kBase + std::string("mask=none q=normal(0,1) k=nearmax(0.5) v=normal(0,1) seed=1"))));
  EXPECT_FALSE(in_deviation_class(
      "huge-qk", parsed(kBase + std::string("mask=none q=normal(0,1) k=normal(0,1) v=nearmax(1) seed=1"))));
  EXPECT_FALSE(in_deviation_class("huge-qk", parsed(kBase + std::string("mask=none") + qkv)));
  EXPECT_FALSE(in_deviation_class(
      "huge-qk", parsed(kBase + std::string("mask=none") + " q=normal(0,1) k=normal(0,1) v=normal(0,1) "
                                                           "inject=k[0,0,1,0]:-inf seed=1")));
  EXPECT_FALSE(in_deviation_class("no-such-class", parsed(kBase + std::string("mask=none scale=0") + qkv)));
}

}  // namespace
}  // namespace flashcheck::properties
