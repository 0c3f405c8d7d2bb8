// The backward pass's arithmetic, one definition for the CUDA kernels (backward/kernel.cuh) and the host model
// (backward/host_model.cpp): the argument block, the tiles, which rows a K/V tile's keys are seen by, and the
// per-(row, key) chain score -> P -> dS -> dT. Plain C++ with host/device qualifiers.
//
// Rounding points (docs/error-model.md §10, the general class): x = fl(fl(q.k) fl(scale log2 e)) (softcap: fl(c log2 e)
// tanh(fl(q.k fl(scale / c)))), P = exp2(fl(x - fl(LSE log2 e))), dP = fl(dO.v) and D = fl(dO.O) as FMA chains in
// column order, dS = fl(P fl(dP - D)), dT = fl(dS fl(1 - fl(t t))) with the softcap's t, dV_j = FMA chain of P_ij dO_i
// and dK_j of dT_ij q_i over the rows in order (every query head of the group in turn), dQ_i = partial FMA chains of
// dT_ij k_j over each K/V tile's keys in order, the partials added tile after tile (atomically by default: then in
// any order); dQ and dK scaled by fl(scale * sum) and every gradient rounded to the dtype once.
// Dropout (dropout_p > 0; the CUDA-core kernels only, backward_path): per (row, key) P and dP as above, then for a
// kept element w = fl(P s32) and dP' = fl(dP s32), for a dropped one w = dP' = 0, with s32 = dropout_keep_scale_f32(p);
// dS = fl(P fl(dP' - D)) and dV_j sums w_ij dO_i in place of P_ij dO_i. D = fl(dO.O) takes the forward's dropped O.
// With p = 0 none of it runs.
#pragma once

#include <cstdint>

#include "common/args.h"
#include "common/host_device.h"
#include "common/softmax.h"

namespace flashcheck::detail::backward {

inline constexpr int kBlockKeys = 32;  // keys of a K/V tile: one CTA's dK, dV rows, one partial sum of dQ
inline constexpr int kBlockRows = 32;  // query rows a CTA takes at a time
inline constexpr int kThreads = 256;
// The tensor-core key-tile kernel (backward/tensor_core.cuh): K/V tiles of kTcKeys keys, head dims up to kTcMaxDim.
inline constexpr int kTcKeys = 64;
inline constexpr int kTcMaxDim = 256;

struct Args : ProblemArgs {
  TensorArg d_o, dq, dk, dv;  // d_o read; dq, dk, dv written
  float* dsink = nullptr;     // [heads_q] or null
  float* d = nullptr;         // [lse_rows] D = dO.O, the preprocessing pass's
  float* dq_acc = nullptr;    // [lse_rows, head_dim] fp32 sums of dT k over the keys (atomic mode)
  bool deterministic = false;

  // Key rows that sequence b's K and V hold: seqlen_k(b) keys, then (packed with cu_seqlens_k) the slots up to the
  // next sequence, whose dK and dV are zero.
  FLASHCHECK_HOST_DEVICE int64_t key_capacity(int64_t b) const {
    return cu_k != nullptr ? cu_k[b + 1] - cu_k[b] : seqlen_k;
  }
};

// The keys of the K/V tile at key k0 below seqlen_k, 0..kBlockKeys.
FLASHCHECK_HOST_DEVICE constexpr int keys_in_tile(int64_t seqlen_k, int64_t k0) {
  const int64_t left = seqlen_k - k0;
  return static_cast<int>(left < 0 ? 0 : (left > kBlockKeys ? kBlockKeys : left));
}

// The query rows [begin, end) that see some key of [k0, k1) (k0 < k1): row_begin and row_end never decrease with i,
// so they are contiguous, found by bisection.
struct RowSpan {
  int64_t begin = 0, end = 0;
};
FLASHCHECK_HOST_DEVICE inline RowSpan rows_seeing(const Visibility& vis, int64_t k0, int64_t k1) {
  int64_t lo = 0, hi = vis.seqlen_q;  // first row with row_end(i) > k0
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (vis.row_end(mid) > k0) hi = mid; else lo = mid + 1;
  }
  RowSpan span{lo, lo};
  hi = vis.seqlen_q;  // first row with row_begin(i) >= k1
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (vis.row_begin(mid) >= k1) hi = mid; else lo = mid + 1;
  }
  span.end = lo;
  return span;
}

// A score in log2 units and, with a softcap, t = tanh of the capped score over c (0 without).
struct Score {
  float x;
  float t;
};
FLASHCHECK_HOST_DEVICE inline Score score_log2(float dot, const ProblemArgs& a) {
  if (!a.has_softcap) return {mul_rn(dot, a.scale_log2), 0.0f};
  const float t = capped_tanh(dot, a.softcap);
  return {mul_rn(a.softcap.cap_log2, t), t};
}

// LSE in log2 units, what P's exponent subtracts.
FLASHCHECK_HOST_DEVICE inline float lse_log2(float lse) { return mul_rn(lse, kLog2e); }

// P = exp2(x - LSE log2 e); a row without a usable key (LSE = -inf, no sink) has P = 0, not exp2(+inf).
template <class Exp2>
FLASHCHECK_HOST_DEVICE float weight(float x, float lse2, Exp2&& exp2) {
  return lse2 == kNegInf ? 0.0f : exp2(x - lse2);
}

// dT = dS (1 - t^2) with a softcap, dS = P (dP - D) without. P = 0 (a row whose sink is +inf, or an underflowed
// weight) gives dS = 0 where dP - D overflowed fp32 (the exact difference is finite: 0 times it is 0, not 0 * inf =
// NaN); a NaN difference (a NaN in dO, V or O) stays NaN.
FLASHCHECK_HOST_DEVICE inline float score_grad(float p, float dp, float d, float t, bool softcap) {
  const float diff = dp - d;
  if (p == 0.0f && (diff == -kNegInf || diff == kNegInf)) return 0.0f;
  const float ds = mul_rn(p, diff);
  return softcap ? mul_rn(ds, 1.0f - mul_rn(t, t)) : ds;
}

// Dropout's terms of a visible pair: dV's weight w and the dP that dS takes (dropout_pair).
struct DroppedPair {
  float w;
  float dp;
};
FLASHCHECK_HOST_DEVICE inline DroppedPair dropout_pair(float p, float dp, bool kept, float keep_scale) {
  if (!kept) return {0.0f, 0.0f};
  return {mul_rn(p, keep_scale), mul_rn(dp, keep_scale)};
}

// A row's term of dsink: -exp2(sink log2 e - LSE log2 e) D; a sink of -inf is none, and a sink of +inf (LSE = +inf)
// takes all the weight and passes nothing back.
template <class Exp2>
FLASHCHECK_HOST_DEVICE float sink_term(float sink, float lse2, float d, Exp2&& exp2) {
  if (sink == kNegInf || lse2 == -kNegInf) return 0.0f;
  return -mul_rn(exp2(mul_rn(sink, kLog2e) - lse2), d);
}

// The K/V tiles of block kBlockKeys that rows [i0, i1) of a sequence visit: [first, end).
struct TileSpan {
  int64_t first = 0, end = 0;
};
FLASHCHECK_HOST_DEVICE inline TileSpan tiles_seen(const Visibility& vis, int64_t i0, int64_t i1) {
  const int64_t keys_begin = vis.row_begin(i0), keys_end = vis.row_end(i1 - 1);
  if (keys_end <= keys_begin) return {0, 0};
  return {keys_begin / kBlockKeys, ceil_div(keys_end, kBlockKeys)};
}

}  // namespace flashcheck::detail::backward
