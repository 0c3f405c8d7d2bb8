// Generators of cases for the property tests: rc::Arbitrary<Case> and the narrower generators some
// properties need (masks, GQA, injected special values). Shapes, and sliding windows' edges, aim at the
// kernel's own tile sizes, queried from kernel_config() for the generated dtype and head_dim, never
// hard-coded here. Windows, softcaps and sinks are mixed into a minority of cases. Sizes are bounded by the
// active tier's CaseLimits so the CPU tier stays inside the CI budget.
// RapidCheck makes no special values by itself: every NaN, Inf, -0.0, subnormal and near-max value
// below comes from a generator written for it. Each case prints as its case line (showValue).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <rapidcheck.h>

#include "flashcheck/attention.h"
#include "flashcheck/case.h"
#include "flashcheck/kernel_facts.h"

namespace flashcheck::properties {

// Size limits of generated problems; one set per tier (backend).
struct CaseLimits {
  int64_t max_work = 0;      // batch * heads_q * seqlen_q * seqlen_k * head_dim (multiply-adds of Q K^T)
  int64_t max_elements = 0;  // elements of Q, K, V and O together
  int64_t max_seqlen = 0;
  int64_t max_batch = 0;
  int64_t max_heads_kv = 0;
  int64_t max_group = 0;     // heads_q / heads_kv
};
CaseLimits cpu_limits();  // host model on one core: small problems, many of them
CaseLimits gpu_limits();  // GPU kernel: larger problems; the host-side oracle work stays bounded by row sampling

// The limits Arbitrary<Case> uses; each test binary sets its tier's limits before the first property runs.
const CaseLimits& active_limits();
void set_active_limits(const CaseLimits& limits);

// The value families of the issue; RC_CLASSIFY names them (value_family below).
enum class ValueFamily : int32_t {
  kNormal,             // normal with sigma log-uniform over five decades
  kUniform,
  kNearMax,            // near the dtype's largest finite value
  kSubnormal,
  kAllEqual,           // every logit of the problem equal
  kDominantKey,        // one key far above the others
  kIncreasingLogits,   // logits increase along the keys: the running max moves on every tile
  kMaskedThenNegative, // causal mask (fully masked leading K tiles for early rows) and all-negative scores
  kTies,               // several keys tie for the row max, a few fall below it
  kNegativeZero,       // -0.0 everywhere in one or more tensors
  kSpecial,            // NaN / +-Inf / -0.0 / +-the largest finite injected at chosen positions (also hidden ones)
  kMixed,              // none of the above (a shrunk case can land here)
};
inline constexpr int kValueFamilyCount = 12;
const char* to_string(ValueFamily family);
// The family a case belongs to, recovered from its value specs and injections (so shrunk cases are named too).
ValueFamily value_family(const Case& c);

// Every row of the tables, in table order.
std::vector<Mask> every_mask();
std::vector<DType> every_dtype();

// What a property needs from its cases. Masks and dtypes come as often as their rows' case weights (masks.def,
// dtypes.def: with every mask allowed, window masks in about one case in five), windows from gen_window; a softcap
// in about one in seven, a sink in about one in six.
struct CaseOptions {
  CaseLimits limits;
  std::vector<Mask> masks = every_mask();
  bool softcap = true;            // allow a softcap
  bool sinks = true;              // allow a sink (NaN and +inf sinks only with special_values too)
  bool special_values = true;     // allow the kSpecial family (and finite injections)
  bool nonempty = false;          // batch, heads, seqlen_q, seqlen_k >= 1
  int64_t min_group = 1;          // heads_q / heads_kv at least this (GQA property: 2)
  int64_t min_seqlen_k = 0;
  // A subject's capabilities (tier.h, active_subject()); the defaults admit everything flashcheck computes.
  std::vector<DType> dtypes = every_dtype();
  std::vector<int64_t> head_dims;  // exactly these, when not empty; else head_dim_min..head_dim_max
  int64_t head_dim_min = 1, head_dim_max = 256;
  uint32_t allowed_masks = ~0u;    // (1 << Mask) bits: `masks` is filtered by them
  std::vector<Layout> layouts{Layout::kBHSD, Layout::kBSHD};
  bool padding = true;             // pad > 0 (strides other than contiguous)
  bool gqa = true;                 // heads_q != heads_kv
  // head_dim_v != head_dim in one case in this many (>= 1; 0: never, as for a subject that declares no value dims)
  int64_t unequal_head_dims_in = 8;
  int64_t head_dim_v_min = 1, head_dim_v_max = 256;  // a subject's value dims (fc_subject_value_dims_v1)
  // A subject's shape limits (fc_subject_limits): seqlens are drawn, then moved onto them (multiples, minima,
  // maxima; 0 and 1 mean no limit).
  int64_t seqlen_q_multiple = 1, seqlen_k_multiple = 1;
  int64_t seqlen_q_min = 0, seqlen_k_min = 0;
  int64_t seqlen_q_max = 0, seqlen_k_max = 0;
};
// The active limits, everything allowed; with a subject (FLASHCHECK_SUBJECT) what its capabilities allow.
CaseOptions default_options();

rc::Gen<Case> gen_case(const CaseOptions& options);
// Always the kSpecial family, on a non-empty shape, 1-4 injections.
rc::Gen<Case> gen_special_case(const CaseOptions& options);
// Why `c` is not a case gen_case(options) draws, naming the field (a mask the options leave out, a softcap, sink or
// injection they do not allow, a shape below their minima, a dtype, head_dim or layout outside a subject's
// capabilities), or "" when it is one. Sizes are not held to the limits. While a case line is replayed (replay.h)
// gen_case and gen_special_case return its case where this is "" and discard it naming the field otherwise.
std::string outside_options(const CaseOptions& options, const Case& c);
// The replayed case as a generator of one value, or a discard with `why` (kOutsidePropertyCases + why) when `why` is
// not empty: what the narrower generators of the properties return while a case line is replayed.
rc::Gen<Case> replayed_case(const Case& c, const std::string& why);
// One seqlen aimed at `tile` (0, 1, 2, tile-1, tile, tile+1, multiples +-1, primes, random), at most `cap`.
rc::Gen<int64_t> gen_seqlen(int64_t tile, int64_t cap, int64_t min_value);
rc::Gen<int64_t> gen_head_dim();
// The same inside the options' head dims (a subject's capabilities).
rc::Gen<int64_t> gen_head_dim(const CaseOptions& options);
// A window (left, right) for a case whose mask, seqlens and tiles are fixed: the diagonal alone (0, 0), causal
// (-1, 0), sides at tile multiples -1/0/+1, a left edge that leaves the first K tile empty for every row
// (bottom-right, seqlen_k - seqlen_q >= block_n), sides covering every key, small and random sides.
rc::Gen<std::pair<int64_t, int64_t>> gen_window(const Case& c, const KernelConfig& cfg);
// A softcap: saturating (0.5..5, with q, k of normal cases scaled so that scores reach 30 and beyond), typical
// (20..50), or large enough to change nothing.
rc::Gen<Case> gen_softcap(const Case& c);
// A sink distribution: far above or below the scores, near them, per-head mixtures, -inf (no sink); NaN and
// +inf only with `special_values`.
rc::Gen<ValueSpec> gen_sink(bool special_values);

// Feature words (window kind, softcap kind, sink kind) for the coverage table.
std::vector<std::string> feature_tags(const Case& c);

// How a windowed case reaches across K tiles at its kernel's tile sizes, for the coverage table's "window reach":
// the tiles where a left edge's bugs live.
struct WindowReach {
  std::string tiles;  // "<compute path> <block_m>x<block_n>" ("decode, K tile <block_n>"); empty without a window
  // Some row's window spans three K tiles or more and its first key lies strictly inside a K tile after the first.
  bool left_edge_inside_later_tile = false;
  // Some row's Q tile visits a K tile wholly hidden from the row before its first key, and every score of the
  // case lies below -90 by construction of its values (q >= q_lo >= 0, k <= k_hi <= 0, no injection into Q or K,
  // no softcap): a running max that the hidden tile leaves wrong underflows every weight there.
  bool hidden_tile_then_low_scores = false;
};
WindowReach window_reach(const Case& c);
// Window reach counted over cases (the coverage table, the generators' tests): windowed cases, and of them those
// with each class.
struct WindowReachTally {
  int64_t windowed = 0, left_edge_inside_later_tile = 0, hidden_tile_then_low_scores = 0;
  void add(const WindowReach& r) {
    ++windowed;
    left_edge_inside_later_tile += r.left_edge_inside_later_tile ? 1 : 0;
    hidden_tile_then_low_scores += r.hidden_tile_then_low_scores ? 1 : 0;
  }
};

// Case-shape words for the coverage table (seqlen relative to the tile, GQA kind, layout, ...).
std::vector<std::string> shape_tags(const Case& c);

// A case shows as its case line, so RapidCheck's counterexample is a line flashcheck-repro replays.
void showValue(const Case& c, std::ostream& os);

}  // namespace flashcheck::properties

namespace flashcheck {
// RapidCheck looks showValue up by argument-dependent lookup in the namespace of Case.
inline void showValue(const Case& c, std::ostream& os) { properties::showValue(c, os); }
}  // namespace flashcheck

namespace rc {
template <>
struct Arbitrary<flashcheck::Case> {
  static Gen<flashcheck::Case> arbitrary();  // gen_case(default_options())
};
}  // namespace rc
