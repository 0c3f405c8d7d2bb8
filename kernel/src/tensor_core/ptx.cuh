// Thin wrappers over the sm_80+ instructions the tensor-core family uses: cp.async (16-byte, zero-filling),
// ldmatrix (x4, plain and transposed), mma.sync m16n8k16 with fp32 accumulators, ex2.approx.ftz, wgmma, TMA and
// mbarriers. Shared-memory operands are 32-bit shared-window addresses.
// Device code only; every function is a single instruction or a fixed handful.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "common/dtype.cuh"
#include "common/mutants.cuh"
#include "families.h"
#include "tensor_core/descriptor.h"

// External-linkage helpers live in the build variant's namespace (families.h) like the kernels.
namespace flashcheck::detail {
inline namespace FLASHCHECK_KERNEL_VARIANT {
namespace tc_kernel {

__device__ __forceinline__ uint32_t smem_address(const void* ptr) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(ptr));
}

// Copies src_bytes (0..16) from global memory and zero-fills the rest of the 16-byte chunk; with
// src_bytes == 0 nothing is read, so tails and padded columns never touch memory outside the tensors.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

// Waits until at most kPending of this thread's committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

// The same wait, told to the perturbed builds' bookkeeping of the copy groups (CpAsyncShadow, common/mutants.cuh).
template <int kPending, int kSlots>
__device__ __forceinline__ void cp_async_wait(CpAsyncShadow<kSlots>& copies) {
  cp_async_wait<kPending>();
  copies.waited(kPending);
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ uint4 ld_shared_v4(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr));
  return v;
}

__device__ __forceinline__ uint32_t ld_shared_b32(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(addr));
  return v;
}

__device__ __forceinline__ void st_shared_b32(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v));
}

__device__ __forceinline__ void st_shared_v4(uint32_t addr, uint4 v) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w));
}

// One 16-byte chunk of shared memory from the first src_bytes (0..16, even) bytes at src, the rest zeros. A whole
// chunk goes by cp.async; a partial or empty one is read with 2-byte loads of exactly its bytes (none for an empty
// one) and stored by the thread itself, so no access reaches past a tensor's last element, not even for a tensor
// shorter than a chunk: compute-sanitizer's memcheck counts a cp.async's whole 16 bytes against the allocation,
// whatever its src-size. The stores are visible after the barrier that follows the copies' wait.
__device__ __forceinline__ void copy_chunk_16(uint32_t dst, const void* src, int src_bytes) {
  if (src_bytes == 16) {
    cp_async_16(dst, src, 16);
    return;
  }
  const auto* halves = static_cast<const uint16_t*>(src);
  uint32_t w[4] = {0u, 0u, 0u, 0u};
#pragma unroll
  for (int i = 0; i < 7; ++i) {
    if (2 * i < src_bytes) w[i / 2] |= static_cast<uint32_t>(halves[i]) << (16 * (i % 2));
  }
  st_shared_v4(dst, make_uint4(w[0], w[1], w[2], w[3]));
}

// 2^x with the MUFU approximation, subnormal results flushed to zero: the error model assumes exactly this.
__device__ __forceinline__ float ex2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Per-dtype mma and conversions. `lo` lands in the low half (the lower column index of a fragment pair).
// ---- sm_90a warpgroup MMA support (the MMAs themselves: wgmma_ops.cuh, generated).
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}
// Shared-memory writes of the generic proxy (cp.async, st.shared) made visible to the async proxy (wgmma).
__device__ __forceinline__ void fence_proxy_async_shared() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// Registers an in-flight wgmma reads or writes: an empty asm that "modifies" them pins their uses to this
// point, so the compiler neither reads accumulators before the wait nor reuses A registers before it.
template <int N>
__device__ __forceinline__ void fence_operands(float (&d)[N][4]) {
#pragma unroll
  for (int j = 0; j < N; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(d[j][e])::"memory");
}
template <int N>
__device__ __forceinline__ void fence_operands(uint32_t (&a)[N][4]) {
#pragma unroll
  for (int j = 0; j < N; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(a[j][e])::"memory");
}
// A value every lane of the warp holds equal, stated so: lane 0's copy broadcast to all. ptxas then keeps it in a
// uniform register, and the wgmma descriptors built from it need no per-operand R2UR moves. All 32 lanes must
// call it (the wgmma callers are warp-wide .sync.aligned anyway).
__device__ __forceinline__ uint32_t warp_uniform(uint32_t v) { return __shfl_sync(0xffffffffu, v, 0); }
// wgmma shared-memory matrix descriptors (descriptor.h, host-visible for the CPU tier's check).
using tensor_core::descriptor_plus;
using tensor_core::sw128_descriptor;

