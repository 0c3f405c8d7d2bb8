// The oracle under a dropout (oracle_problem.h's Problem::dropout): the fast tier against the gold tier, both against
// a direct sum over the keys dropout_keep_mask keeps, the forward's bound against an fp32 emulation of the general
// path's arithmetic with dropout (and against outputs that get the dropout wrong), and p = 0 bit for bit the
// computation without a dropout, whatever the seed and offset.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "flashcheck/dropout.h"
#include "flashcheck/error_model.h"
#include "flashcheck/oracle.h"
#include "test_problems.h"

namespace flashcheck::oracle {
namespace {

using testing::fill_normal;
using testing::make_shape;
using testing::TestProblem;

// A problem and the dropout it runs under, named for the failure message.
struct DropoutCase {
  std::string name;
  TestProblem problem;
  Dropout dropout;
  bool hull = false;  // every row's bound is the hull (§4.5): too wide to tell a wrong dropout from a right one
  Problem view() const {
    Problem p = problem.view();
    p.dropout = dropout;
    return p;
  }
};

// The shapes the dropout must get right: GQA, per-sequence lengths, causal and windowed masks, a sink, a softcap,
// unequal head dims; p from one drop in 2^20 draws to all but one in 2^24; seeds and offsets whose (sequence, head)
// streams cross 2^32 and wrap at 2^64.
std::vector<DropoutCase> dropout_cases() {
  std::vector<DropoutCase> cases;
  {
    TestProblem p = make_shape(Format::kF32, 9, 37, 16, kAllKeys, 2, 4, 2);
    fill_normal(&p, 11, 1.0, 1.0, 1.0);
    cases.push_back({"f32 gqa all-keys p=0.5", p, Dropout{0.5f, 0x1234, 0}, false});
  }
  {
    TestProblem p = make_shape(Format::kBF16, 9, 37, 32, kCausalBottomRight, 2, 4, 1);
    fill_normal(&p, 12, 1.5, 1.5, 1.0);
    p.seqlens_q = {9, 4};
    p.seqlens_k = {37, 20};
    cases.push_back(
        {"bf16 varlen causal-br p=0.9 offset near 2^32", p, Dropout{0.9f, 77, (uint64_t{1} << 32) - 3}, false});
  }
  {
    TestProblem p = make_shape(Format::kF16, 12, 40, 8, Visibility{5, 3, Alignment::kTopLeft}, 1, 2, 2);
    fill_normal(&p, 13, 1.0, 1.0, 2.0);
    p.sink = {0.75, -1.5};
    cases.push_back({"f16 window sink p=2^-20 seed and offset near 2^64", p,
                     Dropout{std::ldexp(1.0f, -20), ~uint64_t{0} - 5, ~uint64_t{0} - 1}, false});
  }
  {
    TestProblem p = make_shape(Format::kF32, 6, 50, 24, kCausalTopLeft, 1, 2, 1, 12);
    fill_normal(&p, 14, 3.0, 3.0, 1.0);
    p.softcap = 5.0;
    p.sink = {1.0, 0.0};
    cases.push_back({"f32 softcap sink dv=12 p=0.1", p, Dropout{0.1f, 5, 1000}, false});
  }
  {
    TestProblem p = make_shape(Format::kBF16, 4, 64, 16, kAllKeys, 1, 1, 1);
    fill_normal(&p, 15, 1.0, 1.0, 1.0);
    cases.push_back({"bf16 p=1-2^-24", p, Dropout{std::nextafter(1.0f, 0.0f), 3, 9}, false});
  }
  {
    TestProblem p = make_shape(Format::kF16, 16, 48, 16, kCausalBottomRight, 1, 4, 4);
    fill_normal(&p, 17, 1.0, 1.0, 1.0);
    cases.push_back({"f16 p=0.99 (factor 100)", p, Dropout{0.99f, 0xabc, 1}, false});
  }
  {
    // Scores of thousands: the weights' fp32 errors leave the linear regime, and the hull bound judges the rows.
    TestProblem p = make_shape(Format::kF32, 6, 40, 16, kAllKeys, 1, 2, 2);
    fill_normal(&p, 18, 300.0, 300.0, 1.0);
    cases.push_back({"f32 peaked scores p=0.5", p, Dropout{0.5f, 19, 23}, true});
  }
  {
    TestProblem p = make_shape(Format::kF32, 3, 200, 16, kAllKeys, 1, 1, 1);
    fill_normal(&p, 16, 1.0, 1.0, 1.0);
    cases.push_back({"f32 long row p=0.3", p, Dropout{0.3f, 42, (uint64_t{1} << 32) - 1}, false});
  }
  return cases;
}

std::vector<RowRef> valid_rows(const Problem& p) {
  std::vector<RowRef> rows;
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t h = 0; h < p.heads_q; ++h) {
      for (int64_t i = 0; i < sequence_seqlen_q(p, b); ++i) rows.push_back({b, h, i});
    }
  }
  return rows;
}

