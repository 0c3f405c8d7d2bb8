// The general CUDA-core FlashAttention forward kernel: one fused launch, Q tile outer, K/V tiles inner,
// online softmax in fp32 with the rounding points of families.h (fp32 scores, fp32 P, fp32 accumulation,
// O = acc / l rounded to the dtype once). Serves every input can_implement() accepts: any element-aligned
// strides, GQA/MQA, both causal alignments, seqlen_k = 0, 64-bit offsets. Included once per dtype (.cu).
// Instrumentation is compiled in only when FLASHCHECK_INSTRUMENT=1 (flashcheck_kernel_instrumented).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "families.h"
#include "general/launch.h"
#include "mask.h"
#include "tile_config.h"

namespace flashcheck::detail {
inline namespace FLASHCHECK_KERNEL_VARIANT {
namespace general {

inline constexpr bool kInstrument = FLASHCHECK_INSTRUMENT;
inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr float kLn2 = 0.6931471805599453f;
inline constexpr unsigned kFullWarpMask = 0xffffffffu;

// Conversions between the storage dtype and fp32. Stores round to nearest even, as the contract says.
// load_vector reads kVectorBytes (16-byte aligned) and widens each element.
inline constexpr int kVectorBytes = 16;
template <typename T>
inline constexpr int kVectorElements = kVectorBytes / static_cast<int>(sizeof(T));

template <typename T>
struct Element;
template <>
struct Element<float> {
  static __device__ __forceinline__ float load(const float* p) { return *p; }
  static __device__ __forceinline__ float store(float x) { return x; }
  static __device__ __forceinline__ void load_vector(const float* p, float (&out)[kVectorElements<float>]) {
    const float4 v = *reinterpret_cast<const float4*>(p);
    out[0] = v.x;
    out[1] = v.y;
    out[2] = v.z;
    out[3] = v.w;
  }
};
template <>
struct Element<__half> {
  static __device__ __forceinline__ float load(const __half* p) { return __half2float(*p); }
  static __device__ __forceinline__ __half store(float x) { return __float2half_rn(x); }
  static __device__ __forceinline__ void load_vector(const __half* p, float (&out)[kVectorElements<__half>]) {
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    const auto* pairs = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
    for (int i = 0; i < kVectorElements<__half> / 2; ++i) {
      const float2 f = __half22float2(pairs[i]);
      out[2 * i] = f.x;
      out[2 * i + 1] = f.y;
    }
  }
};
template <>
struct Element<__nv_bfloat16> {
  static __device__ __forceinline__ float load(const __nv_bfloat16* p) { return __bfloat162float(*p); }
  static __device__ __forceinline__ __nv_bfloat16 store(float x) { return __float2bfloat16_rn(x); }
  static __device__ __forceinline__ void load_vector(const __nv_bfloat16* p,
                                                     float (&out)[kVectorElements<__nv_bfloat16>]) {
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    const auto* pairs = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
    for (int i = 0; i < kVectorElements<__nv_bfloat16> / 2; ++i) {
      const float2 f = __bfloat1622float2(pairs[i]);
      out[2 * i] = f.x;
      out[2 * i + 1] = f.y;
    }
  }
};

struct NoInstrumentation {};

// Kernel arguments. Pointers are the tensors' bases; strides are in elements.
template <typename T, bool kInst>
struct GeneralArgs {
  const T* q;
  const T* k;
  const T* v;
  T* o;
  float* lse;
  Strides q_stride, k_stride, v_stride, o_stride;
  int64_t heads_q;
  int64_t heads_per_kv;  // heads_q / heads_kv: query head h reads K/V head h / heads_per_kv
  int64_t seqlen_q;
  int64_t seqlen_k;
  int64_t head_dim;
  int64_t q_tiles;
  int64_t work_items;  // q_tiles * heads_q * batch
  Mask mask;
  float scale_log2;    // softmax_scale * log2(e), rounded once on the host
  bool vector_loads;   // Q, K, V bases and strides allow 16-byte loads
  std::conditional_t<kInst, Instrumentation, NoInstrumentation> inst;
};

__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) x = fmaxf(x, __shfl_xor_sync(kFullWarpMask, x, offset));
  return x;
}

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) x += __shfl_xor_sync(kFullWarpMask, x, offset);
  return x;
}

