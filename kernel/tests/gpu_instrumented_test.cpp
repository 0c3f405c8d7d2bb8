// kernel_gpu_instrumented_test (gpu): run_instrumented() of flashcheck_kernel_instrumented against the
// host model's instrumentation on the same config: tile-kind counts exactly (they follow from the tile
// geometry alone), per-row m and l and the traces within fp32 tolerance, rescale buckets exactly where
// the kernel's scores are the model's (the general path). Skips without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "flashcheck/attention.h"
#include "flashcheck/host_model.h"
#include "flashcheck/instrument.h"
#include "gpu_util.h"
#include "test_problem.h"

namespace flashcheck {
namespace {

using test::Problem;
using test::ProblemSpec;

#if defined(FLASHCHECK_HAS_CUDA)

template <typename T>
struct DeviceArray {
  T* ptr = nullptr;
  explicit DeviceArray(const std::vector<T>& host) {
    if (cudaMalloc(&ptr, host.size() * sizeof(T)) == cudaSuccess) {
      cudaMemcpy(ptr, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
    }
  }
  ~DeviceArray() { cudaFree(ptr); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  std::vector<T> read(size_t n) const {
    std::vector<T> host(n);
    cudaMemcpy(host.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost);
    return host;
  }
};

struct InstrumentResult {
  std::vector<float> row_m, row_l, trace_m, trace_l;
  std::vector<uint64_t> kinds, buckets;
};

constexpr int32_t kMaxTiles = 16;

void check_instrumentation(const ProblemSpec& spec) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Problem gpu, model;
  test::make_problem(spec, &gpu);
  test::make_problem(spec, &model);
  const size_t rows = gpu.lse.size();
  const std::vector<int64_t> traced{0, static_cast<int64_t>(rows / 2), static_cast<int64_t>(rows - 1)};
  const size_t trace_slots = traced.size() * kMaxTiles;

  // Host model.
  InstrumentResult expect{std::vector<float>(rows, nan), std::vector<float>(rows, nan),
                          std::vector<float>(trace_slots, nan), std::vector<float>(trace_slots, nan),
                          std::vector<uint64_t>(kTileKindCount, 0), std::vector<uint64_t>(kRescaleBuckets, 0)};
  HostModelOptions options;
  options.instrumentation = {expect.row_m.data(),   expect.row_l.data(),   traced.data(),
                             static_cast<int32_t>(traced.size()), kMaxTiles, expect.trace_m.data(),
                             expect.trace_l.data(), expect.kinds.data(),  expect.buckets.data()};
  ASSERT_TRUE(run_host_model(model.params, options).ok());

  // GPU.
  DeviceArray<float> row_m(expect.row_m), row_l(expect.row_l);
  DeviceArray<float> trace_m(std::vector<float>(trace_slots, nan)), trace_l(std::vector<float>(trace_slots, nan));
  DeviceArray<int64_t> trace_rows(traced);
  DeviceArray<uint64_t> kinds(std::vector<uint64_t>(kTileKindCount, 0)), buckets(std::vector<uint64_t>(kRescaleBuckets, 0));
  const Instrumentation inst{row_m.ptr, row_l.ptr, trace_rows.ptr, static_cast<int32_t>(traced.size()), kMaxTiles,
                             trace_m.ptr, trace_l.ptr, kinds.ptr, buckets.ptr};
  const Status st = test::run_on_device(&gpu, [&](const Params& dp) { return run_instrumented(dp, inst); });
  ASSERT_TRUE(st.ok()) << spec.name() << ": " << st.message();
  const InstrumentResult got{row_m.read(rows), row_l.read(rows), trace_m.read(trace_slots), trace_l.read(trace_slots),
                             kinds.read(kTileKindCount), buckets.read(kRescaleBuckets)};

  EXPECT_EQ(got.kinds, expect.kinds) << spec.name();
  if (select_config(gpu.params).path == ComputePath::kGeneralFp32) {
    EXPECT_EQ(got.buckets, expect.buckets) << spec.name();
  }
  constexpr float kRelTol = 64 * 0x1p-24f;
  auto close = [&](float a, float b) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) == std::isnan(b);
    if (std::isinf(a) || std::isinf(b)) return a == b;
    return std::fabs(a - b) <= kRelTol * std::fmax(1.0f, std::fmax(std::fabs(a), std::fabs(b)));
  };
  for (size_t r = 0; r < rows; ++r) {
    EXPECT_TRUE(close(got.row_m[r], expect.row_m[r])) << spec.name() << " row_m " << r << ": " << got.row_m[r]
                                                      << " vs " << expect.row_m[r];
    EXPECT_TRUE(close(got.row_l[r], expect.row_l[r])) << spec.name() << " row_l " << r << ": " << got.row_l[r]
                                                      << " vs " << expect.row_l[r];
  }
  for (size_t s = 0; s < trace_slots; ++s) {
    EXPECT_TRUE(close(got.trace_m[s], expect.trace_m[s])) << spec.name() << " trace_m slot " << s;
    EXPECT_TRUE(close(got.trace_l[s], expect.trace_l[s])) << spec.name() << " trace_l slot " << s;
  }
}

#endif  // FLASHCHECK_HAS_CUDA

TEST(GpuInstrumented_AllDtypes, MatchesHostModelInstrumentation) {
  if (!device_available()) GTEST_SKIP() << "flashcheck-skip: no CUDA device available (GPU tier test)";
#if defined(FLASHCHECK_HAS_CUDA)
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (Mask mask : {Mask::kNone, Mask::kCausalTopLeft, Mask::kCausalBottomRight}) {
      check_instrumentation({dtype, 2, 2, 1, 131, 200, 64, mask, Layout::kBHSD, 0, 17});
      check_instrumentation({dtype, 1, 3, 3, 250, 97, 200, mask, Layout::kBSHD, 1, 18});
    }
  }
#endif
}

}  // namespace
}  // namespace flashcheck
