// split_tf32_launch(): runs the head_dim family split_tf32_select() chose (config.head_dim_padded) on the
// caller's stream. Preconditions as in families.h: can_implement() passed and batch, heads_q, seqlen_q > 0.
#include <string>

#include "split_tf32/kernel.cuh"

namespace flashcheck::detail {
inline namespace FLASHCHECK_KERNEL_VARIANT {

Status split_tf32_launch(const Params& params, const KernelConfig& config, void* stream, const Instrumentation* inst) {
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  switch (config.head_dim_padded) {
    case 32: return split_tf32::launch_split_tf32_hd32(params, cuda_stream, inst);
    case 64: return split_tf32::launch_split_tf32_hd64(params, cuda_stream, inst);
    case 128: return split_tf32::launch_split_tf32_hd128(params, cuda_stream, inst);
    case 256: return split_tf32::launch_split_tf32_hd256(params, cuda_stream, inst);
    default:
      return {StatusCode::kUnsupported,
              "split_tf32: no kernel for head_dim_padded " + std::to_string(config.head_dim_padded)};
  }
}

}  // namespace FLASHCHECK_KERNEL_VARIANT
}  // namespace flashcheck::detail
