// Property 5: the documented NaN / Inf semantics (attention.h), row by row, on cases with NaN, +-Inf and
// -0.0 injected into Q, K or V at chosen positions, hidden ones included. Rows no non-finite value reaches
// are held to the oracle (the verdict); rows it reaches are classified here from the IEEE value of every
// visible score (computed in double, after the softcap if the case has one: NaN, +inf, -inf or finite; the
// class does not depend on the order of the sum) and the non-finite entries of the visible V rows:
//   a NaN score            -> O all NaN, LSE NaN
//   else a +inf score      -> O all NaN (inf - inf), LSE NaN or +inf
//   no visible finite score (no key, or all -inf) -> O = 0, LSE = -inf (the sink's value with a finite sink)
//   else (finite max)      -> LSE finite; O[d] NaN if a visible V[., d] is NaN or both infinities occur,
//                             +-inf or NaN if one infinity occurs (p * inf, or 0 * inf), finite otherwise.
// A row the oracle puts outside the error model's domain (fp32 scores or the accumulator may overflow: an injected
// largest finite value, with or without an infinity beside it, inf - inf = NaN in fp32) has no class: only the
// verdict's "non-finite where the oracle is" holds there.
// A softcap maps +-inf scores to +-softcap: only NaN stays non-finite. The sink of the row's head overrides
// all of it when it is not finite: NaN makes the row NaN; +inf takes all the weight, LSE = +inf and O = 0 where
// the accumulator is finite (0 * inf = NaN elsewhere); -inf is no sink.
#include <rapidcheck.h>

#include <cmath>
#include <set>
#include <string>

#include "checks.h"
#include "generators.h"
#include "properties.h"
#include "tier.h"

