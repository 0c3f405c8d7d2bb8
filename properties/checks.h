// Shared pieces of the properties: building and running a case on the tier's backend, editing inputs for
// metamorphic relations (element by element, in the dtype, keeping the encoded bytes and the exact values
// in step), exact rows with their error bounds, the worst error/bound of a relation, and bit-for-bit
// comparison of outputs. Everything here reports through RC_ASSERT / RC_LOG, so a failure names the case line
// and what differed.
#pragma once

#include <rapidcheck.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "flashcheck/case.h"
#include "flashcheck/error_model.h"
#include "flashcheck/inputs.h"
#include "flashcheck/oracle.h"
#include "flashcheck/oracle_bridge.h"  // judged_visible_keys: which keys a row sees, for judging
#include "flashcheck/runner.h"
#include "flashcheck/verdict.h"
#include "generators.h"

namespace flashcheck::properties {

// Cases of finite values on a non-empty shape (every feature allowed).
CaseOptions finite_options();

// make_inputs, asserted to succeed.
HostInputs inputs_for(const Case& c);
// A copy whose params point at its own vectors.
HostInputs copy_of(const HostInputs& in);

// run_case on the active backend (planted defect applied on the host model), asserted to return ok.
RunOutputs run_backend(const HostInputs& inputs, bool instrument = false);
// run_case with `options` on the active subject (instrumentation off; a case outside its capabilities discarded) or
// backend (planted defect applied on the host model; an unsupported case discarded where `discard_unsupported`), a
// lost CUDA context ending the process, asserted to return ok.
RunOutputs run_on_tier(const HostInputs& inputs, RunOptions options, bool discard_unsupported = false);

// Judge options for the active tier: every row of small problems, sampled rows of large ones.
JudgeOptions judge_options();

// Logs the verdict report and asserts the verdict passed.
void assert_verdict(const Verdict& verdict);

// Canonical indices: O [B, Hq, Sq, Dv] (Dv = value_head_dim: O has V's columns), row statistics [B, Hq, Sq].
inline int64_t row_index(const Params& p, int64_t b, int64_t h, int64_t i) { return (b * p.heads_q + h) * p.seqlen_q + i; }
inline int64_t o_index(const Params& p, int64_t b, int64_t h, int64_t i, int64_t d) {
  return row_index(p, b, h, i) * value_head_dim(p) + d;
}

// Rows of the problem, flattened: flat index (b * heads_q + h) * seqlen_q + i -> (b, h, i).
inline oracle::RowRef row_ref(const Params& p, int64_t flat) {
  return {flat / (p.heads_q * p.seqlen_q), (flat / p.seqlen_q) % p.heads_q, flat % p.seqlen_q};
}
inline double o_at(const RunOutputs& out, const Params& p, const oracle::RowRef& r, int64_t d) {
  return out.o[static_cast<size_t>(o_index(p, r.b, r.h, r.i, d))];
}
inline float lse_at(const RunOutputs& out, const Params& p, const oracle::RowRef& r) {
  return out.lse[static_cast<size_t>(row_index(p, r.b, r.h, r.i))];
}

// A relation's own choices (a permutation, the slice that changes, the row whose window bounds the band, the grid
// cap): drawn from the case's seed and the relation's name by SplitMix64, never by RapidCheck, so that the case line
// with property=NAME replays the relation as it ran (replay.h). Each draw is logged (RC_LOG) with what it chose.
class RelationDraws {
 public:
  RelationDraws(const Case& c, std::string_view relation);
  int64_t below(const char* what, int64_t n);  // uniform in [0, n); 0 when n <= 0
  bool coin(const char* what);
  uint64_t bits(const char* what);             // 64 fresh bits (a shuffle's seed)
  template <typename T>
  T pick(const char* what, const std::vector<T>& items) {  // one of `items`, uniformly (not empty)
    const T& x = items[static_cast<size_t>(uniform(static_cast<int64_t>(items.size())))];
    RC_LOG() << what << ": " << x << "\n";
    return x;
  }

