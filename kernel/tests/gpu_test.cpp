// kernel_gpu_test (gpu): the CUDA kernels against the host model and the double reference on the model
// test's shapes, through the public run() (whatever family select_config picks) and through the general
// family directly (it serves every input, so it is tested even where another family is preferred), V and O of
// other columns than Q and K (head_dim_v) included.
// Exact where the contract is exact: fully masked rows, NaN at masked keys, no-op sizes write nothing.
// Every test skips with a reason when no CUDA device is available.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "families.h"
#include "flashcheck/attention.h"
#include "flashcheck/host_model.h"
#include "gpu_util.h"
#include "tensor_core/tile_config.h"
#include "test_problem.h"

namespace flashcheck {
namespace {

using test::Problem;
using test::ProblemSpec;

constexpr float kInf = std::numeric_limits<float>::infinity();

#if defined(FLASHCHECK_HAS_CUDA)

enum class Route { kRun, kGeneral };
const char* to_string(Route route) { return route == Route::kRun ? "run()" : "general_launch()"; }

// The config the route executes, for the model to mirror.
KernelConfig route_config(const Params& params, Route route) {
  KernelConfig config = select_config(params);
  if (route == Route::kGeneral) detail::general_select(params, &config);
  return config;
}

Status launch_route(const Params& dp, Route route) {
  if (route == Route::kRun) return run(dp);
  if (dp.batch == 0 || dp.heads_q == 0 || dp.seqlen_q == 0) return Status::ok_status();  // launch precondition
  if (Status st = can_implement(dp); !st.ok()) return st;
  return detail::general_launch(dp, route_config(dp, Route::kGeneral), nullptr, nullptr);
}

// Runs spec (with num_splits) on the GPU by `route` and on the host model with the same config, and compares: the
// GPU to the model (NaN pattern identical, values within the sanity tolerance) and to the double reference.
void check_against_model(const ProblemSpec& spec, Route route, Problem* gpu_out = nullptr, int32_t num_splits = 1) {
  Problem gpu, model;
  test::make_problem(spec, &gpu);
  test::make_problem(spec, &model);
  gpu.params.num_splits = model.params.num_splits = num_splits;
  const KernelConfig config = route_config(gpu.params, route);
  const std::string what = spec.name() + " splits " + std::to_string(effective_splits(gpu.params)) + " via " +
                           to_string(route) + " (" + config.name + ")";
  const Status st = test::run_on_device(&gpu, [&](const Params& dp) { return launch_route(dp, route); });
  ASSERT_TRUE(st.ok()) << what << ": " << st.message();
  HostModelOptions options;
  options.override_config = true;
  options.config = config;
  ASSERT_TRUE(run_host_model(model.params, options).ok()) << what;

  const Params& p = gpu.params;
  int failures = 0;
  constexpr int kReportLimit = 5;
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t h = 0; h < p.heads_q; ++h) {
      for (int64_t i = 0; i < p.seqlen_q; ++i) {
        const test::ReferenceRow ref = test::reference_row(gpu, b, h, i);
        const float lse = gpu.lse_at(b, h, i);
        if (ref.keys == 0) {
          EXPECT_EQ(lse, -kInf) << what << " row " << i;
        } else if (!(std::fabs(double{lse} - ref.lse) <= test::lse_tolerance(p, ref)) && ++failures <= kReportLimit) {
          ADD_FAILURE() << what << ": LSE(" << b << "," << h << "," << i << ") = " << lse << ", reference " << ref.lse
                        << ", model " << model.lse_at(b, h, i);
        }
        for (int64_t d = 0; d < value_head_dim(p); ++d) {
          const float o = gpu.o_at(b, h, i, d);
          const float o_model = model.o_at(b, h, i, d);
          bool ok = false;
          if (ref.keys == 0) {
            ok = o == 0.0f && !std::signbit(o);  // exact: fully masked rows are +0
          } else {
            const double tol = test::o_tolerance(p, config.path, ref, ref.o[d]);
            ok = std::fabs(double{o} - ref.o[d]) <= tol && std::fabs(double{o} - double{o_model}) <= 2 * tol;
          }
          if (!ok && ++failures <= kReportLimit) {
            ADD_FAILURE() << what << ": O(" << b << "," << h << "," << i << "," << d << ") = " << o << ", model "
                          << o_model << ", reference " << ref.o[d];
          }
        }
      }
    }
  }
  EXPECT_EQ(failures, 0) << what;
  if (gpu_out != nullptr) *gpu_out = std::move(gpu);
}

#endif  // FLASHCHECK_HAS_CUDA

// ---- shapes at the tile boundaries, per (dtype, head_dim), both routes

class GpuShapes : public ::testing::TestWithParam<std::tuple<DType, int64_t>> {};

TEST_P(GpuShapes, TileBoundarySeqlensAllMasks) {
  SKIP_WITHOUT_DEVICE();
#if defined(FLASHCHECK_HAS_CUDA)
  const auto [dtype, head_dim] = GetParam();
  for (Route route : {Route::kRun, Route::kGeneral}) {
    const KernelConfig config = route_config(make_params(dtype, 1, 1, 1, 1, 1, head_dim), route);
    const int64_t bm = config.block_m;
    const int64_t bn = config.block_n;
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
        check_against_model(spec, route);
        if (HasFailure()) return;
      }
    }
  }
#endif
}

INSTANTIATE_TEST_SUITE_P(Gpu, GpuShapes, test::dtype_head_dim_grid(), test::dtype_head_dim_name);

TEST(Gpu_AllDtypes, GqaMqaBshdAndUnalignedRows) {
  SKIP_WITHOUT_DEVICE();
#if defined(FLASHCHECK_HAS_CUDA)
  uint64_t seed = 7;
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (int64_t heads_kv : {int64_t{1}, int64_t{2}, int64_t{4}}) {
      for (Layout layout : {Layout::kBHSD, Layout::kBSHD}) {
        for (int64_t row_pad : {int64_t{0}, int64_t{3}}) {  // pad 3: rows not 16-byte aligned
          for (Route route : {Route::kRun, Route::kGeneral}) {
            check_against_model({dtype, 2, 4, heads_kv, 37, 45, 24, Mask::kCausalBottomRight, layout, row_pad, ++seed},
                                route);
            if (HasFailure()) return;
          }
        }
      }
    }
  }
