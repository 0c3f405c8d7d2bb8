// The verdict: every sampled row of the kernel's output against the oracle's exact row and the error
// model's bound, as ratios error / bound (fail above 1); the API's non-finite semantics; the online-softmax
// statistics and their identity; the statistical RMS check; and the runner's guards. The report leads with
// the case line and gives, per check, the worst ratio with its index and the values there.
#include "flashcheck/verdict.h"

#include "flashcheck/dtype.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "flashcheck/oracle_bridge.h"

namespace flashcheck {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kFp32Unit = 0x1p-24;  // unit roundoff of fp32, the format of LSE, m and l

// LSE = m + ln l, evaluated by the kernel in fp32 from its own m and l: whatever the formulation (natural
// log, or log2 with the scale folded in and a final multiply by ln 2), it is at most four fp32 operations
// (a log, a multiply, an add, a conversion of units), each with relative error <= u on its result, whose
// magnitudes are bounded by |m| + |ln l|; we allow twice that (8u) for a log approximation that is a few
// ulp off. Fast hardware logs (__logf, MUFU.LG2) have an absolute rather than relative error near 1
// (about 2^-21.4 for __logf on [1/2, 2]): kFastLogAbs covers it where |ln l| is tiny.
constexpr double kIdentityRelUnits = 8.0;
constexpr double kFastLogAbs = 0x1p-21;

std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  va_list args_copy;
  va_copy(args_copy, args);
  const int length = std::vsnprintf(nullptr, 0, fmt, args_copy);
  va_end(args_copy);
  std::string out(static_cast<size_t>(length > 0 ? length : 0), '\0');
  std::vsnprintf(out.data(), out.size() + 1, fmt, args);  // its terminator lands on the string's own (a \0: allowed)
  va_end(args);
  return out;
}

// error / bound for values the oracle has no ratio function for (the identity, fixed semantics of empty
// rows): a non-finite got, or any error against a zero bound, is infinitely bad.
double ratio_of(double got, double want, double bound) {
  if (!std::isfinite(got)) return kInf;
  const double err = std::fabs(got - want);
  if (err == 0) return 0.0;
  if (!(bound > 0)) return kInf;
  return err / bound;
}

void record(Worst* worst, double ratio, const oracle::RowRef& row, int64_t col, double got, double want, double bound) {
  if (std::isnan(ratio)) ratio = kInf;  // oracle::error_ratio's NaN: a non-finite value where a number was expected
  ++worst->checked;
  if (ratio > 1) ++worst->over;
  if (worst->checked == 1 || ratio > worst->ratio) {  // the first value sets the place, a strictly worse one moves it
    worst->ratio = ratio;
    worst->where = row;
    worst->col = col;
    worst->got = got;
    worst->want = want;
    worst->bound = bound;
  }
}

std::string where_text(const Worst& w) {
  if (w.col >= 0) {
    return format("b=%lld h=%lld i=%lld col=%lld", static_cast<long long>(w.where.b), static_cast<long long>(w.where.h),
                  static_cast<long long>(w.where.i), static_cast<long long>(w.col));
  }
  return format("b=%lld h=%lld i=%lld", static_cast<long long>(w.where.b), static_cast<long long>(w.where.h),
                static_cast<long long>(w.where.i));
}

// One line per check: the worst ratio, where, and got / want / bound there.
std::string worst_text(const char* name, const Worst& w) {
  if (w.checked == 0) return format("  %-12s not checked", name);
  std::string line = format("  %-12s worst ratio %-10.3g %s  at %s: got %.9g want %.9g bound %.3g", name, w.ratio,
                            w.ratio > 1 ? "FAIL" : "ok  ", where_text(w).c_str(), w.got, w.want, w.bound);
  if (w.over > 0) line += format("  (%lld of %lld over)", static_cast<long long>(w.over), static_cast<long long>(w.checked));
  return line;
}

void add_failure_if_over(Verdict* v, const char* name, const Worst& w) {
  if (!(w.ratio <= 1)) {
    v->failures.push_back(format("%s: error/bound %.3g > 1 at %s: got %.9g want %.9g bound %.3g (%lld of %lld over)", name,
                                 w.ratio, where_text(w).c_str(), w.got, w.want, w.bound, static_cast<long long>(w.over),
                                 static_cast<long long>(w.checked)));
  }
}

const char* status_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "ok";
    case StatusCode::kInvalidArgument:
      return "invalid argument";
    case StatusCode::kUnsupported:
      return "unsupported";
    case StatusCode::kCudaError:
      return "CUDA error";
    case StatusCode::kNoDevice:
      return "no device";
  }
  return "unknown status";
}

// Where a sink's exponent leaves fp32: |sink| * log2(e) beyond FLT_MAX / 4, the oracle's threshold for scores
// (oracle.h, score_overflow). Such a sink is outside the kernel's domain: no claim on its rows.
constexpr double kSinkDomain = 0x1p126 / 1.4426950408889634;

