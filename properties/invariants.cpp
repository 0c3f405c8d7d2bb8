// Property 2: online-softmax invariants, from the instrumented build (the host model's instrumentation in
// the CPU tier, flashcheck_kernel_instrumented in the GPU tier; the production kernel carries none of it,
// see the ProductionBuild test). For every row with a visible key (window masks: the keys of its window):
//   1 <= l <= visible keys (x 2^8 on the tensor-core path);  LSE = m + ln l;  final m = the exact row max within
//   the score bound (on the tensor-core path, whose m is the reference of its last tile, within it of
//   [max - 8 ln 2, max]);
// for rows with no visible key: m = -inf, l = 0, LSE = -inf, O = 0; and for traced rows, after each K/V
// tile: m never decreases (tensor-core path: never more than 8 ln 2 below an earlier m) and l * e^m never
// decreases. A finite sink s of the row's head is merged into the final state (common/epilogue.h,
// finish_row): m = max(m, s), l counts its term e^(s - m), so 1 <= l <= visible keys (x 2^8) + 1, LSE = m + ln l
// still, and a row without keys has m = LSE = s, l = 1, O = 0; the per-tile traces are the state before the
// merge, so the final m is max(last traced m, s). Tolerances are a few fp32 roundings scaled by |m| (the kernel
// works with m * scale * log2(e) in fp32), never flat. Rows whose scores the oracle puts outside the domain (a score
// that leaves fp32) or whose bound is vacuous have no invariants.
#include <rapidcheck.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "checks.h"
#include "generators.h"
#include "properties.h"
#include "tier.h"