#endif
}

// Longer sequences: many K tiles per Q tile, rescales across tiles, the causal skip in both alignments.
TEST(Gpu_AllDtypes, LongCausalSequences) {
  SKIP_WITHOUT_DEVICE();
#if defined(FLASHCHECK_HAS_CUDA)
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (Mask mask : {Mask::kCausalTopLeft, Mask::kCausalBottomRight, Mask::kNone}) {
      for (Route route : {Route::kRun, Route::kGeneral}) {
        check_against_model({dtype, 1, 2, 1, 333, 517, 128, mask, Layout::kBHSD, 0, 77}, route);
        check_against_model({dtype, 1, 1, 1, 517, 333, 64, mask, Layout::kBSHD, 0, 78}, route);
      }
    }
  }
#endif
}

// More (Q tile, head, batch) work items than gridDim.y/z could hold: the grid folds them into x.
TEST(Gpu_F32, ManyHeadsBeyondGridYLimit) {
  SKIP_WITHOUT_DEVICE();
#if defined(FLASHCHECK_HAS_CUDA)
  check_against_model({DType::kF32, 3, 30000, 1, 2, 3, 4, Mask::kNone, Layout::kBHSD, 0, 5}, Route::kRun);
#endif
}

// ---- V and O of other columns than Q and K (head_dim_v)

// Unequal head dims, through run() (the tensor-core family's value pairs for fp16/bf16, else the general family) and
// general_launch(): the model and the reference agree at the tile boundaries, every mask, unsplit and in three split
// runs, with GQA and the BSHD layout.
TEST(Gpu_UnequalHeadDims, MatchTheModelAndTheReference) {
  SKIP_WITHOUT_DEVICE();
#if defined(FLASHCHECK_HAS_CUDA)
  uint64_t seed = 600;
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (const auto& [head_dim, head_dim_v] : test::kUnequalHeadDims) {
      const KernelConfig config = test::unequal_config(dtype, head_dim, head_dim_v);
      ASSERT_EQ(config.path, test::tensor_core_pair(dtype, head_dim, head_dim_v) ? ComputePath::kTensorCore
                                                                                 : ComputePath::kGeneralFp32)
          << config.name;
      const int64_t bm = config.block_m, bn = config.block_n;
      for (Mask mask : {Mask::kNone, Mask::kCausalTopLeft, Mask::kCausalBottomRight}) {
        for (const auto& [sq, sk] : {std::pair<int64_t, int64_t>{1, 1}, {bm + 1, 2 * bn + 1}, {2, 3 * bn + 5}}) {
          for (int32_t splits : {1, 3}) {
            for (Route route : {Route::kRun, Route::kGeneral}) {
              check_against_model({dtype, 1, 2, 1, sq, sk, head_dim, mask, Layout::kBHSD, 0, ++seed, head_dim_v},
                                  route, nullptr, splits);
              if (HasFailure()) return;
            }
          }
        }
      }
      for (int32_t splits : {1, 3}) {
        check_against_model({dtype, 2, 4, 2, 37, 45, head_dim, Mask::kCausalBottomRight, Layout::kBSHD, 3, ++seed,
                             head_dim_v},
                            Route::kRun, nullptr, splits);
        if (HasFailure()) return;
      }
    }
  }
#endif
}

// The unequal problem on the GPU is its zero-padded equal twin (test_problem.h) in the general family, bit for bit:
// both pad to the same family, so every score, weight and accumulator column is computed alike; unsplit and split,
// with 16-byte loads (row pad 0, where the strides allow) and element loads (row pad 3).
TEST(Gpu_UnequalHeadDims, ZeroPaddedTwinGivesTheSameBits) {
  SKIP_WITHOUT_DEVICE();
#if defined(FLASHCHECK_HAS_CUDA)
  uint64_t seed = 700;
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (const auto& [head_dim, head_dim_v] : test::kUnequalHeadDims) {
      for (int64_t row_pad : {int64_t{0}, int64_t{3}}) {
        for (int32_t splits : {1, 3}) {
          const ProblemSpec spec{dtype, 2, 4, 2, 70, 150, head_dim, Mask::kCausalBottomRight, Layout::kBHSD, row_pad,
                                 ++seed, head_dim_v};
          Problem unequal, twin;
          test::make_problem(spec, &unequal);
          unequal.params.num_splits = splits;
          test::make_zero_padded_twin(spec, unequal, &twin);
          const std::string what = spec.name() + " splits " + std::to_string(splits);
          ASSERT_STREQ(route_config(unequal.params, Route::kGeneral).name,
                       route_config(twin.params, Route::kGeneral).name)
              << what;
          test::expect_same_bits_on_device(
              &unequal, &twin, [](const Params& dp) { return launch_route(dp, Route::kGeneral); }, what);
        }
      }
    }
  }
#endif
}

// head_dim_v = head_dim spelled out runs what head_dim_v = 0 runs (every family: tensor-core, split-TF32, decode and
// general shapes, split or not), bit for bit.
TEST(Gpu_UnequalHeadDims, HeadDimVEqualToHeadDimIsZeroBitForBit) {
  SKIP_WITHOUT_DEVICE();
#if defined(FLASHCHECK_HAS_CUDA)
  uint64_t seed = 800;
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (int64_t head_dim : {int64_t{8}, int64_t{40}, int64_t{64}, int64_t{128}, int64_t{256}}) {
      for (const auto& [sq, sk] : {std::pair<int64_t, int64_t>{130, 200}, {1, 300}}) {  // prefill, decoding step
        for (int32_t splits : {1, 3}) {
          const ProblemSpec zero{dtype, 1, 4, 2, sq, sk, head_dim, Mask::kCausalBottomRight, Layout::kBSHD, 0, ++seed};
          Problem a, b;
          const std::string what =
              test::make_spelled_pair(zero, splits, &a, &b) + " (" + select_config(a.params).name + ")";
          ASSERT_STREQ(select_config(a.params).name, select_config(b.params).name) << what;
          test::expect_same_bits_on_device(&a, &b, [](const Params& dp) { return run(dp); }, what);
        }
      }
    }
  }
