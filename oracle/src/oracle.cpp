// compute_row(): dispatches one row to the requested oracle tier.
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

}  // namespace flashcheck::oracle