// O of one row straight from the definition, in long double: the undropped softmax (sink in the denominator),
// then s times the sum over the keys the mask keeps. Also sum_j P_j |v_jk| s over the kept keys, the scale of its
// own rounding, and the kept keys' share of P, sum_j P_j z_j.
struct DirectRow {
  std::vector<long double> o, abs_pv;
  long double mass = 0.0L;
};
DirectRow direct_row(const Problem& p, const std::vector<uint8_t>& mask, float drop_p, RowRef r) {
  const int64_t dim = p.head_dim, dim_v = value_dim(p);
  const int64_t group = p.heads_q / p.heads_kv;
  const double* q = p.q.data() + ((r.b * p.heads_q + r.h) * p.seqlen_q + r.i) * dim;
  std::vector<long double> s(static_cast<size_t>(p.seqlen_k), -std::numeric_limits<long double>::infinity());
  long double m = p.sink.empty() ? -std::numeric_limits<long double>::infinity() : p.sink[static_cast<size_t>(r.h)];
  for (int64_t j = 0; j < sequence_seqlen_k(p, r.b); ++j) {
    if (!visible(p, r.b, r.i, j)) continue;
    const double* k = p.k.data() + ((r.b * p.heads_kv + r.h / group) * p.seqlen_k + j) * dim;
    long double dot = 0;
    for (int64_t c = 0; c < dim; ++c) dot += static_cast<long double>(q[c]) * k[c];
    long double t = static_cast<long double>(p.scale) * dot;
    if (p.softcap > 0) t = p.softcap * std::tanh(t / p.softcap);
    s[static_cast<size_t>(j)] = t;
    m = std::max(m, t);
  }
  long double l = p.sink.empty() ? 0.0L : std::exp(p.sink[static_cast<size_t>(r.h)] - m);
  for (const long double t : s) l += std::exp(t - m);
  const long double factor = 1.0L / (1.0L - static_cast<long double>(drop_p));
  DirectRow out{std::vector<long double>(static_cast<size_t>(dim_v), 0.0L),
                std::vector<long double>(static_cast<size_t>(dim_v), 0.0L)};
  const size_t mask_row = static_cast<size_t>(((r.b * p.heads_q + r.h) * p.seqlen_q + r.i) * p.seqlen_k);
  for (int64_t j = 0; j < p.seqlen_k; ++j) {
    if (std::isinf(s[static_cast<size_t>(j)]) || mask[mask_row + static_cast<size_t>(j)] == 0) continue;
    out.mass += std::exp(s[static_cast<size_t>(j)] - m) / l;
    const long double pj = std::exp(s[static_cast<size_t>(j)] - m) / l * factor;
    const double* v = p.v.data() + ((r.b * p.heads_kv + r.h / group) * p.seqlen_k + j) * dim_v;
    for (int64_t c = 0; c < dim_v; ++c) {
      out.o[static_cast<size_t>(c)] += pj * v[c];
      out.abs_pv[static_cast<size_t>(c)] += pj * std::fabs(v[c]);
    }
  }
  return out;
}

