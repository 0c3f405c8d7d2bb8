/* flashcheck plain C ABI: the same kernel as flashcheck/attention.h for C, Python (ctypes) or any FFI.
 * All enums travel as int32_t and all sizes/strides as int64_t (elements), so the struct layout is fixed.
 * Every function returns an fc_status (0 = ok) and, when msg is non-null, writes a NUL-terminated
 * human-readable message (truncated to msg_size bytes). Semantics are those of attention.h. */
#ifndef FLASHCHECK_ATTENTION_C_H_
#define FLASHCHECK_ATTENTION_C_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* FC_DTYPE_F32 = 0, FC_DTYPE_F16 = 1, FC_DTYPE_BF16 = 2, FC_DTYPE_F8E4M3 = 3: one per row of flashcheck/dtypes.def.
 * O is written in bf16 for f8e4m3 inputs (the row's output dtype), in the input dtype otherwise. */
enum {
#define FC_DTYPE_ROW(c_suffix, enumerator, code, ...) FC_DTYPE_##c_suffix = code,
#include "flashcheck/dtypes.def"
#undef FC_DTYPE_ROW
};
/* FC_MASK_NONE = 0, FC_MASK_CAUSAL_BOTTOM_RIGHT = 1, FC_MASK_CAUSAL_TOP_LEFT = 2, FC_MASK_WINDOW_BOTTOM_RIGHT = 3,
 * FC_MASK_WINDOW_TOP_LEFT = 4: one per row of flashcheck/masks.def. */
enum {
#define FC_MASK_ROW(c_suffix, enumerator, code, ...) FC_MASK_##c_suffix = code,
#include "flashcheck/masks.def"
#undef FC_MASK_ROW
};
enum { FC_LAYOUT_BHSD = 0, FC_LAYOUT_BSHD = 1 };
enum {
  FC_OK = 0,
  FC_ERR_INVALID_ARGUMENT = 1,
  FC_ERR_UNSUPPORTED = 2,
  FC_ERR_CUDA = 3,
  FC_ERR_NO_DEVICE = 4
};
typedef int32_t fc_status;

typedef struct fc_strides {
  int64_t batch, head, row; /* elements; the head_dim axis has unit stride */
} fc_strides;

typedef struct fc_params {
  int32_t dtype; /* FC_DTYPE_* */
  int32_t mask;  /* FC_MASK_* */
  int64_t batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim;
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse; /* [batch, heads_q, seqlen_q] contiguous fp32, natural log */
  fc_strides q_stride, k_stride, v_stride, o_stride;
  float softmax_scale;
  int64_t window_left, window_right; /* FC_MASK_WINDOW_* only; -1 = unbounded */
  float softcap;                     /* > 0: scores become softcap * tanh(score / softcap); 0: off */
  const float* sink;                 /* [heads_q] fp32 sink logits, or NULL */
  /* Sequences (attention.h "Sequences"); NULL / 0 = dense. fc_make_params leaves them so. */
  const int32_t* cu_seqlens_q; /* [batch + 1] */
  int64_t total_q;
  const int32_t* cu_seqlens_k; /* [batch + 1], not with page_table */
  int64_t total_k;
  const int32_t* seqused_k;  /* [batch] */
  const int32_t* page_table; /* [batch, max_pages_per_seq] */
  int64_t page_size, num_pages, max_pages_per_seq;
  int32_t num_splits; /* >= 1, or 0: heuristic; fc_make_params sets 1 */
  /* V's and O's columns: 0 (= head_dim; fc_make_params sets 0) or 1..256; v_stride and o_stride count elements of
   * rows of this many columns (fc_set_head_dim_v sets all three). Since version 0.2.0 (fc_version()): the fields
   * before it keep their offsets, and a caller built against an earlier header, whose struct ends before it,
   * rebuilds against this one. */
  int64_t head_dim_v;
  /* Dropout (attention.h Params, docs/design/dropout-rng.md), appended after head_dim_v so that every field before
   * keeps its offset; fc_make_params sets them off (0, NULL). dropout_p in [0, 1), 0 = off; dropout_mask_out:
   * [batch, heads_q, seqlen_q, seqlen_k] bytes (1 kept, 0 dropped, hidden or past a sequence), only with
   * dropout_p > 0. */
  float dropout_p;
  uint64_t dropout_seed;
  uint64_t dropout_offset;
  uint8_t* dropout_mask_out;
  /* fp8 descales (attention.h Params), appended after the dropout fields; fc_make_params sets them NULL (= 1).
   * FC_DTYPE_F8E4M3 only: [batch, heads_kv] fp32, contiguous, finite and > 0. */
  const float* descale_q;
  const float* descale_k;
  const float* descale_v;
} fc_params;

/* Contiguous strides for `layout`, softmax_scale = 1/sqrt(head_dim), no window (-1, -1), softcap 0, head_dim_v 0
 * (V and O of head_dim columns); pointers null. */
fc_status fc_make_params(int32_t dtype, int64_t batch, int64_t heads_q, int64_t heads_kv, int64_t seqlen_q,
                         int64_t seqlen_k, int64_t head_dim, int32_t mask, int32_t layout, fc_params* out,
                         char* msg, size_t msg_size);
/* head_dim_v, and v_stride and o_stride contiguous for `layout` over head_dim_v columns (0: head_dim's). */
fc_status fc_set_head_dim_v(fc_params* params, int64_t head_dim_v, int32_t layout, char* msg, size_t msg_size);
fc_status fc_can_implement(const fc_params* params, char* msg, size_t msg_size);
/* stream: a cudaStream_t, or NULL for the legacy default stream. */
fc_status fc_forward(const fc_params* params, void* stream, char* msg, size_t msg_size);
/* fc_forward without reading the index arrays back (attention.h run_prechecked): the caller vouches that
 * fc_can_implement accepted their current contents. */
fc_status fc_forward_prechecked(const fc_params* params, void* stream, char* msg, size_t msg_size);
/* The kernel configuration fc_forward would run: path (0 general fp32, 1 tensor core, 2 split tf32, 3 tensor core
 * fp8), tiles. */
fc_status fc_select_config(const fc_params* params, int32_t* path, int32_t* block_m, int32_t* block_n,
                           char* msg, size_t msg_size);
/* The split-KV run count fc_forward would use (attention.h effective_splits): num_splits, or the heuristic's for 0. */
fc_status fc_effective_splits(const fc_params* params, int32_t* splits, char* msg, size_t msg_size);
/* The backward pass (flashcheck/backward.h): `forward` as given to fc_forward (its o and lse are read here); dO in
 * o's layout, dQ in q's, dK in k's, dV in v's (*_stride: elements); dsink [heads_q] fp32 with a sink, or NULL;
 * deterministic != 0: dQ bit-identical from run to run. */
typedef struct fc_backward_params {
  fc_params forward;
  const void* d_o;
  void* dq;
  void* dk;
  void* dv;
  fc_strides d_o_stride, dq_stride, dk_stride, dv_stride;
  float* dsink;
  int32_t deterministic;
} fc_backward_params;
/* forward copied, d_o_stride = o_stride, dq_stride = q_stride, dk_stride = k_stride, dv_stride = v_stride; pointers
 * null, deterministic 0. */
fc_status fc_make_backward_params(const fc_params* forward, fc_backward_params* out, char* msg, size_t msg_size);
fc_status fc_can_implement_backward(const fc_backward_params* params, char* msg, size_t msg_size);
fc_status fc_backward(const fc_backward_params* params, void* stream, char* msg, size_t msg_size);
/* The path fc_backward would run (0 general fp32, 1 tensor core), after fc_can_implement_backward's checks. */
fc_status fc_backward_path(const fc_backward_params* params, int32_t* path, char* msg, size_t msg_size);
int32_t fc_device_available(void);
const char* fc_version(void);

#ifdef __cplusplus
}
#endif

#endif /* FLASHCHECK_ATTENTION_C_H_ */
