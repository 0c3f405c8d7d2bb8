// The epilogue every kernel family and the host model share: O = acc / l rounded once, LSE = m + ln l, and the
// empty-row rule; plus the instrumentation records (instrument.h) of the final row state, the per-tile trace and
// the tile-kind and rescale counters. Host and device: on the device the counters are atomic (several CTAs add
// to them), on the host plain adds.
#pragma once

#include <cstdint>

#include "common/host_device.h"
#include "common/softmax.h"
#include "common/visibility.h"
#include "flashcheck/instrument.h"

namespace flashcheck::detail {

// A row whose l is 0 saw no key with a finite score (fully masked, seqlen_k = 0, or every visible score -inf): by
// contract O = 0 and LSE = -inf, whatever the accumulator holds. A NaN l (NaN score) is not 0 and propagates.
FLASHCHECK_HOST_DEVICE inline bool is_empty_row(float l) { return l == 0.0f; }

// One element of O before its rounding to the output dtype.
FLASHCHECK_HOST_DEVICE inline float output_element(float acc, float l) { return is_empty_row(l) ? 0.0f : div_rn(acc, l); }

// The sink (attention.h) as one more logit of the row, merged into its final state: in log2 units
// m' = max(m, sink), l' = l * exp2(m - m') + exp2(sink - m'), and O's accumulator scales by alpha = exp2(m - m').
// A sink of -inf changes nothing, and the families skip the merge for it, so that a row's bits are those
// without a sink. A sink of +inf takes all the weight (O = 0, LSE = +inf); a NaN sink gives a NaN row.
struct SinkMerge {
  float alpha;  // O's accumulator factor
  float l;      // l'
  float m;      // m' (log2 units)
};
// p_offset_log2: the weights' exponent offset (kFp8POffsetLog2 on the fp8 path, whose l carries it; else 0, which
// adds nothing: x + 0 is x for every x but -0, whose exp2 is the same 1).
template <class Exp2>
FLASHCHECK_HOST_DEVICE SinkMerge merge_sink(float m, float l, float sink_log2, Exp2&& exp2, float p_offset_log2 = 0.0f) {
  if (sink_log2 != sink_log2) return {sink_log2, sink_log2, sink_log2};
  if (sink_log2 == -kNegInf) {  // all the weight: l is the sink's own, 2^offset
    return {0.0f, p_offset_log2 == 0.0f ? 1.0f : exp2(p_offset_log2), sink_log2};
  }
  SinkMerge r;
  r.m = fmax_f32(m, sink_log2);
  const float origin = exponent_origin(r.m);
  r.alpha = exp2(m - origin);
  r.l = l * r.alpha + exp2((sink_log2 - origin) + p_offset_log2);
  return r;
}

// A row's final state for the epilogue: O = output_element(alpha * acc, l), LSE = row_lse(m_natural, l). With a
// sink (sink[h] for query head h, natural units) merged in by merge_sink; else the state as it is (alpha = 1,
// which leaves acc's bits). m_log2 is the base of l in log2 units, m_natural the same base as the family
// converts it.
struct RowFinal {
  float alpha;
  float l;
  float m_natural;
  bool keys_empty;  // no key carried weight (l == 0 before the merge): O = 0 whatever the accumulator holds
};
template <class Exp2>
FLASHCHECK_HOST_DEVICE RowFinal finish_row(float m_log2, float m_natural, float l, const float* sink, int64_t h,
                                           Exp2&& exp2, float p_offset_log2 = 0.0f) {
  if (sink == nullptr || sink[h] == kNegInf) return {1.0f, l, m_natural, is_empty_row(l)};
  const SinkMerge merged = merge_sink(m_log2, l, mul_rn(sink[h], kLog2e), exp2, p_offset_log2);
  return {merged.alpha, merged.l, mul_rn(merged.m, kLn2), is_empty_row(l)};
}

// One element of O from its accumulator and the row's final state (before the rounding to the output dtype).
// A row whose keys carried no weight gives 0 even beside a sink (0 * NaN from a weightless key's value must not
// reach O), and NaN beside a NaN sink (merge_sink's NaN alpha).
FLASHCHECK_HOST_DEVICE inline float final_output(float acc, const RowFinal& fin) {
  if (fin.keys_empty) return fin.alpha != fin.alpha ? fin.alpha : 0.0f;
  return output_element(acc * fin.alpha, fin.l);
}

// Split-KV: a row's runs (attention.h, "Split-KV"), each an online-softmax state (m_s in log2 units, l_s and the
// accumulator relative to it), merge in split order as the online softmax merges tiles: the base is
// M = max_s m_s, each run moves onto it by alpha_s = exp2(m_s - exponent_origin(M)), l = sum_s fma(l_s, alpha_s, .)
// and acc = sum_s fma(acc_s, alpha_s, .) from 0 in split order; finish_row then takes m = M. A run that saw no
// key (m_s = -inf, l_s = 0, acc_s = 0) adds nothing.
FLASHCHECK_HOST_DEVICE inline float merged_base(const float* m, int32_t splits, int64_t stride) {
  float merged = kNegInf;
  for (int32_t s = 0; s < splits; ++s) merged = fmax_f32(merged, m[s * stride]);
  return merged;
}
template <class Exp2>
FLASHCHECK_HOST_DEVICE float run_factor(float m_run, float merged, Exp2&& exp2) {
  return exp2(m_run - exponent_origin(merged));
}

// LSE from the row's final base m (natural-log units) and sum l relative to it.
FLASHCHECK_HOST_DEVICE inline float row_lse(float m_natural, float l) {
#if defined(__CUDA_ARCH__)
  return is_empty_row(l) ? kNegInf : m_natural + logf(l);
#else
  return is_empty_row(l) ? kNegInf : m_natural + std::log(l);
#endif
}

// Rescale bucket of a row whose running max moved `moves` times: min(bit_width(moves), kRescaleBuckets - 1).
FLASHCHECK_HOST_DEVICE constexpr int rescale_bucket(int64_t moves) {
  int width = 0;
  while (moves > 0 && width < kRescaleBuckets - 1) {
    ++width;
    moves >>= 1;
  }
  return width;
}

FLASHCHECK_HOST_DEVICE inline void add_count(uint64_t* counter, uint64_t n) {
#if defined(__CUDA_ARCH__)
  atomicAdd(reinterpret_cast<unsigned long long*>(counter), static_cast<unsigned long long>(n));
#else
  *counter += n;
#endif
}

// The trace slot of flat row `flat_row` (b * heads_q + h) * seqlen_q + i, or -1 if the row is not traced.
FLASHCHECK_HOST_DEVICE inline int trace_slot(const Instrumentation& inst, int64_t flat_row) {
  int slot = -1;
  for (int32_t r = 0; inst.trace_rows != nullptr && r < inst.trace_row_count; ++r) {
    if (inst.trace_rows[r] == flat_row) slot = r;
  }
  return slot;
}

// A traced row's (m, l) after its Q tile's K/V tile number `tile` (processing order).
FLASHCHECK_HOST_DEVICE inline void record_trace(const Instrumentation& inst, int slot, int64_t tile, float m_natural,
                                                float l) {
  if (slot < 0 || tile >= inst.max_tiles) return;
  const int64_t at = int64_t{slot} * inst.max_tiles + tile;
  if (inst.trace_m != nullptr) inst.trace_m[at] = m_natural;
  if (inst.trace_l != nullptr) inst.trace_l[at] = l;
}

// A row's final state: m, l and the rescale bucket of its max's moves.
FLASHCHECK_HOST_DEVICE inline void record_row(const Instrumentation& inst, int64_t flat_row, float m_natural, float l,
                                              int64_t moves) {
  if (inst.row_m != nullptr) inst.row_m[flat_row] = m_natural;
  if (inst.row_l != nullptr) inst.row_l[flat_row] = l;
  if (inst.rescale_buckets != nullptr) add_count(&inst.rescale_buckets[rescale_bucket(moves)], 1);
}

// The tile kinds of one Q tile (rows [q0, q0 + block_m)) that visits K/V tiles [first, end): each visited tile by
// its kind, the others as skipped. Once per Q tile (one thread of a CTA).
FLASHCHECK_HOST_DEVICE inline void count_tile_kinds(const Instrumentation& inst, const Visibility& vis, int64_t q0,
                                                    int64_t block_m, int64_t block_n, int64_t first, int64_t end) {
  if (inst.tile_kind_counts == nullptr) return;
  uint64_t kinds[kTileKindCount] = {};
  kinds[static_cast<int>(TileKind::kSkipped)] = static_cast<uint64_t>(ceil_div(vis.seqlen_k, block_n) - (end - first));
  for (int64_t n = first; n < end; ++n) ++kinds[static_cast<int>(vis.tile_kind(q0, block_m, n * block_n, block_n))];
  for (int kind = 0; kind < kTileKindCount; ++kind) {
    if (kinds[kind] != 0) add_count(&inst.tile_kind_counts[kind], kinds[kind]);
  }
}

}  // namespace flashcheck::detail
