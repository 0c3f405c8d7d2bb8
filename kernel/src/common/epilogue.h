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