#endif
}

// ---- exact semantics

TEST(Gpu_AllDtypes, FullyMaskedRowsAndEmptyKeys) {
  SKIP_WITHOUT_DEVICE();
#if defined(FLASHCHECK_HAS_CUDA)
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (Route route : {Route::kRun, Route::kGeneral}) {
      check_against_model({dtype, 1, 2, 1, 70, 3, 40, Mask::kCausalBottomRight, Layout::kBHSD, 0, 9}, route);
      // seqlen_k = 0 with null Q, K, V: every row O = 0, LSE = -inf.
      Problem pr;
      test::make_problem({dtype, 2, 3, 3, 5, 0, 8, Mask::kNone, Layout::kBHSD, 0, 1}, &pr);
      pr.params.q = nullptr;
      const Status st = test::run_on_device(&pr, [&](const Params& dp) { return launch_route(dp, route); });
      ASSERT_TRUE(st.ok()) << st.message();
      for (float lse : pr.lse) EXPECT_EQ(lse, -kInf);
      for (int64_t b = 0; b < 2; ++b) {
        for (int64_t i = 0; i < 5; ++i) {
          for (int64_t d = 0; d < 8; ++d) EXPECT_EQ(pr.o_at(b, 2, i, d), 0.0f);
        }
      }
    }
  }
#endif
}

// NaN in K and V at keys the mask hides never reaches O; a visible NaN V row does (both exact properties).
TEST(Gpu_AllDtypes, NanAtMaskedKeysDoesNotReachO) {
  SKIP_WITHOUT_DEVICE();
#if defined(FLASHCHECK_HAS_CUDA)
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (Route route : {Route::kRun, Route::kGeneral}) {
      constexpr int64_t kSeq = 150;
      constexpr int64_t kFirstNanKey = 97;
      Problem pr;
      test::make_problem({dtype, 1, 1, 1, kSeq, kSeq, 64, Mask::kCausalTopLeft, Layout::kBHSD, 0, 21}, &pr);
      for (int64_t j = kFirstNanKey; j < kSeq; ++j) {
        for (int64_t d = 0; d < 64; ++d) {
          Problem::set(pr.params, pr.k, pr.params.k_stride, 0, 0, j, d, std::nanf(""));
          Problem::set(pr.params, pr.v, pr.params.v_stride, 0, 0, j, d, std::nanf(""));
        }
      }
      const Status st = test::run_on_device(&pr, [&](const Params& dp) { return launch_route(dp, route); });
      ASSERT_TRUE(st.ok()) << st.message();
      for (int64_t i = 0; i < kSeq; ++i) {
        const bool sees_nan = i >= kFirstNanKey;
        for (int64_t d = 0; d < 64; ++d) {
          ASSERT_EQ(std::isnan(pr.o_at(0, 0, i, d)), sees_nan)
              << to_string(dtype) << " " << to_string(route) << " row " << i << " dim " << d;
        }
      }
    }
  }
#endif
}

// A causal row is bit-identical whatever its hidden keys hold, even V values the tf32 split cannot carry
// (|v| >= (2 - 2^-11) 2^127, inf): only the rows that see such a value take the split-TF32 exact CUDA-core path.
// A tile-wide exact path would change the last bits of rows that never see it (the GPU property
// CausalRowsIgnoreInvisibleKeys finds that at f32 sq=sk=6 d=64 causal-br v=nearmax(1)). The tensor-core families
// carry fp16 and bf16 values exactly, so their hidden non-finite V is checked the same way.
TEST(Gpu_AllDtypes, HiddenUnsplittableVLeavesCausalRowsBitIdentical) {
  SKIP_WITHOUT_DEVICE();
#if defined(FLASHCHECK_HAS_CUDA)
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (int64_t seq : {int64_t{6}, int64_t{150}}) {
      constexpr int64_t kDim = 64;
      Problem base, changed;
      const ProblemSpec spec{dtype, 1, 1, 1, seq, seq, kDim, Mask::kCausalBottomRight, Layout::kBHSD, 0, 23};
      test::make_problem(spec, &base);
      test::make_problem(spec, &changed);
      const float big = dtype == DType::kF32 ? std::numeric_limits<float>::max() : std::numeric_limits<float>::infinity();
      const int64_t first_changed = seq / 2;  // rows below it never see the changed keys
      for (int64_t j = first_changed; j < seq; ++j) {
        for (int64_t d = 0; d < kDim; ++d) {
          Problem::set(changed.params, changed.v, changed.params.v_stride, 0, 0, j, d, (d % 2 ? -big : big));
        }
      }
      ASSERT_TRUE(test::run_on_device(&base, [&](const Params& dp) { return run(dp); }).ok());
      ASSERT_TRUE(test::run_on_device(&changed, [&](const Params& dp) { return run(dp); }).ok());
      for (int64_t i = 0; i < first_changed; ++i) {
        for (int64_t d = 0; d < kDim; ++d) {
          const float a = base.o_at(0, 0, i, d), b = changed.o_at(0, 0, i, d);
          ASSERT_EQ(std::memcmp(&a, &b, sizeof a), 0)
              << to_string(dtype) << " seq " << seq << " row " << i << " dim " << d << ": " << a << " vs " << b;
        }
      }
    }
  }
#endif
}

