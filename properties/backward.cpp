// Property 8: the backward pass (flashcheck/backward.h) against the oracle's gradient and against itself. Every case
// is a grad=1 case: a dense case of the tier's shapes (finite values, every mask, softcap, sink, GQA, unequal head
// dims), or in one case in four packed varlen sequences with key slots past their keys; run forward and backward on
// the tier's backend (run_backward_case) and judged by judge_backward (oracle/gradient.h's bound).
#include <rapidcheck.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backward_cases.h"
#include "checks.h"
#include "flashcheck/backward_check.h"
#include "flashcheck/dtype.h"
#include "properties.h"
#include "replay.h"
#include "tier.h"

namespace flashcheck::properties {
namespace gen = rc::gen;


CaseOptions grad_options(const GradNeeds& needs) {
  CaseOptions o = finite_options();
  o.special_values = false;
  o.nonempty = true;
  o.min_group = needs.min_group;
  if (needs.plain) {
    o.softcap = false;
    o.sinks = false;
  }
  if (needs.unmasked) o.masks = {Mask::kNone};
  // A subject's backward (fc_subject_backward_v1): the dtypes it declares a class for, a sink only with dsink; its
  // dropout (fc_subject_dropout_v1): the dtypes it declares one for.
  const LoadedSubject* subject = active_subject();
  if (subject != nullptr && subject->backward() && !needs.forward_only) {
    std::erase_if(o.dtypes, [&](DType d) { return subject->backward_class(d) == FC_SUBJECT_ARITH_UNDECLARED; });
    o.sinks = o.sinks && subject->backward()->sink != 0;
  }
  if (subject != nullptr && needs.dropout) std::erase_if(o.dtypes, [&](DType d) { return !subject->drops(d); });
  // The backward pass does about 2.5 times the forward's work, and the oracle's gradient all of it per case.
  o.limits.max_work = std::max<int64_t>(o.limits.max_work / 4, 1);
  return o;
}

// Why a replayed line is not one grad_case(needs) draws, or "".
std::string outside_grad(const GradNeeds& needs, const Case& c) {
  if (!c.grad) return "grad: the property's cases check the backward pass (grad=1)";
  if (c.page > 0 || c.splits != 1) return "page: paged K/V and split-KV are forward-only";
  if (needs.dense && !c.seqs.empty()) return "seqs: the property draws dense cases";
  Case dense = c;
  if (!dense.seqs.empty()) {  // the dense case it came from had at least one row and key (its sequences may not)
    dense.batch = 1;
    dense.seqlen_q = std::max<int64_t>(dense.seqlen_q, 1);
    dense.seqlen_k = std::max<int64_t>(dense.seqlen_k, 1);
    dense.seqs.clear();
  }
  dense.grad = false;
  dense.dout = ValueSpec{};
  return outside_options(grad_options(needs), dense);
}

Case grad_case(const GradNeeds& needs) {
  if (const Case* r = replay_case()) return *replayed_case(*r, outside_grad(needs, *r));
  Case c = *gen_case(grad_options(needs));
  c.grad = true;
  c.dout = *gen::weightedOneOf<ValueSpec>({
      {3, gen::map(gen::inRange(-3, 3), [](int e) { return ValueSpec{DistKind::kNormal, 0.0, std::ldexp(1.0, e)}; })},
      {1, gen::just(ValueSpec{DistKind::kUniform, -1.0, 1.0})},
      {1, gen::just(ValueSpec{DistKind::kDominant, 0.1, 10.0})},
  }).as("dout");
  // Packed sequences, some with key slots past their keys (whose dK and dV must come back 0); on a subject only where its
  // backward takes sequences, spare slots only where it declares them.
  const LoadedSubject* subject = active_subject();
  const bool backward_sequences = subject == nullptr || (subject->backward() && subject->backward()->sequences);
  const bool dropout_sequences = subject == nullptr || (subject->dropout() && subject->dropout()->sequences);
  const bool sequences = (backward_sequences || needs.forward_only) && (dropout_sequences || !needs.dropout);
  const bool spare_slots = subject == nullptr || subject->takes(FC_SUBJECT_SEQ_SEQUSED_K);
  if (!needs.dense && sequences && *gen::weightedElement<bool>({{3, false}, {1, true}}).as("varlen")) {
    const int64_t sequences = *gen::inRange<int64_t>(1, 4).as("sequences");
    c.seqs.clear();
    for (int64_t b = 0; b < sequences; ++b) {
      Sequence s;
      s.q = *gen::inRange<int64_t>(0, c.seqlen_q + 1);
      s.k = *gen::inRange<int64_t>(0, c.seqlen_k + 1);
      s.extra = spare_slots ? *gen::element<int64_t>(0, 0, 1, 7) : 0;
      c.seqs.push_back(s);
    }
    fit_to_sequences(&c);
    if (subject != nullptr) c = onto_sequence_features(*subject, c);
    c.inject.clear();
    note_coverage("grad=varlen");
  } else {
    note_coverage("grad=dense");
  }
  return c;
}

BackwardOutputs run_grad(const HostInputs& in, bool deterministic) {
  BackwardRunOptions options;
  options.defect = planted_defect();
  options.deterministic = deterministic;
  const LoadedSubject* subject = active_subject();
  BackwardOutputs out = subject != nullptr ? run_backward_case(in, *subject, options)
                                           : run_backward_case(in, active_backend(), options);
  if (out.status.code() == StatusCode::kUnsupported) RC_DISCARD(out.status.message());
  if (!out.status.ok()) {
    RC_LOG() << "run_backward_case on " << (subject != nullptr ? "subject " + subject->name() : to_string(active_backend()))
             << ": " << out.status.message() << "\n";
  }
  RC_ASSERT(out.status.ok());
  return out;
}

bool same_bits_on_rerun(bool deterministic, bool dq) {
  if (const LoadedSubject* subject = active_subject()) return subject->backward() && subject->backward()->deterministic;
  return deterministic || !dq;
}

void assert_same_gradients(const BackwardOutputs& a, const BackwardOutputs& b, const char* first, const char* second,
                           const char* failure) {
  for (const auto& [name, x, y] : {std::tuple{"dQ", &a.dq, &b.dq}, std::tuple{"dK", &a.dk, &b.dk},
                                   std::tuple{"dV", &a.dv, &b.dv}, std::tuple{"dsink", &a.dsink, &b.dsink}}) {
    RC_ASSERT(x->size() == y->size());
    for (size_t at = 0; at < x->size(); ++at) {
      if (!same_bits((*x)[at], (*y)[at])) {
        RC_LOG() << name << "[" << at << "]: " << (*x)[at] << " (" << first << "), " << (*y)[at] << " (" << second
                 << ")\n";
        RC_FAIL(failure);
      }
    }
  }
}

BackwardVerdict judged(const Case& c, const HostInputs& in, const BackwardOutputs& out,
                       const oracle::GradientCheck* check) {
  const BackwardVerdict v = judge_backward(c, in, out, check);
  RC_LOG() << v.report();
  return v;
}

namespace {

// A gradient element of a case with power-of-two-scaled dO: 2^e times the first run's, bit for bit, where no value on
// the way is subnormal in fp32 or in the dtype (their grids are absolute, not relative): on the general path (the
// tensor-core path rounds dS, which scales with dO and is often tiny, to the dtype), the case draws no subnormal inputs,
// no P or dS comes near fp32's subnormal range (may_underflow) and the element is at least twice the dtype's smallest normal and 2^-102. Elsewhere (`grids`: the path or the
// inputs may round on an absolute grid) the two runs lie within their bounds of exact values that scale exactly:
// |scaled - 2^e base| <= bound(scaled) + 2^e bound(base). Elements whose bound is infinite in either run (outside the
// error model's domain) make no claim.
void assert_scaled(const char* what, const std::vector<double>& base, const std::vector<double>& scaled, double factor,
                   DType dtype, bool grids, const std::vector<double>& bound_base,
                   const std::vector<double>& bound_scaled) {
  RC_ASSERT(base.size() == scaled.size());
  const double min_normal = find_dtype(dtype)->min_normal();
  for (size_t at = 0; at < base.size(); ++at) {
    if (!std::isfinite(bound_base[at]) || !std::isfinite(bound_scaled[at])) continue;
    const double want = base[at] * factor;
    // fp32 intermediates (a tiny P's products) round on fp32's absolute subnormal grid: an element 2^24 times above
    // it is past their reach.
    const bool exact = !grids && std::fabs(base[at]) >= std::max(2 * min_normal, 0x1p-102);
    const double slack = exact ? 0.0 : bound_scaled[at] + factor * bound_base[at];
    if (!(std::fabs(scaled[at] - want) <= slack)) {
      RC_LOG() << what << "[" << at << "]: " << scaled[at] << " with dO scaled by " << factor << ", " << base[at]
               << " without (" << (exact ? "bit for bit" : "within the bounds") << ")\n";
      RC_FAIL("gradients are not linear in dO");
    }
  }
}

// Whether a backward run of the case may put an fp32 value on the absolute grid below fp32's normal range, where a
// power-of-two scaling of dO does not scale the rounding: a visible P_ij near or below it (its products with dO, and
// dS's), or dS_ij = P_ij (dP_ij - D_i) g_ij so small that it or its products with Q and K fall there. Estimated in
// double from the inputs, the forward's LSE and O with generous margins (2^-90 and 2^-100 against fp32's 2^-126):
// one such term can break a tie in a dQ, dK or dV element that is otherwise far above the grid.
bool may_underflow(const HostInputs& in, const BackwardOutputs& base) {
  const Params& p = in.params;
  const oracle::Problem problem = in.problem();
  const int64_t group = p.heads_q / p.heads_kv, dim = p.head_dim, dim_v = value_head_dim(p);
  const double cap = p.softcap;
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t h = 0; h < p.heads_q; ++h)
      for (int64_t i = 0; i < oracle::sequence_seqlen_q(problem, b); ++i) {
        const int64_t row = (b * p.heads_q + h) * p.seqlen_q + i;
        const double lse = base.forward.lse[static_cast<size_t>(row)];
        if (!std::isfinite(lse)) continue;
        const double* q = in.q_exact.data() + row * dim;
        const double* g = in.d_o_exact.data() + row * dim_v;
        double d = 0.0;
        for (int64_t c = 0; c < dim_v; ++c) d += g[c] * double(base.forward.o[static_cast<size_t>(row * dim_v + c)]);
        const oracle::KeySpan keys = oracle::visible_keys(problem, b, i);
        for (int64_t j = keys.begin; j < keys.end; ++j) {
          const int64_t key = (b * p.heads_kv + h / group) * p.seqlen_k + j;
          const double* k = in.k_exact.data() + key * dim;
          const double* v = in.v_exact.data() + key * dim_v;
          double s = 0.0, dp = 0.0;
          for (int64_t c = 0; c < dim; ++c) s += q[c] * k[c];
          for (int64_t c = 0; c < dim_v; ++c) dp += g[c] * v[c];
          s *= p.softmax_scale;
          double slope = 1.0;
          if (cap > 0) {
            const double t = std::tanh(s / cap);
            s = cap * t;
            slope = 1.0 - t * t;
          }
          const double weight = std::exp(s - lse);
          if (!(weight > 0x1p-160)) continue;  // P rounds to 0 in fp32: nothing of it reaches a gradient
          if (weight < 0x1p-90 || std::fabs(weight * (dp - d) * slope) < 0x1p-100) return true;
        }
      }
  return false;
}

bool same_bits_everywhere(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (size_t at = 0; at < a.size(); ++at) {
    if (!same_bits(a[at], b[at])) return false;
  }
  return true;
}

}  // namespace

