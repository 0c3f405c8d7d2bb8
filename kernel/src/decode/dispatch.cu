// decode_launch(): the decode family's entry point for the dispatcher; picks the dtype's translation unit.
#include <cuda_runtime.h>

#include "families.h"

namespace flashcheck::detail {
inline namespace FLASHCHECK_KERNEL_VARIANT {
namespace decode_kernel {
Status launch_decode_bf16(const Params& params, const KernelConfig& config, cudaStream_t stream,
                          const Instrumentation* inst);
Status launch_decode_f16(const Params& params, const KernelConfig& config, cudaStream_t stream,
                         const Instrumentation* inst);
}  // namespace decode_kernel

Status decode_launch(const Params& params, const KernelConfig& config, void* stream, const Instrumentation* inst) {
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  if (params.dtype == DType::kBF16) return decode_kernel::launch_decode_bf16(params, config, cuda_stream, inst);
  if (params.dtype == DType::kF16) return decode_kernel::launch_decode_f16(params, config, cuda_stream, inst);
  return {StatusCode::kUnsupported, "decode: unsupported dtype"};
}

}  // namespace FLASHCHECK_KERNEL_VARIANT
}  // namespace flashcheck::detail
