// The split-TF32 forward kernel on sm_90a warpgroup MMAs (wgmma m64nNk8 tf32): the same three products per fp32
// product as kernel.cuh (hi*hi' + hi*lo' + lo*hi', hi = tf32(x) ties away, lo = x - hi entering truncated), at
// wgmma's tf32 rate. tf32 wgmma reads only K-major operands and cannot split them itself, so a producer
// warpgroup stages every K/V tile already split: cp.async copies into a raw staging buffer, the split, and
// shared-memory stores into the 128-byte-swizzled layout the descriptors read (K as hi and lo tiles; V
// transposed, keys contiguous, as hi and lo tiles). Two consumer warpgroups of 64 query rows each split their Q rows once per item the same way and
// only compute: S from Q and K in shared memory, O += P V with P split in registers. mbarriers (full/empty per
// tile) pace the producer.
//
// Rounding (docs/error-model.md, the split-TF32 column; docs/design/ has the measurements). The tensor core
// truncates every k8 step's fp32 result, so a chain of k8 steps through one accumulator shrinks the running sum
// by about 2^-25 a link. Chains are kept short and fresh:
//  - S: each half of the head dims has its own accumulator, from zero: first the small products (lo*hi', hi*lo')
//    of every k8 step while the partial is tiny, then the hi*hi' products; s = S_a + S_b rounded to nearest.
//  - P V: a fresh accumulator per K/V tile (kBlockN keys) and half of the head dims, small products first,
//    added to O with fp32 RN adds after O's rescale by alpha (acc * alpha, then + tile).
// Per consumer warpgroup, S(n + 1) is issued right behind the second half of P(n) V(n).
// The online softmax, the mask, the exact paths and the epilogue are kernel.cuh's, operation for operation:
// scores a split cannot carry (NaN from a non-finite or tf32-overflowing Q/K input) are recomputed as fp32 FMA
// chains; V values the split cannot carry enter the tensor cores as 0 and rows that see them take fp32 FMAs
// on CUDA cores for that tile, so a row's arithmetic depends only on the keys it sees.
#pragma once

#include "split_tf32/kernel.cuh"

#if defined(FLASHCHECK_TC_WGMMA)

#include "split_tf32/wgmma_tf32.cuh"
#include "tensor_core/ptx.cuh"

