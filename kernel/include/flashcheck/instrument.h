// Instrumentation of the online softmax: per-row final (m, l), the (m, l) pair after every K/V tile for
// sampled rows, and counters of what ran (tile kinds, rescales). Shared by the host model and the
// instrumented GPU build (library flashcheck_kernel_instrumented, compiled with FLASHCHECK_INSTRUMENT=1).
// The production library carries none of this: run() has no instrumentation parameter and the kernel
// body's instrumentation is compiled out (tested by a symbol check on the production object).
#pragma once

#include <cstdint>

#include "flashcheck/attention.h"

namespace flashcheck {

// Tile kinds the fuzzer and the coverage report count.
enum class TileKind : int32_t {
  kFull = 0,       // all keys of the tile visible to all rows of the Q tile, no seqlen tail
  kTail = 1,       // the last, partial K tile or a partial Q tile
  kDiagonal = 2,   // the causal diagonal crosses the tile
  kSkipped = 3,    // fully masked for the whole Q tile: not computed
};
inline constexpr int kTileKindCount = 4;
inline constexpr int kRescaleBuckets = 8;  // bucket b counts rows whose running max moved r times, b = min(bit_width(r), 7)

// The tensor-core path's reference slack (log2 units): a tile's own max serves as the reference of its p where it
// lies within this of the running max, so that path's reported m lies up to kTensorCoreRefSlackLog2 * ln 2 below the
// row max and its l up to 2^kTensorCoreRefSlackLog2 above the running-max formulation's.
inline constexpr float kTensorCoreRefSlackLog2 = 8.0f;

// All pointers are optional (null = not recorded). For the GPU they are device pointers, for the host
// model host pointers. Per-row arrays are [batch, heads_q, seqlen_q] contiguous, like LSE.
struct Instrumentation {
  // final base m of l (natural-log units): the running max of scale*score, or on the tensor-core path the
  // reference of the last tile, up to kTensorCoreRefSlackLog2 * ln 2 below it; -inf for rows with no visible key
  float* row_m = nullptr;
  float* row_l = nullptr;  // final running sum: sum_j exp(s_j - m); 0 for rows with no visible key
  // Per-row arrays (row_m, row_l) and trace_rows use LSE's row index: (b * heads_q + h) * seqlen_q + i, or
  // h * total_q + cu_seqlens_q[b] + i when Q is packed. Split-KV launches (num_splits > 1) record row_m, row_l and
  // the tile kinds, and no traces (a run sees only its share of a row's tiles).
  // Traced rows: trace_rows[r] is a flat row index (b * heads_q + h) * seqlen_q + i with i < seqlen_q.
  // Slot t of row r is trace_m[r * max_tiles + t]: the row's (m, l) after K/V tile t = 0, 1, ... (processing
  // order) of the tiles its Q tile visits, written for every such tile with t < max_tiles, including tiles
  // the row itself sees no key of (the pair is then unchanged). No slot is written for the K/V tiles the Q
  // tile skips (past the causal diagonal) nor after the last tile: those are left as they were (poison them).
  const int64_t* trace_rows = nullptr;
  int32_t trace_row_count = 0;
  int32_t max_tiles = 0;
  float* trace_m = nullptr;
  float* trace_l = nullptr;
  uint64_t* tile_kind_counts = nullptr;  // [kTileKindCount], accumulated (+=)
  uint64_t* rescale_buckets = nullptr;   // [kRescaleBuckets], accumulated (+=)
};

// GPU, instrumented build only.
Status run_instrumented(const Params& params, const Instrumentation& inst, void* stream = nullptr);

}  // namespace flashcheck