// The API's rows without a visible key (or whose visible scores are all -inf), attention.h: O exactly 0, LSE
// -inf, and in the instrumentation m = -inf, l = 0. With a sink s of the row's head the sink is the row's one
// logit: O = 0 still, LSE = m = s (the kernel's m is s taken to log2 units and back, two fp32 roundings with
// two rounded constants, so within 8u |s| plus a subnormal's absolute rounding), l = 1 exactly; a NaN sink
// gives a NaN row, +inf gives O = 0 and LSE = m = +inf.
void judge_empty_row(const oracle::RowRef& row, int64_t flat, const RunOutputs& out, int64_t value_dim, double sink,
                     bool stats, Verdict* v) {
  ++v->empty_rows;
  const bool nan_sink = std::isnan(sink);
  if (!nan_sink && std::fabs(sink) != kInf && std::fabs(sink) > kSinkDomain) {
    ++v->no_claim_rows;
    return;
  }
  for (int64_t k = 0; k < value_dim; ++k) {
    const double got = out.o[static_cast<size_t>(flat * value_dim + k)];
    const bool ok = nan_sink ? std::isnan(got) : got == 0.0;
    record(&v->o, ok ? 0.0 : kInf, row, k, got, nan_sink ? sink : 0.0, 0.0);
  }
  // LSE and m against the sink (-inf without one): exact where it is infinite, within the bound otherwise.
  const double sink_bound = std::isfinite(sink) ? kIdentityRelUnits * kFp32Unit * std::fabs(sink) + 0x1p-148 : 0.0;
  auto against_sink = [&](double got) {
    if (nan_sink) return std::isnan(got) ? 0.0 : kInf;
    if (!std::isfinite(sink)) return got == sink ? 0.0 : kInf;
    return ratio_of(got, sink, sink_bound);
  };
  const double lse = out.lse[static_cast<size_t>(flat)];
  if (out.lse_written) record(&v->lse, against_sink(lse), row, -1, lse, sink, sink_bound);
  if (stats) {
    const double m = out.row_m[static_cast<size_t>(flat)], l = out.row_l[static_cast<size_t>(flat)];
    const bool has_sink = sink != -kInf;
    const double want_l = nan_sink ? sink : (has_sink ? 1.0 : 0.0);
    record(&v->m, against_sink(m), row, -1, m, sink, sink_bound);
    record(&v->l, (nan_sink ? std::isnan(l) : l == want_l) ? 0.0 : kInf, row, -1, l, want_l, 0.0);
  }
}

// True when every key row `row` sees scores -inf (zero weight): the empty-row semantics apply. Used for rows
// with a sink, where the oracle's LSE is the sink's rather than -inf; scores in double from the inputs, as the
// oracle defines them (IEEE arithmetic: an inf - inf among the products is NaN, a usable score). A softcap maps
// -inf to -softcap, a usable logit, so with one only a row without visible keys is empty.
bool no_usable_key(const oracle::Problem& p, const oracle::RowRef& row) {
  const oracle::KeySpan keys = oracle::visible_keys(p, row.b, row.i);
  if (p.softcap > 0) return keys.size() == 0;
  const int64_t g = row.h / (p.heads_q / p.heads_kv);
  const double* q = p.q.data() + ((row.b * p.heads_q + row.h) * p.seqlen_q + row.i) * p.head_dim;
  for (int64_t j = keys.begin; j < keys.end; ++j) {
    const double* k = p.k.data() + ((row.b * p.heads_kv + g) * p.seqlen_k + j) * p.head_dim;
    double dot = 0.0;
    for (int64_t d = 0; d < p.head_dim; ++d) dot += q[d] * k[d];
    if (!(p.scale * dot == -kInf)) return false;
  }
  return true;
}

// ---- The oracle's side of each row, computed ahead of the checks in parallel over rows (oracle::compute_rows),
// kChunkRows rows at a time so that memory stays bounded for problems of any size. Each row's slot is written
// by the one thread that computed the row: the checks that follow see the same values for any thread count.
constexpr size_t kVacuousListed = 8;  // vacuous rows named in the report
constexpr size_t kRmsRowsListed = 3;  // rows named with their share of the RMS check's kernel error
constexpr size_t kChunkRows = 1024;

struct RowPrep {
  bool empty = false;             // the empty-row semantics apply (no visible key, or no usable one)
  oracle::RowBound bound;         // the error model's bound (rows that are not empty)
  std::vector<double> emulated;   // the emulated reference (with check_rms: constrained rows whose weights the bound pins down)
};

struct RowChunk {
  std::vector<oracle::RowResult> exact;
  std::vector<RowPrep> prep;
};