__device__ __forceinline__ float float4_lane(const float4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// Copies rows [row0, row0 + kRows) of a (seqlen, head_dim) slice into a (kRows, RowStride) fp32 smem tile.
// Rows at or past `rows_end` and dims past head_dim become 0, so padded dims add nothing to dot products
// and keys the tile's rows cannot see are never read from global memory. With `vector_loads` (base and
// strides 16-byte aligned, decided on the host) each thread moves 16-byte chunks; otherwise elements, which
// serves any element-aligned layout.
template <typename Cfg, typename T, int kRows, int RowStride>
__device__ __forceinline__ void load_tile(float* tile_smem, const T* base, int64_t row_stride, int64_t row0,
                                          int64_t rows_end, int64_t head_dim, bool vector_loads) {
  constexpr int kVec = kVectorElements<T>;
  if (vector_loads) {
    constexpr int kChunksPerRow = Cfg::kHeadDim / kVec;
    constexpr int kChunks = kRows * kChunksPerRow;
    static_assert(Cfg::kHeadDim % kVec == 0 && kVec % kFloat4Lanes == 0, "general: chunks must tile a row");
    static_assert(kChunks % Cfg::kThreads == 0, "general: a tile's chunks must split evenly over the threads");
#pragma unroll
    for (int i = 0; i < kChunks / Cfg::kThreads; ++i) {
      const int chunk = static_cast<int>(threadIdx.x) + i * Cfg::kThreads;
      const int r = chunk / kChunksPerRow;
      const int d0 = (chunk % kChunksPerRow) * kVec;
      const int64_t row = row0 + r;
      float values[kVec];  // (kVec): dims d0 .. d0 + kVec - 1 of row r
#pragma unroll
      for (int e = 0; e < kVec; ++e) values[e] = 0.0f;
      if (row < rows_end) {
        const T* src = base + row * row_stride + d0;
        if (d0 + kVec <= head_dim) {
          Element<T>::load_vector(src, values);
        } else {
#pragma unroll
          for (int e = 0; e < kVec; ++e) values[e] = d0 + e < head_dim ? Element<T>::load(src + e) : 0.0f;
        }
      }
#pragma unroll
      for (int e = 0; e < kVec; e += kFloat4Lanes) {
        *reinterpret_cast<float4*>(tile_smem + r * RowStride + d0 + e) =
            make_float4(values[e], values[e + 1], values[e + 2], values[e + 3]);
      }
    }
    return;
  }
  constexpr int kElements = kRows * Cfg::kHeadDim;
  static_assert(kElements % Cfg::kThreads == 0, "general: a tile must split evenly over the block's threads");
#pragma unroll 4
  for (int i = 0; i < kElements / Cfg::kThreads; ++i) {
    const int idx = static_cast<int>(threadIdx.x) + i * Cfg::kThreads;
    const int r = idx / Cfg::kHeadDim;
    const int d = idx % Cfg::kHeadDim;
    const int64_t row = row0 + r;
    float value = 0.0f;
    if (row < rows_end && d < head_dim) value = Element<T>::load(base + row * row_stride + d);
    tile_smem[r * RowStride + d] = value;
  }
}

// acc[r][:] += p[r][j] * v[j][:] over the keys j < n_keys of the tile. kMasked: some row of the warp does
// not see every key, so each (row, key) is predicated on visibility: a masked key's V row (possibly NaN)
// must not reach O, and 0 * NaN would. Unmasked tiles run without the predicate.
template <typename Cfg, bool kMasked>
__device__ __forceinline__ void accumulate_pv(float (&acc)[Cfg::kRowsPerWarp][Cfg::kDimsPerLane],
                                              const float* p_warp, const float* v_smem, int n_keys, int64_t k0,
                                              const int64_t (&row_keys)[Cfg::kRowsPerWarp], int lane) {
  for (int j0 = 0; j0 < n_keys; j0 += kFloat4Lanes) {
    float4 p4[Cfg::kRowsPerWarp];  // (kRowsPerWarp, 4): P of keys j0..j0+3, a broadcast smem read
#pragma unroll
    for (int r = 0; r < Cfg::kRowsPerWarp; ++r) {
      p4[r] = *reinterpret_cast<const float4*>(p_warp + r * Cfg::kBlockN + j0);
    }
#pragma unroll
    for (int jj = 0; jj < kFloat4Lanes; ++jj) {
      const int j = j0 + jj;
      float v_lane[Cfg::kDimsPerLane];  // (kDimsPerLane): dims lane, lane + 32, ... of key j
#pragma unroll
      for (int t = 0; t < Cfg::kDimsPerLane; ++t) v_lane[t] = v_smem[j * Cfg::kHeadDim + lane + t * kWarpSize];
#pragma unroll
      for (int r = 0; r < Cfg::kRowsPerWarp; ++r) {
        const float p = float4_lane(p4[r], jj);
        const bool visible = !kMasked || k0 + j < row_keys[r];
#pragma unroll
        for (int t = 0; t < Cfg::kDimsPerLane; ++t) acc[r][t] = visible ? fmaf(p, v_lane[t], acc[r][t]) : acc[r][t];
      }
    }
  }
}

template <typename Cfg, typename T, bool kInst>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocksPerSm)
    general_forward_kernel(const GeneralArgs<T, kInst> args) {
  constexpr int kRows = Cfg::kRowsPerWarp;
  constexpr int kKeys = Cfg::kKeysPerLane;
  constexpr int kDims = Cfg::kDimsPerLane;
  constexpr float kNegInf = -INFINITY;

  extern __shared__ float4 smem_float4[];  // float4 so the dynamic smem base is 16-byte aligned
  float* q_smem = reinterpret_cast<float*>(smem_float4);  // (kBlockM, kHeadDim)
  float* k_smem = q_smem + Cfg::kQSmemFloats;               // (kBlockN, kKRowStride)
  float* v_smem = k_smem + Cfg::kKSmemFloats;               // (kBlockN, kHeadDim)
  float* p_smem = v_smem + Cfg::kVSmemFloats;               // (kBlockM, kBlockN)

  const int warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  float* p_warp = p_smem + warp * kRows * Cfg::kBlockN;           // (kRowsPerWarp, kBlockN)
  const float* q_warp = q_smem + warp * kRows * Cfg::kHeadDim;     // (kRowsPerWarp, kHeadDim)
  const int64_t k_tiles_total = ceil_div(args.seqlen_k, Cfg::kBlockN);

  for (int64_t work = blockIdx.x; work < args.work_items; work += gridDim.x) {
    // Q tiles vary fastest, last tile first: blocks running together share one head's K/V in L2, and under
    // a causal mask the longest Q tiles start first.
    const int64_t q_tile = args.q_tiles - 1 - work % args.q_tiles;
    const int64_t head_batch = work / args.q_tiles;
    const int64_t h = head_batch % args.heads_q;
    const int64_t b = head_batch / args.heads_q;
    const int64_t h_kv = h / args.heads_per_kv;
    const int64_t m0 = q_tile * Cfg::kBlockM;
    const int64_t rows_end = m0 + Cfg::kBlockM < args.seqlen_q ? m0 + Cfg::kBlockM : args.seqlen_q;
    const int64_t k_tiles = visited_k_tiles(args.mask, m0, Cfg::kBlockM, Cfg::kBlockN, args.seqlen_q, args.seqlen_k);
    const int64_t block_keys = visible_key_count(args.mask, rows_end - 1, args.seqlen_q, args.seqlen_k);

    // Per row of this warp: visible keys [0, row_keys[r]); rows past seqlen_q see none and are not written.
    int64_t row_keys[kRows];
    int64_t warp_keys_max = 0;        // keys any row of the warp sees
    int64_t warp_keys_min = INT64_MAX;  // keys every valid row of the warp sees
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int64_t row = m0 + warp * kRows + r;
      row_keys[r] = row < args.seqlen_q ? visible_key_count(args.mask, row, args.seqlen_q, args.seqlen_k) : 0;
      if (row < args.seqlen_q) {
        warp_keys_max = row_keys[r] > warp_keys_max ? row_keys[r] : warp_keys_max;
        warp_keys_min = row_keys[r] < warp_keys_min ? row_keys[r] : warp_keys_min;
      }
    }

    // Online softmax state in log2 units: m = running max of scale*log2(e)*score, l = sum of exp2(x - m).
    // Every lane holds the warp-uniform m and l of each row and its own dims of the accumulator.
    float m[kRows], l[kRows], acc[kRows][kDims];
    [[maybe_unused]] int64_t moves[kRows];  // instrumentation: how often each row's running max changed
    [[maybe_unused]] int trace_slot[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      m[r] = kNegInf;
      l[r] = 0.0f;
#pragma unroll
      for (int t = 0; t < kDims; ++t) acc[r][t] = 0.0f;
      if constexpr (kInst) {
        moves[r] = 0;
        trace_slot[r] = -1;
        const int64_t row = m0 + warp * kRows + r;
        const int64_t flat_row = (b * args.heads_q + h) * args.seqlen_q + row;
        for (int32_t i = 0; row < args.seqlen_q && args.inst.trace_rows != nullptr && i < args.inst.trace_row_count;
             ++i) {
          if (args.inst.trace_rows[i] == flat_row) trace_slot[r] = i;
        }
      }
    }
    if constexpr (kInst) {
      if (threadIdx.x == 0 && args.inst.tile_kind_counts != nullptr && k_tiles_total > k_tiles) {
        atomicAdd(reinterpret_cast<unsigned long long*>(&args.inst.tile_kind_counts[int(TileKind::kSkipped)]),
                  static_cast<unsigned long long>(k_tiles_total - k_tiles));
      }
    }

    const T* k_head = args.k + b * args.k_stride.batch + h_kv * args.k_stride.head;
    const T* v_head = args.v + b * args.v_stride.batch + h_kv * args.v_stride.head;
    __syncthreads();  // the previous work item is done with q_smem
    if (k_tiles > 0) {  // with no visible key Q is never read (it may be null when seqlen_k == 0)
      const T* q_head = args.q + b * args.q_stride.batch + h * args.q_stride.head;
      load_tile<Cfg, T, Cfg::kBlockM, Cfg::kHeadDim>(q_smem, q_head, args.q_stride.row, m0, rows_end, args.head_dim,
                                                     args.vector_loads);
    }

    for (int64_t kt = 0; kt < k_tiles; ++kt) {
      const int64_t k0 = kt * Cfg::kBlockN;
      __syncthreads();  // every warp is done with the previous K/V tile
      load_tile<Cfg, T, Cfg::kBlockN, Cfg::kKRowStride>(k_smem, k_head, args.k_stride.row, k0, block_keys,
                                                          args.head_dim, args.vector_loads);
      load_tile<Cfg, T, Cfg::kBlockN, Cfg::kHeadDim>(v_smem, v_head, args.v_stride.row, k0, block_keys,
                                                       args.head_dim, args.vector_loads);
      __syncthreads();
      if constexpr (kInst) {
        if (threadIdx.x == 0 && args.inst.tile_kind_counts != nullptr) {
          const TileKind kind =
              classify_tile(args.mask, m0, Cfg::kBlockM, k0, Cfg::kBlockN, args.seqlen_q, args.seqlen_k);
          atomicAdd(reinterpret_cast<unsigned long long*>(&args.inst.tile_kind_counts[int(kind)]), 1ull);
        }
      }

      // A warp whose rows see no key of this tile skips it: its state would not change (p = 0, alpha = 1).
      if (k0 < warp_keys_max) {
        // S = Q K^T for the warp's rows and this lane's keys: fp32 FMA chain over the head dims.
        float s[kRows][kKeys];  // (kRowsPerWarp, kKeysPerLane)
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
#pragma unroll
          for (int c = 0; c < kKeys; ++c) s[r][c] = 0.0f;
        }
        const float* k_lane = k_smem + lane * Cfg::kKRowStride;
#pragma unroll 2
        for (int d = 0; d < Cfg::kHeadDim; d += kFloat4Lanes) {
          float4 k4[kKeys];  // (kKeysPerLane, 4)
#pragma unroll
          for (int c = 0; c < kKeys; ++c) {
            k4[c] = *reinterpret_cast<const float4*>(k_lane + c * kWarpSize * Cfg::kKRowStride + d);
          }
#pragma unroll
          for (int r = 0; r < kRows; ++r) {
            const float4 q4 = *reinterpret_cast<const float4*>(q_warp + r * Cfg::kHeadDim + d);
#pragma unroll
            for (int c = 0; c < kKeys; ++c) {
              s[r][c] = fmaf(q4.x, k4[c].x, s[r][c]);
              s[r][c] = fmaf(q4.y, k4[c].y, s[r][c]);
              s[r][c] = fmaf(q4.z, k4[c].z, s[r][c]);
              s[r][c] = fmaf(q4.w, k4[c].w, s[r][c]);
            }
          }
        }

#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          // The scale is folded into the exponent base: x = s * (scale * log2 e), so p = exp2(x - m) needs one
          // multiply per score and no exp(). __fmul_rn keeps x a rounded product (no FMA with the subtraction)
          // so the row maximum gives p = 1 exactly. Invisible keys get x = -inf: zero weight.
          float x[kKeys];
          float tile_max = kNegInf;
#pragma unroll
          for (int c = 0; c < kKeys; ++c) {
            const int64_t key = k0 + lane + c * kWarpSize;
            x[c] = key < row_keys[r] ? __fmul_rn(s[r][c], args.scale_log2) : kNegInf;
            tile_max = fmaxf(tile_max, x[c]);
          }
          const float m_new = fmaxf(m[r], warp_max(tile_max));
          // While no key has been seen m is -inf and exp2(-inf - -inf) would be NaN: subtract 0 instead, which
          // still maps -inf scores to weight 0 and the (zero) old state to alpha = 0.
          const float m_use = m_new == kNegInf ? 0.0f : m_new;
          const float alpha = exp2f(m[r] - m_use);
          float p_sum = 0.0f;
#pragma unroll
          for (int c = 0; c < kKeys; ++c) {
            const float p = exp2f(x[c] - m_use);
            p_warp[r * Cfg::kBlockN + lane + c * kWarpSize] = p;
            p_sum += p;
          }
          l[r] = fmaf(l[r], alpha, warp_sum(p_sum));
#if defined(FLASHCHECK_MUTANT_MISSING_RESCALE)  // planted bug, fuzz_kernel_mutant only: the last K/V tile skips O's rescale
          const float alpha_o = kt + 1 < k_tiles ? alpha : 1.0f;
#else
          const float alpha_o = alpha;
#endif
#pragma unroll
          for (int t = 0; t < kDims; ++t) acc[r][t] = __fmul_rn(acc[r][t], alpha_o);
          if constexpr (kInst) moves[r] += m_new != m[r] ? 1 : 0;
          m[r] = m_new;
        }
        __syncwarp();  // P of the warp's rows is in smem

        const int n_keys = static_cast<int>(warp_keys_max - k0 < Cfg::kBlockN ? warp_keys_max - k0 : Cfg::kBlockN);
        if (k0 + Cfg::kBlockN <= warp_keys_min) {
          accumulate_pv<Cfg, false>(acc, p_warp, v_smem, n_keys, k0, row_keys, lane);
        } else {
          accumulate_pv<Cfg, true>(acc, p_warp, v_smem, n_keys, k0, row_keys, lane);
        }
        __syncwarp();  // P is read before the next tile overwrites it
      }

      if constexpr (kInst) {
        if (lane == 0 && args.inst.trace_m != nullptr && args.inst.trace_l != nullptr && kt < args.inst.max_tiles) {
#pragma unroll
          for (int r = 0; r < kRows; ++r) {
            if (trace_slot[r] < 0) continue;
            const int64_t slot = int64_t{trace_slot[r]} * args.inst.max_tiles + kt;
            args.inst.trace_m[slot] = __fmul_rn(m[r], kLn2);
            args.inst.trace_l[slot] = l[r];
          }
        }
      }
    }

    // Epilogue: O = acc / l rounded to the dtype once; LSE = m ln 2 + ln l. A row that saw no key (l == 0)
    // gets O = 0 and LSE = -inf; a NaN l (NaN score) falls through and propagates.
    T* o_head = args.o + b * args.o_stride.batch + h * args.o_stride.head;
    float* lse_head = args.lse + (b * args.heads_q + h) * args.seqlen_q;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int64_t row = m0 + warp * kRows + r;
      if (row >= args.seqlen_q) continue;
      const bool is_empty = l[r] == 0.0f;
