// The element types of the API in one table (name as the case line writes it, size, binary format) and
// the one host codec every host component shares: the harness's inputs and decoded outputs, the host
// model's roundings. Integer arithmetic only, so results never depend on the FPU's rounding mode,
// flush-to-zero or the compiler; round to nearest, ties to even, in one step. Host-only (no CUDA). The
// oracle keeps its own rounding on purpose, so that a mistake here cannot hide in the reference.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <optional>
#include <string_view>

#include "flashcheck/attention.h"

namespace flashcheck {

// How an element's bits encode a value.
enum class ElementKind : int32_t {
  kIeee = 0,       // IEEE 754 interchange format: all-ones exponent is inf (zero fraction) or NaN
  kFiniteNan = 1,  // OCP fp8 "fn" (e4m3): no infinity; the all-ones exponent is a binade of finite values whose
                   // all-ones fraction alone is NaN, so the largest finite value has fraction all ones less one
};

// A binary format: a sign bit, exp_bits biased exponent bits, frac_bits fraction bits, encoded as `kind` says.
struct BinaryFormat {
  int exp_bits;
  int frac_bits;
  ElementKind kind = ElementKind::kIeee;
  constexpr int bias() const { return (1 << (exp_bits - 1)) - 1; }
  constexpr uint64_t exp_all() const { return (uint64_t{1} << exp_bits) - 1; }
  constexpr uint64_t frac_mask() const { return (uint64_t{1} << frac_bits) - 1; }
  constexpr int sign_shift() const { return exp_bits + frac_bits; }
  constexpr bool has_inf() const { return kind == ElementKind::kIeee; }
  // The magnitude bits of the largest finite value.
  constexpr uint64_t max_finite() const {
    return has_inf() ? (exp_all() - 1) << frac_bits | frac_mask() : exp_all() << frac_bits | (frac_mask() - 1);
  }
  friend constexpr bool operator==(const BinaryFormat&, const BinaryFormat&) = default;
};
inline constexpr BinaryFormat kBinary64{11, 52};
inline constexpr BinaryFormat kBinary32{8, 23};

struct DTypeInfo {
  DType dtype;
  const char* name;         // "f32", "f16", "bf16", "f8e4m3": case lines, reports, to_string(DType), the oracle's format
  int32_t c_code;           // FC_DTYPE_* (attention_c.h) and FC_SUBJECT_DTYPE_* (subject.h)
  int64_t size_bytes;       // dtype_size(DType)
  BinaryFormat format;      // its kind: how the bits encode a value
  bool tensor_core_input;   // tensor cores take it as it is (kTensorCore, kTensorCoreFp8); else fp32 (kSplitTf32)
  DType output;             // O's dtype (output_dtype(DType))
  int case_weight;          // relative share of generated cases; 0: only where asked for by name
  constexpr ElementKind kind() const { return format.kind; }
  constexpr int significand_bits() const { return format.frac_bits + 1; }  // implicit bit included
  constexpr double min_normal() const {  // 2^(1 - bias), exactly
    double x = 1.0;
    for (int e = 1; e < format.bias(); ++e) x /= 2.0;
    return x;
  }
};
inline constexpr std::array kDTypes = {
#define FC_DTYPE_ROW(c_suffix, enumerator, code, name, size_bytes, kind, exp_bits, frac_bits, tensor_core, output, \
                     weight)                                                                                     \
  DTypeInfo{DType::enumerator, name, code, size_bytes, BinaryFormat{exp_bits, frac_bits, ElementKind::kind},      \
            tensor_core != 0, DType::output, weight},
#include "flashcheck/dtypes.def"
#undef FC_DTYPE_ROW
};
// The row of `dtype`, or null for a value outside the enum.
constexpr const DTypeInfo* find_dtype(DType dtype) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.dtype == dtype) return &info;
  }
  return nullptr;
}
// O's dtype for inputs of `dtype` (the row's OUTPUT); `dtype` itself for a value outside the enum.
constexpr DType output_dtype(DType dtype) {
  const DTypeInfo* info = find_dtype(dtype);
  return info != nullptr ? info->output : dtype;
}
constexpr std::optional<DType> dtype_from_name(std::string_view name) {
  for (const DTypeInfo& info : kDTypes) {
    if (name == info.name) return info.dtype;
  }
  return std::nullopt;
}