// The arithmetic classes a subject that declares none may compute in, for its dtype (docs/error-model.md §3.1); with
// a dropout only the general class, the one whose bound the error model derives for it (§4.13).
std::vector<oracle::Arithmetic> generic_classes(const Params& params) {
  if (params.dropout_p > 0.0f) return {oracle::Arithmetic::kGeneralFp32};
  const DTypeInfo* info = find_dtype(params.dtype);
  if (info != nullptr && info->tensor_core_input) {
    return {oracle::Arithmetic::kGeneralFp32, oracle::Arithmetic::kTensorCore};
  }
  return {oracle::Arithmetic::kGeneralFp32, oracle::Arithmetic::kSplitTf32};
}

}  // namespace

// The bound a row is judged by: its class's (oracle_bound) for flashcheck's own kernel and model and for a subject
// that declares a class and a key tile; otherwise §3.1: without a declared tile every key is its own tile and the
// running sums (which assume tile boundaries) are not used; without a declared class, the largest bound of the
// dtype's classes, element by element. Split-KV runs (outputs.splits > 1) count as §4.10 says.
oracle::RowBound judged_bound(const oracle::Problem& problem, const oracle::RowRef& row, const oracle::RowResult& exact,
                              const Params& params, const RunOutputs& outputs) {
  const KernelConfig& config = outputs.config;
  if (!outputs.generic_bound && outputs.tiling_declared) {
    return oracle_bound(problem, row, exact, params, config, outputs.splits);
  }
  const std::vector<oracle::Arithmetic> classes =
      outputs.generic_bound ? generic_classes(params) : std::vector<oracle::Arithmetic>{to_oracle(config.path)};
  const int32_t block_n = outputs.tiling_declared ? config.block_n : 0;
  // Running sums only for a declared tiling run unsplit (they model the unsplit key order).
  const bool use_sums = outputs.tiling_declared && outputs.splits <= 1;
  oracle::OrderedSums sums;
  if (use_sums) sums = oracle::ordered_sums(problem, row, exact, block_n);
  const oracle::OrderedSums* sums_used = use_sums ? &sums : nullptr;
  oracle::RowBound bound;
  for (size_t i = 0; i < classes.size(); ++i) {
    const oracle::RowBound b = oracle::bound_row(exact, to_oracle(params.dtype), classes[i], block_n, params.head_dim,
                                                 sums_used, outputs.splits);
    if (i == 0) {
      bound = b;
      continue;
    }
    for (size_t k = 0; k < bound.o.size(); ++k) {
      bound.o[k] = std::max(bound.o[k], b.o[k]);
      bound.o_flush[k] = std::max(bound.o_flush[k], b.o_flush[k]);  // bound_row sizes both as O's columns
    }
    bound.lse = std::max(bound.lse, b.lse);
    bound.m = std::max(bound.m, b.m);
    bound.m_below = std::max(bound.m_below, b.m_below);
    bound.l_rel = std::max(bound.l_rel, b.l_rel);
    bound.unconstrained = bound.unconstrained || b.unconstrained;
    bound.vacuous = bound.vacuous || b.vacuous;
  }
  return bound;
}

