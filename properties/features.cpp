// Property 6: sliding windows, softcaps and sinks against their definitions in attention.h, the kernel against
// itself: the window that covers every key is no mask and the window (-1, 0) is causal (bit for bit, as
// attention.h promises); a sink of -inf is no sink (bit for bit); a sink is one more key whose score is the
// sink and whose value row is zero; a softcap far above every score is no softcap; and NaN or +-inf at keys
// outside a row's window never reach that row. Bounded comparisons use the sum of both runs' error bounds.
#include <rapidcheck.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "checks.h"
#include "flashcheck/mask_names.h"
#include "generators.h"
#include "properties.h"
#include "replay.h"
#include "tier.h"

namespace flashcheck::properties {
namespace {

namespace gen = rc::gen;
constexpr double kInf = std::numeric_limits<double>::infinity();

// `in` under another mask and window (the inputs do not depend on either), logged as its case line.
HostInputs with_mask(const Case& c, const HostInputs& in, Mask mask, int64_t window_left, int64_t window_right) {
  Case other = c;
  other.mask = mask;
  other.window_left = window_left;
  other.window_right = window_right;
  RC_LOG() << "compared with: " << format_case(other) << "\n";
  HostInputs out = copy_of(in);
  out.params.mask = mask;
  out.params.window_left = window_left;
  out.params.window_right = window_right;
  return out;
}

Mask window_of_alignment(Mask causal) {
  return causal == Mask::kCausalTopLeft ? Mask::kWindowTopLeft : Mask::kWindowBottomRight;
}

// Largest |scale * q . k| over every (row, visible key) of the problem, in double.
double max_abs_score(const HostInputs& in) {
  const Params& p = in.params;
  const int64_t group = p.heads_q / p.heads_kv;
  double top = 0.0;
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t h = 0; h < p.heads_q; ++h)
      for (int64_t i = 0; i < p.seqlen_q; ++i) {
        const KeyRange keys = judged_visible_keys(p, i);
        for (int64_t j = keys.begin; j < keys.end; ++j) {
          double dot = 0.0;
          for (int64_t d = 0; d < p.head_dim; ++d) {
            dot += input_value(in, 'q', b, h, i, d) * input_value(in, 'k', b, h / group, j, d);
          }
          top = std::max(top, std::fabs(static_cast<double>(p.softmax_scale) * dot));
        }
      }
  return top;
}

}  // namespace

void window_covering_all_keys_equals_no_mask() {
  CaseOptions o = default_options();
  o.masks = {Mask::kNone};
  const Case c = *gen_case(o);
  note_case(c);
  // Each side unbounded or at least max(seqlen_q, seqlen_k): every row sees every key in either alignment.
  const int64_t longest = std::max(c.seqlen_q, c.seqlen_k);
  const std::vector<int64_t> sides = {-1, longest, longest + 1, 2 * longest + 3, int64_t{1} << 40};
  RelationDraws draws(c, "WindowCoveringAllKeysEqualsNoMask");
  const Mask mask = draws.coin("window mask (yes: top-left)") ? Mask::kWindowTopLeft : Mask::kWindowBottomRight;
  const int64_t left = draws.pick("window_left", sides);
  const int64_t right = draws.pick("window_right", sides);
  const HostInputs in = inputs_for(c);
  const HostInputs windowed = with_mask(c, in, mask, left, right);
  const RunOutputs a = run_backend(in);
  const RunOutputs b = run_backend(windowed);
  assert_bit_identical("a window covering every key vs no mask", a, b, in.params);
}

void window_minus_one_zero_equals_causal() {
  CaseOptions o = default_options();
  o.masks = {Mask::kCausalBottomRight, Mask::kCausalTopLeft};
  const Case c = *gen_case(o);
  note_case(c);
  const HostInputs in = inputs_for(c);
  const HostInputs windowed = with_mask(c, in, window_of_alignment(c.mask), -1, 0);
  const RunOutputs a = run_backend(in);
  const RunOutputs b = run_backend(windowed);
  assert_bit_identical("the window (-1, 0) vs causal of the same alignment", a, b, in.params);
}