#pragma unroll
      for (int t = 0; t < kDims; ++t) {
        const int d = lane + t * kWarpSize;
        if (d < args.head_dim) {
          o_head[row * args.o_stride.row + d] = Element<T>::store(is_empty ? 0.0f : acc[r][t] / l[r]);
        }
      }
      const float m_natural = __fmul_rn(m[r], kLn2);
      if (lane == 0) lse_head[row] = is_empty ? kNegInf : m_natural + logf(l[r]);
      if constexpr (kInst) {
        if (lane == 0) {
          const int64_t flat_row = (b * args.heads_q + h) * args.seqlen_q + row;
          if (args.inst.row_m != nullptr) args.inst.row_m[flat_row] = m_natural;
          if (args.inst.row_l != nullptr) args.inst.row_l[flat_row] = l[r];
          if (args.inst.rescale_buckets != nullptr) {
            atomicAdd(reinterpret_cast<unsigned long long*>(&args.inst.rescale_buckets[rescale_bucket(moves[r])]),
                      1ull);
          }
        }
      }
    }
  }
}

// Host side: fills the arguments and launches Cfg's kernel. Preconditions as for general_launch().
template <typename Cfg, typename T>
Status launch_general_config(const Params& params, cudaStream_t stream, const Instrumentation* inst) {
  GeneralArgs<T, kInstrument> args{};
  args.q = static_cast<const T*>(params.q);
  args.k = static_cast<const T*>(params.k);
  args.v = static_cast<const T*>(params.v);
  args.o = static_cast<T*>(params.o);
  args.lse = params.lse;
  args.q_stride = params.q_stride;
  args.k_stride = params.k_stride;
  args.v_stride = params.v_stride;
  args.o_stride = params.o_stride;
  args.heads_q = params.heads_q;
  args.heads_per_kv = params.heads_q / params.heads_kv;
  args.seqlen_q = params.seqlen_q;
  args.seqlen_k = params.seqlen_k;
  args.head_dim = params.head_dim;
  args.q_tiles = ceil_div(params.seqlen_q, Cfg::kBlockM);
  args.work_items = args.q_tiles * params.heads_q * params.batch;
  args.mask = params.mask;
  args.scale_log2 = params.softmax_scale * kLog2e;
  // 16-byte loads need every row start 16-byte aligned: aligned bases and strides in whole vectors.
  constexpr int64_t kVec = kVectorElements<T>;
  const auto aligned = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % kVectorBytes == 0; };
  const auto whole_vectors = [](const Strides& s) { return s.batch % kVec == 0 && s.head % kVec == 0 && s.row % kVec == 0; };
  args.vector_loads = aligned(params.q) && aligned(params.k) && aligned(params.v) && whole_vectors(params.q_stride) &&
                      whole_vectors(params.k_stride) && whole_vectors(params.v_stride);
  if constexpr (kInstrument) {
    if (inst != nullptr) args.inst = *inst;
  }

  const auto kernel = general_forward_kernel<Cfg, T, kInstrument>;
  if constexpr (Cfg::kSmemBytes > kSmemBytesDefault) {
    // Per device and function; cheap enough to set on every launch, which keeps multi-device use correct.
    const cudaError_t err =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(Cfg::kSmemBytes));
    if (err != cudaSuccess) {
      return {StatusCode::kCudaError, std::string("general: cudaFuncSetAttribute(max dynamic smem) failed: ") +
                                          cudaGetErrorString(err)};
    }
  }
  const dim3 grid(static_cast<unsigned>(Cfg::grid_blocks(args.work_items)));
  kernel<<<grid, Cfg::kThreads, Cfg::kSmemBytes, stream>>>(args);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    return {StatusCode::kCudaError, std::string("general: kernel launch failed: ") + cudaGetErrorString(err)};
  }
  return Status::ok_status();
}

