// The C ABI (attention_c.h) over the C++ API: field-by-field conversion, Status to fc_status plus message.
// No exception crosses the boundary: anything thrown (e.g. std::bad_alloc) becomes an error status.
#include "flashcheck/attention_c.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <string>

#include "flashcheck/attention.h"
#include "flashcheck/backward.h"

namespace {

using flashcheck::Status;
using flashcheck::StatusCode;

void write_message(const std::string& text, char* msg, size_t msg_size) {
  if (msg == nullptr || msg_size == 0) return;
  const size_t n = std::min(text.size(), msg_size - 1);
  std::memcpy(msg, text.data(), n);
  msg[n] = '\0';
}

fc_status finish(const Status& status, char* msg, size_t msg_size) {
  write_message(status.ok() ? std::string("ok") : status.message(), msg, msg_size);
  return static_cast<fc_status>(status.code());
}

flashcheck::Strides to_cpp(const fc_strides& s) { return {s.batch, s.head, s.row}; }
fc_strides to_c(const flashcheck::Strides& s) { return {s.batch, s.head, s.row}; }

flashcheck::Params to_cpp(const fc_params& c) {
  flashcheck::Params p;
  p.dtype = static_cast<flashcheck::DType>(c.dtype);
  p.mask = static_cast<flashcheck::Mask>(c.mask);
  p.batch = c.batch;
  p.heads_q = c.heads_q;
  p.heads_kv = c.heads_kv;
  p.seqlen_q = c.seqlen_q;
  p.seqlen_k = c.seqlen_k;
  p.head_dim = c.head_dim;
  p.head_dim_v = c.head_dim_v;
  p.q = c.q;
  p.k = c.k;
  p.v = c.v;
  p.o = c.o;
  p.lse = c.lse;
  p.q_stride = to_cpp(c.q_stride);
  p.k_stride = to_cpp(c.k_stride);
  p.v_stride = to_cpp(c.v_stride);
  p.o_stride = to_cpp(c.o_stride);
  p.softmax_scale = c.softmax_scale;
  p.window_left = c.window_left;
  p.window_right = c.window_right;
  p.softcap = c.softcap;
  p.sink = c.sink;
  p.cu_seqlens_q = c.cu_seqlens_q;
  p.total_q = c.total_q;
  p.cu_seqlens_k = c.cu_seqlens_k;
  p.total_k = c.total_k;
  p.seqused_k = c.seqused_k;
  p.page_table = c.page_table;
  p.page_size = c.page_size;
  p.num_pages = c.num_pages;
  p.max_pages_per_seq = c.max_pages_per_seq;
  p.num_splits = c.num_splits;
  p.dropout_p = c.dropout_p;
  p.dropout_seed = c.dropout_seed;
  p.dropout_offset = c.dropout_offset;
  p.dropout_mask_out = c.dropout_mask_out;
  p.descale_q = c.descale_q;
  p.descale_k = c.descale_k;
  p.descale_v = c.descale_v;
  return p;
}

template <typename Fn>
fc_status guarded(char* msg, size_t msg_size, Fn&& fn) {
  try {
    return finish(fn(), msg, msg_size);
  } catch (const std::exception& e) {
    return finish({StatusCode::kInvalidArgument, std::string("internal error: ") + e.what()}, msg, msg_size);
  }
}

Status null_params() { return {StatusCode::kInvalidArgument, "params: null pointer"}; }

flashcheck::BackwardParams to_cpp(const fc_backward_params& c) {
  flashcheck::BackwardParams b;
  b.forward = to_cpp(c.forward);
  b.d_o = c.d_o;
  b.dq = c.dq;
  b.dk = c.dk;
  b.dv = c.dv;
  b.d_o_stride = to_cpp(c.d_o_stride);
  b.dq_stride = to_cpp(c.dq_stride);
  b.dk_stride = to_cpp(c.dk_stride);
  b.dv_stride = to_cpp(c.dv_stride);
  b.dsink = c.dsink;
  b.deterministic = c.deterministic != 0;
  return b;
}

}  // namespace