#if defined(FLASHCHECK_HAS_CUDA)
// Every logical O element and every LSE value of two runs of the same problem, bit for bit; the first
// difference fails the test with its coordinates (x_name / y_name say which run is which).
void assert_bit_identical(const Problem& x, const Problem& y, const std::string& what, const char* x_name,
                          const char* y_name) {
  const Params& p = x.params;
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t h = 0; h < p.heads_q; ++h)
      for (int64_t s = 0; s < p.seqlen_q; ++s)
        for (int64_t d = 0; d < value_head_dim(p); ++d) {
          const float xv = Problem::get(p, x.o, p.o_stride, b, h, s, d);
          const float yv = Problem::get(y.params, y.o, y.params.o_stride, b, h, s, d);
          ASSERT_EQ(std::memcmp(&xv, &yv, sizeof(float)), 0)
              << what << ": O(" << b << ", " << h << ", " << s << ", " << d << ") " << xv << " (" << x_name
              << ") vs " << yv << " (" << y_name << ")";
        }
  ASSERT_EQ(x.lse.size(), y.lse.size()) << what;
  for (size_t i = 0; i < x.lse.size(); ++i) {
    ASSERT_EQ(std::memcmp(&x.lse[i], &y.lse[i], sizeof(float)), 0)
        << what << ": LSE " << i << " " << x.lse[i] << " (" << x_name << ") vs " << y.lse[i] << " (" << y_name << ")";
  }
}
#endif

#if defined(FLASHCHECK_HAS_CUDA) && defined(FLASHCHECK_HAS_TENSOR_CORE)
// A BHSD problem shape for the tests that run one problem two ways and compare the bits.
struct TwoWayShape {
  DType dtype;
  int64_t batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim;
  Mask mask;
  int64_t head_dim_v = 0;  // 0: head_dim
};

// run() with the tensor-core family held to its cp.async kernel (detail::tensor_core_force_cp_async).
Status run_cp_async(const Params& params) {
  detail::tensor_core_force_cp_async(true);
  const Status st = run(params);
  detail::tensor_core_force_cp_async(false);
  return st;
}

// Two copies of the problem of `sh` with inputs from `seed`; returns its name for messages.
std::string make_problem_pair(const TwoWayShape& sh, uint64_t seed, Problem* x, Problem* y) {
  const ProblemSpec spec{sh.dtype, sh.batch, sh.heads_q, sh.heads_kv, sh.seqlen_q, sh.seqlen_k, sh.head_dim,
                         sh.mask, Layout::kBHSD, 0, seed, sh.head_dim_v};
  test::make_problem(spec, x);
  test::make_problem(spec, y);
  return spec.name();
}

// Runs `tma` as selected (the tensor-core family's warp-specialized kernel) and `cp_async` on its cp.async kernel,
// then compares O and LSE bit for bit.
void assert_kernels_agree(Problem* tma, Problem* cp_async, const std::string& what) {
  ASSERT_EQ(select_config(tma->params).path, ComputePath::kTensorCore) << what;
  ASSERT_TRUE(test::run_on_device(tma, [&](const Params& dp) { return run(dp); }).ok()) << what;
  const Status forced = test::run_on_device(cp_async, run_cp_async);
  ASSERT_TRUE(forced.ok()) << what << ": " << forced.message();
  assert_bit_identical(*tma, *cp_async, what, "warp-specialized", "cp.async");
}
#endif

// Persistent CTAs (tensor_core/schedule.h): with more work items than CTAs fit on the GPU, each CTA loops and
// loads the next item's Q and first K/V tile during the current item's last tile. Scheduling must not change a
// bit: the whole batch in one launch equals one launch per batch element (few items: one item per CTA).
// The shapes mix items without K/V tiles (bottom-right, seqlen_q - seqlen_k >= a Q tile), single-tile items,
// GQA and a negative scale on the families that may run persistent (d128 always, d256 causal: tile_config.h);
// schedule_test checks the causal ones plan persistent on an H100. d64 runs one item per CTA: a control.
TEST(Gpu_F16Bf16, PersistentGridMatchesOneLaunchPerBatch) {
  SKIP_WITHOUT_DEVICE();
  SKIP_WITHOUT_TENSOR_CORE();
#if defined(FLASHCHECK_HAS_CUDA) && defined(FLASHCHECK_HAS_TENSOR_CORE)
  struct Shape {
    DType dtype;
    int64_t batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim;
    Mask mask;
    float scale_sign;
  };
  const Shape shapes[] = {
      {DType::kF16, 16, 8, 2, 300, 300, 128, Mask::kNone, 1.0f},
      {DType::kBF16, 16, 8, 8, 512, 512, 128, Mask::kCausalTopLeft, 1.0f},
      {DType::kF16, 16, 8, 4, 400, 200, 256, Mask::kCausalBottomRight, 1.0f},
      {DType::kBF16, 32, 16, 4, 256, 1000, 256, Mask::kCausalTopLeft, -1.0f},
      {DType::kF16, 64, 16, 16, 64, 64, 128, Mask::kNone, 1.0f},
      {DType::kBF16, 16, 16, 2, 777, 333, 128, Mask::kCausalBottomRight, 1.0f},
      {DType::kBF16, 16, 8, 2, 300, 300, 64, Mask::kCausalBottomRight, -1.0f},  // d64: one item per CTA
  };
  uint64_t seed = 4000;
  for (const Shape& sh : shapes) {
    const ProblemSpec spec{sh.dtype, sh.batch, sh.heads_q, sh.heads_kv, sh.seqlen_q, sh.seqlen_k, sh.head_dim,
                           sh.mask, Layout::kBHSD, 0, ++seed};
    Problem whole, split;
    test::make_problem(spec, &whole);
    test::make_problem(spec, &split);
    whole.params.softmax_scale *= sh.scale_sign;
    split.params.softmax_scale *= sh.scale_sign;
    const std::string what = spec.name() + " scale " + std::to_string(whole.params.softmax_scale);
    ASSERT_EQ(select_config(whole.params).path, ComputePath::kTensorCore) << what;
    ASSERT_TRUE(test::run_on_device(&whole, [&](const Params& dp) { return run(dp); }).ok()) << what;
    const Status st = test::run_on_device(&split, [&](const Params& dp) {
      const int64_t elem = dtype_size(dp.dtype);
      for (int64_t b = 0; b < dp.batch; ++b) {
        Params one = dp;
        one.batch = 1;
        one.q = static_cast<const char*>(dp.q) + b * dp.q_stride.batch * elem;
        one.k = static_cast<const char*>(dp.k) + b * dp.k_stride.batch * elem;
        one.v = static_cast<const char*>(dp.v) + b * dp.v_stride.batch * elem;
        one.o = static_cast<char*>(dp.o) + b * dp.o_stride.batch * elem;
        one.lse = dp.lse + b * dp.heads_q * dp.seqlen_q;
        if (Status s = run(one); !s.ok()) return s;
      }
      return Status::ok_status();
    });
    ASSERT_TRUE(st.ok()) << what << ": " << st.message();
    assert_bit_identical(whole, split, what, "one launch", "per-batch launches");
    if (HasFatalFailure()) return;
    // And against the model and the double reference on the smallest shape (the reference is O(B H Sq Sk d)).
    if (sh.batch == 64) check_against_model(spec, Route::kRun);
  }
#endif
}

