// Shared pieces of the properties (see checks.h).
#include "checks.h"

#include <rapidcheck.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <numeric>
#include <sstream>

#include "flashcheck/device.h"
#include "flashcheck/dtype.h"
#include "flashcheck/kernel_facts.h"
#include "flashcheck/oracle_bridge.h"
#include "replay.h"
#include "tier.h"

namespace flashcheck::properties {
namespace {

struct TensorRef {
  std::vector<uint8_t>* bytes;
  std::vector<double>* exact;
  Strides strides;
  int64_t heads, seqlen;
};

TensorRef tensor_ref(HostInputs& in, char tensor) {
  const Params& p = in.params;
  switch (tensor) {
    case 'q': return {&in.q, &in.q_exact, p.q_stride, p.heads_q, p.seqlen_q};
    case 'k': return {&in.k, &in.k_exact, p.k_stride, p.heads_kv, p.seqlen_k};
    default: return {&in.v, &in.v_exact, p.v_stride, p.heads_kv, p.seqlen_k};
  }
}

}  // namespace

CaseOptions finite_options() {
  CaseOptions o = default_options();
  o.special_values = false;
  o.nonempty = true;
  return o;
}

HostInputs copy_of(const HostInputs& in) {
  HostInputs out = in;
  out.bind();
  return out;
}

RelationDraws::RelationDraws(const Case& c, std::string_view relation) : state_(c.seed) {
  for (const char ch : relation) state_ = (state_ ^ static_cast<uint8_t>(ch)) * 0x100000001b3ull;  // FNV-1a step
}

uint64_t RelationDraws::next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

int64_t RelationDraws::uniform(int64_t n) {
  return n <= 0 ? 0 : static_cast<int64_t>((static_cast<unsigned __int128>(next()) * static_cast<uint64_t>(n)) >> 64);
}

int64_t RelationDraws::below(const char* what, int64_t n) {
  const int64_t x = uniform(n);
  RC_LOG() << what << ": " << x << "\n";
  return x;
}

bool RelationDraws::coin(const char* what) {
  const bool x = (next() >> 63) != 0;
  RC_LOG() << what << ": " << (x ? "yes" : "no") << "\n";
  return x;
}

uint64_t RelationDraws::bits(const char* what) {
  const uint64_t x = next();
  RC_LOG() << what << ": " << x << "\n";
  return x;
}

int64_t pick_key(RelationDraws& draws, const char* what, int64_t lo, int64_t hi, int64_t block_n) {
  if (hi <= lo) return lo;
  std::vector<int64_t> edges;
  for (int64_t t = 1; t * block_n - 1 <= hi + 1; ++t) {
    for (int64_t x : {t * block_n - 1, t * block_n, t * block_n + 1}) {
      if (x >= lo && x <= hi) edges.push_back(x);
    }
  }
  if (!edges.empty() && draws.coin("key at a K-tile boundary")) return draws.pick(what, edges);
  return lo + draws.below(what, hi - lo + 1);
}

void RelationWorst::add(double got, double want, double bound, const oracle::RowRef& r, int64_t col) {
  double ratio_here;
  if (std::isnan(got) || std::isnan(want)) {
    ratio_here = INFINITY;
  } else if (got == want) {
    ratio_here = 0.0;
  } else {
    ratio_here = bound > 0.0 ? std::fabs(got - want) / bound : INFINITY;
  }
  if (ratio_here > ratio || (std::isinf(ratio_here) && where.empty())) {
    ratio = ratio_here;
    std::ostringstream os;
    os << describe_row(r) << (col >= 0 ? " col " + std::to_string(col) : std::string(" LSE")) << ": got " << got
       << ", want " << want << ", bound " << bound;
    where = os.str();
  }
}

void assert_worst(const RelationWorst& w, const char* relation) {
  RC_LOG() << relation << ": worst error/bound " << w.ratio << (w.where.empty() ? "" : " at " + w.where) << "\n";
  RC_ASSERT(w.ratio <= 1.0);
}

HostInputs inputs_for(const Case& c) {
  HostInputs in;
  const Status st = make_inputs(c, &in);
  if (!st.ok()) RC_LOG() << "make_inputs: " << st.message() << "\n";
  RC_ASSERT(st.ok());
  return in;
}

// A run that lost the CUDA context (a sticky error) ends the process: every later case would fail with the same
// error, and shrinking on those failures would report a case that did nothing wrong. The case that crashed is
// printed first, so it replays on its own.
void stop_if_context_lost(const Status& status, const std::string& who) {
  if (status.code() != StatusCode::kCudaError || !device_context_lost()) return;
  std::cerr << "\nflashcheck: the CUDA context is lost: " << who << " failed with a sticky error (" << status.message()
            << ") on\ncase line: " << last_case_line()
            << "\nno further case can run in this process; replay that line with flashcheck-repro" << std::endl;
  std::exit(1);
}

RunOutputs run_backend(const HostInputs& inputs, bool instrument) {
  RunOptions options;
  options.instrument = instrument;
  return run_on_tier(inputs, options);
}

RunOutputs run_on_tier(const HostInputs& inputs, RunOptions options, bool discard_unsupported) {
  options.model.defect = planted_defect();
  if (const LoadedSubject* subject = active_subject()) {
    // A subject records no m and l; a case a property derives (another layout, more heads) may leave its
    // capabilities: that case is discarded, never passed.
    options.instrument = false;
    RunOutputs out = run_case(inputs, *subject, options);
    if (out.status.code() == StatusCode::kUnsupported) {
      // Counted: a drawn case the subject refuses is one its generators could have avoided (a known case line, replayed
      // on every subject, may lie outside its capabilities).
      note_coverage(replay_case() != nullptr ? "subject-refused=known-case" : "subject-refused=drawn-case");
      RC_DISCARD(out.status.message());
    }
    stop_if_context_lost(out.status, "subject " + subject->name());
    if (!out.status.ok()) RC_LOG() << "run_case on subject " << subject->name() << ": " << out.status.message() << "\n";
    RC_ASSERT(out.status.ok());
    return out;
  }
  RunOutputs out = run_case(inputs, active_backend(), options);
  stop_if_context_lost(out.status, to_string(active_backend()));
  if (discard_unsupported && out.status.code() == StatusCode::kUnsupported) RC_DISCARD(out.status.message());
  if (!out.status.ok()) RC_LOG() << "run_case on " << to_string(active_backend()) << ": " << out.status.message() << "\n";
  RC_ASSERT(out.status.ok());
  return out;
}

JudgeOptions judge_options() {
  JudgeOptions o;
  o.check_stats = true;
  if (active_backend() == Backend::kGpu) {
    // Large GPU problems: the oracle's cost is rows * seqlen_k * head_dim on one host core, so sample.
    o.full_check_limit = 256;
    o.random_rows = 24;
  } else {
    o.full_check_limit = 2048;
    o.random_rows = 32;
  }
  return o;
}

void assert_verdict(const Verdict& verdict) {
  note_informative(verdict);
  if (!verdict.pass) RC_LOG() << verdict.report() << "\n";
  RC_ASSERT(verdict.pass);
}

double input_value(const HostInputs& in, char tensor, int64_t b, int64_t h, int64_t s, int64_t d) {
  const TensorRef t = tensor_ref(const_cast<HostInputs&>(in), tensor);
  return (*t.exact)[static_cast<size_t>(((b * t.heads + h) * t.seqlen + s) * columns_of(in.params, tensor) + d)];
}

void set_input_value(HostInputs& in, char tensor, int64_t b, int64_t h, int64_t s, int64_t d, double value) {
  const DType dtype = in.params.dtype;
  const TensorRef t = tensor_ref(in, tensor);
  const uint32_t bits = encode_dtype(dtype, value);
  const double stored = decode_dtype(dtype, bits);
  RC_ASSERT(std::isnan(value) || stored == value);  // callers pass dtype values; a rounding here is a test bug
  const int64_t esize = dtype_size(dtype);
  const int64_t offset = (b * t.strides.batch + h * t.strides.head + s * t.strides.row + d) * esize;
  // Host byte order, as make_inputs stores it.
  std::memcpy(t.bytes->data() + offset, &bits, static_cast<size_t>(esize));
  (*t.exact)[static_cast<size_t>(((b * t.heads + h) * t.seqlen + s) * columns_of(in.params, tensor) + d)] = stored;
}

void copy_key(HostInputs& dst, int64_t b, int64_t g, int64_t j, const HostInputs& src, int64_t b_src, int64_t g_src,
              int64_t j_src) {
  for (char tensor : {'k', 'v'}) {
    const int64_t columns = std::min(columns_of(dst.params, tensor), columns_of(src.params, tensor));
    for (int64_t d = 0; d < columns; ++d) {
      set_input_value(dst, tensor, b, g, j, d, input_value(src, tensor, b_src, g_src, j_src, d));
    }
  }
}

void fill_key(HostInputs& in, int64_t b, int64_t g, int64_t j, double value) {
  for (char tensor : {'k', 'v'}) {
    for (int64_t d = 0; d < columns_of(in.params, tensor); ++d) set_input_value(in, tensor, b, g, j, d, value);
  }
}

std::vector<double> poison_values(DType dtype) {
  constexpr double kNan = std::numeric_limits<double>::quiet_NaN(), kInfinity = std::numeric_limits<double>::infinity();
  if (!find_dtype(dtype)->format.has_inf()) return {kNan};
  return {kNan, kInfinity, -kInfinity};
}

int precision_bits(DType dtype) { return find_dtype(dtype)->significand_bits(); }
double min_normal(DType dtype) { return find_dtype(dtype)->min_normal(); }

double max_abs(const std::vector<double>& xs) {
  double m = 0.0;
  for (double x : xs) m = std::max(m, std::fabs(x));
  return m;
}

int ceil_log2(double a) {
  int e = 0;
  const double m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  return m == 0.5 ? e - 1 : e;
}

void quantize(HostInputs& in, char tensor, double grid) {
  transform_tensor(in, tensor, [grid](double x) { return std::nearbyint(x / grid) * grid; });
}

KeyShift quantize_keys_for_shift(RelationDraws& draws, HostInputs* base) {
  const int64_t pattern = draws.below("shift vector (0 constant, 1 random, 2 one-hot)", 3);
  const uint64_t shift_seed = draws.bits("shift seed");
  const Params& p = base->params;
  const int bits = precision_bits(p.dtype);
  // (All-zero K: the grid of the smallest normal, so the shifted values stay representable.)
  const double a_max = std::max(max_abs(base->k_exact), min_normal(p.dtype));
  const int e = ceil_log2(a_max);
  KeyShift shift;
  if (std::ldexp(1.0, e + 2) > dtype_max(p.dtype)) return shift;
  shift.grid = std::ldexp(1.0, e + 2 - bits);
  quantize(*base, 'k', shift.grid);
  const int64_t steps = int64_t{1} << (bits - 2);  // |u_d| <= steps * grid = 2^E
  shift.pattern = pattern == 0 ? "constant" : pattern == 1 ? "random" : "one-hot";
  shift.u.assign(static_cast<size_t>(p.head_dim), 0.0);
  SplitMix rng{shift_seed};
  const int64_t constant = rng.below(2 * steps + 1) - steps;
  const int64_t hot = rng.below(p.head_dim);
  for (int64_t d = 0; d < p.head_dim; ++d) {
    const int64_t m = pattern == 0 ? constant : pattern == 1 ? rng.below(2 * steps + 1) - steps : (d == hot ? steps : 0);
    shift.u[static_cast<size_t>(d)] = static_cast<double>(m) * shift.grid;
  }
  RC_LOG() << "K quantized to multiples of " << shift.grid << "; every key row shifted by u (|u| <= "
           << static_cast<double>(steps) * shift.grid << ")\n";
  return shift;
}

HostInputs shift_keys(const HostInputs& base, const std::vector<double>& u) {
  const Params& p = base.params;
  HostInputs shifted = copy_of(base);
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t g = 0; g < p.heads_kv; ++g)
      for (int64_t j = 0; j < p.seqlen_k; ++j)
        for (int64_t d = 0; d < p.head_dim; ++d) {
          set_input_value(shifted, 'k', b, g, j, d, input_value(base, 'k', b, g, j, d) + u[static_cast<size_t>(d)]);
        }
  return shifted;
}

