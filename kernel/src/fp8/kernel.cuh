// The fp8 (e4m3) forward kernel, sm_90a: the rounding points of docs/design/fp8-forward.md on Hopper's fp8 wgmma.
// One CTA of two warpgroups computes one Q tile of 128 rows (64 a warpgroup) against K/V tiles of 128 keys:
//   - TMA moves Q, K and V into 128-byte-swizzled shared memory (K and V double-buffered, one mbarrier per slot);
//   - S = Q K^T on wgmma m64n128k32 from shared memory, head_dim / 32 steps;
//   - meanwhile every thread transposes its share of V(n) into Vt (8-bit operands have no transposed wgmma form: B
//     must be K-major), zeroing keys past the sequence and noting NaN values;
//   - the tensor-core softmax step on the scaled scores (the tile reference, the exponent offset of 2^8, l before
//     P's rounding), P rounded to e4m3 by cvt.rn.satfinite straight into the A fragment of P V;
//   - each tile's P V in a fresh accumulator (m64n128k32 from registers, 4 steps per 128 columns of V), promoted into
//     the fp32 running O by one FMA, o = fma(o, alpha, tile);
//   - the epilogue of common/epilogue.h with the offset taken back for l and LSE, O descaled by V's descale, bf16.
// P's accumulator registers hold keys 8j + 2(lane%4) + {0,1} of n8 block j; the A fragment of a k32 step wants keys
// 4(lane%4) + 0..3 and + 16. Rather than move bytes between lanes, the transpose stores V's keys in the order the
// registers already have (key_of_slot): the product sums over keys, so both sides agree on the permutation.
// V's NaN values never enter the tensor cores (0 * NaN would reach rows that must not see the key): the transpose
// writes them as 0, and a tile that holds one marks, per column, which keys are NaN; after its P V every element whose
// row sees such a key of its column becomes NaN, as the exact product over the row's keys is.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "common/args.h"
#include "common/epilogue.h"
#include "common/mutants.cuh"
#include "common/softmax.h"
#include "families.h"
#include "fp8/layout.h"
#include "fp8/wgmma_fp8.cuh"
#include "tensor_core/ptx.cuh"

