// The split-TF32 FlashAttention forward kernel for fp32 inputs: Q K^T and P V on tf32 tensor cores
// (mma.sync m16n8k8), each fp32 operand split x = hi + lo (hi = tf32(x) ties away, lo = tf32(x - hi) toward
// zero) and each product taken as hi*hi' + hi*lo' + lo*hi'; the tensor core sums two k8 steps from zero,
// fp32 RN adds carry the running sums. Online softmax in fp32 with exp2 and scale*log2(e) folded in;
// O = acc / l rounded once; LSE in natural log. Tiles holding non-finite or tf32-overflowing inputs take
// an exact fp32 CUDA-core path for the affected scores / P V update (docs/error-model.md has the error budget).

#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "common/args.h"
#include "common/epilogue.h"
#include "common/mutants.cuh"
#include "common/softmax.h"
#include "families.h"
#include "split_tf32/tiles.h"

namespace flashcheck::detail {
inline namespace FLASHCHECK_KERNEL_VARIANT {
namespace split_tf32 {
using namespace ::flashcheck::detail::split_tf32_tiles;  // tiles.h: configs and fragment constants (host-visible)

inline constexpr bool kInstrument = FLASHCHECK_INSTRUMENT;
inline constexpr unsigned kFullWarpMask = 0xffffffffu;
inline constexpr int kQuadLanes = 4;  // lanes sharing one row of an mma fragment
// Magnitudes at or above (2 - 2^-11) * 2^127 round to inf in tf32 (round to nearest even): hi would be inf
// and lo = x - hi = -inf, so hi*k + lo*k = NaN for a finite x. Such inputs, inf and NaN take the exact path.
inline constexpr float kTf32Overflow = 0x1.ffep+127f;

struct NoInstrumentation {};

// Kernel arguments: the common block plus the instrumentation of instrumented builds.
template <bool kInst>
struct SplitTf32Args : ProblemArgs {
  std::conditional_t<kInst, Instrumentation, NoInstrumentation> inst;
};

// x = hi + lo with hi = tf32(x) rounded to nearest, ties away (the bit pattern of cvt.rna.tf32.f32, as two
// integer ops: cvt.*.tf32 is an F2FP on sm_90, a conversion-pipe instruction at a quarter of the integer
// rate, and two per element made it the kernel's bottleneck). lo = x - hi is exact and keeps up to 13
// significant bits; the tensor core reads only a register's top 19 bits of a tf32 operand, so lo enters
// the product truncated to tf32 (round toward zero): |x - hi - tf32(lo)| < 2^-21 |x|. For non-finite x or
// |x| >= kTf32Overflow the pair is useless (inf - inf); callers route those tiles to the exact path.
struct Tf32Split {
  uint32_t hi, lo;
};
inline constexpr uint32_t kTf32HalfUlp = 0x1000u;      // bit 12: the highest bit tf32 drops
inline constexpr uint32_t kTf32KeepMask = 0xffffe000u;  // sign, exponent and the 10 mantissa bits tf32 keeps
__device__ __forceinline__ Tf32Split split_tf32(float x) {
  const uint32_t hi = (__float_as_uint(x) + kTf32HalfUlp) & kTf32KeepMask;
  return {hi, __float_as_uint(__fsub_rn(x, __uint_as_float(hi)))};
}

// d += a * b on tf32 tensor cores. a: (16, 8) row-major fragment, b: (8, 8) column fragment, d: (16, 8) fp32.
__device__ __forceinline__ void mma_tf32(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Returns (a_hi + a_lo)(b_hi + b_lo) - a_lo b_lo over two k8 steps, from a fresh accumulator. The tensor core
// truncates (rounds toward zero) every mma's fp32 result, so a long chain through one accumulator shrinks
// the running sum by ~2^-25 per link: chaining a whole row of P V (3 N / 8 links) cost 3e-5 relative error
// at N = 4096. Here the chain restarts at zero every two k8 steps and the caller adds the result with an
// RN fp32 add. Inside the chain the small terms go first, while the partial is tiny, so only the two big
// products truncate at full size: a ~4.5e-8 relative shrink per chain.
// Fragment element order of a: rows g, g+8 at k-slot t, then rows g, g+8 at k-slot t+4.
__device__ __forceinline__ void mma_split_2steps(float (&part)[4], const Tf32Split (&a0)[4],
                                                 const Tf32Split (&b0)[2], const Tf32Split (&a1)[4],
                                                 const Tf32Split (&b1)[2]) {
#pragma unroll
  for (int e = 0; e < 4; ++e) part[e] = 0.0f;
  mma_tf32(part, a0[0].lo, a0[1].lo, a0[2].lo, a0[3].lo, b0[0].hi, b0[1].hi);
  mma_tf32(part, a0[0].hi, a0[1].hi, a0[2].hi, a0[3].hi, b0[0].lo, b0[1].lo);
  mma_tf32(part, a1[0].lo, a1[1].lo, a1[2].lo, a1[3].lo, b1[0].hi, b1[1].hi);
  mma_tf32(part, a1[0].hi, a1[1].hi, a1[2].hi, a1[3].hi, b1[0].lo, b1[1].lo);
  mma_tf32(part, a0[0].hi, a0[1].hi, a0[2].hi, a0[3].hi, b0[0].hi, b0[1].hi);
  mma_tf32(part, a1[0].hi, a1[1].hi, a1[2].hi, a1[3].hi, b1[0].hi, b1[1].hi);
}

// max that propagates NaN (fmaxf drops it): the tile scans must see NaN inputs.
__device__ __forceinline__ float max_nan(float a, float b) {
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}

__device__ __forceinline__ float float4_lane(const float4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

__device__ __forceinline__ void cp_async_16(float* dst_smem, const float* src_gmem, int src_bytes) {
  const uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(dst_smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src_gmem), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

// Starts copying rows [row0, row0 + kRows) of a (seqlen, head_dim) slice into a (kRows, kRowStride) smem
// tile, 16-byte chunks. Rows at or past rows_end and dims past head_dim are zero-filled by the copy itself
// (src-size 0 or short), so padded dims add nothing to dot products and keys no row of the tile sees are
// never read from global memory.
template <typename Cfg, int kRows, int kRowStride>
__device__ __forceinline__ void load_tile_async(float* tile_smem, const float* base, int64_t row_stride,
                                                int64_t row0, int64_t rows_end, int64_t head_dim) {
  constexpr int kChunks = kRows * Cfg::kChunksPerRow;
#pragma unroll
  for (int i = 0; i < kChunks / Cfg::kThreads; ++i) {
    const int chunk = threadIdx.x + i * Cfg::kThreads;
    const int r = chunk / Cfg::kChunksPerRow;
    const int d = (chunk % Cfg::kChunksPerRow) * kFloat4Lanes;
    const int64_t row = row0 + r;
    const float* src = base;
    int bytes = 0;
    if (row < rows_end && d < head_dim) {
      src = base + row * row_stride + d;
      bytes = static_cast<int>(min(int64_t{kFloat4Lanes}, head_dim - d)) * static_cast<int>(sizeof(float));
    }
    cp_async_16(tile_smem + r * kRowStride + d, src, bytes);
  }
}

// Largest magnitude (NaN if any) among the chunks this thread copied with load_tile_async, read back after
// cp_async_wait_all() (a thread's completed copies are visible to itself without a barrier).
template <typename Cfg, int kRows, int kRowStride>
__device__ __forceinline__ float scan_own_chunks(const float* tile_smem, float running) {
  constexpr int kChunks = kRows * Cfg::kChunksPerRow;
#pragma unroll
  for (int i = 0; i < kChunks / Cfg::kThreads; ++i) {
    const int chunk = threadIdx.x + i * Cfg::kThreads;
    const int r = chunk / Cfg::kChunksPerRow;
    const int d = (chunk % Cfg::kChunksPerRow) * kFloat4Lanes;
    const float4 x = *reinterpret_cast<const float4*>(tile_smem + r * kRowStride + d);
    running = max_nan(max_nan(running, fabsf(x.x)), max_nan(fabsf(x.y), max_nan(fabsf(x.z), fabsf(x.w))));
  }
  return running;
}

// One K/V tile of the online softmax for a lane's two rows (half 0: row g, half 1: row g + 8 of an m16 tile),
// shared by both split-TF32 kernels. s holds the tile's scores in the mma accumulator layout (n8 tile j:
// elements (g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1)) and leaves holding p. The scale is folded into the
// exponent base: x = s * (scale * log2 e) (with a softcap, capped_score_log2), p = exp2(x - m); __fmul_rn keeps
// x a rounded product so the row maximum gives p = 1 exactly. Invisible keys (only checked when the tile is
// masked: outside [keys_begin, keys_end) of the row) get x = -inf: weight 0,
// and p = 0 exactly, so all three split products of a hidden key are 0. m is the running max (quad-uniform),
// l_part this lane's share of the running sum; alpha = exp2(m_old - m_new) for the caller's O rescale.
template <bool kInst, bool kExtras, int kSTiles>
__device__ __forceinline__ void online_softmax_tile(float (&s)[kSTiles][4], float (&m)[2], float (&l_part)[2],
                                                    int64_t (&moves)[2], float (&alpha)[2], int64_t k0,
                                                    bool tile_masked, const int64_t (&keys_begin)[2],
                                                    const int64_t (&keys_end)[2], int t, const ProblemArgs& a) {
  // A row's keys relative to this lane's first column, k0 + 2t, as 32-bit [lo, lo + width): column c of the tile
  // is visible iff unsigned(c - lo) < width (every key on an unmasked tile).
  constexpr int64_t kSpan = int64_t{kSTiles} * kMmaN;
  int lo[2];
  unsigned width[2];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const auto rel = [&](int64_t key) { return static_cast<int>(max(min(key - k0 - 2 * t, kSpan), int64_t{-1})); };
    lo[half] = tile_masked ? rel(keys_begin[half]) : 0;
    width[half] = tile_masked ? static_cast<unsigned>(max(rel(keys_end[half]), lo[half]) - lo[half]) : ~0u;
  }
  float tile_max[2] = {kNegInf, kNegInf};
#pragma unroll
  for (int j = 0; j < kSTiles; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int half = e / 2;
      const int column = j * kMmaN + e % 2;
      const float scaled =
          kExtras && a.has_softcap ? capped_score_log2(s[j][e], a.softcap) : mul_rn(s[j][e], a.scale_log2);
      s[j][e] = static_cast<unsigned>(column - lo[half]) < width[half] ? scaled : kNegInf;
      tile_max[half] = fmaxf(tile_max[half], s[j][e]);
    }
  }
#pragma unroll
  for (int half = 0; half < 2; ++half) {
#pragma unroll
    for (int offset = 1; offset < kQuadLanes; offset *= 2) {
      tile_max[half] = fmaxf(tile_max[half], __shfl_xor_sync(kFullWarpMask, tile_max[half], offset));
    }
  }
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const MaxStep step = running_max_step(m[half], tile_max[half], [](float e) { return exp2f(e); });
    alpha[half] = step.alpha;
    if constexpr (kInst) moves[half] += step.m != m[half] ? 1 : 0;
    m[half] = step.m;
    float p_sum = 0.0f;
#pragma unroll
    for (int j = 0; j < kSTiles; ++j) {
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const float p = exp2f(s[j][2 * half + c] - step.origin);
        s[j][2 * half + c] = p;
        p_sum += p;
      }
    }
    l_part[half] = fmaf(l_part[half], alpha[half], p_sum);
  }
}

// A lane's two rows' l: the quad's four shares of the running sum added up.
__device__ __forceinline__ void quad_row_sums(const float (&l_part)[2], float (&l)[2]) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    l[half] = l_part[half];
#pragma unroll
    for (int offset = 1; offset < kQuadLanes; offset *= 2) l[half] += __shfl_xor_sync(kFullWarpMask, l[half], offset);
  }
}

