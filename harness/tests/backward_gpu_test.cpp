// The backward kernels on the device (skips without one): every case line of the CPU test and larger ones through
// run_backward_case and judge_backward in both modes; the deterministic mode bit-identical over repeated runs, and
// over 1,000 runs of run_backward beside an allocation of most of the device's memory; the host model and the kernels within the sum
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

#include "flashcheck/backward.h"
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

// FlashAttention-3's determinism test: dQ (and dK, dV) bit-identical over 1,000 runs of run_backward on the same
// device buffers while an allocation of 70 GiB (on a smaller device: all its free memory but 4 GiB) holds the memory
// the workspace would otherwise find free. The gradients are poisoned before every run, so a run that writes nothing
// cannot pass.
TEST(Gpu_Backward, DeterministicModeRepeatsAThousandTimesUnderMemoryPressure) {
#if defined(FLASHCHECK_HAS_CUDA)
  if (!device_available()) GTEST_SKIP() << "flashcheck-skip: no CUDA device available";
  const std::string line = "bf16 b=2 hq=8 hkv=2 sq=384 sk=448 d=128 mask=causal-br q=normal(0,1) k=normal(0,1) "
                           "v=normal(0,1) grad=1 dout=normal(0,1) seed=21";
  Case c;
  ASSERT_TRUE(parse_case(line, &c).ok());
  HostInputs in;
  ASSERT_TRUE(make_inputs(c, &in).ok());
  Params p = in.params;
  const size_t esize = static_cast<size_t>(dtype_size(p.dtype));
  const size_t lse_bytes = static_cast<size_t>(p.batch * p.heads_q * p.seqlen_q) * sizeof(float);
  std::vector<void*> buffers;
  const auto device_copy = [&](const void* src, size_t bytes) {
    void* dst = nullptr;
    EXPECT_EQ(cudaMalloc(&dst, bytes), cudaSuccess);
    if (src != nullptr) {
      EXPECT_EQ(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), cudaSuccess);
    }
    buffers.push_back(dst);
    return dst;
  };
  p.q = device_copy(in.q.data(), in.q.size());
  p.k = device_copy(in.k.data(), in.k.size());
  p.v = device_copy(in.v.data(), in.v.size());
  p.o = device_copy(nullptr, static_cast<size_t>(in.o_padded) * esize);
  p.lse = static_cast<float*>(device_copy(nullptr, lse_bytes));
  ASSERT_TRUE(run(p).ok());
  BackwardParams bp = make_backward_params(p);
  bp.d_o = device_copy(in.d_o.data(), in.d_o.size());
  bp.dq = device_copy(nullptr, in.q.size());
  bp.dk = device_copy(nullptr, in.k.size());
  bp.dv = device_copy(nullptr, in.v.size());
  bp.deterministic = true;
  std::printf("deterministic backward on the %s path\n", to_string(backward_path(bp)));
  const auto gradients = [&] {
    std::vector<uint8_t> all(in.q.size() + in.k.size() + in.v.size());
    EXPECT_EQ(cudaMemcpy(all.data(), bp.dq, in.q.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(all.data() + in.q.size(), bp.dk, in.k.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(all.data() + in.q.size() + in.k.size(), bp.dv, in.v.size(), cudaMemcpyDeviceToHost),
              cudaSuccess);
    return all;
  };
  const auto poisoned_run = [&] {
    for (const auto& [ptr, bytes] : {std::pair{bp.dq, in.q.size()}, std::pair{bp.dk, in.k.size()}, std::pair{bp.dv, in.v.size()}}) {
      EXPECT_EQ(cudaMemset(ptr, 0xFF, bytes), cudaSuccess);
    }
    const Status st = run_backward(bp);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    return st;
  };
  ASSERT_TRUE(poisoned_run().ok());
  const std::vector<uint8_t> first = gradients();
  size_t free_bytes = 0, total_bytes = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total_bytes), cudaSuccess);
  constexpr size_t kWant = size_t{70} << 30, kLeave = size_t{4} << 30;
  const size_t held = free_bytes > kLeave ? std::min(kWant, free_bytes - kLeave) : 0;
  if (held > 0) {
    void* hog = device_copy(nullptr, held);
    ASSERT_EQ(cudaMemset(hog, 0xA5, held), cudaSuccess);  // resident, not only reserved
  }
  std::printf("deterministic backward: 1000 runs beside %.1f GiB held\n", static_cast<double>(held) / (1 << 30));
  for (int run_index = 0; run_index < 1000; ++run_index) {
    ASSERT_TRUE(poisoned_run().ok()) << "run " << run_index;
    ASSERT_TRUE(gradients() == first) << "run " << run_index << " differs from the first";
  }
  for (void* b : buffers) cudaFree(b);
#else
  GTEST_SKIP() << "flashcheck-skip: built without CUDA (FLASHCHECK_CUDA=OFF)";
#endif
}

}  // namespace
}  // namespace flashcheck
