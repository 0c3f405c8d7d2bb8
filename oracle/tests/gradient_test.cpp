// The exact gradient (gradient.h) against central differences of the gold forward (compute_row), and against
// identities of the math that need no differencing: shifting every score of a row moves nothing, grouped heads are
// repeated heads, a key no row sees gets no gradient, non-finite inputs reach exactly the gradients they touch. The
// bound of gradient_check against fp32 emulations of both arithmetic classes; the same-precision reference's error
// against its format's precision. Under a dropout likewise, with p = 0 bit for bit no dropout.
#include "flashcheck/gradient.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "flashcheck/dropout.h"
#include "flashcheck/error_model.h"
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
  // V enters neither P nor dO: dV_j = sum_i P_ij dO_i stays finite (the NaN reaches O, D, dS, dQ and dK only).
  for (double x : g.dv) EXPECT_TRUE(std::isfinite(x));
  // A NaN in Q of a row that sees no key reaches nothing: its dQ is 0.
  Shape empty = shapes()[0];
  empty.visibility = Visibility{0, -1, Alignment::kTopLeft};  // row i sees keys j >= i: the last rows none
  empty.seqlen_q = 7;
  empty.seqlen_k = 5;
  Owned e = make(empty, 81);
  e.q[static_cast<size_t>(6 * e.p.head_dim)] = std::numeric_limits<double>::quiet_NaN();  // row 6 sees no key
  const Gradient ge = exact_gradient(e.p, e.d_o);
  for (int64_t c = 0; c < e.p.head_dim; ++c) EXPECT_EQ(ge.dq[static_cast<size_t>(6 * e.p.head_dim + c)], 0.0);
  for (double x : ge.dk) EXPECT_TRUE(std::isfinite(x));
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

// ---- gradient_check(): the fast tier against the gold gradient, the bound against an fp32 emulation of a kernel.

// Every input of `o` rounded to `format` (what a kernel of that format reads).
void round_inputs(Owned* o, Format format) {
  for (std::vector<double>* t : {&o->q, &o->k, &o->v, &o->d_o}) {
    for (double& x : *t) x = testing::round_to(format, x);
  }
  for (double& x : o->sink) x = static_cast<double>(static_cast<float>(x));
  o->bind();
}

// The forward's outputs as a kernel would write them: O rounded to the format, LSE to fp32, plus `o_ulps` units of
// the format's roundoff on every O element (a forward that rounds worse than nearest).
struct Forward {
  std::vector<double> o, lse;
};
Forward forward_of(const Owned& o, Format format, double o_ulps = 0.0) {
  const int64_t dv = value_dim(o.p), rows = o.p.batch * o.p.heads_q * o.p.seqlen_q;
  Forward f{std::vector<double>(static_cast<size_t>(rows * dv), 0.0), std::vector<double>(static_cast<size_t>(rows), 0.0)};
  for (int64_t b = 0; b < o.p.batch; ++b) {
    for (int64_t h = 0; h < o.p.heads_q; ++h) {
      for (int64_t i = 0; i < sequence_seqlen_q(o.p, b); ++i) {
        const RowResult r = compute_row(o.p, {b, h, i}, Tier::kGold);
        const int64_t row = (b * o.p.heads_q + h) * o.p.seqlen_q + i;
        f.lse[static_cast<size_t>(row)] = static_cast<double>(static_cast<float>(r.lse));
        for (int64_t c = 0; c < dv; ++c) {
          const double x = r.o[static_cast<size_t>(c)];
          f.o[static_cast<size_t>(row * dv + c)] =
              testing::round_to(format, x * (1 + o_ulps * unit_roundoff(format) * (c % 2 == 0 ? 1 : -1)));
        }
      }
    }
  }
  return f;
}

// What an emulated kernel gets wrong about a dropout (emulate()): nothing; dP' without the factor s32; dP not dropped
// (s32 dP for every key); the dropped keys' dV weights kept.
enum class DropoutDefect { kNone, kUnscaledDp, kUndroppedDp, kUndroppedDv };

