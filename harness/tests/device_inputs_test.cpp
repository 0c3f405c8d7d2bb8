// Device inputs on the host side (device_inputs.h): which cases take the path and why others cannot, the rows the
// sampled oracle regenerates (regenerate_rows) against make_inputs' values for every distribution, and the sampled
// verdict over regenerated slices against judge() over whole inputs: the same report, line for line (the RMS line's
// reference is another realization), for runs of the host model. The device's bytes against the host's are harness_device_inputs_gpu_test's.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "flashcheck/device_inputs.h"
#include "flashcheck/verdict.h"

#include "case_inputs.h"

namespace flashcheck {
namespace {

constexpr const char* kHugeLine =
    "bf16 b=256 hq=64 hkv=64 sq=2048 sk=2048 d=128 mask=none q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=1";

Case parse(const std::string& line) {
  Case c;
  const Status s = parse_case(line, &c);
  EXPECT_TRUE(s.ok()) << line << ": " << s.message();
  return c;
}

TEST(DeviceInputs, HugeDenseCasesTakeTheDevicePath) {
  const Case huge = parse(kHugeLine);
  EXPECT_TRUE(needs_device_inputs(huge));
  EXPECT_FALSE(needs_device_inputs(parse("f16 b=2 hq=4 hkv=2 sq=129 sk=257 d=64 seed=1")));
  // The limit is the caller's: a small case goes to the device below its bytes.
  EXPECT_TRUE(needs_device_inputs(parse("f16 b=2 hq=4 hkv=2 sq=129 sk=257 d=64 seed=1"), 1000));
  const Status refusal = host_model_refusal(huge);
  EXPECT_EQ(refusal.code(), StatusCode::kUnsupported);
  EXPECT_EQ(refusal.message().rfind("host inputs: the case needs ", 0), 0u) << refusal.message();
  // q, k, v and o of 4.29e9 bf16 elements each, and the fp32 LSE.
  EXPECT_EQ(device_case_bytes(huge), 4 * int64_t{256} * 64 * 2048 * 128 * 2 + int64_t{256} * 64 * 2048 * 4 +
                                         4 * kGuardBytes);
}

TEST(DeviceInputs, OnlyDenseCasesNamingTheField) {
  const std::pair<const char*, const char*> kRefused[] = {
      {"f16 b=2 hq=2 hkv=2 sq=8 sk=8 d=16 seqs=8:8,3:5 seed=1", "seqs: "},
      {"f16 b=2 hq=2 hkv=2 sq=8 sk=8 d=16 seqs=8:8,3:5 page=4 seed=1", "seqs: "},
      {"f16 b=1 hq=2 hkv=2 sq=8 sk=8 d=16 subject=sdpa-math seed=1", "subject: "},
  };
  for (const auto& [line, field] : kRefused) {
    const Case c = parse(line);
    const Status s = check_device_inputs_case(c);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << line;
    EXPECT_EQ(s.message().rfind(field, 0), 0u) << line << ": " << s.message();
    EXPECT_FALSE(needs_device_inputs(c, 0)) << line;
    DeviceInputs in;
    EXPECT_EQ(make_device_inputs(c, &in).code(), StatusCode::kInvalidArgument) << line;
  }
  EXPECT_TRUE(check_device_inputs_case(parse("f32 b=1 hq=2 hkv=1 sq=5 sk=7 d=8 splits=2 seed=1")).ok());
}

// Every row regenerated on its own holds make_inputs' decoded values, for every distribution, with GQA, padding,
// the bshd layout and injections.
TEST(DeviceInputs, RegeneratedRowsAreMakeInputsValues) {
  const char* const kLines[] = {
      "f16 b=2 hq=4 hkv=2 sq=9 sk=11 d=8 pad=3 q=normal(0.5,2) k=uniform(-3,1) v=nearmax(0.9) seed=7",
      "bf16 b=2 hq=2 hkv=1 sq=6 sk=13 d=5 layout=bshd q=subnormal() k=ramp(-2,5) v=dominant(1,40) seed=8",
      "f32 b=1 hq=3 hkv=3 sq=4 sk=4 d=3 q=const(2.5) k=negzero() v=dominant(0.5,9) inject=q[0,1,2,1]:nan;k[0,2,3,0]:-inf;"
      "v[0,0,0,2]:1e30 seed=9",
  };
  for (const char* line : kLines) {
    const Case c = parse(line);
    const HostInputs in = test::inputs_for(line);
    for (const char tensor : {'q', 'k', 'v'}) {
      const int64_t heads = tensor == 'q' ? c.heads_q : c.heads_kv, seqlen = tensor == 'q' ? c.seqlen_q : c.seqlen_k;
      const std::vector<double>& exact = tensor == 'q' ? in.q_exact : tensor == 'k' ? in.k_exact : in.v_exact;
      std::vector<double> row(static_cast<size_t>(c.head_dim));
      for (int64_t b = 0; b < c.batch; ++b) {
        for (int64_t h = 0; h < heads; ++h) {
          for (int64_t s = 0; s < seqlen; ++s) {
            regenerate_rows(c, tensor, b, h, s, s + 1, row.data());
            const double* want = exact.data() + ((b * heads + h) * seqlen + s) * c.head_dim;
            EXPECT_EQ(std::memcmp(row.data(), want, row.size() * sizeof(double)), 0)
                << line << " tensor " << tensor << " b=" << b << " h=" << h << " s=" << s;
          }
        }
      }
    }
  }
}

// The report without its "RMS vs ref" line.
std::string without_rms_line(const std::string& report) {
  const size_t at = report.find("  RMS vs ref");
  if (at == std::string::npos) return report;
  return report.substr(0, at) + report.substr(report.find('\n', at) + 1);
}

// The sampled verdict over regenerated slices gives judge()'s report for the same outputs, but for the statistical
// check's reference realization: a host-model run judged whole, and the same run's sampled rows judged through
// judge_sampled.
TEST(DeviceInputs, SampledVerdictIsJudgesVerdict) {
  const char* const kLines[] = {
      "bf16 b=3 hq=4 hkv=2 sq=70 sk=90 d=32 mask=causal-br q=normal(0,2) k=normal(0,2) v=normal(0,1) seed=11",
      "f16 b=2 hq=2 hkv=1 sq=40 sk=33 d=16 mask=window-tl window=5,3 pad=2 sink=normal(0,1) q=normal(0,1) "
      "k=normal(0,1) v=uniform(-1,1) seed=12",
      "f32 b=2 hq=2 hkv=2 sq=50 sk=50 d=8 softcap=5 q=normal(0,3) k=dominant(1,30) v=normal(0,1) "
      "inject=v[1,0,3,2]:nan seed=13",
  };
  JudgeOptions options;
  options.full_check_limit = 32;  // sampled: structural rows of the first and last (b, h) plus random rows
  options.random_rows = 24;
  for (const char* line : kLines) {
    const Case c = parse(line);
    const HostInputs in = test::inputs_for(line);
    const RunOutputs out = run_case(in, Backend::kHostModel);
    ASSERT_TRUE(out.status.ok()) << line << ": " << out.status.message();
    const Verdict whole = judge(c, in, out, options);

    const std::vector<oracle::RowRef> rows = device_check_rows(c, options);
    ASSERT_FALSE(rows.empty()) << line;
    SampledRun run;
    run.config = out.config;
    run.splits = out.splits;
    run.unwritten_o = out.unwritten_o;
    run.unwritten_lse = out.unwritten_lse;
    for (const oracle::RowRef& row : rows) {
      const int64_t flat = (row.b * c.heads_q + row.h) * c.seqlen_q + row.i;
      run.o.insert(run.o.end(), out.o.begin() + flat * c.head_dim, out.o.begin() + (flat + 1) * c.head_dim);
      run.lse.push_back(out.lse[static_cast<size_t>(flat)]);
    }
    const Verdict sampled = judge_sampled(c, rows, run, options);
    EXPECT_EQ(without_rms_line(sampled.report()), without_rms_line(whole.report())) << line;
    EXPECT_EQ(sampled.rows_checked, static_cast<int64_t>(rows.size())) << line;
    // The emulated reference draws its stand-in exp2 and tanh errors keyed by the row's place in the problem it
    // reads (oracle/src/emulated.cpp), a slice's there: another realization of the same reference, over the same
    // elements.
    EXPECT_EQ(sampled.rms_count, whole.rms_count) << line;
    EXPECT_EQ(sampled.rms_ratio <= 1, whole.rms_ratio <= 1) << line;
  }
}

// Without a device (or without CUDA) a device check is no verdict: kNoDevice, never a failure.
TEST(DeviceInputs, NoDeviceIsNoVerdict) {
  if (device_available()) GTEST_SKIP() << "a CUDA device is present: harness_device_inputs_gpu_test runs the path";
  const DeviceCheck check = check_on_device(parse("f16 b=1 hq=2 hkv=2 sq=8 sk=8 d=16 seed=1"));
  EXPECT_EQ(check.status.code(), StatusCode::kNoDevice) << check.status.message();
  EXPECT_FALSE(check.device_memory_short);
}

// Without a device, inputs drawn on the device are refused with kNoDevice, nothing half-built: the caller's inputs stay
// as they were.
TEST(DeviceInputs, DrawingOnNoDeviceIsRefused) {
  if (device_available()) GTEST_SKIP() << "a CUDA device is present: harness_device_inputs_gpu_test draws on it";
  HostInputs inputs;
  inputs.q = {1, 2, 3};
  const Status s =
      make_inputs(parse("f16 b=1 hq=2 hkv=2 sq=8 sk=8 d=16 seed=1"), &inputs, kHostInputsLimit, DrawOn::kDevice);
  EXPECT_EQ(s.code(), StatusCode::kNoDevice) << s.message();
  EXPECT_EQ(inputs.q, (std::vector<uint8_t>{1, 2, 3}));
}

}  // namespace
}  // namespace flashcheck