TEST(OracleDropout, FastTierMatchesGoldTier) {
  for (const DropoutCase& c : dropout_cases()) {
    const Problem p = c.view();
    Problem undropped = p;
    undropped.dropout = Dropout{};
    int64_t dropped = 0, keys = 0;
    for (const RowRef& r : valid_rows(p)) {
      const RowResult fast = compute_row(p, r, Tier::kFast);
      const RowResult gold = compute_row(p, r, Tier::kGold);
      const RowResult plain = compute_row(undropped, r, Tier::kFast);
      // m, l and LSE are the undropped ones, bit for bit in the fast tier.
      EXPECT_EQ(fast.lse, plain.lse) << c.name;
      EXPECT_EQ(fast.l, plain.l) << c.name;
      EXPECT_EQ(fast.m, plain.m) << c.name;
      EXPECT_LE(std::fabs(fast.lse - gold.lse), fast.lse_err + gold.lse_err) << c.name;
      for (size_t k = 0; k < fast.o.size(); ++k) {
        const double diff = std::fabs(fast.o[k] - gold.o[k]);
        ASSERT_LE(diff, fast.o_err[k] + gold.o_err[k])
            << c.name << " row (" << r.b << ", " << r.h << ", " << r.i << ") column " << k << ": fast " << fast.o[k]
            << " gold " << gold.o[k];
      }
      const KeySpan span = visible_keys(p, r.b, r.i);
      for (int64_t j = span.begin; j < span.end; ++j) {
        ++keys;
        dropped += dropout_kept(p, p.dropout, r.b, r.h, r.i, j) ? 0 : 1;
      }
    }
    // Not vacuous: the larger p drop keys (the tiny one keeps them all, and still scales).
    if (c.dropout.p >= 0.1f) {
      EXPECT_GT(dropped, 0) << c.name;
    }
    EXPECT_LT(dropped, keys + (c.dropout.p > 0.99f ? 1 : 0)) << c.name;
  }
}

// O equals s times the sum of P_ij v_j over the keys dropout_keep_mask keeps, P undropped; the mask of the
// neighbouring offset (another draw) does not, so the check can fail.
TEST(OracleDropout, OutputIsScaledSumOverKeptKeys) {
  for (const DropoutCase& c : dropout_cases()) {
    const Problem p = c.view();
    const std::vector<uint8_t> mask = dropout_keep_mask(p, p.dropout);
    Dropout other = p.dropout;
    ++other.offset;
    const std::vector<uint8_t> other_mask = dropout_keep_mask(p, other);
    double worst = 0.0, worst_other = 0.0;
    for (const RowRef& r : valid_rows(p)) {
      const RowResult gold = compute_row(p, r, Tier::kGold);
      const DirectRow want = direct_row(p, mask, p.dropout.p, r);
      const DirectRow wrong = direct_row(p, other_mask, p.dropout.p, r);
      for (size_t k = 0; k < gold.o.size(); ++k) {
        // long double's own error: far below 2^-40 of the column's scale.
        const double tol = gold.o_err[k] + 0x1p-40 * static_cast<double>(want.abs_pv[k]) + 1e-300;
        worst = std::max(worst, std::fabs(gold.o[k] - static_cast<double>(want.o[k])) / tol);
        worst_other = std::max(worst_other, std::fabs(gold.o[k] - static_cast<double>(wrong.o[k])) / tol);
      }
    }
    EXPECT_LE(worst, 1.0) << c.name;
    if (c.dropout.p >= 0.1f && c.dropout.p <= 0.99f) {  // 1 - 2^-24 drops every element of its case: O = 0
      EXPECT_GT(worst_other, 1.0) << c.name << ": the neighbouring offset's mask passes too";
    }
  }
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }
bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}

