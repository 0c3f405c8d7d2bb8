// Hidden non-finite V rows in the warp-specialized sm_90a forward kernel (kernel_ws.cuh): the per-item context a
// consumer carries, the zeroed tail of a sequence's last V tile, and the two halves of the redo launch's check
// (scan_v after S is issued, ready_v before P V), which take hidden_v.cuh's exact path where a scan found inf or NaN.
#pragma once

#include "hidden_v.cuh"
#include "ws_pipeline.cuh"

namespace flashcheck::detail {
inline namespace FLASHCHECK_KERNEL_VARIANT {
namespace tc_kernel {

#if defined(FLASHCHECK_TC_WGMMA)

template <typename T, class Cfg, OStaging kOStaging, bool kSeq, bool kRedo>
struct WsHiddenV : WsPipeline<Cfg, kOStaging, kRedo> {
  using Pipe = WsPipeline<Cfg, kOStaging, kRedo>;
  using typename Pipe::Barriers;
  using typename Pipe::Layout;
  using State = typename Fragments<T, Cfg>::State;
  using Hidden = typename Fragments<T, Cfg>::HiddenV;
  using Pipe::bar;
  using Pipe::kConsumerThreads;
  using Pipe::kVStages;

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
    const int chunks = (Cfg::kBlockN - row0) * Cfg::kChunksPerRowV;
    for (int i = ctid; i < chunks; i += kConsumerThreads) {
      st_shared_v4(v_smem + Fragments<T, Cfg>::template chunk_offset<Cfg::kBlockN>(row0 + i / Cfg::kChunksPerRowV, i % Cfg::kChunksPerRowV),
                   make_uint4(0u, 0u, 0u, 0u));
    }
    fence_proxy_async_shared();
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
  //   share of V(m)'s rows that some row of the Q tile may not see, for inf and NaN (hidden_v.cuh,
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
    mbarrier_wait(bar(bars.v_full[Pipe::template slot<kVStages>(t)]), Pipe::template phase<kVStages>(t));
    const bool bad = __any_sync(kFullWarp, Hidden::hidden_v_nonfinite(
                                               lay.v_slot(Pipe::template slot<kVStages>(t)), vis_of(a, c), c.q0,
                                               int64_t{c.first + m} * Cfg::kBlockN, ctid));
    if (ctid % kWarpSize == 0) {
      if (bad) st_shared_b32(smem_address(&bars.v_bad[scans % 2]), scans + 1);
      mbarrier_arrive(bar(bars.v_scanned));
    }
  }

  // Waits for V(m); zeros the rows past the sequence's keys of a last tile with other memory there (kv_tail); in a
  // redo launch, takes the exact path (hidden_v.cuh's exact_hidden_v, every consumer thread together) if scan_v found
  // a non-finite hidden V row in tile m. Runs before P(m) V(m) is issued, with no wgmma in flight on O. Returns
  // V(m)'s slot address.
  __device__ static uint32_t ready_v(const KernelArgs& a, const ItemCtx& c, Barriers& bars, const Layout& lay, int m,
                                     uint32_t& scans, State& st, int ctid) {
    const uint32_t t = c.tile0 + static_cast<uint32_t>(m);
    mbarrier_wait(bar(bars.v_full[Pipe::template slot<kVStages>(t)]), Pipe::template phase<kVStages>(t));
    const uint32_t v_smem = lay.v_slot(Pipe::template slot<kVStages>(t));
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
      Hidden::exact_hidden_v(st, v_smem, vis, c.q0, warp * Cfg::kRowsPerWarp, k0, ctid % kWarpSize, ctid,
                        [] { named_barrier_sync(kBarConsumers, kConsumerThreads); });
    }
    return v_smem;
  }
};

#endif  // FLASHCHECK_TC_WGMMA

}  // namespace tc_kernel
}  // namespace FLASHCHECK_KERNEL_VARIANT
}  // namespace flashcheck::detail
