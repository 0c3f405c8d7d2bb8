// The backward pass's CUDA kernels (CUDA cores, fp32; backward/arith.h has the arithmetic and the tiles):
//   Preprocess   D = dO.O per row (one thread per row, an FMA chain in column order).
//   KeyTile      one CTA per (K/V tile, K/V head, sequence): dK and dV of the tile's keys in registers over the rows
//                that see them, every query head of the group in turn, kBlockRows at a time; in atomic mode each
//                row's partial sum of dT k over the tile's keys goes to dQ's fp32 accumulator with atomicAdd.
//   QueryTile    (deterministic mode) one CTA per (Q tile, query head, sequence): dQ over the K/V tiles its rows see,
//                in order, each tile's partials recomputed bit for bit as KeyTile computes them.
//   StoreDq      (atomic mode) dQ = fl(scale * accumulator), rounded to the dtype.
//   Dsink        one thread per query head: dsink over the head's rows in order.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backward/arith.h"
#include "common/dropout.cuh"
#include "common/dtype.cuh"
#include "common/mutants.cuh"

namespace flashcheck::detail::backward {

__device__ __forceinline__ float exp2_f32(float x) { return exp2f(x); }

// Shared memory of a CTA: the K/V tile's rows and the rows of Q and dO it takes at a time, P (under dropout w) and dT
// of their pairs,
// each row's LSE in log2 units and D. Every row is padded by one float, so that the 32 lanes of a warp reading one
// column of 32 rows (the pairs' dot products) hit 32 banks. Sized by the problem's own dims.
struct Smem {
  float *k, *v, *q, *g, *p, *t, *lse2, *d;
  int ks, vs;  // row strides of K and Q (dim + 1) and of V and dO (dim_v + 1)
  static constexpr int kPairStride = kBlockKeys + 1;
  __device__ Smem(float* base, int dim, int dim_v) : ks(dim + 1), vs(dim_v + 1) {
    k = base;
    v = k + kBlockKeys * ks;
    q = v + kBlockKeys * vs;
    g = q + kBlockRows * ks;
    p = g + kBlockRows * vs;
    t = p + kBlockRows * kPairStride;
    lse2 = t + kBlockRows * kPairStride;
    d = lse2 + kBlockRows;
  }
  static size_t bytes(int64_t dim, int64_t dim_v) {
    return sizeof(float) * static_cast<size_t>((kBlockKeys + kBlockRows) * (dim + 1 + dim_v + 1) +
                                               2 * kBlockRows * kPairStride + 2 * kBlockRows);
  }
};

// `count` rows of `columns` values from `src` (row(i) gives row i) into dst's rows of `columns + 1` floats as fp32;
// rows at or past `count` of the block's `block` rows are zero.
template <typename T, class Row>
__device__ void load_block(float* dst, int block, int count, int columns, Row&& row) {
  for (int idx = threadIdx.x; idx < block * columns; idx += kThreads) {
    const int r = idx / columns, c = idx % columns;
    dst[r * (columns + 1) + c] = r < count ? DeviceDtype<T>::load(row(r) + c) : 0.0f;
  }
}

// Q, dO, LSE and D of rows [i0, i0 + rows) of query head h of sequence b.
template <typename T>
__device__ void load_rows(const Args& a, const Smem& s, int64_t b, int64_t h, int64_t i0, int rows) {
  const T* q = a.q_rows<const T>(a.q, b, h);
  const T* g = a.q_rows<const T>(a.d_o, b, h);
  load_block<T>(s.q, kBlockRows, rows, static_cast<int>(a.head_dim), [&](int r) { return q + (i0 + r) * a.q.stride.row; });
  load_block<T>(s.g, kBlockRows, rows, static_cast<int>(a.head_dim_v), [&](int r) { return g + (i0 + r) * a.d_o.stride.row; });
  const int64_t rb = a.row_block(b, h);
  if (threadIdx.x < kBlockRows) {
    const int r = static_cast<int>(threadIdx.x);
    s.lse2[r] = r < rows ? lse_log2(a.lse[rb + i0 + r]) : 0.0f;
    s.d[r] = r < rows ? a.d[rb + i0 + r] : 0.0f;
  }
}

// The K/V tile at key k0 of K/V head h_kv of sequence b: its first `keys` rows (the rest zero).
template <typename T>
__device__ void load_tile(const Args& a, const Smem& s, int64_t b, int64_t h_kv, int64_t k0, int keys) {
  const RowSource<const T> k = a.kv_rows<const T>(a.k, b, h_kv), v = a.kv_rows<const T>(a.v, b, h_kv);
  load_block<T>(s.k, kBlockKeys, keys, static_cast<int>(a.head_dim), [&](int j) { return k.row(k0 + j); });
  load_block<T>(s.v, kBlockKeys, keys, static_cast<int>(a.head_dim_v), [&](int j) { return v.row(k0 + j); });
}

// dV's weight (P, or under dropout w) and dT of every (row, key) pair of the block the visibility rule lets through
// (0 for the others); rows of query head h of sequence b.
__device__ inline void pair_terms(const Args& a, const Smem& s, const Visibility& vis, int64_t b, int64_t h, int64_t i0,
                                  int rows, int64_t k0, int keys) {
  const int dim = static_cast<int>(a.head_dim), dim_v = static_cast<int>(a.head_dim_v);
  for (int idx = threadIdx.x; idx < kBlockRows * kBlockKeys; idx += kThreads) {
    const int r = idx / kBlockKeys, j = idx % kBlockKeys;
    float p = 0.0f, dt = 0.0f;
    if (r < rows && j < keys && vis.sees(i0 + r, k0 + j)) {
      float dot = 0.0f, dp = 0.0f;
      for (int c = 0; c < dim; ++c) dot = fmaf(s.q[r * s.ks + c], s.k[j * s.ks + c], dot);
      for (int c = 0; c < dim_v; ++c) dp = fmaf(s.g[r * s.vs + c], s.v[j * s.vs + c], dp);
      const Score sc = score_log2(dot, a);
      p = weight(sc.x, s.lse2[r], exp2_f32);
      float w = p;
      if (a.dropout.enabled) {
        const DroppedPair dropped = dropout_pair(p, dp, device_keeps(a, b, h, i0 + r, k0 + j, true), a.dropout.keep_scale);
        w = dropped.w;
        dp = dropped.dp;
      }
      dt = score_grad(p, dp, FC_MUTANT(kBwdDsWithoutD) ? 0.0f : s.d[r], sc.t, a.has_softcap);
      p = w;
    }
    s.p[r * Smem::kPairStride + j] = p;
    s.t[r * Smem::kPairStride + j] = dt;
  }
}

// Row r's partial sum of dT k over the tile's keys in column c, and whether the row sees any of them.
__device__ inline bool dq_partial(const Smem& s, const Visibility& vis, int64_t i0, int r, int64_t k0, int keys, int c,
                                  float* part) {
  bool any = false;
  float acc = 0.0f;
  for (int j = 0; j < keys; ++j) {
    if (!vis.sees(i0 + r, k0 + j)) continue;
    acc = fmaf(s.t[r * Smem::kPairStride + j], s.k[j * s.ks + c], acc);
    any = true;
  }
  *part = acc;
  return any;
}

template <typename T>
__global__ void __launch_bounds__(kThreads) preprocess_kernel(Args a) {
  const int64_t flat = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (flat >= a.lse_rows) return;
  const RowIndex row = lse_row_index(a, flat);
  const T* o = a.q_rows<const T>(a.o, row.b, row.h) + row.i * a.o.stride.row;
  const T* g = a.q_rows<const T>(a.d_o, row.b, row.h) + row.i * a.d_o.stride.row;
  float d = 0.0f;
  for (int64_t c = 0; c < a.head_dim_v; ++c) d = fmaf(DeviceDtype<T>::load(g + c), DeviceDtype<T>::load(o + c), d);
  a.d[flat] = d;
}

template <typename T, int kDimMax>
__global__ void __launch_bounds__(kThreads) key_tile_kernel(Args a) {
  extern __shared__ float smem[];
  const int64_t k0 = static_cast<int64_t>(blockIdx.x) * kBlockKeys, h_kv = blockIdx.y, b = blockIdx.z;
  const SequenceView seq = a.sequence(b);
  const int64_t capacity = a.key_capacity(b);
  if (k0 >= capacity) return;
  const int dim = static_cast<int>(a.head_dim), dim_v = static_cast<int>(a.head_dim_v);
  const Smem s(smem, dim, dim_v);
  const int slots = static_cast<int>(capacity - k0 < kBlockKeys ? capacity - k0 : kBlockKeys);
  const int keys = keys_in_tile(seq.seqlen_k, k0);
  load_tile<T>(a, s, b, h_kv, k0, keys);
  constexpr int kAcc = kBlockKeys * kDimMax / kThreads;
  float acc_k[kAcc], acc_v[kAcc];
  for (int m = 0; m < kAcc; ++m) acc_k[m] = acc_v[m] = 0.0f;
  const RowSpan span = keys > 0 ? rows_seeing(seq.vis, k0, k0 + keys) : RowSpan{};
  for (int64_t g = 0; g < a.group_size; ++g) {
    const int64_t h = h_kv * a.group_size + g;
    for (int64_t i0 = span.begin; i0 < span.end; i0 += kBlockRows) {
      const int rows = static_cast<int>(span.end - i0 < kBlockRows ? span.end - i0 : kBlockRows);
      __syncthreads();  // the previous block's rows are consumed
      load_rows<T>(a, s, b, h, i0, rows);
      __syncthreads();
      pair_terms(a, s, seq.vis, b, h, i0, rows, k0, keys);
      __syncthreads();
#pragma unroll
      for (int m = 0; m < kAcc; ++m) {
        const int idx = static_cast<int>(threadIdx.x) + m * kThreads;
        if (idx < kBlockKeys * dim) {
          const int j = idx / dim, c = idx % dim;
          for (int r = 0; r < rows; ++r) {
            if (j < keys && seq.vis.sees(i0 + r, k0 + j)) acc_k[m] = fmaf(s.t[r * Smem::kPairStride + j], s.q[r * s.ks + c], acc_k[m]);
          }
        }
        if (idx < kBlockKeys * dim_v) {
          const int j = idx / dim_v, c = idx % dim_v;
          for (int r = 0; r < rows; ++r) {
            if (j < keys && seq.vis.sees(i0 + r, k0 + j)) acc_v[m] = fmaf(s.p[r * Smem::kPairStride + j], s.g[r * s.vs + c], acc_v[m]);
          }
        }
      }
      if (!a.deterministic) {
        const int64_t rb = a.row_block(b, h);
        for (int idx = threadIdx.x; idx < rows * dim; idx += kThreads) {
          const int r = idx / dim, c = idx % dim;
          float part;
          // The mutant skips the last of several K/V tiles the row sees.
          const bool skipped = FC_MUTANT(kBwdDqMissingTile) &&
                               k0 == (seq.vis.row_end(i0 + r) - 1) / kBlockKeys * kBlockKeys &&
                               k0 > seq.vis.row_begin(i0 + r) / kBlockKeys * kBlockKeys;
          if (dq_partial(s, seq.vis, i0, r, k0, keys, c, &part) && !skipped) {
            atomicAdd(a.dq_acc + (rb + i0 + r) * a.head_dim + c, part);
          }
        }
      }
    }
  }
  const RowSource<T> dk = a.kv_rows<T>(a.dk, b, h_kv), dv = a.kv_rows<T>(a.dv, b, h_kv);
#pragma unroll
  for (int m = 0; m < kAcc; ++m) {
    const int idx = static_cast<int>(threadIdx.x) + m * kThreads;
    const int written = FC_MUTANT(kBwdPaddedTailNotZeroed) ? keys : slots;
    if (idx < written * dim) {
      dk.row(k0 + idx / dim)[idx % dim] =
          DeviceDtype<T>::store(mul_rn(acc_k[m], FC_MUTANT(kBwdDkScaleMissing) ? 1.0f : a.softmax_scale));
    }
    if (idx < written * dim_v) dv.row(k0 + idx / dim_v)[idx % dim_v] = DeviceDtype<T>::store(acc_v[m]);
  }
}

template <typename T, int kDimMax>
__global__ void __launch_bounds__(kThreads) query_tile_kernel(Args a) {
  extern __shared__ float smem[];
  const int64_t i0 = static_cast<int64_t>(blockIdx.x) * kBlockRows, h = blockIdx.y, b = blockIdx.z;
  const SequenceView seq = a.sequence(b);
  if (i0 >= seq.seqlen_q) return;
  const int dim = static_cast<int>(a.head_dim), dim_v = static_cast<int>(a.head_dim_v);
  const Smem s(smem, dim, dim_v);
  const int rows = static_cast<int>(seq.seqlen_q - i0 < kBlockRows ? seq.seqlen_q - i0 : kBlockRows);
  const int64_t h_kv = h / a.group_size;
  load_rows<T>(a, s, b, h, i0, rows);
  constexpr int kAcc = kBlockRows * kDimMax / kThreads;
  float acc[kAcc];
  for (int m = 0; m < kAcc; ++m) acc[m] = 0.0f;
  const TileSpan tiles = tiles_seen(seq.vis, i0, i0 + rows);
  for (int64_t tile = tiles.first; tile < tiles.end; ++tile) {
    const int64_t k0 = tile * kBlockKeys;
    const int keys = keys_in_tile(seq.seqlen_k, k0);
    __syncthreads();  // the previous tile is consumed
    load_tile<T>(a, s, b, h_kv, k0, keys);
    __syncthreads();
    pair_terms(a, s, seq.vis, b, h, i0, rows, k0, keys);
    __syncthreads();
#pragma unroll
    for (int m = 0; m < kAcc; ++m) {
      const int idx = static_cast<int>(threadIdx.x) + m * kThreads;
      float part;
      if (idx < rows * dim && dq_partial(s, seq.vis, i0, idx / dim, k0, keys, idx % dim, &part)) acc[m] += part;
    }
  }
  T* dq = a.q_rows<T>(a.dq, b, h);
#pragma unroll
  for (int m = 0; m < kAcc; ++m) {
    const int idx = static_cast<int>(threadIdx.x) + m * kThreads;
    if (idx < rows * dim) dq[(i0 + idx / dim) * a.dq.stride.row + idx % dim] = DeviceDtype<T>::store(mul_rn(acc[m], a.softmax_scale));
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads) store_dq_kernel(Args a) {
  const int64_t flat = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (flat >= a.lse_rows * a.head_dim) return;
  const int64_t row = flat / a.head_dim, c = flat % a.head_dim;
  const RowIndex r = lse_row_index(a, row);
  T* dq = a.q_rows<T>(a.dq, r.b, r.h) + r.i * a.dq.stride.row;
  dq[c] = DeviceDtype<T>::store(mul_rn(a.dq_acc[flat], a.softmax_scale));
}

__global__ void dsink_kernel(Args a) {
  const int64_t h = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (h >= a.heads_q) return;
  float acc = 0.0f;
  for (int64_t b = 0; b < a.batch; ++b) {
    const SequenceView seq = a.sequence(b);
    for (int64_t i = 0; i < seq.seqlen_q; ++i) {
      const int64_t row = a.row_block(b, h) + i;
      acc += sink_term(a.sink[h], lse_log2(a.lse[row]), a.d[row], exp2_f32);
    }
  }
  a.dsink[h] = acc;
}

}  // namespace flashcheck::detail::backward
