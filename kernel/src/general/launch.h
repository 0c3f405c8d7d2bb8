// Per-dtype entry points of the general family, one per translation unit (general_{f32,f16,bf16}.cu),
// so each dtype's head_dim families compile in parallel. general_launch() (dispatch.cu) picks by dtype.
// Preconditions as for general_launch() in families.h.
#pragma once

#include <cuda_runtime.h>

#include "families.h"

namespace flashcheck::detail {
inline namespace FLASHCHECK_KERNEL_VARIANT {
namespace general {

Status launch_general_f32(const Params& params, const KernelConfig& config, cudaStream_t stream,
                          const Instrumentation* inst);
Status launch_general_f16(const Params& params, const KernelConfig& config, cudaStream_t stream,
                          const Instrumentation* inst);
Status launch_general_bf16(const Params& params, const KernelConfig& config, cudaStream_t stream,
                           const Instrumentation* inst);

}  // namespace general
}  // namespace FLASHCHECK_KERNEL_VARIANT
}  // namespace flashcheck::detail