// p = 0 is no dropout, bit for bit, whatever the seed and offset: every field of both tiers, the running sums, every
// path's bound and the emulated reference.
TEST(OracleDropout, ZeroProbabilityIsBitIdenticalToNoDropout) {
  for (const DropoutCase& c : dropout_cases()) {
    Problem with = c.view();
    with.dropout.p = 0.0f;
    Problem without = c.problem.view();
    for (const RowRef& r : valid_rows(with)) {
      for (const Tier tier : {Tier::kFast, Tier::kGold}) {
        const RowResult a = compute_row(with, r, tier), b = compute_row(without, r, tier);
        ASSERT_TRUE(same_bits(a.o, b.o) && same_bits(a.o_err, b.o_err) && same_bits(a.abs_pv, b.abs_pv) &&
                    same_bits(a.dev_pv, b.dev_pv) && same_bits(a.dev_pv_score, b.dev_pv_score) &&
                    same_bits(a.dev_pv_gap, b.dev_pv_gap) && same_bits(a.dev_pv_score_sq, b.dev_pv_score_sq) &&
                    same_bits(a.abs_v_sum, b.abs_v_sum) && same_bits(a.max_abs_v, b.max_abs_v) &&
                    same_bits(a.lse, b.lse) && same_bits(a.lse_err, b.lse_err) && same_bits(a.l, b.l) &&
                    same_bits(a.m, b.m))
            << c.name << " tier " << to_string(tier);
      }
      const RowResult exact = compute_row(with, r, Tier::kFast);
      for (const int32_t block_n : {0, 16}) {
        const OrderedSums sa = ordered_sums(with, r, exact, block_n), sb = ordered_sums(without, r, exact, block_n);
        ASSERT_TRUE(same_bits(sa.pv_keys, sb.pv_keys) && same_bits(sa.pv_tiles, sb.pv_tiles) &&
                    same_bits(sa.pv_rescale, sb.pv_rescale) && same_bits(sa.v_col_max, sb.v_col_max) &&
                    same_bits(sa.l_chain, sb.l_chain))
            << c.name;
        for (const Arithmetic path : {Arithmetic::kGeneralFp32, Arithmetic::kTensorCore, Arithmetic::kSplitTf32}) {
          const RowBound ba = bound_row(exact, c.problem.format, path, block_n, with.head_dim, &sa);
          const RowBound bb = bound_row(compute_row(without, r, Tier::kFast), c.problem.format, path, block_n,
                                        with.head_dim, &sb);
          ASSERT_TRUE(same_bits(ba.o, bb.o) && same_bits(ba.lse, bb.lse) && same_bits(ba.l_rel, bb.l_rel) &&
                      same_bits(ba.m, bb.m))
              << c.name << " " << to_string(path);
        }
        ASSERT_TRUE(same_bits(emulated_row(with, r, c.problem.format, Arithmetic::kGeneralFp32, block_n),
                              emulated_row(without, r, c.problem.format, Arithmetic::kGeneralFp32, block_n)))
            << c.name;
      }
    }
  }
}

// The general path's bound holds for the fp32 emulation of the kernel's arithmetic with dropout (emulated_row: the
// online softmax undropped, the dropped products skipped, o times fl32(1 / (1 - p)), rounded to the format), with and
// without running sums; outputs that get the dropout wrong (no dropout, or the kept weights renormalised) fail it.
TEST(OracleDropout, BoundHoldsForTheGeneralPathAndCatchesWrongDropouts) {
  for (const DropoutCase& c : dropout_cases()) {
    const Problem p = c.view();
    Problem undropped = p;
    undropped.dropout = Dropout{};
    const std::vector<uint8_t> mask = dropout_keep_mask(p, p.dropout);
    double worst = 0.0, worst_undropped = 0.0, worst_renormalised = 0.0;
    for (const RowRef& r : valid_rows(p)) {
      const RowResult exact = compute_row(p, r, Tier::kFast);
      const RowResult plain = compute_row(undropped, r, Tier::kFast);
      for (const int32_t block_n : {0, 16, 64}) {
        const OrderedSums sums = ordered_sums(p, r, exact, block_n);
        const RowBound bound = bound_row(exact, c.problem.format, Arithmetic::kGeneralFp32, block_n, p.head_dim, &sums);
        const RowBound loose = bound_row(exact, c.problem.format, Arithmetic::kGeneralFp32, block_n, p.head_dim);
        const std::vector<double> got = emulated_row(p, r, c.problem.format, Arithmetic::kGeneralFp32, block_n, &exact);
        for (size_t k = 0; k < got.size(); ++k) {
          EXPECT_FALSE(bound.unconstrained) << c.name;
          const double ratio = error_ratio(got[k], exact.o[k], bound.o[k], bound.unconstrained);
          const double ratio_loose = error_ratio(got[k], exact.o[k], loose.o[k], loose.unconstrained);
          ASSERT_LE(std::max(ratio, ratio_loose), 1.0)
              << c.name << " row (" << r.b << ", " << r.h << ", " << r.i << ") column " << k << " block_n " << block_n;
          worst = std::max(worst, ratio);
          worst_undropped = std::max(worst_undropped, error_ratio(plain.o[k], exact.o[k], bound.o[k], false));
        }
      }
      // The kept weights renormalised to sum to one (the dropout applied before the softmax's denominator).
      const DirectRow kept = direct_row(p, mask, 0.0f, r);
      const RowBound bound = bound_row(exact, c.problem.format, Arithmetic::kGeneralFp32, 0, p.head_dim);
      if (kept.mass > 0) {
        for (size_t k = 0; k < exact.o.size(); ++k) {
          const double renormalised = static_cast<double>(kept.o[k] / kept.mass);
          worst_renormalised = std::max(worst_renormalised, error_ratio(renormalised, exact.o[k], bound.o[k], false));
        }
      }
    }
    EXPECT_LE(worst, 1.0) << c.name;
    std::printf("[ DROPOUT  ] %s: worst ratio %.4f of the bound; without the dropout %.3g, renormalised %.3g\n",
                c.name.c_str(), worst, worst_undropped, worst_renormalised);
    if (c.dropout.p >= 0.1f && c.dropout.p <= 0.99f && !c.hull) {
      EXPECT_GT(worst_undropped, 1.0) << c.name << ": an output without the dropout passes";
      EXPECT_GT(worst_renormalised, 1.0) << c.name << ": the kept weights renormalised pass";
    }
  }
}