// A backward kernel of `arithmetic` written from backward.h's formulas in fp32, rows in forward or reverse order
// (so dK, dV and dsink sum in another order), dQ's terms in key order or reversed. Under a dropout (general path) a
// kept pair's dV weight is fl(P s32) and its dP' = fl(dP s32), a dropped pair's both 0, s32 = fl32(1 / (1 - p)).
Gradient emulate(const Owned& o, const Forward& f, const BackwardArithmetic& arith, bool reverse,
                 DropoutDefect defect = DropoutDefect::kNone) {
  const Problem& p = o.p;
  const bool dropout = p.dropout.p != 0.0f;
  const float s32 = dropout ? static_cast<float>(keep_scale(p.dropout.p)) : 1.0f;
  const int64_t dim = p.head_dim, dv = value_dim(p), group = p.heads_q / p.heads_kv;
  const bool tc = arith.arithmetic == Arithmetic::kTensorCore;
  const auto op = [&](float x) { return tc ? static_cast<float>(testing::round_to(arith.format, x)) : x; };
  const auto out = [&](float x) { return testing::round_to(arith.format, x); };
  const float log2e = 1.4426950408889634f;
  const float scale_log2 = static_cast<float>(p.scale) * log2e;
  Gradient g;
  g.dq.assign(static_cast<size_t>(p.batch * p.heads_q * p.seqlen_q * dim), 0.0);
  std::vector<float> dk(static_cast<size_t>(p.batch * p.heads_kv * p.seqlen_k * dim), 0.0f);
  std::vector<float> dvv(static_cast<size_t>(p.batch * p.heads_kv * p.seqlen_k * dv), 0.0f);
  std::vector<float> ds(p.sink.size(), 0.0f);
  std::vector<int64_t> order;
  for (int64_t r = 0; r < p.batch * p.heads_q * p.seqlen_q; ++r) order.push_back(r);
  if (reverse) std::reverse(order.begin(), order.end());
  for (const int64_t row : order) {
    const int64_t i = row % p.seqlen_q, h = (row / p.seqlen_q) % p.heads_q, b = row / (p.seqlen_q * p.heads_q);
    if (i >= sequence_seqlen_q(p, b)) continue;
    const float lse2 = static_cast<float>(f.lse[static_cast<size_t>(row)]) * log2e;
    float d = 0.0f;
    for (int64_t c = 0; c < dv; ++c) {
      d = std::fma(static_cast<float>(o.d_o[static_cast<size_t>(row * dv + c)]), static_cast<float>(f.o[static_cast<size_t>(row * dv + c)]), d);
    }
    std::vector<float> dq(static_cast<size_t>(dim), 0.0f);
    const int64_t kv = b * p.heads_kv + h / group;
    std::vector<int64_t> keys;
    for (int64_t j = 0; j < sequence_seqlen_k(p, b); ++j) {
      if (visible(p, b, i, j)) keys.push_back(j);
    }
    if (reverse) std::reverse(keys.begin(), keys.end());
    for (const int64_t j : keys) {
      const double* q = o.q.data() + row * dim;
      const double* k = o.k.data() + (kv * p.seqlen_k + j) * dim;
      const double* v = o.v.data() + (kv * p.seqlen_k + j) * dv;
      const double* g_o = o.d_o.data() + row * dv;
      float dot = 0.0f, dp = 0.0f;
      for (int64_t c = 0; c < dim; ++c) dot = std::fma(static_cast<float>(q[c]), static_cast<float>(k[c]), dot);
      for (int64_t c = 0; c < dv; ++c) dp = std::fma(static_cast<float>(g_o[c]), static_cast<float>(v[c]), dp);
      float x = dot * scale_log2, t = 0.0f;
      if (p.softcap > 0) {
        t = std::tanh(dot * static_cast<float>(p.scale / p.softcap));
        x = static_cast<float>(p.softcap) * log2e * t;
      }
      const float pw = lse2 == -std::numeric_limits<float>::infinity() ? 0.0f : std::exp2(x - lse2);
      float dp_kept = dp, pv = op(pw);
      if (dropout) {
        const bool kept = dropout_kept(p, p.dropout, b, h, i, j);
        dp_kept = kept || defect == DropoutDefect::kUndroppedDp ? dp * s32 : 0.0f;
        if (defect == DropoutDefect::kUnscaledDp) dp_kept = kept ? dp : 0.0f;
        pv = kept || defect == DropoutDefect::kUndroppedDv ? pw * s32 : 0.0f;
      }
      float dt = pw * (dp_kept - d);
      if (p.softcap > 0) dt = dt * (1.0f - t * t);
      dt = op(dt);
      for (int64_t c = 0; c < dim; ++c) {
        dq[static_cast<size_t>(c)] = std::fma(dt, static_cast<float>(k[c]), dq[static_cast<size_t>(c)]);
        float& acc = dk[static_cast<size_t>((kv * p.seqlen_k + j) * dim + c)];
        acc = std::fma(dt, static_cast<float>(q[c]), acc);
      }
      for (int64_t c = 0; c < dv; ++c) {
        float& acc = dvv[static_cast<size_t>((kv * p.seqlen_k + j) * dv + c)];
        acc = std::fma(pv, static_cast<float>(g_o[c]), acc);
      }
    }
    for (int64_t c = 0; c < dim; ++c) g.dq[static_cast<size_t>(row * dim + c)] = out(dq[static_cast<size_t>(c)] * static_cast<float>(p.scale));
    if (!p.sink.empty() && p.sink[static_cast<size_t>(h)] != -std::numeric_limits<double>::infinity()) {
      ds[static_cast<size_t>(h)] -= std::exp2(static_cast<float>(p.sink[static_cast<size_t>(h)]) * log2e - lse2) * d;
    }
  }
  for (float x : dk) g.dk.push_back(out(x * static_cast<float>(p.scale)));
  for (float x : dvv) g.dv.push_back(out(x));
  for (float x : ds) g.dsink.push_back(x);
  return g;
}

struct Worst {
  double ratio = 0.0;
  std::string where;
};
void track(Worst* w, const char* name, std::span<const double> got, std::span<const double> want,
           std::span<const double> bound) {
  ASSERT_EQ(got.size(), want.size());
  ASSERT_EQ(bound.size(), want.size());
  for (size_t at = 0; at < got.size(); ++at) {
    const double ratio = error_ratio(got[at], want[at], bound[at], false);
    if (!(ratio <= w->ratio)) {
      w->ratio = std::isnan(ratio) ? std::numeric_limits<double>::infinity() : ratio;
      w->where = std::string(name) + "[" + std::to_string(at) + "] got " + std::to_string(got[at]) + " want " +
                 std::to_string(want[at]) + " bound " + std::to_string(bound[at]);
    }
  }
}