 private:
  uint64_t next();
  int64_t uniform(int64_t n);  // below() without the log
  uint64_t state_;
};

// Deterministic derived randomness (permutations, shift vectors): splitmix64.
struct SplitMix {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  int64_t below(int64_t n) { return n <= 0 ? 0 : static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }
};
// A permutation of `keys` key indices (key j moves to perm[j]): reversed, rotated by a K tile of `block_n`, or
// shuffled, as `draws` decides (logged).
std::vector<int64_t> draw_key_permutation(RelationDraws& draws, int64_t keys, int64_t block_n);
// A key index aimed at the K tiles: a tile boundary -1/0/+1 or anywhere in [lo, hi], half and half.
int64_t pick_key(RelationDraws& draws, const char* what, int64_t lo, int64_t hi, int64_t block_n);

// Columns of tensor 'q', 'k' (head_dim) or 'v' (value_head_dim).
inline int64_t columns_of(const Params& p, char tensor) { return tensor == 'v' ? value_head_dim(p) : p.head_dim; }
// One input element (tensor 'q', 'k' or 'v'), by logical index.
double input_value(const HostInputs& in, char tensor, int64_t b, int64_t h, int64_t s, int64_t d);
// Sets one element: `value` must be representable in the dtype (or NaN / +-inf / -0.0).
void set_input_value(HostInputs& in, char tensor, int64_t b, int64_t h, int64_t s, int64_t d, double value);
// Sets the sink of query head h (the case must have a sink): `value` must be an fp32 value (or NaN / +-inf).
void set_sink_value(HostInputs& in, int64_t h, double value);
// Key j of K/V head (b, g) of `dst` becomes key j_src of head (b_src, g_src) of `src`: K's and V's own columns (the
// first ones both have, where the two differ in width).
void copy_key(HostInputs& dst, int64_t b, int64_t g, int64_t j, const HostInputs& src, int64_t b_src, int64_t g_src,
              int64_t j_src);
// Every K and V element of key j of head (b, g) becomes `value`.
void fill_key(HostInputs& in, int64_t b, int64_t g, int64_t j, double value);
// The non-finite values `dtype` stores, for poisoning keys a row must not see: NaN and +-inf, or NaN alone in a format
// without infinity (e4m3, where +-inf would round to NaN).
std::vector<double> poison_values(DType dtype);
// fn(b, h, s, d) for every element of tensor 'q', 'k' or 'v' of `p`, by logical index.
template <typename Fn>
void for_each_input_element(const Params& p, char tensor, Fn&& fn);
// Applies fn(value) -> value to every element of one tensor (the result is rounded to the dtype).
template <typename Fn>
void transform_tensor(HostInputs& in, char tensor, Fn&& fn);

// The dtype's significand bits (implicit bit included: 24, 11, 8) and its smallest normal value.
int precision_bits(DType dtype);
double min_normal(DType dtype);
// Largest |x| (0 for none).
double max_abs(const std::vector<double>& xs);
// Smallest E with 2^E >= a (a > 0).
int ceil_log2(double a);
// Puts one tensor on the grid of multiples of `grid` (round to nearest); exact in the dtype when the grid is coarse
// enough (callers choose it so).
void quantize(HostInputs& in, char tensor, double grid);

// One vector u added to every key row, exactly in the dtype (ShiftingKeysShiftsOnlyLse, KeyShiftInvariance).
struct KeyShift {
  std::vector<double> u;        // [head_dim]; empty: no exact shift (K near the dtype's largest value)
  double grid = 0.0;            // K and u are multiples of it
  const char* pattern = "none";  // "constant", "random", "one-hot" (for the coverage table)
};
// Puts `base`'s K on the multiples of g = 2^(E+2-p) (2^E >= max|k|, and at least the smallest normal, so that g stays on
// the subnormal grid; p = precision_bits) and draws u on the same grid with |u_d| <= 2^E: one constant, random per
// column, or one-hot, as `draws` decides (logged). Every k + u is then a multiple of g of magnitude at most 2^(E+1),
// below 2^p g: exactly representable, like k and u. Where 2^(E+2) passes the dtype's largest value K is left as it is
// and u is empty.
KeyShift quantize_keys_for_shift(RelationDraws& draws, HostInputs* base);
// A copy of `base` whose every key row is k + u (exact on quantize_keys_for_shift's grid; set_input_value asserts it).
HostInputs shift_keys(const HostInputs& base, const std::vector<double>& u);

// The exact row and its bound under the configuration that ran.
struct ExactRow {
  oracle::RowResult exact;
  oracle::RowBound bound;
};
ExactRow exact_row(const HostInputs& in, const KernelConfig& config, const oracle::RowRef& row);
// The same for the problem without its sink: the keys' own row (their max, their sum), however the oracle
// counts a sink.
ExactRow exact_row_without_sink(const HostInputs& in, const KernelConfig& config, const oracle::RowRef& row);
// Rows a property checks: all of a small problem, a deterministic sample (tile boundaries, masked rows,
// random rows) of a large one.
std::vector<oracle::RowRef> rows_to_check(const HostInputs& in, const KernelConfig& config, uint64_t seed);

// Worst ratio |got - want| / bound of a relation between two runs, with where it happened: NaN on either side,
// or any difference against a zero bound, is infinitely bad.
struct RelationWorst {
  double ratio = 0.0;
  std::string where;
  void add(double got, double want, double bound, const oracle::RowRef& r, int64_t col);
};
// Logs the worst ratio and asserts it is at most 1.
void assert_worst(const RelationWorst& w, const char* relation);

// True when a and b are the same bits (as decoded doubles / floats).
bool same_bits(double a, double b);
bool same_bits(float a, float b);
// First index where two outputs differ bit for bit, or -1; asserts with a message naming what differed.
void assert_bit_identical(const std::string& what, const RunOutputs& a, const RunOutputs& b, const Params& params,
                          const std::vector<bool>* rows_to_compare = nullptr);

std::string describe_row(const oracle::RowRef& r);

// Two runs of one problem laid out or grouped differently (`a` from in_a, `b` from in_b, the same logical rows):
// bit for bit when the same kernel configuration ran both, else within the sum of the two runs' bounds on the rows
// the oracle checks (a layout, a group size or the other sequences of a batch can move a problem to another family,
// which rounds differently). `rows_to_compare` (flat rows, row_index) limits both comparisons to those rows. A
// subject is held to the same bits unless `subject_may_differ` (the two shapes are a paged and a packed cache,
// batches of other sizes or other K/V head counts: its kernels for them are its own to choose).
void assert_same_kernel_bits_or_within_bounds(const std::string& what, const HostInputs& in_a, const RunOutputs& a,
                                              const HostInputs& in_b, const RunOutputs& b, uint64_t seed,
                                              const std::vector<bool>* rows_to_compare = nullptr,
                                              bool subject_may_differ = false);

// Values a row may not see never reach it (attention.h): rows marked `blind` (their keys all unchanged between
// `clean` and `poisoned`, which differ in hidden K/V rows only) of the two runs `a` (clean) and `b` compared.
// Bit for bit wherever both runs do the same arithmetic for the row's own keys: always on the host model (it
// computes a row's visible keys only) and on the GPU's general path. On the GPU's tensor-core and split-TF32
// paths a tile holding a non-finite value takes an exact path (nan_in_masked_keys_never_reaches_output in
// metamorphic.cpp says which and why): there every output of a blind row that is finite in the clean run is
// finite in the poisoned run, rows with no visible key are bit-identical, and the sampled blind rows differ by at
// most the sum of the two runs' error bounds.
void assert_blind_rows_unchanged(const std::string& what, const HostInputs& clean, const RunOutputs& a,
                                 const RunOutputs& b, const std::vector<bool>& blind, uint64_t seed);

// ---- template definitions
template <typename Fn>
void for_each_input_element(const Params& p, char tensor, Fn&& fn) {
  const int64_t heads = tensor == 'q' ? p.heads_q : p.heads_kv;
  const int64_t seqlen = tensor == 'q' ? p.seqlen_q : p.seqlen_k;
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t s = 0; s < seqlen; ++s)
        for (int64_t d = 0; d < columns_of(p, tensor); ++d) fn(b, h, s, d);
}

template <typename Fn>
void transform_tensor(HostInputs& in, char tensor, Fn&& fn) {
  const Params& p = in.params;
  for_each_input_element(p, tensor, [&](int64_t b, int64_t h, int64_t s, int64_t d) {
    const double x = input_value(in, tensor, b, h, s, d);
    set_input_value(in, tensor, b, h, s, d, round_to_dtype(p.dtype, fn(x)));
  });
}

}  // namespace flashcheck::properties
