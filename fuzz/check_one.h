// The flow every numeric fuzz target shares: bytes -> case (bounded) -> inputs -> backend run with counters
// -> verdict against the oracle on sampled rows -> extra counters -> finding (written before abort) on any
// violation. The targets differ only in the backend, the cost limits and how many rows the oracle checks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "case_decoder.h"
#include "flashcheck/inputs.h"
#include "flashcheck/runner.h"
#include "flashcheck/verdict.h"
#include "fuzz_signals.h"

namespace flashcheck::fuzz {

// Runs `inputs` on the backend, filling `counters` (tile kinds, rescale buckets) and, like the harness's
// runner, O/LSE decoded to canonical order, row m/l, unwritten-element counts and the canary state.
using BackendRun = std::function<RunOutputs(const HostInputs& inputs, KernelCounters* counters)>;

struct TargetSpec {
  const char* name = "";  // "fuzz_model", "fuzz_kernel"
  Backend backend = Backend::kHostModel;
  DecodeLimits limits;
  JudgeOptions judge;
  BackendRun run;
};

// LLVMFuzzerTestOneInput's body: 0 when the input ran, -1 when it was rejected (over the limits, or a case
// line make_inputs refuses) so libFuzzer keeps it out of the corpus; aborts through report_finding on a
// violation.
int check_one(const TargetSpec& spec, const uint8_t* data, size_t size);

// The host model with counters (HostModelOptions::instrumentation), outputs poisoned before the call.
RunOutputs run_model_counted(const HostInputs& inputs, ModelDefect defect, KernelCounters* counters);

// Helpers for backends: the element count of O's buffer (padding included), O's strides (those of Q:
// same shape and layout), and the decode of a dtype-encoded O buffer into canonical [B, Hq, Sq, D] order
// with the count of elements still holding the poison and a check that O's padding is untouched.
int64_t o_buffer_elements(const Params& params);
void decode_outputs(const Params& params, const uint8_t* o_bytes, const float* lse, RunOutputs* out);

}  // namespace flashcheck::fuzz