const std::vector<Shape>& bound_shapes() {
  static const std::vector<Shape> all{
      {"plain", 1, 2, 2, 9, 40, 16, 0, kAllKeys, 0.0, false, {}, {}},
      {"causal-br dv", 1, 2, 1, 12, 33, 24, 8, kCausalBottomRight, 0.0, false, {}, {}},
      {"window gqa", 2, 4, 2, 17, 17, 8, 0, Visibility{5, 2, Alignment::kTopLeft}, 0.0, false, {}, {}},
      {"softcap sink", 1, 2, 1, 10, 30, 12, 16, kCausalTopLeft, 2.5, true, {}, {}},
      {"sequences", 2, 2, 1, 8, 20, 8, 0, kCausalBottomRight, 0.0, true, {8, 3}, {20, 6}},
  };
  return all;
}

// gradient_check's fast values (dQ, dK, dV, dsink and D, under bf16 inputs and the general class) against the gold
// gradient, within 1e-12 of each tensor's largest magnitude.
void expect_fast_tier_matches_gold(const Owned& o, const std::string& label) {
  const Gradient gold = exact_gradient(o.p, o.d_o);
  const Forward f = forward_of(o, Format::kBF16);
  const GradientCheck check = gradient_check(o.p, o.d_o, {f.o, f.lse}, {Arithmetic::kGeneralFp32, Format::kBF16});
  const auto close = [&](const char* name, const std::vector<double>& a, const std::vector<double>& b) {
    ASSERT_EQ(a.size(), b.size()) << label << " " << name;
    double scale = 1e-300;
    for (double x : b) scale = std::max(scale, std::fabs(x));
    for (size_t at = 0; at < a.size(); ++at) {
      EXPECT_NEAR(a[at], b[at], 1e-12 * scale) << label << " " << name << "[" << at << "]";
    }
  };
  close("dq", check.exact.dq, gold.dq);
  close("dk", check.exact.dk, gold.dk);
  close("dv", check.exact.dv, gold.dv);
  close("dsink", check.exact.dsink, gold.dsink);
  close("d", check.exact.d, gold.d);
}

// The fast tier's values against the gold gradient, within a few units of double's roundoff of their magnitudes.
TEST(GradientCheck, FastTierMatchesTheGoldGradient) {
  uint64_t seed = 40;
  for (const Shape& s : bound_shapes()) {
    Owned o = make(s, ++seed, 2.0);
    round_inputs(&o, Format::kBF16);
    expect_fast_tier_matches_gold(o, s.name);
  }
}

// The bound holds for fp32 emulations of both arithmetic classes in both summation orders, on every format, with
// the forward's O rounded to nearest and with O a few units off; and it is informative: the worst element comes
// within a factor 200 of it (the bound is worst-case; the emulation's errors are typical).
TEST(GradientCheck, BoundHoldsForEmulatedKernelsAndIsNotVacuous) {
  uint64_t seed = 60;
  for (const Format format : {Format::kF32, Format::kF16, Format::kBF16}) {
    for (const Arithmetic arithmetic : {Arithmetic::kGeneralFp32, Arithmetic::kTensorCore}) {
      if (format == Format::kF32 && arithmetic == Arithmetic::kTensorCore) continue;
      Worst worst;
      for (const Shape& s : bound_shapes()) {
        for (const double o_ulps : {0.0, 3.0}) {
          Owned o = make(s, ++seed, 2.0);
          round_inputs(&o, format);
          const Forward f = forward_of(o, format, o_ulps);
          const BackwardArithmetic arith{arithmetic, format};
          const GradientCheck check = gradient_check(o.p, o.d_o, {f.o, f.lse}, arith);
          for (const bool reverse : {false, true}) {
            const Gradient got = emulate(o, f, arith, reverse);
            const std::string tag = s.name + (reverse ? " reversed" : "") + " O+" + std::to_string(o_ulps) + "u ";
            track(&worst, (tag + "dq").c_str(), got.dq, check.exact.dq, check.dq);
            track(&worst, (tag + "dk").c_str(), got.dk, check.exact.dk, check.dk);
            track(&worst, (tag + "dv").c_str(), got.dv, check.exact.dv, check.dv);
            track(&worst, (tag + "dsink").c_str(), got.dsink, check.exact.dsink, check.dsink);
          }
        }
      }
      const std::string what = std::string(to_string(format)) + " " + to_string(arithmetic) + ": worst " + worst.where;
      EXPECT_LE(worst.ratio, 1.0) << what;
      EXPECT_GE(worst.ratio, 1.0 / 200) << what;
      std::printf("[ GRADIENT ] %s ratio %.4f\n", what.c_str(), worst.ratio);
    }
  }
}

