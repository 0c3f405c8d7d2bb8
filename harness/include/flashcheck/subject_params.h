// The one correspondence between flashcheck::Params and the subject ABI's problem (flashcheck/subject.h): the
// harness describes a case to a subject with problem_of(), and a subject built on flashcheck's own API (the host
// model as a subject) reads it back with params_of(). Header-only, so such a subject links nothing of the harness.
#pragma once

#include "flashcheck/attention.h"
#include "flashcheck/backward.h"
#include "flashcheck/subject.h"

namespace flashcheck {

// The subject capability bit set of every row of a table (kDTypes, kMaskNames): FC_SUBJECT_BIT of each row's code.
template <typename Table>
constexpr uint32_t subject_bits(const Table& table) {
  uint32_t bits = 0;
  for (const auto& row : table) bits |= FC_SUBJECT_BIT(row.c_code);
  return bits;
}

inline fc_subject_strides subject_strides(const Strides& s) { return {s.batch, s.head, s.row}; }
inline Strides params_strides(const fc_subject_strides& s) { return {s.batch, s.head, s.row}; }

// Params -> problem: every field but the pointers.
inline fc_subject_problem problem_of(const Params& p) {
  fc_subject_problem out{};
  out.dtype = static_cast<int32_t>(p.dtype);
  out.mask = static_cast<int32_t>(p.mask);
  out.batch = p.batch;
  out.heads_q = p.heads_q;
  out.heads_kv = p.heads_kv;
  out.seqlen_q = p.seqlen_q;
  out.seqlen_k = p.seqlen_k;
  out.head_dim = p.head_dim;
  out.q_stride = subject_strides(p.q_stride);
  out.k_stride = subject_strides(p.k_stride);
  out.v_stride = subject_strides(p.v_stride);
  out.o_stride = subject_strides(p.o_stride);
  out.softmax_scale = p.softmax_scale;
  out.window_left = p.window_left;
  out.window_right = p.window_right;
  out.softcap = p.softcap;
  out.head_dim_v = value_head_dim(p);
  return out;
}

// problem + buffers -> Params: the inverse of problem_of, with the buffers' pointers.
inline Params params_of(const fc_subject_problem& p, const fc_subject_buffers& b) {
  Params out;
  out.dtype = static_cast<DType>(p.dtype);
  out.mask = static_cast<Mask>(p.mask);
  out.batch = p.batch;
  out.heads_q = p.heads_q;
  out.heads_kv = p.heads_kv;
  out.seqlen_q = p.seqlen_q;
  out.seqlen_k = p.seqlen_k;
  out.head_dim = p.head_dim;
  out.q = b.q;
  out.k = b.k;
  out.v = b.v;
  out.o = b.o;
  out.lse = b.lse;
  out.sink = b.sink;
  out.q_stride = params_strides(p.q_stride);
  out.k_stride = params_strides(p.k_stride);
  out.v_stride = params_strides(p.v_stride);
  out.o_stride = params_strides(p.o_stride);
  out.softmax_scale = p.softmax_scale;
  out.window_left = p.window_left;
  out.window_right = p.window_right;
  out.softcap = p.softcap;
  out.head_dim_v = p.head_dim_v;
  return out;
}

// The one correspondence between Params' sequence fields and fc_subject_sequence_args': f(param, arg) for each pair.
template <typename P, typename A, typename F>
void for_each_sequence_field(P& p, A& a, F&& f) {
  f(p.cu_seqlens_q, a.cu_seqlens_q);
  f(p.total_q, a.total_q);
  f(p.cu_seqlens_k, a.cu_seqlens_k);
  f(p.total_k, a.total_k);
  f(p.seqused_k, a.seqused_k);
  f(p.page_table, a.page_table);
  f(p.page_size, a.page_size);
  f(p.num_pages, a.num_pages);
  f(p.max_pages_per_seq, a.max_pages_per_seq);
  f(p.num_splits, a.num_splits);
}

// Params -> the sequence arguments (fc_subject_sequences_v1): the index arrays, their sizes and num_splits.
inline fc_subject_sequence_args sequence_args_of(const Params& p) {
  fc_subject_sequence_args out{};
  for_each_sequence_field(p, out, [](const auto& param, auto& arg) { arg = param; });
  return out;
}

// Whether `p` has sequences (what fc_subject_sequences_v1's forward_sequences takes rather than fc_subject.forward).
inline bool has_sequences(const Params& p) {
  return p.cu_seqlens_q != nullptr || p.cu_seqlens_k != nullptr || p.seqused_k != nullptr || p.page_table != nullptr;
}

// problem + sequence arguments + buffers -> Params: params_of with the sequences.
inline Params params_of(const fc_subject_problem& p, const fc_subject_sequence_args& s, const fc_subject_buffers& b) {
  Params out = params_of(p, b);
  for_each_sequence_field(out, s, [](auto& param, const auto& arg) { param = arg; });
  return out;
}

// Params -> the dropout's arguments (fc_subject_dropout_v1): p, seed, offset and the mask dump's pointer.
inline fc_subject_dropout_args dropout_args_of(const Params& p) {
  return {p.dropout_p, p.dropout_seed, p.dropout_offset, p.dropout_mask_out};
}

// The dropout's arguments onto Params (a subject built on flashcheck's own API reads them back so).
inline void set_dropout(const fc_subject_dropout_args& d, Params* p) {
  p->dropout_p = d.p;
  p->dropout_seed = d.seed;
  p->dropout_offset = d.offset;
  p->dropout_mask_out = d.mask_out;
}

// Params -> the fp8 path's arguments (fc_subject_fp8_v1): the descales, null where 1.
inline fc_subject_fp8_args fp8_args_of(const Params& p) { return {p.descale_q, p.descale_k, p.descale_v}; }

// The fp8 path's arguments onto Params.
inline void set_fp8(const fc_subject_fp8_args& f, Params* p) {
  p->descale_q = f.descale_q;
  p->descale_k = f.descale_k;
  p->descale_v = f.descale_v;
}

// BackwardParams -> the backward's strides (fc_subject_backward_v1).
inline fc_subject_backward_strides backward_strides_of(const BackwardParams& p) {
  return {subject_strides(p.d_o_stride), subject_strides(p.dq_stride), subject_strides(p.dk_stride),
          subject_strides(p.dv_stride)};
}

// The backward's arguments -> BackwardParams (`sequences` null for a dense case): the inverse of what the harness
// hands a subject's backward.
inline BackwardParams backward_params_of(const fc_subject_problem& problem, const fc_subject_sequence_args* sequences,
                                         const fc_subject_backward_strides& strides, const fc_subject_buffers& forward,
                                         const fc_subject_backward_buffers& buffers) {
  BackwardParams out;
  out.forward = sequences != nullptr ? params_of(problem, *sequences, forward) : params_of(problem, forward);
  out.forward.o = const_cast<void*>(buffers.o);  // read, never written (backward.h)
  out.forward.lse = const_cast<float*>(buffers.lse);
  out.d_o = buffers.d_o;
  out.dq = buffers.dq;
  out.dk = buffers.dk;
  out.dv = buffers.dv;
  out.dsink = buffers.dsink;
  out.d_o_stride = params_strides(strides.d_o);
  out.dq_stride = params_strides(strides.dq);
  out.dk_stride = params_strides(strides.dk);
  out.dv_stride = params_strides(strides.dv);
  return out;
}

}  // namespace flashcheck
