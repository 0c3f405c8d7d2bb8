// The general CUDA-core FlashAttention forward kernel: one fused launch, Q tile outer, K/V tiles inner, online
// softmax in fp32 with the rounding points of families.h (fp32 scores, fp32 P, fp32 accumulation, O = acc / l
// rounded to the dtype once). Serves every input can_implement() accepts: any element-aligned strides, GQA/MQA,
// both causal alignments, seqlen_k = 0, 64-bit offsets, V and O of other columns than Q and K (head_dim_v: every
// tile is padded to the family of the larger, Q and K zero past head_dim, V past head_dim_v). A work item runs as
// named steps: load_q, then per K/V tile load_kv, scores, softmax_update and accumulate_pv, then store_row. Included
// once per dtype (.cu).
// Dropout (dropout_p > 0, docs/design/dropout-rng.md) runs here alone (select_config): the online softmax (m, l) runs
// over every visible key undropped, P V takes only the kept keys (a dropped key's term is skipped, no FMA), and the
// epilogue multiplies O = acc / l by s32 = fl(1 / (1 - p)) before its one rounding to the dtype. With p = 0 no step
// of it runs.
// Instrumentation is compiled in only when FLASHCHECK_INSTRUMENT=1 (flashcheck_kernel_instrumented).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "common/args.h"
#include "common/combine.cuh"
#include "common/dropout.cuh"
#include "common/dtype.cuh"
#include "common/epilogue.h"
#include "common/mutants.cuh"
#include "common/softmax.h"
#include "families.h"
#include "general/launch.h"
#include "tile_config.h"

namespace flashcheck::detail {
inline namespace FLASHCHECK_KERNEL_VARIANT {
namespace general {

inline constexpr bool kInstrument = FLASHCHECK_INSTRUMENT;
inline constexpr unsigned kFullWarpMask = 0xffffffffu;

struct NoInstrumentation {};

// Kernel arguments: the common block plus whether Q, K and V allow 16-byte loads.
template <bool kInst>
struct GeneralArgs : ProblemArgs {
  bool vector_loads = false;  // Q, K, V bases and strides are whole 16-byte vectors
  std::conditional_t<kInst, Instrumentation, NoInstrumentation> inst;
};

__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > (FC_MUTANT(kGeneralWarpMaxShortReduction) ? 1 : 0); offset /= 2)
    x = fmaxf(x, __shfl_xor_sync(kFullWarpMask, x, offset));
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

// Copies rows [row0, row0 + kRows) of a (seqlen, head_dim) slice (contiguous or paged: RowSource) into a
// (kRows, RowStride) fp32 smem tile; `head_dim` is the slice's own columns (head_dim_v for V).
// Rows at or past `rows_end` and dims past head_dim become 0, so padded dims add nothing to dot products or to
// O's accumulator, and keys the tile's rows cannot see are never read from global memory. With `vector_loads`
// (base and strides 16-byte aligned, decided on the host) each thread moves 16-byte chunks; otherwise elements,
// which serves any element-aligned layout.
template <typename Cfg, typename T, int kRows, int RowStride>
__device__ __forceinline__ void load_tile(float* tile_smem, const RowSource<const T>& rows, int64_t row0,
                                          int64_t rows_end, int64_t head_dim, bool vector_loads) {
  constexpr int kVec = DeviceDtype<T>::kVector;
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
        const T* src = rows.row(row) + d0;
        if (d0 + kVec <= head_dim) {
          DeviceDtype<T>::load_vector(src, values);
        } else {
#pragma unroll
          for (int e = 0; e < kVec; ++e) values[e] = d0 + e < head_dim ? DeviceDtype<T>::load(src + e) : 0.0f;
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
    if (row < rows_end && d < head_dim) value = DeviceDtype<T>::load(rows.row(row) + d);
    tile_smem[r * RowStride + d] = value;
  }
}

// A dropped key's P in shared memory: -0, a value the softmax never gives (P is +0 or more, or NaN), so P V can tell
// dropped keys from kept ones without holding their bits in registers.
inline constexpr uint32_t kDroppedPBits = 0x80000000u;

// Marks the keys of the warp's rows that dropout drops in the tile's P (after softmax_update has written it and taken
// every key into l): each lane draws its own keys' decisions (the call of each key's group of four, which the group's
// four lanes draw alike) and overwrites its own P entries, so the marks need no exchange before the __syncwarp that
// precedes P V.
template <typename Cfg>
__device__ __forceinline__ void mark_dropped_keys(float* p_warp, const ProblemArgs& a, int64_t b, int64_t h,
                                                  int64_t row0, int64_t k0, int lane) {
#pragma unroll
  for (int r = 0; r < Cfg::kRowsPerWarp; ++r) {
#pragma unroll
    for (int c = 0; c < Cfg::kKeysPerLane; ++c) {
      const int key = lane + c * kWarpSize;
      if (!device_keeps(a, b, h, row0 + r, k0 + key, false)) {
        p_warp[r * Cfg::kBlockN + key] = __uint_as_float(kDroppedPBits);
      }
    }
  }
}

// acc[r][:] += p[r][j] * v[j][:] over the keys j < n_keys of the tile. kMasked: some row of the warp does
// not see every key, so each (row, key) is predicated on visibility: a masked key's V row (possibly NaN)
// must not reach O, and 0 * NaN would. Unmasked tiles run without the predicate. kDropout: keys whose P carries the
// dropped mark (mark_dropped_keys) add no term, like hidden ones.
template <typename Cfg, bool kMasked, bool kDropout>
__device__ __forceinline__ void accumulate_pv(float (&acc)[Cfg::kRowsPerWarp][Cfg::kDimsPerLane],
                                              const float* p_warp, const float* v_smem, int n_keys, int64_t k0,
                                              const int64_t (&keys_begin)[Cfg::kRowsPerWarp],
                                              const int64_t (&keys_end)[Cfg::kRowsPerWarp], int lane) {
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
        const bool visible = !kMasked || (k0 + j >= keys_begin[r] && k0 + j < keys_end[r]);
        const bool kept = !kDropout || __float_as_uint(p) != kDroppedPBits;
#pragma unroll
        for (int t = 0; t < Cfg::kDimsPerLane; ++t) {
          acc[r][t] = visible && kept ? fmaf(p, v_lane[t], acc[r][t]) : acc[r][t];
        }
      }
    }
  }
}

