// The flow every numeric fuzz target shares: bytes -> case (bounded) -> inputs -> the harness's guarded run
// with counters -> verdict against the oracle on sampled rows -> extra counters -> finding (written before
// abort) on any violation. The targets differ only in the backend, the cost limits and how many rows the
// oracle checks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "case_decoder.h"
#include "flashcheck/inputs.h"
#include "flashcheck/runner.h"
#include "flashcheck/verdict.h"
#include "fuzz_signals.h"

namespace flashcheck::fuzz {

struct TargetSpec {
  const char* name = "";  // "fuzz_model", "fuzz_kernel"
  Backend backend = Backend::kHostModel;
  DecodeLimits limits;
  SizeProfile profile = SizeProfile::kAll;  // binary inputs decode inside it; case lines outside it are rejected
  JudgeOptions judge;
  DrawOn draw_on = DrawOn::kHost;  // where make_inputs draws Q, K and V (the GPU target's: on its device)
  // The harness runner's options: the host model's defect, the GPU's device pool. Every run also records
  // row m, l and the tile counters (check_one sets them).
  RunOptions run;
};

// LLVMFuzzerTestOneInput's body: 0 when the input ran, -1 when it was rejected (over the limits, or a case
// line make_inputs refuses) so libFuzzer keeps it out of the corpus; aborts through report_finding on a
// violation.
int check_one(const TargetSpec& spec, const uint8_t* data, size_t size);

// fuzz_kernel's spec for a size profile (backend, limits, profile and the rows the oracle checks), without the
// device pool; the timing tool (flashcheck-fuzz-bench) measures the host side of the same spec.
TargetSpec kernel_target_spec(SizeProfile profile);

// Wall time of check_one's stages, summed over this process's executions: decoding, input generation (with the
// special-value scan), the run (upload, launch, download and the runner's guards for the GPU), the verdict.
struct StageTimes {
  int64_t executions = 0;  // inputs that ran (check_one returned 0)
  int64_t rejected = 0;    // inputs that did not (-1)
  double decode_s = 0, inputs_s = 0, run_s = 0, judge_s = 0;
  int64_t rows_checked = 0;  // oracle rows over the executions
};
const StageTimes& stage_times();
// One line: executions, and per stage the mean milliseconds per execution and the share of the total.
std::string format_stage_times(const StageTimes& times);
// With FLASHCHECK_FUZZ_TIMING=1, prints format_stage_times() on stderr when the process exits (libFuzzer ends
// through exit()). Call from LLVMFuzzerInitialize.
void print_stage_times_at_exit_if_asked(const char* target);

}  // namespace flashcheck::fuzz