// Instrumented builds: the (m, l) of a lane's two rows after K/V tile n, for the rows that are traced.
template <bool kInst>
__device__ __forceinline__ void trace_rows(const SplitTf32Args<kInst>& a, const int (&slot)[2], const float (&m)[2],
                                           const float (&l_part)[2], int64_t n, int t) {
  if constexpr (kInst) {
    float l[2];
    quad_row_sums(l_part, l);
    if (t == 0) {
      for (int half = 0; half < 2; ++half) record_trace(a.inst, slot[half], n, mul_rn(m[half], kLn2), l[half]);
    }
  }
}

// Epilogue of a lane's two rows of (b, h): O = alpha * acc / l rounded once, through put_o(half, RowFinal) (the
// layout of O's accumulator is each kernel's own), and LSE = m ln 2 + ln l, with the sink merged in
// (common/epilogue.h, finish_row).
template <bool kInst, bool kExtras, class PutO>
__device__ __forceinline__ void finish_rows(const SplitTf32Args<kInst>& a, int64_t b, int64_t h, const int64_t (&row)[2],
                                            const float (&m)[2], const float (&l_part)[2], const int64_t (&moves)[2],
                                            int t, PutO&& put_o) {
  float l[2];
  quad_row_sums(l_part, l);
  const int64_t lse_block = a.row_block(b, h);
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    if (row[half] >= a.seqlen_q) continue;
    const RowFinal fin = finish_row(m[half], mul_rn(m[half], kLn2), l[half], kExtras ? a.sink : nullptr, h,
                                    [](float e) { return exp2f(e); });
    put_o(half, fin);
    if (t == 0) {
      a.lse[lse_block + row[half]] = row_lse(fin.m_natural, fin.l);
      if constexpr (kInst) record_row(a.inst, lse_block + row[half], fin.m_natural, fin.l, moves[half]);
    }
  }
}

