// The oracle: the exact attention result of one query row, from exactly the dtype-rounded inputs.
// Host-only, no CUDA. Two tiers:
//   gold: Boost.Multiprecision (cpp_bin_float, >= 113-bit significand), plain loops that read like the math;
//   fast: double with error-free transformations (exact products, compensated sums), its own error bounded
//         and tested against gold (docs/error-model.md).
// Besides O, LSE, m and l each row carries the ingredients of the error bound (error_model.h).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "flashcheck/attention.h"

namespace flashcheck::oracle {

// Inputs decoded to double (exact for fp32/fp16/bf16), contiguous [B, H, S, D] whatever the kernel's layout.
struct Problem {
  int64_t batch = 0, heads_q = 0, heads_kv = 0, seqlen_q = 0, seqlen_k = 0, head_dim = 0;
  Mask mask = Mask::kNone;
  double scale = 0.0;  // the fp32 softmax_scale the kernel was given, exactly
  std::span<const double> q;  // [batch, heads_q, seqlen_q, head_dim]
  std::span<const double> k;  // [batch, heads_kv, seqlen_k, head_dim]
  std::span<const double> v;  // [batch, heads_kv, seqlen_k, head_dim]
};

struct RowRef {
  int64_t b = 0, h = 0, i = 0;
  friend bool operator==(const RowRef&, const RowRef&) = default;
};

enum class Tier : int32_t { kGold = 0, kFast = 1 };

struct RowResult {
  RowRef row;
  int64_t visible = 0;          // number of visible keys
  std::vector<double> o;        // [head_dim]; 0 for rows with no visible key
  double lse = 0.0;             // natural log; -inf for rows with no visible key
  double m = 0.0;               // max_j s_j over visible keys (s = scale * q.k); -inf if none
  double l = 0.0;               // sum_j exp(s_j - m); 0 if none
  // Ingredients of the bound (error_model.h):
  std::vector<double> abs_pv;   // [head_dim]  A_k = sum_j p_j |v_jk|, p_j = exp(s_j - lse)
  double max_abs_v = 0.0;       // max over visible j, k of |v_jk|
  double score_abs_max = 0.0;   // max_j |scale| * sum_k |q_k k_jk|: per-score error scale (dot product condition)
  double score_abs_weighted = 0.0;  // sum_j p_j * |scale| * sum_k |q_k k_jk|
  bool nonfinite_input = false;     // a NaN/Inf entered a visible score or a visible V row
  bool score_overflow = false;      // some visible |s_j| (or partial sum) exceeds FLT_MAX: outside the kernel's domain
};

RowResult compute_row(const Problem& problem, RowRef row, Tier tier);

// Rows to check for a problem: all rows when batch*heads_q*seqlen_q <= full_check_limit; otherwise the first
// and last rows, rows at Q-tile boundaries (block_m-1, block_m, block_m+1, ...), fully masked rows, rows
// next to the causal diagonal's tile crossings (block_n), and `random_rows` rows drawn from `seed`.
// Deterministic, sorted, unique.
std::vector<RowRef> sample_rows(const Problem& problem, int32_t block_m, int32_t block_n, uint64_t seed,
                                int64_t full_check_limit = 4096, int64_t random_rows = 64);

}  // namespace flashcheck::oracle
