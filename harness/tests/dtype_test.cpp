// The dtype table (dtype.h) and its codec. From double: exhaustive over all 16-bit patterns (decode then
// encode is the identity, NaN payloads and -0 included), exhaustive tie and near-tie rounding between every
// pair of adjacent f16/bf16 values, overflow and underflow edges, f32 (and f16 where the compiler has
// _Float16) against the hardware. From float (the host model's conversions, the GPU's __float2half_rn and
// __float2bfloat16_rn): bit for bit against a second, fp32-based implementation and against the double path
// outside NaN; every NaN to CUDA's canonical 0x7fff. Names and sizes: one table per enum (the mask table's
// takes_window against can_implement).
#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <iterator>
#include <optional>
#include <utility>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "flashcheck/dtype.h"
#include "flashcheck/inputs.h"
#include "flashcheck/mask_names.h"
#include "flashcheck/oracle_bridge.h"

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

// ---- names and sizes

TEST(DTypeTable, NamesSizesAndLookupsComeFromOneRowPerDtype) {
  ASSERT_EQ(kDTypes.size(), 4u);
  for (const DTypeInfo& info : kDTypes) {
    EXPECT_STREQ(to_string(info.dtype), info.name);
    EXPECT_EQ(dtype_size(info.dtype), info.size_bytes);
    EXPECT_EQ(dtype_from_name(info.name), info.dtype);
    EXPECT_EQ(find_dtype(info.dtype), &info);
    EXPECT_EQ(info.size_bytes * 8, 1 + info.format.exp_bits + info.format.frac_bits) << info.name;
  }
  EXPECT_EQ(dtype_from_name("f64"), std::nullopt);
  EXPECT_EQ(dtype_from_name(""), std::nullopt);
  EXPECT_EQ(find_dtype(static_cast<DType>(7)), nullptr);
  EXPECT_EQ(dtype_size(static_cast<DType>(7)), 0);
  EXPECT_STREQ(to_string(static_cast<DType>(7)), "invalid-dtype");
  for (const MaskName& entry : kMaskNames) {
    EXPECT_STREQ(to_string(entry.mask), entry.name);
    EXPECT_EQ(mask_from_name(entry.name), entry.mask);
    // The table's takes_window is can_implement's rule: a window is accepted exactly with these masks.
    EXPECT_EQ(takes_window(entry.mask), entry.takes_window);
    Params p = make_params(DType::kF32, 0, 1, 1, 1, 1, 8, entry.mask);
    p.window_left = 3;
    EXPECT_EQ(can_implement(p).ok(), entry.takes_window) << entry.name << ": " << can_implement(p).message();
  }
  EXPECT_FALSE(takes_window(static_cast<Mask>(7)));
  EXPECT_EQ(mask_from_name("causal"), std::nullopt);
  EXPECT_STREQ(to_string(static_cast<Mask>(7)), "invalid-mask");
}

// The rows themselves against attention.h's formulas, written out by hand: the kernel's rule and the oracle
// bridge both read a mask's alignment and fixed window from its row, so a wrong row would pass their cross-check.
TEST(MaskTable, EachRowSeesTheKeysAttentionHDefines) {
  struct Expected {
    const char* name;
    int64_t window_left, window_right;
    std::array<std::pair<int64_t, int64_t>, 3> keys;  // [begin, end) of rows 0, 1, 2 with seqlen_q 3, seqlen_k 5
  };
  const Expected expected[] = {
      {"none", -1, -1, {{{0, 5}, {0, 5}, {0, 5}}}},
      {"causal-br", -1, -1, {{{0, 3}, {0, 4}, {0, 5}}}},  // j <= i + 2
      {"causal-tl", -1, -1, {{{0, 1}, {0, 2}, {0, 3}}}},  // j <= i
      {"window-br", 1, 0, {{{1, 3}, {2, 4}, {3, 5}}}},    // i + 1 <= j <= i + 2
      {"window-tl", 1, 0, {{{0, 1}, {0, 2}, {1, 3}}}},    // i - 1 <= j <= i
  };
  ASSERT_EQ(std::size(expected), kMaskNames.size());
  for (const Expected& e : expected) {
    const std::optional<Mask> mask = mask_from_name(e.name);
    ASSERT_TRUE(mask.has_value()) << e.name;
    Params p = make_params(DType::kF32, 1, 1, 1, 3, 5, 8, *mask);
    p.window_left = e.window_left;
    p.window_right = e.window_right;
    oracle::Problem problem;
    problem.batch = problem.heads_q = problem.heads_kv = 1;
    problem.seqlen_q = 3;
    problem.seqlen_k = 5;
    problem.head_dim = 8;
    problem.visibility = to_oracle(*mask, e.window_left, e.window_right);
    for (int64_t i = 0; i < 3; ++i) {
      const KeyRange kernel = visible_key_range(p, i);
      const oracle::KeySpan judged = oracle::visible_keys(problem, i);
      EXPECT_EQ(std::pair(kernel.begin, kernel.end), e.keys[i]) << e.name << " row " << i << " (kernel's rule)";
      EXPECT_EQ(std::pair(judged.begin, judged.end), e.keys[i]) << e.name << " row " << i << " (oracle bridge)";
    }
  }
}

