// The translation from the kernel's types to the oracle's (oracle_bridge.h), and the places where the two
// sides hold the same rule or constant independently: the kernel's visibility rule (visible_key_range)
// against the oracle's predicate on every (i, j) of all small shapes and of random larger ones, for every mask
// and sliding windows of both alignments, and the tensor-core reference slack (the kernel's, public in
// instrument.h, and the oracle's kTensorCoreRefSlackLog2). With sequences: the problem carries each sequence's
// lengths, and the two rules agree row by row of every sequence. The keys the suite judges by
// (judged_visible_keys) meet the predicate on the same (i, j).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "flashcheck/attention.h"
#include "flashcheck/case.h"
#include "flashcheck/inputs.h"
#include "flashcheck/instrument.h"  // kTensorCoreRefSlackLog2, the kernel's own constant
#include "flashcheck/oracle_bridge.h"

namespace flashcheck {
namespace {

constexpr Mask kMasks[] = {Mask::kNone, Mask::kCausalTopLeft, Mask::kCausalBottomRight};
constexpr Mask kWindowMasks[] = {Mask::kWindowTopLeft, Mask::kWindowBottomRight};
// Window sides of the exhaustive part: unbounded, the diagonal alone, small, and at, beyond and far beyond
// the largest seqlen there (24).
constexpr int64_t kWindowSides[] = {-1, 0, 1, 2, 5, 23, 24, 25, int64_t{1} << 40};

// splitmix64: the random shapes below are the same on every run.
uint64_t next_random(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
int64_t below(uint64_t* state, int64_t bound) {
  return static_cast<int64_t>(next_random(state) % static_cast<uint64_t>(bound));
}

std::string where(const Params& p, int64_t i) {
  std::string text = std::string("mask=") + to_string(p.mask);
  if (p.mask == Mask::kWindowTopLeft || p.mask == Mask::kWindowBottomRight) {
    text += " window=" + std::to_string(p.window_left) + "," + std::to_string(p.window_right);
  }
  return text + " sq=" + std::to_string(p.seqlen_q) + " sk=" + std::to_string(p.seqlen_k) + " i=" + std::to_string(i);
}

// Row i under both rules: the kernel's key range [begin, end) and the oracle's predicate, key by key (and
// the predicate false just outside the keys), and the judged range against the predicate too. Returns false at
// the first disagreement, with a gtest failure.
bool rules_agree_on_row(const Params& params, const oracle::Problem& problem, int64_t i) {
  const KeyRange range = visible_key_range(params, i);
  const KeyRange judged = judged_visible_keys(params, i);
  for (int64_t j = -1; j <= params.seqlen_k; ++j) {
    const bool kernel_sees = range.begin <= j && j < range.end;
    const bool judged_sees = judged.begin <= j && j < judged.end;
    const bool oracle_sees = oracle::visible(problem, i, j);
    if (kernel_sees != oracle_sees || judged_sees != oracle_sees) {
      ADD_FAILURE() << where(params, i) << " j=" << j << ": kernel " << kernel_sees << " (keys [" << range.begin
                    << ", " << range.end << ")), judged " << judged_sees << " (keys [" << judged.begin << ", "
                    << judged.end << ")), oracle " << oracle_sees;
      return false;
    }
  }
  return true;
}

Params shape(Mask mask, int64_t seqlen_q, int64_t seqlen_k, int64_t window_left = -1, int64_t window_right = -1) {
  Params p = make_params(DType::kF16, 1, 1, 1, seqlen_q, seqlen_k, 8, mask);
  p.window_left = window_left;
  p.window_right = window_right;
  return p;
}

// A random window side: unbounded, 0 (the diagonal alone), small, around the seqlens, or far beyond them.
int64_t window_side(uint64_t* state, int64_t seqlen_q, int64_t seqlen_k) {
  switch (below(state, 6)) {
    case 0: return -1;
    case 1: return 0;
    case 2: return below(state, 8);
    case 3: return std::max(seqlen_q, seqlen_k) + below(state, 3) - 1;
    case 4: return int64_t{1} << (20 + below(state, 40));
    default: return below(state, std::max(seqlen_q, seqlen_k) + 1);
  }
}

TEST(Visibility, KernelRuleEqualsOraclePredicate) {
  int64_t rows = 0;
  // Every shape up to 40 x 40, every row, every key.
  for (const Mask mask : kMasks) {
    for (int64_t seqlen_q = 0; seqlen_q <= 40; ++seqlen_q) {
      for (int64_t seqlen_k = 0; seqlen_k <= 40; ++seqlen_k) {
        const Params params = shape(mask, seqlen_q, seqlen_k);
        const oracle::Problem problem = oracle_problem(params, {}, {}, {});
        for (int64_t i = 0; i < seqlen_q; ++i, ++rows) ASSERT_TRUE(rules_agree_on_row(params, problem, i));
      }
    }
  }
  // Random larger shapes: the first and last rows, the rows where the diagonal enters and leaves the keys,
  // and random rows, every key of each.
  uint64_t state = 0x715ab1e;
  for (int n = 0; n < 300; ++n) {
    const Mask mask = kMasks[below(&state, 3)];
    const int64_t seqlen_q = 1 + below(&state, n % 3 == 0 ? 5000 : 300);
    const int64_t seqlen_k = below(&state, n % 4 == 0 ? 5000 : 300);
    const Params params = shape(mask, seqlen_q, seqlen_k);
    const oracle::Problem problem = oracle_problem(params, {}, {}, {});
    std::vector<int64_t> picked = {0, seqlen_q - 1, seqlen_q - seqlen_k - 1, seqlen_q - seqlen_k, seqlen_k - 1,
                                   seqlen_k};
    for (int r = 0; r < 12; ++r) picked.push_back(below(&state, seqlen_q));
    for (const int64_t i : picked) {
      if (i < 0 || i >= seqlen_q) continue;
      ++rows;
      ASSERT_TRUE(rules_agree_on_row(params, problem, i));
    }
  }
  EXPECT_GT(rows, 60000);
}

TEST(Visibility, KernelWindowRuleEqualsOraclePredicate) {
  int64_t rows = 0;
  // Every shape up to 24 x 24 (seqlen_q < seqlen_k, equal and greater), every window pair of kWindowSides.
  for (const Mask mask : kWindowMasks) {
    for (const int64_t left : kWindowSides) {
      for (const int64_t right : kWindowSides) {
        for (int64_t seqlen_q = 0; seqlen_q <= 24; ++seqlen_q) {
          for (int64_t seqlen_k = 0; seqlen_k <= 24; ++seqlen_k) {
            const Params params = shape(mask, seqlen_q, seqlen_k, left, right);
            const oracle::Problem problem = oracle_problem(params, {}, {}, {});
            for (int64_t i = 0; i < seqlen_q; ++i, ++rows) ASSERT_TRUE(rules_agree_on_row(params, problem, i));
          }
        }
      }
    }
  }
  // Random larger shapes and windows; seqlen_q > seqlen_k and seqlen_q < seqlen_k both by up to 5000. Rows: the
  // first and last, where the aligned diagonal and each window edge enter and leave the keys, and random ones.
  uint64_t state = 0x5111d1e;
  for (int n = 0; n < 600; ++n) {
    const Mask mask = kWindowMasks[below(&state, 2)];
    const int64_t seqlen_q = 1 + below(&state, n % 3 == 0 ? 5000 : 300);
    const int64_t seqlen_k = below(&state, n % 4 == 0 ? 5000 : 300);
    const int64_t left = window_side(&state, seqlen_q, seqlen_k), right = window_side(&state, seqlen_q, seqlen_k);
    const Params params = shape(mask, seqlen_q, seqlen_k, left, right);
    const oracle::Problem problem = oracle_problem(params, {}, {}, {});
    const int64_t shift = mask == Mask::kWindowBottomRight ? seqlen_k - seqlen_q : 0;  // a(i) = i + shift
    std::vector<int64_t> picked = {0, seqlen_q - 1};
    for (const int64_t key : {int64_t{0}, seqlen_k - 1, seqlen_k}) {
      for (const int64_t edge : {int64_t{0}, left < 0 ? 0 : -left, right < 0 ? 0 : right}) {
        for (const int64_t delta : {-1, 0, 1}) picked.push_back(key - edge - shift + delta);  // a(i) + edge = key
      }
    }
    for (int r = 0; r < 12; ++r) picked.push_back(below(&state, seqlen_q));
    for (const int64_t i : picked) {
      if (i < 0 || i >= seqlen_q) continue;
      ++rows;
      ASSERT_TRUE(rules_agree_on_row(params, problem, i));
    }
  }
  EXPECT_GT(rows, 1000000);
}

TEST(OracleBridge, TranslatesEveryEnumerator) {
  EXPECT_EQ(to_oracle(DType::kF32), oracle::Format::kF32);
  EXPECT_EQ(to_oracle(DType::kF16), oracle::Format::kF16);
  EXPECT_EQ(to_oracle(DType::kBF16), oracle::Format::kBF16);
  EXPECT_EQ(to_oracle(Mask::kNone), oracle::kAllKeys);
  EXPECT_EQ(to_oracle(Mask::kCausalTopLeft), oracle::kCausalTopLeft);
  EXPECT_EQ(to_oracle(Mask::kCausalBottomRight), oracle::kCausalBottomRight);
  EXPECT_EQ(to_oracle(Mask::kWindowTopLeft, 3, 0), (oracle::Visibility{3, 0, oracle::Alignment::kTopLeft}));
  EXPECT_EQ(to_oracle(Mask::kWindowBottomRight, -1, 7),
            (oracle::Visibility{-1, 7, oracle::Alignment::kBottomRight}));
  // Causal is the window (-1, 0) of its alignment on both sides of the bridge.
  EXPECT_EQ(to_oracle(Mask::kWindowTopLeft, -1, 0), to_oracle(Mask::kCausalTopLeft));
  EXPECT_EQ(to_oracle(Mask::kWindowBottomRight, -1, 0), to_oracle(Mask::kCausalBottomRight));
  EXPECT_EQ(to_oracle(ComputePath::kGeneralFp32), oracle::Arithmetic::kGeneralFp32);
  EXPECT_EQ(to_oracle(ComputePath::kTensorCore), oracle::Arithmetic::kTensorCore);
  EXPECT_EQ(to_oracle(ComputePath::kSplitTf32), oracle::Arithmetic::kSplitTf32);
  // Both sides name formats and arithmetic the same way in reports.
  for (const DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    EXPECT_STREQ(oracle::to_string(to_oracle(dtype)), to_string(dtype));
  }
  for (const ComputePath path : {ComputePath::kGeneralFp32, ComputePath::kTensorCore, ComputePath::kSplitTf32}) {
    EXPECT_STREQ(oracle::to_string(to_oracle(path)), to_string(path));
  }
  EXPECT_THROW(to_oracle(static_cast<Mask>(7)), std::invalid_argument);
}

TEST(OracleBridge, ProblemCarriesShapeMaskAndScale) {
  Params params = make_params(DType::kBF16, 2, 6, 3, 5, 9, 16, Mask::kCausalBottomRight, Layout::kBSHD);
  params.softmax_scale = -0.3f;
  const std::vector<double> q(2 * 6 * 5 * 16), kv(2 * 3 * 9 * 16);
  const oracle::Problem p = oracle_problem(params, q, kv, kv);
  EXPECT_EQ(p.batch, 2);
  EXPECT_EQ(p.heads_q, 6);
  EXPECT_EQ(p.heads_kv, 3);
  EXPECT_EQ(p.seqlen_q, 5);
  EXPECT_EQ(p.seqlen_k, 9);
  EXPECT_EQ(p.head_dim, 16);
  EXPECT_EQ(p.visibility, oracle::kCausalBottomRight);
  EXPECT_EQ(p.scale, static_cast<double>(-0.3f));
  EXPECT_EQ(p.q.data(), q.data());
  EXPECT_EQ(p.k.size(), kv.size());
  EXPECT_EQ(p.softcap, 0.0);
  EXPECT_TRUE(p.sink.empty());
}

TEST(OracleBridge, ProblemCarriesWindowSoftcapAndSink) {
  Params params = make_params(DType::kF16, 1, 4, 2, 6, 11, 8, Mask::kWindowBottomRight);
  params.window_left = 4;
  params.window_right = 0;
  params.softcap = 0.1f;  // not a double: the problem holds the fp32 value exactly
  const std::vector<double> sink = {-1.5, 0.0, -std::numeric_limits<double>::infinity(), 30.0};
  const oracle::Problem p = oracle_problem(params, {}, {}, {}, sink);
  EXPECT_EQ(p.visibility, (oracle::Visibility{4, 0, oracle::Alignment::kBottomRight}));
  EXPECT_EQ(p.softcap, static_cast<double>(0.1f));
  EXPECT_EQ(p.sink.data(), sink.data());
  EXPECT_EQ(p.sink.size(), sink.size());
}

TEST(OracleBridge, ProblemCarriesSequenceLengths) {
  const Params params = make_params(DType::kF16, 3, 2, 1, 6, 11, 8, Mask::kCausalBottomRight);
  const std::vector<int64_t> seqlens_q = {6, 0, 2}, seqlens_k = {11, 3, 0};
  const oracle::Problem p = oracle_problem(params, {}, {}, {}, {}, seqlens_q, seqlens_k);
  EXPECT_EQ(p.seqlens_q.data(), seqlens_q.data());
  EXPECT_EQ(p.seqlens_k.data(), seqlens_k.data());
  EXPECT_EQ(p.seqlens_k.size(), size_t{3});
  EXPECT_TRUE(oracle_problem(params, {}, {}, {}).seqlens_q.empty());
  // HostInputs::problem(): the case's q and k (the used keys, not the capacities) per sequence.
  Case c;
  ASSERT_TRUE(parse_case("f16 b=3 hq=2 hkv=1 sq=6 sk=11 d=8 mask=causal-br seqs=6:11,0:3+2,2:0 page=4 seed=1", &c).ok());
  HostInputs in;
  ASSERT_TRUE(make_inputs(c, &in).ok());
  const oracle::Problem from_inputs = in.problem();
  EXPECT_EQ(std::vector<int64_t>(from_inputs.seqlens_q.begin(), from_inputs.seqlens_q.end()), seqlens_q);
  EXPECT_EQ(std::vector<int64_t>(from_inputs.seqlens_k.begin(), from_inputs.seqlens_k.end()), seqlens_k);
  EXPECT_EQ(from_inputs.seqlen_q, 6);
  EXPECT_EQ(from_inputs.seqlen_k, 11);
}

// The kernel's per-sequence rule (visible_key_range with the index arrays) against the oracle's per-sequence
// predicate, on the Params and the Problem the harness builds from one case: every row of every sequence, every
// key, for every mask and random windows, sequences of random lengths (q > k, q < k, empty ones, extra slots).
TEST(Visibility, KernelSequenceRuleEqualsOraclePredicate) {
  uint64_t state = 0x5e9e1ce;
  int64_t rows = 0;
  for (int n = 0; n < 200; ++n) {
    Case c;
    c.mask = static_cast<Mask>(below(&state, 5));
    if (c.mask == Mask::kWindowTopLeft || c.mask == Mask::kWindowBottomRight) {
      c.window_left = window_side(&state, 30, 30);
      c.window_right = window_side(&state, 30, 30);
    }
    c.seqs.resize(static_cast<size_t>(1 + below(&state, 4)));
    c.batch = static_cast<int64_t>(c.seqs.size());
    c.seqlen_q = 0;
    c.seqlen_k = 0;
    for (Sequence& seq : c.seqs) {
      seq = {below(&state, 40), below(&state, 40), below(&state, 3) == 0 ? below(&state, 5) : 0};
      c.seqlen_q = std::max(c.seqlen_q, seq.q);
      c.seqlen_k = std::max(c.seqlen_k, seq.capacity());
    }
    c.page = below(&state, 2) == 0 ? 1 + below(&state, 7) : 0;
    c.head_dim = 4;
    HostInputs in;
    ASSERT_TRUE(make_inputs(c, &in).ok()) << format_case(c);
    const oracle::Problem problem = in.problem();
    for (int64_t b = 0; b < c.batch; ++b) {
      for (int64_t i = 0; i < c.seqs[static_cast<size_t>(b)].q; ++i, ++rows) {
        const KeyRange range = visible_key_range(in.params, b, i);
        const KeyRange judged = judged_visible_keys(problem, b, i);
        for (int64_t j = -1; j <= c.seqlen_k; ++j) {
          const bool kernel_sees = range.begin <= j && j < range.end;
          const bool judged_sees = judged.begin <= j && j < judged.end;
          ASSERT_EQ(kernel_sees, oracle::visible(problem, b, i, j)) << format_case(c) << " b=" << b << " i=" << i << " j=" << j;
          ASSERT_EQ(judged_sees, kernel_sees) << format_case(c) << " b=" << b << " i=" << i << " j=" << j;
        }
      }
    }
  }
  EXPECT_GT(rows, 5000);
}

TEST(OracleConstants, TensorCoreRefSlackEqualsKernelRefSlack) {
  // The oracle keeps its own copy (it includes nothing of the kernel); this is where the two must meet.
  EXPECT_EQ(oracle::kTensorCoreRefSlackLog2, static_cast<double>(kTensorCoreRefSlackLog2));
}

}  // namespace
}  // namespace flashcheck