namespace flashcheck::properties {
namespace {

constexpr double kFp32Slack = 0x1p-20;  // 16 fp32 unit roundoffs

std::string row_name(const Params& p, int64_t flat) {
  std::ostringstream os;
  os << "row [b=" << flat / (p.heads_q * p.seqlen_q) << ", h=" << (flat / p.seqlen_q) % p.heads_q
     << ", i=" << flat % p.seqlen_q << "]";
  return os.str();
}

// Fails the property with the row and the values involved.
void expect(bool holds, const Params& p, int64_t flat, const std::string& what) {
  if (holds) return;
  RC_LOG() << row_name(p, flat) << ": " << what << "\n";
  RC_FAIL("online-softmax invariant violated at " + row_name(p, flat) + ": " + what);
}

std::string values(std::initializer_list<std::pair<const char*, double>> named) {
  std::ostringstream os;
  os.precision(9);
  for (const auto& [name, x] : named) os << ' ' << name << '=' << x;
  return os.str();
}

}  // namespace

void online_softmax_invariants(const Case& given) {
  // NaN and infinities have no invariants; finite injections (ties) stay, and so do sinks of -inf (no sink).
  Case c = given;
  std::erase_if(c.inject, [](const Injection& inj) { return !std::isfinite(inj.value); });
  if (c.sink && c.sink->kind == DistKind::kConst && !std::isfinite(c.sink->a) && c.sink->a != -INFINITY) c.sink.reset();
  note_case(c);
  const HostInputs in = inputs_for(c);
  const Params& p = in.params;
  const RunOutputs out = run_backend(in, /*instrument=*/true);
  RC_ASSERT(out.row_m.size() == out.lse.size());
  RC_ASSERT(out.row_l.size() == out.lse.size());
  const KernelConfig& config = out.config;
  const int64_t rows = p.batch * p.heads_q * p.seqlen_q;
  // How far m may lie below the row max (and so how much l may exceed the key count): the tensor-core path's
  // reference steps down to a tile's own max within the slack of the running max.
  const double ref_slack =
      config.path == ComputePath::kTensorCore ? oracle::kTensorCoreRefSlackLog2 * std::log(2.0) : 0.0;

  // The sink of flat row `flat`'s head: -inf (no sink) without one.
  auto sink_of = [&](int64_t flat) {
    return in.sink.empty() ? -INFINITY : in.sink_exact[static_cast<size_t>((flat / p.seqlen_q) % p.heads_q)];
  };
  int64_t rows_with_sink = 0;
  // Whether the row's statistics are outside the domain, asked once per row: a score that leaves fp32, or no finite
  // bound at the row's length (RowBound::vacuous). The rest of RowBound::unconstrained, an O accumulator that may
  // overflow, leaves m and l alone.
  std::map<int64_t, bool> outside_domain_of;
  const auto stats_outside_domain = [](const ExactRow& e) {
    return e.exact.nonfinite_score || e.exact.score_overflow || e.bound.vacuous;
  };
  auto outside_domain = [&](int64_t flat) {
    auto [it, added] = outside_domain_of.try_emplace(flat, false);
    if (added) {
      it->second = stats_outside_domain(exact_row_without_sink(in, config, row_ref(p, flat)));
    }
    return it->second;
  };

  // Final statistics of every row, with each sequence's own rows and keys as the oracle counts them.
  const oracle::Problem judged = in.problem();
  for (int64_t flat = 0; flat < rows; ++flat) {
    const size_t r = static_cast<size_t>(flat);
    // Each sequence's own rows and keys (its rows past seqlen_q(b) are not rows of the problem).
    const int64_t b = flat / (p.heads_q * p.seqlen_q), i = flat % p.seqlen_q;
    if (i >= oracle::sequence_seqlen_q(judged, b)) continue;
    const double m = out.row_m[r], l = out.row_l[r], lse = out.lse[r];
    const int64_t visible = judged_visible_keys(judged, b, i).size();
    const double sink = sink_of(flat);
    const bool has_sink = sink != -INFINITY;
    rows_with_sink += has_sink ? 1 : 0;
    const std::string vals =
        values({{"m", m}, {"l", l}, {"lse", lse}, {"visible", double(visible)}, {"sink", sink}});
    if (visible == 0) {
      if (has_sink) {
        const double sink_slack = kFp32Slack * (1.0 + std::fabs(sink));
        expect(std::fabs(m - sink) <= sink_slack && l == 1.0 && std::fabs(lse - sink) <= sink_slack, p, flat,
               "no visible key with a sink needs m = LSE = sink, l = 1:" + vals);
      } else {
        expect(m == -INFINITY && l == 0.0 && lse == -INFINITY, p, flat,
               "no visible key needs m = -inf, l = 0, LSE = -inf:" + vals);
      }
      for (int64_t d = 0; d < value_head_dim(p); ++d) {
        const size_t at = r * static_cast<size_t>(value_head_dim(p)) + static_cast<size_t>(d);
        expect(out.o[at] == 0.0, p, flat, "no visible key needs O = 0");
      }
      continue;
    }
    if (!std::isfinite(m)) continue;  // scores beyond fp32 (outside the domain); the oracle rows below decide
    const double slack = kFp32Slack * (1.0 + std::fabs(m) + static_cast<double>(visible));
    const double l_max = (static_cast<double>(visible) * std::exp(ref_slack) + (has_sink ? 1.0 : 0.0)) * (1.0 + slack);
    const bool l_holds = l >= 1.0 - slack && l <= l_max;
    const bool sink_holds = !has_sink || m >= sink - kFp32Slack * (1.0 + std::fabs(sink));
    const double lse_slack = kFp32Slack * (1.0 + std::fabs(m) + std::fabs(std::log(l)));
    const bool lse_holds = std::fabs(lse - (m + std::log(l))) <= lse_slack;
    // A finite m does not place a row in the domain: one score can overflow to a NaN (0 * inf from a zero
    // scale) that the max skips and l does not. A row that breaks an invariant is excused only where the oracle
    // puts it outside the domain (asked then, so rows beyond the sample are judged too).
    if ((!l_holds || !sink_holds || !lse_holds) && outside_domain(flat)) continue;
    expect(l_holds, p, flat, "1 <= l <= visible keys (x e^slack on the tensor-core path, + 1 with a sink):" + vals);
    expect(sink_holds, p, flat, "m below the sink:" + vals);
    expect(lse_holds, p, flat, "LSE = m + ln l:" + vals);
  }

  if (rows_with_sink > 0) note_coverage("stats=rows-with-sink");

  // Final m against the exact row max, on the rows the oracle checks: the max of the keys' scores (the oracle's
  // row of the problem without its sink, whatever it makes of sinks), or the sink where that lies above it.
  // Rows whose scores leave fp32 (a NaN score, such as 0 * inf from a zero scale and an overflowing dot
  // product) are outside the domain: their statistics have no invariants, here or in the traces below.
  const std::vector<oracle::RowRef> sample = rows_to_check(in, config, c.seed);
  for (const oracle::RowRef& ref : sample) {
    const ExactRow e = exact_row_without_sink(in, config, ref);
    const int64_t flat = row_index(p, ref.b, ref.h, ref.i);
    outside_domain_of[flat] = stats_outside_domain(e);
    if (e.bound.unconstrained || e.exact.visible == 0) continue;  // no bound on m to check it against
    const double m = out.row_m[static_cast<size_t>(flat)];
    const double sink = sink_of(flat);
    const double sink_slack = kFp32Slack * (1.0 + std::fabs(sink));
    const bool is_keys_max = oracle::m_error_ratio(e.exact, e.bound, m) <= 1.0 && m >= sink - sink_slack;
    const bool is_sink = std::fabs(m - sink) <= sink_slack && sink >= e.exact.m - e.bound.m - e.bound.m_below;
    expect(is_keys_max || is_sink, p, flat,
           "final m vs max(exact row max, sink):" + values({{"m", m}, {"exact", e.exact.m}, {"bound", e.bound.m},
                                                            {"allowed below", e.bound.m_below}, {"sink", sink}}));
  }

  // Per-tile traces of up to 16 of those rows, spread over the sample, from a second run that also counts
  // tile kinds and rescales.
  RunOptions traced_options;
  traced_options.model.defect = planted_defect();
  traced_options.count_tiles = true;
  const size_t stride = std::max<size_t>(1, sample.size() / 16);
  for (size_t s = 0; s < sample.size() && traced_options.trace_rows.size() < 16; s += stride) {
    traced_options.trace_rows.push_back(row_index(p, sample[s].b, sample[s].h, sample[s].i));
  }
  const int64_t tiles = config.block_n > 0 ? (p.seqlen_k + config.block_n - 1) / config.block_n : 0;
  traced_options.trace_tiles = static_cast<int32_t>(std::max<int64_t>(tiles, 1));
  const RunOutputs traced = run_case(in, active_backend(), traced_options);
  if (!traced.status.ok()) RC_LOG() << "traced run: " << traced.status.message() << "\n";
  RC_ASSERT(traced.status.ok());
  const std::vector<int64_t>& trace_rows = traced_options.trace_rows;
  const int32_t max_tiles = traced_options.trace_tiles;
  int moved_every_tile = 0;
  for (size_t t = 0; t < trace_rows.size(); ++t) {
    const int64_t flat = trace_rows[t];
    if (outside_domain(flat)) continue;
    std::vector<std::pair<double, double>> steps;  // (m, l) after each recorded tile
    for (int32_t k = 0; k < max_tiles; ++k) {
      const size_t slot = t * static_cast<size_t>(max_tiles) + static_cast<size_t>(k);
      if (is_unwritten(traced.trace_m[slot])) continue;
      steps.emplace_back(traced.trace_m[slot], traced.trace_l[slot]);
    }
    bool every = steps.size() >= 2;
    double m_high = -INFINITY;  // largest m traced so far
    for (size_t k = 0; k < steps.size(); ++k) {
      const auto [m, l] = steps[k];
      if (m == -INFINITY) {
        expect(l == 0.0, p, flat, "tile " + std::to_string(k) + ": m = -inf needs l = 0:" + values({{"l", l}}));
        every = false;
        continue;
      }
      if (!std::isfinite(m)) break;  // outside the domain
      expect(l >= 1.0 - kFp32Slack * (1.0 + std::fabs(m)), p, flat,
             "tile " + std::to_string(k) + ": l >= 1 once a key is seen:" + values({{"m", m}, {"l", l}}));
      const double m_floor = m_high - ref_slack - kFp32Slack * (1.0 + std::fabs(m_high));
      m_high = std::max(m_high, m);
      if (k == 0 || steps[k - 1].first == -INFINITY) continue;
      const auto [m0, l0] = steps[k - 1];
      expect(ref_slack > 0 || m >= m0, p, flat,
             "tile " + std::to_string(k) + ": m decreased:" + values({{"m_before", m0}, {"m", m}}));
      expect(m >= m_floor, p, flat,
             "tile " + std::to_string(k) + ": m fell more than the reference slack below an earlier m:" +
                 values({{"m_highest_before", m_high}, {"m", m}, {"slack", ref_slack}}));
      every = every && m > m0;
      // l * e^m in the log domain: ln l + m, with the rescale's fp32 roundings scaled by |m|.
      const double before = std::log(l0) + m0, after = std::log(l) + m;
      const double slack = kFp32Slack * (1.0 + std::fabs(m) + std::fabs(m0));
      expect(after >= before - slack, p, flat,
             "tile " + std::to_string(k) + ": l * e^m decreased:" +
                 values({{"m_before", m0}, {"l_before", l0}, {"m", m}, {"l", l}}));
    }
    if (!steps.empty() && std::isfinite(steps.back().first)) {
      // The sink merges after the last tile: the final m is the last traced m, or the sink where it is above.
      const double m_final = out.row_m[static_cast<size_t>(flat)], m_traced = steps.back().first;
      const double sink = sink_of(flat);
      const bool same = m_final == m_traced ||
                        (sink != -INFINITY && std::fabs(m_final - std::max(m_traced, sink)) <=
                                                  kFp32Slack * (1.0 + std::fabs(m_final)));
      expect(same, p, flat,
             "the final m is the last traced m (or the sink above it):" +
                 values({{"traced", m_traced}, {"final", m_final}, {"sink", sink}}));
    }
    moved_every_tile += every ? 1 : 0;
  }
  if (moved_every_tile > 0) note_coverage("trace=max-moved-on-every-tile");
  int top_bucket = -1;
  for (int b = 0; b < kRescaleBuckets; ++b) {
    if (traced.rescale_buckets[static_cast<size_t>(b)] > 0) top_bucket = b;
  }
  if (top_bucket >= 0) note_coverage("max-moves=bucket" + std::to_string(top_bucket));
}

}  // namespace flashcheck::properties
