// The causal masks and the tile classification, as plain functions usable from host and device code, so
// the kernels, the host model, the oracle (through visible_keys) and the instrumentation agree on which
// keys a row sees. Invariant: the visible keys of row i are the prefix [0, visible_key_count(i)), and the
// count never decreases with i, so the last row of a Q tile bounds the K tiles the tile must visit.
#pragma once

#include <cstdint>

#include "flashcheck/attention.h"
#include "flashcheck/instrument.h"

#if defined(__CUDACC__)
#define FLASHCHECK_HOST_DEVICE __host__ __device__
#else
#define FLASHCHECK_HOST_DEVICE
#endif

namespace flashcheck::detail {

// Keys [0, result) are visible to query row i. Top-left: j <= i. Bottom-right: j <= i + (seqlen_k - seqlen_q),
// which leaves the first seqlen_q - seqlen_k rows without any key when seqlen_q > seqlen_k.
FLASHCHECK_HOST_DEVICE constexpr int64_t visible_key_count(Mask mask, int64_t i, int64_t seqlen_q,
                                                           int64_t seqlen_k) {
  int64_t end = seqlen_k;
  if (mask == Mask::kCausalTopLeft) {
    end = i + 1;
  } else if (mask == Mask::kCausalBottomRight) {
    end = i + 1 + (seqlen_k - seqlen_q);
  }
  end = end < 0 ? 0 : end;
  return end > seqlen_k ? seqlen_k : end;
}

FLASHCHECK_HOST_DEVICE constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The K/V tiles a Q tile starting at row m0 visits: [0, result). Tiles past it are skipped (fully masked).
FLASHCHECK_HOST_DEVICE constexpr int64_t visited_k_tiles(Mask mask, int64_t m0, int64_t block_m, int64_t block_n,
                                                         int64_t seqlen_q, int64_t seqlen_k) {
  const int64_t last_row = (m0 + block_m < seqlen_q ? m0 + block_m : seqlen_q) - 1;
  return ceil_div(visible_key_count(mask, last_row, seqlen_q, seqlen_k), block_n);
}

// Kind of a visited (Q tile, K tile) pair for the coverage counters. Diagonal: the mask hides some key
// of the tile (below seqlen_k) from some valid row; the first row sees the fewest keys, so it decides.
// Tail: otherwise, the K tile or the Q tile runs past its sequence end. Full: neither.
FLASHCHECK_HOST_DEVICE constexpr TileKind classify_tile(Mask mask, int64_t m0, int64_t block_m, int64_t k0,
                                                        int64_t block_n, int64_t seqlen_q, int64_t seqlen_k) {
  const int64_t k_end = k0 + block_n < seqlen_k ? k0 + block_n : seqlen_k;
  if (mask != Mask::kNone && visible_key_count(mask, m0, seqlen_q, seqlen_k) < k_end) return TileKind::kDiagonal;
  if (k0 + block_n > seqlen_k || m0 + block_m > seqlen_q) return TileKind::kTail;
  return TileKind::kFull;
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

}  // namespace flashcheck::detail