namespace detail::codec {

// A value outside the enum is coded as f32 (can_implement rejects such params before any element is used).
constexpr BinaryFormat format_of(DType dtype) {
  const DTypeInfo* info = find_dtype(dtype);
  return info != nullptr ? info->format : kBinary32;
}

constexpr bool is_nan(BinaryFormat f, uint64_t bits) {
  if (!f.has_inf()) return (bits & (f.exp_all() << f.frac_bits | f.frac_mask())) == (f.exp_all() << f.frac_bits | f.frac_mask());
  return ((bits >> f.frac_bits) & f.exp_all()) == f.exp_all() && (bits & f.frac_mask()) != 0;
}

// The NaN of format `to` for NaN `bits` of format `from`: the sign and the leading payload bits (shifted,
// so the quiet bit stays the quiet bit); the quiet bit set when no payload bit is left (the result must
// stay a NaN). A format without infinity has one NaN per sign and keeps no payload; its NaN converts as a quiet
// one.
constexpr uint64_t convert_nan(BinaryFormat from, uint64_t bits, BinaryFormat to) {
  const uint64_t sign = (bits >> from.sign_shift()) & 1;
  if (!to.has_inf()) return sign << to.sign_shift() | to.exp_all() << to.frac_bits | to.frac_mask();
  const uint64_t frac = from.has_inf() ? bits & from.frac_mask() : uint64_t{1} << (from.frac_bits - 1);
  uint64_t payload = to.frac_bits >= from.frac_bits ? frac << (to.frac_bits - from.frac_bits)
                                                    : frac >> (from.frac_bits - to.frac_bits);
  if (payload == 0) payload = uint64_t{1} << (to.frac_bits - 1);
  return sign << to.sign_shift() | to.exp_all() << to.frac_bits | payload;
}

// CUDA's canonical NaN: positive, every fraction bit set (0x7fff as f16 and as bf16).
constexpr uint64_t canonical_nan(BinaryFormat f) { return f.exp_all() << f.frac_bits | f.frac_mask(); }

// std::bit_width of a 64-bit word, by halving: the harness's device input generator runs this codec in device code,
// where CUDA's compiler does not lower libstdc++'s bit_width.
constexpr int bit_width64(uint64_t x) {
  int width = 0;
  for (int shift = 32; shift > 0; shift /= 2) {
    if ((x >> shift) != 0) {
      x >>= shift;
      width += shift;
    }
  }
  return width + static_cast<int>(x);  // x is 0 or 1 here
}

// Non-NaN `bits` of format `from` rounded to format `to`: one rounding, to nearest with ties to even;
// beyond the largest finite value (after rounding) +-inf, or NaN in a format without infinity (IEEE's
// overflow, not a saturation: the value is not one of the format's); below half the smallest subnormal a signed
// zero.
constexpr uint64_t round_to_format(BinaryFormat from, uint64_t bits, BinaryFormat to) {
  const uint64_t sign = ((bits >> from.sign_shift()) & 1) << to.sign_shift();
  const uint64_t exp_field = (bits >> from.frac_bits) & from.exp_all();
  const uint64_t frac = bits & from.frac_mask();
  const uint64_t inf_bits = to.has_inf() ? sign | to.exp_all() << to.frac_bits
                                         : sign | to.exp_all() << to.frac_bits | to.frac_mask();
  if (exp_field == from.exp_all() && from.has_inf()) return inf_bits;
  if (exp_field == 0 && frac == 0) return sign;

  // |x| = significand * 2^exponent with an integer significand of up to from.frac_bits + 1 <= 53 bits.
  const uint64_t significand = exp_field == 0 ? frac : (frac | (uint64_t{1} << from.frac_bits));
  const int exponent = (exp_field == 0 ? 1 : static_cast<int>(exp_field)) - from.bias() - from.frac_bits;
  const int log2_floor = exponent + bit_width64(significand) - 1;
  const int min_normal_exp = 1 - to.bias();
  // Exponent of the target's unit in the last place at |x| (subnormals share the smallest normal's quantum).
  const int quantum = (log2_floor > min_normal_exp ? log2_floor : min_normal_exp) - to.frac_bits;
  const int shift = quantum - exponent;

  // The significand in units of 2^quantum, rounded: in [2^frac_bits, 2^(frac_bits+1)] for a normal result,
  // below 2^frac_bits for a subnormal one. Branch-free round half to even: add half a unit less one, plus
  // the kept lowest bit. Shifts beyond 55 leave 0 as well (significand < 2^53 is below half a unit).
  uint64_t rounded = 0;
  if (shift <= 0) {
    rounded = significand << -shift;  // exact: the target's quantum is finer than x's (fits: < 2^(frac_bits+1))
  } else {
    const int s = shift < 55 ? shift : 55;
    const uint64_t kept_lsb = (significand >> s) & 1;
    rounded = (significand + (uint64_t{1} << (s - 1)) - 1 + kept_lsb) >> s;
  }
  // The biased exponent of the binade at 2^quantum is at least 1; adding `rounded` less its implicit bit
  // carries a rounding up into the next binade, and a subnormal (rounded < 2^frac_bits at the smallest
  // quantum) comes out as its own fraction bits.
  const uint64_t biased_exp = static_cast<uint64_t>(quantum + to.frac_bits + to.bias());
  const uint64_t magnitude = (biased_exp << to.frac_bits) + rounded - (uint64_t{1} << to.frac_bits);
  return magnitude > to.max_finite() ? inf_bits : sign | magnitude;
}

// The value conversions of the codec: NaN by convert_nan, everything else by round_to_format (exact when
// `to` holds every value of `from`, as decoding to double or float does).
constexpr uint64_t convert(BinaryFormat from, uint64_t bits, BinaryFormat to) {
  return is_nan(from, bits) ? convert_nan(from, bits, to) : round_to_format(from, bits, to);
}

}  // namespace detail::codec

