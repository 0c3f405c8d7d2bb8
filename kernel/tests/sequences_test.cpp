// The inference path on the host model (attention.h, "Sequences"): a packed variable-length batch equals each
// sequence run on its own, bit for bit; a paged cache equals the same keys laid out contiguously, bit for bit,
// whatever the page size and page order, with NaN in every slot no sequence owns; split-KV is deterministic and
// within fp32 accuracy of the unsplit result; and can_implement names every malformed index array.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "flashcheck/attention.h"
#include "flashcheck/host_model.h"
#include "test_problem.h"

namespace flashcheck {
namespace {

struct SeqLens {
  int64_t q = 0, k = 0;
};

constexpr int64_t kHeadsQ = 4, kHeadsKv = 2;

// Logical element (b, h, s, d) of tensor `t` (0 = Q, 1 = K, 2 = V), rounded to the dtype: the same value
// whichever layout holds it.
uint16_t bits16(DType dtype, float x) {
  return dtype == DType::kF16 ? detail::host::float_to_f16_bits(x) : detail::host::float_to_bf16_bits(x);
}
void put(DType dtype, std::vector<unsigned char>& buf, int64_t offset, float x) {
  if (dtype == DType::kF32) {
    std::memcpy(buf.data() + offset * 4, &x, 4);
  } else {
    const uint16_t b = bits16(dtype, x);
    std::memcpy(buf.data() + offset * 2, &b, 2);
  }
}
float logical(int t, int64_t b, int64_t h, int64_t s, int64_t d) {
  const uint64_t index = ((static_cast<uint64_t>(b) * 64 + h) * 65536 + s) * 512 + d;
  return static_cast<float>(2.0 * test::hash_uniform(static_cast<uint64_t>(t) + 11, index));
}
void fill_nan(DType dtype, std::vector<unsigned char>& buf) {
  std::fill(buf.begin(), buf.end(), static_cast<unsigned char>(0xff));  // NaN in every dtype
  (void)dtype;
}

// One problem's host buffers; params point into them (no copies after build()).
struct Buffers {
  Params params;
  std::vector<unsigned char> q, k, v, o;
  std::vector<float> lse;
  std::vector<int32_t> cu_q, cu_k, used, pages;
};

// Sequence b alone as a dense batch-1 problem.
void build_dense(DType dtype, int64_t d, Mask mask, const SeqLens& len, int64_t b, Buffers* out) {
  Params& p = out->params;
  p = make_params(dtype, 1, kHeadsQ, kHeadsKv, len.q, len.k, d, mask, Layout::kBSHD);
  if (mask == Mask::kWindowBottomRight || mask == Mask::kWindowTopLeft) {
    p.window_left = 5;
    p.window_right = 2;
  }
  const int64_t e = dtype_size(dtype);
  out->q.assign(static_cast<size_t>(std::max<int64_t>(1, len.q * kHeadsQ * d * e)), 0);
  out->o.assign(out->q.size(), 0xff);
  out->k.assign(static_cast<size_t>(std::max<int64_t>(1, len.k * kHeadsKv * d * e)), 0);
  out->v.assign(out->k.size(), 0);
  out->lse.assign(static_cast<size_t>(std::max<int64_t>(1, kHeadsQ * len.q)), std::nanf(""));
  for (int64_t h = 0; h < kHeadsQ; ++h)
    for (int64_t s = 0; s < len.q; ++s)
      for (int64_t x = 0; x < d; ++x) put(dtype, out->q, s * p.q_stride.row + h * p.q_stride.head + x, logical(0, b, h, s, x));
  for (int64_t h = 0; h < kHeadsKv; ++h)
    for (int64_t s = 0; s < len.k; ++s)
      for (int64_t x = 0; x < d; ++x) {
        put(dtype, out->k, s * p.k_stride.row + h * p.k_stride.head + x, logical(1, b, h, s, x));
        put(dtype, out->v, s * p.v_stride.row + h * p.v_stride.head + x, logical(2, b, h, s, x));
      }
  p.q = out->q.data();
  p.k = out->k.data();
  p.v = out->v.data();
  p.o = out->o.data();
  p.lse = out->lse.data();
}

// Every sequence packed: Q and O [total_q, heads_q, d]; K and V packed with `extra` NaN rows after each sequence's
// keys (seqused_k then says where they end), or paged with `page_size` keys a page in a shuffled page order with a
// NaN spare page, NaN in the unused slots and out-of-range table entries past each sequence's pages.
void build_packed(DType dtype, int64_t d, Mask mask, const std::vector<SeqLens>& seqs, int64_t extra, int64_t page_size,
                  int32_t splits, Buffers* out) {
  Params& p = out->params;
  const int64_t batch = static_cast<int64_t>(seqs.size());
  int64_t max_q = 0, max_k = 0;
  for (const SeqLens& s : seqs) {
    max_q = std::max(max_q, s.q);
    max_k = std::max(max_k, s.k + extra);
  }
  p = make_params(dtype, batch, kHeadsQ, kHeadsKv, max_q, max_k, d, mask, Layout::kBSHD);
  if (mask == Mask::kWindowBottomRight || mask == Mask::kWindowTopLeft) {
    p.window_left = 5;
    p.window_right = 2;
  }
  p.num_splits = splits;
  const int64_t e = dtype_size(dtype);
  out->cu_q.assign(1, 0);
  for (const SeqLens& s : seqs) out->cu_q.push_back(out->cu_q.back() + static_cast<int32_t>(s.q));
  p.total_q = out->cu_q.back();
  p.q_stride = {0, d, kHeadsQ * d};
  p.o_stride = p.q_stride;
  out->q.assign(static_cast<size_t>(std::max<int64_t>(1, p.total_q * kHeadsQ * d * e)), 0);
  out->o.assign(out->q.size(), 0xff);
  out->lse.assign(static_cast<size_t>(std::max<int64_t>(1, kHeadsQ * p.total_q)), std::nanf(""));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < kHeadsQ; ++h)
      for (int64_t s = 0; s < seqs[b].q; ++s)
        for (int64_t x = 0; x < d; ++x)
          put(dtype, out->q, (out->cu_q[b] + s) * p.q_stride.row + h * d + x, logical(0, b, h, s, x));
  out->used.clear();
  for (const SeqLens& s : seqs) out->used.push_back(static_cast<int32_t>(s.k));
  // Row j of sequence b's K/V: its offset in the buffers (in elements, head 0).
  std::vector<std::vector<int64_t>> row_offset(static_cast<size_t>(batch));
  const int64_t row_elems = kHeadsKv * d;
  if (page_size == 0) {
    out->cu_k.assign(1, 0);
    for (const SeqLens& s : seqs) out->cu_k.push_back(out->cu_k.back() + static_cast<int32_t>(s.k + extra));
    p.total_k = out->cu_k.back();
    p.k_stride = {0, d, row_elems};
    out->k.assign(static_cast<size_t>(std::max<int64_t>(1, p.total_k * row_elems * e)), 0);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t j = 0; j < seqs[b].k + extra; ++j) row_offset[b].push_back((out->cu_k[b] + j) * row_elems);
    p.cu_seqlens_k = out->cu_k.data();
    if (extra > 0) p.seqused_k = out->used.data();
  } else {
    int64_t pages = 0, max_pages = 1;
    for (const SeqLens& s : seqs) {
      pages += (s.k + extra + page_size - 1) / page_size;
      max_pages = std::max(max_pages, (s.k + extra + page_size - 1) / page_size);
    }
    const int64_t num_pages = pages + 1;  // one spare page nobody reads
    std::vector<int32_t> order(static_cast<size_t>(num_pages));
    std::iota(order.begin(), order.end(), 0);
    for (int64_t i = num_pages - 1; i > 0; --i) {  // a fixed shuffle (hash-driven Fisher-Yates)
      const int64_t j = static_cast<int64_t>((test::hash_uniform(99, static_cast<uint64_t>(i)) + 1.0) / 2.0 * (i + 1)) % (i + 1);
      std::swap(order[i], order[j]);
    }
    out->pages.assign(static_cast<size_t>(batch * max_pages), static_cast<int32_t>(num_pages + 7));
    int64_t next = 0;
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t n = (seqs[b].k + extra + page_size - 1) / page_size;
      for (int64_t i = 0; i < n; ++i) out->pages[b * max_pages + i] = order[next++];
      for (int64_t j = 0; j < seqs[b].k + extra; ++j) {
        row_offset[b].push_back(out->pages[b * max_pages + j / page_size] * page_size * row_elems + (j % page_size) * row_elems);
      }
    }
    p.page_table = out->pages.data();
    p.page_size = page_size;
    p.num_pages = num_pages;
    p.max_pages_per_seq = max_pages;
    p.k_stride = {page_size * row_elems, d, row_elems};
    p.seqused_k = out->used.data();
    out->k.assign(static_cast<size_t>(num_pages * page_size * row_elems * e), 0);
  }
  p.v_stride = p.k_stride;
  fill_nan(dtype, out->k);
  out->v = out->k;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < kHeadsKv; ++h)
      for (int64_t j = 0; j < seqs[b].k; ++j)
        for (int64_t x = 0; x < d; ++x) {
          put(dtype, out->k, row_offset[b][j] + h * d + x, logical(1, b, h, j, x));
          put(dtype, out->v, row_offset[b][j] + h * d + x, logical(2, b, h, j, x));
        }
  p.cu_seqlens_q = out->cu_q.data();
  p.q = out->q.data();
  p.k = out->k.data();
  p.v = out->v.data();
  p.o = out->o.data();
  p.lse = out->lse.data();
}

