// The oracle: the exact attention result of one query row, from exactly the dtype-rounded inputs.
// Host-only, no CUDA. Two tiers:
//   gold: Boost.Multiprecision cpp_bin_float_quad (113-bit significand), plain loops that read like the math;
//   fast: double with error-free transformations (exact products, compensated sums, log1p-based LSE), its own
//         error bounded per element (RowResult::o_err ...) and tested against gold (docs/error-model.md).
// Besides O, LSE, m and l each row carries the ingredients of the error bound (error_model.h).
//
// Semantics (the API's, README "Semantics"), as the oracle reports them:
//  * no usable key (no visible key, or every visible score is -inf) and no sink: O = 0, LSE = -inf, m = -inf,
//    l = 0;
//  * a visible score that is NaN or +inf (IEEE arithmetic on the inputs: inf*0 = NaN, inf-inf = NaN):
//    nonfinite_score; O, LSE, m, l are all NaN ("must be non-finite");
//  * with a softcap c the scores are capped first: +-inf becomes +-c, so only a NaN score is non-finite;
//  * a sink joins m, l and LSE as one more logit whose value row is zero; with no usable key O = 0 and
//    LSE = m = sink, l = 1. A NaN sink counts as a NaN score; a sink of +inf gives O = 0, LSE = m = +inf and
//    l = 1 (the sink's own weight: no claim on l is made there); -inf is no sink;
//  * a non-finite V element at a visible key (even one of zero weight: the kernel computes 0*inf = NaN):
//    O of that column is NaN, which means "must be non-finite" (the kernel may give +-inf or NaN); only a row
//    with no usable key and no sink is exempt (the kernel writes its O = 0 without reading its accumulator);
//  * -inf scores carry zero weight;
//  * a dropout (Problem::dropout, p > 0) scales each kept key's value row by 1 / (1 - p) and removes each dropped
//    key's from O: O = sum_j p_j z_j / (1 - p) v_j, with p_j the undropped weights (m, l and LSE do not change). A
//    dropped key's V row is not read: a non-finite value there reaches no column of O.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <vector>

#include "flashcheck/oracle_problem.h"

