// Device inputs on a device (device_inputs.h): the bytes the GPU generator writes are make_inputs' bytes, for every
// distribution and dtype, with padding, both layouts, injections and a sink; make_inputs drawing on the device builds
// the host's inputs; and a case checked through
// check_on_device gets the verdict of run_case + judge over host inputs (the same kernel, the same rows). Skips
// without a CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <tuple>
#include <string>
#include <vector>

#include "flashcheck/device_inputs.h"
#include "flashcheck/verdict.h"

namespace flashcheck {
namespace {

class DeviceInputsGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!device_available()) GTEST_SKIP() << "no CUDA device: device inputs are tested on the GPU tier";
  }
};

Case parse(const std::string& line) {
  Case c;
  const Status s = parse_case(line, &c);
  EXPECT_TRUE(s.ok()) << line << ": " << s.message();
  return c;
}

// Index of the first differing byte, or -1.
int64_t first_difference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return static_cast<int64_t>(i);
  }
  return -1;
}

// Sizes and the eight bytes from the first difference on, device then host (a failure's explanation).
std::string show_difference(const std::vector<uint8_t>& device, const std::vector<uint8_t>& host) {
  const int64_t at = first_difference(device, host);
  std::string out = "device " + std::to_string(device.size()) + " bytes, host " + std::to_string(host.size()) +
                    " bytes; first difference at byte " + std::to_string(at) + ":";
  char hex[8];
  for (const auto* bytes : {&device, &host}) {
    out += bytes == &device ? " device" : " host";
    for (int64_t i = std::max<int64_t>(at, 0); i < std::min<int64_t>(at + 8, static_cast<int64_t>(bytes->size())); ++i) {
      std::snprintf(hex, sizeof hex, " %02x", (*bytes)[static_cast<size_t>(i)]);
      out += hex;
    }
  }
  return out;
}

TEST_F(DeviceInputsGpu, DeviceBytesAreHostBytes) {
  const char* const kDists[] = {"normal(0.25,3)", "uniform(-2,5)", "const(1.5)", "nearmax(0.9)", "subnormal()",
                                "ramp(-4,4)",     "dominant(1,50)", "negzero()"};
  const char* const kShapes[] = {
      "b=2 hq=4 hkv=2 sq=67 sk=130 d=64",                // medium, GQA
      "b=1 hq=3 hkv=1 sq=33 sk=17 d=40 pad=5",           // padding
      "b=2 hq=2 hkv=2 sq=9 sk=31 d=24 layout=bshd pad=3",  // bshd with padding
  };
  int compared = 0;
  for (const char* dtype : {"f16", "bf16", "f32"}) {
    for (const char* dist : kDists) {
      for (const char* shape : kShapes) {
        const std::string line = std::string(dtype) + " " + shape + " q=" + dist + " k=" + dist + " v=" + dist +
                                 " seed=" + std::to_string(17 + compared);
        const Case c = parse(line);
        HostInputs host;
        ASSERT_TRUE(make_inputs(c, &host).ok()) << line;
        DeviceInputs device;
        const Status made = make_device_inputs(c, &device);
        ASSERT_TRUE(made.ok()) << line << ": " << made.message();
        std::vector<uint8_t> q, k, v;
        ASSERT_TRUE(download_device_inputs(device, &q, &k, &v).ok()) << line;
        EXPECT_EQ(first_difference(q, host.q), -1) << line << ": q: " << show_difference(q, host.q);
        EXPECT_EQ(first_difference(k, host.k), -1) << line << ": k: " << show_difference(k, host.k);
        EXPECT_EQ(first_difference(v, host.v), -1) << line << ": v: " << show_difference(v, host.v);
        ++compared;
      }
    }
  }
  // Injections over generated values, and the sink beside the tensors.
  const std::string line =
      "bf16 b=2 hq=4 hkv=2 sq=20 sk=40 d=32 pad=2 sink=normal(0,2) q=normal(0,1) k=normal(0,1) v=normal(0,1) "
      "inject=q[1,3,19,31]:nan;k[0,1,0,0]:-inf;v[1,0,39,5]:1e30;k[0,1,0,0]:inf seed=5";
  const Case c = parse(line);
  HostInputs host;
  ASSERT_TRUE(make_inputs(c, &host).ok());
  DeviceInputs device;
  ASSERT_TRUE(make_device_inputs(c, &device).ok());
  std::vector<uint8_t> q, k, v;
  ASSERT_TRUE(download_device_inputs(device, &q, &k, &v).ok());
  EXPECT_EQ(first_difference(q, host.q), -1) << line;
  EXPECT_EQ(first_difference(k, host.k), -1) << line;
  EXPECT_EQ(first_difference(v, host.v), -1) << line;
  EXPECT_EQ(device.sink, host.sink);
}

