// The error model of docs/error-model.md in code: bound_row() turns a row's exact result and ingredients
// into per-element bounds for O and per-row bounds for LSE, m and l, for an input format and an arithmetic
// class; the verdict helpers apply the oracle's non-finite semantics; RmsCheck is the statistical check. Every
// constant below is named in the document's table, with the rounding point it stands for.
#include "flashcheck/error_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "eft.h"
#include "tiers.h"

namespace flashcheck::oracle {
namespace {

using detail::gamma_n;
using detail::kFlushResult;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// fp32 unit roundoff: CUDA-core add/mul/FMA, division, conversions (round to nearest).
constexpr double kU32 = 0x1p-24;
constexpr double kUMma = 0x1p-23;  // tensor-core fp32 accumulation truncates (Fasi et al. 2021): one ulp, 2u
// An mma adds its k products to the accumulator with at most one extra alignment/truncation per update;
// k >= 4 for every shape used (m16n8k4/k8 tf32, m16n8k16 fp16/bf16, sm_90a wgmma m64nNk16), so n terms see
// <= n + ceil(n/4) roundings.
constexpr int64_t kMmaKMin = 4;
// Split tf32 (hi = tf32(x) to nearest; lo = x - hi as tf32, to nearest or, as the mma reads it, toward zero: the low
// part has at most 12 significant bits, so either drops at most its last bit): |x - hi - lo| <= 2^-22 |x|, and the
// dropped lo*lo' + hi*r' + r*hi' (+ smaller) of a product is below 3 * 2^-22 * (1 + 2^-10) |x y|.
constexpr double kSplitProductRelErr = 3 * 0x1p-22 * (1 + 0x1p-10);
// Roundings proportional to gap_j = m - s_j (natural-log units): fl(scale * log2 e) (2u: two roundings),
// the argument x - m or its FMA (u), the telescoping rescale arguments m_old - m_new (u summed over tiles,
// their total magnitude being <= gap_j), one spare for a kernel that rounds (m_old - m_new) * c separately.
constexpr double kGapUnits = 5.0;
// m is reported in natural-log units: from log2 units times fl(ln 2) (u + u), or raw max times |scale| (u);
// the internal base carries fl(scale * log2 e) (2u): four units of |m| separate the two.
constexpr double kMConversionUnits = 4.0;
// O = acc / l: IEEE division is one rounding; two allow a reciprocal and a multiply.
constexpr double kDivisionUnits = 2.0;
constexpr double kLn2 = 0.69314718055994530942;  // ln 2, nearest double
// fp32 accumulators must stay below kOverflowGuard; the tensor-core path's run up to 2^kTensorCoreRefSlackLog2
// above the running-max formulation's, so its guard is that much lower.
constexpr double kTensorCoreAccumGuard =
    detail::kOverflowGuard / static_cast<double>(int64_t{1} << static_cast<int>(kTensorCoreRefSlackLog2));
// The fp8 path's accumulators carry P's offset on top: 2^kFp8POffsetLog2 more.
constexpr double kFp8AccumGuard =
    kTensorCoreAccumGuard / static_cast<double>(int64_t{1} << static_cast<int>(kFp8POffsetLog2));
// The fp8 path (docs/design/fp8-forward.md): the wgmma keeps 14 bits of a k32 block's largest addend, cut toward
// zero, so a block errs by at most (k + 1) 2^-13 of its largest addend plus 2^-13 of its sum, (k + 2) 2^-13 of its
// addends' magnitudes: n products see n + ceil(2n / k) = n + ceil(n / 16) cuts of 2^-13 (docs/error-model.md §3).
// P's e4m3 rounding is 2^-4 relative and, below its normals, half the subnormal spacing 2^-10 absolute, which in
// units of the reference's weight is 2^-10 over the offset's 2^kFp8POffsetLog2. P*V is promoted into fp32 per K/V tile: each tile's fp32 FMA counts 2^-24 / 2^-13 =
// 1/2048 of a cut.
constexpr double kUMmaFp8 = 0x1p-13;
constexpr int64_t kMmaKFp8Min = 16;
constexpr double kFp8PRoundAbs = 0x1p-10 / static_cast<double>(int64_t{1} << static_cast<int>(kFp8POffsetLog2));
constexpr double kFp32RoundingsPerFp8Cut = 2048.0;
// The fp8 path's folded scale fl(fl(fl(scale d_q) d_k) fl(log2 e)): two roundings more than fl(scale fl(log2 e)).
constexpr double kFp8DescaleUnits = 2.0;
constexpr double kLogUlps = 2.0;  // logf is within 1 ulp (CUDA Programming Guide, math functions); 2 allowed
// Flush-to-zero (ex2.approx.ftz, FTZ arithmetic) and subnormal split parts: per key, an unnormalized weight
// (<= 1) can lose 2^-126 from the flush and 2^-126 from a flushed tf32 low part; likewise one P*V product.
constexpr double kFlushWeight = 0x1p-125;
constexpr double kFlushProduct = 0x1p-125;
// Beyond this total relative weight error the first-order analysis is not used: the row falls back to the
// always-valid hull bound (the kernel's O is a nearly convex combination of the V rows).
constexpr double kLinearizationLimit = 0.25;
// Keys further than this (natural-log units) below the max have weight < e^-1000: zero in fp32 and double.
constexpr double kGapCap = 1000.0;
// Covers second-order products of the terms (each below 2^-20 relative where the linear analysis is used)
// and the double-precision evaluation of the bound itself.
constexpr double kSafety = 1.0 + 0x1p-10;
// Softcap, x = fl(fl(c log2 e) * tanh32(fl(s * fl(scale / c)))): tanhf within kTanhRelErr of |tanh| and the
// final product (u) err by kCapRound of the capped score, which is at most min(c, S_j). The argument's two
// roundings (the quotient, the product) are relative to the scaled score, 2u + u^2 of S_j (kTwoRoundings).
constexpr double kCapRound = kTanhRelErr + kU32;
constexpr double kTwoRoundings = 2 * kU32 + kU32 * kU32;
// fl(log2 e), the sink's product with it, and each of them in the common factor of the keys' logits (fl(scale *
// log2 e) or fl(c log2 e)): a sink of magnitude |z| and keys of max |m| disagree by kTwoRoundings (|z| + |m|).
// An fp32 tanh, product or sink * log2 e below 2^-126 may be flushed: kFlushResult (tiers.h) absolute per rounding.
// A product rounded to nearest on fp32's subnormal grid is off by at most half its spacing 2^-149.
constexpr double kHalfSubnormalSpacing = 0x1p-150;
// A dropout's factor sigma = 1 / (1 - p) reaches the kernel as fl32 of keep_scale(p), a double within 2^-52 of
// sigma: s32 lies within u (1 + 2^-52) + 2^-52 of sigma, relative; kDropoutScaleRel is what that adds to u.
constexpr double kDropoutScaleRel = 0x1p-51;

struct PathModel {
  double score_unit = kU32, score_terms = 0;  // |t - q.k| <= gamma(score_terms, score_unit) (1 + split) + split
  double score_split = 0;                     // relative error of one product from the tf32 split
  double p_round = 0;                         // relative rounding of P before P*V (numerator only)
  double p_round_abs = 0;                     // absolute part of that rounding (subnormal P)
  double pv_unit = kU32, pv_terms = 0;        // accumulation of P*V incl. rescale multiplies
  double l_unit = kU32, l_terms = 0;          // accumulation of l incl. rescale multiplies
};

// Roundings of n terms added by an mma whose blocks hold k >= k_min products: n + ceil(n / k_min) (§3).
double mma_terms(double terms, int64_t k_min = kMmaKMin) {
  return terms + std::ceil(terms / static_cast<double>(k_min));
}

// Half the smallest subnormal spacing of P's format (the absolute error of rounding a tiny P).
double half_subnormal(Format format) {
  switch (format) {
    case Format::kF16: return 0x1p-25;
    case Format::kBF16: return 0x1p-134;
    case Format::kE4M3: return 0x1p-10;
    case Format::kF32: break;
  }
  return 0.0;
}

// head_dim is the score dot products' length (Q's and K's columns). The P*V chains run over the keys, one per column of
// V, so V's width enters no chain length: it only sets how many columns are bounded. block: the keys of the row's
// longest K/V tile (the fp8 path's wgmma chains end there).
PathModel path_model(Format format, Arithmetic path, int64_t head_dim, int64_t n, int64_t tiles, int64_t block) {
  const double d = static_cast<double>(head_dim), keys = static_cast<double>(n), t = static_cast<double>(tiles);
  PathModel pm;
  switch (path) {
    case Arithmetic::kGeneralFp32:  // fp32 FMA chains on CUDA cores
      pm.score_terms = d;
      pm.pv_terms = keys + t;
      pm.l_terms = keys + t;
      break;
    case Arithmetic::kTensorCore:  // exact products of fp16/bf16 values, mma accumulation; P rounded to the format
      pm.score_unit = pm.pv_unit = pm.l_unit = kUMma;
      pm.score_terms = mma_terms(d);
      pm.p_round = format == Format::kF32 ? 0.0 : unit_roundoff(format);
      pm.p_round_abs = half_subnormal(format);
      pm.pv_terms = mma_terms(keys) + t;
      pm.l_terms = keys + t;
      break;
    case Arithmetic::kSplitTf32:  // three tf32 products per fp32 product, mma accumulation
      pm.score_unit = pm.pv_unit = pm.l_unit = kUMma;
      pm.score_terms = mma_terms(3 * d);
      pm.score_split = kSplitProductRelErr;
      pm.p_round = kSplitProductRelErr;
      pm.pv_terms = mma_terms(3 * keys) + t;
      pm.l_terms = keys + t;
      break;
    case Arithmetic::kTensorCoreFp8:  // exact products of e4m3 values at 14 bits; P*V per tile, promoted in fp32
      pm.score_unit = pm.pv_unit = kUMmaFp8;
      pm.l_unit = kUMma;
      pm.score_terms = mma_terms(d, kMmaKFp8Min);
      pm.p_round = unit_roundoff(Format::kE4M3);
      pm.p_round_abs = kFp8PRoundAbs;
      pm.pv_terms =
          mma_terms(static_cast<double>(std::min(block, n)), kMmaKFp8Min) + std::ceil(t / kFp32RoundingsPerFp8Cut);
      pm.l_terms = keys + t;
      break;
  }
  return pm;
}

// Long rows (docs/error-model.md §4.9): the roundings of the P*V accumulator per key and per tile on a path (an FMA
// chain: one per key; mma: n_t + ceil(n_t / 4) <= 1.25 n_t + 1 per tile, k >= 4; split tf32: three products per
// product), the growth of the errors already made through every later rounding of the same accumulator (each errs by
// u of a partial sum that carries them: a factor (1 + u) per rounding, at most e^(u * roundings)), and l's accumulated
// rounding relative to l.
struct RunningModel {
  double per_key = 1.0, per_tile = 0.0;  // P*V roundings: per_key * n_t + per_tile per tile
  double pv_growth = 1.0;
  double l_rel = 0.0;
};
RunningModel running_model(Arithmetic path, const PathModel& pm, const OrderedSums& s, bool has_sink, int32_t block_n,
                           double theta_max) {
  RunningModel rm;
  const double n = static_cast<double>(s.keys), t = static_cast<double>(s.tiles), u = kU32;
  const double mma_per_key = 1.0 + 1.0 / static_cast<double>(kMmaKMin);
  switch (path) {
    case Arithmetic::kGeneralFp32: break;
    case Arithmetic::kTensorCore: rm.per_key = mma_per_key, rm.per_tile = 1.0; break;
    case Arithmetic::kSplitTf32: rm.per_key = 3 * mma_per_key, rm.per_tile = 1.0; break;
    case Arithmetic::kTensorCoreFp8: break;  // not used: bound_row takes no running sums on the fp8 path
  }
  const double sink_rounds = has_sink ? 1.0 : 0.0;
  rm.pv_growth = std::exp(pm.pv_unit * (rm.per_key * n + rm.per_tile * t) + u * (t + sink_rounds)) * kSafety;
  // l takes fp32 p (weights within 1 + theta_max of the exact ones). The general family sums each tile's p on its own
  // and adds it with one FMA, l = fma(l, alpha, tile sum): a tile's partial sums lie within L_t, the FMA's result
  // within the prefix, and the errors made compound only through the tile's own sum and the later FMAs. The mma
  // families keep per-thread running sums across tiles (a thread's share of each tile added into its sum, rescaled
  // once per tile) and add the quad's four shares at the end (two more roundings of at most l): chains whose partial
  // sums lie within the prefix of l. A sink's merge rounds l twice more (l alpha, + its weight).
  const double block = block_n > 0 ? std::min<double>(block_n, n) : n;
  if (path == Arithmetic::kGeneralFp32) {
    rm.l_rel = std::exp(u * (t + block + 2 * sink_rounds)) * u * (1 + theta_max) * (s.l_tile_sums + s.l_after_tiles);
  } else {
    rm.l_rel = std::exp(u * (n + t + 2 + 2 * sink_rounds)) * u * (1 + theta_max) * (s.l_chain + 2);
  }
  if (has_sink) rm.l_rel += 2 * u * (1 + theta_max) * std::exp(u * (n + t + 4));
  rm.l_rel *= kSafety;
  return rm;
}

// Output rounding to the format O is written in (output_format: bf16 for e4m3 inputs): relative part and absolute
// floor (fp16 subnormal spacing; otherwise the fp32 flush-to-zero of the division result). fp32 O is the division
// result itself: no extra rounding.
double output_unit(Format format) {
  const Format out = output_format(format);
  return out == Format::kF32 ? 0.0 : unit_roundoff(out);
}
double output_floor(Format format) { return output_format(format) == Format::kF16 ? 0x1p-25 : 0x1p-126; }

// The tensor-core path reports its last reference as m: up to the slack below the computed max (log2 units
// converted to natural ones; the comparison's own roundings are within RowBound::m).
double m_below_of(Arithmetic path) {
  return uses_tile_reference(path) ? kTensorCoreRefSlackLog2 * kLn2 * (1 + kMConversionUnits * kU32) : 0.0;
}

// A row the sink alone decides: no usable key, or a sink more than kGapCap above every key beyond every error of
// the kernel's logits (bound_row's margin). The kernel's accumulator is 0 or scaled by alpha = exp2(<= -kGapCap
// log2 e) = 0, so O = 0 exactly (a non-finite column is NaN in both), against |O*| < e^-kGapCap max|v| (0 in
// double); l' = exp2(0) within one exp2 error; m and LSE are the sink through fl(fl(z * fl(log2 e)) * fl(ln 2)),
// four roundings of |z|, plus a flushed subnormal each way (on every path: the merged max is the sink's, never a
// tensor-core reference below it).
RowBound sink_only_bound(const RowResult& exact, Format format) {
  RowBound b;
  const double u = kU32;
  b.o.resize(exact.o.size());
  for (size_t k = 0; k < exact.o.size(); ++k) {
    b.o[k] = kSafety * (std::fabs(exact.o[k]) + output_floor(format)) + exact.o_err[k];
  }
  b.o_flush = b.o;  // the keys' weights are 0 in fp32: all of O is what they lose
  const double c_m = kMConversionUnits * u * std::fabs(exact.sink) + 2 * kFlushResult;
  b.m = kSafety * c_m + exact.m_err;
  const double l_err = kExp2RelErr * kSafety;  // |ln l'|: exp2(0)'s error
  const double ln_ratio = c_m + l_err;           // |ln(l' / l_ref)|: the conversion besides
  b.l_rel = kSafety * std::expm1(ln_ratio) + exact.l_rel_err;
  const double log_err = kLogUlps * 2 * u * l_err;  // logf's ulps of ln l'
  const double pre_add = ln_ratio + log_err;
  b.lse = kSafety * (pre_add + u * (std::fabs(exact.lse) + pre_add)) + exact.lse_err;
  return b;
}

// A bound computed on its own path keeps the trivial bounds bound_row set first.
RowBound with_trivial(RowBound bound, const RowBound& trivial) {
  bound.o_trivial = trivial.o_trivial;
  bound.lse_trivial = trivial.lse_trivial;
  return bound;
}

}  // namespace

double unit_roundoff(Format format) {
  switch (format) {
    case Format::kF32: return 0x1p-24;
    case Format::kF16: return 0x1p-11;
    case Format::kBF16: return 0x1p-8;
    case Format::kE4M3: return 0x1p-4;
  }
  return 0.0;
}

RowBound bound_row(const RowResult& exact, Format format, Arithmetic path, int32_t block_n, int64_t head_dim,
                   const OrderedSums* sums, int32_t splits) {
  // A dropout is defined on the general path only (§4.13): the others round P before P*V, where the kernel's
  // dropped element and its scaling would enter a rounding the bound does not model.
  if (!computes_on(path, format)) {
    throw std::invalid_argument(std::string("bound_row: arithmetic ") + to_string(path) + " does not compute on " +
                                to_string(format) + " inputs (the fp8 path takes f8e4m3 inputs, and they take it only)");
  }
  const bool dropout = exact.dropout_p > 0.0f;
  if (dropout && path != Arithmetic::kGeneralFp32) {
    throw std::invalid_argument(std::string("bound_row: a dropout is bounded on the general-fp32 path only, not ") +
                                to_string(path));
  }
  RowBound b;
  const size_t dim = exact.o.size();  // O's columns, head_dim_v: every per-column ingredient has as many
  b.o.assign(dim, 0.0);
  b.o_flush.assign(dim, 0.0);
  // The row's running sums, where they were computed for it (ordered_sums of the same row). They model the unsplit
  // order: split-KV runs restart the running max and the partial sums at every run boundary (§4.10), so a split row
  // uses neither them nor the tiles they find moving the max; only their column maxima, which no order changes.
  const bool sums_of_row =
      sums != nullptr && sums->valid && sums->pv_keys.size() == dim && sums->v_col_max.size() == dim;
  const bool split = splits > 1;
  // The fp8 path's P*V restarts its wgmma chain every tile and adds the tiles in fp32: the running sums' model of one
  // chain along the row does not describe it, and its per-tile chains are short (path_model).
  const bool ordered = sums_of_row && !split && path != Arithmetic::kTensorCoreFp8;
  b.o_trivial.assign(dim, kInf);
  for (size_t k = 0; k < dim && k < exact.abs_v_sum.size(); ++k) {
    b.o_trivial[k] = sums_of_row ? sums->v_col_max[k] : std::min(exact.max_abs_v, exact.abs_v_sum[k]);
  }
  b.lse_trivial = std::max(std::log(static_cast<double>(exact.visible) + (std::isfinite(exact.sink) ? 1 : 0)),
                           std::log(2.0));
  b.unconstrained = exact.nonfinite_score || exact.score_overflow || exact.accum_overflow;
  if (uses_tile_reference(path)) {
    const double guard = path == Arithmetic::kTensorCoreFp8 ? kFp8AccumGuard : kTensorCoreAccumGuard;
    for (const double col : exact.abs_v_sum) b.unconstrained |= std::isfinite(col) && col > guard;
  }
  // Outside the domain nothing numeric is promised; with no usable key and no sink the result is exact (O = 0,
  // LSE = m = -inf, l = 0), and so is it with a sink of +inf (O = 0, LSE = m = +inf): every bound stays 0, and l,
  // relative to an infinite m, carries no claim.
  if (b.unconstrained || !(exact.l > 0)) return b;
  if (exact.sink == kInf) {
    b.l_rel = kInf;
    return b;
  }
  const bool has_sink = std::isfinite(exact.sink);
  const int64_t n = exact.visible;
  // The sink is one more weight of l that may flush (FTZ), and its merge rounds acc * alpha (one more rounding of
  // the numerator) and l * alpha + exp2(...) (two more of l). A flushed alpha (below 2^-126) drops the keys'
  // l and accumulator, which run up to 2^kTensorCoreRefSlackLog2 above their max's weight on the tensor-core path:
  // each key's flush allowance grows by that much. So does a split run's alpha_s in the combine (§4.10), and on the
  // tensor-core paths the main loop's alpha where the reference rises by more than 126.
  const double nd = static_cast<double>(n + (has_sink ? 1 : 0));
  const double ref_growth =
      uses_tile_reference(path)
          ? std::exp2(kTensorCoreRefSlackLog2 + (path == Arithmetic::kTensorCoreFp8 ? kFp8POffsetLog2 : 0.0))
          : 1.0;
  const double flush_w =
      has_sink || split || uses_tile_reference(path) ? kFlushWeight * (1 + ref_growth) : kFlushWeight;
  const int64_t tiles = block_n > 0 ? std::max<int64_t>(1, (std::max(exact.seqlen_k, n) + block_n - 1) / block_n)
                                    : std::max<int64_t>(1, n);
  // Split-KV (§4.10): the combine merges the runs as the online softmax merges tiles whose max changed at the run
  // boundaries, alpha_s = exp2(m_s - M) rescaling run s once more, l and every accumulator column one more
  // sequential addition per run. A run holding a key of the row holds one of the row's tiles, so at most
  // min(splits, tiles) runs add anything (one without a usable key merges exactly: fma(0, 0, x) = x). They count as
  // that many more tile boundaries: in the chains' lengths, the exp2 errors and the roundings of the max.
  const int64_t boundaries = tiles + (split ? std::min<int64_t>(splits, tiles) : 0);
  const int64_t block = block_n > 0 ? std::min<int64_t>(block_n, n) : n;
  PathModel pm = path_model(format, path, head_dim, n, boundaries, block);
  if (has_sink) {
    pm.pv_terms += 1;
    pm.l_terms += 2;
  }
  const double u = kU32;
  const double cap = exact.softcap;
  const bool capped = cap > 0;

  // Per-key error of the exponent argument, relative to the shift common to all keys (natural-log units):
  //   b_S S_j (score j's dot product, and the rounding of x = s * c) + b_G gap_j + c0, where c0 gathers the
  //   per-tile rounding of m * c (one per K tile in the FMA formulation p = exp2(s c - fl(m c))), the flushed
  //   products of the score and of the max, and one exp2 error per tile (rescale factors) and per key.
  const double a_s = gamma_n(pm.score_terms, pm.score_unit) * (1 + pm.score_split) + pm.score_split;
  // With a softcap the scaled score is the argument of tanh, s * fl(scale / c), two roundings of it; tanh is
  // 1-Lipschitz, so the capped score errs by no more than its argument (times c), and the roundings after tanh
  // (its error, the product by fl(c log2 e)) are cap_round below, at most kCapRound min(c, S_j) per key.
  // The folded scale, fl(scale log2 e) (or fl(scale / c) under a softcap), is rounded once on the host in IEEE
  // arithmetic. Below fp32's smallest normal that rounding is half a subnormal spacing, 2^-150, which relative to
  // the folded value exceeds the u its normal roundings count: the excess is a common relative error of every
  // logit (like the gaps' roundings) or, under a softcap, of tanh's argument (a score error, tanh being
  // 1-Lipschitz), and of m.
  const double folded = capped ? std::fabs(exact.scale) / cap : std::fabs(exact.scale) * detail::kLog2e;
  // (A quotient below half the smallest subnormal keeps that subnormal rather than 0, common/softmax.h: off by less
  // than a whole spacing.)
  const double fold_spacing = folded < kHalfSubnormalSpacing ? 2 * kHalfSubnormalSpacing : kHalfSubnormalSpacing;
  const double fold_rel = folded > 0 && folded < 0x1p-126 ? fold_spacing / folded : 0.0;
  const double b_s = capped ? ((a_s * (1 + kTwoRoundings) + kTwoRoundings) * (1 + 8 * u) + fold_rel) * (1 + fold_rel)
                            : (a_s + u) * (1 + a_s);
  // The fp8 path folds its descales into the scale in fp32, fl(fl(scale d_q) d_k): two more roundings of the common
  // factor, in the gaps and in m's conversion (kFp8DescaleUnits; with descales of 1 they are exact, and counted).
  const bool fp8 = path == Arithmetic::kTensorCoreFp8;
  const double fold_units = fp8 ? kFp8DescaleUnits : 0.0;
  const double m_units = kMConversionUnits + fold_units;
  const double b_g = (kGapUnits + fold_units) * u + (capped ? 0.0 : fold_rel);
  const double s_max = exact.score_abs_max;
  const double flush = capped ? exact.score_flush_max * (1 + 16 * u) : exact.score_flush_max;
  const double cap_round =
      capped ? kCapRound * (1 + 4 * u) * std::min(cap, s_max) + (cap + 1) * 2 * kFlushResult : 0.0;
  // The rounding of the max's product per tile, u of the scores' magnitude in natural-log units; capped scores
  // stay below c (within their own roundings).
  const double max_rounding = capped ? u * std::min(s_max * (1 + a_s) * (1 + 3 * u), cap * (1 + 8 * u))
                                     : u * s_max * (1 + a_s) * (1 + 3 * u);
  // The tensor-core path's reference may step down to a tile's own max and back (at most
  // kTensorCoreRefSlackLog2 each way per tile): its rescale arguments then no longer telescope to the gap, and
  // each such step costs one more rounding of the subtraction (u of at most 2 * slack log2 units per tile).
  const double ref_steps = uses_tile_reference(path) ? 2 * kTensorCoreRefSlackLog2 * u * kLn2 : 0.0;
  // The largest error of a key's logit, and the distance the kernel's max of the keys may have from the exact one.
  const double score_err_max = b_s * s_max + 2 * flush + cap_round;
  // Per tile that moves the running max: its rescale's exp2 error and the rounding of the new max's product. A tile
  // that leaves the max where it is rescales by exp2(0) = 1 exactly (§4.9): where the running sums list the tiles
  // whose exact max comes near the running max, only those (and the first) can move the kernel's, whose scores lie
  // within score_err_max of the exact ones. The tensor-core path moves its reference with every tile's own max.
  double moving_tiles = static_cast<double>(boundaries);
  if (ordered && !uses_tile_reference(path) &&
      2 * score_err_max * kSafety < OrderedSums::kRiseWindow) {
    const double margin = -2 * score_err_max * kSafety;
    const auto moves = std::count_if(sums->tile_rises.begin(), sums->tile_rises.end(),
                                     [margin](double rise) { return rise >= margin; });
    moving_tiles = std::min(moving_tiles, 1.0 + static_cast<double>(moves));
  }
  // The fp8 path adds its offset to each argument, fl(fl(x - r) + 8): that rounding errs by u of |x - r| (the gaps'
  // spare unit) plus u of the offset (log2 units), per key.
  const double offset_rounding = path == Arithmetic::kTensorCoreFp8 ? kFp8POffsetLog2 * u * kLn2 : 0.0;
  const double c0 = moving_tiles * (max_rounding + kExp2RelErr + ref_steps) + 2 * flush + cap_round + offset_rounding;
  const double x_keys = b_s * s_max + b_g * std::min(exact.score_gap_max, kGapCap) + c0;
  const double m_below = m_below_of(path);

  // A sink more than kGapCap from every key, beyond every error of the kernel's logits (its max of the keys, a
  // tensor-core reference below it, the conversions to log2 units), either decides alone (above: alpha =
  // exp2(<= -kGapCap log2 e) = 0 in the kernel) or weighs nothing (below: its exp2 is 0 in the kernel, its exact
  // weight below e^-kGapCap; what remains of its merge is alpha = exp2(0)'s error and the roundings of l alpha and
  // acc alpha).
  bool sink_weighs = false;
  if (has_sink) {
    if (exact.keys_m == -kInf) return with_trivial(sink_only_bound(exact, format), b);
    const double margin = kGapCap + score_err_max + m_below +
                          2 * kTwoRoundings * (std::fabs(exact.sink) + std::fabs(exact.keys_m));
    if (exact.sink - exact.keys_m > margin) return with_trivial(sink_only_bound(exact, format), b);
    sink_weighs = exact.keys_m - exact.sink <= margin;
  }

  // The sink, relative to the keys' common shift (everything common to the keys moves onto it: alpha's exp2
  // error and the rounding of its argument): its conversion to log2 units against the keys' common factor,
  // the rounding of the one nonzero argument of the merge, sink2 - m or m - sink2 (the exact distance, plus
  // what the kernel's max of the keys may be off), and two exp2 errors (the sink's weight, alpha). A sink that
  // weighs nothing keeps only alpha = exp2(0)'s error, common to every key (it cancels in O, not in l).
  double sink_err = 0.0, sink_x = 0.0;
  if (sink_weighs) {
    const double sink_abs = std::fabs(exact.sink), keys_abs = std::fabs(exact.keys_m);
    sink_err = kTwoRoundings * (sink_abs + keys_abs) + 2 * kFlushResult +
               u * (std::fabs(exact.sink - exact.keys_m) + score_err_max + m_below) * (1 + kTwoRoundings) +
               2 * kExp2RelErr * kSafety;
    sink_x = b_g * std::min(exact.m - exact.sink, kGapCap) + c0 + sink_err;
  } else if (has_sink) {
    sink_err = kExp2RelErr * kSafety;
  }
  const double sink_p = sink_weighs ? exact.sink_p : 0.0;
  const double x_max = std::max(x_keys, sink_x);
  const double weighted = b_s * exact.score_abs_weighted + b_g * exact.score_gap_weighted + c0 + sink_err * sink_p;
  const double growth = std::exp(x_max);  // e^x - 1 <= x e^x: turns argument errors into weight errors
  const double theta_max = std::expm1(x_max);
  const double theta_mean = growth * weighted + nd * flush_w / exact.l;
  // The first-order analysis needs the oracle's own O and l to first order.
  const bool linear = first_order_accurate(exact) && x_max <= kLinearizationLimit && theta_mean <= kLinearizationLimit;

  // The accumulations' own rounding, relative to what they add up: gamma of the longest chain (§4.2), or from the
  // running sums in the kernel's order (§4.9), per column for P*V; the smaller holds.
  const double g_pv = gamma_n(pm.pv_terms, pm.pv_unit);
  double g_l = gamma_n(pm.l_terms, pm.l_unit);
  std::vector<double> run_pv;  // per column: the P*V accumulation's error in units of O (weights' errors included)
  double pv_growth = 1 + g_pv;  // what the accumulation may grow an error made before it by
  if (ordered) {
    const RunningModel rm = running_model(path, pm, *sums, has_sink, block_n, theta_max);
    pv_growth = std::min(pv_growth, rm.pv_growth);
    run_pv.resize(dim);
    for (size_t k = 0; k < dim; ++k) {
      run_pv[k] = rm.pv_growth * (1 + pm.p_round) *
                  (pm.pv_unit * (rm.per_key * (sums->pv_keys[k] + theta_max * sums->pv_prefix_keys[k]) +
                                 rm.per_tile * (sums->pv_tiles[k] + theta_max * sums->pv_prefix_tiles[k])) +
                   u * (sums->pv_rescale[k] + theta_max * sums->pv_prefix_tiles[k]) +
                   (has_sink ? u * (std::fabs(exact.o[k]) + theta_max * exact.abs_pv[k]) : 0.0));
    }
    if (theta_mean < 1) g_l = std::min(g_l, rm.l_rel / (1 - theta_mean));
  }
  const double g_div = (1 + kDivisionUnits * u) / (1 - g_l) - 1;  // relative error of acc / l beyond the sums
  const double u_out = output_unit(format), out_floor = output_floor(format);
  // A dropout (§4.13): the ingredients are those of the averaged values v~ = z sigma v, so every term above scales
  // with sigma but the absolute floor of a flushed P*V product, which the kernel makes before its scaling. Its
  // epilogue then multiplies o by s32 = fl32(sigma), within scale_rel of sigma, and rounds once more.
  const double product_floor = dropout ? kFlushProduct * exact.keep_scale : kFlushProduct;
  const double scale_rel = u + kDropoutScaleRel;
  // What the weights' flush can take from column k: no more than the mass of the keys light enough to flush (a row
  // result without that ingredient: no limit).
  const auto light = [&](size_t k) { return k < exact.abs_pv_light.size() ? exact.abs_pv_light[k] : kInf; };
  for (size_t k = 0; k < dim; ++k) {
    const double o_abs = std::fabs(exact.o[k]);
    double pre = 0.0;    // bound on |O_kernel - O| before the output rounding
    double flush = 0.0;  // its part from flushed weights and P*V products (o_flush)
    if (linear) {
      const double floor_scale = 1.0 / (exact.l * (1 - theta_mean));
      // Weight errors shared by numerator and denominator move O by sum_j p_j theta_j (v_jk - O_k).
      // The sink's own error moves O by p_s sink_err |0 - O_k| (its value row is 0).
      flush = std::min(flush_w * (exact.abs_v_sum[k] + nd * o_abs) * floor_scale, light(k) / (1 - theta_mean)) +
              nd * product_floor * floor_scale;
      const double weights =
          growth *
              (b_s * exact.dev_pv_score[k] + b_g * exact.dev_pv_gap[k] + c0 * exact.dev_pv[k] +
               sink_err * sink_p * o_abs) /
              (1 - theta_mean) +
          flush_w * (exact.abs_v_sum[k] + nd * o_abs) * floor_scale;
      // The numerator alone: P rounded before P*V (l keeps fp32 P), and the P*V accumulation.
      const double accumulation = (1 + theta_max) * g_pv * (1 + pm.p_round) * exact.abs_pv[k];
      const double numerator =
          ((1 + theta_max) * pm.p_round * exact.abs_pv[k] +
           (run_pv.empty() ? accumulation : std::min(accumulation, run_pv[k]))) /
              (1 - theta_mean) +
          ((pm.p_round_abs > 0 ? pm.p_round_abs * pv_growth * exact.abs_v_sum[k] : 0.0) + nd * product_floor) *
              floor_scale;
      const double shift = weights + numerator;
      pre = shift * (1 + g_div) + g_div * o_abs;
    } else {
      // Hull: |O_kernel| <= max|v| (1 + p_round)(1 + g_pv)(1 + g_div) plus the absolute floors over l >= 1 - g_l
      // (the kernel's own max key has weight exp2(0) = 1; a sink only adds to l, and its merge's roundings are in
      // g_pv and g_l).
      // Column k's largest |v| is at most its sum over the visible keys: that keeps the hull of a finite column
      // finite when another column holds an infinite value (max_abs_v is over all columns).
      const double col_max_abs_v = std::min(exact.max_abs_v, exact.abs_v_sum[k]);
      const double hull = col_max_abs_v * (1 + pm.p_round) * (1 + g_pv) * (1 + g_div) +
                          (pm.p_round_abs * exact.abs_v_sum[k] + nd * product_floor) / (1 - g_l);
      flush = (std::min(flush_w * exact.abs_v_sum[k], light(k)) + nd * product_floor) / (1 - g_l);
      pre = hull + o_abs;
    }
    // o' = fl32(o s32): |o s32 - O| <= sigma |o - O/sigma| (1 + scale_rel) + scale_rel |O|, and the product's
    // rounding u of |o s32| (a flushed or subnormal product: kFlushResult absolute).
    // The fp8 path's fl(o d_v) (exact d_v, an fp32 value; RowResult's O and ingredients carry it): u of |O|.
    // Both carry the flush part too, without the |O| term.
    const auto epilogue = [&](double x, double o_term) {
      if (dropout) x = x * (1 + scale_rel) * (1 + u) + o_term * (scale_rel + u * (1 + scale_rel)) + kFlushResult;
      if (fp8) x = x * (1 + u) + u * o_term + kFlushResult;
      return x;
    };
    pre = epilogue(pre, o_abs);
    flush = epilogue(flush, 0.0);
    // fp32 output has no separate rounding (u_out = 0): skip the term, so an infinite pre never makes 0 * inf = NaN.
    const double out_rounding = u_out > 0 ? u_out * (o_abs + pre) : 0.0;
    // The hull bounds |got| + |want| with want the oracle's own O (o_abs): it holds whatever the oracle's
    // accuracy, so the oracle's error is added only to the first-order bound.
    b.o[k] = kSafety * (pre + out_rounding + out_floor + (linear ? exact.o_err[k] : 0.0));
    b.o_flush[k] = kSafety * flush;
  }

  // No finite bound at this length (l's accumulated rounding may reach l itself, so may the division's): the row is
  // outside the domain, reported as such and never passed (§4.9).
  // That is: l's sum may be off by all of l, or a finite column's P*V sum has no finite bound (gamma of the chain
  // past 1 / u, and no running sums or none that is finite); and a bound that came out NaN or negative is never used.
  bool vacuous = !(g_l < 1);
  for (size_t k = 0; k < dim && !vacuous; ++k) {
    if (!std::isfinite(exact.o[k])) continue;
    const bool no_accumulation_bound =
        !std::isfinite(g_pv) && (!linear || run_pv.empty() || !std::isfinite(run_pv[k]));
    if (no_accumulation_bound || std::isnan(b.o[k]) || b.o[k] < 0) vacuous = true;
  }
  if (vacuous) {
    std::fill(b.o.begin(), b.o.end(), kInf);
    b.lse = b.m = b.l_rel = kInf;
    b.unconstrained = b.vacuous = true;
    return b;
  }

  // m: the computed max is within the largest score error of the exact max (a sink's own conversion is part of
  // the next term); then the unit conversion, four roundings of |m| (and a flushed subnormal sink each way), each
  // of them absolute where its result is subnormal (flushed or on the subnormal grid: kFlushResult), and the
  // folded scale's subnormal rounding (fold_rel, relative to |m|).
  const double m_abs = std::fabs(exact.m);
  const double sink_flush = has_sink ? 2 * kFlushResult : 0.0;
  b.m = kSafety * (score_err_max + (m_units * u + (capped ? 0.0 : fold_rel)) * (m_abs + score_err_max) +
                   kMConversionUnits * kFlushResult + sink_flush) +
        exact.m_err;
  b.m_below = m_below;

  // l relative to exp(m_kernel): as the weights, plus the gap between the kernel's internal base and the
  // reported m; the flushed weights are judged against the smallest l_ref the kernel's m allows. That gap is the
  // keys' common factor (two roundings of |max of the keys|) and the conversion of the merged max (two of |m|);
  // without a sink the two maxima are one. Every weight of l, the sink's and the keys' through alpha, may carry
  // the sink's error besides (it does not cancel in l).
  const double c_m = has_sink ? m_units / 2 * u *
                                    ((std::fabs(exact.keys_m) + score_err_max) + (m_abs + score_err_max)) +
                                    sink_flush
                              : m_units * u * (m_abs + score_err_max);
  const double x_l = x_max + c_m + (has_sink ? sink_err : 0.0);
  const double growth_l = std::exp(x_l);
  const double l_ref_min = exact.l * std::exp(-b.m);
  const double flush_l = nd * flush_w / l_ref_min;
  const double theta_l = growth_l * (weighted + c_m + (has_sink ? sink_err : 0.0)) + flush_l;
  const double l_linear = (1 + theta_l) * (1 + g_l) - 1;
  const double l_hull = std::expm1(x_l) * (1 + g_l) + g_l + flush_l;
  b.l_rel = kSafety * (linear ? std::min(l_linear, l_hull) : l_hull) + exact.l_rel_err;

  // LSE = m + ln l: the error of ln(l_kernel / l_ref), of logf, and of the final fp32 addition.
  const double ln_ratio_linear = b.l_rel < 1 ? -std::log1p(-b.l_rel) : kInf;
  const double ln_ratio_hull = x_l - std::log1p(-g_l) + flush_l;
  const double ln_ratio = std::min(ln_ratio_linear, ln_ratio_hull);
  const double log_err = kLogUlps * 2 * u * (std::log(exact.l) + b.m + b.m_below + ln_ratio);
  const double pre_add = ln_ratio + log_err;
  b.lse = kSafety * (pre_add + u * (std::fabs(exact.lse) + pre_add)) + exact.lse_err;
  return b;
}

double error_ratio(double got, double want, double bound, bool unconstrained) {
  if (std::isnan(want)) return std::isfinite(got) ? kInf : 0.0;
  if (std::isinf(want)) return got == want ? 0.0 : kInf;
  if (unconstrained) return 0.0;
  if (!std::isfinite(got)) return kNaN;
  const double err = std::fabs(got - want);
  if (err == 0.0) return 0.0;
  return bound > 0 ? err / bound : kInf;
}

double l_given_m(const RowResult& exact, double kernel_m) {
  return exact.l * std::exp((exact.m - kernel_m) + exact.m_lo);
}

double m_error_ratio(const RowResult& exact, const RowBound& bound, double kernel_m) {
  if (bound.unconstrained) return 0.0;
  // Judged against the interval [m* - m_below, m*]: the nearest point of it is what m must be within bound.m of.
  if (bound.m_below > 0 && std::isfinite(exact.m) && std::isfinite(kernel_m) && kernel_m < exact.m) {
    return error_ratio(kernel_m, std::max(kernel_m, exact.m - bound.m_below), bound.m, false);
  }
  return error_ratio(kernel_m, exact.m, bound.m, false);
}

double l_error_ratio(const RowResult& exact, const RowBound& bound, double kernel_m, double kernel_l) {
  // No claim outside the domain, nor where |m| is so large that fp32's rounding of m alone moves exp(m) by
  // more than any number (the bound is infinite: u |m| >> 1).
  if (bound.unconstrained || !std::isfinite(bound.l_rel)) return 0.0;
  if (!(exact.l > 0)) return kernel_l == 0.0 ? 0.0 : kInf;
  if (!std::isfinite(kernel_m) || !std::isfinite(kernel_l)) return kNaN;
  const double arg = (exact.m - kernel_m) + exact.m_lo;
  const double l_ref = exact.l * std::exp(arg);
  // l_ref's own evaluation: the argument's rounding (u |arg|), exp within 1 ulp, the product and the quotient.
  const double eval_err = detail::kDoubleUnit * (std::fabs(arg) + 6);
  const double rel = std::fabs(kernel_l / l_ref - 1.0);
  return rel / (bound.l_rel + eval_err);
}

void RmsCheck::add(double got, double reference, double exact, double abs_pv, double score_sq) {
  if (!std::isfinite(got) || !std::isfinite(reference) || !std::isfinite(exact) || !std::isfinite(abs_pv) ||
      !(abs_pv > 0)) {
    return;
  }
  const double kernel = (got - exact) / abs_pv, emulated = (reference - exact) / abs_pv, value = exact / abs_pv;
  const double noise = kRmsScoreRoundings * kU32 * std::sqrt(std::max(score_sq, 0.0)) / abs_pv;
  sum_sq_kernel_ += kernel * kernel;
  sum_sq_reference_ += std::max(emulated * emulated, std::isfinite(noise) ? noise * noise : 0.0);
  sum_sq_exact_ += value * value;
  ++count_;
  if (!has_last_ || exact != last_exact_ || abs_pv != last_abs_pv_) ++draws_;
  last_exact_ = exact, last_abs_pv_ = abs_pv, has_last_ = true;
}

void RmsCheck::merge(const RmsCheck& other, bool new_draws) {
  sum_sq_kernel_ += other.sum_sq_kernel_;
  sum_sq_reference_ += other.sum_sq_reference_;
  sum_sq_exact_ += other.sum_sq_exact_;
  count_ += other.count_;
  draws_ += new_draws ? other.draws_ : 0;
  has_last_ = false;  // the next element is not a column beside the merged pool's last
}

double RmsCheck::rms_kernel() const {
  return count_ > 0 ? std::sqrt(sum_sq_kernel_ / static_cast<double>(count_)) : 0.0;
}
double RmsCheck::rms_reference() const {
  return count_ > 0 ? std::sqrt(sum_sq_reference_ / static_cast<double>(count_)) : 0.0;
}
double RmsCheck::rms_exact() const { return count_ > 0 ? std::sqrt(sum_sq_exact_ / static_cast<double>(count_)) : 0.0; }

double RmsCheck::rms_floor() const {
  if (count_ == 0) return 0.0;
  const double u_q = std::max(unit_roundoff(output_format(format_)), kU32);
  // The input-format term is a sampling allowance and shrinks as 1/sqrt(D), D the independent draws (a row's
  // equal columns round alike: one draw); the fp32 term does not: a healthy fp32 pipeline may differ from the
  // reference by a few roundings in every element (exp argument, accumulation order, rescale, the division by
  // l), and an RMS over N such elements does not shrink with N.
  return kRmsFloorUlps * (u_q * rms_exact() / std::sqrt(static_cast<double>(draws_)) + kRmsFp32Roundings * kU32);
}

double RmsCheck::ratio() const {
  const double kernel = rms_kernel();
  if (kernel == 0.0) return 0.0;
  const double allowed = kRmsFactor * rms_reference() + rms_floor();
  return allowed > 0 ? kernel / allowed : kInf;
}

}  // namespace flashcheck::oracle
