// The producer warpgroup of the warp-specialized sm_90a forward kernel (kernel_ws.cuh): one elected thread moves
// every Q, K and V tile by TMA into its slot, in the consumers' item order, once the slot is released.
#pragma once

#include "scheduler.cuh"
#include "ws_pipeline.cuh"

namespace flashcheck::detail {
inline namespace FLASHCHECK_KERNEL_VARIANT {
namespace tc_kernel {

#if defined(FLASHCHECK_TC_WGMMA)

template <class Cfg, OStaging kOStaging, bool kSeq, bool kRedo>
struct WsProducer : WsPipeline<Cfg, kOStaging, kRedo> {
  using Pipe = WsPipeline<Cfg, kOStaging, kRedo>;
  using typename Pipe::Barriers;
  using typename Pipe::Layout;
  using Item = WorkItem;
  using Pipe::bar;
  using Pipe::item_of_step;
  using Pipe::kColumnBlockElems;
  using Pipe::kColumnBlocks;
  using Pipe::kConsumerWarpgroups;
  using Pipe::kKStages;
  using Pipe::kColumnBlocksV;
  using Pipe::kKTileBytes;
  using Pipe::kVTileBytes;
  using Pipe::kQRowsBytes;
  using Pipe::kVStages;

  // The producer: for each item of this CTA (schedule.h order), Q rows per consumer warpgroup and K/V tiles,
  // each into its slot once the slot's previous contents are released. K(0) goes first: in a persistent CTA its
  // slot frees before the Q rows do (they hold the previous item's O until its store has read them).
  __device__ static void produce(const KernelArgs& a, const TmaMaps& maps, Barriers& bars, const Layout& lay) {
    prefetch_tensor_map(&maps.q);
    prefetch_tensor_map(&maps.k);
    prefetch_tensor_map(&maps.v);
    prefetch_tensor_map(&maps.o);
    uint32_t tile = 0;   // K/V tiles of this CTA so far (mod 2^32)
    uint32_t items = 0;  // items of this CTA so far (uses of the Q slots)
    for (int64_t step = 0;; ++step) {
      const int64_t item = item_of_step(a, step);
      if (item >= a.work_items) break;
      const Item it = Scheduler<Cfg, kSeq>::item_at(a, item);
      if (it.q_rows <= 0) continue;  // an empty slot (packed Q): the consumers skip it too
      const int qb = static_cast<int>(it.qb);
      const int kb = static_cast<int>(it.kb);
      const int hk = static_cast<int>(it.hk);
      const auto load_q = [&] {
        for (int w = 0; w < kConsumerWarpgroups; ++w) {
          mbarrier_wait(bar(bars.q_empty[w]), (items & 1) ^ 1);
          if (it.n_tiles == 0) {  // nothing to read: the slot only carries the item's O (zeros)
            mbarrier_arrive(bar(bars.q_full[w]));
            continue;
          }
          FC_PERTURB(kPerturbWsProducerQ, items);
          mbarrier_arrive_expect_tx(bar(bars.q_full[w]), kQRowsBytes);
          for (int cb = 0; cb < kColumnBlocks; ++cb)
            tma_load_4d(lay.rows(lay.q, w, cb), &maps.q, bar(bars.q_full[w]), cb * kColumnBlockElems,
                        static_cast<int>(it.q_row0 + it.q0) + w * kWgmmaRows, static_cast<int>(it.h), qb);
        }
      };
      if (it.n_tiles == 0) load_q();
      for (int n = 0; n < it.n_tiles; ++n, ++tile) {
        const int row = static_cast<int>(it.k_row0) + (it.first + n) * Cfg::kBlockN;
        load_kv_tile<kPerturbWsProducerK, kColumnBlocks, kKTileBytes>(bars.k_full, bars.k_empty, lay.k,
                                                                      Cfg::kKTileSmemBytes, &maps.k, tile, row, hk, kb);
        if (n == 0) load_q();
        load_kv_tile<kPerturbWsProducerV, kColumnBlocksV, kVTileBytes>(bars.v_full, bars.v_empty, lay.v,
                                                                       Cfg::kVTileSmemBytes, &maps.v, tile, row, hk, kb);
      }
      ++items;
    }
  }

  // The CTA's K/V tile `tile` of one operand (K or V: kStages slots at `slots`, `slot_bytes` apart, with their
  // barriers) into its slot once the slot's previous contents are released: kBlocks TMA boxes of 64 columns of key
  // rows [row, row + kBlockN) of K/V head (hk, kb) from `map`, kBytes in all.
  template <PerturbSite kSite, int kBlocks, uint32_t kBytes, int kStages>
  __device__ static void load_kv_tile(uint64_t (&full)[kStages], uint64_t (&empty)[kStages], uint32_t slots,
                                      uint32_t slot_bytes, const CUtensorMap* map, uint32_t tile, int row, int hk,
                                      int kb) {
    const int s = Pipe::template slot<kStages>(tile);
    mbarrier_wait(bar(empty[s]), Pipe::template phase<kStages>(tile) ^ 1);
    FC_PERTURB(kSite, tile);
    mbarrier_arrive_expect_tx(bar(full[s]), kBytes);
    const uint32_t dst = slots + static_cast<uint32_t>(s) * slot_bytes;
    for (int cb = 0; cb < kBlocks; ++cb)
      tma_load_4d(dst + cb * (Cfg::kBlockN * kSwizzleRowBytes), map, bar(full[s]), cb * kColumnBlockElems, row, hk, kb);
  }
};

#endif  // FLASHCHECK_TC_WGMMA

}  // namespace tc_kernel
}  // namespace FLASHCHECK_KERNEL_VARIANT
}  // namespace flashcheck::detail
