// kernel_model_test (cpu): the host model of the tiled algorithm against a naive double reference on
// shapes aimed at tile boundaries (0, 1, 2, tile-1, tile, tile+1, seqlen_q > seqlen_k), both causal
// alignments, GQA/MQA, strided layouts and V and O of other columns than Q and K (head_dim_v); the exact
// semantics (fully masked rows, NaN at masked keys), the instrumentation counters, the deliberate defects and
// the host number formats.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "flashcheck/attention.h"
#include "flashcheck/host_model.h"
#include "flashcheck/instrument.h"
#include "host_numeric.h"
#include "test_problem.h"

namespace flashcheck {
namespace {

using test::Problem;
using test::ProblemSpec;

constexpr float kInf = std::numeric_limits<float>::infinity();

// Compares every row of the model's output with the reference; returns the number of failures (and
// records the first few with their case).
int compare_with_reference(const Problem& pr, ComputePath path, const std::string& what) {
  const Params& p = pr.params;
  int failures = 0;
  constexpr int kReportLimit = 5;
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t h = 0; h < p.heads_q; ++h) {
      for (int64_t i = 0; i < p.seqlen_q; ++i) {
        const test::ReferenceRow ref = test::reference_row(pr, b, h, i);
        const float lse = pr.lse_at(b, h, i);
        const bool lse_ok = ref.keys == 0 ? lse == -kInf
                                          : std::fabs(double{lse} - ref.lse) <= test::lse_tolerance(p, ref);
        if (!lse_ok && ++failures <= kReportLimit) {
          ADD_FAILURE() << what << ": LSE row (" << b << "," << h << "," << i << ") = " << lse << ", reference "
                        << ref.lse;
        }
        for (int64_t d = 0; d < value_head_dim(p); ++d) {
          const double o = pr.o_at(b, h, i, d);
          const double err = std::fabs(o - ref.o[d]);
          const bool ok = ref.keys == 0 ? o == 0.0 : err <= test::o_tolerance(p, path, ref, ref.o[d]);
          if (!ok && ++failures <= kReportLimit) {
            ADD_FAILURE() << what << ": O(" << b << "," << h << "," << i << "," << d << ") = " << o
                          << ", reference " << ref.o[d] << ", error " << err << " > tolerance "
                          << test::o_tolerance(p, path, ref, ref.o[d]);
          }
        }
      }
    }
  }
  return failures;
}

// ---- shapes at the tile boundaries, per (dtype, head_dim)

class ModelShapes : public ::testing::TestWithParam<std::tuple<DType, int64_t>> {};