namespace {

// The same-precision reference of the RMS check: the class's emulation, or for an undeclared class the element
// farthest from the exact value among the dtype's classes' emulations (the noisier choice, as the ensemble of
// §6 takes it).
std::vector<double> judged_reference(const oracle::Problem& problem, const oracle::RowRef& row,
                                     const oracle::RowResult& exact, const Params& params, const KernelConfig& config,
                                     const RunOutputs& outputs) {
  if (!outputs.generic_bound) return oracle_reference(problem, row, params, config, &exact);
  std::vector<double> reference;
  for (oracle::Arithmetic arithmetic : generic_classes(params)) {
    const std::vector<double> e =
        oracle::emulated_row(problem, row, to_oracle(params.dtype), arithmetic, config.block_n, &exact);
    if (reference.empty()) {
      reference = e;
      continue;
    }
    for (size_t k = 0; k < reference.size(); ++k) {
      if (!(std::fabs(e[k] - exact.o[k]) <= std::fabs(reference[k] - exact.o[k]))) reference[k] = e[k];
    }
  }
  return reference;
}

RowChunk prepare_chunk(const oracle::Problem& problem, std::span<const oracle::RowRef> rows, size_t first,
                       const Params& params, const RunOutputs& outputs, const JudgeOptions& options,
                       int64_t terms_before, int64_t terms_total) {
  const KernelConfig& config = outputs.config;
  const size_t count = std::min(kChunkRows, rows.size() - first);
  const std::span<const oracle::RowRef> chunk_rows(rows.data() + first, count);
  RowChunk chunk;
  chunk.prep.resize(count);
  oracle::RowsOptions rows_options;
  rows_options.per_row = [&](size_t index, const oracle::RowResult& exact) {
    const oracle::RowRef& row = chunk_rows[index];
    RowPrep& prep = chunk.prep[index];
    // No usable key: O = 0 and LSE = -inf (the sink, with one) exactly, unless fp32 scores may overflow (then
    // inf - inf can make the kernel's -inf score NaN: no claim, in judge()). The empty row is recognised from the
    // scores alone, whatever the oracle makes of the sink.
    const double sink = problem.sink.empty() ? -kInf : problem.sink[static_cast<size_t>(row.h)];
    const bool all_minus_inf =
        sink == -kInf ? exact.lse == -kInf && exact.m == -kInf : no_usable_key(problem, row);
    prep.empty = exact.visible == 0 || (all_minus_inf && !exact.score_overflow);
    if (prep.empty) return;
    prep.bound = judged_bound(problem, row, exact, params, outputs);
    // Tiled like the kernel (its block_n): P is rounded relative to the running max, so the reference must
    // see the same tiles to be a like-for-like same-precision computation (fuzz finding
    // model-rms-reference-untiled: a single-tile reference made a healthy model look 1.34x too noisy). Only rows
    // whose weights the bound pins down (the LSE bound below its trivial one): where the scores' error reaches the
    // scale of the weights themselves, as the fp8 path's 14-bit sums do on scores of 10^7, the kernel's and the
    // reference's weights are both arbitrary, and an element whose exact A_k is tiny makes either error unbounded.
    if (options.check_rms && !exact.score_overflow && !prep.bound.unconstrained &&
        prep.bound.lse < prep.bound.lse_trivial) {
      prep.emulated = judged_reference(problem, row, exact, params, config, outputs);
    }
  };
  if (options.progress) {
    rows_options.progress = [&](int64_t done, int64_t) { options.progress(terms_before + done, terms_total); };
  }
  chunk.exact = oracle::compute_rows(problem, chunk_rows, options.tier, rows_options);
  return chunk;
}
// ---- end of the parallel part

}  // namespace

