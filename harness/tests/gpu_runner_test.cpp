// The runner's GPU backend on a real device: clean guarded runs (no unwritten element, canaries and inputs
// intact) that pass the verdict, across dtypes, layouts, padding, masks and no-op shapes; runs through a
// DevicePool bit-identical to runs with buffers of their own; and, in the instrumented harness, row m and l
// that satisfy the statistics checks, tile counters and per-tile traces; cases with sequences (varlen, paged,
// split-KV) with their index arrays guarded in device memory; and the same cases on every visible GPU
// bit-identical (skipped with fewer than two). Skips without a CUDA device.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#if defined(FLASHCHECK_HAS_CUDA)
#include <cuda_runtime.h>  // device memory a misbehaving call writes into
#endif

#include "flashcheck/device.h"
#include "flashcheck/verdict.h"

namespace flashcheck {
namespace {

class GpuRunner : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!device_available()) GTEST_SKIP() << "no CUDA device: the GPU backend is tested on the GPU tier";
  }
};

Verdict run_on_gpu(const std::string& line, const RunOptions& options, RunOutputs* out) {
  Case c;
  EXPECT_TRUE(parse_case(line, &c).ok()) << line;
  HostInputs inputs;
  EXPECT_TRUE(make_inputs(c, &inputs).ok()) << line;
  *out = run_case(inputs, Backend::kGpu, options);
  return judge(c, inputs, *out);
}

Verdict run_on_gpu(const std::string& line, bool instrument, RunOutputs* out) {
  RunOptions options;
  options.instrument = instrument;
  return run_on_gpu(line, options, out);
}

bool same_bits(const RunOutputs& a, const RunOutputs& b) {
  if (a.o.size() != b.o.size() || a.lse.size() != b.lse.size()) return false;
  return (a.o.empty() || std::memcmp(a.o.data(), b.o.data(), a.o.size() * sizeof(double)) == 0) &&
         (a.lse.empty() || std::memcmp(a.lse.data(), b.lse.data(), a.lse.size() * sizeof(float)) == 0);
}

TEST_F(GpuRunner, GuardedRunsPass) {
  const char* const kLines[] = {
      "f16 b=2 hq=4 hkv=2 sq=129 sk=257 d=64 mask=causal-br q=normal(0,2) k=normal(0,2) v=normal(0,1) seed=1",
      ("bf16 b=1 hq=8 hkv=1 sq=65 sk=64 d=128 mask=causal-tl layout=bshd pad=8 q=normal(0,1) k=normal(0,1) "
      "v=uniform(-1,1) seed=2"),
      "f32 b=1 hq=2 hkv=2 sq=33 sk=100 d=80 mask=none pad=3 q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=3",
      "f16 b=1 hq=2 hkv=2 sq=40 sk=7 d=32 mask=causal-br q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=4",
  };
  for (const char* line : kLines) {
    RunOutputs out;
    const Verdict v = run_on_gpu(line, false, &out);
    ASSERT_TRUE(out.status.ok()) << line << ": " << out.status.message();
    EXPECT_EQ(out.unwritten_o, 0) << line;
    EXPECT_EQ(out.unwritten_lse, 0) << line;
    EXPECT_TRUE(out.canaries_intact) << line << ": " << out.damaged_buffer << " byte " << out.first_damaged_canary;
    EXPECT_TRUE(out.inputs_unchanged) << line;
    EXPECT_TRUE(v.pass) << v.report();
  }
}

