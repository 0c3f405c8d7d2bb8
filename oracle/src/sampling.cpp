// sample_rows(): which rows of a large problem the verdict checks. Structural rows (first/last, Q-tile
// boundaries, fully masked rows, window edges crossing K tiles) are where tiling bugs live; they are
// taken for the first and the last (batch, head) pair, so both ends of the grid and of a GQA group are
// exercised (with per-sequence lengths for every sequence too, each at its own lengths), and a seeded uniform
// sample over the valid rows covers everything in between. Only rows inside their sequence are returned.
// Deterministic for a given seed.
#include <algorithm>
#include <set>

#include "flashcheck/oracle.h"

namespace flashcheck::oracle {
namespace {

// splitmix64 (Steele, Lea, Flood 2014): a tiny, well-mixed counter generator; the sample depends on the
// seed only.
uint64_t splitmix64(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform in [0, bound) by the multiply-high method (bias below 2^-64 * bound).
int64_t uniform_below(uint64_t* state, int64_t bound) {
  const unsigned __int128 wide = static_cast<unsigned __int128>(splitmix64(state)) * static_cast<uint64_t>(bound);
  return static_cast<int64_t>(wide >> 64);
}

// Tile indices t in [1, tiles) whose boundary t * block we visit: the first and last kBoundaryTilesEachEnd.
std::vector<int64_t> boundary_tiles(int64_t tiles) {
  std::vector<int64_t> out;
  for (int64_t t = 1; t < tiles; ++t) {
    if (t <= kBoundaryTilesEachEnd || t >= tiles - kBoundaryTilesEachEnd) out.push_back(t);
  }
  return out;
}

// Query-row indices i of the structural rows of sequence b (every head of a sequence has the same structure).
std::set<int64_t> structural_rows(const Problem& p, int64_t b, int32_t block_m, int32_t block_n) {
  const int64_t sq = sequence_seqlen_q(p, b);
  std::set<int64_t> rows;
  if (sq <= 0) return rows;
  rows = {0, sq - 1};
  const auto add = [&](int64_t i) {
    if (i >= 0 && i < sq) rows.insert(i);
  };
  if (block_m > 0) {
    for (const int64_t t : boundary_tiles((sq + block_m - 1) / block_m)) {
      add(t * block_m - 1);
      add(t * block_m);
      add(t * block_m + 1);
    }
  }
  // Fully masked rows and the rows just before and after them (a bottom-right diagonal masks the first rows, a
  // top-left window the last ones); rows whose last visible key sits next to a K-tile boundary (where the
  // diagonal crosses from one K tile into the next), and rows whose first visible key does (where a window's
  // left edge does: the row's first tile turns partial, then is skipped). A row's keys end at its diagonal
  // only where the visibility has a right edge (causal, a window), and start past key 0 only where it has a left
  // edge.
  std::set<int64_t> edge_ends, edge_begins;
  if (block_n > 0) {
    for (const int64_t t : boundary_tiles((sequence_seqlen_k(p, b) + block_n - 1) / block_n)) {
      if (p.visibility.window_right >= 0) edge_ends.insert({t * block_n - 1, t * block_n, t * block_n + 1});
      if (p.visibility.window_left >= 0) edge_begins.insert({t * block_n - 1, t * block_n, t * block_n + 1});
    }
  }
  int64_t first_masked = -1, last_masked = -1;
  for (int64_t i = 0; i < sq; ++i) {
    const KeySpan keys = visible_keys(p, b, i);
    if (keys.size() == 0) {
      if (first_masked < 0) first_masked = i;
      last_masked = i;
    }
    if (edge_ends.count(keys.end) != 0 || edge_begins.count(keys.begin) != 0) rows.insert(i);
  }
  if (first_masked >= 0) {
    add(first_masked - 1);
    add(first_masked);
    add(last_masked);
    add(last_masked + 1);
  }
  return rows;
}

}  // namespace

std::vector<RowRef> sample_rows(const Problem& problem, int32_t block_m, int32_t block_n, uint64_t seed,
                                int64_t full_check_limit, int64_t random_rows) {
  check_sequence_lengths(problem);
  const int64_t heads = problem.heads_q;
  std::vector<RowRef> out;
  if (problem.batch <= 0 || heads <= 0 || problem.seqlen_q <= 0) return out;
  // The valid rows in (b, h, i) order: sequence b holds heads * its own seqlen_q of them, from row_start[b] on.
  std::vector<int64_t> row_start(static_cast<size_t>(problem.batch) + 1, 0);
  for (int64_t b = 0; b < problem.batch; ++b) {
    row_start[static_cast<size_t>(b) + 1] = row_start[static_cast<size_t>(b)] + heads * sequence_seqlen_q(problem, b);
  }
  const int64_t total = row_start.back();
  const auto ref_of = [&](int64_t flat) {
    const int64_t b = std::upper_bound(row_start.begin(), row_start.end(), flat) - row_start.begin() - 1;
    const int64_t sq = sequence_seqlen_q(problem, b), in_sequence = flat - row_start[static_cast<size_t>(b)];
    return RowRef{b, in_sequence / sq, in_sequence % sq};
  };
  if (total <= full_check_limit) {
    out.reserve(static_cast<size_t>(total));
    for (int64_t flat = 0; flat < total; ++flat) out.push_back(ref_of(flat));
    return out;
  }
  // Where the structure is: every sequence of a batch without lengths of its own has the same, taken at the first
  // and the last (batch, head) pair; with them each sequence has its own (its diagonal, its masked rows, its last
  // Q and K tiles, and its place in a packed layout), taken at its first head, and the last pair besides.
  std::vector<RowRef> pairs;
  if (has_sequence_lengths(problem)) {
    for (int64_t b = 0; b < problem.batch; ++b) pairs.push_back(RowRef{b, 0, 0});
  } else {
    pairs.push_back(RowRef{0, 0, 0});
  }
  pairs.push_back(RowRef{problem.batch - 1, heads - 1, 0});
  for (const RowRef pair : pairs) {
    for (const int64_t i : structural_rows(problem, pair.b, block_m, block_n)) out.push_back(RowRef{pair.b, pair.h, i});
  }
  uint64_t state = seed;
  for (int64_t r = 0; r < random_rows; ++r) out.push_back(ref_of(uniform_below(&state, total)));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace flashcheck::oracle
