// FlashAttention-2 style forward kernel on fp16/bf16 tensor cores (mma.sync m16n8k16, ldmatrix, cp.async ring).
// A CTA computes kBlockM query rows of one (batch, head) against every K/V tile those rows can see; O, the row
// max and the row sum stay in registers and P never leaves them. Rounding points are families.h's (tensor
// core): fp32 scores, p = exp2(fl(s*c) - fl(m*c)) in fp32, l summed from fp32 p, P rounded to T for P*V, fp32 O.
// Included only by the fwd_<dtype>_hdim<d>.cu instantiation units.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "common/epilogue.h"
#include "common/mutants.cuh"
#include "common/row_quotient.cuh"
#include "common/softmax.h"
#include "forward.h"
#include "ptx.cuh"
#include "schedule.h"
#include "tile_config.h"
#if defined(FLASHCHECK_TC_WGMMA)
#include "wgmma_ops.cuh"
#endif

namespace flashcheck::detail {
inline namespace FLASHCHECK_KERNEL_VARIANT {
namespace tc_kernel {

using namespace ::flashcheck::tensor_core;  // tile constants (host-visible, no linkage)

inline constexpr uint32_t kFullWarp = 0xFFFFFFFFu;
inline constexpr int kQuad = 4;  // lanes sharing one C-fragment row

// kExtras: the softcap and sink code is compiled in (launches with either take this variant); kSeq (with kExtras):
// the sequences' code too (per-item lengths, visibility and packed rows: Item), for launches with sequences. Without
// them the score, addressing and epilogue paths carry no trace of them, so plain launches keep their registers, and
// softcap and sink launches keep theirs (the per-item sequence costs the warp-specialized consumers 100+ bytes of
// spills at item boundaries, 10-19% of a softcap launch's throughput at a 256-key window).
template <typename T, class Cfg, bool kInstrument, bool kExtras = false, bool kSeq = false>
struct Forward {
  using Ops = DtypeOps<T>;
  static constexpr int kM = Cfg::kMTiles;
  static constexpr int kNS = Cfg::kNTilesS;
  static constexpr int kNO = Cfg::kNTilesO;
  static constexpr int kPitch = Cfg::kSmemRowBytes;
  static constexpr bool kWg = Cfg::kWgmma;
  // Bytes between consecutive rows of one column: the padded pitch, or a 128-byte row of a swizzled column block.
  static constexpr int kRowBytes = kWg ? kSwizzleRowBytes : kPitch;
  static constexpr int kColumnBlockChunks = kSwizzleRowBytes / kChunkBytes;  // 8 chunks = 64 elements

  // Byte offset of 16-byte chunk `chunk` of row `row` in a tile of kRows rows (layouts in tile_config.h).
  template <int kRows>
  __device__ static uint32_t chunk_offset(int row, int chunk) {
    if constexpr (kWg) {
      return (chunk / kColumnBlockChunks) * (kRows * kSwizzleRowBytes) + row * kSwizzleRowBytes +
             ((chunk % kColumnBlockChunks) ^ (row % kSwizzleAtomRows)) * kChunkBytes;
    } else {
      return row * kPitch + chunk * kChunkBytes;
    }
  }

  // Per-thread registers of one CTA work item.
  struct State {
    float acc_o[kM][kNO][4];  // (kRowsPerWarp, kHeadDim) of this warp, C-fragment layout, fp32
    float row_max[kM][2];     // running max of the raw score (of Q-negated scores when scale < 0), rows
                              // quad_row and quad_row + 8 of each m16 tile
    float row_ref[kM][2];     // the raw score P and l are relative to (softmax_stats): at most
                              // kRefSlackLog2 / c below row_max
    float row_sum[kM][2];     // this thread's share of l: summed over the quad at the end
    // Instrumentation only (dead, and removed, in production):
    int moves[kM][2];       // tiles after which the running max changed (the first finite max counts)
    int trace_slot[kM][2];  // index into inst.trace_rows, or -1
  };

  // Which 16-byte chunks a thread copies: one column chunk, rows kRowStep apart. Threads past
  // kRowStep * kChunksPerRow idle (only when kThreads is no multiple of the chunk count, e.g. head_dim 96).
  static constexpr int kRowStep = Cfg::kThreads / Cfg::kChunksPerRow;
  struct LoadSlot {
    int row;        // first row of this thread, or a row past every tile if the thread idles
    int chunk;      // column chunk
    int src_bytes;  // 16, or fewer / 0 where the chunk runs past head_dim (zero-filled)
    int col;        // element offset of the chunk in a row; 0 for a chunk wholly past head_dim
  };

  __device__ static LoadSlot load_slot(int head_dim) {
    const int tid = static_cast<int>(threadIdx.x);
    LoadSlot slot;
    slot.chunk = tid % Cfg::kChunksPerRow;
    slot.row = tid < kRowStep * Cfg::kChunksPerRow ? tid / Cfg::kChunksPerRow : Cfg::kBlockM;
    const int cols = min(max(head_dim - slot.chunk * kChunkElems, 0), kChunkElems);
    slot.src_bytes = cols * kElementBytes;
    slot.col = cols > 0 ? slot.chunk * kChunkElems : 0;  // a valid address even when nothing is read
    return slot;
  }

  // A (kRows, kHeadDim) tile from rows [row0, row0 + rows_valid) of one head: whole 16-byte chunks by cp.async;
  // rows past rows_valid and columns past head_dim are zero-filled without being read (copy_chunk_16).
  template <int kRows>
  __device__ static void load_tile(uint32_t smem_tile, const T* head, int64_t row0, int64_t row_stride,
                                   int64_t rows_valid, const LoadSlot& slot) {
    constexpr int kPasses = (kRows + kRowStep - 1) / kRowStep;
    // The 64-bit address math is redone per tile on purpose (opaque stride): hoisted out of the K/V loop,
    // one pointer per chunk would hold 2 registers each across the loop and push the accumulators to spills.
    int64_t stride = row_stride;
    asm volatile("" : "+l"(stride));
    const T* src = head + (row0 + slot.row) * stride + slot.col;
    const int64_t step = kRowStep * stride;
    // Passes are kRowStep rows apart, a whole number of swizzle atoms: the swizzle is the same in every pass.
    const uint32_t dst = smem_tile + chunk_offset<kRows>(slot.row, slot.chunk);
    if (rows_valid >= kRows) {  // whole tile: only the column predicate, constant per thread
#pragma unroll
      for (int i = 0; i < kPasses; ++i) {
        if (kRows % kRowStep == 0 || slot.row + i * kRowStep < kRows) {
          copy_chunk_16(dst + i * kRowStep * kRowBytes, src, slot.src_bytes);
        }
        src += step;
      }
    } else {
#pragma unroll
      for (int i = 0; i < kPasses; ++i) {
        const int row = slot.row + i * kRowStep;
        if (kRows % kRowStep == 0 || row < kRows) {
          const bool live = row < rows_valid;
          copy_chunk_16(dst + i * kRowStep * kRowBytes, live ? src : head, live ? slot.src_bytes : 0);
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
    constexpr int kPasses = (Cfg::kBlockM + kRowStep - 1) / kRowStep;
#pragma unroll
    for (int i = 0; i < kPasses; ++i) {
      const int row = slot.row + i * kRowStep;
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

  // S = Q K^T for this warp's rows: (kRowsPerWarp, kBlockN) fp32.
  __device__ static void qk(float (&s)[kM][kNS][4], uint32_t q_lane, uint32_t k_lane) {
#pragma unroll
    for (int mt = 0; mt < kM; ++mt)
#pragma unroll
      for (int nt = 0; nt < kNS; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[mt][nt][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < Cfg::kHeadDim / kMmaK; ++kk) {
      uint32_t qa[kM][4];  // (kMmaM, kMmaK) A fragments
#pragma unroll
      for (int mt = 0; mt < kM; ++mt) ldmatrix_x4(qa[mt], q_lane + mt * kMmaM * kPitch + kk * 2 * kChunkBytes);
#pragma unroll
      for (int nt2 = 0; nt2 < kNS / 2; ++nt2) {
        uint32_t kb[4];  // two (kMmaK, kMmaN) B fragments: keys nt2*16 + [0, 8) and [8, 16)
        ldmatrix_x4(kb, k_lane + nt2 * 2 * kMmaN * kPitch + kk * 2 * kChunkBytes);
#pragma unroll
        for (int mt = 0; mt < kM; ++mt) {
          Ops::mma(s[mt][2 * nt2], qa[mt], kb[0], kb[1]);
          Ops::mma(s[mt][2 * nt2 + 1], qa[mt], kb[2], kb[3]);
        }
      }
    }
  }

#if defined(FLASHCHECK_TC_WGMMA)
  // S = Q K^T for this warpgroup's 64 rows on one wgmma chain: k16 steps walk 32 bytes along a swizzled row,
  // then on to the next 64-element column block (K-major operands; the leading offset is unused).
  // The chain alone (one commit group), for callers that fence the registers themselves: qk_wgmma_issue()
  // fences, qk_wgmma() also waits.
  __device__ static void qk_chain(float (&s)[kM][kNS][4], uint32_t q_smem, uint32_t k_smem, int warpgroup) {
    static_assert(kM == 1, "wgmma: 16 rows per warp");
    constexpr uint32_t kAtomBytes = kSwizzleAtomRows * kSwizzleRowBytes;
    // Each chain's descriptors are its first k16 step's plus constant offsets (descriptor_plus). ptxas keeps the
    // loop-invariant Q descriptors in registers across the K/V loop; at d = 256 (sixteen of them beside O's 128
    // registers) that spills and slows short items, so there the Q base is made opaque and the descriptors
    // recomputed per tile (docs/design/tensor-core-kernel.md).
    uint32_t q_rows = q_smem + warpgroup * kWgmmaRows * kSwizzleRowBytes;
    if constexpr (Cfg::kHeadDim > 128) asm volatile("" : "+r"(q_rows));
    q_rows = warp_uniform(q_rows);
    k_smem = warp_uniform(k_smem);
    const uint64_t a0 = sw128_descriptor(q_rows, kChunkBytes, kAtomBytes);
    const uint64_t b0 = sw128_descriptor(k_smem, kChunkBytes, kAtomBytes);
#pragma unroll
    for (int kk = 0; kk < Cfg::kHeadDim / kMmaK; ++kk) {
      const uint32_t k_bytes = (kk % 4) * kMmaK * kElementBytes;
      wgmma::Mma<T, Cfg::kBlockN>::ss(s[0], descriptor_plus(a0, (kk / 4) * (Cfg::kBlockM * kSwizzleRowBytes) + k_bytes),
                                      descriptor_plus(b0, (kk / 4) * (Cfg::kBlockN * kSwizzleRowBytes) + k_bytes),
                                      kk > 0 ? 1 : 0);
    }
    wgmma_commit();
  }

  __device__ static void qk_wgmma_issue(float (&s)[kM][kNS][4], uint32_t q_smem, uint32_t k_smem, int warpgroup) {
    fence_operands(s[0]);
    wgmma_fence();
    qk_chain(s, q_smem, k_smem, warpgroup);
  }

  __device__ static void qk_wgmma(float (&s)[kM][kNS][4], uint32_t q_smem, uint32_t k_smem, int warpgroup) {
    qk_wgmma_issue(s, q_smem, k_smem, warpgroup);
    wgmma_wait<0>();
    fence_operands(s[0]);
  }

  // O += P V: P from registers (A fragments), V transposed from shared memory (MN-major: head_dim contiguous).
  // k16 steps walk 16 keys = 2 atoms; the leading offset steps between 64-column blocks of V.
  // The chain alone (one commit group): pv_wgmma_issue() fences first, pv_wgmma() also waits.
  __device__ static void pv_chain(uint32_t (&pa)[kM][kNS / 2][4], State& st, uint32_t v_smem) {
    constexpr uint32_t kAtomBytes = kSwizzleAtomRows * kSwizzleRowBytes;
    constexpr uint32_t kColumnBlockBytes = Cfg::kBlockN * kSwizzleRowBytes;
    // MN-major: the leading offset steps between 64-column blocks, the stride between 8-key atoms (the reading
    // kernel_gpu_test confirmed on the H100 for every wgmma family).
    v_smem = warp_uniform(v_smem);
    const uint64_t b0 = sw128_descriptor(v_smem, kColumnBlockBytes, kAtomBytes);
#pragma unroll
    for (int kk = 0; kk < Cfg::kBlockN / kMmaK; ++kk) {
      wgmma::Mma<T, Cfg::kHeadDim>::rs(st.acc_o[0], pa[0][kk], descriptor_plus(b0, kk * kMmaK * kSwizzleRowBytes), 1);
    }
    wgmma_commit();
  }

  __device__ static void pv_wgmma_issue(uint32_t (&pa)[kM][kNS / 2][4], State& st, uint32_t v_smem) {
    fence_operands(st.acc_o[0]);
    fence_operands(pa[0]);
    wgmma_fence();
    pv_chain(pa, st, v_smem);
  }

  __device__ static void pv_wgmma(uint32_t (&pa)[kM][kNS / 2][4], State& st, uint32_t v_smem) {
    pv_wgmma_issue(pa, st, v_smem);
    wgmma_wait<0>();
    fence_operands(st.acc_o[0]);
    fence_operands(pa[0]);
  }
#endif

  // Keys a row may use: [row_begin, row_end) (common/visibility.h), through the rule's 32-bit form for the tile
  // (rel_bounds: one compare per score against a row's bound where the rule bounds only the right edge, two
  // with a left edge). Select, not arithmetic: a NaN score at a hidden key becomes -inf.
  __device__ static void apply_mask(float (&s)[kM][kNS][4], const Visibility& vis, int64_t row_base, int64_t k0,
                                    int quad_row, int quad_col) {
    static_assert(kM * kMmaM <= Visibility::kRelSpan && Cfg::kBlockN <= Visibility::kRelSpan);
    const Visibility::RelBounds rb = vis.rel_bounds(row_base + quad_row, k0 + quad_col);
    const auto mask_rows = [&](auto two_sided) {
#pragma unroll
      for (int mt = 0; mt < kM; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int d = mt * kMmaM + h * kMmaN;  // this row's offset from the thread's first
          const int lo = rb.begin + d - (FC_MUTANT(kTcWindowLeftOffByOne) ? 1 : 0);
          const int hi = min(rb.end + d, rb.keys);
#pragma unroll
          for (int nt = 0; nt < kNS; ++nt)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const int c = nt * kMmaN + e;  // key k0 + quad_col + c
              if (c >= hi || (two_sided && c < lo)) s[mt][nt][2 * h + e] = kNegInf;
            }
        }
    };
    if (vis.bounded_begin) {
      mask_rows(std::true_type{});
    } else {
      mask_rows(std::false_type{});
    }
  }

  // Softcap (common/softmax.h): each raw score becomes its capped value in log2 units, so softmax_stats then runs
  // with scale_log2 = 1 (exact). Before the mask: a hidden key's -inf must not pass through tanh.
  __device__ static void cap_scores(float (&s)[kM][kNS][4], const KernelArgs& a) {
#pragma unroll
    for (int mt = 0; mt < kM; ++mt)
#pragma unroll
      for (int nt = 0; nt < kNS; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[mt][nt][e] = capped_score_log2(s[mt][nt][e], a.softcap);
  }

  // Online softmax update without touching O: new running max and reference, alpha = exp2(old ref - new ref)
  // per row, l rescaled and s replaced by p in fp32. Returns whether any alpha of the warp differs from 1
  // (warp-uniform); O takes alpha in rescale_o(). Split so that O may still be in flight on the tensor cores
  // meanwhile (kernel_ws.cuh).
  //
  // The reference follows common/softmax.h's tile_reference (the tile's own max within kRefSlackLog2 of the
  // running max, else the running max): on the H100 it lowers the fp16/bf16 relative RMS error by 1-6%
  // (docs/design/tensor-core-kernel.md). The price is a rescale of O at most tiles (alpha is no longer 1 once the
  // max settles). O and l stay within 2^kRefSlackLog2 of their values relative to the running max, and the
  // reported m (LSE = m + ln l) is the final reference.
  __device__ static bool softmax_stats(float (&s)[kM][kNS][4], State& st, float scale_log2, float (&alpha)[kM][2]) {
    float ref_scaled[kM][2];
    bool any_rescale = false;
#pragma unroll
    for (int mt = 0; mt < kM; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float tile_max = kNegInf;
#pragma unroll
        for (int nt = 0; nt < kNS; ++nt) tile_max = fmaxf(tile_max, fmaxf(s[mt][nt][2 * h], s[mt][nt][2 * h + 1]));
        tile_max = fmaxf(tile_max, __shfl_xor_sync(kFullWarp, tile_max, 1));
        if (!FC_MUTANT(kTcQuadMaxShortReduction)) tile_max = fmaxf(tile_max, __shfl_xor_sync(kFullWarp, tile_max, 2));
        float mx = fmaxf(st.row_max[mt][h], tile_max);
        // A row with no usable key yet has m = -inf: subtract 0 instead, so exp2(-inf - m) = 0 rather than
        // exp2(-inf + inf) = NaN. The old reference of -inf gives alpha = exp2(-inf) = 0 (O and l are 0 then).
        // R = fl(ref*c), and every exponent below is fl(x*c) - R with the product rounded on its own
        // (__fmul_rn is never contracted into an FMA): the reference key then gets exactly exp2(0) = 1 and an
        // unchanged reference exactly alpha = 1, however large |ref*c| is. The FMA form fma(s, c, -R) would
        // leave the rounding error of R in every exponent: up to half an ulp of ref*c, which for
        // |ref*c| >= 2^24 is a factor of 2 or more on P (and inf/0 near FLT_MAX).
        const float old_ref = st.row_ref[mt][h];
        float ref = tile_reference(tile_max, mx, old_ref, [scale_log2](float u) { return __fmul_rn(u, scale_log2); });
        if (FC_MUTANT(kTcHiddenTileMaxZero) && ref == kNegInf) ref = mx = 0.0f;
        ref_scaled[mt][h] = ref == kNegInf ? 0.0f : __fmul_rn(ref, scale_log2);
        alpha[mt][h] = ex2_approx(__fmul_rn(old_ref, scale_log2) - ref_scaled[mt][h]);
        any_rescale |= alpha[mt][h] != 1.0f;
        if constexpr (kInstrument) {
          if (mx != st.row_max[mt][h]) ++st.moves[mt][h];
        }
        st.row_max[mt][h] = mx;
        st.row_ref[mt][h] = ref;
        st.row_sum[mt][h] *= alpha[mt][h];
      }
#pragma unroll
    for (int mt = 0; mt < kM; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float sum = st.row_sum[mt][h];
#pragma unroll
        for (int nt = 0; nt < kNS; ++nt)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float p = ex2_approx(__fmul_rn(s[mt][nt][2 * h + e], scale_log2) - ref_scaled[mt][h]);
            s[mt][nt][2 * h + e] = p;
            sum += p;  // l takes p before it is rounded to T
          }
        st.row_sum[mt][h] = sum;
      }
    return __any_sync(kFullWarp, any_rescale);
  }

  // O *= alpha. Where the reference does not move (a tile whose max lies more than kRefSlackLog2 below the
  // running max keeps it), alpha is exactly 1 for every row of the warp: skipping the multiply is then exact and
  // saves kNTilesO * 8 FMULs per tile (`any` is warp-uniform).
  __device__ static void rescale_o(State& st, const float (&alpha)[kM][2], bool any) {
    if (any) {
#pragma unroll
      for (int mt = 0; mt < kM; ++mt)
#pragma unroll
        for (int nt = 0; nt < kNO; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) st.acc_o[mt][nt][e] *= alpha[mt][e / 2];
    }
  }

  // Online softmax update: new running max, rescale of O and l, and s replaced by p in fp32.
  __device__ static void softmax(float (&s)[kM][kNS][4], State& st, float scale_log2) {
    float alpha[kM][2];
    const bool any = softmax_stats(s, st, scale_log2, alpha);
    rescale_o(st, alpha, any);
  }

  // P rounded to T in A-fragment layout: keys kk*16 + [0, 16) of S accumulators 2kk and 2kk+1 form the
  // (kMmaM, kMmaK) A operand of step kk. Registers: low half = even key.
  __device__ static void pack_p(const float (&p)[kM][kNS][4], uint32_t (&pa)[kM][kNS / 2][4]) {
#pragma unroll
    for (int mt = 0; mt < kM; ++mt)
#pragma unroll
      for (int kk = 0; kk < kNS / 2; ++kk) {
        pa[mt][kk][0] = Ops::pack(p[mt][2 * kk][0], p[mt][2 * kk][1]);          // row quad_row,     keys +0..7
        pa[mt][kk][1] = Ops::pack(p[mt][2 * kk][2], p[mt][2 * kk][3]);          // row quad_row + 8, keys +0..7
        pa[mt][kk][2] = Ops::pack(p[mt][2 * kk + 1][0], p[mt][2 * kk + 1][1]);  // row quad_row,     keys +8..15
        pa[mt][kk][3] = Ops::pack(p[mt][2 * kk + 1][2], p[mt][2 * kk + 1][3]);  // row quad_row + 8, keys +8..15
      }
  }

  // O += P V on the tensor cores.
  __device__ static void pv(const uint32_t (&pa)[kM][kNS / 2][4], State& st, uint32_t v_lane) {
#pragma unroll
    for (int kk = 0; kk < Cfg::kBlockN / kMmaK; ++kk) {
#pragma unroll
      for (int nt2 = 0; nt2 < kNO / 2; ++nt2) {
        uint32_t vb[4];  // two (kMmaK, kMmaN) B fragments: columns nt2*16 + [0, 8) and [8, 16)
        ldmatrix_x4_trans(vb, v_lane + kk * kMmaK * kPitch + nt2 * 2 * kChunkBytes);
#pragma unroll
        for (int mt = 0; mt < kM; ++mt) {
          Ops::mma(st.acc_o[mt][2 * nt2], pa[mt][kk], vb[0], vb[1]);
          Ops::mma(st.acc_o[mt][2 * nt2 + 1], pa[mt][kk], vb[2], vb[3]);
        }
      }
    }
  }

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
  static constexpr int kHiddenChunks = Cfg::kBlockN * Cfg::kChunksPerRow;
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
      const int row = idx / Cfg::kChunksPerRow;
      if ((kHiddenChunksEven || idx < kHiddenChunks) && hidden.contains(row) && row < hi)
        f(row, v_smem + chunk_offset<Cfg::kBlockN>(row, idx % Cfg::kChunksPerRow));
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

  // One work item: Q tile q_tile of (sequence b, query head h), in the order of schedule.h, with what the item
  // reads of its sequence. Dense problems (and the variants without kSeq) take the launch's own lengths and
  // visibility; with sequences (attention.h, contiguous ones: the tensor-core family runs no paged cache) each
  // item carries its sequence's, and the rows it addresses start at the sequence's first packed row.
  struct Item {
    int64_t b, h, hk;
    int64_t q0, q_rows;  // q_rows <= 0: an empty slot of a packed launch (item_at), which every loop skips
    int64_t lse0;        // LSE row of the sequence's row 0 for head h (ProblemArgs::row_block)
    int64_t qb, q_row0;  // Q and O: the batch index and the row of the sequence's row 0 (packed Q: 0 and cu_q[b])
    int64_t kb, k_row0;  // K and V alike (packed K/V: 0 and cu_k[b])
    Visibility vis;      // the sequence's rule; vis.seqlen_q and vis.seqlen_k are its lengths
    // The K/V tiles the Q tile reads (common/visibility.h, TileRange): tile n of the item is tile first + n.
    // Tile indices fit in int: seqlen_k / kBlockN < 2^31 for any tensor a GPU can hold.
    int first;
    int n_tiles;
    int full_begin, full_end;  // tiles [full_begin, full_end) need no mask
    int clean_end;             // tiles outside [full_begin, clean_end) hide keys below seqlen_k from some row
    int split;                 // split-KV (kSeq variants): the run of the Q tile's tiles this item processes
    __device__ bool needs_mask(int n) const { return n < full_begin || n >= full_end; }
    __device__ bool hides_keys(int n) const { return n < full_begin || n >= clean_end; }
  };

  __device__ static Item item_at(const KernelArgs& a, int64_t item) {
    Item it;
    it.split = 0;
    if (kSeq && a.splits > 1) {  // schedule.h, split_item
      const SplitItem at = split_item(item, a.splits);
      item = at.unsplit;
      it.split = static_cast<int>(at.split);
    }
    int64_t q_tile;
    if (kSeq && a.cu_q != nullptr) {  // a.q_tiles slots per head (schedule.h, packed_slots)
      it.h = item / a.q_tiles;
      const int64_t slot = item - it.h * a.q_tiles;
      const auto start = [&](int64_t b) { return packed_slot_start(a.cu_q[b], b, Cfg::kBlockM); };
      int64_t lo = 0, hi = a.batch;  // the last sequence whose first slot is <= slot
      while (hi - lo > 1) {
        const int64_t mid = (lo + hi) / 2;
        if (start(mid) <= slot) lo = mid; else hi = mid;
      }
      it.b = lo;
      const int64_t tiles = ceil_div(int64_t{a.cu_q[lo + 1]} - a.cu_q[lo], int64_t{Cfg::kBlockM});
      const int64_t r = slot - start(lo);
      q_tile = r < tiles ? tiles - 1 - r : -1;  // the longest causal tile of the sequence first
    } else {
      // Consecutive items share a head, so its K/V stays in L2; within a head the longest causal tiles go first.
      const int64_t bh = item / a.q_tiles;
      q_tile = q_tile_of_item(item, a.q_tiles);
      it.b = bh / a.heads_q;
      it.h = bh - it.b * a.heads_q;
    }
    it.hk = it.h / a.group_size;
    if (kSeq && a.has_sequences()) {
      const SequenceView seq = a.sequence(it.b);
      it.vis = seq.vis;
      it.lse0 = a.row_block(it.b, it.h);
      it.qb = a.cu_q != nullptr ? 0 : it.b;
      it.q_row0 = seq.q_row0;
      it.kb = a.cu_k != nullptr ? 0 : it.b;
      it.k_row0 = a.cu_k != nullptr ? a.cu_k[it.b] : 0;
    } else {
      it.vis = a.vis;
      it.lse0 = (it.b * a.heads_q + it.h) * a.seqlen_q;
      it.qb = it.kb = it.b;
      it.q_row0 = it.k_row0 = 0;
    }
    it.q0 = q_tile * Cfg::kBlockM;
    it.q_rows = q_tile < 0 ? 0 : min(int64_t{Cfg::kBlockM}, it.vis.seqlen_q - it.q0);
    if (it.q_rows <= 0) {
      it.first = it.n_tiles = it.full_begin = it.full_end = it.clean_end = 0;
      return it;
    }
    Visibility::TileRange tiles = it.vis.tile_range(it.q0, it.q_rows, Cfg::kBlockN);
    if (kSeq && a.splits > 1) tiles = tiles.run(it.split, a.splits);
    it.first = static_cast<int>(tiles.first);
    it.n_tiles = static_cast<int>(tiles.count);
    it.full_begin = static_cast<int>(FC_MUTANT(kTcWindowLeftFirstTileOnly) && tiles.full_begin > 1 ? 1 : tiles.full_begin);
    it.full_end = static_cast<int>(tiles.full_end);
    it.clean_end = static_cast<int>(tiles.clean_end);
    return it;
  }

  // Epilogue, first half: O = acc / l rounded to T into this warp's rows of a (kBlockM, kHeadDim) tile at o_smem
  // laid out like Q, and LSE = m*|scale| + ln(l) for the real rows, with the sink merged in (common/epilogue.h).
  // A row with l == 0 saw no key with a finite score: O = 0 and LSE = -inf by contract, whatever acc holds.
  // Returns normalized_o's verdict: whether an accumulator of the warp is inf or NaN.
  __device__ static bool stage_o_and_lse(const State& st, const KernelArgs& a, uint32_t o_smem, const Item& it,
                                         int warp_row0, int lane) {
    Finals fin;
    row_finals(st, a, it.h, fin);
    const bool nonfinite = normalized_o<0, kNO>(st, fin, lane, [&](int local_row, int nt, int col, uint32_t packed) {
      st_shared_b32(o_smem + chunk_offset<Cfg::kBlockM>(warp_row0 + local_row, nt) + col * kElementBytes, packed);
    });
    write_lse(st, a, fin, it, it.q0 + warp_row0, lane);
    return nonfinite;
  }

  // A row's base in log2 units, what its l and accumulator are relative to: its reference (raw score units) times
  // scale_log2.
  __device__ static float ref_log2(float ref, const KernelArgs& a) {
    return ref == kNegInf ? kNegInf : __fmul_rn(ref, a.scale_log2);
  }

  // Split-KV (kSeq variants, a.splits > 1): this thread's rows' state as it stands into run it.split's partials,
  // which the combine merges (common/combine.cuh): the accumulator in fp32, the base in log2 units, l summed over
  // the quad. row0 = the warp's first query row. Returns whether an accumulator of the warp is inf or NaN.
  __device__ static bool store_partials(const State& st, const KernelArgs& a, const Item& it, int64_t row0, int lane) {
    const int quad_col = (lane % kQuad) * 2;
    const bool pairs = a.head_dim % 2 == 0;  // a column pair is then 8-byte aligned
    bool nonfinite = false;
#pragma unroll
    for (int mt = 0; mt < kM; ++mt)
#pragma unroll
      for (int nt = 0; nt < kNO; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) nonfinite |= !isfinite(st.acc_o[mt][nt][e]);
#pragma unroll
    for (int mt = 0; mt < kM; ++mt)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const float l = quad_sum(st.row_sum[mt][hh]);
        const int64_t row = row0 + mt * kMmaM + lane / kQuad + hh * kMmaN;
        if (row >= it.vis.seqlen_q) continue;
        const int64_t at = int64_t{it.split} * a.lse_rows + it.lse0 + row;
        float* out = a.partial_acc + at * a.head_dim;
#pragma unroll
        for (int nt = 0; nt < kNO; ++nt) {
          const int col = nt * kMmaN + quad_col;
          const float x0 = st.acc_o[mt][nt][2 * hh], x1 = st.acc_o[mt][nt][2 * hh + 1];
          if (pairs && col + 1 < a.head_dim) {
            *reinterpret_cast<float2*>(out + col) = make_float2(x0, x1);
          } else {
            if (col < a.head_dim) out[col] = x0;
            if (col + 1 < a.head_dim) out[col + 1] = x1;
          }
        }
        if (lane % kQuad == 0) {
          a.partial_m[at] = ref_log2(st.row_ref[mt][hh], a);
          a.partial_l[at] = l;
        }
      }
    return __any_sync(kFullWarp, nonfinite);
  }

  // The final state of this thread's rows (common/epilogue.h, finish_row): l summed over the quad (each quad holds
  // one row's partial sums), the sink of query head h merged in.
  struct Finals {
    RowFinal row[kM][2];
    RowQuotient quot[kM][2];
    QuotientDomain domain;  // the divisors' part of fast_quotient's domain check (common/row_quotient.cuh)
  };
  __device__ static void row_finals(const State& st, const KernelArgs& a, int64_t h, Finals& fin) {
#pragma unroll
    for (int mt = 0; mt < kM; ++mt)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const float ref = st.row_ref[mt][hh];
        // m in natural units as a product rounded on its own: LSE's add then contracts with nothing, so every
        // variant of the kernel (kExtras) gives it the same bits.
        const RowFinal r = finish_row(ref_log2(ref, a), __fmul_rn(ref, a.ref_to_natural),
                                      quad_sum(st.row_sum[mt][hh]),
                                      kExtras && !FC_MUTANT(kTcSinkIgnored) ? a.sink : nullptr, h,
                                      [](float e) { return ex2_approx(e); });
        fin.row[mt][hh] = r;
        fin.quot[mt][hh] = row_quotient(r.l);
        fin.domain.divisor(r.l, r.keys_empty);
      }
  }
  // O's element before the division: the accumulator times the sink's factor (final_output's product).
  __device__ static float numerator(float acc, const RowFinal& r) { return mul_rn(acc, r.alpha); }

  // O = alpha * acc / l rounded to T (0 where l == 0) for the n8 column tiles [kNt0, kNt0 + kNtCount) of this
  // thread's rows: put(row within the warp's rows, n8 tile, first column within it, the packed pair).
  // The quotients come from fast_quotient(); if any of the warp's lies outside its domain, the warp puts every
  // element again from final_output()'s div_rn (the same bits where both apply: common/row_quotient.cuh). put()
  // may shuffle within the warp, hence the warp-wide vote. Returns whether one of these accumulators of the warp is
  // inf or NaN (warp-uniform), found on the second pass only: a non-finite accumulator makes its numerator leave the
  // domain (alpha is finite and non-negative), so where the domain holds there is none.
  template <int kNt0, int kNtCount, class Put>
  __device__ static bool normalized_o(const State& st, const Finals& fin, int lane, Put&& put) {
    const int quad_row = lane / kQuad;
    const int quad_col = (lane % kQuad) * 2;
    const auto each = [&](auto&& element) {
#pragma unroll
      for (int mt = 0; mt < kM; ++mt)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
#pragma unroll
          for (int nt = kNt0; nt < kNt0 + kNtCount; ++nt) {
            const float o0 = element(st.acc_o[mt][nt][2 * hh], mt, hh);
            const float o1 = element(st.acc_o[mt][nt][2 * hh + 1], mt, hh);
            put(mt * kMmaM + quad_row + hh * kMmaN, nt, quad_col, Ops::pack(o0, o1));
          }
        }
    };
    QuotientDomain domain = fin.domain;
    each([&](float acc, int mt, int hh) {
      const float x = numerator(acc, fin.row[mt][hh]);
      domain.numerator(x);
      return fast_quotient(x, fin.quot[mt][hh]);
    });
    if (!__any_sync(kFullWarp, !domain.holds())) return false;
    bool nonfinite = false;
    each([&](float acc, int mt, int hh) {
      nonfinite |= !isfinite(acc);
      return final_output(acc, fin.row[mt][hh]);
    });
    return __any_sync(kFullWarp, nonfinite);
  }

  // LSE = m*|scale| + ln(l) (common/epilogue.h) of this thread's real rows; row0 = the warp's first query row.
  // The quad's lanes share its rows' LSE: lane t writes the rows of pairs t, t + 4, ... of (mt, hh) (every lane
  // holds every row's finals), so the logarithms run side by side instead of one after another in lane 0.
  __device__ static void write_lse(const State& st, const KernelArgs& a, const Finals& fin, const Item& it,
                                   int64_t row0, int lane) {
    constexpr int kPairs = 2 * kM;
#pragma unroll
    for (int p0 = 0; p0 < kPairs; p0 += kQuad) {
      const int p = p0 + lane % kQuad;
      if (p >= kPairs) continue;
      RowFinal r = fin.row[0][0];
      int moves = 0;
#pragma unroll
      for (int q = 0; q < kPairs; ++q) {
        if (q != p) continue;
        r = fin.row[q / 2][q % 2];
        if constexpr (kInstrument) moves = st.moves[q / 2][q % 2];
      }
      const int64_t row = row0 + (p / 2) * kMmaM + lane / kQuad + (p % 2) * kMmaN;
      if (row >= it.vis.seqlen_q) continue;
      a.lse[it.lse0 + row] = row_lse(r.m_natural, r.l) * (FC_MUTANT(kTcLseLog2Units) ? kLog2e : 1.0f);
      if constexpr (kInstrument) record_row(a.inst, it.lse0 + row, r.m_natural, r.l, moves);
    }
  }

  // A fresh work item: O = 0, m = -inf, l = 0 (and, instrumented, the tile counts and trace slots of its rows).
  __device__ static void init_state(State& st, const KernelArgs& a, const Item& it, int warp_row0, int lane, int tid) {
    const int quad_row = lane / kQuad;
#pragma unroll
    for (int mt = 0; mt < kM; ++mt) {
#pragma unroll
      for (int nt = 0; nt < kNO; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) st.acc_o[mt][nt][e] = 0.0f;
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        st.row_max[mt][hh] = kNegInf;
        st.row_ref[mt][hh] = kNegInf;
        st.row_sum[mt][hh] = 0.0f;
      }
    }
    if constexpr (kInstrument) {
      if (tid == 0 && it.split == 0) {  // split runs: the Q tile's tiles are counted once, by its first run
        const Visibility::TileRange all = it.vis.tile_range(it.q0, it.q_rows, Cfg::kBlockN);
        count_tile_kinds(a.inst, it.vis, it.q0, Cfg::kBlockM, Cfg::kBlockN, all.first, all.first + all.count);
      }
#pragma unroll
      for (int mt = 0; mt < kM; ++mt)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          st.moves[mt][hh] = 0;
          st.trace_slot[mt][hh] = -1;
          // Rows past seqlen_q of a partial Q tile are not rows of this head: their flat index is a row
          // of the next head, whose trace they must not write. Traces follow unsplit rows only.
          const int64_t row = it.q0 + warp_row0 + mt * kMmaM + quad_row + hh * kMmaN;
          if (row < it.vis.seqlen_q && a.splits == 1) st.trace_slot[mt][hh] = trace_slot(a.inst, it.lse0 + row);
        }
    }
  }

  // Instrumented builds: m and l of the traced rows after K/V tile n.
  __device__ static void trace_tile(const State& st, const KernelArgs& a, int n, int lane) {
    if constexpr (kInstrument) {
      if (a.inst.trace_row_count > 0) {
#pragma unroll
        for (int mt = 0; mt < kM; ++mt)
#pragma unroll
          for (int hh = 0; hh < 2; ++hh) {
            const float l = quad_sum(st.row_sum[mt][hh]);
            if (lane % kQuad == 0) {
              record_trace(a.inst, st.trace_slot[mt][hh], n, __fmul_rn(st.row_ref[mt][hh], a.ref_to_natural), l);
            }
          }
      }
    }
  }

  __device__ static float quad_sum(float x) {
    x += __shfl_xor_sync(kFullWarp, x, 1);
    x += __shfl_xor_sync(kFullWarp, x, 2);
    return x;
  }

  // Element (b, h, row 0, dim 0) of t (64-bit offsets; the mutant tc-offset-32bit wraps them at 2^32).
  template <typename P>
  __device__ static P* head_of(const TensorArg& t, int64_t b, int64_t h) {
    if (FC_MUTANT(kTcOffset32Bit)) {
      const uint32_t offset = static_cast<uint32_t>(b) * static_cast<uint32_t>(t.stride.batch) +
                              static_cast<uint32_t>(h) * static_cast<uint32_t>(t.stride.head);
      return static_cast<P*>(const_cast<void*>(t.ptr)) + offset;
    }
    return t.template head<P>(b, h);
  }

  // cp.async of the item's Q tile, one commit group.
  __device__ static void load_q(const KernelArgs& a, const Item& it, uint32_t q_smem, const LoadSlot& slot) {
    const T* q_head = head_of<const T>(a.q, it.qb, it.h);
    load_tile<Cfg::kBlockM>(q_smem, q_head, it.q_row0 + it.q0, a.q.stride.row, it.q_rows, slot);
    cp_async_commit();
  }

  // cp.async of the item's K/V tile n (n < n_tiles) into one ring stage: K, then V, one commit group.
  __device__ static void load_kv(const KernelArgs& a, const Item& it, int n, uint32_t stage, const LoadSlot& slot) {
    const T* k_head = head_of<const T>(a.k, it.kb, it.hk);
    const T* v_head = head_of<const T>(a.v, it.kb, it.hk);
    const int64_t k0 = int64_t{it.first + n} * Cfg::kBlockN;
    // Rows past the sequence's keys are zero-filled, never read (with sequences, other memory lies there).
    load_tile<Cfg::kBlockN>(stage, k_head, it.k_row0 + k0, a.k.stride.row, it.vis.seqlen_k - k0, slot);
    load_tile<Cfg::kBlockN>(stage + Cfg::kKVTileSmemBytes, v_head, it.k_row0 + k0, a.v.stride.row,
                            it.vis.seqlen_k - k0, slot);
    cp_async_commit();
  }

  __device__ static void run(const KernelArgs& a, uint8_t* smem) {
    const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
    const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
    const int quad_row = lane / kQuad;        // C-fragment row in an m16 tile (and quad_row + 8)
    const int quad_col = (lane % kQuad) * 2;  // C-fragment column pair in an n8 tile
    const int warp_row0 = warp * Cfg::kRowsPerWarp;
    // (kBlockM, kHeadDim) Q; swizzled tiles start on a 1024-byte boundary.
    constexpr uint32_t kAlign = Cfg::kSmemAlignSlack > 0 ? Cfg::kSmemAlignSlack : 1;
    const uint32_t q_smem = (smem_address(smem) + kAlign - 1) / kAlign * kAlign;
    const uint32_t kv_smem = q_smem + Cfg::kQSmemBytes;  // kStages x [(kBlockN, kHeadDim) K, same V]
    // Per-lane ldmatrix row addresses (see the fragment layouts of mma.m16n8k16): A takes rows 0-15 with the
    // two 8-column halves in lanes 0-15 / 16-31; K (B, not transposed) keys 0-7 / 8-15 in lanes 0-15 / 16-31
    // and the k halves alternating by 8 lanes; V (B, transposed) keys 0-15 by lane%16, columns by lane/16.
    const uint32_t q_lane = q_smem + (warp_row0 + lane % 16) * kPitch + (lane / 16) * kChunkBytes;
    const uint32_t k_lane_off = (lane % 8 + 8 * (lane / 16)) * kPitch + ((lane / 8) % 2) * kChunkBytes;
    const uint32_t v_lane_off = (lane % 16) * kPitch + (lane / 16) * kChunkBytes;
    const LoadSlot slot = load_slot(static_cast<int>(a.head_dim));

    // The K/V ring of two stages runs across work items: tile n of an item sits in stage (parity + n) % 2, and
    // during an item's last tile the other stage receives the next item's tile 0 (schedule.h).
    static_assert(Cfg::kStages == 2, "the ring that runs across work items has two stages");
    static_assert(Cfg::kQSmemBytes <= Cfg::kStageSmemBytes, "O is staged in the stage of the last K/V tile");
    const auto stage_smem = [&](int tile) { return kv_smem + static_cast<uint32_t>(tile & 1) * Cfg::kStageSmemBytes; };
    int parity = 0;           // stage of the current item's tile 0
    bool prefetched = false;  // the previous item already issued this item's Q and K/V tile 0
    Copies copies;
    for (int64_t step = 0;; ++step) {
      const int64_t item = scheduled_item(blockIdx.x, step, gridDim.x);
      if (item >= a.work_items) break;
      const int64_t next_item = scheduled_item(blockIdx.x, step + 1, gridDim.x);
      const Item it = item_at(a, item);
      if (it.q_rows <= 0) continue;  // an empty slot: nothing was prefetched for it (its n_tiles is 0)
      const int n_tiles = it.n_tiles;
      const int64_t q0 = it.q0;
      const Visibility& vis = it.vis;
      // Q and K/V for no visible key are never read: with seqlen_k == 0 the pointers may be null.
      if (!prefetched && n_tiles > 0) {
        load_q(a, it, q_smem, slot);
        copies.filled(kSlotQ);
        copies.commit();
        FC_PERTURB(kPerturbCpAsyncIssue, step);
        load_kv(a, it, 0, stage_smem(parity), slot);
        copies.filled(stage_slot(parity));
        copies.commit();
      }
      // The next item's loads start during this item's last tile if both have K/V tiles. (item_at(next_item) is
      // recomputed there, a few integer divisions once per item, rather than held in registers across the loop.)
      const bool prefetch_next = n_tiles > 0 && next_item < a.work_items && item_at(a, next_item).n_tiles > 0;

      State st;
      init_state(st, a, it, warp_row0, lane, static_cast<int>(threadIdx.x));

      for (int n = 0; n < n_tiles; ++n) {
        const uint32_t k_smem = stage_smem(parity + n);
        const uint32_t v_smem = k_smem + Cfg::kKVTileSmemBytes;
        const int64_t k0 = int64_t{it.first + n} * Cfg::kBlockN;
        // Q (at n == 0), K(n) and V(n) landed: nothing else is in flight.
        if (FC_MUTANT(kTcCpAsyncWaitShort)) {
          cp_async_wait<1>(copies);
        } else {
          cp_async_wait<0>(copies);
        }
        poison_if_premature(copies, kSlotQ, q_smem, Cfg::kQSmemBytes);
        poison_if_premature(copies, stage_slot(parity + n), k_smem, Cfg::kStageSmemBytes);
        FC_PERTURB(kPerturbCpAsyncWait, n);
        if (n == 0 && a.negate_q) negate_own_q_chunks(q_smem, slot);
        if constexpr (kWg) fence_proxy_async_shared();  // this thread's Q, K, V writes, before wgmma reads them
        // The one barrier per tile: publishes Q, K(n), V(n) to every warp, and every warp is past P*V of
        // tile n-1 (or the previous item's epilogue), so that stage takes tile n + 1 (or the next item's tile 0),
        // which then has a whole tile's time to arrive.
        __syncthreads();
        const bool last = n + 1 == n_tiles;
        if (!last) {
          load_kv(a, it, n + 1, stage_smem(parity + n + 1), slot);
        } else if (prefetch_next) {
          load_kv(a, item_at(a, next_item), 0, stage_smem(parity + n + 1), slot);
        }
        if (!last || prefetch_next) {
          copies.filled(stage_slot(parity + n + 1));
          copies.commit();
        }

        // Masked keys inside a diagonal tile are real K/V rows that later rows of the tile see. Their p is
        // exactly 0 for the rows that may not see them, which is harmless for finite V (0 * v = 0) but
        // 0 * inf = NaN: if a hidden V row is non-finite, the tile goes through exact_hidden_v first.
        const bool diagonal = it.hides_keys(n);
        // A warp whose rows see no key of a diagonal tile skips it: p = 0 and alpha = 1 there, so skipping is
        // exact (the host model leaves such rows untouched too).
        // (A wgmma is issued by the whole warpgroup: there the test is per warpgroup.)
        const int sees_row0 = kWg ? warp / kWarpsPerWarpgroup * kWgmmaRows : warp_row0;
        const int sees_rows = kWg ? kWgmmaRows : Cfg::kRowsPerWarp;
        const bool warp_sees = !diagonal || (vis.row_end(q0 + sees_row0 + sees_rows - 1) > k0 &&
                                             vis.row_begin(q0 + sees_row0) < k0 + Cfg::kBlockN);
        uint32_t pa[kM][kNS / 2][4];  // P rounded to T, A-fragment layout
        if (warp_sees) {
          float s[kM][kNS][4];  // (kRowsPerWarp, kBlockN) scores, then p
#if defined(FLASHCHECK_TC_WGMMA)
          if constexpr (kWg) {
            qk_wgmma(s, q_smem, k_smem, warp / kWarpsPerWarpgroup);
          } else {
            qk(s, q_lane, k_smem + k_lane_off);
          }
#else
          qk(s, q_lane, k_smem + k_lane_off);
#endif
          if constexpr (kExtras) {
            if (a.has_softcap && !FC_MUTANT(kTcSoftcapAfterMask)) cap_scores(s, a);
          }
          if (it.needs_mask(n) && !(FC_MUTANT(kTcLastTileUnmasked) && last))
            apply_mask(s, vis, q0 + warp_row0, k0, quad_row, quad_col);
          if constexpr (kExtras) {
            if (a.has_softcap && FC_MUTANT(kTcSoftcapAfterMask)) cap_scores(s, a);
          }
          softmax(s, st, a.scale_log2);
          pack_p(s, pa);
        }
        const bool exact =
            diagonal && !FC_MUTANT(kTcHiddenVExactPathSkipped) &&
            __syncthreads_or(hidden_v_nonfinite(v_smem, vis, q0, k0, static_cast<int>(threadIdx.x)));
        if (exact) {
          exact_hidden_v(st, v_smem, vis, q0, warp_row0, k0, lane, static_cast<int>(threadIdx.x),
                         [] { __syncthreads(); });
        }
        if (last && prefetch_next) {
          // Every warp's S of the last tile has read Q (the diagonal test above was a barrier already): the next
          // item's Q loads during this P*V and the epilogue.
          if (!diagonal) __syncthreads();
          load_q(a, item_at(a, next_item), q_smem, slot);
          copies.filled(kSlotQ);
          copies.commit();
        }
        if (warp_sees) {
#if defined(FLASHCHECK_TC_WGMMA)
          if constexpr (kWg) {
            pv_wgmma(pa, st, v_smem);
          } else {
            pv(pa, st, v_smem + v_lane_off);
          }
#else
          pv(pa, st, v_smem + v_lane_off);
#endif
        }

        trace_tile(st, a, n, lane);
      }

      // Epilogue: O = acc / l rounded to T, staged through this warp's own rows of a (kBlockM, kHeadDim) tile
      // laid out like Q, then 16-byte stores of the real columns; LSE = m*|scale| + ln(l). A row with l == 0 saw
      // no key with a finite score: O = 0 and LSE = -inf by contract, whatever acc holds.
      // The staging tile is the stage of the last K/V tile, free once every warp is past its P*V (Q may hold
      // the next item's tile already); an item without K/V tiles uses the stage the next item's tile 0 skips.
      // Split runs write their partials instead (store_partials).
      const uint32_t o_smem = stage_smem(n_tiles > 0 ? parity + n_tiles - 1 : parity + 1);
      if (n_tiles > 0) __syncthreads();
      if (kSeq && a.splits > 1) {
        store_partials(st, a, it, q0 + warp_row0, lane);
        prefetched = prefetch_next;
        parity = (parity + n_tiles) & 1;
        continue;
      }
      T* o_head = head_of<T>(a.o, it.qb, it.h) + it.q_row0 * a.o.stride.row;
      stage_o_and_lse(st, a, o_smem, it, warp_row0, lane);
      __syncwarp();
      constexpr int kStorePerLane = Cfg::kRowsPerWarp * Cfg::kChunksPerRow / kWarpSize;
#pragma unroll
      for (int i = 0; i < kStorePerLane; ++i) {
        const int idx = lane + i * kWarpSize;
        const int local_row = warp_row0 + idx / Cfg::kChunksPerRow;
        const int col = (idx % Cfg::kChunksPerRow) * kChunkElems;
        const int64_t row = q0 + local_row;
        if ((row >= vis.seqlen_q && !FC_MUTANT(kTcOStorePastSeqlen)) || col >= a.head_dim) continue;
        const uint32_t src = o_smem + chunk_offset<Cfg::kBlockM>(local_row, col / kChunkElems);
        T* dst = o_head + row * a.o.stride.row + col;
        if (col + kChunkElems <= a.head_dim) {
          *reinterpret_cast<uint4*>(dst) = ld_shared_v4(src);
        } else {
          for (int c = 0; c < a.head_dim - col; c += 2) {  // padded family: only the real columns
            const float2 pair = Ops::unpack(ld_shared_b32(src + c * kElementBytes));
            dst[c] = T(pair.x);
            if (c + 1 < a.head_dim - col) dst[c + 1] = T(pair.y);
          }
        }
      }
      // The lanes of this warp are done reading its staged rows before it stages the next item's.
      __syncwarp();
      prefetched = prefetch_next;
      parity = (parity + n_tiles) & 1;
    }
  }
};

// kInstrument is the last template argument (mangled Lb0E / Lb1E), as the symbol check expects.
template <typename T, class Cfg, bool kExtras, bool kSeq, bool kInstrument>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocksPerSm)
    tensor_core_forward_kernel(const __grid_constant__ KernelArgs args) {
  extern __shared__ __align__(1024) uint8_t smem[];
  Forward<T, Cfg, kInstrument, kExtras, kSeq>::run(args, smem);
}

// Which variant a launch takes: the one with sequences (which also runs split-KV), else the one with softcap and
// sink if it has either, else the plain one. f(std::bool_constant<kExtras>, std::bool_constant<kSeq>).
template <class F>
Status with_variant(const KernelArgs& args, F&& f) {
  if (args.has_sequences() || args.splits > 1) return f(std::true_type{}, std::true_type{});
  if (args.has_softcap || args.sink != nullptr) return f(std::true_type{}, std::false_type{});
  return f(std::false_type{}, std::false_type{});
}

// CTAs of kKernel (with `threads` threads and `smem_bytes` of dynamic shared memory) that fit on the current
// device at once: SMs x CTAs per SM. The kernel's shared-memory opt-in is set and the occupancy queried on the
// first call per device, then cached, so a launch costs no driver queries after the first on a device.
inline constexpr int kMaxDevices = 64;

template <auto kKernel>
Status resident_ctas(int threads, int smem_bytes, int64_t* resident) {
  static std::atomic<int> ctas_per_sm[kMaxDevices] = {};
  static std::atomic<int> sm_count[kMaxDevices] = {};
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return {StatusCode::kCudaError, cudaGetErrorString(err)};
  int per_sm = device < kMaxDevices ? ctas_per_sm[device].load(std::memory_order_acquire) : 0;
  int sms = device < kMaxDevices ? sm_count[device].load(std::memory_order_relaxed) : 0;
  if (per_sm == 0) {
    err = cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
    if (err == cudaSuccess) err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    if (err == cudaSuccess) err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kKernel, threads, smem_bytes);
    if (err != cudaSuccess) return {StatusCode::kCudaError, cudaGetErrorString(err)};
    if (per_sm < 1) return {StatusCode::kCudaError, "tensor_core: the kernel does not fit on an SM of this device"};
    if (device < kMaxDevices) {
      sm_count[device].store(sms, std::memory_order_relaxed);
      ctas_per_sm[device].store(per_sm, std::memory_order_release);
    }
  }
  *resident = int64_t{sms} * per_sm;
  return Status::ok_status();
}

// What plan_grid() needs of a launch of Cfg's tiles (schedule.h); allow_persistent per Cfg::kPersist.
template <class Cfg>
GridProblem grid_problem(const KernelArgs& args) {
  GridProblem problem;
  problem.work_items = args.work_items;
  problem.q_tiles = args.q_tiles;
  problem.splits = args.splits;
  problem.vis = args.vis;
  problem.block_m = Cfg::kBlockM;
  problem.block_n = Cfg::kBlockN;
  // Packed Q: items differ by their sequences, which plan_grid() does not see; one item per CTA lets the hardware
  // balance them.
  problem.allow_persistent = args.cu_q == nullptr &&
                             (Cfg::kPersist == Persist::kAlways ||
                              (Cfg::kPersist == Persist::kCausal && (args.vis.bounded_end || args.vis.bounded_begin)));
  return problem;
}

template <typename T, class Cfg, bool kExtras, bool kSeq>
Status launch_variant(const KernelArgs& args, cudaStream_t stream) {
  constexpr auto kernel = tensor_core_forward_kernel<T, Cfg, kExtras, kSeq, FLASHCHECK_INSTRUMENT != 0>;
  int64_t resident = 0;
  const Status st = resident_ctas<kernel>(Cfg::kThreads, Cfg::kSmemBytes, &resident);
  if (!st.ok()) return st;
  const int64_t grid = capped_grid(plan_grid(grid_problem<Cfg>(args), resident));
  if (grid < 1) return Status::ok_status();
  kernel<<<dim3(static_cast<unsigned>(grid)), Cfg::kThreads, Cfg::kSmemBytes, stream>>>(args);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return {StatusCode::kCudaError, cudaGetErrorString(err)};
  return Status::ok_status();
}

template <typename T, class Cfg>
Status launch_with(const KernelArgs& args, cudaStream_t stream) {
  return with_variant(args, [&](auto extras, auto seq) { return launch_variant<T, Cfg, extras(), seq()>(args, stream); });
}

}  // namespace tc_kernel
}  // namespace FLASHCHECK_KERNEL_VARIANT
}  // namespace flashcheck::detail