namespace flashcheck::detail {
inline namespace FLASHCHECK_KERNEL_VARIANT {
namespace split_tf32 {

namespace wg {
using tc_kernel::fence_operands;
using tc_kernel::fence_proxy_async_shared;
using tc_kernel::mbarrier_arrive;
using tc_kernel::mbarrier_init;
using tc_kernel::mbarrier_wait;
using tc_kernel::named_barrier_or;
using tc_kernel::setmaxnreg_dec;
using tc_kernel::setmaxnreg_inc;
using tc_kernel::smem_address;
using tc_kernel::st_shared_b32;
using tc_kernel::st_shared_v4;
using tc_kernel::descriptor_plus;
using tc_kernel::sw128_descriptor;
using tc_kernel::warp_uniform;
using tc_kernel::wgmma_commit;
using tc_kernel::wgmma_fence;
using tc_kernel::wgmma_wait;

inline constexpr int kWarpgroupThreads = 4 * kWarpSize;
inline constexpr int kSwizzleRowBytes = 128;                          // one row of a 128-byte swizzle atom
inline constexpr int kSwizzleRowFloats = kSwizzleRowBytes / 4;        // 32 fp32 / tf32 values
inline constexpr int kSwizzleAtomBytes = 8 * kSwizzleRowBytes;        // 8 rows: the descriptor's stride offset
inline constexpr int kStepBytes = kMmaK * 4;                          // one k8 step inside a swizzle row
// Registers after setmaxnreg: 56 * 128 + 224 * 256 = 168 * 384, the launch's allocation (__launch_bounds__(384, 1)).
inline constexpr int kProducerRegs = 56;
inline constexpr int kConsumerRegs = 224;
inline constexpr int kLaunchRegs = 168;
inline constexpr int kBarWarpgroup = 1;  // named barrier 1 + w: consumer warpgroup w

// Byte offset of value c (0..31) of row r in a 128-byte-swizzled column block whose base is 1024-byte aligned:
// the 16-byte chunk index is XORed with the row's position in its 8-row atom (the hardware's Swizzle<3,4,3>).
__device__ __forceinline__ uint32_t swizzled(int r, int c) {
  return static_cast<uint32_t>(r * kSwizzleRowBytes + ((((c >> 2) ^ (r & 7)) << 4) | ((c & 3) << 2)));
}

// Four consecutive values of row `row` from dim d on, zero where row >= rows_end or a dim >= head_dim (a
// 16-byte load when the chunk is whole: bases and strides are whole chunks, split_tf32_select()).
__device__ __forceinline__ float4 load_chunk(const float* base, int64_t row_stride, int64_t row, int64_t rows_end,
                                             int d, int64_t head_dim) {
  float4 x = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if (row >= rows_end || d >= head_dim) return x;
  const float* p = base + row * row_stride + d;
  if (d + kFloat4Lanes <= head_dim) return __ldg(reinterpret_cast<const float4*>(p));
  x.x = p[0];
  if (d + 1 < head_dim) x.y = p[1];
  if (d + 2 < head_dim) x.z = p[2];
  return x;
}
// (Non-short-circuit: four compares, no branches.)
__device__ __forceinline__ bool splittable4(const float4& x) {
  return (fabsf(x.x) < kTf32Overflow) & (fabsf(x.y) < kTf32Overflow) & (fabsf(x.z) < kTf32Overflow) &
         (fabsf(x.w) < kTf32Overflow);
}
// Stores the split of x at `offset` of the hi and lo tiles (the same swizzled position in both).
__device__ __forceinline__ void store_split4(uint32_t hi_tile, uint32_t lo_tile, uint32_t offset, const float4& x) {
  const Tf32Split a = split_tf32(x.x), b = split_tf32(x.y), c = split_tf32(x.z), d = split_tf32(x.w);
  st_shared_v4(hi_tile + offset, make_uint4(a.hi, b.hi, c.hi, d.hi));
  st_shared_v4(lo_tile + offset, make_uint4(a.lo, b.lo, c.lo, d.lo));
}
}  // namespace wg

// The shape of one split-TF32 wgmma kernel (tile sizes, shared-memory layout and barriers, work items), which its
// producer and consumer parts share.
template <typename Cfg, bool kInst>
struct WgmmaShape {
  static constexpr int kHeadDim = Cfg::kHeadDim;
  static constexpr int kBlockM = Cfg::kBlockM;
  static constexpr int kBlockN = Cfg::kBlockN;
  static constexpr int kThreads = Cfg::kThreads;
  static constexpr int kConsumerThreads = 2 * wg::kWarpgroupThreads;
  static constexpr int kSTiles = kBlockN / kMmaN;        // n8 tiles of S = k8 steps of P V
  static constexpr int kQkSteps = kHeadDim / kMmaK;      // k8 steps of S
  static constexpr int kOTiles = kHeadDim / kMmaN;       // n8 tiles of O
  static constexpr int kChunksPerRow = kHeadDim / kFloat4Lanes;
  static constexpr uint32_t kQTileBytes = kBlockM * kHeadDim * 4;  // one part (hi or lo) of Q
  static constexpr uint32_t kKTileBytes = kBlockN * kHeadDim * 4;
  static constexpr uint32_t kVTileBytes = kHeadDim * kBlockN * 4;
  static_assert(kBlockM == 2 * kWgmmaRowsTf32, "two consumer warpgroups of 64 query rows");
  static_assert(kThreads == 3 * wg::kWarpgroupThreads, "one producer and two consumer warpgroups");
  static_assert(kHeadDim % wg::kSwizzleRowFloats == 0 && kBlockN % wg::kSwizzleRowFloats == 0,
                "tiles are whole 128-byte swizzle rows along K");
  static_assert(kQkSteps % 2 == 0, "S is accumulated in two halves of the head dims");
  static_assert(kBlockN <= 64, "the producer's bad-V key masks are 64-bit words");
  static_assert((kBlockN * kChunksPerRow) % wg::kWarpgroupThreads == 0 &&
                    (kWgmmaRowsTf32 * kChunksPerRow) % wg::kWarpgroupThreads == 0,
                "tiles split evenly over a warpgroup");
  static_assert(wg::kProducerRegs * wg::kWarpgroupThreads + wg::kConsumerRegs * kConsumerThreads ==
                    wg::kLaunchRegs * kThreads,
                "setmaxnreg: the warpgroups must share exactly the registers the launch allocates");
  // Q, K, V as hi and lo tiles, then the raw staging buffers of K and V, from a 1024-byte aligned base.
  static constexpr int kSmemBytes = static_cast<int>(2 * (kQTileBytes + kKTileBytes + kVTileBytes) + kKTileBytes +
                                                     kVTileBytes) + 1024;

  // Per tile slot: full (the producer's 128 threads have stored it), empty (the 256 consumer threads are done);
  // which K/V values of the staged tile the split could not carry, one word per producer warp.
  struct Shared {
    uint64_t k_full, k_empty, v_full, v_empty;
    uint32_t k_unsplittable[4];  // nonzero: some K value of the tile is non-finite or overflows tf32
    uint64_t v_bad[4];           // bit j: key j of the tile has such a V value
    uint32_t q_rows[2];          // address of consumer warpgroup w's rows in the Q hi tile (see qk_issue)
    uint32_t k_hi, v_hi;         // addresses of the K and V hi tiles (lo tiles follow each)
  };
  struct Layout {
    uint32_t q_hi, q_lo, k_hi, k_lo, v_hi, v_lo, k_raw, v_raw;
  };
  // The work item of a CTA step, as kernel.cuh orders them (last Q tile first, Q tiles fastest).
  struct Item {
    int64_t q_tile, h, b, h_kv, m0, block_keys;
    int64_t first;    // K/V tile n of the item is tile first + n (common/visibility.h, TileRange)
    int64_t k_tiles;  // tiles visited
    int32_t full_begin, full_end;  // tiles [full_begin, full_end) need no mask
    __device__ bool needs_mask(int64_t n) const { return n < full_begin || n >= full_end; }
  };
  __device__ static Item item_at(const SplitTf32Args<kInst>& a, int64_t work) {
    Item it;
    it.q_tile = a.q_tiles - 1 - work % a.q_tiles;
    const int64_t head_batch = work / a.q_tiles;
    it.h = head_batch % a.heads_q;
    it.b = head_batch / a.heads_q;
    it.h_kv = it.h / a.group_size;
    it.m0 = it.q_tile * kBlockM;
    const int64_t rows_end = min(it.m0 + kBlockM, a.seqlen_q);
    const Visibility::TileRange tiles = a.vis.tile_range(it.m0, rows_end - it.m0, kBlockN);
    it.first = tiles.first;
    it.k_tiles = tiles.count;
    it.full_begin = static_cast<int32_t>(tiles.full_begin);
    it.full_end = static_cast<int32_t>(tiles.full_end);
    it.block_keys = a.vis.row_end(rows_end - 1);
    return it;
  }

  // The parts, defined below as WgmmaShape<Cfg, kInst>::Part so that they name these members without qualification.
  struct Producer;  // the producer warpgroup
  struct Gemms;     // the consumers' products
  struct Exact;     // the consumers' exact paths
};

// The producer warpgroup: every K/V tile of every item of this CTA, split into hi/lo tiles.
template <typename Cfg, bool kInst>
struct WgmmaShape<Cfg, kInst>::Producer {
  // ---- producer: every K/V tile of every item of this CTA, split into the hi/lo tiles. Each tile first lands
  // raw (cp.async, 16-byte chunks, zero-filled past the keys the block sees and past head_dim) in a staging
  // buffer of its own operand; each producer thread later reads back exactly the chunks it copied (no barrier:
  // cp.async.wait_group makes a thread's own copies visible to it), splits them and stores the hi/lo tiles once
  // the consumers have released the slot. The raw copy of tile n + 1 of an operand is issued as soon as tile n
  // of it has been split, so global-memory latency stays off the consumers' path.
  static constexpr int kChunksPerThread = kBlockN * kChunksPerRow / wg::kWarpgroupThreads;
  // The chunks of a tile producer thread p handles are c = p + 128 u, u < kChunksPerThread. In K's order (key
  // c / kChunksPerRow, dims chunk c % kChunksPerRow) that is one dims chunk and every kKeyStep-th key. V's
  // transposed order (one store instruction of a warp covers 8 keys x 4 dims, two-way bank conflicts at most):
  // warp slot c / 32 = w + 4u and lane l = c % 32 give key 8 ((w + 4u) % kKeyGroups) + l % 8 and dims chunk
  // 4 ((w + 4u) / kKeyGroups) + l / 8. Written per u (the loops are unrolled), so every index is a per-thread
  // value plus a constant: the producer is one warp per scheduler and issues every instruction of the split.
  static constexpr int kKeyStep = wg::kWarpgroupThreads / kChunksPerRow;
  static constexpr int kKeyGroups = kBlockN / 8;
  static_assert(wg::kWarpgroupThreads % kChunksPerRow == 0, "a producer thread keeps one dims chunk of K");
  static_assert(kKeyGroups % 4 == 0, "the four producer warps start on key groups of one V chunk row");
  static_assert(32 % kKeyStep == 0, "copy_raw steps V's rows in whole K key steps");
  struct ChunkPos {
    int key, dc;  // key of the tile, dims chunk (4 dims)
  };
  __device__ static ChunkPos k_pos(uint32_t ptid, int u) {
    return {static_cast<int>(ptid / kChunksPerRow) + u * kKeyStep, static_cast<int>(ptid % kChunksPerRow)};
  }
  __device__ static ChunkPos v_pos(uint32_t ptid, int u) {
    const int pwarp = static_cast<int>(ptid / kWarpSize), lane = static_cast<int>(ptid % kWarpSize);
    return {(pwarp + (4 * u) % kKeyGroups) * 8 + lane % 8, (4 * u) / kKeyGroups * 4 + lane / 8};
  }
  template <bool kTransposed>
  __device__ static ChunkPos chunk_pos(uint32_t ptid, int u) {
    return kTransposed ? v_pos(ptid, u) : k_pos(ptid, u);
  }
  template <bool kTransposed>
  __device__ static void copy_raw(uint32_t raw, const float* head, int64_t row_stride, int64_t k0, int64_t rows_end,
                                  int64_t head_dim, uint32_t ptid) {
    const int keys = static_cast<int>(min(rows_end - k0, int64_t{kBlockN}));  // keys of the tile the block sees
    const int dims = static_cast<int>(head_dim);
    const ChunkPos first = chunk_pos<kTransposed>(ptid, 0);
    const float* row0 = head + (k0 + first.key) * row_stride;
    const int64_t key_step = row_stride * kKeyStep;
#pragma unroll
    for (int u = 0; u < kChunksPerThread; ++u) {
      const ChunkPos pos = chunk_pos<kTransposed>(ptid, u);
      const int d = pos.dc * kFloat4Lanes;
      const bool any = pos.key < keys && d < dims;
      // K: every kKeyStep-th key; V: rows 32 keys apart, a multiple of kKeyStep.
      const float* row = row0 + ((pos.key - first.key) / kKeyStep) * key_step;
      const float* src = any ? row + d : head;
      const int bytes = any ? min(kFloat4Lanes, dims - d) * 4 : 0;
      tc_kernel::cp_async_16(raw + (ptid + u * wg::kWarpgroupThreads) * 16u, src, bytes);
    }
    tc_kernel::cp_async_commit();
  }
  __device__ static float4 raw_chunk(uint32_t raw, uint32_t ptid, int u) {
    const uint4 x = tc_kernel::ld_shared_v4(raw + (ptid + u * wg::kWarpgroupThreads) * 16u);
    return make_float4(__uint_as_float(x.x), __uint_as_float(x.y), __uint_as_float(x.z), __uint_as_float(x.w));
  }

  __device__ static void produce(const SplitTf32Args<kInst>& a, Shared& sh, const Layout& lay, uint32_t ptid) {
    const uint32_t lane = ptid % kWarpSize;
    const uint32_t pwarp = ptid / kWarpSize;
    uint32_t tile = 0;
    for (int64_t work = blockIdx.x; work < a.work_items; work += gridDim.x) {
      const Item it = item_at(a, work);
      if (it.k_tiles == 0) continue;
      const float* k_head = a.k.template head<const float>(it.b, it.h_kv);
      const float* v_head = a.v.template head<const float>(it.b, it.h_kv);
      const int64_t k_first = it.first * kBlockN;
      copy_raw<false>(lay.k_raw, k_head, a.k.stride.row, k_first, it.block_keys, a.head_dim, ptid);
      copy_raw<true>(lay.v_raw, v_head, a.v.stride.row, k_first, it.block_keys, a.head_dim, ptid);
      for (int64_t n = 0; n < it.k_tiles; ++n, ++tile) {
        const bool more = n + 1 < it.k_tiles;
        // K(n): committed before V(n), so one pending group (V(n)) may remain.
        tc_kernel::cp_async_wait<1>();
        wg::mbarrier_wait(wg::smem_address(&sh.k_empty), (tile & 1) ^ 1);
        bool bad = false;
#pragma unroll
        for (int u = 0; u < kChunksPerThread; ++u) {
          const float4 x = raw_chunk(lay.k_raw, ptid, u);
          const auto [key, dc] = k_pos(ptid, u);
          bad |= !wg::splittable4(x);
          // Unsplittable values are stored split all the same: their scores come out NaN and are recomputed.
          wg::store_split4(lay.k_hi, lay.k_lo,
                           static_cast<uint32_t>((dc / 8) * (kBlockN * wg::kSwizzleRowBytes)) +
                               wg::swizzled(key, (dc % 8) * kFloat4Lanes),
                           x);
        }
        const bool warp_bad = __any_sync(kFullWarpMask, bad);
        if (lane == 0) sh.k_unsplittable[pwarp] = warp_bad ? 1u : 0u;
        wg::fence_proxy_async_shared();
        FC_PERTURB(kPerturbTf32Producer, tile);
        wg::mbarrier_arrive(wg::smem_address(&sh.k_full));
        if (more)
          copy_raw<false>(lay.k_raw, k_head, a.k.stride.row, k_first + (n + 1) * kBlockN, it.block_keys, a.head_dim, ptid);

        // V(n), transposed. Within each group of 8 keys the keys are stored in P's A-fragment order: k-slot s < 4
        // holds key 2s, slot s + 4 key 2s + 1 (the S accumulator element pair (2t, 2t + 1) of a lane is its A
        // fragment's slots (t, t + 4)).
        if (more) {
          tc_kernel::cp_async_wait<1>();  // K(n + 1) may still be in flight
        } else {
          tc_kernel::cp_async_wait<0>();
        }
        wg::mbarrier_wait(wg::smem_address(&sh.v_empty), (tile & 1) ^ 1);
        // A thread's V chunks lie on kKeyGroups / 4 keys (v_pos): one flag each, turned into key bits once.
        constexpr int kThreadKeys = kKeyGroups / 4;
        bool bad_key[kThreadKeys] = {};
#pragma unroll
        for (int u = 0; u < kChunksPerThread; ++u) {
          const float4 x = raw_chunk(lay.v_raw, ptid, u);
          const auto [key, dc] = v_pos(ptid, u);
          const int j8 = key % 8;
          const int pos = (key % wg::kSwizzleRowFloats) / 8 * 8 + (j8 % 2) * 4 + j8 / 2;
          const uint32_t block =
              static_cast<uint32_t>((key / wg::kSwizzleRowFloats) * (kHeadDim * wg::kSwizzleRowBytes));
          Tf32Split sp[kFloat4Lanes];
#pragma unroll
          for (int i = 0; i < kFloat4Lanes; ++i) sp[i] = split_tf32(float4_lane(x, i));
          if (!wg::splittable4(x)) {
            bad_key[(4 * u) % kKeyGroups / 4] = true;
            // A value the split cannot carry enters as 0 (its key's p is 0 for every row that does not take
            // the exact path): never inf * 0 on the tensor cores.
#pragma unroll
            for (int i = 0; i < kFloat4Lanes; ++i) {
              if (!(fabsf(float4_lane(x, i)) < kTf32Overflow)) sp[i] = Tf32Split{0u, 0u};
            }
          }
#pragma unroll
          for (int i = 0; i < kFloat4Lanes; ++i) {
            const uint32_t offset = block + wg::swizzled(dc * kFloat4Lanes + i, pos);
            wg::st_shared_b32(lay.v_hi + offset, sp[i].hi);
            wg::st_shared_b32(lay.v_lo + offset, sp[i].lo);
          }
        }
        uint64_t bad_keys = 0;  // bit j: key j of the tile has a V value the split cannot carry
#pragma unroll
        for (int k = 0; k < kThreadKeys; ++k) {
          if (bad_key[k]) bad_keys |= uint64_t{1} << v_pos(ptid, k).key;
        }
        const uint32_t bad_lo = __reduce_or_sync(kFullWarpMask, static_cast<uint32_t>(bad_keys));
        const uint32_t bad_hi = __reduce_or_sync(kFullWarpMask, static_cast<uint32_t>(bad_keys >> 32));
        if (lane == 0) sh.v_bad[pwarp] = (uint64_t{bad_hi} << 32) | bad_lo;
        wg::fence_proxy_async_shared();
        wg::mbarrier_arrive(wg::smem_address(&sh.v_full));
        if (more)
          copy_raw<true>(lay.v_raw, v_head, a.v.stride.row, k_first + (n + 1) * kBlockN, it.block_keys, a.head_dim, ptid);
      }
    }
  }
};

// The consumers' products: Q split into hi/lo tiles, S = Q K^T as two chains per half of the head dims, P split
// in registers and O += P V per K/V tile and half of the head dims (the rounding of the file's header).
template <typename Cfg, bool kInst>
struct WgmmaShape<Cfg, kInst>::Gemms {
  // ---- consumers
  // Splits this warpgroup's 64 Q rows of the item into the hi/lo tiles; true if any value the split cannot carry.
  __device__ static bool stage_q(const SplitTf32Args<kInst>& a, const Layout& lay, const Item& it, int w, int wtid) {
    constexpr int kChunks = kWgmmaRowsTf32 * kChunksPerRow / wg::kWarpgroupThreads;
    const float* q_head = a.q.template head<const float>(it.b, it.h);
    bool bad = false;
#pragma unroll 4
    for (int u = 0; u < kChunks; ++u) {
      const int c = wtid + u * wg::kWarpgroupThreads;
      const int r = w * kWgmmaRowsTf32 + c / kChunksPerRow, dc = c % kChunksPerRow;
      const float4 x =
          wg::load_chunk(q_head, a.q.stride.row, it.m0 + r, a.seqlen_q, dc * kFloat4Lanes, a.head_dim);
      bad |= !wg::splittable4(x);
      wg::store_split4(lay.q_hi, lay.q_lo,
                       static_cast<uint32_t>((dc / 8) * (kBlockM * wg::kSwizzleRowBytes)) +
                           wg::swizzled(r, (dc % 8) * kFloat4Lanes),
                       x);
    }
    wg::fence_proxy_async_shared();
    return wg::named_barrier_or(wg::kBarWarpgroup + w, wg::kWarpgroupThreads, bad);
  }

  // A chain's base descriptor, opaque to the compiler: each step's descriptor is then descriptor_plus(base, offset),
  // one uniform add. Seeing the layout bits, ptxas masks every such sum again (one more uniform instruction per
  // operand and wgmma, 476 → 313 → 253 instructions in d = 128's S chain with the opaque base).
  __device__ static uint64_t desc(uint32_t addr) {
    uint64_t d = wg::sw128_descriptor(addr, 16, wg::kSwizzleAtomBytes);
    asm volatile("" : "+l"(d));
    return d;
  }

  // Issues S = Q K^T for this warpgroup's rows as one commit group: the head dims in two halves, each its own
  // fresh chain (small products of every k8 step first, then the hi*hi' products).
  // The tile addresses are read from shared memory at every call: the tiles stay put from tile to tile, and
  // ptxas would otherwise hoist every one of the 3 kQkSteps (and 3 kSTiles) descriptors out of the tile loop
  // into general registers and spill them.
  __device__ static void qk_issue(float (&sa)[kSTiles][4], float (&sb)[kSTiles][4], const Shared& sh, int w) {
    const uint32_t q_hi = wg::warp_uniform(tc_kernel::ld_shared_b32(wg::smem_address(&sh.q_rows[w])));
    const uint32_t k_hi = wg::warp_uniform(tc_kernel::ld_shared_b32(wg::smem_address(&sh.k_hi)));
    const uint32_t q_lo = q_hi + kQTileBytes, k_lo = k_hi + kKTileBytes;
    const uint64_t q_hi_desc = desc(q_hi), q_lo_desc = desc(q_lo), k_hi_desc = desc(k_hi), k_lo_desc = desc(k_lo);
    const auto q_at = [&](uint64_t part, int kk) {
      return wg::descriptor_plus(part, static_cast<uint32_t>((kk / 4) * (kBlockM * wg::kSwizzleRowBytes) + (kk % 4) * wg::kStepBytes));
    };
    const auto k_at = [&](uint64_t part, int kk) {
      return wg::descriptor_plus(part, static_cast<uint32_t>((kk / 4) * (kBlockN * wg::kSwizzleRowBytes) + (kk % 4) * wg::kStepBytes));
    };
    const auto half = [&](float(&s)[kSTiles][4], int kk0) {
#pragma unroll
      for (int kk = kk0; kk < kk0 + kQkSteps / 2; ++kk) {
        wgmma_tf32::Mma<kBlockN>::ss(s, q_at(q_lo_desc, kk),
                                     k_at(FC_MUTANT(kTf32MissingLoTerm) ? k_lo_desc : k_hi_desc, kk), kk == kk0 ? 0 : 1);
        wgmma_tf32::Mma<kBlockN>::ss(s, q_at(q_hi_desc, kk), k_at(k_lo_desc, kk), 1);
      }
#pragma unroll
      for (int kk = kk0; kk < kk0 + kQkSteps / 2; ++kk)
        wgmma_tf32::Mma<kBlockN>::ss(s, q_at(q_hi_desc, kk), k_at(k_hi_desc, kk), 1);
    };
    wg::fence_operands(sa);
    wg::fence_operands(sb);
    wg::wgmma_fence();
    half(sa, 0);
    half(sb, kQkSteps / 2);
    wg::wgmma_commit();
  }

  // Splits P (the S accumulator layout) into tf32 hi/lo A fragments: slots (g, t), (g+8, t), (g, t+4), (g+8, t+4)
  // of k8 step j <- S elements (g, 2t), (g+8, 2t), (g, 2t+1), (g+8, 2t+1) of n8 tile j.
  __device__ static void split_p(const float (&p)[kSTiles][4], uint32_t (&ph)[kSTiles][4], uint32_t (&pl)[kSTiles][4]) {
#pragma unroll
    for (int j = 0; j < kSTiles; ++j) {
      const float e[4] = {p[j][0], p[j][2], p[j][1], p[j][3]};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const Tf32Split s = split_tf32(e[i]);
        ph[j][i] = s.hi;
        pl[j][i] = s.lo;
      }
    }
  }

  // Issues half hd of the head dims of the P V tile into a fresh accumulator as one commit group (small products
  // first). Half-width chains keep O, one chain accumulator, P's fragments and S within the registers.
  static constexpr int kHalfTiles = kOTiles / 2;
  __device__ static void pv_issue(float (&ot)[kHalfTiles][4], uint32_t (&ph)[kSTiles][4], uint32_t (&pl)[kSTiles][4],
                                  const Shared& sh, int hd) {
    const uint32_t v_hi = wg::warp_uniform(tc_kernel::ld_shared_b32(wg::smem_address(&sh.v_hi)));
    const uint64_t v_hi_desc = desc(v_hi), v_lo_desc = desc(v_hi + kVTileBytes);
    const auto v_at = [&](uint64_t part, int j) {
      return wg::descriptor_plus(part, static_cast<uint32_t>((j / 4) * (kHeadDim * wg::kSwizzleRowBytes) +
                                                             hd * (kHeadDim / 2) * wg::kSwizzleRowBytes +
                                                             (j % 4) * wg::kStepBytes));
    };
    wg::fence_operands(ot);
    wg::fence_operands(ph);
    wg::fence_operands(pl);
    wg::wgmma_fence();
#pragma unroll
    for (int j = 0; j < kSTiles; ++j) {
      wgmma_tf32::Mma<kHeadDim / 2>::rs(ot, pl[j], v_at(v_hi_desc, j), j == 0 ? 0 : 1);
      wgmma_tf32::Mma<kHeadDim / 2>::rs(ot, ph[j], v_at(v_lo_desc, j), 1);
    }
#pragma unroll
    for (int j = 0; j < kSTiles; ++j) wgmma_tf32::Mma<kHeadDim / 2>::rs(ot, ph[j], v_at(v_hi_desc, j), 1);
    wg::wgmma_commit();
  }

};

// The consumers' exact paths: scores the split cannot carry recomputed as fp32 FMA chains, and rows that see a V
// value the split cannot carry take fp32 FMAs on CUDA cores for that tile.
template <typename Cfg, bool kInst>
struct WgmmaShape<Cfg, kInst>::Exact {
  // Per consumer thread: its two rows (half 0: row g, half 1: row g + 8 of its warp's 16) and their state.
  struct Rows {
    const float* v_head;  // this item's V head (the exact path reads it)
    int64_t row[2], keys_begin[2], keys_end[2];
    float m[2], l_part[2];
    int64_t moves[2];
    int trace_slot[2];
  };

  // ---- the exact paths, out of line: rare, and inlined they crowd the tile loop's registers (ptxas spilled hot
  // values for them). The caller copies the register tiles they touch into a local struct and back.
  template <int N>
  __device__ static void copy_tiles(const float (&from)[N][4], float (&to)[N][4]) {
#pragma unroll
    for (int j = 0; j < N; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) to[j][e] = from[j][e];
  }
  struct Scores {
    float s[kSTiles][4];
  };
  // NaN scores (a Q or K value the split cannot carry: inf - inf) recomputed as fp32 FMA chains over the inputs
  // in global memory, kernel.cuh's arithmetic. Rows past seqlen_q and keys no row of the block sees are left.
  __device__ __noinline__ static void recompute_scores(Scores* sc, const SplitTf32Args<kInst>& a, const Item& it,
                                                       const Rows& r, int64_t k0, int t) {
    const float* q_head = a.q.template head<const float>(it.b, it.h);
    const float* k_head = a.k.template head<const float>(it.b, it.h_kv);
    for (int j = 0; j < kSTiles; ++j) {
      for (int e = 0; e < 4; ++e) {
        const int64_t i = r.row[e / 2], key = k0 + j * kMmaN + 2 * t + e % 2;
        if (!isnan(sc->s[j][e]) || i >= a.seqlen_q || key >= it.block_keys) continue;
        const float* q_row = q_head + i * a.q.stride.row;
        const float* k_row = k_head + key * a.k.stride.row;
        float dot = 0.0f;
        for (int64_t d = 0; d < a.head_dim; ++d) dot = fmaf(q_row[d], k_row[d], dot);
        sc->s[j][e] = dot;
      }
    }
  }
  struct ExactV {
    float p[kSTiles][4];
    float acc[kOTiles][4];
  };
  // V holds values the split cannot carry (they entered the tensor cores as 0). Rows that see one in this tile take
  // fp32 FMAs on CUDA cores over the tile's visible keys, in key order within each quad, each (row, key)
  // predicated on visibility, reading V from global memory; their p then enters the tensor cores as 0
  // (kernel.cuh's exact path). A row's arithmetic so depends only on the keys it sees.
  __device__ __noinline__ static void exact_v_path(ExactV* x, const SplitTf32Args<kInst>& a, const Rows& r,
                                                   int64_t k0, uint64_t bad_keys, int lane) {
    const int t = lane % kQuadLanes, quad_base = lane - t;
    bool exact_row[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const auto below = [](int64_t n) { return n >= 64 ? ~uint64_t{0} : n <= 0 ? uint64_t{0} : (uint64_t{1} << n) - 1; };
      const uint64_t visible = below(min(r.keys_end[half] - k0, int64_t{kBlockN})) & ~below(r.keys_begin[half] - k0);
      exact_row[half] = (bad_keys & visible) != 0;
    }
    for (int j = 0; j < kSTiles; ++j) {
      for (int c = 0; c < 2; ++c) {
        for (int u = 0; u < kQuadLanes; ++u) {
          const int64_t key = k0 + j * kMmaN + 2 * u + c;
          const float p_row[2] = {__shfl_sync(kFullWarpMask, x->p[j][c], quad_base + u),
                                  __shfl_sync(kFullWarpMask, x->p[j][2 + c], quad_base + u)};
          for (int e = 0; e < 4; ++e) {
            const int half = e / 2;
            if (!exact_row[half] || key < r.keys_begin[half] || key >= r.keys_end[half]) continue;
            const float* v_row = r.v_head + key * a.v.stride.row;
#pragma unroll
            for (int jo = 0; jo < kOTiles; ++jo) {
              const int d = jo * kMmaN + 2 * t + e % 2;
              if (d < a.head_dim) x->acc[jo][e] = fmaf(p_row[half], v_row[d], x->acc[jo][e]);
            }
          }
        }
      }
    }
    for (int j = 0; j < kSTiles; ++j)
      for (int e = 0; e < 4; ++e) x->p[j][e] = exact_row[e / 2] ? 0.0f : x->p[j][e];
  }
};

template <typename Cfg, bool kExtras, bool kInst>
struct WgmmaForward : WgmmaShape<Cfg, kInst> {
  using Shape = WgmmaShape<Cfg, kInst>;
  using typename Shape::Producer;
  using typename Shape::Gemms;
  using typename Shape::Exact;
  using Rows = typename Exact::Rows;
  using Scores = typename Exact::Scores;
  using ExactV = typename Exact::ExactV;
  static constexpr int kHalfTiles = Gemms::kHalfTiles;
  using typename Shape::Shared;
  using typename Shape::Layout;
  using typename Shape::Item;
  using Shape::kBlockM;
  using Shape::kBlockN;
  using Shape::kConsumerThreads;
  using Shape::kSTiles;
  using Shape::kOTiles;
  using Shape::kQTileBytes;
  using Shape::kKTileBytes;
  using Shape::kVTileBytes;
  using Shape::item_at;

  __device__ static void run(const SplitTf32Args<kInst>& a, uint8_t* smem) {
    __shared__ Shared sh;
    const int tid = static_cast<int>(threadIdx.x);
    Layout lay;
    const uint32_t base = (wg::smem_address(smem) + 1023u) & ~1023u;
    lay.q_hi = base;
    lay.q_lo = lay.q_hi + kQTileBytes;
    lay.k_hi = lay.q_lo + kQTileBytes;
    lay.k_lo = lay.k_hi + kKTileBytes;
    lay.v_hi = lay.k_lo + kKTileBytes;
    lay.v_lo = lay.v_hi + kVTileBytes;
    lay.k_raw = lay.v_lo + kVTileBytes;
    lay.v_raw = lay.k_raw + kKTileBytes;
    if (tid == 0) {
      wg::mbarrier_init(wg::smem_address(&sh.k_full), wg::kWarpgroupThreads);
      wg::mbarrier_init(wg::smem_address(&sh.v_full), wg::kWarpgroupThreads);
      // Every consumer thread arrives on the empty barriers (each reads the producer's flag words first).
      wg::mbarrier_init(wg::smem_address(&sh.k_empty), kConsumerThreads);
      wg::mbarrier_init(wg::smem_address(&sh.v_empty), kConsumerThreads);
      for (int w = 0; w < 2; ++w) sh.q_rows[w] = lay.q_hi + w * kWgmmaRowsTf32 * wg::kSwizzleRowBytes;
      sh.k_hi = lay.k_hi;
      sh.v_hi = lay.v_hi;
    }
    __syncthreads();
    if (tid < wg::kWarpgroupThreads) {
      wg::setmaxnreg_dec<wg::kProducerRegs>();
      Producer::produce(a, sh, lay, static_cast<uint32_t>(tid));
      return;
    }
    wg::setmaxnreg_inc<wg::kConsumerRegs>();
    consume(a, sh, lay, tid - wg::kWarpgroupThreads);
  }

  __device__ static void consume(const SplitTf32Args<kInst>& a, Shared& sh, const Layout& lay, int ctid) {
    constexpr float kNegInf = -INFINITY;
    const int lane = ctid % kWarpSize;
    const int cwarp = ctid / kWarpSize;  // 0..7: rows 16 cwarp .. of the Q tile
    const int w = cwarp / 4;
    const int wtid = ctid % wg::kWarpgroupThreads;
    const int g = lane / kQuadLanes;
    const int t = lane % kQuadLanes;
    uint32_t tile = 0;
    for (int64_t work = blockIdx.x; work < a.work_items; work += gridDim.x) {
      const Item it = item_at(a, work);
      Rows r;
      r.v_head = a.v.template head<const float>(it.b, it.h_kv);
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        r.row[half] = it.m0 + cwarp * kMmaM + g + half * (kMmaM / 2);
        r.keys_begin[half] = r.row[half] < a.seqlen_q ? a.vis.row_begin(r.row[half]) : 0;
        r.keys_end[half] = r.row[half] < a.seqlen_q ? a.vis.row_end(r.row[half]) : 0;
        r.m[half] = kNegInf;
        r.l_part[half] = 0.0f;
        r.moves[half] = 0;
        r.trace_slot[half] = -1;
      }
      float acc[kOTiles][4];  // O: n8 tile j, elements (g, 8j+2t), (g, 8j+2t+1), (g+8, 8j+2t), (g+8, 8j+2t+1)
#pragma unroll
      for (int j = 0; j < kOTiles; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[j][e] = 0.0f;
      if constexpr (kInst) {
        for (int half = 0; half < 2; ++half) {
          if (r.row[half] < a.seqlen_q) r.trace_slot[half] = trace_slot(a.inst, a.row_block(it.b, it.h) + r.row[half]);
        }
        if (ctid == 0) {
          count_tile_kinds(a.inst, a.vis, it.m0, kBlockM, kBlockN, it.first, it.first + it.k_tiles);
        }
      }
      const bool q_exact = it.k_tiles > 0 && Gemms::stage_q(a, lay, it, w, wtid);

      float s[kSTiles][4], sb[kSTiles][4];  // S(n) in two halves of the head dims, then P(n) in s
      // After S(n) has completed: releases K(n), s = S_a + S_b (RN), recomputes unrepresentable scores, then the
      // online softmax of tile n (kernel.cuh's, operation for operation), including O's rescale by alpha.
      const auto scores_and_softmax = [&](int64_t n) {
        const int64_t k0 = (it.first + n) * kBlockN;
        // Every consumer thread releases the slot itself, after reading the producer's flags: the release orders
        // each thread's own read before the producer's next write (compute-sanitizer racecheck sees it so).
        const bool k_exact = (sh.k_unsplittable[0] | sh.k_unsplittable[1] | sh.k_unsplittable[2] |
                              sh.k_unsplittable[3]) != 0u;
        wg::mbarrier_arrive(wg::smem_address(&sh.k_empty));
#pragma unroll
        for (int j = 0; j < kSTiles; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) s[j][e] = __fadd_rn(s[j][e], sb[j][e]);
        // Scores the split cannot represent: an fp32 FMA chain from the inputs, as kernel.cuh (warp-uniform
        // branch over the tile; taken only when Q or K holds such a value).
        if ((q_exact || k_exact) && !FC_MUTANT(kTf32UnsplittableNotRecomputed)) {
          Scores tmp;
          Exact::copy_tiles(s, tmp.s);
          Exact::recompute_scores(&tmp, a, it, r, k0, t);
          Exact::copy_tiles(tmp.s, s);
        }
        float alpha[2];
        online_softmax_tile<kInst, kExtras>(s, r.m, r.l_part, r.moves, alpha, k0,
                                            it.needs_mask(n) && !FC_MUTANT(kTf32TailUnmasked), r.keys_begin,
                                   r.keys_end, t, a);
#pragma unroll
        for (int j = 0; j < kOTiles; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[j][e] = __fmul_rn(acc[j][e], alpha[e / 2]);
      };

      // With V(n) in: rows that see a V value the split cannot carry take the exact path (exact_v_path).
      const auto exact_v = [&](int64_t n) {
        const uint64_t bad_keys = sh.v_bad[0] | sh.v_bad[1] | sh.v_bad[2] | sh.v_bad[3];
        if (bad_keys == 0) return;
        ExactV tmp;
        Exact::copy_tiles(s, tmp.p);
        Exact::copy_tiles(acc, tmp.acc);
        Exact::exact_v_path(&tmp, a, r, (it.first + n) * kBlockN, bad_keys, lane);
        Exact::copy_tiles(tmp.p, s);
        Exact::copy_tiles(tmp.acc, acc);
      };

      const auto trace = [&](int64_t n) { trace_rows<kInst>(a, r.trace_slot, r.m, r.l_part, n, t); };

      // Software pipeline per warpgroup: P(n) V(n) is issued, then S(n + 1) = Q K(n + 1)^T right behind it, so
      // the tensor cores run S(n + 1) while this warpgroup adds O's tile; the softmax of n + 1 waits for S only.
      // The last tile is peeled off: no wgmma is issued or awaited under a branch (ptxas would serialize them).
      const auto add_half = [&](const float(&ot)[kHalfTiles][4], int hd) {
#pragma unroll
        for (int j = 0; j < kHalfTiles; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[hd * kHalfTiles + j][e] = __fadd_rn(acc[hd * kHalfTiles + j][e], ot[j][e]);
      };
      const auto pv_step = [&]<bool kNext>(int64_t n) {
        wg::mbarrier_wait(wg::smem_address(&sh.v_full), tile & 1);
        FC_PERTURB(kPerturbTf32Consumer, tile);
        exact_v(n);
        uint32_t ph[kSTiles][4], pl[kSTiles][4];
        Gemms::split_p(s, ph, pl);
        float ot[kHalfTiles][4];
        Gemms::pv_issue(ot, ph, pl, sh, 0);
        wg::wgmma_wait<0>();
        wg::fence_operands(ot);
        add_half(ot, 0);
        Gemms::pv_issue(ot, ph, pl, sh, 1);
        if constexpr (kNext) {
          wg::mbarrier_wait(wg::smem_address(&sh.k_full), (tile + 1) & 1);
          Gemms::qk_issue(s, sb, sh, w);
          wg::wgmma_wait<1>();
        } else {
          wg::wgmma_wait<0>();
        }
        wg::fence_operands(ot);
        wg::fence_operands(ph);
        wg::fence_operands(pl);
        wg::mbarrier_arrive(wg::smem_address(&sh.v_empty));
        add_half(ot, 1);
        trace(n);
        ++tile;
        if constexpr (kNext) {
          wg::wgmma_wait<0>();
          wg::fence_operands(s);
          wg::fence_operands(sb);
          scores_and_softmax(n + 1);
        }
      };
      if (it.k_tiles > 0) {
        wg::mbarrier_wait(wg::smem_address(&sh.k_full), tile & 1);
        Gemms::qk_issue(s, sb, sh, w);
        wg::wgmma_wait<0>();
        wg::fence_operands(s);
        wg::fence_operands(sb);
        scores_and_softmax(0);
        for (int64_t n = 0; n + 1 < it.k_tiles; ++n) pv_step.template operator()<true>(n);
        pv_step.template operator()<false>(it.k_tiles - 1);
      }

      // Epilogue: kernel.cuh's finish_rows; O's n8 tile j holds columns 8j + 2t + {0, 1} of a row.
      float* o_head = a.o.template head<float>(it.b, it.h);
      finish_rows<kInst, kExtras>(a, it.b, it.h, r.row, r.m, r.l_part, r.moves, t, [&](int half, const RowFinal& fin) {
        float* o_row = o_head + r.row[half] * a.o.stride.row;
#pragma unroll
        for (int j = 0; j < kOTiles; ++j) {
          const int d = j * kMmaN + 2 * t;
          const float o0 = final_output(acc[j][2 * half], fin);
          const float o1 = final_output(acc[j][2 * half + 1], fin);
          if (d + 2 <= a.head_dim) {
            *reinterpret_cast<float2*>(o_row + d) = make_float2(o0, o1);
          } else if (d < a.head_dim) {
            o_row[d] = o0;
          }
        }
      });
    }
  }
};

template <typename Cfg, bool kExtras, bool kInst>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    split_tf32_wgmma_kernel(const __grid_constant__ SplitTf32Args<kInst> args) {
  extern __shared__ __align__(1024) uint8_t smem[];
  WgmmaForward<Cfg, kExtras, kInst>::run(args, smem);
}

template <typename Cfg, bool kInst = kInstrument>
Status launch_split_tf32_wgmma(const Params& params, cudaStream_t stream, const Instrumentation* inst) {
  static_assert(WgmmaForward<Cfg, false, kInst>::kSmemBytes == Cfg::kSmemBytes, "tiles.h and the kernel disagree on smem");
  if (needs_extras(params)) {
    return launch_split_tf32_kernel<Cfg, kInst>(split_tf32_wgmma_kernel<Cfg, true, kInst>, params, stream, inst);
  }
  return launch_split_tf32_kernel<Cfg, kInst>(split_tf32_wgmma_kernel<Cfg, false, kInst>, params, stream, inst);
}

}  // namespace split_tf32
}  // namespace FLASHCHECK_KERNEL_VARIANT
}  // namespace flashcheck::detail

#endif  // FLASHCHECK_TC_WGMMA
