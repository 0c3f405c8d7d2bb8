// Runs a case on a backend (the GPU kernel or the host model) with guards against vacuous passes:
// O and LSE poisoned with a NaN payload (kPoisonBits*) before the call and scanned for unwritten elements
// after; kGuardBytes canary regions before and after every output buffer (O, LSE and each instrumentation
// buffer), around the sink and each index array of sequences, and between O's rows (its padding elements),
// checked after; inputs (Q, K, V, the sink, the index arrays) compared byte for byte with their values after the
// call (for the GPU: the device copies, read back). With sequences O and LSE are the kernel's packed layouts (O: total_q rows, LSE
// [heads_q, total_q]), every element of which is an output; RunOutputs gives them back in canonical order. The
// one way properties, fuzzers and tools reach the kernel.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "flashcheck/attention.h"
#include "flashcheck/host_model.h"
#include "flashcheck/inputs.h"
#include "flashcheck/instrument.h"

namespace flashcheck {

enum class Backend : int32_t { kHostModel = 0, kGpu = 1 };
const char* to_string(Backend backend);  // "model", "gpu"

inline constexpr int64_t kGuardBytes = 4096;  // canary region before and after every output buffer
inline constexpr uint8_t kCanaryByte = 0xA5;  // as f16/bf16/f32 a finite number, never the poison

struct RunOutputs {
  Status status;                   // of the call (and of the copies, for the GPU)
  KernelConfig config;             // what ran
  // Canonical order whatever the kernel's layout: row i of sequence b, head h at (b, h, i), Sq = seqlen_q (with
  // sequences the largest q); rows past a sequence's own length are 0 in o, lse, row_m and row_l (no kernel writes
  // them: the verdict never reads them).
  std::vector<double> o;           // [B, Hq, Sq, D] decoded from the dtype (empty if the call failed)
  std::vector<float> lse;          // [B, Hq, Sq] (empty if the call failed)
  std::vector<float> row_m, row_l; // [B, Hq, Sq] with RunOptions::instrument
  std::vector<uint64_t> tile_kind_counts;  // [kTileKindCount] with RunOptions::count_tiles, indexed by TileKind
  std::vector<uint64_t> rescale_buckets;   // [kRescaleBuckets] with RunOptions::count_tiles
  // [trace_rows.size() * trace_tiles] with RunOptions::trace_rows: slot t of traced row r at
  // r * trace_tiles + t (instrument.h); slots no tile wrote keep the poison (is_unwritten).
  std::vector<float> trace_m, trace_l;
  // [B, Hq, Sq, Sk] with RunOptions::dropout_mask: the kernel's mask dump, byte for byte (1 kept, 0 dropped, hidden or
  // absent; any other value is a byte the kernel did not write, counted in unwritten_mask).
  std::vector<uint8_t> dropout_mask;
  int64_t unwritten_mask = 0;
  int64_t unwritten_o = 0;         // O elements still holding the poison pattern (every valid row's)
  int64_t unwritten_lse = 0;
  // Guard regions of every output buffer, the sink, the index arrays and O's padding untouched.
  bool canaries_intact = true;
  bool inputs_unchanged = true;    // q, k, v, the sink and the index arrays with the bytes they had before the call
  // The first input whose bytes changed: "q", "k", "v", "sink", "cu_seqlens_q", "cu_seqlens_k", "seqused_k",
  // "page_table"; "" while inputs_unchanged.
  const char* modified_input = "";
  int64_t first_damaged_canary = -1;  // byte offset into the first damaged region, for the report
  // "O", "O padding", "LSE", "m", "l", "tile kinds", "rescale buckets", "trace m", "trace l", "dropout mask", "sink",
  // "cu_seqlens_q", "cu_seqlens_k", "seqused_k", "page_table"
  const char* damaged_buffer = "";
  // What ran and how the verdict judges it (flashcheck/loaded_subject.h): empty `subject` for flashcheck's own
  // kernel and host model, judged by the class of config.path. A subject that declares no arithmetic class is
  // judged by the generic bound (docs/error-model.md §3.1); one that declares no key tile, as if every key were
  // its own tile, without running sums; one without LSE output by O alone.
  std::string subject;
  bool generic_bound = false;
  bool tiling_declared = true;
  bool lse_written = true;
  // The split-KV runs each row was computed in and merged from (effective_splits of the params that ran; 1 for a
  // subject, which splits as it likes): the bound counts them (docs/error-model.md §4.10).
  int32_t splits = 1;
};

// Device memory reused across GPU runs: each buffer of a run (q, k, v, sink, index arrays, O, LSE,
// instrumentation) keeps its allocation and grows when a run needs more, for callers whose rate a cudaMalloc per
// buffer would dominate (the GPU fuzz target). Without a pool a run allocates and frees its own. One run at a time. The
// destructor frees the device memory; a process that ends through exit() (libFuzzer) should leave its pool
// alive rather than race the CUDA runtime's own teardown.
class DevicePool {
 public:
  DevicePool();
  ~DevicePool();
  DevicePool(const DevicePool&) = delete;
  DevicePool& operator=(const DevicePool&) = delete;
  struct Slots;  // the GPU launcher's (runner_gpu.cpp)
  Slots& slots() { return *slots_; }

 private:
  std::unique_ptr<Slots> slots_;
};

// What to record besides O and LSE. On the GPU any instrumentation needs flashcheck_harness_instrumented
// (the instrumented kernel); the host model records all of it.
struct RunOptions {
  HostModelOptions model;          // host model only (defects, config override); its instrumentation is ignored
  bool instrument = false;         // row m and l
  bool count_tiles = false;        // tile-kind counts and rescale buckets
  // Canonical flat rows (b * heads_q + h) * seqlen_q + i (i below sequence b's q) whose (m, l) each K/V tile
  // leaves; the runner hands the kernel its own row index of each (instrument.h).
  std::vector<int64_t> trace_rows;
  int32_t trace_tiles = 0;         // trace slots per traced row (>= 1 when trace_rows is not empty)
  void* stream = nullptr;          // GPU: cudaStream_t
  DevicePool* device_pool = nullptr;  // GPU: reuse these device buffers (null: allocate per run)
  // GPU: called with the device pointers instead of flashcheck's run() (a subject, loaded_subject.h); it takes
  // no instrumentation. Empty: flashcheck's own kernel.
  std::function<Status(const Params& params, void* stream)> device_call;
  // With a dropout (Params::dropout_p > 0): the kernel's dump of its mask (Params::dropout_mask_out) into
  // RunOutputs::dropout_mask.
  bool dropout_mask = false;
  bool any_instrumentation() const { return instrument || count_tiles || !trace_rows.empty(); }
};

// A dense case too large for HostInputs runs on the GPU through device_inputs.h (check_on_device): inputs generated
// on the device, the same guards checked there, sampled rows downloaded.
// Runs `inputs` (params rebound to the vectors, so a copied HostInputs is fine; params.sink and the index arrays
// to the runner's guarded copies of inputs.sink and inputs' arrays, null without them). Never throws; failures of
// the call are in RunOutputs::status. Backend::kGpu without CUDA gives kNoDevice; with instrumentation in a
// harness linked against the production kernel it gives kUnsupported (link flashcheck_harness_instrumented).
// A trace row outside [0, batch * heads_q * seqlen_q), or past its sequence's q rows, is kInvalidArgument.
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
// True when an fp32 output still holds the poison the runner wrote before the call (a trace slot no tile
// wrote): a NaN payload no backend computes.
bool is_unwritten(float x);

}  // namespace flashcheck