// The bound of a dropped row is sigma times the bound of the same row with the dropped keys' V rows zeroed and no
// dropout, plus the factor's error and the product's rounding (u + 2^-51 and u of |O|): one query row per K/V head,
// so that zeroing a V row drops that key for that row alone. Without the scaling of the ingredients, or with the
// dropped keys counted as kept, it fails.
TEST(OracleDropout, BoundIsTheZeroedRowsBoundScaled) {
  constexpr double kU = 0x1p-24;
  constexpr double kSafety = 1.0 + 0x1p-10;
  int64_t compared = 0;
  for (const float drop_p : {0.3f, 0.5f, 0.9f}) {
    for (const Visibility visibility : {kAllKeys, kCausalBottomRight}) {
      TestProblem t = make_shape(Format::kF32, 1, 70, 16, visibility, 2, 3, 3);
      fill_normal(&t, 31, 1.0, 1.0, 1.0);
      const Dropout dropout{drop_p, 0x77, (uint64_t{1} << 32) - 2};
      Problem p = t.view();
      p.dropout = dropout;
      const std::vector<uint8_t> mask = dropout_keep_mask(p, dropout);
      TestProblem zeroed = t;
      const int64_t dim_v = t.value_dim();
      for (int64_t b = 0; b < t.batch; ++b) {
        for (int64_t h = 0; h < t.heads_q; ++h) {
          for (int64_t j = 0; j < t.seqlen_k; ++j) {
            if (mask[static_cast<size_t>((b * t.heads_q + h) * t.seqlen_k + j)] != 0) continue;
            const auto row = zeroed.v.begin() + ((b * t.heads_kv + h) * t.seqlen_k + j) * dim_v;
            std::fill(row, row + dim_v, 0.0);
          }
        }
      }
      const Problem z = zeroed.view();
      const double sigma = keep_scale(drop_p);
      for (const RowRef& r : valid_rows(p)) {
        const RowResult exact = compute_row(p, r, Tier::kFast), exact_z = compute_row(z, r, Tier::kFast);
        for (const int32_t block_n : {0, 32}) {
          const OrderedSums sums = ordered_sums(p, r, exact, block_n), sums_z = ordered_sums(z, r, exact_z, block_n);
          const RowBound bd = bound_row(exact, t.format, Arithmetic::kGeneralFp32, block_n, p.head_dim, &sums);
          const RowBound bz = bound_row(exact_z, t.format, Arithmetic::kGeneralFp32, block_n, p.head_dim, &sums_z);
          for (size_t k = 0; k < bd.o.size(); ++k) {
            const double o_abs = std::fabs(exact.o[k]);
            const double lower = sigma * (bz.o[k] - kSafety * 0x1p-126 - exact_z.o_err[k]) * (1 - 1e-9) +
                                 kSafety * 2 * kU * o_abs;
            const double upper = sigma * bz.o[k] * (1 + 4 * kU) + 4 * kU * o_abs + exact.o_err[k] + 0x1p-120;
            ASSERT_GE(bd.o[k], lower) << "p " << drop_p << " row (" << r.b << ", " << r.h << ") column " << k;
            ASSERT_LE(bd.o[k], upper) << "p " << drop_p << " row (" << r.b << ", " << r.h << ") column " << k;
            ++compared;
          }
        }
      }
    }
  }
  EXPECT_GT(compared, 0);
}

