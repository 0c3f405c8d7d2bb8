// The verdict: kernel outputs against the oracle, as scale-free ratios error / bound (fail above 1),
// with the worst element's index, the kernel's and the oracle's values there, max and RMS error in units
// of the dtype's epsilon, checks of the online-softmax statistics (m, l, LSE = m + ln l), the statistical
// RMS check against a same-precision emulated reference, and the case line, so anyone can replay it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "flashcheck/case.h"
#include "flashcheck/error_model.h"
#include "flashcheck/oracle.h"
#include "flashcheck/runner.h"

namespace flashcheck {

struct Worst {
  double ratio = 0.0;      // error / bound; +inf when bound is 0 and error is not, or NaN where finite expected
  oracle::RowRef where;    // row
  int64_t col = -1;        // head_dim index for O, -1 for row statistics
  double got = 0.0, want = 0.0, bound = 0.0;
};

struct Verdict {
  bool pass = true;
  std::string case_line;
  std::vector<std::string> failures;   // one human-readable line per failed check
  Worst o, lse, m, l;
  double rms_ratio = 0.0;              // statistical check: RMS err(kernel) / RMS err(emulated reference), per row, worst
  int64_t rows_checked = 0, elements_checked = 0, unconstrained_rows = 0;
  double max_err_eps = 0.0, rms_err_eps = 0.0;  // O error in units of the dtype's epsilon (2u)
  std::string report() const;          // multi-line failure report, the case line first
};

struct JudgeOptions {
  oracle::Tier tier = oracle::Tier::kFast;
  int64_t full_check_limit = 4096;
  int64_t random_rows = 64;
  bool check_stats = true;     // m, l (requires outputs.row_m / row_l)
  bool check_rms = true;
};

Verdict judge(const Case& c, const HostInputs& inputs, const RunOutputs& outputs, const JudgeOptions& options = {});

}  // namespace flashcheck
