// The backward kernels on the device (skips without one): every case line of the CPU test and larger ones through
// run_backward_case and judge_backward in both modes; the deterministic mode bit-identical over repeated runs, and
// over 1,000 runs beside an allocation of most of the device's memory; the host model and the kernels within the sum
// of their bounds of each other (both judged against the same oracle).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#if defined(FLASHCHECK_HAS_CUDA)
#include <cuda_runtime.h>
#endif

#include "flashcheck/backward_check.h"
#include "flashcheck/case.h"
#include "flashcheck/inputs.h"
#include "backward_lines.h"

namespace flashcheck {
namespace {

// The host model's lines, and two larger ones: many 32-key tiles, head dims 128 and 256 / 128.
std::vector<std::string> lines() {
  std::vector<std::string> all = testing::backward_lines();
  all.push_back("bf16 b=2 hq=8 hkv=2 sq=600 sk=600 d=128 mask=causal-br q=normal(0,1) k=normal(0,1) v=normal(0,1) "
                "grad=1 dout=normal(0,1) seed=11");
  all.push_back("f16 b=1 hq=4 hkv=4 sq=300 sk=500 d=256 dv=128 mask=none q=normal(0,1) k=normal(0,1) v=normal(0,1) "
                "grad=1 dout=normal(0,1) seed=12");
  return all;
}

TEST(Gpu_Backward, KernelsAgreeWithTheOracleAndRepeat) {
  for (const std::string& line : lines()) {
    Case c;
    ASSERT_TRUE(parse_case(line, &c).ok());
    HostInputs in;
    ASSERT_TRUE(make_inputs(c, &in).ok());
    BackwardRunOptions atomic, deterministic;
    deterministic.deterministic = true;
    const BackwardOutputs a = run_backward_case(in, Backend::kGpu, atomic);
    if (a.status.code() == StatusCode::kNoDevice) GTEST_SKIP() << "flashcheck-skip: no CUDA device available";
    const BackwardVerdict va = judge_backward(c, in, a);
    EXPECT_TRUE(va.pass) << va.report();
    const BackwardOutputs d1 = run_backward_case(in, Backend::kGpu, deterministic);
    EXPECT_TRUE(judge_backward(c, in, d1).pass) << judge_backward(c, in, d1).report();
    for (int run = 0; run < 20; ++run) {
      const BackwardOutputs d2 = run_backward_case(in, Backend::kGpu, deterministic);
      ASSERT_TRUE(d2.status.ok()) << d2.status.message();
      ASSERT_EQ(std::memcmp(d1.dq.data(), d2.dq.data(), d1.dq.size() * sizeof(double)), 0) << line << " run " << run;
      ASSERT_EQ(d1.dk, d2.dk) << line;
      ASSERT_EQ(d1.dv, d2.dv) << line;
    }
    // The kernels compute dK and dV in the host model's order and arithmetic: only exp2 and tanh differ.
    const BackwardOutputs m = run_backward_case(in, Backend::kHostModel, deterministic);
    EXPECT_TRUE(judge_backward(c, in, m).pass);
  }
}

// FlashAttention-3's determinism test: dQ (and dK, dV) bit-identical over 1,000 runs while an allocation of 70 GiB
// (on a smaller device: all its free memory but 4 GiB) holds the memory the workspace would otherwise find free.
TEST(Gpu_Backward, DeterministicModeRepeatsAThousandTimesUnderMemoryPressure) {
  const std::string line = "bf16 b=2 hq=8 hkv=2 sq=384 sk=448 d=128 mask=causal-br q=normal(0,1) k=normal(0,1) "
                           "v=normal(0,1) grad=1 dout=normal(0,1) seed=21";
  Case c;
  ASSERT_TRUE(parse_case(line, &c).ok());
  HostInputs in;
  ASSERT_TRUE(make_inputs(c, &in).ok());
  BackwardRunOptions deterministic;
  deterministic.deterministic = true;
  const BackwardOutputs first = run_backward_case(in, Backend::kGpu, deterministic);
  if (first.status.code() == StatusCode::kNoDevice) GTEST_SKIP() << "flashcheck-skip: no CUDA device available";
  ASSERT_TRUE(first.status.ok()) << first.status.message();
  ASSERT_TRUE(judge_backward(c, in, first).pass) << judge_backward(c, in, first).report();
  void* hog = nullptr;
  size_t held = 0;
#if defined(FLASHCHECK_HAS_CUDA)
  size_t free_bytes = 0, total_bytes = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total_bytes), cudaSuccess);
  constexpr size_t kWant = size_t{70} << 30, kLeave = size_t{4} << 30;
  held = free_bytes > kLeave ? std::min(kWant, free_bytes - kLeave) : 0;
  if (held > 0) {
    ASSERT_EQ(cudaMalloc(&hog, held), cudaSuccess);
    ASSERT_EQ(cudaMemset(hog, 0xA5, held), cudaSuccess);  // resident, not only reserved
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
#endif
  std::printf("deterministic backward: 1000 runs beside %.1f GiB held\n", static_cast<double>(held) / (1 << 30));
  for (int run = 0; run < 1000; ++run) {
    const BackwardOutputs again = run_backward_case(in, Backend::kGpu, deterministic);
    ASSERT_TRUE(again.status.ok()) << again.status.message();
    ASSERT_EQ(std::memcmp(first.dq.data(), again.dq.data(), first.dq.size() * sizeof(double)), 0) << "run " << run;
    ASSERT_EQ(std::memcmp(first.dk.data(), again.dk.data(), first.dk.size() * sizeof(double)), 0) << "run " << run;
    ASSERT_EQ(std::memcmp(first.dv.data(), again.dv.data(), first.dv.size() * sizeof(double)), 0) << "run " << run;
  }
#if defined(FLASHCHECK_HAS_CUDA)
  if (hog != nullptr) cudaFree(hog);
#endif
}

}  // namespace
}  // namespace flashcheck
