// Warp-specialized sm_90a forward kernel of the tensor-core family (FlashAttention-3's structure, written here):
// one producer warpgroup whose single elected thread moves every tile with TMA (bulk tensor copies into the
// 128-byte-swizzled layout the wgmma descriptors read), and two consumer warpgroups of 64 query rows each (three
// with d = 64's tall tiles, tile_config.h) that only compute. Full/empty mbarriers per shared-memory slot replace
// the per-tile __syncthreads of kernel.cuh, so the consumers never wait for a load they could have overlapped and
// never wait for each other, and loads run ahead across work items of a persistent CTA. Inside a consumer the wgmma
// chains are software-pipelined: S(n) = Q K(n)^T is issued, then O += P(n-1) V(n-1), and the softmax of tile n runs
// while P V is still on the tensor cores (only the O rescale waits for it).
//
// Arithmetic is kernel.cuh's, call for call (the same Forward<> helpers: mask, softmax, P rounding, exact
// hidden-V path, epilogue), in the same order per row, so both kernels return bit-identical O and LSE
// (kernel_gpu_test: Gpu_F16Bf16.WarpSpecializedMatchesCpAsyncKernel); the error model (families.h) does not
// change. Used where TMA can address the tensors (encode_operand(): 16-byte rows, i.e. head_dim % 8 == 0, on
// top of the family's aligned bases and strides); other launches run kernel.cuh.
#pragma once

#include <cuda.h>  // CUtensorMap and its enums (types only: the encoder is fetched through the runtime)
#include <cudaTypedefs.h>

#include <algorithm>
#include <string>
#include <type_traits>
#include <utility>

#include "common/combine.cuh"
#include "kernel.cuh"

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

template <typename T, class Cfg, OStaging kOStaging, bool kPingPong, bool kExtras, bool kSeq, bool kRedo,
          bool kInstrument>
struct WsForward {
  using F = Forward<T, Cfg, kInstrument, kExtras, kSeq>;
  using State = typename F::State;
  using Item = typename F::Item;
  static constexpr int kNS = Cfg::kNTilesS;
  static constexpr int kConsumerThreads = Cfg::kThreads;
  static constexpr int kWarpgroupThreads = kWarpsPerWarpgroup * kWarpSize;
  static constexpr int kConsumerWarpgroups = kConsumerThreads / kWarpgroupThreads;
  static_assert(kConsumerWarpgroups <= kMaxConsumerWarpgroups, "named barriers: one per consumer warpgroup");
  static constexpr int kThreads = kConsumerThreads + kProducerThreads;
  using Regs = RegisterSplit<kConsumerWarpgroups>;
  static constexpr int kColumnBlocks = Cfg::kHeadDim / (kSwizzleRowBytes / kElementBytes);
  static constexpr int kColumnBlockElems = kSwizzleRowBytes / kElementBytes;  // 64
  static constexpr uint32_t kQRowsBytes = kWgmmaRows * Cfg::kHeadDim * kElementBytes;  // one warpgroup's Q rows
  static constexpr uint32_t kKVTileBytes = Cfg::kBlockN * Cfg::kHeadDim * kElementBytes;
  static_assert(Cfg::kWgmma && Cfg::kMTiles == 1, "warp-specialized kernel: wgmma tiles, 16 rows per warp");
  static_assert(Cfg::kBlockM == kConsumerWarpgroups * kWgmmaRows, "one consumer warpgroup per 64 query rows");
  static_assert(Regs::kConsumer * kConsumerThreads + Regs::kProducer * kProducerThreads == Regs::kLaunch * kThreads &&
                    Regs::kLaunch * kThreads <= kRegistersPerSm && kRegistersPerSm / kThreads / 8 * 8 == Regs::kLaunch,
                "setmaxnreg: the warpgroups must share exactly the registers the launch allocates");
  static_assert(Cfg::kKVTileSmemBytes == static_cast<int>(kKVTileBytes), "K/V tiles are dense swizzled boxes");
  static constexpr int kOSmemBytes = kOStaging == OStaging::kOwnTile ? Cfg::kQSmemBytes : 0;
  static constexpr int smem_bytes(int k_stages, int v_stages) {
    return Cfg::kQSmemBytes + kOSmemBytes + (k_stages + v_stages) * Cfg::kKVTileSmemBytes + Cfg::kSmemAlignSlack;
  }
  static constexpr int kVStages = ws_kv_stages(Cfg::kHeadDim, Cfg::kStages);
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
    __device__ uint32_t k_slot(int s) const { return k + static_cast<uint32_t>(s) * Cfg::kKVTileSmemBytes; }
    __device__ uint32_t v_slot(int s) const { return v + static_cast<uint32_t>(s) * Cfg::kKVTileSmemBytes; }
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

