// ordered_sums(): the running-sum ingredients of the long-row bounds (docs/error-model.md §4.9). The kernels add a
// row's keys in ascending order, K/V tile by K/V tile; within a tile, in any order or grouping, every partial sum
// of a column lies within M_t = |S_t0| + sum over the tile's keys of |p_j v_jk|, S_t0 being the exact sum of the
// tiles before it. Summing the tiles' M_t (weighted by their key counts) bounds the accumulated rounding of the
// chain far more tightly than gamma_n * sum |p v| where the column's partial sums stay small (mixed signs), and
// never more loosely. Weights come from double scores against the row's exact m and l; their own relative error
// (below 2^-20 where the row qualifies) scales every ingredient up. Under a dropout the sums are of the values the row
// averages (RowResult): a dropped key adds nothing to a column and its full weight to l, a kept one its values
// times 1 / (1 - p).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "flashcheck/error_model.h"
#include "row_view.h"

namespace flashcheck::oracle {
OrderedSums ordered_sums(const Problem& problem, RowRef row, const RowResult& exact, int32_t block_n) {
  OrderedSums out;
  const detail::RowView view = detail::view_row(problem, row);
  const int64_t n = view.visible, dim = view.head_dim, dim_v = view.head_dim_v;  // scores over dim, V over dim_v
  if (n == 0 || !(exact.l > 0) || !std::isfinite(exact.l) || !std::isfinite(exact.m) || exact.nonfinite_input ||
      exact.nonfinite_score || exact.score_overflow || exact.accum_overflow) {
    return out;
  }
  // The weights' relative error: the double dot product (head_dim roundings of at most S, the row's largest |score|),
  // the argument s - m, exp and the division by l; they qualify below 2^-20 and every ingredient is scaled by
  // exp of that error (the same bound applies to each weight, so to every sum of them).
  const double weight_err = (static_cast<double>(dim) + 4) * 0x1p-52 * (exact.score_abs_max + std::fabs(exact.m)) +
                            0x1p-48;
  if (!(weight_err < 0x1p-20)) return out;
  // The double sums below are accurate to gamma_n(2^-53) of their absolute sums: the prefixes of |p v| and of p
  // grow by that factor at most, and each |S_t0| may lie that fraction of the prefix of |p v| below the truth.
  const double g_double = 2 * static_cast<double>(n + 2) * 0x1p-53;
  const double safety = std::exp(weight_err) * (1 + g_double) * (1 + 0x1p-40);
  const int64_t tile = block_n > 0 ? block_n : std::max<int64_t>(n, 1);
  const size_t d = static_cast<size_t>(dim_v);
  out.pv_keys.assign(d, 0.0);
  out.pv_tiles.assign(d, 0.0);
  out.pv_rescale.assign(d, 0.0);
  out.pv_prefix_keys.assign(d, 0.0);
  out.pv_prefix_tiles.assign(d, 0.0);
  out.v_col_max.assign(d, 0.0);
  std::vector<double> s(d, 0.0), s_tile_start(d, 0.0), abs_tile(d, 0.0), prefix(d, 0.0);
  double l_prefix = 0.0;  // exact prefix of l (normalized: the whole row's l is 1)
  double running_max = -std::numeric_limits<double>::infinity();
  const double cap = view.softcap;
  for (int64_t j0 = 0; j0 < n;) {
    // The tile holding key view.key_begin + j0 ends at the next multiple of `tile` in key index.
    const int64_t key0 = view.key_begin + j0;
    const int64_t j1 = std::min(n, j0 + (tile - key0 % tile));
    const double keys = static_cast<double>(j1 - j0);
    double tile_l = 0.0, tile_max = -std::numeric_limits<double>::infinity();
    std::fill(abs_tile.begin(), abs_tile.end(), 0.0);
    s_tile_start = s;
    for (int64_t j = j0; j < j1; ++j) {
      const double* kj = view.k + j * dim;
      const double* vj = view.v + j * dim_v;
      double dot = 0.0;
      for (int64_t k = 0; k < dim; ++k) dot += view.q[k] * kj[k];
      double score = view.scale * dot;
      if (cap > 0) score = cap * std::tanh(score / cap);
      tile_max = std::max(tile_max, score);
      const double p = std::exp(score - exact.m) / exact.l;
      tile_l += p;
      if (!view.kept(j)) continue;
      const double factor = view.value_scale;  // 1 without a dropout: p * (1 * v) is p * v
      for (size_t k = 0; k < d; ++k) {
        const double x = p * (factor * vj[k]);
        s[k] += x;
        abs_tile[k] += std::fabs(x);
        out.v_col_max[k] = std::max(out.v_col_max[k], std::fabs(factor * vj[k]));
      }
    }
    for (size_t k = 0; k < d; ++k) {
      const double m_t = std::fabs(s_tile_start[k]) + g_double * prefix[k] + abs_tile[k];
      prefix[k] += abs_tile[k];
      out.pv_keys[k] += keys * m_t;
      out.pv_tiles[k] += m_t;
      out.pv_rescale[k] += std::fabs(s_tile_start[k]) + g_double * prefix[k];
      out.pv_prefix_keys[k] += keys * prefix[k];
      out.pv_prefix_tiles[k] += prefix[k];
    }
    if (out.tiles > 0 && tile_max - running_max >= -OrderedSums::kRiseWindow) out.tile_rises.push_back(tile_max - running_max);
    running_max = std::max(running_max, tile_max);
    out.l_tile_sums += (keys - 1) * tile_l;
    out.l_chain += (keys + 1) * (l_prefix + tile_l);
    l_prefix += tile_l;
    out.l_after_tiles += l_prefix;
    out.keys += j1 - j0;
    ++out.tiles;
    j0 = j1;
  }
  for (std::vector<double>* vec :
       {&out.pv_keys, &out.pv_tiles, &out.pv_rescale, &out.pv_prefix_keys, &out.pv_prefix_tiles}) {
    for (double& x : *vec) x *= safety;
  }
  out.l_tile_sums *= safety;
  out.l_chain *= safety;
  out.l_after_tiles *= safety;
  out.valid = true;
  return out;
}

}  // namespace flashcheck::oracle