void gradients_agree_with_oracle() {
  const Case c = grad_case();
  note_case(c);
  const HostInputs in = inputs_for(c);
  const BackwardOutputs out = run_grad(in);
  const BackwardVerdict v = judged(c, in, out);
  RC_ASSERT(v.pass);
}

void gradients_are_linear_in_dout() {
  const Case c = grad_case();
  note_case(c);
  HostInputs in = inputs_for(c);
  // Deterministic mode: the atomics' order of dQ's partial sums would differ between the two runs.
  const BackwardOutputs base = run_grad(in, true);
  RelationDraws draws(c, "GradientsAreLinearInDout");
  // Up, not down: halving a subnormal dO element would round it.
  const double factor = std::ldexp(1.0, 1 + static_cast<int>(draws.below("exponent of the factor - 1", 3)));
  HostInputs scaled = copy_of(in);
  for (size_t at = 0; at < scaled.d_o_exact.size(); ++at) scaled.d_o_exact[at] *= factor;
  // dO's bytes in its layout: every element (padding NaN included) decoded, scaled and encoded again.
  const int64_t esize = dtype_size(c.dtype);
  for (size_t at = 0; at + static_cast<size_t>(esize) <= scaled.d_o.size(); at += static_cast<size_t>(esize)) {
    uint32_t bits = 0;
    std::memcpy(&bits, scaled.d_o.data() + at, static_cast<size_t>(esize));
    const double x = decode_dtype(c.dtype, bits);
    if (!std::isfinite(x)) continue;
    bits = encode_dtype(c.dtype, x * factor);
    if (decode_dtype(c.dtype, bits) != x * factor) RC_DISCARD("dO times the factor leaves the dtype's range");
    std::memcpy(scaled.d_o.data() + at, &bits, static_cast<size_t>(esize));
  }
  const BackwardOutputs out = run_grad(scaled, true);
  const oracle::GradientCheck bb = backward_bounds(in, base), bs = backward_bounds(scaled, out);
  const bool grids = base.path != ComputePath::kGeneralFp32 || !same_bits_on_rerun(true, true) ||
                     c.q.kind == DistKind::kSubnormal ||
                     c.k.kind == DistKind::kSubnormal || c.v.kind == DistKind::kSubnormal ||
                     c.dout.kind == DistKind::kSubnormal || may_underflow(in, base);
  note_coverage(grids ? "linear=within-bounds" : "linear=bit-exact");
  assert_scaled("dQ", base.dq, out.dq, factor, c.dtype, grids, bb.dq, bs.dq);
  assert_scaled("dK", base.dk, out.dk, factor, c.dtype, grids, bb.dk, bs.dk);
  assert_scaled("dV", base.dv, out.dv, factor, c.dtype, grids, bb.dv, bs.dv);
}