  __device__ static void run(const KernelArgs& a, const TmaMaps& maps, uint8_t* smem) {
    if constexpr (kRedo) {
      // A redo CTA with no listed item (every one when none is listed) returns before it sets anything up: the
      // empty redo launch then takes 1.6 µs against 2.5 µs (docs/design/tensor-core-kernel.md, "Two launches").
      if (static_cast<int64_t>(blockIdx.x) >= listed_items(a)) return;
    }
    __shared__ Barriers bars;
    const int tid = static_cast<int>(threadIdx.x);
    Layout lay;
    lay.q = (smem_address(smem) + Cfg::kSmemAlignSlack - 1) / Cfg::kSmemAlignSlack * Cfg::kSmemAlignSlack;
    lay.k = lay.q + Cfg::kQSmemBytes;
    lay.v = lay.k + kKStages * Cfg::kKVTileSmemBytes;
    lay.o = lay.v + kVStages * Cfg::kKVTileSmemBytes;  // kOwnTile only
    if (tid == 0) {
      for (int w = 0; w < kConsumerWarpgroups; ++w) {
        mbarrier_init(bar(bars.q_full[w]), 1);
        mbarrier_init(bar(bars.q_empty[w]), kQReleaseArrivals);
      }
      for (int s = 0; s < kKStages; ++s) {
        mbarrier_init(bar(bars.k_full[s]), 1);
        mbarrier_init(bar(bars.k_empty[s]), kConsumerThreads / kWarpSize);  // one arrival per consumer warp
      }
      for (int s = 0; s < kVStages; ++s) {
        mbarrier_init(bar(bars.v_full[s]), 1);
        mbarrier_init(bar(bars.v_empty[s]), kConsumerThreads / kWarpSize);
      }
      mbarrier_init(bar(bars.v_scanned), kConsumerThreads / kWarpSize);
      bars.v_bad[0] = bars.v_bad[1] = 0;
      fence_mbarrier_init();
    }
    __syncthreads();
    if (tid < kProducerThreads) {
      setmaxnreg_dec<Regs::kProducer>();
      if (tid == 0) produce(a, maps, bars, lay);
      return;
    }
    setmaxnreg_inc<Regs::kConsumer>();
    consume(a, maps, bars, lay, tid - kProducerThreads);
  }

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
      const Item it = F::item_at(a, item);
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
        const int s = slot<kKStages>(tile);
        const int row = static_cast<int>(it.k_row0) + (it.first + n) * Cfg::kBlockN;
        mbarrier_wait(bar(bars.k_empty[s]), phase<kKStages>(tile) ^ 1);
        FC_PERTURB(kPerturbWsProducerK, tile);
        mbarrier_arrive_expect_tx(bar(bars.k_full[s]), kKVTileBytes);
        for (int cb = 0; cb < kColumnBlocks; ++cb)
          tma_load_4d(lay.k_slot(s) + cb * (Cfg::kBlockN * kSwizzleRowBytes), &maps.k, bar(bars.k_full[s]),
                      cb * kColumnBlockElems, row, hk, kb);
        if (n == 0) load_q();
        const int sv = slot<kVStages>(tile);
        mbarrier_wait(bar(bars.v_empty[sv]), phase<kVStages>(tile) ^ 1);
        FC_PERTURB(kPerturbWsProducerV, tile);
        mbarrier_arrive_expect_tx(bar(bars.v_full[sv]), kKVTileBytes);
        for (int cb = 0; cb < kColumnBlocks; ++cb)
          tma_load_4d(lay.v_slot(sv) + cb * (Cfg::kBlockN * kSwizzleRowBytes), &maps.v, bar(bars.v_full[sv]),
                      cb * kColumnBlockElems, row, hk, kb);
      }
      ++items;
    }
  }

  // Flips the sign bits of this warpgroup's Q rows (softmax_scale < 0; exact), before any wgmma reads them.
  __device__ static void negate_q_rows(const Layout& lay, int wg, int wg_tid) {
    constexpr int kChunks = kWgmmaRows * Cfg::kChunksPerRow;
    for (int i = wg_tid; i < kChunks; i += kWarpgroupThreads) {
      F::negate_chunk(lay.q + F::template chunk_offset<Cfg::kBlockM>(wg * kWgmmaRows + i / Cfg::kChunksPerRow,
                                                                  i % Cfg::kChunksPerRow));
    }
    fence_proxy_async_shared();
    named_barrier_sync(kBarWarpgroup + wg, kWarpgroupThreads);
  }

  // What a consumer thread carries through one item's K/V loop (32-bit: the launch keeps seqlens below 2^31).
  struct ItemCtx {
    int q0;       // first query row of the Q tile
    int first;    // its K/V tile n is tile first + n
    int n_tiles;  // K/V tiles it reads
    int full_begin, full_end, clean_end;  // Item's: which tiles need a mask, which hide keys from some row
    uint32_t tile0;     // CTA-wide index of its first K/V tile (mod 2^32: slot and parity read its low bits)
    int seqlen_q, seqlen_k;  // the item's sequence's lengths (kSeq; vis_of() builds its rule from them)
    // With sequences the rows of the last K/V tile past the sequence's keys are other memory (the next sequence,
    // slots past seqused_k), not TMA's zeros: its V rows there are zeroed before P V reads them, so that the tile
    // holds what a dense launch's does (the scores there are masked; P is 0 but 0 * inf = NaN).
    bool kv_tail;
  };
  // The item's visibility: the launch's without kSeq; else rebuilt from the lengths where it is used (kept in
  // registers across the K/V loop it cost the consumers 20 more bytes of spills at d = 128: 120 against 100, all of
  // them at item boundaries). The lengths are made opaque at each use so that the rule is not hoisted out of the loop.
  __device__ static Visibility vis_of(const KernelArgs& a, const ItemCtx& c) {
    if constexpr (kSeq) {
      int sq = c.seqlen_q, sk = c.seqlen_k;
      asm volatile("" : "+r"(sq), "+r"(sk));
      return make_visibility(a.mask, sq, sk, a.window_left, a.window_right);
    } else {
      return a.vis;
    }
  }

  // Zeros rows [row0, kBlockN) of a V tile (every consumer thread its share), visible to wgmma after a barrier.
  __device__ static void zero_v_rows(uint32_t v_smem, int row0, int ctid) {
    const int chunks = (Cfg::kBlockN - row0) * Cfg::kChunksPerRow;
    for (int i = ctid; i < chunks; i += kConsumerThreads) {
      st_shared_v4(v_smem + F::template chunk_offset<Cfg::kBlockN>(row0 + i / Cfg::kChunksPerRow, i % Cfg::kChunksPerRow),
                   make_uint4(0u, 0u, 0u, 0u));
    }
    fence_proxy_async_shared();
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

  // Whether K/V tile m of the item holds keys below seqlen_k that some row of its Q tile may not see.
  __device__ static bool hides_keys(const ItemCtx& c, int m) { return m < c.full_begin || m >= c.clean_end; }

  // Non-finite V rows that some row of the Q tile may not see (0 * inf = NaN on the tensor cores) are handled in two
  // launches. The first (kRedo false) runs no check: such a row puts inf or NaN into every row's accumulator of
  // its columns (each warpgroup runs every tile, so all of them), and an item whose accumulators end non-finite is
  // listed (list_for_redo). The second (kRedo true, launch_ws_variant) runs the listed items again with the check
  // below and overwrites their O and LSE; an item with no non-finite V in the tiles it reads ends finite and gets
  // the same bits from both. Without the check in the tile loop, short causal sequences and narrow windows run
  // 1.09-1.23x faster, the redo launch included (docs/design/tensor-core-kernel.md).
  //
  // The hidden-V check runs in two halves, so that neither stops the tensor cores:
  // - scan_v(m), right after S(m) is issued (S(m) and P(m-1) V(m-1) run meanwhile): each consumer thread scans its
  //   share of V(m)'s rows that some row of the Q tile may not see, for inf and NaN (kernel.cuh,
  //   hidden_v_nonfinite); a warp that finds one stamps v_bad, and every warp arrives on v_scanned;
  // - ready_v(m), before P(m) V(m) is issued (one tile later): the verdict, once every warp's scan is in.
  // A CTA-wide vote (a named barrier) in place of the second half held both consumer warpgroups in step at every
  // such tile: up to 25% slower on short causal sequences and narrow windows (docs/design/tensor-core-kernel.md).
  // Scans are counted per CTA (`scans`, the same in every consumer thread: the tiles that hide keys are the
  // item's): scan k completes phase k of v_scanned and stamps v_bad[k % 2] with k + 1, so neither needs
  // resetting. A warp stamps v_bad[k % 2] again only at scan k + 2, after every warp has read scan k's verdict (it
  // waited for scan k + 1, which each warp joins after reading scan k's).
  __device__ static void scan_v(const KernelArgs& a, const ItemCtx& c, Barriers& bars, const Layout& lay, int m,
                                uint32_t scans, int ctid) {
    if (!kRedo || !hides_keys(c, m)) return;
    const uint32_t t = c.tile0 + static_cast<uint32_t>(m);
    mbarrier_wait(bar(bars.v_full[slot<kVStages>(t)]), phase<kVStages>(t));
    const bool bad = __any_sync(kFullWarp, F::hidden_v_nonfinite(
                                               lay.v_slot(slot<kVStages>(t)), vis_of(a, c), c.q0,
                                               int64_t{c.first + m} * Cfg::kBlockN, ctid));
    if (ctid % kWarpSize == 0) {
      if (bad) st_shared_b32(smem_address(&bars.v_bad[scans % 2]), scans + 1);
      mbarrier_arrive(bar(bars.v_scanned));
    }
  }

  // Waits for V(m); zeros the rows past the sequence's keys of a last tile with other memory there (kv_tail); in a
  // redo launch, takes the exact path (kernel.cuh's exact_hidden_v, every consumer thread together) if scan_v found
  // a non-finite hidden V row in tile m. Runs before P(m) V(m) is issued, with no wgmma in flight on O. Returns
  // V(m)'s slot address.
  __device__ static uint32_t ready_v(const KernelArgs& a, const ItemCtx& c, Barriers& bars, const Layout& lay, int m,
                                     uint32_t& scans, State& st, int ctid) {
    const uint32_t t = c.tile0 + static_cast<uint32_t>(m);
    mbarrier_wait(bar(bars.v_full[slot<kVStages>(t)]), phase<kVStages>(t));
    const uint32_t v_smem = lay.v_slot(slot<kVStages>(t));
    const int64_t k0 = int64_t{c.first + m} * Cfg::kBlockN;
    const Visibility vis = vis_of(a, c);
    if (kSeq && c.kv_tail && m + 1 == c.n_tiles) {
      zero_v_rows(v_smem, static_cast<int>(vis.seqlen_k - k0), ctid);
      named_barrier_sync(kBarConsumers, kConsumerThreads);
    }
    if (!kRedo || !hides_keys(c, m)) return v_smem;
    mbarrier_wait(bar(bars.v_scanned), scans % 2);
    const bool bad = ld_shared_b32(smem_address(&bars.v_bad[scans % 2])) == scans + 1;
    ++scans;
    if (bad && !FC_MUTANT(kTcHiddenVExactPathSkipped)) {
      const int warp = ctid / kWarpSize;
      F::exact_hidden_v(st, v_smem, vis, c.q0, warp * Cfg::kRowsPerWarp, k0, ctid % kWarpSize, ctid,
                        [] { named_barrier_sync(kBarConsumers, kConsumerThreads); });
    }
    return v_smem;
  }

  template <int kSlots>
  __device__ static void release(uint64_t (&empty)[kSlots], uint32_t t, int lane) {
    if (lane == 0) mbarrier_arrive(bar(empty[slot<kSlots>(t)]));
  }

  __device__ static void consume(const KernelArgs& a, const TmaMaps& maps, Barriers& bars, const Layout& lay,
                                 int ctid) {
    const int lane = ctid % kWarpSize;
    const int warp = ctid / kWarpSize;  // consumer warp: rows 16 warp .. 16 warp + 15 of the Q tile
    const int wg = warp / kWarpsPerWarpgroup;
    const int wg_tid = ctid % kWarpgroupThreads;
    const int warp_row0 = warp * Cfg::kRowsPerWarp;
    uint32_t tile = 0;
    uint32_t items = 0;
    uint32_t scans = 0;  // scan_v's count
    // Turns go round strictly: warpgroup 0 takes the first (the last warpgroup hands it over up front) and, at
    // the end, the one the last warpgroup handed over after its last chains, so every barrier ends with no
    // arrival pending. Each turn barrier counts the two warpgroups that meet there.
    const auto take_turn = [&] {
      if constexpr (kPingPong) named_barrier_sync(kBarTurn + wg, 2 * kWarpgroupThreads);
    };
    const auto pass_turn = [&] {
      if constexpr (kPingPong)
        named_barrier_arrive(kBarTurn + (wg + 1) % kConsumerWarpgroups, 2 * kWarpgroupThreads);
    };
    if (wg == kConsumerWarpgroups - 1) pass_turn();
    for (int64_t step = 0;; ++step) {
      const int64_t item = item_of_step(a, step);
      if (item >= a.work_items) break;
      ItemCtx c;
      State st;
      {
        const Item it = F::item_at(a, item);
        if (it.q_rows <= 0) continue;  // an empty slot (packed Q): the producer skips it too
        c.q0 = static_cast<int>(it.q0);
        c.first = it.first;
        c.n_tiles = it.n_tiles;
        c.full_begin = it.full_begin;
        c.full_end = it.full_end;
        c.clean_end = it.clean_end;
        c.tile0 = tile;
        c.seqlen_q = static_cast<int>(it.vis.seqlen_q);
        c.seqlen_k = static_cast<int>(it.vis.seqlen_k);
        c.kv_tail = (a.cu_k != nullptr || a.used_k != nullptr) && it.n_tiles > 0 &&
                    int64_t{it.first + it.n_tiles} * Cfg::kBlockN > it.vis.seqlen_k;
        F::init_state(st, a, it, warp_row0, lane, ctid);
      }
      mbarrier_wait(bar(bars.q_full[wg]), items & 1);
      if (a.negate_q && c.n_tiles > 0) negate_q_rows(lay, wg, wg_tid);
      if (c.n_tiles == 0 && lane == 0) mbarrier_arrive(bar(bars.q_empty[wg]));  // nothing reads Q

      // Every warpgroup runs every tile. On a causal diagonal tile none of whose keys a warpgroup's rows see, the
      // mask gives p = 0 and alpha = 1 (exact, as skipping would be); keeping the wgmma chains out of branches
      // keeps ptxas from serializing them (it does when a chain is issued or awaited under a branch it cannot
      // prove warp-uniform).
      uint32_t pa[1][kNS / 2][4];  // P(n - 1) rounded to T, waiting for V(n - 1)
      const auto tile_step = [&]<bool kFirst>(int n) {
        const uint32_t t = tile + static_cast<uint32_t>(n);
        uint32_t v_prev = 0;
        if constexpr (!kFirst) {
          v_prev = ready_v(a, c, bars, lay, n - 1, scans, st, ctid);
          if (FC_MUTANT(kWsVReleasedEarly)) release(bars.v_empty, t - 1, lane);
        }
        if (!FC_MUTANT(kWsKFullNotAwaited)) mbarrier_wait(bar(bars.k_full[slot<kKStages>(t)]), phase<kKStages>(t));
        float sc[1][kNS][4];  // S(n), then p
        FC_PERTURB(kPerturbWsConsumerS, t);
        if constexpr (!kFirst) {
          // Both chains back to back, with every register they touch fenced before the first (an instruction
          // touching an accumulator between them would make ptxas serialize the chains).
          take_turn();
          fence_operands(sc[0]);
          fence_operands(st.acc_o[0]);
          fence_operands(pa[0]);
          wgmma_fence();
          F::qk_chain(sc, lay.q, lay.k_slot(slot<kKStages>(t)), wg);
          F::pv_chain(pa, st, v_prev);
          pass_turn();
          scan_v(a, c, bars, lay, n, scans, ctid);
          wgmma_wait<1>();  // S(n) was committed first; P(n-1) V(n-1) may still run
        } else {
          take_turn();
          F::qk_wgmma_issue(sc, lay.q, lay.k_slot(slot<kKStages>(t)), wg);
          pass_turn();
          scan_v(a, c, bars, lay, n, scans, ctid);
          wgmma_wait<0>();
        }
        fence_operands(sc[0]);
        release(bars.k_empty, t, lane);
        if (n + 1 == (FC_MUTANT(kWsQReleasedEarly) ? 1 : c.n_tiles) && lane == 0)
          mbarrier_arrive(bar(bars.q_empty[wg]));  // last S read Q
        if constexpr (kExtras) {
          if (a.has_softcap && !FC_MUTANT(kTcSoftcapAfterMask)) F::cap_scores(sc, a);
        }
        if ((n < c.full_begin || n >= c.full_end) && !(FC_MUTANT(kTcLastTileUnmasked) && n + 1 == c.n_tiles))
          F::apply_mask(sc, vis_of(a, c), c.q0 + warp_row0, int64_t{c.first + n} * Cfg::kBlockN, lane / kQuad, (lane % kQuad) * 2);
        if constexpr (kExtras) {
          if (a.has_softcap && FC_MUTANT(kTcSoftcapAfterMask)) F::cap_scores(sc, a);
        }
        float alpha[1][2];
        const bool rescale = F::softmax_stats(sc, st, a.scale_log2, alpha);
        if constexpr (!kFirst) {
          wgmma_wait<0>();
          fence_operands(st.acc_o[0]);
          fence_operands(pa[0]);
          if (!FC_MUTANT(kWsVReleasedEarly)) release(bars.v_empty, t - 1, lane);
        }
        F::rescale_o(st, alpha, rescale);
        F::pack_p(sc, pa);
        F::trace_tile(st, a, n, lane);
      };
      if (c.n_tiles > 0) {
        tile_step.template operator()<true>(0);
        for (int n = 1; n < c.n_tiles; ++n) tile_step.template operator()<false>(n);
        const uint32_t v_last = ready_v(a, c, bars, lay, c.n_tiles - 1, scans, st, ctid);
        FC_PERTURB(kPerturbWsConsumerPv, tile + c.n_tiles);
        take_turn();
        F::pv_wgmma_issue(pa, st, v_last);
        pass_turn();
        wgmma_wait<0>();
        fence_operands(st.acc_o[0]);
        fence_operands(pa[0]);
        release(bars.v_empty, tile + static_cast<uint32_t>(c.n_tiles - 1), lane);
      }
      tile += static_cast<uint32_t>(c.n_tiles);

      // Epilogue. kRegisters: every thread on its own (store_o_direct). kOwnTile: once the previous item's store
      // has read this warpgroup's rows of the O tile, O staged there, then one TMA store per 64-column block. A
      // split run writes its partials from the registers (every item of the launch alike).
      const Item it = F::item_at(a, item);
      bool nonfinite = false;  // warp-uniform: an accumulator of the warp is inf or NaN
      if (kSeq && a.splits > 1) {
        nonfinite = F::store_partials(st, a, it, it.q0 + warp_row0, lane);
      } else if constexpr (kOStaging == OStaging::kRegisters) {
        nonfinite = store_o_direct(st, a, it, warp_row0, lane);
      } else {
        if (wg_tid == 0) tma_store_wait_read();
        named_barrier_sync(kBarWarpgroup + wg, kWarpgroupThreads);
        nonfinite = F::stage_o_and_lse(st, a, lay.o, it, warp_row0, lane);
        fence_proxy_async_shared();
        if (!FC_MUTANT(kWsOStagedWithoutBarrier)) named_barrier_sync(kBarWarpgroup + wg, kWarpgroupThreads);
        if (kSeq && a.cu_q != nullptr && it.q0 + (wg + 1) * kWgmmaRows > it.vis.seqlen_q) {
          // Packed Q: TMA would store the rows past the sequence over the next sequence's.
          store_staged_rows(a, lay, it, wg, wg_tid);
        } else if (wg_tid == 0) {
          FC_PERTURB(kPerturbWsStoreO, items);
          for (int cb = 0; cb < kColumnBlocks; ++cb)
            tma_store_4d(&maps.o, lay.rows(lay.o, wg, cb), cb * kColumnBlockElems,
                         static_cast<int>(it.q_row0 + it.q0) + wg * kWgmmaRows, static_cast<int>(it.h),
                         static_cast<int>(it.qb));
          tma_store_commit();
        }
      }
      if constexpr (!kRedo) {
        if (warp == 0) list_for_redo(a, item, nonfinite, lane);
      }
      ++items;
    }
    if (wg == 0) take_turn();
    if (kOStaging != OStaging::kRegisters && wg_tid == 0) tma_store_wait_all();
  }

  // Lists the item for the redo launch (a.redo_count set: launches whose mask hides keys) if its accumulators came
  // out inf or NaN. Consumer warp 0 alone decides, once per item: a non-finite V element of a tile the item reads
  // reaches every row's accumulator in its column (p = 0 or not, every warpgroup runs every tile), rows past the
  // sequence and rows that see no key included, and nothing after makes it finite again.
  __device__ static void list_for_redo(const KernelArgs& a, int64_t item, bool nonfinite, int lane) {
    if (a.redo_count != nullptr && nonfinite && lane == 0) {
      a.redo_items[atomicAdd(a.redo_count, 1ull)] = item;
    }
  }

  // The staged O rows of warpgroup wg that belong to the sequence, 16 bytes per thread and step (head_dim % 8 == 0
  // here: encode_operand()).
  __device__ static void store_staged_rows(const KernelArgs& a, const Layout& lay, const Item& it, int wg, int wg_tid) {
    const int64_t row0 = it.q0 + wg * kWgmmaRows;
    T* o_rows = a.o.template head<T>(it.qb, it.h) + (it.q_row0 + row0) * a.o.stride.row;
    const int rows = static_cast<int>(max(min(it.vis.seqlen_q - row0, int64_t{kWgmmaRows}), int64_t{0}));
    const int chunks = static_cast<int>(a.head_dim) / kChunkElems;
    for (int i = wg_tid; i < rows * chunks; i += kWarpgroupThreads) {
      const int r = i / chunks;
      const int ch = i - r * chunks;
      const uint4 v = ld_shared_v4(lay.o + F::template chunk_offset<Cfg::kBlockM>(wg * kWgmmaRows + r, ch));
      *reinterpret_cast<uint4*>(o_rows + r * a.o.stride.row + ch * kChunkElems) = v;
    }
  }

  // O of this thread's rows straight from the accumulators, normalized and rounded as stage_o_and_lse does (the
  // same helpers, so O is bit-identical to the other stagings and to kernel.cuh). Per pair of n8 tiles, lanes t
  // and t ^ 1 of a quad swap one packed word so that each holds 4 consecutive columns: a quad then writes the
  // pair's 32 contiguous bytes of its row, whole sectors, with 8-byte stores. 4-byte stores straight from the
  // fragments cost 13-15% at d = 256, N = 512 (half sectors). encode_operand() admits
  // only head_dim % 8 == 0, so 4 columns are real or padding together. Returns whether an accumulator of the warp is
  // inf or NaN.
  __device__ static bool store_o_direct(const State& st, const KernelArgs& a, const Item& it, int warp_row0, int lane) {
    typename F::Finals fin;
    F::row_finals(st, a, it.h, fin);
    const int64_t row0 = it.q0 + warp_row0;
    T* o_rows = a.o.template head<T>(it.qb, it.h) + (it.q_row0 + row0) * a.o.stride.row;
    const int t = lane % kQuad;
    const bool odd = (t & 1) != 0;
    bool nonfinite = false;
    const auto tile_pair = [&]<int kJ>() {  // n8 tiles 2 kJ and 2 kJ + 1
      uint32_t w[2][2];                     // [row half][tile]
      nonfinite |= F::template normalized_o<2 * kJ, 2>(st, fin, lane, [&](int r, int nt, int, uint32_t packed) {
        w[r / kMmaN][nt - 2 * kJ] = packed;
      });
      const int c = (2 * kJ + (t & 1)) * kMmaN + (t & 2) * 2;  // even t: tile 2 kJ; odd t: tile 2 kJ + 1
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const uint32_t recv = __shfl_xor_sync(kFullWarp, odd ? w[hh][0] : w[hh][1], 1);
        const uint2 v = odd ? make_uint2(recv, w[hh][1]) : make_uint2(w[hh][0], recv);
        const int r = lane / kQuad + hh * kMmaN;
        if ((row0 + r < it.vis.seqlen_q || FC_MUTANT(kTcOStorePastSeqlen)) && c < a.head_dim) *reinterpret_cast<uint2*>(o_rows + r * a.o.stride.row + c) = v;
      }
    };
    [&]<int... kJ>(std::integer_sequence<int, kJ...>) {
      (tile_pair.template operator()<kJ>(), ...);
    }(std::make_integer_sequence<int, Cfg::kNTilesO / 2>{});
    F::write_lse(st, a, fin, it, row0, lane);
    return nonfinite;
  }
};

