// Params -> the argument block every kernel family starts from: tensors as (base, element strides), the GQA
// group, the sequence lengths, the visibility rule, the folded scale and the work decomposition into
// (batch, head, Q tile) items. A family's own argument struct derives from ProblemArgs and adds only what is its
// own. Plain C++ (no CUDA headers): the host code that fills it and the kernels that read it share it.
#pragma once

#include <cstdint>

#include "common/dropout_rng.h"
#include "common/host_device.h"
#include "common/softmax.h"
#include "common/visibility.h"
#include "flashcheck/attention.h"

namespace flashcheck::detail {

// One [batch, heads, seqlen, columns] tensor: its base and element strides (the columns' stride is 1).
struct TensorArg {
  const void* ptr = nullptr;
  Strides stride;

  // Element (b, h, row 0, dim 0) as T (64-bit offsets).
  template <typename T>
  FLASHCHECK_HOST_DEVICE T* head(int64_t b, int64_t h) const {
    return static_cast<T*>(const_cast<void*>(ptr)) + b * stride.batch + h * stride.head;
  }
};

// Where the rows of one (sequence, head) of K or V live: contiguous rows `row_stride` apart from `base`, or, for a
// paged cache, row j in page pages[j / page_size] at (j % page_size) * row_stride from the page's start.
template <typename T>
struct RowSource {
  T* base = nullptr;              // row 0 (contiguous) or the head's offset inside page 0 (paged)
  int64_t row_stride = 0;
  const int32_t* pages = nullptr;  // the sequence's page-table row; null: contiguous
  int64_t page_size = 0;
  int64_t page_stride = 0;
  FLASHCHECK_HOST_DEVICE T* row(int64_t j) const {
    if (pages == nullptr) return base + j * row_stride;
    return base + pages[j / page_size] * page_stride + (j % page_size) * row_stride;
  }
};

// A work item's sequence: its lengths, where its Q/O rows start among the packed rows, and its visibility.
struct SequenceView {
  int64_t seqlen_q = 0;
  int64_t seqlen_k = 0;
  int64_t q_row0 = 0;  // packed row of the sequence's row 0 (0 when Q is dense)
  Visibility vis;
};

struct ProblemArgs {
  TensorArg q, k, v, o;  // o is written
  float* lse = nullptr;  // [batch, heads_q, seqlen_q] contiguous
  int64_t batch = 0;
  int64_t heads_q = 0;
  int64_t group_size = 0;  // heads_q / heads_kv: query head h reads K/V head h / group_size
  int64_t seqlen_q = 0;
  int64_t seqlen_k = 0;
  int64_t head_dim = 0;    // Q's and K's columns, unpadded: columns at or beyond it load as zeros
  // V's and O's columns (value_head_dim), unpadded: V's columns at or beyond it load as zeros, O's are never stored.
  // head_dim_v != head_dim runs in the general family and the tensor-core family's value pairs (select_config); the
  // others read head_dim for V and O.
  int64_t head_dim_v = 0;
  Visibility vis;
  float softmax_scale = 0.0f;
  float scale_log2 = 0.0f;  // fold_scale(softmax_scale)
  bool has_softcap = false;
  Softcap softcap;            // when has_softcap (common/softmax.h)
  const float* sink = nullptr;  // [heads_q] sink logits (natural units), or null
  DropoutArgs dropout;          // the general family's forward and the CUDA-core backward read it
  int64_t q_tiles = 0;      // ceil(seqlen_q / block_m)
  int64_t work_items = 0;   // q_tiles * heads_q * batch * splits: one (batch, head, Q tile, split) each
  // Sequences (attention.h): null / 0 = dense. seqlen_q and seqlen_k above are then upper bounds.
  const int32_t* cu_q = nullptr;
  const int32_t* cu_k = nullptr;
  const int32_t* used_k = nullptr;
  const int32_t* page_table = nullptr;
  int64_t page_size = 0;
  int64_t max_pages = 0;
  int64_t total_q = 0;
  Mask mask = Mask::kNone;  // with window_left / window_right: each sequence's own Visibility
  int64_t window_left = -1;
  int64_t window_right = -1;
  // Split-KV: each Q tile's visited K/V tiles run in `splits` contiguous runs; with splits > 1 each run's state
  // goes to the partials (PartialState) and the combine writes O and LSE.
  int32_t splits = 1;
  float* partial_acc = nullptr;  // [splits, lse_rows, head_dim_v]
  float* partial_m = nullptr;    // [splits, lse_rows] log2 units: what the run's l and accumulator are relative to
  float* partial_l = nullptr;    // [splits, lse_rows]
  int64_t lse_rows = 0;          // rows of LSE: batch * heads_q * seqlen_q, or heads_q * total_q when Q is packed

  FLASHCHECK_HOST_DEVICE bool has_sequences() const { return cu_q != nullptr || cu_k != nullptr || used_k != nullptr || page_table != nullptr; }

