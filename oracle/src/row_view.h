// One query row's inputs inside a Problem: the query vector, the visible keys' K and V rows (the kernel's
// GQA mapping: query head h reads K/V head h / (heads_q / heads_kv)) and the visible-key count from the one
// mask formulas (visible_count). Shared by both oracle tiers and the emulated reference.
#pragma once

#include <cstdint>

#include "flashcheck/oracle.h"

namespace flashcheck::oracle::detail {

// Keys [0, result) visible to query row i, written from the mask formulas of attention.h: none: every key;
// top-left causal: j <= i; bottom-right causal: j <= i + seqlen_k - seqlen_q.
inline int64_t visible_count(Mask mask, int64_t i, int64_t seqlen_q, int64_t seqlen_k) {
  int64_t end = seqlen_k;
  if (mask == Mask::kCausalTopLeft) end = i + 1;
  if (mask == Mask::kCausalBottomRight) end = i + 1 + seqlen_k - seqlen_q;
  return end < 0 ? 0 : (end > seqlen_k ? seqlen_k : end);
}

struct RowView {
  RowRef row;
  int64_t head_dim = 0;
  int64_t visible = 0;  // keys [0, visible) are visible
  int64_t seqlen_k = 0;
  double scale = 0.0;
  const double* q = nullptr;  // [head_dim]
  const double* k = nullptr;  // [visible, head_dim], row stride head_dim
  const double* v = nullptr;  // [visible, head_dim]
};

// Throws std::out_of_range when `row` is outside the problem or its spans are shorter than its shape says
// (a caller's bug, not a property of the kernel under test).
RowView view_row(const Problem& problem, RowRef row);

}  // namespace flashcheck::oracle::detail
