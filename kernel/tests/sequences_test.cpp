// The inference path on the host model (attention.h, "Sequences"): a packed variable-length batch equals each
// sequence run on its own, bit for bit; a paged cache equals the same keys laid out contiguously, bit for bit,
// whatever the page size and page order, with NaN in every slot no sequence owns; split-KV is deterministic and
// within fp32 accuracy of the unsplit result, V and O of other columns than Q and K included; and can_implement
// names every malformed index array.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "flashcheck/attention.h"
#include "flashcheck/host_model.h"
#include "sequence_problem.h"

namespace flashcheck {
namespace {

using namespace test;  // sequence_problem.h


class SequencesModel : public ::testing::TestWithParam<std::tuple<DType, Mask, bool>> {
 protected:
  const std::vector<SeqLens>& seqs() const { return std::get<2>(GetParam()) ? kDecodeSeqs : kSeqs; }
};

TEST_P(SequencesModel, VarlenEqualsEachSequenceAlone) {
  const auto [dtype, mask, decoding] = GetParam();
  const std::vector<SeqLens>& kSeqs = seqs();
  constexpr int64_t d = 40;
  for (const int64_t extra : {int64_t{0}, int64_t{3}}) {
    Buffers packed;
    build_packed(dtype, d, mask, kSeqs, extra, 0, 1, &packed);
    ASSERT_TRUE(run_host_model(packed.params).ok()) << run_host_model(packed.params).message();
    for (size_t b = 0; b < kSeqs.size(); ++b) {
      if (kSeqs[b].q == 0) continue;
      Buffers alone;
      build_dense(dtype, d, mask, kSeqs[b], static_cast<int64_t>(b), &alone);
      // The dense run takes the packed run's family and tiles (select_config may pick another for it).
      HostModelOptions same_family;
      same_family.override_config = true;
      same_family.config = select_config(packed.params);
      ASSERT_TRUE(run_host_model(alone.params, same_family).ok());
      expect_same_rows(packed, alone, static_cast<int64_t>(b), kSeqs[b], d, "varlen extra=" + std::to_string(extra));
    }
  }
}

TEST_P(SequencesModel, PagedEqualsContiguousForEveryPageSize) {
  const auto [dtype, mask, decoding] = GetParam();
  const std::vector<SeqLens>& kSeqs = seqs();
  constexpr int64_t d = 40;
  for (const int64_t page : {int64_t{1}, int64_t{3}, int64_t{16}, int64_t{64}, int64_t{256}}) {
    for (const int64_t extra : {int64_t{0}, int64_t{5}}) {
      Buffers paged;
      build_packed(dtype, d, mask, kSeqs, extra, page, 1, &paged);
      const Status st = run_host_model(paged.params);
      ASSERT_TRUE(st.ok()) << st.message();
      // The contiguous cache in the paged run's family and tiles (an unsplit prefill of it selects the tensor cores).
      Buffers contiguous;
      build_packed(dtype, d, mask, kSeqs, 0, 0, 1, &contiguous);
      HostModelOptions same_family;
      same_family.override_config = true;
      same_family.config = select_config(paged.params);
      ASSERT_TRUE(run_host_model(contiguous.params, same_family).ok());
      EXPECT_EQ(0, std::memcmp(paged.o.data(), contiguous.o.data(), paged.o.size())) << "page " << page << " extra " << extra;
      EXPECT_EQ(0, std::memcmp(paged.lse.data(), contiguous.lse.data(), paged.lse.size() * 4)) << "page " << page;
    }
  }
}

TEST_P(SequencesModel, SplitsAreDeterministicAndCloseToUnsplit) {
  const auto [dtype, mask, decoding] = GetParam();
  const std::vector<SeqLens>& kSeqs = seqs();
  constexpr int64_t d = 40;
  Buffers unsplit;
  build_packed(dtype, d, mask, kSeqs, 2, 16, 1, &unsplit);
  ASSERT_TRUE(run_host_model(unsplit.params).ok());
  for (const int32_t splits : {2, 3, 17}) {
    Buffers first, second;
    build_packed(dtype, d, mask, kSeqs, 2, 16, splits, &first);
    build_packed(dtype, d, mask, kSeqs, 2, 16, splits, &second);
    ASSERT_TRUE(run_host_model(first.params).ok());
    ASSERT_TRUE(run_host_model(second.params).ok());
    EXPECT_EQ(0, std::memcmp(first.o.data(), second.o.data(), first.o.size())) << "splits " << splits;
    // fp32 accuracy: the rows differ only in the order of fp32 roundings (the error model bounds it; here a
    // sanity tolerance that a wrong merge would exceed by orders of magnitude).
    const double tol = dtype == DType::kF32 ? 1e-5 : dtype == DType::kF16 ? 2e-3 : 1.6e-2;
    int64_t differing = 0;
    for (int64_t t = 0; t < unsplit.params.total_q; ++t) {
      for (int64_t h = 0; h < kHeadsQ; ++h) {
        const float a = unsplit.lse[h * unsplit.params.total_q + t], c = first.lse[h * first.params.total_q + t];
        if (std::isinf(a)) {
          EXPECT_EQ(a, c);
        } else {
          EXPECT_NEAR(a, c, 1e-5) << "LSE splits " << splits << " token " << t << " head " << h;
        }
        for (int64_t x = 0; x < d; ++x) {
          const int64_t off = (t * kHeadsQ + h) * d + x;
          const float ua = test::Problem::get(unsplit.params, unsplit.o, {0, 0, 1}, 0, 0, off, 0);
          const float fa = test::Problem::get(first.params, first.o, {0, 0, 1}, 0, 0, off, 0);
          EXPECT_NEAR(ua, fa, tol) << "O splits " << splits << " token " << t << " head " << h << " dim " << x;
          differing += ua != fa;
        }
      }
    }
    RecordProperty("differing_" + std::to_string(splits), std::to_string(differing));
  }
}

INSTANTIATE_TEST_SUITE_P(Masks, SequencesModel,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kBF16),
                                            ::testing::Values(Mask::kNone, Mask::kCausalBottomRight, Mask::kCausalTopLeft,
                                                              Mask::kWindowBottomRight),
                                            ::testing::Bool()));

