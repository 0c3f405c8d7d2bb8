// Cases too large for host inputs: Q, K and V generated in device memory by the definition make_inputs uses
// (element_values.h: the same Philox draws, distributions and dtype rounding, bit for bit), the kernel run there,
// and a sampled-row verdict whose oracle regenerates on the host only what each checked row reads: its Q row and the
// K and V of its (b, kv head). O and LSE come back for the checked rows alone. So a dense case of 2^32 elements
// and more per tensor is an ordinary case line, replayable by flashcheck-repro.
// Routing: needs_device_inputs() picks this path for a dense case whose host inputs exceed the limit the caller
// gives make_inputs (kHostInputsLimit by default); the host model cannot run such a case (host_model_refusal()).
// Dense only: a case with seqs, page, poison or a subject is refused naming the field.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "flashcheck/attention.h"
#include "flashcheck/case.h"
#include "flashcheck/inputs.h"
#include "flashcheck/oracle.h"
#include "flashcheck/verdict.h"

namespace flashcheck {

// ok when `c` validates and its inputs can be generated on the device: dense (no seqs, page or poison) and
// without a subject; else kInvalidArgument naming the field ("seqs: ...").
Status check_device_inputs_case(const Case& c);

// True when `c` is dense and its host inputs (host_inputs_bytes) exceed `host_limit` bytes (or 2^63): the GPU
// backend then generates its inputs on the device.
bool needs_device_inputs(const Case& c, int64_t host_limit = kHostInputsLimit);

// The reason the host model (and the CPU tier) skip a case that needs device inputs: kUnsupported, "host inputs:
// the case needs N bytes of host memory, over the limit of M; it runs on the GPU backend, whose inputs are generated
// on the device" (an UNSUPPORTED verdict, not a failure).
Status host_model_refusal(const Case& c, int64_t host_limit = kHostInputsLimit);

// Device memory a case's device inputs and outputs take: Q, K, V in the case's padded layout, O with its guards,
// LSE with its guards.
int64_t device_case_bytes(const Case& c);

// Q, K and V of a dense case in device memory, in the case's layout (case_params: strides over head_dim + pad,
// padding elements holding kInputPad*), injections applied; the sink (tiny) on the host and on the device.
// Move-only; frees its device memory.
class DeviceInputs {
 public:
  DeviceInputs() = default;
  ~DeviceInputs();
  DeviceInputs(DeviceInputs&& other) noexcept;
  DeviceInputs& operator=(DeviceInputs&& other) noexcept;
  DeviceInputs(const DeviceInputs&) = delete;
  DeviceInputs& operator=(const DeviceInputs&) = delete;

  Params params;                    // case_params with device pointers q, k, v and sink (o, lse null)
  int64_t q_bytes = 0, kv_bytes = 0;  // of each buffer
  std::vector<float> sink;          // [heads_q] as make_inputs builds it; empty without a sink
  std::vector<double> sink_exact;
  void release();                   // frees the device buffers (the destructor does)
};

// Generates `c`'s inputs on the current device. kInvalidArgument for a case check_device_inputs_case refuses;
// kNoDevice without a device (or without CUDA), or when the device lacks the memory (the message names the bytes
// needed and free); kCudaError for a failing call.
Status make_device_inputs(const Case& c, DeviceInputs* out);

// The canonical elements ([B, H, S, D], S = seqlen_q or seqlen_k) of tensor 'q', 'k' or 'v' of a validated case as
// dtype bits, esize bytes each (dtype_size), drawn on the current device by element_values.h and read back into
// `bits`: make_inputs' elements bit for bit (DrawOn::kDevice), without the host's cost per element (a Philox call, a
// log and a cos). Rows past a sequence's own length are drawn too; injections are make_inputs' to apply. kNoDevice
// without a device (or without CUDA); kCudaError for a failing call.
Status draw_on_device(const Case& c, char tensor, std::vector<uint8_t>* bits);

// The bytes of the device buffers, for comparison with make_inputs (tests).
Status download_device_inputs(const DeviceInputs& in, std::vector<uint8_t>* q, std::vector<uint8_t>* k,
                              std::vector<uint8_t>* v);

// What a run on device inputs leaves for the verdict: O and LSE of the requested rows, and the guards over the whole
// outputs and inputs, checked on the device.
struct SampledRun {
  Status status;                  // of the generation, the call and the copies
  KernelConfig config;            // what ran
  int32_t splits = 1;             // effective_splits of the params that ran
  std::vector<double> o;          // [rows, head_dim], decoded
  std::vector<float> lse;         // [rows]
  int64_t unwritten_o = 0;        // O elements (all of them, not only the rows) still holding the poison
  int64_t unwritten_lse = 0;
  bool canaries_intact = true;    // O's and LSE's guards and O's padding
  const char* damaged_buffer = "";
  int64_t first_damaged_canary = -1;
  bool inputs_unchanged = true;   // every element of Q, K and V (padding included) still what the generator wrote
  const char* modified_input = "";
  // kNoDevice for lack of memory: the bytes device_case_bytes asked for, and the device's free bytes then.
  bool device_memory_short = false;
  int64_t device_bytes_needed = 0, device_bytes_free = 0;
};

// Generates the inputs of `c` on the device, poisons O and LSE, runs flashcheck's kernel (run()), downloads the
// rows `rows` (canonical (b, h, i)) of O and LSE and checks the guards. Never throws.
SampledRun run_sampled_on_device(const Case& c, std::span<const oracle::RowRef> rows, void* stream = nullptr);

// The rows the verdict checks for `c` (oracle::sample_rows for its shape and config, with `options`' counts).
std::vector<oracle::RowRef> device_check_rows(const Case& c, const JudgeOptions& options = {});

// The verdict of `run`, a run of `rows` (run_sampled_on_device): the slices the rows read, regenerated on the host
// in parallel, judged by judge_slices(). A run whose status is not ok is a verdict that does not pass. The report is
// judge()'s for the same outputs but for the RMS check's reference: the emulated reference keys its stand-in exp2
// and tanh errors by a row's place in the problem it reads (a slice's here), another realization of the same
// reference over the same elements.
Verdict judge_sampled(const Case& c, std::span<const oracle::RowRef> rows, const SampledRun& run,
                      const JudgeOptions& options = {});

// The whole check of a case on device inputs: the rows judge() would check (oracle::sample_rows with `options`),
// the run, and judge_slices() over the slices those rows read, regenerated on the host in parallel. `status` is not
// ok when no verdict exists: kNoDevice (no device, or too little memory: device_memory_short, with the bytes), or
// kInvalidArgument for a case that cannot take this path (naming the field). A failed kernel call is a verdict.
struct DeviceCheck {
  Status status;
  bool device_memory_short = false;
  int64_t device_bytes_needed = 0, device_bytes_free = 0;
  Verdict verdict;
};
DeviceCheck check_on_device(const Case& c, const JudgeOptions& options = {});

}  // namespace flashcheck