// kInstrument is the last template argument (mangled Lb0E / Lb1E), as the symbol check expects.
template <typename T, class Cfg, OStaging kOStaging, bool kPingPong, bool kExtras, bool kSeq, bool kRedo,
          bool kInstrument>
__global__ void __launch_bounds__(WsForward<T, Cfg, kOStaging, kPingPong, kExtras, kSeq, kRedo, kInstrument>::kThreads,
                                  1)
    tensor_core_ws_kernel(const __grid_constant__ KernelArgs args, const __grid_constant__ TmaMaps maps) {
  extern __shared__ __align__(1024) uint8_t smem[];
  WsForward<T, Cfg, kOStaging, kPingPong, kExtras, kSeq, kRedo, kInstrument>::run(args, maps, smem);
}

// The own O tile fits beside as many K slots as V slots (d = 64, 128): the only staging compiled.
template <typename T, class Cfg>
inline constexpr bool kOwnOFree =
    WsForward<T, Cfg, OStaging::kOwnTile, false, false, false, false, false>::kKStages ==
    WsForward<T, Cfg, OStaging::kOwnTile, false, false, false, false, false>::kVStages;

// K/V tiles the middle Q tile of the launch reads: the item length the per-launch choices below go by.
template <class Cfg>
int64_t middle_item_tiles(const KernelArgs& args) {
  return middle_q_tile_reads(args.vis, args.q_tiles, Cfg::kBlockM, Cfg::kBlockN);
}