// kExtras: softcap and sink compiled in (launches with either take this variant), as in the tensor-core family.
template <typename Cfg, bool kExtras, bool kInst>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocksPerSm)
    split_tf32_forward_kernel(const __grid_constant__ SplitTf32Args<kInst> args) {
  constexpr int kSTiles = Cfg::kSTiles;
  constexpr int kPvLoads = Cfg::kPvLoads;
  constexpr int kQkStride = Cfg::kQkRowStride;
  constexpr int kVStride = Cfg::kVRowStride;

  extern __shared__ float4 smem_float4[];  // float4 so the dynamic smem base is 16-byte aligned
  float* q_smem = reinterpret_cast<float*>(smem_float4);  // (kBlockM, kQkRowStride)
  float* k_smem = q_smem + Cfg::kQSmemFloats;               // (kBlockN, kQkRowStride)
  float* v_smem = k_smem + Cfg::kKSmemFloats;               // (kBlockN, kVRowStride)

  const int warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int g = lane / kQuadLanes;  // fragment row group: rows g and g + 8 of the warp's m16 tile
  const int t = lane % kQuadLanes;  // position in the quad: k-slots t and t + 4, S columns 2t and 2t + 1
  const int quad_base = lane - t;
  const float* q_warp = q_smem + warp * Cfg::kRowsPerWarp * kQkStride;  // (kRowsPerWarp, kQkRowStride)

  for (int64_t work = blockIdx.x; work < args.work_items; work += gridDim.x) {
    // Q tiles vary fastest, last tile first: blocks running together share one head's K/V in L2, and under
    // a causal mask the longest Q tiles start first.
    const int64_t q_tile = args.q_tiles - 1 - work % args.q_tiles;
    const int64_t head_batch = work / args.q_tiles;
    const int64_t h = head_batch % args.heads_q;
    const int64_t b = head_batch / args.heads_q;
    const int64_t h_kv = h / args.group_size;
    const int64_t m0 = q_tile * Cfg::kBlockM;
    const int64_t rows_end = min(m0 + Cfg::kBlockM, args.seqlen_q);
    const Visibility& vis = args.vis;
    const Visibility::TileRange tiles = vis.tile_range(m0, rows_end - m0, Cfg::kBlockN);
    const int64_t block_keys = vis.row_end(rows_end - 1);

    // This lane's two rows (half 0: row g, half 1: row g + 8); rows past seqlen_q see no key, are not written.
    int64_t row[2], keys_begin[2], keys_end[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      row[half] = m0 + warp * Cfg::kRowsPerWarp + g + half * (kMmaM / 2);
      keys_begin[half] = row[half] < args.seqlen_q ? vis.row_begin(row[half]) : 0;
      keys_end[half] = row[half] < args.seqlen_q ? vis.row_end(row[half]) : 0;
    }

    // Online softmax state in log2 units: m = running max of scale*log2(e)*score (quad-uniform), l_part =
    // this lane's share of sum exp2(x - m) (the quad's four shares are added at the end).
    float m[2] = {kNegInf, kNegInf};
    float l_part[2] = {0.0f, 0.0f};
    // (kPvLoads, 4, 4): acc[q][i] is output n8 tile (q, i); element e is row g + 8 (e / 2), head dim
    // kPvDimsPerLoad q + 8t + 4 (e % 2) + i (the column order P V's float4 V loads produce).
    float acc[kPvLoads][kFloat4Lanes][4];
#pragma unroll
    for (int q = 0; q < kPvLoads; ++q) {
#pragma unroll
      for (int i = 0; i < kFloat4Lanes; ++i) {
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[q][i][e] = 0.0f;
      }
    }
    [[maybe_unused]] int64_t moves[2] = {0, 0};  // instrumentation: how often each row's running max changed
    [[maybe_unused]] int trace_slot[2] = {-1, -1};
    if constexpr (kInst) {
      for (int half = 0; half < 2; ++half) {
        if (row[half] < args.seqlen_q) trace_slot[half] = ::flashcheck::detail::trace_slot(args.inst, args.row_block(b, h) + row[half]);
      }
      if (threadIdx.x == 0) {
        count_tile_kinds(args.inst, vis, m0, Cfg::kBlockM, Cfg::kBlockN, tiles.first, tiles.first + tiles.count);
      }
    }

    const float* k_head = args.k.template head<const float>(b, h_kv);
    const float* v_head = args.v.template head<const float>(b, h_kv);
    __syncthreads();  // the previous work item is done with the smem tiles
    bool q_exact = false;
    if (tiles.count > 0) {  // with no visible key nothing is read (Q, K, V may be null when seqlen_k == 0)
      const float* q_head = args.q.template head<const float>(b, h);
      load_tile_async<Cfg, Cfg::kBlockM, kQkStride>(q_smem, q_head, args.q.stride.row, m0, rows_end, args.head_dim);
      load_tile_async<Cfg, Cfg::kBlockN, kQkStride>(k_smem, k_head, args.k.stride.row, tiles.first * Cfg::kBlockN,
                                                      block_keys, args.head_dim);
      cp_async_commit();
      cp_async_wait_all();
      q_exact = __syncthreads_or(!(scan_own_chunks<Cfg, Cfg::kBlockM, kQkStride>(q_smem, 0.0f) < kTf32Overflow));
    }

    for (int64_t kt = 0; kt < tiles.count; ++kt) {
      const int64_t k0 = (tiles.first + kt) * Cfg::kBlockN;
      // K(kt) has landed; the barrier also tells every warp is done with V(kt - 1), which V(kt) overwrites.
      cp_async_wait_all();
      const bool k_exact =
          __syncthreads_or(!(scan_own_chunks<Cfg, Cfg::kBlockN, kQkStride>(k_smem, 0.0f) < kTf32Overflow));
      load_tile_async<Cfg, Cfg::kBlockN, kVStride>(v_smem, v_head, args.v.stride.row, k0, block_keys, args.head_dim);
      cp_async_commit();

      // S = Q K^T, (16, kBlockN) per warp: s[j] is n8 tile j, elements (g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1).
      float s[kSTiles][4];
#pragma unroll
      for (int j = 0; j < kSTiles; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) s[j][e] = 0.0f;
      }
#pragma unroll 2
      for (int dl = 0; dl < Cfg::kQkLoads; ++dl) {
        const int d = dl * kQkDimsPerLoad + t * kFloat4Lanes;
        const float4 q_lo = *reinterpret_cast<const float4*>(q_warp + g * kQkStride + d);
        const float4 q_hi = *reinterpret_cast<const float4*>(q_warp + (g + kMmaM / 2) * kQkStride + d);
        Tf32Split qa[2][4];  // per k8 step: rows g, g+8 at dim slot 2*step, then at dim slot 2*step + 1
#pragma unroll
        for (int step = 0; step < 2; ++step) {
          qa[step][0] = split_tf32(float4_lane(q_lo, 2 * step));
          qa[step][1] = split_tf32(float4_lane(q_hi, 2 * step));
          qa[step][2] = split_tf32(float4_lane(q_lo, 2 * step + 1));
          qa[step][3] = split_tf32(float4_lane(q_hi, 2 * step + 1));
        }
#pragma unroll
        for (int j = 0; j < kSTiles; ++j) {
          const float4 kv = *reinterpret_cast<const float4*>(k_smem + (j * kMmaN + g) * kQkStride + d);
          const Tf32Split kb0[2] = {split_tf32(kv.x), split_tf32(kv.y)};
          const Tf32Split kb1[2] = {split_tf32(kv.z), split_tf32(kv.w)};
          float part[4];
          mma_split_2steps(part, qa[0], kb0, qa[1], kb1);
#pragma unroll
          for (int e = 0; e < 4; ++e) s[j][e] = __fadd_rn(s[j][e], part[e]);
        }
      }

      // A score the split cannot represent (inf - inf from a non-finite or tf32-overflowing input) is NaN
      // here; recompute it as an fp32 FMA chain, the general family's rounding, so -inf scores keep zero
      // weight and only genuine NaN inputs give NaN. Block-uniform branch, taken only for such tiles.
      if ((q_exact || k_exact) && !FC_MUTANT(kTf32UnsplittableNotRecomputed)) {
#pragma unroll
        for (int j = 0; j < kSTiles; ++j) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            if (!isnan(s[j][e])) continue;
            const float* q_row = q_warp + (g + (e / 2) * (kMmaM / 2)) * kQkStride;
            const float* k_row = k_smem + (j * kMmaN + 2 * t + e % 2) * kQkStride;
            float dot = 0.0f;
            for (int d = 0; d < Cfg::kHeadDim; ++d) dot = fmaf(q_row[d], k_row[d], dot);
            s[j][e] = dot;
          }
        }
      }

      // Online softmax (online_softmax_tile), then O's rescale by alpha.
      float alpha[2];
      online_softmax_tile<kInst, kExtras>(s, m, l_part, moves, alpha, k0,
                                          tiles.needs_mask(kt) && !FC_MUTANT(kTf32TailUnmasked), keys_begin, keys_end,
                                          t, args);