void deterministic_gradients_repeat() {
  const Case c = grad_case();
  note_case(c);
  const HostInputs in = inputs_for(c);
  const BackwardOutputs a = run_grad(in, true), b = run_grad(in, true);
  assert_same_gradients(a, b, "first run", "second run", "deterministic mode gave two results");
  RC_ASSERT(judged(c, in, a).pass);
}

void grouped_key_gradients_sum_repeated_heads() {
  GradNeeds needs;
  needs.dense = true;
  needs.min_group = 2;
  const Case c = grad_case(needs);
  note_case(c);
  const HostInputs grouped = inputs_for(c);
  const Params& p = grouped.params;
  const int64_t group = p.heads_q / p.heads_kv;
  Case repeated_case = c;
  repeated_case.heads_kv = c.heads_q;
  HostInputs repeated = inputs_for(repeated_case);
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t h = 0; h < p.heads_q; ++h) {
      for (int64_t j = 0; j < p.seqlen_k; ++j) copy_key(repeated, b, h, j, grouped, b, h / group, j);
    }
  }
  const BackwardOutputs a = run_grad(grouped), r = run_grad(repeated);
  const oracle::GradientCheck bg = backward_bounds(grouped, a), br = backward_bounds(repeated, r);
  RC_ASSERT(judged(c, grouped, a, &bg).pass);
  RC_ASSERT(judged(repeated_case, repeated, r, &br).pass);
  // dK and dV of K/V head g against the sums over the group's repeated heads: both runs lie within their bounds of the
  // same exact values, so they differ by at most the grouped element's bound plus the repeated elements' bounds.
  const auto within = [&](const char* name, const std::vector<double>& g, const std::vector<double>& rep,
                          const std::vector<double>& bound_g, const std::vector<double>& bound_rep, int64_t cols) {
    for (int64_t b = 0; b < p.batch; ++b)
      for (int64_t kv = 0; kv < p.heads_kv; ++kv)
        for (int64_t j = 0; j < p.seqlen_k; ++j)
          for (int64_t col = 0; col < cols; ++col) {
            const size_t at = static_cast<size_t>(((b * p.heads_kv + kv) * p.seqlen_k + j) * cols + col);
            double sum = 0.0, slack = bound_g[at];
            for (int64_t m = 0; m < group; ++m) {
              const size_t r_at = static_cast<size_t>(((b * p.heads_q + kv * group + m) * p.seqlen_k + j) * cols + col);
              sum += rep[r_at];
              slack += bound_rep[r_at];
            }
            slack += 1e-15 * std::fabs(sum);  // the double sum here
            if (!std::isfinite(slack)) continue;  // outside the domain: no claim
            if (!(std::fabs(g[at] - sum) <= slack)) {
              RC_LOG() << name << " of K/V head " << kv << " key " << j << " column " << col << ": " << g[at]
                       << " grouped, " << sum << " summed over the repeated heads (slack " << slack << ")\n";
              RC_FAIL("GQA's key gradients are not the repeated heads' sums");
            }
          }
  };
  within("dK", a.dk, r.dk, bg.dk, br.dk, p.head_dim);
  within("dV", a.dv, r.dv, bg.dv, br.dv, value_head_dim(p));
}

