// The register layouts the fp8 kernel (kernel/src/fp8/kernel.cuh) takes from the PTX ISA, checked on the device:
//   1. wgmma m64n8k32 .e4m3 with A from registers: register r, byte b of thread (warp w, g = lane / 4, q = lane % 4)
//      holds A's row 16w + g + 8 (r % 2), column 16 (r / 2) + 4q + b (fp8/layout.h). The same product with A from
//      shared memory (the layout TMA writes) must give the same D.
//   2. the accumulator: d[0], d[1] are row 16w + g, columns 2q, 2q + 1; d[2], d[3] row + 8.
//   3. __nv_cvt_float2_to_fp8x2 puts .x in the low byte (the A fragment's byte order).
//   4. the kernel's P path end to end: P in accumulator registers (an m64n32 tile of S's layout) rounded into the A
//      fragment through fp8_layout::p_source, against a B whose 32 k-slots hold the keys in fp8_layout::key_of_slot's
//      order, equals P V over the natural key order.
// A and B hold small integers (exact in e4m3; every sum exact in the 14-bit accumulator), so every comparison is
// exact. Exit 0 when all hold, 1 with the first mismatches printed, 69 without a CUDA device (a skip).
//
//   nvcc -std=c++20 -O2 -gencode=arch=compute_90a,code=sm_90a -Ikernel/src -Ikernel/include \
//       -o /tmp/fp8_wgmma_fragments kernel/tests/fp8_wgmma_fragments.cu && /tmp/fp8_wgmma_fragments
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "fp8/layout.h"

namespace {

using flashcheck::detail::fp8_layout::key_of_slot;
using flashcheck::detail::fp8_layout::p_source;
using flashcheck::detail::fp8_layout::swizzled;

constexpr int kM = 64, kN = 8, kK = 32;

__device__ uint64_t descriptor(uint32_t addr) {  // K-major, 128-byte swizzle, stride one 8-row atom
  return (uint64_t{(addr & 0x3FFFF) >> 4}) | (uint64_t{1} << 16) | (uint64_t{1024 >> 4} << 32) | (uint64_t{1} << 62);
}

__device__ void mma_rs(float (&d)[4], const uint32_t (&a)[4], uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(0));
}

__device__ void mma_ss(float (&d)[4], uint64_t desc_a, uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0, %1, %2, %3}, %4, %5, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "l"(desc_a), "l"(desc_b), "r"(0));
}

// a: [kM][kK] e4m3 bytes, b: [kN][kK] (K-major: row n holds B's column n), p: [kM][kK] floats (P in natural key
// order; exact in e4m3). Out: d_rs, d_ss, d_p: [kM][kN] as each thread's accumulator says it holds them, and the
// conversion's two bytes.
__global__ void probe(const uint8_t* a, const uint8_t* b, const uint8_t* b_permuted, const float* p, float* d_rs,
                      float* d_ss, float* d_p, uint32_t* cvt) {
  __shared__ alignas(1024) uint8_t sa[kM * 128];
  __shared__ alignas(1024) uint8_t sb[kN * 128];
  __shared__ alignas(1024) uint8_t sb_perm[kN * 128];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, q = lane % 4;
  for (int i = tid; i < kM * 128; i += blockDim.x) sa[i] = 0;
  for (int i = tid; i < kN * 128; i += blockDim.x) sb[i] = sb_perm[i] = 0;
  __syncthreads();
  for (int i = tid; i < kM * kK; i += blockDim.x) sa[swizzled(i / kK, i % kK)] = a[i];
  for (int i = tid; i < kN * kK; i += blockDim.x) {
    sb[swizzled(i / kK, i % kK)] = b[i];
    sb_perm[swizzled(i / kK, i % kK)] = b_permuted[i];
  }
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  const auto address = [](const void* ptr) { return static_cast<uint32_t>(__cvta_generic_to_shared(ptr)); };
  // 1. A from registers, in the assumed fragment layout.
  uint32_t regs[4];
  for (int r = 0; r < 4; ++r) {
    uint32_t word = 0;
    for (int byte = 0; byte < 4; ++byte) {
      const int row = 16 * warp + g + 8 * (r % 2), col = 16 * (r / 2) + 4 * q + byte;
      word |= uint32_t{a[row * kK + col]} << (8 * byte);
    }
    regs[r] = word;
  }
  // 4. P from S's accumulator layout (n8 blocks j = 0..3 of an m64n32 tile) through p_source.
  uint32_t pa[4];
  for (int r = 0; r < 4; ++r) {
    float v[4];
    for (int byte = 0; byte < 4; ++byte) {
      const auto src = p_source(r, byte);
      const int row = 16 * warp + g + 8 * (src.element / 2), key = 8 * src.block + 2 * q + src.element % 2;
      v[byte] = p[row * kK + key];
    }
    pa[r] = uint32_t{__nv_cvt_float2_to_fp8x2(make_float2(v[0], v[1]), __NV_SATFINITE, __NV_E4M3)} |
            (uint32_t{__nv_cvt_float2_to_fp8x2(make_float2(v[2], v[3]), __NV_SATFINITE, __NV_E4M3)} << 16);
  }
  float rs[4] = {}, ss[4] = {}, pv[4] = {};
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
  mma_rs(rs, regs, descriptor(address(sb)));
  mma_ss(ss, descriptor(address(sa)), descriptor(address(sb)));
  mma_rs(pv, pa, descriptor(address(sb_perm)));
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  // 2. The accumulator's layout, as the kernel reads it.
  for (int e = 0; e < 4; ++e) {
    const int row = 16 * warp + g + 8 * (e / 2), col = 2 * q + e % 2;
    d_rs[row * kN + col] = rs[e];
    d_ss[row * kN + col] = ss[e];
    d_p[row * kN + col] = pv[e];
  }
  // 3. The conversion's byte order.
  if (tid == 0) *cvt = __nv_cvt_float2_to_fp8x2(make_float2(1.0f, -2.0f), __NV_SATFINITE, __NV_E4M3);
}

