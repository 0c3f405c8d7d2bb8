// The general family for f32 inputs: instantiates the kernel for every head_dim family (32, 64, 128, 256).
// One translation unit per dtype keeps the build parallel and each nvcc invocation small.
#include "general/kernel.cuh"

namespace flashcheck::detail {
inline namespace FLASHCHECK_KERNEL_VARIANT {
namespace general {

Status launch_general_f32(const Params& params, const KernelConfig& config, cudaStream_t stream,
                         const Instrumentation* inst) {
  return launch_general_dtype<float>(params, config, stream, inst);
}

}  // namespace general
}  // namespace FLASHCHECK_KERNEL_VARIANT
}  // namespace flashcheck::detail