// O and LSE of sequence b, head h, row i of a packed problem and of the same row run alone are the same bits.
void expect_same_rows(const Buffers& packed, const Buffers& alone, int64_t b, const SeqLens& len, int64_t d,
                      const std::string& what) {
  const int64_t e = dtype_size(packed.params.dtype);
  for (int64_t h = 0; h < kHeadsQ; ++h) {
    for (int64_t i = 0; i < len.q; ++i) {
      const int64_t packed_row = packed.cu_q[b] + i;
      ASSERT_EQ(0, std::memcmp(packed.o.data() + (packed_row * kHeadsQ + h) * d * e, alone.o.data() + (i * kHeadsQ + h) * d * e,
                               static_cast<size_t>(d * e)))
          << what << ": O of sequence " << b << " head " << h << " row " << i;
      const float a = packed.lse[h * packed.params.total_q + packed_row], c = alone.lse[h * len.q + i];
      ASSERT_TRUE(std::memcmp(&a, &c, 4) == 0) << what << ": LSE of sequence " << b << " head " << h << " row " << i
                                               << ": " << a << " vs " << c;
    }
  }
}

const std::vector<SeqLens> kSeqs{{5, 100}, {0, 7}, {17, 17}, {1, 300}, {64, 0}, {129, 257}, {3, 1}};
// Decoding steps: at most 8 query rows a sequence, so that the 16/16-bit problems go to the decode family (two query
// heads a K/V head: 8 rows each in its 16-row tile).
const std::vector<SeqLens> kDecodeSeqs{{1, 100}, {0, 7}, {4, 17}, {1, 300}, {3, 0}, {8, 257}, {1, 1}};

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
      // The inference path runs in the general family (select_config): the dense run takes the same tiles.
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
  Buffers contiguous;
  build_packed(dtype, d, mask, kSeqs, 0, 0, 1, &contiguous);
  ASSERT_TRUE(run_host_model(contiguous.params).ok());
  for (const int64_t page : {int64_t{1}, int64_t{3}, int64_t{16}, int64_t{64}, int64_t{256}}) {
    for (const int64_t extra : {int64_t{0}, int64_t{5}}) {
      Buffers paged;
      build_packed(dtype, d, mask, kSeqs, extra, page, 1, &paged);
      const Status st = run_host_model(paged.params);
      ASSERT_TRUE(st.ok()) << st.message();
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
}

}  // namespace
}  // namespace flashcheck