// A kernel that drops D (dS = P dP) or the softcap's derivative is caught by the bound on these shapes.
TEST(GradientCheck, BoundCatchesDroppedTerms) {
  Owned o = make(bound_shapes()[3], 77, 2.0);
  round_inputs(&o, Format::kBF16);
  const Forward f = forward_of(o, Format::kBF16);
  const BackwardArithmetic arith{Arithmetic::kGeneralFp32, Format::kBF16};
  const GradientCheck check = gradient_check(o.p, o.d_o, {f.o, f.lse}, arith);
  Forward zero_o = f;  // D = dO.0 = 0: what a kernel without D computes
  for (double& x : zero_o.o) x = 0.0;
  const Gradient wrong = emulate(o, zero_o, arith, false);
  Worst worst;
  track(&worst, "dq", wrong.dq, check.exact.dq, check.dq);
  track(&worst, "dk", wrong.dk, check.exact.dk, check.dk);
  EXPECT_GT(worst.ratio, 1.0) << worst.where;
}

// The fast tier's non-finite semantics are the gold tier's, and what a non-finite input reaches carries no claim.
TEST(GradientCheck, NonFiniteInputsFollowTheGoldTier) {
  Shape s = shapes()[0];
  s.visibility = kCausalTopLeft;
  s.seqlen_q = s.seqlen_k = 5;
  Owned o = make(s, 82);
  round_inputs(&o, Format::kBF16);
  o.v[2 * value_dim(o.p)] = std::numeric_limits<double>::quiet_NaN();
  o.bind();
  const Gradient gold = exact_gradient(o.p, o.d_o);
  const Forward f = forward_of(o, Format::kBF16);
  const GradientCheck check = gradient_check(o.p, o.d_o, {f.o, f.lse}, {Arithmetic::kGeneralFp32, Format::kBF16});
  const auto same = [](const std::vector<double>& a, const std::vector<double>& b, const char* name) {
    ASSERT_EQ(a.size(), b.size());
    for (size_t at = 0; at < a.size(); ++at) {
      EXPECT_EQ(std::isnan(a[at]), std::isnan(b[at])) << name << "[" << at << "]";
      if (!std::isnan(a[at])) EXPECT_NEAR(a[at], b[at], 1e-12 * (1 + std::fabs(b[at]))) << name << "[" << at << "]";
    }
  };
  same(check.exact.dq, gold.dq, "dq");
  same(check.exact.dk, gold.dk, "dk");
  same(check.exact.dv, gold.dv, "dv");
  for (size_t at = 0; at < check.dq.size(); ++at) {
    EXPECT_EQ(std::isnan(check.exact.dq[at]), std::isinf(check.dq[at])) << "dq[" << at << "]: NaN means no claim";
  }
  for (double b : check.dv) EXPECT_TRUE(std::isfinite(b));  // dV keeps its claim
}

// fp16 V near its largest value: dO.v, and with it dS, pass fp16's range, which the tensor-core class overflows
// rounding dS to fp16 before its GEMMs. Those rows' dQ and keys' dK carry no claim (the class's own overflow, the
// emulated kernel's inf); dV, which reads P alone, keeps every claim and holds; the general class keeps them all.
TEST(GradientCheck, Fp16DsPastItsRangeIsOutsideTheDomain) {
  Owned o = make(shapes()[0], 91);
  for (size_t at = 0; at < o.v.size(); ++at) o.v[at] = (at % 3 == 0 ? -1.0 : 1.0) * (60000.0 - 8.0 * (at % 7));
  for (double& x : o.d_o) x *= 4.0;
  round_inputs(&o, Format::kF16);
  const Forward f = forward_of(o, Format::kF16);
  const BackwardArithmetic tensor_core{Arithmetic::kTensorCore, Format::kF16};
  const GradientCheck check = gradient_check(o.p, o.d_o, {f.o, f.lse}, tensor_core);
  const Gradient got = emulate(o, f, tensor_core, false);
  int64_t unclaimed = 0, overflowed = 0, overflowed_unclaimed = 0;  // elements, over dQ, dK and dV
  for (const auto& [name, g, want, bound] : {std::tuple{"dq", &got.dq, &check.exact.dq, &check.dq},
                                             std::tuple{"dk", &got.dk, &check.exact.dk, &check.dk},
                                             std::tuple{"dv", &got.dv, &check.exact.dv, &check.dv}}) {
    for (size_t at = 0; at < want->size(); ++at) {
      if (std::isinf((*bound)[at])) {
        ++unclaimed;
        overflowed_unclaimed += !std::isfinite((*g)[at]);
        EXPECT_STRNE(name, "dv") << "dv[" << at << "] lost its claim";
        continue;
      }
      overflowed += !std::isfinite((*g)[at]);
      EXPECT_LE(error_ratio((*g)[at], (*want)[at], (*bound)[at], false), 1.0) << name << "[" << at << "]";
    }
  }
  EXPECT_GT(overflowed_unclaimed, 0);  // the class does overflow there
  EXPECT_EQ(overflowed, 0);            // and nowhere it keeps a claim
  EXPECT_LT(unclaimed, static_cast<int64_t>(check.dq.size() + check.dk.size()));  // the rule leaves claims standing
  const Gradient inf_free = emulate(o, f, {Arithmetic::kGeneralFp32, Format::kF16}, false);
  const GradientCheck general = gradient_check(o.p, o.d_o, {f.o, f.lse}, {Arithmetic::kGeneralFp32, Format::kF16});
  for (size_t at = 0; at < general.dq.size(); ++at) {
    if (std::isfinite(general.exact.dq[at]) && std::isfinite(inf_free.dq[at])) {
      EXPECT_TRUE(std::isfinite(general.dq[at])) << "dq[" << at << "]";
    }
  }
}

