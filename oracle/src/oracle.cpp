// compute_row(): dispatches one row to the requested oracle tier. compute_rows(): many rows, in parallel over
// rows with OpenMP (docs/design/oracle-speed.md says why OpenMP): rows are independent, each is computed by one
// thread into its own slot, so the results do not depend on the thread count or the schedule.
#include "flashcheck/oracle.h"

#include <atomic>
#include <exception>

#include "tiers.h"

#if defined(_OPENMP)
#include <omp.h>
#endif

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
  return tier == Tier::kGold ? detail::gold_row(view) : detail::fast_row(view, &detail::thread_scratch()).result;
}

int64_t row_terms(const Problem& problem, RowRef row) {
  // A row outside the problem computes nothing (compute_row throws for it); this count never throws for one, so
  // that compute_rows() can count every row, valid or not, inside its parallel loop.
  if (row.b < 0 || row.b >= problem.batch || row.h < 0 || row.h >= problem.heads_q || row.i < 0 ||
      row.i >= sequence_seqlen_q(problem, row.b)) {
    return 0;
  }
  return visible_keys(problem, row.b, row.i).size() * ((problem.head_dim + value_dim(problem)) / 2);
}

int max_threads() {
#if defined(_OPENMP)
  return omp_get_max_threads();
#else
  return 1;
#endif
}

std::vector<RowResult> compute_rows(const Problem& problem, std::span<const RowRef> rows, Tier tier,
                                    const RowsOptions& options) {
  // Per-sequence lengths are checked once, here, before any work: row_terms() below then never throws inside the
  // parallel loop, and a bad span is reported as itself rather than as the first row's failure.
  check_sequence_lengths(problem);
  const int64_t count = static_cast<int64_t>(rows.size());
  std::vector<RowResult> out(rows.size());
  std::vector<std::exception_ptr> errors(rows.size());
  int64_t total = 0;
  for (const RowRef& row : rows) total += row_terms(problem, row);
  std::atomic<int64_t> done{0};
  // One row per scheduling step: rows differ in length (causal masks, windows) by up to seqlen_k.
#if defined(_OPENMP)
  const int team = options.threads > 0 ? options.threads : omp_get_max_threads();
#pragma omp parallel for schedule(dynamic, 1) num_threads(team)
#endif
  for (int64_t i = 0; i < count; ++i) {
    const size_t slot = static_cast<size_t>(i);
    try {
      out[slot] = compute_row(problem, rows[slot], tier);
      if (options.per_row) options.per_row(slot, out[slot]);
    } catch (...) {
      errors[slot] = std::current_exception();
    }
    const int64_t terms = row_terms(problem, rows[slot]);
    const int64_t now = done.fetch_add(terms, std::memory_order_relaxed) + terms;
#if defined(_OPENMP)
    const bool calling_thread = omp_get_thread_num() == 0;
#else
    const bool calling_thread = true;
#endif
    if (calling_thread && options.progress) options.progress(now, total);
  }
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
  if (options.progress) options.progress(total, total);
  return out;
}

}  // namespace flashcheck::oracle
