// The verdict: kernel outputs against the oracle, as scale-free ratios error / bound (fail above 1),
// with the worst element's index, the kernel's and the oracle's values there, max and RMS error in units
// of the dtype's epsilon, checks of the online-softmax statistics (m, l, LSE = m + ln l), the statistical
// RMS check against a same-precision emulated reference, the runner's guards (unwritten elements, canaries,
// input hash), and the case line first, so anyone can replay it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "flashcheck/case.h"
#include "flashcheck/error_model.h"
#include "flashcheck/oracle.h"
#include "flashcheck/outcome.h"
#include "flashcheck/runner.h"

namespace flashcheck {

struct Worst {
  double ratio = 0.0;      // error / bound (oracle::error_ratio); +inf for a failure without a finite ratio (NaN
                           // where a number was expected, a non-zero error against a zero bound)
  oracle::RowRef where;    // row
  int64_t col = -1;        // head_dim index for O, -1 for row statistics (and for no worst found yet)
  double got = 0.0, want = 0.0, bound = 0.0;
  int64_t over = 0;        // how many checked values had ratio > 1
  int64_t checked = 0;     // how many values this check looked at
};

struct Verdict {
  bool pass = true;
  // What the verdict line says: PASS; FAIL; REJECTED / UNSUPPORTED when the call refused the case (the
  // status message, naming the field, is in `reason`); OUTSIDE-DOMAIN when it ran and passed but every checked
  // row was outside the error model's domain, so nothing was claimed. pass is true for PASS and OUTSIDE-DOMAIN.
  Outcome outcome = Outcome::kPass;
  std::string reason;
  std::string case_line;
  std::string config;                  // the kernel configuration that ran: name, compute path, block_m, block_n
  std::vector<std::string> failures;   // one human-readable line per failed check
  Worst o, lse, m, l;
  Worst identity;                      // |LSE - (m + ln l)| against the fp32 evaluation bound, kernel values only
  // Statistical check (oracle::RmsCheck), pooled over every compared O element of the case's constrained
  // rows: rms_ratio = rms(kernel - exact) / (kRmsFactor * rms(emulated - exact) + floor/sqrt(N)), fail above 1.
  double rms_ratio = 0.0;
  double rms_kernel = 0.0, rms_reference = 0.0;  // the two RMS errors, absolute
  int64_t rms_count = 0;                         // N, elements pooled
  // D, the independent draws among them (oracle::RmsCheck): a row's equal columns, and a row with an earlier pooled
  // row's inputs (its Q row, K/V head and visible keys, sink; no dropout), count once.
  int64_t rms_draws = 0;
  int64_t rms_flush_left_out = 0;                // elements whose A_k lies within RowBound::o_flush: not pooled
  // The rows with the largest shares of the kernel's squared error in the pool, largest first (at most
  // kRmsRowsListed): where a systematic loss sits, each with its own kernel and reference RMS over its elements.
  struct RmsRow {
    oracle::RowRef row;
    double kernel = 0.0, reference = 0.0, share = 0.0;  // share: of the pooled squared kernel error, in [0, 1]
    int64_t count = 0;
  };
  std::vector<RmsRow> rms_rows;
  // rows_total: the problem's query rows (heads_q times the sequences' q rows, with sequences).
  int64_t rows_checked = 0, rows_total = 0, elements_checked = 0, unconstrained_rows = 0, empty_rows = 0;
  // Rows outside the domain because no finite bound exists at their length (RowBound::vacuous), among the
  // unconstrained ones, with the first few listed. A case with one is OUTSIDE-DOMAIN, whatever its other rows.
  int64_t vacuous_rows = 0;
  std::vector<oracle::RowRef> vacuous_listed;
  // Informative checks: a finite bound below what any point of the value range would meet (RowBound::o_trivial,
  // lse_trivial). Of the O elements and LSE values with a finite claim (constrained rows, finite oracle value).
  int64_t o_claims = 0, o_informative = 0, lse_claims = 0, lse_informative = 0;
  double o_informative_fraction() const { return o_claims > 0 ? double(o_informative) / double(o_claims) : 1.0; }
  int64_t no_claim_rows = 0;  // checked rows with no value claim (scores beyond fp32, unconstrained bound, huge sink)
  // O error / (eps * max(A_k, min normal)), eps = 2u, A_k = sum_j p_j |v_jk|; elements within the flush allowance
  // (RowBound::o_flush) left out, as the RMS check leaves them out.
  double max_err_eps = 0.0, rms_err_eps = 0.0;
  int64_t unwritten_o = 0, unwritten_lse = 0;   // the runner's guards, copied from RunOutputs for the report
  bool canaries_intact = true, inputs_unchanged = true;
  std::string report() const;          // multi-line report, the case line first
};

struct JudgeOptions {
  oracle::Tier tier = oracle::Tier::kFast;
  int64_t full_check_limit = 4096;  // check every row when batch * heads_q * seqlen_q is at most this
  int64_t random_rows = 64;         // otherwise boundary rows plus this many seeded random rows
  bool check_stats = true;     // m, l and LSE = m + ln l (when outputs.row_m / row_l are present)
  bool check_rms = true;
  // Progress of the oracle's work, (terms done, terms total) over the checked rows (oracle::compute_rows; a term
  // is one visible key times one head_dim element); e.g. a ProgressLine (progress.h). Empty: none.
  oracle::ProgressFn progress;
};

// Judges `outputs` of a run of `inputs` (built from `c`). The oracle's rows, their bounds and emulated references
// are computed in parallel over rows (oracle::compute_rows); the verdict is the same for any thread count. A failed
// call (outputs.status not ok) is a verdict that does not pass: REJECTED for an invalid argument, UNSUPPORTED for an
// unserved shape, FAIL otherwise. A caller that expects a rejection checks the status itself.
Verdict judge(const Case& c, const HostInputs& inputs, const RunOutputs& outputs, const JudgeOptions& options = {});

// judge() for a case whose inputs and outputs are never whole on the host (device_inputs.h): `problem` holds the
// slices of the case that the checked rows read (each its own query head over its own K/V head), `rows` the checked
// rows in it, `reported` each as the case's (b, h, i) for the report, `outputs` O and LSE canonical in `problem`'s
// shape (only the checked rows matter), `params` the case's, rows_total the case's query rows. The same checks and the
// same report as judge().
Verdict judge_slices(const Case& c, const Params& params, const oracle::Problem& problem,
                     std::span<const oracle::RowRef> rows, std::span<const oracle::RowRef> reported, int64_t rows_total,
                     const RunOutputs& outputs, const JudgeOptions& options = {});

// The bound judge() holds a row of `outputs` to: the error model's bound for the arithmetic class of
// outputs.config (oracle_bound), or for a subject that declares no class or no key tile the generic bound of
// docs/error-model.md §3.1.
oracle::RowBound judged_bound(const oracle::Problem& problem, const oracle::RowRef& row, const oracle::RowResult& exact,
                              const Params& params, const RunOutputs& outputs);

// The verdict of a case that never ran: its line does not parse, or its inputs cannot be built. `line` is
// echoed through excerpt(); the outcome follows the status code (outcome_of).
Verdict refused(std::string_view line, const Status& status);

}  // namespace flashcheck
