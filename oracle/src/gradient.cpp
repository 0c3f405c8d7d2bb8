// exact_gradient(): the gradient of attention in the gold tier's 113-bit arithmetic, row by row as gradient.h
// writes it: a row's scores, weights and O in quad, its D and dS, then its dQ (rounded to double once) and its
// share of dK, dV and dsink, accumulated in quad per key and per head and rounded once at the end. Under a dropout
// the kept weights P_ij z_ij sigma (sigma = 1 / (1 - p) in quad) take P's place in O and dV, and dP's in dS.
#include "flashcheck/gradient.h"

#include <boost/multiprecision/cpp_bin_float.hpp>
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "row_view.h"

namespace flashcheck::oracle {
namespace {

using Quad = boost::multiprecision::cpp_bin_float_quad;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

bool all_finite(const double* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) return false;
  }
  return true;
}

// The V rows the row reads: every visible key's, or under a dropout the kept keys' only.
bool kept_values_finite(const detail::RowView& view) {
  for (int64_t j = 0; j < view.visible; ++j) {
    if (view.kept(j) && !all_finite(view.v + j * view.head_dim_v, view.head_dim_v)) return false;
  }
  return true;
}

// One row's part of the gradient: its dQ row (written), its D (returned), and its shares of dK, dV and the sink's
// gradient (added to the quad accumulators of its K/V head and query head). `k_acc`, `v_acc` point at the
// accumulators of the row's first visible key.
struct RowShare {
  double d = 0.0;
  bool nonfinite = false;  // the row sees keys and its inputs hold inf or NaN: its dQ is NaN, its keys' dK and dV too
  bool values_nonfinite = false;  // only V rows it sees hold inf or NaN: its dQ, its keys' dK are NaN, their dV not
  bool sink_nan = false;   // its head's sink gradient is NaN (any of the above, dO non-finite, a NaN sink)
};

RowShare row_gradient(const detail::RowView& view, const double* d_o, double* dq, Quad* k_acc, Quad* v_acc,
                      Quad* sink_acc) {
  const int64_t dim = view.head_dim, dim_v = view.head_dim_v, n = view.visible;
  const bool has_sink = view.sink != -std::numeric_limits<double>::infinity();
  RowShare share;
  // A row that sees no key depends on no q and writes O = 0: its dQ is 0 whatever Q holds, and only dO (through D)
  // or a NaN sink reach the sink's gradient.
  // Non-finite values in the V rows it sees (and nowhere else) leave P and so dV finite: they reach O, D, dS, dQ, dK.
  const bool dout_finite = all_finite(d_o, dim_v);
  share.nonfinite = n > 0 && (!all_finite(view.q, dim) || !all_finite(view.k, n * dim) || !dout_finite ||
                              std::isnan(view.sink));
  share.values_nonfinite = n > 0 && !share.nonfinite && !kept_values_finite(view);
  share.sink_nan = share.nonfinite || (has_sink && (share.values_nonfinite || !dout_finite || std::isnan(view.sink)));
  for (int64_t c = 0; c < dim; ++c) dq[c] = share.nonfinite || share.values_nonfinite ? kNaN : 0.0;
  if (share.nonfinite || (n == 0 && (share.sink_nan || !dout_finite))) {
    share.d = kNaN;
    return share;
  }
  if (n == 0 && !has_sink) return share;  // no usable key: P = 0, nothing flows back
  if (view.sink == std::numeric_limits<double>::infinity()) return share;  // the sink takes all weight: O = 0, D = 0

  // Scores, capped where a softcap is set; their max with the sink's logit.
  std::vector<Quad> s(static_cast<size_t>(n));
  Quad m = has_sink ? Quad(view.sink) : Quad(-std::numeric_limits<double>::infinity());
  for (int64_t j = 0; j < n; ++j) {
    Quad dot = 0;
    for (int64_t c = 0; c < dim; ++c) dot += Quad(view.q[c]) * Quad(view.k[j * dim + c]);
    Quad t = Quad(view.scale) * dot;
    if (view.softcap > 0) t = Quad(view.softcap) * tanh(t / Quad(view.softcap));
    s[static_cast<size_t>(j)] = t;
    if (t > m) m = t;
  }
  Quad l = has_sink ? exp(Quad(view.sink) - m) : Quad(0);
  for (const Quad& t : s) l += exp(t - m);
  // P, the kept weights w = P z sigma (P without a dropout), O and D.
  const Quad sigma = view.has_dropout() ? Quad(1) / (Quad(1) - Quad(view.dropout_p)) : Quad(1);
  std::vector<Quad> p(static_cast<size_t>(n)), w(static_cast<size_t>(n));
  std::vector<Quad> o(static_cast<size_t>(dim_v), Quad(0));
  for (int64_t j = 0; j < n; ++j) {
    const Quad pj = exp(s[static_cast<size_t>(j)] - m) / l;
    p[static_cast<size_t>(j)] = pj;
    w[static_cast<size_t>(j)] = !view.kept(j) ? Quad(0) : view.has_dropout() ? pj * sigma : pj;
    if (!view.kept(j)) continue;  // a dropped key's V row is not read
    const Quad wj = w[static_cast<size_t>(j)];
    for (int64_t c = 0; c < dim_v; ++c) o[static_cast<size_t>(c)] += wj * Quad(view.v[j * dim_v + c]);
  }
  if (share.values_nonfinite) {  // dV only: the rest is NaN
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t c = 0; c < dim_v; ++c) v_acc[j * dim_v + c] += w[static_cast<size_t>(j)] * Quad(d_o[c]);
    }
    share.d = kNaN;
    return share;
  }
  Quad d = 0;
  for (int64_t c = 0; c < dim_v; ++c) d += Quad(d_o[c]) * o[static_cast<size_t>(c)];
  share.d = static_cast<double>(d);
  if (has_sink) *sink_acc -= exp(Quad(view.sink) - m) / l * d;
  // dS, dT; dQ; the row's shares of dK and dV.
  std::vector<Quad> dq_acc(static_cast<size_t>(dim), Quad(0));
  for (int64_t j = 0; j < n; ++j) {
    const Quad pj = p[static_cast<size_t>(j)];
    // dP' = z sigma dO.v: the derivative of O by the row's P_ij, zero for a dropped key.
    Quad dp = 0;
    if (view.kept(j)) {
      for (int64_t c = 0; c < dim_v; ++c) dp += Quad(d_o[c]) * Quad(view.v[j * dim_v + c]);
      if (view.has_dropout()) dp *= sigma;
    }
    Quad dt = pj * (dp - d);
    if (view.softcap > 0) {
      const Quad capped = s[static_cast<size_t>(j)] / Quad(view.softcap);
      dt *= Quad(1) - capped * capped;
    }
    const Quad scaled = Quad(view.scale) * dt;
    for (int64_t c = 0; c < dim; ++c) {
      dq_acc[static_cast<size_t>(c)] += scaled * Quad(view.k[j * dim + c]);
      k_acc[j * dim + c] += scaled * Quad(view.q[c]);
    }
    for (int64_t c = 0; c < dim_v; ++c) v_acc[j * dim_v + c] += w[static_cast<size_t>(j)] * Quad(d_o[c]);
  }
  for (int64_t c = 0; c < dim; ++c) dq[c] = static_cast<double>(dq_acc[static_cast<size_t>(c)]);
  return share;
}

}  // namespace