void minus_inf_sink_equals_no_sink() {
  Case c = *gen_case(default_options());
  if (!c.sink || (c.sink->kind == DistKind::kConst && c.sink->a == -kInf)) c.sink = ValueSpec{DistKind::kNormal, 0, 2};
  note_case(c);
  // Some heads (at least one) get a sink of -inf; their rows must be the rows without a sink, bit for bit.
  RelationDraws draws(c, "MinusInfSinkEqualsNoSink");
  std::vector<bool> minus_inf(static_cast<size_t>(c.heads_q));
  for (int64_t h = 0; h < c.heads_q; ++h) minus_inf[static_cast<size_t>(h)] = draws.coin("this head's sink is -inf");
  Case without = c;
  without.sink.reset();
  const HostInputs plain = inputs_for(without);
  HostInputs sunk = inputs_for(c);
  const Params& p = plain.params;
  std::vector<bool> compare(static_cast<size_t>(p.batch * p.heads_q * p.seqlen_q), false);
  for (int64_t h = 0; h < p.heads_q; ++h) {
    if (!minus_inf[static_cast<size_t>(h)] && !(h == 0 && std::none_of(minus_inf.begin(), minus_inf.end(),
                                                                       [](bool x) { return x; }))) {
      continue;
    }
    set_sink_value(sunk, h, -kInf);
    for (int64_t b = 0; b < p.batch; ++b)
      for (int64_t i = 0; i < p.seqlen_q; ++i) compare[static_cast<size_t>(row_index(p, b, h, i))] = true;
  }
  const RunOutputs a = run_backend(plain);
  const RunOutputs b = run_backend(sunk);
  assert_bit_identical("heads with a sink of -inf vs no sink", a, b, p, &compare);
}

// The head dim of SinkEqualsExtraZeroValueKey's keyed run for a sunk case of head dim d: d + 1, or under a subject
// the least head dim above d it takes for the dtype; 0 where there is none up to `max` (the options' head_dim_max).
int64_t keyed_head_dim(DType dtype, int64_t d, int64_t max) {
  const LoadedSubject* subject = active_subject();
  for (int64_t e = d + 1; e <= max; ++e) {
    if (subject == nullptr || subject->takes_head_dim(dtype, e)) return e;
  }
  return 0;
}
// The greatest head dim below d that the subject takes for the dtype (d - 1 without one; 1 where there is none).
int64_t taken_head_dim_below(DType dtype, int64_t d) {
  const LoadedSubject* subject = active_subject();
  for (int64_t e = d - 1; e > 1; --e) {
    if (subject == nullptr || subject->takes_head_dim(dtype, e)) return e;
  }
  return 1;
}

