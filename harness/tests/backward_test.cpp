// The backward pass through the harness on the host model (run_backward_case, judge_backward), its validation
// (can_implement_backward, the C ABI's twin) and its guards: planted backward defects fail the verdict, key slots a
// defect leaves unwritten are counted, refused params name their field; the statistical check passes the healthy model
// and fails planted defects, and a systematic error within every element's bound.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "flashcheck/attention_c.h"
#include "flashcheck/backward.h"
#include "flashcheck/backward_check.h"
#include "flashcheck/case.h"
#include "flashcheck/inputs.h"
#include "backward_lines.h"

namespace flashcheck {
namespace {

Case parsed(const std::string& line) {
  Case c;
  const Status st = parse_case(line, &c);
  EXPECT_TRUE(st.ok()) << st.message();
  return c;
}

BackwardVerdict check(const std::string& line, ModelDefect defect = ModelDefect::kNone, bool deterministic = false) {
  const Case c = parsed(line);
  HostInputs in;
  EXPECT_TRUE(make_inputs(c, &in).ok());
  BackwardRunOptions options;
  options.defect = defect;
  options.deterministic = deterministic;
  return judge_backward(c, in, run_backward_case(in, Backend::kHostModel, options));
}

const std::vector<std::string>& lines() { return testing::backward_lines(); }

// The backward model defects that the second line (lines()[1]) shows.
constexpr ModelDefect kDefectsOnLineOne[] = {ModelDefect::kBwdDsWithoutD,    ModelDefect::kBwdSoftcapDerivativeDropped,
                                             ModelDefect::kBwdDkScaleMissing, ModelDefect::kBwdLseWrongRow,
                                             ModelDefect::kBwdGqaGroupShort,  ModelDefect::kBwdDqMissingTile,
                                             ModelDefect::kBwdHiddenKeysInDq};

TEST(Backward, HostModelAgreesWithTheOracle) {
  for (const std::string& line : lines()) {
    for (const bool deterministic : {false, true}) {
      const BackwardVerdict v = check(line, ModelDefect::kNone, deterministic);
      EXPECT_TRUE(v.pass) << v.report();
      EXPECT_GT(v.dq.checked, 0) << line;
      EXPECT_GT(v.dk.checked, 0) << line;
      EXPECT_GT(v.dv.checked, 0) << line;
      // Informative: the worst element comes within a factor 100 of its bound.
      EXPECT_GT(std::max({v.dq.ratio, v.dk.ratio, v.dv.ratio}), 0.01) << v.report();
    }
  }
}

TEST(Backward, PlantedDefectsFail) {
  const std::string line = lines()[1];
  for (const ModelDefect defect : kDefectsOnLineOne) {
    const BackwardVerdict v = check(line, defect);
    EXPECT_FALSE(v.pass) << to_string(defect) << "\n" << v.report();
    EXPECT_NE(v.report().find(line.substr(0, 20)), std::string::npos);
  }
  // Key slots past a sequence's keys left unwritten: the runner's poison says so.
  const BackwardVerdict tail = check(lines()[2], ModelDefect::kBwdPaddedTailNotZeroed);
  EXPECT_FALSE(tail.pass);
  EXPECT_GT(tail.unwritten, 0) << tail.report();
}

// The statistical check on the healthy model: every gradient pooled, the reference's error above zero (in fp16 and
// bf16 dV's about its rounding to the dtype), the kernel's within half the threshold.
TEST(Backward, RmsCheckPassesTheHostModel) {
  for (const std::string& line : lines()) {
    const Case c = parsed(line);
    HostInputs in;
    ASSERT_TRUE(make_inputs(c, &in).ok());
    const BackwardOutputs out = run_backward_case(in, Backend::kHostModel);
    const oracle::GradientCheck bounds = backward_bounds(in, out);
    const BackwardVerdict v = judge_backward(c, in, out, &bounds);
    for (const auto& [name, r] : {std::pair{"dQ", v.dq_rms}, std::pair{"dK", v.dk_rms}, std::pair{"dV", v.dv_rms}}) {
      EXPECT_GT(r.elements, 0) << name << " " << line;
      EXPECT_GT(r.reference, 0.0) << name << " " << line;
      EXPECT_GT(r.kernel, 0.0) << name << " " << line;
      EXPECT_LT(r.ratio, kBackwardRmsThreshold / 2) << name << "\n" << v.report();
    }
    EXPECT_NE(v.report().find("RMS against the same-precision reference"), std::string::npos) << v.report();
    if (c.dtype != DType::kF32) {
      // dV's reference error: about its rounding to the dtype, between a tenth of the unit roundoff of dV's RMS and
      // four units.
      double sq = 0.0;
      for (double x : bounds.exact.dv) sq += x * x;
      const double rms_dv = std::sqrt(sq / static_cast<double>(bounds.exact.dv.size()));
      const double u = c.dtype == DType::kF16 ? 0x1p-11 : 0x1p-8;
      EXPECT_GT(v.dv_rms.reference, 0.1 * u * rms_dv) << v.report();
      EXPECT_LT(v.dv_rms.reference, 4.0 * u * rms_dv) << v.report();
    }
  }
}

// A kernel whose every dQ element errs by 0.9 of its bound (an fp32 case over 65 keys: the bound covers any summation
// order's worst case) passes the per-element check and fails the statistical one.
TEST(Backward, RmsCheckCatchesSystematicErrorWithinTheBound) {
  const Case c = parsed(lines()[3]);
  HostInputs in;
  ASSERT_TRUE(make_inputs(c, &in).ok());
  BackwardOutputs out = run_backward_case(in, Backend::kHostModel);
  ASSERT_TRUE(out.status.ok()) << out.status.message();
  const oracle::GradientCheck check = backward_bounds(in, out);
  for (size_t at = 0; at < out.dq.size(); ++at) {
    if (std::isfinite(check.dq[at])) out.dq[at] = static_cast<float>(check.exact.dq[at] + 0.9 * check.dq[at]);
  }
  const BackwardVerdict v = judge_backward(c, in, out, &check);
  EXPECT_LE(v.dq.ratio, 1.0) << v.report();
  EXPECT_GT(v.dq_rms.ratio, kBackwardRmsThreshold) << v.report();
  EXPECT_FALSE(v.pass);
  ASSERT_EQ(v.failures.size(), 1u) << v.report();
  EXPECT_EQ(v.failures[0].rfind("RMS: dQ", 0), 0u) << v.failures[0];
}

// Subnormal V against dO of normal size: every product of dP and D lies below fp32's smallest normal, and a kernel that
// flushes them (FTZ, the GPU's) returns dQ and dK of 10^-37 as 0 where the same-precision reference keeps them. Those
// elements are within their bounds' underflow terms and carry no statistic; dV, of normal size, is still pooled.
TEST(Backward, RmsCheckLeavesOutWhatAFlushingKernelLoses) {
  const Case c = parsed("bf16 b=2 hq=20 hkv=4 sq=31 sk=181 d=131 mask=none layout=bshd pad=4 scale=2 q=normal(0,1) "
                        "k=normal(0,1) v=subnormal() grad=1 dout=normal(0,1) seed=3381724814");
  HostInputs in;
  ASSERT_TRUE(make_inputs(c, &in).ok());
  BackwardOutputs out = run_backward_case(in, Backend::kHostModel);
  ASSERT_TRUE(out.status.ok()) << out.status.message();
  const oracle::GradientCheck check = backward_bounds(in, out);
  int64_t flushed = 0;
  for (auto [got, exact] : {std::pair{&out.dq, &check.exact.dq}, std::pair{&out.dk, &check.exact.dk}}) {
    for (size_t at = 0; at < got->size(); ++at) {
      if (std::fabs((*exact)[at]) < 0x1p-110) {
        flushed += (*got)[at] != 0.0f;
        (*got)[at] = 0.0f;
      }
    }
  }
  EXPECT_GT(flushed, 1000);
  const BackwardVerdict v = judge_backward(c, in, out, &check);
  EXPECT_TRUE(v.pass) << v.report();
  // Every dQ and dK element lies at the flushed products' scale and leaves the pool; every dV element stays in it.
  EXPECT_EQ(v.dq_rms.elements, 0) << v.report();
  EXPECT_EQ(v.dk_rms.elements, 0) << v.report();
  EXPECT_GT(v.dq_rms.noisy_left_out, 0) << v.report();
  EXPECT_EQ(v.dv_rms.elements, static_cast<int64_t>(out.dv.size())) << v.report();
}

// The planted backward defects fail the statistical check too, not only the per-element bound.
TEST(Backward, PlantedDefectsFailTheRmsCheck) {
  const std::string line = lines()[1];
  for (const ModelDefect defect : kDefectsOnLineOne) {
    const BackwardVerdict v = check(line, defect);
    EXPECT_GT(v.worst_rms(), kBackwardRmsThreshold) << to_string(defect) << "\n" << v.report();
    EXPECT_NE(v.report().find("FAIL RMS: "), std::string::npos) << to_string(defect) << "\n" << v.report();
  }
}

// Elements the error model makes no claim on (K, V and dO near fp16's largest value: the gradients pass its range)
// are named in the report, not left out of it silently.
TEST(Backward, ReportNamesElementsWithoutAClaim) {
  const BackwardVerdict v = check("f16 b=1 hq=1 hkv=1 sq=2 sk=3 d=16 mask=none q=normal(0,4) k=nearmax(1) v=nearmax(1) "
                                  "grad=1 dout=nearmax(1) seed=1");
  EXPECT_TRUE(v.pass) << v.report();
  EXPECT_EQ(v.dq.checked, 0) << v.report();
  EXPECT_EQ(v.dq_info.unclaimed, 32) << v.report();
  EXPECT_GT(v.dk_info.unclaimed, 0) << v.report();
  const std::string report = v.report();
  EXPECT_NE(report.find("dQ: no claim on any of its 32 elements (outside the error model's domain"), std::string::npos)
      << report;
  EXPECT_NE(report.find(std::to_string(v.dk_info.unclaimed) + " without a claim"), std::string::npos) << report;
  EXPECT_EQ(check(lines().front()).dq_info.unclaimed, 0);
}

TEST(Backward, ForwardOnlyCasesAreRefused) {
  const Case c = parsed("f16 b=1 hq=1 hkv=1 sq=8 sk=8 d=8 mask=none q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=1");
  HostInputs in;
  ASSERT_TRUE(make_inputs(c, &in).ok());
  const BackwardOutputs out = run_backward_case(in, Backend::kHostModel);
  EXPECT_EQ(out.status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out.status.message().find("grad=1"), std::string::npos) << out.status.message();
  // Paged K/V and split-KV are forward-only: UNSUPPORTED, naming the field.
  for (const std::string& line :
       {std::string("f16 b=1 hq=1 hkv=1 sq=8 sk=16 d=8 mask=none seqs=8:16 page=4 q=normal(0,1) k=normal(0,1) "
                    "v=normal(0,1) grad=1 dout=normal(0,1) seed=1"),
        std::string("f16 b=1 hq=1 hkv=1 sq=8 sk=16 d=8 mask=none seqs=8:16 splits=2 q=normal(0,1) k=normal(0,1) "
                    "v=normal(0,1) grad=1 dout=normal(0,1) seed=1")}) {
    const BackwardVerdict v = check(line);
    EXPECT_EQ(v.outcome, Outcome::kUnsupported) << v.report();
    EXPECT_TRUE(v.reason.find("page_table") != std::string::npos || v.reason.find("num_splits") != std::string::npos)
        << v.reason;
  }
}

// Params the backward refuses, each naming its field.
TEST(Backward, ValidationNamesTheField) {
  std::vector<uint16_t> q(64), k(64), v(64), o(64), d_o(64), dq(64), dk(64), dv(64);
  std::vector<float> lse(8), sink(1), dsink(1);
  Params p = make_params(DType::kF16, 1, 1, 1, 8, 8, 8);
  p.q = q.data();
  p.k = k.data();
  p.v = v.data();
  p.o = o.data();
  p.lse = lse.data();
  const auto base = [&] {
    BackwardParams b = make_backward_params(p);
    b.d_o = d_o.data();
    b.dq = dq.data();
    b.dk = dk.data();
    b.dv = dv.data();
    return b;
  };
  EXPECT_TRUE(can_implement_backward(base()).ok()) << can_implement_backward(base()).message();
  const auto refused = [&](BackwardParams b, const char* field) {
    const Status st = can_implement_backward(b);
    EXPECT_FALSE(st.ok()) << field;
    EXPECT_EQ(st.message().rfind(field, 0), 0u) << st.message();
  };
  BackwardParams b = base();
  b.d_o = nullptr;
  refused(b, "d_o");
  b = base();
  b.dk = nullptr;
  refused(b, "dk");
  b = base();
  b.dq = q.data();  // an output over an input
  refused(b, "dq");
  b = base();
  b.dv = dk.data();  // two outputs over each other
  refused(b, "dv");
  b = base();
  b.dsink = dsink.data();  // without a sink
  refused(b, "dsink");
  b = base();
  b.dk_stride.row = -1;
  refused(b, "dk_stride");
  b = base();
  b.forward.num_splits = 2;
  refused(b, "num_splits");
  b = base();
  b.forward.sink = sink.data();
  b.dsink = dsink.data();
  EXPECT_TRUE(can_implement_backward(b).ok()) << can_implement_backward(b).message();
  // batch 0 is a no-op, pointers or not.
  b = make_backward_params(make_params(DType::kF16, 0, 1, 1, 8, 8, 8));
  EXPECT_TRUE(can_implement_backward(b).ok());
}

// backward_path: fp16/bf16 on the tensor cores in both modes where every row it loads starts 16-byte aligned; fp32
// and other layouts on CUDA cores. It reads the pointers' alignment only, so fixed addresses stand in for tensors.
TEST(Backward, PathFollowsDtypeAndAlignment) {
  const auto at = [](uintptr_t address) { return reinterpret_cast<void*>(address); };
  const auto params = [&](DType dtype, int64_t head_dim) {
    BackwardParams b = make_backward_params(make_params(dtype, 2, 4, 2, 64, 80, head_dim));
    b.forward.q = at(0x10000);
    b.forward.k = at(0x20000);
    b.forward.v = at(0x30000);
    b.forward.o = at(0x40000);
    b.d_o = at(0x50000);
    return b;
  };
  EXPECT_EQ(backward_path(params(DType::kF16, 64)), ComputePath::kTensorCore);
  EXPECT_EQ(backward_path(params(DType::kBF16, 256)), ComputePath::kTensorCore);
  BackwardParams b = params(DType::kBF16, 128);
  b.deterministic = true;
  EXPECT_EQ(backward_path(b), ComputePath::kTensorCore);
  EXPECT_EQ(backward_path(params(DType::kF32, 64)), ComputePath::kGeneralFp32);
  EXPECT_EQ(backward_path(params(DType::kF16, 36)), ComputePath::kGeneralFp32);  // 72-byte rows
  b = params(DType::kF16, 64);
  b.d_o = at(0x50008);  // dO alone off the 16-byte grid
  EXPECT_EQ(backward_path(b), ComputePath::kGeneralFp32);
  b = params(DType::kF16, 64);
  b.d_o_stride.row = 68;  // dO's rows 136 bytes apart
  EXPECT_EQ(backward_path(b), ComputePath::kGeneralFp32);
}

TEST(Backward, CAbiTwin) {
  fc_params forward;
  char msg[256];
  ASSERT_EQ(fc_make_params(FC_DTYPE_BF16, 1, 2, 1, 16, 16, 32, FC_MASK_NONE, FC_LAYOUT_BHSD, &forward, msg, sizeof msg),
            FC_OK)
      << msg;
  fc_backward_params b;
  ASSERT_EQ(fc_make_backward_params(&forward, &b, msg, sizeof msg), FC_OK) << msg;
  EXPECT_EQ(b.dq_stride.row, forward.q_stride.row);
  EXPECT_EQ(b.d_o_stride.head, forward.o_stride.head);
  EXPECT_EQ(fc_can_implement_backward(&b, msg, sizeof msg), FC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(msg).rfind("q:", 0), 0u) << msg;  // the forward's own checks come first
  EXPECT_EQ(fc_backward_path(&b, nullptr, msg, sizeof msg), FC_ERR_INVALID_ARGUMENT);  // the same checks first
  EXPECT_EQ(fc_backward(nullptr, nullptr, msg, sizeof msg), FC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(msg).find("params"), std::string::npos) << msg;
}

}  // namespace
}  // namespace flashcheck