TEST_P(ModelShapes, TileBoundarySeqlensAllMasks) {
  const auto [dtype, head_dim] = GetParam();
  const KernelConfig config = select_config(make_params(dtype, 1, 1, 1, 1, 1, head_dim));
  const int64_t bm = config.block_m;
  const int64_t bn = config.block_n;
  ASSERT_GT(bm, 0);
  ASSERT_GT(bn, 0);
  // (seqlen_q, seqlen_k): 0, 1, 2, tile - 1, tile, tile + 1 on each side, q != k both ways.
  const std::vector<std::pair<int64_t, int64_t>> seqlens{
      {1, 0}, {3, 0}, {1, 1}, {2, 2}, {1, 2}, {2, 1}, {bm - 1, bn + 1}, {bm, bn}, {bm + 1, bn - 1},
      {2 * bm + 1, bn}, {bn + 1, 2}, {2, bn + 1}, {bm + 1, 2 * bn + 1}};
  uint64_t seed = 100;
  for (Mask mask : {Mask::kNone, Mask::kCausalTopLeft, Mask::kCausalBottomRight}) {
    for (const auto& [sq, sk] : seqlens) {
      ProblemSpec spec;
      spec.dtype = dtype;
      spec.head_dim = head_dim;
      spec.seqlen_q = sq;
      spec.seqlen_k = sk;
      spec.mask = mask;
      spec.seed = ++seed;
      Problem pr;
      test::make_problem(spec, &pr);
      const Status st = run_host_model(pr.params);
      ASSERT_TRUE(st.ok()) << spec.name() << ": " << st.message();
      ASSERT_EQ(compare_with_reference(pr, config.path, spec.name()), 0) << spec.name();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Model, ModelShapes, test::dtype_head_dim_grid(), test::dtype_head_dim_name);

// ---- heads, layouts, strides

TEST(Model_AllDtypes, GqaMqaBshdAndPaddedRows) {
  uint64_t seed = 7;
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (int64_t heads_kv : {int64_t{1}, int64_t{2}, int64_t{4}}) {
      for (Layout layout : {Layout::kBHSD, Layout::kBSHD}) {
        for (int64_t row_pad : {int64_t{0}, int64_t{3}}) {
          ProblemSpec spec{dtype, 2, 4, heads_kv, 37, 45, 24, Mask::kCausalBottomRight, layout, row_pad, ++seed};
          Problem pr;
          test::make_problem(spec, &pr);
          const Status st = run_host_model(pr.params);
          ASSERT_TRUE(st.ok()) << spec.name() << ": " << st.message();
          ASSERT_EQ(compare_with_reference(pr, select_config(pr.params).path, spec.name()), 0);
        }
      }
    }
  }
}

// Softmax scale is any finite value: negative flips which key dominates, zero averages V.
TEST(Model_F32, NegativeAndZeroScale) {
  for (float scale : {-0.75f, 0.0f, 3.0f}) {
    ProblemSpec spec{DType::kF32, 1, 2, 1, 19, 70, 16, Mask::kCausalTopLeft, Layout::kBHSD, 0, 11};
    Problem pr;
    test::make_problem(spec, &pr);
    pr.params.softmax_scale = scale;
    ASSERT_TRUE(run_host_model(pr.params).ok());
    EXPECT_EQ(compare_with_reference(pr, ComputePath::kGeneralFp32, spec.name() + " scale " + std::to_string(scale)), 0);
  }
}

// The tiling does not change the result beyond fp32 rounding: 1x1 tiles and odd tiles agree with the reference.
TEST(Model_F32, ConfigOverrideOddTiles) {
  for (auto [bm, bn] : {std::pair{1, 1}, std::pair{3, 5}, std::pair{7, 2}}) {
    ProblemSpec spec{DType::kF32, 1, 1, 1, 23, 17, 12, Mask::kCausalBottomRight, Layout::kBHSD, 0, 5};
    Problem pr;
    test::make_problem(spec, &pr);
    HostModelOptions options;
    options.override_config = true;
    options.config = {ComputePath::kGeneralFp32, bm, bn, 32, "override"};
    ASSERT_TRUE(run_host_model(pr.params, options).ok());
    EXPECT_EQ(compare_with_reference(pr, ComputePath::kGeneralFp32, spec.name()), 0) << bm << "x" << bn;
  }
}

// The other compute paths' rounding points stay within their (looser) sanity tolerances.
TEST(Model_Paths, TensorCoreAndSplitTf32Overrides) {
  const std::vector<std::pair<DType, ComputePath>> cases{{DType::kF16, ComputePath::kTensorCore},
                                                         {DType::kBF16, ComputePath::kTensorCore},
                                                         {DType::kF32, ComputePath::kSplitTf32}};
  for (const auto& [dtype, path] : cases) {
    ProblemSpec spec{dtype, 1, 2, 1, 65, 130, 64, Mask::kCausalTopLeft, Layout::kBHSD, 0, 3};
    Problem pr;
    test::make_problem(spec, &pr);
    HostModelOptions options;
    options.override_config = true;
    options.config = {path, 64, 64, 64, "override"};
    ASSERT_TRUE(run_host_model(pr.params, options).ok());
    EXPECT_EQ(compare_with_reference(pr, path, spec.name() + " " + to_string(path)), 0);
  }
}

// The tensor-core path's reference (families.h): a tile whose max lies within kRefSlackLog2 (log2 units) of the
// running max is taken relative to its own max, so the reported m is the last tile's max; a tile further below
// keeps the running max. One row, two K tiles of 64 keys, one key standing out in each tile.
TEST(Model_Paths, TensorCoreReferenceIsTheTileMaxWithinTheSlack) {
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    for (const float second : {3.0f, -3.0f}) {  // log2 distance to the first: 1.44 (within 8), 10.1 (beyond)
      ProblemSpec spec{dtype, 1, 1, 1, 1, 128, 16, Mask::kNone, Layout::kBHSD, 0, 5};
      Problem pr;
      test::make_problem(spec, &pr);
      pr.params.softmax_scale = 1.0f;
      const Params& p = pr.params;
      for (int64_t d = 0; d < 16; ++d) Problem::set(p, pr.q, p.q_stride, 0, 0, 0, d, d == 0 ? 1.0f : 0.0f);
      for (int64_t j = 0; j < 128; ++j) {
        const float score = j == 5 ? 4.0f : (j == 70 ? second : -4.0f);
        for (int64_t d = 0; d < 16; ++d) Problem::set(p, pr.k, p.k_stride, 0, 0, j, d, d == 0 ? score : 0.0f);
      }
      float row_m = std::nanf(""), row_l = std::nanf("");
      HostModelOptions options;
      options.override_config = true;
      options.config = {ComputePath::kTensorCore, 64, 64, 64, "override"};
      options.instrumentation.row_m = &row_m;
      options.instrumentation.row_l = &row_l;
      ASSERT_TRUE(run_host_model(p, options).ok());
      const std::string what = std::string(to_string(dtype)) + " second tile max " + std::to_string(second);
      // Reported m: the second tile's max where it is within the slack, else the running max (the first's).
      EXPECT_NEAR(row_m, second > 0 ? second : 4.0f, 1e-5f) << what;
      EXPECT_NEAR(pr.lse[0], row_m + std::log(row_l), 1e-5f) << what;
      EXPECT_EQ(compare_with_reference(pr, ComputePath::kTensorCore, what), 0);
    }
  }
}

