// oracle_test (CPU tier): both oracle tiers against closed forms (equal logits, one dominant key, two keys with a
// softcap and a sink, head_dim 1, seqlen_k 1, fully masked rows), the documented non-finite semantics (sinks of
// +-inf and NaN included), the fast tier against gold within the fast tier's own documented error on random and
// ill-conditioned rows, the accuracy of gold's exp/log/tanh, row sampling, the visibility rule (closed form
// against the predicate, windows), per-sequence lengths (each sequence of a varlen batch equals the same data as a
// problem of its own; unused rows never read), unequal head dims (V and O of head_dim_v columns: against plain
// long-double loops, head_dim_v = head_dim as the default, V's columns permuted or cut off), and the throughput quoted
// in docs/error-model.md.
#include "flashcheck/oracle.h"

#include <gtest/gtest.h>

#include <boost/multiprecision/cpp_bin_float.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>

#include "flashcheck/error_model.h"
#include "test_problems.h"
#include "tiers.h"

namespace flashcheck::oracle {
namespace {

using testing::fill;
using testing::fill_normal;
using testing::make_shape;
using testing::Rng;
using testing::TestProblem;
using Quad = boost::multiprecision::cpp_bin_float_quad;
using Wide = boost::multiprecision::cpp_bin_float_50;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr Tier kTiers[] = {Tier::kFast, Tier::kGold};
// The fast tier's documented error must be small to be useful: below 2^-40 of the row's scale (A_k + |O_k|)
// on every row of these tests (docs/error-model.md quotes ~2^-50).
constexpr double kFastErrorCeiling = 0x1p-40;

RowResult row_of(const TestProblem& p, RowRef r, Tier tier) { return compute_row(p.view(), r, tier); }

std::string label(Tier tier) { return std::string("tier ") + to_string(tier); }

// |got - want| within the tier's own error bound plus `extra` (the reference's own rounding).
void expect_o_near(const RowResult& r, const std::vector<double>& want, double extra_rel, Tier tier) {
  ASSERT_EQ(r.o.size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    EXPECT_LE(std::fabs(r.o[k] - want[k]), r.o_err[k] + extra_rel * std::fabs(want[k]))
        << label(tier) << " col " << k << " got " << r.o[k] << " want " << want[k];
  }
}

void expect_empty_row(const RowResult& r) {
  for (double o : r.o) EXPECT_EQ(o, 0.0);
  EXPECT_EQ(r.lse, -kInf);
  EXPECT_EQ(r.m, -kInf);
  EXPECT_EQ(r.l, 0.0);
}

// Fast and gold agree within the sum of their documented errors; the fast tier's error is non-vacuous.
void expect_tiers_agree(const TestProblem& p, RowRef row, const std::string& what) {
  const RowResult fast = row_of(p, row, Tier::kFast);
  const RowResult gold = row_of(p, row, Tier::kGold);
  ASSERT_EQ(fast.o.size(), gold.o.size());
  for (size_t k = 0; k < fast.o.size(); ++k) {
    if (std::isnan(gold.o[k])) {
      EXPECT_TRUE(std::isnan(fast.o[k])) << what << " col " << k;
      continue;
    }
    EXPECT_LE(std::fabs(fast.o[k] - gold.o[k]), fast.o_err[k] + gold.o_err[k])
        << what << " col " << k << " fast " << fast.o[k] << " gold " << gold.o[k] << " fast err " << fast.o_err[k];
    EXPECT_LE(fast.o_err[k], kFastErrorCeiling * (fast.abs_pv[k] + std::fabs(fast.o[k])) + 1e-300)
        << what << " col " << k;
  }
  if (std::isfinite(gold.lse)) {
    EXPECT_LE(std::fabs(fast.lse - gold.lse), fast.lse_err + gold.lse_err) << what;
    EXPECT_LE(fast.lse_err, kFastErrorCeiling * (1 + std::fabs(gold.lse))) << what;
    const double dm = (fast.m - gold.m) + (fast.m_lo - gold.m_lo);
    EXPECT_LE(std::fabs(dm), fast.m_err + gold.m_err) << what;
    EXPECT_LE(std::fabs(fast.l / gold.l - 1), fast.l_rel_err + gold.l_rel_err) << what;
  } else {
    EXPECT_EQ(std::isnan(fast.lse), std::isnan(gold.lse)) << what;
    if (!std::isnan(gold.lse)) {
      EXPECT_EQ(fast.lse, gold.lse) << what;  // -inf: a row with no usable key
    }
  }
}

// ---- closed forms

// Format names are the oracle's vocabulary for the harness's dtype rows (oracle_bridge looks formats up by name).
TEST(OracleFormats, NamesRoundTrip) {
  for (Format format : {Format::kF32, Format::kF16, Format::kBF16}) {
    EXPECT_EQ(format_from_name(to_string(format)), format) << to_string(format);
  }
  EXPECT_EQ(format_from_name("f64"), std::nullopt);
  EXPECT_EQ(format_from_name(""), std::nullopt);
}

TEST(OracleClosedForm, EqualLogitsGiveTheMeanOfVAndLseSPlusLnN) {
  for (const Format format : {Format::kF32, Format::kF16, Format::kBF16}) {
    constexpr int64_t kKeys = 37, kDim = 8;
    TestProblem p = make_shape(format, 1, kKeys, kDim);
    Rng rng(11);
    fill(&p, 'q', [&](int64_t) { return rng.normal(0, 1); });
    std::vector<double> key(kDim);
    for (double& x : key) x = testing::round_to(format, rng.normal(0, 1));
    fill(&p, 'k', [&](int64_t e) { return key[static_cast<size_t>(e % kDim)]; });  // every key the same: equal logits
    fill(&p, 'v', [&](int64_t) { return rng.uniform(-2, 2); });
    Quad s = 0;
    for (int64_t d = 0; d < kDim; ++d) s += Quad(p.q[static_cast<size_t>(d)]) * Quad(key[static_cast<size_t>(d)]);
    s *= Quad(p.scale);
    std::vector<double> mean(kDim);
    for (int64_t d = 0; d < kDim; ++d) {
      Quad sum = 0;
      for (int64_t j = 0; j < kKeys; ++j) sum += Quad(p.v[static_cast<size_t>(j * kDim + d)]);
      mean[static_cast<size_t>(d)] = static_cast<double>(sum / kKeys);
    }
    const double lse = static_cast<double>(s + log(Quad(kKeys)));
    for (const Tier tier : kTiers) {
      const RowResult r = row_of(p, {0, 0, 0}, tier);
      expect_o_near(r, mean, 0x1p-53, tier);
      EXPECT_LE(std::fabs(r.lse - lse), r.lse_err + 0x1p-53 * std::fabs(lse)) << label(tier);
      EXPECT_LE(std::fabs(r.m - static_cast<double>(s)), r.m_err) << label(tier);
      EXPECT_EQ(r.l, static_cast<double>(kKeys)) << label(tier);  // every w_j = exp(0) = 1 exactly
    }
  }
}

TEST(OracleClosedForm, ZeroQueryGivesUniformWeights) {
  TestProblem p = make_shape(Format::kF16, 1, 5, 4);
  fill(&p, 'k', [](int64_t e) { return 0.25 * static_cast<double>(e % 7) - 1; });
  fill(&p, 'v', [](int64_t e) { return static_cast<double>(e % 5); });
  for (const Tier tier : kTiers) {
    const RowResult r = row_of(p, {0, 0, 0}, tier);
    EXPECT_EQ(r.m, 0.0);
    EXPECT_EQ(r.l, 5.0);
    EXPECT_LE(std::fabs(r.lse - std::log(5.0)), r.lse_err + 0x1p-53);
  }
}

TEST(OracleClosedForm, OneDominantKeyGivesItsValueRow) {
  constexpr int64_t kKeys = 9, kDim = 6, kDominant = 3;
  TestProblem p = make_shape(Format::kF32, 1, kKeys, kDim);
  p.scale = 1.0;
  Rng rng(5);
  fill(&p, 'q', [](int64_t e) { return e == 0 ? 1.0 : 0.0; });
  fill(&p, 'k', [&](int64_t e) { return e == kDominant * kDim ? 1000.0 : rng.uniform(-1, 1); });
  fill(&p, 'v', [&](int64_t) { return rng.normal(0, 1); });
  const std::vector<double> want(p.v.begin() + kDominant * kDim, p.v.begin() + (kDominant + 1) * kDim);
  for (const Tier tier : kTiers) {
    // The other weights are below e^-999, far under double's range: O is v_dominant to the last bit.
    const RowResult r = row_of(p, {0, 0, 0}, tier);
    for (int64_t d = 0; d < kDim; ++d)
      EXPECT_EQ(r.o[static_cast<size_t>(d)], want[static_cast<size_t>(d)]) << label(tier);
    EXPECT_EQ(r.lse, 1000.0) << label(tier);
    EXPECT_EQ(r.m, 1000.0) << label(tier);
    EXPECT_EQ(r.l, 1.0) << label(tier);
  }
}

TEST(OracleClosedForm, TwoKeysAnalytically) {
  // head_dim 1, q = 1, scale 1: the scores are k_0 and k_1 exactly. With d = s_1 - s_0,
  // O = v_0 + (v_1 - v_0) / (1 + e^-d) and LSE = max + log1p(e^-|d|).
  for (const double delta : {0.0, 0.5, -3.0, 20.0, -60.0}) {
    TestProblem p = make_shape(Format::kF32, 1, 2, 1);
    p.scale = 1.0;
    p.q = {1.0};
    p.k = {0.75, testing::round_to(Format::kF32, 0.75 + delta)};
    p.v = {-1.5, 2.25};
    const Quad d = Quad(p.k[1]) - Quad(p.k[0]);
    const Quad p1 = 1 / (1 + exp(-d));
    const double o = static_cast<double>(Quad(p.v[0]) + (Quad(p.v[1]) - Quad(p.v[0])) * p1);
    const Quad top = Quad(std::max(p.k[0], p.k[1]));
    const double lse = static_cast<double>(top + log1p(exp(-abs(d))));
    for (const Tier tier : kTiers) {
      const RowResult r = row_of(p, {0, 0, 0}, tier);
      expect_o_near(r, {o}, 0x1p-53, tier);
      EXPECT_LE(std::fabs(r.lse - lse), r.lse_err + 0x1p-53 * std::fabs(lse)) << label(tier) << " delta " << delta;
      EXPECT_EQ(r.m, std::max(p.k[0], p.k[1]));
    }
  }
}

TEST(OracleClosedForm, SeqlenK1GivesTheOnlyValueRow) {
  TestProblem p = make_shape(Format::kBF16, 3, 1, 16);
  fill_normal(&p, 17, 2.0, 2.0, 1.0);
  for (const Tier tier : kTiers) {
    for (int64_t i = 0; i < 3; ++i) {
      const RowResult r = row_of(p, {0, 0, i}, tier);
      for (int64_t d = 0; d < 16; ++d) EXPECT_EQ(r.o[static_cast<size_t>(d)], p.v[static_cast<size_t>(d)]);
      EXPECT_EQ(r.l, 1.0);
      EXPECT_EQ(r.lse, r.m);
    }
  }
}

TEST(OracleClosedForm, FullyMaskedRowsAndEmptyKeys) {
  // causal-br with seqlen_q 5 > seqlen_k 3: rows 0 and 1 see no key; row 2 sees one.
  TestProblem p = make_shape(Format::kF16, 5, 3, 4, kCausalBottomRight);
  fill_normal(&p, 3, 1, 1, 1);
  p.v[0] = kNaN;  // a NaN at a key no masked row sees cannot reach them
  for (const Tier tier : kTiers) {
    for (int64_t i = 0; i < 2; ++i) {
      const RowResult r = row_of(p, {0, 0, i}, tier);
      EXPECT_EQ(r.visible, 0);
      EXPECT_FALSE(r.nonfinite_input);
      expect_empty_row(r);
    }
    EXPECT_EQ(row_of(p, {0, 0, 2}, tier).visible, 1);
  }
  TestProblem none = make_shape(Format::kF32, 2, 0, 4);
  for (const Tier tier : kTiers) expect_empty_row(row_of(none, {0, 0, 1}, tier));
}

TEST(OracleClosedForm, GroupedQueryHeadsReadTheirKvHead) {
  // heads_q 4, heads_kv 2: query head 3 reads KV head 1. The same row as a one-head problem must agree.
  TestProblem p = make_shape(Format::kF32, 2, 6, 3, kAllKeys, 1, 4, 2);
  fill_normal(&p, 21, 1, 1, 1);
  TestProblem single = make_shape(Format::kF32, 1, 6, 3);
  for (int64_t d = 0; d < 3; ++d) single.q[static_cast<size_t>(d)] = p.q[static_cast<size_t>((3 * 2 + 1) * 3 + d)];
  for (int64_t e = 0; e < 18; ++e) {
    single.k[static_cast<size_t>(e)] = p.k[static_cast<size_t>(18 + e)];
    single.v[static_cast<size_t>(e)] = p.v[static_cast<size_t>(18 + e)];
  }
  const RowResult a = row_of(p, {0, 3, 1}, Tier::kFast), b = row_of(single, {0, 0, 0}, Tier::kFast);
  EXPECT_EQ(a.o, b.o);
  EXPECT_EQ(a.lse, b.lse);
}

// Two keys (head_dim 1, q = 1, scale 1: the raw scores are k_0 and k_1) with a softcap and a sink, in closed form:
// s_j = c tanh(k_j / c) (or k_j without a cap), O = sum_j e^(s_j) v_j / (sum_j e^(s_j) + e^sink),
// LSE = log(sum_j e^(s_j) + e^sink), m = max(s_0, s_1, sink), l = that sum relative to e^m.
struct TwoKeys {
  double k0 = 0.75, k1 = 0.75, v0 = -1.5, v1 = 2.25;
  double softcap = 0.0, sink = -kInf;
};
void expect_two_keys(const TwoKeys& t, const std::string& what) {
  TestProblem p = make_shape(Format::kF32, 1, 2, 1);
  p.scale = 1.0;
  p.softcap = t.softcap;
  if (t.sink != -kInf) p.sink = {t.sink};
  p.q = {1.0};
  p.k = {t.k0, t.k1};
  p.v = {t.v0, t.v1};
  const auto capped = [&](double k) {
    return t.softcap > 0 ? Quad(t.softcap) * tanh(Quad(k) / Quad(t.softcap)) : Quad(k);
  };
  const Quad s0 = capped(t.k0), s1 = capped(t.k1);
  Quad m = std::max(s0, s1);
  const bool has_sink = std::isfinite(t.sink);
  if (has_sink && Quad(t.sink) > m) m = Quad(t.sink);
  const Quad w0 = exp(s0 - m), w1 = exp(s1 - m), ws = has_sink ? exp(Quad(t.sink) - m) : Quad(0);
  const Quad l = w0 + w1 + ws;
  const double o = static_cast<double>((w0 * Quad(t.v0) + w1 * Quad(t.v1)) / l);
  const double lse = static_cast<double>(m + log(l));
  for (const Tier tier : kTiers) {
    const RowResult r = row_of(p, {0, 0, 0}, tier);
    expect_o_near(r, {o}, 0x1p-53, tier);
    EXPECT_LE(std::fabs(r.lse - lse), r.lse_err + 0x1p-53 * std::fabs(lse)) << label(tier) << " " << what;
    EXPECT_LE(std::fabs(r.m - static_cast<double>(m)), r.m_err + 0x1p-53 * std::fabs(r.m))
        << label(tier) << " " << what;
    EXPECT_LE(std::fabs(r.l / static_cast<double>(l) - 1), r.l_rel_err + 0x1p-52) << label(tier) << " " << what;
    EXPECT_NEAR(r.sink_p, static_cast<double>(ws / l), 0x1p-50) << label(tier) << " " << what;
    EXPECT_EQ(r.sink, t.sink) << what;
    EXPECT_EQ(r.softcap, t.softcap) << what;
  }
}

TEST(OracleClosedForm, SoftcapTwoKeysAnalytically) {
  for (const double c : {0.5, 3.0, 30.0}) {
    for (const double delta : {0.0, 0.5, -3.0, 20.0, -60.0}) {
      TwoKeys t;
      t.k1 = testing::round_to(Format::kF32, 0.75 + delta);
      t.softcap = c;
      expect_two_keys(t, "softcap " + std::to_string(c) + " delta " + std::to_string(delta));
    }
  }
}

TEST(OracleClosedForm, SinkJoinsTheDenominator) {
  // Sinks below, between, above and far from the two scores (far: beyond e^-745, where double's exp underflows).
  for (const double sink : {-3.0, 0.75, 1.0, 5.0, -2000.0, 2000.0}) {
    for (const double c : {0.0, 2.0}) {
      TwoKeys t;
      t.k1 = 1.25;
      t.sink = sink;
      t.softcap = c;
      expect_two_keys(t, "sink " + std::to_string(sink) + " softcap " + std::to_string(c));
    }
  }
}

TEST(OracleClosedForm, RowsWithoutKeysGiveTheSink) {
  // causal-br with seqlen_q 5 > seqlen_k 3: rows 0 and 1 see no key. With a sink they give O = 0, LSE = m = sink
  // and l = 1; row 2 (one key) mixes its key with the sink.
  TestProblem p = make_shape(Format::kF16, 5, 3, 4, kCausalBottomRight, 1, 2, 1);
  fill_normal(&p, 3, 1, 1, 1);
  p.sink = {0.3125, -17.5};
  for (const Tier tier : kTiers) {
    for (int64_t h = 0; h < 2; ++h) {
      for (int64_t i = 0; i < 2; ++i) {
        const RowResult r = row_of(p, {0, h, i}, tier);
        EXPECT_EQ(r.visible, 0);
        for (double o : r.o) EXPECT_EQ(o, 0.0);
        EXPECT_EQ(r.lse, p.sink[static_cast<size_t>(h)]) << label(tier);
        EXPECT_EQ(r.m, p.sink[static_cast<size_t>(h)]) << label(tier);
        EXPECT_EQ(r.l, 1.0) << label(tier);
        EXPECT_EQ(r.sink_p, 1.0) << label(tier);
        EXPECT_EQ(r.keys_m, -kInf) << label(tier);
      }
      const RowResult one = row_of(p, {0, h, 2}, tier);
      EXPECT_GT(one.sink_p, 0.0);
      EXPECT_LT(one.sink_p, 1.0);
    }
  }
}

TEST(OracleClosedForm, MinusInfScoresWithASinkStillReadTheirValues) {
  // Every visible score is -inf, so only the sink weighs; the kernel's accumulator, 0 * inf = NaN at the key whose
  // V is infinite, is scaled by alpha = 0 but stays NaN: that column must be non-finite, the others are 0.
  TestProblem p = make_shape(Format::kBF16, 1, 3, 2);
  p.q = {1.0, 1.0};
  p.k = {-kInf, 0, -kInf, 1, -kInf, 2};
  p.v = {1, 2, kInf, 4, 5, 6};
  p.sink = {2.5};
  for (const Tier tier : kTiers) {
    const RowResult r = row_of(p, {0, 0, 0}, tier);
    EXPECT_TRUE(std::isnan(r.o[0])) << label(tier);
    EXPECT_EQ(r.o[1], 0.0) << label(tier);
    EXPECT_EQ(r.lse, 2.5) << label(tier);
    EXPECT_EQ(r.l, 1.0) << label(tier);
  }
  p.sink.clear();  // without a sink: the empty-row rule, O = 0 whatever V holds
  expect_empty_row(row_of(p, {0, 0, 0}, Tier::kFast));
}

// ---- special values (the semantics in oracle.h)

TEST(OracleSpecialValues, NanInAVisibleScoreMakesTheRowNan) {
  TestProblem p = make_shape(Format::kF16, 1, 4, 4);
  fill_normal(&p, 1, 1, 1, 1);
  p.q[2] = kNaN;
  for (const Tier tier : kTiers) {
    const RowResult r = row_of(p, {0, 0, 0}, tier);
    EXPECT_TRUE(r.nonfinite_input && r.nonfinite_score);
    for (double o : r.o) EXPECT_TRUE(std::isnan(o));
    EXPECT_TRUE(std::isnan(r.lse));
  }
}

TEST(OracleSpecialValues, PlusInfScoreMakesTheRowNan) {
  TestProblem p = make_shape(Format::kF32, 1, 3, 2);
  p.q = {kInf, 1.0};
  p.k = {1, 0, -1, 0, 2, 1};  // key 0: +inf, key 1: -inf, key 2: +inf
  p.v = {1, 2, 3, 4, 5, 6};
  const RowResult r = row_of(p, {0, 0, 0}, Tier::kFast);
  EXPECT_TRUE(r.nonfinite_score);
  for (double o : r.o) EXPECT_TRUE(std::isnan(o));
}

TEST(OracleSpecialValues, MinusInfScoreCarriesZeroWeight) {
  TestProblem p = make_shape(Format::kF32, 1, 4, 3);
  fill_normal(&p, 8, 1, 1, 1);
  p.q[0] = std::fabs(p.q[0]) + 1;
  p.k[1 * 3 + 0] = -kInf;  // key 1's score is -inf (q_0 > 0)
  TestProblem without = make_shape(Format::kF32, 1, 3, 3);
  without.q = p.q;
  for (int64_t j = 0, out = 0; j < 4; ++j) {
    if (j == 1) continue;
    for (int64_t d = 0; d < 3; ++d) {
      without.k[static_cast<size_t>(out * 3 + d)] = p.k[static_cast<size_t>(j * 3 + d)];
      without.v[static_cast<size_t>(out * 3 + d)] = p.v[static_cast<size_t>(j * 3 + d)];
    }
    ++out;
  }
  for (const Tier tier : kTiers) {
    const RowResult a = row_of(p, {0, 0, 0}, tier), b = row_of(without, {0, 0, 0}, tier);
    EXPECT_TRUE(a.nonfinite_input);
    EXPECT_FALSE(a.nonfinite_score);
    EXPECT_EQ(a.o, b.o) << label(tier);
    EXPECT_EQ(a.lse, b.lse) << label(tier);
  }
}

TEST(OracleSpecialValues, AllScoresMinusInfIsARowWithoutUsableKeys) {
  TestProblem p = make_shape(Format::kBF16, 1, 3, 2);
  p.q = {1.0, 1.0};
  p.k = {-kInf, 0, -kInf, 1, -kInf, 2};
  p.v = {1, 2, 3, 4, 5, 6};
  for (const Tier tier : kTiers) expect_empty_row(row_of(p, {0, 0, 0}, tier));
}

TEST(OracleSpecialValues, NonFiniteValueMarksOnlyItsColumn) {
  TestProblem p = make_shape(Format::kF16, 1, 5, 4);
  fill_normal(&p, 4, 1, 1, 1);
  TestProblem clean = p;
  p.v[2 * 4 + 3] = kNaN;
  p.v[4 * 4 + 1] = kInf;
  clean.v[2 * 4 + 3] = 0;
  clean.v[4 * 4 + 1] = 0;
  for (const Tier tier : kTiers) {
    const RowResult r = row_of(p, {0, 0, 0}, tier), c = row_of(clean, {0, 0, 0}, tier);
    EXPECT_TRUE(r.nonfinite_input);
    EXPECT_FALSE(r.nonfinite_score);
    EXPECT_TRUE(std::isnan(r.o[1]) && std::isnan(r.o[3]));
    EXPECT_EQ(r.o[0], c.o[0]);
    EXPECT_EQ(r.o[2], c.o[2]);
    EXPECT_EQ(r.lse, c.lse);
  }
}

TEST(OracleSpecialValues, InfiniteValueAtAZeroWeightKeyStillReachesO) {
  // The kernel multiplies P = 0 by V = inf: NaN. The oracle says "non-finite" for that column.
  TestProblem p = make_shape(Format::kF32, 1, 2, 2);
  p.q = {1.0, 1.0};
  p.k = {1, 1, -kInf, 0};
  p.v = {1, 2, kInf, 3};
  const RowResult r = row_of(p, {0, 0, 0}, Tier::kFast);
  EXPECT_TRUE(std::isnan(r.o[0]));
  EXPECT_EQ(r.o[1], 2.0);
}

TEST(OracleSpecialValues, NonFiniteInputsAtMaskedKeysAreNeverRead) {
  TestProblem p = make_shape(Format::kF32, 3, 3, 2, kCausalTopLeft);
  fill_normal(&p, 6, 1, 1, 1);
  p.k[1 * 2] = kNaN;
  p.v[2 * 2 + 1] = kInf;
  const RowResult r = row_of(p, {0, 0, 0}, Tier::kFast);  // row 0 sees key 0 only
  EXPECT_FALSE(r.nonfinite_input);
  EXPECT_EQ(r.o[0], p.v[0]);
  EXPECT_EQ(r.o[1], p.v[1]);
}

TEST(OracleSpecialValues, DomainFlagsForOverflow) {
  TestProblem big_scores = make_shape(Format::kBF16, 1, 2, 4);
  fill(&big_scores, 'q', [](int64_t) { return 1e30; });
  fill(&big_scores, 'k', [](int64_t) { return 1e30; });
  fill(&big_scores, 'v', [](int64_t) { return 1.0; });
  EXPECT_TRUE(row_of(big_scores, {0, 0, 0}, Tier::kFast).score_overflow);
  TestProblem big_values = make_shape(Format::kBF16, 1, 4, 2);
  fill(&big_values, 'v', [](int64_t) { return 2e38; });
  const RowResult r = row_of(big_values, {0, 0, 0}, Tier::kFast);
  EXPECT_TRUE(r.accum_overflow);
  EXPECT_FALSE(r.score_overflow);
  TestProblem fine = make_shape(Format::kF16, 1, 8, 4);
  fill(&fine, 'q', [](int64_t) { return 65504.0; });
  fill(&fine, 'k', [](int64_t) { return -65504.0; });
  fill(&fine, 'v', [](int64_t) { return 65504.0; });
  const RowResult f = row_of(fine, {0, 0, 0}, Tier::kFast);
  EXPECT_FALSE(f.score_overflow || f.accum_overflow);  // fp16 extremes stay inside fp32's range
}

TEST(OracleSpecialValues, SinkOfMinusInfPlusInfAndNan) {
  // One row per head: sink -inf (no sink), +inf (all the weight), NaN (a NaN logit), and a finite one.
  TestProblem p = make_shape(Format::kF16, 2, 6, 4, kAllKeys, 1, 4, 1);
  fill_normal(&p, 31, 1, 1, 1);
  p.v[3 * 4 + 1] = kInf;  // column 1 holds an infinite value at a visible key
  p.sink = {-kInf, kInf, kNaN, 1.5};
  TestProblem none = p;
  none.sink.clear();
  for (const Tier tier : kTiers) {
    const RowResult minus = row_of(p, {0, 0, 1}, tier), plain = row_of(none, {0, 0, 1}, tier);
    for (size_t k = 0; k < plain.o.size(); ++k) {
      if (std::isnan(plain.o[k])) {
        EXPECT_TRUE(std::isnan(minus.o[k]));
      } else {
        EXPECT_EQ(minus.o[k], plain.o[k]) << label(tier);
      }
    }
    EXPECT_EQ(minus.lse, plain.lse) << label(tier);
    EXPECT_EQ(minus.l, plain.l) << label(tier);
    EXPECT_EQ(minus.sink_p, 0.0) << label(tier);

    const RowResult plus = row_of(p, {0, 1, 1}, tier);
    EXPECT_FALSE(plus.nonfinite_score);
    EXPECT_EQ(plus.o[0], 0.0);
    EXPECT_TRUE(std::isnan(plus.o[1]));  // 0 * inf in the accumulator
    EXPECT_EQ(plus.lse, kInf);
    EXPECT_EQ(plus.m, kInf);
    EXPECT_EQ(plus.l, 1.0);

    const RowResult nan = row_of(p, {0, 2, 1}, tier);
    EXPECT_TRUE(nan.nonfinite_score && nan.nonfinite_input);
    for (double o : nan.o) EXPECT_TRUE(std::isnan(o));
    EXPECT_TRUE(std::isnan(nan.lse) && std::isnan(nan.m) && std::isnan(nan.l));

    const RowResult finite = row_of(p, {0, 3, 1}, tier);
    EXPECT_TRUE(std::isfinite(finite.lse));
    EXPECT_GT(finite.lse, plain.lse);  // one more term in the sum
  }
}

TEST(OracleSpecialValues, SoftcapMakesInfiniteScoresFinite) {
  // c tanh(+-inf / c) = +-c: a key with an infinite score is an ordinary key of logit +-c, not a NaN row (+inf)
  // or a key of zero weight (-inf). The same row with the scores 1e30 and -1e30 gives the same result.
  TestProblem p = make_shape(Format::kF32, 1, 3, 2);
  p.scale = 1.0;
  p.softcap = 4.0;
  p.q = {1.0, 1.0};
  p.k = {kInf, 0, -kInf, 0, 0.5, 0.25};
  p.v = {1, 2, 3, 4, 5, 6};
  TestProblem finite = p;
  finite.k = {1e30, 0, -1e30, 0, 0.5, 0.25};
  for (const Tier tier : kTiers) {
    const RowResult r = row_of(p, {0, 0, 0}, tier), f = row_of(finite, {0, 0, 0}, tier);
    EXPECT_TRUE(r.nonfinite_input);
    EXPECT_FALSE(r.nonfinite_score);
    EXPECT_FALSE(r.score_overflow);
    EXPECT_EQ(r.m, 4.0) << label(tier);
    for (size_t k = 0; k < 2; ++k) EXPECT_NEAR(r.o[k], f.o[k], 1e-14) << label(tier);
    EXPECT_NEAR(r.lse, f.lse, 1e-14) << label(tier);
    EXPECT_EQ(r.score_abs_max, 0.75);  // the infinite keys' capped scores carry no error of their own
  }
  p.softcap = 0.0;
  EXPECT_TRUE(row_of(p, {0, 0, 0}, Tier::kFast).nonfinite_score);  // without the cap: +inf makes the row NaN
}

TEST(OracleSpecialValues, DomainFlagsForSinkAndSoftcap) {
  TestProblem p = make_shape(Format::kBF16, 1, 2, 4);
  fill(&p, 'q', [](int64_t) { return 1e4; });
  fill(&p, 'k', [](int64_t) { return 1e4; });
  fill(&p, 'v', [](int64_t) { return 1.0; });
  EXPECT_FALSE(row_of(p, {0, 0, 0}, Tier::kFast).score_overflow);
  p.sink = {3e38};  // sink * log2 e overflows fp32
  EXPECT_TRUE(row_of(p, {0, 0, 0}, Tier::kFast).score_overflow);
  p.sink = {-3e38};
  EXPECT_TRUE(row_of(p, {0, 0, 0}, Tier::kFast).score_overflow);
  p.sink = {1e30};  // far above every score, and inside the domain
  EXPECT_FALSE(row_of(p, {0, 0, 0}, Tier::kFast).score_overflow);
  p.sink.clear();
  p.softcap = 1e-30;  // the argument s * scale / c overflows
  EXPECT_TRUE(row_of(p, {0, 0, 0}, Tier::kFast).score_overflow);
  p.softcap = 3e38;  // c * log2 e overflows
  EXPECT_TRUE(row_of(p, {0, 0, 0}, Tier::kFast).score_overflow);
  p.softcap = 30.0;
  EXPECT_FALSE(row_of(p, {0, 0, 0}, Tier::kFast).score_overflow);
  p.softcap = -1.0;
  EXPECT_THROW(row_of(p, {0, 0, 0}, Tier::kFast), std::invalid_argument);
  p.softcap = 0.0;
  p.sink = {1.0};  // shorter than heads_q
  p.heads_q = 2;
  EXPECT_THROW(row_of(p, {0, 0, 0}, Tier::kFast), std::out_of_range);
}

// ---- fast against gold

// QS_k = sum_j (p_j N_j (v_jk - O_k))^2 with N_j = |s_j| + |scale| sqrt(sum_k (q_k k_jk)^2) (with a softcap
// min(c, N_j)), from its definition in long double, both tiers, with and without a softcap.
TEST(OracleIngredients, ScoreNoiseFromItsDefinition) {
  for (const double softcap : {0.0, 3.0}) {
    TestProblem p = make_shape(Format::kF32, 1, 37, 16);
    p.softcap = softcap;
    fill_normal(&p, 29, 2.0, 1.5, 1.0);
    const int64_t n = p.seqlen_k, d = p.head_dim;
    std::vector<long double> s(static_cast<size_t>(n)), noise(static_cast<size_t>(n)), w(static_cast<size_t>(n));
    long double m = -INFINITY, l = 0;
    for (int64_t j = 0; j < n; ++j) {
      long double dot = 0, sq = 0;
      for (int64_t k = 0; k < d; ++k) {
        const long double prod = static_cast<long double>(p.q[static_cast<size_t>(k)]) * p.k[static_cast<size_t>(j * d + k)];
        dot += prod;
        sq += prod * prod;
      }
      s[j] = p.scale * dot;
      noise[j] = std::fabs(s[j]) + std::fabs(p.scale) * std::sqrt(sq);
      if (softcap > 0) {
        s[j] = softcap * std::tanh(s[j] / softcap);
        noise[j] = std::min<long double>(softcap, noise[j]);
      }
      m = std::max(m, s[j]);
    }
    for (int64_t j = 0; j < n; ++j) l += w[j] = std::exp(s[j] - m);
    for (const Tier tier : {Tier::kFast, Tier::kGold}) {
      const RowResult r = compute_row(p.view(), {0, 0, 0}, tier);
      for (int64_t k = 0; k < d; ++k) {
        long double o = 0, qs = 0;
        for (int64_t j = 0; j < n; ++j) o += w[j] / l * p.v[static_cast<size_t>(j * d + k)];
        for (int64_t j = 0; j < n; ++j) {
          const long double term = w[j] / l * noise[j] * (p.v[static_cast<size_t>(j * d + k)] - o);
          qs += term * term;
        }
        EXPECT_NEAR(r.dev_pv_score_sq[static_cast<size_t>(k)] / static_cast<double>(qs), 1.0, 1e-9)
            << "softcap " << softcap << " col " << k;
      }
    }
  }
}

TEST(OracleFastVsGold, RandomRows) {
  Rng rng(2024);
  int rows = 0;
  for (const Format format : {Format::kF32, Format::kF16, Format::kBF16}) {
    for (const int64_t seqlen_k : {1, 2, 7, 64, 300}) {
      for (const int64_t head_dim : {1, 3, 64, 128}) {
        const Visibility visibility = rows % 3 == 0 ? kCausalTopLeft : kAllKeys;
        TestProblem p = make_shape(format, 3, seqlen_k, head_dim, visibility);
        const double sigma = rng.uniform(0.3, 3.0);
        fill_normal(&p, rng.next(), sigma, sigma, 1.0);
        expect_tiers_agree(
            p, {0, 0, 2},
            std::string(to_string(format)) + " sk=" + std::to_string(seqlen_k) + " d=" + std::to_string(head_dim));
        ++rows;
      }
    }
  }
}

TEST(OracleFastVsGold, CancellationToZero) {
  // Pairs of keys with equal scores and opposite V rows, plus one light key: O is tiny against A_k.
  constexpr int64_t kPairs = 40, kDim = 16;
  TestProblem p = make_shape(Format::kF32, 1, 2 * kPairs + 1, kDim);
  Rng rng(9);
  fill(&p, 'q', [&](int64_t) { return rng.normal(0, 1); });
  for (int64_t j = 0; j < kPairs; ++j) {
    for (int64_t d = 0; d < kDim; ++d) {
      const double kk = testing::round_to(Format::kF32, rng.normal(0, 1));
      const double vv = testing::round_to(Format::kF32, rng.normal(0, 10));
      p.k[static_cast<size_t>((2 * j) * kDim + d)] = p.k[static_cast<size_t>((2 * j + 1) * kDim + d)] = kk;
      p.v[static_cast<size_t>((2 * j) * kDim + d)] = vv;
      p.v[static_cast<size_t>((2 * j + 1) * kDim + d)] = -vv;
    }
  }
  for (int64_t d = 0; d < kDim; ++d) {
    p.k[static_cast<size_t>(2 * kPairs * kDim + d)] =
        testing::round_to(Format::kF32, -3 * std::fabs(p.q[static_cast<size_t>(d)]));
    p.v[static_cast<size_t>(2 * kPairs * kDim + d)] = 1e-3;
  }
  const RowResult gold = row_of(p, {0, 0, 0}, Tier::kGold);
  for (size_t d = 0; d < gold.o.size(); ++d)
    EXPECT_LT(std::fabs(gold.o[d]), 1e-4 * gold.abs_pv[d]);  // truly cancelling
  expect_tiers_agree(p, {0, 0, 0}, "cancellation");
}

TEST(OracleFastVsGold, LogitsSpanningHundreds) {
  constexpr int64_t kKeys = 257, kDim = 4;
  TestProblem p = make_shape(Format::kF32, 1, kKeys, kDim);
  p.scale = 1.0;
  Rng rng(12);
  fill(&p, 'q', [](int64_t e) { return e == 0 ? 1.0 : 0.001; });
  fill(&p, 'k', [&](int64_t e) {
    return e % kDim == 0 ? -400.0 + 800.0 * static_cast<double>(e / kDim) / (kKeys - 1) : rng.normal(0, 1);
  });
  fill(&p, 'v', [&](int64_t) { return rng.normal(0, 1); });
  expect_tiers_agree(p, {0, 0, 0}, "logits spanning 800");
  const RowResult r = row_of(p, {0, 0, 0}, Tier::kFast);
  EXPECT_GT(r.score_gap_max, 700.0);
}

TEST(OracleFastVsGold, TiesAtTheMaximum) {
  constexpr int64_t kKeys = 33, kDim = 8;
  TestProblem p = make_shape(Format::kBF16, 1, kKeys, kDim);
  Rng rng(13);
  fill(&p, 'q', [&](int64_t) { return rng.normal(0, 2); });
  std::vector<double> top(kDim);
  for (double& x : top) x = testing::round_to(Format::kBF16, rng.normal(0, 2));
  fill(&p, 'k', [&](int64_t e) {
    const int64_t j = e / kDim;
    return j % 4 == 1 ? top[static_cast<size_t>(e % kDim)] : rng.normal(0, 1);  // keys 1, 5, 9, ... tie
  });
  fill(&p, 'v', [&](int64_t) { return rng.uniform(-1, 1); });
  expect_tiers_agree(p, {0, 0, 0}, "ties");
}

TEST(OracleFastVsGold, LargeMaximumWithSmallSpread) {
  // Scores around 1.6e4 that differ by O(1): the max needs its low part (m_lo) for l relative to a kernel's m.
  constexpr int64_t kKeys = 50, kDim = 32;
  TestProblem p = make_shape(Format::kF32, 1, kKeys, kDim);
  p.scale = 1.0;
  Rng rng(14);
  fill(&p, 'q', [](int64_t) { return 4.0; });
  fill(&p, 'k', [&](int64_t) { return 120.0 + rng.normal(0, 0.05); });
  fill(&p, 'v', [&](int64_t) { return rng.normal(0, 1); });
  expect_tiers_agree(p, {0, 0, 0}, "large m");
  EXPECT_GT(row_of(p, {0, 0, 0}, Tier::kFast).m, 1e3);
}

TEST(OracleFastVsGold, SubnormalInputs) {
  for (const Format format : {Format::kF32, Format::kF16, Format::kBF16}) {
    TestProblem p = make_shape(format, 1, 20, 8);
    const double tiny = format == Format::kF16 ? 0x1p-20 : 0x1p-130;
    Rng rng(15);
    fill(&p, 'q', [&](int64_t) { return rng.normal(0, 1); });
    fill(&p, 'k', [&](int64_t) { return tiny * rng.normal(0, 1); });
    fill(&p, 'v', [&](int64_t) { return tiny * rng.normal(0, 1); });
    expect_tiers_agree(p, {0, 0, 0}, std::string("subnormal ") + to_string(format));
  }
}

TEST(OracleFastVsGold, WindowRowsPastKeyZero) {
  // Rows whose keys start past key 0 read only their window: both tiers, every row of two windows.
  for (const Visibility window : {Visibility{5, 2, Alignment::kBottomRight}, Visibility{30, 0, Alignment::kTopLeft}}) {
    TestProblem p = make_shape(Format::kBF16, 40, 90, 16, window);
    fill_normal(&p, 23, 2.0, 2.0, 1.0);
    for (int64_t i = 0; i < p.seqlen_q; ++i) {
      ASSERT_GT(visible_keys(p.view(), i).size(), 0);
      expect_tiers_agree(p, {0, 0, i}, to_string(window) + " row " + std::to_string(i));
    }
  }
}

TEST(OracleFastVsGold, SoftcapSinkAndWindowRows) {
  // Softcaps that saturate tanh (0.5) or barely bend it (30), sinks below, among and above the scores and far from
  // them, windows starting past key 0; all rows of each problem, both tiers within the sum of their errors.
  Rng rng(2025);
  int rows = 0;
  const Visibility visibilities[] = {kAllKeys, kCausalBottomRight, Visibility{9, 3, Alignment::kTopLeft}};
  for (const Format format : {Format::kF32, Format::kF16, Format::kBF16}) {
    for (const double cap : {0.0, 0.5, 5.0, 30.0}) {
      for (const int64_t seqlen_k : {1, 7, 64, 300}) {
        for (const int64_t head_dim : {1, 16, 128}) {
          const Visibility visibility = visibilities[rows % 3];
          TestProblem p = make_shape(format, 3, seqlen_k, head_dim, visibility, 1, 4, 2);
          const double sigma = rng.uniform(0.3, 4.0);
          fill_normal(&p, rng.next(), sigma, sigma, 1.0);
          p.softcap = cap;
          const double far = rng.below(2) == 0 ? 900.0 : 50.0;
          p.sink = {testing::round_to(Format::kF32, rng.normal(0, 2)), -far, far, -kInf};
          for (int64_t h = 0; h < 4; ++h) {
            for (int64_t i = 0; i < 3; ++i) {
              const std::string what = std::string(to_string(format)) + " cap " + std::to_string(cap) +
                                       " sk=" + std::to_string(seqlen_k) + " d=" + std::to_string(head_dim) + " " +
                                       to_string(visibility) + " head " + std::to_string(h) + " row " +
                                       std::to_string(i);
              expect_tiers_agree(p, {0, h, i}, what);
              ++rows;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(rows, 500);
}

// ---- gold's elementary functions

TEST(OracleGold, ExpAndLogWithinTheirAllowance) {
  // Anchor the 166-bit reference on published constants first (e and ln 2 to 50 digits).
  const Wide e("2.7182818284590452353602874713526624977572470936999595749669");
  const Wide ln2("0.69314718055994530941723212145817656807550013436025525412068");
  EXPECT_LT(abs(exp(Wide(1)) - e), Wide("1e-48"));
  EXPECT_LT(abs(log(Wide(2)) - ln2), Wide("1e-48"));
  // Relative errors in units of the allowance: kGoldFunctionUlps (+ kGoldExpUlpsPerUnit |x| for exp) ulps.
  const double ulp = 2 * detail::kQuadUnit;
  double worst_exp = 0, worst_log = 0, worst_exp_ulp = 0;
  Rng rng(16);
  for (int t = 0; t < 400; ++t) {
    const double x = t < 200 ? rng.uniform(-1000, 80) : rng.normal(0, 1) * std::pow(2.0, -rng.uniform(0, 60));
    const Wide ref_exp = exp(Wide(x));
    const double exp_rel = static_cast<double>(abs((Wide(exp(Quad(x))) - ref_exp) / ref_exp));
    worst_exp_ulp = std::max(worst_exp_ulp, exp_rel / ulp);
    worst_exp =
        std::max(worst_exp, exp_rel / ((detail::kGoldFunctionUlps + detail::kGoldExpUlpsPerUnit * std::fabs(x)) * ulp));
    const double y =
        t < 200 ? std::exp(rng.uniform(-700, 700)) : 1.0 + rng.uniform(-0.5, 0.5) * std::pow(2.0, -rng.uniform(1, 40));
    if (y == 1.0) continue;  // log(1) = 0 has no relative error to measure
    const Wide ref_log = log(Wide(y));
    const double log_rel = static_cast<double>(abs((Wide(log(Quad(y))) - ref_log) / ref_log));
    worst_log = std::max(worst_log, log_rel / (detail::kGoldFunctionUlps * ulp));
  }
  std::printf("gold exp: worst %.1f ulp, %.3f of its allowance; log: %.3f of its allowance (%.0f ulp)\n", worst_exp_ulp,
              worst_exp, worst_log, detail::kGoldFunctionUlps);
  EXPECT_LE(worst_exp, 1.0);
  EXPECT_LE(worst_log, 1.0);
}

TEST(OracleGold, TanhWithinItsAllowance) {
  // The capped scores' tanh: small arguments (Boost's series), moderate ones (sinh/cosh from exp), saturated ones.
  const double ulp = 2 * detail::kQuadUnit;
  double worst = 0, worst_ulp = 0;
  Rng rng(17);
  for (int t = 0; t < 600; ++t) {
    const double x = t < 200   ? rng.normal(0, 1) * std::pow(2.0, -rng.uniform(0, 60))
                     : t < 400 ? rng.uniform(-45, 45)
                               : rng.uniform(-3000, 3000);
    if (x == 0.0) continue;
    const Wide ref = tanh(Wide(x));
    const double rel = static_cast<double>(abs((Wide(tanh(Quad(x))) - ref) / ref));
    worst_ulp = std::max(worst_ulp, rel / ulp);
    worst = std::max(worst, rel / (detail::gold_tanh_ulps(std::fabs(x)) * ulp));
  }
  std::printf("gold tanh: worst %.1f ulp, %.3f of its allowance\n", worst_ulp, worst);
  EXPECT_LE(worst, 1.0);
}

// ---- visibility

// Every visibility the tests sweep: the three the kernel has, and sliding windows in both alignments (INT64_MAX:
// a window whose edges lie past any key, whose arithmetic must not overflow).
std::vector<Visibility> visibilities() {
  constexpr int64_t kWidest = std::numeric_limits<int64_t>::max();
  std::vector<Visibility> out = {kAllKeys, kCausalTopLeft, kCausalBottomRight};
  for (const Alignment alignment : {Alignment::kTopLeft, Alignment::kBottomRight}) {
    for (const int64_t left : {int64_t{-1}, int64_t{0}, int64_t{1}, int64_t{3}, int64_t{17}, kWidest}) {
      for (const int64_t right : {int64_t{-1}, int64_t{0}, int64_t{1}, int64_t{2}, int64_t{9}, kWidest}) {
        out.push_back(Visibility{left, right, alignment});
      }
    }
  }
  return out;
}

TEST(OracleVisibility, PredicateReadsLikeTheFormulas) {
  // seqlen_q 3, seqlen_k 5: top-left row i sees keys 0..i, bottom-right row i sees keys 0..i+2.
  Problem p;
  p.seqlen_q = 3;
  p.seqlen_k = 5;
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = -1; j <= 5; ++j) {
      const bool key = 0 <= j && j < 5;
      p.visibility = kAllKeys;
      EXPECT_EQ(visible(p, i, j), key) << i << "," << j;
      p.visibility = kCausalTopLeft;
      EXPECT_EQ(visible(p, i, j), key && j <= i) << i << "," << j;
      p.visibility = kCausalBottomRight;
      EXPECT_EQ(visible(p, i, j), key && j <= i + 2) << i << "," << j;
    }
  }
  // seqlen_q 5 > seqlen_k 3, bottom-right: rows 0 and 1 see nothing, row 4 sees every key.
  p.seqlen_q = 5;
  p.seqlen_k = 3;
  p.visibility = kCausalBottomRight;
  EXPECT_FALSE(visible(p, 1, 0));
  EXPECT_TRUE(visible(p, 2, 0));
  EXPECT_FALSE(visible(p, 2, 1));
  EXPECT_TRUE(visible(p, 4, 2));
  // A window of one key either side of the diagonal, top-left: row 3 sees keys 2, 3, 4.
  p.seqlen_q = p.seqlen_k = 8;
  p.visibility = Visibility{1, 1, Alignment::kTopLeft};
  EXPECT_EQ(visible_keys(p, 3).begin, 2);
  EXPECT_EQ(visible_keys(p, 3).end, 5);
}

TEST(OracleVisibility, ClosedFormEqualsPredicate) {
  Problem p;
  int64_t rows = 0;
  for (const Visibility& visibility : visibilities()) {
    p.visibility = visibility;
    for (p.seqlen_q = 0; p.seqlen_q <= 40; ++p.seqlen_q) {
      for (p.seqlen_k = 0; p.seqlen_k <= 40; ++p.seqlen_k) {
        for (int64_t i = 0; i < p.seqlen_q; ++i, ++rows) {
          const KeySpan keys = visible_keys(p, i);
          ASSERT_TRUE(0 <= keys.begin && keys.begin <= keys.end && keys.end <= p.seqlen_k)
              << to_string(visibility) << " sq=" << p.seqlen_q << " sk=" << p.seqlen_k << " i=" << i;
          for (int64_t j = -2; j < p.seqlen_k + 2; ++j) {
            ASSERT_EQ(visible(p, i, j), keys.begin <= j && j < keys.end)
                << to_string(visibility) << " sq=" << p.seqlen_q << " sk=" << p.seqlen_k << " i=" << i << " j=" << j;
          }
        }
      }
    }
  }
  EXPECT_GT(rows, 0);
}

TEST(OracleVisibility, WindowedRowEqualsTheUnmaskedRowOfItsKeys) {
  // A row whose keys start past key 0 reads exactly those keys: the same row over a problem holding only them,
  // with every key visible, is the same computation.
  TestProblem p = make_shape(Format::kBF16, 12, 20, 8, Visibility{3, 2, Alignment::kBottomRight});
  fill_normal(&p, 5, 1.5, 1.5, 1);
  const int64_t i = 6;
  const KeySpan keys = visible_keys(p.view(), i);
  ASSERT_EQ(keys.begin, 11);  // diagonal key 6 + 20 - 12 = 14; keys 11..16
  ASSERT_EQ(keys.end, 17);
  TestProblem sub = make_shape(Format::kBF16, 1, keys.size(), 8);
  sub.scale = p.scale;
  std::copy(p.q.begin() + i * 8, p.q.begin() + (i + 1) * 8, sub.q.begin());
  std::copy(p.k.begin() + keys.begin * 8, p.k.begin() + keys.end * 8, sub.k.begin());
  std::copy(p.v.begin() + keys.begin * 8, p.v.begin() + keys.end * 8, sub.v.begin());
  for (const Tier tier : kTiers) {
    const RowResult got = row_of(p, {0, 0, i}, tier), want = row_of(sub, {0, 0, 0}, tier);
    EXPECT_EQ(got.visible, keys.size());
    EXPECT_EQ(got.o, want.o) << label(tier);
    EXPECT_EQ(got.lse, want.lse) << label(tier);
    EXPECT_EQ(got.l, want.l) << label(tier);
  }
}

// ---- sampling

TEST(OracleSampling, SmallProblemsAreCheckedInFull) {
  TestProblem p = make_shape(Format::kF16, 7, 5, 4, kAllKeys, 2, 3, 1);
  const std::vector<RowRef> rows = sample_rows(p.view(), 64, 64, 1);
  ASSERT_EQ(rows.size(), 42u);
  EXPECT_EQ(rows.front(), (RowRef{0, 0, 0}));
  EXPECT_EQ(rows.back(), (RowRef{1, 2, 6}));
  EXPECT_TRUE(std::is_sorted(rows.begin(), rows.end()));
}

TEST(OracleSampling, LargeProblemsGetStructuralAndRandomRows) {
  // causal-br with seqlen_q 1000 > seqlen_k 600: rows 0..399 are fully masked; row i sees i - 399 keys.
  TestProblem p = make_shape(Format::kF16, 1000, 600, 1, kCausalBottomRight, 2, 3, 3);
  constexpr int32_t kBlockM = 64, kBlockN = 128;
  const std::vector<RowRef> rows = sample_rows(p.view(), kBlockM, kBlockN, 77, 4096, 64);
  const std::set<RowRef> have(rows.begin(), rows.end());
  EXPECT_EQ(have.size(), rows.size());
  EXPECT_TRUE(std::is_sorted(rows.begin(), rows.end()));
  for (const RowRef pair : {RowRef{0, 0, 0}, RowRef{1, 2, 0}}) {
    for (const int64_t i : {0, 999, 63, 64, 65, 127, 128, 129, 959, 960, 961, 399, 400, 526, 527, 528}) {
      EXPECT_EQ(have.count(RowRef{pair.b, pair.h, i}), 1u) << pair.b << "," << pair.h << "," << i;
    }
  }
  // Deterministic for a seed; another seed moves only the random part.
  EXPECT_EQ(rows, sample_rows(p.view(), kBlockM, kBlockN, 77, 4096, 64));
  const std::vector<RowRef> other = sample_rows(p.view(), kBlockM, kBlockN, 78, 4096, 64);
  EXPECT_NE(rows, other);
  const std::vector<RowRef> structural_only = sample_rows(p.view(), kBlockM, kBlockN, 77, 4096, 0);
  EXPECT_GE(rows.size(), structural_only.size() + 60);  // 64 random rows, a few may coincide
  EXPECT_LE(rows.size(), structural_only.size() + 64);
  int64_t middle_heads = 0;
  for (const RowRef& r : rows) middle_heads += (r.b == 0 && r.h != 0) || (r.b == 1 && r.h != 2) ? 1 : 0;
  EXPECT_GT(middle_heads, 0);  // the random sample reaches the (batch, head) pairs in between
}

TEST(OracleSampling, WindowEdgesAndTrailingMaskedRows) {
  // A top-left window of 100 keys to the left, seqlen_q 1000 > seqlen_k 600: row i sees keys [i - 100, i] within
  // [0, 600), so rows 700..999 see none (a trailing masked run), and both window edges cross K tiles.
  TestProblem p = make_shape(Format::kF16, 1000, 600, 1, Visibility{100, 0, Alignment::kTopLeft}, 1, 2, 2);
  constexpr int32_t kBlockM = 64, kBlockN = 128;
  const std::vector<RowRef> rows = sample_rows(p.view(), kBlockM, kBlockN, 5, 1024, 0);
  const std::set<RowRef> have(rows.begin(), rows.end());
  for (const int64_t h : {0, 1}) {
    // the masked run and its neighbours; right edges (keys end at 127/128/129...); left edges (keys begin there)
    for (const int64_t i : {699, 700, 999, 126, 127, 128, 510, 511, 512, 227, 228, 229, 611, 612, 613}) {
      EXPECT_EQ(have.count(RowRef{0, h, i}), 1u) << h << "," << i;
    }
  }
  EXPECT_EQ(visible_keys(p.view(), 699).size(), 1);
  EXPECT_EQ(visible_keys(p.view(), 700).size(), 0);
  EXPECT_EQ(visible_keys(p.view(), 227).begin, 127);  // one before the boundary at key 128
}

// ---- throughput (quoted in docs/error-model.md): seqlen_k 4096, head_dim 128, one core

// compute_rows() in parallel is compute_row() bit for bit, whatever the thread count: rows of every length (a
// causal mask), a softcap, a sink, a NaN in one row's keys; both tiers.
bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof(a)) == 0; }

void expect_same_row(const RowResult& a, const RowResult& b, const std::string& what) {
  ASSERT_EQ(a.o.size(), b.o.size()) << what;
  for (size_t k = 0; k < a.o.size(); ++k) {
    EXPECT_TRUE(same_bits(a.o[k], b.o[k]) && same_bits(a.o_err[k], b.o_err[k]) &&
                same_bits(a.dev_pv[k], b.dev_pv[k]) && same_bits(a.dev_pv_gap[k], b.dev_pv_gap[k]) &&
                same_bits(a.dev_pv_score_sq[k], b.dev_pv_score_sq[k]) &&
                same_bits(a.abs_pv[k], b.abs_pv[k]) && same_bits(a.abs_v_sum[k], b.abs_v_sum[k]))
        << what << " col " << k;
  }
  EXPECT_TRUE(same_bits(a.lse, b.lse) && same_bits(a.m, b.m) && same_bits(a.l, b.l) &&
              same_bits(a.lse_err, b.lse_err) && same_bits(a.score_gap_weighted, b.score_gap_weighted) &&
              same_bits(a.score_flush_max, b.score_flush_max))
      << what;
  EXPECT_EQ(a.nonfinite_input, b.nonfinite_input) << what;
  EXPECT_EQ(a.nonfinite_score, b.nonfinite_score) << what;
}

TEST(OracleRows, ParallelIsRowByRowBitForBit) {
  TestProblem p = make_shape(Format::kBF16, 37, 300, 24, kCausalBottomRight, 1, 2, 1);
  fill_normal(&p, 5, 1, 2, 1);
  p.softcap = 30.0;
  p.sink = {1.5, -2.0};
  p.k[7 * 24 + 3] = std::numeric_limits<double>::quiet_NaN();  // key 7: rows that see it are NaN rows
  const Problem problem = p.view();
  std::vector<RowRef> rows;
  for (int64_t h = 0; h < 2; ++h) {
    for (int64_t i = 36; i >= 0; --i) rows.push_back({0, h, i});
  }
  for (const Tier tier : {Tier::kFast, Tier::kGold}) {
    const std::span<const RowRef> some = tier == Tier::kGold ? std::span<const RowRef>(rows).first(12)
                                                             : std::span<const RowRef>(rows);
    for (const int threads : {1, 3, 0}) {
      RowsOptions options;
      options.threads = threads;
      int64_t last_done = -1, last_total = -1;
      options.progress = [&](int64_t done, int64_t total) {
        EXPECT_GE(done, last_done);
        last_done = done;
        last_total = total;
      };
      std::vector<int> per_row_calls(some.size(), 0);
      options.per_row = [&](size_t index, const RowResult& r) {
        ++per_row_calls[index];
        EXPECT_EQ(r.row, some[index]);
      };
      const std::vector<RowResult> got = compute_rows(problem, some, tier, options);
      ASSERT_EQ(got.size(), some.size());
      int64_t terms = 0;
      for (size_t r = 0; r < some.size(); ++r) {
        expect_same_row(got[r], compute_row(problem, some[r], tier),
                        std::string(to_string(tier)) + " threads " + std::to_string(threads) + " row " +
                            std::to_string(r));
        EXPECT_EQ(per_row_calls[r], 1);
        terms += row_terms(problem, some[r]);
      }
      EXPECT_EQ(last_done, terms);
      EXPECT_EQ(last_total, terms);
    }
  }
}

TEST(OracleRows, ARowOutsideTheProblemThrowsAfterTheLoop) {
  TestProblem p = make_shape(Format::kF32, 4, 8, 4);
  fill_normal(&p, 6, 1, 1, 1);
  const std::vector<RowRef> rows = {{0, 0, 0}, {0, 0, 9}, {0, 0, 3}};
  EXPECT_THROW(compute_rows(p.view(), rows, Tier::kFast), std::out_of_range);
}

// ---- per-sequence lengths (variable-length batches, paged caches)

// Sequences of their own (rows, keys) inside arrays sized seqlen_q x seqlen_k: long and short ones, one with no row,
// one with no key, one of the full size, one of a single row and key.
struct Sequence {
  int64_t rows, keys;
};
constexpr Sequence kSequences[] = {{7, 5}, {3, 13}, {0, 7}, {4, 0}, {13, 11}, {1, 1}, {13, 13}};
constexpr int64_t kVarlenSeqlenQ = 13, kVarlenSeqlenK = 13;

TestProblem varlen_problem(Format format, Visibility visibility, int64_t head_dim, uint64_t seed) {
  const int64_t batch = static_cast<int64_t>(std::size(kSequences));
  TestProblem p = make_shape(format, kVarlenSeqlenQ, kVarlenSeqlenK, head_dim, visibility, batch, 2, 1);
  fill_normal(&p, seed, 1.5, 1.5, 1.0);
  for (const Sequence& s : kSequences) {
    p.seqlens_q.push_back(s.rows);
    p.seqlens_k.push_back(s.keys);
  }
  // The unused rows past each sequence's length hold NaN: none may reach a result.
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < p.heads_q; ++h) {
      for (int64_t i = p.seqlens_q[static_cast<size_t>(b)]; i < p.seqlen_q; ++i) {
        for (int64_t d = 0; d < head_dim; ++d) {
          p.q[static_cast<size_t>(((b * p.heads_q + h) * p.seqlen_q + i) * head_dim + d)] = kNaN;
        }
      }
    }
    for (int64_t h = 0; h < p.heads_kv; ++h) {
      for (int64_t j = p.seqlens_k[static_cast<size_t>(b)]; j < p.seqlen_k; ++j) {
        for (int64_t d = 0; d < head_dim; ++d) {
          const size_t at = static_cast<size_t>(((b * p.heads_kv + h) * p.seqlen_k + j) * head_dim + d);
          p.k[at] = p.v[at] = kNaN;
        }
      }
    }
  }
  return p;
}

// Sequence b of a varlen problem as a problem of its own: batch 1, its own lengths, its data copied.
TestProblem sequence_alone(const TestProblem& p, int64_t b) {
  const Sequence s = kSequences[b];
  TestProblem one = make_shape(p.format, s.rows, s.keys, p.head_dim, p.visibility, 1, p.heads_q, p.heads_kv);
  one.scale = p.scale;
  one.softcap = p.softcap;
  one.sink = p.sink;
  const int64_t d = p.head_dim;
  for (int64_t h = 0; h < p.heads_q; ++h) {
    const auto from = p.q.begin() + ((b * p.heads_q + h) * p.seqlen_q) * d;
    std::copy(from, from + s.rows * d, one.q.begin() + h * s.rows * d);
  }
  for (int64_t h = 0; h < p.heads_kv; ++h) {
    const int64_t at = ((b * p.heads_kv + h) * p.seqlen_k) * d;
    std::copy(p.k.begin() + at, p.k.begin() + at + s.keys * d, one.k.begin() + h * s.keys * d);
    std::copy(p.v.begin() + at, p.v.begin() + at + s.keys * d, one.v.begin() + h * s.keys * d);
  }
  return one;
}

// The message of the std::invalid_argument `f` throws ("" if none).
template <class F>
std::string invalid_argument_of(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(OracleVisibility, PerSequenceLengthsAlignEachSequenceWithItsOwn) {
  // Every (rows, keys) pair up to the arrays' 9 x 11 as one sequence of a batch: its rows see exactly what the rows
  // of a problem of its own lengths see, the closed form equals the predicate on every (i, j), and no key at or past
  // the sequence's own length is visible.
  Problem p;
  p.seqlen_q = 9;
  p.seqlen_k = 11;
  std::vector<int64_t> seqlens_q, seqlens_k;
  for (int64_t rows = 0; rows <= p.seqlen_q; ++rows) {
    for (int64_t keys = 0; keys <= p.seqlen_k; ++keys) {
      seqlens_q.push_back(rows);
      seqlens_k.push_back(keys);
    }
  }
  p.batch = static_cast<int64_t>(seqlens_q.size());
  p.seqlens_q = seqlens_q;
  p.seqlens_k = seqlens_k;
  int64_t rows_checked = 0;
  for (const Visibility& visibility : visibilities()) {
    p.visibility = visibility;
    for (int64_t b = 0; b < p.batch; ++b) {
      Problem alone;
      alone.batch = 1;
      alone.visibility = visibility;
      alone.seqlen_q = seqlens_q[static_cast<size_t>(b)];
      alone.seqlen_k = seqlens_k[static_cast<size_t>(b)];
      ASSERT_EQ(sequence_seqlen_q(p, b), alone.seqlen_q);
      ASSERT_EQ(sequence_seqlen_k(p, b), alone.seqlen_k);
      for (int64_t i = 0; i < alone.seqlen_q; ++i, ++rows_checked) {
        const KeySpan keys = visible_keys(p, b, i);
        const KeySpan own = visible_keys(alone, i);
        const std::string where = to_string(visibility) + " sq=" + std::to_string(alone.seqlen_q) +
                                  " sk=" + std::to_string(alone.seqlen_k) + " i=" + std::to_string(i);
        ASSERT_TRUE(keys.begin == own.begin && keys.end == own.end) << where;
        ASSERT_TRUE(0 <= keys.begin && keys.begin <= keys.end && keys.end <= alone.seqlen_k) << where;
        for (int64_t j = -2; j < p.seqlen_k + 2; ++j) {
          ASSERT_EQ(visible(p, b, i, j), keys.begin <= j && j < keys.end) << where << " j=" << j;
          ASSERT_EQ(visible(p, b, i, j), visible(alone, i, j)) << where << " j=" << j;
        }
      }
    }
  }
  EXPECT_GT(rows_checked, 20000);
  // As the formula reads: the sequence of 3 rows and 7 keys, bottom-right causal, row i sees j <= i + 7 - 3; key 7
  // lies inside the arrays (11 keys) but past the sequence's own.
  const int64_t three_by_seven = 3 * (p.seqlen_k + 1) + 7;
  p.visibility = kCausalBottomRight;
  EXPECT_TRUE(visible(p, three_by_seven, 0, 4));
  EXPECT_FALSE(visible(p, three_by_seven, 0, 5));
  EXPECT_TRUE(visible(p, three_by_seven, 2, 6));
  EXPECT_FALSE(visible(p, three_by_seven, 2, 7));
  // Without a sequence the answer would be some sequence's: refused. With empty spans b makes no difference.
  EXPECT_THROW(visible(p, 0, 0), std::invalid_argument);
  EXPECT_THROW(visible_keys(p, 0), std::invalid_argument);
  Problem dense;
  dense.batch = 3;
  dense.seqlen_q = 5;
  dense.seqlen_k = 7;
  dense.visibility = kCausalBottomRight;
  for (int64_t i = 0; i < 5; ++i) {
    EXPECT_EQ(visible_keys(dense, 2, i).end, visible_keys(dense, i).end);
    for (int64_t j = 0; j < 7; ++j) EXPECT_EQ(visible(dense, 1, i, j), visible(dense, i, j));
  }
}

TEST(OracleVarlen, RowsEqualTheirSequenceComputedAlone) {
  // Each sequence of a varlen batch gives, bit for bit, the rows of the same data as a problem of its own, in both
  // tiers, the emulated reference and the running sums, with NaN in every unused row past the sequences' lengths:
  // none reaches a result. Every visibility, a softcap and a sink.
  int64_t rows = 0;
  for (const Visibility& visibility : visibilities()) {
    for (const bool extras : {false, true}) {
      TestProblem p = varlen_problem(Format::kBF16, visibility, 8, 91 + rows);
      if (extras) {
        p.softcap = 20.0;
        p.sink = {0.5, -1.0};
      }
      const Problem problem = p.view();
      std::vector<RowRef> valid;
      for (int64_t b = 0; b < p.batch; ++b) {
        const TestProblem one = sequence_alone(p, b);
        for (int64_t h = 0; h < p.heads_q; ++h) {
          for (int64_t i = 0; i < one.seqlen_q; ++i, ++rows) {
            const RowRef row{b, h, i}, own{0, h, i};
            valid.push_back(row);
            const std::string what = to_string(visibility) + (extras ? " cap+sink" : "") + " sequence " +
                                     std::to_string(b) + " head " + std::to_string(h) + " row " + std::to_string(i);
            // Gold on a subset: it is the same view of the row, and costs more.
            for (const Tier tier : kTiers) {
              if (tier == Tier::kGold && (i % 3 != 0 || h != 0)) continue;
              const RowResult got = compute_row(problem, row, tier), want = row_of(one, own, tier);
              expect_same_row(got, want, what + " " + label(tier));
              EXPECT_EQ(got.visible, want.visible) << what;
              EXPECT_EQ(got.seqlen_k, kSequences[b].keys) << what;
              EXPECT_TRUE(same_bits(got.m_err, want.m_err) && same_bits(got.l_rel_err, want.l_rel_err)) << what;
              EXPECT_FALSE(got.nonfinite_input) << what;
              EXPECT_FALSE(std::isnan(got.lse) || std::isnan(got.m) || std::isnan(got.l)) << what;
              for (const double o : got.o) EXPECT_TRUE(std::isfinite(o)) << what;
            }
            // The emulated reference keys its pseudo-random exp2 and tanh errors by the row's place (b, h, i): the
            // same row of sequence 0 is the same computation, and no row reads an unused (NaN) row.
            const RowResult exact = compute_row(problem, row, Tier::kFast);
            const std::vector<double> emulated =
                emulated_row(problem, row, Format::kBF16, Arithmetic::kTensorCore, 4, &exact);
            for (const double o : emulated) EXPECT_TRUE(std::isfinite(o)) << what << " (emulated)";
            if (b == 0) {
              EXPECT_EQ(emulated, emulated_row(one.view(), own, Format::kBF16, Arithmetic::kTensorCore, 4, &exact))
                  << what;
            }
            const OrderedSums sums = ordered_sums(problem, row, exact, 4);
            const OrderedSums sums_alone = ordered_sums(one.view(), own, exact, 4);
            EXPECT_TRUE(sums.valid == sums_alone.valid && sums.pv_keys == sums_alone.pv_keys &&
                        sums.l_chain == sums_alone.l_chain && sums.tile_rises == sums_alone.tile_rises &&
                        sums.tiles == sums_alone.tiles)
                << what;
            EXPECT_EQ(row_terms(problem, row), row_terms(one.view(), own)) << what;
          }
        }
      }
      // In parallel, over exactly the valid rows, the same bits.
      const std::vector<RowResult> all = compute_rows(problem, valid, Tier::kFast);
      for (size_t r = 0; r < valid.size(); ++r) {
        expect_same_row(all[r], compute_row(problem, valid[r], Tier::kFast), "compute_rows " + to_string(visibility));
      }
    }
  }
  EXPECT_GT(rows, 5000);
}

TEST(OracleVarlen, SequencesWithoutRowsOrKeys) {
  const TestProblem p = varlen_problem(Format::kF32, kCausalBottomRight, 4, 7);
  const Problem problem = p.view();
  // Sequence 2 has no row: each of its rows, like a row past any sequence's length, is outside the problem.
  EXPECT_THROW(compute_row(problem, {2, 0, 0}, Tier::kFast), std::out_of_range);
  EXPECT_THROW(compute_row(problem, {0, 1, 7}, Tier::kGold), std::out_of_range);  // sequence 0 has 7 rows
  EXPECT_THROW(compute_row(problem, {7, 0, 0}, Tier::kFast), std::out_of_range);  // no sequence 7
  EXPECT_EQ(row_terms(problem, {2, 0, 0}), 0);
  const std::vector<RowRef> rows = {{0, 0, 6}, {0, 0, 7}, {4, 1, 12}};
  EXPECT_THROW(compute_rows(problem, rows, Tier::kFast), std::out_of_range);
  // Sequence 3 has rows and no key: every row is empty (O = 0, LSE = m = -inf, l = 0), none reads a key (all NaN).
  for (int64_t i = 0; i < 4; ++i) {
    for (const Tier tier : kTiers) {
      const RowResult r = compute_row(problem, {3, 1, i}, tier);
      EXPECT_EQ(r.visible, 0);
      EXPECT_EQ(r.seqlen_k, 0);
      expect_empty_row(r);
    }
  }
  // With a sink its rows are the sink's alone.
  TestProblem with_sink = p;
  with_sink.sink = {1.25, -3.0};
  const RowResult sink_only = compute_row(with_sink.view(), {3, 0, 2}, Tier::kFast);
  EXPECT_EQ(sink_only.lse, 1.25);
  EXPECT_EQ(sink_only.l, 1.0);
  for (const double o : sink_only.o) EXPECT_EQ(o, 0.0);
}

TEST(OracleVarlen, InvalidLengthsNameTheirField) {
  TestProblem p = make_shape(Format::kF16, 6, 9, 4, kCausalTopLeft, 2, 1, 1);
  fill_normal(&p, 3, 1, 1, 1);
  const auto message = [&](const std::vector<int64_t>& seqlens_q, const std::vector<int64_t>& seqlens_k) {
    p.seqlens_q = seqlens_q;
    p.seqlens_k = seqlens_k;
    const Problem problem = p.view();
    const std::string checked = invalid_argument_of([&] { check_sequence_lengths(problem); });
    // Every entry point reports the same fault, before any row is computed.
    EXPECT_EQ(invalid_argument_of([&] { sample_rows(problem, 64, 64, 1); }), checked);
    const std::vector<RowRef> rows = {{0, 0, 0}};
    EXPECT_EQ(invalid_argument_of([&] { compute_rows(problem, rows, Tier::kFast); }), checked);
    return checked;
  };
  EXPECT_EQ(message({}, {}), "");
  EXPECT_EQ(message({6, 0}, {9, 0}), "");
  EXPECT_NE(message({6, 6, 6}, {}).find("seqlens_q has 3 entries"), std::string::npos);
  EXPECT_NE(message({}, {4}).find("seqlens_k has 1 entries"), std::string::npos);
  EXPECT_NE(message({6, 7}, {}).find("seqlens_q[1] = 7 is outside [0, seqlen_q = 6]"), std::string::npos);
  EXPECT_NE(message({}, {-1, 9}).find("seqlens_k[0] = -1 is outside [0, seqlen_k = 9]"), std::string::npos);
  EXPECT_NE(message({3, 3}, {10, 2}).find("seqlens_k[0] = 10"), std::string::npos);
  // The row's own sequence is checked as the row is computed, and so are the accessors.
  p.seqlens_q = {6, 6};
  p.seqlens_k = {9, 12};
  const Problem problem = p.view();
  EXPECT_NE(invalid_argument_of([&] { compute_row(problem, {1, 0, 0}, Tier::kFast); }).find("seqlens_k[1]"),
            std::string::npos);
  EXPECT_NO_THROW(compute_row(problem, {0, 0, 0}, Tier::kFast));
  EXPECT_NE(invalid_argument_of([&] { sequence_seqlen_k(problem, 1); }).find("seqlens_k[1] = 12"), std::string::npos);
  EXPECT_THROW(sequence_seqlen_q(problem, 2), std::out_of_range);
}

TEST(OracleSampling, PerSequenceRowsOnlyAndEachSequencesStructure) {
  // Small: every valid row, nothing past a sequence's length.
  {
    const TestProblem p = varlen_problem(Format::kF16, kCausalBottomRight, 1, 1);
    const std::vector<RowRef> rows = sample_rows(p.view(), 64, 64, 1);
    size_t valid = 0;
    for (const Sequence& s : kSequences) valid += static_cast<size_t>(2 * s.rows);
    ASSERT_EQ(rows.size(), valid);
    EXPECT_TRUE(std::is_sorted(rows.begin(), rows.end()));
    for (const RowRef& r : rows) EXPECT_LT(r.i, kSequences[r.b].rows) << r.b << "," << r.h << "," << r.i;
  }
  // Large, causal bottom-right in arrays of 1000 x 800 rows and keys: sequence 0 (1000 rows, 600 keys) masks rows
  // 0..399 and its diagonal crosses key 128 at rows 526..528; sequence 1 has no row; sequence 2 (300 rows, 700 keys)
  // masks none, its diagonal d(i) = i + 400 ending at keys 511..513 at rows 110..112 and 639..641 at 238..240;
  // sequence 3 (517 rows, 0 keys) masks every row, its Q tiles ending at rows 511..513.
  TestProblem p = make_shape(Format::kF16, 1000, 800, 1, kCausalBottomRight, 4, 2, 2);
  p.seqlens_q = {1000, 0, 300, 517};
  p.seqlens_k = {600, 800, 700, 0};
  constexpr int32_t kBlockM = 64, kBlockN = 128;
  const std::vector<RowRef> rows = sample_rows(p.view(), kBlockM, kBlockN, 77, 1024, 0);
  const std::set<RowRef> have(rows.begin(), rows.end());
  EXPECT_EQ(have.size(), rows.size());
  for (const RowRef& r : rows) EXPECT_LT(r.i, p.seqlens_q[static_cast<size_t>(r.b)]) << r.b << "," << r.h << "," << r.i;
  const auto expect_rows = [&](RowRef pair, std::initializer_list<int64_t> want) {
    for (const int64_t i : want) {
      EXPECT_EQ(have.count(RowRef{pair.b, pair.h, i}), 1u) << pair.b << "," << pair.h << "," << i;
    }
  };
  expect_rows({0, 0, 0}, {0, 999, 63, 64, 65, 959, 960, 961, 399, 400, 526, 527, 528});
  expect_rows({2, 0, 0}, {0, 299, 63, 64, 65, 255, 256, 257, 110, 111, 112, 238, 239, 240});
  expect_rows({3, 0, 0}, {0, 516, 63, 64, 65, 511, 512, 513});
  expect_rows({3, 1, 0}, {0, 516, 511, 512, 513});  // the last (batch, head) pair
  // Sequence 2's rows come from its own lengths: the arrays' diagonal (i + 800 - 1000) would mask its rows 0..199
  // and take rows 199 and 200; its own masks none.
  EXPECT_EQ(have.count(RowRef{2, 0, 199}) + have.count(RowRef{2, 0, 200}), 0u);
  EXPECT_EQ(visible_keys(p.view(), 2, 0).size(), 401);
  // Random rows are drawn over the valid rows only, and reach the pairs in between.
  const std::vector<RowRef> random = sample_rows(p.view(), kBlockM, kBlockN, 5, 1024, 3000);
  int64_t between = 0;
  for (const RowRef& r : random) {
    EXPECT_LT(r.i, p.seqlens_q[static_cast<size_t>(r.b)]) << r.b << "," << r.h << "," << r.i;
    between += (r.b == 2 && r.h == 1) ? 1 : 0;
  }
  EXPECT_GT(between, 0);
  EXPECT_EQ(random, sample_rows(p.view(), kBlockM, kBlockN, 5, 1024, 3000));
}

// ---- unequal head dims: scores over Q's and K's head_dim columns, O over V's head_dim_v

// Row (b, h, i) by the formulas, in plain loops and long double: s_j = scale sum_{d < head_dim} q_d k_jd over the keys
// the oracle's predicate shows, m = max_j s_j, l = sum_j e^(s_j - m), O_c = sum_j e^(s_j - m) v_jc / l for
// c < head_dim_v, LSE = m + ln l; with A_c = sum_j p_j |v_jc| and max_j S_j, S_j = |scale| sum_d |q_d k_jd|.
struct PlainRow {
  std::vector<long double> o, abs_pv;
  long double lse = 0, score_abs_max = 0;
};
PlainRow plain_row(const TestProblem& tp, RowRef row) {
  const Problem problem = tp.view();
  const int64_t dim = tp.head_dim, dim_v = tp.value_dim(), group = tp.heads_q / tp.heads_kv;
  const double* q = tp.q.data() + ((row.b * tp.heads_q + row.h) * tp.seqlen_q + row.i) * dim;
  std::vector<int64_t> kv_rows;
  std::vector<long double> s;
  PlainRow out;
  for (int64_t j = 0; j < tp.seqlen_k; ++j) {
    if (!visible(problem, row.b, row.i, j)) continue;
    const int64_t kv_row = (row.b * tp.heads_kv + row.h / group) * tp.seqlen_k + j;
    long double dot = 0, abs_dot = 0;
    for (int64_t d = 0; d < dim; ++d) {
      const long double product = static_cast<long double>(q[d]) * tp.k[static_cast<size_t>(kv_row * dim + d)];
      dot += product;
      abs_dot += std::fabs(product);
    }
    kv_rows.push_back(kv_row);
    s.push_back(static_cast<long double>(tp.scale) * dot);
    out.score_abs_max = std::max(out.score_abs_max, std::fabs(static_cast<long double>(tp.scale)) * abs_dot);
  }
  const long double m = *std::max_element(s.begin(), s.end());
  long double l = 0;
  for (const long double sj : s) l += std::exp(sj - m);
  out.o.assign(static_cast<size_t>(dim_v), 0);
  out.abs_pv.assign(static_cast<size_t>(dim_v), 0);
  for (size_t j = 0; j < s.size(); ++j) {
    const long double p = std::exp(s[j] - m) / l;
    for (int64_t c = 0; c < dim_v; ++c) {
      const double v = tp.v[static_cast<size_t>(kv_rows[j] * dim_v + c)];
      out.o[static_cast<size_t>(c)] += p * v;
      out.abs_pv[static_cast<size_t>(c)] += p * std::fabs(v);
    }
  }
  out.lse = m + std::log(l);
  return out;
}

// Every valid row of a problem with per-sequence lengths.
std::vector<RowRef> valid_rows(const TestProblem& p) {
  std::vector<RowRef> rows;
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t h = 0; h < p.heads_q; ++h) {
      for (int64_t i = 0; i < p.seqlens_q[static_cast<size_t>(b)]; ++i) rows.push_back({b, h, i});
    }
  }
  return rows;
}

// The two tiers against the plain loops within their own error (the loops' long double rounding is far below 2^-40
// of A_c), every result sized by head_dim_v, the scores' condition over head_dim, and the work counted over both.
TEST(OracleUnequalHeadDims, OEqualsAPlainLoopInLongDouble) {
  constexpr double kLoopError = 0x1p-40;
  for (const auto& [head_dim, head_dim_v] : testing::kUnequalHeadDims) {
    const TestProblem p = testing::unequal_dims_problem(Format::kBF16, head_dim, head_dim_v, 50 + head_dim_v);
    const Problem problem = p.view();
    const std::string dims = "d=" + std::to_string(head_dim) + " dv=" + std::to_string(head_dim_v);
    for (const RowRef& row : valid_rows(p)) {
      const PlainRow want = plain_row(p, row);
      const std::string where = dims + " row " + std::to_string(row.b) + "," + std::to_string(row.h) + "," +
                                std::to_string(row.i);
      for (const Tier tier : kTiers) {
        const RowResult r = compute_row(problem, row, tier);
        for (const std::vector<double>* column :
             {&r.o, &r.o_err, &r.abs_pv, &r.dev_pv, &r.dev_pv_score, &r.dev_pv_gap, &r.dev_pv_score_sq, &r.abs_v_sum}) {
          ASSERT_EQ(static_cast<int64_t>(column->size()), head_dim_v) << where;
        }
        for (int64_t c = 0; c < head_dim_v; ++c) {
          const size_t cc = static_cast<size_t>(c);
          const double a = static_cast<double>(want.abs_pv[cc]), o = static_cast<double>(want.o[cc]);
          EXPECT_LE(std::fabs(r.o[cc] - o), r.o_err[cc] + kLoopError * a)
              << where << " " << label(tier) << " col " << c;
          EXPECT_LE(std::fabs(r.abs_pv[cc] - a), kLoopError * a) << where << " col " << c;
        }
        const double lse = static_cast<double>(want.lse), s_max = static_cast<double>(want.score_abs_max);
        EXPECT_LE(std::fabs(r.lse - lse), r.lse_err + kLoopError * (1 + std::fabs(lse))) << where << " " << label(tier);
        EXPECT_LE(std::fabs(r.score_abs_max - s_max), kLoopError * s_max) << where;
        EXPECT_FALSE(r.nonfinite_input) << where << " (a NaN of an unused row or key was read)";
      }
      EXPECT_EQ(row_terms(problem, row), compute_row(problem, row, Tier::kFast).visible * ((head_dim + head_dim_v) / 2))
          << where;
    }
  }
}

// Results of the same tier, field by field, bit for bit.
void expect_same_fields(const RowResult& a, const RowResult& b, const std::string& what) {
  expect_same_row(a, b, what);
  ASSERT_EQ(a.dev_pv_score.size(), b.dev_pv_score.size()) << what;
  for (size_t k = 0; k < a.dev_pv_score.size(); ++k) {
    EXPECT_TRUE(same_bits(a.dev_pv_score[k], b.dev_pv_score[k])) << what << " col " << k;
  }
  EXPECT_TRUE(same_bits(a.m_lo, b.m_lo) && same_bits(a.m_err, b.m_err) && same_bits(a.l_rel_err, b.l_rel_err) &&
              same_bits(a.max_abs_v, b.max_abs_v) && same_bits(a.score_abs_max, b.score_abs_max) &&
              same_bits(a.score_abs_weighted, b.score_abs_weighted) && same_bits(a.score_gap_max, b.score_gap_max) &&
              same_bits(a.sink_p, b.sink_p))
      << what;
}

// head_dim_v = head_dim set explicitly is the default, 0, bit for bit: every field of every row in both tiers, and
// the work counted.
TEST(OracleUnequalHeadDims, HeadDimVOfHeadDimIsTheDefaultBitForBit) {
  for (const int64_t head_dim : {1, 3, 64, 128}) {
    TestProblem explicit_dims = testing::unequal_dims_problem(Format::kF16, head_dim, head_dim, 70 + head_dim);
    explicit_dims.softcap = 20.0;
    explicit_dims.sink = {0.5, -1.0, 2.0, -kInf};
    TestProblem implicit_dims = explicit_dims;
    implicit_dims.head_dim_v = 0;
    const Problem with = explicit_dims.view(), without = implicit_dims.view();
    const std::vector<RowRef> rows = valid_rows(explicit_dims);
    for (const Tier tier : kTiers) {
      const std::vector<RowResult> a = compute_rows(with, rows, tier), b = compute_rows(without, rows, tier);
      for (size_t r = 0; r < rows.size(); ++r) {
        expect_same_fields(a[r], b[r],
                           "d=" + std::to_string(head_dim) + " " + label(tier) + " row " + std::to_string(r));
      }
    }
    for (const RowRef& row : rows) EXPECT_EQ(row_terms(with, row), row_terms(without, row));
  }
}

// Column c of O reads column c of V and nothing else: a permutation of V's columns permutes O and every per-column
// field, bit for bit, and leaves LSE, m, l and the scalar fields as they are.
TEST(OracleUnequalHeadDims, PermutingVColumnsPermutesO) {
  Rng rng(88);
  for (const auto& [head_dim, head_dim_v] : testing::kUnequalHeadDims) {
    const TestProblem p = testing::unequal_dims_problem(Format::kF32, head_dim, head_dim_v, 90 + head_dim);
    std::vector<int64_t> permutation(static_cast<size_t>(head_dim_v));
    for (int64_t c = 0; c < head_dim_v; ++c) permutation[static_cast<size_t>(c)] = c;
    for (int64_t c = head_dim_v - 1; c > 0; --c) {
      std::swap(permutation[static_cast<size_t>(c)], permutation[static_cast<size_t>(rng.below(c + 1))]);
    }
    const TestProblem permuted = testing::with_v_columns(p, permutation);
    for (const RowRef& row : valid_rows(p)) {
      for (const Tier tier : kTiers) {
        const RowResult a = compute_row(p.view(), row, tier), b = compute_row(permuted.view(), row, tier);
        const std::string where = "d=" + std::to_string(head_dim) + " dv=" + std::to_string(head_dim_v) + " " +
                                  label(tier) + " row " + std::to_string(row.b) + "," + std::to_string(row.h) + "," +
                                  std::to_string(row.i);
        // The permuted row's column c is the original's column permutation[c]: put it back there.
        RowResult unpermuted = b;
        for (const auto& [from, to] :
             {std::pair{&b.o, &unpermuted.o}, std::pair{&b.o_err, &unpermuted.o_err},
              std::pair{&b.abs_pv, &unpermuted.abs_pv}, std::pair{&b.dev_pv, &unpermuted.dev_pv},
              std::pair{&b.dev_pv_score, &unpermuted.dev_pv_score}, std::pair{&b.dev_pv_gap, &unpermuted.dev_pv_gap},
              std::pair{&b.dev_pv_score_sq, &unpermuted.dev_pv_score_sq},
              std::pair{&b.abs_v_sum, &unpermuted.abs_v_sum}}) {
          for (size_t c = 0; c < permutation.size(); ++c) (*to)[static_cast<size_t>(permutation[c])] = (*from)[c];
        }
        expect_same_fields(a, unpermuted, where);
      }
    }
  }
}

// O's first c columns, and every per-column field of them, are those of a V of only those columns, bit for bit; LSE,
// m and l do not depend on V's width at all.
TEST(OracleUnequalHeadDims, TruncatedVGivesTheFirstColumnsOfO) {
  for (const auto& [head_dim, head_dim_v] : testing::kUnequalHeadDims) {
    const TestProblem p = testing::unequal_dims_problem(Format::kBF16, head_dim, head_dim_v, 110 + head_dim);
    for (const int64_t width : {int64_t{1}, std::max<int64_t>(1, head_dim_v / 2), head_dim_v - 1}) {
      std::vector<int64_t> first(static_cast<size_t>(width));
      for (int64_t c = 0; c < width; ++c) first[static_cast<size_t>(c)] = c;
      const TestProblem truncated = testing::with_v_columns(p, first);
      for (const RowRef& row : valid_rows(p)) {
        for (const Tier tier : kTiers) {
          const RowResult a = compute_row(p.view(), row, tier), b = compute_row(truncated.view(), row, tier);
          const std::string where = "d=" + std::to_string(head_dim) + " dv=" + std::to_string(head_dim_v) +
                                    " first " + std::to_string(width) + " " + label(tier) + " row " +
                                    std::to_string(row.b) + "," + std::to_string(row.h) + "," + std::to_string(row.i);
          ASSERT_EQ(static_cast<int64_t>(b.o.size()), width) << where;
          for (const auto& [wide, narrow] :
               {std::pair{&a.o, &b.o}, std::pair{&a.o_err, &b.o_err}, std::pair{&a.abs_pv, &b.abs_pv},
                std::pair{&a.dev_pv, &b.dev_pv}, std::pair{&a.dev_pv_score, &b.dev_pv_score},
                std::pair{&a.dev_pv_gap, &b.dev_pv_gap}, std::pair{&a.dev_pv_score_sq, &b.dev_pv_score_sq},
                std::pair{&a.abs_v_sum, &b.abs_v_sum}}) {
            for (size_t c = 0; c < static_cast<size_t>(width); ++c) {
              EXPECT_TRUE(same_bits((*wide)[c], (*narrow)[c])) << where << " col " << c;
            }
          }
          // The tier's own score error runs over head_dim, which the truncation keeps.
          EXPECT_TRUE(same_bits(a.lse, b.lse) && same_bits(a.m, b.m) && same_bits(a.m_lo, b.m_lo) &&
                      same_bits(a.l, b.l) && same_bits(a.lse_err, b.lse_err) && same_bits(a.m_err, b.m_err) &&
                      same_bits(a.l_rel_err, b.l_rel_err) && same_bits(a.score_abs_max, b.score_abs_max) &&
                      same_bits(a.score_flush_max, b.score_flush_max))
              << where;
        }
      }
    }
  }
}

// A negative head_dim_v is a caller's bug named by its field, from every entry point; a V sized for the other width
// is a short span. A V of head_dim_v columns narrower than Q and K is a valid problem, and without head_dim_v the same
// V is too short.
TEST(OracleUnequalHeadDims, NegativeHeadDimVAndShortVAreNamed) {
  TestProblem p = testing::unequal_dims_problem(Format::kF16, 128, 64, 5);
  const std::vector<RowRef> rows = {{0, 0, 0}, {1, 3, 2}};
  EXPECT_NO_THROW(compute_rows(p.view(), rows, Tier::kFast));
  p.head_dim_v = -64;
  const Problem negative = p.view();
  const std::string message = invalid_argument_of([&] { compute_row(negative, rows[0], Tier::kFast); });
  EXPECT_NE(message.find("head_dim_v = -64"), std::string::npos) << message;
  EXPECT_EQ(invalid_argument_of([&] { compute_rows(negative, rows, Tier::kGold); }), message);
  EXPECT_EQ(invalid_argument_of([&] { emulated_row(negative, rows[1], Format::kF16, Arithmetic::kTensorCore, 64); }),
            message);
  p.head_dim_v = 0;  // V holds 64 columns per key, Q and K 128: V is half the size this shape needs
  const Problem unset = p.view();
  try {
    compute_row(unset, rows[0], Tier::kFast);
    ADD_FAILURE() << "a V of 64 columns passed for head_dim_v = head_dim = 128";
  } catch (const std::out_of_range& e) {
    EXPECT_NE(std::string(e.what()).find("v span"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("head_dim_v"), std::string::npos) << e.what();
  }
  p.head_dim_v = 192;
  EXPECT_THROW(compute_row(p.view(), rows[0], Tier::kFast), std::out_of_range);
}

TEST(OracleThroughput, FastAndGoldAtSeqlen4096HeadDim128) {
  TestProblem p = make_shape(Format::kF16, 16, 4096, 128);
  fill_normal(&p, 99, 1, 1, 1);
  using Clock = std::chrono::steady_clock;
  constexpr int kFastRows = 16, kGoldRows = 2;
  const auto t0 = Clock::now();
  std::vector<RowResult> fast;
  for (int i = 0; i < kFastRows; ++i) fast.push_back(row_of(p, {0, 0, i}, Tier::kFast));
  const auto t1 = Clock::now();
  std::vector<RowResult> gold;
  for (int i = 0; i < kGoldRows; ++i) gold.push_back(row_of(p, {0, 0, i}, Tier::kGold));
  const auto t2 = Clock::now();
  const double fast_s = std::chrono::duration<double>(t1 - t0).count();
  const double gold_s = std::chrono::duration<double>(t2 - t1).count();
  std::printf("throughput at seqlen_k 4096, head_dim 128 (one core): fast %.1f rows/s, gold %.2f rows/s\n",
              kFastRows / fast_s, kGoldRows / gold_s);
  for (int i = 0; i < kGoldRows; ++i) {
    for (size_t k = 0; k < gold[static_cast<size_t>(i)].o.size(); ++k) {
      EXPECT_LE(std::fabs(fast[static_cast<size_t>(i)].o[k] - gold[static_cast<size_t>(i)].o[k]),
                fast[static_cast<size_t>(i)].o_err[k] + gold[static_cast<size_t>(i)].o_err[k]);
    }
  }
}

}  // namespace
}  // namespace flashcheck::oracle