#pragma unroll
      for (int q = 0; q < kPvLoads; ++q) {
#pragma unroll
        for (int i = 0; i < kFloat4Lanes; ++i) {
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[q][i][e] = __fmul_rn(acc[q][i][e], alpha[e / 2]);
        }
      }

      // V(kt) has landed; the barrier also tells every warp is done reading K(kt), which K(kt + 1) overwrites.
      cp_async_wait_all();
      const bool v_exact =
          __syncthreads_or(!(scan_own_chunks<Cfg, Cfg::kBlockN, kVStride>(v_smem, 0.0f) < kTf32Overflow));
      if (kt + 1 < tiles.count) {
        load_tile_async<Cfg, Cfg::kBlockN, kQkStride>(k_smem, k_head, args.k.stride.row, k0 + Cfg::kBlockN,
                                                        block_keys, args.head_dim);
        cp_async_commit();
      }

      // O += P V on tensor cores, two k8 steps per chain. k8 step j of P V is S tile j: with key k-slot
      // t <-> key 2t and slot t+4 <-> key 2t+1, the S accumulator is already the A fragment (no shuffles),
      // and lane (g, t) reads V rows 2t and 2t+1 of the step. B column g of output tile (q, i) is head dim
      // kPvDimsPerLoad q + 4g + i, so one float4 per V row feeds four output tiles. With kReadAsZero, V
      // entries the split cannot carry (inf, NaN, |v| >= kTf32Overflow) enter as 0.
      const auto pv_tensor_cores = [&](auto read_as_zero) {
        constexpr bool kReadAsZero = decltype(read_as_zero)::value;
        const auto split_v = [](float x) {
          if constexpr (kReadAsZero) {
            if (!(fabsf(x) < kTf32Overflow)) return Tf32Split{0u, 0u};
          }
          return split_tf32(x);
        };
#pragma unroll
        for (int j = 0; j < kSTiles; j += kStepsPerChain) {
          const Tf32Split pa0[4] = {split_tf32(s[j][0]), split_tf32(s[j][2]), split_tf32(s[j][1]),
                                    split_tf32(s[j][3])};
          const Tf32Split pa1[4] = {split_tf32(s[j + 1][0]), split_tf32(s[j + 1][2]), split_tf32(s[j + 1][1]),
                                    split_tf32(s[j + 1][3])};
          const float* v_rows = v_smem + (j * kMmaN + 2 * t) * kVStride + g * kFloat4Lanes;
#pragma unroll
          for (int q = 0; q < kPvLoads; ++q) {
            // (4 keys, 4 dims): keys 2t, 2t+1 of steps j and j+1; dims kPvDimsPerLoad q + 4g + (0..3).
            const float4 v_rows4[4] = {
                *reinterpret_cast<const float4*>(v_rows + q * kPvDimsPerLoad),
                *reinterpret_cast<const float4*>(v_rows + kVStride + q * kPvDimsPerLoad),
                *reinterpret_cast<const float4*>(v_rows + kMmaN * kVStride + q * kPvDimsPerLoad),
                *reinterpret_cast<const float4*>(v_rows + (kMmaN + 1) * kVStride + q * kPvDimsPerLoad)};
#pragma unroll
            for (int i = 0; i < kFloat4Lanes; ++i) {
              const Tf32Split vb0[2] = {split_v(float4_lane(v_rows4[0], i)),
                                        split_v(float4_lane(v_rows4[1], i))};
              const Tf32Split vb1[2] = {split_v(float4_lane(v_rows4[2], i)),
                                        split_v(float4_lane(v_rows4[3], i))};
              float part[4];
              mma_split_2steps(part, pa0, vb0, pa1, vb1);
#pragma unroll
              for (int e = 0; e < 4; ++e) acc[q][i][e] = __fadd_rn(acc[q][i][e], part[e]);
            }
          }
        }
      };

      if (!v_exact) {
        pv_tensor_cores(std::false_type{});
      } else {
        // V holds a value the split cannot carry. Rows that see such a key in this tile take fp32 FMAs on
        // CUDA cores, one key at a time, each (row, key) predicated on visibility so a hidden key's V never
        // reaches O (0 * inf would); the other rows stay on the tensor cores with those entries read as 0
        // (their p there is 0, as for any hidden key). A row's arithmetic so depends only on the keys it sees:
        // a causal row is bit-identical whatever its hidden keys hold. (Block-uniform branch, rare tiles.)
        __shared__ uint32_t bad_keys[(Cfg::kBlockN + 31) / 32];  // keys whose V row the split cannot carry
        if (threadIdx.x < (Cfg::kBlockN + 31) / 32) bad_keys[threadIdx.x] = 0u;
        __syncthreads();
        constexpr int kVChunks = Cfg::kBlockN * Cfg::kChunksPerRow;
#pragma unroll
        for (int c = 0; c < kVChunks / Cfg::kThreads; ++c) {
          const int chunk = threadIdx.x + c * Cfg::kThreads;
          const int r = chunk / Cfg::kChunksPerRow;
          const float4 x = *reinterpret_cast<const float4*>(v_smem + r * kVStride + (chunk % Cfg::kChunksPerRow) * kFloat4Lanes);
          if (!(fabsf(x.x) < kTf32Overflow) || !(fabsf(x.y) < kTf32Overflow) || !(fabsf(x.z) < kTf32Overflow) ||
              !(fabsf(x.w) < kTf32Overflow)) {
            atomicOr(&bad_keys[r / 32], 1u << (r % 32));
          }
        }
        __syncthreads();
        bool exact_row[2];
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          // Keys [lo, hi) of the tile are the row's.
          const int64_t lo = min(max(keys_begin[half] - k0, int64_t{0}), int64_t{Cfg::kBlockN});
          const int64_t hi = min(max(keys_end[half] - k0, int64_t{0}), int64_t{Cfg::kBlockN});
          bool any = false;
          for (int w = 0; w * 32 < hi; ++w) {
            const auto below = [](int64_t n) { return n >= 32 ? 0xffffffffu : n <= 0 ? 0u : (1u << n) - 1u; };
            const uint32_t mine = below(hi - w * 32) & ~below(lo - w * 32);
            any |= (bad_keys[w] & mine) != 0u;
          }
          exact_row[half] = any;
        }