namespace flashcheck::oracle {

struct RowRef {
  int64_t b = 0, h = 0, i = 0;
  friend bool operator==(const RowRef&, const RowRef&) = default;
  friend auto operator<=>(const RowRef&, const RowRef&) = default;
};

enum class Tier : int32_t { kGold = 0, kFast = 1 };
const char* to_string(Tier tier);  // "gold", "fast"

// Notation of the fields: s_j = scale * q.k_j over the visible keys j (with a softcap c: c tanh(scale * q.k_j / c)),
// m = max_j s_j, w_j = exp(s_j - m), l = sum_j w_j, p_j = w_j / l, S_j = |scale| * sum_d |q_d k_jd| (the condition
// of score j, before the cap), gap_j = m - s_j. Dot products run over Q's and K's head_dim columns d; O and every
// per-column field below over V's columns k, value_dim(problem) of them (head_dim_v). With a sink it is one more
// logit s_sink whose value row is zero and whose S is 0: m and l include it, and every sum over j below includes its
// term (in dev_pv p_s |O_k|, in dev_pv_gap p_s gap_s |O_k|, in the gap sums and maxima its gap); abs_pv, abs_v_sum
// and max_abs_v do not change.
// Under a dropout every per-column ingredient below is that of the values the row averages, v~_jk = z_j sigma v_jk
// (z_j the key's keep decision, sigma = 1 / (1 - p)): a dropped key counts as a value row of zeros (as the sink
// does), a kept one with its values times sigma; abs_v_sum and max_abs_v run over the kept keys, times sigma.
struct RowResult {
  RowRef row;
  int64_t visible = 0;    // number of visible keys
  int64_t seqlen_k = 0;   // keys of the row's own sequence: the kernel visits at most ceil(seqlen_k / block_n) tiles
  std::vector<double> o;  // [head_dim_v]; 0 for rows with no usable key; NaN = "must be non-finite"
  double lse = 0.0;       // natural log; -inf for rows with no usable key
  double m = 0.0;         // max_j s_j over visible keys (s = scale * q.k); -inf if none
  double m_lo = 0.0;      // m + m_lo is the max to ~2^-100 relative (l relative to the kernel's m needs it)
  double l = 0.0;         // sum_j exp(s_j - m); 0 if none
  // Ingredients of the bound (error_model.h). Per column k of O (head_dim_v of them):
  std::vector<double> abs_pv;        // A_k  = sum_j p_j |v_jk|
  std::vector<double> dev_pv;        // D_k  = sum_j p_j |v_jk - O_k|          (weight errors move O by this)
  std::vector<double> dev_pv_score;  // DS_k = sum_j p_j S_j |v_jk - O_k|      (score errors, per key)
  std::vector<double> dev_pv_gap;    // DG_k = sum_j p_j gap_j |v_jk - O_k|    (exponent-argument rounding)
  // QS_k = sum_j (p_j N_j (v_jk - O_k))^2, N_j = |s_j| + |scale| sqrt(sum_d (q_d k_jd)^2) (with a softcap
  // min(c, N_j)): the squared first-order effect on O_k of independent score errors of N_j each, the magnitude
  // an fp32 sum of the products and its scaling round at when the products' signs are random (the RMS check's
  // score noise, RmsCheck::add; S_j, the worst case, would swamp the reference on rows of cancelling products).
  std::vector<double> dev_pv_score_sq;
  std::vector<double> abs_v_sum;     // sum_j |v_jk| over visible keys, unweighted (absolute underflow floors)
  // sum_j p_j |v_jk| over the keys of weight w_j <= kFlushableWeight: the part of A_k a kernel that flushes fp32
  // subnormals (FTZ) can lose through its weights (RowBound::o_flush).
  std::vector<double> abs_pv_light;
  double max_abs_v = 0.0;            // max over visible j and V's columns k of |v_jk|
  double score_abs_max = 0.0;        // max_j S_j: per-score error scale (dot product condition)
  double score_abs_weighted = 0.0;   // sum_j p_j S_j
  double score_gap_max = 0.0;        // max_j gap_j over keys with a finite score
  double score_gap_weighted = 0.0;   // sum_j p_j gap_j
  double score_flush_max = 0.0;      // max_j of what flush-to-zero arithmetic can drop from score j:
                                     // |scale| (sum of |q_d k_jd| over products with an operand below 2^-114
                                     // or a magnitude below 2^-126, plus head_dim * 2^-126)
  // The row's scale, softcap and sink, and the sink's place in the row (for the bound).
  double scale = 0.0;                                     // the problem's softmax scale
  double softcap = 0.0;                                   // c > 0: the scores above are capped; 0: none
  double sink = -std::numeric_limits<double>::infinity();  // the sink logit of the row's head; -inf: none
  double sink_p = 0.0;                                    // p_s = exp(sink - m) / l, the sink's share of l
  double keys_m = -std::numeric_limits<double>::infinity();  // max over the keys alone; m = max(keys_m, sink)
  // The row's dropout: p (0: none) and the kept keys' factor, keep_scale(p) (1 without a dropout).
  float dropout_p = 0.0f;
  double keep_scale = 1.0;
  // This tier's own error (bounds on |reported - exact|); bound_row adds them, so verdicts stay honest.
  std::vector<double> o_err;  // [head_dim_v]
  double lse_err = 0.0;
  double m_err = 0.0;
  double l_rel_err = 0.0;  // relative, for l_given_m()
  // Domain flags. RowBound::unconstrained = nonfinite_score || score_overflow || accum_overflow.
  bool nonfinite_input = false;  // a NaN/Inf entered a visible score or a visible V row
  bool nonfinite_score = false;  // a visible score is NaN or +inf
  bool score_overflow = false;   // |scale|*log2(e) or 1 times sum_k |q_k k_jk| exceeds FLT_MAX/4 (with a
                                 // softcap c: |scale|/c or 1 times it, or c*log2(e)), or |sink|*log2(e) does, or
                                 // (a row with keys) the folded |scale|*log2(e) or |scale|/c itself does: the
                                 // kernel's fp32 scores (or x - m) may overflow: outside its domain
  bool accum_overflow = false;   // sum_j |v_jk| exceeds FLT_MAX/4: the fp32 accumulator may overflow
};

// False where the tier's own error analysis no longer holds (scores so large that their rounding in the
// tier is of order one): O and l are then of unknown accuracy (o_err and l_rel_err infinite); m and LSE
// keep their bounds. Only the hull bound and no statistical check apply to such a row.
inline bool first_order_accurate(const RowResult& r) { return r.l_rel_err < std::numeric_limits<double>::infinity(); }

// The exact result of one row. Deterministic; the fast tier costs O(seqlen_k * (head_dim + head_dim_v)) double
// operations, the gold tier that many 113-bit operations (see docs/error-model.md for throughput).
RowResult compute_row(const Problem& problem, RowRef row, Tier tier);

// Work done so far of a long computation, (done, total) in the caller's units (compute_rows: terms, row_terms()).
// Called from the calling thread only.
using ProgressFn = std::function<void(int64_t done, int64_t total)>;

struct RowsOptions {
  int threads = 0;      // 0: OpenMP's default team (every core, or OMP_NUM_THREADS); 1: the calling thread only
  ProgressFn progress;  // called between rows, and once at the end; empty: none
  // More work per row, on the thread that computed it, right after: per_row(index, result of rows[index]).
  // It must touch only its own index's state (then results stay independent of the thread count).
  std::function<void(size_t index, const RowResult& result)> per_row;
};

// compute_row() of every row, in parallel over rows (OpenMP; serial where the oracle is built without it):
// result i is rows[i]'s, bit for bit what compute_row() gives whatever the thread count (one thread computes
// a row, in the row's own order, into its own slot). An exception from a row (or per_row) is rethrown here
// after the loop, the one of the lowest index; invalid per-sequence lengths throw before it
// (check_sequence_lengths).
std::vector<RowResult> compute_rows(const Problem& problem, std::span<const RowRef> rows, Tier tier,
                                    const RowsOptions& options = {});

// The threads compute_rows() uses with threads = 0 (1 where the oracle is built without OpenMP).
int max_threads();

// The terms of one row: visible keys times (head_dim + head_dim_v) / 2, its q.k and p.v products counted in pairs
// (visible keys times head_dim where the two are equal: one q.k product and one p.v product each); 0 for a row
// outside the problem (past its sequence's length included).
int64_t row_terms(const Problem& problem, RowRef row);

// Rows to check for a problem. Only valid rows: with per-sequence lengths, sequence b's rows are i <
// sequence_seqlen_q(problem, b) (a sequence of 0 rows has none), and "all rows" below means all valid rows.
// All rows when their number (batch*heads_q*seqlen_q without per-sequence lengths) is <= full_check_limit;
// otherwise the structural rows of the first and the last (batch, head) pair, and with per-sequence lengths also
// those of every sequence at its head 0, each from its own lengths: the first and last rows, the rows at Q-tile
// boundaries (t*block_m-1, t*block_m, t*block_m+1 for the first and last kBoundaryTilesEachEnd tiles), the first
// and last fully masked rows and the rows just before and after them, the rows whose visible keys end
// (visible_keys().end, where the visibility has a right edge) or begin (visible_keys().begin, where it has a left
// edge) at a K-tile boundary (t*block_n-1, t*block_n, t*block_n+1, same tile limit); plus `random_rows` rows drawn
// uniformly over all valid rows by splitmix64 keyed by `seed`. Deterministic, sorted, unique.
inline constexpr int64_t kBoundaryTilesEachEnd = 4;

// The largest weight w_j = exp(s_j - m) a kernel that flushes fp32 subnormals can lose: its own weight of the key,
// relative to its reference, is below 2^-126 when it flushes, and that reference lies at most 2^8 below the max (the
// tensor-core paths' tile reference; a flushed alpha drops weights up to 2^8 above their reference's, as a sink's or
// split run's alpha does); another 2^8 covers the kernel's score errors on any row whose bound is constrained.
inline constexpr double kFlushableWeight = 0x1p-110;
std::vector<RowRef> sample_rows(const Problem& problem, int32_t block_m, int32_t block_n, uint64_t seed,
                                int64_t full_check_limit = 4096, int64_t random_rows = 64);

}  // namespace flashcheck::oracle
