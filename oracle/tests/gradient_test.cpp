// The exact gradient (gradient.h) against central differences of the gold forward (compute_row), and against
// identities of the math that need no differencing: shifting every score of a row moves nothing, grouped heads are
// repeated heads, a key no row sees gets no gradient, non-finite inputs reach exactly the gradients they touch.
#include "flashcheck/gradient.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "flashcheck/oracle.h"
#include "test_problems.h"

namespace flashcheck::oracle {
namespace {

// A problem that owns its tensors.
struct Owned {
  Problem p;
  std::vector<double> q, k, v, d_o, sink;
  std::vector<int64_t> seqlens_q, seqlens_k;
  void bind() {
    p.q = q;
    p.k = k;
    p.v = v;
    p.sink = sink;
    p.seqlens_q = seqlens_q;
    p.seqlens_k = seqlens_k;
  }
};

struct Shape {
  std::string name;
  int64_t batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim, head_dim_v;
  Visibility visibility;
  double softcap;
  bool sink;
  std::vector<int64_t> seqlens_q, seqlens_k;
};

Owned make(const Shape& s, uint64_t seed, double spread = 1.5) {
  Owned o;
  o.p.batch = s.batch;
  o.p.heads_q = s.heads_q;
  o.p.heads_kv = s.heads_kv;
  o.p.seqlen_q = s.seqlen_q;
  o.p.seqlen_k = s.seqlen_k;
  o.p.head_dim = s.head_dim;
  o.p.head_dim_v = s.head_dim_v;
  o.p.visibility = s.visibility;
  o.p.scale = 0.5;
  o.p.softcap = s.softcap;
  testing::Rng draws(seed);
  const int64_t dv = value_dim(o.p);
  const auto fill = [&](std::vector<double>* t, int64_t n, double amp) {
    t->resize(static_cast<size_t>(n));
    for (double& x : *t) x = amp * draws.uniform(-1.0, 1.0);
  };
  fill(&o.q, s.batch * s.heads_q * s.seqlen_q * s.head_dim, spread);
  fill(&o.k, s.batch * s.heads_kv * s.seqlen_k * s.head_dim, spread);
  fill(&o.v, s.batch * s.heads_kv * s.seqlen_k * dv, 1.0);
  fill(&o.d_o, s.batch * s.heads_q * s.seqlen_q * dv, 1.0);
  if (s.sink) fill(&o.sink, s.heads_q, 1.0);
  o.seqlens_q = s.seqlens_q;
  o.seqlens_k = s.seqlens_k;
  o.bind();
  return o;
}

// sum over the valid rows of dO . O, O from the gold forward.
double loss(const Owned& o) {
  const int64_t dv = value_dim(o.p);
  double total = 0.0;
  for (int64_t b = 0; b < o.p.batch; ++b) {
    for (int64_t h = 0; h < o.p.heads_q; ++h) {
      for (int64_t i = 0; i < sequence_seqlen_q(o.p, b); ++i) {
        const RowResult r = compute_row(o.p, {b, h, i}, Tier::kGold);
        const int64_t row = (b * o.p.heads_q + h) * o.p.seqlen_q + i;
        for (int64_t c = 0; c < dv; ++c) total += o.d_o[static_cast<size_t>(row * dv + c)] * r.o[static_cast<size_t>(c)];
      }
    }
  }
  return total;
}

// Central difference of loss() in one input value (step h, relative to the value's size).
double central_difference(Owned* o, std::vector<double>* t, size_t at) {
  const double x = (*t)[at];
  const double h = 1e-5 * std::max(1.0, std::fabs(x));
  (*t)[at] = x + h;
  const double up = loss(*o);
  (*t)[at] = x - h;
  const double down = loss(*o);
  (*t)[at] = x;
  return (up - down) / (2 * h);
}

const std::vector<Shape>& shapes() {
  static const std::vector<Shape> all{
      {"plain", 1, 1, 1, 3, 5, 4, 0, kAllKeys, 0.0, false, {}, {}},
      {"causal-br dv", 1, 2, 2, 3, 6, 4, 3, kCausalBottomRight, 0.0, false, {}, {}},
      {"window gqa", 1, 4, 2, 5, 7, 3, 0, Visibility{2, 1, Alignment::kTopLeft}, 0.0, false, {}, {}},
      {"softcap sink", 1, 2, 1, 4, 5, 3, 2, kCausalTopLeft, 1.5, true, {}, {}},
      {"sequences", 2, 2, 1, 4, 6, 3, 0, kCausalBottomRight, 0.0, true, {4, 2}, {3, 6}},
  };
  return all;
}

// Every input value's derivative from central differences against the exact gradient: within 1e-6 of the gradient's
// largest magnitude (the differences' own error at h = 1e-5 is about 1e-10 here).
TEST(ExactGradient, MatchesCentralDifferencesOfTheGoldForward) {
  uint64_t seed = 1;
  for (const Shape& s : shapes()) {
    Owned o = make(s, ++seed);
    const Gradient g = exact_gradient(o.p, o.d_o);
    const auto check = [&](const char* name, std::vector<double>* t, const std::vector<double>& grad) {
      ASSERT_EQ(grad.size(), t->size()) << s.name << " " << name;
      double scale = 1e-30;
      for (double x : grad) scale = std::max(scale, std::fabs(x));
      for (size_t at = 0; at < t->size(); ++at) {
        const double fd = central_difference(&o, t, at);
        EXPECT_NEAR(grad[at], fd, 1e-6 * scale) << s.name << " d" << name << "[" << at << "]";
      }
    };
    check("q", &o.q, g.dq);
    check("k", &o.k, g.dk);
    check("v", &o.v, g.dv);
    if (s.sink) check("sink", &o.sink, g.dsink);
  }
}

// D_i = dO_i . O_i with O from the gold forward.
TEST(ExactGradient, DIsTheRowDotOfDoAndO) {
  Owned o = make(shapes()[3], 40);
  const Gradient g = exact_gradient(o.p, o.d_o);
  const int64_t dv = value_dim(o.p);
  for (int64_t h = 0; h < o.p.heads_q; ++h) {
    for (int64_t i = 0; i < o.p.seqlen_q; ++i) {
      const RowResult r = compute_row(o.p, {0, h, i}, Tier::kGold);
      const int64_t row = h * o.p.seqlen_q + i;
      double d = 0.0;
      for (int64_t c = 0; c < dv; ++c) d += o.d_o[static_cast<size_t>(row * dv + c)] * r.o[static_cast<size_t>(c)];
      EXPECT_NEAR(g.d[static_cast<size_t>(row)], d, 1e-15 * (1 + std::fabs(d))) << "row " << row;
    }
  }
}

// Adding one constant to every score of a row changes no probability: with neither sink nor softcap, each row's dS
// sums to 0 over its keys, so the keys' dK sum to 0 for every K/V head and column (masks included).
TEST(ExactGradient, KeyGradientsSumToZeroWithoutSink) {
  for (size_t idx : {size_t{0}, size_t{1}, size_t{2}}) {
    Owned o = make(shapes()[idx], 50 + idx);
    const Gradient g = exact_gradient(o.p, o.d_o);
    for (int64_t hk = 0; hk < o.p.batch * o.p.heads_kv; ++hk) {
      for (int64_t c = 0; c < o.p.head_dim; ++c) {
        double sum = 0.0, size = 0.0;
        for (int64_t j = 0; j < o.p.seqlen_k; ++j) {
          const double x = g.dk[static_cast<size_t>((hk * o.p.seqlen_k + j) * o.p.head_dim + c)];
          sum += x;
          size += std::fabs(x);
        }
        EXPECT_LE(std::fabs(sum), 1e-14 * size + 1e-300) << shapes()[idx].name << " head " << hk << " col " << c;
      }
    }
  }
}

// Grouped-query attention is repeated heads: the grouped problem's dQ is the repeated one's, and each K/V head's dK
// and dV are the sums over the repeated heads of its group.
TEST(ExactGradient, GroupedHeadsAreRepeatedHeads) {
  const Shape& s = shapes()[2];  // 4 query heads over 2 K/V heads
  Owned grouped = make(s, 60);
  Shape rep_shape = s;
  rep_shape.heads_kv = s.heads_q;
  Owned repeated = make(rep_shape, 60);
  const int64_t group = s.heads_q / s.heads_kv, per_head = s.seqlen_k * s.head_dim;
  for (int64_t h = 0; h < s.heads_q; ++h) {
    std::copy_n(grouped.k.begin() + (h / group) * per_head, per_head, repeated.k.begin() + h * per_head);
    std::copy_n(grouped.v.begin() + (h / group) * per_head, per_head, repeated.v.begin() + h * per_head);
  }
  repeated.q = grouped.q;
  repeated.d_o = grouped.d_o;
  repeated.bind();
  const Gradient a = exact_gradient(grouped.p, grouped.d_o), b = exact_gradient(repeated.p, repeated.d_o);
  EXPECT_EQ(a.dq, b.dq);
  for (int64_t hk = 0; hk < s.heads_kv; ++hk) {
    for (int64_t e = 0; e < per_head; ++e) {
      double dk = 0.0, dv = 0.0;
      for (int64_t r = 0; r < group; ++r) {
        dk += b.dk[static_cast<size_t>((hk * group + r) * per_head + e)];
        dv += b.dv[static_cast<size_t>((hk * group + r) * per_head + e)];
      }
      const size_t at = static_cast<size_t>(hk * per_head + e);
      EXPECT_NEAR(a.dk[at], dk, 1e-15 * (1 + std::fabs(dk))) << "dk " << at;
      EXPECT_NEAR(a.dv[at], dv, 1e-15 * (1 + std::fabs(dv))) << "dv " << at;
    }
  }
}

// Keys that no row sees (past a causal top-left diagonal of fewer rows than keys, past a sequence's length) get
// exactly zero, and so do rows past a sequence's length.
TEST(ExactGradient, UnseenKeysAndRowsGetZero) {
  Owned o = make(shapes()[4], 70);  // sequence 0: 4 rows and 3 keys, sequence 1: 2 rows and 6 keys (bottom-right)
  const Gradient g = exact_gradient(o.p, o.d_o);
  const int64_t d = o.p.head_dim;
  for (int64_t j = 3; j < o.p.seqlen_k; ++j) {  // sequence 0's keys past its length
    for (int64_t c = 0; c < d; ++c) EXPECT_EQ(g.dk[static_cast<size_t>(j * d + c)], 0.0) << "key " << j;
  }
  for (int64_t h = 0; h < o.p.heads_q; ++h) {  // sequence 1's rows past its length
    for (int64_t i = 2; i < o.p.seqlen_q; ++i) {
      const int64_t row = (o.p.heads_q + h) * o.p.seqlen_q + i;
      for (int64_t c = 0; c < d; ++c) EXPECT_EQ(g.dq[static_cast<size_t>(row * d + c)], 0.0) << "row " << row;
    }
  }
  Shape tl = shapes()[0];
  tl.visibility = kCausalTopLeft;  // 3 rows over 5 keys: keys 3 and 4 unseen
  Owned c = make(tl, 71);
  const Gradient gc = exact_gradient(c.p, c.d_o);
  const int64_t dc = c.p.head_dim;
  for (int64_t j = 3; j < tl.seqlen_k; ++j) {
    for (int64_t e = 0; e < dc; ++e) {
      EXPECT_EQ(gc.dk[static_cast<size_t>(j * dc + e)], 0.0) << "key " << j;
      EXPECT_EQ(gc.dv[static_cast<size_t>(j * dc + e)], 0.0) << "key " << j;
    }
  }
}

// A NaN in a V row reaches the rows that see it (their dQ and D) and the keys those rows see; rows that do not see
// it keep finite gradients.
TEST(ExactGradient, NonFiniteInputsReachWhatTheyTouch) {
  Shape s = shapes()[0];
  s.visibility = kCausalTopLeft;
  s.seqlen_q = s.seqlen_k = 5;
  Owned o = make(s, 80);
  o.v[2 * value_dim(o.p)] = std::numeric_limits<double>::quiet_NaN();  // key 2: rows 2, 3, 4 see it
  const Gradient g = exact_gradient(o.p, o.d_o);
  const int64_t d = o.p.head_dim;
  for (int64_t i = 0; i < 5; ++i) {
    EXPECT_EQ(std::isnan(g.d[static_cast<size_t>(i)]), i >= 2) << "row " << i;
    EXPECT_EQ(std::isnan(g.dq[static_cast<size_t>(i * d)]), i >= 2) << "row " << i;
  }
  for (int64_t j = 0; j < 5; ++j) EXPECT_TRUE(std::isnan(g.dk[static_cast<size_t>(j * d)])) << "key " << j;
}

TEST(ExactGradient, WrongDoSizeIsNamed) {
  Owned o = make(shapes()[0], 90);
  o.d_o.pop_back();
  try {
    (void)exact_gradient(o.p, o.d_o);
    FAIL() << "no exception";
  } catch (const std::invalid_argument& ex) {
    EXPECT_NE(std::string(ex.what()).find("d_o"), std::string::npos) << ex.what();
  }
}

}  // namespace
}  // namespace flashcheck::oracle
