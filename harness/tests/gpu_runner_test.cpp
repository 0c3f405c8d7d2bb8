// The runner's GPU backend on a real device: clean guarded runs (no unwritten element, canaries and inputs
// intact) that pass the verdict, across dtypes, layouts, padding, masks and no-op shapes, and, in the
// instrumented harness, row m and l that satisfy the statistics checks. Skips without a CUDA device.
#include <gtest/gtest.h>

#include <string>

#include "flashcheck/verdict.h"

namespace flashcheck {
namespace {

class GpuRunner : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!device_available()) GTEST_SKIP() << "no CUDA device: the GPU backend is tested on the GPU tier";
  }
};

Verdict run_on_gpu(const std::string& line, bool instrument, RunOutputs* out) {
  Case c;
  EXPECT_TRUE(parse_case(line, &c).ok()) << line;
  HostInputs inputs;
  EXPECT_TRUE(make_inputs(c, &inputs).ok()) << line;
  RunOptions options;
  options.instrument = instrument;
  *out = run_case(inputs, Backend::kGpu, options);
  return judge(c, inputs, *out);
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

}  // namespace
}  // namespace flashcheck
