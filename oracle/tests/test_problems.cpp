// Test problems: rounding to a format from double (one rounding, by exact power-of-two scaling and nearbyint), a
// splitmix64 generator with Box-Muller normals, and problem construction.
#include "test_problems.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace flashcheck::oracle::testing {
namespace {

struct FormatBits {
  int precision;  // significand bits, implicit bit included
  int min_exp;    // exponent of the smallest normal
  double max_finite;
};

FormatBits bits_of(Format format) {
  switch (format) {
    case Format::kF16: return {11, -14, 65504.0};
    case Format::kBF16: return {8, -126, 0x1.fep127};
    case Format::kE4M3: return {4, -6, 448.0};
    case Format::kF32: break;
  }
  return {24, -126, 0x1.fffffep127};
}

}  // namespace

double round_to(Format format, double x) {
  if (!std::isfinite(x) || x == 0.0) return x;
  const FormatBits f = bits_of(format);
  int exp = 0;
  std::frexp(x, &exp);
  const int quantum_exp = std::max(exp - 1, f.min_exp) - (f.precision - 1);
  const double rounded = std::ldexp(std::nearbyint(std::ldexp(x, -quantum_exp)), quantum_exp);
  if (std::fabs(rounded) > f.max_finite) return std::copysign(std::numeric_limits<double>::infinity(), x);
  return rounded;
}

double format_max(Format format) { return bits_of(format).max_finite; }

uint64_t Rng::next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double Rng::uniform() { return static_cast<double>(next() >> 11) * 0x1p-53; }
double Rng::uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }

double Rng::normal(double mu, double sigma) {
  constexpr double kTwoPi = 6.283185307179586;
  const double u1 = 1.0 - uniform();  // (0, 1]
  const double u2 = uniform();
  return mu + sigma * std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
}

int64_t Rng::below(int64_t bound) { return static_cast<int64_t>(uniform() * static_cast<double>(bound)); }

Problem TestProblem::view() const {
  Problem p;
  p.batch = batch;
  p.heads_q = heads_q;
  p.heads_kv = heads_kv;
  p.seqlen_q = seqlen_q;
  p.seqlen_k = seqlen_k;
  p.head_dim = head_dim;
  p.head_dim_v = head_dim_v;
  p.visibility = visibility;
  p.scale = scale;
  p.softcap = softcap;
  p.sink = sink;
  p.seqlens_q = seqlens_q;
  p.seqlens_k = seqlens_k;
  p.q = q;
  p.k = k;
  p.v = v;
  p.descale_q = descale_q;
  p.descale_k = descale_k;
  p.descale_v = descale_v;
  return p;
}

TestProblem make_shape(Format format, int64_t seqlen_q, int64_t seqlen_k, int64_t head_dim, Visibility visibility,
                       int64_t batch, int64_t heads_q, int64_t heads_kv, int64_t head_dim_v) {
  TestProblem p;
  p.format = format;
  p.batch = batch;
  p.heads_q = heads_q;
  p.heads_kv = heads_kv;
  p.seqlen_q = seqlen_q;
  p.seqlen_k = seqlen_k;
  p.head_dim = head_dim;
  p.head_dim_v = head_dim_v;
  p.visibility = visibility;
  p.scale = static_cast<double>(static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim))));
  p.q.assign(static_cast<size_t>(batch * heads_q * seqlen_q * head_dim), 0.0);
  p.k.assign(static_cast<size_t>(batch * heads_kv * seqlen_k * head_dim), 0.0);
  p.v.assign(static_cast<size_t>(batch * heads_kv * seqlen_k * p.value_dim()), 0.0);
  return p;
}

void fill(TestProblem* p, char tensor, const std::function<double(int64_t)>& value) {
  std::vector<double>& t = tensor == 'q' ? p->q : tensor == 'k' ? p->k : p->v;
  for (size_t e = 0; e < t.size(); ++e) t[e] = round_to(p->format, value(static_cast<int64_t>(e)));
}

void fill_normal(TestProblem* p, uint64_t seed, double q_sigma, double k_sigma, double v_sigma) {
  Rng rng(seed);
  fill(p, 'q', [&](int64_t) { return rng.normal(0.0, q_sigma); });
  fill(p, 'k', [&](int64_t) { return rng.normal(0.0, k_sigma); });
  fill(p, 'v', [&](int64_t) { return rng.normal(0.0, v_sigma); });
}

TestProblem unequal_dims_problem(Format format, int64_t head_dim, int64_t head_dim_v, uint64_t seed) {
  TestProblem p = make_shape(format, 5, 37, head_dim, kCausalBottomRight, 2, 4, 2, head_dim_v);
  Rng rng(seed);
  fill(&p, 'q', [&](int64_t) { return rng.normal(0.0, 1.5); });
  fill(&p, 'k', [&](int64_t) { return rng.normal(0.0, 1.5); });
  const int64_t dim_v = p.value_dim();
  fill(&p, 'v', [&](int64_t e) { return rng.normal(0.0, 1.0 + static_cast<double>(e % dim_v) / 8.0); });
  p.seqlens_q = {5, 3};
  p.seqlens_k = {37, 20};
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  for (int64_t h = 0; h < p.heads_q; ++h) {
    const auto row = p.q.begin() + ((p.heads_q + h) * p.seqlen_q + p.seqlens_q[1]) * head_dim;
    std::fill(row, row + (p.seqlen_q - p.seqlens_q[1]) * head_dim, kNaN);
  }
  for (int64_t h = 0; h < p.heads_kv; ++h) {
    const int64_t first_unused = (p.heads_kv + h) * p.seqlen_k + p.seqlens_k[1], unused = p.seqlen_k - p.seqlens_k[1];
    std::fill(p.k.begin() + first_unused * head_dim, p.k.begin() + (first_unused + unused) * head_dim, kNaN);
    std::fill(p.v.begin() + first_unused * dim_v, p.v.begin() + (first_unused + unused) * dim_v, kNaN);
  }
  return p;
}

TestProblem with_v_columns(const TestProblem& p, const std::vector<int64_t>& columns) {
  TestProblem out = p;
  const int64_t dim_v = p.value_dim(), width = static_cast<int64_t>(columns.size());
  out.head_dim_v = width;
  const int64_t rows = static_cast<int64_t>(p.v.size()) / dim_v;
  out.v.assign(static_cast<size_t>(rows * width), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < width; ++c) {
      out.v[static_cast<size_t>(r * width + c)] = p.v[static_cast<size_t>(r * dim_v + columns[static_cast<size_t>(c)])];
    }
  }
  return out;
}

}  // namespace flashcheck::oracle::testing