// Sequences on the device: the index arrays in device memory with canaries, packed O and LSE scanned, outputs in
// canonical order that pass the verdict; varlen with extra slots, paged (page=3, shuffled, poison around), split-KV,
// and through a pool after dense runs.
TEST_F(GpuRunner, SequenceRunsPass) {
  const char* const kLines[] = {
      ("f16 b=3 hq=4 hkv=2 sq=37 sk=50 d=32 mask=causal-br layout=bshd pad=3 seqs=37:50,0:7,5:1+3 q=normal(0,1) "
      "k=normal(0,1) v=normal(0,1) seed=3"),
      ("bf16 b=3 hq=4 hkv=2 sq=37 sk=50 d=64 mask=causal-br seqs=37:50,0:7,5:1+3 page=3 poison=inf q=normal(0,1) "
      "k=normal(0,1) v=normal(0,1) seed=3"),
      ("f32 b=2 hq=2 hkv=1 sq=20 sk=300 d=16 mask=window-tl window=40,3 seqs=20:300,3:129+5 page=7 splits=3 "
      "q=normal(0,1) k=normal(0,1) v=normal(0,1) sink=normal(0,1) seed=3"),
      "f16 b=1 hq=2 hkv=2 sq=33 sk=400 d=64 mask=causal-br splits=4 q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=3",
      ("f16 b=2 hq=8 hkv=1 sq=600 sk=700 d=128 mask=causal-br seqs=600:650+50,3:5+20 page=16 poison=zero splits=0 "
      "q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=3"),
  };
  DevicePool pool;
  RunOptions pooled;
  pooled.device_pool = &pool;
  RunOutputs warm;
  run_on_gpu("bf16 b=2 hq=4 hkv=1 sq=129 sk=200 d=128 mask=none pad=8 seed=7", pooled, &warm);
  for (const char* line : kLines) {
    for (const RunOptions& options : {RunOptions{}, pooled}) {
      RunOutputs out;
      const Verdict v = run_on_gpu(line, options, &out);
      ASSERT_TRUE(out.status.ok()) << line << ": " << out.status.message();
      EXPECT_EQ(out.unwritten_o, 0) << line;
      EXPECT_EQ(out.unwritten_lse, 0) << line;
      EXPECT_TRUE(out.canaries_intact) << line << ": " << out.damaged_buffer << " byte " << out.first_damaged_canary;
      EXPECT_TRUE(out.inputs_unchanged) << line << ": " << out.modified_input;
      EXPECT_TRUE(v.pass) << v.report();
    }
  }
}

#if defined(FLASHCHECK_HAS_CUDA)
// The index arrays travel to the device as guarded images and back: a call that writes into one in device memory
// is a modified input named by the array, one that writes beside one damages its canary.
TEST_F(GpuRunner, DeviceIndexArraysAreGuarded) {
  const std::string line =
      "f16 b=3 hq=4 hkv=2 sq=37 sk=50 d=32 mask=causal-br seqs=37:50,0:7,5:1+3 page=3 q=normal(0,1) k=normal(0,1) "
      "v=normal(0,1) seed=3";
  struct Act {
    const char* what;
    std::function<void(const Params&)> act;  // device memory, after a correct run
    const char* modified_input;
    const char* damaged_buffer;
  };
  const auto zero_int = [](const int32_t* p) { cudaMemset(const_cast<int32_t*>(p), 0, sizeof(int32_t)); };
  const Act kActs[] = {
      {"nothing", [](const Params&) {}, "", ""},
      {"a write into the page table", [&](const Params& p) { zero_int(p.page_table + 4); }, "page_table", ""},
      {"a write one past seqused_k", [&](const Params& p) { zero_int(p.seqused_k + p.batch); }, "", "seqused_k"},
      {"a write before cu_seqlens_q", [&](const Params& p) { zero_int(p.cu_seqlens_q - 1); }, "", "cu_seqlens_q"},
  };
  for (const Act& a : kActs) {
    RunOptions options;
    options.device_call = [&](const Params& params, void* stream) {
      const Status status = run(params, stream);
      cudaStreamSynchronize(static_cast<cudaStream_t>(stream));
      a.act(params);
      return status;
    };
    RunOutputs out;
    run_on_gpu(line, options, &out);
    ASSERT_TRUE(out.status.ok()) << a.what << ": " << out.status.message();
    EXPECT_EQ(out.unwritten_o, 0) << a.what;
    EXPECT_STREQ(out.modified_input, a.modified_input) << a.what;
    EXPECT_EQ(out.inputs_unchanged, *a.modified_input == '\0') << a.what;
    EXPECT_STREQ(out.damaged_buffer, a.damaged_buffer) << a.what;
    EXPECT_EQ(out.canaries_intact, *a.damaged_buffer == '\0') << a.what;
  }
}
#endif

