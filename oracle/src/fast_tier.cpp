// The fast tier: one row in double with error-free transformations, in four passes (scores and max; weights,
// l and LSE; weighted V; bound ingredients). Exact products, compensated sums (Sum2), double-double scores,
// LSE = m + log1p(rest) after Blanchard, Higham and Higham (IMA J. Numer. Anal. 2021) so a dominant key loses
// nothing to 1 + tiny, P*V products made exact by a Veltkamp split. A softcap caps each score in double; a sink
// is one more logit with a zero value row. A dropout leaves m, l and LSE alone: the weighted V sum runs over the kept
// keys and is scaled by 1 / (1 - p) once, after the division by l. Its own error bound (docs/error-model.md §2.3) is
// stored in the result.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "eft.h"
#include "tiers.h"

namespace flashcheck::oracle::detail {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kUnit = kDoubleUnit;
// Second-order terms of this tier's error analysis are below 2^-40 of the first-order ones; this factor
// covers them and the rounding of the bound's own evaluation.
constexpr double kSecondOrder = 1.0 + 0x1p-30;
// Smallest positive double: an exp() result or P*V product that underflows loses at most this per key.
constexpr double kDoubleDenormMin = 0x1p-1074;
constexpr int64_t kScoreLanes = 8;  // keys whose score sums run side by side, one per vector lane
// Error of a capped score c tanh(s / c) in units of u_d min(c, S_j): the quotient s / c (2, with the score's low
// part dropped; tanh is 1-Lipschitz), tanh (kFastTanhUlps ulps of a value below 1: glibc's tanh is within 2, so 4
// leaves a factor 2; oracle_test compares with gold) and the product by c (1).
constexpr double kFastTanhUlps = 4.0;
constexpr double kCapUnits = 2.0 + 2.0 * kFastTanhUlps + 1.0;

struct ScoreDD {
  double hi = 0.0, lo = 0.0;  // s = hi + lo, normalized (|lo| <= ulp(hi)/2)
};

bool dd_less(const ScoreDD& a, const ScoreDD& b) { return a.hi < b.hi || (a.hi == b.hi && a.lo < b.lo); }

// scale * d for d = d_hi + d_lo: the scale is an fp32 value (24 bits), so scale * (26-bit half of d_hi) is
// exact; only scale * d_lo (below 2^-53 |d|) rounds.
ScoreDD scale_dd(double scale, double d_hi, double d_lo) {
  double hi = 0.0, lo = 0.0;
  split_26(d_hi, &hi, &lo);
  double a = 0.0, b = 0.0;
  two_sum(scale * hi, scale * lo, &a, &b);
  b += scale * d_lo;
  ScoreDD s;
  two_sum(a, b, &s.hi, &s.lo);
  return s;
}

// (scale + scale_lo) * (d_hi + d_lo) for a scale that is no fp32 value (fp8 descales: a product of three fp32 values,
// as two doubles): the high product exact by an FMA, the cross terms (below 2^-52 of it) rounded once each.
ScoreDD scale_dd_wide(double scale, double scale_lo, double d_hi, double d_lo) {
  const double p = scale * d_hi;
  const double e = std::fma(scale, d_hi, -p) + (scale * d_lo + scale_lo * d_hi);
  ScoreDD s;
  two_sum(p, e, &s.hi, &s.lo);
  return s;
}

// kScoreLanes doubles as one value (GCC/Clang vector extensions): element-wise IEEE operations, lowered to whatever
// vector width the target has (two SSE2 registers' worth of lanes per AVX2 register, and so on), never reordered
// or contracted (-ffp-contract=off), so each lane computes exactly what the scalar code would.
using Lanes = double __attribute__((vector_size(kScoreLanes * sizeof(double))));
using LaneMask = int64_t __attribute__((vector_size(kScoreLanes * sizeof(int64_t))));
constexpr int64_t kAbsBits = 0x7fffffffffffffff;

// Vector loads and |x| without a function taking or returning a vector (whose ABI would depend on the target).
#define FLASHCHECK_LOAD_LANES(x, from) std::memcpy(&(x), (from), sizeof(Lanes))
#define FLASHCHECK_ABS_LANES(x) reinterpret_cast<Lanes>(reinterpret_cast<LaneMask>(x) & kAbsBits)

// The row functions are compiled for the x86-64 baseline (SSE2) and for AVX2 and AVX-512, chosen at load time
// by the CPU (GCC function multiversioning): the binary runs on any x86-64 machine and uses the widest vectors
// it finds. The clones compute the same IEEE operations in the same order: results do not depend on the clone.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define FLASHCHECK_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define FLASHCHECK_VECTOR_CLONES
#endif

// One key's ingredients of pass 4 across V's head_dim_v columns: sum_j p_j |v_jk|, p_j |v_jk - O_k|,
// p_j S_j |v_jk - O_k|, p_j gap_j |v_jk - O_k|, (p_j N_j (v_jk - O_k))^2.
FLASHCHECK_VECTOR_CLONES void add_ingredients(const double* __restrict v, const double* __restrict o, double p,
                                              double p_s, double p_g, double p_noise, int64_t dim_v,
                                              double* __restrict abs_pv, double* __restrict dev_pv,
                                              double* __restrict dev_pv_score, double* __restrict dev_pv_gap,
                                              double* __restrict dev_pv_score_sq) {
  for (int64_t k = 0; k < dim_v; ++k) {
    const double dev = std::fabs(v[k] - o[k]);
    abs_pv[k] += p * std::fabs(v[k]);
    dev_pv[k] += p * dev;
    dev_pv_score[k] += p_s * dev;
    dev_pv_gap[k] += p_g * dev;
    dev_pv_score_sq[k] += (p_noise * dev) * (p_noise * dev);
  }
}

// A dropped key's share of pass 4: a value row of zeros (|v~ - O_k| = |O_k|), as the sink's.
FLASHCHECK_VECTOR_CLONES void add_zero_row(const double* __restrict o, double p, double p_s, double p_g,
                                           double p_noise, int64_t dim_v, double* __restrict dev_pv,
                                           double* __restrict dev_pv_score, double* __restrict dev_pv_gap,
                                           double* __restrict dev_pv_score_sq) {
  for (int64_t k = 0; k < dim_v; ++k) {
    const double dev = std::fabs(o[k]);
    dev_pv[k] += p * dev;
    dev_pv_score[k] += p_s * dev;
    dev_pv_gap[k] += p_g * dev;
    dev_pv_score_sq[k] += (p_noise * dev) * (p_noise * dev);
  }
}

// Every per-column vector of the result has O's head_dim_v entries.
void size_result(RowResult* r, int64_t head_dim_v) {
  const size_t d = static_cast<size_t>(head_dim_v);
  for (std::vector<double>* vec :
       {&r->o, &r->abs_pv, &r->dev_pv, &r->dev_pv_score, &r->dev_pv_gap, &r->dev_pv_score_sq, &r->abs_v_sum,
        &r->abs_pv_light, &r->o_err}) {
    vec->assign(d, 0.0);
  }
}

void set_no_usable_key(RowResult* r) {
  std::fill(r->o.begin(), r->o.end(), 0.0);
  r->lse = -kInf;
  r->m = -kInf;
  r->m_lo = 0.0;
  r->l = 0.0;
}

void set_nan_row(RowResult* r) {
  std::fill(r->o.begin(), r->o.end(), kNaN);
  r->lse = r->m = r->l = kNaN;
}

// The sink's weight alone (no usable key, or a sink of +inf against which every key weighs nothing): LSE = m = sink,
// l = 1, and O = 0, which the kernel gets by scaling its accumulator with alpha = 0; a column holding a non-finite
// V value at a visible key is non-finite there (0 * inf in the accumulator). col_nonfinite: NaN in such a column
// (null: none).
void set_sink_only(RowResult* r, const double* col_nonfinite) {
  for (size_t k = 0; k < r->o.size(); ++k) r->o[k] = col_nonfinite && std::isnan(col_nonfinite[k]) ? kNaN : 0.0;
  r->lse = r->m = r->sink;
  r->m_lo = 0.0;
  r->l = 1.0;
  r->sink_p = 1.0;
}

// The first n entries of a scratch array: capacity is kept from row to row, so a row allocates only when it is
// longer than every row before it on this thread.
template <class T>
T* scratch_of(std::vector<T>* array, int64_t n) {
  if (array->size() < static_cast<size_t>(n)) array->resize(static_cast<size_t>(n));
  return array->data();
}
template <class T>
T* zeroed_scratch_of(std::vector<T>* array, int64_t n) {
  T* out = scratch_of(array, n);
  std::fill(out, out + n, T(0));
  return out;
}

}  // namespace

