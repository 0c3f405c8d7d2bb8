// plan_grid(): persistent CTAs in snake order, or one CTA per work item (schedule.h).
#include "schedule.h"

#include <algorithm>
#include <array>
#include <limits>
#include <mutex>
#include <vector>

namespace flashcheck::tensor_core {
namespace {

// Items per head: the work of an item depends only on its index modulo this.
int64_t head_items(const GridProblem& p) { return p.q_tiles * p.splits; }

// An item's K/V tiles (its run's, for a split launch), without overhead.
double item_tiles(const GridProblem& p, int64_t item) {
  const SplitItem at = split_item(item, p.splits);
  const int64_t q_tile = q_tile_of_item(at.unsplit, p.q_tiles);
  const int64_t q0 = q_tile * p.block_m;
  const int64_t q_rows = std::min(p.block_m, p.vis.seqlen_q - q0);
  return static_cast<double>(p.vis.tile_range(q0, q_rows, p.block_n).run(at.split, p.splits).count);
}

}  // namespace

double busiest_cta_work(const GridProblem& problem, int64_t grid) {
  // An item's work depends only on its Q tile and run: one table of head_items entries.
  const int64_t per_head = head_items(problem);
  std::vector<double> tile_work(static_cast<size_t>(per_head));
  for (int64_t i = 0; i < per_head; ++i) {
    tile_work[static_cast<size_t>(i)] = item_tiles(problem, i) + kItemOverheadTiles;
  }
  double busiest = 0.0;
  for (int64_t cta = 0; cta < grid; ++cta) {
    double work = 0.0;
    for (int64_t step = 0;; ++step) {
      const int64_t item = scheduled_item(cta, step, grid);
      if (item >= problem.work_items) break;
      work += tile_work[static_cast<size_t>(item % per_head)];
    }
    busiest = std::max(busiest, work);
  }
  return busiest;
}

double one_item_per_cta_time(const GridProblem& problem, int64_t resident_ctas) {
  // Every head has the same Q tiles and runs.
  const int64_t per_head = head_items(problem);
  double total = 0.0;
  double longest = 0.0;
  for (int64_t item = 0; item < per_head; ++item) {
    const double w = item_tiles(problem, item) + kOneItemOverheadTiles;
    total += w;
    longest = std::max(longest, w);
  }
  total *= static_cast<double>(problem.work_items / per_head);
  return std::max(total / static_cast<double>(std::max<int64_t>(resident_ctas, 1)), longest);
}

int64_t plan_grid(const GridProblem& problem, int64_t resident_ctas) {
  constexpr int64_t kMaxGrid = std::numeric_limits<int32_t>::max();
  const int64_t items = problem.work_items;
  if (items <= 0) return 0;
  const int64_t resident = std::clamp<int64_t>(resident_ctas, 1, kMaxGrid);
  const int64_t one_per_item = std::min(items, kMaxGrid);  // CTAs past 2^31 - 1 loop
  if (items <= resident || !problem.allow_persistent) return one_per_item;  // one wave either way, or not allowed
  if (!problem.vis.bounded_end && !problem.vis.bounded_begin) return resident;  // every item the same work
  if (items > kPlanMaxItems) return one_per_item;
  // The simulation is O(work_items): remembered per problem, so a shape launched again costs a lookup.
  struct Entry {
    GridProblem problem;
    int64_t resident = 0;
    int64_t grid = 0;
  };
  static std::mutex mutex;
  static std::array<Entry, 32> cache{};
  static size_t next_slot = 0;
  const auto same = [&](const Entry& e) {
    const GridProblem& q = e.problem;
    return e.grid != 0 && e.resident == resident && q.work_items == items && q.q_tiles == problem.q_tiles &&
           q.splits == problem.splits &&
           q.vis.seqlen_q == problem.vis.seqlen_q && q.vis.seqlen_k == problem.vis.seqlen_k &&
           q.vis.bounded_end == problem.vis.bounded_end && q.vis.end_offset == problem.vis.end_offset &&
           q.vis.bounded_begin == problem.vis.bounded_begin && q.vis.begin_offset == problem.vis.begin_offset &&
           q.block_m == problem.block_m && q.block_n == problem.block_n;
  };
  {
    const std::lock_guard<std::mutex> lock(mutex);
    for (const Entry& e : cache) {
      if (same(e)) return e.grid;
    }
  }
  const int64_t grid =
      busiest_cta_work(problem, resident) <= one_item_per_cta_time(problem, resident) ? resident : one_per_item;
  const std::lock_guard<std::mutex> lock(mutex);
  cache[next_slot] = Entry{problem, resident, grid};
  next_slot = (next_slot + 1) % cache.size();
  return grid;
}

}  // namespace flashcheck::tensor_core