// One warp's rows of a work item: which keys they see and their online-softmax state in log2 units (m = running
// max of scale*log2(e)*score, l = sum of exp2(x - m)). Every lane holds the warp-uniform m and l of each row and
// its own dims of the accumulator.
template <typename Cfg>
struct WarpRows {
  int64_t keys_begin[Cfg::kRowsPerWarp];  // row r sees keys [keys_begin[r], keys_end[r]); rows past seqlen_q
  int64_t keys_end[Cfg::kRowsPerWarp];    // see none
  int64_t any_begin = INT64_MAX, any_end = 0;  // keys some valid row of the warp sees: [any_begin, any_end)
  int64_t all_begin = 0, all_end = INT64_MAX;  // keys every valid row of the warp sees: [all_begin, all_end)
  float m[Cfg::kRowsPerWarp];
  float l[Cfg::kRowsPerWarp];
  float acc[Cfg::kRowsPerWarp][Cfg::kDimsPerLane];
  // Instrumentation only (dead, and removed, in production):
  int64_t moves[Cfg::kRowsPerWarp];  // how often each row's running max changed
  int trace_slot[Cfg::kRowsPerWarp];
};

// S = Q K^T for the warp's rows and this lane's keys (lane, lane + 32, ...): an fp32 FMA chain over the head dims.
template <typename Cfg>
__device__ __forceinline__ void scores(float (&s)[Cfg::kRowsPerWarp][Cfg::kKeysPerLane], const float* q_warp,
                                       const float* k_smem, int lane) {
#pragma unroll
  for (int r = 0; r < Cfg::kRowsPerWarp; ++r) {
#pragma unroll
    for (int c = 0; c < Cfg::kKeysPerLane; ++c) s[r][c] = 0.0f;
  }
  const float* k_lane = k_smem + lane * Cfg::kKRowStride;
#pragma unroll 2
  for (int d = 0; d < Cfg::kHeadDim; d += kFloat4Lanes) {
    float4 k4[Cfg::kKeysPerLane];  // (kKeysPerLane, 4)
#pragma unroll
    for (int c = 0; c < Cfg::kKeysPerLane; ++c) {
      k4[c] = *reinterpret_cast<const float4*>(k_lane + c * kWarpSize * Cfg::kKRowStride + d);
    }
#pragma unroll
    for (int r = 0; r < Cfg::kRowsPerWarp; ++r) {
      const float4 q4 = *reinterpret_cast<const float4*>(q_warp + r * Cfg::kHeadDim + d);
#pragma unroll
      for (int c = 0; c < Cfg::kKeysPerLane; ++c) {
        s[r][c] = fmaf(q4.x, k4[c].x, s[r][c]);
        s[r][c] = fmaf(q4.y, k4[c].y, s[r][c]);
        s[r][c] = fmaf(q4.z, k4[c].z, s[r][c]);
        s[r][c] = fmaf(q4.w, k4[c].w, s[r][c]);
      }
    }
  }
}

