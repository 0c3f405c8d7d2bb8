// select_config(): asks the kernel families in order of preference (tensor core, split TF32, general)
// and returns the first that serves the params. Only families compiled into this build are asked
// (FLASHCHECK_HAS_* come from kernel/CMakeLists.txt); the general family serves every valid input.
#include "families.h"
#include "flashcheck/attention.h"
#include "common/host_device.h"

#include <algorithm>

#include "decode/tiles.h"

namespace flashcheck {

KernelConfig select_config(const Params& params) {
  KernelConfig config;
  // The inference path (sequences, split-KV) runs in the general family, which implements it for every
  // dtype and head_dim; the tensor-core and split-TF32 families serve dense, unsplit problems.
  // (num_splits = 0 leaves the choice to the families: the tensor-core and split-TF32 ones then run unsplit.)
  const bool inference_path = params.cu_seqlens_q != nullptr || params.cu_seqlens_k != nullptr ||
                              params.seqused_k != nullptr || params.page_table != nullptr || params.num_splits > 1;
#if defined(FLASHCHECK_HAS_DECODE)
  // Decoding shapes (every query row of a K/V head's query heads in one 16-row tile), dense or not.
  if (detail::decode_select(params, &config)) return config;
#endif
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
  if (config.path != ComputePath::kGeneralFp32 && !is_decode(config)) return 1;  // the families without split-KV
  // Enough work items fill the GPU unsplit. Otherwise split until about two blocks per SM run (the decode
  // family: kItemsPerSm warps), each run keeping at least two K/V tiles (fewer and the combine's traffic outweighs
  // the parallelism).
  const int64_t items =
      ceil_div(params.seqlen_q, config.block_m) * (params.heads_q / std::max(config.heads_per_tile, 1)) * params.batch;
  const int64_t target = sm_count * (is_decode(config) ? decode::kItemsPerSm : 2);
  const int64_t k_tiles = ceil_div(params.seqlen_k, config.block_n);
  if (items <= 0 || items >= target) return 1;
  int64_t splits = ceil_div(target, items);
  splits = std::min<int64_t>({splits, k_tiles / 2, kMaxAutoSplits});
  return static_cast<int32_t>(std::max<int64_t>(splits, 1));
}

}  // namespace detail

}  // namespace flashcheck
