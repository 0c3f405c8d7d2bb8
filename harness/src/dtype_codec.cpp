// dtype encode/decode between double and the binary formats f32, f16, bf16, in integer arithmetic only,
// so the result never depends on the FPU's rounding mode, on flush-to-zero or on the compiler.
// Encoding rounds once, to nearest with ties to even, straight from double (rounding via float first would
// round twice and can be wrong for f16/bf16 at ties). Decoding is exact.
#include <bit>
#include <cmath>
#include <cstdint>

#include "flashcheck/inputs.h"

namespace flashcheck {
namespace {

constexpr int kDoubleFracBits = 52;
constexpr int kDoubleExpBias = 1023;
constexpr uint32_t kDoubleExpAll = 0x7FF;
constexpr uint64_t kDoubleFracMask = (uint64_t{1} << kDoubleFracBits) - 1;

// A binary interchange format: sign, exp_bits exponent bits, frac_bits fraction bits.
struct Format {
  int exp_bits;
  int frac_bits;
  int bias() const { return (1 << (exp_bits - 1)) - 1; }
  uint32_t exp_all() const { return (1u << exp_bits) - 1; }
  uint32_t sign_bit() const { return 1u << (exp_bits + frac_bits); }
};
constexpr Format kF32{8, 23};
constexpr Format kF16{5, 10};
constexpr Format kBF16{8, 7};

uint32_t encode(const Format& f, double x) {
  const uint64_t bits = std::bit_cast<uint64_t>(x);
  const uint32_t sign = (bits >> 63) ? f.sign_bit() : 0u;
  const uint32_t dexp = static_cast<uint32_t>(bits >> kDoubleFracBits) & kDoubleExpAll;
  const uint64_t frac = bits & kDoubleFracMask;
  const uint32_t inf_bits = sign | (f.exp_all() << f.frac_bits);

  if (dexp == kDoubleExpAll) {
    if (frac == 0) return inf_bits;
    // NaN: keep the leading payload bits (quiet bit included); if nothing is left, set the quiet bit so the
    // result stays a NaN.
    uint32_t payload = static_cast<uint32_t>(frac >> (kDoubleFracBits - f.frac_bits));
    if (payload == 0) payload = 1u << (f.frac_bits - 1);
    return inf_bits | payload;
  }
  if (dexp == 0 && frac == 0) return sign;  // +-0

  // |x| = significand * 2^exponent with an integer significand of up to 53 bits.
  const uint64_t significand = dexp == 0 ? frac : (frac | (uint64_t{1} << kDoubleFracBits));
  const int exponent = (dexp == 0 ? 1 : static_cast<int>(dexp)) - kDoubleExpBias - kDoubleFracBits;
  const int log2_floor = exponent + static_cast<int>(std::bit_width(significand)) - 1;
  const int min_normal_exp = 1 - f.bias();
  // Exponent of the target's unit in the last place at |x| (subnormals share the smallest normal's quantum).
  int quantum = (log2_floor > min_normal_exp ? log2_floor : min_normal_exp) - f.frac_bits;
  const int shift = quantum - exponent;

  uint64_t rounded;
  if (shift <= 0) {
    rounded = significand << -shift;  // exact: the target's quantum is finer than x's (fits: < 2^(frac_bits+1))
  } else if (shift >= 64) {
    rounded = 0;  // |x| < 2^(quantum-11): far below half a quantum
  } else {
    rounded = significand >> shift;
    const uint64_t rest = significand & ((uint64_t{1} << shift) - 1);
    const uint64_t half = uint64_t{1} << (shift - 1);
    if (rest > half || (rest == half && (rounded & 1))) ++rounded;
  }
  // Rounding up may carry into a new binade.
  if (rounded >> (f.frac_bits + 1)) {
    rounded >>= 1;
    ++quantum;
  }
  if (rounded < (uint64_t{1} << f.frac_bits)) {
    return sign | static_cast<uint32_t>(rounded);  // subnormal or zero (quantum is the subnormal quantum)
  }
  // rounded in [2^frac_bits, 2^(frac_bits+1)): a normal number with value rounded * 2^quantum. The leading
  // bit lands in the exponent field by the addition, which also turns a carry out of the largest subnormal
  // into the smallest normal.
  const int64_t biased_exp = int64_t{quantum} + f.frac_bits + f.bias();
  if (biased_exp >= static_cast<int64_t>(f.exp_all())) return inf_bits;
  return sign | ((static_cast<uint32_t>(biased_exp) << f.frac_bits) + static_cast<uint32_t>(rounded - (uint64_t{1} << f.frac_bits)));
}

double decode(const Format& f, uint32_t bits) {
  const bool negative = (bits & f.sign_bit()) != 0;
  const uint32_t exp_field = (bits >> f.frac_bits) & f.exp_all();
  const uint32_t frac = bits & ((1u << f.frac_bits) - 1);
  if (exp_field == f.exp_all()) {
    // Built bit by bit so that the payload (and a signalling NaN's missing quiet bit) survives.
    const uint64_t payload = static_cast<uint64_t>(frac) << (kDoubleFracBits - f.frac_bits);
    return std::bit_cast<double>((negative ? uint64_t{1} << 63 : 0) | (uint64_t{kDoubleExpAll} << kDoubleFracBits) | payload);
  }
  // ldexp of an integer significand is exact for all three formats (all fit in double's range).
  const double magnitude =
      exp_field == 0 ? std::ldexp(static_cast<double>(frac), 1 - f.bias() - f.frac_bits)
                     : std::ldexp(static_cast<double>(frac | (1u << f.frac_bits)),
                                  static_cast<int>(exp_field) - f.bias() - f.frac_bits);
  return negative ? -magnitude : magnitude;
}

}  // namespace

uint16_t encode_f16(double x) { return static_cast<uint16_t>(encode(kF16, x)); }
uint16_t encode_bf16(double x) { return static_cast<uint16_t>(encode(kBF16, x)); }
uint32_t encode_f32(double x) { return encode(kF32, x); }
double decode_f16(uint16_t bits) { return decode(kF16, bits); }
double decode_bf16(uint16_t bits) { return decode(kBF16, bits); }
double decode_f32(uint32_t bits) { return decode(kF32, bits); }

uint32_t encode_dtype(DType dtype, double x) {
  switch (dtype) {
    case DType::kF16:
      return encode_f16(x);
    case DType::kBF16:
      return encode_bf16(x);
    case DType::kF32:
      break;
  }
  return encode_f32(x);
}

double decode_dtype(DType dtype, uint32_t bits) {
  switch (dtype) {
    case DType::kF16:
      return decode_f16(static_cast<uint16_t>(bits));
    case DType::kBF16:
      return decode_bf16(static_cast<uint16_t>(bits));
    case DType::kF32:
      break;
  }
  return decode_f32(bits);
}

double round_to_dtype(DType dtype, double x) { return decode_dtype(dtype, encode_dtype(dtype, x)); }

double dtype_max(DType dtype) {
  const Format& f = dtype == DType::kF16 ? kF16 : dtype == DType::kBF16 ? kBF16 : kF32;
  // Largest finite: exponent field all ones minus one, fraction all ones.
  return decode(f, ((f.exp_all() - 1) << f.frac_bits) | ((1u << f.frac_bits) - 1));
}

uint64_t fnv1a64(const uint8_t* data, size_t size, uint64_t hash) {
  constexpr uint64_t kFnvPrime = 0x100000001b3ull;
  for (size_t i = 0; i < size; ++i) {
    hash ^= data[i];
    hash *= kFnvPrime;
  }
  return hash;
}

}  // namespace flashcheck
