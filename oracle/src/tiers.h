// The two oracle tiers behind compute_row(). The fast tier classifies the row (non-finite inputs, usable
// keys, domain flags) and computes every bound ingredient; the gold tier reuses that classification and
// those ingredients and recomputes O, LSE, m and l in 113-bit arithmetic, with its own (tiny) error terms.
#pragma once

#include <limits>
#include <span>
#include <vector>

#include "flashcheck/oracle.h"
#include "row_view.h"

namespace flashcheck::oracle::detail {

inline constexpr double kFp32Max = 0x1.fffffep127;        // FLT_MAX
inline constexpr double kOverflowGuard = kFp32Max / 4.0;  // headroom for x - m and accumulation errors
inline constexpr double kLog2e = 1.4426950408889634074;   // log2(e), nearest double
// A product with an operand below kFlushOperand may lose a tf32 low part or be flushed; FTZ arithmetic drops
// anything below fp32's smallest normal, kFlushResult.
inline constexpr double kFlushOperand = 0x1p-114;
inline constexpr double kFlushResult = 0x1p-126;
inline constexpr double kQuadUnit = 0x1p-113;  // unit roundoff of cpp_bin_float_quad
// Allowance for Boost's exp/log of cpp_bin_float_quad, in ulps of the result: kGoldFunctionUlps, plus for
// exp kGoldExpUlpsPerUnit per unit of |x| (its argument reduction loses about |x|/2 ulp: measured 305 ulp at
// x = -1000). oracle_test measures both against cpp_bin_float_50 (53 more bits) and fails if exceeded.
inline constexpr double kGoldFunctionUlps = 16.0;
inline constexpr double kGoldExpUlpsPerUnit = 1.0;
// Boost's tanh is sinh/cosh from exp: allowed kGoldFunctionUlps plus kGoldExpUlpsPerUnit per unit of |y| up to
// kGoldTanhSaturation, beyond which tanh(y) is +-1 to within 2^-115 whatever exp's error (it cancels in the
// quotient): there the correctly rounded result, +-1, is what it returns. oracle_test measures it too.
inline constexpr double kGoldTanhSaturation = 40.0;
inline double gold_tanh_ulps(double abs_y) {
  return kGoldFunctionUlps + kGoldExpUlpsPerUnit * (abs_y < kGoldTanhSaturation ? abs_y : kGoldTanhSaturation);
}

// Each tier's own error analysis is first order in its weight errors; above this mean relative weight error
// (scores so large that their own rounding is of order one) it no longer holds: mark_first_order_invalid().
inline constexpr double kFirstOrderLimit = 0x1p-20;

// O and l of unknown accuracy: infinite o_err and l_rel_err. bound_row() then uses only bounds that do not
// depend on the oracle's O (the hull), and the verdict leaves the row out of the statistical check.
inline void mark_first_order_invalid(RowResult* r) {
  for (double& e : r->o_err) e = std::numeric_limits<double>::infinity();
  r->l_rel_err = std::numeric_limits<double>::infinity();
}

// The fast tier's working arrays, reused from row to row (one per thread: fast_row() allocates only when a row is
// longer than any before it on that thread). Structure of arrays, one entry per visible key, so that the passes
// run over contiguous doubles and the compiler vectorises them.
struct FastScratch {
  std::vector<double> score_hi, score_lo;  // [visible] the score s_j = hi + lo (double-double)
  std::vector<double> abs_dot, flush;      // [visible] sum_k |q_k k_jk| and what FTZ may drop, unscaled
  std::vector<double> noise;               // [visible] the score's noise scale (RowResult::dev_pv_score_sq), scaled
  std::vector<double> gap, w;              // [visible] m - s_j and exp(-gap_j)
  std::vector<char> usable;                // [visible] the key's score is finite (a -inf score carries zero weight)
  std::vector<double> k_block;             // (head_dim, lanes): K of a few keys, transposed
  std::vector<double> col_nonfinite;       // [head_dim_v] NaN where a V column holds a non-finite value, else 0
  std::vector<double> col_max, acc_sum, acc_comp;  // [head_dim_v]
  std::vector<double> value_row;                   // [head_dim_v] a kept key's V row times the dropout's factor
};

// The calling thread's scratch.
FastScratch& thread_scratch();

struct FastRow {
  RowResult result;
  std::span<const char> usable;  // [visible], in the scratch passed to fast_row(): valid until its next use
  bool numeric = false;          // the row has usable keys and no non-finite score: O, LSE, m, l are numbers
};

FastRow fast_row(const RowView& view, FastScratch* scratch);
RowResult gold_row(const RowView& view);

}  // namespace flashcheck::oracle::detail
