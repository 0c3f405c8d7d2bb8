// Case generators. A case is built in stages, each a RapidCheck generator so that every stage shrinks:
//   frame (dtype, head_dim, mask, layout, pad, scale, seed) -> heads and batch -> seqlens aimed at the
//   tiles kernel_config() reports for that frame -> sizes clamped to the tier's budget -> the window of a
//   window mask, aimed at the same tiles -> values -> softcap and sink.
// Hand-picked edge values are mixed with random ones by weightedOneOf; the special values (NaN, +-Inf,
// -0.0, subnormals, near-max) are written here, RapidCheck never produces them on its own.
#include "generators.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "flashcheck/dtype.h"
#include "flashcheck/mask_names.h"
#include "flashcheck/oracle_bridge.h"  // judged_visible_keys
#include "replay.h"
#include "tier.h"

namespace flashcheck::properties {
namespace {

namespace gen = rc::gen;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

CaseLimits& limits_storage() {
  static CaseLimits limits = cpu_limits();
  return limits;
}

// Shrinks an integer towards `target` in addition to the generator's own shrinks (elementOf has none).
rc::Gen<int64_t> shrinking_towards(rc::Gen<int64_t> g, int64_t target) {
  return gen::shrink(std::move(g), [target](int64_t x) { return rc::shrink::towards<int64_t>(x, target); });
}

rc::Gen<int64_t> range(int64_t lo, int64_t hi_inclusive) {
  return gen::inRange<int64_t>(lo, hi_inclusive + 1);
}

// The decode family's configurations (kernel/src/decode/select.cpp names them decode_<dtype>_hdim<family>).
bool is_decode_config(const KernelConfig& cfg) { return std::string_view(cfg.name).rfind("decode", 0) == 0; }

ValueSpec spec(DistKind kind, double a = 0.0, double b = 1.0) { return ValueSpec{kind, a, b}; }

// Sigma log-uniform over five decades (1e-3 .. 50, three steps per decade), ordered so shrinking moves
// towards 1.
rc::Gen<double> gen_sigma() {
  static constexpr std::array<double, 15> kSigmas = {1,    2,   0.5,  5,     0.2,   10,    0.1,  20,
                                                     0.05, 50,  0.02, 0.01,  0.005, 0.002, 0.001};
  return gen::map(gen::inRange<size_t>(0, kSigmas.size()), [](size_t i) { return kSigmas[i]; });
}

// The options' dtypes, each as often as its row's case weight (dtypes.def); options that name only rows of weight 0
// (the fp8 properties' f8e4m3) draw those alike.
rc::Gen<DType> gen_dtype(const CaseOptions& o) {
  std::vector<DType> pool;  // each dtype case_weight times
  for (DType d : o.dtypes) pool.insert(pool.end(), find_dtype(d)->case_weight, d);
  return gen::elementOf(pool.empty() ? o.dtypes : pool);
}

rc::Gen<int64_t> gen_pad(const CaseOptions& o) {
  if (!o.padding) return gen::just<int64_t>(0);
  return shrinking_towards(
      gen::weightedOneOf<int64_t>({{6, gen::just<int64_t>(0)}, {2, range(1, 8)}, {1, gen::just<int64_t>(64)}}), 0);
}

// [B, H, S, D] is the simpler counterexample.
rc::Gen<Layout> gen_layout(const CaseOptions& o) {
  if (o.layouts.size() == 1) return gen::just(o.layouts.front());
  return gen::shrink(gen::weightedElement<Layout>({{3, Layout::kBHSD}, {2, Layout::kBSHD}}), [](Layout l) {
    return l == Layout::kBSHD ? rc::seq::just(Layout::kBHSD) : rc::Seq<Layout>();
  });
}

rc::Gen<std::optional<float>> gen_scale() {
  return gen::weightedOneOf<std::optional<float>>({
      {12, gen::just(std::optional<float>())},
      {2, gen::map(gen::element(1.0f, 0.5f, 2.0f, 0.125f, -0.5f, 0.0f),
                   [](float s) { return std::optional<float>(s); })},
  });
}

// Heads: MHA (hq == hkv), GQA (hkv > 1, ratio > 1), MQA (hkv == 1, hq > 1).
rc::Gen<std::pair<int64_t, int64_t>> gen_heads(const CaseOptions& o) {
  const int64_t max_kv = std::max<int64_t>(1, o.limits.max_heads_kv);
  const int64_t max_group = std::max<int64_t>(o.min_group, o.limits.max_group);
  auto mha = gen::map(range(1, max_kv), [](int64_t h) { return std::pair<int64_t, int64_t>{h, h}; });
  auto gqa = gen::map(gen::pair(range(std::min<int64_t>(2, max_kv), max_kv), range(std::max<int64_t>(2, o.min_group), max_group)),
                      [](std::pair<int64_t, int64_t> p) { return std::pair<int64_t, int64_t>{p.first * p.second, p.first}; });
  auto mqa = gen::map(range(std::max<int64_t>(2, o.min_group), 2 * max_group),
                      [](int64_t hq) { return std::pair<int64_t, int64_t>{hq, 1}; });
  // Shrinks: fewer K/V heads with the same group, then a smaller group (never below min_group).
  auto shrink_heads = [o](std::pair<int64_t, int64_t> heads) {
    const auto [hq, hkv] = heads;
    const int64_t group = hq / hkv;
    std::vector<std::pair<int64_t, int64_t>> smaller;
    if (hkv > 1) smaller.emplace_back(group, 1);
    if (group > std::max<int64_t>(o.min_group, 1)) smaller.emplace_back(hkv * std::max<int64_t>(o.min_group, 1), hkv);
    return rc::seq::fromContainer(std::move(smaller));
  };
  if (!o.gqa) return mha;
  if (o.min_group > 1) {
    return gen::shrink(gen::weightedOneOf<std::pair<int64_t, int64_t>>({{3, gqa}, {2, mqa}}), shrink_heads);
  }
  return gen::shrink(gen::weightedOneOf<std::pair<int64_t, int64_t>>({{4, mha}, {3, gqa}, {2, mqa}}), shrink_heads);
}

rc::Gen<int64_t> gen_batch(const CaseOptions& o) {
  const int64_t max_batch = std::max<int64_t>(1, o.limits.max_batch);
  const int64_t zero_weight = o.nonempty ? 0 : 1;
  return gen::weightedOneOf<int64_t>({{20, gen::just<int64_t>(1)},
                                      {12, range(1, max_batch)},
                                      {static_cast<size_t>(zero_weight), gen::just<int64_t>(0)}});
}

std::vector<int64_t> primes_up_to(int64_t cap) {
  std::vector<int64_t> primes;
  std::vector<bool> composite(static_cast<size_t>(std::max<int64_t>(cap, 2) + 1), false);
  for (int64_t n = 2; n <= cap; ++n) {
    if (composite[static_cast<size_t>(n)]) continue;
    if (n >= 3) primes.push_back(n);  // odd primes
    for (int64_t m = n * n; m <= cap; m += n) composite[static_cast<size_t>(m)] = true;
  }
  return primes;
}

int64_t safe_div(int64_t a, int64_t b) { return b <= 0 ? a : a / b; }

// Elements of Q, K, V and O with padding.
int64_t case_elements(const Case& c) {
  const int64_t rows = c.heads_q * c.seqlen_q + c.heads_kv * c.seqlen_k;  // Q and O; K and V
  return c.batch * rows * (c.head_dim + c.value_dim() + 2 * c.pad);
}

// Multiply-adds of Q K^T and P V, halved: Q K^T's alone when the head dims are equal.
int64_t case_work(const Case& c) {
  return c.batch * c.heads_q * c.seqlen_q * std::max<int64_t>(c.seqlen_k, 1) * ((c.head_dim + c.value_dim()) / 2);
}

// Brings batch and heads down until the case fits the budget (the seqlens were capped already).
Case fit_budget(Case c, const CaseLimits& limits) {
  auto over = [&] { return case_work(c) > limits.max_work || case_elements(c) > limits.max_elements; };
  while (over() && c.batch > 1) --c.batch;
  while (over() && c.heads_kv > 1) {
    const int64_t group = c.heads_q / c.heads_kv;
    --c.heads_kv;
    c.heads_q = c.heads_kv * group;
  }
  while (over() && c.heads_q > c.heads_kv) c.heads_q -= c.heads_kv;  // smaller group
  return c;
}

// The drawn seqlens onto the options' shape limits, then the tier's budget.
Case fit_options(Case c, const CaseOptions& o) {
  c.seqlen_q = seqlen_onto_limits(c.seqlen_q, o.seqlen_q_multiple, o.seqlen_q_min, o.seqlen_q_max);
  c.seqlen_k = seqlen_onto_limits(c.seqlen_k, o.seqlen_k_multiple, o.seqlen_k_min, o.seqlen_k_max);
  return fit_budget(c, o.limits);
}

// ---- values ---------------------------------------------------------------------------------------------

rc::Gen<Injection> gen_injection(const Case& c, const std::vector<double>& values, const KernelConfig& cfg) {
  const bool has_q = c.batch > 0 && c.heads_q > 0 && c.seqlen_q > 0 && c.head_dim > 0;
  const bool has_kv = c.batch > 0 && c.heads_kv > 0 && c.seqlen_k > 0 && c.head_dim > 0;
  const bool causal = c.mask != Mask::kNone;
  const int64_t block_n = std::max<int32_t>(cfg.block_n, 1);
  const int64_t block_m = std::max<int32_t>(cfg.block_m, 1);
  auto tensor = gen::weightedElement<char>({{has_q ? 2u : 0u, 'q'}, {has_kv ? 3u : 0u, 'k'}, {has_kv ? 3u : 0u, 'v'}});
  return gen::mapcat(tensor, [c, values, causal, block_n, block_m](char t) {
    const bool is_q = t == 'q';
    const int64_t heads = is_q ? c.heads_q : c.heads_kv;
    const int64_t seqlen = is_q ? c.seqlen_q : c.seqlen_k;
    const int64_t tile = is_q ? block_m : block_n;
    // Positions the causal mask hides from early rows: the upper half of the keys.
    const size_t hidden_weight = (!is_q && causal) ? 4 : 0;
    auto s = gen::weightedOneOf<int64_t>({
        {3, range(0, seqlen - 1)},
        {1, gen::just<int64_t>(0)},
        {1, gen::just<int64_t>(seqlen - 1)},
        {1, gen::map(gen::element<int64_t>(tile - 1, tile, 2 * tile - 1, 2 * tile),
                     [seqlen](int64_t x) { return std::min(x, seqlen - 1); })},
        {hidden_weight, range(seqlen / 2, seqlen - 1)},
    });
    const int64_t columns = t == 'v' ? c.value_dim() : c.head_dim;
    auto d = gen::weightedOneOf<int64_t>(
        {{3, range(0, columns - 1)}, {1, gen::just<int64_t>(0)}, {1, gen::just<int64_t>(columns - 1)}});
    return gen::apply(
        [t](int64_t b, int64_t h, int64_t s_, int64_t d_, double value) { return Injection{t, b, h, s_, d_, value}; },
        range(0, c.batch - 1), range(0, heads - 1), shrinking_towards(s, 0), shrinking_towards(d, 0),
        gen::elementOf(values));
  });
}

rc::Gen<std::vector<Injection>> gen_injections(const Case& c, const std::vector<double>& values,
                                               const KernelConfig& cfg) {
  const bool possible = c.batch > 0 && c.heads_q > 0 && c.head_dim > 0 && (c.seqlen_q > 0 || c.seqlen_k > 0);
  if (!possible) return gen::just(std::vector<Injection>{});
  return gen::mapcat(range(1, 4), [c, values, cfg](int64_t n) {
    return gen::container<std::vector<Injection>>(static_cast<size_t>(n), gen_injection(c, values, cfg));
  });
}

rc::Gen<ValueSpec> gen_normal(double mu = 0.0) {
  return gen::map(gen_sigma(), [mu](double sigma) { return spec(DistKind::kNormal, mu, sigma); });
}

// Sets q, k, v (and for some families mask and injections) on a case whose shape is fixed.
// f32_allowed: the options take f32 (the special family moves half its largest-value cases onto it).
rc::Gen<Case> gen_family(const Case& base, ValueFamily family, const KernelConfig& cfg, bool f32_allowed) {
  auto with = [base](ValueSpec q, ValueSpec k, ValueSpec v) {
    Case c = base;
    c.q = q;
    c.k = k;
    c.v = v;
    return c;
  };
  auto gen_v = gen::weightedOneOf<ValueSpec>({{4, gen_normal(0.0)},
                                              {1, gen_normal(1.0)},
                                              {1, gen::just(spec(DistKind::kUniform, -1, 1))}});
  switch (family) {
    case ValueFamily::kNormal:
      return gen::apply(with, gen_normal(), gen_normal(), gen::weightedOneOf<ValueSpec>({{4, gen_normal(0.0)}, {1, gen_normal(-3.0)}}));
    case ValueFamily::kUniform: {
      auto half_width = gen::element(1.0, 0.5, 2.0, 4.0, 8.0);
      auto symmetric = gen::map(half_width, [](double a) { return spec(DistKind::kUniform, -a, a); });
      auto v = gen::element(spec(DistKind::kUniform, -1, 1), spec(DistKind::kUniform, 0, 1),
                            spec(DistKind::kUniform, -100, 100), spec(DistKind::kUniform, 2, 3));
      return gen::apply(with, symmetric, symmetric, v);
    }
    case ValueFamily::kNearMax: {
      // V near the largest finite value (O near it too), or Q near it with tiny K (huge but finite scores).
      const double tiny_k = base.dtype == DType::kF16 ? 0.01 : 1e-30;
      auto frac = gen::element(1.0, 0.5, 0.25);
      auto v_big = gen::apply([with](double f) { return with(spec(DistKind::kNormal, 0, 1), spec(DistKind::kNormal, 0, 1),
                                                             spec(DistKind::kNearMax, f)); }, frac);
      auto q_big = gen::apply([with, tiny_k](double f, ValueSpec v) {
        return with(spec(DistKind::kNearMax, f), spec(DistKind::kNormal, 0, tiny_k), v); }, frac, gen_v);
      return gen::weightedOneOf<Case>({{3, v_big}, {1, q_big}});
    }
    case ValueFamily::kSubnormal: {
      const ValueSpec sub = spec(DistKind::kSubnormal);
      const ValueSpec n1 = spec(DistKind::kNormal, 0, 1);
      // Subnormal V leaves O within the absolute floors of the bound, where no O check is informative: one case
      // in four of the family has it, so the family still exercises it without crowding out informative checks.
      return gen::weightedElement<Case>(
          {{3, with(sub, n1, n1)}, {3, with(n1, sub, n1)}, {1, with(n1, n1, sub)}, {1, with(sub, n1, sub)}});
    }
    case ValueFamily::kAllEqual:
      return gen::apply([with](double cq, double ck, ValueSpec v) {
        return with(spec(DistKind::kConst, cq), spec(DistKind::kConst, ck), v); },
        gen::element(1.0, 0.0, -1.0, 0.5), gen::element(1.0, 2.0, -0.5), gen_v);
    case ValueFamily::kDominantKey:
      return gen::apply([with](double sigma, double big, ValueSpec v) {
        return with(spec(DistKind::kNormal, 0, 1), spec(DistKind::kDominant, sigma, big), v); },
        gen::element(1.0, 0.5), gen::element(8.0, 30.0, 100.0), gen_v);
    case ValueFamily::kIncreasingLogits:
      // Positive q and a ramp along the keys: every later key scores higher, so the running max moves on
      // every tile.
      return gen::apply([with](std::pair<double, double> lohi, ValueSpec v) {
        return with(spec(DistKind::kUniform, 0.5, 1.5), spec(DistKind::kRamp, lohi.first, lohi.second), v); },
        gen::element(std::pair{-4.0, 4.0}, std::pair{0.0, 1.0}, std::pair{-1.0, 16.0}, std::pair{0.0, 64.0}), gen_v);
    case ValueFamily::kMaskedThenNegative: {
      // q in [1, 2] and k in [1.6 k_hi, k_hi] with k_hi <= -60 chosen so that every score scale * q.k lies at
      // or below -100 (when scale > 0): exp underflows in fp32 unless the running max starts at -inf and stays
      // there across tiles the row cannot see. A window mask stays (its left edge hides leading tiles too); any
      // other mask becomes causal.
      const double scale = static_cast<double>(base.softmax_scale());
      const double d = static_cast<double>(std::max<int64_t>(base.head_dim, 1));
      const double k_hi = scale > 0 ? std::min(-60.0, -100.0 / (scale * d)) : -60.0;
      const double k_lo = std::max(1.6 * k_hi, -0.5 * dtype_max(base.dtype));
      return gen::apply([with, k_lo, k_hi](Mask mask, ValueSpec v) {
        Case c = with(spec(DistKind::kUniform, 1, 2), spec(DistKind::kUniform, k_lo, std::max(k_lo, k_hi)), v);
        if (!takes_window(c.mask)) c.mask = mask;
        return c; }, gen::element(Mask::kCausalTopLeft, Mask::kCausalBottomRight), gen_v);
    }
    case ValueFamily::kTies: {
      // Every key ties for the max (q and k constant, q positive), except a few keys lowered by a finite
      // injection into K.
      auto tied = gen::apply([with](double a, double ck, ValueSpec v) {
        Case c = with(spec(DistKind::kConst, a), spec(DistKind::kConst, ck), v);
        return c; }, gen::element(1.0, 0.25), gen::element(0.5, 1.0, -1.0), gen_v);
      return gen::mapcat(tied, [cfg](Case c) {
        if (c.seqlen_k == 0 || c.batch == 0 || c.heads_kv == 0) return gen::just(c);
        Case k_only = c;
        k_only.seqlen_q = 0;  // injections into K only
        return gen::map(gen_injections(k_only, {c.k.a - 2.0}, cfg), [c](std::vector<Injection> inj) {
          Case out = c;
          out.inject = std::move(inj);
          return out;
        });
      });
    }
    case ValueFamily::kNegativeZero: {
      const ValueSpec z = spec(DistKind::kNegZero);
      const ValueSpec n1 = spec(DistKind::kNormal, 0, 1);
      // V = -0 makes O = 0 exact, a sign check with no informative bound: one case in four of the family.
      return gen::weightedElement<Case>(
          {{3, with(z, n1, n1)}, {3, with(n1, z, n1)}, {1, with(n1, n1, z)}, {1, with(z, z, z)}});
    }
    case ValueFamily::kSpecial: {
      auto plain = gen::apply(with, gen_normal(), gen_normal(), gen_v);
      auto anywhere = gen::mapcat(plain, [cfg](Case c) {
        // The dtype's largest finite magnitudes too: finite values no fp32 split into TF32 parts carries.
        const double max = dtype_max(c.dtype);
        const std::vector<double> values = {kNan, kNan, kInf, -kInf, -0.0, max, -max};
        return gen::map(gen_injections(c, values, cfg), [c](std::vector<Injection> inj) {
          Case out = c;
          out.inject = std::move(inj);
          return out;
        });
      });
      // The largest finite value in Q or K with the other operand at sigma 0.001, so that the row's scores stay
      // finite and inside fp32 (the error model's domain): a finite row whose scores the split-TF32 family must
      // recompute in fp32 (half these cases are fp32 with head_dim a multiple of 4 and no padding: that family's
      // shapes), and a near-overflow product for the others.
      auto shapes = gen::map(gen::arbitrary<bool>(), [base, f32_allowed](bool split_tf32) {
        Case c = base;
        if (split_tf32 && f32_allowed) {
          c.dtype = DType::kF32;
          c.head_dim = std::min<int64_t>(256, (c.head_dim + 3) / 4 * 4);
          c.pad = 0;
        }
        return c;
      });
      auto largest = gen::mapcat(gen::pair(gen::element('q', 'k'), shapes), [gen_v](std::pair<char, Case> choice) {
        const char t = choice.first;
        const Case& base = choice.second;
        const bool in_q = t == 'q';
        const int64_t heads = in_q ? base.heads_q : base.heads_kv;
        const int64_t seqlen = in_q ? base.seqlen_q : base.seqlen_k;
        if (base.batch < 1 || heads < 1 || seqlen < 1 || base.head_dim < 1) return gen::just(base);
        auto injection = gen::apply(
            [t, dtype = base.dtype](int64_t b, int64_t h, int64_t s, int64_t d, bool negative) {
              return Injection{t, b, h, s, d, negative ? -dtype_max(dtype) : dtype_max(dtype)};
            },
            range(0, base.batch - 1), range(0, heads - 1), range(0, seqlen - 1), range(0, base.head_dim - 1),
            gen::arbitrary<bool>());
        return gen::apply(
            [base, in_q](std::vector<Injection> inj, ValueSpec big, ValueSpec v) {
              Case out = base;
              const ValueSpec small = spec(DistKind::kNormal, 0.0, 0.001);
              out.q = in_q ? big : small;
              out.k = in_q ? small : big;
              out.v = v;
              out.inject = std::move(inj);
              return out;
            },
            gen::mapcat(range(1, 2),
                        [injection](int64_t n) {
                          return gen::container<std::vector<Injection>>(static_cast<size_t>(n), injection);
                        }),
            gen_normal(), gen_v);
      });
      return gen::weightedOneOf<Case>({{2, anywhere}, {1, largest}});
    }
    case ValueFamily::kMixed:
      break;
  }
  return gen::apply(with, gen_normal(), gen_normal(), gen_normal());
}

rc::Gen<ValueFamily> gen_family_choice(const CaseOptions& o, const Case& c, const KernelConfig& cfg) {
  const bool causal_allowed = std::any_of(o.masks.begin(), o.masks.end(), [](Mask m) { return m != Mask::kNone; });
  const size_t special = o.special_values ? 2 : 0;
  const size_t ties = o.special_values ? 1 : 0;  // ties use finite injections
  // A window with a left edge hides whole K tiles from some rows before their first key: there the masked tile then
  // scores below -87 family takes 4 parts in 23 rather than one in 20, and half the cases of a window that reaches
  // over several K tiles (gen_long_window), so that a running max that a hidden tile leaves wrong is met often (the
  // coverage table's window reach).
  const bool left_edge = takes_window(c.mask) && c.window_left >= 0;
  const bool long_window = left_edge && c.window_left >= 2 * std::max<int32_t>(cfg.block_n, 1);
  const size_t masked_then_negative = !causal_allowed ? 0 : long_window ? 20 : left_edge ? 4 : 1;
  return gen::weightedElement<ValueFamily>({
      {8, ValueFamily::kNormal},
      {2, ValueFamily::kUniform},
      {1, ValueFamily::kNearMax},
      {1, ValueFamily::kSubnormal},
      {1, ValueFamily::kAllEqual},
      {1, ValueFamily::kDominantKey},
      {1, ValueFamily::kIncreasingLogits},
      {masked_then_negative, ValueFamily::kMaskedThenNegative},
      {ties, ValueFamily::kTies},
      {1, ValueFamily::kNegativeZero},
      {special, ValueFamily::kSpecial},
  });
}

// ---- shapes ---------------------------------------------------------------------------------------------

// The options' allowed masks, each as often as its row's case weight (masks.def).
rc::Gen<Mask> gen_mask(const CaseOptions& o) {
  std::vector<Mask> pool;  // each allowed mask case_weight times
  for (Mask m : o.masks) {
    if (o.allowed_masks & (1u << static_cast<int>(m))) pool.insert(pool.end(), find_mask(m)->case_weight, m);
  }
  // None allowed: the property's own masks, which the subject answers with UNSUPPORTED (discarded); the tier
  // skips the properties that need a mask the subject lacks (property_skip_reason).
  if (pool.empty()) return gen::elementOf(o.masks);
  return gen::elementOf(pool);
}

// V's and O's own width in one case in CaseOptions::unequal_head_dims_in: half of them a (head_dim, head_dim_v)
// pair models ship, half the drawn head_dim with another head_dim_v; the rest head_dim_v = 0 (equal). Under a
// subject's head dims and value dims only the second kind, inside them.
rc::Gen<Case> gen_value_dim(Case c, const CaseOptions& o) {
  using Pair = std::pair<int64_t, int64_t>;
  const bool every_pair = o.head_dims.empty() && o.head_dim_min == 1 && o.head_dim_max == 256 &&
                          o.head_dim_v_min == 1 && o.head_dim_v_max == 256;
  const int64_t head_dim = c.head_dim;
  const rc::Gen<int64_t> dv = every_pair ? gen_head_dim() : range(o.head_dim_v_min, o.head_dim_v_max);
  const rc::Gen<Pair> other = gen::map(dv, [head_dim](int64_t v) { return Pair{head_dim, v}; });
  const rc::Gen<Pair> shipped = gen::element(Pair{192, 128}, Pair{128, 64}, Pair{64, 128}, Pair{256, 128});
  const auto equal_weight = static_cast<size_t>(2 * (o.unequal_head_dims_in - 1));
  const rc::Gen<Pair> pair =
      every_pair ? gen::weightedOneOf<Pair>({{equal_weight, gen::just(Pair{head_dim, 0})}, {1, shipped}, {1, other}})
                 : gen::weightedOneOf<Pair>({{equal_weight, gen::just(Pair{head_dim, 0})}, {2, other}});
  return gen::map(pair, [c](Pair dims) {
    Case out = c;
    out.head_dim = dims.first;
    out.head_dim_v = dims.second;
    return out;
  });
}

rc::Gen<Case> gen_frame(const CaseOptions& o) {
  rc::Gen<Case> frame = gen::build<Case>(gen::set(&Case::dtype, gen_dtype(o)),        //
                                         gen::set(&Case::head_dim, gen_head_dim(o)),  //
                                         gen::set(&Case::mask, gen_mask(o)),          //
                                         gen::set(&Case::layout, gen_layout(o)),
                                         gen::set(&Case::pad, gen_pad(o)),            //
                                         gen::set(&Case::scale, gen_scale()),         //
                                         gen::set(&Case::seed, gen::inRange<uint64_t>(0, uint64_t{1} << 32)));
  // An fp8 path with head dims of its own (fc_subject_fp8_head_dims_v1): an f8e4m3 case at the nearest one.
  if (const LoadedSubject* subject = active_subject(); subject != nullptr && subject->fp8()) {
    frame = gen::map(frame, [subject](Case c) {
      if (const int64_t d = subject->nearest_head_dim(c.dtype, c.head_dim); d > 0) c.head_dim = d;
      return c;
    });
  }
  if (o.unequal_head_dims_in <= 0) return frame;
  return gen::mapcat(frame, [o](Case c) { return gen_value_dim(c, o); });
}

// The seqlens aimed at the tiles, then the window of a window mask.
rc::Gen<Case> gen_seqlens_and_window(const Case& c, const CaseOptions& o, const KernelConfig& cfg) {
  // A row's elements and work, averaged over Q and O (K and V): head_dim and head_dim_v.
  const int64_t dim = (c.head_dim + c.value_dim() + 1) / 2;
  const int64_t row = dim + c.pad;
  const int64_t min_q = o.nonempty ? 1 : 0;
  const int64_t min_k = std::max<int64_t>(o.nonempty ? 1 : 0, o.min_seqlen_k);
  const int64_t cap_q = std::max<int64_t>(
      1, std::min({o.limits.max_seqlen, safe_div(o.limits.max_work, dim * std::max<int64_t>(min_k, 1)),
                   safe_div(o.limits.max_elements, 4 * row)}));
  auto seqlen_q = gen_seqlen(std::max<int32_t>(cfg.block_m, 1), cap_q, min_q);
  return gen::mapcat(seqlen_q, [c, o, cfg, dim, row, min_k](int64_t sq) {
    const int64_t cap_k = std::max<int64_t>(
        std::max<int64_t>(min_k, 1),
        std::min({o.limits.max_seqlen, safe_div(o.limits.max_work, dim * std::max<int64_t>(sq, 1)),
                  safe_div(o.limits.max_elements - 2 * sq * row, 2 * row)}));
    auto independent = gen_seqlen(std::max<int32_t>(cfg.block_n, 1), cap_k, min_k);
    const size_t equal_weight = (sq >= min_k && sq <= cap_k) ? 2 : 0;
    auto seqlen_k = gen::weightedOneOf<int64_t>({{6, independent}, {equal_weight, gen::just(sq)}});
    return gen::mapcat(seqlen_k, [c, o, sq, cfg](int64_t sk) {
      Case out = c;
      out.seqlen_q = sq;
      out.seqlen_k = sk;
      out = fit_options(out, o);
      if (!takes_window(out.mask)) return gen::just(out);
      return gen::map(gen_window(out, cfg), [out](std::pair<int64_t, int64_t> window) {
        Case windowed = out;
        windowed.window_left = window.first;
        windowed.window_right = window.second;
        return windowed;
      });
    });
  });
}

// A window that reaches over three K tiles or more and whose left edge lies strictly inside a K tile after the
// first for some rows: L = 2 block_n + r (0 < r < block_n), and keys enough that the last rows' first key falls
// inside tile 1 or later. Rows spread over several Q tiles, so some row's Q tile visits a K tile wholly hidden from
// that row before its first key. Bottom-right rows reach there from any seqlen_q; top-left ones need seqlen_q >=
// seqlen_k, taken where the work allows it (else the window turns bottom-right). The keys may exceed the tier's
// max_seqlen by up to a tile so that every family's tiles get such windows. A single query row that the decode family
// takes becomes, two times in three, a decoding step of 2 to 16 rows (as many as its tile holds), three in four with
// keys added so that the step's rows straddle a boundary of its K tiles: the later rows' Q tile then visits a K tile
// hidden from them. The other cases are drawn as if the step were not there (its own draw, last).
rc::Gen<Case> gen_long_window(const Case& c, const CaseOptions& o, const KernelConfig& cfg) {
  const int64_t bn = std::max<int32_t>(cfg.block_n, 2), bm = std::max<int32_t>(cfg.block_m, 1);
  auto right = gen::weightedOneOf<int64_t>({{2, gen::just<int64_t>(-1)}, {2, gen::just<int64_t>(0)},
                                           {1, range(1, bn + 1)}});
  return gen::apply(
      [c, o, bn, bm](int64_t r, int64_t extra_keys, int64_t right_side, int64_t rows_pick, int64_t step) {
        Case out = c;
        out.window_left = 2 * bn + r;
        out.window_right = right_side;
        out.seqlen_k = out.window_left + 1 + bn + extra_keys;
        const int64_t row_work = std::max<int64_t>(1, out.seqlen_k * out.head_dim);
        const int64_t max_rows = std::max<int64_t>(1, safe_div(o.limits.max_work, row_work));
        if (out.mask == Mask::kWindowTopLeft && max_rows < out.seqlen_k) out.mask = Mask::kWindowBottomRight;
        const std::array<int64_t, 5> rows{1, bm - 1, bm + 1, 2 * bm + 1, out.seqlen_k};
        out.seqlen_q = out.mask == Mask::kWindowTopLeft
                           ? out.seqlen_k
                           : std::clamp<int64_t>(rows[static_cast<size_t>(rows_pick)], 1, std::min(max_rows, out.seqlen_k));
        const Case fitted = fit_options(out, o);
        if (step < 2 || fitted.seqlen_q != 1 || fitted.mask != Mask::kWindowBottomRight) return fitted;
        const KernelConfig one_row = kernel_config(case_params(fitted));
        if (!is_decode_config(one_row) || one_row.block_m < 2) return fitted;
        Case steps = fitted;
        steps.seqlen_q = 2 + (step - 2) % (one_row.block_m - 1);
        if (extra_keys % 4 != 0) {  // the first row's first key 1 to rows - 1 keys before a K-tile boundary
          const int64_t tile = std::max<int32_t>(one_row.block_n, 1);
          const int64_t before = 1 + (extra_keys / 4) % (steps.seqlen_q - 1);
          const int64_t first_key = steps.seqlen_k - steps.seqlen_q - steps.window_left;
          steps.seqlen_k += ((-before - first_key) % tile + tile) % tile;
        }
        steps = fit_options(steps, o);
        return is_decode_config(kernel_config(case_params(steps))) ? steps : fitted;
      },
      range(1, bn - 1), range(1, bn - 1), right, range(0, 4),
      gen::weightedOneOf<int64_t>({{1, gen::just<int64_t>(1)}, {2, range(2, 16)}}));
}

rc::Gen<Case> gen_shape(const CaseOptions& o) {
  auto with_heads = gen::mapcat(gen_frame(o), [o](Case c) {
    return gen::apply([c](std::pair<int64_t, int64_t> heads, int64_t batch) {
      Case out = c;
      out.heads_q = heads.first;
      out.heads_kv = heads.second;
      out.batch = batch;
      return out;
    }, gen_heads(o), gen_batch(o));
  });
  return gen::mapcat(with_heads, [o](Case c) {
    // The tiles the kernel would use for this dtype and head_dim (seqlens stand in until chosen).
    Case probe = c;
    probe.seqlen_q = probe.seqlen_k = 256;
    const KernelConfig cfg = kernel_config(case_params(probe));
    auto ordinary = gen_seqlens_and_window(c, o, cfg);
    if (!takes_window(c.mask)) return ordinary;
    // Two windowed cases in three reach over several K tiles (gen_long_window).
    return gen::weightedOneOf<Case>({{1, ordinary}, {2, gen_long_window(c, o, cfg)}});
  });
}

// The softcap and sink stage: most cases keep neither.
rc::Gen<Case> gen_features(const CaseOptions& o, rc::Gen<Case> cases) {
  auto capped = gen::mapcat(std::move(cases), [o](Case c) {
    return gen::weightedOneOf<Case>({{6, gen::just(c)}, {o.softcap ? 1u : 0u, gen_softcap(c)}});
  });
  return gen::mapcat(std::move(capped), [o](Case c) {
    auto with_sink = gen::map(gen_sink(o.special_values), [c](ValueSpec sink) {
      Case out = c;
      out.sink = sink;
      return out;
    });
    return gen::weightedOneOf<Case>({{5, gen::just(c)}, {o.sinks ? 1u : 0u, with_sink}});
  });
}

}  // namespace

std::vector<Mask> every_mask() {
  std::vector<Mask> out;
  for (const MaskName& m : kMaskNames) out.push_back(m.mask);
  return out;
}
std::vector<DType> every_dtype() {
  std::vector<DType> out;
  for (const DTypeInfo& d : kDTypes) out.push_back(d.dtype);
  return out;
}

CaseLimits cpu_limits() {
  // The host model runs ~1e8 emulated multiply-adds per second; the oracle checks every row of cases this
  // small. 3e6 keeps the average case near 10 ms, so ~1,700 cases fit the CPU tier's budget.
  return CaseLimits{.max_work = 3'000'000, .max_elements = 400'000, .max_seqlen = 300,
                    .max_batch = 3, .max_heads_kv = 3, .max_group = 4};
}

CaseLimits gpu_limits() {
  // The GPU runs large problems in microseconds; the host side (inputs, copies, the oracle on sampled rows)
  // sets the pace, so elements and seqlen_k * head_dim stay bounded.
  return CaseLimits{.max_work = 400'000'000, .max_elements = 2'000'000, .max_seqlen = 1030,
                    .max_batch = 4, .max_heads_kv = 8, .max_group = 8};
}

const CaseLimits& active_limits() { return limits_storage(); }
void set_active_limits(const CaseLimits& limits) { limits_storage() = limits; }

CaseOptions default_options() {
  CaseOptions o;
  o.limits = active_limits();
  if (const LoadedSubject* subject = active_subject()) {
    const fc_subject_capabilities& caps = subject->descriptor().capabilities;
    std::erase_if(o.dtypes, [&](DType d) { return !subject->takes_dtype(d); });
    if (caps.head_dims != nullptr) {
      o.head_dims.assign(caps.head_dims, caps.head_dims + caps.head_dim_count);
    } else {
      o.head_dim_min = caps.head_dim_min;
      o.head_dim_max = caps.head_dim_max;
    }
    o.allowed_masks = caps.masks;
    // V's own width only for a library that declares the range it reads (fc_subject_value_dims_v1).
    if (const auto& dims = subject->value_dims()) {
      o.head_dim_v_min = dims->head_dim_v_min;
      o.head_dim_v_max = dims->head_dim_v_max;
    } else {
      o.unequal_head_dims_in = 0;
    }
    std::erase_if(o.masks, [&](Mask m) { return !(caps.masks & (1u << static_cast<int>(m))); });
    std::erase_if(o.layouts, [&](Layout l) {
      return !(caps.layouts & FC_SUBJECT_BIT(l == Layout::kBHSD ? FC_SUBJECT_LAYOUT_BHSD : FC_SUBJECT_LAYOUT_BSHD));
    });
    if (o.layouts.empty()) o.layouts = {Layout::kBHSD};  // strided only: padded rows of either order
    o.padding = (caps.layouts & FC_SUBJECT_BIT(FC_SUBJECT_LAYOUT_STRIDED)) != 0;
    const fc_subject_limits& l = subject->limits();
    o.seqlen_q_multiple = std::max<int64_t>(l.seqlen_q_multiple, 1);
    o.seqlen_k_multiple = std::max<int64_t>(l.seqlen_k_multiple, 1);
    o.seqlen_q_min = l.seqlen_q_min;
    o.seqlen_k_min = l.seqlen_k_min;
    o.seqlen_q_max = l.seqlen_q_max;
    o.seqlen_k_max = l.seqlen_k_max;
    o.gqa = caps.gqa != 0;
    o.softcap = caps.softcap != 0;
    o.sinks = caps.sink != 0;
  }
  return o;
}

const char* to_string(ValueFamily family) {
  switch (family) {
    case ValueFamily::kNormal: return "normal";
    case ValueFamily::kUniform: return "uniform";
    case ValueFamily::kNearMax: return "near-max";
    case ValueFamily::kSubnormal: return "subnormal";
    case ValueFamily::kAllEqual: return "all-logits-equal";
    case ValueFamily::kDominantKey: return "dominant-key";
    case ValueFamily::kIncreasingLogits: return "increasing-logits";
    case ValueFamily::kMaskedThenNegative: return "masked-tile-then-negative";
    case ValueFamily::kTies: return "ties";
    case ValueFamily::kNegativeZero: return "negative-zero";
    case ValueFamily::kSpecial: return "nan-inf-injected";
    case ValueFamily::kMixed: return "mixed";
  }
  return "?";
}

ValueFamily value_family(const Case& c) {
  const bool special_injection = std::any_of(c.inject.begin(), c.inject.end(), [&c](const Injection& inj) {
    return !std::isfinite(inj.value) || (inj.value == 0.0 && std::signbit(inj.value)) ||
           std::abs(inj.value) == dtype_max(c.dtype);
  });
  auto any = [&](DistKind kind) { return c.q.kind == kind || c.k.kind == kind || c.v.kind == kind; };
  if (special_injection) return ValueFamily::kSpecial;
  if (any(DistKind::kNegZero)) return ValueFamily::kNegativeZero;
  if (any(DistKind::kNearMax)) return ValueFamily::kNearMax;
  if (any(DistKind::kSubnormal)) return ValueFamily::kSubnormal;
  if (c.k.kind == DistKind::kRamp) return ValueFamily::kIncreasingLogits;
  if (c.k.kind == DistKind::kDominant) return ValueFamily::kDominantKey;
  if (c.q.kind == DistKind::kConst && c.k.kind == DistKind::kConst) {
    return c.inject.empty() ? ValueFamily::kAllEqual : ValueFamily::kTies;
  }
  if (c.q.kind == DistKind::kUniform && c.k.kind == DistKind::kUniform && c.q.a > 0 && c.k.b < 0) {
    return ValueFamily::kMaskedThenNegative;
  }
  if (c.q.kind == DistKind::kUniform) return ValueFamily::kUniform;
  if (c.q.kind == DistKind::kNormal) return ValueFamily::kNormal;
  return ValueFamily::kMixed;
}

rc::Gen<int64_t> gen_head_dim(const CaseOptions& o) {
  if (!o.head_dims.empty()) return gen::elementOf(o.head_dims);
  if (o.head_dim_min == 1 && o.head_dim_max == 256) return gen_head_dim();
  // The models' head dims inside the range, its ends, and anything in it.
  std::vector<int64_t> picks{o.head_dim_min, o.head_dim_max};
  for (int64_t d : {8, 16, 32, 64, 96, 128, 256}) {
    if (d >= o.head_dim_min && d <= o.head_dim_max) picks.push_back(d);
  }
  return shrinking_towards(gen::weightedOneOf<int64_t>({{3, gen::elementOf(picks)}, {1, range(o.head_dim_min, o.head_dim_max)}}),
                           o.head_dim_min);
}

rc::Gen<int64_t> gen_head_dim() {
  // Weighted toward the head dims models use, then odd values, then anything in 1..256.
  auto g = gen::weightedOneOf<int64_t>({
      {8, gen::element<int64_t>(32, 64, 96, 128, 256)},
      {3, gen::map(gen::inRange<int64_t>(0, 128), [](int64_t k) { return 2 * k + 1; })},
      {2, range(1, 256)},
      {2, gen::element<int64_t>(1, 2, 3, 4, 8, 16, 48, 80, 112, 160, 192, 224, 255)},
  });
  return shrinking_towards(g, 1);
}

rc::Gen<int64_t> gen_seqlen(int64_t tile, int64_t cap, int64_t min_value) {
  const int64_t lo = std::max<int64_t>(min_value, 1);
  std::vector<int64_t> edges;
  for (int64_t v : {int64_t{1}, int64_t{2}}) edges.push_back(v);
  for (int64_t k = 1; k <= 4; ++k) {
    for (int64_t delta : {-1, 0, 1}) edges.push_back(k * tile + delta);
  }
  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  std::erase_if(edges, [&](int64_t v) { return v < lo || v > cap; });
  std::vector<int64_t> primes = primes_up_to(cap);
  std::erase_if(primes, [&](int64_t v) { return v < lo; });
  if (cap < lo) return gen::just(std::max<int64_t>(min_value, 0));
  auto random = range(lo, cap);
  auto g = gen::weightedOneOf<int64_t>({
      {12, edges.empty() ? random : gen::elementOf(edges)},
      {4, primes.empty() ? random : gen::elementOf(primes)},
      {6, random},
      {min_value == 0 ? 1u : 0u, gen::just<int64_t>(0)},
  });
  return shrinking_towards(g, std::max<int64_t>(min_value, 0));
}

std::string outside_options(const CaseOptions& o, const Case& c) {
  const auto in = [](const auto& items, const auto& x) { return std::find(items.begin(), items.end(), x) != items.end(); };
  if (!in(o.dtypes, c.dtype)) return std::string("dtype ") + to_string(c.dtype) + " is not among the property's dtypes";
  if (!o.head_dims.empty() ? !in(o.head_dims, c.head_dim) : (c.head_dim < o.head_dim_min || c.head_dim > o.head_dim_max)) {
    return "head_dim " + std::to_string(c.head_dim) + " is outside the property's head dims";
  }
  if (c.value_dim() != c.head_dim) {
    if (o.unequal_head_dims_in <= 0) return "dv=" + std::to_string(c.head_dim_v) + ": the property's cases have dv = d";
    if (c.head_dim_v < o.head_dim_v_min || c.head_dim_v > o.head_dim_v_max) {
      return "dv=" + std::to_string(c.head_dim_v) + " is outside the property's head_dim_v range";
    }
  }
  if (!in(o.masks, c.mask) || !(o.allowed_masks & (1u << static_cast<int>(c.mask)))) {
    std::string masks;
    for (Mask m : o.masks) masks += std::string(masks.empty() ? "" : ", ") + to_string(m);
    return std::string("mask ") + to_string(c.mask) + ": the property takes " + masks;
  }
  if (!in(o.layouts, c.layout)) return std::string("layout ") + to_string(c.layout) + " is not among the property's";
  if (c.pad > 0 && !o.padding) return "pad: the property takes contiguous rows only";
  if (c.softcap > 0 && !o.softcap) return "softcap: the property takes no softcap";
  if (c.dropout > 0) return "dropout: the property's relation holds without dropout (the Dropout* properties take it)";
  if (c.sink && !o.sinks) return "sink: the property takes no sink";
  if (!o.special_values) {
    if (!c.inject.empty()) return "inject: the property takes finite values without injections";
    if (c.sink && c.sink->kind == DistKind::kConst && (std::isnan(c.sink->a) || c.sink->a == kInf)) {
      return "sink: the property takes no NaN or +inf sink";
    }
  }
  const bool empty = c.batch == 0 || c.heads_q == 0 || c.seqlen_q == 0 || c.seqlen_k == 0;
  if (o.nonempty && empty) return "the property needs a non-empty problem (b, hq, sq, sk >= 1)";
  if (c.seqlen_k < o.min_seqlen_k) return "sk: the property needs at least " + std::to_string(o.min_seqlen_k) + " keys";
  if (c.heads_kv > 0 && c.heads_q / c.heads_kv < o.min_group) {
    return "hkv: the property needs at least " + std::to_string(o.min_group) + " query heads per K/V head";
  }
  if (!o.gqa && c.heads_q != c.heads_kv) return "hkv: the property takes hq == hkv only";
  if (seqlen_onto_limits(c.seqlen_q, o.seqlen_q_multiple, o.seqlen_q_min, o.seqlen_q_max) != c.seqlen_q ||
      seqlen_onto_limits(c.seqlen_k, o.seqlen_k_multiple, o.seqlen_k_min, o.seqlen_k_max) != c.seqlen_k) {
    return "sq, sk: outside the subject's shape limits";
  }
  if (!c.seqs.empty()) return "seqs: the property draws dense cases";
  return "";
}

rc::Gen<Case> replayed_case(const Case& c, const std::string& why) {
  if (why.empty()) return gen::just(c);
  return gen::map(gen::just(0), [why](int) -> Case { discard(kOutsidePropertyCases + why); });
}

rc::Gen<Case> gen_case(const CaseOptions& options) {
  if (const Case* r = replay_case()) return replayed_case(*r, outside_options(options, *r));
  const bool f32_allowed = std::find(options.dtypes.begin(), options.dtypes.end(), DType::kF32) != options.dtypes.end();
  return gen_features(options, gen::mapcat(gen_shape(options), [options, f32_allowed](Case c) {
    const KernelConfig cfg = kernel_config(case_params(c));
    return gen::mapcat(gen_family_choice(options, c, cfg),
                       [c, cfg, f32_allowed](ValueFamily family) { return gen_family(c, family, cfg, f32_allowed); });
  }));
}

rc::Gen<Case> gen_special_case(const CaseOptions& options) {
  CaseOptions o = options;
  o.nonempty = true;
  if (const Case* r = replay_case()) {
    std::string why = outside_options(o, *r);
    if (why.empty() && r->inject.empty()) why = "inject: the property's cases inject NaN, inf, -0 or the largest value";
    return replayed_case(*r, why);
  }
  const bool f32_allowed = std::find(o.dtypes.begin(), o.dtypes.end(), DType::kF32) != o.dtypes.end();
  return gen_features(o, gen::mapcat(gen_shape(o), [f32_allowed](Case c) {
    const KernelConfig cfg = kernel_config(case_params(c));
    return gen_family(c, ValueFamily::kSpecial, cfg, f32_allowed);
  }));
}

rc::Gen<std::pair<int64_t, int64_t>> gen_window(const Case& c, const KernelConfig& cfg) {
  using Window = std::pair<int64_t, int64_t>;
  const int64_t block_n = std::max<int32_t>(cfg.block_n, 1);
  const int64_t longest = std::max(c.seqlen_q, c.seqlen_k);
  std::vector<int64_t> tile_edges;  // a side of k tiles -1/0/+1: an edge on, before or after a K-tile boundary
  for (int64_t k = 1; k <= 3; ++k) {
    for (int64_t delta : {-1, 0, 1}) tile_edges.push_back(k * block_n + delta);
  }
  auto side = gen::weightedOneOf<int64_t>({
      {2, gen::just<int64_t>(-1)},
      {2, gen::just<int64_t>(0)},
      {2, range(1, 8)},
      {4, gen::elementOf(tile_edges)},
      {3, range(0, std::max<int64_t>(longest, 1))},
      {1, gen::elementOf(std::vector<int64_t>{longest, longest + 1, 2 * longest + 1})},
  });
  // Bottom-right with seqlen_k - seqlen_q >= block_n: a left edge at shift - block_n - back starts row 0's keys
  // at key block_n + back, so no row sees the first K tile (back 0: exactly on the boundary).
  const int64_t shift = c.seqlen_k - c.seqlen_q;
  const bool can_empty_first_tile = c.mask == Mask::kWindowBottomRight && shift >= block_n;
  auto first_tile_empty = gen::apply(
      [shift, block_n](int64_t back, int64_t right) {
        return Window{std::max<int64_t>(0, shift - block_n - back), right};
      },
      gen::elementOf(std::vector<int64_t>{0, 1, block_n - 1}), side);
  auto windows = gen::weightedOneOf<Window>({
      {6, gen::pair(side, side)},
      {2, gen::just(Window{0, 0})},   // the diagonal alone
      {1, gen::just(Window{-1, 0})},  // causal, spelled as a window
      {1, gen::map(gen::element<int64_t>(0, 1),  // both sides cover every key of every row
                   [longest](int64_t extra) { return Window{longest + extra, longest + extra}; })},
      {can_empty_first_tile ? 2u : 0u, first_tile_empty},
  });
  // Shrinks toward simpler windows, each strictly simpler by the measure (unbounded 0, the diagonal 1, any wider
  // side 2, summed over both sides) so that shrinking ends: both sides unbounded, one side unbounded, the
  // diagonal alone.
  auto cost = [](int64_t side) { return side < 0 ? 0 : side == 0 ? 1 : 2; };
  return gen::shrink(windows, [cost](Window w) {
    const int total = cost(w.first) + cost(w.second);
    std::vector<Window> simpler;
    for (const Window& s : {Window{-1, -1}, Window{-1, w.second}, Window{w.first, -1}, Window{0, 0}}) {
      if (cost(s.first) + cost(s.second) < total && std::find(simpler.begin(), simpler.end(), s) == simpler.end()) {
        simpler.push_back(s);
      }
    }
    return rc::seq::fromContainer(std::move(simpler));
  });
}

rc::Gen<Case> gen_softcap(const Case& c) {
  // Saturating: tanh is flat beyond |s| ~ 3c, so scores of 30 and more (q, k of a normal case at sigma 8:
  // scale * q.k ~ 64 z) sit on the cap.
  auto saturating = gen::map(gen::element(0.5f, 1.0f, 2.0f, 5.0f), [c](float cap) {
    Case out = c;
    out.softcap = cap;
    if (out.q.kind == DistKind::kNormal && out.k.kind == DistKind::kNormal) {
      out.q.b = 8.0;
      out.k.b = 8.0;
    }
    return out;
  });
  auto with_cap = [c](float cap) {
    Case out = c;
    out.softcap = cap;
    return out;
  };
  return gen::weightedOneOf<Case>({
      {3, saturating},
      {2, gen::map(gen::element(30.0f, 20.0f, 50.0f), with_cap)},  // the values models use
      {1, gen::map(gen::element(1e4f, 1e6f), with_cap)},           // far above the scores: close to no cap
  });
}

rc::Gen<ValueSpec> gen_sink(bool special_values) {
  auto constant = [](double a) { return spec(DistKind::kConst, a); };
  return gen::weightedOneOf<ValueSpec>({
      {3, gen::map(gen::element(2.0, 1.0, 4.0), [](double sigma) { return spec(DistKind::kNormal, 0, sigma); })},
      {2, gen::map(gen::element(30.0, 80.0, 1e4, 1e30), constant)},      // far above the row max
      {2, gen::map(gen::element(-30.0, -80.0, -1e4, -1e30), constant)},  // far below it
      {2, gen::element(spec(DistKind::kUniform, -60, 60), spec(DistKind::kRamp, -100, 100),
                       spec(DistKind::kDominant, 1, 200))},  // heads above and below
      {1, gen::just(constant(-kInf))},                        // the sink that changes nothing
      {special_values ? 1u : 0u, gen::element(constant(kInf), constant(kNan))},
  });
}

std::vector<std::string> feature_tags(const Case& c) {
  std::vector<std::string> tags;
  if (takes_window(c.mask) && c.seqlen_q > 0) {
    const Params p = case_params(c);
    const KernelConfig cfg = kernel_config(p);
    const KeyRange first = judged_visible_keys(p, 0), last = judged_visible_keys(p, c.seqlen_q - 1);
    auto on_tile_edge = [&](int64_t side) {
      const int64_t r = cfg.block_n > 0 ? (side + 1) % cfg.block_n : -1;
      return side >= cfg.block_n - 1 && r <= 2;
    };
    std::string kind = "other";
    if (c.window_left == 0 && c.window_right == 0) {
      kind = "diagonal";
    } else if (c.window_left == -1 && c.window_right == 0) {
      kind = "causal";
    } else if (first.end == c.seqlen_k && last.begin == 0) {
      kind = "covers-all";
    } else if (first.begin >= cfg.block_n) {
      kind = "first-k-tile-empty";
    } else if (on_tile_edge(c.window_left) || on_tile_edge(c.window_right)) {
      kind = "tile-edge";
    }
    tags.push_back("window=" + kind);
  }
  if (c.softcap > 0) {
    tags.push_back(std::string("softcap=") + (c.softcap <= 5 ? "saturating" : c.softcap <= 100 ? "typical" : "large"));
  }
  if (c.sink) {
    const ValueSpec& s = *c.sink;
    std::string kind = "other";
    if (s.kind == DistKind::kConst) {
      kind = s.a == -kInf ? "minus-inf" : !std::isfinite(s.a) ? "nan-or-inf" : s.a >= 20 ? "above" : s.a <= -20 ? "below" : "near";
    } else if (s.kind == DistKind::kNormal) {
      kind = "near";
    } else if (s.kind == DistKind::kUniform || s.kind == DistKind::kRamp || s.kind == DistKind::kDominant) {
      kind = "mixed-heads";
    }
    tags.push_back("sink=" + kind);
  }
  return tags;
}

namespace {

// The range [lo, hi] a value spec draws from when it is bounded (uniform, const), else nullopt.
std::optional<std::pair<double, double>> spec_range(const ValueSpec& v) {
  if (v.kind == DistKind::kUniform) return std::pair{v.a, v.b};
  if (v.kind == DistKind::kConst && std::isfinite(v.a)) return std::pair{v.a, v.a};
  return std::nullopt;
}

// An upper bound of every score scale * q.k from the value specs, or +inf where they do not bound it from above.
double score_upper_bound(const Case& c) {
  const auto q = spec_range(c.q), k = spec_range(c.k);
  const double scale = static_cast<double>(c.softmax_scale());
  const bool injected = std::any_of(c.inject.begin(), c.inject.end(), [](const Injection& x) { return x.tensor != 'v'; });
  if (!q || !k || injected || c.softcap > 0 || !(scale > 0) || q->first < 0 || k->second > 0) return kInf;
  return scale * static_cast<double>(c.head_dim) * q->first * k->second;
}

}  // namespace

WindowReach window_reach(const Case& c) {
  WindowReach r;
  if (!takes_window(c.mask) || !c.seqs.empty()) return r;
  const Params p = case_params(c);
  const KernelConfig cfg = kernel_config(p);
  const int64_t bm = std::max<int32_t>(cfg.block_m, 1), bn = std::max<int32_t>(cfg.block_n, 1);
  // The decode family's Q tile holds a K/V head's query rows, as many as the group and the step have: its K tile is
  // its tile size.
  r.tiles = is_decode_config(cfg)
                ? "decode, K tile " + std::to_string(bn)
                : std::string(to_string(cfg.path)) + " " + std::to_string(bm) + "x" + std::to_string(bn);
  const bool low_scores = score_upper_bound(c) < -90.0;
  for (int64_t m0 = 0; m0 < c.seqlen_q; m0 += bm) {
    int64_t first_tile = -1;  // the Q tile's first visited K tile: that of its first row with a key
    for (int64_t i = m0; i < std::min(m0 + bm, c.seqlen_q); ++i) {
      const KeyRange keys = judged_visible_keys(p, i);
      if (keys.size() == 0) continue;
      const int64_t begin_tile = keys.begin / bn;
      if (first_tile < 0) first_tile = begin_tile;
      r.hidden_tile_then_low_scores |= low_scores && begin_tile > first_tile;
      r.left_edge_inside_later_tile |= begin_tile >= 1 && keys.begin % bn != 0 && (keys.end - 1) / bn - begin_tile >= 2;
    }
  }
  return r;
}

std::vector<std::string> shape_tags(const Case& c) {
  const KernelConfig cfg = kernel_config(case_params(c));
  auto relation = [](int64_t s, int64_t tile) -> std::string {
    if (s <= 2) return std::to_string(s);
    if (tile <= 0) return "other";
    const int64_t r = s % tile;
    if (r == 0) return s == tile ? "tile" : "k*tile";
    if (r == 1) return s == tile + 1 ? "tile+1" : "k*tile+1";
    if (r == tile - 1) return s == tile - 1 ? "tile-1" : "k*tile-1";
    return s < tile ? "<tile" : ">tile";
  };
  std::vector<std::string> tags;
  tags.push_back(std::string("dtype=") + to_string(c.dtype));
  tags.push_back(std::string("mask=") + to_string(c.mask));
  tags.push_back(std::string("path=") + to_string(cfg.path));
  tags.push_back("sq=" + relation(c.seqlen_q, cfg.block_m));
  tags.push_back("sk=" + relation(c.seqlen_k, cfg.block_n));
  tags.push_back(c.seqlen_q == c.seqlen_k ? "seqlens=sq=sk" : (c.seqlen_q < c.seqlen_k ? "seqlens=sq<sk" : "seqlens=sq>sk"));
  const bool common = c.head_dim == 32 || c.head_dim == 64 || c.head_dim == 96 || c.head_dim == 128 || c.head_dim == 256;
  tags.push_back(common ? "d=" + std::to_string(c.head_dim) : (c.head_dim % 2 ? "d=odd" : "d=other-even"));
  tags.push_back(c.heads_q == c.heads_kv ? "heads=mha" : (c.heads_kv == 1 ? "heads=mqa" : "heads=gqa"));
  tags.push_back(std::string("layout=") + (c.layout == Layout::kBSHD ? "bshd" : "bhsd") + (c.pad ? "+pad" : ""));
  if (c.batch == 0) tags.push_back("batch=0");
  if (c.scale) tags.push_back("scale=custom");
  return tags;
}

void showValue(const Case& c, std::ostream& os) { os << '"' << format_case(c) << '"'; }

}  // namespace flashcheck::properties