// A sink s of head h is one more key, visible to every row, with score s and a zero value row. Constructed
// exactly: head_dim + 1 columns, Q's new column y_h = s / scale in every row of head h, a new key 0 of every K/V
// head with K = (0, .., 0, 1) and V = 0, the old keys shifted to 1..seqlen_k with a 0 in the new column. With a
// power-of-two scale, y_h a value of the dtype and s replaced by scale * y_h (an fp32 value), the new key's
// score is exactly s and its exponent the sink's (fl(y * fl(scale log2 e)) = fl(s log2 e)), and the old keys'
// scores are unchanged (q . k + y * 0). The two runs still round differently (another head_dim, so maybe other
// tiles, and the sink merges after the last tile where the key sits in the first): they are compared within the
// sum of their error bounds, not bit for bit. Mask none or causal bottom-right (the key at 0 keeps every old
// key's visibility); the rows compared are those that see the new key. No softcap: the sink is not capped.
// Under a subject whose head dims are a list (16, 32, 64, 128), the keyed run takes the next head dim it declares:
// the columns past the new one are zero in Q, K and V, so no score and no value moves.
void sink_equals_extra_zero_value_key() {
  CaseOptions o = finite_options();
  o.masks = {Mask::kNone, Mask::kCausalBottomRight};
  o.softcap = false;
  Case c = *gen_case(o);
  // The extra key goes first: only the key sets that keep their relative place (every key, or bottom-right
  // causal, whose diagonal moves with seqlen_k) see it as one more key. Shrinking may offer others: map them back.
  if (c.mask != Mask::kNone) c.mask = Mask::kCausalBottomRight;
  c.window_left = c.window_right = -1;
  // Room for the new column: a head dim with a taken one above it (255 without a subject; the tier skips a subject
  // that takes one head dim only).
  while (c.head_dim > 1 && keyed_head_dim(c.dtype, c.head_dim, o.head_dim_max) == 0) {
    c.head_dim = taken_head_dim_below(c.dtype, c.head_dim);
  }
  c.scale = std::ldexp(1.0f, -static_cast<int>(std::lround(std::log2(std::sqrt(static_cast<double>(c.head_dim))))));
  if (replay_case() == nullptr) {
    c.sink = *gen_sink(false).as("sink");
  } else if (!c.sink) {  // a replayed case line carries its sink
    discard(std::string(kOutsidePropertyCases) + "sink: the property's cases carry a sink (sink=)");
  }
  if (c.sink->kind == DistKind::kConst && c.sink->a == -kInf) c.sink = ValueSpec{DistKind::kNormal, 0, 2};
  note_case(c);
  HostInputs sunk = inputs_for(c);
  const Params& p = sunk.params;
  const double scale = static_cast<double>(p.softmax_scale);
  const double dtype_limit = dtype_max(p.dtype);
  std::vector<double> y(static_cast<size_t>(p.heads_q));
  for (int64_t h = 0; h < p.heads_q; ++h) {
    const double wanted = std::clamp(sunk.sink_exact[static_cast<size_t>(h)] / scale, -dtype_limit, dtype_limit);
    y[static_cast<size_t>(h)] = round_to_dtype(p.dtype, wanted);
    set_sink_value(sunk, h, scale * y[static_cast<size_t>(h)]);  // exact: a power-of-two scale
  }

  Case keyed_case = c;
  // Q's and K's new column (and V's, zero, where V has head_dim columns), then any zero columns up to a taken head dim.
  keyed_case.head_dim = keyed_head_dim(c.dtype, c.head_dim, o.head_dim_max);
  keyed_case.seqlen_k = c.seqlen_k + 1;
  keyed_case.sink.reset();
  keyed_case.inject.clear();
  HostInputs keyed = inputs_for(keyed_case);
  const Params& pk = keyed.params;
  const int64_t d_new = c.head_dim;
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t h = 0; h < p.heads_q; ++h)
      for (int64_t i = 0; i < p.seqlen_q; ++i) {
        for (int64_t d = 0; d < d_new; ++d) set_input_value(keyed, 'q', b, h, i, d, input_value(sunk, 'q', b, h, i, d));
        set_input_value(keyed, 'q', b, h, i, d_new, y[static_cast<size_t>(h)]);
        for (int64_t d = d_new + 1; d < pk.head_dim; ++d) set_input_value(keyed, 'q', b, h, i, d, 0.0);
      }
    for (int64_t g = 0; g < p.heads_kv; ++g) {
      fill_key(keyed, b, g, 0, 0.0);
      set_input_value(keyed, 'k', b, g, 0, d_new, 1.0);
      for (int64_t j = 0; j < p.seqlen_k; ++j) {
        copy_key(keyed, b, g, j + 1, sunk, b, g, j);  // K's first d_new columns, V's columns of the sunk case
        for (int64_t d = d_new; d < pk.head_dim; ++d) set_input_value(keyed, 'k', b, g, j + 1, d, 0.0);
        for (int64_t d = value_head_dim(p); d < value_head_dim(pk); ++d) set_input_value(keyed, 'v', b, g, j + 1, d, 0.0);
      }
    }
  }

  const RunOutputs out_sink = run_backend(sunk);
  const RunOutputs out_key = run_backend(keyed);
  RC_LOG() << "configs: with the sink " << out_sink.config.name << ", with the extra key " << out_key.config.name
           << "\n";
  RelationWorst worst;
  int64_t compared = 0;
  for (const oracle::RowRef& r : rows_to_check(sunk, out_sink.config, c.seed)) {
    if (judged_visible_keys(pk, r.i).begin != 0 || judged_visible_keys(pk, r.i).size() == 0) continue;  // no new key
    const ExactRow e_sink = exact_row(sunk, out_sink.config, r);
    const ExactRow e_key = exact_row(keyed, out_key.config, r);
    if (e_sink.bound.unconstrained || e_key.bound.unconstrained) continue;
    ++compared;
    for (int64_t d = 0; d < value_head_dim(p); ++d) {
      const size_t k = static_cast<size_t>(d);
      worst.add(o_at(out_sink, p, r, d), o_at(out_key, pk, r, d), e_sink.bound.o[k] + e_key.bound.o[k], r, d);
    }
    worst.add(lse_at(out_sink, p, r), lse_at(out_key, pk, r), e_sink.bound.lse + e_key.bound.lse, r, -1);
  }
  note_coverage(compared > 0 ? "compared=some-rows" : "compared=none");
  assert_worst(worst, "a sink vs one more key with the sink as its score and a zero value row");
}

