// cp.async loads of the fp16/bf16 tensor-core forward kernel (kernel.cuh): which 16-byte chunks a thread copies,
// Q and K/V tiles into the padded or swizzled layouts of tile_config.h (rows past the sequence and columns past
// head_dim zero-filled, never read), the ring's copy slots, and the exact negation of Q for negative scales. The
// warp-specialized kernel loads by TMA instead (kernel_ws.cuh) and shares only negate_chunk.
#pragma once

#include "fragments.cuh"
#include "scheduler.cuh"

namespace flashcheck::detail {
inline namespace FLASHCHECK_KERNEL_VARIANT {
namespace tc_kernel {

template <typename T, class Cfg>
struct Fragments<T, Cfg>::TileLoads {
  // Which 16-byte chunks a thread copies of a tile whose rows are kChunks chunks (Q and K: kChunksPerRow; V:
  // kChunksPerRowV): one column chunk, rows kRowStep<kChunks> apart. Threads past kRowStep * kChunks idle (only when
  // kThreads is no multiple of the chunk count, e.g. head_dim 96).
  template <int kChunks = Cfg::kChunksPerRow>
  static constexpr int kRowStep = Cfg::load_row_step(kChunks);
  struct LoadSlot {
    int row;        // first row of this thread, or a row past every tile if the thread idles
    int chunk;      // column chunk
    int src_bytes;  // 16, or fewer / 0 where the chunk runs past head_dim (zero-filled)
    int col;        // element offset of the chunk in a row; 0 for a chunk wholly past head_dim
  };

  template <int kChunks = Cfg::kChunksPerRow>
  __device__ static LoadSlot load_slot(int head_dim) {
    const int tid = static_cast<int>(threadIdx.x);
    LoadSlot slot;
    slot.chunk = tid % kChunks;
    slot.row = tid < kRowStep<kChunks> * kChunks ? tid / kChunks : Cfg::kBlockM;
    const int cols = min(max(head_dim - slot.chunk * kChunkElems, 0), kChunkElems);
    slot.src_bytes = cols * kElementBytes;
    slot.col = cols > 0 ? slot.chunk * kChunkElems : 0;  // a valid address even when nothing is read
    return slot;
  }

  // V's slot: Q's and K's where V's rows have their width, else V's own over value_cols columns.
  __device__ static LoadSlot value_slot(const KernelArgs& a, const LoadSlot& slot) {
    if constexpr (Cfg::kChunksPerRowV == Cfg::kChunksPerRow) {
      return slot;
    } else {
      return load_slot<Cfg::kChunksPerRowV>(static_cast<int>(value_cols(a)));
    }
  }

  // A (kRows, kHeadDim) tile from rows [row0, row0 + rows_valid) of one head: whole 16-byte chunks by cp.async;
  // rows past rows_valid and columns past head_dim are zero-filled without being read (copy_chunk_16).
  template <int kRows, int kChunks = Cfg::kChunksPerRow>
  __device__ static void load_tile(uint32_t smem_tile, const T* head, int64_t row0, int64_t row_stride,
                                   int64_t rows_valid, const LoadSlot& slot) {
    constexpr int kPasses = (kRows + kRowStep<kChunks> - 1) / kRowStep<kChunks>;
    // Every pass lies inside the tile for every thread: the passes divide it and no thread idles (an idle thread's
    // first row is past every tile, load_slot).
    constexpr bool kWholePasses = kRows % kRowStep<kChunks> == 0 && kRowStep<kChunks> * kChunks == Cfg::kThreads;
    // The 64-bit address math is redone per tile on purpose (opaque stride): hoisted out of the K/V loop,
    // one pointer per chunk would hold 2 registers each across the loop and push the accumulators to spills.
    int64_t stride = row_stride;
    asm volatile("" : "+l"(stride));
    const T* src = head + (row0 + slot.row) * stride + slot.col;
    const int64_t step = kRowStep<kChunks> * stride;
    // Passes are kRowStep<kChunks> rows apart, a whole number of swizzle atoms: the swizzle is the same in every pass.
    const uint32_t dst = smem_tile + chunk_offset<kRows>(slot.row, slot.chunk);
    if (rows_valid >= kRows) {  // whole tile: only the column predicate, constant per thread
#pragma unroll
      for (int i = 0; i < kPasses; ++i) {
        if (kWholePasses || slot.row + i * kRowStep<kChunks> < kRows) {
          copy_chunk_16(dst + i * kRowStep<kChunks> * kRowBytes, src, slot.src_bytes);
        }
        src += step;
      }
    } else {
#pragma unroll
      for (int i = 0; i < kPasses; ++i) {
        const int row = slot.row + i * kRowStep<kChunks>;
        if (kWholePasses || row < kRows) {
          const bool live = row < rows_valid;
          copy_chunk_16(dst + i * kRowStep<kChunks> * kRowBytes, live ? src : head, live ? slot.src_bytes : 0);
        }
        src += step;
      }
    }
  }

  // The shared-memory slots copies fill (CpAsyncShadow, common/mutants.cuh): Q, and the two K/V ring stages.
  static constexpr int kSlotQ = 0;
  using Copies = CpAsyncShadow<3>;
  __device__ static int stage_slot(int tile) { return 1 + (tile & 1); }

  // Perturbed builds: a slot read before a wait guaranteed its copies reads NaN (common/mutants.cuh).
  __device__ static void poison_if_premature(const Copies& copies, int slot, uint32_t base, int bytes) {
    detail::poison_if_premature(copies.premature(slot), base, bytes, static_cast<int>(threadIdx.x), Cfg::kThreads,
                                [] { __syncthreads(); });
  }

  // Flips the sign bit of the Q chunks this thread loaded (its own cp.async writes are visible to it after
  // the wait). Exact, so scores are exactly negated.
  __device__ static void negate_own_q_chunks(uint32_t q_smem, const LoadSlot& slot) {
    constexpr int kPasses = (Cfg::kBlockM + kRowStep<> - 1) / kRowStep<>;
#pragma unroll
    for (int i = 0; i < kPasses; ++i) {
      const int row = slot.row + i * kRowStep<>;
      if (row < Cfg::kBlockM) negate_chunk(q_smem + chunk_offset<Cfg::kBlockM>(row, slot.chunk));
    }
  }

  // Flips the sign bits of the 8 fp16/bf16 values of one 16-byte shared-memory chunk (exact negation).
  __device__ static void negate_chunk(uint32_t addr) {
    constexpr uint32_t kSignBits = 0x80008000u;
    uint4 v = ld_shared_v4(addr);
    v.x ^= kSignBits;
    v.y ^= kSignBits;
    v.z ^= kSignBits;
    v.w ^= kSignBits;
    st_shared_v4(addr, v);
  }

  // cp.async of the item's Q tile, one commit group.
  __device__ static void load_q(const KernelArgs& a, const Item& it, uint32_t q_smem, const LoadSlot& slot) {
    const T* q_head = head_of<const T>(a.q, it.qb, it.h);
    load_tile<Cfg::kBlockM>(q_smem, q_head, it.q_row0 + it.q0, a.q.stride.row, it.q_rows, slot);
    cp_async_commit();
  }

  // cp.async of the item's K/V tile n (n < n_tiles) into one ring stage: K, then V (slot_v: value_slot), one commit
  // group.
  __device__ static void load_kv(const KernelArgs& a, const Item& it, int n, uint32_t stage, const LoadSlot& slot,
                                 const LoadSlot& slot_v) {
    const T* k_head = head_of<const T>(a.k, it.kb, it.hk);
    const T* v_head = head_of<const T>(a.v, it.kb, it.hk);
    const int64_t k0 = int64_t{it.first + n} * Cfg::kBlockN;
    // Rows past the sequence's keys are zero-filled, never read (with sequences, other memory lies there).
    load_tile<Cfg::kBlockN>(stage, k_head, it.k_row0 + k0, a.k.stride.row, it.vis.seqlen_k - k0, slot);
    load_tile<Cfg::kBlockN, Cfg::kChunksPerRowV>(stage + Cfg::kKTileSmemBytes, v_head, it.k_row0 + k0, a.v.stride.row,
                                                 it.vis.seqlen_k - k0, slot_v);
    cp_async_commit();
  }
};

}  // namespace tc_kernel
}  // namespace FLASHCHECK_KERNEL_VARIANT
}  // namespace flashcheck::detail