// kTurnsChosen (d = 128): ping-pong where the middle Q tile reads at least kPingPongMinTiles K/V tiles and no
// window bounds the rows' first keys. Measured on the H100 (bf16; docs/design/tensor-core-kernel.md): non-causal N = 512 (4 tiles)
// 0.98x, N >= 1024 +5-8%; causal N = 512 / 1024 0.94x / 0.99x, N = 2048-4096 +2%, N >= 8192 +6-10%; causal windows
// of 256-4096 keys 0.93-0.97x.
inline constexpr int64_t kPingPongMinTiles = 8;
template <class Cfg>
bool ws_ping_pong(const KernelArgs& args) {
  return !args.vis.bounded_begin && middle_item_tiles<Cfg>(args) >= kPingPongMinTiles;
}

// d = 256 (the own O tile costs a K slot): the own O tile for short items, where the asynchronous O store
// matters more than the second K slot, measured on the H100 against kRegisters (docs/design/tensor-core-kernel.md):
// causal items gain up to 10% with the own tile up to about 32 K/V tiles for the middle Q tile (N = 4096: even),
// non-causal ones only at 8 tiles (N = 512: +5%; N >= 1024: kRegisters +1-7%).
inline constexpr int64_t kOwnOMaxTilesCausal = 32;
inline constexpr int64_t kOwnOMaxTilesNonCausal = 8;
template <typename T, class Cfg>
OStaging ws_o_staging(const KernelArgs& args) {
  if (kOwnOFree<T, Cfg>) return OStaging::kOwnTile;
  const int64_t tiles = middle_item_tiles<Cfg>(args);
  const bool masked = args.vis.bounded_end || args.vis.bounded_begin;
  return tiles <= (masked ? kOwnOMaxTilesCausal : kOwnOMaxTilesNonCausal) ? OStaging::kOwnTile
                                                                                 : OStaging::kRegisters;
}