TEST_F(GpuRunner, NoOpShapesSucceed) {
  for (const char* line : {"f16 b=0 hq=2 hkv=2 sq=8 sk=8 d=64 mask=none seed=1",
                           "bf16 b=1 hq=2 hkv=2 sq=0 sk=8 d=64 mask=none seed=1"}) {
    RunOutputs out;
    const Verdict v = run_on_gpu(line, false, &out);
    EXPECT_TRUE(out.status.ok()) << line << ": " << out.status.message();
    EXPECT_TRUE(out.canaries_intact) << line;
    EXPECT_TRUE(v.pass) << v.report();
  }
}

TEST_F(GpuRunner, InstrumentedRunsRecordStatistics) {
  const std::string line =
      "f16 b=1 hq=2 hkv=2 sq=130 sk=300 d=64 mask=causal-br q=normal(0,2) k=normal(0,2) v=normal(0,1) seed=5";
  RunOutputs out;
  const Verdict v = run_on_gpu(line, true, &out);
  if (!gpu_instrumentation_linked()) {
    EXPECT_EQ(out.status.code(), StatusCode::kUnsupported) << out.status.message();
    GTEST_SKIP() << "linked against the production kernel: no GPU instrumentation";
  }
  ASSERT_TRUE(out.status.ok()) << out.status.message();
  ASSERT_EQ(out.row_m.size(), out.lse.size());
  EXPECT_GT(v.m.checked, 0);
  EXPECT_GT(v.identity.checked, 0);
  EXPECT_TRUE(v.pass) << v.report();
}

// A pool's slots grow and are reused across shapes; nothing of an earlier run leaks into a later one.
TEST_F(GpuRunner, PooledRunsMatchRunsWithTheirOwnBuffers) {
  const char* const kLines[] = {
      "f16 b=1 hq=2 hkv=2 sq=70 sk=90 d=64 mask=causal-br q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=6",
      "bf16 b=2 hq=4 hkv=1 sq=129 sk=200 d=128 mask=none pad=8 q=normal(0,2) k=normal(0,2) v=normal(0,1) seed=7",
      "f32 b=1 hq=1 hkv=1 sq=3 sk=5 d=8 mask=causal-tl q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=8",
      "f16 b=1 hq=2 hkv=2 sq=0 sk=8 d=64 mask=none seed=9",
  };
  DevicePool pool;
  RunOptions pooled;
  pooled.device_pool = &pool;
  for (int pass = 0; pass < 2; ++pass) {
    for (const char* line : kLines) {
      RunOutputs own, shared;
      run_on_gpu(line, RunOptions{}, &own);
      const Verdict v = run_on_gpu(line, pooled, &shared);
      ASSERT_TRUE(shared.status.ok()) << line << ": " << shared.status.message();
      EXPECT_EQ(shared.unwritten_o, 0) << line;
      EXPECT_TRUE(shared.canaries_intact) << line << ": " << shared.damaged_buffer;
      EXPECT_TRUE(shared.inputs_unchanged) << line;
      EXPECT_TRUE(same_bits(own, shared)) << line;
      EXPECT_TRUE(v.pass) << v.report();
    }
  }
}

TEST_F(GpuRunner, InstrumentedRunsRecordCountersAndTraces) {
  const std::string line =
      "bf16 b=1 hq=2 hkv=1 sq=200 sk=333 d=64 mask=causal-br q=normal(0,2) k=normal(0,2) v=normal(0,1) seed=10";
  const int64_t rows = 2 * 200;
  RunOptions options;
  options.instrument = true;
  options.count_tiles = true;
  options.trace_rows = {0, 199, rows - 1};
  options.trace_tiles = 16;
  RunOutputs out;
  const Verdict v = run_on_gpu(line, options, &out);
  if (!gpu_instrumentation_linked()) {
    EXPECT_EQ(out.status.code(), StatusCode::kUnsupported) << out.status.message();
    GTEST_SKIP() << "linked against the production kernel: no GPU instrumentation";
  }
  ASSERT_TRUE(out.status.ok()) << out.status.message();
  EXPECT_TRUE(out.canaries_intact) << out.damaged_buffer << " byte " << out.first_damaged_canary;
  EXPECT_TRUE(v.pass) << v.report();
  ASSERT_EQ(out.tile_kind_counts.size(), size_t{kTileKindCount});
  ASSERT_EQ(out.rescale_buckets.size(), size_t{kRescaleBuckets});
  uint64_t tiles = 0, bucketed_rows = 0;
  for (uint64_t n : out.tile_kind_counts) tiles += n;
  for (uint64_t n : out.rescale_buckets) bucketed_rows += n;
  EXPECT_GT(tiles, 0u);
  EXPECT_EQ(bucketed_rows, static_cast<uint64_t>(rows));
  // Each traced row's last written slot holds its final m (as the invariants property requires).
  ASSERT_EQ(out.trace_m.size(), options.trace_rows.size() * size_t{16});
  for (size_t t = 0; t < options.trace_rows.size(); ++t) {
    int last = -1;
    for (int k = 0; k < options.trace_tiles; ++k) {
      if (!is_unwritten(out.trace_m[t * 16 + static_cast<size_t>(k)])) last = k;
    }
    ASSERT_GE(last, 0) << "traced row " << options.trace_rows[t] << " has no slot written";
    const size_t row = static_cast<size_t>(options.trace_rows[t]);
    EXPECT_EQ(std::bit_cast<uint32_t>(out.trace_m[t * 16 + static_cast<size_t>(last)]),
              std::bit_cast<uint32_t>(out.row_m[row]));
    EXPECT_FALSE(is_unwritten(out.trace_l[t * 16 + static_cast<size_t>(last)]));
  }
}