// V and O of other columns than Q and K (head_dim_v) on the inference path (the tensor-core value pairs' tiles for
// bf16, the general family's for fp32): a packed batch
// (K/V packed with NaN rows past seqused_k, unsplit and in three runs) gives each sequence's bits alone, and a paged
// cache the bits of the contiguous one, prefill and decoding shapes alike.
TEST(SequencesModel_UnequalHeadDims, VarlenAndPagedEqualEachSequenceAlone) {
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    for (const auto& [d, dv] : kUnequalHeadDims) {
      for (const bool decoding : {true, false}) {
        const std::vector<SeqLens>& batch = decoding ? kDecodeSeqs : kSeqs;
        for (const int32_t splits : {1, 3}) {
          const std::string what = std::string(to_string(dtype)) + " d " + std::to_string(d) + " dv " +
                                   std::to_string(dv) + (decoding ? " decode" : " prefill") + " splits " +
                                   std::to_string(splits);
          Buffers packed;
          build_packed(dtype, d, Mask::kCausalBottomRight, batch, 2, 0, splits, &packed, dv);
          ASSERT_EQ(select_config(packed.params).path,
                    tensor_core_pair(dtype, d, dv) ? ComputePath::kTensorCore : ComputePath::kGeneralFp32)
              << what;
          const Status st = run_host_model(packed.params);
          ASSERT_TRUE(st.ok()) << what << ": " << st.message();
          HostModelOptions same_family;
          same_family.override_config = true;
          same_family.config = select_config(packed.params);
          for (size_t b = 0; b < batch.size(); ++b) {
            if (batch[b].q == 0) continue;
            Buffers alone;
            build_dense(dtype, d, Mask::kCausalBottomRight, batch[b], static_cast<int64_t>(b), &alone, dv);
            alone.params.num_splits = splits;
            ASSERT_TRUE(run_host_model(alone.params, same_family).ok()) << what;
            expect_same_rows(packed, alone, static_cast<int64_t>(b), batch[b], dv, what);
          }
          for (const int64_t page : {int64_t{3}, int64_t{16}}) {
            Buffers paged;
            build_packed(dtype, d, Mask::kCausalBottomRight, batch, 2, page, splits, &paged, dv);
            ASSERT_TRUE(run_host_model(paged.params, same_family).ok()) << what;
            EXPECT_EQ(paged.o, packed.o) << what << " page " << page;
            EXPECT_EQ(0, std::memcmp(paged.lse.data(), packed.lse.data(), paged.lse.size() * 4))
                << what << " page " << page;
          }
        }
      }
    }
  }
}

