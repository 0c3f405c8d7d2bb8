// Runs a case on a backend (the GPU kernel or the host model) with guards against vacuous passes:
// O and LSE poisoned with a NaN payload (kPoisonBits*) before the call and scanned for unwritten elements
// after; kGuardBytes canary regions before and after O, LSE (and m, l), and O's padding elements between
// rows, checked after; inputs hashed before and after (for the GPU: the device copies, read back).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "flashcheck/attention.h"
#include "flashcheck/host_model.h"
#include "flashcheck/inputs.h"

namespace flashcheck {

enum class Backend : int32_t { kHostModel = 0, kGpu = 1 };
const char* to_string(Backend backend);  // "model", "gpu"

inline constexpr int64_t kGuardBytes = 4096;  // canary region before and after every output buffer
inline constexpr uint8_t kCanaryByte = 0xA5;  // as f16/bf16/f32 a finite number, never the poison

struct RunOutputs {
  Status status;                   // of the call (and of the copies, for the GPU)
  KernelConfig config;             // what ran
  std::vector<double> o;           // [B, Hq, Sq, D] decoded from the dtype, canonical order (empty if the call failed)
  std::vector<float> lse;          // [B, Hq, Sq] (empty if the call failed)
  std::vector<float> row_m, row_l; // [B, Hq, Sq] when instrumented (host model; GPU with the instrumented harness)
  int64_t unwritten_o = 0;         // O elements still holding the poison pattern
  int64_t unwritten_lse = 0;
  bool canaries_intact = true;     // guard regions before/after O, LSE, m, l and O's padding untouched
  bool inputs_unchanged = true;    // hash of q, k, v identical before and after
  int64_t first_damaged_canary = -1;  // byte offset into the first damaged region, for the report
  const char* damaged_buffer = "";    // "O", "O padding", "LSE", "m", "l" for the first damaged canary
};

struct RunOptions {
  HostModelOptions model;          // host model only (defects, config override); its instrumentation is ignored
  bool instrument = false;         // collect row m/l (GPU: needs flashcheck_harness_instrumented)
  void* stream = nullptr;          // GPU: cudaStream_t
};

// Runs `inputs` (params rebound to the vectors, so a copied HostInputs is fine). Never throws; failures of
// the call are in RunOutputs::status. Backend::kGpu without CUDA gives kNoDevice; with `instrument` in a
// harness linked against the production kernel it gives kUnsupported (link flashcheck_harness_instrumented).
RunOutputs run_case(const HostInputs& inputs, Backend backend, const RunOptions& options = {});

// A backend computing in host memory: writes O and LSE through params.o / params.lse (and row m, l through
// the instrumentation pointers when set). run_case(kHostModel) is this with run_host_model; tests and
// fuzzers pass their own (a mutated model, a backend that misbehaves on purpose) to get the same guards.
using HostBackend = std::function<Status(const Params& params, const Instrumentation& instrumentation)>;
RunOutputs run_case(const HostInputs& inputs, const HostBackend& backend, const RunOptions& options = {});

// True in flashcheck_harness_instrumented (GPU runs can record m and l), false in flashcheck_harness.
bool gpu_instrumentation_linked();

// Number of elements of `dtype` in `bytes` whose bits equal the poison pattern (exposed for tests).
int64_t count_poison(DType dtype, const uint8_t* bytes, int64_t elements);

}  // namespace flashcheck
