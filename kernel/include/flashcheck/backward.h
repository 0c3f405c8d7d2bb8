// flashcheck public C++ API: the backward pass of attention.h's forward (dQ, dK, dV and the sink's gradient).
//
// Given dO, the gradient of a loss with respect to O, run_backward() computes
//   dV_j = sum_i P_ij dO_i,   dP_ij = dO_i.v_j,   D_i = dO_i.O_i,   dS_ij = P_ij (dP_ij - D_i),
//   dT_ij = dS_ij (1 - (s_ij / c)^2) with a softcap c (s_ij the capped score), else dS_ij,
//   dQ_i = scale sum_j dT_ij k_j,   dK_j = scale sum_i dT_ij q_i,   dsink_h = -sum_i exp(sink_h - LSE_i) D_i,
// with P_ij = exp(s_ij - LSE_i) recomputed from the forward's LSE and D from the forward's O, both as the forward
// wrote them (Params::o and Params::lse are inputs here). Sums over i run over every query head of a K/V head's
// group (GQA/MQA: dK and dV are summed over the group, K and V never copied) and, for dsink, over every sequence.
// Masks, windows, softcap, sinks and varlen sequences (cu_seqlens_q / cu_seqlens_k / seqused_k) mean what they mean
// in attention.h; paged K/V and split-KV are forward-only. A row with no visible key (LSE = -inf without a sink)
// gets dQ = 0; a key no row sees, and every key slot of a packed sequence past its seqused_k, gets dK = dV = 0; a
// value the mask hides (NaN included) never reaches a gradient. batch = 0 or heads_q = 0 writes dsink = 0 (a sum over
// no rows) where given and nothing else.
//
// Dropout (forward.dropout_p > 0, attention.h): the forward's mask z regenerated from the same seed and offset, with
// s = 1 / (1 - p): dV_j = sum_i P_ij z_ij s dO_i and dS_ij = P_ij (z_ij s dP_ij - D_i), D_i = dO_i.O_i with the
// forward's dropped O; the CUDA-core path runs it (backward_path), with P z s and dP z s rounded to fp32 and s the
// forward's fp32 factor (backward/arith.h).
//
// Arithmetic (docs/error-model.md §10): scores, P, dP, D and dS in fp32, every sum accumulated in fp32, dQ, dK and dV
// rounded to the dtype once; on the tensor-core path (backward_path) P and dS are rounded to the dtype before their
// products. dQ's partial sums over each K/V tile are added
// with fp32 atomics by default (their order varies from run to run, within the error model's bound);
// `deterministic` computes dQ in a pass of its own over the K/V tiles in order, bit-identical from run to run.
#pragma once

#include <cstdint>

#include "flashcheck/attention.h"

namespace flashcheck {

struct BackwardParams {
  // The forward's params: shape, mask, window, scale, softcap, sink, sequences; q, k, v; o and lse, read here.
  Params forward;
  const void* d_o = nullptr;  // like o:  [batch, heads_q, seqlen_q, head_dim_v] (packed with cu_seqlens_q)
  void* dq = nullptr;         // like q:  [batch, heads_q, seqlen_q, head_dim]
  void* dk = nullptr;         // like k:  [batch, heads_kv, seqlen_k, head_dim]   (packed with cu_seqlens_k)
  void* dv = nullptr;         // like v:  [batch, heads_kv, seqlen_k, head_dim_v]
  Strides d_o_stride, dq_stride, dk_stride, dv_stride;
  float* dsink = nullptr;     // [heads_q] fp32, with forward.sink; null: not computed
  bool deterministic = false;  // dQ bit-identical from run to run (one more pass over K and V)
};

// The strides of make_params' tensors: d_o like o, dq like q, dk like k, dv like v; pointers null.
BackwardParams make_backward_params(const Params& forward);

// Everything can_implement checks of the forward (o and lse as inputs), then: paged K/V and split-KV are
// kUnsupported (forward-only); d_o, dq, dk, dv non-null, aligned, with non-negative strides and extents that fit
// int64; dq, dk, dv, dsink free of self-overlap and of overlap with each other and every input; dsink only with a
// sink. Each failure names its field.
Status can_implement_backward(const BackwardParams& params);

// Where run_backward() rounds for `params` (docs/error-model.md §10; one bound per path):
//   kTensorCore   fp16/bf16 without dropout, with Q, K, V, O and dO rows 16-byte aligned: S, dP, dV, dK and dQ as
//                 mma.sync products with fp32 accumulation, P and dS rounded to the dtype before the products that
//                 take them;
//   kGeneralFp32  everything else (fp32, other layouts, dropout): CUDA cores in fp32.
// Reads only the params (pointers for their alignment), never the tensors.
ComputePath backward_path(const BackwardParams& params);

// Runs the backward pass on `stream` (cudaStream_t; nullptr = the legacy default stream). Asynchronous like run();
// the workspace (D, dQ's fp32 accumulator) is allocated on the stream and freed after the last kernel.
Status run_backward(const BackwardParams& params, void* stream = nullptr);

}  // namespace flashcheck
