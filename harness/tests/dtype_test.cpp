// dtype encode/decode: exhaustive over all 16-bit patterns (decode then encode is the identity, NaN payloads
// and -0 included), exhaustive tie and near-tie rounding between every pair of adjacent f16/bf16 values,
// overflow and underflow edges, and f32 (and f16 where the compiler has _Float16) against the hardware.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "flashcheck/inputs.h"

namespace flashcheck {
namespace {

using EncodeFn = uint16_t (*)(double);
using DecodeFn = double (*)(uint16_t);

struct Format16 {
  const char* name;
  EncodeFn encode;
  DecodeFn decode;
  uint16_t inf_bits;  // +inf
};
const Format16 kFormats[] = {{"f16", encode_f16, decode_f16, 0x7C00}, {"bf16", encode_bf16, decode_bf16, 0x7F80}};

TEST(DTypeCodec, AllSixteenBitPatternsRoundTrip) {
  for (const Format16& f : kFormats) {
    for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
      const double x = f.decode(static_cast<uint16_t>(bits));
      ASSERT_EQ(f.encode(x), bits) << f.name << " bits 0x" << std::hex << bits;
      const bool exp_all_ones = (bits & f.inf_bits) == f.inf_bits;
      const bool frac_nonzero = (bits & ~f.inf_bits & 0x7FFF) != 0;
      ASSERT_EQ(std::isnan(x), exp_all_ones && frac_nonzero) << f.name << " 0x" << std::hex << bits;
      ASSERT_EQ(std::signbit(x), (bits & 0x8000) != 0) << f.name << " 0x" << std::hex << bits;
    }
  }
}

// Between every two adjacent finite values a < b of the same sign: the midpoint goes to the one with an even
// significand, and the doubles just inside either side of the midpoint go to the nearer value.
TEST(DTypeCodec, TiesToEvenAndNearTiesExhaustive) {
  for (const Format16& f : kFormats) {
    for (uint32_t sign : {0u, 0x8000u}) {
      // Magnitudes bits and bits + 1, up to the largest finite value (inf_bits - 1).
      for (uint32_t bits = 0; bits + 1 < f.inf_bits; ++bits) {
        const uint16_t lo_bits = static_cast<uint16_t>(bits | sign), hi_bits = static_cast<uint16_t>((bits + 1) | sign);
        const double lo = f.decode(lo_bits), hi = f.decode(hi_bits);
        const double mid = lo + (hi - lo) / 2;  // exact: both fit in far fewer than 53 bits
        const uint16_t even = (lo_bits & 1) == 0 ? lo_bits : hi_bits;
        ASSERT_EQ(f.encode(mid), even) << f.name << " tie between 0x" << std::hex << lo_bits << " and 0x" << hi_bits;
        ASSERT_EQ(f.encode(std::nextafter(mid, lo)), lo_bits) << f.name << " below tie 0x" << std::hex << lo_bits;
        ASSERT_EQ(f.encode(std::nextafter(mid, hi)), hi_bits) << f.name << " above tie 0x" << std::hex << lo_bits;
      }
    }
  }
}

TEST(DTypeCodec, OverflowUnderflowAndSpecials) {
  const double inf = std::numeric_limits<double>::infinity();
  // f16: max 65504, next step 32; halfway 65520 ties to even (the max has an odd significand) -> inf.
  EXPECT_EQ(encode_f16(65504.0), 0x7BFF);
  EXPECT_EQ(encode_f16(std::nextafter(65520.0, 0.0)), 0x7BFF);
  EXPECT_EQ(encode_f16(65520.0), 0x7C00);
  EXPECT_EQ(encode_f16(-1e300), 0xFC00);
  EXPECT_EQ(encode_f16(inf), 0x7C00);
  EXPECT_EQ(dtype_max(DType::kF16), 65504.0);
  // bf16: max (2 - 2^-7) * 2^127.
  EXPECT_EQ(dtype_max(DType::kBF16), std::ldexp(2.0 - std::ldexp(1.0, -7), 127));
  EXPECT_EQ(encode_bf16(dtype_max(DType::kBF16)), 0x7F7F);
  EXPECT_EQ(encode_bf16(std::ldexp(2.0 - std::ldexp(1.0, -8), 127)), 0x7F80);  // halfway to 2^128 -> inf
  EXPECT_EQ(dtype_max(DType::kF32), static_cast<double>(std::numeric_limits<float>::max()));
  // Subnormal edges: half the smallest subnormal ties to even (zero), just above rounds up.
  EXPECT_EQ(encode_f16(std::ldexp(1.0, -25)), 0x0000);
  EXPECT_EQ(encode_f16(std::nextafter(std::ldexp(1.0, -25), 1.0)), 0x0001);
  EXPECT_EQ(encode_f16(-std::ldexp(1.0, -25)), 0x8000);
  EXPECT_EQ(encode_f16(std::ldexp(3.0, -25)), 0x0002);  // 1.5 quanta ties to even 2
  EXPECT_EQ(encode_bf16(std::ldexp(1.0, -134)), 0x0000);
  EXPECT_EQ(encode_bf16(std::ldexp(3.0, -134)), 0x0002);
  // Largest subnormal rounding up becomes the smallest normal.
  EXPECT_EQ(encode_f16(std::ldexp(1023.75, -24)), 0x0400);
  EXPECT_EQ(decode_f16(0x0400), std::ldexp(1.0, -14));
  // A double subnormal is far below every format's quantum: signed zero.
  EXPECT_EQ(encode_f16(std::numeric_limits<double>::denorm_min()), 0x0000);
  EXPECT_EQ(encode_bf16(-std::numeric_limits<double>::denorm_min()), 0x8000);
  EXPECT_EQ(encode_f32(-std::numeric_limits<double>::denorm_min()), 0x80000000u);
  // Signed zeros.
  EXPECT_EQ(encode_f16(-0.0), 0x8000);
  EXPECT_EQ(encode_bf16(-0.0), 0x8000);
  EXPECT_TRUE(std::signbit(decode_bf16(0x8000)));
  // NaN: sign and leading payload bits kept; a payload that would vanish becomes the quiet bit.
  const double neg_nan = std::bit_cast<double>(0xFFF8000000000000ull);
  EXPECT_EQ(encode_f16(neg_nan), 0xFE00);
  EXPECT_EQ(encode_bf16(neg_nan), 0xFFC0);
  const double low_payload_nan = std::bit_cast<double>(0x7FF0000000000001ull);  // signalling, payload in low bits
  EXPECT_EQ(encode_f16(low_payload_nan), 0x7E00);
  EXPECT_EQ(encode_f32(low_payload_nan), 0x7FC00000u);
  EXPECT_EQ(encode_f16(decode_f16(0x7C01)), 0x7C01);  // signalling f16 NaN survives the round trip
  // round_to_dtype.
  EXPECT_EQ(round_to_dtype(DType::kBF16, 1.0 + std::ldexp(1.0, -8)), 1.0);  // tie to even
  EXPECT_EQ(round_to_dtype(DType::kF16, 0.1), 0.0999755859375);
}

// f32 against the hardware's double -> float conversion (round to nearest even), over random bit patterns
// concentrated near float's range so that overflow, subnormals and ties are all exercised.
TEST(DTypeCodec, F32MatchesHardwareConversion) {
  constexpr int kSamples = 1 << 20;
  const uint32_t key[2] = {0xF32, 0xC0DEC};
  for (int n = 0; n < kSamples; ++n) {
    const uint32_t counter[4] = {static_cast<uint32_t>(n), 0, 0, 0};
    uint32_t w[4];
    Philox4x32::generate(counter, key, w);
    // Biased exponent 1023 +- 160 covers float's normal, subnormal and overflow ranges; low significand bits
    // are cleared on every fourth sample to land exactly on ties.
    const uint64_t exponent = 1023 - 160 + w[2] % 321;
    uint64_t frac = (uint64_t{w[0]} << 32 | w[1]) & ((uint64_t{1} << 52) - 1);
    if (w[3] % 4 == 0) frac &= ~((uint64_t{1} << 28) - 1);
    const double x = std::bit_cast<double>(uint64_t{w[3] >> 31} << 63 | exponent << 52 | frac);
    ASSERT_EQ(encode_f32(x), std::bit_cast<uint32_t>(static_cast<float>(x))) << std::hexfloat << x;
    ASSERT_EQ(decode_f32(encode_f32(x)), static_cast<double>(static_cast<float>(x)));
  }
}

#if defined(__FLT16_MAX__)
// Where the compiler has _Float16, its double -> _Float16 conversion (one correctly rounded step in libgcc
// or the hardware) is an independent reference.
TEST(DTypeCodec, F16MatchesCompilerFloat16) {
  constexpr int kSamples = 1 << 20;
  const uint32_t key[2] = {0xF16, 0xC0DEC};
  for (int n = 0; n < kSamples; ++n) {
    const uint32_t counter[4] = {static_cast<uint32_t>(n), 0, 0, 0};
    uint32_t w[4];
    Philox4x32::generate(counter, key, w);
    const uint64_t exponent = 1023 - 30 + w[2] % 50;
    uint64_t frac = (uint64_t{w[0]} << 32 | w[1]) & ((uint64_t{1} << 52) - 1);
    if (w[3] % 4 == 0) frac &= ~((uint64_t{1} << 41) - 1);
    const double x = std::bit_cast<double>(uint64_t{w[3] >> 31} << 63 | exponent << 52 | frac);
    const _Float16 h = static_cast<_Float16>(x);
    ASSERT_EQ(encode_f16(x), std::bit_cast<uint16_t>(h)) << std::hexfloat << x;
  }
}
#endif

}  // namespace
}  // namespace flashcheck
