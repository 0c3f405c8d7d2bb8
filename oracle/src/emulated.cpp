// emulated_row(): the same-precision reference of the statistical check: the online softmax at the path's
// rounding points (softcap and sink merge included), tiled like the kernel, as an ensemble of implementations
// (exp2 and tanh errors +-, l summed along the keys and as a tree, P*V truncated
// k at a time as Fasi, Higham, Mikaitis and Pranesh (PeerJ CS 2021) measured tensor cores, or in an FMA
// chain) whose worst member per element is the reference. Scores likewise both ways on mma paths: as
// round-to-nearest FMA chains and as the tensor core's truncated blocks, tf32 ties away (fp_emulation.h).
// (Truncated scores were once left out as erring less, their bias being common to all scores; on peaked rows
// of large scores the bias is relative to each score and does not cancel: GPU finding
// gpu-property-rms-fp32-peaked-scores, split-TF32 at 1.29x a reference without them.)
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "flashcheck/error_model.h"
#include "fp_emulation.h"
#include "row_view.h"

namespace flashcheck::oracle {
namespace {

// A deterministic stand-in for the GPU's exp2 and tanh errors: uniform in [-limit, limit], keyed by the row, the
// key and the function (splitmix64 finalizer), so the reference is reproducible and its errors are as large as
// the hardware's may be. `sign` gives the antithetic realization.
double function_error(const RowRef& row, int64_t key, double sign, double limit, uint64_t function) {
  uint64_t z =
      (static_cast<uint64_t>(row.b) * 0x9e3779b97f4a7c15ull) ^ (static_cast<uint64_t>(row.h) * 0xc2b2ae3d27d4eb4full) ^
      (static_cast<uint64_t>(row.i) * 0x165667b19e3779f9ull) ^ (static_cast<uint64_t>(key) * 0xbf58476d1ce4e5b9ull) ^
      function;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  const double unit = static_cast<double>(z >> 11) * 0x1p-53;  // [0, 1)
  return sign * limit * (2 * unit - 1);
}
double exp2_error(const RowRef& row, int64_t key, double sign) {
  return function_error(row, key, sign, kExp2RelErr, 0);
}
double tanh_error(const RowRef& row, int64_t key, double sign) {
  return function_error(row, key, sign, kTanhRelErr, 0x6a09e667f3bcc909ull);
}
// Keys of the sink merge's two exp2 (alpha, the sink's weight): below every tile's rescale key -1 - key.
constexpr int64_t kSinkAlphaKey = std::numeric_limits<int64_t>::min();
constexpr int64_t kSinkWeightKey = std::numeric_limits<int64_t>::min() + 1;

// fp32 sum of p[0..n) as a pairwise tree: halves summed recursively, as reductions across lanes pair partial sums.
float pairwise_sum(const float* p, int64_t n) {
  if (n <= 1) return n == 1 ? p[0] : 0.0f;
  const int64_t half = n / 2;
  return pairwise_sum(p, half) + pairwise_sum(p + half, n - half);
}

// One member of the reference ensemble: the online softmax of families.h in its telescoping form (m in log2
// units, alpha = exp2(r_old - r_new)) over tiles of `tile` keys, from the precomputed x_j = fl(s_j c), with
// the exp2 error realization `sign` and the P*V accumulation `rounding`. x[j] is key key_begin + j; tiles
// start at multiples of `tile` counted from key `tile_origin` (the kernel's K/V tiles sit at multiples of
// block_n in key index, so a row whose keys start mid-tile has a short first tile). P is rounded relative to
// the reference r the kernels use (the running max; on the tensor-core path the tile's own max where it lies
// within kTensorCoreRefSlackLog2 of the running max), so the reference's rounding of P matches theirs value
// for value. A sink (sink2 = fl(sink * log2 e); -inf: none) is merged into the final state as in the kernels'
// epilogue: m' = max(r, sink2), alpha = exp2(r - m'), l' = l alpha + exp2(sink2 - m'), acc' = acc alpha.
// The row sum l is carried twice, both from the same fp32 P: summed along the keys as P*V's chain adds them, and
// as a pairwise tree within each tile (as a warp's reductions sum it). A kernel that sums l in another order than
// P*V leaves their errors uncancelled in O = acc / l: with a constant V and repeated weights the chain's roundings
// add up in one direction (tens of u over 64 keys) while the tree's stay small, and the chain-only quotient would
// be exact (GPU finding gpu-nightly-rms-constant-v-sum-order). V rows hold dim_v values. Under a dropout the caller
// passes the dropped keys' V rows as zeros (an FMA of a zero product leaves the accumulator as it is, as skipping
// the key does) and value_scale32 = fl32(1 / (1 - p)), by which each quotient is multiplied in fp32 before its
// rounding to the format (1: none); fp8's descale_v takes the same place (fl(fl(o / l) d_v)). Returns both quotients, [dim_v] each: [0] chain l, [1] tree l.
std::array<std::vector<double>, 2> softmax_pv(const RowRef& row, const std::vector<float>& x, const detail::Operands& v,
                                              int64_t dim_v, int64_t key_begin, int64_t tile, int64_t tile_origin,
                                              float sink2, float value_scale32, Format format, Arithmetic path,
                                              double sign, detail::DotRounding rounding) {
  const int64_t n = static_cast<int64_t>(x.size());
  const float neg_inf = -std::numeric_limits<float>::infinity();
  std::array<std::vector<double>, 2> out;
  out.fill(std::vector<double>(static_cast<size_t>(dim_v), 0.0));
  float m = neg_inf, ref = neg_inf;
  std::array<float, 2> l = {0.0f, 0.0f};  // [0] chain, [1] tree
  std::vector<float> acc(static_cast<size_t>(dim_v), 0.0f);
  // The fp8 path's P offset (exact in fp32; 0 elsewhere, where adding it changes no exp2), added to every weight's
  // argument and so carried by l and the accumulator alike; its P*V takes each tile into a fresh accumulator, promoted into acc by one fp32 FMA.
  const bool fp8 = path == Arithmetic::kTensorCoreFp8;
  // exp2 with the member's error, flushed to zero below fp32's normal range where the kernel's is ex2.approx.ftz (a
  // row whose weights all lie there gives O = 0 on the hardware, and so here): the tensor-core paths' softmax steps,
  // and the sink's merge where the fp16/bf16 tensor-core epilogue makes it (the fp8 epilogue's exp2f keeps
  // subnormals).
  const bool ftz_steps = uses_tile_reference(path), ftz_sink = ftz_steps && !fp8;
  const auto exp2_at = [&](float arg, int64_t key, bool ftz) {
    const float e = static_cast<float>(std::exp2(static_cast<double>(arg)) * (1 + exp2_error(row, key, sign)));
    return ftz && e < std::numeric_limits<float>::min() ? 0.0f : e;
  };
  const float offset = fp8 ? static_cast<float>(kFp8POffsetLog2) : 0.0f;
  std::vector<float> tile_acc(fp8 ? static_cast<size_t>(dim_v) : 0);
  for (int64_t t0 = 0, t1 = 0; t0 < n; t0 = t1) {
    t1 = std::min(n, t0 + tile - (key_begin - tile_origin + t0) % tile);
    float tile_max = neg_inf;
    for (int64_t j = t0; j < t1; ++j) tile_max = std::fmax(tile_max, x[static_cast<size_t>(j)]);
    const float m_new = std::fmax(m, tile_max);
    float ref_new = m_new;
    if (uses_tile_reference(path)) {
      const float slack = static_cast<float>(kTensorCoreRefSlackLog2);
      ref_new = tile_max == neg_inf ? ref : (tile_max >= m_new - slack ? tile_max : m_new);
    }
    const float m_use = ref_new == neg_inf ? 0.0f : ref_new;  // no key yet: exp2(-inf - -inf) would be NaN
    const float alpha = exp2_at(ref - m_use, -1 - (key_begin + t0), ftz_steps);
    std::vector<float> p(static_cast<size_t>(t1 - t0));
    float p_sum = 0.0f;
    for (int64_t j = t0; j < t1; ++j) {
      float& pj = p[static_cast<size_t>(j - t0)];
      pj = exp2_at((x[static_cast<size_t>(j)] - m_use) + offset, key_begin + j, ftz_steps);
      p_sum += pj;  // l takes fp32 P, before any rounding for P*V
    }
    l[0] = std::fma(l[0], alpha, p_sum);
    l[1] = std::fma(l[1], alpha, pairwise_sum(p.data(), static_cast<int64_t>(p.size())));
    if (uses_tile_reference(path)) {
      for (float& pj : p) pj = detail::round_to(format, pj);
    }
    if (fp8) {
      std::fill(tile_acc.begin(), tile_acc.end(), 0.0f);
      detail::accumulate_pv(tile_acc.data(), detail::make_operands(std::move(p), path), v, t0, t1, dim_v, path,
                            rounding);
      for (size_t k = 0; k < acc.size(); ++k) acc[k] = std::fma(acc[k], alpha, tile_acc[k]);
    } else {
      for (float& a : acc) a *= alpha;
      detail::accumulate_pv(acc.data(), detail::make_operands(std::move(p), path), v, t0, t1, dim_v, path, rounding);
    }
    m = m_new;
    ref = ref_new;
  }
  if (sink2 != neg_inf) {
    float alpha = 0.0f;
    if (sink2 == -neg_inf) {  // all the weight: O = 0 (a non-finite accumulator stays non-finite)
      l.fill(1.0f);
    } else if (std::isnan(sink2)) {
      alpha = sink2;
      l.fill(sink2);
    } else {
      const float m_new = std::fmax(ref, sink2);
      const float origin = m_new == neg_inf ? 0.0f : m_new;
      alpha = exp2_at(ref - origin, kSinkAlphaKey, ftz_sink);
      const float sink_p = exp2_at((sink2 - origin) + offset, kSinkWeightKey, ftz_sink);
      for (float& li : l) li = li * alpha + sink_p;
    }
    for (float& a : acc) a *= alpha;
  }
  for (size_t s = 0; s < out.size(); ++s) {
    if (l[s] == 0.0f) continue;  // no usable key and no sink: O = 0
    for (int64_t d = 0; d < dim_v; ++d) {
      float o = acc[static_cast<size_t>(d)] / l[s];
      if (value_scale32 != 1.0f) o *= value_scale32;
      out[s][static_cast<size_t>(d)] = detail::round_to(output_format(format), o);
    }
  }
  return out;
}

}  // namespace

std::vector<double> emulated_row(const Problem& problem, RowRef row, Format format, Arithmetic path, int32_t block_n,
                                 const RowResult* exact) {
  if (!computes_on(path, format)) {
    throw std::invalid_argument(std::string("emulated_row: arithmetic ") + to_string(path) + " does not compute on " +
                                to_string(format) + " inputs (the fp8 path takes f8e4m3 inputs, and they take it only)");
  }
  const detail::RowView view = detail::view_row(problem, row);
  // A dropout is emulated on the general path only, the one whose arithmetic it is defined for (bound_row).
  if (view.has_dropout() && path != Arithmetic::kGeneralFp32) {
    throw std::invalid_argument(std::string("emulated_row: a dropout is emulated on the general-fp32 path only, not ") +
                                to_string(path));
  }
  // Scores over dim (Q's and K's columns), O over dim_v (V's).
  const int64_t dim = view.head_dim, dim_v = view.head_dim_v, n = view.visible;
  if (n == 0) return std::vector<double>(static_cast<size_t>(dim_v), 0.0);
  RowResult computed;
  if (exact == nullptr) {
    computed = compute_row(problem, row, Tier::kFast);
    exact = &computed;
  }
  // The inputs are values of the format: exact as float. Dot products once per score rounding; then
  // x_j = fl(s_j * fl(scale * log2 e)), or with a softcap c x_j = fl(fl(c log2 e) * tanh(fl(s_j * fl(scale / c))))
  // with tanh's error realization of the member.
  const auto floats = [](const double* values, int64_t count) { return std::vector<float>(values, values + count); };
  const detail::Operands q = detail::make_operands(floats(view.q, dim), path);
  const detail::Operands k = detail::make_operands(floats(view.k, n * dim), path);
  std::vector<float> v_rows = floats(view.v, n * dim_v);
  for (int64_t j = 0; j < n; ++j) {  // a dropped key's values never reach the accumulator
    if (!view.kept(j)) std::fill_n(v_rows.begin() + j * dim_v, dim_v, 0.0f);
  }
  const detail::Operands v = detail::make_operands(std::move(v_rows), path);
  const float value_scale32 = static_cast<float>(view.value_scale);
  // The folded scale as the kernels hold it: fl32 of the problem's scale, times fp8's descales in fp32 where given.
  const float scale = view.folded_scale32;
  const float scale_log2 = scale * detail::kLog2eF;
  const bool capped = view.softcap > 0;
  const float cap = static_cast<float>(view.softcap);
  const float cap_log2 = cap * detail::kLog2eF, tanh_scale = scale / cap;
  const float sink2 = static_cast<float>(view.sink) * detail::kLog2eF;
  // The ensemble: both exp2 error realizations (antithetic), and on mma paths both ways of accumulating the
  // scores and P*V (the hardware's truncated blocks, a round-to-nearest chain), and on the split path the
  // hardware's own member besides: truncated blocks with the low parts read toward zero, in the scores and in
  // P*V; each member's O divided by l summed in two orders (softmax_pv). Per element the quotient farthest from
  // the exact value: never a lucky cancellation, and at least as noisy as any one healthy implementation.
  const int64_t tile = block_n > 0 ? block_n : n;
  const int64_t tile_origin = block_n > 0 ? 0 : view.key_begin;  // one tile: it starts at the first visible key
  std::vector<detail::DotRounding> roundings = {detail::DotRounding::kNearestChain};
  if (path != Arithmetic::kGeneralFp32) roundings.push_back(detail::DotRounding::kTruncatedBlocks);
  if (path == Arithmetic::kSplitTf32) roundings.push_back(detail::DotRounding::kTruncatedBlocksLowTowardZero);
  const auto hardware = [](detail::DotRounding r) { return r == detail::DotRounding::kTruncatedBlocksLowTowardZero; };
  std::vector<double> out;
  // The realizations of the function errors: sign +1 and -1 (antithetic), and with a softcap also 0, no function
  // error at all. Clamped to [-1, 1], a perturbed tanh of a saturated score can only move inward, so both antithetic
  // members lower saturated scores on average; where every implementation shares a shift (the roundings of
  // fl(c log2 e) and of the sink's fl(z log2 e) move capped scores against the sink), that bias can cancel it and make
  // the reference look exact. The unperturbed member keeps it (fuzz findings gpu-nightly-rms-softcap-sink-*).
  const std::vector<double> realizations =
      capped ? std::vector<double>{1.0, -1.0, 0.0} : std::vector<double>{1.0, -1.0};
  // x per realization; without a softcap one serves all.
  const size_t x_sets = capped ? realizations.size() : 1;
  std::vector<std::vector<float>> x(x_sets, std::vector<float>(static_cast<size_t>(n)));
  std::vector<float> dots(static_cast<size_t>(n));
  for (const detail::DotRounding score_rounding : roundings) {
    detail::dot_fp32_rows(q, k, n, dim, path, score_rounding, dots.data());
    for (int64_t j = 0; j < n; ++j) {
      const float d = dots[static_cast<size_t>(j)];
      for (size_t r = 0; r < x_sets; ++r) {
        float& xj = x[r][static_cast<size_t>(j)];
        if (!capped) {
          xj = d * scale_log2;
          continue;
        }
        // tanh never leaves [-1, 1], whatever its error.
        const double t = std::tanh(static_cast<double>(d * tanh_scale)) *
                         (1 + tanh_error(row, view.key_begin + j, realizations[r]));
        xj = cap_log2 * static_cast<float>(std::clamp(t, -1.0, 1.0));
      }
    }
    for (const detail::DotRounding rounding : roundings) {
      if (hardware(score_rounding) != hardware(rounding)) continue;  // the hardware's member is whole
      for (size_t r = 0; r < realizations.size(); ++r) {
        for (const std::vector<double>& member :
             softmax_pv(row, x[std::min(r, x_sets - 1)], v, dim_v, view.key_begin, tile, tile_origin, sink2,
                        value_scale32, format, path, realizations[r], rounding)) {
          if (out.empty()) {
            out = member;
            continue;
          }
          for (size_t e = 0; e < out.size(); ++e) {
            const double want = exact->o[e];
            if (std::fabs(member[e] - want) > std::fabs(out[e] - want)) out[e] = member[e];
          }
        }
      }
    }
  }
  return out;
}

}  // namespace flashcheck::oracle