#pragma unroll
        for (int j = 0; j < kSTiles; ++j) {
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            for (int u = 0; u < kQuadLanes; ++u) {
              const int key_in_tile = j * kMmaN + 2 * u + c;
              const float p_row[2] = {__shfl_sync(kFullWarpMask, s[j][c], quad_base + u),
                                      __shfl_sync(kFullWarpMask, s[j][2 + c], quad_base + u)};
              const float* v_row = v_smem + key_in_tile * kVStride + t * 2 * kFloat4Lanes;
#pragma unroll
              for (int q = 0; q < kPvLoads; ++q) {
                const float4 v_col[2] = {*reinterpret_cast<const float4*>(v_row + q * kPvDimsPerLoad),
                                         *reinterpret_cast<const float4*>(v_row + q * kPvDimsPerLoad + kFloat4Lanes)};
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                  const int half = e / 2;
                  const bool visible = exact_row[half] && k0 + key_in_tile >= keys_begin[half] &&
                                       k0 + key_in_tile < keys_end[half];
#pragma unroll
                  for (int i = 0; i < kFloat4Lanes; ++i) {
                    const float prod_acc = fmaf(p_row[half], float4_lane(v_col[e % 2], i), acc[q][i][e]);
                    acc[q][i][e] = visible ? prod_acc : acc[q][i][e];
                  }
                }
              }
            }
          }
        }
        // Those rows are done with this tile: zero weight on the tensor cores.