ExactRow exact_row(const HostInputs& in, const KernelConfig& config, const oracle::RowRef& row) {
  ExactRow r;
  const oracle::Problem problem = in.problem();
  r.exact = oracle::compute_row(problem, row, oracle::Tier::kFast);
  r.bound = oracle_bound(problem, row, r.exact, in.params, config, kernel_splits(in.params));
  return r;
}

ExactRow exact_row_without_sink(const HostInputs& in, const KernelConfig& config, const oracle::RowRef& row) {
  oracle::Problem problem = in.problem();
  problem.sink = {};
  ExactRow r;
  r.exact = oracle::compute_row(problem, row, oracle::Tier::kFast);
  r.bound = oracle_bound(problem, row, r.exact, in.params, config, kernel_splits(in.params));
  return r;
}

void set_sink_value(HostInputs& in, int64_t h, double value) {
  RC_ASSERT(h >= 0 && static_cast<size_t>(h) < in.sink.size());
  const float stored = static_cast<float>(value);
  RC_ASSERT(std::isnan(value) || static_cast<double>(stored) == value);  // an fp32 value; a rounding is a test bug
  in.sink[static_cast<size_t>(h)] = stored;
  in.sink_exact[static_cast<size_t>(h)] = static_cast<double>(stored);
}

std::vector<oracle::RowRef> rows_to_check(const HostInputs& in, const KernelConfig& config, uint64_t seed) {
  const JudgeOptions o = judge_options();
  return oracle::sample_rows(in.problem(), config.block_m, config.block_n, seed, o.full_check_limit, o.random_rows);
}

