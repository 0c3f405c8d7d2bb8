// Part of kernel_model_test (cpu): the visibility rule's 32-bit form (common/visibility.h, rel_bounds), which the
// tensor-core kernels' masks apply to a tile of scores, against the rule itself (sees) on blocks of rows and keys
// placed where the rule changes: at the diagonal and the window edges, at 0 and seqlen_k, and far enough from any
// edge that the bounds saturate.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/visibility.h"

namespace flashcheck::detail {
namespace {

struct Rule {
  Mask mask;
  int64_t window_left, window_right;
};

std::string describe(const Rule& r, int64_t sq, int64_t sk, int64_t i, int64_t k, int64_t d, int64_t c) {
  return std::string("mask=") + to_string(r.mask) + " window=" + std::to_string(r.window_left) + "," +
         std::to_string(r.window_right) + " sq=" + std::to_string(sq) + " sk=" + std::to_string(sk) +
         " i=" + std::to_string(i) + " k=" + std::to_string(k) + " d=" + std::to_string(d) + " c=" + std::to_string(c);
}

TEST(Visibility, RelBoundsDecideAsTheRuleDoes) {
  constexpr int64_t kSpan = Visibility::kRelSpan;
  const std::vector<Rule> rules = {
      {Mask::kNone, -1, -1},           {Mask::kCausalTopLeft, -1, -1},    {Mask::kCausalBottomRight, -1, -1},
      {Mask::kWindowTopLeft, 0, 0},    {Mask::kWindowTopLeft, 3, 0},      {Mask::kWindowTopLeft, -1, 5},
      {Mask::kWindowTopLeft, 100, 7},  {Mask::kWindowBottomRight, 40, -1}, {Mask::kWindowBottomRight, 2, 9},
      {Mask::kWindowTopLeft, int64_t{1} << 40, int64_t{1} << 40},          {Mask::kWindowBottomRight, 5000000, 0},
  };
  const std::vector<int64_t> lengths = {0, 1, 37, 300, 3000000, (int64_t{1} << 31) - 1};
  // Offsets in the block: keys across a 128-key tile and past it, rows of a warp's tile, and the ends of the span.
  std::vector<int64_t> key_offsets, row_offsets;
  for (int64_t x = 0; x <= 140; ++x) key_offsets.push_back(x);
  for (int64_t x = 0; x <= 20; ++x) row_offsets.push_back(x);
  for (std::vector<int64_t>* o : {&key_offsets, &row_offsets}) o->insert(o->end(), {64, 127, 128, kSpan / 2, kSpan - 1, kSpan});
  int64_t checked = 0;
  for (const Rule& r : rules) {
    for (int64_t sq : lengths) {
      for (int64_t sk : lengths) {
        const Visibility vis = make_visibility(r.mask, sq, sk, r.window_left, r.window_right);
        for (int64_t i : {int64_t{0}, int64_t{1}, int64_t{9}, int64_t{64}, int64_t{200}, sq - 1, sq + 3, int64_t{1} << 30}) {
          if (i < 0) continue;
          std::vector<int64_t> keys = {0, 5, 64, 128, sk - 130, sk - 1, sk, sk + 64, int64_t{1} << 30};
          for (int64_t edge : {vis.row_begin(i), vis.row_end(i)}) keys.insert(keys.end(), {edge - 70, edge - 1, edge, edge + 3});
          for (int64_t k : keys) {
            if (k < 0) continue;
            const Visibility::RelBounds rb = vis.rel_bounds(i, k);
            for (int64_t d : row_offsets) {
              for (int64_t c : key_offsets) {
                const bool rel = rb.begin + d <= c && c < rb.end + d && c < rb.keys;
                ++checked;
                if (rel != vis.sees(i + d, k + c)) {
                  FAIL() << describe(r, sq, sk, i, k, d, c) << ": rel_bounds {" << rb.begin << ", " << rb.end << ", "
                         << rb.keys << "} says " << rel << ", sees() " << !rel;
                }
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(checked, int64_t{10'000'000});
}

}  // namespace
}  // namespace flashcheck::detail