// A dropped key's V row is not read: an infinity there leaves O (both tiers, bit for bit) and its bound as they were;
// in a kept key's row it makes the column "must be non-finite".
TEST(OracleDropout, DroppedValuesAreNotRead) {
  TestProblem t = make_shape(Format::kF32, 1, 40, 8, kAllKeys, 1, 1, 1);
  fill_normal(&t, 41, 1.0, 1.0, 1.0);
  const Dropout dropout{0.5f, 0x99, 5};
  Problem p = t.view();
  p.dropout = dropout;
  const RowRef row{0, 0, 0};
  int64_t dropped = -1, kept = -1;
  for (int64_t j = 0; j < t.seqlen_k; ++j) (dropout_kept(p, dropout, 0, 0, 0, j) ? kept : dropped) = j;
  ASSERT_GE(dropped, 0);
  ASSERT_GE(kept, 0);
  const int64_t dim_v = t.value_dim();
  for (const Tier tier : {Tier::kFast, Tier::kGold}) {
    const RowResult before = compute_row(p, row, tier);
    TestProblem poisoned = t;
    poisoned.v[static_cast<size_t>(dropped * dim_v)] = std::numeric_limits<double>::infinity();
    Problem q = poisoned.view();
    q.dropout = dropout;
    const RowResult after = compute_row(q, row, tier);
    for (size_t k = 0; k < before.o.size(); ++k) {
      EXPECT_EQ(after.o[k], before.o[k]) << to_string(tier) << " column " << k;
      EXPECT_EQ(after.o_err[k], before.o_err[k]) << to_string(tier) << " column " << k;
    }
    EXPECT_FALSE(after.nonfinite_input);
    poisoned.v[static_cast<size_t>(kept * dim_v + 1)] = std::numeric_limits<double>::quiet_NaN();
    q = poisoned.view();
    q.dropout = dropout;
    const RowResult nan = compute_row(q, row, tier);
    EXPECT_TRUE(std::isnan(nan.o[1])) << to_string(tier);
    EXPECT_EQ(nan.o[0], before.o[0]) << to_string(tier);
  }
}

TEST(OracleDropout, OtherPathsAreRefused) {
  const DropoutCase c = dropout_cases()[0];
  const Problem p = c.view();
  const RowResult exact = compute_row(p, {0, 0, 0}, Tier::kFast);
  EXPECT_NO_THROW(bound_row(exact, Format::kF32, Arithmetic::kGeneralFp32, 64, p.head_dim));
  for (const Arithmetic path : {Arithmetic::kTensorCore, Arithmetic::kSplitTf32}) {
    EXPECT_THROW(bound_row(exact, Format::kF32, path, 64, p.head_dim), std::invalid_argument) << to_string(path);
    EXPECT_THROW(emulated_row(p, {0, 0, 0}, Format::kF32, path, 64), std::invalid_argument) << to_string(path);
  }
  Problem bad = p;
  for (const float q : {1.0f, -0.25f, std::numeric_limits<float>::quiet_NaN()}) {
    bad.dropout.p = q;
    EXPECT_THROW(compute_row(bad, {0, 0, 0}, Tier::kFast), std::invalid_argument) << q;
  }
}

}  // namespace
}  // namespace flashcheck::oracle