bool same_bits(double a, double b) { return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b); }
bool same_bits(float a, float b) { return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b); }

std::string describe_row(const oracle::RowRef& r) {
  std::ostringstream os;
  os << "[b=" << r.b << ", h=" << r.h << ", i=" << r.i << "]";
  return os.str();
}

void assert_bit_identical(const std::string& what, const RunOutputs& a, const RunOutputs& b, const Params& p,
                          const std::vector<bool>* rows_to_compare) {
  RC_ASSERT(a.o.size() == b.o.size());
  RC_ASSERT(a.lse.size() == b.lse.size());
  const int64_t rows = p.batch * p.heads_q * p.seqlen_q;
  for (int64_t r = 0; r < rows; ++r) {
    if (rows_to_compare && !(*rows_to_compare)[static_cast<size_t>(r)]) continue;
    const oracle::RowRef ref{r / (p.heads_q * p.seqlen_q), (r / p.seqlen_q) % p.heads_q, r % p.seqlen_q};
    if (!same_bits(a.lse[static_cast<size_t>(r)], b.lse[static_cast<size_t>(r)])) {
      RC_LOG() << what << ": LSE differs at row " << describe_row(ref) << ": " << a.lse[static_cast<size_t>(r)]
               << " vs " << b.lse[static_cast<size_t>(r)] << "\n";
      RC_FAIL(what + ": LSE not bit-identical");
    }
    for (int64_t d = 0; d < value_head_dim(p); ++d) {
      const size_t i = static_cast<size_t>(r * value_head_dim(p) + d);
      if (!same_bits(a.o[i], b.o[i])) {
        RC_LOG() << what << ": O differs at row " << describe_row(ref) << " col " << d << ": " << a.o[i] << " vs "
                 << b.o[i] << "\n";
        RC_FAIL(what + ": O not bit-identical");
      }
    }
  }
}

}  // namespace flashcheck::properties

