// The error model: per-element bounds for O and per-row bounds for LSE, m and l, for each input format and
// each arithmetic class, derived from the kernel's rounding points (docs/error-model.md has the derivation
// and justifies every constant). Verdicts are ratios |kernel - exact| / bound; fail above 1 (and on NaN).
// A second, statistical check (RmsCheck) compares the kernel's RMS error with that of a same-precision
// emulated reference, which catches degradations the worst-case bound is too loose to see.
#pragma once

#include <cstdint>
#include <vector>

#include "flashcheck/oracle.h"

namespace flashcheck::oracle {

struct RowBound {
  std::vector<double> o;       // [head_dim_v] absolute bound on |O_k - O*_k|
  // [head_dim_v] the part of o that flushing fp32 subnormals may take (FTZ weights, alpha and P*V products, each
  // below 2^-126): a kernel that flushes may lose an element whose A_k lies within it whole, so such an element
  // carries no statistic for the RMS check.
  std::vector<double> o_flush;
  double lse = 0.0;            // absolute bound on |LSE - LSE*|
  double m = 0.0;              // absolute bound on the distance of m from [m* - m_below, m*]
  double m_below = 0.0;        // how far below the max the kernel's m may lie (natural units): the tensor-core
                               // path reports the reference of its last tile (kTensorCoreRefSlackLog2)
  double l_rel = 0.0;          // relative bound on |l - l_ref| / l_ref, l_ref = l_given_m(exact, kernel's m);
                               // infinite where l is not judged (|m| beyond ~2^24, a sink of +inf)
  bool unconstrained = false;  // outside the domain (non-finite score, score or accumulator overflow, vacuous)
  bool vacuous = false;        // outside the domain because no finite bound exists at this length (§4.9)
  // The bounds a check must beat to tell anything: O*_k lies within max_j |v_jk| of 0 (a convex combination of the
  // column, a sink adding the value 0), so with a bound of o_trivial[k] = max_j |v_jk| (or above) a kernel that
  // writes zeros passes; LSE* lies in [m, m + ln(n + 1)], and a bound of lse_trivial = max(ln(n + 1), ln 2) admits
  // any point of that range (or l off by a factor 2). Checks with bounds at or above these are uninformative.
  std::vector<double> o_trivial;  // [head_dim_v]
  double lse_trivial = 0.0;
};

// The tensor-core path rounds P relative to a tile's own max where that lies within this many log2 units of the
// running max (the kernel's own constant, kTensorCoreRefSlackLog2 in flashcheck/instrument.h; a harness test checks
// that the two agree). Its reported m (LSE = m + ln l) is that reference, up to this far below the max, and its
// accumulators run up to 2^this above the running-max formulation's.
inline constexpr double kTensorCoreRefSlackLog2 = 8.0;
// The fp8 path's offset of P (log2 units): p = exp2(x - r + 8) <= 2^8 against the reference r of its tile, so that P
// in e4m3 (largest finite 448) never saturates and weights down to 2^-14 of the heaviest stay normal; l carries the
// same factor, and LSE takes it back (docs/design/fp8-forward.md).
inline constexpr double kFp8POffsetLog2 = 8.0;

// The running-sum ingredients of a row in its kernel's key order (docs/error-model.md §4.9): keys ascending, in
// K/V tiles of block_n keys whose boundaries lie at multiples of block_n in key index. In units of the exact O and
// l (p_j = w_j / l, so the row's l is 1), per column k, for tiles t of n_t visible keys, S_t0 the exact sum of
// p_j v_jk over the tiles before t, M_t = |S_t0| + sum over t's keys of |p_j v_jk| (every partial sum of the tile
// lies within it, whatever order or grouping adds the tile), P_t the prefix of |p_j v_jk| through tile t, L_t =
// sum over t's keys of p_j. Each is an upper bound (the ingredients' own evaluation is covered).
struct OrderedSums {
  bool valid = false;                   // false: not computed (non-finite inputs or scores, overflow)
  std::vector<double> pv_keys;          // [head_dim_v] sum_t n_t M_t
  std::vector<double> pv_tiles;         // [head_dim_v] sum_t M_t
  std::vector<double> pv_rescale;       // [head_dim_v] sum_t |S_t0|
  std::vector<double> pv_prefix_keys;   // [head_dim_v] sum_t n_t P_t
  std::vector<double> pv_prefix_tiles;  // [head_dim_v] sum_t P_t
  double l_tile_sums = 0.0;             // sum_t (n_t - 1) L_t
  double l_after_tiles = 0.0;           // sum_t (L_0 + ... + L_t)
  double l_chain = 0.0;                 // sum_t (n_t + 1) (L_0 + ... + L_t)
  int64_t keys = 0, tiles = 0;          // visible keys, tiles holding one
  std::vector<double> v_col_max;        // [head_dim_v] max over the visible keys of |v_jk|
  // Tiles after the first whose max of the exact scores comes within kRiseWindow of the running max of the tiles
  // before (or passes it): that difference (natural-log units, > 0 when it rises). Only such a tile can move a
  // kernel's running max, whose scores are within far less of the exact ones; a tile that leaves it unchanged
  // rescales by exp2(0) = 1 exactly and rounds nothing.
  std::vector<double> tile_rises;
  static constexpr double kRiseWindow = 1.0;
};
OrderedSums ordered_sums(const Problem& problem, RowRef row, const RowResult& exact, int32_t block_n);

// Bound for one row as computed in `arithmetic` on inputs of `format`, processed in K/V tiles of `block_n`;
// head_dim is the length of the score dot products: the problem's head_dim (Q's and K's columns), never its
// head_dim_v. O's columns, and so the bound's, are exact.o's (V's head_dim_v): column k of O is bounded from V's
// column k (the ingredients of RowResult) and from score errors over head_dim. The row's softcap and sink
// (RowResult) are part of it. The bound includes the oracle tier's own error; it is never negative or NaN.
// With `sums` (ordered_sums of the row for the same block_n) the accumulations of P*V and l are bounded from the
// running sums as well, the smaller bound taken (§4.9): what keeps long rows within reach. A row where neither gives
// a finite bound (the sums' rounding can reach the size of the sum itself) is `vacuous`: outside the domain.
// `splits` > 1: the K/V tiles the row's Q tile visits are split into that many contiguous runs (split-KV), each an
// online softmax of its own, merged in split order (§4.10): the bound counts min(splits, tiles) more tile boundaries
// and does not use `sums` (they model the unsplit order); splits <= 1 is the unsplit bound, bit for bit.
// A row under a dropout (RowResult::dropout_p > 0) is bounded on the general-fp32 path only (§4.13: the kernel sums
// the kept keys' products and scales o by fl32(1 / (1 - p)) after the division); another path throws
// std::invalid_argument. p = 0 is the bound without a dropout, bit for bit.
RowBound bound_row(const RowResult& exact, Format format, Arithmetic arithmetic, int32_t block_n, int64_t head_dim,
                   const OrderedSums* sums = nullptr, int32_t splits = 1);

// Unit roundoff of a format: fp32 2^-24, fp16 2^-11, bf16 2^-8, e4m3 2^-4.
double unit_roundoff(Format format);

// The ratio one check reports (threshold 1), with the oracle's semantics of non-finite values:
//   want NaN (the oracle's "must be non-finite")  -> 0 if got is NaN or +-inf, else +inf;
//   want +-inf                                    -> 0 if got == want, else +inf;
//   unconstrained row, finite want                -> 0 (no numeric claim outside the domain);
//   finite want, non-finite got                   -> NaN (a failure: compare with !(ratio <= 1));
//   otherwise |got - want| / bound, with 0/0 = 0 and x/0 = +inf.
// Use it for every O element and for LSE.
double error_ratio(double got, double want, double bound, bool unconstrained);

// The kernel reports m in natural-log units and l = sum_j exp(s_j - m_kernel). The exact counterpart is
// l_ref = l* exp(m* - m_kernel), computed here from m + m_lo so that large |m| loses nothing.
double l_given_m(const RowResult& exact, double kernel_m);
// Ratios for the online-softmax statistics; 0 for unconstrained rows (a NaN score can leave the kernel's
// running max finite: fmaxf ignores NaN, so m and l carry no contract there), and for l also where its
// bound is infinite (|m| beyond ~2^24: fp32's rounding of m alone changes exp(m) beyond any factor).
double m_error_ratio(const RowResult& exact, const RowBound& bound, double kernel_m);
double l_error_ratio(const RowResult& exact, const RowBound& bound, double kernel_m, double kernel_l);

// A same-precision emulated reference for the statistical check: the online softmax of families.h in its
// telescoping form (m in log2 units, alpha = exp2(m_old - m_new)) over K/V tiles of `block_n` keys (one tile
// when block_n <= 0; pass the kernel's block_n: P is then rounded relative to the same running max as in
// the kernel, so the two round P value for value), at the rounding points of `arithmetic` on `format` inputs:
// fp32 scores as round-to-nearest FMA chains (three tf32 products per product on the split path, tf32
// rounded ties-away as cvt.rna) and, on tensor-core paths, as truncated blocks (on the split path also with the
// low parts read toward zero, as the mma reads them: the hardware's own member, scores and P*V),
// x = fl(s * fl(scale * log2 e)) (with a softcap c, x = fl(fl(c log2 e) * tanh(fl(s * fl(scale / c)))), tanh with
// a deterministic pseudo-random relative error of up to kTanhRelErr),
// p = exp2(x - m) in fp32 with a deterministic pseudo-random relative error of up to kExp2RelErr (the GPU's
// approximate exp2), l summed in fp32 from fp32 p (along the keys as P*V, and as a pairwise tree per tile: one
// division by each), P rounded as the path rounds it, P*V in fp32, the sink merged into the final state as the
// kernels' epilogue does, O rounded to format. It is an
// ensemble: both signs of the exp2 and tanh error realizations and, on tensor-core paths, P*V accumulated both as the
// hardware does (exact products added k at a time with truncation) and as an FMA chain (as the host model
// does); per element the member farthest from the exact value (`exact`: the row's RowResult, computed with
// the fast tier when null) is returned. So every healthy implementation, GPU or host model, stays within the
// RMS factor of it, without lucky cancellations in the reference. Returns O [head_dim_v] as doubles (0 for
// rows with no usable key; NaN where the emulation is non-finite). Under a dropout (general-fp32 only; another path
// throws std::invalid_argument) the dropped keys' products are skipped and O = fl32(fl32(acc / l) fl32(1 / (1 - p)))
// before its rounding to format, as §4.13 has the kernel compute it. On the fp8 path (kTensorCoreFp8, e4m3 inputs) as
// docs/design/fp8-forward.md has the kernel compute: scores and P*V in k32 blocks at 14 bits, P's argument offset by
// kFp8POffsetLog2 and P rounded to e4m3, each tile's P*V in a fresh accumulator promoted by one fp32 FMA, O in bf16.
std::vector<double> emulated_row(const Problem& problem, RowRef row, Format format, Arithmetic arithmetic,
                                 int32_t block_n = 0, const RowResult* exact = nullptr);

// Relative error bound of the GPU's exp2 (covers exp2f's 2 ulp and ex2.approx.f32's 2^-22.5).
inline constexpr double kExp2RelErr = 0x1p-22;
// Relative error bound of the GPU's tanhf (2 ulp, CUDA Programming Guide): at most 4u of |tanh| for fp32's u = 2^-24.
inline constexpr double kTanhRelErr = 0x1p-22;

// The statistical check. Feed every compared O element of the constrained rows whose oracle value is finite
// (pool the rows of one case: a single row's elements share one l error, too few independent draws). Errors
// are taken relative to the element's scale A_k = sum_j p_j |v_jk| (RowResult::abs_pv), so that every row
// weighs alike and one row with large V cannot turn the pool into a single random draw:
//   ratio = rms(e_kernel) / (kRmsFactor * rms(e_reference) + floor),   e = (value - exact) / A_k,
//   |e_reference| at least the score noise kRmsScoreRoundings * u_32 * sqrt(QS_k) / A_k (RowResult::dev_pv_score_sq),
//   floor = kRmsFloorUlps * (u_q * rms(|exact| / A_k) / sqrt(D) + kRmsFp32Roundings * u_32),
//   u_q = max(unit_roundoff(output_format(format)), u_32 = 2^-24) (O's format), D the independent draws among the N elements: an element
//   whose exact value and A_k equal the one added before it (a row's columns under a constant V) is the same
//   computation, rounded the same way, and no new draw; nor is a row that repeats an earlier row's computation
//   (merge with new_draws false: the caller knows which rows have the same inputs).
// Fail above 1. kRmsFactor = 2: the kernel computes with the same rounding points as the reference, so its
// RMS error is the reference's up to summation order and tiling; twice that is a degradation (a format one
// step coarser costs 8x or more). The floor keeps a small sample from failing on a few unlucky roundings
// when the reference happens to be exact (O representable, or cancelling in the reference's order): about
// one ulp of O, or one fp32 rounding of A_k, on one draw; it vanishes as the draws grow. The score noise keeps a
// pool whose error comes from a few scores (one heavy row of a sampled verdict, whose weight error is one key's
// score error against the rest) from failing where every member of the reference happens to round those few
// scores luckily: each reference element errs at least as much as independent score errors of
// kRmsScoreRoundings u_32 N_j (N_j of RowResult::dev_pv_score_sq; the dot product's last rounding and
// x = fl(s c)) would move it, in RMS.
inline constexpr double kRmsFactor = 2.0;
inline constexpr double kRmsFloorUlps = 2.0;
inline constexpr double kRmsFp32Roundings = 4.0;  // fp32 roundings per element a healthy pipeline may add
inline constexpr double kRmsScoreRoundings = 2.0;  // fp32 roundings of each score in the reference's noise floor
class RmsCheck {
 public:
  explicit RmsCheck(Format format) : format_(format) {}
  // One element: the kernel's value, the emulated reference's, the exact one, A_k (RowResult::abs_pv) and QS_k
  // (RowResult::dev_pv_score_sq; 0: no score noise). Elements with a non-finite value or A_k = 0 (an all-zero V
  // column: exact either way) are skipped.
  void add(double got, double reference, double exact, double abs_pv, double score_sq = 0.0);
  // Pools `other`'s elements; new_draws false: they repeat computations already pooled (a row with an earlier row's
  // inputs), so they add to N but not to D.
  void merge(const RmsCheck& other, bool new_draws = true);
  int64_t count() const { return count_; }
  int64_t draws() const { return draws_; }  // D of the floor
  double rms_kernel() const;     // rms((got - exact) / A_k)
  double rms_reference() const;  // rms((reference - exact) / A_k)
  double rms_exact() const;      // rms(|exact| / A_k), in [0, 1]: 1 when nothing cancels
  double rms_floor() const;      // floor of the formula above
  double ratio() const;          // 0 when nothing was added or the kernel is exact

 private:
  Format format_;
  double sum_sq_kernel_ = 0.0, sum_sq_reference_ = 0.0, sum_sq_exact_ = 0.0;
  int64_t count_ = 0;
  int64_t draws_ = 0;
  double last_exact_ = 0.0, last_abs_pv_ = 0.0;  // the element added before (count_ > 0 and no merge since)
  bool has_last_ = false;
};

}  // namespace flashcheck::oracle
