// Which keys a query row sees, and what that makes of a (Q tile, K/V tile) pair: the one definition every
// kernel family, the tile schedule, the instrumentation and the host model read. Row i sees the keys
// [row_begin(i), row_end(i)); both ends never decrease with i, so over the rows of a Q tile the first row has
// the smallest begin and end and the last row the largest, which is what the tile functions below rely on.
// The oracle has its own predicate written from the formulas in attention.h (a test compares the two on every
// (i, j)).
#pragma once

#include <cstdint>

#include "common/host_device.h"
#include "flashcheck/attention.h"
#include "flashcheck/instrument.h"
#include "flashcheck/mask_names.h"

namespace flashcheck::detail {

// Rows and the offsets below stay within 2^60 in magnitude, so i + offset never overflows: no tensor holds that many
// rows, and a problem that claims more is empty (can_implement bounds the element count), its rows capped here.
inline constexpr int64_t kVisibilityExtent = int64_t{1} << 60;

struct Visibility {
  int64_t seqlen_q = 0;
  int64_t seqlen_k = 0;
  // Left edge: with bounded_begin, row i sees keys j >= i + begin_offset (clamped to [0, seqlen_k]); else from
  // key 0. A window of window_left keys aligned at a(i) = i + shift has begin_offset = shift - window_left.
  bool bounded_begin = false;
  int64_t begin_offset = 0;
  // Right edge: with bounded_end, row i sees keys j < i + end_offset (clamped to [0, seqlen_k]); else every
  // key up to seqlen_k. Causal top-left is end_offset = 1, bottom-right end_offset = seqlen_k - seqlen_q + 1.
  bool bounded_end = false;
  int64_t end_offset = 0;

  // First key row i sees, in [0, seqlen_k].
  FLASHCHECK_HOST_DEVICE constexpr int64_t row_begin(int64_t i) const {
    if (!bounded_begin) return 0;
    const int64_t begin = (i < kVisibilityExtent ? i : kVisibilityExtent) + begin_offset;
    return begin < 0 ? 0 : (begin > seqlen_k ? seqlen_k : begin);
  }

  // One past the last key row i sees, in [0, seqlen_k].
  FLASHCHECK_HOST_DEVICE constexpr int64_t row_end(int64_t i) const {
    if (!bounded_end) return seqlen_k;
    const int64_t end = (i < kVisibilityExtent ? i : kVisibilityExtent) + end_offset;
    return end < 0 ? 0 : (end > seqlen_k ? seqlen_k : end);
  }

  FLASHCHECK_HOST_DEVICE constexpr bool sees(int64_t i, int64_t j) const { return row_begin(i) <= j && j < row_end(i); }

  // The rule over a block of rows and keys in 32-bit arithmetic, as the kernels' masks apply it to a tile of
  // scores: for 0 <= d, c <= kRelSpan and {begin, end, keys} = rel_bounds(i, k),
  //   sees(i + d, k + c)  iff  begin + d <= c && c < end + d && c < keys.
  // begin and end are the unclamped edges i + begin_offset - k and i + end_offset - k (row_begin and row_end before
  // their clamp to [0, seqlen_k]), keys is seqlen_k - k, each saturated at +-kRelSaturate. Why that is exact:
  // - the clamp at 0: a row whose edge lies below 0 sees from key 0 (every c >= 0 passes begin + d <= c, as it
  //   passes the clamped bound) and, for the right edge, no key (c < end + d <= 0 fails, as it should);
  // - the clamp at seqlen_k: keys at or past seqlen_k fail c < keys whatever the row's edges say, and below it the
  //   clamped and unclamped right edges agree; a left edge past seqlen_k leaves the row no key either way;
  // - saturation: kRelSaturate > kRelSpan >= c, d, so a bound saturated high passes every c (end) or fails it
  //   (begin), and one saturated low the reverse, as the exact offset would.
  // An unbounded side takes the saturated value that passes every key. Needs 0 <= i and 0 <= k; a test compares
  // the two forms at the diagonal, the window edges, 0, seqlen_k and where the bounds saturate.
  struct RelBounds {
    int32_t begin, end, keys;
  };
  static constexpr int32_t kRelSpan = 1 << 10;
  static constexpr int32_t kRelSaturate = 1 << 20;
  static_assert(kRelSaturate > 2 * kRelSpan, "a saturated bound must decide every pair of the block alike");
  FLASHCHECK_HOST_DEVICE constexpr RelBounds rel_bounds(int64_t i, int64_t k) const {
    const auto sat = [](int64_t x) {
      return static_cast<int32_t>(x < -kRelSaturate ? -kRelSaturate : (x > kRelSaturate ? kRelSaturate : x));
    };
    const int64_t row = i < kVisibilityExtent ? i : kVisibilityExtent;
    return {bounded_begin ? sat(row + begin_offset - k) : -kRelSaturate,
            bounded_end ? sat(row + end_offset - k) : kRelSaturate, sat(seqlen_k - k)};
  }

