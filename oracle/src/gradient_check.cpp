// gradient_check(): the gradient of attention in double and the backward error model of docs/error-model.md §10,
// in one pass over the rows. Per row the forward's fast tier gives O* and LSE* (with their own errors); per visible
// key the score, P, dP, dS and the softcap's factor are recomputed in double beside the bound on how far the
// kernel's fp32 value of each may lie from them; the sums of dQ (over the row's keys), dK and dV (over the rows of a
// key, every query head of its group) and dsink (over the rows of a head) carry three accumulators each: the value,
// the propagated errors of their terms, and the magnitudes the summation's own rounding scales with. Under a dropout
// (general path only) a kept pair's dV weight and dP are P and dO.v times fl32(1 / (1 - p)), each rounded once more; a
// dropped pair's are 0, exactly.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "eft.h"
#include "flashcheck/error_model.h"
#include "flashcheck/gradient.h"
#include "row_view.h"

namespace flashcheck::oracle {
namespace {

using detail::gamma_n;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kU32 = 0x1p-24;   // fp32 round to nearest
constexpr double kUMma = 0x1p-23;  // tensor-core accumulation truncates: one ulp
constexpr double kU64 = 0x1p-53;   // the fast tier's own roundings
// Underflow: every fp32 rounding may lose up to this much absolutely (subnormal spacing, or a flush to zero).
constexpr double kFloor = 0x1p-126;
constexpr double kFp32Max = 0x1.fffffep127;
// Intermediates of fp32 arithmetic stay below this, or the pair is outside the domain (as the forward's guard).
constexpr double kOverflowGuard = kFp32Max / 4;
// exp2f and tanhf of the kernel: within 2 ulp (CUDA C Programming Guide, Mathematical Functions), the same
// allowance as the forward's (error_model.h).
constexpr double kExpRel = kExp2RelErr;
constexpr double kTanhRel = kTanhRelErr;
// A dropout's factor in the kernel, s32 = fl32(keep_scale(p)): within u (1 + 2^-52) + 2^-52 <= kScaleRel of
// 1 / (1 - p), relative (keep_scale is within 2^-52 of it).
constexpr double kScaleRel = kU32 + 0x1p-51;

// Half the spacing of a format's subnormals: what rounding a value below its smallest normal can lose absolutely.
double half_subnormal(Format format) {
  switch (format) {
    case Format::kF32: return 0x1p-150;
    case Format::kF16: return 0x1p-25;
    case Format::kBF16: return 0x1p-134;
    case Format::kE4M3: return 0x1p-10;
  }
  return 0x1p-25;
}

// The smallest magnitude a format rounds to infinity: its largest finite value plus half an ulp of it.
double overflow_threshold(Format format) {
  switch (format) {
    case Format::kF32: return 0x1.ffffffp127;
    case Format::kF16: return 65520.0;
    case Format::kBF16: return 0x1.ffp127;
    case Format::kE4M3: return 464.0;  // e4m3 has no infinity: past 448 + half its ulp a conversion saturates or is NaN
  }
  return 65520.0;
}

bool all_finite(const double* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) return false;
  }
  return true;
}

// One output element's three accumulators: sum (the value), err (the propagated errors of its terms), mag (the
// magnitudes its summation's roundings scale with), and the number of terms.
struct Acc {
  double sum = 0.0, err = 0.0, mag = 0.0;
  int64_t terms = 0;
  bool nan = false, unconstrained = false;
};

