// The work items of the fp16/bf16 tensor-core forward kernels: which (sequence, query head, Q tile, split run) a
// CTA's turn computes, in schedule.h's order, and what the item reads of its sequence (rows, lengths, visibility,
// the K/V tiles it reads and which of them need a mask). Both kernels (kernel.cuh, kernel_ws.cuh) take their items
// from here.
#pragma once

#include <cstdint>

#include "common/mutants.cuh"
#include "forward.h"
#include "schedule.h"

namespace flashcheck::detail {
inline namespace FLASHCHECK_KERNEL_VARIANT {
namespace tc_kernel {

using namespace ::flashcheck::tensor_core;  // the schedule (schedule.h) and tile constants

// One work item: Q tile q_tile of (sequence b, query head h), in the order of schedule.h, with what the item
// reads of its sequence. Dense problems (and the variants without kSeq) take the launch's own lengths and
// visibility; with sequences (attention.h, contiguous ones: the tensor-core family runs no paged cache) each
// item carries its sequence's, and the rows it addresses start at the sequence's first packed row.
struct WorkItem {
  int64_t b, h, hk;
  int64_t q0, q_rows;  // q_rows <= 0: an empty slot of a packed launch (item_at), which every loop skips
  int64_t lse0;        // LSE row of the sequence's row 0 for head h (ProblemArgs::row_block)
  int64_t qb, q_row0;  // Q and O: the batch index and the row of the sequence's row 0 (packed Q: 0 and cu_q[b])
  int64_t kb, k_row0;  // K and V alike (packed K/V: 0 and cu_k[b])
  Visibility vis;      // the sequence's rule; vis.seqlen_q and vis.seqlen_k are its lengths
  // The K/V tiles the Q tile reads (common/visibility.h, TileRange): tile n of the item is tile first + n.
  // Tile indices fit in int: seqlen_k / kBlockN < 2^31 for any tensor a GPU can hold.
  int first;
  int n_tiles;
  int full_begin, full_end;  // tiles [full_begin, full_end) need no mask
  int clean_end;             // tiles outside [full_begin, clean_end) hide keys below seqlen_k from some row
  int split;                 // split-KV (kSeq variants): the run of the Q tile's tiles this item processes
  __device__ bool needs_mask(int n) const { return n < full_begin || n >= full_end; }
  __device__ bool hides_keys(int n) const { return n < full_begin || n >= clean_end; }
};

template <class Cfg, bool kSeq>
struct Scheduler {
  using Item = WorkItem;

  __device__ static Item item_at(const KernelArgs& a, int64_t item) {
    Item it;
    it.split = 0;
    if (kSeq && a.splits > 1) {  // schedule.h, split_item
      const SplitItem at = split_item(item, a.splits);
      item = at.unsplit;
      it.split = static_cast<int>(at.split);
    }
    int64_t q_tile;
    if (kSeq && a.cu_q != nullptr) {  // a.q_tiles slots per head (schedule.h, packed_slots)
      it.h = item / a.q_tiles;
      const int64_t slot = item - it.h * a.q_tiles;
      const auto start = [&](int64_t b) { return packed_slot_start(a.cu_q[b], b, Cfg::kBlockM); };
      int64_t lo = 0, hi = a.batch;  // the last sequence whose first slot is <= slot
      while (hi - lo > 1) {
        const int64_t mid = (lo + hi) / 2;
        if (start(mid) <= slot) lo = mid; else hi = mid;
      }
      it.b = lo;
      const int64_t tiles = ceil_div(int64_t{a.cu_q[lo + 1]} - a.cu_q[lo], int64_t{Cfg::kBlockM});
      const int64_t r = slot - start(lo);
      q_tile = r < tiles ? tiles - 1 - r : -1;  // the longest causal tile of the sequence first
    } else {
      // Consecutive items share a head, so its K/V stays in L2; within a head the longest causal tiles go first.
      const int64_t bh = item / a.q_tiles;
      q_tile = q_tile_of_item(item, a.q_tiles);
      it.b = bh / a.heads_q;
      it.h = bh - it.b * a.heads_q;
    }
    it.hk = it.h / a.group_size;
    if (kSeq && a.has_sequences()) {
      const SequenceView seq = a.sequence(it.b);
      it.vis = seq.vis;
      it.lse0 = a.row_block(it.b, it.h);
      it.qb = a.cu_q != nullptr ? 0 : it.b;
      it.q_row0 = seq.q_row0;
      it.kb = a.cu_k != nullptr ? 0 : it.b;
      it.k_row0 = a.cu_k != nullptr ? a.cu_k[it.b] : 0;
    } else {
      it.vis = a.vis;
      it.lse0 = (it.b * a.heads_q + it.h) * a.seqlen_q;
      it.qb = it.kb = it.b;
      it.q_row0 = it.k_row0 = 0;
    }
    it.q0 = q_tile * Cfg::kBlockM;
    it.q_rows = q_tile < 0 ? 0 : min(int64_t{Cfg::kBlockM}, it.vis.seqlen_q - it.q0);
    if (it.q_rows <= 0) {
      it.first = it.n_tiles = it.full_begin = it.full_end = it.clean_end = 0;
      return it;
    }
    Visibility::TileRange tiles = it.vis.tile_range(it.q0, it.q_rows, Cfg::kBlockN);
    if (kSeq && a.splits > 1) tiles = tiles.run(it.split, a.splits);
    it.first = static_cast<int>(tiles.first);
    it.n_tiles = static_cast<int>(tiles.count);
    it.full_begin = static_cast<int>(FC_MUTANT(kTcWindowLeftFirstTileOnly) && tiles.full_begin > 1 ? 1 : tiles.full_begin);
    it.full_end = static_cast<int>(tiles.full_end);
    it.clean_end = static_cast<int>(tiles.clean_end);
    return it;
  }
};

}  // namespace tc_kernel
}  // namespace FLASHCHECK_KERNEL_VARIANT
}  // namespace flashcheck::detail