// The same loads carried across items on shapes small enough for compute-sanitizer (memcheck, racecheck,
// initcheck, synccheck run this test: kernel/tests/CMakeLists.txt): a few items per CTA, items without K/V
// tiles between items with them, against the model and the double reference.
TEST(Gpu_F16Bf16, PersistentGridSmallShapes) {
  SKIP_WITHOUT_DEVICE();
#if defined(FLASHCHECK_HAS_CUDA)
  // 140 heads x 2 Q tiles of d128: 280 items on at most 132 SMs x 1 CTA (persistent, every CTA two or three).
  check_against_model({DType::kF16, 1, 140, 35, 129, 129, 128, Mask::kNone, Layout::kBHSD, 0, 61}, Route::kRun);
  // Bottom-right, seqlen_q - seqlen_k > 128: Q tiles without any visible key between tiles with keys; d256 tiles
  // run persistent for causal masks.
  check_against_model({DType::kBF16, 1, 88, 88, 300, 100, 256, Mask::kCausalBottomRight, Layout::kBHSD, 0, 62},
                      Route::kRun);
  // d256 non-causal with 10 K/V tiles an item: O stored from registers (kernel_ws.cuh, OStaging::kRegisters),
  // padded columns (head_dim 200) and a Q tile with one real row: nothing written past row 129 or column 200.
  check_against_model({DType::kBF16, 1, 70, 35, 129, 600, 200, Mask::kNone, Layout::kBHSD, 0, 63}, Route::kRun);
  // Split-KV on the tensor cores: 3 runs of Q tiles reading 1-6 K/V tiles (runs without tiles), partials of padded
  // columns (head_dim 120) and of a Q tile with one real row.
  check_against_model({DType::kF16, 1, 4, 2, 129, 700, 120, Mask::kCausalBottomRight, Layout::kBHSD, 0, 64},
                      Route::kRun, nullptr, 3);
#endif
}

// Split-KV on the tensor-core family (schedule.h, split_item; common/combine.cuh): each Q tile's K/V tiles run in
// contiguous runs whose partials the combine merges. For a given split count both kernels give the same bits and a
// rerun repeats them, and O and LSE agree with the model and the double reference: d = 64 on both tile shapes, 128,
// 256 and padded columns, every mask, GQA, more runs than a Q tile has K/V tiles, and the heuristic's count (0).
TEST(Gpu_F16Bf16, SplitKvAgreesWithTheModelOnBothKernels) {
  SKIP_WITHOUT_DEVICE();
  SKIP_WITHOUT_TENSOR_CORE();
#if defined(FLASHCHECK_HAS_CUDA) && defined(FLASHCHECK_HAS_TENSOR_CORE)
  const ProblemSpec specs[] = {
      {DType::kBF16, 1, 2, 1, 300, 2000, 128, Mask::kNone, Layout::kBHSD, 0, 0},
      {DType::kF16, 1, 2, 2, 500, 1100, 64, Mask::kCausalTopLeft, Layout::kBHSD, 0, 0},
      {DType::kBF16, 1, 1, 1, 1000, 1500, 64, Mask::kNone, Layout::kBSHD, 0, 0},  // 192-row tiles
      {DType::kF16, 1, 4, 2, 129, 900, 256, Mask::kCausalBottomRight, Layout::kBHSD, 0, 0},
      {DType::kBF16, 2, 2, 1, 260, 1200, 40, Mask::kCausalBottomRight, Layout::kBHSD, 0, 0},
  };
  uint64_t seed = 7200;
  int64_t checked = 0;
  for (ProblemSpec spec : specs) {
    spec.seed = ++seed;
    for (const int32_t splits : {2, 7, 0}) {
      Problem ws;
      check_against_model(spec, Route::kRun, &ws, splits);
      if (HasFatalFailure()) return;
      const std::string what = spec.name() + " splits " + std::to_string(effective_splits(ws.params));
      ASSERT_EQ(select_config(ws.params).path, ComputePath::kTensorCore) << what;
      if (splits == 0) {
        EXPECT_GT(effective_splits(ws.params), 1) << what << ": few Q tiles split";
      }
      Problem again, cp_async;
      test::make_problem(spec, &again);
      test::make_problem(spec, &cp_async);
      again.params.num_splits = cp_async.params.num_splits = splits;
      ASSERT_TRUE(test::run_on_device(&again, [&](const Params& dp) { return run(dp); }).ok()) << what;
      assert_bit_identical(ws, again, what, "a run", "its rerun");
      const Status forced = test::run_on_device(&cp_async, run_cp_async);
      ASSERT_TRUE(forced.ok()) << what << ": " << forced.message();
      assert_bit_identical(ws, cp_async, what, "warp-specialized", "cp.async");
      if (HasFatalFailure()) return;
      ++checked;
    }
  }
  RecordProperty("cases", std::to_string(checked));
#endif
}