// The bound of a finished sum computed in fp32 (unit `unit`) with `extra` more roundings per term (the final scale
// multiply), then rounded to the output format (unit u_out); `fast` is the fast tier's relative error of each term.
double finish(const Acc& a, double scale_abs, double unit, int64_t extra, double u_out, double out_floor, double fast,
              double out_max) {
  // Outside the domain: an fp32 sum that may overflow, or a gradient beyond the output format's range (which it
  // rounds to +-inf, as IEEE says).
  // The kernel sums in fp32 before it scales: both the sum and the scaled sum must stay in range.
  if (a.unconstrained || std::max(scale_abs, 1.0) * a.mag >= kOverflowGuard) return kInf;
  const double n = static_cast<double>(a.terms + extra);
  const double sum_err =
      scale_abs * (a.err + gamma_n(n, unit) * a.mag + (fast + gamma_n(n + 8, kU64)) * a.mag) + n * kFloor;
  if (std::abs(scale_abs * a.sum) + sum_err >= out_max) return kInf;
  return sum_err + u_out * (std::abs(scale_abs * a.sum) + sum_err) + out_floor + kFloor;
}

}  // namespace

GradientCheck gradient_check(const Problem& problem, std::span<const double> d_o, const ForwardResult& forward,
                             const BackwardArithmetic& arithmetic) {
  check_sequence_lengths(problem);
  const int64_t dim = problem.head_dim, dim_v = value_dim(problem);
  const int64_t rows = problem.batch * problem.heads_q * problem.seqlen_q;
  check_values("d_o", d_o.size(), rows * dim_v);
  check_values("forward.o", forward.o.size(), rows * dim_v);
  check_values("forward.lse", forward.lse.size(), rows);
  const bool tensor_core = arithmetic.arithmetic == Arithmetic::kTensorCore;
  if (arithmetic.format == Format::kE4M3 || has_descales(problem)) {
    throw std::invalid_argument("gradient_check: no backward pass is defined on f8e4m3 inputs (the fp8 path is forward-only)");
  }
  if (problem.dropout.p != 0.0f && arithmetic.arithmetic != Arithmetic::kGeneralFp32) {
    throw std::invalid_argument(std::string("gradient_check: a dropout is bounded on the general-fp32 path only, not ") +
                                to_string(arithmetic.arithmetic));
  }
  const double u_acc = tensor_core ? kUMma : kU32;       // the GEMMs' accumulation
  const double u_out = unit_roundoff(arithmetic.format);  // dQ, dK, dV rounded once
  const double u_op = tensor_core ? u_out : 0.0;          // P and dS rounded before their GEMMs
  const double out_floor = half_subnormal(arithmetic.format);
  const double op_floor = tensor_core ? out_floor : 0.0;
  const double out_max = overflow_threshold(arithmetic.format);

  const int64_t keys = problem.batch * problem.heads_kv * problem.seqlen_k;
  const int64_t group = problem.heads_kv > 0 ? problem.heads_q / problem.heads_kv : 1;
  std::vector<Acc> dk(static_cast<size_t>(keys * dim)), dv(static_cast<size_t>(keys * dim_v));
  std::vector<Acc> sink(problem.sink.size());
  std::vector<Acc> dq_row(static_cast<size_t>(dim));
  GradientCheck out;
  out.exact.dq.assign(static_cast<size_t>(rows * dim), 0.0);
  out.exact.d.assign(static_cast<size_t>(rows), 0.0);
  out.dq.assign(static_cast<size_t>(rows * dim), 0.0);
  std::vector<double> s(static_cast<size_t>(problem.seqlen_k));
  const double scale_abs = std::abs(problem.scale);
  // The fast tier's relative error of each term's P (its double scores and the forward's double LSE), per row.
  double fast_max = 0.0;

  for (int64_t b = 0; b < problem.batch; ++b) {
    const int64_t rows_b = sequence_seqlen_q(problem, b);
    for (int64_t h = 0; h < problem.heads_q; ++h) {
      for (int64_t i = 0; i < rows_b; ++i) {
        const RowRef ref{b, h, i};
        const detail::RowView view = detail::view_row(problem, ref);
        const int64_t row = (b * problem.heads_q + h) * problem.seqlen_q + i;
        const int64_t key0 = (b * problem.heads_kv + h / group) * problem.seqlen_k + view.key_begin;
        const int64_t n = view.visible;
        const double* dout = d_o.data() + row * dim_v;
        const double* o_given = forward.o.data() + row * dim_v;
        const double lse_given = forward.lse[static_cast<size_t>(row)];
        double* dq = out.exact.dq.data() + row * dim;
        double* dq_bound = out.dq.data() + row * dim;
        Acc* sink_acc = problem.sink.empty() ? nullptr : &sink[static_cast<size_t>(h)];
        out.max_keys = std::max(out.max_keys, n);
        const auto each_key = [&](auto&& f) {
          for (int64_t j = 0; j < n; ++j) f(j, dk.data() + (key0 + j) * dim, dv.data() + (key0 + j) * dim_v);
        };
        // Non-finite inputs: what the gold tier calls "must be non-finite" (a row without keys: only its sink's).
        // Non-finite V rows alone leave P, and so dV, finite (gradient.h).
        const bool dout_finite = all_finite(dout, dim_v);
        const bool nonfinite = n > 0 && (!all_finite(view.q, dim) || !all_finite(view.k, n * dim) || !dout_finite ||
                                         std::isnan(view.sink));
        // Under a dropout only the kept keys' V rows are read.
        bool values_nonfinite = false;
        for (int64_t j = 0; j < n && !nonfinite; ++j) {
          values_nonfinite = values_nonfinite || (view.kept(j) && !all_finite(view.v + j * dim_v, dim_v));
        }
        const bool sink_nan =
            nonfinite || (view.sink != -kInf && (values_nonfinite || !dout_finite || std::isnan(view.sink)));
        if (nonfinite || (n == 0 && (sink_nan || !dout_finite))) {
          std::fill(dq, dq + dim, nonfinite ? kNaN : 0.0);
          std::fill(dq_bound, dq_bound + dim, nonfinite ? kInf : 0.0);
          out.exact.d[static_cast<size_t>(row)] = kNaN;
          if (nonfinite) {
            each_key([&](int64_t, Acc* k, Acc* v) {
              for (int64_t c = 0; c < dim; ++c) k[c].nan = true;
              for (int64_t c = 0; c < dim_v; ++c) v[c].nan = true;
            });
          }
          if (sink_acc != nullptr && sink_nan) sink_acc->nan = true;
          continue;
        }
        const RowResult fwd = compute_row(problem, ref, Tier::kFast);
        // No usable key and no sink (LSE* = -inf), or a sink of +inf (LSE* = +inf): P = 0 and O = 0, so nothing
        // flows back, and a kernel given the same LSE and a finite O computes exactly that (exp2(x + inf) is skipped,
        // exp2(x - inf) is 0, and P = 0 times dP - D is 0). Given another LSE, or a non-finite O (whose D = dO.O is
        // NaN, and 0 times NaN is NaN), it computes something else: the forward failed there, and no claim is made.
        bool given_ok = true;  // the given O is finite wherever the exact one is
        for (int64_t c = 0; c < dim_v; ++c) {
          given_ok = given_ok && (std::isfinite(o_given[c]) || !std::isfinite(fwd.o[static_cast<size_t>(c)]));
        }
        if (!std::isfinite(fwd.lse) || !std::isfinite(lse_given) || !given_ok) {
          const bool consistent = fwd.lse == lse_given && given_ok;
          if (!consistent) {
            std::fill(dq_bound, dq_bound + dim, kInf);
            each_key([&](int64_t, Acc* k, Acc* v) {
              for (int64_t c = 0; c < dim; ++c) k[c].unconstrained = true;
              for (int64_t c = 0; c < dim_v; ++c) v[c].unconstrained = true;
            });
            if (sink_acc != nullptr) sink_acc->unconstrained = true;
          }
          continue;
        }
        // The forward's error, measured: LSE's, and O's as D = dO.O carries it.
        const double lse = fwd.lse;
        const double d_lse = std::abs(lse_given - lse) + fwd.lse_err;
        double d_exact = 0.0, d_dev = 0.0, d_mag = 0.0, d_fast = 0.0, d_oerr = 0.0;
        for (int64_t c = 0; c < dim_v; ++c) {
          d_exact += dout[c] * fwd.o[static_cast<size_t>(c)];
          d_dev += dout[c] * (o_given[c] - fwd.o[static_cast<size_t>(c)]);
          d_mag += std::abs(dout[c] * o_given[c]);
          d_fast += std::abs(dout[c]) * (fwd.o_err[static_cast<size_t>(c)] + std::abs(fwd.o[static_cast<size_t>(c)]));
          d_oerr += std::abs(dout[c]) * fwd.o_err[static_cast<size_t>(c)];
        }
        out.exact.d[static_cast<size_t>(row)] = d_exact;
        // |D^ - D*|: the given O's deviation (and the fast tier's error of O* within it, twice: in d_dev and in
        // d_exact), the fp32 dot product's roundings, the fast tier's own.
        const double e_d = std::abs(d_dev) + 2 * d_oerr + gamma_n(static_cast<double>(dim_v), kU32) * d_mag +
                           gamma_n(static_cast<double>(dim_v + 4), kU64) * d_fast + static_cast<double>(dim_v) * kFloor;
        // x - LSE log2 e: LSE's product with fl(log2 e) (2u) and the subtraction (u of |s - LSE|).
        const double lse_round = 2 * kU32 * std::abs(lse_given);
        for (Acc& a : dq_row) a = Acc{};
        double s_max_abs = 0.0;
        for (int64_t j = 0; j < n; ++j) {
          const double* kj = view.k + j * dim;
          const double* vj = view.v + j * dim_v;
          double dot = 0.0, cond = 0.0;
          for (int64_t c = 0; c < dim; ++c) {
            dot += view.q[c] * kj[c];
            cond += std::abs(view.q[c] * kj[c]);
          }
          const double raw = problem.scale * dot;
          const double raw_cond = scale_abs * cond;  // S_ij
          const bool capped = view.softcap > 0.0;
          const double tau = capped ? std::tanh(raw / view.softcap) : 0.0;
          const double score = capped ? view.softcap * tau : raw;
          s_max_abs = std::max(s_max_abs, raw_cond);
          // The kernel's score: the dot product's roundings, then the scale's (or the softcap's) in log2 units.
          const double e_raw = gamma_n(static_cast<double>(dim), u_acc) * raw_cond + static_cast<double>(dim) * kFloor;
          const double e_s = e_raw + 3 * kU32 * std::abs(raw) + (capped ? (kTanhRel + 2 * kU32) * std::abs(score) : 0.0);
          const double gap = std::abs(score - lse);
          const double delta = e_s + d_lse + lse_round + kU32 * (gap + e_s + d_lse + lse_round);
          const double fast_rel = gamma_n(static_cast<double>(dim + 8), kU64) * (raw_cond + std::abs(lse) + 1.0);
          fast_max = std::max(fast_max, fast_rel);
          const double p = std::exp(score - lse);
          // |P^ - P| <= P (e^delta (1 + eps) - 1), written so that a P that underflows never meets an infinite factor;
          // P^ is an fp32 value, so never further than FLT_MAX from P.
          const double e_p = std::min(std::exp(score - lse + delta + fast_rel) * (1 + kExpRel) - p, p + kFp32Max) + kFloor;
          const double p_hi = p + e_p;
          double dp = 0.0, dp_mag = 0.0;
          for (int64_t c = 0; c < dim_v; ++c) {
            dp += dout[c] * vj[c];
            dp_mag += std::abs(dout[c] * vj[c]);
          }
          double e_dp = gamma_n(static_cast<double>(dim_v), u_acc) * dp_mag +
                        gamma_n(static_cast<double>(dim_v + 4), kU64) * dp_mag + static_cast<double>(dim_v) * kFloor;
          // The weight of dO in dV, P^ (dropout: w = P^ s32 rounded, or 0), its error and its largest value.
          double weight = p, e_weight = e_p;
          if (view.has_dropout()) {
            const double sigma = view.value_scale;  // within 2^-52 of 1 / (1 - p): 3 kU64 with the products below
            if (view.kept(j)) {
              // dP' = fl(dP^ s32): |dP^ s32 - sigma dP| <= sigma ((1 + r) e_dP + r |dP|), then u of |dP^ s32|; w alike.
              e_dp = sigma * ((1 + kScaleRel) * (e_dp * (1 + kU32) + kU32 * std::abs(dp)) + kScaleRel * std::abs(dp) +
                              3 * kU64 * std::abs(dp)) +
                     kFloor;
              e_weight = sigma * ((1 + kScaleRel) * (e_p * (1 + kU32) + kU32 * p) + kScaleRel * p + 3 * kU64 * p) +
                         kFloor;
              dp *= sigma;
              dp_mag *= sigma;
              weight = p * sigma;
            } else {  // selected away: exact zeros, whatever dO.v rounded to (even inf)
              e_dp = 0.0;
              dp = 0.0;
              dp_mag = 0.0;
              weight = 0.0;
              e_weight = 0.0;
            }
          }
          const double w = dp - d_exact;
          const double e_w = e_dp + e_d + kU32 * (std::abs(w) + e_dp + e_d);
          const double ds = p * w;
          const double e_ds = e_p * std::abs(w) + p_hi * e_w + kU32 * p_hi * (std::abs(w) + e_w) + kFloor;
          double dt = ds, e_dt = e_ds;
          if (capped) {
            const double g = 1.0 - tau * tau;
            const double e_tau = (e_raw + 2 * kU32 * std::abs(raw)) / view.softcap + kTanhRel * std::abs(tau) + kFloor;
            const double e_g = (2 * std::abs(tau) * e_tau + e_tau * e_tau) * (1 + 2 * kU32) + 2 * kU32;
            dt = ds * g;
            e_dt = e_ds * (g + e_g) + std::abs(ds) * e_g + kU32 * (std::abs(ds) + e_ds) * (g + e_g) + kFloor;
          }
          // fp32 intermediates that may overflow (dO.v, dO.O, the scores, dT): outside the domain, for the row's dQ and
          // the key's dK and dV alike.
          const bool overflow = std::exp(score - lse + delta + fast_rel) >= kOverflowGuard || dp_mag >= kOverflowGuard ||
                                d_mag >= kOverflowGuard || raw_cond >= kOverflowGuard ||
                                std::abs(dt) + e_dt >= kOverflowGuard;
          if (overflow) {
            for (int64_t c = 0; c < dim; ++c) {
              dq_row[static_cast<size_t>(c)].unconstrained = true;
              dk[static_cast<size_t>((key0 + j) * dim + c)].unconstrained = true;
            }
            for (int64_t c = 0; c < dim_v; ++c) dv[static_cast<size_t>((key0 + j) * dim_v + c)].unconstrained = true;
            if (sink_acc != nullptr) sink_acc->unconstrained = true;
          }
          // The tensor-core class rounds dT to the input format before dQ = dT K and dK = dT^T Q: where it may reach
          // the format's overflow threshold (fp16's 65504: V near fp16's largest value), the rounding gives inf, the
          // class's own overflow; outside the domain for the row's dQ and the key's dK (dV reads P, never dT).
          if (tensor_core && std::abs(dt) + e_dt >= out_max) {
            for (int64_t c = 0; c < dim; ++c) {
              dq_row[static_cast<size_t>(c)].unconstrained = true;
              dk[static_cast<size_t>((key0 + j) * dim + c)].unconstrained = true;
            }
          }
          // P and dS rounded to the input format before their GEMMs (tensor-core class).
          const double e_pv = e_weight + u_op * (weight + e_weight) + op_floor;
          e_dt += u_op * (std::abs(dt) + e_dt) + op_floor;
          const double dt_hi = std::abs(dt) + e_dt, pv_hi = weight + e_pv;
          for (int64_t c = 0; c < dim; ++c) {
            Acc& a = dq_row[static_cast<size_t>(c)];
            a.sum += dt * kj[c];
            a.err += e_dt * std::abs(kj[c]);
            a.mag += dt_hi * std::abs(kj[c]);
            ++a.terms;
            Acc& kk = dk[static_cast<size_t>((key0 + j) * dim + c)];
            kk.sum += dt * view.q[c];
            kk.err += e_dt * std::abs(view.q[c]);
            kk.mag += dt_hi * std::abs(view.q[c]);
            ++kk.terms;
          }
          for (int64_t c = 0; c < dim_v; ++c) {
            Acc& vv = dv[static_cast<size_t>((key0 + j) * dim_v + c)];
            vv.sum += weight * dout[c];
            vv.err += e_pv * std::abs(dout[c]);
            vv.mag += pv_hi * std::abs(dout[c]);
            ++vv.terms;
          }
        }
        for (int64_t c = 0; c < dim; ++c) {
          const Acc& a = dq_row[static_cast<size_t>(c)];
          dq[c] = values_nonfinite ? kNaN : problem.scale * a.sum;
          dq_bound[c] = values_nonfinite ? kInf : finish(a, scale_abs, u_acc, 1, u_out, out_floor, fast_max, out_max);
        }
        if (values_nonfinite) {
          out.exact.d[static_cast<size_t>(row)] = kNaN;
          each_key([&](int64_t, Acc* k, Acc*) {
            for (int64_t c = 0; c < dim; ++c) k[c].nan = true;
          });
          if (sink_acc != nullptr) sink_acc->nan = true;
          continue;
        }
        if (sink_acc != nullptr && view.sink != -kInf) {
          // dsink_h = -sum_i exp(sink - LSE_i) D_i, the kernel's exp2 of fl(fl(sink log2 e) - fl(LSE log2 e)).
          const double p_s = std::exp(view.sink - lse);
          const double delta = d_lse + lse_round + 2 * kU32 * std::abs(view.sink) +
                               kU32 * (std::abs(view.sink - lse) + d_lse + lse_round + 2 * kU32 * std::abs(view.sink));
          const double e_ps = std::min(std::exp(view.sink - lse + delta + gamma_n(8, kU64) * (std::abs(lse) + 1)) *
                                               (1 + kExpRel) - p_s,
                                           p_s + kFp32Max) + kFloor;
          sink_acc->sum -= p_s * d_exact;
          sink_acc->err += e_ps * std::abs(d_exact) + (p_s + e_ps) * e_d;
          sink_acc->mag += (p_s + e_ps) * (std::abs(d_exact) + e_d);
          ++sink_acc->terms;
        }
      }
    }
  }
  out.exact.dk.resize(dk.size());
  out.dk.resize(dk.size());
  for (size_t at = 0; at < dk.size(); ++at) {
    const Acc& a = dk[at];
    out.exact.dk[at] = a.nan ? kNaN : problem.scale * a.sum;
    out.dk[at] = a.nan ? kInf : finish(a, scale_abs, u_acc, 1, u_out, out_floor, fast_max, out_max);
    out.max_rows = std::max(out.max_rows, a.terms);
  }
  out.exact.dv.resize(dv.size());
  out.dv.resize(dv.size());
  for (size_t at = 0; at < dv.size(); ++at) {
    const Acc& a = dv[at];
    out.exact.dv[at] = a.nan ? kNaN : a.sum;
    out.dv[at] = a.nan ? kInf : finish(a, 1.0, u_acc, 0, u_out, out_floor, fast_max, out_max);
  }
  out.exact.dsink.resize(sink.size());
  out.dsink.resize(sink.size());
  for (size_t h = 0; h < sink.size(); ++h) {
    const Acc& a = sink[h];
    out.exact.dsink[h] = a.nan ? kNaN : a.sum;
    out.dsink[h] = a.nan ? kInf : finish(a, 1.0, kU32, 1, kU32, half_subnormal(Format::kF32), fast_max, overflow_threshold(Format::kF32));
  }
  return out;
}

}  // namespace flashcheck::oracle
