// Work order of the tensor-core kernel: which work item (batch, head, Q tile) a CTA computes at each step, and
// how many CTAs a launch uses. Host- and device-visible (no CUDA headers): the kernel and the CPU tests read the
// same mapping.
//
// Items are numbered head by head, and within a head the Q tile with the most K/V tiles comes first (causal:
// the last Q tile). A CTA visits items scheduled_item(cta, 0), (cta, 1), ... until one is past the end:
//  - one item per CTA (grid = work_items): the hardware hands out CTAs as SMs free up;
//  - persistent (grid = CTAs resident at once): each CTA loops, and while it computes the last K/V tile of one
//    item it already loads the next item's Q and first K/V tile, so a short item's load latency hides behind
//    the previous item's math (kernel.cuh). Steps alternate direction ("snake"): with causal masks a CTA that
//    drew a long Q tile in one step draws a short one in the next.
// plan_grid() picks persistent, where the tiles allow it, unless one item per CTA is estimated to finish first
// (long causal sequences over few heads, where the snake order leaves some CTAs far more work than the hardware's
// dynamic hand-out would).
#pragma once

#include <cstdint>

#include "common/visibility.h"

namespace flashcheck::tensor_core {

using detail::Visibility;

// The item a CTA computes at step `step` of a grid of `grid` CTAs (even steps run forward, odd steps backward).
// A bijection of {0..grid-1} x {steps} onto the items: in a partial last step the CTAs that draw an item past
// the end stop, and those are exactly the CTAs no remaining item maps to.
constexpr int64_t scheduled_item(int64_t cta, int64_t step, int64_t grid) {
  return step * grid + (step % 2 == 0 ? cta : grid - 1 - cta);
}

// The Q tile of work item `item`: items run head by head, and within a head the Q tile with the most K/V
// tiles first (causal: the last one). The kernel and plan_grid() both read the order from here.
constexpr int64_t q_tile_of_item(int64_t item, int64_t q_tiles) { return q_tiles - 1 - item % q_tiles; }

// Split-KV (ProblemArgs::splits): a Q tile's runs are consecutive items, item = unsplit item * splits + split, so
// the order above holds for the unsplit items and the runs of one Q tile start side by side.
struct SplitItem {
  int64_t unsplit = 0;
  int64_t split = 0;
};
constexpr SplitItem split_item(int64_t item, int64_t splits) { return {item / splits, item % splits}; }

// Packed Q (cu_seqlens_q): work items are, per query head, slots of Q tiles. Sequence b's tiles take the slots
// [start(b), start(b) + ceil(seqlen_q(b) / block_m)) with start(b) = floor(cu_q[b] / block_m) + b: increasing in b
// and disjoint (ceil(s / m) <= floor((x + s) / m) - floor(x / m) + 1), and all below start(batch) (cu_q[batch] =
// total_q). So a launch has about one slot per real Q tile, an empty one at most per sequence, however long its
// longest sequence is.
constexpr int64_t packed_slot_start(int64_t cu_q_b, int64_t b, int64_t block_m) { return cu_q_b / block_m + b; }
constexpr int64_t packed_slots(int64_t total_q, int64_t batch, int64_t block_m) {
  return packed_slot_start(total_q, batch, block_m);
}

// K/V tiles the middle Q tile of a launch (q_tiles tiles of block_m rows) reads: the item length the per-launch
// choices go by (tensor_core_select()'s tile shape; kernel_ws.cuh's issue order and O staging).
constexpr int64_t middle_q_tile_reads(const Visibility& vis, int64_t q_tiles, int64_t block_m, int64_t block_n) {
  return vis.tile_range(q_tiles / 2 * block_m, block_m, block_n).count;
}

// What plan_grid() needs of one launch.
struct GridProblem {
  int64_t work_items = 0;  // q_tiles * batch * heads_q * splits
  int64_t q_tiles = 0;
  int64_t splits = 1;  // runs per Q tile (split_item)
  Visibility vis;  // which K/V tiles each Q tile reads (common/visibility.h)
  int64_t block_m = 0;
  int64_t block_n = 0;
  bool allow_persistent = true;  // false: one item per CTA whatever the order would give (tile_config.h, Persist)
};

// Work of an item, in K/V tiles' time: its K/V tiles plus the prologue and epilogue it cannot overlap. A persistent
// CTA loads an item's Q and first K/V tile during the previous item's last tile (kItemOverheadTiles); a CTA of
// its own waits for them (kOneItemOverheadTiles). The two are fitted to interleaved A/B of both grids on one
// build (H200, bf16; docs/design/tensor-core-kernel.md): causal windows of 256 keys at d = 128, N = 4096 (items
// of 3 K/V tiles, the snake order 6% over an even split) ran 1.28x persistent, long causal sequences 0.65-0.85x.
inline constexpr double kItemOverheadTiles = 0.5;
inline constexpr double kOneItemOverheadTiles = 1.7;
// Beyond this many items the order is not simulated: one item per CTA.
inline constexpr int64_t kPlanMaxItems = int64_t{1} << 17;

// The grid for a launch with `resident_ctas` CTAs able to run at once (SMs x CTAs per SM), in [1, 2^31 - 1]
// when work_items >= 1 (0 when there is no work): persistent (resident_ctas) where busiest_cta_work() of that grid
// is at most one_item_per_cta_time(), else one item per CTA.
int64_t plan_grid(const GridProblem& problem, int64_t resident_ctas);

// Work of the busiest CTA of a grid of `grid` CTAs under scheduled_item() (in tiles, kItemOverheadTiles per item).
double busiest_cta_work(const GridProblem& problem, int64_t grid);

// Estimated time of one item per CTA on `resident_ctas` CTAs at once, in the same unit: the hardware hands the
// next item to the first free CTA, so the launch takes about the total work over the CTAs, or the longest item if
// that is longer (kOneItemOverheadTiles per item).
double one_item_per_cta_time(const GridProblem& problem, int64_t resident_ctas);

}  // namespace flashcheck::tensor_core
