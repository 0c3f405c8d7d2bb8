// Float-based number formats for the host model: round-to-nearest-even fp32 -> fp16 / bf16 bits and back
// (what the GPU's __float2half_rn / __float2bfloat16_rn do), tf32 rounding as the tensor-core split uses
// it, and value rounding to fp8 e4m3 for the "P one format coarser" defect. Header-only, host-only, bit
// manipulation only (no libm), so the model rounds identically on every machine.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#include "flashcheck/attention.h"

namespace flashcheck::detail::host {

inline constexpr uint32_t kF32SignMask = 0x80000000u;
inline constexpr uint32_t kF32AbsMask = 0x7fffffffu;
inline constexpr uint32_t kF32ExpMask = 0x7f800000u;
inline constexpr int kF32MantissaBits = 23;
inline constexpr int kF32ExpBias = 127;

inline uint32_t bits_of(float x) { return std::bit_cast<uint32_t>(x); }
inline float float_of(uint32_t bits) { return std::bit_cast<float>(bits); }

// fp32 -> bf16: drop 16 mantissa bits with round-to-nearest-even; overflow rounds to inf, NaN stays NaN
// (quietened, sign kept).
inline uint16_t float_to_bf16_bits(float x) {
  constexpr uint32_t kDropped = 16;
  constexpr uint32_t kQuietBit = 0x0040u;
  const uint32_t bits = bits_of(x);
  if ((bits & kF32AbsMask) > kF32ExpMask) return static_cast<uint16_t>((bits >> kDropped) | kQuietBit);
  const uint32_t half_ulp_minus_one = (1u << (kDropped - 1)) - 1u;
  const uint32_t lsb = (bits >> kDropped) & 1u;  // ties go to the even neighbour
  return static_cast<uint16_t>((bits + half_ulp_minus_one + lsb) >> kDropped);
}
inline float bf16_bits_to_float(uint16_t bits) { return float_of(uint32_t{bits} << 16); }

// fp32 -> fp16 (1 sign, 5 exponent bits with bias 15, 10 mantissa bits, subnormals), round-to-nearest-even.
inline uint16_t float_to_f16_bits(float x) {
  constexpr int kF16MantissaBits = 10;
  constexpr int kF16ExpBias = 15;
  constexpr uint32_t kF16Inf = 0x7c00u;
  constexpr uint32_t kF16QuietNan = 0x7e00u;
  constexpr int kF16MaxBiasedExp = 30;
  const uint32_t bits = bits_of(x);
  const uint16_t sign = static_cast<uint16_t>((bits & kF32SignMask) >> 16);
  const uint32_t abs = bits & kF32AbsMask;
  if (abs > kF32ExpMask) return static_cast<uint16_t>(sign | kF16QuietNan | ((abs >> 13) & 0x1ffu));
  if (abs == kF32ExpMask) return static_cast<uint16_t>(sign | kF16Inf);
  const int exp = static_cast<int>(abs >> kF32MantissaBits) - kF32ExpBias;  // unbiased fp32 exponent
  uint32_t mantissa = abs & ((1u << kF32MantissaBits) - 1u);
  int f16_exp = exp + kF16ExpBias;
  int shift = kF32MantissaBits - kF16MantissaBits;  // mantissa bits dropped
  if (f16_exp <= 0) {
    // Subnormal in fp16 (or underflow): make the implicit bit explicit and shift further right.
    if (abs == 0) return sign;
    mantissa |= 1u << kF32MantissaBits;
    shift += 1 - f16_exp;
    f16_exp = 0;
    if (shift > kF32MantissaBits + 2) return sign;  // below half the smallest subnormal: rounds to zero
  }
  const uint32_t kept = mantissa >> shift;
  const uint32_t rest = mantissa & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  uint32_t result = (static_cast<uint32_t>(f16_exp) << kF16MantissaBits) + (kept & ((1u << kF16MantissaBits) - 1u));
  if (f16_exp == 0) result = kept;  // subnormal: kept already holds the (shifted) implicit bit
  if (rest > half || (rest == half && (result & 1u))) ++result;  // a carry may step into the next binade: correct
  if (f16_exp > kF16MaxBiasedExp || result >= kF16Inf) return static_cast<uint16_t>(sign | kF16Inf);
  return static_cast<uint16_t>(sign | result);
}

inline float f16_bits_to_float(uint16_t h) {
  constexpr uint32_t kF16ExpMask = 0x7c00u;
  constexpr uint32_t kF16MantMask = 0x03ffu;
  const uint32_t sign = (uint32_t{h} & 0x8000u) << 16;
  const uint32_t exp = (uint32_t{h} & kF16ExpMask) >> 10;
  const uint32_t mant = uint32_t{h} & kF16MantMask;
  if (exp == 0x1fu) return float_of(sign | kF32ExpMask | (mant << 13));  // inf / NaN
  if (exp != 0) return float_of(sign | ((exp - 15 + kF32ExpBias) << kF32MantissaBits) | (mant << 13));
  // Subnormal: mant * 2^-24, exact in fp32.
  const float magnitude = static_cast<float>(mant) * std::ldexp(1.0f, -24);
  return sign != 0 ? -magnitude : magnitude;
}

// Value of x rounded to `dtype` (round-to-nearest-even), as fp32.
inline float round_to(DType dtype, float x) {
  switch (dtype) {
    case DType::kF16: return f16_bits_to_float(float_to_f16_bits(x));
    case DType::kBF16: return bf16_bits_to_float(float_to_bf16_bits(x));
    case DType::kF32: break;
  }
  return x;
}

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

}  // namespace flashcheck::detail::host
