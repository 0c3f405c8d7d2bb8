// The dispatcher: run() (production library) and run_instrumented() (instrumented library) validate with
// can_implement(), return early for the documented no-op sizes, pick a family with select_config() and
// launch it. Launch errors come back as Status with cudaGetErrorString; device_available() never throws.
// Compiled once per library; FLASHCHECK_INSTRUMENT selects which public entry point this copy defines.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <vector>

#include "families.h"
#include "flashcheck/attention.h"
#include "flashcheck/instrument.h"

namespace flashcheck {
namespace detail {
inline namespace FLASHCHECK_KERNEL_VARIANT {
namespace {

Status launch_family(const Params& params, void* stream, const Instrumentation* inst);

// `prechecked`: the caller vouches for the index arrays' contents (run_prechecked); the rest is still checked.
// The dropout mask dump follows the forward on the same stream; with every sequence empty it alone runs (its bytes
// are all 0, and all are written).
Status dispatch(const Params& params, void* stream, const Instrumentation* inst, bool prechecked = false) {
  if (Status st = prechecked ? check_layout(params) : can_implement(params); !st.ok()) return st;
  if (params.batch == 0 || params.heads_q == 0 || params.seqlen_q == 0) return Status::ok_status();
  const bool no_rows = params.cu_seqlens_q != nullptr && params.total_q == 0;  // every sequence empty
  if (no_rows && params.dropout_mask_out == nullptr) return Status::ok_status();
  if (!device_available()) return {StatusCode::kNoDevice, "no CUDA device is available to this process"};
  if (!no_rows) {
    if (Status st = launch_family(params, stream, inst); !st.ok()) return st;
  }
  return params.dropout_mask_out != nullptr ? dropout_mask_launch(params, stream) : Status::ok_status();
}

// The forward of the family select_config picks.
Status launch_family(const Params& params, void* stream, const Instrumentation* inst) {
  const KernelConfig config = select_config(params);
#if defined(FLASHCHECK_HAS_DECODE)
  if (is_decode(config)) return decode_launch(params, config, stream, inst);
#endif
  switch (config.path) {
#if defined(FLASHCHECK_HAS_TENSOR_CORE)
    case ComputePath::kTensorCore: return tensor_core_launch(params, config, stream, inst);
#endif
#if defined(FLASHCHECK_HAS_SPLIT_TF32)
    case ComputePath::kSplitTf32: return split_tf32_launch(params, config, stream, inst);
#endif
    case ComputePath::kGeneralFp32: return general_launch(params, config, stream, inst);
#if defined(FLASHCHECK_HAS_FP8)
    case ComputePath::kTensorCoreFp8: return fp8_launch(params, config, stream, inst);
#endif
    default: break;
  }
  return {StatusCode::kUnsupported,
          std::string("dispatch: selected family ") + config.name + " is not compiled into this library"};
}

}  // namespace
}  // namespace FLASHCHECK_KERNEL_VARIANT
}  // namespace detail

#if FLASHCHECK_INSTRUMENT

Status run_instrumented(const Params& params, const Instrumentation& inst, void* stream) {
  return detail::dispatch(params, stream, &inst);
}

#else

Status run(const Params& params, void* stream) { return detail::dispatch(params, stream, nullptr); }
Status run_prechecked(const Params& params, void* stream) { return detail::dispatch(params, stream, nullptr, true); }

int32_t effective_splits(const Params& params) {
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return detail::pick_splits(params, detail::kModelSmCount);
  }
  return detail::pick_splits(params, sms);
}

namespace detail {
// Host or device memory (unified addressing tells which): device and managed memory is copied back.
Status read_index_array(const int32_t* src, int64_t count, std::vector<int32_t>* out) {
  out->resize(static_cast<size_t>(count));
  cudaPointerAttributes attr{};
  const bool device_memory = cudaPointerGetAttributes(&attr, src) == cudaSuccess &&
                             (attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged);
  (void)cudaGetLastError();
  if (!device_memory) {
    std::copy(src, src + count, out->begin());
    return Status::ok_status();
  }
  const cudaError_t err = cudaMemcpy(out->data(), src, static_cast<size_t>(count) * sizeof(int32_t), cudaMemcpyDeviceToHost);
  if (err != cudaSuccess) return {StatusCode::kCudaError, std::string("reading it back failed: ") + cudaGetErrorString(err)};
  return Status::ok_status();
}
}  // namespace detail

bool device_available() {
  // Asked once: the answer cannot change for the life of the process, and a failing runtime (no driver)
  // reports an error code here rather than throwing.
  static const bool available = [] {
    int count = 0;
    return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
  }();
  return available;
}

#endif

}  // namespace flashcheck