namespace {

// What decides a row's computation, for the RMS check's count of independent draws: its sequence and K/V head (the
// keys, values and descales it reads), its visible keys, its head's sink and its Q row. Two rows with the same key
// are the same computation in any kernel that computes a row from its own inputs, rounded the same way: one draw
// (a case of constant Q repeats one row throughout). Under a dropout each row draws its own mask: every key differs.
// Values enter by their bits, so that equal means identical and NaN orders like any other value.
std::vector<uint64_t> same_computation_key(const oracle::Problem& problem, const oracle::RowRef& row) {
  if (problem.dropout.p > 0) {
    return {static_cast<uint64_t>(row.b), static_cast<uint64_t>(row.h), static_cast<uint64_t>(row.i)};
  }
  const oracle::KeySpan keys = oracle::visible_keys(problem, row.b, row.i);
  const double sink = problem.sink.empty() ? -kInf : problem.sink[static_cast<size_t>(row.h)];
  const int64_t kv_head = row.h / (problem.heads_q / problem.heads_kv);
  std::vector<uint64_t> key{static_cast<uint64_t>(row.b), static_cast<uint64_t>(kv_head),
                            static_cast<uint64_t>(keys.begin), static_cast<uint64_t>(keys.end),
                            std::bit_cast<uint64_t>(sink)};
  const int64_t q0 = ((row.b * problem.heads_q + row.h) * problem.seqlen_q + row.i) * problem.head_dim;
  for (int64_t d = 0; d < problem.head_dim; ++d) {
    key.push_back(std::bit_cast<uint64_t>(problem.q[static_cast<size_t>(q0 + d)]));
  }
  return key;
}

// Keeps `rows` the kRmsRowsListed rows of largest squared kernel error (rms^2 * count), largest first.
void keep_largest_rms_row(std::vector<Verdict::RmsRow>* rows, const Verdict::RmsRow& candidate) {
  const auto weight = [](const Verdict::RmsRow& r) { return r.kernel * r.kernel * static_cast<double>(r.count); };
  auto at = std::find_if(rows->begin(), rows->end(),
                         [&](const Verdict::RmsRow& r) { return weight(candidate) > weight(r); });
  if (at == rows->end() && rows->size() >= kRmsRowsListed) return;
  rows->insert(at, candidate);
  if (rows->size() > kRmsRowsListed) rows->pop_back();
}

// The checks of judge() and judge_slices(): `rows` of `problem` against `outputs` (canonical in `problem`'s shape),
// each reported as the case's row `reported[index]`; rows_total is the case's query rows.
Verdict judge_rows(const Case& c, const Params& params, const oracle::Problem& problem,
                   std::span<const oracle::RowRef> rows, std::span<const oracle::RowRef> reported, int64_t rows_total,
                   const RunOutputs& outputs, const JudgeOptions& options) {
  Verdict v;
  // The subject that ran goes into the line, so that the line replays against it.
  Case shown = c;
  if (shown.subject.empty()) shown.subject = outputs.subject;
  v.case_line = format_case(shown);
  const KernelConfig& config = outputs.config;
  v.config = format("%s path=%s block_m=%d block_n=%d", config.name,
                    outputs.generic_bound ? "generic" : to_string(config.path), config.block_m, config.block_n);
  v.unwritten_o = outputs.unwritten_o;
  v.unwritten_lse = outputs.unwritten_lse;
  v.canaries_intact = outputs.canaries_intact;
  v.inputs_unchanged = outputs.inputs_unchanged;

  const int64_t value_dim = oracle::value_dim(problem);  // O's columns
  // The outputs are canonical [B, Hq, Sq(, value_dim)] of `problem`.
  const int64_t canonical_rows = problem.batch * problem.heads_q * problem.seqlen_q;
  v.rows_total = rows_total;

  if (!outputs.canaries_intact) {
    v.failures.push_back(format("canary damaged: %s, byte %lld relative to the payload start (written out of bounds)",
                                outputs.damaged_buffer, static_cast<long long>(outputs.first_damaged_canary)));
  }
  if (!outputs.inputs_unchanged) {
    v.failures.push_back(*outputs.modified_input != '\0'
                             ? format("inputs modified: the bytes of %s changed during the call", outputs.modified_input)
                             : std::string("inputs modified: their hash changed during the call"));
  }
  if (!outputs.status.ok()) {
    v.failures.push_back(format("call failed: %s: %s", status_name(outputs.status.code()), outputs.status.message().c_str()));
    v.pass = false;
    // A refusal is only a refusal while the guards hold: a call that refused and still wrote out of bounds fails.
    v.outcome = outputs.canaries_intact && outputs.inputs_unchanged ? outcome_of(outputs.status.code()) : Outcome::kFail;
    v.reason = outputs.status.message();
    return v;
  }
  if (outputs.unwritten_o > 0) {
    v.failures.push_back(format("O: %lld of %zu elements never written (still hold the poison NaN)",
                                static_cast<long long>(outputs.unwritten_o), outputs.o.size()));
  }
  if (outputs.lse_written && outputs.unwritten_lse > 0) {
    v.failures.push_back(format("LSE: %lld of %zu rows never written (still hold the poison NaN)",
                                static_cast<long long>(outputs.unwritten_lse), outputs.lse.size()));
  }
  const size_t output_rows = static_cast<size_t>(std::max<int64_t>(canonical_rows, 0));
  if (outputs.o.size() != output_rows * static_cast<size_t>(std::max<int64_t>(value_dim, 0)) ||
      outputs.lse.size() != output_rows) {
    v.failures.push_back("outputs do not match the case's shape (o or lse has the wrong size)");
    v.pass = false;
    return v;
  }
  const bool stats = options.check_stats && outputs.row_m.size() == output_rows && outputs.row_l.size() == output_rows;

  const double eps = 2 * oracle::unit_roundoff(to_oracle(params.dtype));
  // Errors in eps are counted at the scale A_k, but never below the dtype's smallest normal: under it the output's
  // spacing is the subnormal one, and an error of one subnormal step would read as millions of eps of a tiny A_k.
  const DTypeInfo* dtype_info = find_dtype(params.dtype);
  const double min_normal = dtype_info ? dtype_info->min_normal() : 0.0;
  // Where rounding to the dtype overflows: from 2^emax (2 - 2^-p) on, the nearest value is inf (IEEE 754
  // round-to-nearest). A dropout scales O up to 1 / (1 - p) times its values' range, past the dtype's largest value.
  const double overflow = dtype_info ? std::ldexp(2.0 - std::ldexp(1.0, -dtype_info->significand_bits()),
                                                  dtype_info->format.bias())
                                     : kInf;

  oracle::RmsCheck rms(to_oracle(params.dtype));
  std::set<std::vector<uint64_t>> rms_rows_pooled;  // same_computation_key of each row pooled
  double sum_err_eps2 = 0.0;
  int64_t err_eps_count = 0;
  int64_t terms_before = 0, terms_total = 0;
  for (const oracle::RowRef& row : rows) terms_total += oracle::row_terms(problem, row);
  RowChunk chunk;
  for (size_t index = 0; index < rows.size(); ++index) {
    if (index % kChunkRows == 0) {
      chunk = prepare_chunk(problem, rows, index, params, outputs, options, terms_before, terms_total);
      for (size_t r = index; r < index + chunk.exact.size(); ++r) terms_before += oracle::row_terms(problem, rows[r]);
    }
    const oracle::RowRef& at = rows[index];  // in `problem`
    const oracle::RowRef& row = reported[index];  // the case's row, as the report names it
    const oracle::RowResult& exact = chunk.exact[index % kChunkRows];
    const RowPrep& prep = chunk.prep[index % kChunkRows];
    ++v.rows_checked;
    const int64_t flat = (at.b * problem.heads_q + at.h) * problem.seqlen_q + at.i;
    const double sink = problem.sink.empty() ? -kInf : problem.sink[static_cast<size_t>(at.h)];
    if (prep.empty) {  // no usable key (prepare_chunk)
      judge_empty_row(row, flat, outputs, value_dim, sink, stats, &v);
      continue;
    }
    const oracle::RowBound& bound = prep.bound;
    const double* got_o = outputs.o.data() + flat * value_dim;
    const double got_lse = outputs.lse[static_cast<size_t>(flat)];
    if (bound.unconstrained) ++v.unconstrained_rows;
    if (bound.vacuous) {
      ++v.vacuous_rows;
      if (v.vacuous_listed.size() < kVacuousListed) v.vacuous_listed.push_back(row);
    }
    if (bound.unconstrained || exact.score_overflow) ++v.no_claim_rows;
    // Scores beyond fp32's range: the kernel's scores are +-inf there, which can turn the row into one with no
    // usable key (O = 0, LSE = -inf) or into a NaN row; the exact row cannot say which. No value claim at all,
    // only the guards (unwritten elements, canaries, inputs) apply.
    if (exact.score_overflow) continue;

    // O per element and LSE, with the oracle's semantics: NaN in the oracle means "must be non-finite"
    // (NaN propagates, it is never silently dropped); outside the domain finite values carry no claim.
    for (int64_t k = 0; k < value_dim; ++k) {
      const size_t kk = static_cast<size_t>(k);
      double ratio = oracle::error_ratio(got_o[k], exact.o[kk], bound.o[kk], bound.unconstrained);
      // An inf of the exact value's sign where the kernel's value before the rounding may lie past the overflow.
      if (std::isinf(got_o[k]) && std::isfinite(exact.o[kk]) && std::signbit(got_o[k]) == std::signbit(exact.o[kk]) &&
          std::fabs(exact.o[kk]) + bound.o[kk] >= overflow) {
        ratio = 0.0;
      }
      record(&v.o, ratio, row, k, got_o[k], exact.o[kk], bound.o[kk]);
      ++v.elements_checked;
    }
    if (outputs.lse_written) {  // a subject without LSE output is judged by O alone
      record(&v.lse, oracle::error_ratio(got_lse, exact.lse, bound.lse, bound.unconstrained), row, -1, got_lse,
             exact.lse, bound.lse);
    }
    if (bound.unconstrained) continue;
    for (int64_t k = 0; k < value_dim; ++k) {
      const size_t kk = static_cast<size_t>(k);
      if (!std::isfinite(exact.o[kk])) continue;
      ++v.o_claims;
      v.o_informative += std::isfinite(bound.o[kk]) && bound.o[kk] < bound.o_trivial[kk] ? 1 : 0;
    }
    if (outputs.lse_written && std::isfinite(exact.lse)) {
      ++v.lse_claims;
      v.lse_informative += std::isfinite(bound.lse) && bound.lse < bound.lse_trivial ? 1 : 0;
    }

    // Error in units of eps * max(A_k, smallest normal) (A_k = sum_j p_j |v_jk|, the scale the error follows), and
    // the RMS pool; neither takes an element within the flush allowance.
    // The emulated reference (prepare_chunk): with check_rms, for the rows the RMS check takes; empty for the others.
    const std::vector<double>& emulated = prep.emulated;
    oracle::RmsCheck row_rms(to_oracle(params.dtype));
    for (int64_t k = 0; k < value_dim; ++k) {
      const size_t kk = static_cast<size_t>(k);
      const double want = exact.o[kk];
      // A row whose oracle O is not first-order accurate (scores ~1e23 and beyond) has no meaningful error
      // in eps and no place in the statistical check.
      if (!std::isfinite(want) || !oracle::first_order_accurate(exact)) continue;
      const double err = std::fabs(got_o[k] - want);
      // An element whose A_k lies within what flushing subnormals may take (RowBound::o_flush) has no statistic: an
      // FTZ kernel may lose it whole, within its bound, where the reference keeps subnormals.
      const bool flushable =
          kk < bound.o_flush.size() && exact.abs_pv[kk] > 0 && exact.abs_pv[kk] <= bound.o_flush[kk];
      if (exact.abs_pv[kk] > 0 && std::isfinite(err) && !flushable) {
        const double err_eps = err / (eps * std::max(exact.abs_pv[kk], min_normal));
        v.max_err_eps = std::max(v.max_err_eps, err_eps);
        sum_err_eps2 += err_eps * err_eps;
        ++err_eps_count;
      }
      if (!emulated.empty() && std::isfinite(emulated[kk])) {  // empty: no RMS for this row (prepare_chunk)
        if (flushable) {
          ++v.rms_flush_left_out;
          continue;
        }
        row_rms.add(got_o[k], emulated[kk], want, exact.abs_pv[kk], exact.dev_pv_score_sq[kk]);
      }
    }
    if (row_rms.count() > 0) {
      rms.merge(row_rms, rms_rows_pooled.insert(same_computation_key(problem, at)).second);
      keep_largest_rms_row(&v.rms_rows, {row, row_rms.rms_kernel(), row_rms.rms_reference(), 0.0, row_rms.count()});
    }

    if (stats) {
      const double m = outputs.row_m[static_cast<size_t>(flat)], l = outputs.row_l[static_cast<size_t>(flat)];
      record(&v.m, oracle::m_error_ratio(exact, bound, m), row, -1, m, exact.m, bound.m);
      // l is a sum relative to the kernel's own max: the exact sum re-based to that max is what it must match.
      const double want_l = oracle::l_given_m(exact, m);
      record(&v.l, oracle::l_error_ratio(exact, bound, m, l), row, -1, l, want_l, bound.l_rel * want_l);
      if (std::isfinite(m) && l > 0 && std::isfinite(l)) {
        const double log_l = std::log(l);
        const double from_stats = m + log_l;
        const double identity_bound = kIdentityRelUnits * kFp32Unit * (std::fabs(m) + std::fabs(log_l)) + kFastLogAbs;
        record(&v.identity, ratio_of(got_lse, from_stats, identity_bound), row, -1, got_lse, from_stats, identity_bound);
      } else if (std::isinf(m) && l > 0 && std::isfinite(l) && got_lse == m) {
        record(&v.identity, 0.0, row, -1, got_lse, m, 0.0);  // an infinite m (a sink of +inf): LSE = m + ln l = m
      } else {
        record(&v.identity, kInf, row, -1, got_lse, m, 0.0);  // m or l unusable where the row has visible keys
      }
    }
  }
  v.rms_err_eps = err_eps_count > 0 ? std::sqrt(sum_err_eps2 / static_cast<double>(err_eps_count)) : 0.0;
  v.rms_ratio = rms.ratio();
  v.rms_kernel = rms.rms_kernel();
  v.rms_reference = rms.rms_reference();
  v.rms_count = rms.count();
  v.rms_draws = rms.draws();
  for (Verdict::RmsRow& r : v.rms_rows) {
    r.share = v.rms_kernel > 0 ? r.kernel * r.kernel * static_cast<double>(r.count) /
                                     (v.rms_kernel * v.rms_kernel * static_cast<double>(v.rms_count))
                               : 0.0;
  }

  add_failure_if_over(&v, "O", v.o);
  add_failure_if_over(&v, "LSE", v.lse);
  add_failure_if_over(&v, "m", v.m);
  add_failure_if_over(&v, "l", v.l);
  add_failure_if_over(&v, "LSE=m+ln(l)", v.identity);
  if (!(v.rms_ratio <= 1)) {
    v.failures.push_back(format("RMS: O's RMS error %.3g is %.3g times what the same-precision reference allows "
                                "(reference RMS error %.3g, %lld elements, %lld independent): systematic precision "
                                "loss",
                                v.rms_kernel, v.rms_ratio, v.rms_reference, static_cast<long long>(v.rms_count),
                                static_cast<long long>(v.rms_draws)));
  }
  v.pass = v.failures.empty();
  if (!v.pass) {
    v.outcome = Outcome::kFail;
  } else if (v.vacuous_rows > 0) {
    v.outcome = Outcome::kOutsideDomain;
    v.reason = format("%lld row%s with no finite bound at %s length: neither passed nor failed",
                      static_cast<long long>(v.vacuous_rows), v.vacuous_rows == 1 ? "" : "s",
                      v.vacuous_rows == 1 ? "its" : "their");
  } else if (v.rows_checked > 0 && v.no_claim_rows == v.rows_checked) {
    v.outcome = Outcome::kOutsideDomain;
    v.reason = "every checked row lies outside the error model's domain: no value was claimed";
  }
  return v;
}

}  // namespace

