// Subjects through the harness: the host model packaged as a subject passes, the same model with a planted
// defect fails with a case line that names it, a subject with narrow capabilities answers UNSUPPORTED outside
// them (never PASS) and is judged by the generic bound inside them, and malformed libraries are refused with a
// message naming what is wrong.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "flashcheck/backward_check.h"
#include "flashcheck/case.h"
#include "flashcheck/dropout.h"
#include "flashcheck/inputs.h"
#include "flashcheck/loaded_subject.h"
#include "flashcheck/verdict.h"

namespace flashcheck {
namespace {

std::unique_ptr<LoadedSubject> load_ok(const char* path) {
  std::unique_ptr<LoadedSubject> subject;
  const Status st = LoadedSubject::load(path, &subject);
  EXPECT_TRUE(st.ok()) << st.message();
  return subject;
}

// A case line parsed and its inputs made, each step expected to succeed.
std::pair<Case, HostInputs> case_and_inputs(const std::string& line) {
  std::pair<Case, HostInputs> out;
  const Status parsed = parse_case(line, &out.first);
  EXPECT_TRUE(parsed.ok()) << parsed.message();
  const Status made = make_inputs(out.first, &out.second);
  EXPECT_TRUE(made.ok()) << made.message();
  return out;
}

Verdict run_line(const LoadedSubject& subject, const std::string& line) {
  const auto [c, inputs] = case_and_inputs(line);
  return judge(c, inputs, run_case(inputs, subject));
}

// Tile edges, GQA, both layouts with padding, every mask, softcap and sink: what the host model serves.
const char* const kHealthyLines[] = {
    "f16 b=2 hq=4 hkv=2 sq=65 sk=129 d=64 mask=causal-br q=normal(0,1) k=normal(0,1) v=uniform(-1,1) seed=1",
    "bf16 b=1 hq=2 hkv=1 sq=33 sk=200 d=96 mask=window-tl window=40,3 layout=bshd pad=4 softcap=20 "
    "q=normal(0,3) k=normal(0,3) v=normal(0,1) sink=normal(0,2) seed=2",
    "f32 b=1 hq=3 hkv=3 sq=17 sk=64 d=33 mask=none q=uniform(-2,2) k=ramp(-4,4) v=normal(0,1) seed=3",
};

TEST(Subject, HostModelLoadsAndDescribesItself) {
  const auto subject = load_ok(FC_SUBJECT_HOST_MODEL);
  ASSERT_TRUE(subject);
  EXPECT_EQ(subject->name(), "host-model");
  EXPECT_FALSE(subject->on_device());
  EXPECT_FALSE(subject->generic_bound(DType::kBF16));
  EXPECT_EQ(subject->config(DType::kF16, 64).path, ComputePath::kTensorCore);
  EXPECT_EQ(subject->config(DType::kF32, 64).path, ComputePath::kGeneralFp32);
  EXPECT_NE(subject->describe().find("f16=tensor-core"), std::string::npos) << subject->describe();
}

TEST(Subject, HostModelPassesAndNamesItselfInTheCaseLine) {
  const auto subject = load_ok(FC_SUBJECT_HOST_MODEL);
  ASSERT_TRUE(subject);
  for (const char* line : kHealthyLines) {
    const Verdict v = run_line(*subject, line);
    EXPECT_EQ(v.outcome, Outcome::kPass) << v.report();
    EXPECT_NE(v.case_line.find(" subject=host-model seed="), std::string::npos) << v.case_line;
    EXPECT_GT(v.elements_checked, 0);
  }
}

TEST(Subject, CaseLineWithSubjectRoundTrips) {
  Case c;
  ASSERT_TRUE(parse_case(std::string(kHealthyLines[0]) + " subject=host-model", &c).ok());
  EXPECT_EQ(c.subject, "host-model");
  Case again;
  ASSERT_TRUE(parse_case(format_case(c), &again).ok());
  EXPECT_EQ(again, c);
  EXPECT_FALSE(parse_case(std::string(kHealthyLines[0]) + " subject=a/b", &c).ok());
}

TEST(Subject, PlantedDefectIsCaughtWithAReplayableLine) {
  const auto subject = load_ok(FC_SUBJECT_MISSING_RESCALE);
  ASSERT_TRUE(subject);
  // Increasing logits: the running max moves on every K/V tile, so the last tile's rescale matters.
  const Verdict v = run_line(*subject, "f32 b=1 hq=2 hkv=1 sq=30 sk=200 d=33 mask=none scale=10 q=normal(0,1) "
                                       "k=normal(0,1) v=normal(0,1) seed=0");
  EXPECT_EQ(v.outcome, Outcome::kFail) << v.report();
  EXPECT_NE(v.case_line.find("subject=host-model-missing-rescale"), std::string::npos) << v.case_line;
  Case replay;
  EXPECT_TRUE(parse_case(v.case_line, &replay).ok());
}

TEST(Subject, OutsideTheCapabilitiesIsUnsupportedNeverPass) {
  const auto subject = load_ok(FC_SUBJECT_RESTRICTED);
  ASSERT_TRUE(subject);
  const std::string tail = " q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=5";
  struct Refusal {
    std::string line;
    const char* field;
  };
  const Refusal refusals[] = {
      {"bf16 b=1 hq=2 hkv=2 sq=8 sk=8 d=32 mask=causal-br" + tail, "dtype:"},
      {"f16 b=1 hq=2 hkv=2 sq=8 sk=8 d=128 mask=causal-br" + tail, "head_dim:"},
      {"f16 b=1 hq=2 hkv=2 sq=8 sk=8 d=32 mask=none" + tail, "mask:"},
      {"f16 b=1 hq=4 hkv=2 sq=8 sk=8 d=32 mask=causal-br" + tail, "heads_kv:"},
      {"f16 b=1 hq=2 hkv=2 sq=8 sk=8 d=32 mask=causal-br layout=bshd" + tail, "layout:"},
      {"f16 b=1 hq=2 hkv=2 sq=8 sk=8 d=32 mask=causal-br pad=2" + tail, "layout:"},
      {"f16 b=1 hq=2 hkv=2 sq=8 sk=8 d=32 mask=causal-br softcap=5" + tail, "softcap:"},
      {"f16 b=1 hq=2 hkv=2 sq=8 sk=8 d=32 mask=causal-br q=normal(0,1) k=normal(0,1) v=normal(0,1) "
       "sink=normal(0,1) seed=5",
       "sink:"},
  };
  for (const Refusal& r : refusals) {
    const Verdict v = run_line(*subject, r.line);
    EXPECT_EQ(v.outcome, Outcome::kUnsupported) << v.report();
    EXPECT_FALSE(v.pass);
    EXPECT_EQ(v.reason.rfind(r.field, 0), 0u) << v.reason;
    EXPECT_NE(v.reason.find("subject host-model-restricted"), std::string::npos) << v.reason;
  }
  // Invalid input stays REJECTED whatever the subject.
  EXPECT_EQ(run_line(*subject, "f16 b=1 hq=3 hkv=2 sq=8 sk=8 d=32 mask=causal-br" + tail).outcome, Outcome::kRejected);
}

// Shape limits (fc_subject_limits_v1): a case outside them is UNSUPPORTED naming the seqlen, one inside runs.
TEST(Subject, ShapeLimitsAreCheckedLikeTheCapabilities) {
  const auto subject = load_ok(FC_SUBJECT_TILED);
  ASSERT_TRUE(subject);
  EXPECT_TRUE(subject->has_limits());
  EXPECT_NE(subject->describe().find("seqlen_k % 32 == 0 seqlen_k >= 32"), std::string::npos) << subject->describe();
  const std::string tail = " d=16 mask=causal-br q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=5";
  for (const auto& [line, field] : {std::pair{"f16 b=1 hq=2 sq=16 sk=48" + tail, "seqlen_k: 48 is not a multiple of 32"},
                                    std::pair{"f16 b=1 hq=2 sq=17 sk=64" + tail, "seqlen_q: 17 is not a multiple of 16"},
                                    std::pair{"f16 b=1 hq=2 sq=16 sk=0" + tail, "seqlen_k: 0 is below the minimum 32"}}) {
    const Verdict v = run_line(*subject, line);
    EXPECT_EQ(v.outcome, Outcome::kUnsupported) << v.report();
    EXPECT_EQ(v.reason.rfind(field, 0), 0u) << v.reason;
  }
  EXPECT_EQ(run_line(*subject, "f16 b=1 hq=2 sq=32 sk=96" + tail).outcome, Outcome::kPass);
}

// V and O of their own width (fc_subject_value_dims_v1): a library that declares the range gets head_dim_v in the
// problem and is judged on it; one that declares none answers UNSUPPORTED naming head_dim_v, never a pass.
TEST(Subject, UnequalHeadDimsNeedTheValueDimsDeclaration) {
  const auto declared = load_ok(FC_SUBJECT_HOST_MODEL);
  const auto undeclared = load_ok(FC_SUBJECT_RESTRICTED);
  ASSERT_TRUE(declared && undeclared);
  ASSERT_TRUE(declared->value_dims().has_value());
  EXPECT_FALSE(undeclared->value_dims().has_value());
  EXPECT_NE(declared->describe().find("head_dim_v 1..256"), std::string::npos) << declared->describe();
  const std::string tail = " q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=5";
  for (const char* dims : {"d=192 dv=128", "d=64 dv=128", "d=3 dv=5"}) {
    const std::string line = std::string("bf16 b=1 hq=4 hkv=2 sq=70 sk=130 ") + dims + " mask=causal-br" + tail;
    const Verdict v = run_line(*declared, line);
    EXPECT_EQ(v.outcome, Outcome::kPass) << v.report();
    EXPECT_GT(v.elements_checked, 0);
  }
  const Verdict v = run_line(*undeclared, "f16 b=1 hq=2 hkv=2 sq=8 sk=8 d=32 dv=16 mask=causal-br" + tail);
  EXPECT_EQ(v.outcome, Outcome::kUnsupported) << v.report();
  EXPECT_EQ(v.reason.rfind("head_dim_v:", 0), 0u) << v.reason;
  // head_dim_v spelled equal to head_dim is no unequal width: the library without the declaration runs it.
  EXPECT_EQ(run_line(*undeclared, "f16 b=1 hq=2 hkv=2 sq=8 sk=8 d=32 dv=32 mask=causal-br" + tail).outcome,
            Outcome::kPass);
}

// Sequences (fc_subject_sequences_v1): a library that declares them is given packed, paged and split-KV cases through
// forward_sequences and judged on them; the features it lacks, or the whole entry point, make such cases UNSUPPORTED
// naming the key, never a pass.
const char* const kSequenceLines[] = {
    "f16 b=3 hq=4 hkv=2 sq=70 sk=300 d=64 mask=causal-br seqs=70:300,1:17+9,0:5 poison=inf q=normal(0,1) "
    "k=normal(0,1) v=normal(0,1) seed=7",
    "bf16 b=2 hq=2 hkv=1 sq=33 sk=200 d=96 mask=window-tl window=40,3 seqs=33:190+10,5:64 page=16 softcap=20 "
    "q=normal(0,3) k=normal(0,3) v=normal(0,1) sink=normal(0,2) seed=8",
    "f32 b=2 hq=3 hkv=3 sq=17 sk=260 d=33 mask=none seqs=17:260,3:100 page=5 splits=3 q=uniform(-2,2) k=ramp(-4,4) "
    "v=normal(0,1) seed=9",
    "f16 b=1 hq=2 hkv=2 sq=64 sk=512 d=64 mask=causal-tl splits=4 q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=10",
};

TEST(Subject, SequencesRunThroughTheSequencesEntryPoint) {
  const auto subject = load_ok(FC_SUBJECT_HOST_MODEL);
  ASSERT_TRUE(subject);
  ASSERT_TRUE(subject->sequences().has_value());
  EXPECT_NE(subject->describe().find("sequences varlen seqused_k paged splits"), std::string::npos) << subject->describe();
  for (const char* line : kSequenceLines) {
    const Verdict v = run_line(*subject, line);
    EXPECT_EQ(v.outcome, Outcome::kPass) << v.report();
    EXPECT_GT(v.elements_checked, 0) << line;
  }
  // The planted defect shows on a sequence case as on a dense one.
  const auto defective = load_ok(FC_SUBJECT_MISSING_RESCALE);
  ASSERT_TRUE(defective);
  const Verdict v = run_line(*defective, "f32 b=2 hq=2 hkv=1 sq=30 sk=200 d=33 mask=none seqs=30:200,7:150 page=16 "
                                         "scale=10 q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=0");
  EXPECT_EQ(v.outcome, Outcome::kFail) << v.report();
  EXPECT_NE(v.case_line.find("page=16"), std::string::npos) << v.case_line;
}

TEST(Subject, SequenceFeaturesAreCheckedLikeTheCapabilities) {
  const auto narrow = load_ok(FC_SUBJECT_TILED);  // packed sequences with spare slots only
  const auto none = load_ok(FC_SUBJECT_RESTRICTED);
  ASSERT_TRUE(narrow && none);
  EXPECT_FALSE(none->sequences().has_value());
  const std::string tail = " q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=5";
  struct Refusal {
    const LoadedSubject* subject;
    std::string line;
    const char* reason;
  };
  const Refusal refusals[] = {
      {narrow.get(), "f16 b=2 hq=2 sq=16 sk=64 d=16 mask=none seqs=16:64,3:20 page=16" + tail,
       "page: paged K/V is not among the declared sequence features"},
      {narrow.get(), "f16 b=1 hq=2 sq=16 sk=64 d=16 mask=none splits=2" + tail,
       "splits: 2: split-KV is not among the declared sequence features"},
      {narrow.get(), "f16 b=1 hq=2 sq=16 sk=64 d=16 mask=none splits=0" + tail, "splits: 0 (the kernel's own heuristic)"},
      {none.get(), "f16 b=2 hq=2 sq=16 sk=64 d=16 mask=causal-br seqs=16:64,3:20" + tail,
       "seqs: variable-length sequences, seqused_k and paged K/V: the library declares no sequences"},
  };
  for (const Refusal& r : refusals) {
    const Verdict v = run_line(*r.subject, r.line);
    EXPECT_EQ(v.outcome, Outcome::kUnsupported) << v.report();
    EXPECT_EQ(v.reason.rfind(r.reason, 0), 0u) << v.reason;
  }
  // Inside its features and limits (sq and sk bound the sequences), the narrow subject runs packed sequences.
  EXPECT_EQ(run_line(*narrow, "f16 b=2 hq=2 sq=16 sk=64 d=16 mask=none seqs=16:50+14,3:20" + tail).outcome, Outcome::kPass);
}

// The generators' and the report's move onto a subject's sequence features (onto_sequence_features).
TEST(Subject, SequenceCasesMoveOntoTheDeclaredFeatures) {
  const auto narrow = load_ok(FC_SUBJECT_TILED);
  const auto none = load_ok(FC_SUBJECT_RESTRICTED);
  ASSERT_TRUE(narrow && none);
  Case c;
  ASSERT_TRUE(parse_case("f16 b=2 hq=2 hkv=2 sq=40 sk=70 d=16 mask=causal-br seqs=40:60+10,3:20 page=16 poison=zero "
                         "splits=3 q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=5",
                         &c)
                  .ok());
  const Case packed = onto_sequence_features(*narrow, c);
  EXPECT_EQ(packed.page, 0);
  EXPECT_EQ(packed.splits, 1);
  EXPECT_EQ(packed.seqlen_q, 48);  // onto seqlen_q % 16
  EXPECT_EQ(packed.seqlen_k, 96);  // onto seqlen_k % 32
  ASSERT_EQ(packed.seqs.size(), 2u);
  EXPECT_EQ(packed.seqs[0].extra, 10);
  EXPECT_TRUE(narrow->supports(packed).ok()) << narrow->supports(packed).message() << ": " << format_case(packed);
  const Case dense = onto_sequence_features(*none, c);
  EXPECT_TRUE(dense.seqs.empty());
  EXPECT_EQ(dense.splits, 1);
  Case roundtrip;
  EXPECT_TRUE(parse_case(format_case(dense), &roundtrip).ok()) << format_case(dense);
  const auto every = load_ok(FC_SUBJECT_HOST_MODEL);
  ASSERT_TRUE(every);
  EXPECT_EQ(format_case(onto_sequence_features(*every, c)), format_case(c));
}

// The backward pass (fc_subject_backward_v1): a grad=1 case runs the subject's forward, then its backward on the O and
// LSE it wrote, judged by judge_backward under the declared class; a planted backward defect fails with the forward's
// verdict a pass; the features the backward leaves out are UNSUPPORTED naming the key.
BackwardVerdict run_grad_line(const LoadedSubject& subject, const std::string& line) {
  const auto [c, inputs] = case_and_inputs(line);
  return judge_backward(c, inputs, run_backward_case(inputs, subject));
}

const char* const kGradLines[] = {
    "bf16 b=2 hq=4 hkv=2 sq=40 sk=70 d=64 mask=causal-br softcap=20 q=normal(0,1) k=normal(0,1) v=normal(0,1) "
    "sink=normal(0,1) grad=1 dout=normal(0,1) seed=3",
    "f32 b=3 hq=2 hkv=1 sq=33 sk=65 d=40 mask=window-tl window=20,5 layout=bshd pad=3 seqs=33:60+5,0:9,17:65 q=normal(0,1) "
    "k=normal(0,1) v=uniform(-1,1) grad=1 dout=uniform(-1,1) seed=4",
    "f16 b=1 hq=2 hkv=2 sq=31 sk=33 d=192 dv=128 mask=none q=normal(0,1) k=normal(0,1) v=normal(0,1) grad=1 "
    "dout=normal(0,2) seed=5",
};

TEST(Subject, BackwardRunsOnTheForwardsOwnOutputs) {
  const auto subject = load_ok(FC_SUBJECT_HOST_MODEL);
  const auto defective = load_ok(FC_SUBJECT_BAD_GRADIENT);
  ASSERT_TRUE(subject && defective);
  ASSERT_TRUE(subject->backward().has_value());
  EXPECT_NE(subject->describe().find("backward f32=general-fp32 f16=general-fp32 bf16=general-fp32, dsink, sequences, "
                                     "deterministic"),
            std::string::npos)
      << subject->describe();
  Params bf16;
  bf16.dtype = DType::kBF16;
  EXPECT_EQ(subject->backward_path(bf16), ComputePath::kGeneralFp32);
  for (const char* line : kGradLines) {
    const BackwardVerdict v = run_grad_line(*subject, line);
    EXPECT_EQ(v.outcome, Outcome::kPass) << v.report();
    EXPECT_GT(v.dq_info.claims, 0) << line;
    const BackwardVerdict bad = run_grad_line(*defective, line);
    EXPECT_EQ(bad.outcome, Outcome::kFail) << bad.report();
    EXPECT_TRUE(bad.forward.pass) << bad.forward.report();
  }
}

TEST(Subject, BackwardFeaturesAreCheckedLikeTheCapabilities) {
  const auto tiled = load_ok(FC_SUBJECT_TILED);  // no backward
  const auto subject = load_ok(FC_SUBJECT_HOST_MODEL);
  ASSERT_TRUE(tiled && subject);
  EXPECT_FALSE(tiled->backward().has_value());
  EXPECT_NE(tiled->describe().find("; backward none;"), std::string::npos) << tiled->describe();
  const std::string tail = " q=normal(0,1) k=normal(0,1) v=normal(0,1) grad=1 dout=normal(0,1) seed=5";
  const BackwardVerdict none = run_grad_line(*tiled, "f16 b=1 hq=2 sq=32 sk=64 d=16 mask=none" + tail);
  EXPECT_EQ(none.outcome, Outcome::kUnsupported) << none.report();
  EXPECT_EQ(none.reason.rfind("grad: the library declares no backward pass", 0), 0u) << none.reason;
  // Outside the forward's capabilities first, then the backward's own: paged K/V is forward-only.
  Case paged;
  ASSERT_TRUE(parse_case("f16 b=2 hq=2 sq=32 sk=64 d=16 mask=none seqs=32:64,3:20 page=16" + tail, &paged).ok());
  const Status st = subject->supports_backward(paged);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported);
  EXPECT_EQ(st.message().rfind("page: paged K/V is forward-only", 0), 0u) << st.message();
}

// Dropout (fc_subject_dropout_v1): forward_dropout with the mask dump, backward_dropout on its own outputs, judged with
// the oracle's redraw of the documented mask in the general-fp32 class; a subject that truncates the stream offset fails
// where the offset has high bits (forward, dump and backward) and passes where it has none; a subject without a dropout
// is UNSUPPORTED naming the field.
const char* const kDropoutLines[] = {
    "bf16 b=2 hq=4 hkv=2 sq=40 sk=70 d=64 mask=causal-br softcap=20 dropout=0.25 drop_seed=77 drop_offset=4294967300 "
    "q=normal(0,1) k=normal(0,1) v=normal(0,1) sink=normal(0,1) grad=1 dout=normal(0,1) seed=3",
    "f32 b=3 hq=2 hkv=1 sq=33 sk=65 d=40 mask=window-tl window=20,5 layout=bshd pad=3 seqs=33:60+5,0:9,17:65 "
    "dropout=0.5 drop_seed=18446744073709551615 drop_offset=18446744073709551610 q=normal(0,1) k=normal(0,1) "
    "v=uniform(-1,1) grad=1 dout=uniform(-1,1) seed=4",
};

// The fp8 path's own head dims (fc_subject_fp8_head_dims_v1): f8e4m3 cases at other head dims are UNSUPPORTED naming
// head_dim, the other dtypes keep the capabilities' list, and the nearest head dim a case may have follows the dtype.
TEST(Subject, Fp8HeadDimsNarrowOnlyTheFp8Path) {
  const auto subject = load_ok(FC_SUBJECT_HEAD_DIMS);  // head dims 16, 32, 64, 128; fp8 a multiple of 32
  ASSERT_TRUE(subject);
  EXPECT_NE(subject->describe().find("head_dim % 32 == 0"), std::string::npos) << subject->describe();
  EXPECT_TRUE(subject->takes_head_dim(DType::kBF16, 16));
  EXPECT_FALSE(subject->takes_head_dim(DType::kF8E4M3, 16));
  EXPECT_TRUE(subject->takes_head_dim(DType::kF8E4M3, 32));
  EXPECT_FALSE(subject->takes_head_dim(DType::kF8E4M3, 96));  // a multiple of 32 the capabilities leave out
  for (const auto& [dtype, d, nearest] : {std::tuple{DType::kBF16, 20, 16}, {DType::kBF16, 24, 16},
                                          {DType::kBF16, 200, 128}, {DType::kF8E4M3, 16, 32}, {DType::kF8E4M3, 1, 32},
                                          {DType::kF8E4M3, 100, 128}, {DType::kF8E4M3, 64, 64}}) {
    EXPECT_EQ(subject->nearest_head_dim(dtype, d), nearest) << to_string(dtype) << " " << d;
  }
  EXPECT_FALSE(subject->takes_fp8_tiles(16, 2));
  EXPECT_TRUE(subject->takes_fp8_tiles(32, 2));
  const std::string tail = " mask=none q=normal(0,1) k=normal(0,1) v=uniform(-1,1) seed=3";
  const Verdict refused = run_line(*subject, "f8e4m3 b=1 hq=2 sq=20 sk=70 d=16" + tail);
  EXPECT_EQ(refused.outcome, Outcome::kUnsupported) << refused.report();
  EXPECT_EQ(refused.reason.rfind("head_dim: 16 is not a multiple of 32", 0), 0u) << refused.reason;
  EXPECT_EQ(run_line(*subject, "f8e4m3 b=1 hq=2 sq=20 sk=70 d=32" + tail).outcome, Outcome::kPass);
  EXPECT_EQ(run_line(*subject, "bf16 b=1 hq=2 sq=20 sk=70 d=16" + tail).outcome, Outcome::kPass);
}

TEST(Subject, DropoutRunsWithTheDocumentedMask) {
  const auto subject = load_ok(FC_SUBJECT_HOST_MODEL);
  const auto defective = load_ok(FC_SUBJECT_DROPOUT_OFFSET_32BIT);
  const auto tiled = load_ok(FC_SUBJECT_TILED);
  ASSERT_TRUE(subject && defective && tiled);
  EXPECT_NE(subject->describe().find("dropout f32 f16 bf16, backward, mask dump, sequences"), std::string::npos)
      << subject->describe();
  Params dropped;
  dropped.dtype = DType::kF16;
  dropped.dropout_p = 0.1f;
  EXPECT_EQ(subject->backward_path(dropped), ComputePath::kGeneralFp32);
  for (const char* line : kDropoutLines) {
    const auto [c, inputs] = case_and_inputs(line);
    RunOptions dump;
    dump.dropout_mask = true;
    const RunOutputs out = run_case(inputs, *subject, dump);
    ASSERT_TRUE(out.status.ok()) << out.status.message();
    EXPECT_EQ(out.config.path, ComputePath::kGeneralFp32);
    EXPECT_EQ(out.unwritten_mask, 0);
    // The dump: the documented mask where a key is visible, 0 where it is hidden.
    const oracle::Problem problem = inputs.problem();
    std::vector<uint8_t> want = oracle::dropout_keep_mask(problem, problem.dropout);
    size_t at = 0, kept = 0;
    for (int64_t b = 0; b < c.batch; ++b)
      for (int64_t h = 0; h < c.heads_q; ++h)
        for (int64_t i = 0; i < c.seqlen_q; ++i)
          for (int64_t j = 0; j < c.seqlen_k; ++j, ++at) {
            if (want[at] && !oracle::visible(problem, b, i, j)) want[at] = 0;
            kept += want[at];
          }
    EXPECT_GT(kept, 0u);
    EXPECT_EQ(out.dropout_mask, want) << line;
    EXPECT_TRUE(judge(c, inputs, out).pass) << judge(c, inputs, out).report();
    const BackwardVerdict v = run_grad_line(*subject, line);
    EXPECT_EQ(v.outcome, Outcome::kPass) << v.report();
    const BackwardVerdict bad = run_grad_line(*defective, line);
    EXPECT_EQ(bad.outcome, Outcome::kFail) << bad.report();
    EXPECT_FALSE(bad.forward.pass) << bad.forward.report();
    const RunOutputs no_dropout = run_case(inputs, *tiled);
    EXPECT_EQ(no_dropout.status.code(), StatusCode::kUnsupported);
    EXPECT_NE(no_dropout.status.message().find("dropout: the library declares no dropout"), std::string::npos)
        << no_dropout.status.message();
  }
  // An offset without high bits: the truncation changes nothing.
  const std::string low = "f16 b=1 hq=2 hkv=2 sq=31 sk=33 d=32 mask=none dropout=0.1 drop_seed=5 drop_offset=12 "
                          "q=normal(0,1) k=normal(0,1) v=normal(0,1) seed=5";
  EXPECT_TRUE(run_line(*defective, low).pass) << run_line(*defective, low).report();
}

// fp8 (fc_subject_fp8_v1): e4m3 inputs with descales through forward_fp8, judged in the tensor-core fp8 class on the
// declared tile; the planted defect fails on a row whose max moves tile after tile; a library without the entry point,
// or a case with descales on a path that takes none, is UNSUPPORTED naming the field.
TEST(Subject, Fp8RunsThroughItsEntryPointInItsClass) {
  const auto subject = load_ok(FC_SUBJECT_HOST_MODEL);
  const auto defective = load_ok(FC_SUBJECT_MISSING_RESCALE);
  const auto restricted = load_ok(FC_SUBJECT_RESTRICTED);
  ASSERT_TRUE(subject && defective && restricted);
  EXPECT_NE(subject->describe().find("fp8 f8e4m3=tensor-core-fp8, descales, key tile 160 (head dims 1..64) 128 (head "
                                     "dims 65..96) 224 (head dims 97..128) 160 (head dims 129..192) 128 (head dims "
                                     "193..256);"),
            std::string::npos)
      << subject->describe();
  // The tile per head dim (fc_subject_fp8.key_tiles): the first entry that covers the head dim.
  for (const auto [head_dim, tile] : {std::pair{1, 160}, {64, 160}, {65, 128}, {96, 128}, {97, 224}, {128, 224},
                                      {129, 160}, {192, 160}, {193, 128}, {256, 128}}) {
    EXPECT_EQ(subject->fp8_key_tile(head_dim), tile) << head_dim;
    EXPECT_EQ(subject->config(DType::kF8E4M3, head_dim).block_n, tile) << head_dim;
  }
  EXPECT_TRUE(subject->takes_fp8_tiles(64, 2));
  EXPECT_EQ(restricted->fp8_key_tile(64), 0);
  EXPECT_NE(restricted->describe().find("fp8 none"), std::string::npos) << restricted->describe();
  const char* const lines[] = {
      "f8e4m3 b=2 hq=4 hkv=2 sq=65 sk=300 d=64 mask=causal-br q=normal(0,1) k=normal(0,1) v=uniform(-1,1) "
      "descale=uniform(0.5,2) seed=1",
      "f8e4m3 b=1 hq=2 hkv=1 sq=33 sk=200 d=96 dv=64 mask=window-tl window=40,3 layout=bshd pad=4 softcap=20 "
      "q=normal(0,3) k=normal(0,3) v=normal(0,1) sink=normal(0,2) seed=2",
  };
  for (const char* line : lines) {
    const auto [c, inputs] = case_and_inputs(line);
    const RunOutputs out = run_case(inputs, *subject);
    ASSERT_TRUE(out.status.ok()) << out.status.message();
    EXPECT_EQ(out.config.path, ComputePath::kTensorCoreFp8);
    EXPECT_EQ(out.config.block_n, subject->fp8_key_tile(inputs.params.head_dim));
    EXPECT_TRUE(out.tiling_declared);
    EXPECT_FALSE(out.generic_bound);
    EXPECT_TRUE(judge(c, inputs, out).pass) << judge(c, inputs, out).report();
    const RunOutputs none = run_case(inputs, *restricted);
    EXPECT_EQ(none.status.code(), StatusCode::kUnsupported);
    EXPECT_NE(none.status.message().find("dtype: f8e4m3: the library declares no fp8 path"), std::string::npos)
        << none.status.message();
  }
  // The backward and dropout take no f8e4m3 (their per-dtype arrays stop at bf16).
  EXPECT_EQ(subject->backward_class(DType::kF8E4M3), FC_SUBJECT_ARITH_UNDECLARED);
  EXPECT_FALSE(subject->drops(DType::kF8E4M3));
  Case grad;
  ASSERT_TRUE(parse_case("f8e4m3 b=1 hq=1 hkv=1 sq=4 sk=4 d=8 mask=none q=normal(0,1) k=normal(0,1) v=normal(0,1) "
                         "grad=1 dout=normal(0,1) seed=1",
                         &grad)
                  .ok());
  EXPECT_EQ(subject->supports_backward(grad).code(), StatusCode::kUnsupported);
  const Verdict bad = run_line(*defective,
                               "f8e4m3 b=1 hq=1 hkv=1 sq=387 sk=387 d=1 mask=window-tl window=257,0 q=normal(0,1) "
                               "k=normal(0,1) v=normal(0,1) descale=uniform(10,100) seed=0");
  EXPECT_EQ(bad.outcome, Outcome::kFail) << bad.report();
  EXPECT_NE(bad.case_line.find("subject=host-model-missing-rescale"), std::string::npos) << bad.case_line;
}

TEST(Subject, UndeclaredArithmeticIsJudgedByTheGenericBoundAndOAlone) {
  const auto subject = load_ok(FC_SUBJECT_RESTRICTED);
  ASSERT_TRUE(subject);
  EXPECT_TRUE(subject->generic_bound(DType::kF16));
  EXPECT_FALSE(subject->tiling_declared());
  const Verdict v = run_line(*subject, "f16 b=2 hq=2 hkv=2 sq=70 sk=150 d=32 mask=causal-br q=normal(0,2) "
                                       "k=normal(0,2) v=uniform(-1,1) seed=6");
  EXPECT_EQ(v.outcome, Outcome::kPass) << v.report();
  EXPECT_NE(v.config.find("path=generic"), std::string::npos) << v.config;
  EXPECT_EQ(v.lse.checked, 0);  // no LSE output: nothing judged, nothing left unwritten
  EXPECT_EQ(v.unwritten_lse, 0);
}

TEST(Subject, InstrumentationIsForFlashchecksOwnBuilds) {
  const auto subject = load_ok(FC_SUBJECT_HOST_MODEL);
  ASSERT_TRUE(subject);
  Case c;
  ASSERT_TRUE(parse_case(kHealthyLines[0], &c).ok());
  HostInputs inputs;
  ASSERT_TRUE(make_inputs(c, &inputs).ok());
  RunOptions options;
  options.instrument = true;
  const RunOutputs out = run_case(inputs, *subject, options);
  EXPECT_EQ(out.status.code(), StatusCode::kUnsupported);
  EXPECT_NE(out.status.message().find("instrumentation"), std::string::npos) << out.status.message();
}

void expect_refused(const char* path, const char* what) {
  std::unique_ptr<LoadedSubject> subject;
  const Status st = LoadedSubject::load(path, &subject);
  EXPECT_FALSE(st.ok());
  EXPECT_FALSE(subject);
  EXPECT_NE(st.message().find(what), std::string::npos) << st.message();
  EXPECT_NE(st.message().find(path), std::string::npos) << st.message();
}

TEST(Subject, MalformedLibrariesAreRefusedWithTheReason) {
  expect_refused(FC_SUBJECT_MALFORMED_NO_ENTRY, "no symbol fc_subject_v1");
  expect_refused(FC_SUBJECT_MALFORMED_VERSION, "ABI version 99, this flashcheck reads version 1");
  expect_refused(FC_SUBJECT_MALFORMED_HEAD_DIM, "capabilities.head_dim_min/max");
  expect_refused(FC_SUBJECT_MALFORMED_ARITHMETIC, "contradict the class tensor-core");
  expect_refused(FC_SUBJECT_MALFORMED_SEQUENCES, "sequences.features: PAGED needs SEQUSED_K");
  expect_refused(FC_SUBJECT_MALFORMED_BACKWARD, "backward.arithmetic[f32]: a class for a dtype the capabilities leave out");
  expect_refused(FC_SUBJECT_MALFORMED_DROPOUT, "dropout.arithmetic[f16]: FC_SUBJECT_ARITH_GENERAL_FP32 or _UNDECLARED");
  expect_refused(FC_SUBJECT_MALFORMED_DROPOUT_BACKWARD, "dropout.backward_dropout: needs a backward pass");
  expect_refused(FC_SUBJECT_MALFORMED_FP8, "fp8.arithmetic: FC_SUBJECT_ARITH_TENSOR_CORE_FP8");
  expect_refused(FC_SUBJECT_MALFORMED_FP8_KEY_TILES, "fp8.key_tiles[1].max_head_dim: > 0 and above the previous entry's (got 64)");
  expect_refused(FC_SUBJECT_MALFORMED_FP8_HEAD_DIMS, "fp8 head dims.multiple: 256 leaves the fp8 path no head dim among 1..128");
  expect_refused("/nonexistent/libnothing.so", "cannot load");
}

}  // namespace
}  // namespace flashcheck
