// API validation: every invalid input the contract names is rejected by can_implement() with its own
// message, and run(), fc_can_implement() and fc_forward() reject it the same way before any launch.
// The "before any launch" half is shown by handing run() host pointers: a launch with them would fault or
// write the sentinel-filled buffers, and both are checked. Table-driven: one row per rule (windows, softcap and
// sink included).
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "flashcheck/attention.h"
#include "flashcheck/attention_c.h"
#include "flashcheck/backward.h"
#include "flashcheck/dtype.h"

namespace flashcheck {
namespace {

constexpr int64_t kBatch = 2, kHeadsQ = 4, kHeadsKv = 2, kSeqQ = 5, kSeqK = 7, kHeadDim = 8;
constexpr uint32_t kSentinel = 0x5EA1ED00u;

// A valid bf16 problem over host buffers, filled with a sentinel so any write is visible.
struct Fixture {
  std::vector<uint32_t> q, k, v, o, lse;
  Params params;

  explicit Fixture(DType dtype = DType::kBF16) {
    params = make_params(dtype, kBatch, kHeadsQ, kHeadsKv, kSeqQ, kSeqK, kHeadDim, Mask::kCausalBottomRight);
    const auto words = [&](int64_t heads, int64_t seqlen, int64_t element_bytes) {
      return static_cast<size_t>((kBatch * heads * seqlen * kHeadDim * element_bytes + 3) / 4 + 4);
    };
    q.assign(words(kHeadsQ, kSeqQ, dtype_size(dtype)), kSentinel);
    k.assign(words(kHeadsKv, kSeqK, dtype_size(dtype)), kSentinel);
    v.assign(words(kHeadsKv, kSeqK, dtype_size(dtype)), kSentinel);
    o.assign(words(kHeadsQ, kSeqQ, dtype_size(output_dtype(dtype))), kSentinel);  // O in the output dtype
    lse.assign(static_cast<size_t>(kBatch * kHeadsQ * kSeqQ + 4), kSentinel);
    params.q = q.data();
    params.k = k.data();
    params.v = v.data();
    params.o = o.data();
    params.lse = reinterpret_cast<float*>(lse.data());
  }
  bool outputs_untouched() const {
    for (uint32_t w : o) if (w != kSentinel) return false;
    for (uint32_t w : lse) if (w != kSentinel) return false;
    return true;
  }
};

fc_params to_c(const Params& p) {
  fc_params c{};
  c.dtype = static_cast<int32_t>(p.dtype);
  c.mask = static_cast<int32_t>(p.mask);
  c.batch = p.batch;
  c.heads_q = p.heads_q;
  c.heads_kv = p.heads_kv;
  c.seqlen_q = p.seqlen_q;
  c.seqlen_k = p.seqlen_k;
  c.head_dim = p.head_dim;
  c.head_dim_v = p.head_dim_v;
  c.q = p.q;
  c.k = p.k;
  c.v = p.v;
  c.o = p.o;
  c.lse = p.lse;
  c.q_stride = {p.q_stride.batch, p.q_stride.head, p.q_stride.row};
  c.k_stride = {p.k_stride.batch, p.k_stride.head, p.k_stride.row};
  c.v_stride = {p.v_stride.batch, p.v_stride.head, p.v_stride.row};
  c.o_stride = {p.o_stride.batch, p.o_stride.head, p.o_stride.row};
  c.softmax_scale = p.softmax_scale;
  c.window_left = p.window_left;
  c.window_right = p.window_right;
  c.softcap = p.softcap;
  c.sink = p.sink;
  c.cu_seqlens_q = p.cu_seqlens_q;
  c.total_q = p.total_q;
  c.cu_seqlens_k = p.cu_seqlens_k;
  c.total_k = p.total_k;
  c.seqused_k = p.seqused_k;
  c.page_table = p.page_table;
  c.page_size = p.page_size;
  c.num_pages = p.num_pages;
  c.max_pages_per_seq = p.max_pages_per_seq;
  c.num_splits = p.num_splits;
  c.dropout_p = p.dropout_p;
  c.dropout_seed = p.dropout_seed;
  c.dropout_offset = p.dropout_offset;
  c.dropout_mask_out = p.dropout_mask_out;
  return c;
}

struct Rule {
  const char* name;
  std::function<void(Params&)> break_it;
  StatusCode code;
  const char* message;  // a substring the message must contain
};

// gtest names the parameter of a failed or skipped test through PrintTo: the rule's name, not its raw bytes.
void PrintTo(const Rule& rule, std::ostream* os) { *os << rule.name; }

const char* misaligned(const void* p) { return static_cast<const char*>(p) + 1; }

// A paged cache's index arrays for the dropout rule (read only past the check that refuses it).
const int32_t kPageTable[kBatch] = {0, 1};
const int32_t kSequsedK[kBatch] = {kSeqK, kSeqK};
uint8_t g_mask_dump[kBatch * kHeadsQ * kSeqQ * kSeqK];

std::vector<Rule> rules() {
  constexpr int64_t kHuge = std::numeric_limits<int64_t>::max() / 4;
  return {
      {"NullQ", [](Params& p) { p.q = nullptr; }, StatusCode::kInvalidArgument, "q: null pointer"},
      {"NullK", [](Params& p) { p.k = nullptr; }, StatusCode::kInvalidArgument, "k: null pointer"},
      {"NullV", [](Params& p) { p.v = nullptr; }, StatusCode::kInvalidArgument, "v: null pointer"},
      {"NullO", [](Params& p) { p.o = nullptr; }, StatusCode::kInvalidArgument, "o: null pointer"},
      {"NullLse", [](Params& p) { p.lse = nullptr; }, StatusCode::kInvalidArgument, "lse: null pointer"},
      {"NegativeBatch", [](Params& p) { p.batch = -1; }, StatusCode::kInvalidArgument, "batch: must be >= 0"},
      {"NegativeHeadsQ", [](Params& p) { p.heads_q = -4; }, StatusCode::kInvalidArgument, "heads_q: must be >= 0"},
      {"NegativeHeadsKv", [](Params& p) { p.heads_kv = -2; }, StatusCode::kInvalidArgument, "heads_kv: must be >= 0"},
      {"NegativeSeqlenQ", [](Params& p) { p.seqlen_q = -5; }, StatusCode::kInvalidArgument, "seqlen_q: must be >= 0"},
      {"NegativeSeqlenK", [](Params& p) { p.seqlen_k = -7; }, StatusCode::kInvalidArgument, "seqlen_k: must be >= 0"},
      {"ZeroHeadsKv", [](Params& p) { p.heads_kv = 0; }, StatusCode::kInvalidArgument, "heads_kv: must be >= 1"},
      {"HeadDimZero", [](Params& p) { p.head_dim = 0; }, StatusCode::kInvalidArgument, "head_dim: must be in 1..256 (got 0)"},
      {"HeadDimTooLarge", [](Params& p) { p.head_dim = 257; }, StatusCode::kInvalidArgument, "head_dim: must be in 1..256 (got 257)"},
      {"HeadDimNegative", [](Params& p) { p.head_dim = -8; }, StatusCode::kInvalidArgument, "head_dim: must be in 1..256"},
      {"HeadDimVNegative", [](Params& p) { p.head_dim_v = -1; }, StatusCode::kInvalidArgument,
       "head_dim_v: must be 0 (= head_dim) or in 1..256 (got -1)"},
      {"HeadDimVTooLarge", [](Params& p) { p.head_dim_v = 257; }, StatusCode::kInvalidArgument,
       "head_dim_v: must be 0 (= head_dim) or in 1..256 (got 257)"},
      // O's rows hold head_dim_v columns: strides for head_dim's 8 overlap rows of 16.
      {"HeadDimVWiderThanOStrides", [](Params& p) { p.head_dim_v = 2 * kHeadDim; }, StatusCode::kInvalidArgument,
       "o_stride: output elements overlap (row stride 8 < 16"},
      {"HeadsNotMultiple", [](Params& p) { p.heads_kv = 3; }, StatusCode::kInvalidArgument, "heads_q: must be a multiple of heads_kv"},
      {"ScaleNaN", [](Params& p) { p.softmax_scale = std::nanf(""); }, StatusCode::kInvalidArgument, "softmax_scale: must be finite"},
      {"ScaleInf", [](Params& p) { p.softmax_scale = INFINITY; }, StatusCode::kInvalidArgument, "softmax_scale: must be finite"},
      {"UnsupportedDtype", [](Params& p) { p.dtype = static_cast<DType>(7); }, StatusCode::kUnsupported, "dtype: unsupported value 7"},
      {"UnsupportedMask", [](Params& p) { p.mask = static_cast<Mask>(9); }, StatusCode::kUnsupported, "mask: unsupported value 9"},
      {"RowsOverflow", [](Params& p) { p.batch = kHuge; p.seqlen_q = kHuge; }, StatusCode::kInvalidArgument,
       "batch*heads_q*seqlen_q*head_dim overflows int64"},
      {"KvOverflow", [](Params& p) { p.seqlen_k = kHuge; }, StatusCode::kInvalidArgument,
       "batch*heads_kv*seqlen_k*head_dim overflows int64"},
      // K's elements fit int64 (head_dim 8), V's of 256 columns do not.
      {"VOverflowWithHeadDimV",
       [](Params& p) {
         p.seqlen_k = std::numeric_limits<int64_t>::max() / (kBatch * kHeadsKv * 2 * kHeadDim);
         p.head_dim_v = 256;
       },
       StatusCode::kInvalidArgument, "sizes: batch*heads_kv*seqlen_k*head_dim_v overflows int64"},
      {"MisalignedQ", [](Params& p) { p.q = misaligned(p.q); }, StatusCode::kInvalidArgument, "q: pointer"},
      {"MisalignedK", [](Params& p) { p.k = misaligned(p.k); }, StatusCode::kInvalidArgument, "k: pointer"},
      {"MisalignedV", [](Params& p) { p.v = misaligned(p.v); }, StatusCode::kInvalidArgument, "v: pointer"},
      {"MisalignedO", [](Params& p) { p.o = const_cast<char*>(misaligned(p.o)); }, StatusCode::kInvalidArgument, "o: pointer"},
      {"MisalignedLse", [](Params& p) { p.lse = reinterpret_cast<float*>(const_cast<char*>(misaligned(p.lse))); },
       StatusCode::kInvalidArgument, "lse: pointer"},
      {"NegativeStride", [](Params& p) { p.k_stride.row = -kHeadDim; }, StatusCode::kInvalidArgument,
       "k_stride: strides must be non-negative"},
      {"StrideOverflow", [](Params& p) { p.v_stride.batch = std::numeric_limits<int64_t>::max() - 10; },
       StatusCode::kInvalidArgument, "v: the largest element offset overflows int64"},
      {"OverlappingOutputRows", [](Params& p) { p.o_stride.row = kHeadDim - 1; }, StatusCode::kInvalidArgument,
       "o_stride: output elements overlap"},
      {"OverlappingOutputHeads", [](Params& p) { p.o_stride.head = 0; }, StatusCode::kInvalidArgument,
       "o_stride: output elements overlap"},
      {"OutputAliasesInput", [](Params& p) { p.o = const_cast<void*>(p.q); }, StatusCode::kInvalidArgument,
       "o: overlaps input q"},
      {"LseAliasesOutput", [](Params& p) { p.lse = static_cast<float*>(p.o); }, StatusCode::kInvalidArgument,
       "lse: overlaps o"},
      {"WindowLeftBelowMinusOne", [](Params& p) { p.mask = Mask::kWindowTopLeft; p.window_left = -2; },
       StatusCode::kInvalidArgument, "window_left: must be -1 (unbounded) or >= 0 (got -2)"},
      {"WindowRightBelowMinusOne",
       [](Params& p) { p.mask = Mask::kWindowBottomRight; p.window_right = std::numeric_limits<int64_t>::min(); },
       StatusCode::kInvalidArgument, "window_right: must be -1 (unbounded) or >= 0"},
      {"WindowWithCausalMask", [](Params& p) { p.window_left = 4; }, StatusCode::kInvalidArgument,
       "window_left: only the window masks take a window"},
      {"WindowWithNoMask", [](Params& p) { p.mask = Mask::kNone; p.window_right = 0; }, StatusCode::kInvalidArgument,
       "window_right: only the window masks take a window"},
      {"SoftcapNegative", [](Params& p) { p.softcap = -1.0f; }, StatusCode::kInvalidArgument,
       "softcap: must be finite and >= 0"},
      {"SoftcapNaN", [](Params& p) { p.softcap = std::nanf(""); }, StatusCode::kInvalidArgument,
       "softcap: must be finite and >= 0"},
      {"SoftcapInf", [](Params& p) { p.softcap = INFINITY; }, StatusCode::kInvalidArgument,
       "softcap: must be finite and >= 0"},
      {"MisalignedSink", [](Params& p) { p.sink = reinterpret_cast<const float*>(misaligned(p.lse)); },
       StatusCode::kInvalidArgument, "sink: pointer"},
      {"SinkAliasesLse", [](Params& p) { p.sink = p.lse; }, StatusCode::kInvalidArgument,
       "sink: overlaps an output (o or lse)"},
      {"SinkAliasesOutput", [](Params& p) { p.sink = static_cast<const float*>(p.o); }, StatusCode::kInvalidArgument,
       "sink: overlaps an output (o or lse)"},
      {"DropoutPNaN", [](Params& p) { p.dropout_p = std::nanf(""); }, StatusCode::kInvalidArgument,
       "dropout_p: must be in [0, 1)"},
      {"DropoutPNegative", [](Params& p) { p.dropout_p = -0.25f; }, StatusCode::kInvalidArgument,
       "dropout_p: must be in [0, 1), 0 meaning off (got -0.25)"},
      {"DropoutPOne", [](Params& p) { p.dropout_p = 1.0f; }, StatusCode::kInvalidArgument,
       "dropout_p: must be in [0, 1), 0 meaning off (got 1)"},
      {"DropoutPInf", [](Params& p) { p.dropout_p = INFINITY; }, StatusCode::kInvalidArgument,
       "dropout_p: must be in [0, 1)"},
      {"DropoutWithSplitKv", [](Params& p) { p.dropout_p = 0.1f; p.num_splits = 2; }, StatusCode::kUnsupported,
       "num_splits: dropout is not implemented with split-KV"},
      {"DropoutWithPagedKv",
       [](Params& p) {
         p.dropout_p = 0.1f;
         p.page_table = kPageTable;
         p.seqused_k = kSequsedK;
         p.page_size = kSeqK;
         p.num_pages = kBatch;
         p.max_pages_per_seq = 1;
       },
       StatusCode::kUnsupported, "dropout_p: dropout is not implemented with paged K/V"},
      {"MaskDumpWithoutDropout", [](Params& p) { p.dropout_mask_out = g_mask_dump; }, StatusCode::kInvalidArgument,
       "dropout_mask_out: only with dropout_p > 0"},
      {"MaskDumpAliasesOutput",
       [](Params& p) {
         p.dropout_p = 0.5f;
         p.dropout_mask_out = static_cast<uint8_t*>(p.o);
       },
       StatusCode::kInvalidArgument, "dropout_mask_out: overlaps an output (o or lse)"},
  };
}

class ApiValidation : public ::testing::TestWithParam<Rule> {};

TEST_P(ApiValidation, RejectedWithItsMessageBeforeAnyLaunch) {
  const Rule& rule = GetParam();
  Fixture f;
  ASSERT_TRUE(can_implement(f.params).ok()) << can_implement(f.params).message();
  rule.break_it(f.params);

  const Status st = can_implement(f.params);
  EXPECT_EQ(st.code(), rule.code) << st.message();
  EXPECT_NE(st.message().find(rule.message), std::string::npos)
      << "expected message containing '" << rule.message << "', got '" << st.message() << "'";

  // run() validates first: the same status, whether or not a GPU is present, and nothing written.
  const Status ran = run(f.params);
  EXPECT_EQ(ran.code(), st.code());
  EXPECT_EQ(ran.message(), st.message());
  EXPECT_TRUE(f.outputs_untouched());

  // The C ABI reports the same code and message.
  const fc_params c = to_c(f.params);
  char msg[512];
  EXPECT_EQ(fc_can_implement(&c, msg, sizeof msg), static_cast<fc_status>(st.code()));
  EXPECT_EQ(std::string(msg), st.message());
  EXPECT_EQ(fc_forward(&c, nullptr, msg, sizeof msg), static_cast<fc_status>(st.code()));
  EXPECT_EQ(std::string(msg), st.message());
  EXPECT_TRUE(f.outputs_untouched());
}

INSTANTIATE_TEST_SUITE_P(EveryRule, ApiValidation, ::testing::ValuesIn(rules()),
                         [](const ::testing::TestParamInfo<Rule>& info) { return std::string(info.param.name); });

TEST(ApiValidation, ValidParamsAcceptedForEveryDtypeMaskAndLayout) {
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (Mask mask : {Mask::kNone, Mask::kCausalBottomRight, Mask::kCausalTopLeft, Mask::kWindowBottomRight,
                      Mask::kWindowTopLeft}) {
      Fixture f(dtype);
      f.params.mask = mask;
      EXPECT_TRUE(can_implement(f.params).ok()) << to_string(dtype) << " " << to_string(mask);
    }
  }
  // Windows of every kind, a softcap and a sink (an input: it may sit anywhere outside O and LSE).
  for (const auto& [left, right] : {std::pair<int64_t, int64_t>{0, 0}, {-1, 3}, {5, -1}, {int64_t{1} << 62, 0}}) {
    Fixture f;
    f.params.mask = Mask::kWindowTopLeft;
    f.params.window_left = left;
    f.params.window_right = right;
    EXPECT_TRUE(can_implement(f.params).ok()) << left << "," << right << ": " << can_implement(f.params).message();
  }
  {
    Fixture f;
    const std::vector<float> sink(kHeadsQ, 0.5f);
    f.params.softcap = 30.0f;
    f.params.sink = sink.data();
    EXPECT_TRUE(can_implement(f.params).ok()) << can_implement(f.params).message();
    f.params.sink = reinterpret_cast<const float*>(f.params.q);  // aliasing an input is fine: both are read-only
    EXPECT_TRUE(can_implement(f.params).ok()) << can_implement(f.params).message();
  }
  Fixture f;
  const Params bshd = make_params(DType::kBF16, kBatch, kHeadsQ, kHeadsKv, kSeqQ, kSeqK, kHeadDim, Mask::kNone,
                                  Layout::kBSHD);
  f.params.q_stride = bshd.q_stride;
  f.params.k_stride = bshd.k_stride;
  f.params.v_stride = bshd.v_stride;
  f.params.o_stride = bshd.o_stride;
  EXPECT_TRUE(can_implement(f.params).ok()) << can_implement(f.params).message();
}

TEST(ApiValidation, ZeroSizedProblemsAreNoOpsEvenWithNullPointers) {
  for (int which = 0; which < 3; ++which) {
    Params p = make_params(DType::kF16, 2, 4, 2, 3, 5, 64);
    (which == 0 ? p.batch : which == 1 ? p.heads_q : p.seqlen_q) = 0;
    if (which == 1) p.heads_kv = 0;  // no heads at all
    EXPECT_TRUE(can_implement(p).ok()) << which << ": " << can_implement(p).message();
    const Status ran = run(p);
    EXPECT_TRUE(ran.ok()) << which << ": " << ran.message();
  }
}

TEST(ApiValidation, NoKeysNeedsNoInputs) {
  // seqlen_k == 0: every row is O = 0, LSE = -inf; Q, K and V are never read, so they may be null.
  Fixture f;
  f.params.seqlen_k = 0;
  f.params.q = f.params.k = f.params.v = nullptr;
  EXPECT_TRUE(can_implement(f.params).ok()) << can_implement(f.params).message();
}

TEST(ApiValidation, DefaultScaleAndStrides) {
  const Params p = make_params(DType::kF32, 2, 8, 2, 16, 32, 64);
  EXPECT_FLOAT_EQ(p.softmax_scale, 0.125f);
  EXPECT_EQ(p.q_stride.row, 64);
  EXPECT_EQ(p.q_stride.head, 16 * 64);
  EXPECT_EQ(p.q_stride.batch, 8 * 16 * 64);
  EXPECT_EQ(p.k_stride.head, 32 * 64);
  EXPECT_EQ(p.k_stride.batch, 2 * 32 * 64);
  const Params s = make_params(DType::kF32, 2, 8, 2, 16, 32, 64, Mask::kNone, Layout::kBSHD);
  EXPECT_EQ(s.q_stride.row, 8 * 64);
  EXPECT_EQ(s.q_stride.head, 64);
  EXPECT_EQ(s.q_stride.batch, 16 * 8 * 64);
  EXPECT_EQ(s.k_stride.row, 2 * 64);
}

TEST(ApiValidation, CAbiMakeParamsAndNullHandling) {
  fc_params c{};
  char msg[256];
  ASSERT_EQ(fc_make_params(FC_DTYPE_BF16, 1, 2, 1, 3, 4, 16, FC_MASK_CAUSAL_TOP_LEFT, FC_LAYOUT_BHSD, &c, msg,
                           sizeof msg),
            FC_OK)
      << msg;
  EXPECT_EQ(c.o_stride.row, 16);
  EXPECT_FLOAT_EQ(c.softmax_scale, 0.25f);
  EXPECT_EQ(fc_make_params(FC_DTYPE_BF16, 1, 2, 1, 3, 4, 16, 0, 5, &c, msg, sizeof msg), FC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(msg).find("layout"), std::string::npos) << msg;
  EXPECT_EQ(fc_can_implement(nullptr, msg, sizeof msg), FC_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(msg, "params: null pointer");
  EXPECT_EQ(fc_forward(nullptr, nullptr, msg, sizeof msg), FC_ERR_INVALID_ARGUMENT);
  // A tiny message buffer is truncated, still NUL-terminated.
  char tiny[4];
  EXPECT_EQ(fc_can_implement(nullptr, tiny, sizeof tiny), FC_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(tiny, "par");
}

TEST(ApiValidation, CAbiMakeParamsValidatesTheShape) {
  // What can be checked without buffers is checked by fc_make_params, with the field named; *out is untouched.
  struct Bad {
    int32_t dtype;
    int64_t batch, heads_q, heads_kv, head_dim;
    int32_t mask;
    fc_status status;
    const char* field;
  };
  const int64_t huge = int64_t{1} << 40;
  for (const Bad& bad : {Bad{7, 1, 2, 1, 16, FC_MASK_NONE, FC_ERR_UNSUPPORTED, "dtype: "},
                         Bad{FC_DTYPE_F32, 1, 2, 1, 16, 9, FC_ERR_UNSUPPORTED, "mask: "},
                         Bad{FC_DTYPE_F32, -1, 2, 1, 16, FC_MASK_NONE, FC_ERR_INVALID_ARGUMENT, "batch: "},
                         Bad{FC_DTYPE_F32, 1, 2, 1, 0, FC_MASK_NONE, FC_ERR_INVALID_ARGUMENT, "head_dim: "},
                         Bad{FC_DTYPE_F32, 1, 2, 1, 257, FC_MASK_NONE, FC_ERR_INVALID_ARGUMENT, "head_dim: "},
                         Bad{FC_DTYPE_F32, 1, 5, 2, 16, FC_MASK_NONE, FC_ERR_INVALID_ARGUMENT, "heads_q: "},
                         Bad{FC_DTYPE_BF16, huge, 8, 8, 128, FC_MASK_NONE, FC_ERR_INVALID_ARGUMENT, "o: "}}) {
    fc_params c{};
    c.batch = 42;
    char msg[256];
    EXPECT_EQ(fc_make_params(bad.dtype, bad.batch, bad.heads_q, bad.heads_kv, 4096, 4096, bad.head_dim, bad.mask,
                             FC_LAYOUT_BHSD, &c, msg, sizeof msg),
              bad.status)
        << bad.field;
    EXPECT_EQ(std::string(msg).rfind(bad.field, 0), 0u) << msg;
    EXPECT_EQ(c.batch, 42);
  }
}

// V's and O's extents have head_dim_v columns: rows of 4 may be 4 apart (8 apart only for head_dim's 8), and V of
// 16 columns reaches 8 elements further than V of head_dim's 8 would. One arena holds every tensor, so that the
// only overlaps are the ones placed.
TEST(ApiValidation, HeadDimVSizesVAndO) {
  std::vector<uint16_t> arena(4096, 0);
  std::vector<float> lse(kBatch * kHeadsQ * kSeqQ, 0.0f);
  const auto place = [&](Params* p) {
    p->q = arena.data();
    p->k = arena.data() + 512;
    p->v = arena.data() + 1024;
    p->o = arena.data() + 2048;
    p->lse = lse.data();
  };
  Params narrow = make_params(DType::kBF16, kBatch, kHeadsQ, kHeadsKv, kSeqQ, kSeqK, kHeadDim);
  set_head_dim_v(&narrow, kHeadDim / 2, Layout::kBHSD);
  place(&narrow);
  EXPECT_EQ(narrow.o_stride.row, kHeadDim / 2);
  EXPECT_TRUE(can_implement(narrow).ok()) << can_implement(narrow).message();
  narrow.head_dim_v = 0;  // the same strides for O rows of head_dim columns overlap
  EXPECT_NE(can_implement(narrow).message().find("o_stride: output elements overlap"), std::string::npos)
      << can_implement(narrow).message();

  Params wide = make_params(DType::kBF16, kBatch, kHeadsQ, kHeadsKv, kSeqQ, kSeqK, kHeadDim);
  set_head_dim_v(&wide, 2 * kHeadDim, Layout::kBHSD);
  place(&wide);
  EXPECT_TRUE(can_implement(wide).ok()) << can_implement(wide).message();
  const int64_t v_elements = kBatch * kHeadsKv * kSeqK * 2 * kHeadDim;
  wide.o = arena.data() + 1024 + v_elements;  // right after V: no overlap
  EXPECT_TRUE(can_implement(wide).ok()) << can_implement(wide).message();
  wide.o = arena.data() + 1024 + v_elements - kHeadDim;  // over V's last row's columns 8..15
  EXPECT_EQ(can_implement(wide).message(), "o: overlaps input v");
}

// head_dim_v follows the fields of version 0.1 (they keep their offsets), fc_make_params sets it 0, and the C ABI
// passes it on: V and O of other columns than Q and K select the general family.
TEST(ApiValidation, CAbiHeadDimVFollowsTheFirstFields) {
  static_assert(offsetof(fc_params, head_dim_v) > offsetof(fc_params, num_splits));
  static_assert(offsetof(fc_params, head_dim_v) < offsetof(fc_params, dropout_p));
  fc_params c{};
  c.head_dim_v = 99;
  char msg[256];
  ASSERT_EQ(fc_make_params(FC_DTYPE_BF16, 1, 2, 1, 3, 4, 16, FC_MASK_NONE, FC_LAYOUT_BHSD, &c, msg, sizeof msg), FC_OK)
      << msg;
  EXPECT_EQ(c.head_dim_v, 0);

  Fixture f;
  int32_t path = -1;
  fc_params equal = to_c(f.params);
  ASSERT_EQ(fc_select_config(&equal, &path, nullptr, nullptr, msg, sizeof msg), FC_OK) << msg;
  EXPECT_EQ(path, static_cast<int32_t>(select_config(f.params).path));
  f.params.head_dim_v = kHeadDim / 2;  // rows of the fixture's O and V stay apart
  fc_params unequal = to_c(f.params);
  ASSERT_EQ(fc_select_config(&unequal, &path, nullptr, nullptr, msg, sizeof msg), FC_OK) << msg;
  EXPECT_EQ(path, static_cast<int32_t>(ComputePath::kGeneralFp32));
  unequal.head_dim_v = 300;
  EXPECT_EQ(fc_can_implement(&unequal, msg, sizeof msg), FC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(msg).rfind("head_dim_v: ", 0), 0u) << msg;

  // fc_set_head_dim_v: the field and V's and O's contiguous strides, as set_head_dim_v; a bad width named.
  ASSERT_EQ(fc_set_head_dim_v(&c, 8, FC_LAYOUT_BSHD, msg, sizeof msg), FC_OK) << msg;
  Params expected = make_params(DType::kBF16, 1, 2, 1, 3, 4, 16, Mask::kNone, Layout::kBHSD);
  set_head_dim_v(&expected, 8, Layout::kBSHD);
  EXPECT_EQ(c.head_dim_v, 8);
  EXPECT_EQ(c.v_stride.row, expected.v_stride.row);
  EXPECT_EQ(c.v_stride.head, expected.v_stride.head);
  EXPECT_EQ(c.o_stride.batch, expected.o_stride.batch);
  EXPECT_EQ(c.q_stride.row, expected.q_stride.row);  // Q and K keep theirs
  EXPECT_EQ(fc_set_head_dim_v(&c, 257, FC_LAYOUT_BHSD, msg, sizeof msg), FC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(msg).rfind("head_dim_v: ", 0), 0u) << msg;
  EXPECT_EQ(c.head_dim_v, 8);  // unchanged on refusal
}

// The dropout fields follow head_dim_v (every earlier field keeps its offset), fc_make_params sets them off, and the
// C ABI passes them on: validation, routing to the general family, and the backward's path.
TEST(ApiValidation, CAbiDropoutFieldsAreAppendedAndPassedOn) {
  static_assert(offsetof(fc_params, dropout_p) > offsetof(fc_params, head_dim_v));
  static_assert(offsetof(fc_params, dropout_seed) > offsetof(fc_params, dropout_p));
  static_assert(offsetof(fc_params, dropout_offset) > offsetof(fc_params, dropout_seed));
  static_assert(offsetof(fc_params, descale_q) > offsetof(fc_params, dropout_mask_out));
  fc_params c{};
  c.dropout_p = 0.5f;
  c.dropout_seed = 7;
  char msg[256];
  ASSERT_EQ(fc_make_params(FC_DTYPE_BF16, 1, 2, 1, 3, 4, 16, FC_MASK_NONE, FC_LAYOUT_BHSD, &c, msg, sizeof msg), FC_OK)
      << msg;
  EXPECT_EQ(c.dropout_p, 0.0f);
  EXPECT_EQ(c.dropout_seed, 0u);
  EXPECT_EQ(c.dropout_offset, 0u);
  EXPECT_EQ(c.dropout_mask_out, nullptr);

  Fixture f;
  f.params.dropout_p = 0.25f;
  f.params.dropout_seed = 1;
  f.params.dropout_offset = uint64_t{1} << 40;
  f.params.dropout_mask_out = g_mask_dump;
  fc_params dropped = to_c(f.params);
  ASSERT_EQ(fc_can_implement(&dropped, msg, sizeof msg), FC_OK) << msg;
  int32_t path = -1, splits = -1;
  ASSERT_EQ(fc_select_config(&dropped, &path, nullptr, nullptr, msg, sizeof msg), FC_OK) << msg;
  EXPECT_EQ(path, static_cast<int32_t>(ComputePath::kGeneralFp32));
  dropped.num_splits = 0;
  ASSERT_EQ(fc_effective_splits(&dropped, &splits, msg, sizeof msg), FC_OK) << msg;
  EXPECT_EQ(splits, 1);
  dropped.num_splits = 3;
  EXPECT_EQ(fc_can_implement(&dropped, msg, sizeof msg), FC_ERR_UNSUPPORTED);
  EXPECT_EQ(std::string(msg).rfind("num_splits: dropout", 0), 0u) << msg;
  dropped.num_splits = 1;
  dropped.dropout_p = 1.0f;
  EXPECT_EQ(fc_can_implement(&dropped, msg, sizeof msg), FC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(msg).rfind("dropout_p: ", 0), 0u) << msg;
  dropped.dropout_p = 0.0f;
  EXPECT_EQ(fc_can_implement(&dropped, msg, sizeof msg), FC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(msg).rfind("dropout_mask_out: ", 0), 0u) << msg;
}

// The backward of a dropout forward runs on the CUDA-core kernels (backward_path kGeneralFp32), whatever the dtype and
// alignment, and the C ABI's fc_backward_path says the same; without dropout 16-byte-aligned fp16 and bf16 problems
// take the tensor cores where they are compiled in.
TEST(ApiValidation, DropoutBackwardTakesTheGeneralPath) {
  for (DType dtype : {DType::kF16, DType::kBF16, DType::kF32}) {
    Fixture f(dtype);
    std::vector<uint32_t> d_o(f.o.size(), 0), dq(f.q.size(), 0), dk(f.k.size(), 0), dv(f.v.size(), 0);
    BackwardParams b = make_backward_params(f.params);
    b.d_o = d_o.data();
    b.dq = dq.data();
    b.dk = dk.data();
    b.dv = dv.data();
    b.forward.dropout_p = 0.5f;
    ASSERT_TRUE(can_implement_backward(b).ok()) << can_implement_backward(b).message();
    EXPECT_EQ(backward_path(b), ComputePath::kGeneralFp32) << to_string(dtype);
    fc_backward_params c{};
    c.forward = to_c(b.forward);
    c.d_o = b.d_o;
    c.dq = b.dq;
    c.dk = b.dk;
    c.dv = b.dv;
    c.d_o_stride = {b.d_o_stride.batch, b.d_o_stride.head, b.d_o_stride.row};
    c.dq_stride = {b.dq_stride.batch, b.dq_stride.head, b.dq_stride.row};
    c.dk_stride = {b.dk_stride.batch, b.dk_stride.head, b.dk_stride.row};
    c.dv_stride = {b.dv_stride.batch, b.dv_stride.head, b.dv_stride.row};
    char msg[256];
    int32_t path = -1;
    ASSERT_EQ(fc_backward_path(&c, &path, msg, sizeof msg), FC_OK) << msg;
    EXPECT_EQ(path, static_cast<int32_t>(ComputePath::kGeneralFp32)) << to_string(dtype);
    c.forward.dropout_p = 0.0f;
    ASSERT_EQ(fc_backward_path(&c, &path, msg, sizeof msg), FC_OK) << msg;
    b.forward.dropout_p = 0.0f;
    EXPECT_EQ(path, static_cast<int32_t>(backward_path(b))) << to_string(dtype);
  }
}

// f8e4m3: O in bf16 (sized as such), descales only with the dtype and named when wrong, the features the fp8 path
// does not take answered kUnsupported naming them, the C ABI's descale fields after the dropout ones.
TEST(ApiValidation, Fp8FieldsAreCheckedAndNamed) {
  Fixture f(DType::kF8E4M3);
  const std::vector<float> descale(static_cast<size_t>(kBatch * kHeadsKv) + 1, 1.0f);
  f.params.descale_q = descale.data();
  f.params.descale_k = descale.data();
  f.params.descale_v = descale.data();
  ASSERT_TRUE(can_implement(f.params).ok()) << can_implement(f.params).message();
  const KernelConfig config = select_config(f.params);
  EXPECT_EQ(config.path, ComputePath::kTensorCoreFp8);
  EXPECT_EQ(std::string(to_string(config.path)), "tensor-core-fp8");
  EXPECT_EQ(config.block_n, 128);

  const auto expect_status = [](const Params& p, StatusCode code, const std::string& prefix) {
    const Status st = can_implement(p);
    EXPECT_EQ(st.code(), code) << st.message();
    EXPECT_EQ(st.message().rfind(prefix, 0), 0u) << st.message();
  };
  Fixture wide(DType::kBF16);
  wide.params.descale_k = descale.data();
  expect_status(wide.params, StatusCode::kInvalidArgument, "descale_k: only with dtype f8e4m3 (got dtype bf16)");
  Params p = f.params;
  p.descale_v = reinterpret_cast<const float*>(reinterpret_cast<const char*>(descale.data()) + 1);
  expect_status(p, StatusCode::kInvalidArgument, "descale_v: pointer");
  p = f.params;
  p.descale_q = reinterpret_cast<const float*>(f.params.o);
  expect_status(p, StatusCode::kInvalidArgument, "descale_q: overlaps an output");
  p = f.params;
  p.dropout_p = 0.25f;
  expect_status(p, StatusCode::kUnsupported, "dropout_p: the fp8 path has no dropout");
  p = f.params;
  p.num_splits = 2;
  expect_status(p, StatusCode::kUnsupported, "num_splits: the fp8 path has no split-KV");
  p = f.params;
  p.num_splits = 0;  // the heuristic picks 1
  EXPECT_TRUE(can_implement(p).ok()) << can_implement(p).message();
  EXPECT_EQ(effective_splits(p), 1);
  BackwardParams b = make_backward_params(f.params);
  EXPECT_EQ(can_implement_backward(b).code(), StatusCode::kUnsupported);
  EXPECT_EQ(can_implement_backward(b).message().rfind("dtype: f8e4m3 is forward-only", 0), 0u)
      << can_implement_backward(b).message();
  // O is bf16: an O pointer aligned to 1 byte only is refused naming its 2-byte element.
  p = f.params;
  p.o = reinterpret_cast<char*>(f.params.o) + 1;
  expect_status(p, StatusCode::kInvalidArgument, "o: pointer");
  EXPECT_NE(can_implement(p).message().find("(2 bytes)"), std::string::npos) << can_implement(p).message();

  static_assert(offsetof(fc_params, descale_q) > offsetof(fc_params, dropout_mask_out));
  static_assert(offsetof(fc_params, descale_v) + sizeof(const float*) == sizeof(fc_params));
  fc_params c{};
  c.descale_q = descale.data();
  char msg[256];
  ASSERT_EQ(fc_make_params(FC_DTYPE_F8E4M3, 1, 2, 1, 3, 4, 16, FC_MASK_NONE, FC_LAYOUT_BHSD, &c, msg, sizeof msg), FC_OK)
      << msg;
  EXPECT_EQ(c.descale_q, nullptr);
  c = to_c(wide.params);
  c.descale_k = descale.data();
  EXPECT_EQ(fc_can_implement(&c, msg, sizeof msg), FC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(msg).rfind("descale_k: ", 0), 0u) << msg;
}

TEST(ApiValidation, VisibleKeysNamesTheAlignment) {
  // seqlen_q = 3, seqlen_k = 5: top-left row 0 sees key 0; bottom-right row 0 sees keys 0..2.
  EXPECT_EQ(visible_key_range(make_params(DType::kF32, 1, 1, 1, 3, 5, 8, Mask::kCausalTopLeft), 0).end, 1);
  EXPECT_EQ(visible_key_range(make_params(DType::kF32, 1, 1, 1, 3, 5, 8, Mask::kCausalBottomRight), 0).end, 3);
  EXPECT_EQ(visible_key_range(make_params(DType::kF32, 1, 1, 1, 3, 5, 8, Mask::kCausalBottomRight), 2).end, 5);
  EXPECT_EQ(visible_key_range(make_params(DType::kF32, 1, 1, 1, 3, 5, 8, Mask::kNone), 0).end, 5);
  // seqlen_q > seqlen_k: the first bottom-right rows see nothing.
  EXPECT_EQ(visible_key_range(make_params(DType::kF32, 1, 1, 1, 5, 3, 8, Mask::kCausalBottomRight), 0).end, 0);
  EXPECT_EQ(visible_key_range(make_params(DType::kF32, 1, 1, 1, 5, 3, 8, Mask::kCausalBottomRight), 2).end, 1);
  EXPECT_EQ(visible_key_range(make_params(DType::kF32, 1, 1, 1, 5, 3, 8, Mask::kCausalTopLeft), 4).end, 3);
}

}  // namespace
}  // namespace flashcheck