// The online-softmax update of the warp's rows for the K/V tile at k0: p of every key into the warp's P rows in
// shared memory, l and O rescaled (common/softmax.h). x = mul_rn(s, scale*log2 e) stays a rounded product (no FMA
// with the subtraction), so the row maximum gives p = 1 exactly. Invisible keys get x = -inf: zero weight.
template <typename Cfg, bool kInst>
__device__ __forceinline__ void softmax_update(WarpRows<Cfg>& w, const float (&s)[Cfg::kRowsPerWarp][Cfg::kKeysPerLane],
                                               float* p_warp, int64_t k0, const ProblemArgs& a, bool skip_o_rescale,
                                               int lane) {
#pragma unroll
  for (int r = 0; r < Cfg::kRowsPerWarp; ++r) {
    float x[Cfg::kKeysPerLane];
    float tile_max = kNegInf;
#pragma unroll
    for (int c = 0; c < Cfg::kKeysPerLane; ++c) {
      const int64_t key = k0 + lane + c * kWarpSize;
      const float scaled = a.has_softcap ? capped_score_log2(s[r][c], a.softcap) : mul_rn(s[r][c], a.scale_log2);
      x[c] = key >= w.keys_begin[r] && key < w.keys_end[r] ? scaled : kNegInf;
      tile_max = fmaxf(tile_max, x[c]);
    }
    const MaxStep step = running_max_step(w.m[r], warp_max(tile_max), [](float e) { return exp2f(e); });
    float p_sum = 0.0f;
#pragma unroll
    for (int c = 0; c < Cfg::kKeysPerLane; ++c) {
      const float p = exp2f(x[c] - step.origin);
      p_warp[r * Cfg::kBlockN + lane + c * kWarpSize] = p;
      p_sum += p;
    }
    w.l[r] = fmaf(w.l[r], FC_MUTANT(kGeneralLNotRescaled) ? 1.0f : step.alpha, warp_sum(p_sum));
    const float alpha_o = skip_o_rescale ? 1.0f : step.alpha;
#pragma unroll
    for (int t = 0; t < Cfg::kDimsPerLane; ++t) w.acc[r][t] = mul_rn(w.acc[r][t], alpha_o);
    if constexpr (kInst) w.moves[r] += step.m != w.m[r] ? 1 : 0;
    w.m[r] = step.m;
  }
}

// A split run's rows: the state as it is (accumulator, m in log2 units, l) into the partials, for the combine.
template <typename Cfg, bool kInst>
__device__ __forceinline__ void store_partials(const GeneralArgs<kInst>& args, const WarpRows<Cfg>& w, int64_t b,
                                               int64_t h, int64_t seqlen_q, int64_t row0, int32_t split, int lane) {
  const int64_t block = split * args.lse_rows + args.row_block(b, h);
#pragma unroll
  for (int r = 0; r < Cfg::kRowsPerWarp; ++r) {
    const int64_t row = row0 + r;
    if (row >= seqlen_q) continue;
    float* acc = args.partial_acc + (block + row) * args.head_dim_v;
#pragma unroll
    for (int t = 0; t < Cfg::kDimsPerLane; ++t) {
      const int d = lane + t * kWarpSize;
      if (d < args.head_dim_v) acc[d] = w.acc[r][t];
    }
    if (lane == 0) {
      args.partial_m[block + row] = w.m[r];
      args.partial_l[block + row] = w.l[r];
    }
  }
}