void nan_in_hidden_keys_never_reaches_gradients() {
  GradNeeds needs;
  needs.dense = true;
  Case c = grad_case(needs);
  // Keys no row sees (the oracle's predicate): NaN in K and V there.
  const auto hidden_keys = [](const HostInputs& in) {
    const oracle::Problem problem = in.problem();
    std::vector<int64_t> hidden;
    for (int64_t j = 0; j < in.params.seqlen_k; ++j) {
      bool seen = false;
      for (int64_t i = 0; i < in.params.seqlen_q && !seen; ++i) seen = oracle::visible(problem, i, j);
      if (!seen) hidden.push_back(j);
    }
    return hidden;
  };
  HostInputs clean = inputs_for(c);
  std::vector<int64_t> hidden = hidden_keys(clean);
  if (hidden.empty() && replay_case() == nullptr) {
    // A drawn case whose every key some row sees: causal top-left over more keys than rows hides the keys past the
    // last row's diagonal from every row.
    c.mask = Mask::kCausalTopLeft;
    c.window_left = c.window_right = -1;
    c.seqlen_k = std::max(c.seqlen_k, c.seqlen_q + 1);
    c.inject.clear();
    clean = inputs_for(c);
    hidden = hidden_keys(clean);
  }
  note_case(c);
  if (hidden.empty()) RC_DISCARD("every key is seen by some row");
  const Params& p = clean.params;
  note_coverage("hidden-keys=some");
  HostInputs poisoned = copy_of(clean);
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t g = 0; g < p.heads_kv; ++g)
      for (int64_t j : hidden) fill_key(poisoned, b, g, j, std::nan(""));
  // Both modes: the default (atomic dQ, the tensor-core path for fp16/bf16) and the deterministic one.
  RelationDraws draws(c, "NanInHiddenKeysNeverReachesGradients");
  const bool deterministic = draws.coin("deterministic mode");
  note_coverage(deterministic ? "hidden-nan=deterministic" : "hidden-nan=atomic");
  const BackwardOutputs a = run_grad(clean, deterministic), b = run_grad(poisoned, deterministic);
  // The backward kernels and the host model never multiply a hidden key: given the same O and LSE they give the same
  // bits, but for dQ in atomic mode, whose partial sums over the K/V tiles arrive in any order (there it is held to
  // finiteness wherever the clean run's is finite, and to the oracle). The forward they run first gives the same O
  // and LSE on the host model and on the GPU's general path; its tensor-core and split-TF32 paths send a tile holding
  // NaN to an exact path (metamorphic.cpp, nan_in_masked_keys_never_reaches_output), so there every gradient of the
  // poisoned run is held to finiteness and to the oracle.
  const bool same_forward = same_bits_everywhere(a.forward.o, b.forward.o) &&
                            same_bits_everywhere(std::vector<double>(a.forward.lse.begin(), a.forward.lse.end()),
                                                 std::vector<double>(b.forward.lse.begin(), b.forward.lse.end()));
  note_coverage(same_forward ? "hidden-nan=same-forward-bits" : "hidden-nan=forward-exact-path");
  for (const auto& [name, x, y] : {std::tuple{"dQ", &a.dq, &b.dq}, std::tuple{"dK", &a.dk, &b.dk},
                                   std::tuple{"dV", &a.dv, &b.dv}, std::tuple{"dsink", &a.dsink, &b.dsink}}) {
    const bool bitwise = same_forward && same_bits_on_rerun(deterministic, x == &a.dq);
    for (size_t at = 0; at < x->size(); ++at) {
      const bool reached = bitwise ? !same_bits((*x)[at], (*y)[at]) : std::isfinite((*x)[at]) && !std::isfinite((*y)[at]);
      if (reached) {
        RC_LOG() << name << "[" << at << "]: " << (*x)[at] << " clean, " << (*y)[at] << " with NaN in hidden keys\n";
        RC_FAIL("NaN in keys no row sees reached a gradient");
      }
    }
  }
  if (!same_forward || !deterministic) RC_ASSERT(judged(c, poisoned, b).pass);
}

