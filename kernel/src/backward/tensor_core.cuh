// The backward pass's key-tile kernel on the tensor cores (fp16/bf16, atomic mode, head dims up to kTcMaxDim;
// backward_path() says when it runs). One CTA per (K/V tile of kTcKeys keys, K/V head, sequence) of four warps, each
// owning 16 of the tile's keys, or at head dims past 128 of eight, two per 16 keys, each holding half the columns of
// their dK and dV (both compute the keys' S and dP). Over the rows that see the tile, kRows at a time and every query
// head of the group in turn:
//   S^T = K Q^T and dP^T = V dO^T      mma.sync, fp32 accumulators, the warp's keys by the block's rows
//   P, dT                              arith.h's chain per element (score_log2, weight, score_grad), masked pairs 0
//   dV += P^T dO,  dK += dT^T Q        P and dT rounded to the dtype as A fragments (registers), dO and Q transposed
//   dQ partial = dT K                  dT through shared memory (rows by keys, the same rounding), K transposed;
//                                      added to dQ's fp32 accumulator with atomicAdd
// then dK = fl(scale * acc) and dV rounded to the dtype, over every key slot of the tile (slots past the sequence's
// keys hold 0). In deterministic mode the key tiles add nothing to dQ; TcQueryTile computes it instead, one CTA per
// (Q tile of kTcQRows rows, query head, sequence): over the K/V tiles its rows see, in order, S = Q K^T and dP = dO V^T
// again, P and dT as above, and dQ += dT K in the same registers, so the sum has one order; dQ = fl(scale * acc). Keys no query row sees load as zero rows like keys past the sequence: a NaN there would otherwise
// reach dQ through dT K (0 * NaN), where the CUDA-core kernels never multiply a hidden key. The preprocessing (D), dQ
// store and dsink kernels are kernel.cuh's. Rounding points: docs/error-model.md §10, the tensor-core class.
#pragma once

#include "backward/kernel.cuh"
#include "tensor_core/ptx.cuh"

namespace flashcheck::detail::backward {

inline constexpr int kTcKeyGroups = kTcKeys / 16;  // warps of 16 keys
inline constexpr int kTcQRows = 64;                // rows of a deterministic dQ tile: one warp per 16 (kTcKeyGroups)

// The shared-memory tiles of a CTA for padded head dim kDim (64, 128 or 256), in bytes from the dynamic buffer's
// start, and its warps. Rows are padded by 16 bytes, so the eight row addresses of one ldmatrix land in distinct banks.
template <int kDim>
struct TcTiles {
  static constexpr int kSplit = kDim > 128 ? 2 : 1;  // warps sharing 16 keys: dK's and dV's columns split kSplit ways
  static constexpr int kWarps = kTcKeyGroups * kSplit;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kAccCols = kDim / kSplit;     // a warp's columns of dK and dV
  static constexpr int kRows = kDim > 64 ? 32 : 64;  // query rows per step (registers: the S and dP fragments)
  static constexpr int kPitch = kDim * 2 + 16;       // a row of K, V, Q or dO
  static constexpr int kDsPitch = kTcKeys * 2 + 16;  // a row of dT (one query row, the tile's keys)
  static constexpr int kK = 0;
  static constexpr int kV = kK + kTcKeys * kPitch;
  static constexpr int kQ = kV + kTcKeys * kPitch;
  static constexpr int kDo = kQ + kRows * kPitch;
  static constexpr int kDs = kDo + kRows * kPitch;
  static constexpr int kLse2 = kDs + kRows * kDsPitch;  // floats: the rows' LSE in log2 units
  static constexpr int kD = kLse2 + kRows * 4;          // floats: the rows' D
  static constexpr int kSeen = kD + kRows * 4;          // bytes: whether some row sees key j of the tile
  static constexpr int kBytes = kSeen + kTcKeys;
  // dQ's partial: the warps split the block's rows in m16 tiles and, where there are fewer of those than warps,
  // the columns.
  static constexpr int kRowGroups = kRows / 16;
  static constexpr int kColGroups = kWarps / kRowGroups;
  static constexpr int kDqCols = kDim / kColGroups;
  static_assert(kRowGroups * kColGroups == kWarps && kDqCols % 16 == 0 && kAccCols % 16 == 0);
};

template <typename T, int kDim>
struct TcKeyTile {
  using Tiles = TcTiles<kDim>;
  using Ops = tc_kernel::DtypeOps<T>;
  static constexpr int kRows = Tiles::kRows;
  static constexpr int kPitch = Tiles::kPitch;
  static constexpr int kThreads = Tiles::kThreads;
  static constexpr int kAccCols = Tiles::kAccCols;

