// same_precision_gradient(): the backward pass as a framework computes it from inputs in the dtype (gradient.h), row
// by row over the row's visible keys in fp32: scores, softmax, dP, D and dS, with P, dP and dS rounded to the format
// where a framework's tensors hold them, dQ finished per row and dK, dV accumulated per key over the rows of its group.
// Beside them, in double, what judge_backward's statistical check needs of each element: its magnitude, its score
// noise and the given O's effect. Written from the formulas in gradient.h; only the format's rounding comes from the
// oracle's fp32 emulation. Under a dropout, as a framework's dropout layer after the softmax: the dropped P, P z s32
// (s32 = fl32(1 / (1 - p))) in the format, weighs dO in dV, and dP' = dP z s32 in the format replaces dP in D and dS.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "flashcheck/dropout.h"
#include "flashcheck/error_model.h"
#include "flashcheck/gradient.h"
#include "fp_emulation.h"
#include "row_view.h"
#include "tiers.h"

namespace flashcheck::oracle {
namespace {

constexpr double kU32 = 0x1p-24;
constexpr double kNoiseCap = 0x1p100;  // P's relative noise at the most: far past any magnitude, never inf
constexpr float kInfF = std::numeric_limits<float>::infinity();
constexpr double kInf = std::numeric_limits<double>::infinity();

// fp32's correctly rounded exp and tanh: double's values, rounded once.
float exp_f32(float x) { return static_cast<float>(std::exp(static_cast<double>(x))); }
float tanh_f32(float x) { return static_cast<float>(std::tanh(static_cast<double>(x))); }

// One fp32 dot product of n terms, an FMA chain in index order (a GEMM's fp32 accumulation); `partial_sq`, where
// given, gets the sum of the squared partial sums (each rounded once: its square root is the chain's rounding noise
// in units of u_32).
float dot_f32(const double* a, const double* b, int64_t n, double* partial_sq = nullptr) {
  float acc = 0.0f;
  double sq = 0.0;
  for (int64_t c = 0; c < n; ++c) {
    acc = std::fma(static_cast<float>(a[c]), static_cast<float>(b[c]), acc);
    sq += static_cast<double>(acc) * static_cast<double>(acc);
  }
  if (partial_sq != nullptr) *partial_sq = sq;
  return acc;
}

// What one visible key of a row contributes, per (i, j).
struct Pair {
  float s = 0.0f, y = 0.0f;  // score (capped), tanh of the cap
  float p = 0.0f;            // P in the format
  float dp = 0.0f;           // dP in the format (dropout: dP' = dP z s32, in the format)
  float pv = 0.0f;           // dO's weight in dV: P (dropout: P z s32, in the format)
  double kept_scale = 1.0;   // z s32: 1 without a dropout, 0 for a dropped key
  float dt = 0.0f;           // dS times the softcap's factor, in the format
  double weight = 0.0;       // P = e / l in double (unrounded): the first-order terms below
  double g = 1.0;            // the softcap's factor 1 - y^2
  double g_noise = 0.0;      // what a GPU's tanhf and its argument's roundings move g by (gradient.h)
  double size = 0.0;         // P (|dP| + |D|) g: dT before the cancellation in dP - D
  double noise = 0.0;        // eps P: P's score noise (gradient.h)
  double noise_t = 0.0;      // dT's: from P's score noise and from dP - D's roundings (gradient.h)
};

}  // namespace

SamePrecisionGradient same_precision_gradient(const Problem& problem, std::span<const double> d_o,
                                              const ForwardResult& forward, std::span<const double> d_exact,
                                              Format format) {
  if (format == Format::kE4M3 || has_descales(problem)) {
    throw std::invalid_argument(
        "same_precision_gradient: no backward pass is defined on f8e4m3 inputs (the fp8 path is forward-only)");
  }
  check_sequence_lengths(problem);
  const int64_t dim = problem.head_dim, dim_v = value_dim(problem);
  // A kernel that flushes fp32 subnormals (FTZ) loses each product of dP and of D below 2^-126 whole (subnormal V or O
  // against dO: dP - D then lies at 2 dim_v 2^-126 or below, and a dQ of 10^-38 is 0 on the GPU), where this reference
  // keeps them: an absolute term of every dP - D beside its roundings, negligible wherever dP - D is normal.
  const double flushed = 2.0 * static_cast<double>(dim_v) * detail::kFlushResult;
  const int64_t rows = problem.batch * problem.heads_q * problem.seqlen_q;
  const std::span<const double> o = forward.o;
  check_values("d_o", d_o.size(), rows * dim_v);
  check_values("o", o.size(), rows * dim_v);
  check_values("lse", forward.lse.size(), rows);
  check_values("d_exact", d_exact.size(), rows);
  const auto in_format = [format](float x) { return detail::round_to(format, x); };
  const float scale = static_cast<float>(problem.scale);
  const double scale_abs = std::fabs(static_cast<double>(scale));
  const float cap = static_cast<float>(problem.softcap);
  // A dropout's factor as the framework's dropout layer holds it: fl32 of 1 / (1 - p) (1 without a dropout).
  const float keep_scale32 = problem.dropout.p != 0.0f ? static_cast<float>(keep_scale(problem.dropout.p)) : 1.0f;
  const int64_t keys = problem.batch * problem.heads_kv * problem.seqlen_k;
  const int64_t group = problem.heads_kv > 0 ? problem.heads_q / problem.heads_kv : 1;

  SamePrecisionGradient out;
  const size_t q_elements = static_cast<size_t>(rows * dim), k_elements = static_cast<size_t>(keys * dim),
               v_elements = static_cast<size_t>(keys * dim_v);
  out.dq.assign(q_elements, 0.0);
  out.dq_magnitude.assign(q_elements, 0.0);
  out.dq_noise.assign(q_elements, 0.0);
  out.dq_from_o.assign(q_elements, 0.0);
  out.dk_magnitude.assign(k_elements, 0.0);
  out.dk_noise.assign(k_elements, 0.0);  // squares until the end
  out.dk_from_o.assign(k_elements, 0.0);
  out.dv_magnitude.assign(v_elements, 0.0);
  out.dv_noise.assign(v_elements, 0.0);  // squares until the end
  std::vector<float> dk_acc(k_elements, 0.0f), dv_acc(v_elements, 0.0f);
  std::vector<Pair> pairs;
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
        pairs.assign(static_cast<size_t>(n), Pair{});
        // Scores, each with the size of its partial sums (N_ij, through the softcap's factor).
        std::vector<double> partial_noise(static_cast<size_t>(n), 0.0);
        float m = has_sink ? sink : -kInfF;
        for (int64_t j = 0; j < n; ++j) {
          Pair& x = pairs[static_cast<size_t>(j)];
          double partial_sq = 0.0;
          float t = scale * dot_f32(view.q, view.k + j * dim, dim, &partial_sq);
          partial_noise[static_cast<size_t>(j)] = scale_abs * std::sqrt(partial_sq);
          if (cap > 0.0f) {
            const float arg = t / cap;
            x.y = tanh_f32(arg);
            t = cap * x.y;
            const float factor = 1.0f - x.y * x.y;
            x.g = static_cast<double>(factor);
            const double y = std::fabs(static_cast<double>(x.y));
            const double arg_noise = kU32 * (2.0 * std::fabs(static_cast<double>(arg)) +
                                             partial_noise[static_cast<size_t>(j)] / static_cast<double>(cap));
            x.g_noise = 2.0 * y * (kTanhRelErr * y + x.g * arg_noise);
            partial_noise[static_cast<size_t>(j)] *= x.g;
          }
          x.s = t;
          m = std::max(m, t);
        }
        // The softmax: e = exp(s - m), l, P = e / l in the format; the score noise of each P.
        float l = 0.0f;
        for (Pair& x : pairs) {
          x.p = exp_f32(x.s - m);
          l += x.p;
        }
        if (has_sink) l += exp_f32(sink - m);
        const double lse = static_cast<double>(m) + std::log(static_cast<double>(l));
        // The LSE a kernel is given lies this far from this reference's: its every P moves by e^-(that), a score
        // error of the whole row (a non-finite one: no statistic for the row).
        const double given_lse = forward.lse[static_cast<size_t>(row)];
        const double lse_shift = std::isfinite(given_lse) ? std::fabs(given_lse - lse) : kInf;
        for (size_t j = 0; j < pairs.size(); ++j) {
          Pair& x = pairs[j];
          x.weight = static_cast<double>(x.p) / static_cast<double>(l);
          const double eps = kU32 * (std::fabs(static_cast<double>(x.s)) + std::fabs(lse) + partial_noise[j]) +
                             lse_shift + kExp2RelErr +
                             (cap > 0.0f ? kTanhRelErr * std::fabs(static_cast<double>(x.s)) : 0.0);
          // e^eps - 1: a score error eps moves P by a factor e^(+-eps); held finite (the statistical check leaves out
          // an element whose noise reaches its magnitude).
          x.noise = std::min(std::expm1(eps), kNoiseCap) * x.weight;
          x.p = in_format(x.p / l);
          x.pv = x.p;
          if (view.has_dropout()) {
            x.kept_scale = view.kept(static_cast<int64_t>(j)) ? static_cast<double>(keep_scale32) : 0.0;
            x.pv = in_format(x.p * static_cast<float>(x.kept_scale));
          }
        }
        // dP in the format, D = sum_j P_ij dP_ij, dS (times the softcap's factor) in the format. The partial sums of
        // dP_ij = dO_i.v_j and of a kernel's D_i = dO_i.O_i size their roundings.
        double d_partial_sq = 0.0;
        (void)dot_f32(dout, o.data() + row * dim_v, dim_v, &d_partial_sq);
        float d = 0.0f;
        std::vector<double> dp_partial_sq(static_cast<size_t>(n), 0.0);
        for (int64_t j = 0; j < n; ++j) {
          Pair& x = pairs[static_cast<size_t>(j)];
          x.dp = in_format(dot_f32(dout, view.v + j * dim_v, dim_v, &dp_partial_sq[static_cast<size_t>(j)]));
          if (view.has_dropout()) {
            // A dropped key's dP' is an exact 0, its dP unread; a kept one's partial sums scale with s32.
            x.dp = x.kept_scale == 0.0 ? 0.0f : in_format(x.dp * static_cast<float>(x.kept_scale));
            dp_partial_sq[static_cast<size_t>(j)] *= x.kept_scale * x.kept_scale;
          }
          d = std::fma(x.p, x.dp, d);
        }
        // The given O's deviation moves a kernel's D = dO.O by this much, and its dS_ij by -P_ij g_ij times it.
        double d_given = 0.0;
        for (int64_t c = 0; c < dim_v; ++c) d_given += dout[c] * o[static_cast<size_t>(row * dim_v + c)];
        const double d_shift = d_given - d_exact[static_cast<size_t>(row)];
        for (size_t j = 0; j < pairs.size(); ++j) {
          Pair& x = pairs[j];
          float ds = x.p * (x.dp - d);
          if (cap > 0.0f) ds = ds * static_cast<float>(x.g);
          x.dt = in_format(ds);
          const double dp = static_cast<double>(x.dp), dd = static_cast<double>(d), g = std::fabs(x.g);
          x.size = static_cast<double>(x.p) * (std::fabs(dp) + std::fabs(dd)) * g;
          // A kernel's P is up to e^eps P: its noise multiplies the kernel's dP - D (the reference's, and the given O's
          // shift of D beside it: a row of one dominant key, where the reference's cancels exactly, keeps the shift),
          // and the roundings w of dP - D are weighed by that P, not by the reference's.
          const double from_p = x.noise * (std::fabs(dp - dd) + std::fabs(d_shift)) * g;
          // Beside the roundings, the products of dP and D a flushing kernel loses (flushed, above).
          const double from_w =
              (kU32 * std::sqrt(dp_partial_sq[j] + d_partial_sq) + flushed) * (x.weight + x.noise) * g;
          const double from_g = static_cast<double>(x.p) * std::fabs(dp - dd) * x.g_noise;
          x.noise_t = std::sqrt(from_p * from_p + from_w * from_w + from_g * from_g);
        }
        // dQ of the row; the row's terms of dK and dV.
        for (int64_t c = 0; c < dim; ++c) {
          float acc = 0.0f;
          double size = 0.0, noise_sq = 0.0, from_o = 0.0;
          for (int64_t j = 0; j < n; ++j) {
            const Pair& x = pairs[static_cast<size_t>(j)];
            const double kjc = view.k[j * dim + c];
            acc = std::fma(x.dt, static_cast<float>(kjc), acc);
            size += x.size * std::fabs(kjc);
            noise_sq += (x.noise_t * kjc) * (x.noise_t * kjc);
            from_o += x.weight * x.g * kjc;
          }
          const size_t e = static_cast<size_t>(row * dim + c);
          out.dq[e] = in_format(scale * acc);
          out.dq_magnitude[e] = scale_abs * size;
          out.dq_noise[e] = scale_abs * std::sqrt(noise_sq);
          out.dq_from_o[e] = -problem.scale * d_shift * from_o;
        }
        for (int64_t j = 0; j < n; ++j) {
          const Pair& x = pairs[static_cast<size_t>(j)];
          for (int64_t c = 0; c < dim; ++c) {
            const size_t e = static_cast<size_t>((key0 + j) * dim + c);
            const double qc = view.q[c];
            dk_acc[e] = std::fma(x.dt, static_cast<float>(qc), dk_acc[e]);
            out.dk_magnitude[e] += x.size * std::fabs(qc);
            out.dk_noise[e] += (x.noise_t * qc) * (x.noise_t * qc);
            out.dk_from_o[e] -= d_shift * x.weight * x.g * qc;
          }
          for (int64_t c = 0; c < dim_v; ++c) {
            const size_t e = static_cast<size_t>((key0 + j) * dim_v + c);
            dv_acc[e] = std::fma(x.pv, static_cast<float>(dout[c]), dv_acc[e]);
            out.dv_magnitude[e] += static_cast<double>(x.pv) * std::fabs(dout[c]);
            const double noise = view.has_dropout() ? x.noise * x.kept_scale : x.noise;
            out.dv_noise[e] += (noise * dout[c]) * (noise * dout[c]);
          }
        }
      }
    }
  }
  out.dk.resize(k_elements);
  for (size_t e = 0; e < k_elements; ++e) {
    out.dk[e] = in_format(scale * dk_acc[e]);
    out.dk_magnitude[e] *= scale_abs;
    out.dk_noise[e] = scale_abs * std::sqrt(out.dk_noise[e]);
    out.dk_from_o[e] *= problem.scale;
  }
  out.dv.resize(v_elements);
  for (size_t e = 0; e < v_elements; ++e) {
    out.dv[e] = in_format(dv_acc[e]);
    out.dv_noise[e] = std::sqrt(out.dv_noise[e]);
  }
  return out;
}

}  // namespace flashcheck::oracle
