// plan_grid(): persistent CTAs in snake order, or one CTA per work item (schedule.h).
#include "schedule.h"

#include <algorithm>
#include <limits>
#include <vector>

namespace flashcheck::tensor_core {
namespace {

double item_work(const GridProblem& p, int64_t item) {
  const int64_t q_tile = p.q_tiles - 1 - item % p.q_tiles;  // the kernel's order: longest Q tile of a head first
  const int64_t q0 = q_tile * p.block_m;
  const int64_t q_rows = std::min(p.block_m, p.seqlen_q - q0);
  return static_cast<double>(key_tiles(q0, q_rows, p.seqlen_k, p.causal, p.causal_offset, p.block_n)) +
         kItemOverheadTiles;
}

}  // namespace

double busiest_cta_work(const GridProblem& problem, int64_t grid) {
  std::vector<double> work(static_cast<size_t>(grid), 0.0);
  for (int64_t cta = 0; cta < grid; ++cta) {
    for (int64_t step = 0;; ++step) {
      const int64_t item = scheduled_item(cta, step, grid);
      if (item >= problem.work_items) break;
      work[static_cast<size_t>(cta)] += item_work(problem, item);
    }
  }
  return *std::max_element(work.begin(), work.end());
}

int64_t plan_grid(const GridProblem& problem, int64_t resident_ctas) {
  constexpr int64_t kMaxGrid = std::numeric_limits<int32_t>::max();
  const int64_t items = problem.work_items;
  if (items <= 0) return 0;
  const int64_t resident = std::clamp<int64_t>(resident_ctas, 1, kMaxGrid);
  const int64_t one_per_item = std::min(items, kMaxGrid);  // CTAs past 2^31 - 1 loop
  if (items <= resident) return items;                     // one wave either way
  if (!problem.causal) return resident;                    // every item the same work: an even split
  if (items > kPlanMaxItems) return one_per_item;
  double total = 0.0;
  double longest = 0.0;
  for (int64_t item = 0; item < items; ++item) {
    const double w = item_work(problem, item);
    total += w;
    longest = std::max(longest, w);
  }
  const double ideal = std::max(total / static_cast<double>(resident), longest);
  return busiest_cta_work(problem, resident) <= kPersistentSlack * ideal ? resident : one_per_item;
}

}  // namespace flashcheck::tensor_core