  // Sequence b's lengths, first packed row and visibility.
  FLASHCHECK_HOST_DEVICE SequenceView sequence(int64_t b) const {
    SequenceView s;
    if (!has_sequences()) {
      s.seqlen_q = seqlen_q;
      s.seqlen_k = seqlen_k;
      s.vis = vis;
      return s;
    }
    s.q_row0 = cu_q != nullptr ? cu_q[b] : 0;
    s.seqlen_q = cu_q != nullptr ? cu_q[b + 1] - cu_q[b] : seqlen_q;
    s.seqlen_k = used_k != nullptr ? used_k[b] : cu_k != nullptr ? cu_k[b + 1] - cu_k[b] : seqlen_k;
    s.vis = make_visibility(mask, s.seqlen_q, s.seqlen_k, window_left, window_right);
    return s;
  }

  // Row 0 of head h of sequence b in Q or O (packed: the sequence's first packed row).
  template <typename T>
  FLASHCHECK_HOST_DEVICE T* q_rows(const TensorArg& t, int64_t b, int64_t h) const {
    T* base = static_cast<T*>(const_cast<void*>(t.ptr)) + h * t.stride.head;
    return cu_q != nullptr ? base + static_cast<int64_t>(cu_q[b]) * t.stride.row : base + b * t.stride.batch;
  }

  // The rows of K or V head h_kv of sequence b.
  template <typename T>
  FLASHCHECK_HOST_DEVICE RowSource<T> kv_rows(const TensorArg& t, int64_t b, int64_t h_kv) const {
    RowSource<T> src;
    T* base = static_cast<T*>(const_cast<void*>(t.ptr)) + h_kv * t.stride.head;
    src.row_stride = t.stride.row;
    if (page_table != nullptr) {
      src.base = base;
      src.pages = page_table + b * max_pages;
      src.page_size = page_size;
      src.page_stride = t.stride.batch;
    } else {
      src.base = cu_k != nullptr ? base + static_cast<int64_t>(cu_k[b]) * t.stride.row : base + b * t.stride.batch;
    }
    return src;
  }

  // Row block of LSE (and of the instrumentation's per-row arrays) of (b, h): row i of the sequence is at
  // row_block(b, h) + i.
  FLASHCHECK_HOST_DEVICE int64_t row_block(int64_t b, int64_t h) const {
    return cu_q != nullptr ? h * total_q + cu_q[b] : (b * heads_q + h) * seqlen_q;
  }

  // Run `split` of a Q tile visiting tiles [first, first + count) processes its tiles [first + split_begin(count,
  // split), first + split_begin(count, split + 1)) (Visibility::TileRange::run_begin).
  FLASHCHECK_HOST_DEVICE int64_t split_begin(int64_t count, int32_t split) const {
    return Visibility::TileRange{0, count}.run_begin(split, splits);
  }
};

// Which (batch, head, row) an LSE row is: the combine's map back from its flat rows.
struct RowIndex {
  int64_t b = 0, h = 0, i = 0;
};
FLASHCHECK_HOST_DEVICE inline RowIndex lse_row_index(const ProblemArgs& a, int64_t flat) {
  RowIndex r;
  if (a.cu_q == nullptr) {
    r.i = flat % a.seqlen_q;
    r.h = (flat / a.seqlen_q) % a.heads_q;
    r.b = flat / (a.seqlen_q * a.heads_q);
    return r;
  }
  r.h = flat / a.total_q;
  const int64_t token = flat % a.total_q;
  int64_t lo = 0, hi = a.batch;  // the last sequence whose first row is <= token (empty sequences skipped)
  while (hi - lo > 1) {
    const int64_t mid = (lo + hi) / 2;
    if (a.cu_q[mid] <= token) lo = mid; else hi = mid;
  }
  r.b = lo;
  r.i = token - a.cu_q[lo];
  return r;
}

// The argument block of params for a family whose Q tiles have block_m rows.
// `splits`: the split count the launch uses (effective_splits), 1 for the families without split-KV.
inline ProblemArgs make_problem_args(const Params& params, int64_t block_m, int32_t splits = 1) {
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
  a.head_dim_v = value_head_dim(params);
  a.vis = make_visibility(params);
  a.softmax_scale = params.softmax_scale;
  a.scale_log2 = fold_scale(params.softmax_scale);
  a.has_softcap = params.softcap > 0.0f;
  if (a.has_softcap) a.softcap = make_softcap(params.softmax_scale, params.softcap);
  a.sink = params.sink;
  if (params.dropout_p > 0.0f) {
    a.dropout.enabled = true;
    a.dropout.threshold = dropout_threshold(params.dropout_p);
    a.dropout.keep_scale = dropout_keep_scale_f32(params.dropout_p);
    a.dropout.seed = params.dropout_seed;
    a.dropout.offset = params.dropout_offset;
  }
  a.q_tiles = ceil_div(params.seqlen_q, block_m);
  a.cu_q = params.cu_seqlens_q;
  a.cu_k = params.page_table != nullptr ? nullptr : params.cu_seqlens_k;
  a.used_k = params.seqused_k;
  a.page_table = params.page_table;
  a.page_size = params.page_size;
  a.max_pages = params.max_pages_per_seq;
  a.total_q = params.total_q;
  a.mask = params.mask;
  a.window_left = params.window_left;
  a.window_right = params.window_right;
  a.splits = splits;
  a.lse_rows = a.cu_q != nullptr ? params.heads_q * params.total_q : params.batch * params.heads_q * params.seqlen_q;
  a.work_items = a.q_tiles * params.heads_q * params.batch * splits;
  return a;
}

}  // namespace flashcheck::detail