extern "C" {

fc_status fc_make_params(int32_t dtype, int64_t batch, int64_t heads_q, int64_t heads_kv, int64_t seqlen_q,
                         int64_t seqlen_k, int64_t head_dim, int32_t mask, int32_t layout, fc_params* out,
                         char* msg, size_t msg_size) {
  return guarded(msg, msg_size, [&]() -> Status {
    if (out == nullptr) return {StatusCode::kInvalidArgument, "out: null pointer"};
    if (layout != FC_LAYOUT_BHSD && layout != FC_LAYOUT_BSHD) {
      return {StatusCode::kInvalidArgument, "layout: expected FC_LAYOUT_BHSD (0) or FC_LAYOUT_BSHD (1), got " +
                                                std::to_string(layout)};
    }
    const flashcheck::Params p = flashcheck::make_params(
        static_cast<flashcheck::DType>(dtype), batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim,
        static_cast<flashcheck::Mask>(mask), static_cast<flashcheck::Layout>(layout));
    // Everything but the pointers is known here: a shape can_implement would refuse is refused now, naming
    // the field (dtype 7, head_dim 0, a batch whose tensors overflow int64 bytes, ...).
    if (Status st = flashcheck::validate_shape(p); !st.ok()) return st;
    *out = fc_params{};
    out->dtype = dtype;
    out->mask = mask;
    out->batch = p.batch;
    out->heads_q = p.heads_q;
    out->heads_kv = p.heads_kv;
    out->seqlen_q = p.seqlen_q;
    out->seqlen_k = p.seqlen_k;
    out->head_dim = p.head_dim;
    out->q_stride = to_c(p.q_stride);
    out->k_stride = to_c(p.k_stride);
    out->v_stride = to_c(p.v_stride);
    out->o_stride = to_c(p.o_stride);
    out->softmax_scale = p.softmax_scale;
    out->window_left = p.window_left;
    out->window_right = p.window_right;
    out->softcap = p.softcap;
    out->sink = p.sink;
    out->num_splits = p.num_splits;
    out->head_dim_v = p.head_dim_v;
    out->dropout_p = p.dropout_p;
    out->dropout_seed = p.dropout_seed;
    out->dropout_offset = p.dropout_offset;
    out->dropout_mask_out = p.dropout_mask_out;
    out->descale_q = p.descale_q;
    out->descale_k = p.descale_k;
    out->descale_v = p.descale_v;
    return {};
  });
}

fc_status fc_can_implement(const fc_params* params, char* msg, size_t msg_size) {
  return guarded(msg, msg_size, [&]() -> Status {
    return params == nullptr ? null_params() : flashcheck::can_implement(to_cpp(*params));
  });
}

fc_status fc_forward(const fc_params* params, void* stream, char* msg, size_t msg_size) {
  return guarded(msg, msg_size, [&]() -> Status {
    return params == nullptr ? null_params() : flashcheck::run(to_cpp(*params), stream);
  });
}

fc_status fc_forward_prechecked(const fc_params* params, void* stream, char* msg, size_t msg_size) {
  return guarded(msg, msg_size, [&]() -> Status {
    return params == nullptr ? null_params() : flashcheck::run_prechecked(to_cpp(*params), stream);
  });
}

fc_status fc_select_config(const fc_params* params, int32_t* path, int32_t* block_m, int32_t* block_n,
                           char* msg, size_t msg_size) {
  return guarded(msg, msg_size, [&]() -> Status {
    if (params == nullptr) return null_params();
    const flashcheck::Params p = to_cpp(*params);
    if (Status st = flashcheck::can_implement(p); !st.ok()) return st;
    const flashcheck::KernelConfig config = flashcheck::select_config(p);
    if (path != nullptr) *path = static_cast<int32_t>(config.path);
    if (block_m != nullptr) *block_m = config.block_m;
    if (block_n != nullptr) *block_n = config.block_n;
    return {};
  });
}

fc_status fc_effective_splits(const fc_params* params, int32_t* splits, char* msg, size_t msg_size) {
  return guarded(msg, msg_size, [&]() -> Status {
    if (params == nullptr) return null_params();
    const flashcheck::Params p = to_cpp(*params);
    if (Status st = flashcheck::can_implement(p); !st.ok()) return st;
    if (splits != nullptr) *splits = flashcheck::effective_splits(p);
    return {};
  });
}

int32_t fc_device_available(void) { return flashcheck::device_available() ? 1 : 0; }

const char* fc_version(void) { return "flashcheck " FLASHCHECK_VERSION; }

fc_status fc_set_head_dim_v(fc_params* params, int64_t head_dim_v, int32_t layout, char* msg, size_t msg_size) {
  return guarded(msg, msg_size, [&]() -> Status {
    if (params == nullptr) return null_params();
    if (layout != FC_LAYOUT_BHSD && layout != FC_LAYOUT_BSHD) {
      return {StatusCode::kInvalidArgument, "layout: expected FC_LAYOUT_BHSD (0) or FC_LAYOUT_BSHD (1), got " +
                                                std::to_string(layout)};
    }
    flashcheck::Params p = to_cpp(*params);
    flashcheck::set_head_dim_v(&p, head_dim_v, static_cast<flashcheck::Layout>(layout));
    if (Status st = flashcheck::validate_shape(p); !st.ok()) return st;
    params->head_dim_v = p.head_dim_v;
    params->v_stride = to_c(p.v_stride);
    params->o_stride = to_c(p.o_stride);
    return {};
  });
}

fc_status fc_make_backward_params(const fc_params* forward, fc_backward_params* out, char* msg, size_t msg_size) {
  return guarded(msg, msg_size, [&]() -> Status {
    if (forward == nullptr) return {StatusCode::kInvalidArgument, "forward: null pointer"};
    if (out == nullptr) return {StatusCode::kInvalidArgument, "out: null pointer"};
    *out = fc_backward_params{};
    out->forward = *forward;
    out->d_o_stride = forward->o_stride;
    out->dq_stride = forward->q_stride;
    out->dk_stride = forward->k_stride;
    out->dv_stride = forward->v_stride;
    return {};
  });
}

fc_status fc_can_implement_backward(const fc_backward_params* params, char* msg, size_t msg_size) {
  return guarded(msg, msg_size, [&]() -> Status {
    return params == nullptr ? null_params() : flashcheck::can_implement_backward(to_cpp(*params));
  });
}

fc_status fc_backward_path(const fc_backward_params* params, int32_t* path, char* msg, size_t msg_size) {
  return guarded(msg, msg_size, [&]() -> Status {
    if (params == nullptr) return null_params();
    const flashcheck::BackwardParams b = to_cpp(*params);
    if (Status st = flashcheck::can_implement_backward(b); !st.ok()) return st;
    if (path != nullptr) *path = static_cast<int32_t>(flashcheck::backward_path(b));
    return {};
  });
}

fc_status fc_backward(const fc_backward_params* params, void* stream, char* msg, size_t msg_size) {
  return guarded(msg, msg_size, [&]() -> Status {
    return params == nullptr ? null_params() : flashcheck::run_backward(to_cpp(*params), stream);
  });
}

}  // extern "C"
