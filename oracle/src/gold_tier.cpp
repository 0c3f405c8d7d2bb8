// The gold tier: the four plain passes in boost::multiprecision::cpp_bin_float_quad, a 113-bit significand
// (u = 2^-113) with a 15-bit exponent. Why this type: products of fp32 values (48 bits) are exact in it,
// sums of them err by gamma_D(2^-113), 60 bits below the fast tier and 89 below fp32, so its O is exact to
// the last bit of a double for every row we test; its exponent range (to 2^-16382) holds every exp(s - m)
// the kernel could see; and with expression templates off it is the fastest Boost binary type of at least
// 113 bits (cpp_bin_float_50, 168 bits, costs about twice as much for precision nothing here needs). Its
// exp and log are checked against a 166-bit evaluation in oracle_test (kGoldFunctionUlps).
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

}  // namespace

RowResult gold_row(const RowView& view) {
  FastRow fast = fast_row(view);
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
  // scores within gamma_D S_j, weights within two exp errors (each kGoldFunctionUlps plus kGoldExpUlpsPerUnit
  // per unit of gap_j) and the argument's rounding (u gap_j) relative.
  const double nd = static_cast<double>(r.visible);
  const double score_err = gamma_n(static_cast<double>(view.head_dim), kQuadUnit) * r.score_abs_max;
  const double weight_const = kSafety * (2 * score_err + 2 * kGoldFunctionRel + 2 * kQuadUnit);
  const double weight_gap = kSafety * (kQuadUnit + 2 * kGoldExpUlpsPerUnit * 2 * kQuadUnit);
  const double sum_rel = kSafety * gamma_n(nd + 2, kQuadUnit);
  for (size_t k = 0; k < r.o.size(); ++k) {
    r.o_err[k] = kDoubleUnit * std::fabs(r.o[k]) + weight_const * r.dev_pv[k] + weight_gap * r.dev_pv_gap[k] +
                 sum_rel * (r.abs_pv[k] + std::fabs(r.o[k]));
  }
  r.lse_err = kDoubleUnit * std::fabs(r.lse) + score_err + weight_const + sum_rel +
              kSafety * kGoldFunctionRel * std::fabs(std::log(r.l));
  r.m_err = kDoubleUnit * std::fabs(r.m) + score_err;
  r.l_rel_err = kDoubleUnit + weight_const + sum_rel;
  return r;
}

}  // namespace flashcheck::oracle::detail
