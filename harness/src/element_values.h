// The one definition of an input element's value, for host and device code: Philox4x32-10 at (seed, stream,
// canonical index), the distributions of the case line (case.h, DistKind) in double, our fixed-coefficient log
// and cos, and the dtype rounding of flashcheck/dtype.h (detail::codec, constexpr: device code reaches it with
// --expt-relaxed-constexpr). Only + - * / sqrt and exact exponent moves, in source order: host code compiles with
// -ffp-contract=off and device code with -fmad=false (CUDA's double + - * / sqrt round correctly), so an element
// has the same bits wherever it is drawn (inputs.cpp on the host, device_inputs.cu on the GPU).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#include "flashcheck/case.h"    // DistKind
#include "flashcheck/dtype.h"   // BinaryFormat, detail::codec::convert
#include "flashcheck/inputs.h"  // Stream

// Every function here is compiled twice: by nvcc for the device draw and by the host compiler for the host one.
#if defined(__CUDACC__)
#define FLASHCHECK_ELEMENT_FN __host__ __device__
#else
#define FLASHCHECK_ELEMENT_FN
#endif

namespace flashcheck::elements {

// ---- Philox4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel Random Numbers: As Easy as 1, 2, 3", SC'11): ten
// rounds of two 32x32->64 multiplications and a Feistel-like word permutation, the key bumped by the Weyl constants
// between rounds. Checked against Random123's known-answer vectors (inputs_test).
inline constexpr uint32_t kPhiloxMultiplier0 = 0xD2511F53u;
inline constexpr uint32_t kPhiloxMultiplier1 = 0xCD9E8D57u;
inline constexpr uint32_t kPhiloxWeyl0 = 0x9E3779B9u;  // golden ratio
inline constexpr uint32_t kPhiloxWeyl1 = 0xBB67AE85u;  // sqrt(3) - 1
inline constexpr int kPhiloxRounds = 10;

FLASHCHECK_ELEMENT_FN inline void philox4x32(const uint32_t counter[4], const uint32_t key[2], uint32_t out[4]) {
  uint32_t x0 = counter[0], x1 = counter[1], x2 = counter[2], x3 = counter[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int round = 0; round < kPhiloxRounds; ++round) {
    if (round > 0) {
      k0 += kPhiloxWeyl0;
      k1 += kPhiloxWeyl1;
    }
    const uint64_t p0 = uint64_t{kPhiloxMultiplier0} * x0;
    const uint64_t p1 = uint64_t{kPhiloxMultiplier1} * x2;
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    x0 = hi1 ^ x1 ^ k0;
    x1 = lo1;
    x2 = hi0 ^ x3 ^ k1;
    x3 = lo0;
  }
  out[0] = x0;
  out[1] = x1;
  out[2] = x2;
  out[3] = x3;
}

// The high 64 bits of a * b.
FLASHCHECK_ELEMENT_FN inline uint64_t mul_hi64(uint64_t a, uint64_t b) {
#if defined(__CUDA_ARCH__)
  return __umul64hi(a, b);
#else
  return static_cast<uint64_t>((static_cast<unsigned __int128>(a) * b) >> 64);
#endif
}

// Uniform integer in [0, n) from 64 random bits, by multiply-high (no modulo bias worth the name).
FLASHCHECK_ELEMENT_FN inline uint64_t below(uint64_t random64, uint64_t n) { return mul_hi64(random64, n); }

FLASHCHECK_ELEMENT_FN inline double sqrt_rn(double x) {
#if defined(__CUDA_ARCH__)
  return __dsqrt_rn(x);
#else
  return std::sqrt(x);
#endif
}

// ---- Deterministic log and cos: fixed coefficients (exact hexadecimal literals) evaluated in a fixed order; the
// exponent is split off by bit operations, exact everywhere. libm's log/cos differ between libraries (and from
// CUDA's) in the last bit, which would change a case's inputs between machines.
inline constexpr double kLn2 = 0x1.62e42fefa39efp-1;
inline constexpr double kSqrtHalf = 0x1.6a09e667f3bcdp-1;
inline constexpr double kTwoPi = 0x1.921fb54442d18p+2;

// sum_k coeffs[k] * x2^k by Horner's rule, highest degree first.
template <int N>
FLASHCHECK_ELEMENT_FN inline double horner(const double (&coeffs)[N], double x2) {
  double acc = coeffs[N - 1];
  for (int k = N - 1; k-- > 0;) acc = acc * x2 + coeffs[k];
  return acc;
}

// 2 * atanh(s) / (2 s) = 1 + s^2/3 + s^4/5 + ...: coefficients 1/(2k+1), k = 0..12. With |s| <= 0.1716
// (m in [sqrt(1/2), sqrt(2))) the first omitted term, s^27/27, is below 2^-70 relative. The coefficient tables are
// local to each series (a namespace-scope host array is not addressable from device code).
FLASHCHECK_ELEMENT_FN inline double atanh_series(double x2) {
  const double coeffs[] = {
      1.0,
      0x1.5555555555555p-2,  // 1/3
      0x1.999999999999ap-3,  // 1/5
      0x1.2492492492492p-3,  // 1/7
      0x1.c71c71c71c71cp-4,  // 1/9
      0x1.745d1745d1746p-4,  // 1/11
      0x1.3b13b13b13b14p-4,  // 1/13
      0x1.1111111111111p-4,  // 1/15
      0x1.e1e1e1e1e1e1ep-5,  // 1/17
      0x1.af286bca1af28p-5,  // 1/19
      0x1.8618618618618p-5,  // 1/21
      0x1.642c8590b2164p-5,  // 1/23
      0x1.47ae147ae147bp-5,  // 1/25
  };
  return horner(coeffs, x2);
}

// Taylor coefficients on |x| <= pi/4; the first omitted terms (x^20/20!, x^21/21!) are below 2^-66.
FLASHCHECK_ELEMENT_FN inline double cos_series(double x2) {
  const double coeffs[] = {
      1.0,
      -0x1.0000000000000p-1,   // -1/2!
      0x1.5555555555555p-5,    // 1/4!
      -0x1.6c16c16c16c17p-10,  // -1/6!
      0x1.a01a01a01a01ap-16,   // 1/8!
      -0x1.27e4fb7789f5cp-22,  // -1/10!
      0x1.1eed8eff8d898p-29,   // 1/12!
      -0x1.93974a8c07c9dp-37,  // -1/14!
      0x1.ae7f3e733b81fp-45,   // 1/16!
      -0x1.6827863b97d97p-53,  // -1/18!
  };
  return horner(coeffs, x2);
}
FLASHCHECK_ELEMENT_FN inline double sin_series(double x2) {
  const double coeffs[] = {
      1.0,
      -0x1.5555555555555p-3,   // -1/3!
      0x1.1111111111111p-7,    // 1/5!
      -0x1.a01a01a01a01ap-13,  // -1/7!
      0x1.71de3a556c734p-19,   // 1/9!
      -0x1.ae64567f544e4p-26,  // -1/11!
      0x1.6124613a86d09p-33,   // 1/13!
      -0x1.ae7f3e733b81fp-41,  // -1/15!
      0x1.952c77030ad4ap-49,   // 1/17!
      -0x1.2f49b46814157p-57,  // -1/19!
  };
  return horner(coeffs, x2);
}

// x = m * 2^exponent with m in [1/2, 1), for finite x > 0 (subnormals included), as std::frexp gives it.
FLASHCHECK_ELEMENT_FN inline double split_exponent(double x, int* exponent) {
  uint64_t bits = std::bit_cast<uint64_t>(x);
  int bias_shift = 0;
  if ((bits >> 52) == 0) {  // subnormal: scale into the normal range first (exact)
    bits = std::bit_cast<uint64_t>(x * 0x1p54);
    bias_shift = 54;
  }
  *exponent = static_cast<int>(bits >> 52) - 1022 - bias_shift;
  return std::bit_cast<double>((bits & ((uint64_t{1} << 52) - 1)) | (uint64_t{1022} << 52));
}

// Natural log for finite x > 0.
FLASHCHECK_ELEMENT_FN inline double det_log(double x) {
  int exponent = 0;
  double m = split_exponent(x, &exponent);  // m in [1/2, 1)
  if (m < kSqrtHalf) {
    m = m * 2.0;  // exact
    --exponent;
  }
  // m in [sqrt(1/2), sqrt(2)): log m = 2 atanh(s) with s = (m-1)/(m+1); m - 1 is exact (Sterbenz).
  const double f = m - 1.0;
  const double s = f / (2.0 + f);
  const double log_m = 2.0 * s * atanh_series(s * s);
  return static_cast<double>(exponent) * kLn2 + log_m;
}

// cos(2*pi*turns) for turns in [0, 1).
FLASHCHECK_ELEMENT_FN inline double det_cos_2pi(double turns) {
  // Nearest quarter turn n, remainder r in [-1/8, 1/8] turns. turns*8 and n*0.25 are exact, and so is
  // turns - n*0.25 (both are multiples of 2^-53 below 1 in magnitude).
  const int64_t octant = static_cast<int64_t>(turns * 8.0);
  const int64_t quarter = (octant + 1) / 2;
  const double r = turns - static_cast<double>(quarter) * 0.25;
  const double x = r * kTwoPi;  // |x| <= pi/4
  const double x2 = x * x;
  const double c = cos_series(x2);
  const double s = x * sin_series(x2);
  // cos(x + n*pi/2) by the quadrant n mod 4.
  switch (quarter & 3) {
    case 0:
      return c;
    case 1:
      return -s;
    case 2:
      return -c;
    default:
      return s;
  }
}

// ---- One Philox call for (seed, stream, index): counter = {index low, index high, stream, 0}, key = {seed low,
// seed high}.
inline constexpr double kTwoPow53Inv = 0x1p-53;
inline constexpr int kDoubleMantissaBits = 53;

struct Draw {
  uint32_t w[4];
  // Uniforms from 53 bits of each 64-bit half: u0 in [0,1) and u0_open in (0,1] from (w0,w1), u1 from (w2,w3).
  FLASHCHECK_ELEMENT_FN uint64_t random64() const { return uint64_t{w[0]} << 32 | w[1]; }
  FLASHCHECK_ELEMENT_FN uint64_t bits0() const { return random64() >> (64 - kDoubleMantissaBits); }
  FLASHCHECK_ELEMENT_FN uint64_t bits1() const { return (uint64_t{w[2]} << 32 | w[3]) >> (64 - kDoubleMantissaBits); }
  FLASHCHECK_ELEMENT_FN double u0() const { return static_cast<double>(bits0()) * kTwoPow53Inv; }
  FLASHCHECK_ELEMENT_FN double u0_open() const { return static_cast<double>(bits0() + 1) * kTwoPow53Inv; }
  FLASHCHECK_ELEMENT_FN double u1() const { return static_cast<double>(bits1()) * kTwoPow53Inv; }
  FLASHCHECK_ELEMENT_FN bool negative() const { return (w[3] & 1u) != 0; }  // the low bit of w3 is unused by u1
  // Standard normal by Box-Muller; u0_open > 0 keeps log finite (|z| <= sqrt(106 ln 2) ~ 8.6).
  FLASHCHECK_ELEMENT_FN double normal() const { return sqrt_rn(-2.0 * det_log(u0_open())) * det_cos_2pi(u1()); }
};

FLASHCHECK_ELEMENT_FN inline Draw draw(uint64_t seed, uint32_t stream, uint64_t index) {
  const uint32_t counter[4] = {static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), stream, 0};
  const uint32_t key[2] = {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
  Draw d;
  philox4x32(counter, key, d.w);
  return d;
}

// ---- One tensor's rule: what its element [b, h, s, d] of the canonical [batch, heads, seqlen, head_dim] array is.
// Plain values, so a kernel takes it by value; make_rule() (inputs.h's callers, host code) fills it from a case.
inline constexpr double kRampNoise = 0x1p-12;  // ramp noise amplitude relative to hi - lo: breaks ties, keeps the trend

struct ElementRule {
  DistKind kind = DistKind::kNormal;
  double a = 0.0, b = 1.0;    // ValueSpec's parameters
  BinaryFormat format{8, 23};  // of the dtype the value is rounded to (the case's, or fp32 for the sink)
  double max_finite = 0.0;     // the dtype's largest finite value (nearmax)
  uint64_t seed = 0;
  uint32_t stream = 0, dominant_stream = 0;  // inputs.h Stream values
  int64_t seqlen = 0;          // S: the ramp's position s / (S - 1), the dominant row drawn below S
};

// The dominant row of slice (b, h) = bh (b * heads + h) for DistKind::kDominant; -1 for every other kind.
FLASHCHECK_ELEMENT_FN inline int64_t dominant_row(const ElementRule& rule, int64_t bh) {
  if (rule.kind != DistKind::kDominant || rule.seqlen <= 0) return -1;
  const Draw pick = draw(rule.seed, rule.dominant_stream, static_cast<uint64_t>(bh));
  return static_cast<int64_t>(below(pick.random64(), static_cast<uint64_t>(rule.seqlen)));
}

// 2^e as a double for e in the normal range (exact).
FLASHCHECK_ELEMENT_FN inline double power_of_two(int e) {
  return std::bit_cast<double>(static_cast<uint64_t>(e + 1023) << 52);
}

// Nonzero subnormal of `format`, uniform significand, random sign.
FLASHCHECK_ELEMENT_FN inline double subnormal(BinaryFormat format, const Draw& d) {
  const int min_exp = 1 - format.bias();  // smallest normal exponent
  const uint64_t significand = 1 + below(d.random64(), (uint64_t{1} << format.frac_bits) - 1);
  // significand * 2^(min_exp - frac_bits): a power-of-two scaling, exact (the result is a normal double).
  const double magnitude = static_cast<double>(significand) * power_of_two(min_exp - format.frac_bits);
  return d.negative() ? -magnitude : magnitude;
}

// The value, in double before the dtype rounding, of the element at row s and canonical flat index `index`
// ([b, h, s, d] of the [B, H, S, D] array) of a slice whose dominant row is `dominant` (dominant_row()).
FLASHCHECK_ELEMENT_FN inline double element_value(const ElementRule& rule, int64_t s, int64_t index, int64_t dominant) {
  if (rule.kind == DistKind::kConst) return rule.a;
  if (rule.kind == DistKind::kNegZero) return -0.0;
  const Draw r = draw(rule.seed, rule.stream, static_cast<uint64_t>(index));
  switch (rule.kind) {
    case DistKind::kNormal:
      return rule.a + rule.b * r.normal();
    case DistKind::kUniform:
      return rule.a + (rule.b - rule.a) * r.u0();
    case DistKind::kNearMax: {
      const double magnitude = rule.a * rule.max_finite * (1.0 - r.u0() / 8.0);
      return r.negative() ? -magnitude : magnitude;
    }
    case DistKind::kSubnormal:
      return subnormal(rule.format, r);
    case DistKind::kRamp: {
      const double span = rule.b - rule.a;
      const double position = rule.seqlen > 1 ? static_cast<double>(s) / static_cast<double>(rule.seqlen - 1) : 0.0;
      return rule.a + span * position + span * kRampNoise * (r.u0() - 0.5);
    }
    case DistKind::kDominant:
      return (s == dominant ? rule.b : rule.a) * r.normal();
    case DistKind::kConst:
    case DistKind::kNegZero:
      break;
  }
  return 0.0;
}

// x rounded once to `format`, as its bits: dtype.h's codec (encode_dtype is this with the dtype's format).
FLASHCHECK_ELEMENT_FN inline uint32_t encode_bits(BinaryFormat format, double x) {
  return static_cast<uint32_t>(detail::codec::convert(kBinary64, std::bit_cast<uint64_t>(x), format));
}

// The element's bits in the rule's format.
FLASHCHECK_ELEMENT_FN inline uint32_t element_bits(const ElementRule& rule, int64_t s, int64_t index, int64_t dominant) {
  return encode_bits(rule.format, element_value(rule, s, index, dominant));
}

// ---- Host code: the rules of a case's tensors.

// The rule of tensor `tensor` ('q', 'k' or 'v') of case `c`: its distribution, the case's dtype, seed and streams,
// S = seqlen_q (Q) or seqlen_k (K, V).
inline ElementRule tensor_rule(const Case& c, char tensor) {
  const ValueSpec& spec = tensor == 'q' ? c.q : tensor == 'k' ? c.k : c.v;
  ElementRule rule;
  rule.kind = spec.kind;
  rule.a = spec.a;
  rule.b = spec.b;
  rule.format = detail::codec::format_of(c.dtype);
  rule.max_finite = dtype_max(c.dtype);
  rule.seed = c.seed;
  rule.stream = static_cast<uint32_t>(tensor == 'q' ? Stream::kQ : tensor == 'k' ? Stream::kK : Stream::kV);
  rule.dominant_stream = static_cast<uint32_t>(tensor == 'q'   ? Stream::kDominantRowQ
                                               : tensor == 'k' ? Stream::kDominantRowK
                                                               : Stream::kDominantRowV);
  rule.seqlen = tensor == 'q' ? c.seqlen_q : c.seqlen_k;
  return rule;
}

// The rule of `count` fp32 values drawn as a [1, 1, count, 1] tensor on `stream` (the element index is the row, a
// ramp runs along them and dominant picks one).
inline ElementRule fp32_vector_rule(const Case& c, const ValueSpec& spec, Stream stream, Stream dominant_stream,
                                    int64_t count) {
  ElementRule rule;
  rule.kind = spec.kind;
  rule.a = spec.a;
  rule.b = spec.b;
  rule.format = kBinary32;
  rule.max_finite = dtype_max(DType::kF32);
  rule.seed = c.seed;
  rule.stream = static_cast<uint32_t>(stream);
  rule.dominant_stream = static_cast<uint32_t>(dominant_stream);
  rule.seqlen = count;
  return rule;
}

// The rule of the sink logits: one per query head (the head is the element index).
inline ElementRule sink_rule(const Case& c, const ValueSpec& spec) {
  return fp32_vector_rule(c, spec, Stream::kSink, Stream::kDominantSink, c.heads_q);
}

// The rule of one tensor's fp8 descales ('q', 'k' or 'v'): [batch, heads_kv], element index b * heads_kv + g.
// Case::descale allows uniform and const only, which draw no dominant row.
inline ElementRule descale_rule(const Case& c, const ValueSpec& spec, char tensor) {
  const Stream stream = tensor == 'q' ? Stream::kDescaleQ : tensor == 'k' ? Stream::kDescaleK : Stream::kDescaleV;
  return fp32_vector_rule(c, spec, stream, stream, c.batch * c.heads_kv);
}

}  // namespace flashcheck::elements

#undef FLASHCHECK_ELEMENT_FN