// The warp-specialized kernel (kernel_ws.cuh) and the cp.async kernel (kernel.cuh, forced through
// detail::tensor_core_force_cp_async) compute O and LSE bit for bit on the same inputs: both apply the same parts
// (mainloop, mask, softmax step, epilogue) in the same order per row. Covers d = 64/128/256 and the value pairs
// (192, 128), (64, 128), (128, 64), (256, 128), GQA, all three masks, and both O stores of d = 256 and of (192, 128)
// (own O tile for short items, straight from registers for long ones).
TEST(Gpu_F16Bf16, WarpSpecializedMatchesCpAsyncKernel) {
  SKIP_WITHOUT_DEVICE();
  SKIP_WITHOUT_TENSOR_CORE();
#if defined(FLASHCHECK_HAS_CUDA) && defined(FLASHCHECK_HAS_TENSOR_CORE)
  const TwoWayShape shapes[] = {
      {DType::kF16, 2, 4, 2, 300, 300, 64, Mask::kNone},
      {DType::kBF16, 2, 4, 4, 257, 511, 64, Mask::kCausalBottomRight},
      {DType::kF16, 2, 4, 1, 384, 384, 128, Mask::kCausalTopLeft},
      {DType::kBF16, 1, 4, 2, 200, 1000, 128, Mask::kNone},
      {DType::kBF16, 2, 2, 1, 700, 700, 256, Mask::kCausalTopLeft},       // short items: own O tile
      {DType::kF16, 1, 2, 2, 300, 2500, 256, Mask::kNone},                // 40 K/V tiles an item: O from registers
      {DType::kBF16, 1, 2, 1, 130, 4200, 256, Mask::kCausalBottomRight},  // O from registers, causal
      {DType::kBF16, 1, 2, 2, 100, 1100, 200, Mask::kNone},               // O from registers, padded columns
      {DType::kBF16, 2, 4, 2, 300, 700, 192, Mask::kCausalBottomRight, 128},  // own O tile, one K slot
      {DType::kF16, 1, 4, 4, 200, 3000, 192, Mask::kNone, 128},               // O from registers, two K slots
      {DType::kBF16, 1, 2, 1, 130, 900, 184, Mask::kCausalTopLeft, 120},      // padded columns of both
      {DType::kBF16, 2, 4, 1, 257, 511, 64, Mask::kNone, 128},
      {DType::kF16, 2, 4, 2, 384, 384, 128, Mask::kCausalTopLeft, 64},
      {DType::kBF16, 1, 2, 2, 300, 1100, 256, Mask::kCausalBottomRight, 128},
  };
  uint64_t seed = 7000;
  for (const TwoWayShape& sh : shapes) {
    Problem tma, cp_async;
    assert_kernels_agree(&tma, &cp_async, make_problem_pair(sh, ++seed, &tma, &cp_async));
    if (HasFatalFailure()) return;
  }
#endif
}

// The warp-specialized kernel runs masked launches without the hidden-V check and runs again, with it, every item
// whose accumulators end inf or NaN (kernel_ws.cuh, "Non-finite V rows"). Here a V element at key 0, which every
// row sees, lists every item of its K/V head (more items than CTAs: the redo launch loops), and NaN in keys hidden
// from the first rows of their diagonal tiles takes the exact path inside the listed items; the redo launch's O and
// LSE must be the cp.async kernel's, which checks every tile. Causal and windowed masks, GQA, d = 64/128/256 (the
// redo launch takes the first launch's O staging), a split launch (few Q tiles: every run listed, then the
// combine) and sequence tails.
TEST(Gpu_F16Bf16, RedoOfListedItemsMatchesCpAsyncKernel) {
  SKIP_WITHOUT_DEVICE();
  SKIP_WITHOUT_TENSOR_CORE();
#if defined(FLASHCHECK_HAS_CUDA) && defined(FLASHCHECK_HAS_TENSOR_CORE)
  struct Case {
    TwoWayShape shape;
    int64_t window_left, window_right;
  };
  const Case cases[] = {
      {{DType::kBF16, 2, 40, 8, 1000, 1000, 128, Mask::kCausalTopLeft}, -1, -1},  // 640 items, all listed
      {{DType::kF16, 1, 24, 24, 700, 900, 64, Mask::kCausalBottomRight}, -1, -1},
      {{DType::kBF16, 1, 16, 4, 1500, 1500, 256, Mask::kWindowTopLeft}, 300, 0},
      {{DType::kF16, 1, 2, 1, 3000, 3000, 64, Mask::kCausalTopLeft}, -1, -1},  // 48 Q tiles: a split launch
  };
  uint64_t seed = 7200;
  for (const Case& c : cases) {
    const TwoWayShape& sh = c.shape;
    Problem tma, cp_async;
    std::string what = make_problem_pair(sh, ++seed, &tma, &cp_async);
    if (c.window_left >= 0) what += " window " + std::to_string(c.window_left) + "," + std::to_string(c.window_right);
    for (Problem* pr : {&tma, &cp_async}) {
      pr->params.window_left = c.window_left;
      pr->params.window_right = c.window_right;
      for (int64_t b = 0; b < sh.batch; ++b)
        for (int64_t hk = 0; hk < sh.heads_kv; ++hk) {
          const auto put = [&](int64_t key, int64_t d, float x) {
            Problem::set(pr->params, pr->v, pr->params.v_stride, b, hk, key % sh.seqlen_k, d % sh.head_dim, x);
          };
          if (hk % 2 == 0) put(0, 5 + hk, std::numeric_limits<float>::infinity());  // seen by every row
          put(131 + 37 * hk, 2 * hk + 1, std::nanf(""));  // hidden from the first rows of its diagonal tile
          put(257 + 64 * b, 3, -std::numeric_limits<float>::infinity());
        }
    }
    assert_kernels_agree(&tma, &cp_async, what);
    if (HasFatalFailure()) return;
  }
#endif
}

