// The oracle's dropout rule (dropout.h): its Philox against Random123's known answers, the threshold and the scale
// against their closed forms, the mask's extent over ragged sequences, and a statistical sanity check: the fraction
// dropped, over a million draws per setting, within a Chernoff bound of the binomial whose false-alarm rate is
// stated. kernel_dropout_rng_test holds the kernel's generator to this one element by element.
#include "flashcheck/dropout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace flashcheck::oracle {
namespace {

constexpr double kTwoTo32 = 4294967296.0;

// Random123's tests/kat_vectors (github.com/DEShawResearch/random123, commit 9545ff6), its three "philox4x32 10"
// lines: counter (4 words), key (2 words), expected output (4 words).
TEST(Philox4x32_10, Random123KnownAnswers) {
  struct Kat {
    std::array<uint32_t, 4> counter;
    std::array<uint32_t, 2> key;
    std::array<uint32_t, 4> expected;
  };
  const Kat kats[] = {
      {{0x00000000, 0x00000000, 0x00000000, 0x00000000}, {0x00000000, 0x00000000},
       {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& kat : kats) {
    const std::array<uint32_t, 4> out = philox4x32_10(kat.counter, kat.key);
    for (int w = 0; w < 4; ++w) EXPECT_EQ(out[w], kat.expected[w]) << "word " << w << " of counter " << kat.counter[0];
  }
}

TEST(OracleDropout, ThresholdIsTheFloorOfPTimes2To32) {
  const float below_one = std::nextafter(1.0f, 0.0f);
  EXPECT_EQ(drop_threshold(0.0f), 0u);
  EXPECT_EQ(drop_threshold(std::ldexp(1.0f, -33)), 0u);  // below one draw in 2^32: drops nothing
  EXPECT_EQ(drop_threshold(std::ldexp(1.0f, -32)), 1u);
  EXPECT_EQ(drop_threshold(std::ldexp(1.5f, -32)), 1u);  // floor, not round
  EXPECT_EQ(drop_threshold(std::numeric_limits<float>::denorm_min()), 0u);
  EXPECT_EQ(drop_threshold(0.5f), 1u << 31);
  EXPECT_EQ(drop_threshold(below_one), 0xFFFFFF00u);  // (1 - 2^-24) 2^32
  // From 2^-9 up, p * 2^32 is an integer: the probability of a drop is p itself. Every 997th float there.
  uint64_t checked = 0;
  for (float p = std::ldexp(1.0f, -9); p < 1.0f;) {
    ASSERT_EQ(static_cast<double>(drop_threshold(p)), static_cast<double>(p) * kTwoTo32) << "p = " << p;
    ++checked;
    for (int step = 0; step < 997 && p < 1.0f; ++step) p = std::nextafter(p, 1.0f);
  }
  EXPECT_GT(checked, 60000u);
  // Below it, t / 2^32 is within 2^-32 below p.
  for (float p : {1e-3f, 1e-6f, 3e-9f, std::ldexp(1.0f, -31) * 1.75f}) {
    const double t = drop_threshold(p);
    EXPECT_LE(t / kTwoTo32, static_cast<double>(p)) << "p = " << p;
    EXPECT_GT(t / kTwoTo32, static_cast<double>(p) - 1.0 / kTwoTo32) << "p = " << p;
  }
}

TEST(OracleDropout, RejectsPOutsideTheUnitInterval) {
  Problem problem;
  problem.batch = problem.heads_q = problem.seqlen_q = problem.seqlen_k = 1;
  for (float p : {1.0f, 1.5f, -std::numeric_limits<float>::denorm_min(), -0.5f,
                  std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    EXPECT_THROW(drop_threshold(p), std::invalid_argument) << "p = " << p;
    EXPECT_THROW(keep_scale(p), std::invalid_argument) << "p = " << p;
    EXPECT_THROW(dropout_keep_mask(problem, Dropout{p, 1, 0}), std::invalid_argument) << "p = " << p;
    EXPECT_THROW(dropout_kept(problem, Dropout{p, 1, 0}, 0, 0, 0, 0), std::invalid_argument) << "p = " << p;
  }
}

// 1 / (1 - p): exactly 1 at p = 0, exact where it is a double, and within 2^-53 of the exact factor where 1 - p is
// exact (the residual scale * (1 - p) - 1 is exact in one FMA).
TEST(OracleDropout, ScaleIsTheReciprocalOfTheKeepProbability) {
  EXPECT_EQ(keep_scale(0.0f), 1.0);
  EXPECT_EQ(keep_scale(0.5f), 2.0);
  EXPECT_EQ(keep_scale(0.75f), 4.0);
  EXPECT_EQ(keep_scale(0.875f), 8.0);
  for (float p : {0.1f, 0.2f, 1e-3f, 1e-7f, 0.3f, 0.6f, 0.9f, 0.99f, std::nextafter(1.0f, 0.0f)}) {
    const double keep = 1.0 - static_cast<double>(p);  // exact for p >= 2^-30
    const double residual = std::fma(keep_scale(p), keep, -1.0);
    EXPECT_LE(std::fabs(residual), std::ldexp(1.0, -53)) << "p = " << p;
  }
  // Where 1 - p rounds (p < 2^-30) the factor is still within 2^-52 of 1 + p + p^2.
  const float tiny = std::ldexp(1.0f, -40);
  EXPECT_NEAR(keep_scale(tiny), 1.0 + std::ldexp(1.0, -40), std::ldexp(1.0, -52));
}

// A ragged batch: sequence 1 has no rows, sequence 2 no keys, sequence 3 both short. Elements past a sequence's own
// lengths are 0 in the mask and out of range for dropout_kept; p = 0 keeps every element that exists.
TEST(OracleDropout, MaskCoversExactlyTheSequencesElements) {
  const std::vector<int64_t> seqlens_q = {5, 0, 3, 2}, seqlens_k = {7, 4, 0, 6};
  Problem problem;
  problem.batch = 4;
  problem.heads_q = 3;
  problem.heads_kv = 1;
  problem.seqlen_q = 5;
  problem.seqlen_k = 7;
  problem.seqlens_q = seqlens_q;
  problem.seqlens_k = seqlens_k;
  for (float p : {0.0f, 0.5f}) {
    const Dropout dropout{p, 0x9E3779B97F4A7C15ull, 12345};
    const std::vector<uint8_t> mask = dropout_keep_mask(problem, dropout);
    ASSERT_EQ(mask.size(), size_t{4 * 3 * 5 * 7});
    int64_t existing = 0, kept = 0;
    for (int64_t b = 0; b < 4; ++b) {
      for (int64_t h = 0; h < 3; ++h) {
        for (int64_t i = 0; i < 5; ++i) {
          for (int64_t j = 0; j < 7; ++j) {
            const uint8_t m = mask[static_cast<size_t>(((b * 3 + h) * 5 + i) * 7 + j)];
            if (i < seqlens_q[b] && j < seqlens_k[b]) {
              ++existing;
              kept += m;
              EXPECT_EQ(m != 0, dropout_kept(problem, dropout, b, h, i, j));
              if (p == 0.0f) {
                EXPECT_EQ(m, 1) << "b " << b << " h " << h << " i " << i << " j " << j;
              }
            } else {
              EXPECT_EQ(m, 0) << "b " << b << " h " << h << " i " << i << " j " << j;
              EXPECT_THROW(dropout_kept(problem, dropout, b, h, i, j), std::out_of_range);
            }
          }
        }
      }
    }
    EXPECT_EQ(existing, 3 * (5 * 7 + 2 * 6));
    if (p == 0.0f) {
      EXPECT_EQ(kept, existing);
    } else {
      EXPECT_TRUE(kept > 0 && kept < existing) << kept << " of " << existing;
    }
  }
  const Dropout dropout{0.1f, 1, 0};
  EXPECT_THROW(dropout_kept(problem, dropout, 4, 0, 0, 0), std::out_of_range);
  EXPECT_THROW(dropout_kept(problem, dropout, 0, 3, 0, 0), std::out_of_range);
  EXPECT_THROW(dropout_kept(problem, dropout, 0, -1, 0, 0), std::out_of_range);
  // The counter's limits: i < 2^32, j < 2^34.
  EXPECT_NO_THROW(dropout_draw(dropout, 8, 0, 0, (int64_t{1} << 32) - 1, (int64_t{1} << 34) - 1));
  EXPECT_THROW(dropout_draw(dropout, 8, 0, 0, int64_t{1} << 32, 0), std::out_of_range);
  EXPECT_THROW(dropout_draw(dropout, 8, 0, 0, 0, int64_t{1} << 34), std::out_of_range);
}

// ---- Statistics. Each count X of drops among n elements is Binomial(n, pi) with pi = t / 2^32 if the draws are
// independent and uniform. Chernoff's bound in relative-entropy form, P(X >= k) <= exp(-n KL(k/n || pi)) for
// k >= n pi and P(X <= k) <= exp(-n KL(k/n || pi)) for k <= n pi, gives an acceptance interval whose two tails
// together hold at most kFalseAlarm of a correct generator's counts: no normal approximation, valid at every n and pi.
constexpr double kFalseAlarm = 1e-9;

double relative_entropy(double a, double pi) {  // KL(Bernoulli(a) || Bernoulli(pi)), 0 log 0 = 0
  const double up = a > 0.0 ? a * std::log(a / pi) : 0.0;
  const double down = a < 1.0 ? (1.0 - a) * std::log((1.0 - a) / (1.0 - pi)) : 0.0;
  return up + down;
}

struct CountInterval {
  int64_t lo = 0, hi = 0;  // accepted counts, inclusive
};

// The counts k at which exp(-n KL(k/n || pi)) <= false_alarm / 2 on either side of n pi are rejected.
CountInterval chernoff_interval(int64_t n, double pi, double false_alarm) {
  const double budget = std::log(2.0 / false_alarm);
  const auto rejected = [&](int64_t k) { return static_cast<double>(n) * relative_entropy(double(k) / n, pi) >= budget; };
  const int64_t mean_floor = static_cast<int64_t>(std::floor(n * pi));
  CountInterval accepted{0, n};
  // Upper side: KL grows with k above n pi; the first rejected k, by bisection over (mean_floor, n].
  if (rejected(n)) {
    int64_t ok = mean_floor, bad = n;  // invariant: ok accepted (or the mean), bad rejected
    while (bad - ok > 1) {
      const int64_t mid = ok + (bad - ok) / 2;
      (rejected(mid) ? bad : ok) = mid;
    }
    accepted.hi = bad - 1;
  }
  // Lower side: KL grows as k falls below n pi.
  if (mean_floor > 0 && rejected(0)) {
    int64_t bad = 0, ok = mean_floor + 1;
    while (ok - bad > 1) {
      const int64_t mid = bad + (ok - bad) / 2;
      (rejected(mid) ? bad : ok) = mid;
    }
    accepted.lo = bad + 1;
  }
  return accepted;
}

// The fraction dropped over 2 x 4 x 256 x 509 = 1,042,432 elements (and over each quarter by word position j mod 4,
// so that every one of a call's four words is seen), for four p and two (seed, offset) settings, one of whose
// streams wrap past 2^64 mid-batch: 40 counts, each within its interval, so a correct generator fails this test
// for at most 40 x 1e-9 = 4e-8 of the (seed, offset) settings one could pick (union bound). The kept elements
// scaled by 1 / (1 - p) average 1 within the same bound; without the factor the mean, 1 - p, is far outside.
TEST(OracleDropout, DroppedFractionWithinBinomialBound) {
  Problem problem;
  problem.batch = 2;
  problem.heads_q = 4;
  problem.heads_kv = 2;
  problem.seqlen_q = 256;
  problem.seqlen_k = 509;
  const int64_t n = problem.batch * problem.heads_q * problem.seqlen_q * problem.seqlen_k;
  struct Setting {
    uint64_t seed, offset;
  };
  const Setting settings[] = {{0x2545F4914F6CDD1Dull, 0}, {7, ~uint64_t{0} - 3}};
  int checks = 0;
  double worst_z = 0.0;  // the largest |X - n pi| / sqrt(n pi (1 - pi)) of the 40 counts, for the log
  const auto deviation = [](int64_t count, int64_t size, double pi) {
    return std::fabs(static_cast<double>(count) - size * pi) / std::sqrt(size * pi * (1.0 - pi));
  };
  for (const Setting& s : settings) {
    for (float p : {1e-3f, 0.1f, 0.5f, 0.9f}) {
      const double pi = drop_threshold(p) / kTwoTo32;
      const std::vector<uint8_t> mask = dropout_keep_mask(problem, Dropout{p, s.seed, s.offset});
      int64_t dropped = 0, elements_by_word[4] = {}, dropped_by_word[4] = {};
      for (size_t e = 0; e < mask.size(); ++e) {
        const size_t word = e % static_cast<size_t>(problem.seqlen_k) % 4;
        ++elements_by_word[word];
        if (mask[e] == 0) {
          ++dropped;
          ++dropped_by_word[word];
        }
      }
      const std::string where = "p = " + std::to_string(p) + " seed " + std::to_string(s.seed) + " offset " +
                                std::to_string(s.offset);
      const CountInterval all = chernoff_interval(n, pi, kFalseAlarm);
      EXPECT_TRUE(all.lo <= dropped && dropped <= all.hi)
          << where << ": " << dropped << " of " << n << " dropped, accepted [" << all.lo << ", " << all.hi << "]";
      ++checks;
      worst_z = std::max(worst_z, deviation(dropped, n, pi));
      for (int w = 0; w < 4; ++w) {
        const CountInterval part = chernoff_interval(elements_by_word[w], pi, kFalseAlarm);
        EXPECT_TRUE(part.lo <= dropped_by_word[w] && dropped_by_word[w] <= part.hi)
            << where << ", word " << w << ": " << dropped_by_word[w] << " of " << elements_by_word[w]
            << " dropped, accepted [" << part.lo << ", " << part.hi << "]";
        ++checks;
        worst_z = std::max(worst_z, deviation(dropped_by_word[w], elements_by_word[w], pi));
      }
      // The scaled mean, scale * kept / n, over the interval's kept counts: it holds 1; 1 - p (no factor) it does not.
      const double scale = keep_scale(p);
      const double mean = scale * static_cast<double>(n - dropped) / static_cast<double>(n);
      const double mean_lo = scale * static_cast<double>(n - all.hi) / static_cast<double>(n);
      const double mean_hi = scale * static_cast<double>(n - all.lo) / static_cast<double>(n);
      EXPECT_TRUE(mean_lo <= 1.0 && 1.0 <= mean_hi) << where << ": [" << mean_lo << ", " << mean_hi << "]";
      EXPECT_TRUE(mean_lo <= mean && mean <= mean_hi) << where << ": scaled mean " << mean;
      EXPECT_FALSE(mean_lo / scale <= 1.0 && 1.0 <= mean_hi / scale) << where << ": the unscaled mean covers 1";
    }
  }
  EXPECT_EQ(checks, 40);
  std::printf("%d counts within their intervals; the largest deviation %.2f standard deviations\n", checks, worst_z);
}

// The interval itself: at n = 10^6, pi = 0.5 its edges lie about 6.5 standard deviations from the mean (3.3 sqrt(n)
// counts), beyond the 6.1 at which the normal approximation's two tails hold 1e-9 (a Chernoff bound is the more
// cautious), and not much beyond.
TEST(OracleDropout, ChernoffIntervalIsATailBound) {
  const int64_t n = 1000000;
  const CountInterval c = chernoff_interval(n, 0.5, kFalseAlarm);
  const double sigma = std::sqrt(n * 0.25);
  const double z_hi = (c.hi + 1 - n * 0.5) / sigma, z_lo = (n * 0.5 - (c.lo - 1)) / sigma;
  EXPECT_GT(z_hi, 6.1);
  EXPECT_GT(z_lo, 6.1);
  EXPECT_LT(z_hi, 7.0);
  EXPECT_LT(z_lo, 7.0);
}

}  // namespace
}  // namespace flashcheck::oracle
