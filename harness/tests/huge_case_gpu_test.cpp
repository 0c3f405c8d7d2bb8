// Huge cases as ordinary case lines (device_inputs.h): bf16 tensors of 256 * 64 * 2048 * 128 = 2^32 elements (every
// element offset below 2^32, most past 2^31) and of 264 * 64 * 2048 * 128 = 4.43e9, past 2^32, whose offsets need
// 64 bits. Inputs are
// generated on the device, O and LSE of the sampled rows come back, and the oracle regenerates on the host only
// the slices those rows read. Each case needs about 35 GB of device memory (q, k, v, o); the test skips, naming
// the bytes, on a device with less free, and without a device. Replay either line with
//   flashcheck-repro '<line>'    (a mutant build: FLASHCHECK_MUTANT=<name> flashcheck-repro '<line>')
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "flashcheck/device_inputs.h"
#include "flashcheck/verdict.h"

namespace flashcheck {
namespace {

constexpr const char* kAt2To32 =
    "bf16 b=256 hq=64 hkv=64 sq=2048 sk=2048 d=128 mask=none q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=1";
constexpr const char* kPast2To32 =
    "bf16 b=350 hq=32 hkv=32 sq=4096 sk=4096 d=96 mask=causal-br q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=2";

void check_huge(const char* line) {
  if (!device_available()) GTEST_SKIP() << "no CUDA device: huge cases run on the GPU tier";
  Case c;
  ASSERT_TRUE(parse_case(line, &c).ok()) << line;
  ASSERT_TRUE(needs_device_inputs(c)) << line << ": the case must be past the host inputs limit";
  const auto start = std::chrono::steady_clock::now();
  const DeviceCheck check = check_on_device(c);
  if (check.device_memory_short) {
    GTEST_SKIP() << check.status.message() << " (" << line << ")";
  }
  ASSERT_TRUE(check.status.ok()) << line << ": " << check.status.message();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s(%.1f s)\n", check.verdict.report().c_str(), seconds);
  EXPECT_TRUE(check.verdict.pass) << check.verdict.report();
  EXPECT_EQ(check.verdict.unwritten_o, 0);
  EXPECT_EQ(check.verdict.unwritten_lse, 0);
  EXPECT_TRUE(check.verdict.canaries_intact);
  EXPECT_TRUE(check.verdict.inputs_unchanged);
  EXPECT_GT(check.verdict.rows_checked, 64) << "structural rows of the first and last (b, h) and random rows";
}

TEST(HugeCase, Bf16OffsetsBelow2To32) { check_huge(kAt2To32); }
TEST(HugeCase, Bf16ElementsPast2To32) { check_huge(kPast2To32); }

}  // namespace
}  // namespace flashcheck