void permuting_keys_permutes_key_gradients() {
  GradNeeds needs;
  needs.dense = true;
  needs.unmasked = true;  // under a mask the key order is the visibility
  const Case c = grad_case(needs);
  note_case(c);
  RelationDraws draws(c, "PermutingKeysPermutesKeyGradients");
  const HostInputs base = inputs_for(c);
  const Params& p = base.params;
  const std::vector<int64_t> perm = draw_key_permutation(draws, p.seqlen_k, 32);  // the backward's K/V tile
  HostInputs permuted = copy_of(base);
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t g = 0; g < p.heads_kv; ++g)
      for (int64_t j = 0; j < p.seqlen_k; ++j) copy_key(permuted, b, g, perm[static_cast<size_t>(j)], base, b, g, j);
  const BackwardOutputs a = run_grad(base), b = run_grad(permuted);
  // Key j's dK and dV move to key perm[j]; dQ stays. Each run within its bound of the same exact values.
  const oracle::GradientCheck ba = backward_bounds(base, a), bb = backward_bounds(permuted, b);
  const auto within = [&](const char* name, double got, double want, double bound) {
    if (!std::isfinite(bound)) return;  // no claim (outside the domain)
    if (!(std::fabs(got - want) <= bound)) {
      RC_LOG() << name << ": " << got << " permuted, " << want << " not (slack " << bound << ")\n";
      RC_FAIL("permuting the keys did not permute dK and dV (or changed dQ)");
    }
  };
  for (size_t at = 0; at < a.dq.size(); ++at) within("dQ", b.dq[at], a.dq[at], ba.dq[at] + bb.dq[at]);
  for (int64_t b_ = 0; b_ < p.batch; ++b_)
    for (int64_t g = 0; g < p.heads_kv; ++g)
      for (int64_t j = 0; j < p.seqlen_k; ++j) {
        const int64_t from = (b_ * p.heads_kv + g) * p.seqlen_k + j;
        const int64_t to = (b_ * p.heads_kv + g) * p.seqlen_k + perm[static_cast<size_t>(j)];
        for (int64_t col = 0; col < p.head_dim; ++col) {
          const size_t x = static_cast<size_t>(from * p.head_dim + col), y = static_cast<size_t>(to * p.head_dim + col);
          within("dK", b.dk[y], a.dk[x], ba.dk[x] + bb.dk[y]);
        }
        const int64_t dim_v = value_head_dim(p);
        for (int64_t col = 0; col < dim_v; ++col) {
          const size_t x = static_cast<size_t>(from * dim_v + col), y = static_cast<size_t>(to * dim_v + col);
          within("dV", b.dv[y], a.dv[x], ba.dv[x] + bb.dv[y]);
        }
      }
}