// Epilogue of the warp's rows: O = acc / l, under dropout times s32 (one more rounded product), rounded to the dtype
// once; LSE = m ln 2 + ln l, the undropped softmax's (common/epilogue.h).
template <typename Cfg, typename T, bool kInst>
__device__ __forceinline__ void store_rows(const GeneralArgs<kInst>& args, const WarpRows<Cfg>& w, int64_t b, int64_t h,
                                           int64_t seqlen_q, int64_t row0, int lane) {
  T* o_head = args.template q_rows<T>(args.o, b, h);
  const int64_t lse_block = args.row_block(b, h);
#pragma unroll
  for (int r = 0; r < Cfg::kRowsPerWarp; ++r) {
    const int64_t row = row0 + r;
    if (row >= seqlen_q) continue;
    const RowFinal fin = finish_row(w.m[r], mul_rn(w.m[r], kLn2), w.l[r], args.sink, h, [](float e) { return exp2f(e); });
#pragma unroll
    for (int t = 0; t < Cfg::kDimsPerLane; ++t) {
      const int d = lane + t * kWarpSize;
      if (d < args.head_dim_v) {
        float o = FC_MUTANT(kGeneralEmptyRowDivide) ? w.acc[r][t] / fin.l : final_output(w.acc[r][t], fin);
        if (args.dropout.enabled && !FC_MUTANT(kDropoutScaleMissing)) o = mul_rn(o, args.dropout.keep_scale);
        o_head[row * args.o.stride.row + d] = DeviceDtype<T>::store(o);
      }
    }
    if (lane == 0) {
      args.lse[lse_block + row] = row_lse(fin.m_natural, fin.l);
      if constexpr (kInst) record_row(args.inst, lse_block + row, fin.m_natural, fin.l, w.moves[r]);
    }
  }
}