namespace flashcheck::properties {
namespace {

enum class RowClass { kNanScore, kPosInfScore, kNoVisibleScore, kFiniteMax, kOverflow };

const char* to_string(RowClass k) {
  switch (k) {
    case RowClass::kNanScore: return "NaN score";
    case RowClass::kPosInfScore: return "+inf score";
    case RowClass::kNoVisibleScore: return "no visible finite score";
    case RowClass::kFiniteMax: return "finite max";
    case RowClass::kOverflow: return "fp32 overflow";
  }
  return "?";
}

RowClass classify_row(const HostInputs& in, int64_t b, int64_t h, int64_t i, const KeyRange& keys) {
  const Params& p = in.params;
  const int64_t g = h / (p.heads_q / p.heads_kv);
  const double cap = static_cast<double>(p.softcap);
  bool nan = false, pos_inf = false, finite = false;
  for (int64_t j = keys.begin; j < keys.end; ++j) {
    double dot = 0.0;
    for (int64_t d = 0; d < p.head_dim; ++d) dot += input_value(in, 'q', b, h, i, d) * input_value(in, 'k', b, g, j, d);
    const double scaled = static_cast<double>(p.softmax_scale) * dot;
    const double s = cap > 0 ? cap * std::tanh(scaled / cap) : scaled;
    nan |= std::isnan(s);
    pos_inf |= s == INFINITY;
    finite |= std::isfinite(s);
  }
  if (nan) return RowClass::kNanScore;
  if (pos_inf) return RowClass::kPosInfScore;
  if (!finite) return RowClass::kNoVisibleScore;
  return RowClass::kFiniteMax;
}

}  // namespace

void special_values_follow_semantics() {
  const Case c = *gen_special_case(default_options());
  note_case(c);
  const HostInputs in = inputs_for(c);
  const Params& p = in.params;
  const bool with_stats = active_backend() == Backend::kHostModel || gpu_instrumentation_linked();
  const RunOutputs out = run_backend(in, with_stats);
  JudgeOptions options = judge_options();
  options.check_stats = with_stats;
  assert_verdict(judge(c, in, out, options));

  // The (batch, query head) slices an injection can reach.
  const int64_t group = p.heads_q / p.heads_kv;
  std::set<std::pair<int64_t, int64_t>> slices;
  for (const Injection& inj : c.inject) {
    if (inj.tensor == 'q') {
      slices.insert({inj.b, inj.h});
    } else {
      for (int64_t h = inj.h * group; h < (inj.h + 1) * group; ++h) slices.insert({inj.b, h});
    }
  }
  for (const auto& slice : slices) {
    const int64_t b = slice.first, h = slice.second;  // not a structured binding: lambdas capture it (clang 14)
    const int64_t g = h / group;
    const double sink = in.sink.empty() ? -INFINITY : in.sink_exact[static_cast<size_t>(h)];
    for (int64_t i = 0; i < p.seqlen_q; ++i) {
      const KeyRange keys = judged_visible_keys(p, i);
      const int64_t visible = keys.size();
      RowClass kind = classify_row(in, b, h, i, keys);
      // Outside the domain by the error model of the run's path (the tensor-core path's accumulator limit and
      // vacuous bounds included); a non-finite score keeps its class, whose semantics hold whatever the rest.
      const ExactRow e = exact_row(in, out.config, {b, h, i});
      if (e.exact.score_overflow || e.exact.accum_overflow || (e.bound.unconstrained && !e.exact.nonfinite_score)) {
        kind = RowClass::kOverflow;
      }
      note_coverage(std::string("row=") + to_string(kind));
      const float lse = out.lse[static_cast<size_t>(row_index(p, b, h, i))];
      // Logged only when a check fails: the row, its class, and the offending value.
      auto expect = [&](bool holds, int64_t col, double got, const char* want) {
        if (holds) return;
        RC_LOG() << "row [b=" << b << ", h=" << h << ", i=" << i << "] (" << to_string(kind) << ", " << visible
                 << " visible keys): " << (col < 0 ? std::string("LSE") : "O[" + std::to_string(col) + "]") << " = "
                 << got << ", documented: " << want << "\n";
        RC_FAIL("special-value semantics violated");
      };
      // A subject without LSE output is held to the O half of the semantics.
      auto expect_lse = [&](bool holds, const char* want) { expect(holds || !out.lse_written, -1, lse, want); };
      if (std::isnan(sink) || sink == INFINITY) {
        note_coverage(std::isnan(sink) ? "row=NaN sink" : "row=+inf sink");
        expect_lse(std::isnan(sink) ? std::isnan(lse) : lse == INFINITY, std::isnan(sink) ? "NaN" : "+inf");
        for (int64_t d = 0; d < value_head_dim(p); ++d) {
          const double o = out.o[static_cast<size_t>(o_index(p, b, h, i, d))];
          expect(std::isnan(sink) ? std::isnan(o) : (o == 0.0 || std::isnan(o)), d, o,
                 std::isnan(sink) ? "NaN" : "0 (NaN where the accumulator is not finite)");
        }
        continue;
      }
      // Two fp32 roundings and two rounded constants take the sink to the kernel's LSE (verdict.cpp).
      const bool lse_is_sink = std::fabs(lse - sink) <= 0x1p-21 * std::fabs(sink) + 0x1p-148;
      switch (kind) {
        case RowClass::kNanScore: expect_lse(std::isnan(lse), "NaN"); break;
        case RowClass::kPosInfScore: expect_lse(std::isnan(lse) || lse == INFINITY, "NaN or +inf"); break;
        case RowClass::kNoVisibleScore: expect_lse(sink == -INFINITY ? lse == -INFINITY : lse_is_sink, "-inf, or the sink"); break;
        case RowClass::kFiniteMax: expect_lse(std::isfinite(lse), "finite"); break;
        case RowClass::kOverflow: break;
      }
      if (kind == RowClass::kOverflow) continue;
      for (int64_t d = 0; d < value_head_dim(p); ++d) {
        const double o = out.o[static_cast<size_t>(o_index(p, b, h, i, d))];
        bool v_nan = false, v_pos = false, v_neg = false;
        for (int64_t j = keys.begin; j < keys.end; ++j) {
          const double v = input_value(in, 'v', b, g, j, d);
          v_nan |= std::isnan(v);
          v_pos |= v == INFINITY;
          v_neg |= v == -INFINITY;
        }
        switch (kind) {
          case RowClass::kNanScore:
          case RowClass::kPosInfScore: expect(std::isnan(o), d, o, "NaN"); break;
          case RowClass::kNoVisibleScore: expect(o == 0.0, d, o, "0"); break;
          case RowClass::kFiniteMax:
            if (v_nan || (v_pos && v_neg)) {
              expect(std::isnan(o), d, o, "NaN (NaN or both infinities in the visible V column)");
            } else if (v_pos) {
              expect(std::isnan(o) || o == INFINITY, d, o, "+inf or NaN (+inf in the visible V column)");
            } else if (v_neg) {
              expect(std::isnan(o) || o == -INFINITY, d, o, "-inf or NaN (-inf in the visible V column)");
            } else {
              expect(std::isfinite(o), d, o, "finite");
            }
            break;
          case RowClass::kOverflow: break;  // left above: beyond fp32, the verdict judges it
        }
      }
    }
  }
}

}  // namespace flashcheck::properties
