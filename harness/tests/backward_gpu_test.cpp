// The backward kernels on the device (skips without one): every case line of the CPU test and larger ones through
// run_backward_case and judge_backward in both modes; the deterministic mode bit-identical over repeated runs; the
// host model and the kernels within the sum of their bounds of each other (both judged against the same oracle).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

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

}  // namespace
}  // namespace flashcheck