// Entry point of one dtype's translation unit: picks the head_dim family the config names.
template <typename T>
Status launch_general_dtype(const Params& params, const KernelConfig& config, cudaStream_t stream,
                            const Instrumentation* inst) {
  KernelConfig expected;
  general_select(params, &expected);
  if (config.block_m != expected.block_m || config.block_n != expected.block_n ||
      config.head_dim_padded != expected.head_dim_padded) {
    return {StatusCode::kUnsupported, std::string("general: config ") + config.name +
                                          " does not match a compiled tile configuration for head_dim " +
                                          std::to_string(params.head_dim)};
  }
  switch (config.head_dim_padded) {
    case GeneralConfigFor<32>::kHeadDim: return launch_general_config<GeneralConfigFor<32>, T>(params, stream, inst);
    case GeneralConfigFor<64>::kHeadDim: return launch_general_config<GeneralConfigFor<64>, T>(params, stream, inst);
    case GeneralConfigFor<128>::kHeadDim: return launch_general_config<GeneralConfigFor<128>, T>(params, stream, inst);
    case GeneralConfigFor<256>::kHeadDim: return launch_general_config<GeneralConfigFor<256>, T>(params, stream, inst);
    default: break;
  }
  return {StatusCode::kUnsupported,
          "general: no compiled head_dim family of " + std::to_string(config.head_dim_padded)};
}

}  // namespace general
}  // namespace FLASHCHECK_KERNEL_VARIANT
}  // namespace flashcheck::detail
