// Split-TF32 kernel instantiation for the head_dim family 256 (head_dim <= 256, zero-padded in smem).
// One translation unit per family so the build compiles the families in parallel.
#include "split_tf32/kernel.cuh"

namespace flashcheck::detail {
inline namespace FLASHCHECK_KERNEL_VARIANT {
namespace split_tf32 {

Status launch_split_tf32_hd256(const Params& params, cudaStream_t stream, const Instrumentation* inst) {
  return launch_split_tf32_config<SplitTf32ConfigFor<256>>(params, stream, inst);
}

}  // namespace split_tf32
}  // namespace FLASHCHECK_KERNEL_VARIANT
}  // namespace flashcheck::detail