// ---- host side

// cuTensorMapEncodeTiled through the runtime's driver entry point (no link against libcuda); null if absent.
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      f = nullptr;
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

// Largest coordinate the kernel hands TMA (int32), with room for a tile past the last row.
inline constexpr int64_t kTmaMaxCoord = (int64_t{1} << 31) - 1024;

// A (head_dim, rows, heads, batch) map of one operand, box (64, box_rows), 128-byte swizzle, zeros outside.
// False where TMA cannot address it: base, row length or a stride not 16-byte aligned, a stride past 2^40
// bytes, a non-positive stride of a dimension with more than one index.
template <typename T>
bool encode_operand(CUtensorMap* map, const TensorArg& t, int64_t head_dim, int64_t rows, int64_t heads, int64_t batch,
                    int box_rows) {
  const auto encode = tensor_map_encoder();
  if (encode == nullptr || t.ptr == nullptr || reinterpret_cast<uintptr_t>(t.ptr) % 16 != 0) return false;
  // Rows of whole 16-byte chunks only: with head_dim = 47 (pad 1) the H100's TMA store wrote the padding
  // element after each row, and loads read it (Gpu_Properties.MemorySafety and OracleAgreement found both).
  if (head_dim * static_cast<int64_t>(sizeof(T)) % 16 != 0) return false;
  if (rows < 1 || heads < 1 || batch < 1 || rows > kTmaMaxCoord || heads > kTmaMaxCoord || batch > kTmaMaxCoord)
    return false;
  const int64_t dims[4] = {head_dim, rows, heads, batch};
  const int64_t elem_strides[3] = {t.stride.row, t.stride.head, t.stride.batch};
  cuuint64_t global_dims[4];
  cuuint64_t global_strides[3];
  int64_t packed = head_dim * static_cast<int64_t>(sizeof(T));  // bytes a packed layout would step
  for (int i = 0; i < 4; ++i) global_dims[i] = static_cast<cuuint64_t>(dims[i]);
  for (int i = 0; i < 3; ++i) {
    packed = (packed + 15) / 16 * 16;
    int64_t bytes = elem_strides[i] * static_cast<int64_t>(sizeof(T));
    if (dims[i + 1] == 1) bytes = packed;  // never stepped: any valid stride
    if (bytes <= 0 || bytes % 16 != 0 || bytes >= (int64_t{1} << 40)) return false;
    global_strides[i] = static_cast<cuuint64_t>(bytes);
    packed = bytes * dims[i + 1];
  }
  const cuuint32_t box[4] = {static_cast<cuuint32_t>(kSwizzleRowBytes / sizeof(T)), static_cast<cuuint32_t>(box_rows),
                             1, 1};
  const cuuint32_t element_strides[4] = {1, 1, 1, 1};
  const CUtensorMapDataType dtype =
      std::is_same_v<T, __half> ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  return encode(map, dtype, 4, const_cast<void*>(t.ptr), global_dims, global_strides, box, element_strides,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// One launch of a compiled variant: the grid plan of the launch's items (schedule.h), or in a redo launch as many
// CTAs as can run at once, up to one per item (how many are listed is known on the device only).
template <typename T, class Cfg, OStaging kOStaging, bool kPingPong, bool kExtras, bool kSeq, bool kRedo>
Status launch_ws_grid(const KernelArgs& args, const TmaMaps& maps, cudaStream_t stream) {
  using Ws = WsForward<T, Cfg, kOStaging, kPingPong, kExtras, kSeq, kRedo, FLASHCHECK_INSTRUMENT != 0>;
  constexpr auto kernel =
      tensor_core_ws_kernel<T, Cfg, kOStaging, kPingPong, kExtras, kSeq, kRedo, FLASHCHECK_INSTRUMENT != 0>;
  int64_t resident = 0;
  const Status st = resident_ctas<kernel>(Ws::kThreads, Ws::kSmemBytes, &resident);
  if (!st.ok()) return st;
  int64_t grid = 0;
  if constexpr (kRedo) {
    grid = capped_grid(std::min(resident, args.work_items));
  } else {
    GridProblem problem = grid_problem<Cfg>(args);
    // The producer runs ahead across items whenever the schedule is balanced (packed Q: grid_problem's rule).
    problem.allow_persistent = args.cu_q == nullptr;
    grid = capped_grid(plan_grid(problem, resident));
  }
  if (grid < 1) return Status::ok_status();
  kernel<<<dim3(static_cast<unsigned>(grid)), Ws::kThreads, Ws::kSmemBytes, stream>>>(args, maps);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return {StatusCode::kCudaError, cudaGetErrorString(err)};
  return Status::ok_status();
}

// The launch of a variant. Where the mask hides keys from some rows of a tile, in two launches (WsForward,
// "Non-finite V rows"): the variant lists the items whose accumulators end inf or NaN, then the redo variant (the
// hidden-V check compiled in; one per tile shape and O staging, with every feature's code: the arithmetic of the
// variants is the same) runs them again. It runs with the first launch's staging: at d = 256, a redo launch of the
// other one (192 against 224 KB of shared memory) made the next first launch 7% longer (causal N = 512, H200). The
// list (a count and up to one entry per item) comes from flashcheck's workspace pool (common/combine.cuh), zeroed
// on the stream, and goes back to the pool after the redo launch.
template <typename T, class Cfg, OStaging kOStaging, bool kPingPong, bool kExtras, bool kSeq>
Status launch_ws_variant(const KernelArgs& args, const TmaMaps& maps, cudaStream_t stream) {
  if (!args.vis.bounded_begin && !args.vis.bounded_end)
    return launch_ws_grid<T, Cfg, kOStaging, kPingPong, kExtras, kSeq, false>(args, maps, stream);
  if (args.work_items < 1) return Status::ok_status();
  const size_t bytes = sizeof(unsigned long long) + static_cast<size_t>(args.work_items) * sizeof(int64_t);
  void* workspace = nullptr;
  if (const cudaError_t err = combine::workspace_alloc(&workspace, bytes, stream); err != cudaSuccess) {
    return {StatusCode::kCudaError,
            std::string("tensor_core: allocating the redo list from flashcheck's pool failed: ") +
                cudaGetErrorString(err)};
  }
  KernelArgs listed = args;
  listed.redo_count = static_cast<unsigned long long*>(workspace);
  listed.redo_items = reinterpret_cast<int64_t*>(listed.redo_count + 1);
  Status st;
  if (const cudaError_t err = cudaMemsetAsync(listed.redo_count, 0, sizeof(unsigned long long), stream);
      err != cudaSuccess) {
    st = {StatusCode::kCudaError,
          std::string("tensor_core: clearing the redo list failed: ") + cudaGetErrorString(err)};
  }
  if (st.ok()) st = launch_ws_grid<T, Cfg, kOStaging, kPingPong, kExtras, kSeq, false>(listed, maps, stream);
  if (st.ok()) {
    KernelArgs redo = listed;
    redo.inst.tile_kind_counts = nullptr;  // the first launch counted every item's tiles
    st = launch_ws_grid<T, Cfg, kOStaging, false, true, true, true>(redo, maps, stream);
  }
  const cudaError_t freed = cudaFreeAsync(workspace, stream);
  if (st.ok() && freed != cudaSuccess) {
    st = {StatusCode::kCudaError, std::string("tensor_core: cudaFreeAsync of the redo list failed: ") +
                                      cudaGetErrorString(freed)};
  }
  return st;
}

template <typename T, class Cfg, OStaging kOStaging, bool kPingPong>
Status launch_ws_kernel(const KernelArgs& args, const TmaMaps& maps, cudaStream_t stream) {
  return with_variant(args, [&](auto extras, auto seq) {
    return launch_ws_variant<T, Cfg, kOStaging, kPingPong, extras(), seq()>(args, maps, stream);
  });
}

template <typename T, class Cfg, OStaging kOStaging>
Status launch_ws_issue(const KernelArgs& args, const TmaMaps& maps, cudaStream_t stream) {
  if constexpr (kTurnsChosen<Cfg>) {
    if (ws_ping_pong<Cfg>(args)) return launch_ws_kernel<T, Cfg, kOStaging, true>(args, maps, stream);
  }
  return launch_ws_kernel<T, Cfg, kOStaging, false>(args, maps, stream);
}

// The warp-specialized launch, or *launched = false (nothing done) where TMA cannot address the operands.
template <typename T, class Cfg>
Status launch_ws(const KernelArgs& args, cudaStream_t stream, bool* launched) {
  *launched = false;
  // Packed tensors are one batch of total rows; a sequence's rows start at its cu_seqlens entry (Item).
  const bool packed_q = args.cu_q != nullptr, packed_k = args.cu_k != nullptr;
  const int64_t q_rows = packed_q ? args.total_q : args.seqlen_q, q_batch = packed_q ? 1 : args.batch;
  const int64_t k_rows = packed_k ? args.total_k : args.seqlen_k, k_batch = packed_k ? 1 : args.batch;
  if (k_rows < 1 || q_rows > kTmaMaxCoord || k_rows > kTmaMaxCoord) return Status::ok_status();
  const int64_t heads_kv = args.heads_q / args.group_size;
  TmaMaps maps;
  if (!encode_operand<T>(&maps.q, args.q, args.head_dim, q_rows, args.heads_q, q_batch, kWgmmaRows) ||
      !encode_operand<T>(&maps.k, args.k, args.head_dim, k_rows, heads_kv, k_batch, Cfg::kBlockN) ||
      !encode_operand<T>(&maps.v, args.v, args.head_dim, k_rows, heads_kv, k_batch, Cfg::kBlockN) ||
      !encode_operand<T>(&maps.o, args.o, args.head_dim, q_rows, args.heads_q, q_batch, kWgmmaRows)) {
    return Status::ok_status();
  }
  *launched = true;
  if constexpr (kOwnOFree<T, Cfg>) {
    return launch_ws_issue<T, Cfg, OStaging::kOwnTile>(args, maps, stream);
  } else {  // d = 256: both compiled
    if (ws_o_staging<T, Cfg>(args) == OStaging::kRegisters)
      return launch_ws_issue<T, Cfg, OStaging::kRegisters>(args, maps, stream);
    return launch_ws_issue<T, Cfg, OStaging::kOwnTile>(args, maps, stream);
  }
}

#endif  // FLASHCHECK_TC_WGMMA

template <typename T, class Cfg>
Status launch_tiles(const KernelArgs& args, cudaStream_t stream) {
#if defined(FLASHCHECK_TC_WGMMA)
  if constexpr (Cfg::kWarpSpecialized) {
    if (tensor_core_cp_async_forced()) return launch_with<T, Cfg>(args, stream);
    bool launched = false;
    const Status st = launch_ws<T, Cfg>(args, stream, &launched);
    if (launched || !st.ok()) return st;
  }
#endif
  return launch_with<T, Cfg>(args, stream);
}

// The family's kernel for the tiles tensor_core_select() chose (args.block_m): its first shape or, where it has
// one, its tall shape (tile_config.h).
template <typename T, int HeadDimPadded>
Status launch_forward(const KernelArgs& args, cudaStream_t stream) {
  FC_UPLOAD_MUTANT(stream);
  if (args.block_m == Sm90Tile<HeadDimPadded>::kBlockM) return launch_tiles<T, Sm90Tile<HeadDimPadded>>(args, stream);
  if constexpr (tall_tile_shape_sm90(HeadDimPadded).block_m > 0) {
    if (args.block_m == Sm90TallTile<HeadDimPadded>::kBlockM)
      return launch_tiles<T, Sm90TallTile<HeadDimPadded>>(args, stream);
  }
  return {StatusCode::kUnsupported, "tensor_core: no hdim" + std::to_string(HeadDimPadded) + " tiles of block_m " +
                                        std::to_string(args.block_m)};
}

}  // namespace tc_kernel
}  // namespace FLASHCHECK_KERNEL_VARIANT
}  // namespace flashcheck::detail
