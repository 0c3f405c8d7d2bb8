// general_launch(): the general family's entry point for the dispatcher; picks the dtype's translation
// unit. Kept apart from the kernels so this file compiles in a moment.
#include "general/launch.h"

namespace flashcheck::detail {
inline namespace FLASHCHECK_KERNEL_VARIANT {

Status general_launch(const Params& params, const KernelConfig& config, void* stream, const Instrumentation* inst) {
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  switch (params.dtype) {
    case DType::kF32: return general::launch_general_f32(params, config, cuda_stream, inst);
    case DType::kF16: return general::launch_general_f16(params, config, cuda_stream, inst);
    case DType::kBF16: return general::launch_general_bf16(params, config, cuda_stream, inst);
    case DType::kF8E4M3: break;  // the fp8 path's alone (select_config)
  }
  return {StatusCode::kUnsupported, "general: unsupported dtype"};
}

}  // namespace FLASHCHECK_KERNEL_VARIANT
}  // namespace flashcheck::detail