FastScratch& thread_scratch() {
  thread_local FastScratch scratch;
  return scratch;
}

FLASHCHECK_VECTOR_CLONES FastRow fast_row(const RowView& view, FastScratch* scratch) {
  FastRow out;
  RowResult& r = out.result;
  r.row = view.row;
  r.visible = view.visible;
  r.seqlen_k = view.seqlen_k;
  r.scale = view.scale;
  r.softcap = view.softcap;
  r.sink = view.sink;
  r.dropout_p = view.dropout_p;
  r.keep_scale = view.has_dropout() ? view.value_scale : 1.0;
  // The kept keys' values enter O times value_scale (a dropout's 1 / (1 - p), or fp8's descale_v), applied after the
  // sums as the factor of a dropout is.
  const bool scaled_values = view.value_scale != 1.0;
  // Scores run over dim (Q's and K's columns); V, O and every per-column ingredient over dim_v.
  const int64_t dim = view.head_dim, dim_v = view.head_dim_v;
  const int64_t n = view.visible;
  size_result(&r, dim_v);
  // The sink: -inf is none; NaN is a NaN logit; the kernel takes it to log2 units in fp32 (sink * log2 e), where
  // beyond the guard it, or its distance to the max, may overflow.
  const bool has_sink = !(view.sink == -kInf);
  if (std::isnan(view.sink)) r.nonfinite_input = r.nonfinite_score = true;
  if (std::isfinite(view.sink) && std::fabs(view.sink) * kLog2e > kOverflowGuard) r.score_overflow = true;
  if (n == 0) {  // Q, K, V are never read: only the sink can be non-finite
    if (r.nonfinite_score) {
      set_nan_row(&r);
    } else if (has_sink) {
      set_sink_only(&r, nullptr);
    } else {
      set_no_usable_key(&r);
    }
    return out;
  }
  const double scale = view.scale;
  // An fp32 scale (no descales) takes scale_dd's exact halves; a descaled one the FMA path.
  const bool fp32_scale = view.scale_lo == 0.0 && static_cast<double>(static_cast<float>(scale)) == scale;
  const double cap = view.softcap;
  const bool capped = cap > 0.0;
  const double abs_scale = std::fabs(scale);
  const double* q = view.q;

  // Pass 0, over V once: sum_j |v_jk| and max |v_jk| per column, and which columns a non-finite value reaches
  // (v * 0 is NaN exactly for a non-finite v, and NaN stays: no branch in the loop). Q here, K in pass 1. Under a
  // dropout only the kept keys' rows, whose values O averages (times the factor, applied after the loop).
  bool any_nonfinite = false;
  for (int64_t k = 0; k < dim; ++k) any_nonfinite = any_nonfinite || !std::isfinite(q[k]);
  double* __restrict abs_v_sum = r.abs_v_sum.data();
  double* __restrict col_nonfinite = zeroed_scratch_of(&scratch->col_nonfinite, dim_v);
  double* __restrict col_max = zeroed_scratch_of(&scratch->col_max, dim_v);
  for (int64_t j = 0; j < n; ++j) {
    if (!view.kept(j)) continue;
    const double* __restrict vj = view.v + j * dim_v;
    for (int64_t k = 0; k < dim_v; ++k) {
      const double a = std::fabs(vj[k]);
      abs_v_sum[k] += a;
      col_max[k] = std::max(col_max[k], a);  // a NaN never enters: std::max keeps the first operand then
      col_nonfinite[k] += vj[k] * 0.0;
    }
  }
  if (scaled_values) {
    for (int64_t k = 0; k < dim_v; ++k) {
      abs_v_sum[k] *= view.value_scale;
      col_max[k] *= view.value_scale;
    }
  }
  double max_abs_v = 0.0;
  for (int64_t k = 0; k < dim_v; ++k) {
    max_abs_v = std::max(max_abs_v, col_max[k]);
    any_nonfinite = any_nonfinite || std::isnan(col_nonfinite[k]);
  }
  r.max_abs_v = max_abs_v;
  for (int64_t k = 0; k < dim_v; ++k) {
    if (!std::isnan(col_nonfinite[k]) && abs_v_sum[k] > kOverflowGuard) r.accum_overflow = true;
  }

  // Pass 1: scores s_j = scale * q.k_j. Finite products are exact in double; Sum2 keeps the sum to
  // gamma_{D-1}^2 sum |q_k k_jk|. With a non-finite product the plain IEEE sum gives the semantics
  // (inf + finite = inf, inf - inf = NaN), which no reordering changes.
  double* score_hi = scratch_of(&scratch->score_hi, n);
  double* score_lo = scratch_of(&scratch->score_lo, n);
  double* abs_dot = scratch_of(&scratch->abs_dot, n);  // sum_k |q_k k_jk|, unscaled
  double* flush = scratch_of(&scratch->flush, n);      // what FTZ / split underflow may drop, unscaled
  double* noise = scratch_of(&scratch->noise, n);      // |s_j| + |scale| sqrt(sum_k (q_k k_jk)^2)
  char* usable = scratch_of(&scratch->usable, n);
  out.usable = std::span<const char>(usable, static_cast<size_t>(n));
  double max_abs_dot = 0.0;
  // kScoreLanes keys at a time, K transposed to (dim, kScoreLanes): each key's sum runs over k in order, as one
  // lane of a vector; the lanes are independent, so the compiler vectorises across keys without reordering any
  // key's sum. Lanes past the row's end hold zeros and are not read back.
  double* __restrict k_block = scratch_of(&scratch->k_block, dim * kScoreLanes);
  for (int64_t j0 = 0; j0 < n; j0 += kScoreLanes) {
    const int64_t lanes = std::min<int64_t>(kScoreLanes, n - j0);
    for (int64_t t = 0; t < kScoreLanes; ++t) {
      if (t < lanes) {
        const double* kj = view.k + (j0 + t) * dim;
        for (int64_t k = 0; k < dim; ++k) k_block[k * kScoreLanes + t] = kj[k];
      } else {
        for (int64_t k = 0; k < dim; ++k) k_block[k * kScoreLanes + t] = 0.0;
      }
    }
    Lanes sum = {}, comp = {}, abs_sum = {}, sq_sum = {}, dropped = {}, k_check = {};
    for (int64_t k = 0; k < dim; ++k) {
      const double qk = q[k];
      const double abs_qk = std::fabs(qk);
      // A product may lose a low part or be flushed when an operand is below kFlushOperand (min(|q_k|, |k_jk|):
      // with |q_k| NaN that minimum is NaN, never tiny) or the product below kFlushResult.
      const int64_t q_tiny = abs_qk < kFlushOperand ? -1 : 0;
      const int64_t q_nan = std::isnan(abs_qk) ? 0 : -1;
      Lanes kv;
      FLASHCHECK_LOAD_LANES(kv, k_block + k * kScoreLanes);
      const Lanes prod = qk * kv;
      const Lanes abs_prod = FLASHCHECK_ABS_LANES(prod);
      // Sum2's step, two_sum(sum, prod), lane by lane.
      const Lanes s = sum + prod;
      const Lanes b_virtual = s - sum;
      const Lanes a_virtual = s - b_virtual;
      comp += (sum - a_virtual) + (prod - b_virtual);
      sum = s;
      abs_sum += abs_prod;
      sq_sum += prod * prod;
      const LaneMask tiny = q_tiny | ((FLASHCHECK_ABS_LANES(kv) < kFlushOperand) & q_nan) | (abs_prod < kFlushResult);
      dropped += reinterpret_cast<Lanes>(reinterpret_cast<LaneMask>(abs_prod) & tiny);  // abs_prod where tiny, else +0
      k_check += kv * 0.0;  // NaN once a non-finite K value passed
    }
    for (int64_t t = 0; t < lanes; ++t) {
      const int64_t j = j0 + t;
      const double* kj = view.k + j * dim;
      any_nonfinite = any_nonfinite || std::isnan(k_check[t]);
      ScoreDD s;
      if (std::isfinite(abs_sum[t])) {
        double d_hi = 0.0, d_lo = 0.0;
        two_sum(sum[t], comp[t], &d_hi, &d_lo);
        s = fp32_scale ? scale_dd(scale, d_hi, d_lo) : scale_dd_wide(scale, view.scale_lo, d_hi, d_lo);
        max_abs_dot = std::max(max_abs_dot, abs_sum[t]);
        noise[j] = std::fabs(s.hi) + abs_scale * std::sqrt(sq_sum[t]);
      } else {
        // A non-finite input makes the score +-inf or NaN; the finite products beside it still pass through the
        // kernel's fp32 sum, and if they overflow fp32 there (inf - inf = NaN) the row is outside the domain.
        double plain = 0.0, finite_abs = 0.0;
        for (int64_t k = 0; k < dim; ++k) {
          const double prod = q[k] * kj[k];
          plain += prod;
          if (std::isfinite(prod)) finite_abs += std::fabs(prod);
        }
        s.hi = scale * plain;
        max_abs_dot = std::max(max_abs_dot, finite_abs);
        noise[j] = 0.0;
      }
      abs_dot[j] = abs_sum[t];
      flush[j] = dropped[t] + static_cast<double>(dim) * kFlushResult;
      if (capped) {
        // c tanh(s / c), from the high part (the low part is below 2^-53 of it). +-inf becomes +-c, in the kernel
        // too (tanhf(+-inf) = +-1 exactly): such a key is usable and its capped score carries no error of its own.
        s = ScoreDD{cap * std::tanh(s.hi / cap), 0.0};
        noise[j] = std::min(cap, noise[j]);
        if (!std::isfinite(abs_sum[t]) && std::isfinite(s.hi)) {
          abs_dot[j] = 0.0;
          flush[j] = 0.0;
        }
      }
      score_hi[j] = s.hi;
      score_lo[j] = s.lo;
      if (std::isnan(s.hi) || s.hi == kInf) r.nonfinite_score = true;
      usable[j] = std::isfinite(s.hi) ? 1 : 0;
    }
  }
  r.nonfinite_input = any_nonfinite;
  // fp32 scores, the scaled x = s * scale * log2(e), and x - m must stay below FLT_MAX in the kernel. With a softcap
  // x is at most c log2(e); the argument s * scale / c takes the place of the scaled score. The folded factor itself,
  // fl(scale log2 e) or fl(scale / c), must be an fp32 number too: past FLT_MAX it is inf, and a score of exactly 0
  // times inf is NaN in the kernel where the exact score is 0.
  const bool keys = view.visible > 0;
  if (capped) {
    r.score_overflow = r.score_overflow || max_abs_dot * std::max(1.0, abs_scale / cap) > kOverflowGuard ||
                       cap * kLog2e > kOverflowGuard || (keys && abs_scale / cap > kOverflowGuard);
  } else {
    r.score_overflow = r.score_overflow || max_abs_dot * std::max(1.0, abs_scale * kLog2e) > kOverflowGuard ||
                       (keys && abs_scale * kLog2e > kOverflowGuard);
  }

  if (r.nonfinite_score) {
    set_nan_row(&r);
    return out;
  }
  const auto score_of = [&](int64_t j) { return ScoreDD{score_hi[j], score_lo[j]}; };
  int64_t best = -1;
  for (int64_t j = 0; j < n; ++j) {
    if (usable[j] && (best < 0 || dd_less(score_of(best), score_of(j)))) best = j;
  }
  if (best < 0 || view.sink == kInf) {
    // Every visible score is -inf, or a sink of +inf outweighs every key: the sink alone, if any; else no usable
    // key (the kernel's l == 0 path writes O = 0).
    if (best >= 0) r.keys_m = score_hi[best];
    if (has_sink) {
      set_sink_only(&r, col_nonfinite);
    } else {
      set_no_usable_key(&r);
    }
    return out;
  }
  out.numeric = true;
  // The max over the keys and the sink (a double, exact as the high part of a double-double).
  const ScoreDD keys_max = score_of(best);
  r.keys_m = keys_max.hi;
  const ScoreDD sink_dd{has_sink ? view.sink : -kInf, 0.0};
  const bool sink_is_max = has_sink && dd_less(keys_max, sink_dd);
  const ScoreDD m = sink_is_max ? sink_dd : keys_max;
  const auto gap_of = [&m](const ScoreDD& s) {
    double g_hi = 0.0, g_lo = 0.0;
    two_sum(m.hi, -s.hi, &g_hi, &g_lo);
    return g_hi + (g_lo + (m.lo - s.lo));
  };

  // Pass 2: gap_j = m - s_j >= 0 and w_j = exp(-gap_j); l = 1 + sum over the other keys (and the sink); LSE via
  // log1p.
  double* gap = scratch_of(&scratch->gap, n);
  double* w = scratch_of(&scratch->w, n);
  CompensatedSum others;
  for (int64_t j = 0; j < n; ++j) {
    if (!usable[j]) {
      gap[j] = w[j] = 0.0;
      continue;
    }
    const double g = gap_of(score_of(j));
    gap[j] = g;
    w[j] = std::exp(-g);
    if (j != best || sink_is_max) others.add(w[j]);
  }
  const double sink_gap = has_sink ? gap_of(sink_dd) : 0.0;
  const double sink_w = has_sink ? std::exp(-sink_gap) : 0.0;
  if (has_sink && !sink_is_max) others.add(sink_w);
  const double rest = others.value();
  const double l = 1.0 + rest;
  double lse_hi = 0.0, lse_lo = 0.0;
  two_sum(m.hi, m.lo + std::log1p(rest), &lse_hi, &lse_lo);
  r.m = m.hi;
  r.m_lo = m.lo;
  r.l = l;
  r.lse = lse_hi + lse_lo;
  r.sink_p = sink_w / l;

  // Pass 3: O_k = (sum_j w_j v_jk) / l. w_j = wh + wl (Veltkamp), wh * v and wl * v exact; the wh terms go
  // through TwoSum, the wl terms (below 2^-26 of them) straight into the compensation. Vectorised over k. Under a
  // dropout the sum runs over the kept keys, and the quotient is scaled by the factor, one more rounding.
  double* __restrict acc_sum = zeroed_scratch_of(&scratch->acc_sum, dim_v);
  double* __restrict acc_comp = zeroed_scratch_of(&scratch->acc_comp, dim_v);
  for (int64_t j = 0; j < n; ++j) {
    const double wj = w[j];
    if (!usable[j] || wj == 0.0 || !view.kept(j)) continue;
    double wh = 0.0, wl = 0.0;
    split_26(wj, &wh, &wl);
    const double* __restrict vj = view.v + j * dim_v;
    for (int64_t k = 0; k < dim_v; ++k) {
      double s = 0.0, e = 0.0;
      two_sum(acc_sum[k], wh * vj[k], &s, &e);
      acc_sum[k] = s;
      acc_comp[k] += e + wl * vj[k];
    }
  }
  for (int64_t k = 0; k < dim_v; ++k) {
    const size_t kk = static_cast<size_t>(k);
    r.o[kk] = std::isnan(col_nonfinite[k]) ? kNaN : (acc_sum[kk] + acc_comp[kk]) / l;
    if (scaled_values) r.o[kk] *= view.value_scale;
  }

  // Pass 4: bound ingredients, weighted by p_j = w_j / l. Vectorised over k.
  const double* __restrict o = r.o.data();
  double* __restrict abs_pv = r.abs_pv.data();
  double* __restrict dev_pv = r.dev_pv.data();
  double* __restrict dev_pv_score = r.dev_pv_score.data();
  double* __restrict dev_pv_gap = r.dev_pv_gap.data();
  double* __restrict dev_pv_score_sq = r.dev_pv_score_sq.data();
  for (int64_t j = 0; j < n; ++j) {
    if (!usable[j]) continue;
    const double p = w[j] / l;
    const double s_abs = abs_scale * abs_dot[j];
    const double g = gap[j];
    r.score_abs_max = std::max(r.score_abs_max, s_abs);
    r.score_abs_weighted += p * s_abs;
    r.score_gap_max = std::max(r.score_gap_max, g);
    r.score_gap_weighted += p * g;
    r.score_flush_max = std::max(r.score_flush_max, abs_scale * flush[j]);
    if (p == 0.0) continue;
    const double* values = view.v + j * dim_v;
    if (scaled_values) {
      if (!view.kept(j)) {
        add_zero_row(o, p, p * s_abs, p * g, p * noise[j], dim_v, dev_pv, dev_pv_score, dev_pv_gap, dev_pv_score_sq);
        continue;
      }
      double* __restrict scaled = scratch_of(&scratch->value_row, dim_v);
      for (int64_t k = 0; k < dim_v; ++k) scaled[k] = view.value_scale * values[k];
      values = scaled;
    }
    add_ingredients(values, o, p, p * s_abs, p * g, p * noise[j], dim_v, abs_pv, dev_pv, dev_pv_score, dev_pv_gap,
                    dev_pv_score_sq);
    if (w[j] <= kFlushableWeight) {
      for (int64_t k = 0; k < dim_v; ++k) r.abs_pv_light[static_cast<size_t>(k)] += p * std::fabs(values[k]);
    }
  }
  // The sink: value row 0, so |v - O| = |O|; no score condition; its gap joins the gap sum (the gap maximum stays
  // the keys': bound_row takes the sink's from m and sink).
  if (has_sink) {
    const double p = r.sink_p;
    r.score_gap_weighted += p * sink_gap;
    if (p > 0.0) {
      for (int64_t k = 0; k < dim_v; ++k) {
        dev_pv[k] += p * std::fabs(o[k]);
        dev_pv_gap[k] += p * sink_gap * std::fabs(o[k]);
      }
    }
  }

  // This tier's error (docs/error-model.md). Scores: |s~ - s| <= (gamma_D^2 + 4u^2) S_j (D = head_dim), capped scores
  // kCapUnits u min(c, S_j) more. Weights, relative to the common shift: exp within 1 ulp (2u), argument within
  // u gap_j + 2 score errors. The sink is one more term of l (exact logit, same weight error).
  const double nd = static_cast<double>(n + (has_sink ? 1 : 0));
  double score_err =
      (gamma_n(static_cast<double>(dim), kUnit) * gamma_n(static_cast<double>(dim), kUnit) + 4 * kUnit * kUnit) *
      r.score_abs_max;
  if (capped) score_err += kCapUnits * kUnit * std::min(cap, r.score_abs_max) * kSecondOrder;
  const double weight_const = (2 * kUnit + 2 * score_err) * kSecondOrder;
  const double weight_gap = kUnit * kSecondOrder;
  const double weight_mean = weight_const + weight_gap * r.score_gap_weighted;
  const double gamma2_n = gamma_n(nd, kUnit) * gamma_n(nd, kUnit);
  const double dot_rel = gamma2_n + 0x1p-26 * gamma_n(nd, kUnit);
  // Each key's product may lose 2 denorm_min |v_jk| to underflow: at most that times sum_j |v_jk| per column, or n
  // times the largest |v| (a column kept finite when another holds an infinity keeps a finite bound).
  const auto underflow_abs = [&](size_t kk) {
    return 2 * kDoubleDenormMin * std::min(nd * r.max_abs_v, r.abs_v_sum[kk]) / l;
  };
  for (int64_t k = 0; k < dim_v; ++k) {
    const size_t kk = static_cast<size_t>(k);
    r.o_err[kk] = kSecondOrder *
                  ((weight_const * r.dev_pv[kk] + weight_gap * r.dev_pv_gap[kk]) / (1 - weight_mean) +
                   dot_rel * (1 + 2 * weight_mean) * r.abs_pv[kk] + 4 * kUnit * std::fabs(r.o[kk]) + underflow_abs(kk));
    // The values' factor: its own error (a dropout's keep_scale within 2^-52; an fp32 descale_v exact) and the
    // product's rounding, u each.
    if (scaled_values) r.o_err[kk] += kSecondOrder * 3 * kUnit * std::fabs(r.o[kk]);
  }
  const double l_rel = 2 * kUnit + gamma2_n;
  r.lse_err = kSecondOrder * (score_err + weight_mean + l_rel + 2 * kUnit * std::log1p(rest) +
                              kUnit * std::fabs(r.lse) + 2 * kUnit * kUnit * std::fabs(m.hi));
  r.m_err = score_err + kUnit * std::fabs(m.hi);
  r.l_rel_err = kSecondOrder * (score_err + weight_mean + l_rel);
  // Scores of magnitude ~1e23 and beyond carry double-double errors of order one: the first-order analysis
  // above no longer holds (1 - weight_mean may even be negative). O and l are then of unknown accuracy and
  // say so (infinite o_err, l_rel_err; bound_row never uses them there). m and LSE keep their bounds:
  // logsumexp moves by at most the largest score error, however large.
  if (!(weight_mean <= kFirstOrderLimit)) mark_first_order_invalid(&r);
  return out;
}

}  // namespace flashcheck::oracle::detail