// exp2 as each family evaluates it: the tensor-core path's ex2.approx.ftz flushes a factor below 2^-126 to 0, the
// general path's exp2f keeps it. A sink of 90 over keys of score about 0 rescales the keys by e^-90 (8e-40, a bf16
// subnormal): O is exactly 0 on the tensor-core path and a nonzero subnormal on the general one.
TEST(Model_Paths, TensorCorePathFlushesSubnormalFactors) {
  ProblemSpec spec{DType::kBF16, 1, 1, 1, 1, 64, 16, Mask::kNone, Layout::kBHSD, 0, 9};
  std::vector<float> sink{90.0f};
  int64_t nonzero[2] = {0, 0};
  for (int path = 0; path < 2; ++path) {
    Problem pr;
    test::make_problem(spec, &pr);
    pr.params.softmax_scale = 0x1p-10f;  // scores within a few thousandths of 0
    pr.params.sink = sink.data();
    HostModelOptions options;
    options.override_config = true;
    options.config = {path == 0 ? ComputePath::kTensorCore : ComputePath::kGeneralFp32, 64, 64, 64, "override"};
    ASSERT_TRUE(run_host_model(pr.params, options).ok());
    for (int64_t d = 0; d < 16; ++d) {
      const float o = Problem::get(pr.params, pr.o, pr.params.o_stride, 0, 0, 0, d);
      EXPECT_LT(std::fabs(o), 0x1p-126f) << "path " << path << " col " << d;
      nonzero[path] += o != 0.0f;
    }
    EXPECT_NEAR(pr.lse[0], 90.0f, 1e-4f);
  }
  EXPECT_EQ(nonzero[0], 0);  // flushed
  EXPECT_GT(nonzero[1], 8);  // kept
}

// ---- V and O of other columns than Q and K (head_dim_v)

// Unequal head dims run in the tensor-core family's value pairs (fp16/bf16) or in the general family padded to the
// larger of the two, and the model agrees with the double reference at the tile boundaries, every mask, unsplit and
// in three split runs.
TEST(Model_UnequalHeadDims, AgreeWithTheReferenceAtTileBoundaries) {
  uint64_t seed = 300;
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (const auto& [head_dim, head_dim_v] : test::kUnequalHeadDims) {
      const KernelConfig config = test::unequal_config(dtype, head_dim, head_dim_v);
      const bool pair = test::tensor_core_pair(dtype, head_dim, head_dim_v);
      ASSERT_EQ(config.path, pair ? ComputePath::kTensorCore : ComputePath::kGeneralFp32) << config.name;
      ASSERT_GE(config.head_dim_padded, pair ? head_dim : std::max(head_dim, head_dim_v)) << config.name;
      const int64_t bm = config.block_m, bn = config.block_n;
      const std::vector<std::pair<int64_t, int64_t>> seqlens{{1, 0}, {1, 1}, {2, 1}, {bm - 1, bn + 1}, {bm, bn},
                                                             {bm + 1, 2 * bn + 1}, {2, 3 * bn + 5}};
      for (Mask mask : {Mask::kNone, Mask::kCausalTopLeft, Mask::kCausalBottomRight}) {
        for (const auto& [sq, sk] : seqlens) {
          for (int32_t splits : {1, 3}) {
            ProblemSpec spec{dtype, 1, 2, 1, sq, sk, head_dim, mask, Layout::kBSHD, 0, ++seed, head_dim_v};
            Problem pr;
            test::make_problem(spec, &pr);
            pr.params.num_splits = splits;
            const std::string what = spec.name() + " splits " + std::to_string(splits);
            const Status st = run_host_model(pr.params);
            ASSERT_TRUE(st.ok()) << what << ": " << st.message();
            ASSERT_EQ(compare_with_reference(pr, config.path, what), 0) << what;
          }
        }
      }
    }
  }
}