template <typename Cfg, typename T, bool kInst>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocksPerSm)
    general_forward_kernel(const GeneralArgs<kInst> args) {
  constexpr int kRows = Cfg::kRowsPerWarp;

  extern __shared__ float4 smem_float4[];  // float4 so the dynamic smem base is 16-byte aligned
  float* q_smem = reinterpret_cast<float*>(smem_float4);  // (kBlockM, kHeadDim)
  float* k_smem = q_smem + Cfg::kQSmemFloats;               // (kBlockN, kKRowStride)
  float* v_smem = k_smem + Cfg::kKSmemFloats;               // (kBlockN, kHeadDim)
  float* p_smem = v_smem + Cfg::kVSmemFloats;               // (kBlockM, kBlockN)

  const int warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  float* p_warp = p_smem + warp * kRows * Cfg::kBlockN;           // (kRowsPerWarp, kBlockN)
  const float* q_warp = q_smem + warp * kRows * Cfg::kHeadDim;     // (kRowsPerWarp, kHeadDim)
  for (int64_t work = blockIdx.x; work < args.work_items; work += gridDim.x) {
    // Splits vary fastest, then Q tiles, last tile first: blocks running together share one head's K/V in L2,
    // and under a causal mask the longest Q tiles start first.
    const int32_t split = static_cast<int32_t>(work % args.splits);
    const int64_t tile_work = work / args.splits;
    const int64_t q_tile = args.q_tiles - 1 - tile_work % args.q_tiles;
    const int64_t head_batch = tile_work / args.q_tiles;
    const int64_t h = head_batch % args.heads_q;
    const int64_t b = head_batch / args.heads_q;
    const int64_t h_kv = FC_MUTANT(kGeneralGqaHeadModulo) ? h % (args.heads_q / args.group_size) : h / args.group_size;
    const int64_t m0 = q_tile * Cfg::kBlockM;
    const SequenceView seq = args.sequence(b);
    if (m0 >= seq.seqlen_q) continue;  // past this sequence's rows (seqlen_q is the longest sequence's)
    const Visibility& vis = seq.vis;
    const int64_t rows_end = m0 + Cfg::kBlockM < seq.seqlen_q ? m0 + Cfg::kBlockM : seq.seqlen_q;
    const Visibility::TileRange tiles = vis.tile_range(m0, rows_end - m0, Cfg::kBlockN);
    // This run's tiles [run_begin, run_end) of the visited ones (all of them unsplit).
    const int64_t run_begin = args.split_begin(tiles.count, split);
    const int64_t run_end =
        args.split_begin(tiles.count, split + 1) + (FC_MUTANT(kGeneralSplitOverlap) && split + 1 < args.splits ? 1 : 0);
    const int64_t block_keys = vis.row_end(rows_end - 1);  // keys any row of the Q tile reads
    const int64_t warp_row0 = m0 + warp * kRows;

    WarpRows<Cfg> w;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int64_t row = warp_row0 + r;
      w.keys_begin[r] = row < seq.seqlen_q ? vis.row_begin(row) : 0;
      w.keys_end[r] = row < seq.seqlen_q ? vis.row_end(row) + (FC_MUTANT(kGeneralCausalOffByOne) ? 1 : 0) : 0;
      if (row < seq.seqlen_q) {
        w.any_begin = w.keys_begin[r] < w.any_begin ? w.keys_begin[r] : w.any_begin;
        w.any_end = w.keys_end[r] > w.any_end ? w.keys_end[r] : w.any_end;
        w.all_begin = w.keys_begin[r] > w.all_begin ? w.keys_begin[r] : w.all_begin;
        w.all_end = w.keys_end[r] < w.all_end ? w.keys_end[r] : w.all_end;
      }
      w.m[r] = kNegInf;
      w.l[r] = 0.0f;
#pragma unroll
      for (int t = 0; t < Cfg::kDimsPerLane; ++t) w.acc[r][t] = 0.0f;
      if constexpr (kInst) {
        w.moves[r] = 0;
        // Traces follow one run through all of a row's tiles: split runs record none.
        w.trace_slot[r] = row < seq.seqlen_q && args.splits == 1 ? trace_slot(args.inst, args.row_block(b, h) + row) : -1;
      }
    }
    if constexpr (kInst) {
      if (threadIdx.x == 0 && split == 0) {
        count_tile_kinds(args.inst, vis, m0, Cfg::kBlockM, Cfg::kBlockN, tiles.first, tiles.first + tiles.count);
      }
    }

    const RowSource<const T> k_rows = args.template kv_rows<const T>(args.k, b, h_kv);
    const RowSource<const T> v_rows = args.template kv_rows<const T>(args.v, b, h_kv);
    __syncthreads();  // the previous work item is done with q_smem
    if (run_end > run_begin) {  // with no visible key Q is never read (it may be null when seqlen_k == 0)
      RowSource<const T> q_rows;
      q_rows.base = args.template q_rows<const T>(args.q, b, h);
      q_rows.row_stride = args.q.stride.row;
      load_tile<Cfg, T, Cfg::kBlockM, Cfg::kHeadDim>(q_smem, q_rows, m0, rows_end, args.head_dim, args.vector_loads);
    }

    for (int64_t kt = run_begin; kt < run_end; ++kt) {
      const int64_t k0 = (tiles.first + kt) * Cfg::kBlockN;
      __syncthreads();  // every warp is done with the previous K/V tile
      load_tile<Cfg, T, Cfg::kBlockN, Cfg::kKRowStride>(k_smem, k_rows, k0, block_keys, args.head_dim, args.vector_loads);
      load_tile<Cfg, T, Cfg::kBlockN, Cfg::kHeadDim>(
          v_smem, v_rows, k0, block_keys, FC_MUTANT(kGeneralValueWidthFromHeadDim) ? args.head_dim : args.head_dim_v,
          args.vector_loads);
      FC_PERTURB(kPerturbGeneralLoad, kt);
      if (!FC_MUTANT(kGeneralMissingTileBarrier)) __syncthreads();

      // A warp whose rows see no key of this tile skips it: its state would not change (p = 0, alpha = 1).
      if (k0 < w.any_end && k0 + Cfg::kBlockN > w.any_begin) {
        float s[kRows][Cfg::kKeysPerLane];  // (kRowsPerWarp, kKeysPerLane)
        scores<Cfg>(s, q_warp, k_smem, lane);
        const bool skip_o_rescale = FC_MUTANT(kGeneralMissingRescale) && kt + 1 == run_end;
        softmax_update<Cfg, kInst>(w, s, p_warp, k0, args, skip_o_rescale, lane);
        __syncwarp();  // P of the warp's rows is in smem

        const int n_keys = static_cast<int>(w.any_end - k0 < Cfg::kBlockN ? w.any_end - k0 : Cfg::kBlockN);
        const bool unmasked = (k0 >= w.all_begin && k0 + Cfg::kBlockN <= w.all_end) || FC_MUTANT(kGeneralHiddenVUnmasked);
        if (args.dropout.enabled) {
          mark_dropped_keys<Cfg>(p_warp, args, b, h, warp_row0, k0, lane);
          __syncwarp();  // the marks are in smem
          if (unmasked) {
            accumulate_pv<Cfg, false, true>(w.acc, p_warp, v_smem, n_keys, k0, w.keys_begin, w.keys_end, lane);
          } else {
            accumulate_pv<Cfg, true, true>(w.acc, p_warp, v_smem, n_keys, k0, w.keys_begin, w.keys_end, lane);
          }
        } else if (unmasked) {
          accumulate_pv<Cfg, false, false>(w.acc, p_warp, v_smem, n_keys, k0, w.keys_begin, w.keys_end, lane);
        } else {
          accumulate_pv<Cfg, true, false>(w.acc, p_warp, v_smem, n_keys, k0, w.keys_begin, w.keys_end, lane);
        }
        __syncwarp();  // P is read before the next tile overwrites it
      }

      if constexpr (kInst) {
        if (lane == 0) {
#pragma unroll
          for (int r = 0; r < kRows; ++r) record_trace(args.inst, w.trace_slot[r], kt, mul_rn(w.m[r], kLn2), w.l[r]);
        }
      }
    }
    if (args.splits > 1) {
      store_partials<Cfg, kInst>(args, w, b, h, seq.seqlen_q, warp_row0, split, lane);
    } else {
      store_rows<Cfg, T, kInst>(args, w, b, h, seq.seqlen_q, warp_row0, lane);
    }
  }
}