namespace flashcheck::properties {

void assert_same_kernel_bits_or_within_bounds(const std::string& what, const HostInputs& in_a, const RunOutputs& a,
                                              const HostInputs& in_b, const RunOutputs& b, uint64_t seed,
                                              const std::vector<bool>* rows_to_compare, bool subject_may_differ) {
  const Params& p = in_a.params;
  RC_LOG() << "configs: " << a.config.name << ", " << b.config.name << "\n";
  // One kernel: the same name and compute path (a subject's configs share its name across its paths).
  if (std::string_view(a.config.name) == b.config.name && a.config.path == b.config.path &&
      !(subject_may_differ && !a.subject.empty())) {
    assert_bit_identical(what, a, b, p, rows_to_compare);
    return;
  }
  note_coverage("compared=other-family");
  RelationWorst worst;
  for (const oracle::RowRef& r : rows_to_check(in_a, a.config, seed)) {
    if (rows_to_compare != nullptr && !(*rows_to_compare)[static_cast<size_t>(row_index(p, r.b, r.h, r.i))]) continue;
    const ExactRow ea = exact_row(in_a, a.config, r);
    const ExactRow eb = exact_row(in_b, b.config, r);
    if (ea.bound.unconstrained || eb.bound.unconstrained) continue;
    // Where the exact result is NaN ("must be non-finite": a NaN or inf reaches it) both runs must be non-finite.
    const auto both_nonfinite = [&](double x, double y, int64_t col) {
      if (std::isfinite(x) || std::isfinite(y)) {
        RC_LOG() << what << ": " << (col < 0 ? std::string("LSE") : "O col " + std::to_string(col)) << " at row "
                 << describe_row(r) << " must be non-finite in both runs: " << x << ", " << y << "\n";
        RC_FAIL(what + ": a finite output where the semantics make it non-finite");
      }
    };
    for (int64_t d = 0; d < value_head_dim(p); ++d) {
      const size_t k = static_cast<size_t>(d);
      if (std::isnan(ea.exact.o[k])) {
        both_nonfinite(o_at(a, p, r, d), o_at(b, p, r, d), d);
        continue;
      }
      worst.add(o_at(a, p, r, d), o_at(b, p, r, d), ea.bound.o[k] + eb.bound.o[k], r, d);
    }
    if (std::isnan(ea.exact.lse)) {
      both_nonfinite(lse_at(a, p, r), lse_at(b, p, r), -1);
    } else {
      worst.add(lse_at(a, p, r), lse_at(b, p, r), ea.bound.lse + eb.bound.lse, r, -1);
    }
  }
  assert_worst(worst, (what + " (different kernels)").c_str());
}

void assert_blind_rows_unchanged(const std::string& what, const HostInputs& clean, const RunOutputs& a,
                                 const RunOutputs& b, const std::vector<bool>& blind, uint64_t seed) {
  const Params& p = clean.params;
  const int64_t rows = p.batch * p.heads_q * p.seqlen_q;
  int64_t compared = 0;
  for (bool x : blind) compared += x ? 1 : 0;
  note_coverage(compared > 0 ? "compared=some-rows" : "compared=none");
  if ((active_backend() == Backend::kHostModel && active_subject() == nullptr) ||
      (active_subject() == nullptr && a.config.path == ComputePath::kGeneralFp32)) {
    note_coverage("compared=bit-identical");
    assert_bit_identical(what, a, b, p, &blind);
    return;
  }
  note_coverage(std::string("compared=bounded-") + to_string(a.config.path));
  for (int64_t flat = 0; flat < rows; ++flat) {
    if (!blind[static_cast<size_t>(flat)]) continue;
    const oracle::RowRef r = row_ref(p, flat);
    const bool empty = judged_visible_keys(p, r.i).size() == 0;
    for (int64_t d = -1; d < value_head_dim(p); ++d) {  // d = -1: LSE
      const double x = d < 0 ? lse_at(a, p, r) : o_at(a, p, r, d);
      const double y = d < 0 ? lse_at(b, p, r) : o_at(b, p, r, d);
      const bool differs = empty ? !same_bits(x, y) : std::isfinite(x) && !std::isfinite(y);
      // Outside the error model's domain (e.g. an fp32 accumulator that may overflow: V near FLT_MAX) the
      // two arithmetics may legitimately differ between finite and inf: no claim there.
      if (differs && !empty && exact_row(clean, a.config, r).bound.unconstrained) break;
      if (differs) {
        RC_LOG() << what << ": " << (d < 0 ? std::string("LSE") : "O col " + std::to_string(d)) << " at row "
                 << describe_row(r) << ": " << x << " (clean) vs " << y << " (poisoned)"
                 << (empty ? ", row with no visible key" : "") << "\n";
        RC_FAIL(what + (empty ? ": row with no visible key changed" : ": non-finite output from a hidden key"));
      }
    }
  }
  RelationWorst worst;
  for (const oracle::RowRef& r : rows_to_check(clean, a.config, seed)) {
    if (!blind[static_cast<size_t>(row_index(p, r.b, r.h, r.i))]) continue;
    const ExactRow e = exact_row(clean, a.config, r);  // a blind row's visible keys are the same in both runs
    if (e.exact.visible == 0 || e.bound.unconstrained) continue;
    for (int64_t d = 0; d < value_head_dim(p); ++d) {
      worst.add(o_at(b, p, r, d), o_at(a, p, r, d), 2.0 * e.bound.o[static_cast<size_t>(d)], r, d);
    }
    worst.add(lse_at(b, p, r), lse_at(a, p, r), 2.0 * e.bound.lse, r, -1);
  }
  assert_worst(worst, (what + " (" + to_string(a.config.path) + ": non-finite tiles on their exact path), poisoned vs clean").c_str());
}

std::vector<int64_t> draw_key_permutation(RelationDraws& draws, int64_t keys, int64_t block_n) {
  const int64_t kind = draws.below("permutation (0 reverse, 1 rotate by a K tile, 2 shuffle)", 3);
  const uint64_t perm_seed = draws.bits("shuffle seed");
  std::vector<int64_t> perm(static_cast<size_t>(keys));
  std::iota(perm.begin(), perm.end(), 0);
  if (kind == 0) std::reverse(perm.begin(), perm.end());
  if (kind == 1 && keys > 0) std::rotate(perm.begin(), perm.begin() + (block_n % keys), perm.end());
  if (kind == 2) {
    SplitMix rng{perm_seed};
    for (int64_t j = keys - 1; j > 0; --j) std::swap(perm[static_cast<size_t>(j)], perm[static_cast<size_t>(rng.below(j + 1))]);
  }
  return perm;
}

}  // namespace flashcheck::properties