// The unequal problem is its zero-padded equal twin (test_problem.h) in the same tiles, bit for bit: the model
// computes V's and O's columns as it computes them for equal head dims.
TEST(Model_UnequalHeadDims, ZeroPaddedTwinGivesTheSameBits) {
  uint64_t seed = 400;
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (const auto& [head_dim, head_dim_v] : test::kUnequalHeadDims) {
      for (int32_t splits : {1, 3}) {
        ProblemSpec spec{dtype, 2, 4, 2, 37, 150, head_dim, Mask::kCausalBottomRight, Layout::kBHSD, 3, ++seed,
                         head_dim_v};
        Problem pr, twin;
        test::make_problem(spec, &pr);
        pr.params.num_splits = splits;
        test::make_zero_padded_twin(spec, pr, &twin);
        HostModelOptions same_tiles;
        same_tiles.override_config = true;
        same_tiles.config = select_config(pr.params);
        ASSERT_TRUE(run_host_model(pr.params).ok()) << spec.name();
        ASSERT_TRUE(run_host_model(twin.params, same_tiles).ok()) << spec.name();
        EXPECT_EQ(test::first_bit_difference(pr, twin), "") << spec.name() << " splits " << splits;
      }
    }
  }
}

// head_dim_v = head_dim spelled out is head_dim_v = 0: the same family and tiles (tensor-core, split-TF32 and
// decode shapes included) and the same bits, dense and split.
TEST(Model_UnequalHeadDims, HeadDimVEqualToHeadDimIsZeroBitForBit) {
  uint64_t seed = 500;
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (int64_t head_dim : {int64_t{1}, int64_t{8}, int64_t{40}, int64_t{64}, int64_t{128}, int64_t{256}}) {
      for (const auto& [sq, sk] : {std::pair<int64_t, int64_t>{37, 70}, {1, 300}}) {  // prefill, decoding step
        for (int32_t splits : {1, 3}) {
          ProblemSpec zero{dtype, 1, 4, 2, sq, sk, head_dim, Mask::kCausalBottomRight, Layout::kBSHD, 0, ++seed};
          Problem a, b;
          const std::string what = test::make_spelled_pair(zero, splits, &a, &b);
          const KernelConfig ca = select_config(a.params), cb = select_config(b.params);
          EXPECT_STREQ(ca.name, cb.name) << what;
          EXPECT_EQ(ca.block_m, cb.block_m) << what;
          EXPECT_EQ(ca.block_n, cb.block_n) << what;
          ASSERT_TRUE(run_host_model(a.params).ok()) << what;
          ASSERT_TRUE(run_host_model(b.params).ok()) << what;
          EXPECT_EQ(a.o, b.o) << what;
          EXPECT_EQ(0, std::memcmp(a.lse.data(), b.lse.data(), a.lse.size() * sizeof(float))) << what;
        }
      }
    }
  }
}

// ---- exact semantics

// Bottom-right with seqlen_q > seqlen_k leaves the first rows without keys; seqlen_k = 0 leaves all.
TEST(Model_AllDtypes, FullyMaskedRowsAreZeroWithLseMinusInf) {
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    ProblemSpec spec{dtype, 1, 2, 1, 70, 3, 40, Mask::kCausalBottomRight, Layout::kBHSD, 0, 9};
    Problem pr;
    test::make_problem(spec, &pr);
    ASSERT_TRUE(run_host_model(pr.params).ok());
    for (int64_t h = 0; h < 2; ++h) {
      for (int64_t i = 0; i < 70; ++i) {
        const bool empty = i < 70 - 3;
        if (!empty) {
          EXPECT_TRUE(std::isfinite(pr.lse_at(0, h, i)));
          continue;
        }
        EXPECT_EQ(pr.lse_at(0, h, i), -kInf) << "row " << i;
        for (int64_t d = 0; d < 40; ++d) {
          const float o = pr.o_at(0, h, i, d);
          EXPECT_TRUE(o == 0.0f && !std::signbit(o)) << "row " << i << " dim " << d << " = " << o;
        }
      }
    }
  }
}

