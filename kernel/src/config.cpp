// select_config(): asks the kernel families in order of preference (tensor core, split TF32, general)
// and returns the first that serves the params. Only families compiled into this build are asked
// (FLASHCHECK_HAS_* come from kernel/CMakeLists.txt); the general family serves every valid input.
#include "families.h"
#include "flashcheck/attention.h"

namespace flashcheck {

KernelConfig select_config(const Params& params) {
  KernelConfig config;
#if defined(FLASHCHECK_HAS_TENSOR_CORE)
  if (detail::tensor_core_select(params, &config)) return config;
#endif
#if defined(FLASHCHECK_HAS_SPLIT_TF32)
  if (detail::split_tf32_select(params, &config)) return config;
#endif
  detail::general_select(params, &config);
  return config;
}

}  // namespace flashcheck
