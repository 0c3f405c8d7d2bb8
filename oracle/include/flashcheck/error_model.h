// The error model: per-element bounds for O and per-row bounds for LSE, m and l, for each dtype and
// each compute path, derived from the kernel's rounding points (docs/error-model.md has the derivation
// and justifies every constant). Verdicts are ratios |kernel - exact| / bound; fail above 1.
#pragma once

#include <vector>

#include "flashcheck/attention.h"
#include "flashcheck/oracle.h"

namespace flashcheck::oracle {

struct RowBound {
  std::vector<double> o;  // [head_dim] absolute bound on |O_k - O*_k|
  double lse = 0.0;       // absolute bound on |LSE - LSE*|
  double m = 0.0;         // absolute bound on |m - m*|
  double l_rel = 0.0;     // relative bound on |l - l*| / l*, given the kernel's m (l is relative to exp(m))
  bool unconstrained = false;  // outside the domain (score overflow, non-finite input): no numeric claim
};

// Bound for one row as computed by `path` on inputs of `dtype`, processed in K/V tiles of `block_n`.
RowBound bound_row(const RowResult& exact, DType dtype, ComputePath path, int32_t block_n, int64_t head_dim);

// Unit roundoff of a format: fp32 2^-24, fp16 2^-11, bf16 2^-8.
double unit_roundoff(DType dtype);

}  // namespace flashcheck::oracle
