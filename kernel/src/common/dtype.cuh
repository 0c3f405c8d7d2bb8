// The device side of the dtype table: for each storage type T (float, __half, __nv_bfloat16) its DType, the
// widening load, the round-to-nearest-even store the contract names, 16-byte vector loads, pairs packed into a
// 32-bit word (low half = first element) and the exponent masks that tell a non-finite half of such a word. The
// host side of the table is flashcheck/dtype.h; the tests hold the two to the same bits.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "flashcheck/attention.h"

namespace flashcheck::detail {

inline constexpr int kVectorBytes = 16;  // one 128-bit load

template <typename T>
struct DeviceDtype;

template <>
struct DeviceDtype<float> {
  static constexpr DType kDType = DType::kF32;
  static constexpr int kVector = kVectorBytes / 4;
  static __device__ __forceinline__ float load(const float* p) { return *p; }
  static __device__ __forceinline__ float store(float x) { return x; }
  static __device__ __forceinline__ void load_vector(const float* p, float (&out)[kVector]) {
    const float4 v = *reinterpret_cast<const float4*>(p);
    out[0] = v.x;
    out[1] = v.y;
    out[2] = v.z;
    out[3] = v.w;
  }
};

// 16-byte vector loads of a 2-byte type: four 32-bit words, each a pair widened by the type's unpack.
template <typename T, class Self>
struct PairedDtype {
  static constexpr int kVector = kVectorBytes / 2;
  static __device__ __forceinline__ void load_vector(const T* p, float (&out)[kVector]) {
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = Self::unpack(words[i]);
      out[2 * i] = f.x;
      out[2 * i + 1] = f.y;
    }
  }
};

template <>
struct DeviceDtype<__half> : PairedDtype<__half, DeviceDtype<__half>> {
  static constexpr DType kDType = DType::kF16;
  static constexpr uint32_t kExpLo = 0x00007C00u;  // exponent field of the low half: all ones = inf/NaN
  static constexpr uint32_t kExpHi = 0x7C000000u;
  static __device__ __forceinline__ float load(const __half* p) { return __half2float(*p); }
  static __device__ __forceinline__ __half store(float x) { return __float2half_rn(x); }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    uint32_t r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
  }
  static __device__ __forceinline__ float2 unpack(uint32_t r) {
    const __half2 h = *reinterpret_cast<const __half2*>(&r);
    return __half22float2(h);
  }
};

template <>
struct DeviceDtype<__nv_bfloat16> : PairedDtype<__nv_bfloat16, DeviceDtype<__nv_bfloat16>> {
  static constexpr DType kDType = DType::kBF16;
  static constexpr uint32_t kExpLo = 0x00007F80u;
  static constexpr uint32_t kExpHi = 0x7F800000u;
  static __device__ __forceinline__ float load(const __nv_bfloat16* p) { return __bfloat162float(*p); }
  static __device__ __forceinline__ __nv_bfloat16 store(float x) { return __float2bfloat16_rn(x); }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
  }
  static __device__ __forceinline__ float2 unpack(uint32_t r) {
    return make_float2(__uint_as_float(r << 16), __uint_as_float(r & 0xFFFF0000u));
  }
};

}  // namespace flashcheck::detail