TEST(Model_F16, SeqlenKZeroWithNullInputs) {
  ProblemSpec spec{DType::kF16, 2, 3, 3, 5, 0, 8, Mask::kNone, Layout::kBHSD, 0, 1};
  Problem pr;
  test::make_problem(spec, &pr);
  pr.params.q = nullptr;  // with no keys nothing is read (can_implement allows null inputs)
  ASSERT_TRUE(run_host_model(pr.params).ok());
  for (float lse : pr.lse) EXPECT_EQ(lse, -kInf);
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(pr.o_at(1, 2, i, 7), 0.0f);
}

// NaN in K and V at keys the mask hides never reaches O; NaN in a visible V row does.
TEST(Model_AllDtypes, NanAtMaskedKeysDoesNotReachO) {
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    constexpr int64_t kSeq = 70;
    constexpr int64_t kFirstNanKey = 40;
    ProblemSpec spec{dtype, 1, 1, 1, kSeq, kSeq, 32, Mask::kCausalTopLeft, Layout::kBHSD, 0, 21};
    Problem pr;
    test::make_problem(spec, &pr);
    for (int64_t j = kFirstNanKey; j < kSeq; ++j) {
      for (int64_t d = 0; d < 32; ++d) {
        Problem::set(pr.params, pr.k, pr.params.k_stride, 0, 0, j, d, std::nanf(""));
        Problem::set(pr.params, pr.v, pr.params.v_stride, 0, 0, j, d, std::nanf(""));
      }
    }
    ASSERT_TRUE(run_host_model(pr.params).ok());
    for (int64_t i = 0; i < kSeq; ++i) {
      const bool sees_nan = i >= kFirstNanKey;
      for (int64_t d = 0; d < 32; ++d) {
        EXPECT_EQ(std::isnan(pr.o_at(0, 0, i, d)), sees_nan) << to_string(dtype) << " row " << i << " dim " << d;
      }
      EXPECT_EQ(std::isnan(pr.lse_at(0, 0, i)), sees_nan) << "row " << i;
    }
    // Rows that do not see the NaN keys still match the reference (which only reads visible keys).
    Problem clean;
    test::make_problem(spec, &clean);
    clean.params.seqlen_q = kFirstNanKey;  // rows [0, 40) of the same problem; strides unchanged
    clean.params.seqlen_k = kSeq;
    ASSERT_TRUE(run_host_model(clean.params).ok());
    for (int64_t i = 0; i < kFirstNanKey; ++i) {
      for (int64_t d = 0; d < 32; ++d) EXPECT_EQ(pr.o_at(0, 0, i, d), clean.o_at(0, 0, i, d));
    }
  }
}

// ---- instrumentation

