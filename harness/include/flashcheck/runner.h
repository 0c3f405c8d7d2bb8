// Runs a case on a backend (the GPU kernel or the host model) with guards against vacuous passes:
// O and LSE poisoned with NaN before the call and checked for unwritten elements; canary regions
// around every buffer checked after; inputs hashed before and after.
#pragma once

#include <cstdint>
#include <vector>

#include "flashcheck/attention.h"
#include "flashcheck/host_model.h"
#include "flashcheck/inputs.h"

namespace flashcheck {

enum class Backend : int32_t { kHostModel = 0, kGpu = 1 };
const char* to_string(Backend backend);

struct RunOutputs {
  Status status;                   // of the call (and of the copies, for the GPU)
  KernelConfig config;             // what ran
  std::vector<double> o;           // [B, Hq, Sq, D] decoded from the dtype, canonical order
  std::vector<float> lse;          // [B, Hq, Sq]
  std::vector<float> row_m, row_l; // [B, Hq, Sq] when instrumented (host model always; GPU instrumented build)
  int64_t unwritten_o = 0;         // O elements still holding the poison pattern
  int64_t unwritten_lse = 0;
  bool canaries_intact = true;     // guard regions before/after O, LSE and between padded rows untouched
  bool inputs_unchanged = true;    // hash of q, k, v identical before and after
};

struct RunOptions {
  HostModelOptions model;          // host model only (defects, config override)
  bool instrument = false;         // collect row m/l (GPU: needs the instrumented build)
  void* stream = nullptr;
};

RunOutputs run_case(const HostInputs& inputs, Backend backend, const RunOptions& options = {});

}  // namespace flashcheck
