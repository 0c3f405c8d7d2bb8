// The gold tier: the four plain passes in boost::multiprecision::cpp_bin_float_quad (113-bit significand,
// 15-bit exponent): fp32 products are exact in it and sums err 60 bits below double, its range holds
// every exp(s - m) that matters, and it is the cheapest Boost binary type of >= 113 bits (docs/error-model.md
// §2.2 has the full reasoning). Its exp, log and tanh are measured against cpp_bin_float_50 in oracle_test.
#include <boost/multiprecision/cpp_bin_float.hpp>
#include <cmath>

#include "eft.h"
#include "four_pass.h"
#include "tiers.h"

namespace flashcheck::oracle::detail {
namespace {

using Quad = boost::multiprecision::cpp_bin_float_quad;

constexpr double kGoldFunctionRel = kGoldFunctionUlps * 2 * kQuadUnit;
constexpr double kSafety = 2.0;  // the gold error terms are 2^-100-sized; doubling them costs nothing
// A capped score's roundings besides tanh, in units of u min(c, S_j): the quotient s / c (1; tanh is
// 1-Lipschitz) and the product by c (1).
constexpr double kCapUnits = 2.0;

}  // namespace

RowResult gold_row(const RowView& view) {
  FastRow fast = fast_row(view, &thread_scratch());
  RowResult r = std::move(fast.result);
  if (!fast.numeric) return r;  // the classification is exact (IEEE semantics in double), nothing to refine

  const FourPassRow<Quad> g = four_pass<Quad>(view, fast.usable);
  const double m_hi = static_cast<double>(g.m);
  r.m = m_hi;
  r.m_lo = static_cast<double>(g.m - Quad(m_hi));
  r.l = static_cast<double>(g.l);
  r.lse = static_cast<double>(g.lse);
  for (size_t k = 0; k < r.o.size(); ++k) {
    if (!std::isnan(r.o[k])) r.o[k] = static_cast<double>(g.o[k]);  // NaN marks a non-finite V column: keep it
  }

  // Gold's error: the rounding to double of what it reports (u of the value) plus its 113-bit analysis:
  // scores within gamma_D S_j (D = head_dim, the dot products' length, whatever O's head_dim_v), capped scores
  // (kCapUnits + 2 kGoldTanhUlps(y)) u min(c, S_j) more (the quotient s / c, tanh, the product by c), weights
  // within two exp errors (each kGoldFunctionUlps plus kGoldExpUlpsPerUnit per unit of gap_j) and the argument's
  // rounding (u gap_j) relative. The sink is one more term of l.
  const double nd = static_cast<double>(r.visible + (std::isfinite(r.sink) ? 1 : 0));
  double score_err = gamma_n(static_cast<double>(view.head_dim), kQuadUnit) * r.score_abs_max;
  if (r.softcap > 0) {
    const double tanh_ulps = gold_tanh_ulps(r.score_abs_max / r.softcap);
    score_err += (kCapUnits + 2 * tanh_ulps) * kQuadUnit * std::min(r.softcap, r.score_abs_max) * kSafety;
  }
  const double weight_const = kSafety * (2 * score_err + 2 * kGoldFunctionRel + 2 * kQuadUnit);
  const double weight_gap = kSafety * (kQuadUnit + 2 * kGoldExpUlpsPerUnit * 2 * kQuadUnit);
  const double sum_rel = kSafety * gamma_n(nd + 2, kQuadUnit);
  for (size_t k = 0; k < r.o.size(); ++k) {
    r.o_err[k] = kDoubleUnit * std::fabs(r.o[k]) + weight_const * r.dev_pv[k] + weight_gap * r.dev_pv_gap[k] +
                 sum_rel * (r.abs_pv[k] + std::fabs(r.o[k]));
    // A dropout's factor 1 / (1 - p): 1 - p, the quotient and the product by it, one 113-bit rounding each.
    if (view.has_dropout()) r.o_err[k] += kSafety * 3 * kQuadUnit * std::fabs(r.o[k]);
  }
  r.lse_err = kDoubleUnit * std::fabs(r.lse) + score_err + weight_const + sum_rel +
              kSafety * kGoldFunctionRel * std::fabs(std::log(r.l));
  r.m_err = kDoubleUnit * std::fabs(r.m) + score_err;
  r.l_rel_err = kDoubleUnit + weight_const + sum_rel;
  // As in the fast tier: beyond first order (scores near fp32's range end) O and l are of unknown accuracy.
  if (!(weight_const + weight_gap * r.score_gap_weighted <= kFirstOrderLimit)) mark_first_order_invalid(&r);
  return r;
}

}  // namespace flashcheck::oracle::detail