Gradient exact_gradient(const Problem& problem, std::span<const double> d_o) {
  if (has_descales(problem)) {
    throw std::invalid_argument("exact_gradient: the problem has descales, and the fp8 path has no backward pass");
  }
  check_sequence_lengths(problem);
  const int64_t dim = problem.head_dim, dim_v = value_dim(problem);
  const int64_t rows = problem.batch * problem.heads_q * problem.seqlen_q;
  check_values("d_o", d_o.size(), rows * dim_v);
  const int64_t keys = problem.batch * problem.heads_kv * problem.seqlen_k;
  Gradient g;
  g.dq.assign(static_cast<size_t>(rows * dim), 0.0);
  g.d.assign(static_cast<size_t>(rows), 0.0);
  std::vector<Quad> k_acc(static_cast<size_t>(keys * dim), Quad(0));
  std::vector<Quad> v_acc(static_cast<size_t>(keys * dim_v), Quad(0));
  std::vector<char> k_nan(static_cast<size_t>(keys), 0);
  std::vector<Quad> sink_acc(problem.sink.size(), Quad(0));
  std::vector<char> sink_nan(problem.sink.size(), 0);
  const int64_t group = problem.heads_kv > 0 ? problem.heads_q / problem.heads_kv : 1;
  for (int64_t b = 0; b < problem.batch; ++b) {
    const int64_t rows_b = sequence_seqlen_q(problem, b);
    for (int64_t h = 0; h < problem.heads_q; ++h) {
      for (int64_t i = 0; i < rows_b; ++i) {
        const detail::RowView view = detail::view_row(problem, {b, h, i});
        const int64_t row = (b * problem.heads_q + h) * problem.seqlen_q + i;
        const int64_t key0 = (b * problem.heads_kv + h / group) * problem.seqlen_k + view.key_begin;
        Quad unused_sink = 0;
        Quad* sink = problem.sink.empty() ? &unused_sink : &sink_acc[static_cast<size_t>(h)];
        const RowShare share = row_gradient(view, d_o.data() + row * dim_v, g.dq.data() + row * dim,
                                            k_acc.data() + key0 * dim, v_acc.data() + key0 * dim_v, sink);
        g.d[static_cast<size_t>(row)] = share.d;
        if (share.nonfinite || share.values_nonfinite) {
          for (int64_t j = 0; j < view.visible; ++j) {
            char& flag = k_nan[static_cast<size_t>(key0 + j)];
            flag = std::max<char>(flag, share.nonfinite ? 2 : 1);
          }
        }
        if (share.sink_nan && !problem.sink.empty()) sink_nan[static_cast<size_t>(h)] = 1;
      }
    }
  }
  g.dk.resize(k_acc.size());
  g.dv.resize(v_acc.size());
  for (int64_t key = 0; key < keys; ++key) {
    // 1: dK is NaN (a row saw non-finite values); 2: dV too (a row's scores or dO are non-finite).
    const char nan = k_nan[static_cast<size_t>(key)];
    for (int64_t c = 0; c < dim; ++c) {
      const size_t at = static_cast<size_t>(key * dim + c);
      g.dk[at] = nan >= 1 ? kNaN : static_cast<double>(k_acc[at]);
    }
    for (int64_t c = 0; c < dim_v; ++c) {
      const size_t at = static_cast<size_t>(key * dim_v + c);
      g.dv[at] = nan >= 2 ? kNaN : static_cast<double>(v_acc[at]);
    }
  }
  g.dsink.resize(sink_acc.size());
  for (size_t h = 0; h < sink_acc.size(); ++h) g.dsink[h] = sink_nan[h] != 0 ? kNaN : static_cast<double>(sink_acc[h]);
  return g;
}

}  // namespace flashcheck::oracle
