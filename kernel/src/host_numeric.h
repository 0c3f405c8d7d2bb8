// Number formats of the host model: fp32 -> fp16 / bf16 bits and back (names the model uses, over the one
// dtype table, dtype.h, which the harness shares), tf32 rounding as the tensor-core split uses it, and
// value rounding to fp8 e4m3 for the "P one format coarser" defect. Header-only, host-only, bit
// manipulation only for the dtypes and tf32, so the model rounds identically on every machine.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "flashcheck/attention.h"
#include "flashcheck/dtype.h"

namespace flashcheck::detail::host {

inline constexpr uint32_t kF32ExpMask = 0x7f800000u;

inline uint32_t bits_of(float x) { return std::bit_cast<uint32_t>(x); }
inline float float_of(uint32_t bits) { return std::bit_cast<float>(bits); }

// fp32 <-> fp16 / bf16 bits and fp32 values rounded to a dtype: the dtype table's float codec (dtype.h),
// bit for bit what __float2half_rn / __float2bfloat16_rn give: round-to-nearest-even with overflow to inf
// and subnormals, every NaN to the canonical NaN 0x7fff. Decoding is exact, NaN payloads bit for bit.
inline uint16_t float_to_bf16_bits(float x) { return static_cast<uint16_t>(encode_dtype_from_float(DType::kBF16, x)); }
inline float bf16_bits_to_float(uint16_t bits) { return decode_dtype_to_float(DType::kBF16, bits); }
inline uint16_t float_to_f16_bits(float x) { return static_cast<uint16_t>(encode_dtype_from_float(DType::kF16, x)); }
inline float f16_bits_to_float(uint16_t bits) { return decode_dtype_to_float(DType::kF16, bits); }
// Value of x rounded to `dtype` (round-to-nearest-even), as fp32; f32 returns x unchanged.
inline float round_to(DType dtype, float x) { return round_float_to_dtype(dtype, x); }

// tf32 (10 explicit mantissa bits) with round-half-away-from-zero on the magnitude, as cvt.rna.tf32.f32:
// add half an ulp of the 13 dropped bits and truncate. Inf and NaN pass through.
inline float round_to_tf32(float x) {
  constexpr uint32_t kDroppedMask = 0x1fffu;
  constexpr uint32_t kHalfUlp = 0x1000u;
  const uint32_t bits = bits_of(x);
  if ((bits & kF32ExpMask) == kF32ExpMask) return x;
  return float_of((bits + kHalfUlp) & ~kDroppedMask);
}

// fp8 e4m3 (OCP): 3 mantissa bits, exponent bias 7, normals from 2^-6, subnormals down to 2^-9, largest
// finite 448, no inf (out of range becomes NaN). Round-to-nearest-even on the value.
inline float round_to_e4m3(float x) {
  constexpr int kMantissaBits = 3;
  constexpr int kMinNormalExp = -6;
  constexpr float kMaxFinite = 448.0f;
  if (std::isnan(x) || x == 0.0f) return x;
  const float magnitude = std::fabs(x);
  int exp = 0;
  std::frexp(magnitude, &exp);  // magnitude = f * 2^exp, f in [0.5, 1)
  const int unbiased = exp - 1 < kMinNormalExp ? kMinNormalExp : exp - 1;
  const float ulp = std::ldexp(1.0f, unbiased - kMantissaBits);
  const float rounded = std::nearbyint(magnitude / ulp) * ulp;  // default mode: ties to even; scaling is exact
  if (rounded > kMaxFinite) return std::nanf("");
  return x < 0.0f ? -rounded : rounded;
}

// Element `offset` of a dtype tensor at `base`, decoded to fp32; and x rounded to the dtype and stored there.
inline float load_element(DType dtype, const void* base, int64_t offset) {
  const auto* bytes = static_cast<const unsigned char*>(base);
  if (dtype == DType::kF32) {
    float x;
    std::memcpy(&x, bytes + offset * int64_t{sizeof(float)}, sizeof(float));
    return x;
  }
  uint16_t bits;
  std::memcpy(&bits, bytes + offset * int64_t{sizeof(uint16_t)}, sizeof(uint16_t));
  return dtype == DType::kF16 ? detail::host::f16_bits_to_float(bits) : detail::host::bf16_bits_to_float(bits);
}

inline void store_element(DType dtype, void* base, int64_t offset, float x) {
  auto* bytes = static_cast<unsigned char*>(base);
  if (dtype == DType::kF32) {
    std::memcpy(bytes + offset * int64_t{sizeof(float)}, &x, sizeof(float));
    return;
  }
  const uint16_t bits =
      dtype == DType::kF16 ? detail::host::float_to_f16_bits(x) : detail::host::float_to_bf16_bits(x);
  std::memcpy(bytes + offset * int64_t{sizeof(uint16_t)}, &bits, sizeof(uint16_t));
}

}  // namespace flashcheck::detail::host