void key_gradients_sum_to_zero() {
  GradNeeds needs;
  needs.dense = true;
  needs.plain = true;
  const Case c = grad_case(needs);
  note_case(c);
  const HostInputs in = inputs_for(c);
  const BackwardOutputs out = run_grad(in);
  const oracle::GradientCheck bounds = backward_bounds(in, out);
  RC_ASSERT(judged(c, in, out, &bounds).pass);
  // sum_j dS_ij = 0 for every row, so sum_j dK_j = 0 per K/V head; and sum_j dV_j = sum_i dO_i over the rows with a
  // visible key (sum_j P_ij = 1 without a sink). Each within the sum of its elements' bounds.
  const Params& p = in.params;
  const oracle::Problem problem = in.problem();
  const int64_t group = p.heads_q / p.heads_kv;
  const auto key_sum = [&](const std::vector<double>& g, const std::vector<double>& bound, int64_t cols, int64_t b,
                           int64_t kv, int64_t col, double* slack) {
    double sum = 0.0;
    for (int64_t j = 0; j < p.seqlen_k; ++j) {
      const size_t at = static_cast<size_t>(((b * p.heads_kv + kv) * p.seqlen_k + j) * cols + col);
      sum += g[at];
      *slack += bound[at] + 1e-15 * std::fabs(g[at]);
    }
    return sum;
  };
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t kv = 0; kv < p.heads_kv; ++kv) {
      for (int64_t col = 0; col < p.head_dim; ++col) {
        double slack = 0.0;
        const double sum = key_sum(out.dk, bounds.dk, p.head_dim, b, kv, col, &slack);
        if (!std::isfinite(slack)) continue;  // an element outside the domain: no claim on the sum
        if (!(std::fabs(sum) <= slack)) {
          RC_LOG() << "sum over keys of dK, K/V head " << kv << " column " << col << ": " << sum << " (slack " << slack << ")\n";
          RC_FAIL("key gradients do not sum to zero");
        }
      }
      const int64_t dim_v = value_head_dim(p);
      for (int64_t col = 0; col < dim_v; ++col) {
        double slack = 0.0, want = 0.0;
        const double sum = key_sum(out.dv, bounds.dv, dim_v, b, kv, col, &slack);
        if (!std::isfinite(slack)) continue;
        for (int64_t m = 0; m < group; ++m)
          for (int64_t i = 0; i < p.seqlen_q; ++i) {
            if (oracle::visible_keys(problem, i).size() == 0) continue;
            want += in.d_o_exact[static_cast<size_t>(((b * p.heads_q + kv * group + m) * p.seqlen_q + i) * dim_v + col)];
          }
        if (!(std::fabs(sum - want) <= slack + 1e-15 * std::fabs(want))) {
          RC_LOG() << "sum over keys of dV, K/V head " << kv << " column " << col << ": " << sum << ", sum of dO "
                   << want << " (slack " << slack << ")\n";
          RC_FAIL("value gradients do not sum to dO");
        }
      }
    }
}

