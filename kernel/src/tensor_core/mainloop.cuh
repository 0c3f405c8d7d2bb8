// The mainloop's two matrix products on the tensor cores, for the fp16/bf16 forward kernels: S = Q K^T and
// O += P V, with mma.sync from ldmatrix fragments (kernel.cuh without wgmma) or as wgmma chains on swizzled
// shared-memory descriptors (sm_90a; kernel.cuh's wgmma tiles and kernel_ws.cuh, which issues the chains itself to
// overlap them). fp32 accumulation throughout (families.h, rounding points of the tensor-core family).
#pragma once

#include "fragments.cuh"
#if defined(FLASHCHECK_TC_WGMMA)
#include "wgmma_ops.cuh"
#endif

namespace flashcheck::detail {
inline namespace FLASHCHECK_KERNEL_VARIANT {
namespace tc_kernel {

template <typename T, class Cfg>
struct Fragments<T, Cfg>::Mainloop {
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
      wgmma::Mma<T, Cfg::kHeadDimV>::rs(st.acc_o[0], pa[0][kk], descriptor_plus(b0, kk * kMmaK * kSwizzleRowBytes), 1);
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
};

}  // namespace tc_kernel
}  // namespace FLASHCHECK_KERNEL_VARIANT
}  // namespace flashcheck::detail