// d = 64 has two tile shapes on sm_90a (tensor_core/tile_config.h): 128x128, and 192x128 with three consumer
// warpgroups, which tensor_core_select() takes for unmasked launches and long Q tiles. A row's sums run over the same
// K/V tiles in the same order whatever the Q tile's height, so on finite inputs both return the same bits. Each
// problem runs once as selected (the tall tiles) and once launched with the family's 128-row tiles.
TEST(Gpu_F16Bf16, D64TileShapesGiveTheSameBits) {
  SKIP_WITHOUT_DEVICE();
  SKIP_WITHOUT_TENSOR_CORE();
#if defined(FLASHCHECK_HAS_CUDA) && defined(FLASHCHECK_HAS_TENSOR_CORE)
  const TwoWayShape shapes[] = {
      {DType::kF16, 2, 4, 2, 1000, 1000, 64, Mask::kNone},
      {DType::kBF16, 1, 2, 2, 200, 777, 48, Mask::kNone},                  // padded columns
      {DType::kBF16, 1, 4, 1, 700, 2900, 64, Mask::kCausalBottomRight},   // Q tiles of 16+ K/V tiles
      {DType::kF16, 1, 2, 2, 4200, 4200, 64, Mask::kCausalTopLeft},
  };
  uint64_t seed = 7100;
  for (const TwoWayShape& sh : shapes) {
    Problem tall, standard;
    const std::string what = make_problem_pair(sh, ++seed, &tall, &standard);
    KernelConfig config = select_config(tall.params);
    ASSERT_EQ(config.path, ComputePath::kTensorCore) << what;
    const int standard_rows = tensor_core::tile_shape_sm90(config.head_dim_padded).block_m;
    if (config.block_m == standard_rows) {
      if (sh.mask == Mask::kNone) GTEST_SKIP() << "this build has one d = 64 tile shape (no sm_90a wgmma)";
      FAIL() << what << ": selected " << config.block_m << "-row tiles, expected the tall ones";
    }
    ASSERT_TRUE(test::run_on_device(&tall, [&](const Params& dp) { return run(dp); }).ok()) << what;
    config.block_m = standard_rows;
    const Status st = test::run_on_device(
        &standard, [&](const Params& dp) { return detail::tensor_core_launch(dp, config, nullptr, nullptr); });
    ASSERT_TRUE(st.ok()) << what << ": " << st.message();
    assert_bit_identical(tall, standard, what, "192-row tiles", "128-row tiles");
    if (HasFatalFailure()) return;
  }
#endif
}

// The exact path for non-finite hidden V (tensor_core/hidden_v.cuh, exact_hidden_v), column by column. An inf and a
// NaN sit in V rows that the first rows of their causal diagonal tile may not see. A row that sees one is
// non-finite in that column only. Every other (row, column) is bit-identical to the run with the finite values
// there, and so is every LSE: each O column reads only its own V column, and the path zeroes just the non-finite
// halves before the tensor cores run. Both fp16/bf16 kernels, every wgmma head_dim family.
TEST(Gpu_F16Bf16, HiddenNonFiniteVReachesOnlyItsColumns) {
  SKIP_WITHOUT_DEVICE();
  SKIP_WITHOUT_TENSOR_CORE();
#if defined(FLASHCHECK_HAS_CUDA) && defined(FLASHCHECK_HAS_TENSOR_CORE)
  constexpr int64_t kSeq = 300;
  constexpr int64_t kInfKey = 155;  // diagonal tile of the Q tile at row 128, hidden from rows 128..154
  constexpr int64_t kNanKey = 200;
  uint64_t seed = 7100;
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    for (int64_t head_dim : {int64_t{64}, int64_t{128}, int64_t{256}}) {
      const int64_t inf_col = 3;
      const int64_t nan_col = head_dim - 2;
      const ProblemSpec spec{dtype, 1, 2, 1, kSeq, kSeq, head_dim, Mask::kCausalTopLeft, Layout::kBHSD, 0, ++seed};
      for (bool cp_async : {false, true}) {
        const std::string what = spec.name() + (cp_async ? " cp.async kernel" : " warp-specialized kernel");
        Problem base, poisoned;
        test::make_problem(spec, &base);
        test::make_problem(spec, &poisoned);
        ASSERT_EQ(select_config(base.params).path, ComputePath::kTensorCore) << what;
        Problem::set(poisoned.params, poisoned.v, poisoned.params.v_stride, 0, 0, kInfKey, inf_col,
                     std::numeric_limits<float>::infinity());
        Problem::set(poisoned.params, poisoned.v, poisoned.params.v_stride, 0, 0, kNanKey, nan_col, std::nanf(""));
        detail::tensor_core_force_cp_async(cp_async);
        const Status a = test::run_on_device(&base, [&](const Params& dp) { return run(dp); });
        const Status b = test::run_on_device(&poisoned, [&](const Params& dp) { return run(dp); });
        detail::tensor_core_force_cp_async(false);
        ASSERT_TRUE(a.ok() && b.ok()) << what << ": " << a.message() << " / " << b.message();
        for (int64_t h = 0; h < 2; ++h)
          for (int64_t i = 0; i < kSeq; ++i)
            for (int64_t d = 0; d < head_dim; ++d) {
              const float x = base.o_at(0, h, i, d), y = poisoned.o_at(0, h, i, d);
              const bool sees = (i >= kInfKey && d == inf_col) || (i >= kNanKey && d == nan_col);
              if (sees) {
                ASSERT_FALSE(std::isfinite(y)) << what << ": head " << h << " row " << i << " dim " << d;
              } else {
                ASSERT_EQ(std::memcmp(&x, &y, sizeof x), 0)
                    << what << ": head " << h << " row " << i << " dim " << d << ": " << x << " vs " << y;
              }
            }
        ASSERT_EQ(std::memcmp(base.lse.data(), poisoned.lse.data(), base.lse.size() * sizeof(float)), 0) << what;
      }
    }
  }