// The report without its "RMS vs ref" line (the sampled verdict's reference is another realization: device_inputs.h).
std::string without_rms_line(const std::string& report) {
  const size_t at = report.find("  RMS vs ref");
  if (at == std::string::npos) return report;
  return report.substr(0, at) + report.substr(report.find('\n', at) + 1);
}

TEST_F(DeviceInputsGpu, CheckOnDeviceIsRunCaseAndJudge) {
  const char* const kLines[] = {
      "bf16 b=2 hq=8 hkv=2 sq=300 sk=517 d=128 mask=causal-br q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=3",
      "f16 b=3 hq=4 hkv=4 sq=129 sk=200 d=64 layout=bshd pad=8 sink=normal(0,1) q=normal(0,2) k=normal(0,2) "
      "v=uniform(-1,1) seed=4",
      "f32 b=1 hq=6 hkv=3 sq=257 sk=100 d=80 mask=window-br window=31,0 q=normal(0,1) k=ramp(-1,2) v=normal(0,1) "
      "inject=v[0,1,7,3]:nan seed=5",
  };
  for (const char* line : kLines) {
    const Case c = parse(line);
    HostInputs host;
    ASSERT_TRUE(make_inputs(c, &host).ok()) << line;
    const RunOutputs out = run_case(host, Backend::kGpu);
    const Verdict whole = judge(c, host, out);
    const DeviceCheck check = check_on_device(c);
    ASSERT_TRUE(check.status.ok()) << line << ": " << check.status.message();
    EXPECT_TRUE(check.verdict.pass) << check.verdict.report();
    EXPECT_EQ(without_rms_line(check.verdict.report()), without_rms_line(whole.report())) << line;
  }
}

// make_inputs with the elements drawn on the device (DrawOn::kDevice, fuzz_kernel's inputs) builds the host's inputs
// byte for byte and value for value: dense, packed and paged sequences, padding, poison, injections, every dtype and
// distribution, and an empty tensor.
TEST_F(DeviceInputsGpu, MakeInputsDrawnOnTheDeviceAreTheHosts) {
  const char* const kLines[] = {
      "bf16 b=3 hq=4 hkv=2 sq=100 sk=19 d=64 mask=causal-br seqs=17:17,0:5+2,100:19 q=normal(0,3) k=normal(0,3) "
      "v=uniform(-1,1) seed=3",
      "f16 b=2 hq=2 hkv=1 sq=9 sk=40 d=16 mask=window-tl window=4,0 layout=bshd pad=2 seqs=9:33+7,1:0 page=16 "
      "q=ramp(-4,4) k=dominant(1,50) v=subnormal() sink=normal(0,2) seed=8",
      "f32 b=1 hq=1 hkv=1 sq=5 sk=7 d=8 mask=none seqs=5:3+4 page=1 poison=zero q=normal(0,1) k=nearmax(0.9) "
      "v=negzero() seed=2",
      "bf16 b=2 hq=4 hkv=2 sq=20 sk=40 d=32 pad=2 sink=normal(0,2) q=normal(0,1) k=normal(0,1) v=const(1.5) "
      "inject=q[1,3,19,31]:nan;k[0,1,0,0]:-inf;v[1,0,39,5]:1e30 seed=5",
      "f16 b=1 hq=2 hkv=2 sq=0 sk=12 d=8 q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=4",
  };
  for (const char* line : kLines) {
    const Case c = parse(line);
    HostInputs host, drawn;
    ASSERT_TRUE(make_inputs(c, &host).ok()) << line;
    const Status made = make_inputs(c, &drawn, kHostInputsLimit, DrawOn::kDevice);
    ASSERT_TRUE(made.ok()) << line << ": " << made.message();
    EXPECT_EQ(first_difference(drawn.q, host.q), -1) << line << ": q: " << show_difference(drawn.q, host.q);
    EXPECT_EQ(first_difference(drawn.k, host.k), -1) << line << ": k: " << show_difference(drawn.k, host.k);
    EXPECT_EQ(first_difference(drawn.v, host.v), -1) << line << ": v: " << show_difference(drawn.v, host.v);
    // Bit for bit, NaN and -0 included: compare the doubles' bytes.
    for (const auto& [name, a, b] : {std::tuple{"q_exact", &drawn.q_exact, &host.q_exact},
                                     std::tuple{"k_exact", &drawn.k_exact, &host.k_exact},
                                     std::tuple{"v_exact", &drawn.v_exact, &host.v_exact}}) {
      ASSERT_EQ(a->size(), b->size()) << line << ": " << name;
      EXPECT_EQ(std::memcmp(a->data(), b->data(), a->size() * sizeof(double)), 0) << line << ": " << name;
    }
    EXPECT_EQ(drawn.hash(), host.hash()) << line;
  }
}

}  // namespace
}  // namespace flashcheck