namespace flashcheck::detail {
inline namespace FLASHCHECK_KERNEL_VARIANT {
namespace fp8_kernel {

using tc_kernel::ex2_approx;
using tc_kernel::fence_operands;
using tc_kernel::fence_proxy_async_shared;
using tc_kernel::mbarrier_arrive_expect_tx;
using tc_kernel::mbarrier_init;
using tc_kernel::mbarrier_wait;
using tc_kernel::smem_address;
using tc_kernel::sw128_descriptor;
using tc_kernel::tma_load_4d;
using tc_kernel::wgmma_commit;
using tc_kernel::wgmma_fence;
using tc_kernel::wgmma_wait;

inline constexpr int kBlockM = kFp8BlockM;   // query rows per CTA
inline constexpr int kBlockN = kFp8BlockN;   // keys per K/V tile
inline constexpr int kRowBytes = fp8_layout::kRowBytes;
inline constexpr int kAtomBytes = 8 * kRowBytes;  // the swizzle atom, the descriptors' stride offset
inline constexpr int kWgRows = 64;           // rows of one warpgroup (wgmma m64)
inline constexpr int kThreads = 2 * 128;     // two warpgroups
inline constexpr int kWarps = kThreads / 32;
inline constexpr int kStages = 2;            // K/V slots
inline constexpr int kStepK = fp8_layout::kStepK;  // bytes of a row one step reads
inline constexpr int kPassCols = 128;        // V columns per P V chain (m64n128k32)
inline constexpr int kNBlocksS = kBlockN / 8;  // n8 blocks of S
inline constexpr int kNBlocksPass = kPassCols / 8;
inline constexpr int kKSteps = kBlockN / kStepK;  // k32 steps of P V per tile
static_assert(kBlockN == kRowBytes, "a row of Vt holds one tile's keys: one swizzle row");
static_assert(kBlockM == 2 * kWgRows, "two warpgroups of 64 rows");

// The kernel's arguments: the problem, the descales ([batch, heads_kv], null = 1) and the raw softcap (the scale it
// divides is the descaled one, per (sequence, kv head)).
struct Args : ProblemArgs {
  const float* descale_q = nullptr;
  const float* descale_k = nullptr;
  const float* descale_v = nullptr;
  int64_t heads_kv = 0;
  float softcap = 0.0f;
  Instrumentation inst{};
};

struct Maps {  // CUtensorMap is 64-byte aligned itself
  CUtensorMap q;  // box (128 columns, 64 rows): one warpgroup's Q rows of one column block
  CUtensorMap k;  // box (128 columns, kBlockN rows)
  CUtensorMap v;  // box (128 columns, kBlockN rows)
};

using fp8_layout::key_of_slot;
using fp8_layout::p_source;
using fp8_layout::swizzled;

// Shared memory of a head-dim family D (Q's, K's and V's columns padded to D): Q, the K and V slots, Vt, and the NaN
// keys of each column of V's tile (a bit per key) for tiles that hold one. Offsets from a 1024-byte aligned base.
template <int D>
struct Tiles {
  static_assert(D % kRowBytes == 0 && D % kPassCols == 0, "column blocks of 128");
  static constexpr int kColumnBlocks = D / kRowBytes;
  static constexpr int kQKSteps = D / kStepK;
  static constexpr int kPasses = D / kPassCols;
  static constexpr int kNBlocksO = D / 8;
  static constexpr uint32_t kQBytes = kBlockM * D;
  static constexpr uint32_t kKBytes = kBlockN * D;
  static constexpr uint32_t kVBytes = kBlockN * D;
  static constexpr uint32_t kVtBytes = D * kBlockN;
  static constexpr int kMaskWords = kBlockN / 32;  // per column of V
  static constexpr uint32_t kNanBytes = D * kMaskWords * 4;
  static constexpr uint32_t kQ = 0;
  static constexpr uint32_t kK = kQ + kQBytes;
  static constexpr uint32_t kV = kK + kStages * kKBytes;
  static constexpr uint32_t kVt = kV + kStages * kVBytes;
  static constexpr uint32_t kNan = kVt + kVtBytes;
  static constexpr int kSmemBytes = static_cast<int>(kNan + kNanBytes) + kAtomBytes;  // + alignment slack
  static_assert(kSmemBytes <= 227 * 1024, "fp8 tiles exceed the sm_90 per-block shared memory");
};

__device__ __forceinline__ uint64_t descriptor(uint32_t addr) { return sw128_descriptor(addr, 16, kAtomBytes); }

// Two fp32 values rounded to e4m3 (round to nearest even, saturating at 448), `lo` in the low byte.
__device__ __forceinline__ uint32_t e4m3x2(float lo, float hi) {
  return __nv_cvt_float2_to_fp8x2(make_float2(lo, hi), __NV_SATFINITE, __NV_E4M3);
}
__device__ __forceinline__ uint32_t e4m3x4(float b0, float b1, float b2, float b3) {
  return e4m3x2(b0, b1) | (e4m3x2(b2, b3) << 16);
}
// Bit 7 of each byte of w that is an e4m3 NaN (S.1111.111): its low 7 bits plus one carry into bit 7, no further.
__device__ __forceinline__ uint32_t e4m3_nan_bits(uint32_t w) { return ((w & 0x7F7F7F7Fu) + 0x01010101u) & 0x80808080u; }
__device__ __forceinline__ float exp2_accurate(float x) { return exp2f(x); }

// kTma: Q, K and V arrive by TMA (mbarriers, K/V double-buffered); else, where TMA cannot address them (rows not whole
// 16-byte chunks, unaligned bases or strides), every thread copies its share of each tile when it is needed.
template <int D, bool kTma, bool kInstrument>
struct Forward {
  using T = Tiles<D>;

  struct Row {  // one of a thread's two rows (lane / 4 and + 8 of its warp's 16)
    float m = kNegInf;    // running max of x = s * scale * log2 e (log2 units)
    float ref = kNegInf;  // what p and l are relative to: the tile reference (common/softmax.h)
    float l = 0.0f;       // carries the factor 2^kFp8POffsetLog2
    int64_t moves = 0;
    int trace = -1;
  };

  // V(n) into Vt, keys permuted by key_of_slot, keys at or past seqlen_k and NaN values written as 0; true if this
  // thread saw a NaN among the keys it moved.
  __device__ static bool transpose_v(const uint8_t* v, uint8_t* vt, int64_t key0, int64_t seqlen_k, int tid) {
    bool nan = false;
    constexpr int kUnits = (D / 4) * (kBlockN / 4);  // (4 columns, 4 slots) each
    for (int u = tid; u < kUnits; u += kThreads) {
      const int group = u % (kBlockN / 4);  // slots 4 group .. 4 group + 3
      const int col = (u / (kBlockN / 4)) * 4;
      const int slot0 = group * 4;
      const uint8_t* column_block = v + (col / kRowBytes) * (kBlockN * kRowBytes);
      uint32_t w[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int slot = slot0 + i;
        const int key = FC_MUTANT(kFp8VtKeysUnpermuted) ? slot : (slot / kStepK) * kStepK + key_of_slot(slot % kStepK);
        w[i] = key0 + key < seqlen_k
                   ? *reinterpret_cast<const uint32_t*>(column_block + swizzled(key, col % kRowBytes))
                   : 0u;
        const uint32_t nan_bits = e4m3_nan_bits(w[i]);
        nan = nan || nan_bits != 0;
        w[i] &= ~((nan_bits >> 7) * 0xFFu);
      }
      // Word i holds key i's columns col..col+3; word e of the result holds column col+e's keys.
      uint32_t out[4];
      fp8_layout::transpose_bytes(w, out);
#pragma unroll
      for (int e = 0; e < 4; ++e) *reinterpret_cast<uint32_t*>(vt + swizzled(col + e, slot0)) = out[e];
    }
    return nan;
  }

  // The NaN keys of each column of V(n) (tile-relative keys below seqlen_k), a bit per key, for a tile that holds one.
  __device__ static void mark_nan_keys(const uint8_t* v, uint32_t* nan_keys, int64_t key0, int64_t seqlen_k, int tid) {
    for (int i = tid; i < D * T::kMaskWords; i += kThreads) nan_keys[i] = 0;
    __syncthreads();
    constexpr int kWords = kBlockN * (D / 4);
    for (int u = tid; u < kWords; u += kThreads) {
      const int key = u % kBlockN, col = (u / kBlockN) * 4;
      if (key0 + key >= seqlen_k) continue;
      const uint32_t w = *reinterpret_cast<const uint32_t*>(v + (col / kRowBytes) * (kBlockN * kRowBytes) +
                                                             swizzled(key, col % kRowBytes));
      const uint32_t nan_bits = e4m3_nan_bits(w);
      for (int e = 0; e < 4; ++e) {
        if ((nan_bits >> (8 * e + 7)) & 1u) atomicOr(&nan_keys[(col + e) * T::kMaskWords + key / 32], 1u << (key % 32));
      }
    }
    __syncthreads();
  }

  // The keys of the tile (bits, tile-relative) row i sees.
  __device__ static void visible_keys(uint32_t (&bits)[T::kMaskWords], const Visibility& vis, int64_t i, int64_t key0) {
    const int64_t lo = std::min<int64_t>(std::max<int64_t>(vis.row_begin(i) - key0, 0), kBlockN);
    const int64_t hi = std::min<int64_t>(std::max<int64_t>(vis.row_end(i) - key0, lo), kBlockN);
#pragma unroll
    for (int w = 0; w < T::kMaskWords; ++w) {
      const int64_t a = std::min<int64_t>(std::max<int64_t>(lo - 32 * w, 0), 32);
      const int64_t b = std::min<int64_t>(std::max<int64_t>(hi - 32 * w, 0), 32);
      const uint64_t span = ((uint64_t{1} << b) - 1) & ~((uint64_t{1} << a) - 1);
      bits[w] = static_cast<uint32_t>(span);
    }
  }

  // Rows [0, tile_rows) of a tile from `row(i)` (the tensor's row i of the head), in column blocks of 128 swizzled
  // rows; rows at or past `valid` and columns at or past `cols` are zeros (nothing outside the tensors is read).
  template <class RowAt>
  __device__ static void copy_tile(uint8_t* dst, int tile_rows, RowAt&& row, int64_t valid, int64_t cols, int tid) {
    const int words = tile_rows * (D / 4);
    for (int u = tid; u < words; u += kThreads) {
      const int r = u / (D / 4), c = (u % (D / 4)) * 4;
      uint32_t w = 0;
      if (r < valid) {
        const uint8_t* p = row(r);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          if (c + e < cols) w |= static_cast<uint32_t>(p[c + e]) << (8 * e);
        }
      }
      *reinterpret_cast<uint32_t*>(dst + (c / kRowBytes) * (tile_rows * kRowBytes) + swizzled(r, c % kRowBytes)) = w;
    }
  }

  __device__ static void run(const Args& a, const Maps& maps, uint8_t* smem_raw) {
    __shared__ uint64_t q_full, k_full[kStages], v_full[kStages];
    const uint32_t raw = smem_address(smem_raw);
    const uint32_t base = (raw + kAtomBytes - 1) / kAtomBytes * kAtomBytes;
    uint8_t* const smem = smem_raw + (base - raw);
    const int tid = static_cast<int>(threadIdx.x);
    const int lane = tid % 32, warp = tid / 32, wg = warp / 4;
    const int g = lane / 4, q = lane % 4;
    const int row_in_tile = wg * kWgRows + (warp % 4) * 16 + g;  // and + 8
    if (tid == 0) {
      mbarrier_init(smem_address(&q_full), 1);
      for (int s = 0; s < kStages; ++s) {
        mbarrier_init(smem_address(&k_full[s]), 1);
        mbarrier_init(smem_address(&v_full[s]), 1);
      }
      tc_kernel::fence_mbarrier_init();
    }
    __syncthreads();
    const int qk_steps = static_cast<int>((a.head_dim + kStepK - 1) / kStepK);  // k32 steps of head_dim's columns
    uint32_t tiles_done = 0;  // K/V tiles this CTA has loaded (slot and parity of the next)
    uint32_t q_loads = 0;
    for (int64_t item = blockIdx.x; item < a.work_items; item += gridDim.x) {
      const int64_t tile_of_item = item % a.q_tiles;
      const int64_t h = (item / a.q_tiles) % a.heads_q;
      const int64_t b = item / (a.q_tiles * a.heads_q);
      // Causal launches take their longest Q tiles first.
      const int64_t qt = a.vis.bounded_end ? a.q_tiles - 1 - tile_of_item : tile_of_item;
      const SequenceView seq = a.sequence(b);
      const int64_t q0 = qt * kBlockM;
      if (q0 >= seq.seqlen_q) continue;
      const Visibility::TileRange tiles = seq.vis.tile_range(q0, std::min<int64_t>(kBlockM, seq.seqlen_q - q0), kBlockN);
      const int64_t hk = h / a.group_size;
      const int64_t descale_at = b * a.heads_kv + (FC_MUTANT(kFp8DescaleQueryHead) ? h % a.heads_kv : hk);
      const float dq = a.descale_q != nullptr ? a.descale_q[descale_at] : 1.0f;
      const float dk = a.descale_k != nullptr ? a.descale_k[descale_at] : 1.0f;
      const float dv = a.descale_v != nullptr ? a.descale_v[b * a.heads_kv + hk] : 1.0f;
      const float scale = descaled_scale(a.softmax_scale, dq, dk);
      const float scale_log2 = fold_scale(scale);
      Softcap cap;
      if (a.has_softcap) cap = make_softcap(scale, a.softcap);
      const int n_tiles = static_cast<int>(tiles.count);
      const float offset = FC_MUTANT(kFp8POffsetMissing) ? 0.0f : kFp8POffsetLog2;  // P's exponent offset
      const int q_row = static_cast<int>(seq.q_row0 + q0);
      const int q_batch = a.cu_q != nullptr ? 0 : static_cast<int>(b);
      const int k_row0 = a.cu_k != nullptr ? a.cu_k[b] : 0;
      const int k_batch = a.cu_k != nullptr ? 0 : static_cast<int>(b);
      const auto load_kv = [&](int n) {
        const uint32_t t = tiles_done + static_cast<uint32_t>(n);
        const int s = static_cast<int>(t % kStages);
        const int row = k_row0 + static_cast<int>((tiles.first + n) * kBlockN);
        mbarrier_arrive_expect_tx(smem_address(&k_full[s]), T::kKBytes);
        for (int cb = 0; cb < T::kColumnBlocks; ++cb)
          tma_load_4d(base + T::kK + s * T::kKBytes + cb * kBlockN * kRowBytes, &maps.k, smem_address(&k_full[s]),
                      cb * kRowBytes, row, static_cast<int>(hk), k_batch);
        mbarrier_arrive_expect_tx(smem_address(&v_full[s]), T::kVBytes);
        for (int cb = 0; cb < T::kColumnBlocks; ++cb)
          tma_load_4d(base + T::kV + s * T::kVBytes + cb * kBlockN * kRowBytes, &maps.v, smem_address(&v_full[s]),
                      cb * kRowBytes, row, static_cast<int>(hk), k_batch);
      };
      const RowSource<const uint8_t> k_src = a.kv_rows<const uint8_t>(a.k, b, hk);
      const RowSource<const uint8_t> v_src = a.kv_rows<const uint8_t>(a.v, b, hk);
      // Every read of the previous item's shared memory is done (its last tile ended in a barrier).
      if (!kTma && n_tiles > 0) {
        const uint8_t* q_src = a.q_rows<const uint8_t>(a.q, b, h) + q0 * a.q.stride.row;
        copy_tile(smem + T::kQ, kBlockM, [&](int r) { return q_src + r * a.q.stride.row; }, seq.seqlen_q - q0,
                  a.head_dim, tid);
        fence_proxy_async_shared();
        __syncthreads();
      }
      if (kTma && tid == 0 && n_tiles > 0) {
        mbarrier_arrive_expect_tx(smem_address(&q_full), T::kQBytes);
        for (int w = 0; w < 2; ++w)
          for (int cb = 0; cb < T::kColumnBlocks; ++cb)
            tma_load_4d(base + T::kQ + cb * kBlockM * kRowBytes + w * kWgRows * kRowBytes, &maps.q,
                        smem_address(&q_full), cb * kRowBytes, q_row + w * kWgRows, static_cast<int>(h), q_batch);
        for (int n = 0; n < kStages && n < n_tiles; ++n) load_kv(n);
      }
      if constexpr (kInstrument) {
        if (tid == 0) count_tile_kinds(a.inst, seq.vis, q0, kBlockM, kBlockN, tiles.first, tiles.first + tiles.count);
      }

      Row rows[2];
      if constexpr (kInstrument) {
        for (int r = 0; r < 2; ++r) {
          const int64_t i = q0 + row_in_tile + 8 * r;  // rows past the sequence are another row's, not traced
          rows[r].trace = i < seq.seqlen_q ? trace_slot(a.inst, a.row_block(b, h) + i) : -1;
        }
      }
      float o[T::kNBlocksO][4];
#pragma unroll
      for (int j = 0; j < T::kNBlocksO; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[j][e] = 0.0f;
      if (kTma && n_tiles > 0) mbarrier_wait(smem_address(&q_full), q_loads++ & 1);

      for (int n = 0; n < n_tiles; ++n) {
        const uint32_t t = tiles_done + static_cast<uint32_t>(n);
        const int s = static_cast<int>(t % kStages);
        const uint32_t parity = (t / kStages) & 1;
        const int64_t key0 = (tiles.first + n) * kBlockN;
        // S(n) = Q K(n)^T, issued; V(n) transposed while it runs.
        if constexpr (kTma) {
          mbarrier_wait(smem_address(&k_full[s]), parity);
        } else {
          const int64_t keys = seq.seqlen_k - key0;
          copy_tile(smem + T::kK + s * T::kKBytes, kBlockN, [&](int r) { return k_src.row(key0 + r); }, keys, a.head_dim,
                    tid);
          copy_tile(smem + T::kV + s * T::kVBytes, kBlockN, [&](int r) { return v_src.row(key0 + r); }, keys,
                    a.head_dim_v, tid);
          fence_proxy_async_shared();
          __syncthreads();
        }
        float sc[kNBlocksS][4];
        wgmma_fence();
        // The k32 steps of wholly zero-padded columns (past head_dim) go first, while the accumulator is 0: after a
        // step of head_dim's columns one would still cut the accumulator to 14 bits of itself, a rounding the path
        // does not have (ceil(head_dim / 32) steps, in column order). Every step is issued, none under a branch.
#pragma unroll
        for (int i = 0; i < T::kQKSteps; ++i) {
          const int step = (i + qk_steps) % T::kQKSteps;
          const uint32_t col = static_cast<uint32_t>(step % 4) * kStepK;  // bytes along the 128-byte row
          const uint32_t block = static_cast<uint32_t>(step / 4);         // column block of 128
          wgmma_fp8::Mma<kBlockN>::ss(
              sc, descriptor(base + T::kQ + block * kBlockM * kRowBytes + wg * kWgRows * kRowBytes + col),
              descriptor(base + T::kK + s * T::kKBytes + block * kBlockN * kRowBytes + col), i > 0 ? 1 : 0);
        }
        wgmma_commit();
        if constexpr (kTma) mbarrier_wait(smem_address(&v_full[s]), parity);
        const uint8_t* v_tile = smem + T::kV + s * T::kVBytes;
        const bool nan_here = transpose_v(v_tile, smem + T::kVt, key0, seq.seqlen_k, tid);
        fence_proxy_async_shared();  // Vt's generic-proxy stores, seen by the P V wgmma
        const bool v_nan = __syncthreads_or(nan_here) != 0;
        wgmma_wait<0>();
        fence_operands(sc);

        // Scores to log2 units (softcap first), the mask, the tile reference and p (common/softmax.h).
        const bool masked = tiles.needs_mask(n);
        float tile_max[2] = {kNegInf, kNegInf};
#pragma unroll
        for (int j = 0; j < kNBlocksS; ++j) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            float x = a.has_softcap ? capped_score_log2(sc[j][e], cap) : mul_rn(sc[j][e], scale_log2);
            if (masked && !seq.vis.sees(q0 + row_in_tile + 8 * (e >> 1), key0 + 8 * j + 2 * q + (e & 1))) x = kNegInf;
            sc[j][e] = x;
            tile_max[e >> 1] = fmax_f32(tile_max[e >> 1], x);
          }
        }
        float alpha[2], origin[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          tile_max[r] = fmax_f32(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
          tile_max[r] = fmax_f32(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
          const float m_new = fmax_f32(rows[r].m, tile_max[r]);
          float ref = tile_reference(tile_max[r], m_new, rows[r].ref, [](float u) { return u; });
          if (FC_MUTANT(kFp8LazyRescale) && rows[r].ref != kNegInf && tile_max[r] <= rows[r].ref + kFp8POffsetLog2) {
            ref = rows[r].ref;
          }
          origin[r] = exponent_origin(ref);
          alpha[r] = ex2_approx(rows[r].ref - origin[r]);
          rows[r].moves += m_new != rows[r].m ? 1 : 0;
          rows[r].m = m_new;
          rows[r].ref = ref;
        }
        float p_sum[2] = {0.0f, 0.0f};
#pragma unroll
        for (int j = 0; j < kNBlocksS; ++j) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            sc[j][e] = ex2_approx((sc[j][e] - origin[e >> 1]) + offset);
            p_sum[e >> 1] += sc[j][e];
          }
        }
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          p_sum[r] += __shfl_xor_sync(0xffffffffu, p_sum[r], 1);
          p_sum[r] += __shfl_xor_sync(0xffffffffu, p_sum[r], 2);
          rows[r].l = fmaf(rows[r].l, alpha[r], p_sum[r]);  // l takes fp32 p, before P's rounding
        }

        // P V on the tensor cores; where V(n) holds NaN values, the elements whose row sees one become NaN.
        uint32_t* nan_keys = reinterpret_cast<uint32_t*>(smem + T::kNan);
        uint32_t seen[2][T::kMaskWords];
        if (v_nan) {
          mark_nan_keys(v_tile, nan_keys, key0, seq.seqlen_k, tid);
          for (int r = 0; r < 2; ++r) visible_keys(seen[r], seq.vis, q0 + row_in_tile + 8 * r, key0);
        }
        // P rounded to e4m3 straight into the A fragments of P V's k32 steps (fp8_layout::p_source).
        uint32_t pa[kKSteps][4];
#pragma unroll
        for (int c = 0; c < kKSteps; ++c) {
#pragma unroll
          for (int reg = 0; reg < 4; ++reg) {
            const auto p = [&](int byte) {
              return sc[4 * c + p_source(reg, byte).block][p_source(reg, byte).element];
            };
            pa[c][reg] = e4m3x4(p(0), p(1), p(2), p(3));
          }
        }
#pragma unroll
        for (int pass = 0; pass < T::kPasses; ++pass) {
          float tile[kNBlocksPass][4];
          wgmma_fence();
#pragma unroll
          for (int c = 0; c < kKSteps; ++c) {
            wgmma_fp8::Mma<kPassCols>::rs(tile, pa[c], descriptor(base + T::kVt + pass * kPassCols * kRowBytes + c * kStepK),
                                          c > 0 ? 1 : 0);
          }
          wgmma_commit();
          wgmma_wait<0>();
          fence_operands(tile);
          fence_operands(pa);  // P's registers stay put until the chain that reads them is done
          if (v_nan) {
#pragma unroll
            for (int j = 0; j < kNBlocksPass; ++j) {
#pragma unroll
              for (int e = 0; e < 4; ++e) {
                const uint32_t* column = nan_keys + (pass * kPassCols + 8 * j + 2 * q + (e & 1)) * T::kMaskWords;
                uint32_t hit = 0;
#pragma unroll
                for (int w = 0; w < T::kMaskWords; ++w) hit |= column[w] & seen[e >> 1][w];
                if (hit != 0) tile[j][e] = __int_as_float(0x7FC00000);
              }
            }
          }
#pragma unroll
          for (int j = 0; j < kNBlocksPass; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e)
              o[pass * kNBlocksPass + j][e] = fmaf(o[pass * kNBlocksPass + j][e], alpha[e >> 1], tile[j][e]);
        }
        if constexpr (kInstrument) {
          if (q == 0) {
            for (int r = 0; r < 2; ++r)
              record_trace(a.inst, rows[r].trace, n, rows[r].ref * kLn2, ldexpf(rows[r].l, -static_cast<int>(offset)));
          }
        }
        // Every read of K(n), V(n), Vt and the NaN keys is done: the slot takes tile n + kStages.
        __syncthreads();
        if (kTma && tid == 0 && n + kStages < n_tiles) load_kv(n + kStages);
      }
      tiles_done += static_cast<uint32_t>(n_tiles);

      // Epilogue (common/epilogue.h): the sink merged with the offset, O = alpha acc / l, descaled by V's descale,
      // in bf16; LSE and the reported l with the offset taken back (exact: a power of two).
      const int64_t row_block = a.row_block(b, h);
      __nv_bfloat16* o_rows = a.q_rows<__nv_bfloat16>(a.o, b, h);
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int64_t i = q0 + row_in_tile + 8 * r;
        const RowFinal fin = finish_row(rows[r].ref, mul_rn(rows[r].ref, kLn2), rows[r].l, a.sink, h,
                                        [](float x) { return exp2_accurate(x); }, offset);
        if (i >= seq.seqlen_q) continue;
        const float l_reported = ldexpf(fin.l, -static_cast<int>(offset));
        if (q == 0) {
          a.lse[row_block + i] = row_lse(fin.m_natural, l_reported);
          if constexpr (kInstrument) record_row(a.inst, row_block + i, fin.m_natural, l_reported, rows[r].moves);
        }
        __nv_bfloat16* out = o_rows + i * a.o.stride.row;
#pragma unroll
        for (int j = 0; j < T::kNBlocksO; ++j) {
#pragma unroll
          for (int e = 2 * r; e < 2 * r + 2; ++e) {
            const int64_t col = 8 * j + 2 * q + (e & 1);
            if (col >= a.head_dim_v) continue;
            float value = final_output(o[j][e], fin);
            if (a.descale_v != nullptr) value = mul_rn(value, dv);
            if (a.descale_v != nullptr && FC_MUTANT(kFp8DescaleVTwice)) value = mul_rn(value, dv);
            out[col] = __float2bfloat16_rn(value);
          }
        }
      }
      __syncthreads();  // the next item's loads overwrite Q
    }
  }
};

template <int D, bool kTma, bool kInstrument>
__global__ void __launch_bounds__(kThreads, 1) fp8_forward_kernel(const __grid_constant__ Args args,
                                                                  const __grid_constant__ Maps maps) {
  extern __shared__ __align__(1024) uint8_t smem[];
  Forward<D, kTma, kInstrument>::run(args, maps, smem);
}

}  // namespace fp8_kernel
}  // namespace FLASHCHECK_KERNEL_VARIANT
}  // namespace flashcheck::detail
