// One query row's inputs inside a Problem: the query vector, the visible keys' K and V rows (query head h
// reads K/V head h / (heads_q / heads_kv)), the softcap and the sink logit of head h. Q and K rows have head_dim
// values, V rows head_dim_v (the problem's value_dim()): scores run over the first, O over the second. The visible
// keys are visible_keys() of oracle_problem.h for the row's own sequence, a contiguous range; k and v point at its
// first key, so the tiers and the emulated reference index keys 0..visible-1 of the range and never read a key the
// row does not see (nor one past its sequence's length). Under a dropout the view carries each visible key's keep
// decision (dropout.h, the one definition) and the kept keys' factor: every tier forms its weights from these.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "flashcheck/oracle.h"

namespace flashcheck::oracle::detail {

struct RowView {
  RowRef row;
  int64_t head_dim = 0;    // Q's and K's columns: the length of each score's dot product
  int64_t head_dim_v = 0;  // V's and O's columns (value_dim() of the problem, never 0)
  int64_t key_begin = 0;  // keys [key_begin, key_begin + visible) of the problem are visible
  int64_t visible = 0;
  int64_t seqlen_k = 0;   // keys of the row's own sequence
  // The scores' scale: scale (+ scale_lo) = the problem's scale times the row's descale_q and descale_k, exactly
  // (a product of three fp32 values as two doubles; scale_lo = 0 without descales, and scale the problem's scale).
  double scale = 0.0, scale_lo = 0.0;
  float folded_scale32 = 1.0f;  // fl32(fl32(scale descale_q) descale_k): the fp8 kernel's folded scale (emulated_row)
  double softcap = 0.0;  // c > 0: scores are capped to c tanh(s / c); 0: none
  double sink = -std::numeric_limits<double>::infinity();  // the sink logit of the row's head; -inf: none
  const double* q = nullptr;  // [head_dim]
  const double* k = nullptr;  // [visible, head_dim], row stride head_dim, from key key_begin
  const double* v = nullptr;  // [visible, head_dim_v], row stride head_dim_v, from key key_begin
  // Dropout (oracle_problem.h): p (0: none), keep[j] = 1 where visible key j's element (b, h, i, key_begin + j) is
  // kept (dropout_kept). value_scale is the factor of the kept keys' values in O: keep_scale(p) = 1 / (1 - p) in
  // double under a dropout, the row's descale_v (exact) under fp8 descales, else 1. Without either, keep is empty and
  // the factor 1, so that no loop's arithmetic changes.
  float dropout_p = 0.0f;
  double value_scale = 1.0;
  std::vector<char> keep;  // [visible] or empty
  bool has_dropout() const { return dropout_p > 0.0f; }
  bool kept(int64_t j) const { return keep.empty() || keep[static_cast<size_t>(j)] != 0; }
};

// Throws std::out_of_range when `row` is outside the problem (i at or past its sequence's seqlens_q included) or its
// spans are shorter than its shape says (v by value_dim()), and std::invalid_argument for a negative head_dim_v, a
// softcap that is negative, infinite or NaN or per-sequence lengths that are not [batch] entries within the
// problem's seqlen_q / seqlen_k (a caller's bug, not a property of the kernel under test), or a dropout p outside
// [0, 1).
RowView view_row(const Problem& problem, RowRef row);

}  // namespace flashcheck::oracle::detail
