// Part of kernel_model_test (cpu): the tensor-core kernel's work order (schedule.h). The snake order must visit
// every work item exactly once for any grid, and plan_grid() chooses the persistent grid exactly where its
// busiest CTA is estimated to finish no later than one item per CTA: the GPU tier checks the results, this checks
// the order.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tensor_core/schedule.h"

namespace flashcheck::tensor_core {
namespace {

TEST(TensorCoreSchedule, SnakeOrderVisitsEveryItemOnce) {
  for (int64_t grid = 1; grid <= 40; ++grid) {
    for (int64_t items = 0; items <= 7 * grid + 3; ++items) {
      std::vector<int> visits(static_cast<size_t>(items), 0);
      for (int64_t cta = 0; cta < grid; ++cta) {
        // A CTA stops at its first item past the end: none of its later steps may hold a real item.
        int64_t step = 0;
        for (; scheduled_item(cta, step, grid) < items; ++step) ++visits[static_cast<size_t>(scheduled_item(cta, step, grid))];
        for (int64_t later = step + 1; later < step + 3; ++later) {
          ASSERT_GE(scheduled_item(cta, later, grid), items) << "grid " << grid << " items " << items << " cta " << cta;
        }
      }
      for (int64_t item = 0; item < items; ++item) {
        ASSERT_EQ(visits[static_cast<size_t>(item)], 1) << "grid " << grid << " items " << items << " item " << item;
      }
    }
  }
}

// K/V tiles a Q tile reads (common/visibility.h, the rule the schedule weighs items by).
int64_t key_tiles(int64_t q0, int64_t q_rows, int64_t seqlen_q, int64_t seqlen_k, Mask mask, int64_t block_n) {
  const detail::Visibility::TileRange r = detail::make_visibility(mask, seqlen_q, seqlen_k).tile_range(q0, q_rows, block_n);
  return r.first + r.count;
}

TEST(TensorCoreSchedule, KeyTilesFollowTheMask) {
  // No mask: every key tile, including a partial last one.
  EXPECT_EQ(key_tiles(0, 128, 1000, 1000, Mask::kNone, 128), 8);
  EXPECT_EQ(key_tiles(0, 128, 128, 0, Mask::kNone, 128), 0);
  // Causal top-left: rows [q0, q0 + q_rows) see keys up to q0 + q_rows - 1.
  EXPECT_EQ(key_tiles(0, 128, 512, 512, Mask::kCausalTopLeft, 128), 1);
  EXPECT_EQ(key_tiles(384, 128, 512, 512, Mask::kCausalTopLeft, 128), 4);
  EXPECT_EQ(key_tiles(0, 1, 512, 512, Mask::kCausalTopLeft, 128), 1);
  // Bottom-right with seqlen_k < seqlen_q: the first rows see no key at all.
  EXPECT_EQ(key_tiles(0, 64, 300, 100, Mask::kCausalBottomRight, 64), 0);
  EXPECT_EQ(key_tiles(192, 64, 300, 100, Mask::kCausalBottomRight, 64), 1);
  // seqlen_k caps the visible keys.
  EXPECT_EQ(key_tiles(0, 128, 1000, 100, Mask::kCausalTopLeft, 64), 2);
}

// Split-KV: the runs of a Q tile (Visibility::TileRange::run) partition its visited tiles in order, each tile keeping
// its kind, and plan_grid() weighs an item by its run (split_item: a Q tile's runs are consecutive items).
TEST(TensorCoreSchedule, SplitRunsPartitionAQTilesTiles) {
  struct Rule {
    Mask mask;
    int64_t left, right;
  };
  const Rule rules[] = {{Mask::kNone, -1, -1},
                        {Mask::kCausalTopLeft, -1, -1},
                        {Mask::kCausalBottomRight, -1, -1},
                        {Mask::kWindowBottomRight, 200, 0},
                        {Mask::kWindowTopLeft, 70, 300}};
  int64_t runs_checked = 0;
  for (const Rule& rule : rules) {
    for (const auto& [seqlen_q, seqlen_k] : {std::pair<int64_t, int64_t>{1000, 1000}, {300, 1100}, {700, 129}}) {
      const detail::Visibility vis = detail::make_visibility(rule.mask, seqlen_q, seqlen_k, rule.left, rule.right);
      constexpr int64_t kBlockM = 128, kBlockN = 64;
      const int64_t q_tiles = (seqlen_q + kBlockM - 1) / kBlockM;
      for (int64_t splits : {1, 2, 3, 7, 40}) {
        GridProblem problem;
        problem.q_tiles = q_tiles;
        problem.splits = splits;
        problem.work_items = q_tiles * splits;
        problem.vis = vis;
        problem.block_m = kBlockM;
        problem.block_n = kBlockN;
        double longest_run = 0.0;
        for (int64_t q_tile = 0; q_tile < q_tiles; ++q_tile) {
          const int64_t q0 = q_tile * kBlockM;
          const detail::Visibility::TileRange all = vis.tile_range(q0, std::min(kBlockM, seqlen_q - q0), kBlockN);
          int64_t next = all.first;
          for (int64_t split = 0; split < splits; ++split) {
            const detail::Visibility::TileRange run = all.run(split, splits);
            ASSERT_EQ(run.first, next) << "q tile " << q_tile << " split " << split << " of " << splits;
            ASSERT_GE(run.count, all.count / splits);
            ASSERT_LE(run.count, all.count / splits + 1);
            for (int64_t n = 0; n < run.count; ++n) {
              const int64_t m = run.first - all.first + n;  // the tile's index among the Q tile's
              ASSERT_EQ(run.needs_mask(n), all.needs_mask(m)) << "split " << split << " tile " << n;
              ASSERT_EQ(run.hides_keys(n), all.hides_keys(m)) << "split " << split << " tile " << n;
            }
            next += run.count;
            longest_run = std::max(longest_run, static_cast<double>(run.count));
            ++runs_checked;
          }
          ASSERT_EQ(next, all.first + all.count) << "q tile " << q_tile << " splits " << splits;
        }
        // One CTA per item: the busiest CTA holds the longest run.
        EXPECT_EQ(busiest_cta_work(problem, problem.work_items), longest_run + kItemOverheadTiles);
      }
    }
  }
  RecordProperty("runs", std::to_string(runs_checked));
}

// The FA-paper grid shape: B * N = 16384 tokens, H * d = 2048.
GridProblem paper_problem(int64_t seqlen, int64_t head_dim, bool causal, int64_t block_m, int64_t block_n) {
  GridProblem p;
  p.q_tiles = (seqlen + block_m - 1) / block_m;
  p.work_items = p.q_tiles * (16384 / seqlen) * (2048 / head_dim);
  p.vis = detail::make_visibility(causal ? Mask::kCausalBottomRight : Mask::kNone, seqlen, seqlen);
  p.block_m = block_m;
  p.block_n = block_n;
  return p;
}

TEST(TensorCoreSchedule, PlanGridSmallProblemsAndEqualItems) {
  GridProblem p = paper_problem(1024, 128, false, 128, 128);
  EXPECT_EQ(plan_grid(p, 132), 132);  // equal items: persistent, an even split
  p.work_items = 100;
  EXPECT_EQ(plan_grid(p, 132), 100);  // one wave
  p.work_items = 0;
  EXPECT_EQ(plan_grid(p, 132), 0);
  p.work_items = 5;
  EXPECT_EQ(plan_grid(p, 0), 1);  // no occupancy figure: still a valid grid
  p.work_items = 1000;
  p.allow_persistent = false;  // tiles measured slower persistent (tile_config.h): one item per CTA
  EXPECT_EQ(plan_grid(p, 132), 1000);
}

// The choice plan_grid() makes, checked against its two estimates: persistent exactly where the busiest CTA's
// work is at most one_item_per_cta_time().
void expect_plan_follows_estimates(const GridProblem& p, int64_t resident, const std::string& what) {
  const int64_t grid = plan_grid(p, resident);
  const double persistent = busiest_cta_work(p, resident);
  const double one_per_item = one_item_per_cta_time(p, resident);
  if (p.work_items <= resident) {
    EXPECT_EQ(grid, p.work_items) << what;
  } else if (grid == resident) {
    EXPECT_LE(persistent, one_per_item) << what;
  } else {
    EXPECT_EQ(grid, p.work_items) << what;
    EXPECT_GT(persistent, one_per_item) << what;
  }
}

TEST(TensorCoreSchedule, PersistentGridWhereItBeatsOneItemPerCta) {
  // Short causal sequences: the snake order balances, so the grid is persistent (and its loads overlap).
  const GridProblem short_causal = paper_problem(512, 128, true, 128, 128);
  EXPECT_EQ(plan_grid(short_causal, 132), 132);
  // Long causal sequences over 16 heads: the snake order leaves a CTA ~1.5x the mean, so one CTA per item.
  const GridProblem long_causal = paper_problem(16384, 128, true, 128, 128);
  EXPECT_EQ(plan_grid(long_causal, 132), long_causal.work_items);
  // Causal windows of 256 keys, N = 4096, 8 x 16 heads at d = 128: items of 3 K/V tiles, the busiest persistent
  // CTA 6% over an even split, which the overlapped prologues more than repay (1.28x measured): persistent.
  GridProblem window;
  window.q_tiles = 32;
  window.work_items = window.q_tiles * 8 * 16;
  window.vis = detail::make_visibility(Mask::kWindowBottomRight, 4096, 4096, 255, 0);
  window.block_m = 128;
  window.block_n = 128;
  EXPECT_GT(busiest_cta_work(window, 132), 1.05 * busiest_cta_work(window, 1) / 132.0);
  EXPECT_EQ(plan_grid(window, 132), 132);
  for (int64_t seqlen : {512, 1024, 2048, 4096, 8192, 16384}) {
    for (int64_t head_dim : {64, 128, 256}) {
      const GridProblem p = paper_problem(seqlen, head_dim, true, head_dim == 64 ? 64 : 128, head_dim == 256 ? 64 : 128);
      expect_plan_follows_estimates(p, 132 * (head_dim == 64 ? 2 : 1),
                                    "N " + std::to_string(seqlen) + " d " + std::to_string(head_dim));
    }
  }
}

TEST(TensorCoreSchedule, OneItemPerCtaTimeIsTheTotalOrTheLongestItem) {
  // Causal, 3 Q tiles of 128 rows over 128-key tiles: items of 3, 2 and 1 tiles, two heads.
  GridProblem p;
  p.q_tiles = 3;
  p.work_items = 6;
  p.vis = detail::make_visibility(Mask::kCausalTopLeft, 384, 384);
  p.block_m = 128;
  p.block_n = 128;
  const double o = kOneItemOverheadTiles;
  EXPECT_DOUBLE_EQ(one_item_per_cta_time(p, 1), 2 * (6 + 3 * o));  // one CTA: everything in turn
  EXPECT_DOUBLE_EQ(one_item_per_cta_time(p, 2), 6 + 3 * o);         // the total over two CTAs
  EXPECT_DOUBLE_EQ(one_item_per_cta_time(p, 6), 3 + o);             // the longest item
}

// Over a sweep of causal shapes (both alignments, seqlen_q above and below seqlen_k, several tilings and
// grids): plan_grid() answers one of its two grids as its estimates say, and a second call (the
// cached answer) and a call for another grid size agree with a fresh simulation.
TEST(TensorCoreSchedule, PlanGridSweepKeepsItsPromise) {
  int persistent = 0;
  int one_per_item = 0;
  for (int64_t block_m : {64, 128}) {
    for (int64_t block_n : {64, 128}) {
      for (int64_t seqlen_q : {1, 63, 300, 777, 2048}) {
        for (int64_t seqlen_k : {1, 100, 512, 1999}) {
          for (bool bottom_right : {false, true}) {
            for (int64_t heads : {1, 7, 64, 333}) {
              GridProblem p;
              p.q_tiles = (seqlen_q + block_m - 1) / block_m;
              p.work_items = p.q_tiles * heads;
              p.vis = detail::make_visibility(bottom_right ? Mask::kCausalBottomRight : Mask::kCausalTopLeft,
                                              seqlen_q, seqlen_k);
              p.block_m = block_m;
              p.block_n = block_n;
              for (int64_t resident : {132, 264}) {
                const int64_t grid = plan_grid(p, resident);
                ASSERT_EQ(plan_grid(p, resident), grid) << "cached answer differs";
                const std::string what = "sq " + std::to_string(seqlen_q) + " sk " + std::to_string(seqlen_k) +
                                         " heads " + std::to_string(heads) + " bm " + std::to_string(block_m);
                expect_plan_follows_estimates(p, resident, what);
                if (p.work_items > resident) ++(grid == resident ? persistent : one_per_item);
              }
            }
          }
        }
      }
    }
  }
  // Both answers occur, so neither branch of the check above is vacuous.
  EXPECT_GT(persistent, 0);
  EXPECT_GT(one_per_item, 0);
}

// The causal shapes of kernel_gpu_test's persistent-grid tests plan persistent on an H100
// (132 SMs, one CTA per SM for the d128 and d256 tiles), so that GPU test exercises the loads carried across
// items, including items without K/V tiles; one batch element alone runs one item per CTA.
TEST(TensorCoreSchedule, GpuTestShapesRunPersistentOnH100) {
  struct Shape {
    int64_t batch, heads_q, seqlen_q, seqlen_k, block_m, block_n;
    bool bottom_right;
  };
  const Shape shapes[] = {
      {16, 8, 512, 512, 128, 128, false},   // bf16 d128
      {16, 8, 400, 200, 128, 64, true},     // f16 d256: Q tile 0 sees no key
      {32, 16, 256, 1000, 128, 64, false},  // bf16 d256
      {16, 16, 777, 333, 128, 128, true},   // bf16 d128: Q tiles 0-2 see no key
      {1, 88, 300, 100, 128, 64, true},     // PersistentGridSmallShapes, bf16 d256: Q tile 0 sees no key
  };
  for (const Shape& s : shapes) {
    GridProblem p;
    p.q_tiles = (s.seqlen_q + s.block_m - 1) / s.block_m;
    p.work_items = p.q_tiles * s.batch * s.heads_q;
    p.vis = detail::make_visibility(s.bottom_right ? Mask::kCausalBottomRight : Mask::kCausalTopLeft, s.seqlen_q,
                                    s.seqlen_k);
    p.block_m = s.block_m;
    p.block_n = s.block_n;
    const int64_t resident = 132;
    EXPECT_EQ(plan_grid(p, resident), resident) << "sq " << s.seqlen_q << " sk " << s.seqlen_k;
    if (s.batch > 1) {  // the per-batch launches of PersistentGridMatchesOneLaunchPerBatch: one item per CTA
      GridProblem one_batch = p;
      one_batch.work_items = p.q_tiles * s.heads_q;
      EXPECT_EQ(plan_grid(one_batch, resident), one_batch.work_items) << "sq " << s.seqlen_q << " sk " << s.seqlen_k;
    }
  }
}

}  // namespace
}  // namespace flashcheck::tensor_core