TEST(Model_F32, TileKindsTracesAndRescaleBuckets) {
  ProblemSpec spec{DType::kF32, 1, 1, 1, 0, 0, 32, Mask::kCausalTopLeft, Layout::kBHSD, 0, 4};
  const KernelConfig config = select_config(make_params(DType::kF32, 1, 1, 1, 1, 1, 32));
  spec.seqlen_q = 2 * config.block_n;  // two K tiles; Q tiles of block_m rows
  spec.seqlen_k = 2 * config.block_n;
  Problem pr;
  test::make_problem(spec, &pr);
  const int64_t rows = spec.seqlen_q;
  std::vector<float> row_m(rows, std::nanf("")), row_l(rows, std::nanf(""));
  const std::vector<int64_t> traced{0, rows - 1};
  constexpr int32_t kMaxTiles = 4;
  std::vector<float> trace_m(traced.size() * kMaxTiles, std::nanf("")), trace_l(trace_m.size(), std::nanf(""));
  std::vector<uint64_t> kinds(kTileKindCount, 0), buckets(kRescaleBuckets, 0);
  HostModelOptions options;
  options.instrumentation = {row_m.data(), row_l.data(), traced.data(), static_cast<int32_t>(traced.size()),
                             kMaxTiles,    trace_m.data(), trace_l.data(), kinds.data(), buckets.data()};
  ASSERT_TRUE(run_host_model(pr.params, options).ok());

  // Expected counts from the tile geometry alone (causal top-left, square).
  const int64_t bm = config.block_m, bn = config.block_n;
  uint64_t expect[kTileKindCount] = {};
  for (int64_t m0 = 0; m0 < rows; m0 += bm) {
    const int64_t last = std::min(m0 + bm, rows) - 1;
    for (int64_t k0 = 0; k0 < spec.seqlen_k; k0 += bn) {
      if (k0 > last) ++expect[int(TileKind::kSkipped)];
      else if (k0 + bn - 1 > m0) ++expect[int(TileKind::kDiagonal)];
      else ++expect[int(TileKind::kFull)];
    }
  }
  for (int kind = 0; kind < kTileKindCount; ++kind) EXPECT_EQ(kinds[kind], expect[kind]) << "tile kind " << kind;
  EXPECT_EQ(kinds[int(TileKind::kTail)], 0u);
  uint64_t bucket_total = 0;
  for (uint64_t c : buckets) bucket_total += c;
  EXPECT_EQ(bucket_total, static_cast<uint64_t>(rows));
  EXPECT_EQ(buckets[0], 0u);  // every row sees at least its diagonal key, so its max moved at least once

  for (int64_t i = 0; i < rows; ++i) {
    EXPECT_NEAR(pr.lse[i], row_m[i] + std::log(row_l[i]), 1e-5f) << "row " << i;
    EXPECT_GE(row_l[i], 1.0f);  // the maximum contributes exp(0) = 1
  }
  // Row 0 is in Q tile 0, which visits one K tile; the last row's tile visits both.
  EXPECT_EQ(trace_m[0], row_m[0]);
  EXPECT_TRUE(std::isnan(trace_m[1])) << "slot of a tile Q tile 0 never visits must stay untouched";
  EXPECT_EQ(trace_m[kMaxTiles + 1], row_m[rows - 1]);
  EXPECT_EQ(trace_l[kMaxTiles + 1], row_l[rows - 1]);
  EXPECT_LE(trace_m[kMaxTiles + 0], trace_m[kMaxTiles + 1]);  // the running max never decreases
  EXPECT_TRUE(std::isnan(trace_m[kMaxTiles + 2]));
}

// ---- deliberate defects: each changes the result where it should, and only there

TEST(Model_Defects, EachDefectIsVisible) {
  ProblemSpec spec{DType::kF16, 1, 2, 1, 40, 150, 64, Mask::kNone, Layout::kBHSD, 0, 13};
  Problem base;
  test::make_problem(spec, &base);
  ASSERT_TRUE(run_host_model(base.params).ok());
  for (ModelDefect defect : {ModelDefect::kPOneFormatCoarser, ModelDefect::kOAccumInDtype,
                             ModelDefect::kMissingRescale, ModelDefect::kLseBase2}) {
    Problem pr;
    test::make_problem(spec, &pr);
    HostModelOptions options;
    options.defect = defect;
    ASSERT_TRUE(run_host_model(pr.params, options).ok()) << to_string(defect);
    const bool changes_o = defect != ModelDefect::kLseBase2;
    EXPECT_EQ(pr.o != base.o, changes_o) << to_string(defect);
    EXPECT_EQ(pr.lse != base.lse, defect == ModelDefect::kLseBase2) << to_string(defect);
  }
  // Base-2 LSE is the natural one times log2(e).
  Problem pr;
  test::make_problem(spec, &pr);
  HostModelOptions options;
  options.defect = ModelDefect::kLseBase2;
  ASSERT_TRUE(run_host_model(pr.params, options).ok());
  EXPECT_NEAR(pr.lse[0], base.lse[0] * 1.4426950408889634, 1e-4);
}

// ---- errors are values

TEST(Model_Errors, InvalidInputsReturnStatus) {
  ProblemSpec spec{DType::kF32, 1, 1, 1, 4, 4, 8, Mask::kNone, Layout::kBHSD, 0, 1};
  Problem pr;
  test::make_problem(spec, &pr);
  Params bad = pr.params;
  bad.head_dim = 300;
  EXPECT_EQ(run_host_model(bad).code(), StatusCode::kInvalidArgument);
  HostModelOptions options;
  options.override_config = true;
  options.config = {ComputePath::kGeneralFp32, 0, 64, 32, "bad"};
  const Status st = run_host_model(pr.params, options);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("block_m"), std::string::npos) << st.message();
  HostModelOptions trace_options;
  trace_options.instrumentation.trace_row_count = 2;  // rows pointer left null
  EXPECT_EQ(run_host_model(pr.params, trace_options).code(), StatusCode::kInvalidArgument);
  // No-op sizes succeed and write nothing.
  Params empty = pr.params;
  empty.seqlen_q = 0;
  const std::vector<unsigned char> before = pr.o;
  EXPECT_TRUE(run_host_model(empty).ok());
  EXPECT_EQ(pr.o, before);
}