// ---- sm_90a warp-specialized pipeline (kernel_ws.cuh): mbarriers, TMA (bulk tensor copies), named barriers,
// register reallocation between warpgroups. Shared addresses are 32-bit; tensor maps are generic addresses of
// __grid_constant__ kernel parameters.
__device__ __forceinline__ void mbarrier_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// Makes the initialized barriers visible to the async proxy (TMA) before any copy signals them.
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void mbarrier_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// One arrival that also announces `bytes` of TMA transactions the current phase must see before it completes.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
// Waits until the phase of parity `parity` has completed (a fresh barrier counts its phase "-1", parity 1, as
// completed, so a producer's first wait on an empty-slot barrier passes at once).
__device__ __forceinline__ void mbarrier_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (done == 0);
}
// TMA: box of a 4-d tensor map at coordinates (c0 innermost) into shared memory, completing `bytes` on `bar`.
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const void* tensor_map, uint32_t bar, int c0, int c1, int c2,
                                            int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
      "[%6];\n" ::"r"(dst),
      "l"(tensor_map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
      : "memory");
}
// TMA: shared memory box to a 4-d tensor map; elements outside the tensor are not written.
__device__ __forceinline__ void tma_store_4d(const void* tensor_map, uint32_t src, int c0, int c1, int c2, int c3) {
  asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n" ::"l"(
                   tensor_map),
               "r"(src), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
               : "memory");
}
__device__ __forceinline__ void tma_store_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// The committed stores have read their shared memory (it may be overwritten).
__device__ __forceinline__ void tma_store_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }
// The committed stores are complete (their global writes performed).
__device__ __forceinline__ void tma_store_wait_all() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }
__device__ __forceinline__ void prefetch_tensor_map(const void* tensor_map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(tensor_map) : "memory");
}
// Named barriers (ids 1..15; 0 is __syncthreads) over `threads` threads, a multiple of 32.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
// bar.red.or: true in every participating thread iff `pred` is true in any.
__device__ __forceinline__ bool named_barrier_or(int id, int threads, bool pred) {
  uint32_t r;
  asm volatile(
      "{\n .reg .pred p, q;\n setp.ne.u32 p, %1, 0;\n bar.red.or.pred q, %2, %3, p;\n selp.u32 %0, 1, 0, q;\n}\n"
      : "=r"(r)
      : "r"(static_cast<uint32_t>(pred)), "r"(id), "r"(threads)
      : "memory");
  return r != 0;
}
// Register reallocation per warpgroup (every warp of the warpgroup executes the same instruction).
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

// The mma.sync m16n8k16 of storage type T, with the dtype table's conversions (common/dtype.cuh: pack, unpack,
// the non-finite exponent masks).
template <typename T>
struct DtypeOps;

template <>
struct DtypeOps<__nv_bfloat16> : DeviceDtype<__nv_bfloat16> {
  __device__ static __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

template <>
struct DtypeOps<__half> : DeviceDtype<__half> {
  __device__ static __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

}  // namespace tc_kernel
}  // namespace FLASHCHECK_KERNEL_VARIANT
}  // namespace flashcheck::detail