// Sizes are named.
TEST(GradientCheck, WrongSizesAreNamed) {
  Owned o = make(shapes()[0], 5);
  const Forward f = forward_of(o, Format::kF32);
  std::vector<double> short_lse(f.lse.begin(), f.lse.end() - 1);
  try {
    (void)gradient_check(o.p, o.d_o, {f.o, short_lse}, {});
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("forward.lse"), std::string::npos) << e.what();
  }
}

// ---- same_precision_gradient(): the reference of judge_backward's statistical check.

// rms(got - want) and rms(magnitude) over the elements where `want` is finite.
struct RmsOf {
  double error = 0.0, magnitude = 0.0, exact = 0.0;
};
RmsOf rms_of(std::span<const double> got, std::span<const double> want, std::span<const double> magnitude) {
  double e2 = 0.0, m2 = 0.0, x2 = 0.0;
  int64_t n = 0;
  for (size_t at = 0; at < want.size(); ++at) {
    if (!std::isfinite(want[at])) continue;
    e2 += (got[at] - want[at]) * (got[at] - want[at]);
    m2 += magnitude[at] * magnitude[at];
    x2 += want[at] * want[at];
    ++n;
  }
  const double count = static_cast<double>(std::max<int64_t>(n, 1));
  return {std::sqrt(e2 / count), std::sqrt(m2 / count), std::sqrt(x2 / count)};
}

// The reference errs at its format's precision: in fp16 and bf16 by about its outputs' rounding (a quarter to four
// units of roundoff of the exact values' RMS), in fp32 by a few fp32 roundings of its sums' magnitudes; on the same
// inputs bf16 errs more than fp16 (8x the roundoff), fp16 far more than fp32. Under a dropout (the problem's) alike.
void expect_errs_at_formats_precision(const Dropout& dropout, uint64_t seed) {
  for (const Shape& s : bound_shapes()) {
    Owned o = make(s, ++seed, 2.0);
    o.p.dropout = dropout;
    round_inputs(&o, Format::kBF16);  // the same inputs in every format
    const Gradient gold = exact_gradient(o.p, o.d_o);
    const auto reference = [&](Format format) {
      const Forward f = forward_of(o, format);
      return same_precision_gradient(o.p, o.d_o, {f.o, f.lse}, gold.d, format);
    };
    const SamePrecisionGradient f32 = reference(Format::kF32), f16 = reference(Format::kF16), bf16 = reference(Format::kBF16);
    const auto tensors = [&](const SamePrecisionGradient& r) {
      return std::array{std::tuple{"dq", &r.dq, &gold.dq, &r.dq_magnitude}, std::tuple{"dk", &r.dk, &gold.dk, &r.dk_magnitude},
                        std::tuple{"dv", &r.dv, &gold.dv, &r.dv_magnitude}};
    };
    const auto t32 = tensors(f32), t16 = tensors(f16), tb16 = tensors(bf16);
    for (size_t t = 0; t < t32.size(); ++t) {
      const auto& [name, got32, want, mag32] = t32[t];
      const RmsOf r32 = rms_of(*got32, *want, *mag32);
      const RmsOf r16 = rms_of(*std::get<1>(t16[t]), *want, *std::get<3>(t16[t]));
      const RmsOf rb16 = rms_of(*std::get<1>(tb16[t]), *want, *std::get<3>(tb16[t]));
      const std::string what = s.name + " p " + std::to_string(dropout.p) + " " + name;
      const double u32 = unit_roundoff(Format::kF32), u16 = unit_roundoff(Format::kF16), ub16 = unit_roundoff(Format::kBF16);
      EXPECT_GT(r32.error, 0.05 * u32 * r32.magnitude) << what;
      EXPECT_LT(r32.error, 8.0 * u32 * r32.magnitude) << what;
      for (const auto& [format_name, r, u] : {std::tuple{"f16", r16, u16}, std::tuple{"bf16", rb16, ub16}}) {
        EXPECT_GT(r.error, 0.25 * u * r.exact) << what << " " << format_name;
        EXPECT_LT(r.error, 4.0 * u * r.exact) << what << " " << format_name;
      }
      EXPECT_GT(r16.error, 100.0 * r32.error) << what;
      EXPECT_GT(rb16.error, 4.0 * r16.error) << what;
      std::printf("[ SAMEPREC ] %s: RMS error f32 %.2f u of the magnitudes, f16 %.2f u and bf16 %.2f u of |exact|\n",
                  what.c_str(), r32.error / (u32 * r32.magnitude), r16.error / (u16 * r16.exact),
                  rb16.error / (ub16 * rb16.exact));
    }
  }
}
TEST(SamePrecisionGradient, ErrsAtItsFormatsPrecision) { expect_errs_at_formats_precision(Dropout{}, 90); }
TEST(SamePrecisionGradient, ErrsAtItsFormatsPrecisionUnderDropout) {
  for (const Dropout& dropout : {Dropout{0.5f, 0x5eed, (uint64_t{1} << 32) - 2}, Dropout{0.1f, 3, 5}}) {
    expect_errs_at_formats_precision(dropout, 300);
  }
}