#endif
}

// batch, heads or seqlen_q of 0 is a successful no-op that writes nothing (poisoned buffers stay poisoned).
TEST(Gpu_F16, ZeroSizeNoOpWritesNothing) {
  SKIP_WITHOUT_DEVICE();
#if defined(FLASHCHECK_HAS_CUDA)
  Problem pr;
  test::make_problem({DType::kF16, 1, 2, 1, 9, 9, 16, Mask::kNone, Layout::kBHSD, 0, 2}, &pr);
  const std::vector<unsigned char> o_before = pr.o;
  const std::vector<float> lse_before = pr.lse;
  for (int which = 0; which < 3; ++which) {
    const Status st = test::run_on_device(&pr, [&](const Params& dp) {
      Params empty = dp;
      (which == 0 ? empty.batch : which == 1 ? empty.heads_q : empty.seqlen_q) = 0;
      return run(empty);
    });
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(pr.o, o_before) << "no-op variant " << which;
    for (size_t i = 0; i < pr.lse.size(); ++i) EXPECT_TRUE(std::isnan(pr.lse[i]));
  }
#endif
}

// Invalid params are rejected before any launch, with the validation's message.
TEST(Gpu_F32, InvalidParamsAreRejected) {
  SKIP_WITHOUT_DEVICE();
  Params p = make_params(DType::kF32, 1, 1, 1, 4, 4, 300);
  const Status st = run(p);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("head_dim"), std::string::npos) << st.message();
}

// 64-bit offsets: the second batch starts beyond 2^31 elements of every tensor.
TEST(Gpu_F16, OffsetsBeyond2Pow31Elements) {
  SKIP_WITHOUT_DEVICE();
#if defined(FLASHCHECK_HAS_CUDA)
  constexpr int64_t kBatchStride = (int64_t{1} << 31) + 64;  // elements
  ProblemSpec spec{DType::kF16, 2, 1, 1, 3, 70, 8, Mask::kCausalBottomRight, Layout::kBHSD, 0, 31};
  Problem compact;
  test::make_problem(spec, &compact);
  const int64_t elem = dtype_size(spec.dtype);
  struct Tensor {
    std::vector<unsigned char>* host;
    int64_t batch_stride_compact;
    void* device = nullptr;
  };
  Tensor tensors[4] = {{&compact.q, compact.params.q_stride.batch},
                       {&compact.k, compact.params.k_stride.batch},
                       {&compact.v, compact.params.v_stride.batch},
                       {&compact.o, compact.params.o_stride.batch}};
  // Batch 1 starts at kBatchStride and spans the tensor's own compact batch: K and V hold seqlen_k rows,
  // Q and O seqlen_q rows, so each allocation is sized from its own stride.
  const auto device_bytes = [&](const Tensor& t) {
    return static_cast<size_t>((kBatchStride + t.batch_stride_compact) * elem);
  };
  size_t total_needed = 0;
  for (const Tensor& t : tensors) total_needed += device_bytes(t);
  size_t free_bytes = 0, total_bytes = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total_bytes), cudaSuccess);
  if (free_bytes < total_needed + (size_t{1} << 30)) GTEST_SKIP() << "needs " << total_needed << " bytes of device memory";
  for (Tensor& t : tensors) {
    ASSERT_EQ(cudaMalloc(&t.device, device_bytes(t)), cudaSuccess);
    for (int64_t b = 0; b < 2; ++b) {
      ASSERT_EQ(cudaMemcpy(static_cast<unsigned char*>(t.device) + b * kBatchStride * elem,
                           t.host->data() + b * t.batch_stride_compact * elem,
                           static_cast<size_t>(t.batch_stride_compact * elem), cudaMemcpyHostToDevice),
                cudaSuccess);
    }
  }
  float* lse = nullptr;
  ASSERT_EQ(cudaMalloc(&lse, compact.lse.size() * sizeof(float)), cudaSuccess);
  Params dp = compact.params;
  dp.q = tensors[0].device;
  dp.k = tensors[1].device;
  dp.v = tensors[2].device;
  dp.o = tensors[3].device;
  dp.lse = lse;
  dp.q_stride.batch = dp.k_stride.batch = dp.v_stride.batch = dp.o_stride.batch = kBatchStride;
  const Status st = run(dp);
  EXPECT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (int64_t b = 0; b < 2; ++b) {
    EXPECT_EQ(cudaMemcpy(compact.o.data() + b * tensors[3].batch_stride_compact * elem,
                         static_cast<unsigned char*>(tensors[3].device) + b * kBatchStride * elem,
                         static_cast<size_t>(tensors[3].batch_stride_compact * elem), cudaMemcpyDeviceToHost),
              cudaSuccess);
  }
  EXPECT_EQ(cudaMemcpy(compact.lse.data(), lse, compact.lse.size() * sizeof(float), cudaMemcpyDeviceToHost),
            cudaSuccess);
  for (Tensor& t : tensors) cudaFree(t.device);
  cudaFree(lse);
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t i = 0; i < spec.seqlen_q; ++i) {
      const test::ReferenceRow ref = test::reference_row(compact, b, 0, i);
      EXPECT_NEAR(compact.lse_at(b, 0, i), ref.lse, test::lse_tolerance(compact.params, ref)) << "batch " << b;
      for (int64_t d = 0; d < spec.head_dim; ++d) {
        EXPECT_NEAR(compact.o_at(b, 0, i, d), ref.o[d], test::o_tolerance(compact.params, ComputePath::kTensorCore, ref, ref.o[d]))
            << "batch " << b << " row " << i << " dim " << d;
      }
    }
  }
#endif
}

}  // namespace
}  // namespace flashcheck
