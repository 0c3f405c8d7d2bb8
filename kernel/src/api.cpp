// Small pieces of the public API (attention.h) that need no device: names of masks (from the mask name
// table) and compute paths, contiguous strides, make_params(), set_head_dim_v() and visible_key_range(), the
// kernels' visibility rule exposed for callers and tests. dtype names and sizes: dtype.cpp, from the dtype table.
#include <cmath>
#include <limits>

#include "flashcheck/attention.h"
#include "flashcheck/mask_names.h"
#include "common/visibility.h"

namespace flashcheck {

const char* to_string(Mask mask) {
  for (const MaskName& entry : kMaskNames) {
    if (entry.mask == mask) return entry.name;
  }
  return "invalid-mask";
}

const char* to_string(ComputePath path) {
  switch (path) {
    case ComputePath::kGeneralFp32: return "general-fp32";
    case ComputePath::kTensorCore: return "tensor-core";
    case ComputePath::kSplitTf32: return "split-tf32";
    case ComputePath::kTensorCoreFp8: return "tensor-core-fp8";
  }
  return "invalid-path";
}

// Products of sizes saturate at INT64_MAX instead of overflowing (undefined behaviour): can_implement then
// reports the overflowing extent of such params by name.
int64_t saturating_mul(int64_t a, int64_t b) {
  int64_t out = 0;
  return __builtin_mul_overflow(a, b, &out) ? std::numeric_limits<int64_t>::max() : out;
}

Strides contiguous_strides(Layout layout, int64_t heads, int64_t seqlen, int64_t head_dim) {
  const int64_t row = saturating_mul(heads, head_dim);
  if (layout == Layout::kBSHD) return {saturating_mul(seqlen, row), head_dim, row};
  const int64_t head = saturating_mul(seqlen, head_dim);
  return {saturating_mul(heads, head), head, head_dim};
}

Params make_params(DType dtype, int64_t batch, int64_t heads_q, int64_t heads_kv, int64_t seqlen_q,
                   int64_t seqlen_k, int64_t head_dim, Mask mask, Layout layout) {
  Params p;
  p.dtype = dtype;
  p.mask = mask;
  p.batch = batch;
  p.heads_q = heads_q;
  p.heads_kv = heads_kv;
  p.seqlen_q = seqlen_q;
  p.seqlen_k = seqlen_k;
  p.head_dim = head_dim;
  p.q_stride = contiguous_strides(layout, heads_q, seqlen_q, head_dim);
  p.k_stride = contiguous_strides(layout, heads_kv, seqlen_k, head_dim);
  set_head_dim_v(&p, p.head_dim_v, layout);
  // 1/sqrt(d) computed in double and rounded once, so every platform gets the same float.
  p.softmax_scale = head_dim > 0 ? static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim))) : 0.0f;
  return p;
}

void set_head_dim_v(Params* params, int64_t head_dim_v, Layout layout) {
  params->head_dim_v = head_dim_v;
  const int64_t columns = value_head_dim(*params);
  params->v_stride = contiguous_strides(layout, params->heads_kv, params->seqlen_k, columns);
  params->o_stride = contiguous_strides(layout, params->heads_q, params->seqlen_q, columns);
}

KeyRange visible_key_range(const Params& params, int64_t row) {
  const detail::Visibility vis = detail::make_visibility(params);
  return {vis.row_begin(row), vis.row_end(row)};
}

int64_t sequence_q_len(const Params& params, int64_t batch_index) {
  if (params.cu_seqlens_q == nullptr) return params.seqlen_q;
  return int64_t{params.cu_seqlens_q[batch_index + 1]} - params.cu_seqlens_q[batch_index];
}

int64_t sequence_k_len(const Params& params, int64_t batch_index) {
  if (params.seqused_k != nullptr) return params.seqused_k[batch_index];
  if (params.cu_seqlens_k != nullptr && params.page_table == nullptr) {
    return int64_t{params.cu_seqlens_k[batch_index + 1]} - params.cu_seqlens_k[batch_index];
  }
  return params.seqlen_k;
}

KeyRange visible_key_range(const Params& params, int64_t batch_index, int64_t row) {
  const detail::Visibility vis =
      detail::make_visibility(params.mask, sequence_q_len(params, batch_index), sequence_k_len(params, batch_index),
                              params.window_left, params.window_right);
  return {vis.row_begin(row), vis.row_end(row)};
}

}  // namespace flashcheck