TEST(SequencesSelect, DecodingShapesRunInTheDecodeFamily) {
  Buffers b;
  build_packed(DType::kBF16, 64, Mask::kCausalBottomRight, kDecodeSeqs, 0, 16, 0, &b);
  EXPECT_EQ(std::string(select_config(b.params).name).rfind("decode", 0), 0u) << select_config(b.params).name;
  EXPECT_EQ(select_config(b.params).heads_per_tile, kHeadsQ / kHeadsKv);
  Params dense = make_params(DType::kF16, 2, 32, 8, 1, 4096, 128, Mask::kNone, Layout::kBSHD);
  EXPECT_STREQ(select_config(dense).name, "decode_f16_hdim128") << "a dense decoding step too";
  dense.seqlen_q = 2;  // 4 query heads of 2 rows each: still one tile
  EXPECT_STREQ(select_config(dense).name, "decode_f16_hdim128");
  dense.seqlen_q = 5;  // 4 heads * 5 rows > 16: the prefill families
  EXPECT_EQ(std::string(select_config(dense).name).rfind("decode", 0), std::string::npos);
}

// Malformed index arrays and field combinations: can_implement names the field.
TEST(SequencesValidation, EachMalformedIndexNamesItsField) {
  struct Row {
    const char* field;
    std::function<void(Buffers&)> mutate;
  };
  const std::vector<Row> rows{
      {"cu_seqlens_q[0]", [](Buffers& b) { b.cu_q[0] = 1; }},
      {"cu_seqlens_q[3]", [](Buffers& b) { b.cu_q[3] = b.cu_q[2] - 1; }},
      {"cu_seqlens_q[7]", [](Buffers& b) { b.cu_q[7] += 1; }},
      {"seqused_k[1]", [](Buffers& b) { b.used[1] = 100000; }},
      {"seqused_k[2]", [](Buffers& b) { b.used[2] = -1; }},
      {"page_table[0, 0]", [](Buffers& b) { b.pages[0] = -3; }},
      {"page_table[3, 1]", [](Buffers& b) { b.pages[3 * b.params.max_pages_per_seq + 1] = static_cast<int32_t>(b.params.num_pages); }},
      {"cu_seqlens_k", [](Buffers& b) { b.params.cu_seqlens_k = b.cu_q.data(); }},
      {"seqused_k", [](Buffers& b) { b.params.seqused_k = nullptr; }},
      {"num_splits", [](Buffers& b) { b.params.num_splits = 300; }},
      {"num_splits", [](Buffers& b) { b.params.num_splits = -1; }},
      {"page_size", [](Buffers& b) { b.params.page_size = 0; }},
      {"total_k", [](Buffers& b) { b.params.total_k = 5; }},
      {"cu_seqlens_q", [](Buffers& b) { b.params.cu_seqlens_q = reinterpret_cast<const int32_t*>(reinterpret_cast<uintptr_t>(b.cu_q.data()) + 1); }},
  };
  for (const Row& row : rows) {
    Buffers b;
    build_packed(DType::kBF16, 16, Mask::kCausalBottomRight, kSeqs, 0, 16, 1, &b);
    ASSERT_TRUE(can_implement(b.params).ok()) << can_implement(b.params).message();
    row.mutate(b);
    const Status st = can_implement(b.params);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << row.field;
    EXPECT_NE(st.message().find(row.field), std::string::npos) << row.field << ": " << st.message();
    EXPECT_FALSE(run_host_model(b.params).ok()) << row.field;
  }
  // Table entries past a sequence's pages are never read: anything goes there (they hold num_pages + 7).
  Buffers b;
  build_packed(DType::kBF16, 16, Mask::kNone, kSeqs, 0, 16, 1, &b);
  EXPECT_TRUE(can_implement(b.params).ok());
  // Varlen Q with too small a seqlen_q bound.
  b.params.seqlen_q = 128;
  const Status st = can_implement(b.params);
  EXPECT_NE(st.message().find("seqlen_q"), std::string::npos) << st.message();
  // Page fields without a page table.
  Buffers dense;
  build_dense(DType::kF32, 8, Mask::kNone, {3, 4}, 0, &dense);
  dense.params.page_size = 16;
  EXPECT_NE(can_implement(dense.params).message().find("page_size"), std::string::npos);
}

