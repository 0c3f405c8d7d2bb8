// The flow every numeric fuzz target shares: bytes -> case (bounded) -> inputs -> the harness's guarded run
// with counters -> verdict against the oracle on sampled rows -> extra counters -> finding (written before
// abort) on any violation. The targets differ only in the backend, the cost limits and how many rows the
// oracle checks.
#pragma once

#include <cstddef>
#include <cstdint>

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
  JudgeOptions judge;
  // The harness runner's options: the host model's defect, the GPU's device pool. Every run also records
  // row m, l and the tile counters (check_one sets them).
  RunOptions run;
};

// LLVMFuzzerTestOneInput's body: 0 when the input ran, -1 when it was rejected (over the limits, or a case
// line make_inputs refuses) so libFuzzer keeps it out of the corpus; aborts through report_finding on a
// violation.
int check_one(const TargetSpec& spec, const uint8_t* data, size_t size);

}  // namespace flashcheck::fuzz