#pragma unroll
        for (int j = 0; j < kSTiles; ++j) {
#pragma unroll
          for (int e = 0; e < 4; ++e) s[j][e] = exact_row[e / 2] ? 0.0f : s[j][e];
        }
        pv_tensor_cores(std::true_type{});
      }

      trace_rows<kInst>(args, trace_slot, m, l_part, kt, t);
    }

    // Epilogue: head dims kPvDimsPerLoad q + 8t + 4c + (0..3) of a row are acc[q][0..3][2 half + c].
    float* o_head = args.o.template head<float>(b, h);
    finish_rows<kInst, kExtras>(args, b, h, row, m, l_part, moves, t, [&](int half, const RowFinal& fin) {
      float* o_row = o_head + row[half] * args.o.stride.row;
#pragma unroll
      for (int q = 0; q < kPvLoads; ++q) {
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const int d = q * kPvDimsPerLoad + t * 2 * kFloat4Lanes + c * kFloat4Lanes;
          float out[kFloat4Lanes];
#pragma unroll
          for (int i = 0; i < kFloat4Lanes; ++i) out[i] = final_output(acc[q][i][2 * half + c], fin);
          if (d + kFloat4Lanes <= args.head_dim) {
            *reinterpret_cast<float4*>(o_row + d) = make_float4(out[0], out[1], out[2], out[3]);
          } else {
#pragma unroll
            for (int i = 0; i < kFloat4Lanes; ++i) {
              if (d + i < args.head_dim) o_row[d + i] = out[i];
            }
          }
        }
      }
    });
  }
}

