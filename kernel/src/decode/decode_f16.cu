// The decode family's f16 kernels (every head_dim family), one translation unit per dtype.
#include "decode/kernel.cuh"

namespace flashcheck::detail {
inline namespace FLASHCHECK_KERNEL_VARIANT {
namespace decode_kernel {

Status launch_decode_f16(const Params& params, const KernelConfig& config, cudaStream_t stream,
                          const Instrumentation* inst) {
  return launch_decode_dtype<__half>(params, config, stream, inst);
}

}  // namespace decode_kernel
}  // namespace FLASHCHECK_KERNEL_VARIANT
}  // namespace flashcheck::detail
