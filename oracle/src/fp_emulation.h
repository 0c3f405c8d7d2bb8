// fp32 emulation of the kernel's rounding points on the host: rounding to fp16/bf16/tf32 (to nearest even),
// the tensor core's truncating accumulation (add_aligned, as measured on Hopper), the tf32 split,
// a score dot product and the P*V accumulation at a compute path's rounding points. Used by the emulated reference and
// by the tests' tiled models. Header-only; values travel as float, exact conversions through double.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "flashcheck/oracle_problem.h"

namespace flashcheck::oracle::detail {

inline constexpr int kMmaKHalf = 16;           // k of mma.m16n8k16 (fp16/bf16)
inline constexpr int kMmaKTf32 = 8;            // k of mma.m16n8k8 (tf32)
inline constexpr int kMmaKFp8 = 32;            // k of wgmma.m64nNk32 (e4m3)
inline constexpr float kLog2eF = 1.44269504f;  // log2(e) rounded to fp32, as the kernels hold it
inline constexpr float kLn2F = 0.693147182f;   // ln(2) rounded to fp32

// Round-toward-zero of a double to fp32: the tensor core's truncating accumulation. Where rounding to nearest went
// past x (inf included, for x beyond the largest float), the fp32 value one step toward zero is the one whose bit
// pattern is one less, for either sign.
inline float round_toward_zero(double x) {
  const float f = static_cast<float>(x);
  if (std::isfinite(x) && std::fabs(static_cast<double>(f)) > std::fabs(x)) {
    return std::bit_cast<float>(std::bit_cast<uint32_t>(f) - 1u);
  }
  return f;
}

// The tensor core's addition of a block of exact products to its fp32 accumulator: every addend, the accumulator
// included, is aligned to the largest of them and cut toward zero to kMmaAlignBits significant bits of that
// largest one's scale, the cut addends are summed exactly, and the sum is rounded toward zero to fp32 (Fasi,
// Higham, Mikaitis and Pranesh, PeerJ Comput. Sci. 7:e330, 2021, for the structure). 26 bits, fp32's 24 and two
// more, both cuts toward zero: measured on Hopper through flashcheck's own kernels (tf32 in the split-TF32 wgmma
// kernel, fp16 and bf16 in the decode family's mma.sync) by tools/dev/mma_alignment.cpp. Where the addends cancel,
// each cut costs up to one unit in the 26th bit of the largest addend, not of the sum: on the split-TF32 fuzz
// finding gpu-nightly-rms-split-tf32-aligned-blocks (|q| ~ 100 against |k| <= 10, scores far below sum |q k|) the
// kernel ran at 1.09x the allowance of a reference that added each block exactly. Addends are products of tf32,
// fp16 or bf16 values (exact in double); a non-finite addend makes the plain sum.
// kBits is the number of bits kept: kMmaAlignBits for fp16, bf16 and tf32 products; Hopper's fp8 wgmma (e4m3 products,
// k32 blocks) keeps kFp8MmaAlignBits, the same structure with 12 bits fewer (tools/dev/fp8_wgmma_alignment.cu, whose
// ctest reads its expectation from this line; docs/design/fp8-forward.md for what it forces on the fp8 path).
inline constexpr int kMmaAlignBits = 26;
inline constexpr int kFp8MmaAlignBits = 14;
template <int kBits = kMmaAlignBits>
inline float add_aligned(float acc, const double* terms, size_t count, size_t stride) {
  static_assert(kBits >= 2 && kBits <= 26, "cut addends are summed as int64 units below 2^kBits each");
  double largest = std::fabs(double{acc});
  bool finite = largest <= std::numeric_limits<double>::max();
  for (size_t i = 0; i < count; ++i) {
    const double magnitude = std::fabs(terms[i * stride]);
    finite = finite && magnitude <= std::numeric_limits<double>::max();  // false for inf and NaN
    largest = std::max(largest, magnitude);
  }
  if (!finite || largest == 0.0) {
    double sum = acc;
    for (size_t i = 0; i < count; ++i) sum += terms[i * stride];
    return largest == 0.0 && finite ? 0.0f : round_toward_zero(sum);
  }
  // largest in [2^(e-1), 2^e): the addends times 2^(kBits - e) are below 2^kBits, and their conversion to an
  // integer cuts them toward zero. The products of finite fp32 values are normal doubles, so the exponent is read
  // from the bit pattern and the powers of two are built from it.
  const int e = static_cast<int>((std::bit_cast<uint64_t>(largest) >> 52) & 0x7ff) - 1022;
  const double up = std::bit_cast<double>(static_cast<uint64_t>(1023 + kBits - e) << 52);
  const double down = std::bit_cast<double>(static_cast<uint64_t>(1023 - kBits + e) << 52);
  int64_t units = static_cast<int64_t>(double{acc} * up);
  for (size_t i = 0; i < count; ++i) units += static_cast<int64_t>(terms[i * stride] * up);
  return round_toward_zero(static_cast<double>(units) * down);
}

// add_aligned for `columns` accumulators side by side: acc[c] += the block products[t * stride + c], t < terms, each
// column bit for bit as add_aligned adds it alone. The passes run over all columns at a time (the largest addends,
// their scales, the cut addends as int32 units: below 2^kBits each, 2^31 for 32 of them), so they vectorize; a block
// with a non-finite addend takes add_aligned column by column. `scratch` holds 3 * columns.
inline constexpr size_t kMaxAlignedTerms = 32;
// kColumns and kTerms: the numbers of columns and terms where known at compile time (the score groups, whose
// blocks are padded with zero products: a zero addend changes neither the largest addend nor the sum), else 0.
template <size_t kColumns = 0, size_t kTerms = 0, int kBits = kMmaAlignBits>
inline void add_aligned_columns(float* __restrict acc, const double* __restrict products, size_t runtime_terms,
                                size_t runtime_columns, size_t stride, double* __restrict scratch) {
  const size_t columns = kColumns > 0 ? kColumns : runtime_columns;
  const size_t terms = kTerms > 0 ? kTerms : runtime_terms;
  double* const largest = scratch;  // then 2^(e - kBits), the unit
  double* const up = scratch + columns;
  double* const units = scratch + 2 * columns;
  constexpr double kMax = std::numeric_limits<double>::max();
  int finite = terms <= kMaxAlignedTerms;
  for (size_t c = 0; c < columns; ++c) {
    largest[c] = std::fabs(double{acc[c]});
    finite &= largest[c] <= kMax;
  }
  for (size_t t = 0; t < terms; ++t) {
    const double* const row = products + t * stride;
    for (size_t c = 0; c < columns; ++c) {
      const double magnitude = std::fabs(row[c]);
      finite &= magnitude <= kMax;  // 0 for inf and NaN
      largest[c] = std::max(largest[c], magnitude);
    }
  }
  if (!finite) {
    for (size_t c = 0; c < columns; ++c) acc[c] = add_aligned<kBits>(acc[c], products + c, terms, stride);
    return;
  }
  // For largest in [2^(e-1), 2^e) with biased exponent field E = e + 1022: up = 2^(kBits - e) has the field
  // 2 * 1023 + kBits - 1 - E, the unit 2^(e - kBits) the field E + 1 - kBits; both 0 where
  // largest is 0 (the sum is then +0).
  constexpr uint64_t kField = 0x7ffull << 52;
  for (size_t c = 0; c < columns; ++c) {
    const uint64_t field = std::bit_cast<uint64_t>(largest[c]) & kField;
    const bool zero = largest[c] == 0.0;
    up[c] = zero ? 0.0 : std::bit_cast<double>(((2 * 1023ull + kBits - 1) << 52) - field);
    largest[c] = zero ? 0.0 : std::bit_cast<double>(field - ((kBits - 1ull) << 52));
  }
  for (size_t c = 0; c < columns; ++c) units[c] = static_cast<double>(static_cast<int32_t>(double{acc[c]} * up[c]));
  for (size_t t = 0; t < terms; ++t) {
    const double* const row = products + t * stride;
    for (size_t c = 0; c < columns; ++c) units[c] += static_cast<double>(static_cast<int32_t>(row[c] * up[c]));
  }
  // Toward zero without a branch (the sums are finite): one step toward zero where rounding to nearest went past.
  for (size_t c = 0; c < columns; ++c) {
    const double sum = units[c] * largest[c];
    const float nearest = static_cast<float>(sum);
    const uint32_t past = std::fabs(double{nearest}) > std::fabs(sum) ? 1u : 0u;
    acc[c] = std::bit_cast<float>(std::bit_cast<uint32_t>(nearest) - past);
  }
}

// Round-to-nearest-even of an fp32 value to a binary format with `precision` significand bits, smallest
// normal exponent `min_exp` (subnormals below it) and largest finite value `max_finite` (beyond: +-inf).
inline float round_to_format(float x, int precision, int min_exp, double max_finite) {
  if (!std::isfinite(x) || x == 0.0f) return x;
  int exp = 0;
  std::frexp(x, &exp);  // |x| in [2^(exp-1), 2^exp)
  const int quantum_exp = std::max(exp - 1, min_exp) - (precision - 1);
  const double scaled = std::ldexp(static_cast<double>(x), -quantum_exp);  // exact: a power-of-two scaling
  const double rounded = std::ldexp(std::nearbyint(scaled), quantum_exp);  // default mode: ties to even
  if (std::fabs(rounded) > max_finite) return std::copysign(std::numeric_limits<float>::infinity(), x);
  return static_cast<float>(rounded);
}

// Round-to-nearest-even dropping the low `dropped` significand bits of an fp32 value: bf16 (16 bits) shares
// fp32's exponent range, so rounding the bit pattern is exact, subnormals and overflow to inf included.
// Inf and NaN pass through.
inline float round_low_bits(float x, int dropped) {
  if (!std::isfinite(x)) return x;
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint32_t half_minus_one = (1u << (dropped - 1)) - 1u;
  const uint32_t lsb = (bits >> dropped) & 1u;  // ties go to the even neighbour
  return std::bit_cast<float>(((bits + half_minus_one + lsb) >> dropped) << dropped);
}

// An fp32 value rounded to `format` (to nearest even), as float. e4m3 has no infinity: as PTX's conversions to it
// (cvt.rn.satfinite), a value beyond its largest finite 448, an infinity included, becomes +-448; NaN stays NaN.
inline float round_to(Format format, float x) {
  constexpr double kF16Max = 65504.0, kE4M3Max = 448.0;
  switch (format) {
    case Format::kF16: return round_to_format(x, 11, -14, kF16Max);
    case Format::kBF16: return round_low_bits(x, 16);
    case Format::kE4M3: {
      if (std::isnan(x)) return x;
      const float rounded = std::isinf(x) ? x : round_to_format(x, 4, -6, std::numeric_limits<double>::infinity());
      return std::fabs(rounded) > kE4M3Max ? std::copysign(static_cast<float>(kE4M3Max), x) : rounded;
    }
    case Format::kF32: break;
  }
  return x;
}

// tf32 (11 significant bits) as cvt.rna.tf32.f32: to nearest, ties away from zero. The split kernel uses
// cvt.rna below sm_90 and cvt.rn (ties to even) on sm_90; the low part x - hi has at most 13 significant
// bits, so a quarter of them are ties, and ties away bias the dropped residual: its split errors are several
// times larger. The reference's members take the noisier rounding so that both are healthy (error_model.h), and
// the split path's hardware member (kTruncatedBlocksLowTowardZero) reads the low part toward zero as the mma does
// (lo_rz below).
inline constexpr uint32_t kTf32DroppedMask = (1u << 13) - 1u;  // the fp32 mantissa bits tf32 drops
inline float to_tf32(float x) {
  constexpr uint32_t kHalfUlp = 1u << 12;
  if (!std::isfinite(x)) return x;
  return std::bit_cast<float>((std::bit_cast<uint32_t>(x) + kHalfUlp) & ~kTf32DroppedMask);
}

// tf32 as the tensor core reads an fp32 register that holds more bits: its top 19 bits, toward zero.
inline float to_tf32_toward_zero(float x) {
  if (!std::isfinite(x)) return x;
  return std::bit_cast<float>(std::bit_cast<uint32_t>(x) & ~kTf32DroppedMask);
}

// fp32 operands of a path, decoded once: the values and, for the split path, x = hi + lo with hi = tf32(x) and
// the low part x - hi (exact in fp32) as tf32 both ways: lo rounded to nearest (ties away, above), and lo_rz as
// the split kernels hand it to the tensor core, the fp32 difference itself, which the mma reads toward zero
// (split_tf32/kernel.cuh). The low part has at most 12 significant bits, so the two differ only where tf32 drops
// its last bit, a tie: by the same amount, away from zero for lo and toward zero for lo_rz. Toward zero is also how
// the mma accumulates, so on same-sign products (keys all positive, a query row of one sign) the hardware's errors
// add up where lo's would partly cancel them.
struct Operands {
  std::vector<float> value, hi, lo, lo_rz;
};
inline Operands make_operands(std::vector<float> value, Arithmetic path) {
  Operands ops;
  ops.value = std::move(value);
  if (path == Arithmetic::kSplitTf32) {
    ops.hi.resize(ops.value.size());
    ops.lo.resize(ops.value.size());
    ops.lo_rz.resize(ops.value.size());
    for (size_t i = 0; i < ops.value.size(); ++i) {
      ops.hi[i] = to_tf32(ops.value[i]);
      ops.lo[i] = to_tf32(ops.value[i] - ops.hi[i]);
      ops.lo_rz[i] = to_tf32_toward_zero(ops.value[i] - ops.hi[i]);
    }
  }
  return ops;
}

// How a dot product's fp32 additions round: a chain of FMAs rounding to nearest (CUDA cores, the host model;
// on the split path three FMAs per product, lo*hi, hi*lo, hi*hi, the kernel's mma order), or the tensor
// core's blocks of exact products added to the accumulator by add_aligned (kMmaKHalf, or kMmaKTf32 per
// split term), the split's low parts rounded to nearest (lo) or, as the split kernels' mma reads them, toward zero
// (lo_rz; on the fp16/bf16 path the two are the same).
enum class DotRounding { kNearestChain, kTruncatedBlocks, kTruncatedBlocksLowTowardZero };

// The split's low parts as `rounding` reads them.
inline const std::vector<float>& low_parts(const Operands& ops, DotRounding rounding) {
  return rounding == DotRounding::kTruncatedBlocksLowTowardZero ? ops.lo_rz : ops.lo;
}

// Whether a truncated member adds its blocks as the tensor core does (add_aligned): the hardware's own member of
// each mma path, kTruncatedBlocks on the fp16/bf16 path and kTruncatedBlocksLowTowardZero on the split path. The split
// path's other truncated member, whose low parts are rounded to nearest (the kernels never hand the mma those), adds
// each block exactly and rounds the sum toward zero: a second rounding of the low parts at half the cost.
inline bool aligned_blocks(Arithmetic path, DotRounding rounding) {
  return uses_tile_reference(path) || rounding == DotRounding::kTruncatedBlocksLowTowardZero;
}

// Blocks of kK exact products of the operands' values (fp16, bf16 or e4m3), term k of row g at k*G+g, a short last
// block padded with zeros, added to acc as the tensor core adds them (kBits kept).
template <int G, int kK, int kBits>
inline void tensor_core_dot(const Operands& a, size_t a0, const Operands& b, const size_t (&b0)[G], size_t n,
                            float (&acc)[G]) {
  double block[kK * G], scratch[3 * G];
  for (size_t k0 = 0; k0 < n; k0 += kK) {
    const size_t count = std::min<size_t>(n - k0, kK);
    std::fill(block + count * G, block + kK * G, 0.0);
    for (size_t k = 0; k < count; ++k) {
      const double a_value = a.value[a0 + k0 + k];
      for (int g = 0; g < G; ++g) block[k * G + g] = a_value * double{b.value[b0[g] + k0 + k]};
    }
    add_aligned_columns<G, kK, kBits>(acc, block, kK, G, G, scratch);
  }
}

// sum_k a[a0 + k] b[b0[g] + k] over k < dim in fp32 at the path's rounding points, for G rows of b at once: each
// row's sum takes the same operations in the same order as it would alone. One row's sum is a chain of dependent
// additions; G independent chains side by side keep the FMA units busy (dot_fp32_rows).
template <int G>
inline void dot_fp32_group(const Operands& a, size_t a0, const Operands& b, const size_t (&b0)[G], int64_t dim,
                           Arithmetic path, DotRounding rounding, float (&out)[G]) {
  const size_t n = static_cast<size_t>(dim);
  float acc[G] = {};
  if (rounding == DotRounding::kNearestChain || path == Arithmetic::kGeneralFp32) {
    for (size_t k = 0; k < n; ++k) {
      if (path == Arithmetic::kSplitTf32) {
        const float a_lo = a.lo[a0 + k], a_hi = a.hi[a0 + k];
        for (int g = 0; g < G; ++g) {
          acc[g] = std::fma(a_lo, b.hi[b0[g] + k], acc[g]);
          acc[g] = std::fma(a_hi, b.lo[b0[g] + k], acc[g]);
          acc[g] = std::fma(a_hi, b.hi[b0[g] + k], acc[g]);
        }
      } else {
        const float a_value = a.value[a0 + k];
        for (int g = 0; g < G; ++g) acc[g] = std::fma(a_value, b.value[b0[g] + k], acc[g]);
      }
    }
  } else if (path == Arithmetic::kTensorCore) {
    tensor_core_dot<G, kMmaKHalf, kMmaAlignBits>(a, a0, b, b0, n, acc);
  } else if (path == Arithmetic::kTensorCoreFp8) {
    tensor_core_dot<G, kMmaKFp8, kFp8MmaAlignBits>(a, a0, b, b0, n, acc);
  } else {
    const std::vector<float>& a_lo = low_parts(a, rounding);
    const std::vector<float>& b_lo = low_parts(b, rounding);
    if (!aligned_blocks(path, rounding)) {
      for (size_t k0 = 0; k0 < n; k0 += kMmaKTf32) {
        double lo_hi[G] = {}, hi_lo[G] = {}, hi_hi[G] = {};  // exact block sums
        for (size_t k = k0; k < std::min(n, k0 + kMmaKTf32); ++k) {
          const double a_low = a_lo[a0 + k], a_high = a.hi[a0 + k];
          for (int g = 0; g < G; ++g) {
            lo_hi[g] += a_low * double{b.hi[b0[g] + k]};
            hi_lo[g] += a_high * double{b_lo[b0[g] + k]};
            hi_hi[g] += a_high * double{b.hi[b0[g] + k]};
          }
        }
        for (int g = 0; g < G; ++g) {
          acc[g] = round_toward_zero(double{acc[g]} + lo_hi[g]);
          acc[g] = round_toward_zero(double{acc[g]} + hi_lo[g]);
          acc[g] = round_toward_zero(double{acc[g]} + hi_hi[g]);
        }
      }
      for (int g = 0; g < G; ++g) out[g] = acc[g];
      return;
    }
    // Products of tf32 values (exact), term k of row g at k*G+g; a short last block padded with zeros.
    double lo_hi[kMmaKTf32 * G], hi_lo[kMmaKTf32 * G], hi_hi[kMmaKTf32 * G], scratch[3 * G];
    for (size_t k0 = 0; k0 < n; k0 += kMmaKTf32) {
      const size_t count = std::min<size_t>(n - k0, kMmaKTf32);
      for (double* block : {lo_hi, hi_lo, hi_hi}) std::fill(block + count * G, block + kMmaKTf32 * G, 0.0);
      for (size_t k = 0; k < count; ++k) {
        const double a_low = a_lo[a0 + k0 + k], a_high = a.hi[a0 + k0 + k];
        for (int g = 0; g < G; ++g) {
          lo_hi[k * G + g] = a_low * double{b.hi[b0[g] + k0 + k]};
          hi_lo[k * G + g] = a_high * double{b_lo[b0[g] + k0 + k]};
          hi_hi[k * G + g] = a_high * double{b.hi[b0[g] + k0 + k]};
        }
      }
      add_aligned_columns<G, kMmaKTf32>(acc, lo_hi, kMmaKTf32, G, G, scratch);
      add_aligned_columns<G, kMmaKTf32>(acc, hi_lo, kMmaKTf32, G, G, scratch);
      add_aligned_columns<G, kMmaKTf32>(acc, hi_hi, kMmaKTf32, G, G, scratch);
    }
  }
  for (int g = 0; g < G; ++g) out[g] = acc[g];
}

// sum_k a[a0 + k] b[b0 + k] over k < dim in fp32 at the path's rounding points.
inline float dot_fp32(const Operands& a, size_t a0, const Operands& b, size_t b0, int64_t dim, Arithmetic path,
                      DotRounding rounding) {
  const size_t rows[1] = {b0};
  float out[1];
  dot_fp32_group<1>(a, a0, b, rows, dim, path, rounding, out);
  return out[0];
}

// out[j] = dot_fp32(a, 0, b, j * dim, ...) for the first `count` rows of b, eight rows at a time.
inline void dot_fp32_rows(const Operands& a, const Operands& b, int64_t count, int64_t dim, Arithmetic path,
                          DotRounding rounding, float* out) {
  constexpr int kRows = 8;
  int64_t j = 0;
  for (; j + kRows <= count; j += kRows) {
    size_t rows[kRows];
    for (int g = 0; g < kRows; ++g) rows[g] = static_cast<size_t>((j + g) * dim);
    float group[kRows];
    dot_fp32_group<kRows>(a, 0, b, rows, dim, path, rounding, group);
    std::copy(group, group + kRows, out + j);
  }
  for (; j < count; ++j) out[j] = dot_fp32(a, 0, b, static_cast<size_t>(j * dim), dim, path, rounding);
}

// acc_k += sum_j p_j v_jk over keys [j0, j1) (V rows of `dim` values, indexed by key; P holds the tile's
// keys only, p[j - j0]), at the path's rounding points; P holds what the path multiplies (fp32 P, or P
// rounded to the input format on tensor cores). On mma paths `rounding` picks the hardware's truncated blocks or a
// round-to-nearest FMA chain (the host model's emulation of the same products).
inline void accumulate_pv(float* acc, const Operands& p, const Operands& v, int64_t j0, int64_t j1, int64_t dim,
                          Arithmetic path, DotRounding rounding) {
  const size_t d = static_cast<size_t>(dim), base = static_cast<size_t>(j0), end = static_cast<size_t>(j1);
  if (rounding == DotRounding::kNearestChain || path == Arithmetic::kGeneralFp32) {
    for (size_t j = base; j < end; ++j) {
      if (path == Arithmetic::kSplitTf32) {
        const float p_lo = p.lo[j - base], p_hi = p.hi[j - base];
        const float* const row_hi = v.hi.data() + j * d;
        const float* const row_lo = v.lo.data() + j * d;
        for (size_t k = 0; k < d; ++k) {
          float a = acc[k];
          a = std::fma(p_lo, row_hi[k], a);
          a = std::fma(p_hi, row_lo[k], a);
          acc[k] = std::fma(p_hi, row_hi[k], a);
        }
      } else {
        const float pj = p.value[j - base];
        const float* const row = v.value.data() + j * d;
        for (size_t k = 0; k < d; ++k) acc[k] = std::fma(pj, row[k], acc[k]);
      }
    }
    return;
  }
  // Each output column's block runs over the block's keys in key order, as in dot_fp32; the loops visit V row by
  // row (keys outer, columns inner), so the block's products are kept key by key for all columns (column k of key j
  // at (j - block start) * d + k) and each column's block is added with stride d.
  thread_local std::vector<double> products, scratch;
  scratch.resize(3 * d);
  if (uses_tile_reference(path)) {  // fp16/bf16 (k16, 26 bits) or e4m3 (k32, 14 bits) products
    const bool fp8 = path == Arithmetic::kTensorCoreFp8;
    const int64_t k_block = fp8 ? kMmaKFp8 : kMmaKHalf;
    products.resize(static_cast<size_t>(k_block) * d);
    double* const block = products.data();
    for (int64_t b0 = j0; b0 < j1; b0 += k_block) {
      const size_t lo = static_cast<size_t>(b0), hi = static_cast<size_t>(std::min<int64_t>(j1, b0 + k_block));
      for (size_t j = lo; j < hi; ++j) {
        const double pj = p.value[j - base];
        const float* const row = v.value.data() + j * d;
        double* const out = block + (j - lo) * d;
        for (size_t k = 0; k < d; ++k) out[k] = pj * double{row[k]};  // exact products
      }
      if (fp8) {
        add_aligned_columns<0, 0, kFp8MmaAlignBits>(acc, block, hi - lo, d, d, scratch.data());
      } else {
        add_aligned_columns(acc, block, hi - lo, d, d, scratch.data());
      }
    }
    return;
  }
  const std::vector<float>& p_lo = low_parts(p, rounding);
  const std::vector<float>& v_lo = low_parts(v, rounding);
  if (!aligned_blocks(path, rounding)) {
    products.resize(3 * d);  // exact block sums of the three split terms, side by side for all columns
    double* const first = products.data();
    double* const second = first + d;
    double* const third = second + d;
    for (int64_t b0 = j0; b0 < j1; b0 += kMmaKTf32) {
      const size_t lo = static_cast<size_t>(b0), hi = static_cast<size_t>(std::min<int64_t>(j1, b0 + kMmaKTf32));
      std::fill(first, first + 3 * d, 0.0);
      for (size_t j = lo; j < hi; ++j) {
        const double pj_lo = p_lo[j - base], pj_hi = p.hi[j - base];
        const float* const row_hi = v.hi.data() + j * d;
        const float* const row_lo = v_lo.data() + j * d;
        for (size_t k = 0; k < d; ++k) {
          first[k] += pj_lo * double{row_hi[k]};
          second[k] += pj_hi * double{row_lo[k]};
          third[k] += pj_hi * double{row_hi[k]};
        }
      }
      for (size_t k = 0; k < d; ++k) {
        acc[k] = round_toward_zero(double{acc[k]} + first[k]);
        acc[k] = round_toward_zero(double{acc[k]} + second[k]);
        acc[k] = round_toward_zero(double{acc[k]} + third[k]);
      }
    }
    return;
  }
  products.resize(3 * kMmaKTf32 * d);
  double* const first = products.data();
  double* const second = first + kMmaKTf32 * d;
  double* const third = second + kMmaKTf32 * d;
  for (int64_t b0 = j0; b0 < j1; b0 += kMmaKTf32) {
    const size_t lo = static_cast<size_t>(b0), hi = static_cast<size_t>(std::min<int64_t>(j1, b0 + kMmaKTf32));
    for (size_t j = lo; j < hi; ++j) {
      const double pj_lo = p_lo[j - base], pj_hi = p.hi[j - base];
      const float* const row_hi = v.hi.data() + j * d;
      const float* const row_lo = v_lo.data() + j * d;
      const size_t at = (j - lo) * d;
      for (size_t k = 0; k < d; ++k) {  // exact products of tf32 values
        first[at + k] = pj_lo * double{row_hi[k]};   // lo * hi
        second[at + k] = pj_hi * double{row_lo[k]};  // hi * lo
        third[at + k] = pj_hi * double{row_hi[k]};   // hi * hi
      }
    }
    for (const double* block : {first, second, third}) add_aligned_columns(acc, block, hi - lo, d, d, scratch.data());
  }
}

}  // namespace flashcheck::oracle::detail
