// The attention row as the textbook writes it, in four plain passes (scores and their max, exp-sum,
// normalise, weighted V), templated on the number type so the same loops read the same in any precision;
// the gold tier runs them in 113-bit binary floating point (Boost.Multiprecision). A softcap caps each score,
// c tanh(s / c); a sink is one more logit in the max and the sum, with a zero value row. Only keys marked usable
// (finite score) take part, and the sink only when finite; the caller owns the semantics of non-finite values.
// Under a dropout pass 4 sums the kept keys only and scales O by 1 / (1 - p), formed in Real from p (exact in Real
// wherever 1 - p is, then rounded once). fp8 descales: the scores' scale is the view's two parts (exact in Real), and
// O is scaled by descale_v.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "row_view.h"

namespace flashcheck::oracle::detail {

template <class Real>
struct FourPassRow {
  std::vector<Real> o;  // [head_dim_v]
  Real m, l, lse;
};

template <class Real>
FourPassRow<Real> four_pass(const RowView& view, std::span<const char> usable) {
  using std::exp;
  using std::log;
  using std::tanh;
  const int64_t dim = view.head_dim, dim_v = view.head_dim_v;
  const int64_t n = view.visible;
  FourPassRow<Real> out;
  std::vector<Real> s(static_cast<size_t>(n));

  // Pass 1: s_j = scale * sum_k q_k k_jk over head_dim (capped: c tanh(s_j / c)), and m = the max over the s_j
  // and the sink.
  const Real cap(view.softcap);
  const bool has_sink = std::isfinite(view.sink);
  out.m = has_sink ? Real(view.sink) : -std::numeric_limits<Real>::infinity();
  for (int64_t j = 0; j < n; ++j) {
    if (!usable[static_cast<size_t>(j)]) continue;
    Real dot = 0;
    for (int64_t k = 0; k < dim; ++k) dot += Real(view.q[k]) * Real(view.k[j * dim + k]);
    s[static_cast<size_t>(j)] = (Real(view.scale) + Real(view.scale_lo)) * dot;
    if (view.softcap > 0) s[static_cast<size_t>(j)] = cap * tanh(s[static_cast<size_t>(j)] / cap);
    if (s[static_cast<size_t>(j)] > out.m) out.m = s[static_cast<size_t>(j)];
  }
  // Pass 2: l = sum_j exp(s_j - m) + exp(sink - m).
  out.l = has_sink ? exp(Real(view.sink) - out.m) : Real(0);
  for (int64_t j = 0; j < n; ++j) {
    if (usable[static_cast<size_t>(j)]) out.l += exp(s[static_cast<size_t>(j)] - out.m);
  }
  out.lse = out.m + log(out.l);
  // Pass 3: p_j = exp(s_j - m) / l (stored over s).
  for (int64_t j = 0; j < n; ++j) {
    if (usable[static_cast<size_t>(j)]) s[static_cast<size_t>(j)] = exp(s[static_cast<size_t>(j)] - out.m) / out.l;
  }
  // Pass 4: O_k = sum_j p_j z_j v_jk / (1 - p) over head_dim_v columns (z_j = 1, p = 0 without a dropout).
  out.o.assign(static_cast<size_t>(dim_v), Real(0));
  for (int64_t j = 0; j < n; ++j) {
    if (!usable[static_cast<size_t>(j)] || !view.kept(j)) continue;
    for (int64_t k = 0; k < dim_v; ++k)
      out.o[static_cast<size_t>(k)] += s[static_cast<size_t>(j)] * Real(view.v[j * dim_v + k]);
  }
  if (view.has_dropout()) {
    const Real factor = Real(1) / (Real(1) - Real(view.dropout_p));
    for (Real& x : out.o) x *= factor;
  } else if (view.value_scale != 1.0) {  // fp8's descale_v, an fp32 value: exact in Real
    for (Real& x : out.o) x *= Real(view.value_scale);
  }
  return out;
}

}  // namespace flashcheck::oracle::detail