void key_shift_invariance() {
  GradNeeds needs;
  needs.dense = true;
  needs.plain = true;  // a softcap bends the scores (tanh is no shift), and a sink does not move with them
  const Case c = grad_case(needs);
  note_case(c);
  RelationDraws draws(c, "KeyShiftInvariance");
  HostInputs base = inputs_for(c);
  const KeyShift shift = quantize_keys_for_shift(draws, &base);
  if (shift.u.empty()) {
    note_coverage("key-shift=skipped-near-max");
    return;
  }
  note_coverage(std::string("key-shift=") + shift.pattern);
  const HostInputs shifted = shift_keys(base, shift.u);
  // Scores move by scale q_i.u, the same for every key of row i, so P, O, D and dS stay; dK_j = scale sum_i dS_ij q_i
  // and dV_j = sum_i P_ij dO_i stay, and dQ_i gains scale u sum_j dS_ij = 0 (sum_j P_ij = 1 without a sink). A mask
  // hides the same keys either way. The exact gradients are equal; the runs round different scores, so each lies
  // within its own bound of them, and the two within the sum of the bounds.
  const BackwardOutputs a = run_grad(base), b = run_grad(shifted);
  const oracle::GradientCheck ba = backward_bounds(base, a), bs = backward_bounds(shifted, b);
  int64_t claims = 0;
  const auto within = [&](const char* name, const std::vector<double>& got, const std::vector<double>& want,
                          const std::vector<double>& bound_base, const std::vector<double>& bound_shifted) {
    RC_ASSERT(got.size() == want.size());
    for (size_t at = 0; at < got.size(); ++at) {
      const double slack = bound_base[at] + bound_shifted[at];
      if (!std::isfinite(slack)) continue;  // outside the domain in either run: no claim
      ++claims;
      if (!(std::fabs(got[at] - want[at]) <= slack)) {
        RC_LOG() << name << "[" << at << "]: " << got[at] << " with the keys shifted, " << want[at] << " without (slack "
                 << slack << ")\n";
        RC_FAIL("adding one vector to every key row changed the gradients");
      }
    }
  };
  within("dQ", b.dq, a.dq, ba.dq, bs.dq);
  within("dK", b.dk, a.dk, ba.dk, bs.dk);
  within("dV", b.dv, a.dv, ba.dv, bs.dv);
  if (claims == 0) note_coverage("key-shift=no-claim");
}