// Rows without keys add nothing (their dQ is 0, as in the exact gradient); a d_o of the wrong size is named.
TEST(SamePrecisionGradient, RowsWithoutKeysAddNothing) {
  Shape s = shapes()[0];
  s.visibility = Visibility{-1, 0, Alignment::kBottomRight};
  s.seqlen_q = 7;
  s.seqlen_k = 4;  // rows 0-2 see no key
  Owned o = make(s, 93);
  round_inputs(&o, Format::kF16);
  const Forward f = forward_of(o, Format::kF16);
  const Gradient gold = exact_gradient(o.p, o.d_o);
  const SamePrecisionGradient ref = same_precision_gradient(o.p, o.d_o, {f.o, f.lse}, gold.d, Format::kF16);
  ASSERT_EQ(ref.dq.size(), gold.dq.size());
  int64_t without_keys = 0;
  for (int64_t h = 0; h < o.p.heads_q; ++h) {
    for (int64_t i = 0; i < o.p.seqlen_q; ++i) {
      if (visible_keys(o.p, i).size() > 0) continue;
      ++without_keys;
      for (int64_t c = 0; c < o.p.head_dim; ++c) {
        const size_t at = static_cast<size_t>((h * o.p.seqlen_q + i) * o.p.head_dim + c);
        EXPECT_EQ(gold.dq[at], 0.0) << "dq[" << at << "]";
        EXPECT_EQ(ref.dq[at], 0.0) << "dq[" << at << "]";
      }
    }
  }
  EXPECT_EQ(without_keys, 3 * o.p.heads_q);
  try {
    (void)same_precision_gradient(o.p, o.d_o, {std::span<const double>(f.o).first(3), f.lse}, gold.d, Format::kF16);
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()).rfind("oracle: o has", 0), 0u) << e.what();
  }
}

// The given O's effect (dq_from_o, dk_from_o) is what an fp32 kernel reading O rounded to bf16 errs by, to first order:
// taken from its error, less than a percent is left.
TEST(SamePrecisionGradient, GivenOEffectIsTheKernelsErrorFromO) {
  uint64_t seed = 95;
  for (const Shape& s : bound_shapes()) {
    Owned o = make(s, ++seed, 2.0);
    round_inputs(&o, Format::kBF16);
    const Gradient gold = exact_gradient(o.p, o.d_o);
    const Forward f = forward_of(o, Format::kBF16);
    const SamePrecisionGradient ref = same_precision_gradient(o.p, o.d_o, {f.o, f.lse}, gold.d, Format::kBF16);
    const Gradient kernel = emulate(o, f, {Arithmetic::kGeneralFp32, Format::kF32}, false);  // fp32 outputs
    for (const auto& [name, got, want, from_o] : {std::tuple{"dq", &kernel.dq, &gold.dq, &ref.dq_from_o},
                                                   std::tuple{"dk", &kernel.dk, &gold.dk, &ref.dk_from_o}}) {
      double whole = 0.0, left = 0.0;
      for (size_t at = 0; at < want->size(); ++at) {
        const double e = (*got)[at] - (*want)[at];
        whole += e * e;
        left += (e - (*from_o)[at]) * (e - (*from_o)[at]);
      }
      EXPECT_LT(std::sqrt(left), 0.01 * std::sqrt(whole)) << s.name << " " << name;
    }
  }
}


// ---- Dropout: the exact gradient of the dropped forward, gradient_check's bound for the general path's arithmetic with
// dropout, the same-precision reference, and p = 0 bit for bit no dropout.

// Dropouts the gradient tests run under: half the keys, most of them, and a tenth; streams crossing 2^32.
const std::vector<Dropout>& dropouts() {
  static const std::vector<Dropout> all{{0.5f, 0x5eed, (uint64_t{1} << 32) - 2}, {0.9f, 7, 0}, {0.1f, ~uint64_t{0}, 12}};
  return all;
}

// Keys dropped and kept over the problem's visible (row, key) pairs.
std::pair<int64_t, int64_t> drop_counts(const Problem& p) {
  int64_t dropped = 0, kept = 0;
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t h = 0; h < p.heads_q; ++h) {
      for (int64_t i = 0; i < sequence_seqlen_q(p, b); ++i) {
        const KeySpan keys = visible_keys(p, b, i);
        for (int64_t j = keys.begin; j < keys.end; ++j) (dropout_kept(p, p.dropout, b, h, i, j) ? kept : dropped) += 1;
      }
    }
  }
  return {dropped, kept};
}