// Host side: the kernel arguments for Cfg's tiles (kInst is a template parameter so the production build
// discards the instrumentation assignment unchecked).
template <typename Cfg, bool kInst>
SplitTf32Args<kInst> make_split_tf32_args(const Params& params, const Instrumentation* inst) {
  SplitTf32Args<kInst> args{make_problem_args(params, Cfg::kBlockM)};
  if constexpr (kInst) {
    if (inst != nullptr) args.inst = *inst;
  }
  return args;
}

// Launches `kernel` with Cfg's threads and shared memory, one block per work item (capped by the grid limit).
template <typename Cfg, bool kInst>
Status launch_split_tf32_kernel(void (*kernel)(SplitTf32Args<kInst>), const Params& params, cudaStream_t stream,
                                const Instrumentation* inst) {
  FC_UPLOAD_MUTANT(stream);
  const SplitTf32Args<kInst> args = make_split_tf32_args<Cfg, kInst>(params, inst);
  // Per device and function; cheap enough to set on every launch, which keeps multi-device use correct.
  cudaError_t err =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(Cfg::kSmemBytes));
  if (err != cudaSuccess) {
    return {StatusCode::kCudaError,
            std::string("split_tf32: cudaFuncSetAttribute(max dynamic smem) failed: ") + cudaGetErrorString(err)};
  }
  const dim3 grid(static_cast<unsigned>(capped_grid(Cfg::grid_blocks(args.work_items))));
  kernel<<<grid, Cfg::kThreads, Cfg::kSmemBytes, stream>>>(args);
  err = cudaGetLastError();
  if (err != cudaSuccess) {
    return {StatusCode::kCudaError, std::string("split_tf32: kernel launch failed: ") + cudaGetErrorString(err)};
  }
  return Status::ok_status();
}