Verdict judge(const Case& c, const HostInputs& inputs, const RunOutputs& outputs, const JudgeOptions& options) {
  const oracle::Problem problem = inputs.problem();
  // The rows are those of the sequences (every one without them).
  int64_t rows_total = problem.batch * problem.heads_q * problem.seqlen_q;
  if (!problem.seqlens_q.empty()) {
    rows_total = 0;
    for (const int64_t rows : problem.seqlens_q) rows_total += rows * problem.heads_q;
  }
  std::vector<oracle::RowRef> rows;
  if (outputs.status.ok()) {  // a failed call is judged without rows
    rows = oracle::sample_rows(problem, outputs.config.block_m, outputs.config.block_n, c.seed,
                               options.full_check_limit, options.random_rows);
  }
  return judge_rows(c, inputs.params, problem, rows, rows, rows_total, outputs, options);
}

Verdict judge_slices(const Case& c, const Params& params, const oracle::Problem& problem,
                     std::span<const oracle::RowRef> rows, std::span<const oracle::RowRef> reported, int64_t rows_total,
                     const RunOutputs& outputs, const JudgeOptions& options) {
  return judge_rows(c, params, problem, rows, reported, rows_total, outputs, options);
}

Verdict refused(std::string_view line, const Status& status) {
  Verdict v;
  v.pass = false;
  v.case_line = excerpt(line);
  v.outcome = outcome_of(status.code());
  v.reason = status.message();
  v.failures.push_back(format("%s: %s", status_name(status.code()), status.message().c_str()));
  return v;
}