// The mask is fixed, so the dropped forward is smooth: its central differences are the exact dropped gradient's.
TEST(ExactGradient, DropoutMatchesCentralDifferencesOfTheDroppedGoldForward) {
  uint64_t seed = 200;
  int64_t dropped_total = 0, kept_total = 0;
  for (const Shape& s : shapes()) {
    for (const Dropout& dropout : {dropouts()[0], dropouts()[2]}) {
      Owned o = make(s, ++seed);
      o.p.dropout = dropout;
      const auto [dropped, kept] = drop_counts(o.p);
      dropped_total += dropped;
      kept_total += kept;
      const Gradient g = exact_gradient(o.p, o.d_o);
      Problem undropped = o.p;
      undropped.dropout = Dropout{};
      const Gradient plain = exact_gradient(undropped, o.d_o);
      const auto check = [&](const char* name, std::vector<double>* t, const std::vector<double>& grad,
                             const std::vector<double>& grad_plain) {
        ASSERT_EQ(grad.size(), t->size()) << s.name << " " << name;
        double scale = 1e-30, moved = 0.0;
        for (size_t at = 0; at < grad.size(); ++at) {
          scale = std::max(scale, std::fabs(grad[at]));
          moved = std::max(moved, std::fabs(grad[at] - grad_plain[at]));
        }
        for (size_t at = 0; at < t->size(); ++at) {
          const double fd = central_difference(&o, t, at);
          EXPECT_NEAR(grad[at], fd, 1e-6 * scale) << s.name << " p " << dropout.p << " d" << name << "[" << at << "]";
        }
        // Not the undropped gradient where a key is dropped: the check above can tell them apart.
        if (dropped > 0) {
          EXPECT_GT(moved, 1e-4 * scale) << s.name << " d" << name;
        }
      };
      check("q", &o.q, g.dq, plain.dq);
      check("k", &o.k, g.dk, plain.dk);
      check("v", &o.v, g.dv, plain.dv);
      if (s.sink) check("sink", &o.sink, g.dsink, plain.dsink);
    }
  }
  EXPECT_GT(dropped_total, 10);
  EXPECT_GT(kept_total, 10);
}

// A dropped key's V row is not read: a NaN there changes nothing; a NaN in a kept one reaches its row's dQ.
TEST(ExactGradient, DropoutLeavesDroppedValuesUnread) {
  const Shape one_row{"one row", 1, 1, 1, 1, 8, 4, 0, kAllKeys, 0.0, false, {}, {}};
  Owned o = make(one_row, 210);
  o.p.dropout = dropouts()[0];
  const Gradient before = exact_gradient(o.p, o.d_o);
  const int64_t dv = value_dim(o.p);
  int64_t dropped_key = -1, kept_key = -1;
  for (int64_t j = 0; j < o.p.seqlen_k; ++j) {
    bool any_kept = false;
    for (int64_t i = 0; i < o.p.seqlen_q; ++i) any_kept = any_kept || dropout_kept(o.p, o.p.dropout, 0, 0, i, j);
    (any_kept ? kept_key : dropped_key) = j;
  }
  ASSERT_GE(kept_key, 0);
  ASSERT_GE(dropped_key, 0);
  o.v[static_cast<size_t>(dropped_key * dv)] = std::numeric_limits<double>::quiet_NaN();
  const Gradient unread = exact_gradient(o.p, o.d_o);
  for (size_t at = 0; at < unread.dq.size(); ++at) EXPECT_EQ(unread.dq[at], before.dq[at]) << "dq[" << at << "]";
  for (size_t at = 0; at < unread.dv.size(); ++at) EXPECT_EQ(unread.dv[at], before.dv[at]) << "dv[" << at << "]";
  o.v[static_cast<size_t>(dropped_key * dv)] = 0.5;
  o.v[static_cast<size_t>(kept_key * dv)] = std::numeric_limits<double>::quiet_NaN();
  const Gradient after = exact_gradient(o.p, o.d_o);
  bool any_nan = false;
  for (const double x : after.dq) any_nan = any_nan || std::isnan(x);
  EXPECT_TRUE(any_nan);
}

// gradient_check's fast values under a dropout against the gold gradient.
TEST(GradientCheck, DropoutFastTierMatchesTheGoldGradient) {
  uint64_t seed = 220;
  for (const Shape& s : bound_shapes()) {
    for (const Dropout& dropout : dropouts()) {
      Owned o = make(s, ++seed, 2.0);
      o.p.dropout = dropout;
      round_inputs(&o, Format::kBF16);
      expect_fast_tier_matches_gold(o, std::string(s.name) + " p " + std::to_string(dropout.p));
    }
  }
}