// The same case on every visible GPU gives the same O and LSE, bit for bit: the kernel's result depends on the
// case, never on which device ran it (nor on a device's cached launch set-up). Each case covers one kernel
// family or feature: tensor-core f16/bf16 with a persistent grid, split-TF32 f32, window, softcap, sink.
TEST(GpuMultiDevice, SameCaseIsBitIdenticalOnEveryDevice) {
  if (!device_available()) GTEST_SKIP() << "no CUDA device: the GPU backend is tested on the GPU tier";
  const int devices = visible_device_count();
  if (devices < 2) {
    GTEST_SKIP() << devices << " CUDA device visible: the cross-GPU check needs two or more";
  }
  const char* const kLines[] = {
      "f16 b=2 hq=8 hkv=2 sq=1031 sk=1029 d=128 mask=causal-br q=normal(0,2) k=normal(0,2) v=normal(0,1) seed=41",
      "bf16 b=3 hq=4 hkv=4 sq=257 sk=700 d=64 mask=none layout=bshd pad=8 q=normal(0,3) k=normal(0,3) v=normal(0,1) "
      "seed=42",
      "f32 b=1 hq=2 hkv=1 sq=255 sk=511 d=64 mask=none q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=43",
      "bf16 b=1 hq=4 hkv=2 sq=300 sk=300 d=128 mask=window-br window=64,0 q=normal(0,2) k=normal(0,2) v=normal(0,1) "
      "seed=44",
      "f16 b=1 hq=2 hkv=2 sq=129 sk=257 d=256 mask=causal-tl softcap=30 sink=ramp(-4,4) q=normal(0,4) k=normal(0,4) "
      "v=normal(0,1) seed=45",
  };
  const int home = current_device();
  for (const char* line : kLines) {
    // Device 0's result is judged against the oracle; every other device must reproduce its bits.
    ASSERT_TRUE(use_device(0).ok());
    RunOutputs first;
    const Verdict v = run_on_gpu(line, false, &first);
    ASSERT_TRUE(first.status.ok()) << line << ": " << first.status.message();
    EXPECT_TRUE(v.pass) << v.report();
    Case c;
    ASSERT_TRUE(parse_case(line, &c).ok());
    HostInputs inputs;
    ASSERT_TRUE(make_inputs(c, &inputs).ok());
    for (int device = 1; device < devices; ++device) {
      ASSERT_TRUE(use_device(device).ok());
      const RunOutputs out = run_case(inputs, Backend::kGpu, RunOptions{});
      ASSERT_TRUE(out.status.ok()) << line << " on device " << device << ": " << out.status.message();
      EXPECT_TRUE(out.canaries_intact && out.unwritten_o == 0 && out.unwritten_lse == 0) << line << " on " << device;
      EXPECT_TRUE(same_bits(first, out)) << line << "\n  device 0 (" << describe_device(0) << ") and device "
                                         << device << " (" << describe_device(device) << ") differ";
    }
  }
  if (home >= 0) {
    ASSERT_TRUE(use_device(home).ok());
  }
}

}  // namespace
}  // namespace flashcheck