std::string Verdict::report() const {
  std::string out = "case: " + case_line + "\n";
  out += format("verdict: %s", to_string(outcome));
  if (outcome == Outcome::kRejected || outcome == Outcome::kUnsupported) {
    // Nothing ran: no kernel, no checks to list. The reason names the field ("head_dim: must be in 1..256").
    return out + " (" + reason + ")\n";  // messages of parse_case and can_implement echo input through excerpt()
  }
  if (outcome == Outcome::kOutsideDomain) out += " (" + reason + ")";
  if (!pass) out += format(" (%zu check%s failed)", failures.size(), failures.size() == 1 ? "" : "s");
  out += "\nkernel: " + config + "\n";
  out += format("rows: %lld checked of %lld (%lld without visible keys, %lld outside the error model's domain), "
                "%lld O elements\n",
                static_cast<long long>(rows_checked), static_cast<long long>(rows_total), static_cast<long long>(empty_rows),
                static_cast<long long>(unconstrained_rows), static_cast<long long>(elements_checked));
  if (vacuous_rows > 0) {
    out += "outside the domain (no finite worst-case bound at this length, docs/error-model.md section 4.9):";
    for (const oracle::RowRef& r : vacuous_listed) {
      out += format(" b=%lld h=%lld i=%lld;", static_cast<long long>(r.b), static_cast<long long>(r.h),
                    static_cast<long long>(r.i));
    }
    if (vacuous_rows > static_cast<int64_t>(vacuous_listed.size())) out += " ...";
    out += "\n";
  }
  if (o_claims > 0 || lse_claims > 0) {
    out += format("informative: O %lld of %lld checks (%.1f%%), LSE %lld of %lld: the rest have bounds at or above "
                  "the value range's\n",
                  static_cast<long long>(o_informative), static_cast<long long>(o_claims), 100.0 * o_informative_fraction(),
                  static_cast<long long>(lse_informative), static_cast<long long>(lse_claims));
  }
  if (!failures.empty()) {
    out += "failures:\n";
    for (const std::string& f : failures) out += "  - " + f + "\n";
  }
  out += "checks (ratio = error / bound, fail above 1):\n";
  out += worst_text("O", o) + "\n";
  out += format("  %-12s max %.3g eps, RMS %.3g eps (eps = 2u of the dtype, relative to sum_j p_j |v_jk|)\n", "O error",
                max_err_eps, rms_err_eps);
  out += worst_text("LSE", lse) + "\n";
  out += worst_text("m", m) + "\n";
  out += worst_text("l", l) + "\n";
  out += worst_text("LSE=m+ln(l)", identity) + "\n";
  if (rms_count > 0) {
    out += format("  %-12s ratio %-16.3g %s  kernel RMS error %.3g, reference %.3g, over %lld elements (%lld "
                  "independent)\n",
                  "RMS vs ref", rms_ratio, rms_ratio > 1 ? "FAIL" : "ok  ", rms_kernel, rms_reference,
                  static_cast<long long>(rms_count), static_cast<long long>(rms_draws));
    if (rms_ratio > 1) {
      for (const RmsRow& r : rms_rows) {
        out += format("  %-12s b=%lld h=%lld i=%lld: %.0f%% of the kernel's squared error; kernel RMS %.3g, "
                      "reference %.3g\n",
                      "  row", static_cast<long long>(r.row.b), static_cast<long long>(r.row.h),
                      static_cast<long long>(r.row.i), 100 * r.share, r.kernel, r.reference);
      }
    }
  }
  if (rms_flush_left_out > 0) {
    out += format("  %-12s %lld O elements left out within the flush allowance (A_k no larger than what flushing "
                  "fp32 subnormals may take)\n",
                  "RMS", static_cast<long long>(rms_flush_left_out));
  }
  out += format("  %-12s unwritten O %lld, unwritten LSE %lld, canaries %s, inputs %s\n", "guards",
                static_cast<long long>(unwritten_o), static_cast<long long>(unwritten_lse),
                canaries_intact ? "intact" : "DAMAGED", inputs_unchanged ? "unchanged" : "MODIFIED");
  return out;
}

}  // namespace flashcheck