// The bound holds for the fp32 emulation of the general path's arithmetic with dropout, in both summation orders, on
// every format, the forward's O rounded to nearest or a few units off; it is informative (within a factor 200), and a
// kernel that gets the dropout wrong fails it.
TEST(GradientCheck, DropoutBoundHoldsForEmulatedKernelsAndCatchesWrongDropouts) {
  uint64_t seed = 240;
  for (const Format format : {Format::kF32, Format::kF16, Format::kBF16}) {
    Worst worst;
    for (const Shape& s : bound_shapes()) {
      for (const Dropout& dropout : dropouts()) {
        for (const double o_ulps : {0.0, 3.0}) {
          Owned o = make(s, ++seed, 2.0);
          o.p.dropout = dropout;
          round_inputs(&o, format);
          const Forward f = forward_of(o, format, o_ulps);
          const BackwardArithmetic arith{Arithmetic::kGeneralFp32, format};
          const GradientCheck check = gradient_check(o.p, o.d_o, {f.o, f.lse}, arith);
          for (const bool reverse : {false, true}) {
            const Gradient got = emulate(o, f, arith, reverse);
            const std::string tag = s.name + " p " + std::to_string(dropout.p) + (reverse ? " reversed" : "") + " O+" +
                                    std::to_string(o_ulps) + "u ";
            track(&worst, (tag + "dq").c_str(), got.dq, check.exact.dq, check.dq);
            track(&worst, (tag + "dk").c_str(), got.dk, check.exact.dk, check.dk);
            track(&worst, (tag + "dv").c_str(), got.dv, check.exact.dv, check.dv);
            track(&worst, (tag + "dsink").c_str(), got.dsink, check.exact.dsink, check.dsink);
          }
          if (o_ulps != 0.0 || dropout.p < 0.5f) continue;
          for (const DropoutDefect defect :
               {DropoutDefect::kUnscaledDp, DropoutDefect::kUndroppedDp, DropoutDefect::kUndroppedDv}) {
            const Gradient wrong = emulate(o, f, arith, false, defect);
            Worst caught;
            track(&caught, "dq", wrong.dq, check.exact.dq, check.dq);
            track(&caught, "dk", wrong.dk, check.exact.dk, check.dk);
            track(&caught, "dv", wrong.dv, check.exact.dv, check.dv);
            EXPECT_GT(caught.ratio, 1.0) << s.name << " " << to_string(format) << " defect "
                                         << static_cast<int>(defect) << ": " << caught.where;
          }
        }
      }
    }
    const std::string what = std::string(to_string(format)) + " general-fp32 dropout: worst " + worst.where;
    EXPECT_LE(worst.ratio, 1.0) << what;
    EXPECT_GE(worst.ratio, 1.0 / 200) << what;
    std::printf("[ GRADIENT ] %s ratio %.4f\n", what.c_str(), worst.ratio);
  }
}

// A dropout is bounded on the general path only.
TEST(GradientCheck, DropoutOnOtherPathsIsRefused) {
  Owned o = make(bound_shapes()[0], 260, 2.0);
  o.p.dropout = dropouts()[0];
  round_inputs(&o, Format::kBF16);
  const Forward f = forward_of(o, Format::kBF16);
  EXPECT_THROW(gradient_check(o.p, o.d_o, {f.o, f.lse}, {Arithmetic::kTensorCore, Format::kBF16}),
               std::invalid_argument);
  EXPECT_NO_THROW(gradient_check(o.p, o.d_o, {f.o, f.lse}, {Arithmetic::kGeneralFp32, Format::kBF16}));
}

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}

// p = 0 with any seed and offset is no dropout, bit for bit: the exact gradient, gradient_check's values and bounds
// on both paths, and the same-precision reference with its magnitudes, noise and given-O effects.
TEST(GradientCheck, ZeroProbabilityDropoutIsBitIdenticalToNone) {
  uint64_t seed = 280;
  for (const Shape& s : bound_shapes()) {
    Owned o = make(s, ++seed, 2.0);
    round_inputs(&o, Format::kBF16);
    Problem zero = o.p;
    zero.dropout = Dropout{0.0f, 0x1234, (uint64_t{1} << 32) - 1};
    const Forward f = forward_of(o, Format::kBF16);
    const Gradient a = exact_gradient(zero, o.d_o), b = exact_gradient(o.p, o.d_o);
    EXPECT_TRUE(same_bits(a.dq, b.dq) && same_bits(a.dk, b.dk) && same_bits(a.dv, b.dv) &&
                same_bits(a.dsink, b.dsink) && same_bits(a.d, b.d))
        << s.name;
    for (const Arithmetic path : {Arithmetic::kGeneralFp32, Arithmetic::kTensorCore}) {
      const GradientCheck ca = gradient_check(zero, o.d_o, {f.o, f.lse}, {path, Format::kBF16});
      const GradientCheck cb = gradient_check(o.p, o.d_o, {f.o, f.lse}, {path, Format::kBF16});
      EXPECT_TRUE(same_bits(ca.exact.dq, cb.exact.dq) && same_bits(ca.exact.dk, cb.exact.dk) &&
                  same_bits(ca.exact.dv, cb.exact.dv) && same_bits(ca.exact.dsink, cb.exact.dsink) &&
                  same_bits(ca.dq, cb.dq) && same_bits(ca.dk, cb.dk) && same_bits(ca.dv, cb.dv) &&
                  same_bits(ca.dsink, cb.dsink))
          << s.name << " " << to_string(path);
    }
    const SamePrecisionGradient ra = same_precision_gradient(zero, o.d_o, {f.o, f.lse}, b.d, Format::kBF16);
    const SamePrecisionGradient rb = same_precision_gradient(o.p, o.d_o, {f.o, f.lse}, b.d, Format::kBF16);
    EXPECT_TRUE(same_bits(ra.dq, rb.dq) && same_bits(ra.dk, rb.dk) && same_bits(ra.dv, rb.dv) &&
                same_bits(ra.dq_magnitude, rb.dq_magnitude) && same_bits(ra.dk_magnitude, rb.dk_magnitude) &&
                same_bits(ra.dv_magnitude, rb.dv_magnitude) && same_bits(ra.dq_noise, rb.dq_noise) &&
                same_bits(ra.dk_noise, rb.dk_noise) && same_bits(ra.dv_noise, rb.dv_noise) &&
                same_bits(ra.dq_from_o, rb.dq_from_o) && same_bits(ra.dk_from_o, rb.dk_from_o))
        << s.name;
  }
}

}  // namespace
}  // namespace flashcheck::oracle
