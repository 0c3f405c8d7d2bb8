// The host model's fp8 path (docs/design/fp8-forward.md): one step of the fp8 wgmma as measured on the H200 (14 bits
// of the largest addend kept, cut toward zero), and the path's arithmetic where its result is known exactly: equal
// scores give P = 2^8 for every key and O the mean of V, descales scale as they are defined, the offset taken back
// from l and LSE, and a row whose max rises past the reference slack tile after tile keeps every P below 448.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "flashcheck/attention.h"
#include "flashcheck/dtype.h"
#include "flashcheck/host_model.h"
#include "host_numeric.h"

namespace flashcheck {
namespace {

using detail::host::fp8_mma_step;

TEST(Fp8Model, MmaStepKeepsFourteenBitsOfTheLargestAddend) {
  // 2^14 and 1: the unit is 2^(15 - 14) = 2, so the 1 is cut to 0, toward zero for either sign.
  const float big[] = {128.0f, 1.0f}, small[] = {128.0f, 1.0f};
  EXPECT_EQ(fp8_mma_step(0.0f, big, small, 2, 1), 16384.0f);
  const float neg[] = {128.0f, -1.0f};
  EXPECT_EQ(fp8_mma_step(0.0f, neg, small, 2, 1), 16384.0f);
  // Within 14 bits of the largest every addend is kept: 2^13 + 1.
  const float a[] = {64.0f, 1.0f}, b[] = {128.0f, 1.0f};
  EXPECT_EQ(fp8_mma_step(0.0f, a, b, 2, 1), 8193.0f);
  // The accumulator is an addend too: 2^16 in it (unit 2^3) cuts a product of 65 to 64, 2^20 (unit 2^7) to 0.
  const float c[] = {65.0f}, one[] = {1.0f};
  EXPECT_EQ(fp8_mma_step(65536.0f, c, one, 1, 1), 65536.0f + 64.0f);
  EXPECT_EQ(fp8_mma_step(1048576.0f, c, one, 1, 1), 1048576.0f);
  // And is cut itself: 2^14 + 1 beside a product of 2^14 (unit 2).
  const float p14[] = {128.0f};
  EXPECT_EQ(fp8_mma_step(16385.0f, p14, p14, 1, 1), 32768.0f);
  // A stride walks the second operand; NaN propagates; zeros give +0.
  const float strided[] = {2.0f, -100.0f, 3.0f, -100.0f};
  const float twos[] = {1.0f, 1.0f};
  EXPECT_EQ(fp8_mma_step(0.5f, twos, strided, 2, 2), 5.5f);
  const float nan[] = {std::nanf("")};
  EXPECT_TRUE(std::isnan(fp8_mma_step(1.0f, nan, one, 1, 1)));
  const float zero[] = {0.0f};
  EXPECT_EQ(fp8_mma_step(0.0f, zero, zero, 1, 1), 0.0f);
}

// An e4m3 problem in host memory with descales: Q and K all `qk`, V a column ramp of small integers.
struct Fp8Problem {
  static constexpr int64_t kBatch = 1, kHeadsQ = 2, kHeadsKv = 1, kSeqQ = 3, kSeqK = 300, kDim = 32;
  Params params;
  std::vector<uint8_t> q, k, v;
  std::vector<uint16_t> o;
  std::vector<float> lse, dq, dk, dv;
  explicit Fp8Problem(float qk, float descale_v = 1.0f) {
    params = make_params(DType::kF8E4M3, kBatch, kHeadsQ, kHeadsKv, kSeqQ, kSeqK, kDim);
    const auto fill = [](std::vector<uint8_t>* t, int64_t n, auto value) {
      t->resize(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) (*t)[static_cast<size_t>(i)] = static_cast<uint8_t>(encode_dtype(DType::kF8E4M3, value(i)));
    };
    fill(&q, kBatch * kHeadsQ * kSeqQ * kDim, [&](int64_t) { return qk; });
    fill(&k, kBatch * kHeadsKv * kSeqK * kDim, [&](int64_t) { return qk; });
    fill(&v, kBatch * kHeadsKv * kSeqK * kDim, [](int64_t i) { return static_cast<double>((i / kDim) % 4 + 1); });
    o.assign(static_cast<size_t>(kBatch * kHeadsQ * kSeqQ * kDim), 0);
    lse.assign(static_cast<size_t>(kBatch * kHeadsQ * kSeqQ), 0.0f);
    dq.assign(static_cast<size_t>(kBatch * kHeadsKv), 1.0f);
    dk = dq;
    dv.assign(static_cast<size_t>(kBatch * kHeadsKv), descale_v);
    params.q = q.data();
    params.k = k.data();
    params.v = v.data();
    params.o = o.data();
    params.lse = lse.data();
    params.descale_q = dq.data();
    params.descale_k = dk.data();
    params.descale_v = dv.data();
  }
  double o_at(size_t i) const { return decode_dtype(DType::kBF16, o[i]); }
};

TEST(Fp8Model, EqualScoresAverageVAndTheOffsetLeavesLse) {
  Fp8Problem pr(0.5f, 2.0f);
  ASSERT_TRUE(run_host_model(pr.params).ok());
  // Every score 0.5 * 0.5 * 32 / sqrt(32): P = 2^8 exactly for every key, each tile's sum exact, O = 2 mean(V).
  double mean = 0.0;
  for (int64_t j = 0; j < Fp8Problem::kSeqK; ++j) mean += static_cast<double>(j % 4 + 1);
  mean /= static_cast<double>(Fp8Problem::kSeqK);
  const double want = round_to_dtype(DType::kBF16, 2.0 * static_cast<double>(static_cast<float>(mean)));
  for (size_t i = 0; i < pr.o.size(); ++i) ASSERT_EQ(pr.o_at(i), want) << i;
  // LSE = score + ln(keys): the offset 2^8 taken back from l.
  const double score = 0.25 * 32.0 / std::sqrt(32.0);
  for (float x : pr.lse) EXPECT_NEAR(x, score + std::log(static_cast<double>(Fp8Problem::kSeqK)), 1e-5);
}

TEST(Fp8Model, DescalesScaleScoresAndValues) {
  // descale_q = descale_k = 2 on Q = K = 0.5 is the problem with Q = K = 1: the same bits.
  Fp8Problem scaled(0.5f), plain(1.0f);
  scaled.dq.assign(scaled.dq.size(), 2.0f);
  scaled.dk.assign(scaled.dk.size(), 2.0f);
  // Varied V so that the weights matter: K rows differ.
  for (size_t i = 0; i < scaled.k.size(); ++i) {
    const double x = 0.5 * static_cast<double>((i / 7) % 3);
    scaled.k[i] = static_cast<uint8_t>(encode_dtype(DType::kF8E4M3, x / 2.0));
    plain.k[i] = static_cast<uint8_t>(encode_dtype(DType::kF8E4M3, x));
  }
  ASSERT_TRUE(run_host_model(scaled.params).ok());
  ASSERT_TRUE(run_host_model(plain.params).ok());
  EXPECT_EQ(scaled.o, plain.o);
  EXPECT_EQ(scaled.lse, plain.lse);
}

TEST(Fp8Model, RisingMaxNeverSaturatesAndTheLazyDefectDoes) {
  // K rows rise by one e4m3 step (1/8 of [1, 2)) per K/V tile of 128 keys, the scale making a step 4 in log2 units,
  // and V's rows hold their tile's number plus 1: every weight is a power of two, so O is known.
  const auto run = [](ModelDefect defect) {
    Fp8Problem pr(1.0f);
    for (size_t i = 0; i < pr.k.size(); ++i) {
      const int64_t tile = static_cast<int64_t>(i) / Fp8Problem::kDim / 128;
      pr.k[i] = static_cast<uint8_t>(encode_dtype(DType::kF8E4M3, 1.0 + static_cast<double>(tile) / 8.0));
      pr.v[i] = static_cast<uint8_t>(encode_dtype(DType::kF8E4M3, static_cast<double>(tile + 1)));
    }
    pr.params.softmax_scale = static_cast<float>(4.0 / (std::log2(std::exp(1.0)) * Fp8Problem::kDim / 8.0));
    HostModelOptions options;
    options.defect = defect;
    EXPECT_TRUE(run_host_model(pr.params, options).ok());
    return pr;
  };
  // Per key, tile t weighs 2^(4 t): 128 keys at 1, 128 at 16, 44 at 256.
  const double want = (128.0 * 1 * 1 + 128.0 * 16 * 2 + 44.0 * 256 * 3) / (128.0 * 1 + 128.0 * 16 + 44.0 * 256);
  const Fp8Problem good = run(ModelDefect::kNone);
  for (size_t i = 0; i < good.o.size(); ++i) ASSERT_NEAR(good.o_at(i), want, 0.02) << i;
  // A reference that stays put while the max lies within 8 above it puts P at 2^12 and 2^16: clamped at 448, the
  // heavier tiles lose most of their weight in P V while l keeps it.
  const Fp8Problem lazy = run(ModelDefect::kFp8LazyRescale);
  EXPECT_LT(lazy.o_at(0), 0.5 * want);
}

}  // namespace
}  // namespace flashcheck