// Fills the arguments and launches Cfg's kernel. Preconditions as for split_tf32_launch().
// Whether a launch needs the kExtras variant (softcap or sink).
inline bool needs_extras(const Params& params) { return params.softcap > 0.0f || params.sink != nullptr; }

template <typename Cfg, bool kInst = kInstrument>
Status launch_split_tf32_config(const Params& params, cudaStream_t stream, const Instrumentation* inst) {
  if (needs_extras(params)) {
    return launch_split_tf32_kernel<Cfg, kInst>(split_tf32_forward_kernel<Cfg, true, kInst>, params, stream, inst);
  }
  return launch_split_tf32_kernel<Cfg, kInst>(split_tf32_forward_kernel<Cfg, false, kInst>, params, stream, inst);
}

// One head_dim family's translation unit defines its entry point (split_tf32_hd*.cu); launch.cu dispatches.
Status launch_split_tf32_hd32(const Params& params, cudaStream_t stream, const Instrumentation* inst);
Status launch_split_tf32_hd64(const Params& params, cudaStream_t stream, const Instrumentation* inst);
Status launch_split_tf32_hd128(const Params& params, cudaStream_t stream, const Instrumentation* inst);
Status launch_split_tf32_hd256(const Params& params, cudaStream_t stream, const Instrumentation* inst);

}  // namespace split_tf32
}  // namespace FLASHCHECK_KERNEL_VARIANT
}  // namespace flashcheck::detail