// ---- from and to double: the harness (inputs drawn in double, outputs decoded for the verdict)

// x rounded once to `dtype` (no double rounding through float), as the dtype's bits in the low
// dtype_size(dtype) bytes. NaN: the sign and the leading payload bits are kept as they are (a signalling
// NaN stays signalling); a payload that would vanish becomes the quiet bit.
constexpr uint32_t encode_dtype(DType dtype, double x) {
  const BinaryFormat f = detail::codec::format_of(dtype);
  return static_cast<uint32_t>(detail::codec::convert(kBinary64, std::bit_cast<uint64_t>(x), f));
}
// Exact; a NaN keeps its sign and payload bit for bit.
constexpr double decode_dtype(DType dtype, uint32_t bits) {
  return std::bit_cast<double>(detail::codec::convert(detail::codec::format_of(dtype), bits, kBinary64));
}
constexpr double round_to_dtype(DType dtype, double x) { return decode_dtype(dtype, encode_dtype(dtype, x)); }
// Largest finite value: exponent field all ones minus one, fraction all ones (448 for e4m3, whose all-ones
// exponent holds finite values).
constexpr double dtype_max(DType dtype) {
  return decode_dtype(dtype, static_cast<uint32_t>(detail::codec::format_of(dtype).max_finite()));
}

constexpr uint16_t encode_f16(double x) { return static_cast<uint16_t>(encode_dtype(DType::kF16, x)); }
constexpr uint16_t encode_bf16(double x) { return static_cast<uint16_t>(encode_dtype(DType::kBF16, x)); }
constexpr uint32_t encode_f32(double x) { return encode_dtype(DType::kF32, x); }
constexpr double decode_f16(uint16_t bits) { return decode_dtype(DType::kF16, bits); }
constexpr double decode_bf16(uint16_t bits) { return decode_dtype(DType::kBF16, bits); }
constexpr double decode_f32(uint32_t bits) { return decode_dtype(DType::kF32, bits); }

// ---- from and to float: the kernel's own conversions (the host model)

// An fp32 value stored in `dtype` as the kernel stores it, bit for bit what __float2half_rn and
// __float2bfloat16_rn give on the GPU: the same rounding as encode_dtype (float -> double is exact), and
// every NaN, whatever its sign and payload, becomes CUDA's canonical NaN 0x7fff. f32 is stored unchanged.
// A format without infinity is written as cvt.rn.satfinite writes fp8 (the only fp8 conversion PTX has): a NaN
// becomes 0x7f, and +-inf and every value beyond the largest finite one (after rounding) that value, signed.
constexpr uint32_t encode_dtype_from_float(DType dtype, float x) {
  const BinaryFormat f = detail::codec::format_of(dtype);
  const uint64_t bits = std::bit_cast<uint32_t>(x);
  if (f == kBinary32) return static_cast<uint32_t>(bits);
  if (detail::codec::is_nan(kBinary32, bits)) return static_cast<uint32_t>(detail::codec::canonical_nan(f));
  uint64_t out = detail::codec::round_to_format(kBinary32, bits, f);
  if (!f.has_inf() && detail::codec::is_nan(f, out)) out = (out & (uint64_t{1} << f.sign_shift())) | f.max_finite();
  return static_cast<uint32_t>(out);
}
// Exact (every f16, bf16 and e4m3 value is an fp32 value); a NaN keeps its sign and payload bit for bit.
constexpr float decode_dtype_to_float(DType dtype, uint32_t bits) {
  const uint64_t wide = detail::codec::convert(detail::codec::format_of(dtype), bits, kBinary32);
  return std::bit_cast<float>(static_cast<uint32_t>(wide));
}
constexpr float round_float_to_dtype(DType dtype, float x) {
  return decode_dtype_to_float(dtype, encode_dtype_from_float(dtype, x));
}

}  // namespace flashcheck