  // Rows [0, kTileRows) of a tile from `row(r)`'s first `cols` columns where live(r), zeros elsewhere (columns up to
  // kDim, rows not live): whole 16-byte chunks by cp.async, partial ones element by element (tc_kernel::copy_chunk_16).
  template <int kTileRows, class Row, class Live>
  __device__ static void load(uint32_t tile, int cols, Row&& row, Live&& live) {
    constexpr int kChunks = kDim / 8;
    for (int idx = threadIdx.x; idx < kTileRows * kChunks; idx += kThreads) {
      const int r = idx / kChunks, chunk = idx % kChunks;
      const int left = cols - chunk * 8;
      const int bytes = live(r) ? 2 * (left < 0 ? 0 : (left > 8 ? 8 : left)) : 0;
      const T* src = bytes > 0 ? row(r) + chunk * 8 : nullptr;
      tc_kernel::copy_chunk_16(tile + r * kPitch + chunk * 16, src, bytes);
    }
  }

  // acc (16 rows of A by kN columns) = A B^T: A's rows from `a_tile` (row-major, `a_pitch`), B's kN rows from `b_tile`
  // (row-major over the same kDepth columns, pitch kPitch), both by ldmatrix.
  template <int kN, int kDepth>
  __device__ static void gemm_nt(float (&acc)[kN / 8][4], uint32_t a_tile, int a_pitch, uint32_t b_tile) {
    const int lane = static_cast<int>(threadIdx.x % 32);
#pragma unroll
    for (int nt = 0; nt < kN / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[nt][e] = 0.0f;
    const uint32_t a_lane = a_tile + (lane % 16) * a_pitch + (lane / 16) * 16;
    const uint32_t b_lane = b_tile + (lane % 8 + 8 * (lane / 16)) * kPitch + ((lane / 8) % 2) * 16;
#pragma unroll
    for (int kk = 0; kk < kDepth / 16; ++kk) {
      uint32_t a[4];
      tc_kernel::ldmatrix_x4(a, a_lane + kk * 32);
#pragma unroll
      for (int nt2 = 0; nt2 < kN / 16; ++nt2) {
        uint32_t bb[4];
        tc_kernel::ldmatrix_x4(bb, b_lane + nt2 * 16 * kPitch + kk * 32);
        Ops::mma(acc[2 * nt2], a, bb[0], bb[1]);
        Ops::mma(acc[2 * nt2 + 1], a, bb[2], bb[3]);
      }
    }
  }

  // acc (16 rows by kN columns) += A B: A as kDepth / 16 register fragments, B (kDepth rows by kN columns, row-major,
  // pitch kPitch) from `b_tile` transposed by ldmatrix.
  template <int kN, int kDepth>
  __device__ static void gemm_rn(float (&acc)[kN / 8][4], const uint32_t (&a)[kDepth / 16][4], uint32_t b_tile) {
    const int lane = static_cast<int>(threadIdx.x % 32);
    const uint32_t b_lane = b_tile + (lane % 16) * kPitch + (lane / 16) * 16;
#pragma unroll
    for (int kk = 0; kk < kDepth / 16; ++kk)
#pragma unroll
      for (int nt2 = 0; nt2 < kN / 16; ++nt2) {
        uint32_t bb[4];
        tc_kernel::ldmatrix_x4_trans(bb, b_lane + kk * 16 * kPitch + nt2 * 32);
        Ops::mma(acc[2 * nt2], a[kk], bb[0], bb[1]);
        Ops::mma(acc[2 * nt2 + 1], a[kk], bb[2], bb[3]);
      }
  }

  // C fragments (16 by kN) as A fragments of the next product, rounded to the dtype: the k index is C's column.
  template <int kN>
  __device__ static void to_a(uint32_t (&a)[kN / 16][4], const float (&c)[kN / 8][4]) {
#pragma unroll
    for (int kk = 0; kk < kN / 16; ++kk) {
      a[kk][0] = Ops::pack(c[2 * kk][0], c[2 * kk][1]);
      a[kk][1] = Ops::pack(c[2 * kk][2], c[2 * kk][3]);
      a[kk][2] = Ops::pack(c[2 * kk + 1][0], c[2 * kk + 1][1]);
      a[kk][3] = Ops::pack(c[2 * kk + 1][2], c[2 * kk + 1][3]);
    }
  }

  // The C-fragment element e of n8 tile nt: row lane / 4 (+ 8 for e >= 2), column nt * 8 + 2 (lane % 4) + e % 2.
  __device__ static int frag_row(int e) { return static_cast<int>(threadIdx.x % 32) / 4 + 8 * (e / 2); }
  __device__ static int frag_col(int nt, int e) { return nt * 8 + 2 * (static_cast<int>(threadIdx.x % 32) % 4) + e % 2; }

  // K and V of the K/V tile at key k0 (its first `keys` keys) into s_k and s_v: the keys some row of the sequence sees
  // (rows_seeing of the key alone, marked in `seen`), zero rows for the others. Issues the copies, commits nothing.
  __device__ static void load_keys(const Args& a, const SequenceView& seq, int64_t b, int64_t h_kv, int64_t k0, int keys,
                                   uint32_t s_k, uint32_t s_v, unsigned char* seen) {
    for (int j = threadIdx.x; j < kTcKeys; j += kThreads) {
      bool s = false;
      if (j < keys) {
        const RowSpan one = rows_seeing(seq.vis, k0 + j, k0 + j + 1);
        s = one.begin < one.end || FC_MUTANT(kBwdHiddenKeysInDq);
      }
      seen[j] = s ? 1 : 0;
    }
    __syncthreads();
    const RowSource<const T> k = a.kv_rows<const T>(a.k, b, h_kv), v = a.kv_rows<const T>(a.v, b, h_kv);
    const auto live = [&](int j) { return seen[j] != 0; };
    load<kTcKeys>(s_k, static_cast<int>(a.head_dim), [&](int j) { return k.row(k0 + j); }, live);
    load<kTcKeys>(s_v, static_cast<int>(a.head_dim_v), [&](int j) { return v.row(k0 + j); }, live);
  }

  // P and dT of C-fragment element (key or row `r`, column `c` of the fragment) for row i, key j: arith.h's chain
  // where the pair is visible, 0 elsewhere. `s` and `dp` come in as the raw score and dP, go out as P and dT.
  __device__ static void pair(const Args& a, const SequenceView& seq, int64_t i, int64_t j, bool in_tile, float lse2,
                              float d, bool cap, float* s, float* dp) {
    float p = 0.0f, dt = 0.0f;
    if (in_tile && seq.vis.sees(i, j)) {
      const Score sc = score_log2(*s, a);
      p = weight(sc.x, lse2, exp2_f32);
      dt = score_grad(p, *dp, d, sc.t, cap);
    }
    *s = p;
    *dp = dt;
  }

  __device__ static void run(const Args& a) {
    extern __shared__ __align__(128) unsigned char tc_smem[];
    unsigned char* const smem = tc_smem;
    const int64_t k0 = static_cast<int64_t>(blockIdx.x) * kTcKeys, h_kv = blockIdx.y, b = blockIdx.z;
    const SequenceView seq = a.sequence(b);
    const int64_t capacity = a.key_capacity(b);
    if (k0 >= capacity) return;
    const int slots = static_cast<int>(capacity - k0 < kTcKeys ? capacity - k0 : kTcKeys);
    const int64_t left = seq.seqlen_k - k0;
    const int keys = static_cast<int>(left < 0 ? 0 : (left > kTcKeys ? kTcKeys : left));
    const int warp = static_cast<int>(threadIdx.x / 32);
    const int key_group = warp % kTcKeyGroups, col0 = (warp / kTcKeyGroups) * kAccCols;  // keys and dK/dV columns
    const uint32_t base = tc_kernel::smem_address(smem);
    const uint32_t s_k = base + Tiles::kK, s_v = base + Tiles::kV, s_q = base + Tiles::kQ, s_do = base + Tiles::kDo;
    const uint32_t s_ds = base + Tiles::kDs;
    T* ds = reinterpret_cast<T*>(smem + Tiles::kDs);
    float* lse2 = reinterpret_cast<float*>(smem + Tiles::kLse2);
    float* dvec = reinterpret_cast<float*>(smem + Tiles::kD);
    unsigned char* seen = smem + Tiles::kSeen;
    const int dim = static_cast<int>(a.head_dim), dim_v = static_cast<int>(a.head_dim_v);

    load_keys(a, seq, b, h_kv, k0, keys, s_k, s_v, seen);
    tc_kernel::cp_async_commit();  // waited for with the first rows' copies, or at the end

    float acc_k[kAccCols / 8][4], acc_v[kAccCols / 8][4];
#pragma unroll
    for (int nt = 0; nt < kAccCols / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc_k[nt][e] = acc_v[nt][e] = 0.0f;

    const RowSpan span = keys > 0 ? rows_seeing(seq.vis, k0, k0 + keys) : RowSpan{};
    const int64_t heads = FC_MUTANT(kBwdGqaGroupShort) && a.group_size > 1 ? a.group_size - 1 : a.group_size;
    const bool cap = a.has_softcap && !FC_MUTANT(kBwdSoftcapDerivativeDropped);
    for (int64_t g = 0; g < heads; ++g) {
      const int64_t h = h_kv * a.group_size + g;
      const T* q_head = a.q_rows<const T>(a.q, b, h);
      const T* do_head = a.q_rows<const T>(a.d_o, b, h);
      const int64_t rb = a.row_block(b, h);
      for (int64_t i0 = span.begin; i0 < span.end; i0 += kRows) {
        const int rows = static_cast<int>(span.end - i0 < kRows ? span.end - i0 : kRows);
        __syncthreads();  // the previous block's Q, dO and dT are consumed
        const auto live = [&](int r) { return r < rows; };
        load<kRows>(s_q, dim, [&](int r) { return q_head + (i0 + r) * a.q.stride.row; }, live);
        load<kRows>(s_do, dim_v, [&](int r) { return do_head + (i0 + r) * a.d_o.stride.row; }, live);
        tc_kernel::cp_async_commit();
        for (int r = threadIdx.x; r < kRows; r += kThreads) {
          const int64_t lse_r = FC_MUTANT(kBwdLseWrongRow) && i0 + r + 1 < seq.seqlen_q ? r + 1 : r;
          lse2[r] = r < rows ? lse_log2(a.lse[rb + i0 + lse_r]) : 0.0f;
          dvec[r] = r < rows && !FC_MUTANT(kBwdDsWithoutD) ? a.d[rb + i0 + r] : 0.0f;
        }
        tc_kernel::cp_async_wait<0>();
        __syncthreads();

        // S^T and dP^T of the warp's 16 keys by the block's rows.
        float s[kRows / 8][4], dp[kRows / 8][4];
        gemm_nt<kRows, kDim>(s, s_k + key_group * 16 * kPitch, kPitch, s_q);
        gemm_nt<kRows, kDim>(dp, s_v + key_group * 16 * kPitch, kPitch, s_do);
#pragma unroll
        for (int nt = 0; nt < kRows / 8; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int j = key_group * 16 + frag_row(e), r = frag_col(nt, e);
            pair(a, seq, i0 + r, k0 + j, r < rows && j < keys, lse2[r], dvec[r], cap, &s[nt][e], &dp[nt][e]);
            if (col0 == 0) ds[r * (Tiles::kDsPitch / 2) + j] = DeviceDtype<T>::store(dp[nt][e]);
          }
        uint32_t pa[kRows / 16][4], ta[kRows / 16][4];
        to_a<kRows>(pa, s);
        to_a<kRows>(ta, dp);
        gemm_rn<kAccCols, kRows>(acc_v, pa, s_do + col0 * 2);
        gemm_rn<kAccCols, kRows>(acc_k, ta, s_q + col0 * 2);
        __syncthreads();  // dT is in shared memory

        if (a.deterministic) continue;  // TcQueryTile computes dQ
        // dQ's partial over the tile's keys: rows of m16 tile warp % kRowGroups, kDqCols columns from
        // (warp / kRowGroups) * kDqCols.
        const int rg = warp % Tiles::kRowGroups, c0 = (warp / Tiles::kRowGroups) * Tiles::kDqCols;
        float dq[Tiles::kDqCols / 8][4];
        {
          const int lane = static_cast<int>(threadIdx.x % 32);
#pragma unroll
          for (int nt = 0; nt < Tiles::kDqCols / 8; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) dq[nt][e] = 0.0f;
          const uint32_t a_lane = s_ds + (rg * 16 + lane % 16) * Tiles::kDsPitch + (lane / 16) * 16;
          const uint32_t b_lane = s_k + (lane % 16) * kPitch + (lane / 16) * 16 + c0 * 2;
#pragma unroll
          for (int kk = 0; kk < kTcKeys / 16; ++kk) {
            uint32_t at[4];
            tc_kernel::ldmatrix_x4(at, a_lane + kk * 32);
#pragma unroll
            for (int nt2 = 0; nt2 < Tiles::kDqCols / 16; ++nt2) {
              uint32_t bb[4];
              tc_kernel::ldmatrix_x4_trans(bb, b_lane + kk * 16 * kPitch + nt2 * 32);
              Ops::mma(dq[2 * nt2], at, bb[0], bb[1]);
              Ops::mma(dq[2 * nt2 + 1], at, bb[2], bb[3]);
            }
          }
        }
#pragma unroll
        for (int nt = 0; nt < Tiles::kDqCols / 8; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int r = rg * 16 + frag_row(e), c = c0 + frag_col(nt, e);
            if (r >= rows || c >= dim) continue;
            const int64_t i = i0 + r;
            // The mutant skips the last of several K/V tiles the row sees.
            const bool skipped = FC_MUTANT(kBwdDqMissingTile) &&
                                 k0 == (seq.vis.row_end(i) - 1) / kTcKeys * kTcKeys &&
                                 k0 > seq.vis.row_begin(i) / kTcKeys * kTcKeys;
            if (!skipped) atomicAdd(a.dq_acc + (rb + i) * a.head_dim + c, dq[nt][e]);
          }
      }
    }

    tc_kernel::cp_async_wait<0>();  // a tile no row sees still had its K and V copied

    // dK and dV of every key slot of the tile (0 past the sequence's keys).
    const RowSource<T> dk = a.kv_rows<T>(a.dk, b, h_kv), dv = a.kv_rows<T>(a.dv, b, h_kv);
    const int written = FC_MUTANT(kBwdPaddedTailNotZeroed) ? keys : slots;
    const float dk_scale = FC_MUTANT(kBwdDkScaleMissing) ? 1.0f : a.softmax_scale;
#pragma unroll
    for (int nt = 0; nt < kAccCols / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int j = key_group * 16 + frag_row(e), c = col0 + frag_col(nt, e);
        if (j >= written) continue;
        if (c < dim) dk.row(k0 + j)[c] = DeviceDtype<T>::store(mul_rn(acc_k[nt][e], dk_scale));
        if (c < dim_v) dv.row(k0 + j)[c] = DeviceDtype<T>::store(acc_v[nt][e]);
      }
  }
};

template <typename T, int kDim>
__global__ void __launch_bounds__(TcTiles<kDim>::kThreads) tc_key_tile_kernel(Args a) {
  TcKeyTile<T, kDim>::run(a);
}

// The shared-memory tiles of the deterministic dQ kernel: its Q and dO rows, one K/V tile, the rows' LSE and D.
template <int kDim>
struct TcQueryTiles {
  static constexpr int kPitch = TcTiles<kDim>::kPitch;
  static constexpr int kQ = 0;
  static constexpr int kDo = kQ + kTcQRows * kPitch;
  static constexpr int kK = kDo + kTcQRows * kPitch;
  static constexpr int kV = kK + kTcKeys * kPitch;
  static constexpr int kLse2 = kV + kTcKeys * kPitch;
  static constexpr int kD = kLse2 + kTcQRows * 4;
  static constexpr int kSeen = kD + kTcQRows * 4;
  static constexpr int kBytes = kSeen + kTcKeys;
};

template <typename T, int kDim>
struct TcQueryTile {
  using K = TcKeyTile<T, kDim>;
  using Tiles = TcQueryTiles<kDim>;
  static constexpr int kPitch = Tiles::kPitch;
  static constexpr int kAccCols = TcTiles<kDim>::kAccCols;

  __device__ static void run(const Args& a) {
    extern __shared__ __align__(128) unsigned char tc_smem[];
    unsigned char* const smem = tc_smem;
    const int64_t i0 = static_cast<int64_t>(blockIdx.x) * kTcQRows, h = blockIdx.y, b = blockIdx.z;
    const SequenceView seq = a.sequence(b);
    if (i0 >= seq.seqlen_q) return;
    const int rows = static_cast<int>(seq.seqlen_q - i0 < kTcQRows ? seq.seqlen_q - i0 : kTcQRows);
    const int warp = static_cast<int>(threadIdx.x / 32);
    const int row_group = warp % kTcKeyGroups, col0 = (warp / kTcKeyGroups) * kAccCols;  // rows and dQ columns
    const uint32_t base = tc_kernel::smem_address(smem);
    const uint32_t s_q = base + Tiles::kQ, s_do = base + Tiles::kDo, s_k = base + Tiles::kK, s_v = base + Tiles::kV;
    float* lse2 = reinterpret_cast<float*>(smem + Tiles::kLse2);
    float* dvec = reinterpret_cast<float*>(smem + Tiles::kD);
    unsigned char* seen = smem + Tiles::kSeen;
    const int64_t h_kv = h / a.group_size, rb = a.row_block(b, h);
    const auto live = [&](int r) { return r < rows; };
    const T* q_head = a.q_rows<const T>(a.q, b, h);
    const T* do_head = a.q_rows<const T>(a.d_o, b, h);
    K::template load<kTcQRows>(s_q, static_cast<int>(a.head_dim), [&](int r) { return q_head + (i0 + r) * a.q.stride.row; }, live);
    K::template load<kTcQRows>(s_do, static_cast<int>(a.head_dim_v), [&](int r) { return do_head + (i0 + r) * a.d_o.stride.row; },
                               live);
    tc_kernel::cp_async_commit();
    for (int r = threadIdx.x; r < kTcQRows; r += K::kThreads) {
      lse2[r] = r < rows ? lse_log2(a.lse[rb + i0 + r]) : 0.0f;
      dvec[r] = r < rows ? a.d[rb + i0 + r] : 0.0f;
    }
    float acc[kAccCols / 8][4];
#pragma unroll
    for (int nt = 0; nt < kAccCols / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[nt][e] = 0.0f;
    const int64_t keys_begin = seq.vis.row_begin(i0), keys_end = seq.vis.row_end(i0 + rows - 1);
    const int64_t first = keys_begin / kTcKeys, end = keys_end > keys_begin ? ceil_div(keys_end, int64_t{kTcKeys}) : first;
    for (int64_t tile = first; tile < end; ++tile) {
      const int64_t k0 = tile * kTcKeys;
      const int64_t left = seq.seqlen_k - k0;
      const int keys = static_cast<int>(left < 0 ? 0 : (left > kTcKeys ? kTcKeys : left));
      __syncthreads();  // the previous tile is consumed (and, first, lse2 and D are written)
      K::load_keys(a, seq, b, h_kv, k0, keys, s_k, s_v, seen);
      tc_kernel::cp_async_commit();
      tc_kernel::cp_async_wait<0>();
      __syncthreads();
      float s[kTcKeys / 8][4], dp[kTcKeys / 8][4];
      K::template gemm_nt<kTcKeys, kDim>(s, s_q + row_group * 16 * kPitch, kPitch, s_k);
      K::template gemm_nt<kTcKeys, kDim>(dp, s_do + row_group * 16 * kPitch, kPitch, s_v);
#pragma unroll
      for (int nt = 0; nt < kTcKeys / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = row_group * 16 + K::frag_row(e), j = K::frag_col(nt, e);
          K::pair(a, seq, i0 + r, k0 + j, r < rows && j < keys, lse2[r], dvec[r], a.has_softcap, &s[nt][e], &dp[nt][e]);
        }
      uint32_t ta[kTcKeys / 16][4];
      K::template to_a<kTcKeys>(ta, dp);
      K::template gemm_rn<kAccCols, kTcKeys>(acc, ta, s_k + col0 * 2);
    }
    tc_kernel::cp_async_wait<0>();  // a tile that sees no key still had its Q and dO copied
    T* dq = a.q_rows<T>(a.dq, b, h);
#pragma unroll
    for (int nt = 0; nt < kAccCols / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = row_group * 16 + K::frag_row(e), c = col0 + K::frag_col(nt, e);
        if (r < rows && c < a.head_dim) dq[(i0 + r) * a.dq.stride.row + c] = DeviceDtype<T>::store(mul_rn(acc[nt][e], a.softmax_scale));
      }
  }
};

template <typename T, int kDim>
__global__ void __launch_bounds__(TcTiles<kDim>::kThreads) tc_query_tile_kernel(Args a) {
  TcQueryTile<T, kDim>::run(a);
}

}  // namespace flashcheck::detail::backward