TEST(DTypeTable, RowsCarryTheFormatsIeee754Defines) {
  struct Expected {
    const char* name;
    int significand_bits;
    double min_normal;
    bool tensor_core_input;
  };
  const Expected expected[] = {{"f32", 24, 0x1p-126, false},
                               {"f16", 11, 0x1p-14, true},
                               {"bf16", 8, 0x1p-126, true},
                               {"f8e4m3", 4, 0x1p-6, true}};
  ASSERT_EQ(std::size(expected), kDTypes.size());
  for (const Expected& e : expected) {
    const std::optional<DType> dtype = dtype_from_name(e.name);
    ASSERT_TRUE(dtype.has_value()) << e.name;
    const DTypeInfo& info = *find_dtype(*dtype);
    EXPECT_EQ(info.significand_bits(), e.significand_bits) << e.name;
    EXPECT_EQ(info.min_normal(), e.min_normal) << e.name;
    EXPECT_EQ(info.tensor_core_input, e.tensor_core_input) << e.name;
    EXPECT_EQ(info.c_code, static_cast<int32_t>(info.dtype)) << e.name;
    EXPECT_STREQ(oracle::to_string(to_oracle(info.dtype)), e.name);
  }
}

// ---- from float: the host model's conversions

// Reference: a second implementation written on fp32 bits directly (add half an ulp minus one plus the kept
// lowest bit, then truncate; f16 subnormals by an explicit shift), independent of the table's rounding.
// NaN: 0x7fff whatever the sign and payload. The GPU's conversions agree: on an H100 (CUDA 13.0) all 2^32
// fp32 patterns through __float2half_rn and __float2bfloat16_rn matched the table by a position-weighted
// checksum, NaN and non-NaN patterns apart.
namespace reference {

uint16_t float_to_bf16_bits(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return 0x7fffu;
  const uint32_t lsb = (bits >> 16) & 1u;
  return static_cast<uint16_t>((bits + 0x7fffu + lsb) >> 16);
}

uint16_t float_to_f16_bits(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint16_t sign = static_cast<uint16_t>((bits & 0x80000000u) >> 16);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return 0x7fffu;
  if (abs == 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u);
  int f16_exp = static_cast<int>(abs >> 23) - 127 + 15;
  uint32_t mantissa = abs & 0x7fffffu;
  int shift = 13;
  if (f16_exp <= 0) {
    if (abs == 0) return sign;
    mantissa |= 1u << 23;
    shift += 1 - f16_exp;
    f16_exp = 0;
    if (shift > 25) return sign;
  }
  const uint32_t kept = mantissa >> shift;
  const uint32_t rest = mantissa & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  uint32_t result = f16_exp == 0 ? kept : (static_cast<uint32_t>(f16_exp) << 10) + (kept & 0x3ffu);
  if (rest > half || (rest == half && (result & 1u))) ++result;
  if (f16_exp > 30 || result >= 0x7c00u) return static_cast<uint16_t>(sign | 0x7c00u);
  return static_cast<uint16_t>(sign | result);
}

uint32_t f16_bits_to_float_bits(uint16_t h) {
  const uint32_t sign = (uint32_t{h} & 0x8000u) << 16;
  const uint32_t exp = (uint32_t{h} & 0x7c00u) >> 10;
  const uint32_t mant = uint32_t{h} & 0x3ffu;
  if (exp == 0x1fu) return sign | 0x7f800000u | (mant << 13);
  if (exp != 0) return sign | ((exp - 15 + 127) << 23) | (mant << 13);
  const float magnitude = static_cast<float>(mant) * std::ldexp(1.0f, -24);
  return sign | std::bit_cast<uint32_t>(magnitude);
}

}  // namespace reference

