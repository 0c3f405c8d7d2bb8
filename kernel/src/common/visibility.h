// Which keys a query row sees, and what that makes of a (Q tile, K/V tile) pair: the one definition every
// kernel family, the tile schedule, the instrumentation and the host model read. Row i sees the keys
// [row_begin(i), row_end(i)); both ends never decrease with i, so a Q tile's first row sees the fewest keys of
// its tile rows and its last row the most, which is what the tile functions below rely on. The oracle has its
// own predicate written from the formulas in attention.h (a test compares the two on every (i, j)).
#pragma once

#include <cstdint>

#include "common/host_device.h"
#include "flashcheck/attention.h"
#include "flashcheck/instrument.h"

namespace flashcheck::detail {

struct Visibility {
  int64_t seqlen_q = 0;
  int64_t seqlen_k = 0;
  // Right edge: with bounded_end, row i sees keys j < i + end_offset (clamped to [0, seqlen_k]); else every
  // key up to seqlen_k. Causal top-left is end_offset = 1, bottom-right end_offset = seqlen_k - seqlen_q + 1.
  bool bounded_end = false;
  int64_t end_offset = 0;

  // First key row i sees. Every mask Params expresses starts at key 0; a left edge (a sliding window) enters
  // here and in first_tile().
  FLASHCHECK_HOST_DEVICE constexpr int64_t row_begin(int64_t) const { return 0; }

  // One past the last key row i sees, in [0, seqlen_k].
  FLASHCHECK_HOST_DEVICE constexpr int64_t row_end(int64_t i) const {
    if (!bounded_end) return seqlen_k;
    const int64_t end = i + end_offset;
    return end < 0 ? 0 : (end > seqlen_k ? seqlen_k : end);
  }

  FLASHCHECK_HOST_DEVICE constexpr bool sees(int64_t i, int64_t j) const { return row_begin(i) <= j && j < row_end(i); }

  // K/V tiles of block_n keys that the Q rows [q0, q0 + q_rows) read: [first_tile, tiles_end). Tiles outside
  // are skipped: no row of the Q tile sees any of their keys.
  FLASHCHECK_HOST_DEVICE constexpr int64_t first_tile(int64_t q0, int64_t block_n) const {
    return row_begin(q0) / block_n;
  }
  FLASHCHECK_HOST_DEVICE constexpr int64_t tiles_end(int64_t q0, int64_t q_rows, int64_t block_n) const {
    return ceil_div(row_end(q0 + q_rows - 1), block_n);
  }

  // Tiles before full_tiles_end(q0) hold only keys below seqlen_k that every row of a Q tile starting at q0
  // sees (the first row sees the fewest): they need no mask. Later tiles are partial: masked element by element.
  FLASHCHECK_HOST_DEVICE constexpr int64_t full_tiles_end(int64_t q0, int64_t block_n) const {
    return row_end(q0) / block_n;
  }

  // From this tile on, the mask hides keys below seqlen_k from some row of a Q tile starting at q0 (a causal
  // diagonal tile): its hidden rows may hold values that must not reach O. Tiles before it hide nothing (a
  // partial tile before it is partial only because it runs past seqlen_k). No such tile: a value past every tile.
  FLASHCHECK_HOST_DEVICE constexpr int64_t hiding_tiles_begin(int64_t q0, int64_t block_n) const {
    const int64_t end = row_end(q0);
    return end < seqlen_k ? end / block_n : ceil_div(seqlen_k, block_n);
  }

  // Kind of a visited (Q tile, K/V tile) pair for the coverage counters (instrument.h): diagonal if the mask
  // hides a key of the tile below seqlen_k from some valid row (the first row sees the fewest); else tail if
  // the K/V tile or the Q tile runs past its sequence; else full.
  FLASHCHECK_HOST_DEVICE constexpr TileKind tile_kind(int64_t q0, int64_t block_m, int64_t k0, int64_t block_n) const {
    const int64_t k_end = k0 + block_n < seqlen_k ? k0 + block_n : seqlen_k;
    if (row_end(q0) < k_end) return TileKind::kDiagonal;
    if (k0 + block_n > seqlen_k || q0 + block_m > seqlen_q) return TileKind::kTail;
    return TileKind::kFull;
  }
};

// The visibility rule of params' mask (attention.h's definitions).
constexpr Visibility make_visibility(Mask mask, int64_t seqlen_q, int64_t seqlen_k) {
  Visibility v;
  v.seqlen_q = seqlen_q;
  v.seqlen_k = seqlen_k;
  v.bounded_end = mask == Mask::kCausalTopLeft || mask == Mask::kCausalBottomRight;
  v.end_offset = mask == Mask::kCausalBottomRight ? seqlen_k - seqlen_q + 1 : 1;
  return v;
}
inline Visibility make_visibility(const Params& params) {
  return make_visibility(params.mask, params.seqlen_q, params.seqlen_k);
}

}  // namespace flashcheck::detail