void rows_without_keys_get_zero_gradients() {
  Case c = grad_case();
  // Query rows (b, i) that see no key, by the oracle's predicate (every head of a sequence alike).
  const auto rows_without_keys = [](const HostInputs& in) {
    const oracle::Problem problem = in.problem();
    std::vector<std::pair<int64_t, int64_t>> rows;
    for (int64_t b = 0; b < problem.batch; ++b)
      for (int64_t i = 0; i < oracle::sequence_seqlen_q(problem, b); ++i) {
        if (oracle::visible_keys(problem, b, i).size() == 0) rows.emplace_back(b, i);
      }
    return rows;
  };
  HostInputs in = inputs_for(c);
  std::vector<std::pair<int64_t, int64_t>> blind = rows_without_keys(in);
  const char* how = "drawn";
  if (blind.empty() && replay_case() == nullptr) {
    // A drawn case whose every row sees a key: fewer keys than rows under causal-br (the first rows' diagonals lie
    // before key 0), a top-left window whose left edge passes the last key for the last rows, a bottom-right window
    // whose right edge lies before key 0 for the first rows, or a sequence with no keys.
    const auto fewer_keys_than_rows = [&] {
      if (c.seqlen_q < 2) {
        c.seqlen_q = 2;
        c.seqlen_k = 1;
      } else {
        c.seqlen_k = std::min(c.seqlen_k, c.seqlen_q - 1);
      }
    };
    // The ways the case's masks allow (a subject's declared ones); a dense case with none of them discards.
    const uint32_t allowed = default_options().allowed_masks;
    std::vector<int> ways;
    for (const auto& [way, mask] : {std::pair{0, Mask::kCausalBottomRight}, std::pair{1, Mask::kWindowTopLeft},
                                    std::pair{2, Mask::kWindowBottomRight}}) {
      if (allowed & (1u << static_cast<int>(mask))) ways.push_back(way);
    }
    if (c.seqs.empty() && ways.empty()) RC_DISCARD("no mask the subject declares leaves a row without keys");
    switch (c.seqs.empty() ? *gen::elementOf(ways).as("rows without keys (0 causal-br, 1 window-tl, 2 window-br)") : 3) {
      case 0:
        how = "causal-br";
        fewer_keys_than_rows();
        c.mask = Mask::kCausalBottomRight;
        c.window_left = c.window_right = -1;
        break;
      case 1:  // row i sees [i - left, i + right]: none for i >= seqlen_k + left
        how = "window-tl";
        fewer_keys_than_rows();
        c.mask = Mask::kWindowTopLeft;
        c.window_left = *gen::inRange<int64_t>(0, c.seqlen_q - c.seqlen_k).as("window left");
        c.window_right = *gen::element<int64_t>(-1, 0, 3).as("window right");
        break;
      case 2:  // row i sees [d - left, d + right], d = i + seqlen_k - seqlen_q: none for d + right < 0
        how = "window-br";
        fewer_keys_than_rows();
        c.mask = Mask::kWindowBottomRight;
        c.window_left = *gen::element<int64_t>(-1, 0, 5).as("window left");
        c.window_right = *gen::inRange<int64_t>(0, c.seqlen_q - c.seqlen_k).as("window right");
        break;
      default: {
        how = "sequence-without-keys";
        Sequence& s = c.seqs[static_cast<size_t>(*gen::inRange<size_t>(0, c.seqs.size()).as("sequence without keys"))];
        s.k = 0;
        s.q = std::max<int64_t>(s.q, 1);
        fit_to_sequences(&c);
        break;
      }
    }
    c.inject.clear();
    in = inputs_for(c);
    blind = rows_without_keys(in);
  }
  note_case(c);
  if (blind.empty()) RC_DISCARD("every row sees a key");
  note_coverage(std::string("rows-without-keys=") + how);
  if (c.sink) note_coverage("rows-without-keys=with-sink");
  const BackwardOutputs out = run_grad(in);
  // dQ_i = scale sum_j dT_ij k_j over no keys: 0 exactly, whatever the sink or the softcap; such a row adds nothing to
  // any dK or dV, and to its head's dsink -P_sink D_i, finite wherever fp32 holds the sum (the oracle's bound is
  // finite; near-max V can overflow D = dO.O, outside the domain).
  const Params& p = in.params;
  for (const auto& [b, i] : blind)
    for (int64_t h = 0; h < p.heads_q; ++h)
      for (int64_t col = 0; col < p.head_dim; ++col) {
        const double x = out.dq[static_cast<size_t>(row_index(p, b, h, i) * p.head_dim + col)];
        if (!(x == 0.0)) {
          RC_LOG() << "dQ of row (" << b << ", " << h << ", " << i << ") column " << col << ": " << x
                   << "; the row sees no key\n";
          RC_FAIL("a row without keys has a dQ other than 0");
        }
      }
  const oracle::GradientCheck bounds = backward_bounds(in, out);
  for (size_t h = 0; h < out.dsink.size(); ++h) {
    if (std::isfinite(bounds.dsink[h]) && !std::isfinite(out.dsink[h])) {  // a finite bound: fp32 holds every term
      RC_LOG() << "dsink[" << h << "]: " << out.dsink[h] << " with rows that see no key (bound " << bounds.dsink[h] << ")\n";
      RC_FAIL("a row without keys made dsink non-finite");
    }
  }
  RC_ASSERT(judged(c, in, out, &bounds).pass);
}

}  // namespace flashcheck::properties