// Compares the table's float path with the reference on fp32 pattern `bits`; false (and a message) on the
// first difference.
::testing::AssertionResult float_path_matches(uint32_t bits) {
  const float x = std::bit_cast<float>(bits);
  const uint32_t f16 = encode_dtype_from_float(DType::kF16, x), bf16 = encode_dtype_from_float(DType::kBF16, x);
  if (f16 != reference::float_to_f16_bits(x) || bf16 != reference::float_to_bf16_bits(x)) {
    return ::testing::AssertionFailure() << std::hex << "fp32 0x" << bits << ": f16 0x" << f16 << " (reference 0x"
                                         << reference::float_to_f16_bits(x) << "), bf16 0x" << bf16
                                         << " (reference 0x" << reference::float_to_bf16_bits(x) << ")";
  }
  if (encode_dtype_from_float(DType::kF32, x) != bits) {
    return ::testing::AssertionFailure() << std::hex << "fp32 0x" << bits << " is not stored unchanged as f32";
  }
  return ::testing::AssertionSuccess();
}

// fp32 patterns every conversion edge lies on: zeros, the f16 and bf16 overflow thresholds, subnormals of
// fp32 and of f16, the smallest normals, and NaNs (quiet and signalling, both signs, payloads in the bits a
// 16-bit format has room for, in those it has not, and in both).
std::vector<uint32_t> edge_patterns() {
  std::vector<uint32_t> out;
  const float values[] = {0.0f, 65504.0f, 65519.996f, 65520.0f, 65536.0f, std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min(),
                          std::ldexp(1.0f, -14), std::ldexp(1.0f, -24), std::ldexp(1.0f, -25), std::ldexp(1.5f, -25),
                          std::ldexp(3.0f, -25), std::ldexp(1023.5f, -24), std::ldexp(1023.75f, -24),
                          std::ldexp(2.0f - std::ldexp(1.0f, -8), 127), std::numeric_limits<float>::infinity()};
  for (float v : values) {
    const uint32_t bits = std::bit_cast<uint32_t>(v);
    for (uint32_t sign : {0u, 0x80000000u}) {
      for (int delta = -2; delta <= 2; ++delta) out.push_back((bits + static_cast<uint32_t>(delta)) | sign);
    }
  }
  const uint32_t payloads[] = {1u, 0x1fffu, 0x2000u, 0xffffu, 0x10000u, 0x12345u, 0x1fffffu, 0x3fffffu};
  for (uint32_t sign : {0u, 0x80000000u}) {
    for (uint32_t quiet : {0u, 0x400000u}) {
      for (uint32_t payload : payloads) out.push_back(sign | 0x7f800000u | quiet | payload);
    }
    out.push_back(sign | 0x7fc00000u);  // quiet NaN without payload
  }
  return out;
}

TEST(DTypeFloatCodec, EdgesMatchTheFp32Reference) {
  for (uint32_t bits : edge_patterns()) ASSERT_TRUE(float_path_matches(bits));
  // The documented NaN rule, spelled out: sign and payload do not survive.
  EXPECT_EQ(encode_dtype_from_float(DType::kF16, std::bit_cast<float>(0xff800001u)), 0x7fffu);
  EXPECT_EQ(encode_dtype_from_float(DType::kBF16, std::bit_cast<float>(0x7fa00000u)), 0x7fffu);
  EXPECT_EQ(encode_dtype_from_float(DType::kF16, -0.0f), 0x8000u);
}

// Every fp32 pattern a stride apart (an odd stride visits every residue of the low bits), plus every
// pattern at and beside the f16 and bf16 ties (low 13 / 16 bits at half an ulp) for every kept prefix.
TEST(DTypeFloatCodec, SampledAndTiePatternsMatchTheFp32Reference) {
  constexpr uint64_t kStride = 257;
  for (uint64_t bits = 0; bits <= 0xffffffffull; bits += kStride) {
    ASSERT_TRUE(float_path_matches(static_cast<uint32_t>(bits)));
  }
  for (uint32_t prefix = 0; prefix < (1u << 19); ++prefix) {
    for (uint32_t low : {0x0fffu, 0x1000u, 0x1001u, 0x1fffu}) ASSERT_TRUE(float_path_matches(prefix << 13 | low));
  }
  for (uint32_t prefix = 0; prefix < (1u << 16); ++prefix) {
    for (uint32_t low : {0x7fffu, 0x8000u, 0x8001u, 0xffffu}) ASSERT_TRUE(float_path_matches(prefix << 16 | low));
  }
}