  // The K/V tiles of block_n keys that the Q rows [q0, q0 + q_rows) visit, and which of them need what. Tiles
  // outside [first, first + count) are skipped: no row of the Q tile sees any of their keys. Indices of the
  // member functions are relative to `first` (the processing order).
  struct TileRange {
    int64_t first = 0;       // absolute index of the first visited tile
    int64_t count = 0;       // visited tiles
    int64_t full_begin = 0;  // tiles [full_begin, full_end) hold only keys below seqlen_k that every row sees
    int64_t full_end = 0;
    int64_t clean_end = 0;   // tiles [full_begin, clean_end) hide no key below seqlen_k from any row
    // Partial tiles are masked element by element.
    FLASHCHECK_HOST_DEVICE constexpr bool needs_mask(int64_t n) const { return n < full_begin || n >= full_end; }
    // On a tile that hides keys below seqlen_k from some row, those keys' values must not reach the rows
    // (0 * inf = NaN on the tensor cores): the families check their V rows.
    FLASHCHECK_HOST_DEVICE constexpr bool hides_keys(int64_t n) const { return n < full_begin || n >= clean_end; }
    // Split-KV (attention.h): the visited tiles [run_begin(split), run_begin(split + 1)) of `splits` contiguous
    // runs, and run `split` as a range of its own (its tiles keep their kinds).
    FLASHCHECK_HOST_DEVICE constexpr int64_t run_begin(int64_t split, int64_t splits) const {
      return count * split / splits;
    }
    FLASHCHECK_HOST_DEVICE constexpr TileRange run(int64_t split, int64_t splits) const {
      const int64_t begin = run_begin(split, splits), end = run_begin(split + 1, splits);
      const auto clamp = [&](int64_t n) { return n < begin ? int64_t{0} : (n > end ? end - begin : n - begin); };
      return {first + begin, end - begin, clamp(full_begin), clamp(full_end), clamp(clean_end)};
    }
  };
  FLASHCHECK_HOST_DEVICE constexpr TileRange tile_range(int64_t q0, int64_t q_rows, int64_t block_n) const {
    const auto clamp = [](int64_t x, int64_t hi) { return x < 0 ? 0 : (x > hi ? hi : x); };
    const int64_t last = q0 + q_rows - 1;
    const int64_t keys_begin = row_begin(q0), keys_end = row_end(last);  // keys some row sees
    const int64_t all_begin = row_begin(last), all_end = row_end(q0);     // keys every row sees (may be empty)
    TileRange r;
    r.first = keys_begin / block_n;
    r.count = keys_end > keys_begin ? ceil_div(keys_end, block_n) - r.first : 0;
    r.full_begin = clamp(ceil_div(all_begin, block_n) - r.first, r.count);
    r.full_end = clamp(all_end / block_n - r.first, r.count);
    if (r.full_end < r.full_begin) r.full_end = r.full_begin;
    r.clean_end = all_end >= seqlen_k ? r.count : r.full_end;
    return r;
  }

  // Kind of a visited (Q tile, K/V tile) pair for the coverage counters (instrument.h): diagonal if the mask
  // hides a key of the tile below seqlen_k from some valid row of the Q tile (the first row sees the fewest keys
  // at the right edge, the last valid row at the left edge); else tail if the K/V tile or the Q tile runs past
  // its sequence; else full.
  FLASHCHECK_HOST_DEVICE constexpr TileKind tile_kind(int64_t q0, int64_t block_m, int64_t k0, int64_t block_n) const {
    const int64_t k_end = k0 + block_n < seqlen_k ? k0 + block_n : seqlen_k;
    const int64_t last = (q0 + block_m < seqlen_q ? q0 + block_m : seqlen_q) - 1;
    if (row_end(q0) < k_end || row_begin(last) > k0) return TileKind::kDiagonal;
    if (k0 + block_n > seqlen_k || q0 + block_m > seqlen_q) return TileKind::kTail;
    return TileKind::kFull;
  }
};

// A mask's row of masks.def as the kernel reads it, in host and device code alike (the table itself is host
// data): the window sides it applies (Params' for a window mask, else the row's fixed ones) and its alignment.
struct MaskRule {
  int64_t left = -1;
  int64_t right = -1;
  bool bottom_right = false;
};
constexpr MaskRule mask_rule(Mask mask, int64_t window_left, int64_t window_right) {
  switch (mask) {
#define FC_MASK_ROW(c_suffix, enumerator, code, name, takes_window, alignment, left, right, weight)                 \
  case Mask::enumerator:                                                                                       \
    return {takes_window ? window_left : left, takes_window ? window_right : right,                            \
            Alignment::alignment == Alignment::kBottomRight};
#include "flashcheck/masks.def"
#undef FC_MASK_ROW
  }
  return {};  // outside the enum (can_implement rejects it first): every key
}

// The visibility rule of a mask (attention.h's definitions): causal is the window (-1, 0) of its alignment, so
// both spellings give the same rule and so the same bits.
constexpr Visibility make_visibility(Mask mask, int64_t seqlen_q, int64_t seqlen_k, int64_t window_left = -1,
                                     int64_t window_right = -1) {
  Visibility v;
  v.seqlen_q = seqlen_q;
  v.seqlen_k = seqlen_k;
  const MaskRule rule = mask_rule(mask, window_left, window_right);
  // A side of seqlen_q + seqlen_k or more reaches past every key from every row: the same as unbounded, and
  // capped there so that no offset overflows (sizes themselves capped at kVisibilityExtent).
  const int64_t sq = seqlen_q < kVisibilityExtent ? seqlen_q : kVisibilityExtent;
  const int64_t sk = seqlen_k < kVisibilityExtent ? seqlen_k : kVisibilityExtent;
  const int64_t reach = sq + sk;
  const int64_t left = rule.left > reach ? reach : rule.left;
  const int64_t right = rule.right > reach ? reach : rule.right;
  const int64_t shift = rule.bottom_right ? sk - sq : 0;  // the aligned diagonal: a(i) = i + shift
  v.bounded_begin = left >= 0;
  v.begin_offset = v.bounded_begin ? shift - left : 0;
  v.bounded_end = right >= 0;
  v.end_offset = v.bounded_end ? shift + right + 1 : 0;
  return v;
}
inline Visibility make_visibility(const Params& params) {
  return make_visibility(params.mask, params.seqlen_q, params.seqlen_k, params.window_left, params.window_right);
}

}  // namespace flashcheck::detail
