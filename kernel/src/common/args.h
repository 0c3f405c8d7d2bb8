// Params -> the argument block every kernel family starts from: tensors as (base, element strides), the GQA
// group, the sequence lengths, the visibility rule, the folded scale and the work decomposition into
// (batch, head, Q tile) items. A family's own argument struct derives from ProblemArgs and adds only what is its
// own. Plain C++ (no CUDA headers): the host code that fills it and the kernels that read it share it.
#pragma once

#include <cstdint>

#include "common/host_device.h"
#include "common/softmax.h"
#include "common/visibility.h"
#include "flashcheck/attention.h"

namespace flashcheck::detail {

// One [batch, heads, seqlen, head_dim] tensor: its base and element strides (head_dim's stride is 1).
struct TensorArg {
  const void* ptr = nullptr;
  Strides stride;

  // Element (b, h, row 0, dim 0) as T (64-bit offsets).
  template <typename T>
  FLASHCHECK_HOST_DEVICE T* head(int64_t b, int64_t h) const {
    return static_cast<T*>(const_cast<void*>(ptr)) + b * stride.batch + h * stride.head;
  }
};

struct ProblemArgs {
  TensorArg q, k, v, o;  // o is written
  float* lse = nullptr;  // [batch, heads_q, seqlen_q] contiguous
  int64_t batch = 0;
  int64_t heads_q = 0;
  int64_t group_size = 0;  // heads_q / heads_kv: query head h reads K/V head h / group_size
  int64_t seqlen_q = 0;
  int64_t seqlen_k = 0;
  int64_t head_dim = 0;    // unpadded: columns at or beyond it load as zeros and are never stored
  Visibility vis;
  float softmax_scale = 0.0f;
  float scale_log2 = 0.0f;  // fold_scale(softmax_scale)
  int64_t q_tiles = 0;      // ceil(seqlen_q / block_m)
  int64_t work_items = 0;   // q_tiles * heads_q * batch: one (batch, head, Q tile) each

  // Row block of LSE (and of the instrumentation's per-row arrays) of (b, h).
  FLASHCHECK_HOST_DEVICE int64_t row_block(int64_t b, int64_t h) const { return (b * heads_q + h) * seqlen_q; }
};

// The argument block of params for a family whose Q tiles have block_m rows.
inline ProblemArgs make_problem_args(const Params& params, int64_t block_m) {
  ProblemArgs a;
  a.q = {params.q, params.q_stride};
  a.k = {params.k, params.k_stride};
  a.v = {params.v, params.v_stride};
  a.o = {params.o, params.o_stride};
  a.lse = params.lse;
  a.batch = params.batch;
  a.heads_q = params.heads_q;
  a.group_size = params.heads_q / params.heads_kv;
  a.seqlen_q = params.seqlen_q;
  a.seqlen_k = params.seqlen_k;
  a.head_dim = params.head_dim;
  a.vis = make_visibility(params);
  a.softmax_scale = params.softmax_scale;
  a.scale_log2 = fold_scale(params.softmax_scale);
  a.q_tiles = ceil_div(params.seqlen_q, block_m);
  a.work_items = a.q_tiles * params.heads_q * params.batch;
  return a;
}

}  // namespace flashcheck::detail