// All 2^32 fp32 patterns (a minute or two): run with --gtest_also_run_disabled_tests after touching the codec.
TEST(DTypeFloatCodec, DISABLED_AllFp32PatternsMatchTheFp32Reference) {
  for (uint64_t bits = 0; bits <= 0xffffffffull; ++bits) {
    ASSERT_TRUE(float_path_matches(static_cast<uint32_t>(bits)));
  }
}

TEST(DTypeFloatCodec, DecodingToFloatIsExactForAllSixteenBitPatterns) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const uint16_t h = static_cast<uint16_t>(bits);
    // Bit for bit: a signalling NaN's missing quiet bit survives.
    ASSERT_EQ(std::bit_cast<uint32_t>(decode_dtype_to_float(DType::kF16, h)), reference::f16_bits_to_float_bits(h))
        << std::hex << bits;
    ASSERT_EQ(std::bit_cast<uint32_t>(decode_dtype_to_float(DType::kBF16, h)), bits << 16) << std::hex << bits;
    for (DType dtype : {DType::kF16, DType::kBF16}) {
      const float x = decode_dtype_to_float(dtype, h);
      if (!std::isnan(x)) {
        ASSERT_EQ(static_cast<double>(x), decode_dtype(dtype, h)) << std::hex << bits;
      }
      // Every value reads back to itself; every NaN to the canonical one.
      ASSERT_EQ(encode_dtype_from_float(dtype, x), std::isnan(x) ? 0x7fffu : bits) << std::hex << bits;
    }
  }
  const float snan = std::bit_cast<float>(0x7f800001u);
  EXPECT_EQ(std::bit_cast<uint32_t>(round_float_to_dtype(DType::kF32, snan)), 0x7f800001u);  // f32: unchanged
}

// float -> double is exact, so outside NaN the float path is the double path. NaN is where they differ on
// purpose: the double path keeps sign and payload (inputs replay bit for bit), the float path gives the
// canonical NaN (as the kernel's conversions do); f32 keeps its bits on both.
// ---- e4m3 (OCP E4M3FN): no infinity, one NaN per sign (S.1111.111), 448 the largest finite value.

// Reference: the value of each of the 256 patterns from the format's definition, written out apart from the codec.
double e4m3_value(uint32_t bits) {
  const int sign = (bits >> 7) & 1, exp = (bits >> 3) & 15, frac = bits & 7;
  if (exp == 15 && frac == 7) return std::numeric_limits<double>::quiet_NaN();
  const double magnitude = exp == 0 ? std::ldexp(frac, -9) : std::ldexp(8 + frac, exp - 10);
  return sign ? -magnitude : magnitude;
}

TEST(DTypeE4m3, EveryPatternDecodesToItsDefinitionAndBack) {
  for (uint32_t bits = 0; bits < 256; ++bits) {
    const double want = e4m3_value(bits);
    const double got = decode_dtype(DType::kF8E4M3, bits);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << bits;
      ASSERT_EQ(encode_dtype(DType::kF8E4M3, got), bits) << std::hex << bits;  // the sign is kept
      ASSERT_EQ(encode_dtype_from_float(DType::kF8E4M3, static_cast<float>(got)), 0x7fu) << std::hex << bits;
      continue;
    }
    ASSERT_EQ(std::bit_cast<uint64_t>(got), std::bit_cast<uint64_t>(want)) << std::hex << bits;  // -0 included
    ASSERT_EQ(static_cast<double>(decode_dtype_to_float(DType::kF8E4M3, bits)), want) << std::hex << bits;
    ASSERT_EQ(encode_dtype(DType::kF8E4M3, want), bits) << std::hex << bits;
    ASSERT_EQ(encode_dtype_from_float(DType::kF8E4M3, static_cast<float>(want)), bits) << std::hex << bits;
  }
  EXPECT_EQ(dtype_max(DType::kF8E4M3), 448.0);
  EXPECT_EQ(input_pad_bits(DType::kF8E4M3), 0xffu);
  EXPECT_TRUE(std::isnan(decode_dtype(DType::kF8E4M3, input_pad_bits(DType::kF8E4M3))));
}