// A softcap c turns a score s into c tanh(s / c) = s - s^3 / (3 c^2) + ...: with c = 1e6 max|s| the exact
// scores move by at most max|s|^3 / (3 c^2) = max|s| / 3e12, far below an fp32 rounding, and the exact O and
// LSE by at most that (LSE) and twice that times max|v| (O). The capped run computes its scores another way
// (three roundings and a tanh, common/softmax.h), so the runs are compared within the sum of their error
// bounds plus the exact change.
void large_softcap_equals_no_softcap() {
  CaseOptions o = finite_options();
  o.softcap = false;
  const Case c = *gen_case(o);
  note_case(c);
  const HostInputs in = inputs_for(c);
  const Params& p = in.params;
  const double top = max_abs_score(in);
  const double cap_wanted = top > 0 ? 1e6 * top : 1.0;
  if (cap_wanted > std::numeric_limits<float>::max() / 16) {
    note_coverage("relation=skipped-huge-scores");
    return;
  }
  Case capped_case = c;
  capped_case.softcap = static_cast<float>(cap_wanted);
  RC_LOG() << "compared with: " << format_case(capped_case) << "\n";
  HostInputs capped = copy_of(in);
  capped.params.softcap = capped_case.softcap;
  const double cap = static_cast<double>(capped_case.softcap);
  const double score_change = top * top * top / (3.0 * cap * cap);

  const RunOutputs a = run_backend(in);
  const RunOutputs b = run_backend(capped);
  RelationWorst worst;
  for (const oracle::RowRef& r : rows_to_check(in, a.config, c.seed)) {
    const ExactRow ea = exact_row(in, a.config, r);
    const ExactRow eb = exact_row(capped, b.config, r);
    if (ea.bound.unconstrained || eb.bound.unconstrained) continue;
    for (int64_t d = 0; d < value_head_dim(p); ++d) {
      const size_t k = static_cast<size_t>(d);
      const double moved = 2.0 * score_change * ea.exact.max_abs_v;
      worst.add(o_at(b, p, r, d), o_at(a, p, r, d), ea.bound.o[k] + eb.bound.o[k] + moved, r, d);
    }
    worst.add(lse_at(b, p, r), lse_at(a, p, r), ea.bound.lse + eb.bound.lse + score_change, r, -1);
  }
  assert_worst(worst, "softcap 1e6 max|score| vs no softcap");
}

// NaN or +-inf in every K and V row outside [j_lo, j_hi): the rows whose window lies inside it (and rows with
// no key) must not change. The band is a drawn row's own window widened by 0, 1 or a tile at either end, so the
// poison starts right at, or just beyond, a window edge and some row is compared.
void nan_outside_window_never_reaches_output() {
  CaseOptions o = finite_options();
  o.masks = {Mask::kWindowBottomRight, Mask::kWindowTopLeft};
  const Case c = *gen_case(o);
  note_case(c);
  RelationDraws draws(c, "NanOutsideWindowNeverReachesOutput");
  const double poison = draws.pick("hidden value", poison_values(c.dtype));
  const HostInputs base = inputs_for(c);
  const Params& p = base.params;
  const KernelConfig config = kernel_config(p);
  const int64_t i0 = draws.below("row whose window bounds the band", p.seqlen_q);
  const KeyRange keys = judged_visible_keys(p, i0);
  const std::vector<int64_t> widen = {0, 1, config.block_n};
  const int64_t j_lo = std::max<int64_t>(0, keys.begin - draws.pick("band's extra keys on the left", widen));
  const int64_t j_hi = std::min(p.seqlen_k, keys.end + draws.pick("band's extra keys on the right", widen));
  RC_LOG() << "every K and V element of keys outside [" << j_lo << ", " << j_hi << ") set to " << poison << "\n";
  HostInputs poisoned = copy_of(base);
  int64_t poisoned_keys = 0;
  for (int64_t j = 0; j < p.seqlen_k; ++j) {
    if (j >= j_lo && j < j_hi) continue;
    ++poisoned_keys;
    for (int64_t b = 0; b < p.batch; ++b)
      for (int64_t g = 0; g < p.heads_kv; ++g) fill_key(poisoned, b, g, j, poison);
  }
  note_coverage(poisoned_keys > 0 ? "poisoned=some-keys" : "poisoned=none");
  const RunOutputs a = run_backend(base);
  const RunOutputs b = run_backend(poisoned);
  const int64_t rows = p.batch * p.heads_q * p.seqlen_q;
  std::vector<bool> blind(static_cast<size_t>(rows));
  for (int64_t flat = 0; flat < rows; ++flat) {
    const KeyRange k = judged_visible_keys(p, flat % p.seqlen_q);
    blind[static_cast<size_t>(flat)] = k.size() == 0 || (k.begin >= j_lo && k.end <= j_hi);
  }
  assert_blind_rows_unchanged("rows whose window keeps out keys holding " + std::to_string(poison), base, a, b, blind,
                              c.seed);
}

}  // namespace flashcheck::properties
