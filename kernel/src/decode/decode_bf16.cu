// The decode family's bf16 kernels (every head_dim family), one translation unit per dtype.
#include "decode/kernel.cuh"

namespace flashcheck::detail {
inline namespace FLASHCHECK_KERNEL_VARIANT {
namespace decode_kernel {

Status launch_decode_bf16(const Params& params, const KernelConfig& config, cudaStream_t stream,
                          const Instrumentation* inst) {
  return launch_decode_dtype<__nv_bfloat16>(params, config, stream, inst);
}

}  // namespace decode_kernel
}  // namespace FLASHCHECK_KERNEL_VARIANT
}  // namespace flashcheck::detail