// Rounding to nearest even between every two adjacent finite values (ties and a hair either side); past the largest
// finite value the double path (inputs) gives NaN, as IEEE's overflow would give inf, and the float path (the
// kernel's cvt.rn.satfinite) saturates: 448 up to its midpoint 464 for both, then NaN or 448.
TEST(DTypeE4m3, RoundsToNearestEvenAndOverflowsAsEachPathDefines) {
  for (uint32_t bits = 0; bits < 0x7e; ++bits) {
    const double lo = e4m3_value(bits), hi = e4m3_value(bits + 1);
    const double mid = (lo + hi) / 2;
    const uint32_t even = (bits & 1) == 0 ? bits : bits + 1;
    for (double sign : {1.0, -1.0}) {
      const uint32_t s = sign < 0 ? 0x80u : 0u;
      ASSERT_EQ(encode_dtype(DType::kF8E4M3, sign * mid), even | s) << lo << " " << hi;
      ASSERT_EQ(encode_dtype(DType::kF8E4M3, sign * std::nextafter(mid, lo)), bits | s) << lo << " " << hi;
      ASSERT_EQ(encode_dtype(DType::kF8E4M3, sign * std::nextafter(mid, hi)), (bits + 1) | s) << lo << " " << hi;
      ASSERT_EQ(encode_dtype_from_float(DType::kF8E4M3, static_cast<float>(sign * mid)), even | s) << lo;
    }
  }
  EXPECT_EQ(encode_dtype(DType::kF8E4M3, 464.0), 0x7eu);  // the tie rounds to 448 (even)
  EXPECT_EQ(encode_dtype(DType::kF8E4M3, 464.5), 0x7fu);  // NaN
  EXPECT_EQ(encode_dtype(DType::kF8E4M3, -std::numeric_limits<double>::infinity()), 0xffu);
  EXPECT_EQ(encode_dtype(DType::kF8E4M3, 0x1p-11), 0x00u);  // below half the smallest subnormal: zero
  EXPECT_EQ(encode_dtype(DType::kF8E4M3, 0x1.0000001p-10), 0x01u);
  EXPECT_EQ(encode_dtype_from_float(DType::kF8E4M3, 464.5f), 0x7eu);  // satfinite: 448
  EXPECT_EQ(encode_dtype_from_float(DType::kF8E4M3, -1e30f), 0xfeu);
  EXPECT_EQ(encode_dtype_from_float(DType::kF8E4M3, std::numeric_limits<float>::infinity()), 0x7eu);
  EXPECT_EQ(encode_dtype_from_float(DType::kF8E4M3, -std::numeric_limits<float>::infinity()), 0xfeu);
  EXPECT_EQ(output_dtype(DType::kF8E4M3), DType::kBF16);
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) EXPECT_EQ(output_dtype(dtype), dtype);
}

TEST(DTypeFloatCodec, FloatPathIsTheDoublePathOutsideNaN) {
  constexpr uint64_t kStride = 65537;
  for (uint64_t wide = 0; wide <= 0xffffffffull; wide += kStride) {
    const uint32_t bits = static_cast<uint32_t>(wide);
    const float x = std::bit_cast<float>(bits);
    if (std::isnan(x)) continue;
    for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
      ASSERT_EQ(encode_dtype_from_float(dtype, x), encode_dtype(dtype, static_cast<double>(x))) << std::hex << bits;
    }
  }
  const double double_snan = std::bit_cast<double>(0xfff4000000000000ull);  // signalling, negative
  EXPECT_EQ(encode_dtype(DType::kF16, double_snan), 0xfd00u);
  EXPECT_EQ(encode_dtype_from_float(DType::kF16, static_cast<float>(std::bit_cast<double>(0xfff8000000000000ull))),
            0x7fffu);
  EXPECT_EQ(encode_dtype_from_float(DType::kF32, std::bit_cast<float>(0xff800001u)), 0xff800001u);
}

}  // namespace
}  // namespace flashcheck