// ---- host number formats

TEST(HostNumeric, F16RoundToNearestEven) {
  using namespace detail::host;
  EXPECT_EQ(float_to_f16_bits(1.0f), 0x3c00);
  EXPECT_EQ(float_to_f16_bits(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_f16_bits(65519.996f), 0x7bff);  // below the halfway point to 65536
  EXPECT_EQ(float_to_f16_bits(65520.0f), 0x7c00);    // halfway rounds to even: overflow to inf
  EXPECT_EQ(float_to_f16_bits(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(float_to_f16_bits(std::ldexp(1.0f, -25)), 0x0000);  // half of it: tie to even (zero)
  EXPECT_EQ(float_to_f16_bits(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(float_to_f16_bits(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 ulp: tie to even (2)
  EXPECT_EQ(float_to_f16_bits(1.0f + std::ldexp(1.0f, -11)), 0x3c00);   // tie: stays even
  EXPECT_EQ(float_to_f16_bits(1.0f + std::ldexp(3.0f, -11)), 0x3c02);   // tie: rounds up to even
  EXPECT_EQ(float_to_f16_bits(std::ldexp(1023.5f, -24)), 0x0400);       // subnormal carries into the normal range
  EXPECT_EQ(float_to_f16_bits(-2.0f), 0xc000);
  EXPECT_EQ(float_to_f16_bits(-0.0f), 0x8000);
  EXPECT_TRUE(std::isnan(f16_bits_to_float(float_to_f16_bits(std::nanf("")))));
  for (uint32_t h = 0; h < 0x7c00; ++h) {  // every finite fp16 survives the round trip
    ASSERT_EQ(float_to_f16_bits(f16_bits_to_float(static_cast<uint16_t>(h))), h);
  }
}

TEST(HostNumeric, Bf16Tf32E4m3) {
  using namespace detail::host;
  EXPECT_EQ(float_to_bf16_bits(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16_bits(1.0f + std::ldexp(1.0f, -8)), 0x3f80);       // tie to even
  EXPECT_EQ(float_to_bf16_bits(1.0f + std::ldexp(3.0f, -8)), 0x3f82);       // tie up to even
  EXPECT_EQ(float_to_bf16_bits(std::numeric_limits<float>::max()), 0x7f80);  // overflows to inf
  EXPECT_TRUE(std::isnan(bf16_bits_to_float(float_to_bf16_bits(std::nanf("")))));
  EXPECT_EQ(round_to_tf32(1.0f + std::ldexp(1.0f, -11)), 1.0f + std::ldexp(1.0f, -10));  // tie away from zero
  EXPECT_EQ(round_to_tf32(1.0f + std::ldexp(1.0f, -12)), 1.0f);
  const float x = 0.1234567f;
  EXPECT_EQ(round_to_tf32(x) + round_to_tf32(x - round_to_tf32(x)), round_to_tf32(x) + (x - round_to_tf32(x)));
  EXPECT_EQ(round_to_e4m3(1.0f), 1.0f);
  EXPECT_EQ(round_to_e4m3(1.0625f), 1.0f);    // halfway between 1 and 1.125: to even
  EXPECT_EQ(round_to_e4m3(1.1875f), 1.25f);   // halfway between 1.125 and 1.25: to even
  EXPECT_EQ(round_to_e4m3(448.0f), 448.0f);
  EXPECT_EQ(round_to_e4m3(std::ldexp(1.0f, -9)), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(round_to_e4m3(std::ldexp(1.0f, -11)), 0.0f);
  EXPECT_EQ(round_to_e4m3(500.0f), 448.0f);  // satfinite, as the kernel's cvt.rn.satfinite
  EXPECT_EQ(round_to_e4m3(-std::numeric_limits<float>::infinity()), -448.0f);
  EXPECT_TRUE(std::isnan(round_to_e4m3(std::nanf(""))));
}

}  // namespace
}  // namespace flashcheck
