// The pipeline of the warp-specialized sm_90a forward kernel (kernel_ws.cuh): the TMA maps of the operands, the
// register split between producer and consumer warpgroups, the named barriers, the shared-memory layout and its
// slot counts, the full/empty mbarriers of each slot and how a CTA's tile count maps onto slots and phases, and the
// order in which a CTA takes its work items (schedule.h's, or a redo launch's list).
#pragma once

#include <cstdint>
#include <cuda.h>  // CUtensorMap and its enums (types only: the encoder is fetched through the runtime)

#include "fragments.cuh"
#include "schedule.h"

namespace flashcheck::detail {
inline namespace FLASHCHECK_KERNEL_VARIANT {
namespace tc_kernel {

// The four operands as TMA sees them: (head_dim, seqlen, heads, batch) with the tensors' own strides; boxes of
// 64 columns (one 128-byte swizzle row) by a tile's rows. Passed as a __grid_constant__ kernel parameter.
struct TmaMaps {  // CUtensorMap is 128-byte aligned itself
  CUtensorMap q;  // box (64, 64): one consumer warpgroup's Q rows
  CUtensorMap k;  // box (64, kBlockN)
  CUtensorMap v;  // box (64, kBlockN)
  CUtensorMap o;  // box (64, 64): one consumer warpgroup's O rows (TMA store: rows and columns past the tensor
                  // are not written)
};

#if defined(FLASHCHECK_TC_WGMMA)

inline constexpr int kProducerThreads = kWarpsPerWarpgroup * kWarpSize;  // one warpgroup, one issuing thread
// Registers per thread after setmaxnreg: the producer gives its share to the consumer warpgroups. The sum must
// equal what the launch allocated (__launch_bounds__(kThreads, 1)), or setmaxnreg.inc waits forever for registers
// that do not exist. Two consumer warpgroups: 24 * 128 + 240 * 256 = 168 * 384; three: 32 * 128 + 160 * 384 =
// 128 * 512.
template <int kConsumerWarpgroups>
struct RegisterSplit {
  static_assert(kConsumerWarpgroups == 2 || kConsumerWarpgroups == 3, "two or three consumer warpgroups");
  static constexpr int kProducer = kConsumerWarpgroups == 2 ? 24 : 32;
  static constexpr int kConsumer = kConsumerWarpgroups == 2 ? 240 : 160;
  static constexpr int kLaunch = kConsumerWarpgroups == 2 ? 168 : 128;
};
inline constexpr int kMaxConsumerWarpgroups = 3;
// Named barriers (0 is __syncthreads): every consumer thread; one consumer warpgroup (id + warpgroup).
inline constexpr int kBarConsumers = 1;
inline constexpr int kBarWarpgroup = 2;
// Ping-pong scheduling (WsForward's kPingPong): consumer warpgroup w issues its wgmma chains only on its turn,
// named barrier kBarTurn + w, and hands the turn to the next warpgroup (w + 1, round robin) right after, so one
// warpgroup's softmax runs while another's chains occupy the tensor cores (FlashAttention-3's inter-warpgroup
// overlap). Where it pays depends on the head dim and on how many K/V tiles an item reads (kTurnsChosen,
// ws_ping_pong()).
inline constexpr int kBarTurn = kBarWarpgroup + kMaxConsumerWarpgroups;

// How a consumer warpgroup stores O. Either way its Q rows go back to the producer after the item's last S, so
// the next item's Q loads during this item's last P*V and epilogue (short items: +7-16% at N <= 2048 against O
// staged in the Q rows).
//  - kOwnTile: O staged in a tile of its own laid out like Q and stored by TMA: the store is asynchronous, but
//    where the tile does not fit beside Cfg's K slots (d = 256: 64 KB Q + 4 x 32 KB K/V + 64 KB O), K keeps one.
//  - kRegisters: each thread stores its O straight from the accumulators (store_o_direct): no shared memory, so
//    all of Cfg's K slots, but the consumer issues the stores itself.
// d = 256 compiles both and picks per launch (ws_o_staging()); d = 64 and 128 use kOwnTile only.
enum class OStaging { kOwnTile, kRegisters };

// Which issue orders a tile shape compiles, measured against each other (docs/design/tensor-core-kernel.md): only
// d = 128 takes turns, chosen per launch (ws_ping_pong(): +5-10% on items of 8 or more K/V tiles, 2-7% slower on
// shorter ones and on windows). Free issue everywhere else: d = 64's 128x128 tiles, which serve masked launches with
// short items (free issue +4-6% at causal N = 512-2048, +3-7% on windows of 256 and 1024 keys; H200), d = 256
// (turns 0.70-0.99x) and three consumer warpgroups (d = 64's tall tiles: turns 0.75-1.11x against 0.80-1.09x free,
// and 168 bytes of spills at 160 registers).
template <class Cfg>
inline constexpr bool kTurnsChosen = Cfg::kBlockM == 2 * kWgmmaRows && Cfg::kHeadDim == 128;

// Slot counts, shared-memory layout and mbarriers of one kernel variant (tile shape, O staging, redo or not).
template <class Cfg, OStaging kOStaging, bool kRedo>
struct WsPipeline {
  static constexpr int kConsumerThreads = Cfg::kThreads;
  static constexpr int kConsumerWarpgroups = kConsumerThreads / kWarpgroupThreads;
  static_assert(kConsumerWarpgroups <= kMaxConsumerWarpgroups, "named barriers: one per consumer warpgroup");
  static constexpr int kThreads = kConsumerThreads + kProducerThreads;
  using Regs = RegisterSplit<kConsumerWarpgroups>;
  static constexpr int kColumnBlockElems = kSwizzleRowBytes / kElementBytes;  // 64
  static constexpr int kColumnBlocks = Cfg::kHeadDim / kColumnBlockElems;      // of Q and K rows
  static constexpr int kColumnBlocksV = Cfg::kHeadDimV / kColumnBlockElems;    // of V and O rows
  static constexpr uint32_t kQRowsBytes = kWgmmaRows * Cfg::kHeadDim * kElementBytes;  // one warpgroup's Q rows
  static constexpr uint32_t kKTileBytes = Cfg::kBlockN * Cfg::kHeadDim * kElementBytes;
  static constexpr uint32_t kVTileBytes = Cfg::kBlockN * Cfg::kHeadDimV * kElementBytes;
  static_assert(Cfg::kWgmma && Cfg::kMTiles == 1, "warp-specialized kernel: wgmma tiles, 16 rows per warp");
  static_assert(Cfg::kBlockM == kConsumerWarpgroups * kWgmmaRows, "one consumer warpgroup per 64 query rows");
  static_assert(Regs::kConsumer * kConsumerThreads + Regs::kProducer * kProducerThreads == Regs::kLaunch * kThreads &&
                    Regs::kLaunch * kThreads <= kRegistersPerSm && kRegistersPerSm / kThreads / 8 * 8 == Regs::kLaunch,
                "setmaxnreg: the warpgroups must share exactly the registers the launch allocates");
  static_assert(Cfg::kKTileSmemBytes == static_cast<int>(kKTileBytes) &&
                    Cfg::kVTileSmemBytes == static_cast<int>(kVTileBytes),
                "K/V tiles are dense swizzled boxes");
  static constexpr int kOSmemBytes = kOStaging == OStaging::kOwnTile ? Cfg::kOSmemBytes : 0;
  static constexpr int smem_bytes(int k_stages, int v_stages) {
    return Cfg::kQSmemBytes + kOSmemBytes + k_stages * Cfg::kKTileSmemBytes + v_stages * Cfg::kVTileSmemBytes +
           Cfg::kSmemAlignSlack;
  }
  static constexpr int kVStages = ws_kv_stages(Cfg::kHeadDim, Cfg::kHeadDimV, Cfg::kStages);
  // Where the own O tile does not fit beside the V slots' count of K slots, K keeps one: K(n) is free once S(n) has
  // read it, and K(n + 1) loads during the softmax of n (d = 256 with kOwnTile).
  static constexpr int kKStages = smem_bytes(kVStages, kVStages) <= kMaxSmemPerBlock ? kVStages : 1;
  static constexpr int kSmemBytes = smem_bytes(kKStages, kVStages);
  static_assert(kSmemBytes <= kMaxSmemPerBlock, "warp-specialized tiles exceed the sm_90 per-block limit");
  // Arrivals that release a warpgroup's Q rows: each of its warps after its last S.
  static constexpr int kQReleaseArrivals = kWarpsPerWarpgroup;

  // mbarriers: *_full completes when TMA has written a slot (one arrival with the byte count, then the bytes);
  // *_empty when every consumer that reads the slot is done with it. Slot s of K holds tile t with
  // t % kKStages == s, for the t-th K/V tile of this CTA over all its items (V alike); Q rows of warpgroup w
  // are slot w.
  struct Barriers {
    uint64_t q_full[kConsumerWarpgroups];
    uint64_t q_empty[kConsumerWarpgroups];
    uint64_t k_full[kKStages];
    uint64_t k_empty[kKStages];
    uint64_t v_full[kVStages];
    uint64_t v_empty[kVStages];
    // Scans of hidden V rows (scan_v), counted per CTA: scan k completes phase k of v_scanned, and a warp that
    // finds inf or NaN stamps v_bad[k % 2] with k + 1.
    uint64_t v_scanned;
    uint32_t v_bad[2];
  };

  // Shared memory: Q (kBlockM rows: warpgroup w's rows w*64.. in every 64-column block), then kKStages K tiles,
  // then kVStages V tiles, then (kOwnTile) O laid out like Q; all 1024-byte aligned (the 128-byte swizzle atom).
  struct Layout {
    uint32_t q, k, v, o;
    __device__ uint32_t k_slot(int s) const { return k + static_cast<uint32_t>(s) * Cfg::kKTileSmemBytes; }
    __device__ uint32_t v_slot(int s) const { return v + static_cast<uint32_t>(s) * Cfg::kVTileSmemBytes; }
    // Column block cb of warpgroup w's 64 rows of the Q (or O: base o) tile.
    __device__ uint32_t rows(uint32_t base, int w, int cb) const {
      return base + static_cast<uint32_t>(cb) * (Cfg::kBlockM * kSwizzleRowBytes) + w * kWgmmaRows * kSwizzleRowBytes;
    }
  };

  __device__ static uint32_t bar(const uint64_t& b) { return smem_address(&b); }

  // How many items the first launch listed for the redo launch.
  __device__ static int64_t listed_items(const KernelArgs& a) {
    return static_cast<int64_t>(__ldg(a.redo_count)) - (FC_MUTANT(kWsRedoListShort) ? 1 : 0);
  }

  // The item of this CTA's step-th turn (a.work_items once it has none left): schedule.h's order, or in a redo
  // launch the listed items, every gridDim.x-th from the CTA's index (the list's order does not matter: an item's
  // result depends on the item alone).
  __device__ static int64_t item_of_step(const KernelArgs& a, int64_t step) {
    if constexpr (kRedo) {
      const int64_t i = static_cast<int64_t>(blockIdx.x) + step * gridDim.x;
      return i < listed_items(a) ? __ldg(a.redo_items + i) : a.work_items;
    } else {
      return scheduled_item(blockIdx.x, step, gridDim.x);
    }
  }

  static_assert((kKStages & (kKStages - 1)) == 0 && (kVStages & (kVStages - 1)) == 0,
                "slot and phase come from the low bits of a wrapping tile count");

  template <int kSlots>
  __device__ static int slot(uint32_t t) {
    return static_cast<int>(t % kSlots);
  }
  template <int kSlots>
  __device__ static uint32_t phase(uint32_t t) {
    return (t / kSlots) & 1;
  }

  template <int kSlots>
  __device__ static void release(uint64_t (&empty)[kSlots], uint32_t t, int lane) {
    if (lane == 0) mbarrier_arrive(bar(empty[slot<kSlots>(t)]));
  }
};

#endif  // FLASHCHECK_TC_WGMMA

}  // namespace tc_kernel
}  // namespace FLASHCHECK_KERNEL_VARIANT
}  // namespace flashcheck::detail
