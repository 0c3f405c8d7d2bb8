// Host buffers of inference-path problems for the kernel folder's tests: a variable-length batch packed (Q, O and
// optionally K/V), K/V in a paged cache with a shuffled page order, NaN in every slot no sequence owns, and each
// sequence alone as a dense problem. Logical element (b, h, s, d) has the same value in every layout. Q and K have
// d columns, V and O d_v (0: d).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "flashcheck/attention.h"
#include <gtest/gtest.h>

#include "test_problem.h"

namespace flashcheck::test {

struct SeqLens {
  int64_t q = 0, k = 0;
};

inline constexpr int64_t kHeadsQ = 4, kHeadsKv = 2;

// Logical element (b, h, s, d) of tensor `t` (0 = Q, 1 = K, 2 = V), rounded to the dtype: the same value
// whichever layout holds it.
inline uint16_t bits16(DType dtype, float x) {
  return dtype == DType::kF16 ? detail::host::float_to_f16_bits(x) : detail::host::float_to_bf16_bits(x);
}
inline void put(DType dtype, std::vector<unsigned char>& buf, int64_t offset, float x) {
  if (dtype == DType::kF32) {
    std::memcpy(buf.data() + offset * 4, &x, 4);
  } else {
    const uint16_t b = bits16(dtype, x);
    std::memcpy(buf.data() + offset * 2, &b, 2);
  }
}
inline float logical(int t, int64_t b, int64_t h, int64_t s, int64_t d) {
  const uint64_t index = ((static_cast<uint64_t>(b) * 64 + h) * 65536 + s) * 512 + d;
  return static_cast<float>(2.0 * hash_uniform(static_cast<uint64_t>(t) + 11, index));
}
inline void fill_nan(DType dtype, std::vector<unsigned char>& buf) {
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
inline void build_dense(DType dtype, int64_t d, Mask mask, const SeqLens& len, int64_t b, Buffers* out,
                        int64_t d_v = 0) {
  Params& p = out->params;
  p = make_params(dtype, 1, kHeadsQ, kHeadsKv, len.q, len.k, d, mask, Layout::kBSHD);
  set_head_dim_v(&p, d_v, Layout::kBSHD);
  const int64_t dv = value_head_dim(p);
  if (mask == Mask::kWindowBottomRight || mask == Mask::kWindowTopLeft) {
    p.window_left = 5;
    p.window_right = 2;
  }
  const int64_t e = dtype_size(dtype);
  out->q.assign(static_cast<size_t>(std::max<int64_t>(1, len.q * kHeadsQ * d * e)), 0);
  out->o.assign(static_cast<size_t>(std::max<int64_t>(1, len.q * kHeadsQ * dv * e)), 0xff);
  out->k.assign(static_cast<size_t>(std::max<int64_t>(1, len.k * kHeadsKv * d * e)), 0);
  out->v.assign(static_cast<size_t>(std::max<int64_t>(1, len.k * kHeadsKv * dv * e)), 0);
  out->lse.assign(static_cast<size_t>(std::max<int64_t>(1, kHeadsQ * len.q)), std::nanf(""));
  for (int64_t h = 0; h < kHeadsQ; ++h)
    for (int64_t s = 0; s < len.q; ++s)
      for (int64_t x = 0; x < d; ++x) put(dtype, out->q, s * p.q_stride.row + h * p.q_stride.head + x, logical(0, b, h, s, x));
  for (int64_t h = 0; h < kHeadsKv; ++h)
    for (int64_t s = 0; s < len.k; ++s) {
      for (int64_t x = 0; x < d; ++x) {
        put(dtype, out->k, s * p.k_stride.row + h * p.k_stride.head + x, logical(1, b, h, s, x));
      }
      for (int64_t x = 0; x < dv; ++x) {
        put(dtype, out->v, s * p.v_stride.row + h * p.v_stride.head + x, logical(2, b, h, s, x));
      }
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
inline void build_packed(DType dtype, int64_t d, Mask mask, const std::vector<SeqLens>& seqs, int64_t extra, int64_t page_size,
                  int32_t splits, Buffers* out, int64_t d_v = 0) {
  Params& p = out->params;
  const int64_t batch = static_cast<int64_t>(seqs.size());
  int64_t max_q = 0, max_k = 0;
  for (const SeqLens& s : seqs) {
    max_q = std::max(max_q, s.q);
    max_k = std::max(max_k, s.k + extra);
  }
  p = make_params(dtype, batch, kHeadsQ, kHeadsKv, max_q, max_k, d, mask, Layout::kBSHD);
  p.head_dim_v = d_v;
  const int64_t dv = value_head_dim(p);
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
  p.o_stride = {0, dv, kHeadsQ * dv};
  out->q.assign(static_cast<size_t>(std::max<int64_t>(1, p.total_q * kHeadsQ * d * e)), 0);
  out->o.assign(static_cast<size_t>(std::max<int64_t>(1, p.total_q * kHeadsQ * dv * e)), 0xff);
  out->lse.assign(static_cast<size_t>(std::max<int64_t>(1, kHeadsQ * p.total_q)), std::nanf(""));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < kHeadsQ; ++h)
      for (int64_t s = 0; s < seqs[b].q; ++s)
        for (int64_t x = 0; x < d; ++x)
          put(dtype, out->q, (out->cu_q[b] + s) * p.q_stride.row + h * d + x, logical(0, b, h, s, x));
  out->used.clear();
  for (const SeqLens& s : seqs) out->used.push_back(static_cast<int32_t>(s.k));
  // Row j of sequence b's K/V: its row in the buffers (K's offset in elements is that times K's row, V's times V's).
  std::vector<std::vector<int64_t>> kv_row(static_cast<size_t>(batch));
  const int64_t row_elems = kHeadsKv * d, v_row_elems = kHeadsKv * dv;
  int64_t kv_rows = 0;
  if (page_size == 0) {
    out->cu_k.assign(1, 0);
    for (const SeqLens& s : seqs) out->cu_k.push_back(out->cu_k.back() + static_cast<int32_t>(s.k + extra));
    p.total_k = out->cu_k.back();
    p.k_stride = {0, d, row_elems};
    p.v_stride = {0, dv, v_row_elems};
    kv_rows = std::max<int64_t>(1, p.total_k);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t j = 0; j < seqs[b].k + extra; ++j) kv_row[b].push_back(out->cu_k[b] + j);
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
      const int64_t j = static_cast<int64_t>((hash_uniform(99, static_cast<uint64_t>(i)) + 1.0) / 2.0 * (i + 1)) % (i + 1);
      std::swap(order[i], order[j]);
    }
    out->pages.assign(static_cast<size_t>(batch * max_pages), static_cast<int32_t>(num_pages + 7));
    int64_t next = 0;
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t n = (seqs[b].k + extra + page_size - 1) / page_size;
      for (int64_t i = 0; i < n; ++i) out->pages[b * max_pages + i] = order[next++];
      for (int64_t j = 0; j < seqs[b].k + extra; ++j) {
        kv_row[b].push_back(out->pages[b * max_pages + j / page_size] * page_size + j % page_size);
      }
    }
    p.page_table = out->pages.data();
    p.page_size = page_size;
    p.num_pages = num_pages;
    p.max_pages_per_seq = max_pages;
    p.k_stride = {page_size * row_elems, d, row_elems};
    p.v_stride = {page_size * v_row_elems, dv, v_row_elems};
    p.seqused_k = out->used.data();
    kv_rows = num_pages * page_size;
  }
  out->k.assign(static_cast<size_t>(kv_rows * row_elems * e), 0);
  out->v.assign(static_cast<size_t>(kv_rows * v_row_elems * e), 0);
  fill_nan(dtype, out->k);
  fill_nan(dtype, out->v);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < kHeadsKv; ++h)
      for (int64_t j = 0; j < seqs[b].k; ++j) {
        for (int64_t x = 0; x < d; ++x) {
          put(dtype, out->k, kv_row[b][j] * row_elems + h * d + x, logical(1, b, h, j, x));
        }
        for (int64_t x = 0; x < dv; ++x) {
          put(dtype, out->v, kv_row[b][j] * v_row_elems + h * dv + x, logical(2, b, h, j, x));
        }
      }
  p.cu_seqlens_q = out->cu_q.data();
  p.q = out->q.data();
  p.k = out->k.data();
  p.v = out->v.data();
  p.o = out->o.data();
  p.lse = out->lse.data();
}

// O and LSE of sequence b, head h, row i of a packed problem and of the same row run alone are the same bits; d is
// O's columns.
inline void expect_same_rows(const Buffers& packed, const Buffers& alone, int64_t b, const SeqLens& len, int64_t d,
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

inline const std::vector<SeqLens> kSeqs{{5, 100}, {0, 7}, {17, 17}, {1, 300}, {64, 0}, {129, 257}, {3, 1}};
// Decoding steps: at most 8 query rows a sequence, so that the 16-bit problems go to the decode family (two query
// heads a K/V head: 8 rows each in its 16-row tile).
inline const std::vector<SeqLens> kDecodeSeqs{{1, 100}, {0, 7}, {4, 17}, {1, 300}, {3, 0}, {8, 257}, {1, 1}};

}  // namespace flashcheck::test