TEST(SequencesValidation, EffectiveSplitsHeuristic) {
  Params p = make_params(DType::kBF16, 1, 8, 1, 1, 65536, 128, Mask::kNone, Layout::kBSHD);
  EXPECT_EQ(effective_splits(p), 1);  // num_splits = 1 is what it says
  p.num_splits = 0;
  const int32_t decode = effective_splits(p);
  EXPECT_GT(decode, 1) << "a decode step over a long cache splits";
  EXPECT_LE(decode, 128);
  Params prefill = make_params(DType::kBF16, 8, 32, 8, 4096, 4096, 128);
  prefill.num_splits = 0;
  EXPECT_EQ(effective_splits(prefill), 1) << "enough Q tiles fill the GPU unsplit";
  p.num_splits = 7;
  EXPECT_EQ(effective_splits(p), 7);
  // The decode family splits until its warps fill one wave of one CTA an SM (4 warps, 132 SMs: 528 warps): batch 4
  // with 8 K/V heads is 32 work items, split 16 ways; batch 64 is 512 items, one wave unsplit.
  Params step = make_params(DType::kBF16, 4, 32, 8, 1, 65536, 128, Mask::kNone, Layout::kBSHD);
  step.num_splits = 0;
  EXPECT_EQ(effective_splits(step), 16);
  step.batch = 64;
  step.seqlen_k = 4096;
  EXPECT_EQ(effective_splits(step), 1);
  step.batch = 1;
  step.seqlen_k = 256;  // 16 key tiles: runs of at least two
  EXPECT_EQ(effective_splits(step), 8);
  // The tensor-core family runs one CTA an SM: a prefill of fewer Q tiles than SMs splits them into floor(132 /
  // items) runs, if that is at least kMinTensorCoreRuns. One head of 4096 rows at d = 128 is 32 Q tiles of 128 rows
  // (4 runs each); two heads would take 2 runs, so stay unsplit, as four heads (128 items) do; causal alike.
  for (const Mask mask : {Mask::kNone, Mask::kCausalBottomRight}) {
    for (const auto& [heads, runs] : {std::pair<int64_t, int32_t>{1, 4}, {2, 1}, {4, 1}}) {
      Params few = make_params(DType::kBF16, 1, heads, heads, 4096, 4096, 128, mask);
      few.num_splits = 0;
      ASSERT_EQ(select_config(few).path, ComputePath::kTensorCore);
      EXPECT_EQ(effective_splits(few), runs) << heads << " heads, " << to_string(mask);
    }
  }
  // Runs keep two K/V tiles: 300 keys are three tiles of 128 (one run), 1000 keys eight (four runs), 700 keys six
  // (three runs, the fewest the family splits into), 600 keys five (two runs: unsplit).
  for (const auto& [keys, runs] : {std::pair<int64_t, int32_t>{300, 1}, {1000, 4}, {700, 3}, {600, 1}}) {
    Params short_keys = make_params(DType::kF16, 1, 1, 1, 4096, keys, 128);
    short_keys.num_splits = 0;
    EXPECT_EQ(effective_splits(short_keys), runs) << keys << " keys";
  }
  // An explicit split count runs on the tensor cores too (contiguous K/V); a paged cache does not.
  Params explicit_split = make_params(DType::kF16, 2, 4, 2, 1000, 1000, 64);
  explicit_split.num_splits = 3;
  EXPECT_EQ(select_config(explicit_split).path, ComputePath::kTensorCore);
  EXPECT_EQ(effective_splits(explicit_split), 3);
}

}  // namespace
}  // namespace flashcheck