uint8_t e4m3_of_int(int x) {  // small integers -3..3 as e4m3 bits
  static const uint8_t kBits[] = {0xC4, 0xC0, 0xB8, 0x00, 0x38, 0x40, 0x44};  // -3 -2 -1 0 1 2 3
  return kBits[x + 3];
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device\n");
    return 69;
  }
  std::vector<int> a(kM * kK), b(kN * kK), p(kM * kK);
  uint32_t state = 12345;
  const auto next = [&] {
    state = state * 1664525u + 1013904223u;
    return static_cast<int>((state >> 16) % 7) - 3;
  };
  for (int& x : a) x = next();
  for (int& x : b) x = next();
  for (int& x : p) x = next();
  std::vector<uint8_t> a8(a.size()), b8(b.size()), b_perm8(b.size());
  std::vector<float> pf(p.begin(), p.end());
  for (size_t i = 0; i < a.size(); ++i) a8[i] = e4m3_of_int(a[i]);
  for (int n = 0; n < kN; ++n) {
    for (int k = 0; k < kK; ++k) {
      b8[n * kK + k] = e4m3_of_int(b[n * kK + k]);
      b_perm8[n * kK + k] = e4m3_of_int(b[n * kK + key_of_slot(k)]);  // slot k holds key key_of_slot(k)
    }
  }
  uint8_t *a_dev, *b_dev, *bp_dev;
  float *p_dev, *rs_dev, *ss_dev, *pv_dev;
  uint32_t* cvt_dev;
  cudaMalloc(&a_dev, a8.size());
  cudaMalloc(&b_dev, b8.size());
  cudaMalloc(&bp_dev, b8.size());
  cudaMalloc(&p_dev, pf.size() * 4);
  cudaMalloc(&rs_dev, kM * kN * 4);
  cudaMalloc(&ss_dev, kM * kN * 4);
  cudaMalloc(&pv_dev, kM * kN * 4);
  cudaMalloc(&cvt_dev, 4);
  cudaMemcpy(a_dev, a8.data(), a8.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(b_dev, b8.data(), b8.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(bp_dev, b_perm8.data(), b8.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(p_dev, pf.data(), pf.size() * 4, cudaMemcpyHostToDevice);
  probe<<<1, 128>>>(a_dev, b_dev, bp_dev, p_dev, rs_dev, ss_dev, pv_dev, cvt_dev);
  std::vector<float> rs(kM * kN), ss(kM * kN), pv(kM * kN);
  uint32_t cvt = 0;
  cudaMemcpy(rs.data(), rs_dev, rs.size() * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(ss.data(), ss_dev, ss.size() * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(pv.data(), pv_dev, pv.size() * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(&cvt, cvt_dev, 4, cudaMemcpyDeviceToHost);
  if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess) {
    std::printf("CUDA error: %s\n", cudaGetErrorString(err));
    return 1;
  }
  int failures = 0;
  const auto expect = [&](const char* what, const std::vector<float>& got, const std::vector<int>& lhs) {
    int bad = 0;
    for (int m = 0; m < kM; ++m) {
      for (int n = 0; n < kN; ++n) {
        int want = 0;
        for (int k = 0; k < kK; ++k) want += lhs[m * kK + k] * b[n * kK + k];
        if (got[m * kN + n] != static_cast<float>(want) && bad++ < 5) {
          std::printf("%s: D[%d][%d] = %g, want %d\n", what, m, n, got[m * kN + n], want);
        }
      }
    }
    std::printf("%s: %s (%d of %d elements differ)\n", what, bad == 0 ? "ok" : "MISMATCH", bad, kM * kN);
    failures += bad > 0;
  };
  expect("A from registers (fragment layout) x B", rs, a);
  expect("A from shared memory (swizzled) x B", ss, a);
  expect("P through p_source x B with keys in key_of_slot order", pv, p);
  const bool low_first = (cvt & 0xFF) == 0x38 && (cvt >> 8) == 0xC0;  // 1.0 low, -2.0 high
  std::printf("cvt e4m3x2 of (1, -2): 0x%04x: %s\n", cvt, low_first ? "ok (.x in the low byte)" : "MISMATCH");
  failures += !low_first;
  return failures > 0 ? 1 : 0;
}
