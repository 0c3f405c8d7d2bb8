// select_config(): asks the kernel families in order of preference (tensor core, split TF32, general)
// and returns the first that serves the params. Only families compiled into this build are asked
// (FLASHCHECK_HAS_* come from kernel/CMakeLists.txt); the general family serves every valid input.
#include "families.h"
#include "flashcheck/attention.h"
#include "common/host_device.h"

#include <algorithm>

namespace flashcheck {

KernelConfig select_config(const Params& params) {
  KernelConfig config;
  // The inference path (sequences, split-KV) runs in the general family, which implements it for every
  // dtype and head_dim; the tensor-core and split-TF32 families serve dense, unsplit problems.
  const bool inference_path = params.cu_seqlens_q != nullptr || params.cu_seqlens_k != nullptr ||
                              params.seqused_k != nullptr || params.page_table != nullptr || params.num_splits != 1;
  if (!inference_path) {
#if defined(FLASHCHECK_HAS_TENSOR_CORE)
    if (detail::tensor_core_select(params, &config)) return config;
#endif
#if defined(FLASHCHECK_HAS_SPLIT_TF32)
    if (detail::split_tf32_select(params, &config)) return config;
#endif
  }
  detail::general_select(params, &config);
  return config;
}

namespace detail {

int32_t pick_splits(const Params& params, int64_t sm_count) {
  if (params.num_splits != 0) return params.num_splits;
  const KernelConfig config = select_config(params);
  if (config.block_m < 1 || config.block_n < 1 || sm_count < 1) return 1;
  // Enough Q-tile work items fill the GPU unsplit. Otherwise split until about two blocks per SM run, each run
  // keeping at least two K/V tiles (fewer and the combine's traffic outweighs the parallelism).
  const int64_t items = ceil_div(params.seqlen_q, config.block_m) * params.heads_q * params.batch;
  const int64_t k_tiles = ceil_div(params.seqlen_k, config.block_n);
  if (items <= 0 || items >= sm_count) return 1;
  int64_t splits = ceil_div(2 * sm_count, items);
  splits = std::min<int64_t>({splits, k_tiles / 2, kMaxAutoSplits});
  return static_cast<int32_t>(std::max<int64_t>(splits, 1));
}

}  // namespace detail

}  // namespace flashcheck
