// The online-softmax step of the fp16/bf16 tensor-core forward kernels (common/softmax.h's update, in C-fragment
// layout): the running max and reference per row, alpha, l, p in fp32, O's rescale, and P rounded to T as the A
// operand of P V; with the state's initialization and the instrumented builds' per-tile trace.
#pragma once

#include "common/epilogue.h"
#include "common/softmax.h"
#include "fragments.cuh"
#include "scheduler.cuh"

namespace flashcheck::detail {
inline namespace FLASHCHECK_KERNEL_VARIANT {
namespace tc_kernel {

template <typename T, class Cfg>
template <bool kInstrument>
struct Fragments<T, Cfg>::SoftmaxStep {
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
};

}  // namespace tc_kernel
}  // namespace FLASHCHECK_KERNEL_VARIANT
}  // namespace flashcheck::detail
