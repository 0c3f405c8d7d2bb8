// Number formats of the host model: fp32 -> fp16 / bf16 bits and back (names the model uses, over the one
// dtype table, dtype.h, which the harness shares), tf32 rounding as the tensor-core split uses it, and
// fp8 e4m3 as the kernel's satfinite conversion writes it. Header-only, host-only, bit
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

// fp8 e4m3 (OCP), as cvt.rn.satfinite writes it: round to nearest even, 448 and beyond saturate to 448 (the
// dtype table's float codec).
inline float round_to_e4m3(float x) { return round_to(DType::kF8E4M3, x); }

// Hopper's fp8 wgmma (e4m3 x e4m3 into fp32, k = 32 products a step), one step: the products a[i] * b[i * b_stride]
// (exact in fp32: 4-bit significands) and the accumulator are aligned to the largest magnitude among them, each cut
// toward zero to a multiple of 2^(e - 14) where that largest lies in [2^(e-1), 2^e), and summed; the sum goes back
// to fp32 toward zero. 14 bits, measured on the H200 (tools/dev/fp8_wgmma_alignment.cu, docs/error-model.md §3). A
// non-finite addend gives the plain sum.
inline constexpr int kFp8MmaKeptBits = 14;
inline constexpr int kFp8MmaK = 32;
inline float fp8_mma_step(float acc, const float* a, const float* b, int64_t count, int64_t b_stride) {
  double largest = std::fabs(static_cast<double>(acc));
  bool finite = std::isfinite(acc);
  for (int64_t i = 0; i < count; ++i) {
    const double product = static_cast<double>(a[i]) * static_cast<double>(b[i * b_stride]);
    finite = finite && std::isfinite(product);
    largest = std::fmax(largest, std::fabs(product));
  }
  if (!finite) {
    double sum = acc;
    for (int64_t i = 0; i < count; ++i) sum += static_cast<double>(a[i]) * static_cast<double>(b[i * b_stride]);
    return static_cast<float>(sum);
  }
  if (largest == 0.0) return 0.0f;
  int e = 0;
  std::frexp(largest, &e);  // largest in [2^(e-1), 2^e)
  const double unit = std::ldexp(1.0, e - kFp8MmaKeptBits);
  // Each cut addend is a whole number of units below 2^14; 33 of them sum exactly in a double.
  double units = std::trunc(static_cast<double>(acc) / unit);
  for (int64_t i = 0; i < count; ++i) units += std::trunc(static_cast<double>(a[i]) * static_cast<double>(b[i * b_stride]) / unit);
  const double sum = units * unit;
  const float nearest = static_cast<float>(sum);
  // Toward zero: where rounding to nearest went past the sum, the float one step toward zero.
  return std::fabs(static_cast<double>(nearest)) > std::fabs(sum) ? std::nextafter(nearest, 0.0f) : nearest;
}

// Element `offset` of a dtype tensor at `base`, decoded to fp32; and x rounded to the dtype and stored there: the
// dtype_size(dtype) low bytes of the encoded value, which are its first bytes in memory on a little-endian host.
static_assert(std::endian::native == std::endian::little, "host_numeric.h: elements are stored little-endian");
inline float load_element(DType dtype, const void* base, int64_t offset) {
  const int64_t size = dtype_size(dtype);
  uint32_t bits = 0;
  std::memcpy(&bits, static_cast<const unsigned char*>(base) + offset * size, static_cast<size_t>(size));
  return decode_dtype_to_float(dtype, bits);
}

inline void store_element(DType dtype, void* base, int64_t offset, float x) {
  const int64_t size = dtype_size(dtype);
  const uint32_t bits = encode_dtype_from_float(dtype, x);
  std::memcpy(static_cast<unsigned char*>(base) + offset * size, &bits, static_cast<size_t>(size));
}

}  // namespace flashcheck::detail::host