// Host side: fills the arguments and launches Cfg's kernel. Preconditions as for general_launch(). (kInst is a
// template parameter so that the production build discards the instrumentation assignment unchecked.)
template <typename Cfg, typename T, bool kInst = kInstrument>
Status launch_general_config(const Params& params, cudaStream_t stream, const Instrumentation* inst) {
  FC_UPLOAD_MUTANT(stream);
  GeneralArgs<kInst> args{make_problem_args(params, Cfg::kBlockM, effective_splits(params))};
  // 16-byte loads need every row start 16-byte aligned: aligned bases and strides in whole vectors.
  constexpr int64_t kVec = DeviceDtype<T>::kVector;
  const auto aligned = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % kVectorBytes == 0; };
  const auto whole_vectors = [](const Strides& s) { return s.batch % kVec == 0 && s.head % kVec == 0 && s.row % kVec == 0; };
  args.vector_loads = aligned(params.q) && aligned(params.k) && aligned(params.v) && whole_vectors(params.q_stride) &&
                      whole_vectors(params.k_stride) && whole_vectors(params.v_stride);
  if constexpr (kInst) {
    if (inst != nullptr) args.inst = *inst;
  }
  const auto kernel = general_forward_kernel<Cfg, T, kInst>;
  if constexpr (Cfg::kSmemBytes > kSmemBytesDefault) {
    // Per device and function; cheap enough to set on every launch, which keeps multi-device use correct.
    const cudaError_t err =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(Cfg::kSmemBytes));
    if (err != cudaSuccess) {
      return {StatusCode::kCudaError, std::string("general: cudaFuncSetAttribute(max dynamic smem) failed: ") +
                                          cudaGetErrorString(err)};
    }
  }
  return combine::launch_split<T, kInst>(args, stream, inst, [&](const GeneralArgs<kInst>& run_args) -> Status {
    const dim3 grid(static_cast<unsigned>(capped_grid(Cfg::grid_blocks(run_args.work_items))));
    kernel<<<grid, Cfg::kThreads, Cfg::kSmemBytes, stream>>>(run_args);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) {
      return {StatusCode::kCudaError, std::string("general: kernel launch failed: ") + cudaGetErrorString(err)};
    }
    return Status::ok_status();
  });
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
                                          std::to_string(params.head_dim) + ", head_dim_v " +
                                          std::to_string(value_head_dim(params))};
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
