// same_precision_gradient(): the backward pass as a framework computes it from inputs in the dtype (gradient.h), row
// by row over the row's visible keys in fp32: scores, softmax, dP, D and dS, with P, dP and dS rounded to the format
// where a framework's tensors hold them, dQ finished per row and dK, dV accumulated per key over the rows of its group.
// Written from the formulas in gradient.h; only the format's rounding comes from the oracle's fp32 emulation.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "flashcheck/gradient.h"
#include "fp_emulation.h"
#include "row_view.h"

namespace flashcheck::oracle {
namespace {

constexpr float kInfF = std::numeric_limits<float>::infinity();

// fp32's correctly rounded exp and tanh: double's values, rounded once.
float exp_f32(float x) { return static_cast<float>(std::exp(static_cast<double>(x))); }
float tanh_f32(float x) { return static_cast<float>(std::tanh(static_cast<double>(x))); }

// One fp32 dot product of n terms, an FMA chain in index order (a GEMM's fp32 accumulation).
float dot_f32(const double* a, const double* b, int64_t n) {
  float acc = 0.0f;
  for (int64_t c = 0; c < n; ++c) acc = std::fma(static_cast<float>(a[c]), static_cast<float>(b[c]), acc);
  return acc;
}

}  // namespace

SamePrecisionGradient same_precision_gradient(const Problem& problem, std::span<const double> d_o, Format format) {
  check_sequence_lengths(problem);
  const int64_t dim = problem.head_dim, dim_v = value_dim(problem);
  const int64_t rows = problem.batch * problem.heads_q * problem.seqlen_q;
  if (static_cast<int64_t>(d_o.size()) != rows * dim_v) {
    throw std::invalid_argument("oracle: d_o has " + std::to_string(d_o.size()) + " values; the problem's O has " +
                                std::to_string(rows * dim_v));
  }
  const auto in_format = [format](float x) { return detail::round_to(format, x); };
  const float scale = static_cast<float>(problem.scale);
  const double scale_abs = std::fabs(static_cast<double>(scale));
  const float cap = static_cast<float>(problem.softcap);
  const int64_t keys = problem.batch * problem.heads_kv * problem.seqlen_k;
  const int64_t group = problem.heads_kv > 0 ? problem.heads_q / problem.heads_kv : 1;

  SamePrecisionGradient out;
  out.dq.assign(static_cast<size_t>(rows * dim), 0.0);
  out.dq_magnitude.assign(out.dq.size(), 0.0);
  std::vector<float> dk_acc(static_cast<size_t>(keys * dim), 0.0f), dv_acc(static_cast<size_t>(keys * dim_v), 0.0f);
  out.dk_magnitude.assign(dk_acc.size(), 0.0);
  out.dv_magnitude.assign(dv_acc.size(), 0.0);
  std::vector<float> s, y, p, dp, dt;
  std::vector<double> w;  // |P| (|dP| + |D|) g: dT's size before the cancellation in dP - D
  for (int64_t b = 0; b < problem.batch; ++b) {
    const int64_t rows_b = sequence_seqlen_q(problem, b);
    for (int64_t h = 0; h < problem.heads_q; ++h) {
      for (int64_t i = 0; i < rows_b; ++i) {
        const detail::RowView view = detail::view_row(problem, {b, h, i});
        const int64_t n = view.visible;
        const bool has_sink = view.sink != -std::numeric_limits<double>::infinity();
        if (n == 0 || view.sink == std::numeric_limits<double>::infinity()) continue;  // P = 0: nothing flows back
        const int64_t row = (b * problem.heads_q + h) * problem.seqlen_q + i;
        const int64_t key0 = (b * problem.heads_kv + h / group) * problem.seqlen_k + view.key_begin;
        const double* dout = d_o.data() + row * dim_v;
        const float sink = static_cast<float>(view.sink);
        // Scores and the softmax.
        s.assign(static_cast<size_t>(n), 0.0f);
        y.assign(static_cast<size_t>(n), 0.0f);
        float m = has_sink ? sink : -kInfF;
        for (int64_t j = 0; j < n; ++j) {
          float t = scale * dot_f32(view.q, view.k + j * dim, dim);
          if (cap > 0.0f) {
            y[static_cast<size_t>(j)] = tanh_f32(t / cap);
            t = cap * y[static_cast<size_t>(j)];
          }
          s[static_cast<size_t>(j)] = t;
          m = std::max(m, t);
        }
        p.assign(static_cast<size_t>(n), 0.0f);
        float l = 0.0f;
        for (int64_t j = 0; j < n; ++j) {
          p[static_cast<size_t>(j)] = exp_f32(s[static_cast<size_t>(j)] - m);
          l += p[static_cast<size_t>(j)];
        }
        if (has_sink) l += exp_f32(sink - m);
        for (float& pj : p) pj = in_format(pj / l);
        // dP in the format, D, dS (times the softcap's factor) in the format.
        dp.assign(static_cast<size_t>(n), 0.0f);
        float d = 0.0f;
        for (int64_t j = 0; j < n; ++j) {
          dp[static_cast<size_t>(j)] = in_format(dot_f32(dout, view.v + j * dim_v, dim_v));
          d = std::fma(p[static_cast<size_t>(j)], dp[static_cast<size_t>(j)], d);
        }
        dt.assign(static_cast<size_t>(n), 0.0f);
        w.assign(static_cast<size_t>(n), 0.0);
        for (int64_t j = 0; j < n; ++j) {
          const size_t at = static_cast<size_t>(j);
          float ds = p[at] * (dp[at] - d);
          double g = 1.0;
          if (cap > 0.0f) {
            const float factor = 1.0f - y[at] * y[at];
            ds = ds * factor;
            g = std::fabs(static_cast<double>(factor));
          }
          dt[at] = in_format(ds);
          w[at] = static_cast<double>(p[at]) * (std::fabs(static_cast<double>(dp[at])) + std::fabs(static_cast<double>(d))) * g;
        }
        // dQ of the row; the row's terms of dK and dV.
        for (int64_t c = 0; c < dim; ++c) {
          float acc = 0.0f;
          double mag = 0.0;
          for (int64_t j = 0; j < n; ++j) {
            const double kjc = view.k[j * dim + c];
            acc = std::fma(dt[static_cast<size_t>(j)], static_cast<float>(kjc), acc);
            mag += w[static_cast<size_t>(j)] * std::fabs(kjc);
          }
          out.dq[static_cast<size_t>(row * dim + c)] = in_format(scale * acc);
          out.dq_magnitude[static_cast<size_t>(row * dim + c)] = scale_abs * mag;
        }
        for (int64_t j = 0; j < n; ++j) {
          const size_t at = static_cast<size_t>(j);
          for (int64_t c = 0; c < dim; ++c) {
            const size_t e = static_cast<size_t>((key0 + j) * dim + c);
            dk_acc[e] = std::fma(dt[at], static_cast<float>(view.q[c]), dk_acc[e]);
            out.dk_magnitude[e] += w[at] * std::fabs(view.q[c]);
          }
          for (int64_t c = 0; c < dim_v; ++c) {
            const size_t e = static_cast<size_t>((key0 + j) * dim_v + c);
            dv_acc[e] = std::fma(p[at], static_cast<float>(dout[c]), dv_acc[e]);
            out.dv_magnitude[e] += static_cast<double>(p[at]) * std::fabs(dout[c]);
          }
        }
      }
    }
  }
  out.dk.resize(dk_acc.size());
  for (size_t e = 0; e < dk_acc.size(); ++e) {
    out.dk[e] = in_format(scale * dk_acc[e]);
    out.dk_magnitude[e] *= scale_abs;
  }
  out.dv.resize(dv_acc.size());
  for (size_t e = 0; e < dv_acc.size(); ++e) out.dv[e] = in_format(dv_acc[e]);
  return out;
}

}  // namespace flashcheck::oracle
