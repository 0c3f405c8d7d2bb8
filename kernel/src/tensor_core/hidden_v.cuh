// Non-finite V rows hidden from some rows of a masked tile, for the fp16/bf16 tensor-core forward kernels: on the
// tensor cores p = 0 at a hidden key still multiplies its V row (0 * inf = NaN), so such tiles are found (a scan of
// the hidden rows) and repaired exactly (the rows that see the value take NaN, the value is zeroed for P V).
#pragma once

#include "fragments.cuh"

namespace flashcheck::detail {
inline namespace FLASHCHECK_KERNEL_VARIANT {
namespace tc_kernel {

template <typename T, class Cfg>
struct Fragments<T, Cfg>::HiddenV {
  // The keys of the tile at k0, counted from k0, that some row of the Q tile at q0 may not see:
  // [0, left_end) (before the last row's first key) and [right_begin, kBlockN) (from the first row's end on).
  struct HiddenKeys {
    int left_end;
    int right_begin;
    __device__ bool contains(int j) const { return j < left_end || j >= right_begin; }
  };
  __device__ static HiddenKeys hidden_keys(const Visibility& vis, int64_t q0, int64_t k0) {
    const auto rel = [&](int64_t key) { return static_cast<int>(max(min(key - k0, int64_t{Cfg::kBlockN}), int64_t{0})); };
    return {rel(vis.row_begin(q0 + Cfg::kBlockM - 1)), rel(vis.row_end(q0))};
  }

  // Whether the low / high half of a packed word of T is inf or NaN (its exponent field all ones).
  __device__ static bool nonfinite_lo(uint32_t x) { return (x & Ops::kExpLo) == Ops::kExpLo; }
  __device__ static bool nonfinite_hi(uint32_t x) { return (x & Ops::kExpHi) == Ops::kExpHi; }

  // A V tile's 16-byte chunks over the kThreads threads that share it: passes of kThreads chunks, the last one
  // partial where kThreads does not divide the tile (three warpgroups: 1024 chunks over 384 threads).
  static constexpr int kHiddenChunks = Cfg::kBlockN * Cfg::kChunksPerRowV;
  static constexpr int kHiddenChunkPasses = (kHiddenChunks + Cfg::kThreads - 1) / Cfg::kThreads;
  static constexpr bool kHiddenChunksEven = kHiddenChunks % Cfg::kThreads == 0;

  // Visits this thread's 16-byte chunks of the V rows that some row of the Q tile may not see (hidden_keys; keys
  // past seqlen_k are zeros): f(key in tile, chunk address). tid: this thread's index among the kThreads threads
  // that share the work (the CTA's, or the consumers'); kUnroll: the loop's unroll factor.
  template <int kUnroll, typename F>
  __device__ static void for_hidden_v_chunks(uint32_t v_smem, const Visibility& vis, int64_t q0, int64_t k0, int tid,
                                             F&& f) {
    const HiddenKeys hidden = hidden_keys(vis, q0, k0);
    const int hi = static_cast<int>(min(k0 + Cfg::kBlockN, vis.seqlen_k) - k0);
#pragma unroll kUnroll
    for (int i = 0; i < kHiddenChunkPasses; ++i) {
      const int idx = tid + i * Cfg::kThreads;
      const int row = idx / Cfg::kChunksPerRowV;
      if ((kHiddenChunksEven || idx < kHiddenChunks) && hidden.contains(row) && row < hi)
        f(row, v_smem + chunk_offset<Cfg::kBlockN>(row, idx % Cfg::kChunksPerRowV));
    }
  }

  // for_hidden_v_chunks per 32-bit word: f(key in tile, word address, word, non-finite mask of its two halves).
  template <typename F>
  __device__ static void for_hidden_v_words(uint32_t v_smem, const Visibility& vis, int64_t q0, int64_t k0, int tid,
                                            F&& f) {
    for_hidden_v_chunks<1>(v_smem, vis, q0, k0, tid, [&](int row, uint32_t addr) {
      const uint4 w = ld_shared_v4(addr);
      const uint32_t words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const uint32_t x = words[k];
        const uint32_t mask = (nonfinite_lo(x) ? 0x0000FFFFu : 0u) | (nonfinite_hi(x) ? 0xFFFF0000u : 0u);
        f(row, addr + k * 4, x, mask);
      }
    });
  }

  // True if a V row that some row of the Q tile may not see holds inf or NaN, over this thread's chunks (tid of
  // the kThreads threads that scan the tile together). On the tensor cores such a row would reach every row of
  // the m16 tile through p = 0: 0 * inf = NaN. Per packed word, (x & exponent fields) + their lowest bits
  // carries into a half's sign bit exactly when that half's exponent is all ones (the low half's sum is at most
  // 0x8000: no carry into the high half), so the words are only ORed together.
  __device__ static bool hidden_v_nonfinite(uint32_t v_smem, const Visibility& vis, int64_t q0, int64_t k0, int tid) {
    constexpr uint32_t kExp = Ops::kExpLo | Ops::kExpHi;
    constexpr uint32_t kExpLsb = (Ops::kExpLo & (0u - Ops::kExpLo)) * 0x10001u;
    constexpr uint32_t kSigns = 0x80008000u;
    uint32_t acc = 0;
    for_hidden_v_chunks<2>(v_smem, vis, q0, k0, tid, [&](int, uint32_t addr) {
      const uint4 w = ld_shared_v4(addr);
      acc |= ((w.x & kExp) + kExpLsb) | ((w.y & kExp) + kExpLsb) | ((w.z & kExp) + kExpLsb) | ((w.w & kExp) + kExpLsb);
    });
    return (acc & kSigns) != 0;
  }

  // A masked tile whose V rows hidden from some of its rows hold inf or NaN (rare; every thread of
  // `sync`, a barrier over the kThreads threads that share the tile, together; tid is this thread's index among
  // them). On the tensor cores such an element would reach the rows that may not see it through p = 0
  // (0 * inf = NaN). So each thread first marks NaN in its O accumulators at every (row, column) whose row sees
  // a non-finite V element of those keys (the oracle's "must be non-finite", oracle.h; no later tile can make
  // a NaN finite), then the non-finite halves are zeroed in shared memory and P V runs on the tensor cores as for
  // any tile. A row's arithmetic so depends only on the keys it sees (its finite columns are the same
  // tensor-core sums as with finite hidden values), and P is untouched. O must not be in flight (no wgmma
  // pending on acc_o).
  template <class Sync>
  __device__ static void exact_hidden_v(State& st, uint32_t v_smem, const Visibility& vis, int64_t q0, int warp_row0,
                                       int64_t k0, int lane, int tid, Sync&& sync) {
    const int quad_row = lane / kQuad;
    const int quad_col = (lane % kQuad) * 2;
    const HiddenKeys hidden = hidden_keys(vis, q0, k0);
    const auto rel = [&](int64_t key) { return static_cast<int>(max(min(key - k0, int64_t{Cfg::kBlockN}), int64_t{0})); };
    int rel_begin[kM][2], rel_end[kM][2];  // this thread's rows see keys k0 + [rel_begin, rel_end)
    int rel_max = 0;
#pragma unroll
    for (int mt = 0; mt < kM; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t row = q0 + warp_row0 + mt * kMmaM + quad_row + h * kMmaN;
        rel_begin[mt][h] = rel(vis.row_begin(row));
        rel_end[mt][h] = rel(vis.row_end(row));
        rel_max = max(rel_max, rel_end[mt][h]);
      }
    // Columns nt*8 + quad_col + {0, 1} of this thread, the hidden keys below rel_max (the others are seen by
    // every row of the tile: the tensor cores carry their non-finite values like any other).
#pragma unroll
    for (int nt = 0; nt < kNO; ++nt) {
      bool poison[kM][2][2] = {};  // [mt][row half][column]
      for (int j = 0; j < rel_max; ++j) {
        if (!hidden.contains(j)) continue;
        const uint32_t x = ld_shared_b32(v_smem + chunk_offset<Cfg::kBlockN>(j, nt) + quad_col * kElementBytes);
        const bool bad_lo = nonfinite_lo(x);
        const bool bad_hi = nonfinite_hi(x);
#pragma unroll
        for (int mt = 0; mt < kM; ++mt)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const bool sees = j >= rel_begin[mt][h] && j < rel_end[mt][h];
            poison[mt][h][0] |= bad_lo && sees;
            poison[mt][h][1] |= bad_hi && sees;
          }
      }
#pragma unroll
      for (int mt = 0; mt < kM; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int e = 0; e < 2; ++e)
            if (poison[mt][h][e]) st.acc_o[mt][nt][2 * h + e] = __int_as_float(0x7FC00000);
    }
    sync();  // every thread has read the original V
    for_hidden_v_words(v_smem, vis, q0, k0, tid, [&](int, uint32_t addr, uint32_t x, uint32_t mask) {
      if (mask != 0u) st_shared_b32(addr, x & ~mask);  // +0 where the half was inf or NaN
    });
    if constexpr (kWg) fence_proxy_async_shared();
    sync();
  }
};

}  // namespace tc_kernel
}  // namespace FLASHCHECK_KERNEL_VARIANT
}  // namespace flashcheck::detail
