// compute_row(): dispatches one row to the requested oracle tier; compute_rows(): many rows at once.
#include "flashcheck/oracle.h"

#include "tiers.h"

namespace flashcheck::oracle {

const char* to_string(Tier tier) {
  switch (tier) {
    case Tier::kGold: return "gold";
    case Tier::kFast: return "fast";
  }
  return "unknown";
}

RowResult compute_row(const Problem& problem, RowRef row, Tier tier) {
  const detail::RowView view = detail::view_row(problem, row);
  return tier == Tier::kGold ? detail::gold_row(view) : detail::fast_row(view).result;
}

int max_threads() { return 1; }

int64_t row_terms(const Problem& problem, RowRef row) {
  return visible_keys(problem, row.i).size() * problem.head_dim;
}

std::vector<RowResult> compute_rows(const Problem& problem, std::span<const RowRef> rows, Tier tier,
                                    const RowsOptions& options) {
  std::vector<RowResult> out(rows.size());
  int64_t total = 0;
  for (const RowRef& row : rows) total += row_terms(problem, row);
  int64_t done = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    out[i] = compute_row(problem, rows[i], tier);
    done += row_terms(problem, rows[i]);
    if (options.progress) options.progress(done, total);
  }
  return out;
}

}  // namespace flashcheck::oracle
