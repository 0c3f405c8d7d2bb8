// The score mask and the softcap of the fp16/bf16 tensor-core forward kernels, on S in C-fragment layout: hidden
// keys (common/visibility.h's rule for the tile) become -inf; softcapped scores become their capped value in log2
// units (common/softmax.h).
#pragma once

#include "fragments.cuh"

namespace flashcheck::detail {
inline namespace FLASHCHECK_KERNEL_VARIANT {
namespace tc_kernel {

template <typename T, class Cfg>
struct Fragments<T, Cfg>::MaskStep {
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
};

}  // namespace tc_kernel
}  // namespace FLASHCHECK_KERNEL_VARIANT
}  // namespace flashcheck::detail
